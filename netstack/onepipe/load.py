"""The offered load of the virtual-time runs: each process sends scatterings at Poisson times to
``fanout`` distinct random peers, the same for 1Pipe and for the sequencer baseline, so that both
see the same load (``netstack.onepipe.scenarios``, ``netstack.onepipe.sequencer``)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any


class PoissonScatterer:
    """Mix-in for a simulated process with a ``loop``: :meth:`start` schedules its scatterings,
    each handed to :meth:`scatter` (the subclass sends it), until ``stop``."""

    loop: Any

    def start(self, peers: Sequence[Any], rate: float, fanout: int, size: int, start: int, stop: int,
              rng: random.Random) -> None:
        """Scatterings at ``rate`` per second (Poisson) from ``start`` to ``stop`` (ns), each to
        ``min(fanout, len(peers))`` distinct peers (no peers: to this process itself) with
        ``size``-byte messages."""
        self._peers = list(peers) or [self]
        self._k = min(fanout, len(self._peers))
        self._size = size
        self._gap_ns = 1e9 / rate
        self._stop = stop
        self._rng = rng
        self.loop.call_at(start + self._gap(), self._next)

    def _gap(self) -> int:
        return max(1, round(self._rng.expovariate(1.0) * self._gap_ns))

    def _next(self) -> None:
        now = self.loop.now
        if now >= self._stop:
            return
        self.scatter(self._rng.sample(self._peers, self._k), now)
        self.loop.call_at(now + self._gap(), self._next)

    def scatter(self, dsts: list[Any], now: int) -> None:
        raise NotImplementedError


__all__ = ["PoissonScatterer"]
