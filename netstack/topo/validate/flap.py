"""A link's faults declared in the file: ``state = "up"|"down"`` and ``[links.flap]`` (down, up,
count, start)."""

from __future__ import annotations

from typing import Any

from ..classes import MAX_FLAPS, Flap
from ..values import parse_delay, show
from .fields import Errors, as_table, int_field, parsed, unknown_keys

_FLAP_KEYS = {"down", "up", "count", "start"}


def link_faults(errors: Errors, path: str, t: dict[str, Any]) -> tuple[str, Flap | None]:
    """``state = "up"|"down"`` and ``[links.flap] down, up, count, start`` of a link."""
    state = "up"
    if "state" in t:
        if t["state"] in ("up", "down"):
            state = t["state"]
        else:
            errors.add(f"{path}.state", f"{show(t['state'])} is not a link state (up or down)")
    if "flap" not in t:
        return state, None
    ft = as_table(errors, f"{path}.flap", t["flap"])
    if ft is None:
        return state, None
    before = len(errors.items)
    unknown_keys(errors, f"{path}.flap", ft, _FLAP_KEYS)
    times: dict[str, int | None] = {}
    for key in ("down", "up", "start"):
        if key in ft:
            times[key] = parsed(errors, f"{path}.flap.{key}", ft[key], parse_delay)
        elif key != "start":
            errors.add(f"{path}.flap.{key}", "missing: how long the link stays " + key + " each time")
    for key in ("down", "up"):
        if times.get(key) == 0:
            errors.add(f"{path}.flap.{key}", "must be longer than 0")
    count = int_field(errors, f"{path}.flap.count", ft["count"], 1, MAX_FLAPS) if "count" in ft else 1
    if state == "down":
        errors.add(f"{path}.flap", "a link declared state = \"down\" cannot flap")
    if len(errors.items) != before or count is None:
        return state, None
    return state, Flap(times["down"] or 0, times["up"] or 0, count, times.get("start") or 0)
