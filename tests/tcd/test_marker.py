"""TCD and ECN markers on a real sans-IO switch: UE while PFC makes a port ON-OFF, CE on a
continuously-ON port whose standing queue rises (an overloaded port), none on a long queue that
drains (TCD §3.2.1: congestion is "queue buildup not caused by OFF"; a backlog a PFC loop holds or
drains is not an overloaded port), the max-severity rule, checksums; the ECN baseline (threshold
and seeded RED); and no frame content ever makes a marker raise."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers.inet import IPv4
from headers.pfc import pause_frame, resume_frame
from headers.tcd import Ecn, PortState
from netstack.tcd.marker import EcnMarker, TcdMarker, marker_from_options
from netstack.tcd.params import EcnParams, TcdParamError, TcdParams
from tests.switch import GBPS, class_tos, mac, make_switch, traced, udp_frame

PEER = mac(0x99)
FRAME_NS = 8192  # a 1000-byte frame (1024 B of line time) at 1 Gbit/s


def ecn_of(frame: bytes) -> int:
    return frame[15] & 3


def sent(tr, port: str = "p1") -> list[bytes]:
    return [d.frame for d in tr.on(port) if d.cls >= 0]


def feed(sw, n: int, ecn: int = Ecn.ECT_0, cls: int = 0, t: int = 0, size: int = 1000) -> None:
    for _ in range(n):
        sw.receive("p0", udp_frame(size=size, tos=class_tos(cls, ecn)), t)


def assert_checksums(frames: list[bytes], cls: int = 0) -> None:
    for f in frames:
        assert IPv4.from_bytes(f, 14).checksum_ok(f, 14)
        # the incremental update equals a full recomputation: the frame built with that TOS
        assert f == udp_frame(size=len(f), tos=class_tos(cls, ecn_of(f)))


def test_paused_then_resumed_port_marks_ue_for_t_on_max():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = TcdMarker(TcdParams(50_000, 100_000, 50_000))
    sw.set_marking_policy("p1", m)
    tr = traced(sw)
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    assert m.state(0) is PortState.UNDETERMINED  # at once
    feed(sw, 10, t=1_000)
    sw.receive("p1", resume_frame(PEER, [0]), 100_000)
    sw.transmit(10**9)
    # dequeues at 100000 + i*8192: undetermined while i*8192 <= 50000 (i <= 6), then a short queue
    assert [ecn_of(f) for f in sent(tr)] == [Ecn.ECT_1] * 7 + [Ecn.ECT_0] * 3
    assert_checksums(sent(tr))
    c = m.c.classes[0]
    assert (c.seen_undet, c.seen_noncon, c.marked_ue, c.marked_ce) == (7, 3, 7, 0)
    assert m.detectors[0].t_resume == 100_000


def test_overloaded_port_marks_ce_once_its_standing_queue_rises():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = TcdMarker(TcdParams(50_000, 2_500, 20_000), classes=(0,))
    sw.set_marking_policy("p1", m)
    tr = traced(sw)
    for i in range(12):  # two frames per frame time: twice the line rate, for 12 frame times
        feed(sw, 2, t=i * FRAME_NS)
        sw.transmit(i * FRAME_NS)
    sw.transmit(10**9)
    # queue after each dequeue (every FRAME_NS): 0, 0, 1000, ..., 11000, then down to 0. The
    # windows (W = 20000) close at 0 (minimum 0, the empty start), 24576 (minimum 0) and 49152
    # (minimum 2000: rising): CE from there, over two windows after the queue started to grow,
    # although it passed K = 2500 at 32768; CE until the queue is back at K or below
    assert [ecn_of(f) for f in sent(tr)] == [Ecn.ECT_0] * 6 + [Ecn.CE] * 15 + [Ecn.ECT_0] * 3
    assert_checksums(sent(tr))
    c = m.c.classes[0]
    assert (c.marked_ce, c.seen_cong, c.ecn_would_mark) == (15, 15, 17)
    assert m.detectors[0].c.transitions == 2


def test_never_paused_port_draining_a_burst_marks_nothing():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = TcdMarker(TcdParams(50_000, 2_500, 50_000), classes=(0,))
    sw.set_marking_policy("p1", m)
    tr = traced(sw)
    feed(sw, 8)
    sw.transmit(10**9)
    # queue after each dequeue: 0 (the first left at once), 6000, 5000, ..., 0; K = 2500. Long,
    # but it only drains: the ECN threshold would mark 4, TCD none
    assert [ecn_of(f) for f in sent(tr)] == [Ecn.ECT_0] * 8
    c = m.c.classes[0]
    assert (c.marked_ce, c.seen_cong, c.seen_noncon, c.ecn_would_mark) == (0, 0, 8, 4)
    assert m.detectors[0].c.transitions == 0


def test_backlog_left_by_a_pause_drains_as_ue_then_unmarked_never_ce():
    """The victim of TCD's single-congestion-point scenario: a backlog above K built while paused
    is undetermined for T_on^max after the resume, then non-congestion while it drains."""
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = TcdMarker(TcdParams(50_000, 2_500, 50_000))
    sw.set_marking_policy("p1", m)
    tr = traced(sw)
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    feed(sw, 20, t=1_000)
    sw.receive("p1", resume_frame(PEER, [0]), 100_000)
    sw.transmit(10**9)
    # dequeues at 100000 + i*8192 leave 19000 - 1000*i: undetermined for i <= 6, then long
    # (12000 down to 3000) but draining, then short
    assert [ecn_of(f) for f in sent(tr)] == [Ecn.ECT_1] * 7 + [Ecn.ECT_0] * 13
    assert_checksums(sent(tr))
    c = m.c.classes[0]
    assert (c.seen_undet, c.seen_noncon, c.seen_cong, c.marked_ue, c.marked_ce) == (7, 13, 0, 7, 0)
    assert c.ecn_would_mark == 17  # what a threshold at K would have marked CE
    assert m.detectors[0].q_dec and not m.detectors[0].q_inc


def test_marks_are_never_lowered_and_not_ect_is_untouched():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = TcdMarker(TcdParams(10**9, 100_000, 10**9))
    sw.set_marking_policy("p1", m)
    tr = traced(sw)
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    for ecn in (Ecn.CE, Ecn.NOT_ECT, Ecn.ECT_1, Ecn.ECT_0):
        feed(sw, 1, ecn=ecn, t=10)
    sw.receive("p1", resume_frame(PEER, [0]), 1_000)
    sw.transmit(10**9)
    assert [ecn_of(f) for f in sent(tr)] == [Ecn.CE, Ecn.NOT_ECT, Ecn.ECT_1, Ecn.ECT_1]
    c = m.c.classes[0]
    assert (c.marked_ue, c.not_ect, c.seen_undet) == (1, 1, 4)
    assert_checksums(sent(tr))


def test_unmonitored_classes_and_non_ip_pass_untouched():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = TcdMarker(TcdParams(1, 1, 1), classes=(3,))
    sw.set_marking_policy("p1", m)
    tr = traced(sw)
    feed(sw, 4, cls=0)
    sw.receive("p0", mac(2) + mac(1) + b"\x88\xb5" + bytes(100), 0)
    sw.transmit(10**9)
    assert [ecn_of(f) for f in sent(tr)[:4]] == [Ecn.ECT_0] * 4
    assert m.c.unmonitored == 5 and m.c.classes[3].non_ip == 0


def test_status_and_timeline_are_json_able():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = TcdMarker(TcdParams(50_000, 100_000, 50_000))
    sw.set_marking_policy("p1", m)
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    feed(sw, 3, t=10)
    sw.receive("p1", resume_frame(PEER, [0]), 1_000)
    sw.transmit(10**9)
    st_ = json.loads(json.dumps(m.status(10**9)))
    cls0 = st_["classes"]["0"]
    assert cls0["state"] == "non_congestion" or cls0["state"] == "undetermined"
    assert sum(cls0["time_in_state_ns"].values()) == 10**9
    assert cls0["counters"]["marked_ue"] == 3
    assert m.timeline(0)[:2] == [(0, 0), (0, 1)]
    assert m.timeline(5) == []


def test_marker_from_options():
    m = marker_from_options({"marker": "tcd", "classes": [0], "params": TcdParams(5, 6, 7).to_dict()}, 42)
    assert isinstance(m, TcdMarker) and m.classes == (0,) and m.detectors[0].created == 42
    e = marker_from_options({"marker": "ecn", "ecn": EcnParams(k_bytes=9).to_dict()})
    assert isinstance(e, EcnMarker) and e.params.k_bytes == 9


def test_marks_are_counted_per_flow_even_when_already_marked():
    """Per flow (source and destination address) the marks the port decided: UE while paused, CE in
    congestion; a packet an earlier hop already marked CE still counts (TCD §3.1: "partial
    packets of F1 are marked at P2" is read port by port)."""
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = TcdMarker(TcdParams(50_000, 2_500, 20_000), classes=(0,))
    sw.set_marking_policy("p1", m)
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    for src, ecn in ((1, Ecn.ECT_0), (3, Ecn.CE), (3, Ecn.ECT_0), (1, Ecn.NOT_ECT)):
        sw.receive("p0", udp_frame(src=src, size=1000, tos=class_tos(0, ecn)), 10)
    sw.receive("p1", resume_frame(PEER, [0]), 1_000)
    sw.transmit(10**9)
    assert m.flow_marks() == {"10.0.0.1>10.0.0.2": {"ce": 0, "ue": 1}, "10.0.0.3>10.0.0.2": {"ce": 0, "ue": 2}}
    assert m.c.classes[0].marked_ue == 2  # (the CE packet was not rewritten, the Not-ECT one untouched)
    assert json.loads(json.dumps(m.status()))["flows"] == m.flow_marks()
    e = EcnMarker(EcnParams(k_bytes=0))
    for src in (1, 1, 4):
        e.on_dequeue(udp_frame(src=src, size=100, tos=Ecn.CE), 0, 1, 0)  # above K, already CE: decided all the same
    assert e.flow_marks() == {"10.0.0.1>10.0.0.2": {"ce": 2, "ue": 0}, "10.0.0.4>10.0.0.2": {"ce": 1, "ue": 0}}
    assert e.c.marked == 0 and e.c.already_ce == 3


def test_flows_beyond_the_cap_are_counted_apart(monkeypatch):
    import netstack.tcd.marker as marker

    monkeypatch.setattr(marker, "FLOW_CAP", 2)
    e = EcnMarker(EcnParams(k_bytes=0))
    for src in (1, 2, 3, 3, 1):
        e.on_dequeue(udp_frame(src=src, size=100, tos=Ecn.ECT_0), 0, 1, 0)
    assert e.flow_marks() == {"10.0.0.1>10.0.0.2": {"ce": 2, "ue": 0}, "10.0.0.2>10.0.0.2": {"ce": 1, "ue": 0}}
    assert e.flows.c.dropped == 2 and e.status()["flows_dropped"] == 2


# ------------------------------------------------------------------------------- ECN baseline
def test_ecn_threshold_marks_at_dequeue():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = EcnMarker(EcnParams(k_bytes=2_500))
    sw.set_marking_policy("p1", m)
    tr = traced(sw)
    feed(sw, 8)
    feed(sw, 1, ecn=Ecn.NOT_ECT)
    sw.receive("p1", pause_frame(PEER, [0]), 0)  # an ECN marker does not care about PFC
    sw.receive("p1", resume_frame(PEER, [0]), 0)
    sw.transmit(10**9)
    assert [ecn_of(f) for f in sent(tr)] == [Ecn.ECT_0] + [Ecn.CE] * 5 + [Ecn.ECT_0] * 2 + [Ecn.NOT_ECT]
    assert_checksums(sent(tr))
    assert m.c.marked == 5 and m.c.not_ect == 1 and m.c.pauses == 1
    assert json.loads(json.dumps(m.status()))["counters"]["marked"] == 5


def _red_marks(seed: int) -> list[int]:
    sw = make_switch(2, p1={"rate_bps": GBPS})
    sw.set_marking_policy("p1", EcnMarker(EcnParams(mode="red", kmin_bytes=3_000, kmax_bytes=12_000, pmax=0.5,
                                                    seed=seed)))
    tr = traced(sw)
    feed(sw, 20)
    sw.transmit(10**9)
    return [ecn_of(f) for f in sent(tr)]


def test_ecn_red_is_seeded_and_bounded():
    marks = _red_marks(7)
    assert marks == _red_marks(7)
    # queue after dequeue: 0, then 18000 down to 0 in 1000s
    qlen = [0, *range(18_000, -1, -1_000)]
    for q, e in zip(qlen, marks, strict=True):
        if q > 12_000:
            assert e == Ecn.CE
        elif q <= 3_000:
            assert e == Ecn.ECT_0
    assert any(_red_marks(s) != marks for s in range(1, 6))


# ------------------------------------------------------- CE rule "ecn": TCD differs only when paused
RED = EcnParams(mode="red", kmin_bytes=3_000, kmax_bytes=12_000, pmax=0.5, seed=11)


def _run_marker(marker, pause: bool) -> list[int]:
    """20 frames through port p1 under ``marker``, optionally paused from 0 to 100 us first."""
    sw = make_switch(2, p1={"rate_bps": GBPS})
    sw.set_marking_policy("p1", marker)
    tr = traced(sw)
    if pause:
        sw.receive("p1", pause_frame(PEER, [0]), 0)
    feed(sw, 20)
    if pause:
        sw.receive("p1", resume_frame(PEER, [0]), 100_000)
    sw.transmit(10**9)
    return [ecn_of(f) for f in sent(tr)]


def test_ce_rule_ecn_marks_a_port_never_paused_exactly_as_the_ecn_marker():
    """Issue 30's like-for-like arms: at a port nobody pauses, a TCD marker under ``ce_rule`` "ecn"
    marks CE where the RED baseline with the same seed does, packet for packet (the same coin)."""
    base = _run_marker(EcnMarker(RED), pause=False)
    tcd = TcdMarker(TcdParams(50_000, 2_500, 20_000), ce_ecn=RED)
    assert _run_marker(tcd, pause=False) == base
    assert Ecn.CE in base and Ecn.ECT_0 in base  # the trace crosses RED's random region
    assert tcd.ce_rule == "ecn" and tcd.c.classes[0].marked_ue == 0
    assert tcd.c.classes[0].ecn_would_mark == base.count(Ecn.CE) == tcd.c.classes[0].marked_ce
    st = json.loads(json.dumps(tcd.status()))
    assert st["ce_rule"] == "ecn" and st["ecn"]["seed"] == 11 and st["ecn"]["mode"] == "red"
    # TCD's own rule marks this trace otherwise: its congestion state needs a rising standing queue
    assert _run_marker(TcdMarker(TcdParams(50_000, 2_500, 20_000)), pause=False) != base


def test_ce_rule_ecn_marks_ue_while_paused_then_as_the_ecn_marker():
    """Paused and resumed: UE while undetermined (T_on^max = 50 us after the resume: 7 frames of
    8192 ns), then the baseline's RED decision for the same packet (its coin was drawn all along)."""
    base = _run_marker(EcnMarker(RED), pause=True)
    tcd = _run_marker(TcdMarker(TcdParams(50_000, 2_500, 20_000), ce_ecn=RED), pause=True)
    assert tcd[:7] == [Ecn.ECT_1] * 7 and Ecn.CE in base[:7]
    assert tcd[7:] == base[7:]


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from(["deq", "deq", "deq", "pause", "resume"]),
                                 st.integers(0, 20_000), st.sampled_from([Ecn.ECT_0, Ecn.CE, Ecn.NOT_ECT])),
                       max_size=60), seed=st.integers(0, 2**32))
def test_ce_rule_ecn_is_the_ecn_marker_but_ue_where_undetermined(events, seed):
    red = EcnParams(mode="red", kmin_bytes=5_000, kmax_bytes=15_000, pmax=0.3, seed=seed)
    ecn, tcd = EcnMarker(red), TcdMarker(TcdParams(30_000, 4_000, 30_000), classes=(0,), ce_ecn=red)
    t = 0
    for kind, qlen, mark in events:
        t += 5_000
        if kind != "deq":
            ecn.on_pause(0, kind == "pause", t)
            tcd.on_pause(0, kind == "pause", t)
            continue
        frame = udp_frame(size=200, tos=class_tos(0, mark))
        want = ecn.on_dequeue(frame, 0, qlen, t)
        got = tcd.on_dequeue(frame, 0, qlen, t)
        if tcd.state(0) is PortState.UNDETERMINED:
            assert ecn_of(got) == (Ecn.ECT_1 if mark == Ecn.ECT_0 else mark)
        else:
            assert got == want


def test_ce_rule_from_options_and_refused():
    opts = {"marker": "tcd", "ce_rule": "ecn", "params": TcdParams(5, 6, 7).to_dict(), "ecn": RED.to_dict()}
    m = marker_from_options(opts)
    assert isinstance(m, TcdMarker) and m.ce_rule == "ecn"
    assert marker_from_options({**opts, "ce_rule": "tcd"}).ce_rule == "tcd"
    with pytest.raises(TcdParamError) as exc:
        marker_from_options({**opts, "ce_rule": "red"})
    assert exc.value.field == "ce_rule"


# --------------------------------------------------------------------- arbitrary frame content
@settings(max_examples=400, deadline=None)
@given(frame=st.binary(max_size=80) | st.builds(lambda ecn, tail: udp_frame(size=60, tos=ecn)[:tail],
                                                 st.integers(0, 255), st.integers(0, 60)),
       cls=st.integers(-3, 10), qlen=st.integers(0, 10**6), now=st.integers(0, 10**9), pause=st.booleans())
def test_no_frame_makes_a_marker_raise(frame, cls, qlen, now, pause):
    for m in (TcdMarker(TcdParams(100, 1_000, 100)), EcnMarker(EcnParams(k_bytes=0)),
              TcdMarker(TcdParams(100, 1_000, 100), ce_ecn=EcnParams(mode="red", kmin_bytes=0, kmax_bytes=9)),
              EcnMarker(EcnParams(mode="red", kmin_bytes=0, kmax_bytes=1))):
        m.on_pause(cls, pause, now)
        out = m.on_dequeue(frame, cls, qlen, now)
        assert isinstance(out, bytes) and len(out) == len(frame)
        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[14] >> 4 != 4:
            assert out == frame
        else:
            assert out[:15] == frame[:15] and out[16:24] == frame[16:24] and out[26:] == frame[26:]
            assert out[15] >> 2 == frame[15] >> 2
