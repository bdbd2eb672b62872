"""The key-value store's messages: bytes <-> typed records, one ``struct`` layout each.

A transaction is a list of operations on 32-bit keys holding signed 64-bit values:
``READ`` returns the value, ``WRITE`` sets it to ``arg``, ``RMW`` (read-modify-write) returns
the old value and stores ``old + arg``. A key that was never written reads 0.

Every message starts with its kind and the attempt's ``uid`` (the client's index in the high 32
bits, its attempt counter in the low 32: unique in a run, 1Pipe §7.3's transaction id):

========== ================================ =================================================
kind       carried by                       what follows the kind and uid
========== ================================ =================================================
TXN        1Pipe (one scattering a txn)     the ops for this shard
RESULT     the side socket, shard -> client shard, replica, the 1Pipe ts it ran at, the reads
QUERY      side socket, client -> shard     shard: "send me the result of uid again"
PREPARE    side socket (2PC)                the ops for this shard
VOTE       side socket (2PC)                shard, yes/no, the reads (yes only)
COMMIT     side socket (2PC)                nothing
ABORT      side socket (2PC)                nothing
ACK        side socket (2PC)                shard
========== ================================ =================================================

The *side socket* is a plain UDP socket beside each process's 1Pipe endpoint, on its 1Pipe port
plus :data:`SIDE_OFFSET` (outside 1Pipe's port range, so no switch orders it): results need no
ordering (1Pipe §7.3: a shard answers as soon as it has applied the transaction), and the
two-phase-commit baseline uses nothing else.
"""

from __future__ import annotations

import enum
import struct
from typing import Any, NamedTuple

#: the side socket's port is the 1Pipe port plus this (40101 -> 41101): outside 40100-40199
SIDE_OFFSET = 1000


class Kind(enum.IntEnum):
    TXN = 1
    RESULT = 2
    QUERY = 3
    PREPARE = 4
    VOTE = 5
    COMMIT = 6
    ABORT = 7
    ACK = 8


class OpKind(enum.IntEnum):
    READ = 0
    WRITE = 1
    RMW = 2


class Op(NamedTuple):
    kind: OpKind
    key: int
    arg: int = 0


#: (key, value) of each READ and RMW of a transaction, in its op order
Reads = tuple[tuple[int, int], ...]


class WireError(ValueError):
    """Bytes that are not a message of this store (the shell counts and drops them)."""


_HEAD = struct.Struct("!BQ")
_OPS = struct.Struct("!H")
_OP = struct.Struct("!BIq")
_RES = struct.Struct("!HBQ")
_READ = struct.Struct("!Iq")
_SHARD = struct.Struct("!H")
_VOTE = struct.Struct("!HB")


def uid_of(client: int, attempt: int) -> int:
    return (client & 0xFFFFFFFF) << 32 | (attempt & 0xFFFFFFFF)


def client_of(uid: int) -> int:
    return uid >> 32


def side_addr(addr: Any) -> Any:
    """The side socket of the process at 1Pipe address ``addr``."""
    return (addr[0], addr[1] + SIDE_OFFSET)


def head(data: bytes) -> tuple[Kind, int]:
    if len(data) < _HEAD.size:
        raise WireError(f"{len(data)} bytes: shorter than a message header")
    k, uid = _HEAD.unpack_from(data)
    try:
        return Kind(k), uid
    except ValueError:
        raise WireError(f"unknown message kind {k}") from None


def _pack_ops(ops: tuple[Op, ...] | list[Op]) -> bytes:
    return _OPS.pack(len(ops)) + b"".join(_OP.pack(int(o.kind), o.key, o.arg) for o in ops)


def _unpack_ops(data: bytes, off: int) -> tuple[Op, ...]:
    try:
        (n,) = _OPS.unpack_from(data, off)
        off += _OPS.size
        if len(data) != off + n * _OP.size:
            raise WireError(f"{n} ops need {off + n * _OP.size} bytes, got {len(data)}")
        return tuple(Op(OpKind(k), key, arg) for k, key, arg in
                     (_OP.unpack_from(data, off + i * _OP.size) for i in range(n)))
    except (struct.error, ValueError) as exc:
        raise WireError(f"bad ops: {exc}") from None


def _pack_reads(reads: Reads) -> bytes:
    return _OPS.pack(len(reads)) + b"".join(_READ.pack(k, v) for k, v in reads)


def _unpack_reads(data: bytes, off: int) -> Reads:
    try:
        (n,) = _OPS.unpack_from(data, off)
        off += _OPS.size
        if len(data) != off + n * _READ.size:
            raise WireError(f"{n} reads need {off + n * _READ.size} bytes, got {len(data)}")
        return tuple(_READ.unpack_from(data, off + i * _READ.size) for i in range(n))
    except struct.error as exc:
        raise WireError(f"bad reads: {exc}") from None


def txn(kind: Kind, uid: int, ops: tuple[Op, ...] | list[Op]) -> bytes:
    """A TXN (1Pipe) or PREPARE (2PC): ``ops`` for one shard."""
    return _HEAD.pack(kind, uid) + _pack_ops(ops)


def parse_ops(data: bytes) -> tuple[Op, ...]:
    return _unpack_ops(data, _HEAD.size)


def result(uid: int, shard: int, replica: int, ts: int, reads: Reads) -> bytes:
    return _HEAD.pack(Kind.RESULT, uid) + _RES.pack(shard, replica, ts) + _pack_reads(reads)


def parse_result(data: bytes) -> tuple[int, int, int, Reads]:
    """``(shard, replica, ts, reads)`` of a RESULT."""
    try:
        shard, replica, ts = _RES.unpack_from(data, _HEAD.size)
    except struct.error as exc:
        raise WireError(f"short result: {exc}") from None
    return shard, replica, ts, _unpack_reads(data, _HEAD.size + _RES.size)


def shard_msg(kind: Kind, uid: int, shard: int) -> bytes:
    """QUERY or ACK: the kind, the uid, a shard."""
    return _HEAD.pack(kind, uid) + _SHARD.pack(shard)


def parse_shard(data: bytes) -> int:
    try:
        return int(_SHARD.unpack_from(data, _HEAD.size)[0])
    except struct.error as exc:
        raise WireError(f"short message: {exc}") from None


def vote(uid: int, shard: int, yes: bool, reads: Reads) -> bytes:
    return _HEAD.pack(Kind.VOTE, uid) + _VOTE.pack(shard, int(yes)) + _pack_reads(reads)


def parse_vote(data: bytes) -> tuple[int, bool, Reads]:
    try:
        shard, yes = _VOTE.unpack_from(data, _HEAD.size)
    except struct.error as exc:
        raise WireError(f"short vote: {exc}") from None
    return shard, bool(yes), _unpack_reads(data, _HEAD.size + _VOTE.size)


def decision(kind: Kind, uid: int) -> bytes:
    """COMMIT or ABORT."""
    return _HEAD.pack(kind, uid)


def execute(store: dict[int, int], ops: tuple[Op, ...] | list[Op]) -> Reads:
    """Run ``ops`` on ``store`` in order (the one semantics the shards, the 2PC commit and the
    checker's replay share); the reads, in op order."""
    reads = []
    for o in ops:
        if o.kind is OpKind.WRITE:
            store[o.key] = o.arg
            continue
        old = store.get(o.key, 0)
        reads.append((o.key, old))
        if o.kind is OpKind.RMW:
            store[o.key] = old + o.arg
    return tuple(reads)


__all__ = ["SIDE_OFFSET", "Kind", "Op", "OpKind", "Reads", "WireError", "client_of", "decision", "execute", "head",
           "parse_ops", "parse_result", "parse_shard", "parse_vote", "result", "shard_msg", "side_addr", "txn",
           "uid_of", "vote"]
