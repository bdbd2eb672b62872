"""Shared benchmark plumbing: rate measurement of the header cases, the ``--sizes`` option, and
(re-exported from :mod:`.output` and :mod:`.proc`, where they live) result files, tables,
progress and CPU pinning, under the names code outside the benchmarks imports from here."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .output import Progress, format_table, loadavg, machine_info, say, write_results
from .proc import PIN_ENV, pinnable_cpus, sigterm_unwinds

__all__ = [
    "Case", "measure_rate", "parse_frame_sizes",
    "Progress", "format_table", "loadavg", "machine_info", "say", "write_results",
    "PIN_ENV", "pinnable_cpus", "sigterm_unwinds",
]


@dataclass
class Case:
    """One header in ``netstack bench headers``: five zero-argument callables.

    ``encode``/``decode`` use the fast codec, ``scapy_build``/``scapy_dissect`` the Scapy
    layer, on the same field values, so the two rates are directly comparable. ``baseline``
    is a bare ``struct.unpack_from`` of the same wire fields of the same bytes (written in the
    case module): the floor a decoder in Python can approach (issue 19 asks decode to stay
    within 3x of it).
    """

    name: str
    encode: Callable[[], object]
    decode: Callable[[], object]
    scapy_build: Callable[[], object]
    scapy_dissect: Callable[[], object]
    baseline: Callable[[], object]


def measure_rate(fn: Callable[[], object], min_time: float = 0.2, batch: int = 64) -> float:
    """Calls per second of ``fn``, timed over at least ``min_time`` seconds."""
    fn()  # warm up caches and lazy imports outside the timed region
    calls = 0
    clock = time.perf_counter
    start = clock()
    elapsed = 0.0
    while elapsed < min_time:
        for _ in range(batch):
            fn()
        calls += batch
        elapsed = clock() - start
        if elapsed < min_time / 10:
            batch *= 2
    return calls / elapsed


def parse_frame_sizes(raw: Any, default: Sequence[int], lo: int, hi: int, example: str) -> list[int]:
    """``--sizes``: frame sizes in bytes, comma separated (or already a sequence), each in
    ``[lo, hi]``; ``default`` when the option was not given. ``example`` goes into the error."""
    if raw is None:
        return list(default)
    items = [s for s in raw.replace(" ", "").split(",") if s] if isinstance(raw, str) else list(raw)
    try:
        sizes = [int(s) for s in items]
    except ValueError:
        raise ValueError(f"--sizes {raw!r}: give frame sizes in bytes, comma separated (e.g. {example})") from None
    if not sizes or any(not lo <= s <= hi for s in sizes):
        raise ValueError(f"--sizes {raw!r}: each size must be in [{lo}, {hi}] bytes")
    return sizes
