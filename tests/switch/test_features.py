"""The per-port feature attachment point (what LinkGuardian, DTA, 1Pipe and TCD plug into)."""

from __future__ import annotations

from itertools import pairwise

from headers.errors import HeaderError
from headers.pfc import MAX_QUANTA, parse_pfc_frame, pause_frame
from netstack.switch import CONTROL_CLASS, IDLE_CLASS
from netstack.switch.port import UNPACED_IDLE_BURST

from . import GBPS, MS, class_tos, mac, make_switch, raw_frame, traced, udp_frame

IDLE = raw_frame(mac(0x77), mac(0x66), 0xABCD)


class AlwaysIdle:
    """A self-replenishing source that always has a frame (an ACK courier with news)."""

    def __init__(self):
        self.polls = []

    def idle_frame(self, now_ns):
        self.polls.append(now_ns)
        return IDLE


class Dummies:
    """LinkGuardian-style dummies (LinkGuardian §3.2): up to 3 after each burst of data."""

    def __init__(self):
        self.budget = 0

    def on_egress(self, frame, cls, now_ns):
        self.budget = 3
        return frame

    def idle_frame(self, now_ns):
        if self.budget:
            self.budget -= 1
            return IDLE
        return None


def test_idle_frames_only_when_every_class_is_empty():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    sw.attach_feature("p1", AlwaysIdle())  # at t = 0 the port is idle: the source fills the link
    for i in range(5):
        sw.receive("p0", udp_frame(size=1000, tos=class_tos(i)), 1000)
    sw.transmit(100_000)
    deps = tr.on("p1")
    data = [d for d in deps if d.cls >= 0]
    idle = [d for d in deps if d.cls == IDLE_CLASS]
    # 84 B idle frames take 672 ns: the one on the wire at t = 1000 finishes, then all data
    assert [d.start for d in idle[:2]] == [0, 672]
    assert data[0].start == 1344 and all(a.end == b.start for a, b in pairwise(data))
    assert not [d for d in idle if 1000 <= d.start < data[-1].end]
    # after the data the idle source fills the link back to back until now (self-replenishing)
    after = [d for d in idle if d.start >= data[-1].end]
    assert after[0].start == data[-1].end
    assert all(a.end == b.start for a, b in pairwise(after))
    assert after[-1].end > 100_000 - 672
    assert sw.counters()["p1"]["idle_tx"] == len(idle)


def test_dummies_trail_each_burst():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    sw.attach_feature("p1", Dummies())
    for burst in range(3):
        for _ in range(4):
            sw.receive("p0", udp_frame(size=500), burst * MS)
        sw.transmit(burst * MS + MS // 2)
    kinds = ["I" if d.cls == IDLE_CLASS else "D" for d in tr.on("p1")]
    assert "".join(kinds) == "DDDDIII" * 3


def test_idle_source_used_while_all_queues_are_paused():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    sw.attach_feature("p1", Dummies())
    sw.receive("p0", udp_frame(size=500), 0)
    sw.transmit(MS)
    sw.receive("p1", pause_frame(mac(9), [0]), 2 * MS)  # the normal class is paused...
    sw.receive("p0", udp_frame(size=500), 2 * MS + 1)
    sw.transmit(3 * MS)
    kinds = ["I" if d.cls == IDLE_CLASS else "D" for d in tr.on("p1")]
    assert kinds == ["D", "I", "I", "I"]  # ...and only 3 dummies (the budget) came out; no data
    assert sw.counters()["p1"]["queue_frames"][0] == 1


def test_idle_poll_happens_after_the_event_that_fed_it():
    class Courier:
        def __init__(self):
            self.pending = False

        def on_ingress(self, frame, now_ns):
            self.pending = True
            return frame

        def idle_frame(self, now_ns):
            if self.pending:
                self.pending = False
                return IDLE
            return None

    sw = make_switch(2, p0={"rate_bps": GBPS})
    tr = traced(sw)
    sw.attach_feature("p0", Courier())
    sw.transmit(0)
    sw.receive("p0", raw_frame(mac(2), mac(1)), 5000)  # feeds the courier at t = 5000
    assert sw.next_deadline() == 5000
    sw.transmit(10_000)
    (d,) = tr.on("p0", IDLE_CLASS)
    assert d.start == 5000  # not at 0, when p0 went idle: causality


def test_unpaced_idle_source_is_bounded_per_event():
    sw = make_switch(2)
    src = AlwaysIdle()
    sw.attach_feature("p1", src)
    assert len(sw.transmit(0)) == UNPACED_IDLE_BURST
    assert sw.transmit(1) == []
    sw.receive("p0", udp_frame(), 2)
    assert len(sw.transmit(2)) == 1 + UNPACED_IDLE_BURST


def test_feature_enqueue_on_class_7_jumps_the_queue():
    class Retransmitter:
        def __init__(self, sw):
            self.sw = sw

        def on_ingress(self, frame, now_ns):
            if frame[12:14] == b"\xab\xcd":  # a "loss notification": retransmit at top priority
                self.sw.enqueue("p1", raw_frame(mac(2), mac(1), 0x0800, 1000), 7, now_ns)
                return None
            return frame

    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    sw.attach_feature("p1", Retransmitter(sw))
    for i in range(5):
        frame = bytearray(udp_frame(size=1000))
        frame[42] = i
        sw.receive("p0", bytes(frame), 0)
    sw.receive("p1", raw_frame(mac(1), mac(2), 0xABCD), 10_000)  # while frame 1 is on the wire
    sw.transmit(MS)
    order = [d.cls for d in tr.on("p1")]
    assert order == [0, 0, 7, 0, 0, 0]
    assert tr.on("p1")[2].start == 2 * 8192
    state = sw.counters()
    assert state["p1"]["feature_consumed"] == 1 and state["p1"]["tx_frames_class"][7] == 1


def test_ingress_rewrite_consume_and_malformed():
    class Stripper:
        def on_ingress(self, frame, now_ns):
            if frame[12:14] == b"\xab\xcd":
                if len(frame) < 19:
                    raise HeaderError("LinkGuardian", "truncated tag")
                return frame[:12] + frame[17:19] + frame[19:]  # drop a 5-byte tag, keep next EtherType
            if frame[12:14] == b"\x88\xb6":
                return None
            return frame

    sw = make_switch(2)
    sw.attach_feature("p0", Stripper())
    inner = udp_frame(size=100)
    tagged = inner[:12] + b"\xab\xcd" + b"\x00\x00\x01" + inner[12:]
    sw.receive("p0", tagged, 0)
    sw.receive("p0", raw_frame(mac(2), mac(1), 0x88B6), 1)
    sw.receive("p0", raw_frame(mac(2), mac(1), 0xABCD, 16), 2)
    assert [f for _, f in sw.transmit(10)] == [inner]
    state = sw.counters()["p0"]
    assert state["feature_consumed"] == 1 and state["malformed"] == 1


def test_egress_rewrite_sees_class_and_dequeue_time():
    calls = []

    class Tagger:
        def on_egress(self, frame, cls, now_ns):
            calls.append((cls, now_ns))
            return frame[:12] + b"\xab\xcd\x00\x00\x07" + frame[12:]

    sw = make_switch(2, p1={"rate_bps": GBPS})
    sw.attach_feature("p1", Tagger())
    sw.receive("p0", udp_frame(size=1000, tos=class_tos(2)), 0)
    sw.receive("p0", udp_frame(size=1000, tos=class_tos(2)), 0)
    out = [f for _, f in sw.transmit(MS)]
    assert all(f[12:17] == b"\xab\xcd\x00\x00\x07" for f in out)
    assert calls == [(2, 0), (2, (1005 + 24) * 8)]  # the tag lengthens the frame on the wire
    sw.detach_feature("p1", sw.ports[1].features[0])
    sw.receive("p0", udp_frame(size=1000), 2 * MS)
    assert sw.transmit(3 * MS)[0][1][12:14] == b"\x08\x00"


def test_timers_fire_from_transmit_and_feature_can_pause_the_peer():
    class Backpressure:
        """LinkGuardian Algorithm 2 in miniature: pause the sender's class 1 on a timer."""

        def __init__(self, sw):
            self.sw = sw
            self.deadline = 2 * MS
            self.fired = []

        def next_deadline(self):
            return self.deadline

        def on_timer(self, now_ns):
            self.fired.append(now_ns)
            self.sw.pause_class("p0", 1, self.deadline == 2 * MS, now_ns)
            self.deadline = 4 * MS if self.deadline == 2 * MS else None

    sw = make_switch(2, p0={"peer_mac": "02:00:00:00:00:aa"})
    tr = traced(sw)
    bp = Backpressure(sw)
    sw.attach_feature("p0", bp)
    assert sw.next_deadline() == 2 * MS
    assert sw.transmit(MS) == []
    out = sw.transmit(2 * MS + 5)
    assert bp.fired == [2 * MS + 5]
    (port, frame), = out
    pfc = parse_pfc_frame(frame)
    assert port == "p0" and frame[:6] == bytes.fromhex("0200000000aa")
    assert pfc.class_enable == 0b10 and pfc.quanta[1] == MAX_QUANTA
    assert tr.on("p0", CONTROL_CLASS)[0].start == 2 * MS + 5
    out = sw.transmit(4 * MS)
    assert parse_pfc_frame(out[0][1]).quanta[1] == 0
    assert sw.next_deadline() is None


def test_an_object_without_any_hook_is_refused_not_silently_ignored():
    """Hooks are found on the feature's class (FeatureBase's no-ops do not count), so an object
    whose "hooks" are instance attributes, or a bare FeatureBase, would do nothing: refused."""
    import types

    import pytest

    from netstack.errors import ConfigError
    from netstack.switch.feature import FeatureBase

    sw = make_switch()
    port = sw.ports[0].name
    for useless in (FeatureBase(), types.SimpleNamespace(on_ingress=lambda frame, now: frame)):
        with pytest.raises(ConfigError, match="implements no hook"):
            sw.attach_feature(port, useless)
    assert sw.ports[0].features == []

    class Tap(FeatureBase):
        def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
            return frame

    tap = Tap()
    sw.attach_feature(port, tap)
    assert sw.ports[0].features == [tap] and len(sw.ports[0].ingress_hooks) == 1
    assert sw.ports[0].egress_hooks == [] and sw.ports[0].idle_hooks == []
