"""What every benchmark writes: progress on stderr, Markdown tables, JSON result files, and the
machine facts (load average, platform) recorded beside the numbers."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def say(msg: str) -> None:
    """A progress line on stderr, unstamped."""
    print(msg, file=sys.stderr, flush=True)


class Progress:
    """Progress lines on stderr, stamped with the time since the benchmark started."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def __call__(self, msg: str) -> None:
        el = time.monotonic() - self.t0
        print(f"[{int(el // 60):02d}:{el % 60:04.1f}] {msg}", file=sys.stderr, flush=True)


def machine_info() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
    }


def loadavg() -> list[float]:
    """The 1/5/15-minute load averages (rounded), [] where the platform has none: recorded with
    every live benchmark so a reader can see other work competed for the CPU."""
    with contextlib.suppress(OSError):
        return [round(x, 2) for x in os.getloadavg()]
    return []


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
