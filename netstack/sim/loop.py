"""The event loop of the virtual-time runtime: one heap of timed callbacks and a clock in ns.

Nothing here sleeps. ``now`` jumps from one event to the next; callbacks run in time order,
and callbacks due at the same nanosecond run in the order they were scheduled (a sequence
number breaks the tie), so a run is a pure function of its inputs and its seed.

An event scheduled before ``now`` is a bug in the model that scheduled it (a frame would
arrive before it was sent): :meth:`EventLoop.call_at` refuses it with :class:`SimError`
instead of silently reordering time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class SimError(RuntimeError):
    """The simulation became inconsistent: an event in the past, or time stuck at one instant."""


#: Events at one nanosecond after which the loop declares time stuck (a model that keeps
#: re-scheduling itself at ``now`` would otherwise spin forever).
STUCK_EVENTS = 1_000_000


class EventLoop:
    """A discrete-event scheduler. ``call_at(t, fn, *args)`` runs ``fn(*args)`` at virtual time ``t``."""

    __slots__ = ("_heap", "_seq", "events", "now", "stuck_limit")

    def __init__(self, start_ns: int = 0) -> None:
        self.now = int(start_ns)
        self._heap: list[tuple[Any, ...]] = []
        self._seq = 0
        #: callbacks run so far (every heap entry popped and called)
        self.events = 0
        self.stuck_limit = STUCK_EVENTS

    def call_at(self, t: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at ``t`` (>= now; :class:`SimError` otherwise)."""
        if t < self.now:
            raise SimError(f"event {getattr(fn, '__qualname__', fn)} scheduled at {t} ns, "
                           f"before now ({self.now} ns)")
        self._seq += 1
        heapq.heappush(self._heap, (t, self._seq, fn, args))

    def call_later(self, delay_ns: int, fn: Callable[..., Any], *args: Any) -> None:
        self.call_at(self.now + delay_ns, fn, *args)

    def next_time(self) -> int | None:
        """When the next event is due (None: nothing is scheduled)."""
        return self._heap[0][0] if self._heap else None

    def pending(self) -> int:
        return len(self._heap)

    def run(self, until_ns: int | None = None, max_events: int | None = None) -> int:
        """Run events in time order until none is left, the next is after ``until_ns``, or
        ``max_events`` have run. The clock ends at ``until_ns`` when one was given and reached
        (an idle network still lets time pass), else at the last event. Returns ``now``."""
        heap = self._heap
        pop = heapq.heappop
        limit = -1 if max_events is None else max_events
        done = 0
        same = 0
        last = self.now
        stuck = self.stuck_limit
        try:
            while heap and done != limit:
                t = heap[0][0]
                if until_ns is not None and t > until_ns:
                    break
                _, _, fn, args = pop(heap)
                if t == last:
                    same += 1
                    if same > stuck:
                        raise SimError(f"virtual time stuck at {t} ns: {same} events without progress "
                                       f"(last: {getattr(fn, '__qualname__', fn)})")
                else:
                    same = 0
                    last = t
                self.now = t
                fn(*args)
                done += 1
        finally:
            self.events += done
        if until_ns is not None and until_ns > self.now and (not heap or heap[0][0] > until_ns) and done != limit:
            self.now = until_ns
        return self.now


__all__ = ["STUCK_EVENTS", "EventLoop", "SimError"]
