"""Honouring received 802.1Qbb PFC: pause stops a class, resume or quanta expiry restarts it."""

from __future__ import annotations

import struct

from headers.pfc import build_pfc_frame, pause_frame, resume_frame
from headers.registry import PFC_DST_MAC

from . import GBPS, class_tos, mac, make_switch, traced, udp_frame

PEER = mac(0x99)


def tagged(fid: int, cls: int, size: int = 1000) -> bytes:
    frame = bytearray(udp_frame(size=size, tos=class_tos(cls)))
    frame[42:46] = fid.to_bytes(4, "big")
    return bytes(frame)


def ids(trace, port="p1"):
    return [int.from_bytes(d.frame[42:46], "big") for d in trace.on(port) if d.cls >= 0]


def test_pause_holds_one_class_and_resume_restarts_it():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    sw.receive("p1", pause_frame(PEER, [3]), 0)
    sw.receive("p0", tagged(1, 3), 10)
    sw.receive("p0", tagged(2, 5), 20)
    sw.receive("p0", tagged(3, 3), 30)
    sw.transmit(1_000_000)
    assert ids(tr) == [2]  # class 5 flows, class 3 is held
    state = sw.counters()["p1"]
    assert state["paused"][3] and not state["paused"][5]
    assert state["queue_frames"][3] == 2 and state["pauses_rx"] == 1 and state["pauses_rx_class"][3] == 1
    sw.receive("p1", resume_frame(PEER, [3]), 2_000_000)
    sw.transmit(3_000_000)
    assert ids(tr) == [2, 1, 3]
    assert [d.start for d in tr.on("p1")][1] == 2_000_000
    state = sw.counters()["p1"]
    assert state["resumes_rx"] == 1 and state["pfc_rx"] == 2
    assert state["paused_ns"][3] == 2_000_000 and state["paused_ns"][5] == 0


def test_frame_already_on_the_wire_finishes():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    sw.receive("p0", tagged(1, 3), 0)  # 1024 B of line time: on the wire 0..8192 ns
    sw.receive("p0", tagged(2, 3), 0)
    sw.receive("p1", pause_frame(PEER, [3]), 100)
    sw.transmit(1_000_000)
    assert ids(tr) == [1]
    assert tr.on("p1")[0].end == 8192


def test_pause_expires_after_quanta_at_the_port_rate():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    sw.receive("p1", pause_frame(PEER, [2], quanta=100), 1000)  # 100 x 512 bit times = 51.2 us at 1 Gb/s
    sw.receive("p0", tagged(1, 2), 2000)
    assert sw.next_deadline() == 1000 + 51_200
    sw.transmit(10**7)
    assert tr.on("p1")[0].start == 1000 + 51_200
    # a refreshed pause replaces the old one (it does not add up)
    sw.receive("p1", pause_frame(PEER, [2], quanta=100), 20_000_000)
    sw.receive("p1", pause_frame(PEER, [2], quanta=10), 20_001_000)
    sw.receive("p0", tagged(2, 2), 20_002_000)
    sw.transmit(10**8)
    assert tr.on("p1")[1].start == 20_001_000 + 5120
    assert sw.counters()["p1"]["paused_ns"][2] == 51_200 + 1000 + 5120


def test_unpaced_port_times_quanta_at_1_gbps():
    sw = make_switch(2)
    tr = traced(sw)
    sw.receive("p1", pause_frame(PEER, [0], quanta=1), 0)
    sw.receive("p0", tagged(1, 0), 1)
    sw.transmit(511)
    assert tr.departures == []
    sw.transmit(512)
    assert tr.on("p1")[0].start == 512


def test_8023x_pause_stops_every_class_and_unicast_pfc_is_honoured():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    pause = PFC_DST_MAC[:5] + b"\x01" + PEER + b"\x88\x08" + struct.pack("!HH", 0x0001, 0xFFFF) + bytes(42)
    sw.receive("p1", pause, 0)
    for cls in range(8):
        sw.receive("p0", tagged(cls, cls), 10)
    sw.transmit(10**6)
    assert tr.departures == []
    # a PFC resume sent to this port's *unicast* MAC (the bridge-safe form, docs/architecture.md "The live runtime")
    sw.receive("p1", build_pfc_frame(PEER, 0b1000_0001, [0] * 8, dst_mac=sw.ports[1].mac), 2 * 10**6)
    sw.transmit(3 * 10**6)
    assert ids(tr) == [7, 0]


def test_malformed_pfc_is_counted_and_link_unaffected():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    sw.receive("p1", pause_frame(PEER, [1])[:20], 0)  # truncated MAC control frame
    sw.receive("p1", PFC_DST_MAC + PEER + b"\x88\x08\x01", 0)
    sw.receive("p0", tagged(1, 1), 10)
    assert len(sw.transmit(10**6)) == 1
    state = sw.counters()["p1"]
    # the truncated PFC frame is malformed (counted once: the port's counters add up to rx_frames);
    # the 15-byte one is too short to have an opcode: MAC control, consumed
    assert state["malformed"] == 1 and state["mac_control_rx"] == 1 and state["pauses_rx"] == 0


def test_marking_policy_is_told_of_pauses():
    events = []

    class Policy:
        def on_dequeue(self, frame, cls, qlen_bytes, now_ns):
            events.append(("deq", cls, qlen_bytes, now_ns))
            return frame

        def on_pause(self, cls, paused, now_ns, pause_ns=None):
            events.append(("pause", cls, paused, now_ns))

    sw = make_switch(2, p1={"rate_bps": GBPS})
    sw.set_marking_policy("p1", Policy())
    sw.receive("p1", pause_frame(PEER, [4]), 5)
    sw.receive("p0", tagged(1, 4), 6)
    sw.receive("p0", tagged(2, 4), 7)
    sw.receive("p1", resume_frame(PEER, [4]), 100)
    sw.transmit(10**6)
    assert events == [("pause", 4, True, 5), ("pause", 4, False, 100), ("deq", 4, 1000, 100), ("deq", 4, 0, 8292)]


def test_pfc_enable_honours_only_the_enabled_classes_and_counts_the_rest():
    # 802.1Qbb per-priority enable: class 3 honoured, class 5 and a global PAUSE refused
    sw = make_switch(2, p1={"rate_bps": GBPS, "pfc_enable": [3]})
    tr = traced(sw)
    sw.receive("p1", pause_frame(PEER, [3, 5]), 0)
    sw.receive("p0", tagged(1, 3), 10)
    sw.receive("p0", tagged(2, 5), 20)
    sw.transmit(1_000_000)
    state = sw.counters()["p1"]
    assert ids(tr) == [2] and state["paused"][3] and not state["paused"][5]
    assert state["pauses_rx"] == 1 and state["pauses_refused"] == 1 and state["pfc_rx"] == 1


def test_pfc_enabled_on_no_class_makes_forged_pauses_harmless():
    sw = make_switch(2, p1={"rate_bps": GBPS, "pfc_enable": []})
    tr = traced(sw)
    for i, cls in enumerate(range(8)):
        sw.receive("p1", pause_frame(PEER, [cls]), i)
    pause_8023x = PFC_DST_MAC + PEER + struct.pack("!HHH", 0x8808, 0x0001, 0xFFFF) + bytes(42)
    sw.receive("p1", pause_8023x, 10)
    sw.receive("p0", tagged(1, 0), 20)
    sw.transmit(1_000_000)
    state = sw.counters()["p1"]
    assert ids(tr) == [1] and not any(state["paused"])
    assert state["pauses_refused"] == 16 and state["pauses_rx"] == 0 and state["pfc_rx"] == 9
