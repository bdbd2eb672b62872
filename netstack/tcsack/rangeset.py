"""Sorted, disjoint half-open runs ``[start, end)`` of absolute packet numbers.

The receive buffer's "what has arrived above the cumulative point" and the sender's
"what the ACKs said arrived" are both such sets (the model is aioquic's ``RangeSet``; this is
our own small version). Absolute numbers (not 32-bit wire values) keep comparisons trivial;
the engines unwrap on the way in and wrap on the way out.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator


class RangeSet:
    """Runs kept as two parallel ascending lists, merged when they touch."""

    __slots__ = ("_ends", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def __len__(self) -> int:
        return len(self._starts)

    def __bool__(self) -> bool:
        return bool(self._starts)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(self._starts, self._ends, strict=True)

    def __contains__(self, x: int) -> bool:
        i = bisect_right(self._starts, x) - 1
        return i >= 0 and x < self._ends[i]

    def add(self, start: int, end: int | None = None) -> int:
        """Add ``[start, end)`` (default: the single number ``start``); returns how many numbers were new."""
        if end is None:
            end = start + 1
        if end <= start:
            return 0
        starts, ends = self._starts, self._ends
        # first run that could touch [start, end): the one before start's insertion point may
        i = bisect_right(starts, start) - 1
        if i < 0 or ends[i] < start:
            i += 1
        j = i
        covered = 0
        new_start, new_end = start, end
        while j < len(starts) and starts[j] <= end:
            covered += min(ends[j], end) - max(starts[j], start) if ends[j] > start and starts[j] < end else 0
            new_start = min(new_start, starts[j])
            new_end = max(new_end, ends[j])
            j += 1
        starts[i:j] = [new_start]
        ends[i:j] = [new_end]
        return (end - start) - covered

    def first(self) -> tuple[int, int] | None:
        return (self._starts[0], self._ends[0]) if self._starts else None

    def last_end(self) -> int | None:
        return self._ends[-1] if self._ends else None

    def drop_below(self, x: int) -> None:
        """Forget every number below ``x``."""
        starts, ends = self._starts, self._ends
        k = 0
        while k < len(starts) and ends[k] <= x:
            k += 1
        if k:
            del starts[:k], ends[:k]
        if starts and starts[0] < x:
            starts[0] = x

    def runs(self, limit: int | None = None) -> list[tuple[int, int]]:
        """The lowest ``limit`` runs (all by default)."""
        n = len(self._starts) if limit is None else min(limit, len(self._starts))
        return list(zip(self._starts[:n], self._ends[:n], strict=True))

    def count(self) -> int:
        return sum(e - s for s, e in zip(self._starts, self._ends, strict=True))
