"""Reading ``netstack bench tcd``'s result document for ``netstack reproduce tcd``, safely.

The report must be written whatever a bench left behind: a missing section, a failed or starved
live run, a document cut short or edited by hand. Everything here reads through :func:`get` and
:func:`num`, which answer None instead of raising, and :class:`Runs` says *why* a run is missing,
so that a claim without a number carries the reason (netstack/tcd/reproduce.py builds the claims).

The document (``bench-tcd-latest.json``, netstack/bench/tcd.py): ``runs`` (one ``netstack.run/1``
document per §3.1 run: ``runtime``, ``time_scale``, ``params``, ``valid``/``checks``, ``result`` with
``scenario``, ``marker``, ``flows``, ``ports``, ``f1_rate``), ``figs`` (the virtual-time series,
``{scenario: {marker: {"t_ns", "every_ns", "time_scale", "ports": {P: {"queue_bytes", "tx_bps"}}}}}``),
``scale`` and ``fct`` (the FCT comparison's ``variants``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..reproduce.claims import Check, Validity
from ..reproduce.read import get, num
from .scenarios import KINDS, MARKERS, Workload

#: the TCD states as the timelines number them (netstack/tcd/detector.py)
NON_CONGESTION, UNDETERMINED, CONGESTION = 0, 1, 2






def nums(v: Any) -> list[float] | None:
    """A list of finite numbers, or None if ``v`` is not one (an odd element spoils it)."""
    if not isinstance(v, list):
        return None
    out = [num(x) for x in v]
    return None if any(x is None for x in out) else [x for x in out if x is not None]


def validity_of(runs: Sequence[Mapping[str, Any]]) -> Validity:
    """:meth:`Validity.of_runs` on copies that keep only a run's ``valid`` and well-formed ``checks``
    (a malformed ``checks`` must not make the report raise)."""
    clean: list[dict[str, Any]] = []
    for r in runs:
        if "valid" not in r:
            clean.append({})
            continue
        checks = r.get("checks")
        clean.append({"valid": bool(r["valid"]),
                      "checks": [c for c in checks if isinstance(c, Mapping)] if isinstance(checks, list) else []})
    return Validity.of_runs(clean)


@dataclass
class Runs:
    """The §3.1 runs of one runtime in a bench document: ``{(scenario, marker): run}``, and why the
    others are missing."""

    runtime: str
    runs: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    #: why there is no run at all (the document is missing), else ""
    absent: str = ""
    #: failed runs' errors, by scenario (a failed run's document names its scenario, not its marker)
    errors: dict[str, str] = field(default_factory=dict)

    def run(self, kind: str, marker: str) -> Mapping[str, Any] | None:
        return self.runs.get((kind, marker))

    def result(self, kind: str, marker: str) -> Mapping[str, Any] | None:
        res = get(self.run(kind, marker), "result")
        return res if isinstance(res, Mapping) else None

    def scale(self, kind: str, marker: str) -> float:
        """The run's time scale (paper time = run time / scale); 1 when missing or odd."""
        s = num(get(self.run(kind, marker), "time_scale"))
        return s if s and s > 0 else 1.0

    def why_missing(self, kind: str, marker: str) -> str:
        if self.absent:
            return self.absent
        if kind in self.errors:
            return f"a {self.runtime} run of the {kind} scenario failed: {self.errors[kind]}"
        return f"not measured: the result has no {self.runtime} run of the {kind} scenario with the {marker} marker"

    def validity(self, *keys: tuple[str, str]) -> Validity:
        return validity_of([r for k in keys if (r := self.run(*k)) is not None])


def scenario_runs(doc: Mapping[str, Any] | None, runtime: str, absent: str) -> Runs:
    """The ``runtime`` runs of ``doc`` (``absent``: the reason when there is no document)."""
    out = Runs(runtime)
    runs = get(doc, "runs")
    if not isinstance(runs, list):
        out.absent = absent if doc is None else f"not measured: the {runtime} section did not run"
        return out
    for r in runs:
        if not isinstance(r, Mapping) or r.get("runtime") != runtime:
            continue
        res = r.get("result")
        kind, marker = get(res, "scenario"), get(res, "marker")
        key = (kind, marker) if kind in KINDS and marker in MARKERS else None
        if "error" in r:
            out.errors[str(get(r, "params", "kind"))] = str(r["error"])[:300]
        elif key is not None and isinstance(res, Mapping):
            out.runs[key] = r
    if not out.runs and not out.errors:
        out.absent = f"not measured: the result has no {runtime} runs of §3.1's scenarios"
    elif not out.runs:
        out.absent = f"the {runtime} runs failed: " + "; ".join(sorted(set(out.errors.values())))[:400]
    return out


# ---------------------------------------------------------------- reading one run's result
def flow(res: Mapping[str, Any] | None, name: str, key: str) -> float | None:
    return num(get(res, "flows", name, key))


def flow_marks(res: Mapping[str, Any] | None, port: str, name: str, key: str) -> float | None:
    """The CE (``key="ce"``) or UE marks ``port`` itself decided for flow ``name``; 0 when the port
    marked none of that flow's packets (``flow_marks`` lists only the flows it marked), None when
    the port is missing from the result."""
    p = get(res, "ports", port)
    if not isinstance(p, Mapping):
        return None
    marks = p.get("flow_marks")
    if not isinstance(marks, Mapping):
        return None
    return num(get(marks, name, key)) if name in marks else 0.0


def state_ms(runs: Runs, kind: str, port: str, state: str) -> float | None:
    """Paper ms the TCD run's ``port`` spent in ``state`` (non_congestion, undetermined, congestion)."""
    v = num(get(runs.result(kind, "tcd"), "ports", port, "time_in_state_ns", state))
    return None if v is None else v / 1e6 / runs.scale(kind, "tcd")


def timeline(runs: Runs, kind: str, port: str) -> list[tuple[float, int]] | None:
    """The TCD run's state changes at ``port``: (paper ns since the run's zero, state), or None."""
    tl = get(runs.result(kind, "tcd"), "ports", port, "timeline")
    if not isinstance(tl, list):
        return None
    scale = runs.scale(kind, "tcd")
    out = []
    for step in tl:
        t, s = num(get(step, 0)), num(get(step, 1))
        if t is None or s is None:
            return None
        out.append((t / scale, int(s)))
    return out


def burst_start_ns(runs: Runs, kind: str, marker: str) -> float:
    """When the bursts start (paper ns): the paper's time 0 ("bursts start at time 0", §3.1)."""
    w = num(get(runs.run(kind, marker), "params", "warmup_ns"))
    return w if w is not None else float(Workload(kind).warmup_ns)


# ------------------------------------------------------------------- the virtual-time series
@dataclass(frozen=True)
class Series:
    """One port's virtual-time series: sample times (paper ns from the run's zero), queue (bytes)
    and sending rate (bit/s at the paper's scale) over the interval ending at each sample."""

    t_ns: list[float]
    queue: list[float]
    tx_bps: list[float]


def series(doc: Mapping[str, Any] | None, kind: str, marker: str, port: str) -> Series | None:
    se = get(doc, "figs", kind, marker)
    t, q = nums(get(se, "t_ns")), nums(get(se, "ports", port, "queue_bytes"))
    tx = nums(get(se, "ports", port, "tx_bps"))
    if t is None or q is None or tx is None or not t or not len(t) == len(q) == len(tx):
        return None
    scale = num(get(se, "time_scale"))
    scale = scale if scale and scale > 0 else 1.0
    return Series([x / scale for x in t], q, [x * scale for x in tx])


def last_off_ns(s: Series, line_bps: float) -> float | None:
    """The end of the last sample interval in which the port sent (almost) nothing while it had a
    queue: held OFF by PFC (§3.1's "alternates between ON and OFF"). None if it never was."""
    off = [t for t, q, tx in zip(s.t_ns, s.queue, s.tx_bps, strict=True) if q > 0 and tx < 0.01 * line_bps]
    return off[-1] if off else None


def window(s: Series, lo_ns: float, hi_ns: float) -> list[float]:
    """The queue samples with ``lo_ns < t <= hi_ns``."""
    return [q for t, q in zip(s.t_ns, s.queue, strict=True) if lo_ns < t <= hi_ns]


# ------------------------------------------------------------------------ the FCT comparison
@dataclass(frozen=True)
class FctVariant:
    """One variant of the FCT section (workload x cc): the ratio base / TCD of every flow's
    slowdown (median and p99) with its 95 % interval, and what stands behind it."""

    name: str
    ratio: dict[str, float | None]
    ci95: dict[str, list[float] | None]
    flows: float | None
    seeds: list[Any]
    incomplete: float | None
    slowdowns: dict[str, tuple[float | None, float | None]]

    def validity(self) -> Validity:
        """Virtual time cannot be starved; what can go wrong is a flow that never completed."""
        if self.incomplete is None:
            return Validity(None, (), "virtual time (cannot be starved)")
        ok = self.incomplete == 0
        return Validity(ok, (Check("every flow completed", "0 incomplete (both arms)", self.incomplete, ok),))


def fct_variants(doc: Mapping[str, Any] | None) -> list[FctVariant]:
    """The FCT section's variants (none when it did not run or is malformed)."""
    out = []
    variants = get(doc, "fct", "variants")
    for v in variants if isinstance(variants, list) else []:
        cmp = get(v, "compare")
        if not isinstance(cmp, Mapping):
            continue
        ratio = {q: num(get(cmp, "ratio", "all", q)) for q in ("median", "p99")}
        ci95 = {q: nums(get(cmp, "ci95", "all", q)) for q in ("median", "p99")}
        incomplete = [num(get(cmp, "arms", a, "incomplete")) for a in ("base", "tcd")]
        slow = {q: (num(get(cmp, "arms", "base", "fct", "all", q)), num(get(cmp, "arms", "tcd", "fct", "all", q)))
                for q in ("median", "p99")}
        seeds = get(cmp, "seeds")
        out.append(FctVariant(str(get(v, "name") or "?"), ratio, ci95, num(get(cmp, "flows")),
                              seeds if isinstance(seeds, list) else [],
                              None if None in incomplete else sum(x for x in incomplete if x is not None), slow))
    return out


__all__ = ["CONGESTION", "NON_CONGESTION", "UNDETERMINED", "FctVariant", "Runs", "Series", "burst_start_ns",
           "fct_variants", "flow", "flow_marks", "get", "last_off_ns", "num", "nums", "scenario_runs", "series",
           "state_ms", "timeline", "validity_of", "window"]
