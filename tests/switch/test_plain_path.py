"""The plain-port fast path of ingress (``Switch._receive_plain``, ``Switch._enqueue_run``) and of
egress (``Port._drain_run``) forwards exactly what the general path forwards.

The same random workload — batches made of runs of identical headers (as a flow's frames come
off a ring), to known, learned, unknown and broadcast destinations, on plain ports, a lossless
one, an FCS one, an ECN one and an unpaced one, with a small buffer that tail-drops, MAC control
and VLAN-tagged frames in between — is run through a switch with the fast path and through one
with ``plain_path`` off and a departure hook installed (every frame through ``_receive``,
``_enqueue``, ``_dequeue`` and ``_wire``); every released frame, its order, the time it came out,
every counter and the forwarding table must agree.
"""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.fcs import append_fcs
from headers.pfc import build_pfc_frame
from netstack.switch import Switch
from netstack.switch.port import Port

from . import GBPS, class_tos, mac, make_switch, raw_frame, udp_frame

#: (stations: 2/3 are static behind p2/p3, 4/5 learned as they send on p1/p4, 9 unknown, 0xFF broadcast)
DESTS = [2, 3, 4, 5, 9, 0xFF, 2, 3]
run = st.tuples(st.integers(0, 7), st.sampled_from(range(len(DESTS))), st.integers(60, 1514), st.integers(1, 40),
                st.sampled_from(["udp", "udp", "udp", "vlan", "pfc", "short", "switch-only"]))
arrival = st.tuples(st.just("a"), st.integers(0, 40_000), st.sampled_from(["p0", "p1", "p3", "p4", "p5"]),
                    st.lists(run, min_size=1, max_size=5))
tick = st.tuples(st.just("t"), st.integers(0, 40_000), st.just(""), st.just([]))
scenarios = st.lists(st.one_of(arrival, arrival, tick), min_size=1, max_size=25)


def build(fast: bool) -> Switch:
    sw = make_switch(
        6,
        static_fdb={mac(2).hex(":"): "p2", mac(3).hex(":"): "p3"},
        switch_only_ethertypes=(0x88B5,),
        rate_bps=GBPS,
        p0={"lossless": True, "xoff_bytes": 20_000, "xon_bytes": 8_000},
        p1={"role": "edge"},
        p2={"delay_ns": 3_000, "buffer_bytes": 30_000},
        p3={"fcs": True, "rate_bps": 2 * GBPS},
        p4={"ecn_threshold_bytes": 5_000},
        p5={"rate_bps": None},
    )
    if not fast:
        sw.plain_path = False
        sw.departure_hook = lambda *args: None
    return sw


def _frames(port: str, spec: list[tuple[int, int, int, int, str]], fid: int) -> tuple[list[bytes], int]:
    src = {"p0": 10, "p1": 4, "p3": 11, "p4": 5, "p5": 12}[port]
    frames = []
    for cls, d, size, count, kind in spec:
        dst = DESTS[d]
        for _ in range(count):
            fid += 1
            if kind == "pfc":
                quanta = [0] * 8
                quanta[cls] = 40 * (fid % 3)
                frame = build_pfc_frame(mac(src), 1 << cls, quanta)
            elif kind == "short":
                frame = mac(dst)[:5]
            elif kind == "switch-only":
                frame = raw_frame(mac(dst), mac(src), 0x88B5, size)
            else:
                dst_mac = b"\xff" * 6 if dst == 0xFF else mac(dst)
                body = bytearray(udp_frame(src=src, dst=dst, size=size, tos=class_tos(cls), dst_mac=dst_mac))
                body[42:46] = fid.to_bytes(4, "big")
                if kind == "vlan":
                    body[12:12] = struct.pack("!HH", 0x8100, cls << 13 | 7)
                frame = bytes(body)
            frames.append(append_fcs(frame) if port == "p3" else frame)
    return frames, fid


def play(events: list[tuple[str, int, str, list]], fast: bool) -> tuple[list, dict, list, dict]:
    sw = build(fast)
    out = []
    t = fid = 0
    for kind, gap, port, spec in events:
        t += gap
        if kind == "a":
            frames, fid = _frames(port, spec, fid)
            sw.receive_batch(port, frames, t)
        else:
            deadline = sw.next_deadline()
            if deadline is not None:
                t = max(t, deadline)
        out += [(t, p, frames) for p, frames in sw.transmit_by_port(t)]
    t += 10**9
    out += [(t, p, frames) for p, frames in sw.transmit_by_port(t)]
    return out, sw.counters(), sorted(sw.fdb_entries(), key=str), sw.switch_counters()


@settings(max_examples=200, deadline=None)
@given(scenarios)
def test_plain_path_matches_the_general_path(events):
    assert play(events, fast=True) == play(events, fast=False)


def test_a_run_of_one_flow_is_queued_at_once_and_drained_at_once(monkeypatch):
    """A ring's batch of one flow between plain ports takes the fast path on both sides."""
    calls: list[str] = []
    real_run, real_drain = Switch._enqueue_run, Port._drain_run

    def spy_run(self, *args):
        calls.append("enqueue_run")
        return real_run(self, *args)

    def spy_drain(self, *args):
        calls.append("drain_run")
        return real_drain(self, *args)

    monkeypatch.setattr(Switch, "_enqueue_run", spy_run)
    monkeypatch.setattr(Port, "_drain_run", spy_drain)
    sw = make_switch(2, static_fdb={mac(2).hex(":"): "p1"}, rate_bps=100 * GBPS)
    frames = [udp_frame(src=1, dst=2, size=64) for _ in range(256)]
    sw.receive_batch("p0", frames, 1_000)
    sw.receive_batch("p0", frames, 2_000_000)
    out = dict(sw.transmit_by_port(3_000_000))
    assert out["p1"] == frames * 2
    assert "enqueue_run" in calls and "drain_run" in calls
