"""What one frame can cost the receiver (issue 34, finding 6; docs/linkguardian.md "Holes").

A data tag is not sealed: whoever can put a frame on the protected link chooses its seq_no, up to
the sender's window ahead of ``expected``. The receiver keeps its open holes as runs, so one such
tag costs it a bounded amount of work whatever the width of the gap it reveals: one hole record,
ceil(gap / 255) loss notifications, and no walk over the gap's counters when the hole is filled,
expires or is abandoned.

Work is measured without a clock: the hole records the engine keeps, and the Python lines it runs
(``sys.settrace`` line events in netstack/linkguardian/receiver.py), which do not depend on the
machine's speed or load. Before the runs, one far-ahead tag left 3,332 records and ran about
10,000 lines (a genuine frame: about 40), and its ackNoTimeout about 43,000.

The hypothesis test drives the engine and a small per-frame reference model (plain sets, written
from the module docstring and Algorithm 1) with random tags and timers: loss, reordering,
duplicates, jumps ahead and behind (inside the window, beyond it, resyncs), mode switches, both
eras of a 16-bit seq space that wraps, the window overflowing. They must deliver the same frames,
send the same notifications and leading ACKs, and count the same.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headers.linkguardian import DATA_BLOCKING, DATA_DUMMY, DATA_RETX, LGLossNotification, decode_tag, unwrap, wrap
from headers.registry import MIN_FRAME
from netstack.engine import Transmit
from netstack.linkguardian import LGParams, LGReceiver
from netstack.linkguardian import receiver as receiver_module
from netstack.linkguardian.receiver import (
    FRESH_SLACK,
    MAX_HOLE_PER_NOTIFICATION,
    MAX_NOTIFICATIONS_PER_FRAME,
    RESTART_BEHIND,
    RESYNC_BEHIND,
    RESYNC_DISTANCE,
)

from . import frame, index_of, stamp_for

P = LGParams()  # the paper's 100G settings: a 200 KB Tx buffer
WINDOW = P.tx_buffer_limit_bytes // MIN_FRAME  # 3,333 minimum-size frames


def lines_run(fn: Callable[..., Any], *args: Any) -> tuple[int, Any]:
    """(how many lines of receiver.py ``fn(*args)`` ran, its result): a deterministic measure of work."""
    target = receiver_module.__file__
    count = 0

    def local(frame_, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame_, event, arg):
        return local if frame_.f_code.co_filename == target else None

    before = sys.gettrace()
    sys.settrace(calls)
    try:
        out = fn(*args)
    finally:
        sys.settrace(before)
    return count, out


def notices(r: LGReceiver) -> list[LGLossNotification]:
    out = [decode_tag(a.data, 14) for a in r.actions.take(Transmit)]
    assert all(isinstance(n, LGLossNotification) for n in out)
    return out  # type: ignore[return-value]


def _stream(mode: str, rate: int | None, n: int = 50) -> tuple[LGReceiver, int]:
    p = P.with_changes(mode=mode, recirc_rate_bps=rate)
    r = LGReceiver(p)
    blocking = int(mode == "blocking")
    for i in range(n):
        r.receive(stamp_for(i, frame(i), blocking=blocking), i)
    r.actions.take_all()
    return r, blocking


#: lines a frame may run besides its notifications, and per notification (genuine: ~40 lines)
BASE_LINES, LINES_PER_NOTICE = 200, 12


# --------------------------------------------------------------------- one forged tag
@pytest.mark.parametrize("mode", ["blocking", "nb"])
@pytest.mark.parametrize("rate", [0, 100_000_000_000])
def test_one_tag_just_inside_the_window_costs_one_hole_record_and_bounded_work(mode, rate):
    r, blocking = _stream(mode, rate)
    genuine, _ = lines_run(r.receive, stamp_for(50, frame(50), blocking=blocking), 50)
    far = 51 + WINDOW - 1  # the farthest seq_no still taken as a hole
    work, _ = lines_run(r.receive, stamp_for(far, frame(far), blocking=blocking), 51)
    gap = WINDOW - 1
    assert r.counters()["open_holes"] == gap and r.c.max_hole == gap and r.c.holes_detected == 1
    assert len(r._holes) == 1 and r.hole_runs() == [(51, far)]  # before: 3,332 records
    sent = notices(r)
    assert len(sent) == -(-gap // MAX_HOLE_PER_NOTIFICATION) == 14
    assert sum(n.hole_size for n in sent) == gap
    assert genuine <= BASE_LINES
    assert work <= BASE_LINES + LINES_PER_NOTICE * len(sent)  # before: ~10,000 lines

    # a retransmission in the middle splits the run: two records, a few lines
    work, _ = lines_run(r.receive, stamp_for(1000, frame(1000), retx=1, blocking=blocking), 52)
    assert r.hole_runs() == [(51, 1000), (1001, far)] and r.c.holes_filled == 1
    assert work <= BASE_LINES

    # ackNoTimeout gives up both runs at once, and in blocking mode ack_no passes them in one jump
    work, out = lines_run(r.on_timer, 51 + P.ack_no_timeout_ns)
    assert r.c.timeouts == gap - 1 and r._holes == [] and r.counters()["open_holes"] == 0
    assert work <= BASE_LINES  # before: ~43,000 lines
    while (deadline := r.next_deadline()) is not None:  # the recirculation port's passes, if any
        out += r.on_timer(deadline)
    if mode == "blocking":
        assert [index_of(f) for f in out] == [1000, far] and r.ack_no == far + 1
    assert r.leading_ack == far


def test_back_to_back_far_tags_keep_two_records_and_abandon_in_bounded_work():
    """The hole bomb of test_attacks.py: every tag a window ahead of the last. Before, each one
    walked the 3,332 holes it abandoned and the 3,332 it opened."""
    r = LGReceiver(P)
    c = 0
    for i in range(50):
        c += WINDOW - 1
        work, _ = lines_run(r.receive, stamp_for(c, frame(i)), i)
        sent = notices(r)
        assert len(sent) <= -(-WINDOW // MAX_HOLE_PER_NOTIFICATION)
        assert work <= BASE_LINES + LINES_PER_NOTICE * len(sent)
        assert len(r._holes) <= 2 and r.counters()["open_holes"] <= WINDOW
    assert r.c.holes_abandoned > 0 and r.c.holes_abandoned + r.counters()["open_holes"] == r.c.lost_detected


def test_ack_no_steps_over_given_up_holes_in_one_jump_with_frames_held():
    """A frame held beyond a wide given-up hole: ack_no reaches it without visiting the counters
    in between (before: one dict look-up per counter)."""
    r = LGReceiver(P)
    r.receive(stamp_for(0, frame(0)), 0)
    r.receive(stamp_for(3000, frame(3000)), 1)  # held behind holes 1..2999
    r.receive(stamp_for(3001, frame(3001)), 2)
    assert r.held() == [3000, 3001] and r.hole_runs() == [(1, 3000)]
    work, out = lines_run(r.on_timer, 1 + P.ack_no_timeout_ns)
    assert [index_of(f) for f in out] == [3000, 3001] and r.ack_no == 3002 and r.leading_ack == 3001
    assert work <= BASE_LINES


@pytest.mark.parametrize("tx_buffer", [MIN_FRAME * 10, 200_000, 10**9])
def test_one_frame_sends_at_most_a_windows_worth_of_notifications(tx_buffer):
    """ceil(gap / 255) notifications, the gap at most the sender's window (and never more than
    RESYNC_DISTANCE): 65 whatever the parameters; one tag further is a resync, no notification."""
    p = P.with_changes(tx_buffer_limit_bytes=tx_buffer)
    ahead = min(RESYNC_DISTANCE, tx_buffer // MIN_FRAME)
    r = LGReceiver(p)
    r.receive(stamp_for(0, frame(0)), 0)
    work, _ = lines_run(r.receive, stamp_for(ahead + 1, frame(1)), 1)  # a gap of ``ahead``
    sent = notices(r)
    assert len(sent) == -(-ahead // MAX_HOLE_PER_NOTIFICATION) <= MAX_NOTIFICATIONS_PER_FRAME == 65
    assert len(r._holes) == 1 and work <= BASE_LINES + LINES_PER_NOTICE * len(sent)
    r.receive(stamp_for(2 * ahead + 3, frame(2)), 2)  # one beyond the window: a new stream
    assert notices(r) == [] and r.c.resyncs == 1


# ------------------------------------------------------------- the per-frame reference
class Model:
    """The receiver with one record per frame (sets and dicts), recirculation off (rate 0) and
    backpressure off: what the engine must still do with its runs."""

    def __init__(self, p: LGParams, start: int) -> None:
        self.window = max(1, p.tx_buffer_limit_bytes // MIN_FRAME)
        self.ahead = min(RESYNC_DISTANCE, self.window)
        self.timeout = p.ack_no_timeout_ns
        self.rob_limit = p.reorder_buffer_limit_bytes
        self.blocking = p.blocking
        self.fresh, self.synced = True, True
        self.expected = self.ack_no = start
        self.leading_ack = start - 1
        self.holes: dict[int, int] = {}  # counter -> detected
        self.rob: dict[int, bytes] = {}
        self.rob_bytes = 0
        self.sent: list[tuple[int, int, int]] = []  # (leading_ack, hole_size, first_lost_seq)
        self.c = dict.fromkeys(COUNTED, 0)

    def _deliver_in_order(self, out: list[bytes]) -> None:
        while self.ack_no < self.expected and self.ack_no not in self.holes:
            f = self.rob.pop(self.ack_no, None)
            if f is not None:
                out.append(f)
                self.rob_bytes -= len(f)
            self.ack_no += 1

    def _release(self, out: list[bytes]) -> None:
        out.extend(self.rob[k] for k in sorted(self.rob))
        self.rob.clear()
        self.rob_bytes = 0
        self.ack_no = self.expected

    def _give_up(self, counters: list[int], key: str, out: list[bytes]) -> None:
        for h in counters:
            del self.holes[h]
        self.c[key] += len(counters)
        if self.blocking:
            self._deliver_in_order(out)
            self.leading_ack = self.ack_no - 1

    def data(self, first: int, seq: int, inner: bytes | None, now: int) -> list[bytes]:
        out: list[bytes] = []
        s = unwrap(first >> 4 & 1, seq, self.expected)
        if self.fresh:
            self.fresh = False
            if self.synced and s - self.expected > FRESH_SLACK:
                self.c["resyncs"] += 1
                self.synced = False
        d = s - self.expected
        if not self.synced or (d > self.ahead or (d < -RESYNC_BEHIND and s not in self.holes)
                               or (d < -RESTART_BEHIND and not first & DATA_RETX and s not in self.holes)):
            if self.synced:
                self.c["resyncs"] += 1
                self._release(out)
                self.holes.clear()
            self.synced = True
            self.expected = self.ack_no = s
            self.leading_ack = s - 1
        if bool(first & DATA_BLOCKING) != self.blocking:
            if self.blocking:
                self._release(out)
            else:
                self.ack_no = min(self.holes, default=self.expected)
            self.blocking = not self.blocking
        if s > self.expected:
            gap = list(range(self.expected, s))
            self.c["holes_detected"] += 1
            self.c["lost_detected"] += len(gap)
            self.c["max_hole"] = max(self.c["max_hole"], len(gap))
            for i in range(0, len(gap), MAX_HOLE_PER_NOTIFICATION):
                part = gap[i:i + MAX_HOLE_PER_NOTIFICATION]
                self.sent.append((self.leading_ack & 0xFFFF, len(part), part[0] & 0xFFFF))
            self.holes.update(dict.fromkeys(gap, now))
            self.expected = s
            if len(self.holes) > self.window:
                self._give_up(sorted(self.holes)[:len(self.holes) - self.window], "holes_abandoned", out)
        if first & DATA_DUMMY:
            return out
        if s == self.expected:
            self.expected = s + 1
        elif s in self.holes:
            del self.holes[s]
            self.c["holes_filled"] += 1
        else:
            self.c["duplicates"] += 1
            return out
        inner = inner or b""
        if not self.blocking:
            out.append(inner)
            self.leading_ack = min(self.holes, default=self.expected) - 1
            return out
        if s == self.ack_no:
            out.append(inner)
            self.ack_no += 1
            self._deliver_in_order(out)
        elif self.rob_bytes + len(inner) <= self.rob_limit:
            self.rob[s] = inner
            self.rob_bytes += len(inner)
        else:
            self.c["reorder_drops"] += 1
        self.leading_ack = self.ack_no - 1
        return out

    def timer(self, now: int) -> list[bytes]:
        """ackNoTimeout: every hole detected ``timeout`` or longer ago is given up."""
        out: list[bytes] = []
        self._give_up(sorted(h for h, t in self.holes.items() if t + self.timeout <= now), "timeouts", out)
        if not self.blocking:
            self.leading_ack = min(self.holes, default=self.expected) - 1
        return out


COUNTED = ("holes_detected", "lost_detected", "max_hole", "holes_filled", "timeouts", "holes_abandoned",
           "duplicates", "resyncs", "reorder_drops")

TIMEOUT = 1_000
#: where a tag's counter lies, relative to ``expected`` (the window is 8 or 40 frames here)
OFFSETS = st.one_of(
    st.integers(0, 3),  # in order, or a small loss before it
    st.integers(0, 3),
    st.integers(1, 9),  # gaps across the small window (abandoned when more are open than it holds)
    st.integers(-6, 45),  # late copies, gaps across the larger window
    st.sampled_from([-RESYNC_BEHIND - 1, -RESTART_BEHIND - 1, -RESTART_BEHIND, RESYNC_DISTANCE + 1, FRESH_SLACK + 1]),
)
EVENTS = st.lists(st.one_of(
    st.tuples(st.just("tag"), OFFSETS, st.booleans(), st.integers(0, 9), st.integers(0, 30)),
    st.tuples(st.just("repair"), st.integers(0, 1000), st.booleans(), st.just(0), st.integers(0, 30)),
    st.tuples(st.just("timer"), st.sampled_from([0, TIMEOUT // 2, TIMEOUT, 3 * TIMEOUT]), st.just(False),
              st.just(0), st.just(0)),
), min_size=10, max_size=150)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=EVENTS, mode=st.sampled_from(["blocking", "nb"]), window=st.sampled_from([8, 40]),
       start=st.sampled_from([0, 65_536 - 20, 131_072 - 20, 5]), rob_limit=st.sampled_from([250, 10**6]),
       sizes=st.sampled_from([60, 100]))
def test_runs_deliver_notify_ack_and_count_as_one_record_per_frame(events, mode, window, start, rob_limit, sizes):
    p = LGParams(mode=mode, ack_no_timeout_ns=TIMEOUT, tx_buffer_limit_bytes=window * MIN_FRAME,
                 reorder_buffer_limit_bytes=rob_limit, backpressure=False, recirc_rate_bps=0)
    r, m = LGReceiver(p, start=start), Model(p, start)
    now = 0
    blocking = p.blocking
    for kind, where, retx, flags, dt in events:
        now += dt
        if kind == "timer":
            now += where
            got, want = r.on_timer(now), m.timer(now)
        else:
            if kind == "repair":  # a retransmission of an open hole, if there is one
                if not m.holes:
                    continue
                counter = sorted(m.holes)[where % len(m.holes)]
            else:
                counter = max(0, m.expected + where)
                if flags == 9:  # now and then the sender switches mode (§3.5)
                    blocking = not blocking
            dummy = kind == "tag" and flags == 8
            era, seq = wrap(counter)
            first = (era << 4 | (DATA_BLOCKING if blocking else 0) | (DATA_RETX if retx or kind == "repair" else 0)
                     | (DATA_DUMMY if dummy else 0))
            inner = None if dummy else frame(counter, sizes)
            got, want = r.on_data(first, seq, inner, now), m.data(first, seq, inner, now)
        assert [index_of(f) for f in got] == [index_of(f) for f in want]
        assert [(n.leading_ack, n.hole_size, n.first_lost_seq) for n in notices(r)] == m.sent
        m.sent.clear()
        assert r.leading_ack == m.leading_ack and r.expected == m.expected
        if r.blocking:
            assert r.ack_no == m.ack_no and r.held() == sorted(m.rob)
        assert r.holes() == sorted(m.holes) and r.counters()["open_holes"] == len(m.holes)
        assert {k: getattr(r.c, k) for k in COUNTED} == m.c
        # the runs: ascending, disjoint (a dummy can leave two touching), none empty, never more than the holes
        runs = r.hole_runs()
        assert all(a < b for a, b in runs) and all(b <= a2 for (_, b), (a2, _) in pairwise(runs))
        assert len(r._holes) <= len(m.holes)


class CountingBuffer(dict):
    """A Tx buffer that counts the look-ups that found nothing."""

    misses = 0

    def pop(self, *args: Any) -> Any:
        if args[0] not in self:
            type(self).misses += 1
        return super().pop(*args)


def test_the_sender_looks_up_only_counters_it_ever_buffered():
    """The other end of a forged far-ahead tag: the receiver's (sealed, genuine) notifications
    name up to a window of counters the sender never sent. Each was a Tx-buffer look-up (3,333 per
    forged tag, on the other switch); now counters at or below the leading ACK or at or above the
    next counter are counted as not buffered without one. What is retransmitted is unchanged."""
    from netstack.linkguardian import LGSender

    s = LGSender(P)
    s._buf = CountingBuffer()
    for i in range(10):
        s.stamp(frame(i))
    era, _ = wrap(s.next_counter - 1)
    a = s.leading_ack
    lack_era, lack = wrap(a) if a >= 0 else (era, 0)
    CountingBuffer.misses = 0
    out = s.on_loss_notification(lack_era, lack, 255, wrap(s.next_counter + 5)[1])  # never sent
    assert out == [] and s.c.holes_not_buffered == 255 and CountingBuffer.misses == 0
    out = s.on_loss_notification(lack_era, lack, 255, wrap(s.next_counter - 3)[1])  # 3 sent, 252 not
    assert len(out) == 3 * s.copies and s.c.retx_frames == 3 and s.c.holes_not_buffered == 255 + 252
    assert CountingBuffer.misses == 0
