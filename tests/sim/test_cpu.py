"""The host CPU model (netstack.sim.cpu.HostCpu): a FIFO server in virtual time. Jobs complete in
submission order, none before its cost was spent after the work queued before it, and the core
accounts for every nanosecond it was given."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.sim.cpu import HostCpu
from netstack.sim.loop import EventLoop


def test_jobs_queue_behind_each_other_and_run_in_order() -> None:
    loop = EventLoop()
    cpu = HostCpu(loop, "p1")
    done: list[tuple[str, int]] = []
    cpu.run(100, lambda: done.append(("a", loop.now)))
    cpu.run(50, lambda: done.append(("b", loop.now)))
    assert cpu.backlog_ns() == 150 and cpu.idle_at() == 150
    loop.run()
    assert done == [("a", 100), ("b", 150)]
    assert cpu.busy_ns == 150 and cpu.jobs == 2 and cpu.peak_backlog_ns == 150
    assert cpu.backlog_ns() == 0


def test_an_idle_core_starts_at_once_and_free_work_on_it_is_synchronous() -> None:
    loop = EventLoop(start_ns=1_000)
    cpu = HostCpu(loop)
    done: list[int] = []
    cpu.run(0, done.append, 1)
    assert done == [1]  # nothing queued: called before run() returns
    cpu.run(10, done.append, 2)
    cpu.run(0, done.append, 3)  # free, but behind job 2: FIFO
    assert done == [1]
    loop.run()
    assert done == [1, 2, 3] and loop.now == 1_010


def test_a_job_submitted_after_the_core_went_idle_does_not_wait() -> None:
    loop = EventLoop()
    cpu = HostCpu(loop)
    seen: list[int] = []
    cpu.run(10, seen.append, 0)
    loop.call_at(500, cpu.run, 20, lambda: seen.append(loop.now))
    loop.run()
    assert seen == [0, 520]
    assert cpu.busy_ns == 30 and cpu.peak_backlog_ns == 20


def test_counters_report_the_work_done_in_the_elapsed_time() -> None:
    loop = EventLoop()
    cpu = HostCpu(loop, "p")
    for _ in range(4):
        cpu.run(250, lambda: None)
    loop.run(until_ns=500)
    c = cpu.counters(500)
    assert c["busy_ns"] == 1_000 and c["jobs"] == 4 and c["backlog_ns"] == 500
    assert c["utilisation"] == 1.0  # 500 ns done in 500 ns; the rest is still owed
    loop.run(until_ns=2_000)
    assert cpu.counters(2_000)["utilisation"] == 0.5 and cpu.counters(0)["utilisation"] == 0.0


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2_000), st.integers(0, 300)), max_size=60))
def test_jobs_complete_in_order_and_never_before_their_cost_is_spent(jobs: list[tuple[int, int]]) -> None:
    """Submissions at random times with random costs: completions come in submission order, each
    exactly when the core, working without pause, has done it and everything before it."""
    loop = EventLoop()
    cpu = HostCpu(loop)
    submitted: list[tuple[int, int, int]] = []  # (submission time, cost, id), in submission order
    completed: list[tuple[int, int]] = []  # (id, time)

    def submit(i: int, cost: int) -> None:
        submitted.append((loop.now, cost, i))
        cpu.run(cost, lambda: completed.append((i, loop.now)))

    for i, (t, cost) in enumerate(jobs):
        loop.call_at(t, submit, i, cost)
    loop.run()
    assert [i for i, _ in completed] == [i for _, _, i in submitted]
    free = -1
    for (t, cost, _), (_, at) in zip(submitted, completed, strict=True):
        assert at >= t + cost  # no job before its own cost was spent
        expect = max(free, t) + cost if cost or free >= t else t  # free work on an idle core: at once
        assert at == expect
        free = max(free, at) if cost or free >= t else free
    assert cpu.busy_ns == sum(c for _, c in jobs) and cpu.jobs == len(jobs)
    assert cpu.peak_backlog_ns == max([at - t for (t, _, _), (_, at) in zip(submitted, completed, strict=True)],
                                      default=0)


def test_work_charged_after_a_job_delays_what_is_submitted_next() -> None:
    loop = EventLoop()
    cpu = HostCpu(loop)
    seen: list[tuple[str, int]] = []

    def first() -> None:
        seen.append(("first", loop.now))
        cpu.charge(40)  # it turned out to send more: the core is busy 40 ns longer
        cpu.run(10, lambda: seen.append(("next", loop.now)))

    cpu.run(100, first)
    cpu.run(5, lambda: seen.append(("queued", loop.now)))  # already queued: keeps its time
    loop.run()
    assert seen == [("first", 100), ("queued", 105), ("next", 155)]
    assert cpu.busy_ns == 155 and cpu.jobs == 3
