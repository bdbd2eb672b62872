"""Strict serializability of a key-value history (written for issue 32).

A history is what clients saw: each transaction's ops, the values its reads returned, and when
it was invoked and when it responded, in true time (``respond`` None: it never responded, a
client killed or a transaction that failed; it may or may not have taken effect). The history is
**strictly serializable** when some serial order of the transactions that responded, plus any
subset of the pending ones, (a) respects real time (one that responded before another was
invoked comes first) and (b) explains every read: run from an empty store (every key 0) in that
order, with :func:`~.wire.execute`'s semantics, each read returns what the client saw.

:func:`check` first verifies the order the store itself claims, the ``stamp`` of each
transaction (1Pipe: the scattering's timestamp and its sender, 1Pipe's total order; 2PC: the
commit decision's time), so a long history costs one sort and one replay. If that order fails,
or some transaction has no stamp, a history small enough (``search_limit``) is searched for any
order that works (depth first over the orders real time allows, a read that fails cuts the
branch, states already seen are not explored twice); otherwise it is rejected with the first
reason found. The search makes the checker exact on small hand-made histories, so it fails on
the anomalies it must (a stale read, a lost update, a fractured read, write skew).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .wire import Op, OpKind, Reads, execute


@dataclass(frozen=True)
class Txn:
    """One transaction of a history. ``reads``: (key, value) of each READ and RMW, op order
    (ignored when ``respond`` is None: nobody saw them). ``stamp``: the store's claim of its
    place in the serial order (any sortable value; None: no claim)."""

    uid: int
    ops: tuple[Op, ...]
    reads: Reads
    invoke: int
    respond: int | None
    stamp: Any = None


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str
    #: the serial order found (uids), when ok
    order: tuple[int, ...] = ()
    searched: bool = False

    def __bool__(self) -> bool:
        return self.ok


def _replay(order: Sequence[Txn]) -> str | None:
    """Why ``order`` does not explain the reads (None: it does)."""
    store: dict[int, int] = {}
    for t in order:
        got = execute(store, t.ops)
        if t.respond is not None and got != t.reads:
            return f"txn {t.uid:#x} read {list(t.reads)} but the serial order gives {list(got)}"
    return None


def _real_time(order: Sequence[Txn]) -> str | None:
    """Why ``order`` breaks real time (None: it does not): a later transaction in the order
    responded before an earlier one was invoked."""
    inf = float("inf")
    best: float = inf
    who: Txn | None = None
    for t in reversed(order):
        if who is not None and best < t.invoke:
            return f"txn {who.uid:#x} responded at {best} before txn {t.uid:#x} was invoked at {t.invoke}, " \
                   f"yet comes after it"
        r = inf if t.respond is None else t.respond
        if r < best:
            best, who = r, t
    return None


def check_order(order: Sequence[Txn]) -> str | None:
    """Why this serial order does not witness strict serializability (None: it does)."""
    return _real_time(order) or _replay(order)


def _search(history: Sequence[Txn]) -> tuple[int, ...] | None:
    """Any order (uids) of the responded transactions and some pending ones that works."""
    txns = list(history)
    n = len(txns)
    # must_before[i]: the transactions that responded before i was invoked
    resp = [float("inf") if t.respond is None else t.respond for t in txns]
    must_before = [{j for j in range(n) if resp[j] < txns[i].invoke} for i in range(n)]
    required = frozenset(i for i in range(n) if txns[i].respond is not None)
    seen: set[tuple[frozenset[int], tuple[tuple[int, int], ...]]] = set()

    def dfs(placed: frozenset[int], store: dict[int, int], path: list[int]) -> list[int] | None:
        if required <= placed:
            return path
        key = (placed, tuple(sorted(store.items())))
        if key in seen:
            return None
        seen.add(key)
        for i in range(n):
            if i in placed or not must_before[i] <= placed:
                continue
            # a pending transaction is optional, but only one that some responded one awaits
            # can matter before it: trying it anywhere else is harmless, just slower
            t = txns[i]
            s = dict(store)
            got = execute(s, t.ops)
            if t.respond is not None and got != t.reads:
                continue
            found = dfs(placed | {i}, s, [*path, i])
            if found is not None:
                return found
        return None

    found = dfs(frozenset(), {}, [])
    return None if found is None else tuple(txns[i].uid for i in found)


def check(history: Sequence[Txn], *, search_limit: int = 10) -> Verdict:
    """Decide strict serializability of ``history`` (module docstring)."""
    reason = None
    if all(t.stamp is not None or t.respond is None for t in history):
        claimed = sorted((t for t in history if t.stamp is not None), key=lambda t: t.stamp)
        reason = check_order(claimed)
        if reason is None:
            return Verdict(True, "the store's order explains every read and respects real time",
                           tuple(t.uid for t in claimed))
    else:
        reason = "a transaction that responded has no stamp"
    if len(history) <= search_limit:
        found = _search(history)
        if found is not None:
            return Verdict(True, "a serial order was found by search", found, searched=True)
        return Verdict(False, "no serial order explains the reads and respects real time "
                              f"(searched every order; the store's order: {reason})", searched=True)
    return Verdict(False, reason)


def written_values(history: Sequence[Txn]) -> int:
    """How many writes the history holds (a check that a run checked something)."""
    return sum(o.kind is not OpKind.READ for t in history for o in t.ops)


__all__ = ["Txn", "Verdict", "check", "check_order", "written_values"]
