"""ECN marking at a queue threshold, and the dequeue-time marking hook (TCD later)."""

from __future__ import annotations

from headers.inet import IPv4
from headers.tcd import Ecn, PortState, mark_ipv4_frame_inplace

from . import GBPS, class_tos, make_switch, traced, udp_frame


def ecn_of(frame: bytes) -> int:
    return frame[15] & 3


def test_ce_marked_above_threshold_with_valid_checksum():
    sw = make_switch(2, p1={"rate_bps": GBPS // 10, "ecn_threshold_bytes": 2500})
    tr = traced(sw)
    for _ in range(8):  # 1000 B each; the first starts at once, then the class queue grows
        sw.receive("p0", udp_frame(size=1000, tos=class_tos(2, Ecn.ECT_0)), 0)
    sw.transmit(10**9)
    marks = [ecn_of(d.frame) for d in tr.on("p1")]
    # queue before each arrival: -, 0, 1000, 2000, 3000 (> 2500: mark), 4000, ...
    assert marks == [Ecn.ECT_0] * 4 + [Ecn.CE] * 4
    for d in tr.on("p1"):
        ip = IPv4.from_bytes(d.frame, 14)
        assert ip.checksum_ok(d.frame, 14)
        assert ip.tos >> 2 == class_tos(2) >> 2  # DSCP untouched
    assert sw.counters()["p1"]["ecn_marked"] == 4


def test_not_ect_and_other_classes_are_not_marked():
    sw = make_switch(2, p1={"rate_bps": GBPS // 10, "ecn_threshold_bytes": 0})
    tr = traced(sw)
    for _ in range(3):
        sw.receive("p0", udp_frame(size=500, tos=class_tos(1, Ecn.NOT_ECT)), 0)
    sw.receive("p0", udp_frame(size=500, tos=class_tos(6, Ecn.ECT_1)), 0)  # its own class queue is empty
    sw.receive("p0", udp_frame(size=500, tos=class_tos(1, Ecn.ECT_1)), 0)
    sw.transmit(10**9)
    marks = sorted(ecn_of(d.frame) for d in tr.on("p1"))
    assert marks == [Ecn.NOT_ECT] * 3 + [Ecn.ECT_1, Ecn.CE]


def test_threshold_can_be_changed_at_run_time():
    sw = make_switch(2, p1={"rate_bps": GBPS // 10})
    for _ in range(4):
        sw.receive("p0", udp_frame(size=1000, tos=Ecn.ECT_0), 0)
    assert sw.counters()["p1"]["ecn_marked"] == 0
    sw.set_ecn_threshold("p1", 100)
    sw.receive("p0", udp_frame(size=1000, tos=Ecn.ECT_0), 1)
    assert sw.counters()["p1"]["ecn_marked"] == 1


def test_marking_policy_rewrites_at_dequeue():
    seen = []

    class UndeterminedMarker:
        """Stands in for the TCD detector: marks ECT(1) ("UE") on everything of class 3."""

        def on_dequeue(self, frame, cls, qlen_bytes, now_ns):
            seen.append((cls, qlen_bytes, now_ns))
            if cls != 3:
                return frame
            buf = bytearray(frame)
            mark_ipv4_frame_inplace(buf, 14, PortState.UNDETERMINED)
            return bytes(buf)

    sw = make_switch(2, p1={"rate_bps": GBPS})
    sw.set_marking_policy("p1", UndeterminedMarker())
    sw.receive("p0", udp_frame(size=1000, tos=class_tos(3, Ecn.ECT_0)), 0)
    sw.receive("p0", udp_frame(size=1000, tos=class_tos(3, Ecn.ECT_0)), 0)
    sw.receive("p0", udp_frame(size=1000, tos=class_tos(0, Ecn.ECT_0)), 0)
    out = [f for _, f in sw.transmit(10**9)]
    assert [ecn_of(f) for f in out] == [Ecn.ECT_1, Ecn.ECT_1, Ecn.ECT_0]
    assert all(IPv4.from_bytes(f, 14).checksum_ok(f, 14) for f in out)
    assert seen == [(3, 0, 0), (3, 0, 8192), (0, 0, 16384)]
    sw.set_marking_policy("p1", None)
    sw.receive("p0", udp_frame(size=1000, tos=class_tos(3, Ecn.ECT_0)), 10**9)
    assert ecn_of(sw.transmit(2 * 10**9)[0][1]) == Ecn.ECT_0
