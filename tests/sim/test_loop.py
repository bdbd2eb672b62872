"""The event loop: time order, FIFO among equal times, nothing in the past, time that cannot stick."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack.sim.loop import EventLoop, SimError


@given(st.lists(st.integers(0, 10_000), max_size=200))
def test_events_run_in_time_order_and_fifo_at_equal_times(times):
    loop = EventLoop()
    ran = []
    for i, t in enumerate(times):
        loop.call_at(t, ran.append, (t, i))
    loop.run()
    assert ran == sorted(ran)  # by time, then by the order they were scheduled
    assert loop.events == len(times) and loop.pending() == 0
    assert loop.now == (max(times) if times else 0)


def test_an_event_in_the_past_is_refused():
    loop = EventLoop()
    loop.call_at(100, lambda: loop.call_at(50, print))
    with pytest.raises(SimError, match="before now"):
        loop.run()


def test_until_stops_before_later_events_and_lets_time_pass():
    loop = EventLoop()
    ran = []
    for t in (10, 20, 30):
        loop.call_at(t, ran.append, t)
    assert loop.run(until_ns=25) == 25 and ran == [10, 20]
    assert loop.next_time() == 30
    assert loop.run(max_events=1) == 30 and ran == [10, 20, 30]
    assert loop.run(until_ns=1_000) == 1_000  # nothing left: the clock still moves to the horizon


def test_callbacks_schedule_more_and_call_later_is_relative():
    loop = EventLoop()
    ran = []

    def tick(n):
        ran.append((loop.now, n))
        if n:
            loop.call_later(7, tick, n - 1)

    loop.call_at(3, tick, 3)
    loop.run()
    assert ran == [(3, 3), (10, 2), (17, 1), (24, 0)]


def test_time_that_does_not_move_is_an_error():
    loop = EventLoop()
    loop.stuck_limit = 1000

    def spin():
        loop.call_at(loop.now, spin)

    loop.call_at(5, spin)
    with pytest.raises(SimError, match="stuck at 5 ns"):
        loop.run()
