"""The reliable controller's one core in virtual time (the ``onepipe`` scenario's ``ctl_msg_ns``;
docs/onepipe-reliable.md "The controller's core").

1Pipe (SIGCOMM 2021) puts the growth of its failure-recovery time with the hosts down to the
controller's work: it "needs to contact all processes in the system, so, the failure recovery
delay increases proportionally with system scale" (§7, Fig. 10). :class:`ControllerCore` models the
controller daemon as one single-threaded process, as ours runs live: it takes one input at a time
from its socket's queue (a datagram, at ``msg_ns``; a timer, a switch's report or a store's
completion, at no cost), handles it, and sends what the handling sends, each datagram ``msg_ns``
one after the other, before it takes the next input. So the replies to an input leave before the
inputs that arrived meanwhile are read, as a daemon that sends inside its handler does.

It counts from ``start_ns`` on (the scenario's failure: :mod:`.rscenario`); before it, inputs are
handled and datagrams sent at once. ``peak_wait_ns`` is the longest an input waited in the queue
plus its own cost: the shell gives the engine twice that as its timer slack, as the live daemon
gives twice its largest scheduling lag.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from ..sim.loop import EventLoop


class ControllerCore:
    """One core, one input at a time (module docstring)."""

    def __init__(self, loop: EventLoop, msg_ns: int, start_ns: int = 0) -> None:
        if msg_ns < 1:
            raise ValueError(f"a controller core needs a cost per datagram >= 1 ns, not {msg_ns}")
        self.loop = loop
        self.msg_ns = msg_ns
        self.start_ns = start_ns
        #: core time spent (inputs read, datagrams sent), inputs handled, datagrams sent
        self.busy_ns = 0
        self.inputs = 0
        self.sent = 0
        #: the longest (handled - arrived) of an input: its wait in the queue plus its own cost
        self.peak_wait_ns = 0
        self._queue: deque[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = deque()
        self._busy = False  # an input is being read or handled, or its sends are going out
        self._free_at = 0  # when the datagrams sent so far have left

    @property
    def active(self) -> bool:
        return self.loop.now >= self.start_ns

    def submit(self, cost_ns: int, fn: Callable[..., None], *args: Any) -> None:
        """An input: ``fn(*args)`` handles it once the core has read it (``cost_ns``) after every
        input queued before it and their sends; at once before ``start_ns``."""
        if not self.active:
            fn(*args)
            return
        self._queue.append((self.loop.now, cost_ns, fn, args))
        if not self._busy:
            self._take()

    def send(self, fn: Callable[..., None], *args: Any) -> None:
        """A datagram the input being handled sends: ``fn(*args)`` (it leaves) once the core has
        spent ``msg_ns`` on it after the sends before it; at once before ``start_ns``."""
        if not self.active:
            fn(*args)
            return
        now = self.loop.now
        self._free_at = (self._free_at if self._free_at > now else now) + self.msg_ns
        self.busy_ns += self.msg_ns
        self.sent += 1
        self.loop.call_at(self._free_at, fn, *args)

    def _take(self) -> None:
        if not self._queue:
            self._busy = False
            return
        self._busy = True
        arrived, cost, fn, args = self._queue.popleft()
        now = self.loop.now
        done = (self._free_at if self._free_at > now else now) + cost
        self._free_at = done
        self.busy_ns += cost
        self.loop.call_at(done, self._handle, arrived, fn, args)

    def _handle(self, arrived: int, fn: Callable[..., None], args: tuple[Any, ...]) -> None:
        self.inputs += 1
        wait = self.loop.now - arrived
        if wait > self.peak_wait_ns:
            self.peak_wait_ns = wait
        fn(*args)  # its sends (self.send) go out one after the other from now
        if self._free_at > self.loop.now:
            self.loop.call_at(self._free_at, self._take)  # the next input once they are out
        else:
            self._take()

    def counters(self, end_ns: int) -> dict[str, Any]:
        """``msg_ns``, ``busy_ns``, ``inputs``, ``sent``, ``peak_wait_ns``, ``queued`` (inputs not
        handled by now) and ``utilisation``: core time over ``start_ns``..``end_ns``."""
        span = end_ns - self.start_ns
        return {"msg_ns": self.msg_ns, "busy_ns": self.busy_ns, "inputs": self.inputs, "sent": self.sent,
                "peak_wait_ns": self.peak_wait_ns, "queued": len(self._queue),
                "utilisation": min(1.0, self.busy_ns / span) if span > 0 else 0.0}


__all__ = ["ControllerCore"]
