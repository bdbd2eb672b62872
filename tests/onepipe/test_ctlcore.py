"""The reliable controller's one core in virtual time (netstack/onepipe/ctlcore.py): one input at a
time, a datagram at its cost; what handling an input sends goes out, each at the same cost, before
the next input is read; nothing is charged before ``start_ns``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.onepipe.ctlcore import ControllerCore
from netstack.sim.loop import EventLoop

MSG = 10


def _core(start: int = 0) -> tuple[EventLoop, ControllerCore, list[tuple[int, str]]]:
    loop = EventLoop()
    return loop, ControllerCore(loop, MSG, start_ns=start), []


def test_the_replies_to_an_input_leave_before_the_next_input_is_read() -> None:
    loop, core, log = _core()

    def handle(name: str, replies: int) -> None:
        log.append((loop.now, f"in {name}"))
        for i in range(replies):
            core.send(lambda i=i: log.append((loop.now, f"out {name}{i}")))

    loop.call_at(0, core.submit, MSG, handle, "a", 2)
    loop.call_at(5, core.submit, MSG, handle, "b", 1)  # arrives while a is read
    loop.call_at(6, core.submit, 0, handle, "timer", 0)  # no cost, but queued all the same
    loop.run()
    assert log == [(10, "in a"), (20, "out a0"), (30, "out a1"), (40, "in b"), (50, "out b0"), (50, "in timer")]
    c = core.counters(50)
    assert (c["busy_ns"], c["inputs"], c["sent"], c["queued"]) == (5 * MSG, 3, 3, 0)
    assert c["peak_wait_ns"] == 44  # the timer: queued at 6, handled at 50


def test_before_its_start_the_core_takes_no_time() -> None:
    loop, core, log = _core(start=100)
    loop.call_at(0, core.submit, MSG, lambda: core.send(lambda: log.append((loop.now, "out"))))
    loop.run()
    assert log == [(0, "out")] and core.busy_ns == 0 and core.counters(100)["utilisation"] == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200), st.sampled_from([0, MSG]), st.integers(0, 3)), max_size=20))
def test_one_thing_at_a_time_in_arrival_order(inputs: list[tuple[int, int, int]]) -> None:
    """Whatever arrives when: inputs are handled in arrival order, none before it arrived and was
    read, the core never does two things at once, and it is busy exactly for what it did."""
    loop, core, _ = _core()
    arrivals = sorted(enumerate(inputs), key=lambda x: (x[1][0], x[0]))
    handled: list[tuple[int, int]] = []
    sends: list[int] = []

    def handle(i: int, n: int) -> None:
        handled.append((i, loop.now))
        for _ in range(n):
            core.send(lambda: sends.append(loop.now))

    for i, (t, cost, n) in arrivals:
        loop.call_at(t, core.submit, cost, handle, i, n)
    loop.run()
    assert [i for i, _ in handled] == [i for i, _ in arrivals]
    by = dict(handled)
    assert all(by[i] >= t + cost for i, (t, cost, _) in arrivals)
    events = sorted([*by.values(), *sends])
    assert len(set(sends)) == len(sends)  # one datagram at a time
    assert core.busy_ns == sum(cost for _, cost, _ in inputs) + MSG * sum(n for _, _, n in inputs)
    assert not events or events[-1] >= core.busy_ns
