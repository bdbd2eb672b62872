"""Property tests: the two engines under arbitrary loss / duplication / reordering schedules.

The link between them (tests/linkguardian/enginepair.py: EnginePair) is scripted by hypothesis:
for the k-th frame put on it, a verdict (deliver, lose, duplicate, deliver j slots late).
Invariants (LinkGuardian §3.3, §3.4, §3.5):

- blocking mode delivers strictly in order, without duplicates;
- a frame is missing only if none of its copies arrived, or if an ackNoTimeout gave up
  on it (and that is counted); without reordering, exactly the frames none of whose
  copies arrived are missing;
- LinkGuardianNB delivers each frame at most once;
- the sender never frees a frame the receiver still awaits, and never holds one the
  leading ACK has passed;
- the reordering buffer stays below pauseThreshold plus what can still be in flight
  when the pause takes effect.

Each blocking-mode property runs with the reordering buffer drained at once, through a
recirculation port as fast as the link (one frame per slot), and through one at half speed.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.linkguardian import LGParams

from .enginepair import EnginePair, bernoulli_fate

SIZE = 200
SLOT = 1_000
DELAY, REV_DELAY, PAUSE_DELAY = 3, 2, 2

OK, LOSE, DUP = "ok", "lose", "dup"
verdicts = st.one_of(
    st.sampled_from([OK, OK, OK, LOSE, LOSE, DUP]),
    st.tuples(st.just("late"), st.integers(1, 6)),
)
no_reorder = st.sampled_from([OK, OK, OK, LOSE, LOSE, DUP])
#: recirculation rates: at once, one SIZE frame per slot (the link's rate), half that; and where a
#: newly held frame joins the recirculating queue (LGParams.recirc_order): both keep the invariants
LINE_RATE_BPS = (SIZE + 24) * 8 * 1_000_000_000 // SLOT
recirc_rates = st.tuples(st.sampled_from([0, LINE_RATE_BPS, LINE_RATE_BPS // 2]), st.sampled_from(["seq", "fifo"]))


def scripted(schedule):
    def fate(k, kind):
        v = schedule[k] if k < len(schedule) else OK
        if v == OK:
            return (0,)
        if v == LOSE:
            return ()
        if v == DUP:
            return (0, 0)
        return (v[1],)

    return fate


def params(mode="blocking", copies=2, timeout_slots=400, backpressure=True, pause=2000, recirc=(0, "seq")):
    rate, order = recirc if isinstance(recirc, tuple) else (recirc, "seq")
    return LGParams(mode=mode, copies=copies, ack_no_timeout_ns=timeout_slots * SLOT, pause_threshold_bytes=pause,
                    resume_threshold_bytes=pause // 2, backpressure=backpressure,
                    reorder_buffer_limit_bytes=10**6 if not backpressure else 100_000, recirc_rate_bps=rate,
                    recirc_order=order)


class Checker:
    """Per-slot invariants."""

    def __init__(self, p: LGParams, reorder: int):
        self.p = p
        self.reorder = reorder
        self.max_rob = 0
        self.cap: int | None = None
        self.caps: list[int] = []

    def __call__(self, pair: EnginePair, slot: int) -> None:
        s, r = pair.sender, pair.receiver
        buffered = s.buffered()
        # the Tx buffer holds nothing the leading ACK has passed (§3.1)
        assert not buffered or buffered[0] > s.leading_ack
        # the sender never freed (by ACK) a frame the receiver still awaits
        holes = r.holes()
        assert not holes or holes[0] > s.leading_ack
        # ACK safety: the sender's view never runs ahead of the receiver's in-order point
        assert s.leading_ack <= r.leading_ack
        b = r.c.reorder_buffer_bytes
        self.max_rob = max(self.max_rob, b)
        if not self.p.blocking:
            assert b == 0
        elif self.p.backpressure:
            # Algorithm 2 is per packet: at or above pauseThreshold the sender is being paused
            if b >= self.p.pause_threshold_bytes:
                assert r.paused
            # Once paused, the buffer can only take what is in flight: frames already sent but
            # neither delivered nor held (in transit, lost and awaiting retransmission), plus
            # those the sender stamps before the pause reaches it (one per slot).
            if r.paused and self.cap is None:
                # (every held frame, recirculating or not, is at or past ack_no)
                in_flight = s.next_counter - r.ack_no - r.c.reorder_buffer_frames
                self.cap = b + SIZE * (in_flight + PAUSE_DELAY)
                self.caps.append(self.cap)
            elif not r.paused:
                self.cap = None
            if self.cap is not None:
                assert b <= self.cap, (b, self.cap)


def run(p, schedule, count, reorder=6):
    check = Checker(p, reorder)
    pair = EnginePair(p, fate=scripted(schedule), delay_slots=DELAY, reverse_delay_slots=REV_DELAY,
                      pause_delay_slots=PAUSE_DELAY, slot_ns=SLOT, frame_size=SIZE, observer=check)
    return pair, pair.run(count), check


@settings(max_examples=150)
@given(st.lists(verdicts, max_size=250), st.integers(1, 120), st.integers(1, 3), recirc_rates)
def test_blocking_in_order_no_duplicates_missing_only_when_counted(schedule, count, copies, recirc):
    p = params(copies=copies, timeout_slots=30, recirc=recirc)
    _, res, _ = run(p, schedule, count)
    d = res.delivered
    assert all(a < b for a, b in pairwise(d))  # strictly in order: no duplicates
    missing = res.missing
    unexplained = missing - res.never_arrived
    # a frame one of whose copies arrived can only be missing because ackNoTimeout gave up
    # on it before that copy came (reordering), or the buffer overflowed; both are counted
    assert len(unexplained) <= res.receiver["timeouts"] + res.receiver["reorder_drops"]
    assert res.receiver["delivered"] == len(d)
    assert res.sender["tx_buffer_frames"] == 0 or res.receiver["open_holes"] == 0


@settings(max_examples=150)
@given(st.lists(no_reorder, max_size=250), st.integers(1, 120), st.integers(1, 3), recirc_rates)
def test_without_reordering_exactly_the_frames_with_no_copy_through_are_missing(schedule, count, copies, recirc):
    # timeout far above any retransmission delay: ackNoTimeout only fires when all copies died
    p = params(copies=copies, timeout_slots=2000, recirc=recirc)
    _, res, _ = run(p, schedule, count, reorder=0)
    d = res.delivered
    assert all(a < b for a, b in pairwise(d))
    assert res.missing == res.never_arrived
    assert res.receiver["timeouts"] <= len(res.missing)
    # Eq. 1's premise: a lost frame was retransmitted N times unless its loss went unseen
    assert res.sender["retransmissions"] == copies * res.sender["retx_frames"]


@settings(max_examples=100)
@given(st.lists(verdicts, max_size=250), st.integers(1, 120), st.integers(1, 3))
def test_nb_delivers_each_frame_at_most_once(schedule, count, copies):
    p = params(mode="nb", copies=copies, timeout_slots=30)
    _, res, check = run(p, schedule, count)
    d = res.delivered
    assert len(d) == len(set(d))
    assert len(res.missing - res.never_arrived) <= res.receiver["timeouts"]
    assert check.max_rob == 0 and res.receiver["pauses_sent"] == 0


@settings(max_examples=60)
@given(st.lists(no_reorder, max_size=200), st.integers(20, 150), st.sampled_from([600, 1000, 2000]), recirc_rates)
def test_reordering_buffer_is_bounded_by_backpressure(schedule, count, pause, recirc):
    # a long ackNoTimeout lets the buffer build: only backpressure keeps it small
    p = params(copies=1, timeout_slots=2000, pause=pause, recirc=recirc)
    _, res, check = run(p, schedule, count, reorder=0)
    assert res.receiver["reorder_drops"] == 0
    # each pause was decided within one slot's arrivals of pauseThreshold, so the cap is
    # pauseThreshold + what was in flight then (forward delay, retransmissions owed, pause delay)
    for cap in check.caps:
        assert cap <= pause + SIZE * (2 + DELAY + PAUSE_DELAY + res.receiver["lost_detected"])
    d = res.delivered
    assert all(a < b for a, b in pairwise(d))


def test_reordering_buffer_overflows_without_backpressure():
    # Fig. 9b in miniature: every 50th frame lost with its retransmission, and a long ackNoTimeout
    lose = set(range(10, 400, 50))
    p = LGParams(copies=1, ack_no_timeout_ns=100 * SLOT, backpressure=False, reorder_buffer_limit_bytes=10 * SIZE)
    res = EnginePair(p, fate=lambda k, kind: () if k in lose or kind == "retx" else (0,), delay_slots=DELAY,
                     reverse_delay_slots=REV_DELAY, slot_ns=SLOT, frame_size=SIZE).run(300)
    assert res.receiver["reorder_drops"] > 0 and res.receiver["pauses_sent"] == 0
    d = res.delivered
    assert all(a < b for a, b in pairwise(d))
    assert len(res.missing) == res.receiver["reorder_drops"] + res.receiver["timeouts"]


def test_effective_loss_is_actual_loss_to_the_power_n_plus_1():
    # Eq. 1 (§3.4): with i.i.d. loss p and N copies, a frame is lost with probability p^(N+1)
    n, p_loss, count = 1, 0.1, 20_000
    res = EnginePair(LGParams(copies=n, ack_no_timeout_ns=100 * SLOT), fate=bernoulli_fate(p_loss, seed=7),
                     slot_ns=SLOT).run(count)
    expected = count * p_loss ** (n + 1)  # 200
    assert 0.7 * expected <= len(res.missing) <= 1.3 * expected
    assert res.missing == res.never_arrived
    assert res.receiver["timeouts"] == len(res.missing)


# ------------------------------------------------------- streams longer than 2^17 frames
WRAP_COUNT = 2 * 65536 + 4000
near_wraps = st.one_of(st.integers(65530, 65545), st.integers(131064, 131082), st.integers(0, WRAP_COUNT))


@settings(max_examples=3)
@given(st.sets(near_wraps, max_size=12), st.sets(near_wraps, max_size=6), st.sampled_from(["blocking", "nb"]))
def test_streams_across_both_era_wraps(lost, duplicated, mode):
    # the fast path: sparse losses, one frame per slot, the 16-bit seq_no wraps twice
    p = params(mode=mode, copies=1, timeout_slots=2000)

    def fate(k, kind):
        if k in lost:
            return ()
        return (0, 0) if k in duplicated else (0,)

    res = EnginePair(p, fate=fate, delay_slots=2, reverse_delay_slots=2, slot_ns=SLOT, frame_size=64).run(WRAP_COUNT)
    d = res.delivered
    if mode == "blocking":
        assert all(a < b for a, b in pairwise(d))
    else:
        assert len(d) == len(set(d))
    assert res.missing == res.never_arrived
    assert res.receiver["resyncs"] == 0 and res.receiver["open_holes"] == 0
    assert res.sender["next_counter"] == WRAP_COUNT and res.sender["tx_buffer_frames"] == 0


def test_one_unrepaired_hole_holds_the_buffer_at_pause_threshold_plus_in_flight():
    # frame 5 and its retransmission are lost; ackNoTimeout is long, so without backpressure
    # the buffer would take the whole stream. With it: pauseThreshold + what is in flight.
    pause = 1000
    p = params(copies=1, timeout_slots=300, pause=pause)
    check = Checker(p, 0)

    def fate(k, kind):
        return () if k == 5 or kind == "retx" else (0,)

    res = EnginePair(p, fate=fate, delay_slots=DELAY, reverse_delay_slots=REV_DELAY, pause_delay_slots=PAUSE_DELAY,
                     slot_ns=SLOT, frame_size=SIZE, observer=check).run(200)
    # in flight when the pause is sent: DELAY frames on the link, PAUSE_DELAY stamped before it lands
    assert check.max_rob <= pause + SIZE * (DELAY + PAUSE_DELAY + 1)
    assert res.receiver["pauses_sent"] == 1 and res.receiver["resumes_sent"] == 1
    assert res.missing == {5} and res.receiver["timeouts"] == 1
    assert res.delivered == [i for i in range(200) if i != 5]


def _fig9b(recirc: int, backpressure: bool):
    """One lost frame every 40 (its retransmission arrives: no ackNoTimeout), the link busy
    every slot: how the reordering buffer fares with a given drain."""
    lose = set(range(10, 2000, 40))
    p = LGParams(copies=1, ack_no_timeout_ns=1000 * SLOT, backpressure=backpressure,
                 pause_threshold_bytes=12 * SIZE, resume_threshold_bytes=6 * SIZE,
                 reorder_buffer_limit_bytes=30 * SIZE, recirc_rate_bps=recirc)
    pair = EnginePair(p, fate=lambda k, kind: () if k in lose and kind == "data" else (0,), delay_slots=DELAY,
                      reverse_delay_slots=REV_DELAY, pause_delay_slots=PAUSE_DELAY, slot_ns=SLOT, frame_size=SIZE)
    return pair.run(1200)


def test_a_recirculation_port_as_fast_as_the_link_ratchets_up_and_overflows_without_backpressure():
    """§3.3/§4.2 (Fig. 9b): held frames cycle through the recirculation port and every later
    arrival joins its tail, so with the port as fast as the link (the paper's 100G case) and
    the link busy every slot the buffer never drains: each loss adds its hole's worth and the
    buffer overflows (end-to-end loss). Drained at once, 30 frames of room never fill;
    backpressure keeps the port's queue bounded with nothing lost."""
    instant = _fig9b(0, backpressure=False)
    assert instant.receiver["reorder_drops"] == 0 and instant.missing == set()
    ratchet = _fig9b(LINE_RATE_BPS, backpressure=False)
    assert ratchet.receiver["reorder_drops"] > 0
    assert len(ratchet.missing) == ratchet.receiver["reorder_drops"]  # the overflow is end-to-end loss
    assert ratchet.receiver["recirculations"] > 0
    assert all(a < b for a, b in pairwise(ratchet.delivered))
    guarded = _fig9b(LINE_RATE_BPS, backpressure=True)
    assert guarded.receiver["reorder_drops"] == 0 and guarded.missing == set()
    assert guarded.receiver["pauses_sent"] > 0
    assert all(a < b for a, b in pairwise(guarded.delivered))


def test_a_port_four_times_the_link_holds_about_one_hole_at_a_time():
    """The same losses with a recirculation port four times as fast as the link (the paper's
    25G links with 100G recirculation): after a repair the queue drains at three times the
    arrival rate, so the buffer peaks at about one retransmission delay of frames (a maximum
    over holes, not a sum) and 30 frames of room suffice without backpressure."""
    run_ = _fig9b(4 * LINE_RATE_BPS, backpressure=False)
    assert run_.receiver["reorder_drops"] == 0 and run_.missing == set()
    assert run_.receiver["reorder_buffer_max_frames"] <= 2 * (DELAY + REV_DELAY + 1)
