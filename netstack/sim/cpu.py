"""A host CPU core in virtual time: what a message costs the process that sends or receives it.

Without it the simulator's hosts are infinitely fast: a process handles any number of messages per
second, so a benchmark shows the load it offered, never a capacity. 1Pipe's Fig. 8a (1Pipe:
Scalable Total Order Communication in Data Center Networks, §7.2) is a capacity: each process runs
on its own core and saturates it, and reliable 1Pipe delivers less than best effort because its
extra messages (prepare, ACK, commit; §4) cost that core CPU time.

:class:`HostCpu` is one core: a FIFO server. ``run(cost_ns, fn, *args)`` queues a job that occupies
the core for ``cost_ns`` after everything queued before it, then calls ``fn(*args)`` (the job's
effect: a frame leaves, a message is handed to the engine). Jobs complete in submission order and
never before their cost was spent. The core keeps ``busy_ns`` (work submitted), ``jobs`` and
``peak_backlog_ns`` (the longest wait a job saw: queueing delay plus its own cost); ``counters``
reports them with the utilisation over a window.

Model choice: **one core per process**, not per host. The paper reports throughput per process and
finds it flat from 2 to 512 processes (Fig. 8a, §7.2), although up to 32 processes each have a server
of their own and at 64-512 a server hosts up to 16 (§7.1: two 8-core Xeons a server, each process a
send thread and a receive thread). A core shared by a host's processes would make capacity fall as a
host carries more of them, which that flat curve rules out; per process, the sending and receiving
work share one core's time (the two threads' sum is what the process can sustain). A caller that wants
a per-host core creates one HostCpu per host and hands it to each of the host's processes: the class
does not care.

:meth:`charge` adds work found out only after a job ran (a timer wake-up that turned out to send many
datagrams): it occupies the core from then on, ahead of nothing already queued.

The core is not preemptive and has no priorities: a beacon or a timer queues behind the messages
submitted before it, as a single-threaded event loop on a real core would handle it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .loop import EventLoop


class HostCpu:
    """A core in virtual time: a FIFO server (one job at a time, in submission order)."""

    __slots__ = ("_free_at", "busy_ns", "jobs", "loop", "name", "peak_backlog_ns")

    def __init__(self, loop: EventLoop, name: str = "") -> None:
        self.loop = loop
        self.name = name
        #: core time of every job submitted so far (done or still queued)
        self.busy_ns = 0
        #: jobs submitted so far
        self.jobs = 0
        #: the largest (completion - submission) any job saw: its queueing delay plus its cost
        self.peak_backlog_ns = 0
        # when the last job queued so far completes (-1: never used; idle strictly before now)
        self._free_at = -1

    def run(self, cost_ns: int, fn: Callable[..., None], *args: Any) -> None:
        """Call fn(*args) once cost_ns of this core's time has been spent on it, after the work queued
        before it (cost_ns 0 with an idle core: at once, synchronously)."""
        now = self.loop.now
        free = self._free_at
        self.jobs += 1
        if cost_ns <= 0 and free < now:
            # idle core and no work: nothing can be queued (every earlier job completed before now),
            # so running it here keeps FIFO order and saves an event
            fn(*args)
            return
        start = free if free > now else now
        done = start + cost_ns
        self._free_at = done
        self.busy_ns += cost_ns
        wait = done - now
        if wait > self.peak_backlog_ns:
            self.peak_backlog_ns = wait
        # completion times never decrease and the loop runs equal times in scheduling order: FIFO
        self.loop.call_at(done, fn, *args)

    def charge(self, cost_ns: int) -> None:
        """Core time spent now on work whose cost is known only once a job has run (what it turned
        out to emit): it delays every job submitted from now on, as if queued at the back; jobs
        already queued keep their times. Busy time and FIFO order are kept."""
        if cost_ns <= 0:
            return
        now = self.loop.now
        free = self._free_at if self._free_at > now else now
        self._free_at = free + cost_ns
        self.busy_ns += cost_ns
        if self._free_at - now > self.peak_backlog_ns:
            self.peak_backlog_ns = self._free_at - now

    def backlog_ns(self) -> int:
        """Core time still owed at now: 0 when idle (a sender can hold back while it is large)."""
        free = self._free_at - self.loop.now
        return free if free > 0 else 0

    def idle_at(self) -> int:
        """When the core has completed everything queued so far (now when idle)."""
        return max(self._free_at, self.loop.now)

    def done_ns(self) -> int:
        """Core time spent by now: submitted work minus what is still owed."""
        return self.busy_ns - self.backlog_ns()

    def counters(self, elapsed_ns: int) -> dict[str, Any]:
        """busy_ns, jobs, utilisation (core time spent by now over ``elapsed_ns``, at most 1),
        peak_backlog_ns and backlog_ns (still owed at now: a saturated core ends with a backlog)."""
        done = self.done_ns()
        return {"busy_ns": self.busy_ns, "jobs": self.jobs,
                "utilisation": min(1.0, done / elapsed_ns) if elapsed_ns > 0 else 0.0,
                "peak_backlog_ns": self.peak_backlog_ns, "backlog_ns": self.backlog_ns()}


__all__ = ["HostCpu"]
