"""``[links.features.a]`` and ``[links.features.b]``: here only that they are tables (copied);
what is in them is for the protocols to check (netstack/switch/plugins.py)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from .fields import Errors, as_table, unknown_keys

_FEATURE_KEYS = {"a", "b"}


def link_features(errors: Errors, path: str, t: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], bool]:
    """``features.a``/``features.b`` (copies: the topology must not share the caller's tables),
    and whether they are tables; what is in them is for the protocols to check."""
    features: dict[str, dict[str, Any]] = {"a": {}, "b": {}}
    if "features" not in t:
        return features, True
    ft = as_table(errors, f"{path}.features", t["features"])
    if ft is None:
        return features, False
    ok = True
    unknown_keys(errors, f"{path}.features", ft, _FEATURE_KEYS)
    for side in ("a", "b"):
        if side in ft:
            st = as_table(errors, f"{path}.features.{side}", ft[side])
            if st is None:
                ok = False
            else:
                features[side] = copy.deepcopy(st)
    return features, ok


def each_end(topology: Any, tables: dict[str, Any], end: Callable[[str, Any], Any]) -> dict[str, Any]:
    """A protocol's ``validate_link`` for a feature either end may carry: ``end(side, table)`` for
    each end whose table is there (``{"a": options | None, "b": ...}``), every end's problems
    raised at once as one :class:`TopologyError` (``end`` raises a TopologyError of its own)."""
    from ..classes import TopologyError

    out: dict[str, Any] = {}
    errors: list[tuple[str, str]] = []
    for side in ("a", "b"):
        table = tables.get(side)
        out[side] = None
        if table is None:
            continue
        try:
            out[side] = end(side, table)
        except TopologyError as exc:
            errors.extend(exc.errors)
    if errors:
        raise TopologyError(errors, topology.source)
    return out
