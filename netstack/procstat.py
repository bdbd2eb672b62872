"""A process as ``/proc/<pid>/stat`` describes it: its state letter and when it started.

Several parts of netstack decide whether a pid still is the process they started (``down``, a
fault, a lab's teardown) or what it is doing (a zombie, a frozen daemon). They read the same
file the same way, here. The command name (field 2) is in parentheses and may hold spaces or
parentheses itself, so the fields are counted from the *last* ``)``.
"""

from __future__ import annotations

from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from the state (field 3) on; None when there is no such
    process (or it could not be read)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def state(pid: int) -> str:
    """Process ``pid``'s state letter (``R``, ``S``, ``T`` stopped, ``Z`` zombie...); "" when gone."""
    fields = stat_fields(pid)
    return fields[0] if fields else ""


def start_of(fields: list[str] | None) -> int:
    """The start time (field 22, clock ticks since boot) in :func:`stat_fields`'s ``fields``; 0
    without them."""
    try:
        return int(fields[19]) if fields else 0
    except (IndexError, ValueError):
        return 0


def process_start(pid: int) -> int:
    """When process ``pid`` started, in clock ticks since boot (field 22); 0 when there is no such
    process. With the pid it names one process: a pid is reused once its process is gone."""
    return start_of(stat_fields(pid))


__all__ = ["process_start", "start_of", "stat_fields", "state"]
