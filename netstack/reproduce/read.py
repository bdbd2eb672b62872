"""Reading a bench's result document defensively: a paper's ``figures`` must never raise on a
missing, partial or odd document (netstack/reproduce/claims.py), so every step is checked here,
once, for every paper's module."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def get(doc: Any, *path: Any) -> Any:
    """``doc[path[0]][path[1]]...``, or None as soon as a step is missing or of the wrong kind (a key
    of a mapping; an index, in range, of a list)."""
    for step in path:
        if isinstance(doc, Mapping):
            doc = doc.get(step)
        elif isinstance(doc, list) and isinstance(step, int) and not isinstance(step, bool) \
                and -len(doc) <= step < len(doc):
            doc = doc[step]
        else:
            return None
    return doc


def num(x: Any) -> float | None:
    """A finite number, or None (bools, strings, NaN and infinities are not numbers here)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return None
    return float(x) if math.isfinite(x) else None


def rows(x: Any) -> list[Mapping[str, Any]]:
    """The mappings of a list (a table's rows); [] for anything else."""
    return [r for r in x if isinstance(r, Mapping)] if isinstance(x, list) else []
