"""``netstack bench --compare OLD.json NEW.json``: the ratio NEW/OLD of every number two result
files of one benchmark have in common, so that a regression shows.

A result file is a tree of objects and lists (netstack.bench.output.write_results). Objects are
compared key by key. Lists of records (objects) are matched record to record: by position when
both lists have the same records in the same order (the same benchmark run with the same
options), else by the record's text fields (``header``, ``case``, ``system``...). A row is named
by its path, its text fields and the whole-number fields equal in both files (``procs=8``):
those are the point's parameters. Numbers equal in both files are parameters too and are only
counted. Each metric gets a direction from its name (``per_s``, ``speedup``, ``goodput``: higher
is better; ``_us``, ``cpu``, ``loss``: lower is better); a change beyond ``--threshold`` in the
wrong direction is a regression, one without a known direction is only shown.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CommandError
from .output import format_table, write_results

#: metric names where a larger number is better (checked first)
HIGHER = re.compile(r"per_s|/s|rate|speedup|goodput|bps|throughput|ingest|delivered|_x$|ratio|success|right|"
                    r"effective|capacity|sustained")
#: ... and where a smaller one is
LOWER = re.compile(r"(^|_)(us|ns|ms|s|seconds)($|_)|_us_|cpu|loss|lost|drop|fail|latency|mean|p\d+|time|error|"
                   r"vs_struct|wrong|slowdown|fct|timeouts|retx|overhead")
#: text fields that name their record on their own (shown without ``key=``)
NAME_KEYS = {"name", "header", "case", "system", "path", "scenario"}
#: path components that hold facts about the run, not results
SKIPPED = {"machine", "utc", "loadavg", "loadavg_before", "loadavg_after", "benchmark", "prefix", "method"}


@dataclass(frozen=True, slots=True)
class Row:
    row: str
    metric: str
    old: float
    new: float

    @property
    def ratio(self) -> float:
        if self.old == 0:
            return math.inf if self.new > 0 else -math.inf if self.new < 0 else 1.0
        return self.new / self.old

    @property
    def direction(self) -> int:
        """+1: higher is better; -1: lower is better; 0: unknown."""
        name = self.metric.lower()
        if HIGHER.search(name):
            return 1
        if LOWER.search(name):
            return -1
        return 0

    def verdict(self, threshold: float) -> str:
        d, r = self.direction, self.ratio
        if d == 0 or not math.isfinite(r) or r <= 0:
            return ""
        change = (r - 1) * d  # > 0: moved the good way
        if change > threshold:
            return "better"
        if change < -threshold:
            return "WORSE"
        return ""


def load(path: str | Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CommandError(f"--compare: cannot read {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CommandError(f"--compare: {path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CommandError(f"--compare: {path} is not a benchmark result (not a JSON object)")
    return data


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _label(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The record's name in a row: its short text fields, then up to 2 whole numbers (4 parts)."""
    parts = [v if k in NAME_KEYS else f"{k}={v}" for k, v in old.items()
             if isinstance(v, str) and len(v) <= 32 and new.get(k) == v and not v.startswith("netstack.")]
    parts += [f"{k}={v}" for k, v in old.items()
              if isinstance(v, int) and not isinstance(v, bool) and new.get(k) == v][:2]
    return ",".join(parts[:4])


def _text_key(rec: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in rec.items() if isinstance(v, str))


def _pairs(old: list[Any], new: list[Any]) -> list[tuple[str, Any, Any]]:
    """(label, old item, new item) for the items of two lists that correspond."""
    records = all(isinstance(x, dict) for x in old + new)
    if not records:
        return [(f"[{i}]", a, b) for i, (a, b) in enumerate(zip(old, new, strict=False))]
    if len(old) == len(new) and all(_text_key(a) == _text_key(b) for a, b in zip(old, new, strict=True)):
        return [(f"[{_label(a, b) or i}]", a, b) for i, (a, b) in enumerate(zip(old, new, strict=True))]
    by_key = {_text_key(b): b for b in new}
    return [(f"[{_label(a, by_key[_text_key(a)])}]", a, by_key[_text_key(a)]) for a in old
            if _text_key(a) and _text_key(a) in by_key]


def compare_trees(old: Any, new: Any, path: str = "") -> tuple[list[Row], int]:
    """Rows for the numbers that differ, and how many numbers were equal in both."""
    rows: list[Row] = []
    equal = 0
    if isinstance(old, dict) and isinstance(new, dict):
        leaves = {k: v for k, v in old.items() if k in new and k not in SKIPPED}
        for k, v in leaves.items():
            w = new[k]
            if _number(v) and _number(w):
                if v == w:
                    equal += 1
                else:
                    rows.append(Row(path or ".", k, float(v), float(w)))
            elif isinstance(v, dict | list):
                sub, eq = compare_trees(v, w, f"{path}.{k}" if path else k)
                rows += sub
                equal += eq
    elif isinstance(old, list) and isinstance(new, list):
        for label, a, b in _pairs(old, new):
            if _number(a) and _number(b):
                if a == b:
                    equal += 1
                else:
                    rows.append(Row(path, label, float(a), float(b)))
                continue
            sub, eq = compare_trees(a, b, f"{path}{label}")
            rows += sub
            equal += eq
    return rows, equal


def main(old_path: str, new_path: str, threshold: float, results_dir: str) -> int:
    old, new = load(old_path), load(new_path)
    if old.get("benchmark") != new.get("benchmark"):
        raise CommandError(f"--compare: {old_path} is a {old.get('benchmark')!r} result and "
                           f"{new_path} a {new.get('benchmark')!r} one: compare results of one benchmark")
    rows, equal = compare_trees(old, new)
    table = [[r.row, r.metric, r.old, r.new, f"{r.ratio:.3g}x" if math.isfinite(r.ratio) else "-",
              r.verdict(threshold)] for r in rows]
    worse = sum(1 for r in rows if r.verdict(threshold) == "WORSE")
    better = sum(1 for r in rows if r.verdict(threshold) == "better")
    path = write_results(results_dir, "bench-compare", {
        "old": str(old_path), "new": str(new_path), "compared": old.get("benchmark"),
        "old_utc": old.get("utc"), "new_utc": new.get("utc"), "threshold": threshold,
        "equal_numbers": equal, "worse": worse, "better": better,
        "rows": [{"row": r.row, "metric": r.metric, "old": r.old, "new": r.new,
                  "ratio": r.ratio if math.isfinite(r.ratio) else None, "verdict": r.verdict(threshold)}
                 for r in rows],
    })
    if table:
        print(format_table(["row", "metric", "old", "new", "new/old", f"beyond {threshold:.0%}"], table))
    print(f"\n{old.get('benchmark')}: {len(rows)} numbers changed ({worse} worse, {better} better beyond "
          f"{threshold:.0%}), {equal} equal in both (parameters)\nwrote {path}")
    return 0
