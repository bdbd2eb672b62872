"""Both arms of TCD's FCT comparison, over seeds: the runs (``tcd-fabric-fct``, ``netstack.tcd.fabric``),
the slowdown per class and size bucket, the ratios and their 95 % intervals (issue 30).

"Congestion Detection in Lossless Networks" (TCD, SIGCOMM 2021) claims 3.3x at the median and 2.0x
at p99 for congestion control with TCD over without. One comparison here is, for every seed, the
same flows run twice on the same topology: the **base** arm (marker ``ecn``: the cc without TCD,
CE by the topology's ECN rule) and the **tcd** arm (marker ``tcd``: the cc's TCD mode; with
``ce_rule = "ecn"`` the same CE rule, UE at paused ports). :func:`run_compare` runs seeds x arms
through ``netstack.sim.sweep`` and :func:`compare` turns the run documents into::

    {"arms": {"base": {"marking": {...}, "fct": {...}, ...}, "tcd": {...}},
     "ratio": {"all": {"median": x, "p99": y}, "victim": {...}, "small": {...}, "large": {...}, ...},
     "ci95": {"method": "...", "all": {"median": [lo, hi], "p99": [lo, hi]}, ...},
     "flows": n, "seeds": [...], "setup": {...}}

**Groups** (:func:`groups_of`): ``all``; each class (``contributor``, ``victim``, ``other``); each
size bucket (``small`` < 100 KB, ``medium``, ``large`` > 1 MB); each class in the small and the
large bucket (``victim_large``...). A group's **slowdown** (``fct``) is the median and p99
(nearest rank, :func:`quantile`) of its completed flows, every seed's pooled. Its
**ratio** is base over tcd, so > 1 means TCD helps.

**ci95**: a paired percentile bootstrap over seeds (:func:`bootstrap_ci`): draw as many seeds as
were run, with replacement, pool the drawn seeds' flows in each arm (the same seeds for both),
compute the ratio; 2000 draws (seeded: the same runs give the same interval), the 2.5th and 97.5th
percentiles. It says how much the ratio depends on which flows the seeds drew; with few seeds it is
narrow for want of data (one seed: the ratio itself), and it never leaves the range the per-seed
quantiles allow (tests/tcd/test_compare.py).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..sim.scenario import RunSpec
from .fabric import CLASSES

#: the arms: name -> the marker the topology's ports run
ARMS = {"base": "ecn", "tcd": "tcd"}
QUANTILES = {"median": 50, "p99": 99}
BUCKETS = ("small", "medium", "large")
#: every group a ratio is given for, in the order the tables show them
GROUPS = ("all", *CLASSES, *BUCKETS, *(f"{c}_{b}" for c in CLASSES for b in ("small", "large")))
BOOTSTRAP_DRAWS = 2000
BOOTSTRAP_SEED = 30
CI_METHOD = ("paired percentile bootstrap over seeds: draw len(seeds) seeds with replacement, pool their "
             f"flows in each arm, ratio of the pooled quantiles; {BOOTSTRAP_DRAWS} draws, 2.5th-97.5th percentile")
#: the paper's abstract: CC with TCD over CC alone, FCT slowdown
PAPER_RATIO = {"median": 3.3, "p99": 2.0}


def groups_of(record: dict[str, Any]) -> list[str]:
    """The groups a flow record (``netstack.tcd.fabric.flow_record``) belongs to."""
    cls, bucket = record["class"], record["bucket"]
    out = ["all", cls, bucket]
    if bucket in ("small", "large"):
        out.append(f"{cls}_{bucket}")
    return out


def slowdowns(records: list[dict[str, Any]]) -> dict[str, list[float]]:
    """``{group: sorted slowdowns of its completed flows}`` (every group, empty when none)."""
    out: dict[str, list[float]] = {g: [] for g in GROUPS}
    for r in records:
        if r["slowdown"] is not None:
            for g in groups_of(r):
                out[g].append(float(r["slowdown"]))
    return {g: sorted(v) for g, v in out.items()}


def quantile(ordered: list[float], q: int) -> float | None:
    """The ``q``-th percentile (a whole percent) of sorted ``ordered`` by nearest rank: the smallest
    value with at least ``q`` % of the values at or below it (the ceil(q n / 100)-th), None if
    empty. Unlike a rounded rank (``netstack.traffic.percentiles``) it is the empirical
    distribution's own quantile, so pooling seeds never takes it outside the seeds' range."""
    if not ordered:
        return None
    return ordered[max(0, (q * len(ordered) + 99) // 100 - 1)]


def group_stats(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per group: flows, completed, median and p99 slowdown (None without a completed flow)."""
    done = slowdowns(records)
    total: dict[str, int] = dict.fromkeys(GROUPS, 0)
    for r in records:
        for g in groups_of(r):
            total[g] += 1
    return {g: {"flows": total[g], "completed": len(done[g]),
                **{name: quantile(done[g], q) for name, q in QUANTILES.items()}} for g in GROUPS}


def ratios_of(base: dict[str, list[float]], tcd: dict[str, list[float]]) -> dict[str, dict[str, float | None]]:
    """Per group and quantile, base slowdown over tcd slowdown (None where either has no flow)."""
    out: dict[str, dict[str, float | None]] = {}
    for g in GROUPS:
        row: dict[str, float | None] = {}
        for name, q in QUANTILES.items():
            b, t = quantile(base.get(g, []), q), quantile(tcd.get(g, []), q)
            row[name] = round(b / t, 4) if b is not None and t else None
        out[g] = row
    return out


def _pool(per_seed: Sequence[dict[str, list[float]]], picks: tuple[int, ...]) -> dict[str, list[float]]:
    return {g: sorted(v for i in picks for v in per_seed[i][g]) for g in GROUPS}


def bootstrap_ci(base: Sequence[dict[str, list[float]]], tcd: Sequence[dict[str, list[float]]], *,
                 draws: int = BOOTSTRAP_DRAWS, seed: int = BOOTSTRAP_SEED) -> dict[str, dict[str, list[float] | None]]:
    """Per group and quantile the [2.5, 97.5] percentile interval of the ratio over ``draws``
    paired resamples of the seeds (module docstring). ``base[i]`` and ``tcd[i]``: seed i's
    :func:`slowdowns`. None where no resample has a ratio."""
    n = len(base)
    rng = random.Random(seed)
    cache: dict[tuple[int, ...], dict[str, dict[str, float | None]]] = {}
    samples: dict[tuple[str, str], list[float]] = {(g, q): [] for g in GROUPS for q in QUANTILES}
    for _ in range(draws if n > 1 else 1):
        picks = tuple(sorted(rng.randrange(n) for _ in range(n)))
        if picks not in cache:
            cache[picks] = ratios_of(_pool(base, picks), _pool(tcd, picks))
        for g, row in cache[picks].items():
            for q, v in row.items():
                if v is not None:
                    samples[(g, q)].append(v)
    out: dict[str, dict[str, list[float] | None]] = {}
    for g in GROUPS:
        out[g] = {}
        for q in QUANTILES:
            vals = sorted(samples[(g, q)])
            out[g][q] = [round(_at(vals, 2.5), 4), round(_at(vals, 97.5), 4)] if vals else None
    return out


def _at(ordered: list[float], pct: float) -> float:
    """The ``pct`` percentile of sorted ``ordered``, interpolated between the nearest ranks."""
    x = pct / 100 * (len(ordered) - 1)
    lo = int(x)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (x - lo)


# ---------------------------------------------------------------------------------- runs
#: the workloads by the names the command takes, and the CDF each names (netstack/sim/workloads)
WORKLOADS = {"websearch": "websearch", "hadoop": "fb-hadoop"}
#: background flows per seed by default: about the same bytes (500 MB websearch, 360 MB fb-hadoop) and
#: so about the same arrival window, and incast, at a load (300 fb-hadoop flows, mean 120 KB, arrive
#: within 0.75 ms at load 0.6)
DEFAULT_FLOWS = {"websearch": 300, "hadoop": 3000}


class CompareError(ValueError):
    """A comparison that cannot run or whose runs failed: the message says why."""


@dataclass(frozen=True)
class FctCompare:
    """One comparison: the topology (a shipped name or a file), the ``tcd-fabric-fct`` parameters
    and the seeds; :meth:`specs` gives its runs."""

    topology: str = "tcd-leafspine"
    workload: str = "websearch"
    load: float = 0.6
    cc: str = "dcqcn"
    seeds: tuple[int, ...] = (1, 2, 3, 4)
    flows: int = 300
    #: any other ``tcd-fabric-fct`` parameter (``incast``, ``incast_senders``, ``size_scale``...)
    params: tuple[tuple[str, Any], ...] = ()
    #: the tcd arm's CE rule (``netstack.tcd.marker``): None, as the topology says (``tcd-leafspine``:
    #: ``ecn``, the base arm's RED); ``tcd``: TCD's own congestion state (not like-for-like)
    ce_rule: str | None = None

    def scenario_params(self) -> dict[str, Any]:
        return {"workload": WORKLOADS.get(self.workload, self.workload), "load": self.load, "cc": self.cc,
                "flows": self.flows, **dict(self.params)}

    def specs(self) -> list[tuple[str, int, RunSpec]]:
        """(arm, seed, run) for every seed and arm, seed by seed."""
        from ..sim.scenario import ScenarioError, get
        from .scenarios import marker_doc

        try:
            get("tcd-fabric-fct").check_params(self.scenario_params())
        except ScenarioError as exc:
            raise CompareError(str(exc)) from None
        docs = {}
        for arm, marker in ARMS.items():
            found = marker_doc(self.topology, marker)
            if found is None:
                raise CompareError(f"topology {self.topology!r}: no such file or shipped topology")
            docs[arm] = found[0]
            if marker == "tcd" and self.ce_rule is not None:
                _set_ce_rule(docs[arm], self.ce_rule)
        _check_compare(self, docs["tcd"])
        return [(arm, seed, RunSpec("tcd-fabric-fct", docs[arm], seed, None, self.scenario_params()))
                for seed in self.seeds for arm in ARMS]


def _set_ce_rule(doc: dict[str, Any], rule: str) -> None:
    """Every ``tcd`` feature of a topology document with CE rule ``rule``."""
    from .params import CE_RULES

    if rule not in CE_RULES:
        raise CompareError(f"ce_rule must be one of {', '.join(CE_RULES)}, got {rule!r}")
    for link in doc.get("links", []):
        for end in (link.get("features") or {}).values():
            if isinstance(end, dict) and isinstance(end.get("tcd"), dict):
                end["tcd"]["ce_rule"] = rule


def _check_compare(cmp: FctCompare, doc: dict[str, Any]) -> None:
    """What would fail every run, said before any: the topology, the workload, the incast."""
    from ..sim.scenario import ScenarioError, resolve_topology
    from ..sim.workload import WorkloadError, flow_sizes
    from ..topo.model import TopologyError
    from .fabric import incast_plan
    from .fct import MAX_FLOWS, marker_of

    p = cmp.scenario_params()
    try:
        topo = resolve_topology(doc)
        marker_of(topo)
        flow_sizes(p["workload"])
        if not 1 <= cmp.flows <= MAX_FLOWS:
            raise CompareError(f"flows must be 1..{MAX_FLOWS}, got {cmp.flows}")
        if not 0 < cmp.load <= 1:
            raise CompareError(f"load must be in (0, 1], got {cmp.load}")
        if not cmp.seeds:
            raise CompareError("no seed")
        if p.get("incast", "persistent") != "none":
            incast_plan(cmp.seeds[0], topo, p.get("incast_receiver") or None, int(p.get("incast_senders", 6)))
    except (ScenarioError, WorkloadError, TopologyError) as exc:
        raise CompareError(str(exc)) from None


def run_compare(cmp: FctCompare, *, workers: int | None = None, progress: Callable[[str], None] = lambda msg: None,
                flow_list: bool = False) -> dict[str, Any]:
    """Every run of ``cmp`` through ``netstack.sim.sweep`` (``workers`` processes, default
    min(2, cores)), then :func:`compare` (``flow_list``: with every flow). CompareError when a run
    failed (the others are lost: a ratio needs both arms of every seed)."""
    from ..sim.sweep import sweep

    runs = cmp.specs()
    if workers is None:
        workers = min(2, os.cpu_count() or 1)

    def said(done: int, total: int, doc: dict[str, Any]) -> None:
        if "error" in doc:
            progress(f"[{done}/{total}] seed {doc['seed']}: FAILED {doc['error']}")
            return
        res = doc["result"]
        arm = next(a for a, m in ARMS.items() if m == res["marker"])
        st = group_stats(res.get("flows") or [])["all"]
        progress(f"[{done}/{total}] seed {doc['seed']} {arm} ({res['mode']}): {res['flows_completed']}/"
                 f"{res['flows_total']} flows, median slowdown {st['median'] or 0:.2f}, p99 {st['p99'] or 0:.2f}, "
                 f"{res['end_paper_ms']:.1f} paper-ms in {doc['engine']['wall_s']:.0f} s")

    docs = sweep([spec for _, _, spec in runs], workers=workers, progress=said)
    failed = [f"{arm} seed {seed}: {doc['error']}" for (arm, seed, _), doc in zip(runs, docs, strict=True)
              if "error" in doc]
    if failed:
        raise CompareError("runs failed: " + "; ".join(failed))
    return compare(cmp, [(arm, seed, doc) for (arm, seed, _), doc in zip(runs, docs, strict=True)], flow_list)


# ------------------------------------------------------------------------------- summary
def _same_flows(by: dict[tuple[str, int], dict[str, Any]], seeds: list[int]) -> None:
    """Both arms of a seed ran the same flows on the same paths (the seed alone draws them)."""
    def key(res: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [(f["fid"], f["src"], f["dst"], f["size"], f["arrival_ns"], f["class"]) for f in res["flows"]]

    for s in seeds:
        if key(by[("base", s)]) != key(by[("tcd", s)]):
            raise CompareError(f"seed {s}: the two arms ran different flows")


def arm_summary(arm: str, seeds: list[int], by: dict[tuple[str, int], dict[str, Any]],
                walls: dict[tuple[str, int], float]) -> dict[str, Any]:
    """One arm: its marking (the ports' settings), cc mode, slowdown per group (every seed's flows
    pooled) and per seed, marks, PFC pauses, flows not completed, wall time of its runs."""
    results = [by[(arm, s)] for s in seeds]
    first = results[0]
    pooled = [f for res in results for f in res["flows"]]
    return {
        "marker": first["marker"], "mode": first["mode"], "marking": first["marking"], "fct": group_stats(pooled),
        "per_seed": [{"seed": s, "fct": group_stats(res["flows"]), "end_paper_ms": res["end_paper_ms"]}
                     for s, res in zip(seeds, results, strict=True)],
        "marks": {k: sum(res["marks"][k] for res in results) for k in first["marks"]},
        "pauses": {k: sum(res["pauses"][k] for res in results) for k in ("on_incast_links", "elsewhere")},
        "incomplete": sum(res["flows_total"] - res["flows_completed"] for res in results),
        "wall_s": round(sum(walls[(arm, s)] for s in seeds), 1),
    }


def setup_of(cmp: FctCompare, seeds: list[int], by: dict[tuple[str, int], dict[str, Any]],
             walls: dict[tuple[str, int], float]) -> dict[str, Any]:
    """What was run: topology, workload, load, cc, flows, incast (per seed: its senders), classes."""
    base = [by[("base", s)] for s in seeds]
    return {
        "topology": cmp.topology, "workload": cmp.workload, "cdf": base[0]["workload"], "load": cmp.load,
        "cc": cmp.cc, "ce_rule": by[("tcd", seeds[0])]["marking"].get("ce_rule"),
        "flows_per_seed": cmp.flows, "size_scale": base[0]["size_scale"],
        "mean_size": base[0]["mean_size"], "time_scale": base[0]["scale"], "params": cmp.scenario_params(),
        "incast": {"kind": base[0]["incast"]["kind"], "receiver": base[0]["incast"]["receiver"],
                   "senders": {str(s): res["incast"]["senders"] for s, res in zip(seeds, base, strict=True)}},
        "classes": {c: sum(res["classes"][c] for res in base) for c in CLASSES},
        "wall_s": round(sum(walls.values()), 1), "paper_ratio": PAPER_RATIO,
    }


def compare(cmp: FctCompare, runs: list[tuple[str, int, dict[str, Any]]], flow_list: bool = False) -> dict[str, Any]:
    """The comparison's JSON object (module docstring) from its run documents, ``(arm, seed, doc)``;
    with ``flow_list`` every flow under ``arms.<arm>.flows`` (:data:`FLOW_FIELDS`, one list each)."""
    by = {(arm, seed): doc["result"] for arm, seed, doc in runs}
    walls = {(arm, seed): float(doc["engine"]["wall_s"]) for arm, seed, doc in runs}
    seeds = list(dict.fromkeys(seed for _, seed, _ in runs))
    _same_flows(by, seeds)
    per_seed = {arm: [slowdowns(by[(arm, s)]["flows"]) for s in seeds] for arm in ARMS}
    pooled = {arm: slowdowns([f for s in seeds for f in by[(arm, s)]["flows"]]) for arm in ARMS}
    arms = {arm: arm_summary(arm, seeds, by, walls) for arm in ARMS}
    if flow_list:
        for arm in ARMS:
            arms[arm]["flows"] = {"fields": list(FLOW_FIELDS),
                                  "rows": [[s, *(f[k] for k in FLOW_FIELDS[1:])] for s in seeds
                                           for f in by[(arm, s)]["flows"]]}
    return {
        "arms": arms,
        "ratio": ratios_of(pooled["base"], pooled["tcd"]),
        "ci95": {"method": CI_METHOD, **bootstrap_ci(per_seed["base"], per_seed["tcd"])},
        "flows": sum(len(by[("base", s)]["flows"]) for s in seeds),
        "seeds": seeds,
        "setup": setup_of(cmp, seeds, by, walls),
    }


#: a flow's fields under ``arms.<arm>.flows`` (``--flow-list``)
FLOW_FIELDS = ("seed", "fid", "src", "dst", "size", "class", "bucket", "slowdown", "ce", "ue")
#: the rows of :func:`table`: (group, label)
TABLE_GROUPS = (("all", "all flows"), ("contributor", "contributors"), ("victim", "victims"), ("other", "others"),
                ("small", "small (< 100 KB)"), ("large", "large (> 1 MB)"), ("victim_small", "victims, small"),
                ("victim_large", "victims, large"))


def table_rows(out: dict[str, Any]) -> list[list[str]]:
    """Per group: flows, base and tcd median / p99 slowdown, the ratios with their ci95."""
    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    def ratio(g: str, q: str) -> str:
        r, ci = out["ratio"][g][q], out["ci95"][g][q]
        return "-" if r is None else f"{r:.2f}x" + ("" if ci is None else f" [{ci[0]:.2f}, {ci[1]:.2f}]")

    rows = []
    for g, label in TABLE_GROUPS:
        b, t = out["arms"]["base"]["fct"][g], out["arms"]["tcd"]["fct"][g]
        rows.append([label, str(b["flows"]), f"{num(b['median'])} / {num(b['p99'])}",
                     f"{num(t['median'])} / {num(t['p99'])}", ratio(g, "median"), ratio(g, "p99")])
    return rows


def table(out: dict[str, Any]) -> str:
    """The readable table of :func:`compare`'s object."""
    from ..bench.output import format_table

    s = out["setup"]
    cc = s["cc"].upper()
    head = (f"FCT slowdown, {cc} vs {cc}+TCD on {s['topology']}: {s['workload']} (x{s['size_scale']:g}) at load "
            f"{s['load']:g}, incast {s['incast']['kind']} to {s['incast']['receiver']}, {out['flows']} flows "
            f"(seeds {','.join(map(str, out['seeds']))}); ratio = {cc} / {cc}+TCD (> 1: TCD helps), "
            f"[95 % interval: {out['ci95']['method'].split(':')[0]}]; the paper: "
            f"{PAPER_RATIO['median']}x median, {PAPER_RATIO['p99']}x p99")
    rows = table_rows(out)
    return head + "\n" + format_table(["flows", "count", f"{cc} median / p99", f"{cc}+TCD median / p99",
                                       "ratio median", "ratio p99"], rows)


__all__ = ["ARMS", "BOOTSTRAP_DRAWS", "BUCKETS", "CI_METHOD", "DEFAULT_FLOWS", "FLOW_FIELDS", "GROUPS", "PAPER_RATIO",
           "QUANTILES", "TABLE_GROUPS", "WORKLOADS", "CompareError", "FctCompare", "arm_summary", "bootstrap_ci",
           "compare", "group_stats", "groups_of", "quantile", "ratios_of", "run_compare", "setup_of", "slowdowns",
           "table", "table_rows"]
