"""Who used the CPUs during a measurement: the measurement's own processes, or other work.

A throughput benchmark keeps its own processes busy on purpose, so their scheduling delay says
nothing about whether the machine was shared; what does is CPU time the measurement did not
use itself. :class:`CpuWindow` reads ``/proc/stat`` (all CPUs) and ``/proc/PID/stat`` of the
measurement's processes before and after: ``foreign_share`` is the share of all CPU time that
went to other processes (user + system time not charged to ours) or was stolen by the
hypervisor. The kernel's softirq work (veth delivery, which the measurement causes) is not
counted as foreign. Linux only; elsewhere the window reports nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

#: /proc/stat's "cpu" line: user nice system idle iowait irq softirq steal ...
_USER, _NICE, _SYSTEM, _IDLE, _IOWAIT, _IRQ, _SOFTIRQ, _STEAL = range(8)


def system_times() -> list[int] | None:
    """The "cpu" line of /proc/stat in clock ticks (None when unreadable)."""
    try:
        with open("/proc/stat") as f:
            first = f.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu":
        return None
    return [int(x) for x in first[1:9]] + [0] * max(0, 8 - len(first[1:9]))


def process_ticks(pid: int) -> int:
    """user + system clock ticks of ``pid`` (all its threads); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return 0
    # the command name may contain spaces and parentheses: the fields start after the last ')'
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of proc(5))


def _children_ticks() -> int:
    """Clock ticks of this process's ended and reaped children (os.times)."""
    t = os.times()
    return round((t.children_user + t.children_system) * os.sysconf("SC_CLK_TCK"))


class CpuWindow:
    """CPU use between :meth:`start` and :meth:`stop`; ``pids()`` names the measurement's own
    processes (asked at both ends: a process may start after :meth:`start`). Children of this
    process that end and are reaped inside the window count as its own too (their time has left
    /proc for this process's children's times, which cannot tell one child from another)."""

    def __init__(self, pids: Callable[[], Iterable[int]]) -> None:
        self._pids = pids
        self._sys0: list[int] | None = None
        self._mine0: dict[int, int] = {}
        self._children0 = 0

    def start(self) -> CpuWindow:
        self._sys0 = system_times()
        self._mine0 = {p: process_ticks(p) for p in self._pids()}
        self._children0 = _children_ticks()
        return self

    def stop(self) -> dict[str, Any]:
        """``{"foreign_share", "ours_share", "softirq_share", "idle_share", "cpus"}``, shares of
        all CPU time in the window; {} when /proc/stat could not be read."""
        sys1 = system_times()
        if self._sys0 is None or sys1 is None:
            return {}
        now = {p: process_ticks(p) for p in set(self._pids()) | set(self._mine0)}
        mine = sum(max(0, t - self._mine0.get(p, 0)) for p, t in now.items() if t)
        # a child that ended meanwhile (the generator, reaped) has left /proc: its ticks are in our
        # children's times, minus what it had used before the window
        gone = sum(self._mine0.get(p, 0) for p, t in now.items() if not t)
        mine += max(0, _children_ticks() - self._children0 - gone)
        d = [b - a for a, b in zip(self._sys0, sys1, strict=True)]
        total = sum(d) or 1
        tasks = d[_USER] + d[_NICE] + d[_SYSTEM]
        foreign = max(0, tasks - mine) + d[_STEAL]
        return {"foreign_share": round(foreign / total, 4), "ours_share": round(min(mine, tasks) / total, 4),
                "softirq_share": round((d[_SOFTIRQ] + d[_IRQ]) / total, 4),
                "idle_share": round((d[_IDLE] + d[_IOWAIT]) / total, 4), "cpus": os.cpu_count() or 1}


__all__ = ["CpuWindow", "process_ticks", "system_times"]
