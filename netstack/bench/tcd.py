"""``netstack bench tcd``: TCD's §3.1 scenarios and its FCT comparison, in virtual time.

"Congestion Detection in Lossless Networks" (TCD, SIGCOMM 2021). Sections (``--only NAME``):

``scenarios`` (virtual time, the paper's 40 Gbit/s and 4 us links, time scale 1)
    §3.1's *single* and *multiple congestion points* scenarios (the ``tcd`` scenario,
    ``netstack.tcd.scenarios``) with the ECN baseline (CE above K = 200 KB) and with TCD, one run
    each: per flow (F0, F1, F2) its packets, CE and undetermined (UE) marks, in total and at each
    port; per port (P0-P3) the time in each TCD state. PNGs like the paper's figures: the queue
    length and sending rate over time at P0-P3, ECN vs TCD, for the single (Fig. 3,
    ``bench-tcd-fig3.png``) and the multiple congestion points scenario (Fig. 4,
    ``bench-tcd-fig4.png``; the series, sampled every 5 us of virtual time, under ``figs`` in the
    JSON: netstack/tcd/series.py; P2's panels carry the paper's number, from
    docs/data/tcd-paper/claims.toml: its queue "over 500KB", ON-OFF "until 1.6ms"); the TCD ports'
    state over time (``bench-tcd-states.png``) and the marks per flow, ECN vs TCD
    (``bench-tcd-marks.png``).

``fct`` (virtual time, 40 Gbit/s; ``netstack/bench/tcdfct.py``)
    TCD's FCT comparison on the ``tcd-leafspine`` fabric (``netstack tcd fct``, issue 30): full-size
    websearch flows under DCQCN and under TIMELY, and fb-hadoop under DCQCN, at load 0.6 with a
    persistent incast, each cc alone and with TCD on the same flows (seeds 1-4); the slowdown per
    class (contributor, victim, other) and size bucket, the ratio cc / cc+TCD with a 95 % interval,
    against the paper's abstract (3.3x at the median, 2.0x at p99; > 1 means TCD is better).
    ``bench-tcd-fct.png``: slowdown CDFs and the ratios per group. (The FCT runs on §3.1's chain,
    the ``tcd-fct`` scenario, are no longer part of the benchmark: on the chain almost no flow was
    a victim of PFC.)

``live`` (off unless ``--live``; root: namespaces, switch daemons)
    The two §3.1 scenarios on the live testbed at the shipped 40 Mbit/s scale (times x1000:
    ``tcd-single`` / ``tcd-multi``, marker switched as ``netstack tcd run --marker`` does), both
    markers, the same table as ``scenarios``. About 10 s of traffic and set-up per run. The global
    ``--prefix P`` (``netstack --prefix P bench tcd --live``) names the testbeds; without it each
    run picks its own.

Targets (``targets``, the table at the end): the §3.1 outcome of every runtime that ran (ECN marks
the victim F0 CE, TCD marks it undetermined and never CE, ...: :data:`CLAIMS`) is a *correctness
cross-check* (kind ``check``; live: the testbed agrees with virtual time and the paper); the FCT gain
against the paper's abstract is a *performance goal* (kind ``goal``, reported, never an error).
Every run carries its verdict (netstack.validity; ``valid``/``checks`` of the run document, from
netstack/tcd/verdict.py); a run that is not valid (in practice a live one the machine starved), or
a live run that failed (its error is the reason), is left out of the tables, plots and targets and
listed (``invalid_rows``, "Invalid runs (not counted)"), the other runs stand; ``netstack bench
tcd`` then exits 3 (``INVALID RUN``), or 1 when a cross-check failed (``CROSS-CHECK FAILED``).

``--quick`` (the smoke test): the scenarios as above, the FCT section with 6 tiny flows (x0.05) per
seed, seeds 1-2, websearch under DCQCN and TIMELY. Output: ``<results>/bench-tcd-<UTC>.json`` (+
``-latest``, every run in the ``netstack.run/1`` schema under ``runs``), the tables printed and
written to ``bench-tcd-latest.md``, the PNGs beside them; progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..reproduce import paperdata
from ..sim.scenario import RunSpec, resolve_topology
from ..sim.sweep import sweep
from ..tcd.scenarios import (
    ECN_K_BYTES,
    KINDS,
    LIVE_RATE_BPS,
    MARKERS,
    PAPER_DELAY_NS,
    PAPER_RATE_BPS,
    PORTS,
    STATES,
    Workload,
    marker_of,
    topology_doc,
)
from ..validity import Validity
from .output import Progress, format_table, loadavg, write_results
from .plot import pyplot, save
from .proc import sigterm_unwinds
from .tcdfct import section_fct

SECTIONS = ("scenarios", "fct", "live")
FLOWS = ("F0", "F1", "F2")
SCENARIO_SEED = 1
TITLES = {"single": "single congestion point", "multi": "multiple congestion points"}


# ----------------------------------------------------------------------------- §3.1
def scenario_specs(runtime: str = "sim", prefix: str | None = None) -> list[RunSpec]:
    """The four §3.1 runs (both scenarios, both markers); ``prefix``: the live testbed's namespace
    prefix (None: each live run picks its own, ``netstack.sim.scenarios.live_prefix``)."""
    specs = []
    for kind in KINDS:
        for marker in MARKERS:
            topo: str | dict[str, Any]
            if runtime == "sim":
                topo = topology_doc(kind, marker, rate_bps=PAPER_RATE_BPS)
            else:
                topo = _live_topology(kind, marker)
            params = {"kind": kind, "timeline": True, "series": runtime == "sim"}  # (Figs. 3-4: virtual time)
            specs.append(RunSpec("tcd", topo, SCENARIO_SEED, None, params, runtime=runtime,
                                 prefix=prefix if runtime == "live" else None))
    return specs


def _live_topology(kind: str, marker: str) -> str | dict[str, Any]:
    """The shipped file when it carries ``marker``, else the same document with it switched."""
    name = f"tcd-{kind}"
    if marker_of(resolve_topology(name)) == marker:
        return name
    return topology_doc(kind, marker, rate_bps=LIVE_RATE_BPS)


def scenario_rows(docs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(per flow rows, per port rows) of the §3.1 runs."""
    flows, ports = [], []
    for doc in docs:
        res = doc["result"]
        base = {"runtime": doc["runtime"], "scenario": res["scenario"], "marker": res["marker"],
                "time_scale": doc["time_scale"]}
        for name in FLOWS:
            f = res["flows"].get(name) or {}
            flows.append(base | {"flow": name, "packets": f.get("packets", 0), "ce": f.get("ce", 0),
                                 "undetermined": f.get("undetermined", 0), "rate_cuts": f.get("rate_cuts", 0)})
        for name in PORTS:
            p = res["ports"].get(name)
            if p is None:
                continue
            tis = p.get("time_in_state_ns")
            row = base | {"port": name, "marked_ce": p.get("marked_ce", 0), "marked_ue": p.get("marked_ue", 0),
                          "pauses": p.get("pauses"), "flow_marks": p.get("flow_marks") or {}}
            for s in STATES:
                row[f"{s}_ms"] = tis[s] / 1e6 / doc["time_scale"] if tis else None
            ports.append(row)
    return flows, ports


def flow_table(rows: list[dict[str, Any]]) -> str:
    return format_table(["runtime", "scenario", "marker", "flow", "packets", "CE", "undetermined", "CE %", "UE %"],
                        [[r["runtime"], r["scenario"], r["marker"], r["flow"], r["packets"], r["ce"],
                          r["undetermined"], _pct(r["ce"], r["packets"]), _pct(r["undetermined"], r["packets"])]
                         for r in rows])


def port_table(rows: list[dict[str, Any]]) -> str:
    def ms(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    return format_table(["runtime", "scenario", "marker", "port", "non-congestion ms", "undetermined ms",
                         "congestion ms", "marked CE", "marked UE"],
                        [[r["runtime"], r["scenario"], r["marker"], r["port"], ms(r["non_congestion_ms"]),
                          ms(r["undetermined_ms"]), ms(r["congestion_ms"]), r["marked_ce"], r["marked_ue"]]
                         for r in rows])


def flow_port_table(rows: list[dict[str, Any]]) -> str:
    """CE / UE marks each port decided per long flow (TCD §3.1: "F0 is mistakenly marked with ECN at
    port P2 [...] partial packets of F1 are marked with ECN at port P2")."""
    def cell(r: dict[str, Any], flow: str) -> str:
        m = r["flow_marks"].get(flow)
        return "-" if m is None else f"{m['ce']} / {m['ue']}"

    return format_table(["runtime", "scenario", "marker", "port", *(f"{f} CE / UE" for f in FLOWS)],
                        [[r["runtime"], r["scenario"], r["marker"], r["port"], *(cell(r, f) for f in FLOWS)]
                         for r in rows])


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.1f}" if b else "-"


def plot_states(docs: list[dict[str, Any]], path: Path) -> bool:
    """Each TCD port's state over time (paper time, ms), one column per scenario."""
    plt = pyplot()
    if plt is None:
        return False
    runs = [d for d in docs if d["result"]["marker"] == "tcd"]
    if not runs:
        return False
    fig, axes = plt.subplots(len(PORTS), len(runs), figsize=(5.5 * len(runs), 1.4 * len(PORTS) + 1),
                             squeeze=False, sharex="col")
    for col, doc in enumerate(runs):
        res = doc["result"]
        scale = doc["time_scale"]
        end_ms = Workload(res["scenario"]).end_ns / 1e6 + 0.5
        for row, name in enumerate(PORTS):
            ax = axes[row][col]
            tl = (res["ports"].get(name) or {}).get("timeline") or []
            if tl:
                xs = [t / scale / 1e6 for t, _ in tl] + [end_ms]
                ys = [s for _, s in tl] + [tl[-1][1]]
                ax.step(xs, ys, where="post", color="tab:blue")
            ax.set_yticks([0, 1, 2], ["non-cong.", "undet.", "cong."])
            ax.set_ylim(-0.3, 2.3)
            ax.set_xlim(0, end_ms)
            ax.grid(alpha=0.3)
            ax.set_ylabel(name)
            if row == 0:
                ax.set_title(f"{TITLES[res['scenario']]}, TCD ({doc['runtime']})")
        axes[-1][col].set_xlabel("time (ms, paper scale)")
    save(plt, fig, path, dpi=110)
    return True


def plot_marks(rows: list[dict[str, Any]], path: Path) -> bool:
    """Marked packets per flow: ECN's CE vs TCD's CE and UE, one panel per scenario."""
    plt = pyplot()
    if plt is None:
        return False
    kinds = [k for k in KINDS if any(r["scenario"] == k for r in rows)]
    if not kinds:
        return False
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.5 * len(kinds), 4), squeeze=False)
    width = 0.27
    for ax, kind in zip(axes[0], kinds, strict=True):
        sel = {(r["marker"], r["flow"]): r for r in rows if r["scenario"] == kind}
        xs = range(len(FLOWS))
        series = (("ecn", "ce", "ECN: CE", "tab:red"), ("tcd", "ce", "TCD: CE", "tab:orange"),
                  ("tcd", "undetermined", "TCD: UE", "tab:blue"))
        for i, (marker, key, label, color) in enumerate(series):
            ax.bar([x + (i - 1) * width for x in xs], [(sel.get((marker, f)) or {}).get(key, 0) for f in FLOWS],
                   width, label=label, color=color)
        ax.set_xticks(list(xs), FLOWS)
        ax.set_ylabel("marked packets")
        ax.set_title(TITLES[kind])
        ax.grid(axis="y", alpha=0.3)
        ax.legend()
    save(plt, fig, path, dpi=110)
    return True


#: the paper's figure for each scenario: queue length and sending rate over time at P0-P3
FIGS = {"single": "fig3", "multi": "fig4"}
STATE_SHADE = {1: ("tab:orange", "undetermined"), 2: ("tab:red", "congestion")}


def take_series(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{scenario: {marker: series}}`` (netstack/tcd/series.py), moved out of the run documents
    (they would carry it twice in the JSON); the paper's time and Gbit/s added for the plots."""
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        res = doc["result"]
        series = res.pop("series", None)
        if series is not None:
            series["time_scale"] = doc["time_scale"]
            series["timelines"] = {n: p.get("timeline") for n, p in res["ports"].items()}
            out.setdefault(res["scenario"], {})[res["marker"]] = series
    return out


def plot_fig(kind: str, runs: dict[str, Any], path: Path) -> bool:
    """The paper's Fig. 3 (single) or Fig. 4 (multi): per port (rows P0-P3) and marker (columns ECN,
    TCD), the queue length (KB, filled) and the sending rate (Gbit/s, line) over paper time; the
    TCD ports' undetermined and congestion spells shaded, ECN's K drawn."""
    plt = pyplot()
    markers = [m for m in MARKERS if m in runs]
    if plt is None or not markers:
        return False
    fig, axes = plt.subplots(len(PORTS), len(markers), figsize=(6.5 * len(markers), 1.9 * len(PORTS) + 1),
                             squeeze=False, sharex=True)
    for col, marker in enumerate(markers):
        se = runs[marker]
        scale = se["time_scale"]
        xs = [t / scale / 1e6 for t in se["t_ns"]]
        for row, name in enumerate(PORTS):
            ax = axes[row][col]
            r = se["ports"][name]
            _shade_states(ax, (se["timelines"].get(name) or []), scale, xs[-1] if xs else 0.0)
            ax.fill_between(xs, [q / 1e3 for q in r["queue_bytes"]], step="post", color="tab:blue", alpha=0.45,
                            label="queue (KB)")
            if marker == "ecn":
                ax.axhline(ECN_K_BYTES / 1e3, color="tab:blue", ls=":", lw=0.8, label="ECN K 200 KB")
            paper = _paper_marks(ax, kind) if name == "P2" else None
            ax.set_ylabel(f"{name}\nqueue KB")
            ax.grid(alpha=0.3)
            rate = ax.twinx()
            rate.step(xs, [b * scale / 1e9 for b in r["tx_bps"]], where="post", color="k", lw=0.7,
                      label="sending rate (Gbit/s)")
            rate.set_ylim(0, PAPER_RATE_BPS / 1e9 * 1.1)
            rate.set_ylabel("Gbit/s")
            if paper is not None:  # (on the twin axes: drawn above the sending rate)
                rate.legend(handles=[paper], fontsize=7, loc="lower right", framealpha=0.95)
            if row == 0:
                ax.set_title(f"{TITLES[kind]}: {marker.upper()}")
                handles = ax.get_legend_handles_labels()[0] + rate.get_legend_handles_labels()[0]
                ax.legend(handles=handles, fontsize=7, loc="upper left", framealpha=0.9)
        axes[-1][col].set_xlabel("time (ms, paper scale)")
    save(plt, fig, path, dpi=100)
    return True


#: the paper's numbers drawn on P2's panels (docs/data/tcd-paper/claims.toml): Fig. 3, P2's queue
#: "over 500KB"; Fig. 4, P2 ON-OFF "until 1.6ms" after the bursts start (§3.1)
PAPER_MARKS = {"single": ("fig3-p2-queue", "h"), "multi": ("fig4-onoff-cee", "v")}


def _paper_marks(ax: Any, kind: str) -> Any:
    """The paper's number for P2 in this scenario, as a dashed red line; the line, or None if the
    paper's claims file cannot be read (the plot stands without it)."""
    cid, how = PAPER_MARKS[kind]
    try:
        value = paperdata.load("tcd")[cid].value
    except paperdata.PaperDataError:
        return None
    if value is None:
        return None
    if how == "h":
        line = ax.axhline(value, color="tab:red", ls="--", lw=0.9, label=f"the paper: P2's queue over {value:g} KB")
    else:  # the paper's time 0 is the bursts' start
        line = ax.axvline(Workload(kind).warmup_ns / 1e6 + value, color="tab:red", ls="--", lw=0.9,
                          label=f"the paper: P2 ON-OFF until {value:g} ms")
    return line


def _shade_states(ax: Any, timeline: list[list[int]], scale: float, end_ms: float) -> None:
    """Background spans of a TCD port's undetermined (orange) and congestion (red) states."""
    if not timeline:
        return  # (an ECN port: no states)
    for (t, st), nxt in zip(timeline, [*timeline[1:], [end_ms * 1e6 * scale, 0]], strict=True):
        if st in STATE_SHADE:
            ax.axvspan(t / scale / 1e6, nxt[0] / scale / 1e6, color=STATE_SHADE[st][0], alpha=0.15, lw=0)


# ------------------------------------------------------------------- validity and targets
#: What §3.1's scenarios exist to show, per scenario: the outcome tests/tcd/test_scenarios.py
#: (virtual time) and tests/integration/test_tcd_live.py (live) check. A run that breaks one is a
#: wrong result, not a slow one: each is a correctness cross-check of the benchmark.
CLAIMS = {
    "single": "ECN marks the victim F0 CE; TCD marks it undetermined and never CE, P2 (only paused) is "
              "undetermined and never in congestion; the contributor F1 is CE under both",
    "multi": "TCD: P2 is a congestion point (F0 + F2 overload it) and undetermined while P3, in congestion, "
             "pauses it (the covered root, §3.2.1)",
}
#: the markers each scenario's claims read
CLAIM_MARKERS = {"single": ("ecn", "tcd"), "multi": ("tcd",)}


def _flow(res: dict[str, Any], name: str, key: str) -> int:
    return int((res["flows"].get(name) or {}).get(key) or 0)


def _state_ns(res: dict[str, Any], port: str, state: str) -> int:
    tis = (res["ports"].get(port) or {}).get("time_in_state_ns") or {}
    return int(tis.get(state) or 0)


def claims_hold(kind: str, results: dict[str, dict[str, Any]]) -> dict[str, bool]:
    """Each claim of :data:`CLAIMS` on the scenario's results by marker (run documents' ``result``)."""
    tcd = results["tcd"]
    if kind == "single":
        ecn = results["ecn"]
        return {"ECN: F0 marked CE": _flow(ecn, "F0", "ce") > 0,
                "TCD: F0 never CE": _flow(tcd, "F0", "ce") == 0,
                "TCD: F0 marked undetermined": _flow(tcd, "F0", "undetermined") > 0,
                "TCD: P2 undetermined": _state_ns(tcd, "P2", "undetermined") > 0,
                "TCD: P2 never in congestion": _state_ns(tcd, "P2", "congestion") == 0,
                "F1 CE under ECN and TCD": _flow(ecn, "F1", "ce") > 0 and _flow(tcd, "F1", "ce") > 0}
    return {"TCD: P2 in congestion": _state_ns(tcd, "P2", "congestion") > 0,
            "TCD: P2 undetermined": _state_ns(tcd, "P2", "undetermined") > 0,
            "TCD: P3 in congestion": _state_ns(tcd, "P3", "congestion") > 0}


def scenario_targets(docs: list[dict[str, Any]], runtime: str) -> list[dict[str, Any]]:
    """One correctness cross-check per §3.1 scenario run in ``runtime``; not judged (``met``
    None) when a run it reads is invalid (netstack.validity)."""
    targets = []
    for kind in KINDS:
        runs = {d["result"]["marker"]: d for d in docs
                if d["runtime"] == runtime and d["result"].get("scenario") == kind}
        if not all(m in runs for m in CLAIM_MARKERS[kind]):
            continue
        where = ("live, agrees with virtual time and the paper" if runtime == "live"
                 else "virtual time, the paper's 40 Gbit/s")
        target: dict[str, Any] = {"kind": "check", "what": f"§3.1 {TITLES[kind]} ({where}): {CLAIMS[kind]}",
                                  "target": "yes", "value": "-", "met": None}
        if all(runs[m].get("valid", True) for m in CLAIM_MARKERS[kind]):
            held = claims_hold(kind, {m: runs[m]["result"] for m in CLAIM_MARKERS[kind]})
            failed = [name for name, ok in held.items() if not ok]
            target.update(value="yes" if not failed else "no: " + "; ".join(failed), met=not failed,
                          claims=held)
        targets.append(target)
    return targets


def targets_table(targets: list[dict[str, Any]]) -> str:
    rows = []
    for t in targets:
        v, tg = t["value"], t["target"]
        verdict = "not judged (invalid run)" if t["met"] is None else ("met" if t["met"] else "NOT met")
        rows.append([t["what"], "cross-check" if t["kind"] == "check" else "goal",
                     f"{v:.2f}x" if isinstance(v, float) else v, f">= {tg:g}x" if isinstance(tg, float) else tg,
                     verdict])
    return format_table(["target", "kind", "measured", "target value", "verdict"], rows)


def counted(docs: list[dict[str, Any]], section: str, out: dict[str, Any]) -> list[dict[str, Any]]:
    """The runs that count; the others go to ``out["invalid_rows"]`` with their reasons."""
    for d in docs:
        if not d.get("valid", True):
            res = d["result"]
            out["invalid_rows"].append({"row": f"{section} {res.get('scenario')} {res.get('marker')}",
                                        "reasons": Validity.of(d).reasons or ["the run says it is invalid"]})
    return [d for d in docs if d.get("valid", True)]


def verdicts(out: dict[str, Any]) -> dict[str, Any]:
    """``valid``, ``checks`` (each invalid run a failed check), ``cross_checks`` (the targets of kind
    check that were judged): what ``netstack bench`` ends with (netstack/bench/summary.py)."""
    invalid = out["invalid_rows"]
    return {"valid": not invalid,
            "checks": [{"name": r["row"], "expected": "a valid run", "measured": "; ".join(r["reasons"]),
                        "ok": False} for r in invalid],
            "cross_checks": [{"what": t["what"], "ok": bool(t["met"])} for t in out["targets"]
                             if t["kind"] == "check" and t["met"] is not None]}


def invalid_lines(invalid: list[dict[str, Any]]) -> list[str]:
    if not invalid:
        return []
    return ["## Invalid runs (not counted)", "",
            "Runs that did not happen as planned (netstack.validity, netstack/tcd/verdict.py: a sender short of "
            "its plan, P2 never paused, a process that waited for the CPU longer than TCD's timers tolerate), "
            "or failed with an error. They are left out of every table, plot and target above.", "",
            *[f"- {r['row']}: {'; '.join(r['reasons'])}" for r in invalid], ""]


# ---------------------------------------------------------------------------------- main
def _run(specs: list[RunSpec], what: str, workers: int | None, say: Progress, *,
         keep_failed: bool = False) -> list[dict[str, Any]]:
    """Every spec through the sweep, in order. A run that failed raises (virtual time: a bug), or
    with ``keep_failed`` stays in the list as the sweep's error document (``"error"``, ``spec``):
    the live section lists it as an invalid row and keeps the good runs (:func:`failed_rows`)."""
    def progress(done: int, total: int, r: dict[str, Any]) -> None:
        if "error" in r:
            say(f"{what} [{done}/{total}]: {r['params']}: FAILED {r['error']}")
            return
        res = r["result"]
        say(f"{what} [{done}/{total}]: {res.get('scenario')} {res['marker']} ({r['engine']['wall_s']:.1f} s)")

    docs = sweep(specs, workers=workers, progress=progress)
    for doc in docs:
        if "error" in doc and not keep_failed:
            raise RuntimeError(f"{what} run failed: {doc['error']}")
    return docs


def failed_rows(docs: list[dict[str, Any]], specs: list[RunSpec], section: str) \
        -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """For every run that failed (the sweep's error document): an invalid row (which run, its error
    as the reason), and a stand-in run document that is not valid, so that the targets it would
    have judged say "not judged" as for a starved run."""
    rows, stand_ins = [], []
    for doc, spec in zip(docs, specs, strict=True):
        if "error" in doc:
            kind, marker = spec.params.get("kind"), marker_of(resolve_topology(spec.topology))
            rows.append({"row": f"{section} {kind} {marker}", "reasons": [f"the run failed: {doc['error']}"]})
            stand_ins.append({"runtime": spec.runtime, "valid": False, "result": {"scenario": kind, "marker": marker}})
    return rows, stand_ins


def section_scenarios(workers: int | None, results_dir: Path, say: Progress, out: dict[str, Any]) -> list[str]:
    """§3.1 in virtual time: rows into ``out``; the Markdown lines."""
    say("scenarios: §3.1 single and multi, ECN and TCD, at 40 Gbit/s / 4 us in virtual time")
    docs = _run(scenario_specs("sim"), "scenarios", workers, say)
    out["runs"] += docs
    out["targets"] += scenario_targets(docs, "sim")  # an invalid run: its target is not judged
    docs = counted(docs, "scenarios", out)  # virtual time: valid by construction, checked all the same
    fr, pr = scenario_rows(docs)
    out["scenarios"] = {"flows": fr, "ports": pr, "seed": SCENARIO_SEED}
    out["figs"] = take_series(docs)
    for kind, runs in out["figs"].items():
        png = results_dir / f"bench-tcd-{FIGS[kind]}.png"
        if plot_fig(kind, runs, png):
            out["plots"][FIGS[kind]] = str(png)
    png = results_dir / "bench-tcd-states.png"
    if plot_states(docs, png):
        out["plots"]["states"] = str(png)
    png = results_dir / "bench-tcd-marks.png"
    if plot_marks(fr, png):
        out["plots"]["marks"] = str(png)
    return ["## §3.1 scenarios, 40 Gbit/s, 4 us links (virtual time): marks per flow", "", flow_table(fr), "",
            "## §3.1: time per state per port (paper ms; ECN ports have no TCD state)", "", port_table(pr), "",
            "## §3.1: marks per flow at each port (each port's own decisions)", "", flow_port_table(pr), ""]


def section_live(say: Progress, out: dict[str, Any], prefix: str | None = None) -> list[str]:
    """§3.1 on the live testbed (root), one run at a time: rows into ``out``; the Markdown lines.
    ``prefix``: the testbeds' namespace prefix (``netstack --prefix P bench tcd --live``)."""
    say("live: §3.1 single and multi, ECN and TCD, on the testbed at 40 Mbit/s (time scale 1000)")
    specs = scenario_specs("live", prefix)
    docs = _run(specs, "live", 1, say, keep_failed=True)
    out["runs"] += docs
    # a run that failed is listed with its error and judges nothing; the others stand
    failed, stand_ins = failed_rows(docs, specs, "live")
    out["invalid_rows"] += failed
    docs = [d for d in docs if "error" not in d]
    # a run the machine starved (netstack/tcd/verdict.py) shows no §3.1: listed, not tabulated
    out["targets"] += scenario_targets(docs + stand_ins, "live")  # an invalid run: its target is not judged
    valid = counted(docs, "live", out)
    fr, pr = scenario_rows(valid)
    total = len(docs) + len(failed)
    out["live"] = {"flows": fr, "ports": pr, "runs_valid": len(valid), "runs": total, "runs_failed": len(failed)}
    return [f"## §3.1 live (40 Mbit/s, x1000): marks per flow ({len(valid)} of {total} runs valid)", "",
            flow_table(fr), "", "## §3.1 live: time per state per port (paper ms)", "", port_table(pr), ""]


def _sections(args: argparse.Namespace) -> list[str]:
    only = getattr(args, "only", None)
    runtime_arg = getattr(args, "runtime", None)
    live = bool(getattr(args, "live", False)) or runtime_arg == "live"
    wanted = [s for s in SECTIONS if (s != "live" or live) and (runtime_arg != "live" or s == "live")]
    return [s for s in wanted if not only or any(o in s for o in only)]


def main(args: argparse.Namespace) -> int:
    sections = _sections(args)
    if not sections:
        print(f"no section matches --only/--runtime (sections: {', '.join(SECTIONS)}; live needs --live)",
              file=sys.stderr)
        return 2
    if "live" in sections and os.geteuid() != 0:
        print("netstack bench tcd: --live needs root (namespaces, veths, switch daemons)", file=sys.stderr)
        return 2
    quick = bool(getattr(args, "quick", False))
    workers = getattr(args, "workers", None)
    results_dir = Path(getattr(args, "results_dir", "results"))
    say = Progress()
    say(f"netstack bench tcd{' --quick' if quick else ''}: sections {', '.join(sections)}; scale: "
        f"{PAPER_RATE_BPS / 1e9:g} Gbit/s links, {PAPER_DELAY_NS / 1e3:g} us each (time scale 1, virtual time)")
    out: dict[str, Any] = {"sections": sections, "quick": quick, "loadavg_before": loadavg(),
                           "scale": {"rate_bps": PAPER_RATE_BPS, "delay_ns": PAPER_DELAY_NS, "time_scale": 1.0},
                           "runs": [], "plots": {}, "targets": [], "invalid_rows": []}
    errors: dict[str, str] = {}
    md = ["# netstack bench tcd", "", "\"Congestion Detection in Lossless Networks\" (TCD, SIGCOMM 2021).", ""]
    started = time.monotonic()
    results_dir.mkdir(parents=True, exist_ok=True)
    with sigterm_unwinds():
        if "scenarios" in sections:
            md += section_scenarios(workers, results_dir, say, out)
        if "fct" in sections:
            md += section_fct(quick, workers, results_dir, say, out)
        if "live" in sections:
            try:
                md += section_live(say, out, getattr(args, "global_prefix", None))
            except Exception as exc:  # recorded; the virtual-time sections stand
                errors["live"] = f"{type(exc).__name__}: {exc}"
                say(f"live: FAILED ({errors['live']})")
    md += [f"![{k}]({Path(v).name})" for k, v in out["plots"].items()]
    if out["targets"]:
        md += ["", "## Targets", "", targets_table(out["targets"]), ""]
    md += invalid_lines(out["invalid_rows"])
    out.update(errors=errors, wall_s=time.monotonic() - started, loadavg_after=loadavg(), **verdicts(out))
    path = write_results(results_dir, "bench-tcd", out)
    text = "\n".join(md) + "\n"
    (results_dir / "bench-tcd-latest.md").write_text(text)
    print(text)
    print(f"results: {path}")
    if errors:
        print(f"errors: {errors}", file=sys.stderr)
        return 1
    return 0
