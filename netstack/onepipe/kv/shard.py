"""A shard replica of the 1Pipe key-value store (sans-IO): it applies transactions in 1Pipe's
total order, with no lock and no two-phase commit.

1Pipe §7.3 ("Transactional key-value store") and §2's distributed atomic operations: a
transaction's initiator scatters one message to every shard it touches, all with the same
timestamp; every shard processes the messages of every transaction in timestamp order, so all
shards see one serial order, the timestamp order, and the transactions are serializable without
locks. A shard answers as soon as it has applied the transaction (one round trip plus the
reorder wait). Reliable 1Pipe adds atomicity: a scattering is delivered to every live receiver
or to none (1Pipe §5), so a client that crashes mid-send leaves all of its transaction or
nothing of it.

Replication: each shard has replicas, and a client's scattering goes to every replica of each
shard it touches; each replica applies the same ordered stream (1Pipe's total order is the
replication log: 1Pipe §2, "log replication"), so replicas stay identical with no protocol of
their own, and any replica's answer will do. A replica that fails simply stops; the others
go on (the failure's recall, 1Pipe §5, concerns only messages to it).

``deliver(ts, src, msg, now)`` takes what the endpoint delivered (``Deliver``); ``query(src,
msg, now)`` takes a datagram of the side socket (a client asking again for a result that was
lost). Out: ``SendTo`` actions for the side socket.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ...engine import ActionQueue, SendTo
from . import wire
from .wire import Kind, WireError


@dataclass(slots=True)
class ShardCounters:
    applied: int = 0
    duplicates: int = 0  # a uid seen twice (never, with 1Pipe's exactly-once delivery; counted)
    results_sent: int = 0
    queries: int = 0
    queries_unknown: int = 0  # asked before the transaction arrived (or never will)
    malformed: int = 0


class KvShard:
    """One replica of one shard: its part of the key space, applied in 1Pipe's order."""

    def __init__(self, shard: int, replica: int) -> None:
        self.shard = shard
        self.replica = replica
        self.store: dict[int, int] = {}
        #: uid -> the RESULT sent for it (answered again to a QUERY: replies travel unordered and
        #: unreliable, the transaction itself must not run twice)
        self.results: dict[int, bytes] = {}
        #: ``(ts, sender, uid)`` in the order applied: replicas of one shard must agree on it
        self.log: list[tuple[int, Any, int]] = []
        self.actions = ActionQueue()
        self.c = ShardCounters()

    def deliver(self, ts: int, src: Any, msg: bytes, now_ns: int) -> None:
        """A TXN delivered by 1Pipe at timestamp ``ts`` from client ``src``: apply it, answer."""
        try:
            kind, uid = wire.head(msg)
            if kind is not Kind.TXN:
                raise WireError(f"{kind.name} over 1Pipe")
            ops = wire.parse_ops(msg)
        except WireError:
            self.c.malformed += 1
            return
        out = self.results.get(uid)
        if out is None:
            reads = wire.execute(self.store, ops)
            self.log.append((ts, src, uid))
            self.c.applied += 1
            out = self.results[uid] = wire.result(uid, self.shard, self.replica, ts, reads)
        else:
            self.c.duplicates += 1
        self.c.results_sent += 1
        self.actions.emit(SendTo(wire.side_addr(src), out))

    def query(self, src: Any, msg: bytes, now_ns: int) -> None:
        """A QUERY on the side socket: the result again if the transaction was applied here."""
        try:
            kind, uid = wire.head(msg)
            if kind is not Kind.QUERY:
                raise WireError(f"{kind.name} on a shard's side socket")
        except WireError:
            self.c.malformed += 1
            return
        self.c.queries += 1
        out = self.results.get(uid)
        if out is None:
            self.c.queries_unknown += 1
            return
        self.c.results_sent += 1
        self.actions.emit(SendTo(src, out))

    def next_deadline(self) -> int | None:
        return None

    def counters(self) -> dict[str, Any]:
        return {**asdict(self.c), "keys": len(self.store), "shard": self.shard, "replica": self.replica}


__all__ = ["KvShard", "ShardCounters"]
