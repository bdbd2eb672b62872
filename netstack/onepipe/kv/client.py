"""A transaction initiator of the 1Pipe key-value store (sans-IO).

``begin(ops, now)`` splits a transaction by shard (key mod shards) and returns its **one
scattering**: a TXN to every live replica of every shard it touches, which the shell hands to
1Pipe's send as one call, so every message carries the same timestamp (1Pipe §3, §7.3). The
shards' RESULTs come back on the side socket (:meth:`on_result`); the transaction is done once
every shard it touches has answered from one replica, and :meth:`on_result` returns it then, with
its reads and the 1Pipe timestamp it ran at (its place in the serial order).

Results travel unordered and may be lost; so the client asks again (a QUERY to every live
replica of a shard that has not answered) every ``query_timeout_ns``: the shard answers from its
cache and never runs a transaction twice. A replica the process-fail callback names
(:meth:`proc_failed`) gets no more messages; a shard with no live replica left fails the
transactions waiting for it (:meth:`take_failed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ...engine import ActionQueue, SendTo
from . import wire
from .wire import Kind, Op, Reads, WireError


@dataclass(slots=True)
class ClientCounters:
    begun: int = 0
    done: int = 0
    failed: int = 0  # a shard with no live replica
    results: int = 0
    results_late: int = 0  # for a transaction already done (a second replica, a repeated query)
    replica_mismatch: int = 0  # two replicas of a shard answered differently: must stay 0
    queries_sent: int = 0
    recalled: int = 0  # a transaction's scattering recalled (it ran nowhere) and run again
    malformed: int = 0


@dataclass(slots=True)
class Done:
    """A finished transaction: its uid, its ops, its reads (op order), the 1Pipe timestamp of
    its scattering (every shard reports the same one) and when it began (the engine's clock)."""

    uid: int
    ops: tuple[Op, ...]
    reads: Reads
    ts: int
    begun_ns: int


@dataclass(slots=True)
class _Pending:
    uid: int
    ops: tuple[Op, ...]
    by_shard: dict[int, tuple[Op, ...]]
    begun_ns: int
    deadline: int
    answers: dict[int, tuple[int, int, Reads]] = field(default_factory=dict)  # shard -> (replica, ts, reads)


class KvClient:
    """One client. ``shards[s]`` lists the 1Pipe addresses of shard ``s``'s replicas."""

    def __init__(self, index: int, shards: Sequence[Sequence[Any]], *, query_timeout_ns: int) -> None:
        if not shards or any(not r for r in shards):
            raise ValueError("every shard needs at least one replica")
        self.index = index
        self.shards = [list(r) for r in shards]
        self.query_timeout_ns = query_timeout_ns
        self.dead: set[Any] = set()
        self.pending: dict[int, _Pending] = {}
        self._attempt = 0
        self._failed: list[int] = []
        self.actions = ActionQueue()
        self.c = ClientCounters()
        self._where = {a: s for s, reps in enumerate(self.shards) for a in reps}

    def shard_of(self, key: int) -> int:
        return key % len(self.shards)

    def begin(self, ops: Sequence[Op], now_ns: int) -> tuple[int, list[tuple[Any, bytes]]]:
        """A new transaction: its uid and the scattering to send (empty: no live replica for one
        of its shards; it failed at once and :meth:`take_failed` has it)."""
        self._attempt += 1
        uid = wire.uid_of(self.index, self._attempt)
        by_shard: dict[int, list[Op]] = {}
        for o in ops:
            by_shard.setdefault(self.shard_of(o.key), []).append(o)
        self.c.begun += 1
        scatter = []
        for s, part in sorted(by_shard.items()):
            live = [a for a in self.shards[s] if a not in self.dead]
            if not live:
                self.c.failed += 1
                self._failed.append(uid)
                return uid, []
            msg = wire.txn(Kind.TXN, uid, part)
            scatter += [(a, msg) for a in live]
        self.pending[uid] = _Pending(uid, tuple(ops), {s: tuple(p) for s, p in by_shard.items()}, now_ns,
                                     now_ns + self.query_timeout_ns)
        return uid, scatter

    def on_result(self, data: bytes, now_ns: int) -> Done | None:
        """A RESULT from a shard replica; the transaction when this was its last shard."""
        try:
            kind, uid = wire.head(data)
            if kind is not Kind.RESULT:
                raise WireError(f"{kind.name} to a client")
            shard, replica, ts, reads = wire.parse_result(data)
        except WireError:
            self.c.malformed += 1
            return None
        self.c.results += 1
        p = self.pending.get(uid)
        if p is None or shard not in p.by_shard:
            self.c.results_late += 1
            return None
        got = p.answers.get(shard)
        if got is not None:
            if got[1:] != (ts, reads):
                self.c.replica_mismatch += 1
            return None
        p.answers[shard] = (replica, ts, reads)
        if len(p.answers) < len(p.by_shard):
            return None
        del self.pending[uid]
        stamps = {a[1] for a in p.answers.values()}
        if len(stamps) != 1:
            self.c.replica_mismatch += 1  # shards disagree on the timestamp: 1Pipe broke its promise
        by_shard_reads = {s: list(a[2]) for s, a in p.answers.items()}
        ordered = []
        for o in p.ops:  # the reads back in the transaction's op order
            if o.kind is not wire.OpKind.WRITE:
                ordered.append(by_shard_reads[self.shard_of(o.key)].pop(0))
        self.c.done += 1
        return Done(uid, p.ops, tuple(ordered), min(stamps), p.begun_ns)

    def proc_failed(self, proc: Any) -> None:
        """1Pipe's process-fail callback named ``proc``: send it nothing more; a shard left with
        no live replica fails what waits for it."""
        if proc not in self._where:
            return
        self.dead.add(proc)
        s = self._where[proc]
        if all(a in self.dead for a in self.shards[s]):
            for uid, p in list(self.pending.items()):
                if s in p.by_shard and s not in p.answers:
                    del self.pending[uid]
                    self.c.failed += 1
                    self._failed.append(uid)

    def send_failed(self, ts: int, dst: Any, msg: bytes) -> tuple[int, tuple[Op, ...]] | None:
        """1Pipe's send-fail callback for one of our TXNs. ``ts`` 0: only that message never left
        (its destination had failed; the rest of the scattering went). Otherwise reliable 1Pipe
        recalled the scattering (a receiver failed before it was committed: 1Pipe §5, all or
        none), so the transaction ran nowhere: it is dropped and handed back, ``(uid, ops)``, for
        the caller to run again."""
        if ts == 0:
            return None
        try:
            kind, uid = wire.head(msg)
        except WireError:
            return None
        p = self.pending.pop(uid, None)
        if kind is not Kind.TXN or p is None:
            return None
        self.c.recalled += 1
        return uid, p.ops

    def take_failed(self) -> list[int]:
        out, self._failed = self._failed, []
        return out

    def on_timer(self, now_ns: int) -> None:
        """Ask again for every result overdue."""
        for p in self.pending.values():
            if p.deadline > now_ns:
                continue
            p.deadline = now_ns + self.query_timeout_ns
            for s in p.by_shard:
                if s in p.answers:
                    continue
                for a in self.shards[s]:
                    if a not in self.dead:
                        self.c.queries_sent += 1
                        self.actions.emit(SendTo(wire.side_addr(a), wire.shard_msg(Kind.QUERY, p.uid, s)))

    def next_deadline(self) -> int | None:
        return min((p.deadline for p in self.pending.values()), default=None)

    def counters(self) -> dict[str, Any]:
        return {**asdict(self.c), "pending": len(self.pending)}


__all__ = ["ClientCounters", "Done", "KvClient"]
