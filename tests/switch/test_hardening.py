"""Forged and garbage frames against the switch itself (docs/security.md): MAC control is never
forwarded whatever a feature returns, edge ports drop what only switches send and a host's PFC
unless allowed, and the PFC watchdog frees a class its peer keeps paused."""

from __future__ import annotations

import struct

from headers.pfc import pause_frame
from netstack.switch.feature import FeatureBase

from . import GBPS, MS, class_tos, mac, make_switch, traced, udp_frame

PEER = mac(0x99)
US = 1_000


def tagged(fid: int, cls: int = 0, size: int = 1000) -> bytes:
    frame = bytearray(udp_frame(size=size, tos=class_tos(cls)))
    frame[42:46] = fid.to_bytes(4, "big")
    return bytes(frame)


class Unwrapper(FeatureBase):
    """A feature that strips an outer 4-byte header whose next EtherType it does not check: what
    LinkGuardian's sender did with a leading-ACK tag wrapped around a PFC frame."""

    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        if frame[12:14] == b"\xab\xcd":
            return frame[:12] + frame[17:]  # 5-byte tag: type, seq, next_type
        return frame


def wrapped_pfc(dst: bytes, src: bytes) -> bytes:
    """A PFC pause of every class (0x8808) hidden behind a LinkGuardian-like tag."""
    pfc = pause_frame(src, list(range(8)))
    return dst + src + b"\xab\xcd" + b"\x60\x00\x01" + b"\x88\x08" + pfc[14:]


def test_mac_control_a_feature_returns_is_consumed_never_forwarded():
    sw = make_switch(3, p2={"rate_bps": GBPS})
    sw.attach_feature("p0", Unwrapper())
    tr = traced(sw)
    sw.receive("p0", wrapped_pfc(b"\xff" * 6, mac(5)), 0)  # broadcast: would flood to p1 and p2
    sw.transmit(MS)
    assert [d for d in tr.departures if d.frame[12:14] == b"\x88\x08"] == []
    assert sw.counters()["p0"]["mac_control_dropped"] == 1


def test_mac_control_released_later_by_a_feature_is_dropped_too():
    sw = make_switch(2)
    tr = traced(sw)
    assert sw.forward("p0", pause_frame(mac(5), [0]), 0) is False
    sw.transmit(MS)
    assert tr.departures == [] and sw.counters()["p0"]["mac_control_dropped"] == 1


def test_an_edge_port_drops_what_only_switches_send_and_counts_it():
    sw = make_switch(2, p0={"role": "edge"}, p1={"role": "fabric"})
    sw2 = make_switch(2, name="s2", p0={"role": "edge"})
    for s in (sw, sw2):
        tr = traced(s)
        forged = mac(2) + mac(1) + b"\xab\xcd" + bytes(50)  # a host's LinkGuardian-tagged frame
        s.receive("p0", forged, 0)
        s.transmit(MS)
        got = [d for d in tr.departures if d.frame[12:14] == b"\xab\xcd"]
        if s is sw:  # no EtherType is switch-only unless the configuration says so
            assert len(got) == 1
    only = make_switch(2, p0={"role": "edge"}, switch_only_ethertypes=(0xABCD,))
    tr = traced(only)
    only.receive("p0", mac(2) + mac(1) + b"\xab\xcd" + bytes(50), 0)
    only.receive("p0", tagged(1), 0)  # ordinary traffic passes
    only.transmit(MS)
    assert [d.frame[12:14] for d in tr.departures] == [b"\x08\x00"]
    assert only.counters()["p0"]["edge_drops_switch_only"] == 1
    # a fabric port carries them: the peer switch's features do
    fab = make_switch(2, p0={"role": "fabric"}, switch_only_ethertypes=(0xABCD,))
    tr = traced(fab)
    fab.receive("p0", mac(2) + mac(1) + b"\xab\xcd" + bytes(50), 0)
    fab.transmit(MS)
    assert len(tr.departures) == 1 and fab.counters()["p0"]["edge_drops_switch_only"] == 0


def test_a_vlan_tag_smuggles_nothing_past_the_edge():
    """Found by netstack fuzz once the daemons saw VLAN tags (docs/faults.md): behind one or two
    tags, a switch-only EtherType or PFC is refused at the edge as it is untagged; other tagged
    traffic is forwarded with its tags, and a fabric port carries anything."""
    only = make_switch(2, p0={"role": "edge"}, switch_only_ethertypes=(0xABCD,))
    tr = traced(only)
    q = b"\x81\x00\x00\x05"
    qinq = b"\x88\xa8\x00\x01" + q
    only.receive("p0", mac(2) + mac(1) + q + b"\xab\xcd" + bytes(50), 0)
    only.receive("p0", mac(2) + mac(1) + qinq + b"\xab\xcd" + bytes(50), 0)
    only.receive("p0", mac(2) + mac(1) + q + b"\x88\x08\x01\x01" + bytes(50), 0)
    ordinary = mac(2) + mac(1) + q + b"\x08\x00" + bytes(50)
    only.receive("p0", ordinary, 0)
    only.transmit(MS)
    assert [d.frame for d in tr.departures] == [ordinary]
    c = only.counters()["p0"]
    assert c["edge_drops_switch_only"] == 2 and c["edge_drops_pfc"] == 1
    fab = make_switch(2, p0={"role": "fabric"}, switch_only_ethertypes=(0xABCD,))
    tr = traced(fab)
    fab.receive("p0", mac(2) + mac(1) + q + b"\xab\xcd" + bytes(50), 0)
    fab.transmit(MS)
    assert len(tr.departures) == 1


def test_a_host_may_not_pause_an_edge_port_unless_it_takes_part_in_a_lossless_class():
    sw = make_switch(2, p0={"role": "edge", "rate_bps": GBPS})
    tr = traced(sw)
    sw.receive("p0", pause_frame(PEER, [0]), 0)
    sw.receive("p1", tagged(1), 10)  # toward the host on p0
    sw.transmit(MS)
    c = sw.counters()["p0"]
    assert c["edge_drops_pfc"] == 1 and c["pauses_rx"] == 0 and not c["paused"][0]
    assert len(tr.on("p0")) == 1
    # allowed explicitly, or implicitly on a lossless edge port: honoured as before
    ok = make_switch(2, p0={"role": "edge", "rate_bps": GBPS, "pfc_from_host": True})
    ok.receive("p0", pause_frame(PEER, [0]), 0)
    assert ok.counters()["p0"]["paused"][0] and ok.counters()["p0"]["edge_drops_pfc"] == 0
    lossless = make_switch(2, p0={"role": "edge", "rate_bps": GBPS, "lossless": True, "xoff_bytes": 20_000,
                                  "xon_bytes": 10_000})
    lossless.receive("p0", pause_frame(PEER, [0]), 0)
    assert lossless.counters()["p0"]["paused"][0]


def _storm(sw, start: int, until: int, every: int = 100 * US) -> None:
    """The peer on p1 refreshes a pause of class 0 every ``every`` ns (a pause storm)."""
    t = start
    while t < until:
        sw.receive("p1", pause_frame(PEER, [0]), t)
        sw.transmit(t)
        t += every


def test_the_pfc_watchdog_frees_a_class_a_storm_keeps_paused():
    sw = make_switch(2, p1={"rate_bps": GBPS, "pfc_watchdog_ns": 2 * MS})
    tr = traced(sw)
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    for i in range(20):
        sw.receive("p0", tagged(i), 10)
    _storm(sw, 100 * US, 10 * MS)
    sw.transmit(10 * MS)
    c = sw.counters()["p1"]
    sent = [d for d in tr.on("p1") if d.cls >= 0]
    assert len(sent) == 20  # the queue drained after the watchdog fired
    assert min(d.start for d in sent) >= 2 * MS  # ... and not before
    assert c["pfc_watchdog_events"] == 1 and c["pfc_watchdog_ignored"] > 50
    assert not c["paused"][0]


def test_without_the_watchdog_a_storm_holds_the_class_for_ever():
    """(What the probe saw: garbage PFC kept ports paused; the watchdog is off on fabric ports by
    default, because LinkGuardian's backpressure and a lossless fabric pause for as long as they need.)"""
    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    sw.receive("p0", tagged(1), 10)
    _storm(sw, 100 * US, 10 * MS)
    assert [d for d in tr.on("p1") if d.cls >= 0] == []
    assert sw.counters()["p1"]["pfc_watchdog_events"] == 0


def test_the_watchdog_leaves_ordinary_pauses_alone_and_recovers_after_the_storm():
    sw = make_switch(2, p1={"rate_bps": GBPS, "pfc_watchdog_ns": 2 * MS})
    # pauses of 1 ms with gaps: never 2 ms without a break
    t = 0
    for _ in range(5):
        sw.receive("p1", pause_frame(PEER, [0], quanta=1953), t)  # ~1 ms at 1 Gbit/s
        t += 3 * MS
        sw.transmit(t)
    assert sw.counters()["p1"]["pfc_watchdog_events"] == 0
    _storm(sw, sw.now, sw.now + 5 * MS)
    storm_end = sw.now
    sw.transmit(storm_end + 10 * MS)
    assert sw.counters()["p1"]["pfc_watchdog_events"] == 1
    # quiet for longer than the watchdog: pauses are honoured again
    later = storm_end + 20 * MS
    sw.receive("p1", pause_frame(PEER, [0]), later)
    assert sw.counters()["p1"]["paused"][0]


def test_pause_frame_helper_quanta_is_what_the_tests_assume():
    frame = pause_frame(PEER, [0], quanta=1953)
    assert struct.unpack_from("!H", frame, 18)[0] == 1953
