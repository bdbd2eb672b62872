"""Lamport timestamps with all-to-all heartbeats: the Lamport baseline (1Pipe §7.1, Fig. 8 "Lamport",
after Lamport, "Time, Clocks, and the Ordering of Events in a Distributed System", CACM 1978).

Every process keeps a logical clock ``L``. A scattering takes ``L + 1`` as its timestamp; ties are
broken by the sender's rank, so ``(ts, sender)`` is one total order. A receiver holds each message
until no process can still send it anything earlier: channels are FIFO and timestamps from one
sender only grow, so once it has heard from every other process ``q`` a stamp ``ts_q`` (a message
or a heartbeat), ``q`` will never send less than ``ts_q + 1``. A process that has nothing to say to
a receiver would block it forever: hence the heartbeats, every ``interval`` to every other process,
carrying ``L`` (1Pipe §7.1: "a common optimization ... exchanges received timestamps per interval
rather than per message", with its trade-off between latency and throughput). Each process thus
sends and receives ``P - 1`` heartbeats an interval: the work that grows with P.

The FIFO channels are built here (the engine does not trust the network): every message and
heartbeat on a channel carries the channel's sequence number; an early one waits for the gap, a
duplicate is dropped. A lost one stalls its channel (Lamport's algorithm assumes reliable FIFO
channels; nothing here retransmits).

Sans-IO: :meth:`LamportProcess.send` and :meth:`LamportProcess.heartbeat` return what to put on the
wire, :meth:`LamportProcess.on_message` takes what came and returns what to deliver, in order.
"""

from __future__ import annotations

import heapq
import struct
from collections.abc import Sequence
from dataclasses import dataclass

#: on the wire: sender, receiver, channel sequence, timestamp, sender's scattering counter, heartbeat flag
_WIRE = struct.Struct("!IIQQQB")


@dataclass(frozen=True, slots=True)
class LamportMsg:
    """A message (``hb=False``) or heartbeat on channel ``src -> dst``."""

    src: int
    dst: int
    cseq: int
    ts: int
    sseq: int
    hb: bool

    def pack(self) -> bytes:
        return _WIRE.pack(self.src, self.dst, self.cseq, self.ts, self.sseq, self.hb)

    @classmethod
    def unpack(cls, data: bytes, at: int = 0) -> LamportMsg:
        src, dst, cseq, ts, sseq, hb = _WIRE.unpack_from(data, at)
        return cls(src, dst, cseq, ts, sseq, bool(hb))


WIRE_SIZE = _WIRE.size


@dataclass(eq=False, slots=True)
class LamportCounters:
    sent: int = 0  # messages
    delivered: int = 0
    duplicates: int = 0  # datagrams a channel had already taken (or held early)
    heartbeats_tx: int = 0
    heartbeats_rx: int = 0
    max_held: int = 0  # messages waiting for their turn, at most


class LamportProcess:
    """One process: its clock, its channels' sequence numbers both ways, and its hold-back queue."""

    __slots__ = ("_early", "_expect", "_held", "_out_seq", "_promise", "c", "clock", "idx", "nprocs")

    def __init__(self, idx: int, nprocs: int) -> None:
        self.idx = idx
        self.nprocs = nprocs
        self.clock = 0
        self._out_seq = [0] * nprocs  # next channel sequence to each process
        self._expect = [0] * nprocs  # next channel sequence from each process
        self._early: list[dict[int, LamportMsg]] = [{} for _ in range(nprocs)]
        # the least timestamp each process may still send us (1: nothing heard yet, timestamps start at 1)
        self._promise = [1] * nprocs
        self._held: list[tuple[int, int, int, LamportMsg]] = []  # (ts, src, cseq, msg)
        self.c = LamportCounters()

    def _msg(self, dst: int, ts: int, sseq: int, hb: bool) -> LamportMsg:
        c = self._out_seq[dst]
        self._out_seq[dst] = c + 1
        return LamportMsg(self.idx, dst, c, ts, sseq, hb)

    def send(self, sseq: int, dsts: Sequence[int]) -> list[LamportMsg]:
        """Scattering ``sseq`` to ``dsts``: one timestamp for all of its messages."""
        self.clock += 1
        self.c.sent += len(dsts)
        return [self._msg(d, self.clock, sseq, False) for d in dsts]

    def heartbeat(self) -> list[LamportMsg]:
        """The clock, to every other process."""
        self.c.heartbeats_tx += self.nprocs - 1
        return [self._msg(q, self.clock, 0, True) for q in range(self.nprocs) if q != self.idx]

    def on_message(self, m: LamportMsg) -> list[LamportMsg]:
        """Take ``m`` (in any order, duplicated or not); the messages deliverable now, in ``(ts, sender)`` order."""
        q = m.src
        if m.dst != self.idx or not 0 <= q < self.nprocs:
            return []
        exp = self._expect[q]
        early = self._early[q]
        if m.cseq < exp or m.cseq in early:
            self.c.duplicates += 1
            return []
        if m.cseq > exp:
            early[m.cseq] = m
            return []
        self._take(m)
        exp += 1
        while early:
            nxt = early.pop(exp, None)
            if nxt is None:
                break
            self._take(nxt)
            exp += 1
        self._expect[q] = exp
        return self._deliverable()

    def _take(self, m: LamportMsg) -> None:
        """``m`` in its channel's order."""
        if m.ts > self.clock:
            self.clock = m.ts
        if m.ts + 1 > self._promise[m.src]:
            self._promise[m.src] = m.ts + 1
        if m.hb:
            self.c.heartbeats_rx += 1
        else:
            heapq.heappush(self._held, (m.ts, m.src, m.cseq, m))
            if len(self._held) > self.c.max_held:
                self.c.max_held = len(self._held)

    def _deliverable(self) -> list[LamportMsg]:
        held = self._held
        if not held:
            return []
        # the earliest (timestamp, rank) any other process may still send us
        me = self.idx
        floor = min(((t, q) for q, t in enumerate(self._promise) if q != me), default=None)
        out = []
        while held and (floor is None or (held[0][0], held[0][1]) < floor):
            out.append(heapq.heappop(held)[3])
        self.c.delivered += len(out)
        return out

    @property
    def held(self) -> int:
        return len(self._held)


__all__ = ["WIRE_SIZE", "LamportCounters", "LamportMsg", "LamportProcess"]
