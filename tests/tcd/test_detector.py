"""The TCD state machine (TCD §3.2.1) on synthetic traces: every transition, the standing-queue
trend (the minimum queue of consecutive windows W), our departures from the ns-3 port (immediate
UNDET on PAUSE, non-congestion needs a rising standing queue to become congestion), time
accounting, the timeline cap; and hypothesis on arbitrary traces against a model of the rules.

Why a long queue alone is not congestion (TCD §3.2.1): congestion is "queue buildup not caused by
OFF"; a backlog a PFC loop holds or drains is not an overloaded port. So a port becomes
congestion only while its standing queue (the smallest queue seen at a dequeue in a window) rises
from one window to the next and the queue is above K. A new detector's reference is an empty
queue: its first dequeue closes an empty first window."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.tcd import PortState
from netstack.tcd.detector import Detector
from netstack.tcd.params import TcdParams

NON, UND, CONG = PortState.NON_CONGESTION, PortState.UNDETERMINED, PortState.CONGESTION
T = 1_000  # T_on^max
K = 10_000
W = 1_000


def det(**kw) -> Detector:
    p = TcdParams(kw.pop("t_on_max_ns", T), kw.pop("k_bytes", K), kw.pop("window_ns", W), **kw)
    return Detector(p, 0)


def run(d: Detector, trace) -> list[PortState]:
    """Dequeue ``(t, qlen)`` in order; the states the packets left in."""
    return [d.on_dequeue(q, t) for t, q in trace]


def to_congestion(d: Detector, t0: int = 0) -> int:
    """Drive a never-paused detector to congestion with a queue rising over more than two
    windows (from 2000 B by 1000 B every W/4); the time of the last dequeue."""
    trace = [(t0 + i * W // 4, 2_000 + i * 1_000) for i in range(10)]  # up to 11000 at t0 + 2.25·W
    states = run(d, trace)
    assert states[-1] is CONG and CONG not in states[:-1]
    return trace[-1][0]


def onoff(t: int, base: int, t0: int, swing: int) -> int:
    """The queue of a port whose input is itself ON-OFF (its upstream is paused and resumed):
    ``base`` while the upstream is OFF, ``base + swing`` in the middle of each window starting at
    ``t0`` (the upstream's ON burst); the window boundaries fall in the OFF phase."""
    return base + (swing if 300 <= (t - t0) % W < 800 else 0)


# ------------------------------------------------------------------ non-congestion <-> congestion
def test_never_paused_queue_rising_across_windows_becomes_congestion_once_long():
    d = det()
    # dequeues every W/4, the queue rising by 1000 B each: the first closes the (empty) first
    # window; the window minima then rise 0 -> 2000 -> 6000 -> 10000
    trace = [(i * 250, 2_000 + i * 1_000) for i in range(14)]
    assert run(d, trace[:9]) == [NON] * 9  # 2000..10000: rising but not above K
    assert d.q_inc and d.q_prev == 6_000  # (the trend rose at 2000, with the queue at exactly K)
    states = run(d, trace[9:])
    assert states[0] is CONG  # 11000 at 2250: above K, the standing queue rising
    assert states == [CONG] * 5
    assert d.on_dequeue(K + 1, 3_600) is CONG  # congestion ends only when the queue is short...
    assert d.on_dequeue(K, 3_700) is NON  # ... long means above K
    assert d.c.transitions == 2


def test_long_queue_without_a_rising_trend_is_not_yet_congestion():
    d = det()
    assert d.on_dequeue(K + 1, 0) is NON  # the first dequeue: long, but no window has been seen
    assert d.on_dequeue(30_000, 500) is NON  # long, inside the window: the trend is not updated
    assert not d.q_inc
    assert d.on_dequeue(30_000, 1_000) is CONG  # window closed: its minimum K+1 rose from empty


def test_congestion_holds_while_long_even_when_draining():
    d = det()
    t = to_congestion(d)
    # CONGESTION -> NON_CONGESTION on qlen <= K only (the trend does not matter)
    for i in range(1, 9):
        assert d.on_dequeue(11_000 - i * 100, t + i * W // 2) is CONG
    assert d.q_dec
    assert d.on_dequeue(K, t + 5 * W) is NON


def test_constant_long_queue_across_windows_does_not_become_congestion():
    """A backlog that neither grows nor drains (a PFC loop holds it) stays non-congestion."""
    d = det()
    d.on_pause(True, 0)
    d.on_pause(False, 100)
    trace = [(200 + i * 250, 20_000) for i in range(25)]  # six windows, always 20000 > K
    states = run(d, trace)
    assert states == [UND if t - 200 <= T else NON for t, _ in trace]
    assert not d.q_inc and not d.q_dec and d.q_prev == 20_000
    assert d.c.transitions == 2  # PAUSE -> UND -> NON, never CONG


def test_swinging_long_queue_whose_window_minimum_falls_stays_non_congestion():
    """A draining backlog with an ON-OFF input: the queue swings up by more than it drains within
    each window (a per-packet or per-window-maximum trend would say "rising"), but its minimum
    per window falls: not congestion."""
    d = det()
    d.on_pause(True, 0)
    d.on_pause(False, 50)
    t0 = 100
    trace = []
    for t in range(t0, t0 + 6 * W + 1, 100):
        j = (t - t0) // W  # the swing grows each window: the window maxima rise
        trace.append((t, onoff(t, 60_000 - 5 * (t - t0), t0, 15_000 + 8_000 * j)))
    states = run(d, trace)
    qs = [q for _, q in trace]
    assert min(qs) > K  # long throughout
    assert any(b > a for a, b in pairwise(qs))  # the queue does rise between dequeues
    maxima = [max(q for t, q in trace if t0 + j * W <= t < t0 + (j + 1) * W) for j in range(6)]
    assert maxima == sorted(maxima) and len(set(maxima)) == 6
    assert states == [UND if t - t0 <= T else NON for t, _ in trace]
    assert d.q_dec and not d.q_inc


def test_window_minimum_rising_becomes_congestion():
    """The same ON-OFF swings, but the standing queue turns from falling to rising: congestion
    from the first window whose minimum is above the one before, and not earlier."""
    d = det()
    d.on_pause(True, 0)
    d.on_pause(False, 50)
    t0 = 100
    turn = t0 + 2 * W  # the base falls 5 B/ns until here (30000 -> 20000), then rises 5 B/ns

    def base(t: int) -> int:
        return 30_000 - 5 * (t - t0) if t <= turn else 20_000 + 5 * (t - turn)

    trace = [(t, onoff(t, base(t), t0, 15_000)) for t in range(t0, t0 + 6 * W + 1, 100)]
    assert min(q for _, q in trace) > K
    states = run(d, trace)
    # the window [turn, turn + W] still has the minimum 20000 of the one before (the boundary
    # dequeue belongs to both); the next window's minimum (25000) rose: congestion at turn + 2·W
    cong_at = turn + 2 * W
    assert states == [UND if t - t0 <= T else NON if t < cong_at else CONG for t, _ in trace]
    assert d.q_inc and d.q_prev == 35_000


# ------------------------------------------------------------------ undetermined
def test_pause_makes_undetermined_at_once():
    d = det()
    to_congestion(d)
    d.on_pause(True, 5_000)
    assert d.state is UND and d.blocked  # before any dequeue (our fix of the ns-3 port)
    assert list(d.timeline)[-1] == (5_000, int(UND))


def test_undetermined_for_t_on_max_after_the_first_dequeue_after_resume():
    d = det()
    d.on_pause(True, 100)
    d.on_pause(False, 500)
    assert d.state is UND and d.blocked  # the resume itself sets no t_resume
    assert d.on_dequeue(0, 800) is UND  # first dequeue after the block: t_resume = 800
    assert d.t_resume == 800
    assert d.on_dequeue(0, 800 + T) is UND  # not yet *more* than T_on^max
    assert d.on_dequeue(0, 800 + T + 1) is NON


def test_pause_expiry_without_resume_frame_counts_as_resume_at_first_dequeue():
    d = det()
    d.on_pause(True, 0)
    assert d.on_dequeue(0, 5_000) is UND  # the port sent: the pause is over
    assert d.t_resume == 5_000 and not d.paused
    assert d.on_dequeue(0, 5_000 + T + 1) is NON


def test_first_dequeue_after_a_block_compares_with_the_last_window_and_restarts_it():
    d = det()
    run(d, [(0, 0), (1_000, 5_000), (2_000, 8_000)])  # minima 0, 5000 (q_prev)
    assert d.q_prev == 5_000 and d.q_inc
    d.on_pause(True, 2_100)
    assert d.on_dequeue(3_000, 2_500) is UND  # the backlog found: below 5000
    assert not d.q_dec and not d.q_inc  # the trend restarts: nothing is known of the ON period yet
    assert d.q_prev == 3_000 and d.t_resume == 2_500  # the new reference, a new window from here
    d.on_dequeue(1_000, 3_000)  # inside the new window
    assert d.q_prev == 3_000
    d.on_dequeue(2_000, 3_500)  # window closed: its minimum 1000 < 3000
    assert d.q_prev == 1_000 and d.q_dec


def test_leaving_undetermined_long_draining_queue_is_non_congestion():
    d = det()
    d.on_pause(True, 0)
    d.on_pause(False, 100)
    d.on_dequeue(50_000, 200)  # the backlog built while paused; the window is re-anchored here
    assert d.state is UND
    assert d.on_dequeue(30_000, 200 + T + 1) is NON  # long, but draining: a victim, not a culprit
    assert d.q_dec and not d.q_inc


def test_leaving_undetermined_standing_queue_rising_is_congestion():
    d = det(window_ns=400)  # two windows close within T_on^max of the resume
    d.on_pause(True, 0)
    d.on_pause(False, 100)
    d.on_dequeue(50_000, 200)  # the reference, opening a window
    # the queue rises 1000 B every 100 ns: the window [200, 600] has the reference as its
    # minimum (no rise yet); the next, [600, 1000], has 54000 > 50000
    states = run(d, [(t, 50_000 + (t - 200) * 10) for t in range(300, 1_500, 100)])
    assert states[:-2] == [UND] * 10  # up to 1200 = t_resume + T
    assert states[-2:] == [CONG, CONG]  # 1300: continuously ON, long, standing queue rising
    assert d.q_inc


def test_leaving_undetermined_long_queue_without_a_trend_is_non_congestion():
    d = det()
    d.on_pause(True, 0)
    d.on_dequeue(50_000, 200)
    assert d.on_dequeue(60_000, 200 + T + 1) is NON  # the window's minimum is the reference itself
    assert not d.q_inc and not d.q_dec


def test_leaving_undetermined_short_queue_is_non_congestion():
    d = det()
    d.on_pause(True, 0)
    d.on_dequeue(50_000, 200)
    assert d.on_dequeue(K, 200 + T + 1) is NON


def test_back_to_back_pauses_keep_undetermined():
    d = det()
    t = 0
    for _ in range(10):
        d.on_pause(True, t)
        d.on_pause(False, t + 100)
        for dt in (150, 300, 600):
            assert d.on_dequeue(20_000, t + dt) is UND
        t += 900  # the next pause comes before T_on^max of ON time has passed
    assert d.c.transitions == 1 and d.c.pauses == 10


def test_congestion_and_non_congestion_go_undetermined_when_not_continuously_on():
    for cong in (False, True):
        d = det()
        if cong:
            t = to_congestion(d)
        else:
            t = 10
            d.on_dequeue(0, t)
        assert d.state is (CONG if cong else NON)
        d.on_pause(True, t + 10)
        d.on_pause(False, t + 20)
        d.state = CONG if cong else NON  # (as if the PAUSE had not relabelled it: the ns-3 path)
        assert d.on_dequeue(K + 1 if cong else 0, t + 30) is UND


def test_trend_is_the_window_minimum_not_a_single_sample():
    d = det(window_ns=1_000)
    d.on_dequeue(100, 0)  # closes the empty first window (minimum 0): q_prev 0
    assert d.q_prev == 0 and not d.q_inc and not d.q_dec
    d.on_dequeue(50, 10)  # inside the window [0, 1000): its minimum is 50
    d.on_dequeue(80, 999)
    assert d.q_prev == 0 and not d.q_inc  # nothing is compared inside a window
    d.on_dequeue(90, 1_000)  # due: minimum 50 > 0
    assert d.q_prev == 50 and d.q_inc and not d.q_dec
    d.on_dequeue(95, 1_500)
    d.on_dequeue(20, 1_800)
    assert d.q_prev == 50 and d.q_inc
    # due at 2000: the sample (200) is above the last boundary's (90), the window minimum (20)
    # is below the last window's (50): draining
    d.on_dequeue(200, 2_000)
    assert d.q_prev == 20 and d.q_dec and not d.q_inc
    d.on_dequeue(20, 3_500)  # late: the window [2000, 3500] closes at the first dequeue after its end
    assert d.q_prev == 20 and not d.q_dec and not d.q_inc


def test_initial_state_is_a_parameter():
    d = det(initial=UND)
    assert d.state is UND
    # a never-paused port is continuously ON: its first dequeue leaves undetermined, for
    # non-congestion (no window has shown a rising queue yet)
    assert d.on_dequeue(K + 1, 1) is NON
    assert d.on_dequeue(K + 1, 1_001) is CONG  # the window's minimum K+1 rose from empty
    assert det(initial=CONG).state is CONG


def test_time_in_state_sums_to_elapsed():
    d = Detector(TcdParams(T, K, W), 1_000)
    d.on_dequeue(K + 1, 2_000)  # NON (first dequeue: no trend)
    d.on_dequeue(K + 2, 3_000)  # window minimum K+1 rose: CONG at 3000 (NON 2000)
    d.on_pause(True, 5_000)  # CONG 2000
    d.on_dequeue(0, 7_000)  # UND from 5000
    d.on_dequeue(0, 9_000)  # > T after 7000: NON at 9000 (UND 4000)
    times = d.time_in_state(10_000)
    assert times == {"non_congestion": 2_000 + 1_000, "undetermined": 4_000, "congestion": 2_000}
    assert sum(times.values()) == 10_000 - 1_000


def test_time_never_goes_backwards():
    d = det()
    d.on_dequeue(K + 1, 1_000)
    assert d.on_dequeue(K + 2, 2_000) is CONG
    assert d.on_dequeue(0, 500) is NON  # taken at 2000
    assert d.c.clock_regressions == 1 and d.last_now == 2_000
    assert list(d.timeline)[-1] == (2_000, int(NON))
    assert sum(d.time_in_state(10).values()) == 2_000


def test_timeline_is_capped_and_counts_what_it_dropped():
    d = Detector(TcdParams(T, K, W), 0, timeline_cap=10)
    t = 0
    for _ in range(25):  # two changes each: PAUSE -> UND, then NON after T_on^max of sending
        d.on_pause(True, t)
        d.on_dequeue(0, t + 1)
        d.on_dequeue(0, t + T + 2)
        t += 2 * T
    assert len(d.timeline) == 10
    assert d.c.timeline_dropped == 1 + 50 - 10  # 51 entries (the start, 50 changes) kept 10
    assert d.c.transitions == 50
    assert list(d.timeline)[-1] == (t - 2 * T + T + 2, int(NON))


def test_status_is_json_able():
    import json

    d = det()
    d.on_pause(True, 10)
    json.dumps(d.status(100))
    assert d.status(100)["state"] == "undetermined"


# ---------------------------------------------------------------------------- hypothesis
#: (time step, event, queue): a resume's queue is the class queue it finds (0: the port is idle);
#: "timer" is the marker's timer, called only once the detector's deadline has come, as the switch does
EVENTS = st.lists(st.tuples(st.integers(-200, 3_000), st.sampled_from(["deq", "pause", "resume", "timer"]),
                            st.integers(0, 3 * K) | st.just(0)), max_size=200)


class Model:
    """The rules of the module docstring, written out plainly: the standing-queue trend per
    window and the state table."""

    def __init__(self, initial: PortState, window: int) -> None:
        self.state = initial
        self.window = window
        self.blocked = False
        self.t_resume: int | None = None
        self.q_prev = self.wmin = self.next = 0
        self.q_inc = self.q_dec = False

    def pause(self) -> None:
        self.blocked = True
        self.state = UND

    def resume(self, q: int, t: int) -> None:
        if self.blocked and q == 0:  # nothing to send: ON (and idle) from the resume on
            self._unblock(0, t)

    def _unblock(self, q: int, t: int) -> None:
        self.blocked = False
        self.t_resume = t
        self.q_dec = self.q_inc = False
        self.q_prev = self.wmin = q
        self.next = t + self.window

    def timer(self, q: int, t: int) -> PortState:
        """A re-evaluation without a dequeue: a dequeue's, but a blocked port stays blocked."""
        return self.state if self.blocked else self.dequeue(q, t)

    def dequeue(self, q: int, t: int) -> PortState:
        if self.blocked:  # a new window from the resume, its reference the queue found
            self._unblock(q, t)
        elif t >= self.next:  # the window is over: compare its minimum with the last one's
            m = min(self.wmin, q)
            self.q_dec, self.q_inc = m < self.q_prev, m > self.q_prev
            self.q_prev, self.wmin, self.next = m, q, t + self.window
        else:
            self.wmin = min(self.wmin, q)
        cont_on = self.t_resume is None or t - self.t_resume > T
        rising_long = q > K and self.q_inc
        if not cont_on:
            self.state = UND
        elif self.state is UND:
            self.state = CONG if rising_long else NON
        elif self.state is NON and rising_long:
            self.state = CONG
        elif self.state is CONG and q <= K:
            self.state = NON
        return self.state


@settings(max_examples=300, deadline=None)
@given(EVENTS, st.sampled_from(list(PortState)), st.integers(1, 3_000))
def test_arbitrary_traces_keep_the_invariants(events, initial, window):
    d = Detector(TcdParams(T, K, window, initial=initial), 0)
    model = Model(initial, window)
    now = 0
    latest = 0
    ever_paused = False
    for dt, kind, q in events:
        due = d.next_deadline()
        if kind == "timer" and (due is None or due > max(latest, now + dt)):
            continue  # the switch calls the timer only once it is due
        now += dt  # may go backwards: the detector takes the latest time
        latest = max(latest, now)
        before = d.state
        if kind == "pause":
            d.on_pause(True, now)
            model.pause()
            ever_paused = True
            assert d.state is UND
        elif kind == "resume":
            d.on_pause(False, now, q)
            model.resume(q, latest)
            assert d.state is before  # a resume changes no state (only when the OFF period ended)
        elif kind == "timer":
            assert d.on_timer(q, now) is model.timer(q, latest)
            # T_on^max after the OFF period ended the port is continuously ON: never undetermined
            assert d.state is not UND and d.next_deadline() is None
        else:
            state = d.on_dequeue(q, now)
            assert state is model.dequeue(q, latest)
            assert (d.q_prev, d.q_inc, d.q_dec) == (model.q_prev, model.q_inc, model.q_dec)
            assert state in PortState and state is d.state
            assert not (d.q_inc and d.q_dec)
            on_for = None if not ever_paused else latest - model.t_resume
            # never undetermined after a dequeue when not paused for more than T_on^max
            assert (state is UND) == (on_for is not None and on_for <= T)
            if state is CONG and before is not CONG:  # congestion only from a rising standing queue
                assert q > K and d.q_inc
        assert d.state is model.state  # exactly one state, the one the rules give
        times = d.time_in_state()
        assert sum(times.values()) == latest
        assert all(v >= 0 for v in times.values())
    assert sum(d.time_in_state(latest + 5).values()) == latest + 5
    due = d.next_deadline()
    if due is not None:  # an undetermined port that is ON leaves at its deadline, dequeue or not
        d.on_timer(0, max(due, latest))
        assert d.state is NON and sum(d.time_in_state().values()) == max(due, latest)
    assert d.timeline[0] == (0, int(initial))
    ts = [t for t, _ in d.timeline]
    assert ts == sorted(ts)


def test_a_trend_from_before_a_pause_does_not_decide_after_it():
    """W longer than T_on^max: when the port leaves undetermined no window since the resume has
    closed yet, and the rise measured before the pause must not label a draining backlog
    congestion (the trend restarts at the resume)."""
    d = det(window_ns=5 * T)
    run(d, [(0, 0), (5 * T, 20_000), (10 * T, 40_000)])  # (t, qlen): a rising standing queue, q_inc
    assert d.q_inc
    d.on_pause(True, 10 * T + 10)
    d.on_dequeue(60_000, 11 * T)  # resumed with the backlog
    assert d.on_dequeue(50_000, 12 * T + 1) is NON  # continuously ON again, long but draining
