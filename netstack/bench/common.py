"""Shared benchmark plumbing: rate measurement, result files, tables."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Case:
    """One header in ``netstack bench headers``: four zero-argument callables.

    ``encode``/``decode`` use the fast codec, ``scapy_build``/``scapy_dissect`` the Scapy
    layer, on the same field values, so the two rates are directly comparable.
    """

    name: str
    encode: Callable[[], object]
    decode: Callable[[], object]
    scapy_build: Callable[[], object]
    scapy_dissect: Callable[[], object]


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


def machine_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
    }


def write_results(results_dir: str | os.PathLike[str], name: str, payload: dict[str, Any]) -> Path:
    """Write ``payload`` as ``<results_dir>/<name>-<UTC timestamp>.json`` and ``<name>-latest.json``."""
    out = Path(results_dir)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    payload = {"benchmark": name, "utc": stamp, "machine": machine_info(), **payload}
    text = json.dumps(payload, indent=2, sort_keys=False) + "\n"
    path = out / f"{name}-{stamp}.json"
    path.write_text(text)
    (out / f"{name}-latest.json").write_text(text)
    return path


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (readable in a terminal, pasteable into docs)."""
    cells = [[str(h) for h in headers], *[[_fmt(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        padded = (c.rjust(w) if n else c.ljust(w) for c, w in zip(row, widths, strict=True))
        lines.append("| " + " | ".join(padded) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if value >= 1e6:
            return f"{value / 1e6:.2f} M"
        if value >= 1e3:
            return f"{value / 1e3:.1f} k"
        return f"{value:.3g}"
    return str(value)


#: set to 0 to run the benchmarks' processes unpinned
PIN_ENV = "NETSTACK_BENCH_PIN"


def pinnable_cpus() -> list[int] | None:
    """The CPUs this process may run on, ascending, when there are at least two and pinning
    is not disabled (``NETSTACK_BENCH_PIN=0``); else None."""
    if os.environ.get(PIN_ENV, "1") == "0":
        return None
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except OSError:
        return None
    return cpus if len(cpus) >= 2 else None


def loadavg() -> list[float]:
    """The 1/5/15-minute load averages (rounded), [] where the platform has none: recorded with
    every live benchmark so a reader can see other work competed for the CPU."""
    with contextlib.suppress(OSError):
        return [round(x, 2) for x in os.getloadavg()]
    return []


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside the block, so a benchmark killed mid-run still
    unwinds through the ``finally`` blocks that remove its namespaces and processes."""

    def _term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, _term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


class Progress:
    """Progress lines on stderr, stamped with the time since the benchmark started."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def __call__(self, msg: str) -> None:
        el = time.monotonic() - self.t0
        print(f"[{int(el // 60):02d}:{el % 60:04.1f}] {msg}", file=sys.stderr, flush=True)
