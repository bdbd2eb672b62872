"""The baseline 1Pipe §7.3 measures against: lock-based two-phase commit (sans-IO), on the same
UDP transport with no 1Pipe ordering, over the same workload and the same shards.

The coordinator is the client. **Prepare**: it sends each shard its ops; the shard takes a lock
on every key (shared for a READ, exclusive for a WRITE or RMW) and votes YES with its reads, or
NO at once if a key is locked by another transaction (no-wait: no deadlock is possible). **Commit
or abort**: all YES, the client sends COMMIT (the shard applies the writes, releases the locks,
ACKs); any NO, ABORT to every shard (locks released) and the transaction tries again, as a new
attempt, after a randomized exponential backoff. The transaction is done when every COMMIT is
acknowledged. This is the lock-and-2PC pattern 1Pipe removes (1Pipe §2 "distributed atomic
operations": lock, operate, unlock, at least two round trips; under contention the locks make
conflicting transactions abort and retry). Like the paper's FaRM baseline it is neither
replicated nor durable: one replica a shard.

Loss: every message is retransmitted every ``rto_ns`` until answered; the shards remember every
vote and every decision, so a repeat is answered the same way and never applied twice.

Its serialization point is the commit decision: at that moment the client holds every lock the
transaction needs, and it keeps them until the writes are applied, so conflicting transactions
are ordered by their decision times (:attr:`Done.ts` is the client's clock then).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ...engine import ActionQueue, SendTo
from . import wire
from .client import Done
from .wire import Kind, Op, OpKind, Reads, WireError


@dataclass(slots=True)
class TwoPCShardCounters:
    prepares: int = 0
    votes_yes: int = 0
    votes_no: int = 0
    commits: int = 0
    aborts: int = 0
    repeats: int = 0  # a retransmitted PREPARE, COMMIT or ABORT, answered from memory
    malformed: int = 0


class TwoPCShard:
    """One shard of the 2PC store: locks, votes, commits."""

    def __init__(self, shard: int) -> None:
        self.shard = shard
        self.store: dict[int, int] = {}
        #: key -> (exclusive?, holders)
        self.locks: dict[int, tuple[bool, set[int]]] = {}
        self.prepared: dict[int, tuple[Op, ...]] = {}
        self.votes: dict[int, bytes] = {}
        self.decided: dict[int, bool] = {}  # uid -> committed
        #: uids in the order their writes were applied
        self.log: list[int] = []
        self.actions = ActionQueue()
        self.c = TwoPCShardCounters()

    def receive(self, src: Any, data: bytes, now_ns: int) -> None:
        try:
            kind, uid = wire.head(data)
            if kind is Kind.PREPARE:
                self._prepare(src, uid, wire.parse_ops(data))
            elif kind in (Kind.COMMIT, Kind.ABORT):
                self._decide(src, uid, kind is Kind.COMMIT)
            else:
                raise WireError(f"{kind.name} to a 2PC shard")
        except WireError:
            self.c.malformed += 1

    def _free(self, o: Op, uid: int) -> bool:
        held = self.locks.get(o.key)
        if held is None or held[1] <= {uid}:
            return True
        return not held[0] and o.kind is OpKind.READ

    def _prepare(self, src: Any, uid: int, ops: tuple[Op, ...]) -> None:
        out = self.votes.get(uid)
        if out is not None:
            self.c.repeats += 1
            self.actions.emit(SendTo(src, out))
            return
        self.c.prepares += 1
        if uid in self.decided or not all(self._free(o, uid) for o in ops):
            self.c.votes_no += 1
            out = wire.vote(uid, self.shard, False, ())
        else:
            for o in ops:
                excl, holders = self.locks.get(o.key, (False, set()))
                holders.add(uid)
                self.locks[o.key] = (excl or o.kind is not OpKind.READ, holders)
            self.prepared[uid] = ops
            reads = wire.execute(dict(self.store), ops)  # read now, write at commit (the locks hold)
            self.c.votes_yes += 1
            out = wire.vote(uid, self.shard, True, reads)
        self.votes[uid] = out
        self.actions.emit(SendTo(src, out))

    def _decide(self, src: Any, uid: int, commit: bool) -> None:
        if uid in self.decided:
            self.c.repeats += 1
        else:
            self.decided[uid] = commit
            ops = self.prepared.pop(uid, ())
            if commit:
                wire.execute(self.store, ops)
                self.log.append(uid)
                self.c.commits += 1
            else:
                self.c.aborts += 1
            for o in ops:
                held = self.locks.get(o.key)
                if held is not None:
                    held[1].discard(uid)
                    if not held[1]:
                        del self.locks[o.key]
        self.actions.emit(SendTo(src, wire.shard_msg(Kind.ACK, uid, self.shard)))

    def next_deadline(self) -> int | None:
        return None

    def counters(self) -> dict[str, Any]:
        return {**asdict(self.c), "locked_keys": len(self.locks), "shard": self.shard}


@dataclass(slots=True)
class TwoPCClientCounters:
    begun: int = 0
    attempts: int = 0
    aborts: int = 0
    done: int = 0
    retransmits: int = 0
    malformed: int = 0


@dataclass(slots=True)
class _Attempt:
    uid: int
    by_shard: dict[int, tuple[Op, ...]]
    deadline: int
    votes: dict[int, tuple[bool, Reads]] = field(default_factory=dict)
    commit: bool | None = None  # the decision, once made
    decided_ns: int = 0
    acks: set[int] = field(default_factory=set)


class TwoPCClient:
    """A 2PC coordinator running one transaction at a time. ``shards[s]``: shard ``s``'s side
    address. ``rng`` draws the backoff."""

    def __init__(self, index: int, shards: Sequence[Any], *, rto_ns: int, backoff_ns: int,
                 rng: random.Random) -> None:
        self.index = index
        self.shards = list(shards)
        self.rto_ns = rto_ns
        self.backoff_ns = backoff_ns
        self.rng = rng
        self.attempts: dict[int, _Attempt] = {}  # in flight: preparing, or finishing a decision
        self.current: _Attempt | None = None  # the attempt of the running transaction
        self.ops: tuple[Op, ...] = ()
        self.begun_ns = 0
        self.tries = 0
        self.retry_at: int | None = None
        self._n = 0
        self.actions = ActionQueue()
        self.c = TwoPCClientCounters()

    def shard_of(self, key: int) -> int:
        return key % len(self.shards)

    @property
    def busy(self) -> bool:
        return bool(self.ops)

    def begin(self, ops: Sequence[Op], now_ns: int) -> None:
        if self.ops:
            raise RuntimeError("one transaction at a time")
        self.ops = tuple(ops)
        self.begun_ns = now_ns
        self.tries = 0
        self.c.begun += 1
        self._attempt(now_ns)

    def _attempt(self, now_ns: int) -> None:
        self._n += 1
        self.tries += 1
        self.c.attempts += 1
        by_shard: dict[int, list[Op]] = {}
        for o in self.ops:
            by_shard.setdefault(self.shard_of(o.key), []).append(o)
        a = _Attempt(wire.uid_of(self.index, self._n), {s: tuple(p) for s, p in by_shard.items()},
                     now_ns + self.rto_ns)
        self.attempts[a.uid] = a
        self.current = a
        self._send_prepares(a, retransmit=False)

    def _send_prepares(self, a: _Attempt, retransmit: bool) -> None:
        for s, part in a.by_shard.items():
            if s not in a.votes:
                self.c.retransmits += retransmit
                self.actions.emit(SendTo(self.shards[s], wire.txn(Kind.PREPARE, a.uid, part)))

    def _send_decision(self, a: _Attempt, retransmit: bool) -> None:
        msg = wire.decision(Kind.COMMIT if a.commit else Kind.ABORT, a.uid)
        for s in a.by_shard:
            if s not in a.acks:
                self.c.retransmits += retransmit
                self.actions.emit(SendTo(self.shards[s], msg))

    def receive(self, data: bytes, now_ns: int) -> Done | None:
        """A VOTE or an ACK; the transaction when it is done."""
        try:
            kind, uid = wire.head(data)
            a = self.attempts.get(uid)
            if kind is Kind.VOTE:
                shard, yes, reads = wire.parse_vote(data)
                if a is not None and a.commit is None and shard in a.by_shard:
                    a.votes[shard] = (yes, reads)
                    self._maybe_decide(a, now_ns)
            elif kind is Kind.ACK:
                shard = wire.parse_shard(data)
                if a is not None and a.commit is not None:
                    a.acks.add(shard)
                    return self._maybe_finish(a, now_ns)
            else:
                raise WireError(f"{kind.name} to a 2PC client")
        except WireError:
            self.c.malformed += 1
        return None

    def _maybe_decide(self, a: _Attempt, now_ns: int) -> None:
        no = any(not yes for yes, _ in a.votes.values())
        if not no and len(a.votes) < len(a.by_shard):
            return
        a.commit = not no
        a.decided_ns = now_ns
        a.deadline = now_ns + self.rto_ns
        self._send_decision(a, retransmit=False)
        if no:
            self.c.aborts += 1
            # randomized exponential backoff before the next attempt (a hot key's lock holder
            # needs about two round trips to let go)
            span = self.backoff_ns << min(self.tries - 1, 6)
            self.retry_at = now_ns + self.rng.randrange(1, span + 1)

    def _maybe_finish(self, a: _Attempt, now_ns: int) -> Done | None:
        if len(a.acks) < len(a.by_shard):
            return None
        del self.attempts[a.uid]
        if not a.commit or a is not self.current:
            return None
        reads_by = {s: list(v[1]) for s, v in a.votes.items()}
        reads = tuple(reads_by[self.shard_of(o.key)].pop(0) for o in self.ops if o.kind is not OpKind.WRITE)
        done = Done(a.uid, self.ops, reads, a.decided_ns, self.begun_ns)
        self.ops = ()
        self.current = None
        self.c.done += 1
        return done

    def on_timer(self, now_ns: int) -> None:
        for a in list(self.attempts.values()):
            if a.deadline <= now_ns:
                a.deadline = now_ns + self.rto_ns
                if a.commit is None:
                    self._send_prepares(a, retransmit=True)
                else:
                    self._send_decision(a, retransmit=True)
        if self.retry_at is not None and self.retry_at <= now_ns:
            self.retry_at = None
            self._attempt(now_ns)

    def next_deadline(self) -> int | None:
        times = [a.deadline for a in self.attempts.values()]
        if self.retry_at is not None:
            times.append(self.retry_at)
        return min(times, default=None)

    def counters(self) -> dict[str, Any]:
        return {**asdict(self.c), "in_flight": len(self.attempts)}


__all__ = ["TwoPCClient", "TwoPCClientCounters", "TwoPCShard", "TwoPCShardCounters"]
