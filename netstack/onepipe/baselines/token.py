"""Token passing: the token-ring baseline (1Pipe §7.1, Fig. 8 "Token", after Rajagopalan and
McKinley, "A Token-Based Protocol for Reliable, Ordered Multicast Communication", SRDS '89; and
1Pipe §9 (related work): a token passed among senders).

Only the process that holds the token may send ("Token has low throughput because only one process
may send at any time", 1Pipe §7.1). The token carries the ordering state: the next global number
``g`` and, for every process, the next number ``pd`` of a message to it. The holder stamps up to
``batch`` of its queued scatterings from it, sends their messages straight to their destinations,
and passes the token on to the next process of the ring. A receiver delivers in ``pd`` order
(:class:`~.stamped.StampedReceiver` with ``hold=True``: consecutive numbers come from different
senders over different paths and may overtake each other).

So a process waits on average half a round for the token, and the ring as a whole sends what one
holder can send in a round: per process, the rate falls as 1/P. The token is as long as the ring
(one counter a process): its handling grows with P too.

Sans-IO: :meth:`TokenProcess.submit` queues a scattering, :meth:`TokenProcess.on_token` takes the
token and returns the stamped messages and the token to pass on. A token carries a hop count:
a copy no newer than the last one seen is a duplicate and ignored (the ring never runs two tokens).
Token loss is not modelled (no regeneration): the runs have no loss on the token's path.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from .stamped import Stamped

#: a token on the wire: hop count, next global number, ring size; then the ring size's counters (u64)
_TOKEN = struct.Struct("!QQI")
_U64 = struct.Struct("!Q")


@dataclass(frozen=True, slots=True)
class Token:
    """The ring's ordering state: ``hop`` counts passes (0 at the first holder)."""

    hop: int
    next_g: int
    per_dst: tuple[int, ...]

    def pack(self) -> bytes:
        return _TOKEN.pack(self.hop, self.next_g, len(self.per_dst)) + b"".join(_U64.pack(c) for c in self.per_dst)

    @classmethod
    def unpack(cls, data: bytes, at: int = 0) -> Token:
        hop, g, n = _TOKEN.unpack_from(data, at)
        at += _TOKEN.size
        return cls(hop, g, tuple(_U64.unpack_from(data, at + 8 * i)[0] for i in range(n)))

    @classmethod
    def first(cls, nprocs: int) -> Token:
        return cls(0, 0, (0,) * nprocs)


@dataclass(eq=False, slots=True)
class TokenCounters:
    stamped: int = 0  # scatterings stamped while holding the token
    dropped: int = 0  # messages of scatterings that did not fit in the queue
    passes: int = 0  # times it held the token and passed it on
    token_dups: int = 0  # token copies no newer than the last seen: ignored


class TokenProcess:
    """One process of the ring: its queue of scatterings waiting for the token."""

    __slots__ = ("_last_hop", "_queued", "batch", "c", "idx", "nprocs", "pending", "queue")

    def __init__(self, idx: int, nprocs: int, batch: int, queue: int) -> None:
        if batch < 1 or queue < 1:
            raise ValueError("batch and queue must be >= 1")
        self.idx = idx
        self.nprocs = nprocs
        self.batch = batch
        self.queue = queue  # messages waiting at most (the rest are dropped and counted)
        self.pending: deque[tuple[int, tuple[int, ...]]] = deque()
        self._queued = 0
        self._last_hop = -1
        self.c = TokenCounters()

    @property
    def next(self) -> int:
        """The ring's next process (ranks in order)."""
        return (self.idx + 1) % self.nprocs

    def submit(self, sseq: int, dsts: Sequence[int]) -> bool:
        """Queue scattering ``sseq`` to ``dsts`` until the token comes; False (dropped) if it does not fit."""
        if self._queued + len(dsts) > self.queue:
            self.c.dropped += len(dsts)
            return False
        self.pending.append((sseq, tuple(dsts)))
        self._queued += len(dsts)
        return True

    def on_token(self, token: Token) -> tuple[list[tuple[int, Stamped]], Token | None]:
        """The token arrives: ``([(dst, message)], token to pass to :attr:`next`)``, or ``([], None)``
        for a duplicate token."""
        if token.hop <= self._last_hop:
            self.c.token_dups += 1
            return [], None
        self._last_hop = token.hop
        g = token.next_g
        per = list(token.per_dst)
        out: list[tuple[int, Stamped]] = []
        for _ in range(min(self.batch, len(self.pending))):
            sseq, dsts = self.pending.popleft()
            self._queued -= len(dsts)
            for d in dsts:
                out.append((d, Stamped(self.idx, sseq, g, per[d])))
                per[d] += 1
            g += 1
            self.c.stamped += 1
        self.c.passes += 1
        return out, Token(token.hop + 1, g, tuple(per))

    @property
    def queued(self) -> int:
        """Messages waiting for the token."""
        return self._queued


__all__ = ["Token", "TokenCounters", "TokenProcess"]
