"""The one line ``netstack bench NAME`` ends with: which benchmark, how long, its exit status, a
headline number where the benchmark has one, and the JSON file it wrote.

The line is built from the result file (``<results_dir>/bench-NAME-latest.json``, written by
:func:`netstack.bench.output.write_results`), so the benchmarks print nothing new themselves."""

from __future__ import annotations

import contextlib
import json
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any


def result_of(results_dir: str | Path, name: str, since: float) -> tuple[Path | None, dict[str, Any] | None]:
    """The result file ``bench NAME`` wrote since ``since`` (a ``time.time()``) and its payload;
    (None, None) if it wrote none (refused its arguments, failed before the end)."""
    latest = Path(results_dir) / f"bench-{name}-latest.json"
    try:
        if latest.stat().st_mtime < since - 1.0:
            return None, None
        payload = json.loads(latest.read_text())
    except (OSError, ValueError):
        return None, None
    if not isinstance(payload, dict):
        return None, None
    stamped = latest.with_name(f"bench-{name}-{payload.get('utc', '')}.json")
    return (stamped if stamped.exists() else latest), payload


def _headers(p: dict[str, Any]) -> str:
    recs = p.get("results") or []
    parts = []
    if recs:
        dec = [float(r["decode_speedup"]) for r in recs]
        worst = max(recs, key=lambda r: float(r["decode_vs_struct"]))
        parts.append(f"{len(recs)} headers, decode {statistics.median(dec):.0f}x Scapy (median), slowest vs "
                     f"struct {float(worst['decode_vs_struct']):.2f} ({worst['header']})")
    auth = (p.get("auth") or {}).get("results") or []
    if auth:
        parts.append(f"{len(auth)} auth rows")
    return "; ".join(parts)


def _sim(p: dict[str, Any]) -> str:
    parts = []
    goal = (p.get("speed") or {}).get("goal")
    if isinstance(goal, dict):
        parts.append(f"{float(goal['measured']):,.0f} events/s on {goal['scenario']} (goal "
                     f"{int(goal['events_per_s']):,}: {'met' if goal['met'] else 'NOT met'})")
    if "fig8_paper" in p:
        parts.append("fig8-paper done")
    return "; ".join(parts)


#: benchmark -> its headline from the result payload (the others: sections and errors only)
HEADLINES: dict[str, Callable[[dict[str, Any]], str]] = {"headers": _headers, "sim": _sim}


def summary_line(name: str, status: int, took: str, path: Path | None, payload: dict[str, Any] | None) -> str:
    """``headers in 12.3 s, exit 0: <headline>; JSON in results/bench-headers-<utc>.json``."""
    head = f"{name} in {took}, exit {status}"
    if payload is None:
        return f"{head}; no result file written"
    parts = []
    with contextlib.suppress(KeyError, TypeError, ValueError, AttributeError):
        line = HEADLINES[name](payload) if name in HEADLINES else ""
        if line:
            parts.append(line)
    sections = payload.get("sections")
    if isinstance(sections, list) and sections and name not in HEADLINES:
        parts.append(f"sections {', '.join(map(str, sections))}")
    errors = payload.get("errors")
    if isinstance(errors, dict) and errors:
        parts.append(f"errors in {', '.join(map(str, errors))}")
    return f"{head}: {'; '.join(parts) or 'done'}; JSON in {path}"


def cross_check_failures(payload: dict[str, Any] | None) -> list[str]:
    """The correctness cross-checks a benchmark's result says failed (``cross_checks``: ``[{"what",
    "ok"}]``, e.g. live vs virtual time, loss vs theory). A failed one makes ``netstack bench``
    say so as its last line and exit 1; a missed performance goal is reported, never an error."""
    if not payload:
        return []
    return [str(c.get("what")) for c in payload.get("cross_checks") or () if isinstance(c, dict) and not c.get("ok")]
