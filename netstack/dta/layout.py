"""The DTA collector's memory layout: which stores it registers, and how big ("Direct Telemetry
Access" §6, §7.3; docs/dta.md "The collector daemon").

The collector daemon (``daemons/collector.py``) registers the default layout below unless a
layout file (``--layout FILE``) or its config (``"layout"``: an object or a path) says
otherwise; keys absent from an override keep their defaults, ``null`` removes a store:

========================  =========================================================  ========
store                      geometry                                                   size
========================  =========================================================  ========
``keywrite``               65,536 slots x (4 B checksum + 4 B data), N <= 4           512 KiB
``append-1/2/4/8/16``      list id = batch size B (1, 2, 4, 8, 16), 65,536 x 4 B each  256 KiB each
``keyincrement``           65,536 little-endian u64 counters, N <= 4                  512 KiB
``sketch-1``               Count-Min, 4 rows x 256 columns, sum, reporters 1 and 2,   16 KiB
                           4 columns per WRITE, 4 epoch slots
``postcard``               4,096 flow slots x 32 B (checksum, present hops, 5 hop    128 KiB
                           words; netstack/dta/postcard.py)
========================  =========================================================  ========

No I/O here but reading a layout file (:func:`load_layout`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from .memory import CollectorMemory

#: The default memory layout (the module docstring). Append list ids equal their batch size
#: so that one collector serves every batch size of the Fig. 10 experiment.
DEFAULT_LAYOUT: dict[str, Any] = {
    "keywrite": {"slots": 1 << 16, "data_words": 1, "checksum_bits": 32, "max_redundancy": 4,
                 "slot_hash": "crc32+mix"},
    "append": [{"list_id": b, "entries": 1 << 16, "batch": b} for b in (1, 2, 4, 8, 16)],
    "keyincrement": {"slots": 1 << 16, "max_redundancy": 4, "slot_hash": "crc32+mix"},
    "sketches": [{"sketch_id": 1, "rows": 4, "columns": 256, "merge": "sum", "reporters": [1, 2],
                  "batch_columns": 4, "epochs": 4}],
    "postcard": {"slots": 1 << 12, "hops": 5, "slot_hash": "crc32+mix"},
}
_LAYOUT_KEYS = frozenset(DEFAULT_LAYOUT)


class LayoutError(ValueError):
    """The layout file/object is unusable; the message says which part."""


def resolve_layout(override: dict[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULT_LAYOUT` with the stores ``override`` gives replaced (``None`` removes one;
    for ``keywrite`` / ``keyincrement`` a dict is merged into the default's keys)."""
    layout = copy.deepcopy(DEFAULT_LAYOUT)
    if override is None:
        return layout
    if not isinstance(override, dict):
        raise LayoutError("the layout must be a JSON object")
    unknown = set(override) - _LAYOUT_KEYS
    if unknown:
        raise LayoutError(f"unknown layout keys {sorted(unknown)}; known: {sorted(_LAYOUT_KEYS)}")
    for key, value in override.items():
        if value is None:
            layout[key] = None
        elif key in ("keywrite", "keyincrement", "postcard"):
            if not isinstance(value, dict):
                raise LayoutError(f"layout.{key} must be an object or null")
            layout[key] = {**DEFAULT_LAYOUT[key], **value}
        else:
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise LayoutError(f"layout.{key} must be a list of objects (or null)")
            layout[key] = value
    return layout


def build_memory(memory: CollectorMemory, layout: dict[str, Any]) -> None:
    """Register every store of ``layout`` in ``memory`` (LayoutError names the bad store)."""
    def add(what: str, fn: Any, spec: dict[str, Any]) -> None:
        try:
            fn(**spec)
        except (TypeError, ValueError) as exc:
            raise LayoutError(f"layout {what} {spec}: {exc}") from None

    if layout.get("keywrite"):
        add("keywrite", memory.add_keywrite, layout["keywrite"])
    for spec in layout.get("append") or []:
        add("append", memory.add_append_list, spec)
    if layout.get("keyincrement"):
        add("keyincrement", memory.add_keyincrement, layout["keyincrement"])
    for spec in layout.get("sketches") or []:
        add("sketch", memory.add_sketch, spec)
    if layout.get("postcard"):
        add("postcard", memory.add_postcard, layout["postcard"])
    if not memory.regions:
        raise LayoutError("the layout defines no store at all")


def load_layout(source: str | dict[str, Any] | None) -> dict[str, Any]:
    """A layout from a file path, an inline object or None (the default)."""
    if source is None or isinstance(source, dict):
        return resolve_layout(source)
    try:
        data = json.loads(Path(source).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LayoutError(f"cannot read the layout file {source}: {exc}") from None
    return resolve_layout(data)



__all__ = ["DEFAULT_LAYOUT", "LayoutError", "build_memory", "load_layout", "resolve_layout"]
