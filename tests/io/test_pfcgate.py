"""The PFC pause state of a host NIC (netstack.io.pfcgate.PauseGate), sans-IO: a pause of q
quanta holds the class for q x 512 bit times at the link rate, a resume (0 quanta) opens it at
once, a new pause replaces the running one, frames for other classes are ignored and garbage is
counted, never raised; and the time spent paused is accounted however a pause ends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers.inet import build_udp_frame
from headers.pfc import build_pfc_frame, pause_frame, quanta_to_ns, resume_frame
from netstack.io.pfcgate import PauseGate

GBPS = 1_000_000_000
PEER = bytes([0x02, 0, 0, 0, 0, 0x99])


def test_pause_holds_the_class_for_its_quanta_at_the_link_rate():
    g = PauseGate(GBPS, cls=3)
    assert not g.paused(0) and g.until == 0
    assert g.on_frame(pause_frame(PEER, [3], 100), 1_000) is True
    dur = quanta_to_ns(100, GBPS)
    assert dur == 51_200  # 100 x 512 bit times at 1 Gbit/s
    assert g.until == 1_000 + dur
    assert g.paused(1_000) and g.paused(1_000 + dur - 1)
    assert not g.paused(1_000 + dur)  # expired without a resume frame
    assert g.c.pauses == 1 and g.c.resumes == 0
    assert g.c.paused_ns == dur


def test_quanta_follow_the_link_rate():
    slow, fast = PauseGate(GBPS), PauseGate(100 * GBPS)
    for g in (slow, fast):
        g.on_frame(pause_frame(PEER, [0]), 0)  # 0xFFFF quanta
    assert slow.until == quanta_to_ns(0xFFFF, GBPS) == 33_553_920
    assert fast.until == quanta_to_ns(0xFFFF, 100 * GBPS) == 335_540


def test_resume_opens_at_once():
    g = PauseGate(GBPS, cls=0)
    g.on_frame(pause_frame(PEER, [0]), 0)
    assert g.paused(10_000)
    assert g.on_frame(resume_frame(PEER, [0]), 10_000) is True
    assert not g.paused(10_000) and g.until == 10_000
    assert g.c.resumes == 1 and g.c.pauses == 1


def test_resume_when_not_paused_changes_nothing_but_its_count():
    g = PauseGate(GBPS)
    assert g.on_frame(resume_frame(PEER, [0]), 5_000) is True
    assert g.until == 0 and not g.paused(5_000) and g.c.paused_ns == 0 and g.c.resumes == 1
    g.on_frame(pause_frame(PEER, [0], 10), 6_000)
    g.on_frame(resume_frame(PEER, [0]), 100_000)  # after the pause expired
    assert g.until == 6_000 + quanta_to_ns(10, GBPS)
    assert g.c.paused_ns == quanta_to_ns(10, GBPS)


def test_other_classes_are_ignored_and_counted():
    g = PauseGate(GBPS, cls=3)
    assert g.on_frame(pause_frame(PEER, [2, 4]), 0) is False
    assert g.on_frame(resume_frame(PEER, [5]), 0) is False
    assert not g.paused(0) and g.c.ignored == 2 and g.c.pauses == g.c.resumes == 0
    # a frame naming several classes, ours among them, applies
    assert g.on_frame(pause_frame(PEER, [1, 3, 7], 20), 0) is True
    assert g.until == quanta_to_ns(20, GBPS)
    # our class's quanta are read, not another's: class 3 resumed, class 1 paused
    assert g.on_frame(build_pfc_frame(PEER, 0b1010, [0, 0xFFFF, 0, 0, 0, 0, 0, 0]), 100) is True
    assert not g.paused(100) and g.c.resumes == 1


def test_garbage_is_counted_malformed_and_never_raises():
    g = PauseGate(GBPS)
    good = pause_frame(PEER, [0])
    udp = build_udp_frame(PEER, PEER, bytes(4), bytes(4), 1, 2, bytes(20))
    not_pfc = good[:14] + b"\x00\x01" + good[16:]  # an 802.3x PAUSE (opcode 1), not PFC
    for frame in (b"", good[:33], udp, not_pfc, bytearray(60), memoryview(good)[:20]):
        assert g.on_frame(frame, 0) is False
    assert g.c.malformed == 6 and g.c.ignored == 0 and not g.paused(0)
    assert g.on_frame(memoryview(good), 0) is True  # any buffer type is read
    assert g.counters() == {"pfc_pauses": 1, "pfc_resumes": 0, "pfc_ignored": 0, "pfc_malformed": 6,
                            "pfc_paused_ns": quanta_to_ns(0xFFFF, GBPS)}


def test_paused_time_when_a_pause_is_cut_short_or_replaced():
    g = PauseGate(GBPS)
    q = quanta_to_ns(1, GBPS)  # 512 ns
    g.on_frame(pause_frame(PEER, [0], 100), 0)  # until 51200
    g.on_frame(pause_frame(PEER, [0], 10), 20_000)  # replaced (shortened): until 25120
    assert g.until == 20_000 + 10 * q and g.c.pauses == 2
    assert g.c.paused_ns == 20_000 + 10 * q
    g.on_frame(resume_frame(PEER, [0]), 22_000)  # cut short
    assert g.c.paused_ns == 22_000 and not g.paused(22_000)
    g.on_frame(pause_frame(PEER, [0], 10), 30_000)  # a new pause after a gap
    g.on_frame(pause_frame(PEER, [0], 100), 31_000)  # replaced (extended)
    assert g.until == 31_000 + 100 * q
    assert g.c.paused_ns == 22_000 + 1_000 + 100 * q
    assert g.counters()["pfc_paused_ns"] == g.c.paused_ns


@pytest.mark.parametrize("rate", [0, -1, True, 1.5e9, "1e9", None])
def test_refuses_a_bad_rate(rate):
    with pytest.raises(ValueError, match="link rate"):
        PauseGate(rate)


@pytest.mark.parametrize("cls", [-1, 8, True, 1.0, None])
def test_refuses_a_bad_class(cls):
    with pytest.raises(ValueError, match="PFC priority"):
        PauseGate(GBPS, cls)


# ---------------------------------------------------------------------------- hypothesis
@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=80), max_size=20), st.integers(0, 7), st.integers(0, 10**12))
def test_arbitrary_bytes_never_raise(frames, cls, now):
    g = PauseGate(GBPS, cls)
    for f in frames:
        before = (g.until, g.c.paused_ns)
        changed = g.on_frame(f, now)
        assert isinstance(changed, bool)
        if not changed:
            assert (g.until, g.c.paused_ns) == before
    assert g.c.pauses + g.c.resumes + g.c.ignored + g.c.malformed == len(frames)
    assert g.c.paused_ns >= 0


EVENT = st.tuples(st.integers(0, 100_000), st.integers(0, 0xFF), st.integers(0, 300))


@settings(max_examples=300, deadline=None)
@given(st.lists(EVENT, max_size=40), st.integers(0, 7), st.sampled_from([GBPS, 10 * GBPS, 25 * GBPS]))
def test_paused_time_is_the_time_the_gate_was_closed(events, cls, rate):
    """Against a plain model: each pause opens an interval, the next frame for the class closes
    it; paused_ns (counted when a pause starts, corrected when it is cut short) is their sum."""
    g = PauseGate(rate, cls)
    intervals: list[list[int]] = []
    now = 0
    for dt, vector, quanta in events:
        now += dt
        frame = build_pfc_frame(PEER, vector, [quanta if vector >> i & 1 else 0 for i in range(8)])
        changed = g.on_frame(frame, now)
        assert changed == bool(vector >> cls & 1)
        if changed:
            if intervals and intervals[-1][1] > now:
                intervals[-1][1] = now
            if quanta:
                intervals.append([now, now + quanta_to_ns(quanta, rate)])
        model_paused = bool(intervals) and intervals[-1][0] <= now < intervals[-1][1]
        assert g.paused(now) == model_paused
        assert g.c.paused_ns == sum(b - a for a, b in intervals)
    assert g.c.pauses == len(intervals)
