"""``netstack bench onepipe``: 1Pipe's evaluation (the paper's §7: Figs. 8-12, 14) with its baselines
measured in the same run.

Sections (``--only`` picks by substring), each in virtual time (or in process) and, where it makes
sense, live (``--runtime sim|live``; default both):

``fig8``
    Delivered messages/s per process and delivery latency as the number of processes grows.
    *sim*: 1..512 processes on a 32-host fabric at the paper's scale (100 Gbit/s, T_beacon 3 us,
    time scale 1), each scattering 64-byte messages to 2 random processes at a fixed rate; the
    same load through a central sequencer (``netstack.onepipe.sequencer``: one core at the
    paper's sequencer's capacity, 53 M msg/s, read off its Fig. 8a) and the unordered baseline
    (each message's arrival at its receiver, same run): where the sequencer saturates, 1Pipe's
    per-process rate stays flat. The simulator's own speed per run (events, CPU seconds, events
    per CPU-second: ``fig8.sim_speed`` and a table; issue 31) shows whether the model's cost per
    event grows with P. *live*: ``netstack onepipe run`` with 4, 8 and 16 processes on the
    shipped ``onepipe`` topology (1000x scale).
``fig9a``
    The mean latency overhead over the unordered baseline on an idle system, vs T_beacon (1, 3,
    10, 30 us) and vs clock skew (mean |offset| 0, 0.3, 1, 3 us), sim; the target: within 1.5x
    of T_beacon/2 + mean skew (the paper's §7), met or missed per point. The baseline in the same
    run: switches that beacon on their T_beacon idle timer only (``prompt_beacons`` off), which
    shows what the switches' beacon phase costs.
``fig9a-testbed``
    Fig. 9a on a model of the paper's testbed (netstack/bench/onepipe/testbed.py): a 3-tier fat
    tree, processes packed so that 8, 16 and 32+ sit 1, 3 and 5 hops apart, a host stack
    calibrated on the paper's 1-hop unordered latency; BE and R, switch-chip and host-delegate
    (also picked by ``--only fig9a``).
``fig9b``
    Latency vs loss, sim at fig9a's idle load: as the paper places it (1Pipe §7.1, a drop in every
    process's receiving library, the onepipe scenario's ``loss_at=receivers``), best effort and
    reliable at 512 processes and the paper's loss values (1e-8 .. 1e-1); and on every ToR-spine
    link (0, 1e-5 .. 1e-1; best effort, 128 processes). Live with ``--loss tor1-spine1:RATE``
    (8 processes), every log checked for total order.
``store``, ``reliable``, ``fig10``
    Reliable 1Pipe (netstack/bench/onepipe/reliable.py): the controller store's cost, reliable
    against best effort, recovery time per failed component vs hosts.
``fig11``
    In process: our receiving engine holding what a reordering delay (0-125 us) makes it hold, its
    CPU per message and its buffer's memory (netstack/bench/onepipe/reorder.py).
``fig12``
    Latency beside background TCP flows (0-10 a host) and on an oversubscribed fabric (1:1-6:1),
    sim (netstack/bench/onepipe/fig12.py, the onepipe scenario's ``bg_flows``).
``kv``
    The transactional KV store (§7.3, Figs. 14a and 14b), 1Pipe against lock-based 2PC, sim
    (netstack/bench/onepipe/kv.py).

Output: ``<results>/bench-onepipe-<UTC>.json`` (+ ``-latest``; every run in the ``netstack.run/1``
schema under ``runs``), the Markdown tables printed and written to ``bench-onepipe-latest.md``,
``bench-onepipe-fig8.png``, ``-fig9a.png``, ``-fig9b.png``; progress on stderr. Whatever sections
ran, "paper vs ours" (``paper.py``) sets every point of the paper's Figs. 8-15 (the authors' data,
docs/data/onepipe-paper/) beside this run's number for it, or the reason there is none: the JSON's
``paper`` (rows, summary, source, ``plots``), a table per figure, ``bench-onepipe-paper-figN.png``.
``--duration S``: the live runs' length (default 3 s); the virtual-time runs scale with it (their defaults x S/3).
``--workers N``: sim runs in parallel. ``--quick``: only the virtual-time points of at most
:data:`QUICK_MAX_PROCS` processes (a few minutes instead of about 16; the paper's points at 128-512
processes are then "not measured in this run").
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from ...onepipe import cpucost
from ...topo.values import parse_rate
from ..output import Progress, loadavg, write_results
from ..proc import sigterm_unwinds
from . import live as live_mod
from . import report, spec, testbed
from . import sim as sim_mod

SECTIONS = ("fig8", "fig9a", "fig9a-testbed", "fig9b", "store", "reliable", "fig10", "fig11", "fig12", "kv")
LIVE_SECTIONS = ("fig8", "fig9b")
DEFAULT_LIVE_SECONDS = 3.0
#: ``--quick``: the virtual-time points of at most this many processes
QUICK_MAX_PROCS = 64
NAME = "bench-onepipe"


def _selected(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(sections, runtimes) chosen by ``--only`` and ``--runtime``."""
    only = getattr(args, "only", None)
    sections = [s for s in SECTIONS if not only or any(o in s for o in only)]
    rt = getattr(args, "runtime", None)
    runtimes = [r for r in ("sim", "live") if rt in (None, r)]
    if "live" in runtimes and not any(s in LIVE_SECTIONS for s in sections):
        runtimes.remove("live")
    return sections, runtimes


def scale_notes(seconds: float, factor: float) -> dict[str, str]:
    s = sim_mod
    return {
        "sim": (f"paper scale, time scale 1: a fabric of 4 ToRs x 8 hosts under one spine (+ the sequencer's host), "
                "100 Gbit/s (fig8: hosts 400 Gbit/s, uplinks 3.2 Tbit/s, no oversubscription), 250 ns a link; "
                f"T_beacon {spec.T_BEACON_NS / 1e3:g} us; {spec.SIZE} B messages to {spec.FANOUT} random processes; "
                "fig8 with the host CPU model (docs/onepipe-cpu.md), each process offered "
                f"{s.FIG8_RATE * spec.FANOUT / 1e6:g} M msg/s ({s.FIG8_OVERLOAD:g}x best effort's capacity), "
                f"fig9a/fig9b {s.FIG9A_RATE * spec.FANOUT / 1e6:g} M (idle, {s.FIG9A_PROCS}/{s.FIG9B_RX_PROCS} "
                f"processes; fig9b's link loss at {s.FIG9B_PROCS}; fig9b's R-chip again, loaded, at "
                + ", ".join(f"{s.FIG9B_RATE * load * spec.FANOUT / 1e6:.3g} M ({load:.3g}x)" for load in s.FIG9B_LOADS)
                + f", {s.FIG9B_LOADED_DURATION_NS * factor / 1e3:g} us: the paper's Fig. 8a R throughput, "
                f"{cpucost.PAPER_R_MSGS_PER_S / 1e6:g} M, capped at {s.FIG9B_LINK_SHARE:.0%} of what a host link "
                "carries); the testbed model (fig9a-testbed, fig9b at the receivers): the paper's fat tree, host "
                f"links {s.FIG9B_HOST_LINK_BPS / 1e9:g} Gbit/s, fabric links "
                f"{parse_rate(testbed.TESTBED_UPLINK_RATE) / 1e12:g} Tbit/s (no oversubscription); "
                "virtual run lengths fig8 "
                f"{s.FIG8_DURATION_NS * factor / 1e3:g} us at every P (throughput window its last "
                f"{s.fig8_window_ns(factor) / 1e3:g} us = {s.fig8_window_ns(factor) / spec.T_BEACON_NS:g} "
                "beacon periods), "
                f"fig9a {s.FIG9A_DURATION_NS * factor / 1e3:g} us, fig9b {s.FIG9B_DURATION_NS * factor / 1e3:g} us"),
        "live": (f"1000x: the shipped onepipe topology (100 Mbit/s, T_beacon 3 ms = 3 us), {live_mod.RATE:g} "
                 f"scatterings/s per process (= {live_mod.RATE * 1e3:g}/s at the paper's scale), {seconds:g} s per "
                 "run; latencies reported in ms as measured and divided by 1000"),
        "sequencer": (f"one core serving {1e9 / s.SEQ_SERVICE_NS / 1e6:g} M msg/s ({s.SEQ_SERVICE_NS} ns a message; "
                      "the paper's own host sequencer's capacity, read off its Fig. 8a), a queue of 4096 messages"),
    }


def _run(sections: list[str], runtimes: list[str], seconds: float, workers: int | None, prefix: str, say: Progress,
         errors: dict[str, str], max_procs: int | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    sim: dict[str, Any] = {}
    live: dict[str, Any] = {}
    if "store" in sections or "fig10" in sections:
        from . import ctlcost, reliable

        sim["store"] = {**reliable.measure_stores(say), "runs": []}
        sim["store"]["controller_core"] = ctlcost.measure()
        say(ctlcost.summary(sim["store"]["controller_core"]))
    if "fig11" in sections and "sim" in runtimes:  # (in process: with the virtual-time sections, never live)
        from . import reorder

        say("fig11: our receiving engine holding what a reordering delay makes it hold (CPU, memory) ...")
        sim["fig11"] = {"rows": reorder.measure(messages=reorder.MESSAGES, repeats=reorder.REPEATS), "runs": []}
    if "sim" in runtimes:
        delays = sim.get("store", {}).get("delays_ns", {})
        core = sim.get("store", {}).get("controller_core", {}).get("per_datagram_ns", 0)
        sim.update(sim_mod.run_points(sections, seconds / DEFAULT_LIVE_SECONDS, workers, say, delays, max_procs,
                                      ctl_msg_ns=core))
    if "live" in runtimes:
        try:
            live = live_mod.run_live(sections, prefix, seconds, say)
        except Exception as exc:  # recorded; the sim results are still written
            errors["live"] = f"{type(exc).__name__}: {exc}"
            say(f"live: FAILED ({errors['live']}); its testbed was torn down")
    return sim, live


def _assemble(sim: dict[str, Any], live: dict[str, Any]) -> dict[str, Any]:
    """The JSON sections: rows, analyses and runs per figure."""
    out: dict[str, Any] = {}
    if "fig8" in sim or "fig8" in live:
        rows = sim.get("fig8", {}).get("rows", [])
        out["fig8"] = {"sim": rows, "live": live.get("fig8", {}).get("rows", []),
                       "saturation": sim_mod.saturation(rows) if rows else None,
                       "sim_speed": sim_mod.sim_speed(rows)}
        if sim.get("fig8", {}).get("cpu_costs"):  # the host CPU model's costs (issue 32: sim.cpu_costs)
            out["fig8"]["cpu_costs"] = sim["fig8"]["cpu_costs"]
    if "fig9a" in sim:
        rows = sim["fig9a"]["rows"]
        out["fig9a"] = {"rows": rows, "target": sim_mod.target_summary(rows)}
    if "fig9b" in sim or "fig9b" in live:
        out["fig9b"] = {"sim": sim.get("fig9b", {}).get("rows", []), "live": live.get("fig9b", {}).get("rows", [])}
    if "store" in sim:
        out["store"] = {"rows": sim["store"]["rows"], "skipped": sim["store"]["skipped"],
                        "controller_core": sim["store"].get("controller_core")}
    if "reliable" in sim:
        out["reliable"] = {"sim": sim["reliable"]["rows"]}
    if "fig11" in sim:
        out["fig11"] = {"rows": sim["fig11"]["rows"]}
    if "kv" in sim:
        out["kv"] = {"rows": sim["kv"]["rows"]}
    if "fig12" in sim:
        out["fig12"] = {"rows": sim["fig12"]["rows"]}
    if "fig9a-testbed" in sim:
        out["fig9a-testbed"] = {"rows": sim["fig9a-testbed"]["rows"]}
    if "fig10" in sim:
        from . import reliable

        rows = sim["fig10"]["rows"]
        out["fig10"] = {"rows": rows, "per_process_us": reliable.per_process_slope(rows)}
    return out


def _markdown(figs: dict[str, Any], notes: dict[str, str], results_dir: Path) -> tuple[list[str], list[str]]:
    md = ["# netstack bench onepipe", "",
          "Best-effort 1Pipe (the paper's §7), an unordered baseline, a central sequencer.", "",
          *[f"- scale ({k}): {v}" for k, v in notes.items()], ""]
    plots = []
    f8 = figs.get("fig8")
    if f8:
        if f8["sim"]:
            md += ["## Fig. 8 (sim): throughput and latency vs processes", "", report.fig8_table(f8["sim"]), "",
                   *_saturation_markdown(f8["saturation"]), "",
                   "### Every system (issue 32: reliable 1Pipe and the baselines)", "",
                   report.fig8_systems_table(f8["sim"]), "",
                   "### The simulator's speed (issue 31)", "", report.sim_speed_table(f8["sim_speed"]), ""]
        if f8["live"]:
            md += ["## Fig. 8 (live, 1000x)", "", report.live_table(f8["live"]), ""]
        if report.plot_fig8(f8["sim"], _counted(f8["live"]), results_dir / f"{NAME}-fig8.png"):
            plots.append(f"{NAME}-fig8.png")
    f9a = figs.get("fig9a")
    if f9a:
        t = f9a["target"]
        md += ["## Fig. 9a (sim): latency overhead vs T_beacon and clock skew", "", report.fig9a_table(f9a["rows"]), "",
               f"Target (mean overhead <= {t['factor']}x ({t['model']})): met at {t['met']} of {t['points']} "
               f"as-built points; worst overhead/model {t['worst_ratio']:.2f}.", ""]
        if report.plot_fig9a(f9a["rows"], results_dir / f"{NAME}-fig9a.png"):
            plots.append(f"{NAME}-fig9a.png")
    f9b = figs.get("fig9b")
    if f9b:
        rows = f9b["sim"] + f9b["live"]
        md += ["## Fig. 9b: latency vs loss", "", report.fig9b_table(rows), ""]
        if report.plot_fig9b(f9b["sim"] + _counted(f9b["live"]), results_dir / f"{NAME}-fig9b.png"):
            plots.append(f"{NAME}-fig9b.png")
    md += _reliable_markdown(figs)
    return md, plots


def _saturation_markdown(sat: dict[str, Any]) -> list[str]:
    """What sim.saturation found: the sequencer's knee; 1Pipe's rate per process across P; with
    the host CPU model (issue 32), reliable over best effort per P beside the model and the paper."""
    cap = sat.get("sequencer_capacity_msgs_per_s")
    knee = "" if not cap else (f"The sequencer saturates at P = {sat['sequencer_saturates_at_procs']} (its capacity, "
                               f"{cap / 1e6:g} M msg/s, over a process's rate predicts "
                               f"{sat['predicted_knee_procs']:.0f}). ")
    if "onepipe_min_delivered_over_offered" in sat:  # without the CPU model: offered load
        return [knee + f"1Pipe delivers at least {100 * sat['onepipe_min_delivered_over_offered']:.1f} % of what it "
                       "is offered at every P."]
    lo, hi = sat.get("onepipe_delivered_per_proc_min"), sat.get("onepipe_delivered_per_proc_max")
    out = [knee + ("" if lo is None else f"1Pipe delivers {lo / 1e6:.2f}-{hi / 1e6:.2f} M msg/s per process "
                                         "across P (the host CPU model's capacity: cores saturated).")]
    rb = sat.get("reliable_vs_be") or []
    if rb:
        mean = sat.get("reliable_over_be_mean")
        out += ["", f"Reliable over best effort: mean {'-' if mean is None else f'{mean:.3f}'} over P > 1 (the "
                    f"paper's Fig. 8a: {sat['reliable_over_be_paper']:.3f}; the CPU model's costs alone: "
                    f"{rb[0]['model']:.3f}).", "", report.reliable_vs_be_table(rb)]
    return out


def _counted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The live rows that count (netstack.validity): the plots show no other."""
    return [r for r in rows if r.get("valid", True)]


def _invalid_markdown(invalid: list[dict[str, Any]]) -> list[str]:
    if not invalid:
        return []
    return ["## Invalid runs (not counted)", "",
            "Live runs the machine did not run as planned (netstack/onepipe/verdict.py). They stay in the tables "
            "with their numbers, are left out of the plots, and their order check still counts.", "",
            *[f"- {r['row']}: {'; '.join(r['reasons'])}" for r in invalid], ""]


def _reliable_markdown(figs: dict[str, Any]) -> list[str]:
    from . import reliable

    md: list[str] = []
    if figs.get("store"):
        st = figs["store"]
        md += ["## The controller store: cost per failure record (real backends)", "",
               reliable.store_table(st["rows"]), "",
               *[f"- {b} skipped: {why}" for b, why in st["skipped"].items()], ""]
        if st.get("controller_core"):
            from . import ctlcost

            md += [f"The {ctlcost.summary(st['controller_core'])}: fig10's 'kernel' rows charge the controller's "
                   "core that much per datagram it sends or receives (its 'free' rows: nothing).", ""]
    if figs.get("reliable"):
        md += ["## Reliable vs best effort (sim, same load)", "", reliable.reliable_table(figs["reliable"]["sim"]), ""]
    if figs.get("fig10"):
        f10 = figs["fig10"]
        slope = f10["per_process_us"]
        md += ["## Fig. 10 (sim): recovery time vs hosts, per failed component (host, ToR, core link, core switch)",
               "", reliable.fig10_table(f10["rows"]), "",
               f"Growth per host after a process crash (least squares): {'-' if slope is None else f'{slope:.2f} us'}"
               " (each component's is under the table); 'with <backend>' adds that store's measured median write "
               "(the one the controller awaits). Controller 'kernel': its core charged the kernel's cost of each "
               "datagram it sends or receives (measured in this run, above); 'free': its work takes no time (the "
               "baseline).", ""]
    from . import fig12, kv, reorder, testbed

    # the sections measured with one table and one note each: (key, title, table of the rows, note)
    simple = (
        (testbed.SECTION, "Fig. 9a on the paper's testbed (sim): a 3-tier fat tree, 1/3/5 hops, a host stack",
         testbed.testbed_table,
         f"Idle (Fig. 9a's load), T_beacon 3 us, skew 0.3 us; 4 ToRs x 8 hosts, 2 pods, 2 cores; processes packed "
         f"(8 under one ToR, 16 under one pod); every host's stack {spec.NIC_NS} ns each way (calibrated: the "
         "unordered latency at 1 hop is the paper's 2.2 us). BE/R-host: the host-delegate variant; 'commit in "
         "beacons': reliable with no prompt COMMIT."),
        ("fig12", "Fig. 12 (sim): latency beside background TCP flows, and oversubscribed", fig12.fig12_table,
         "32 processes (one a host) at Fig. 9a's idle load; each host's backlogged NewReno flows to hosts under other "
         "ToRs; the ToR uplinks at 8 x 100 / ratio Gbit/s. The host-delegate variant, as the paper's series, with "
         f"every host's stack {spec.NIC_NS} ns each way (as fig9a-testbed's)."),
        ("kv", "Figs. 14a, 14b (sim): the transactional KV store, 1Pipe against lock-based 2PC", kv.kv_table,
         "The onepipe-kv scenario (docs/onepipe-kv.md), 4 shards; 'strict': the run's transactions checked for "
         "strict serializability."),
        ("fig11", "Fig. 11 (in process): reorder overhead on a host vs the reordering delay", reorder.table,
         f"Our best-effort receiving engine fed {reorder.PAPER_RATE / 1e6:g} M msg/s from {reorder.SENDERS} senders "
         "with the barrier that far behind; CPU time per message scaled by the host CPU model's factor (a "
         "receive-only capacity: the shape against no delay is what compares); the buffer from tracemalloc."),
    )
    for key, title, table, note in simple:
        if figs.get(key):
            md += [f"## {title}", "", table(figs[key]["rows"]), "", note, ""]
    return md


def _paper(figs: dict[str, Any], results_dir: Path, md: list[str], errors: dict[str, str]) -> dict[str, Any] | None:
    """The paper's figure data beside this run's rows (netstack/bench/onepipe/paper.py): the
    ``paper`` key of the JSON, its tables added to ``md``, its PNGs (``paper.plots``)."""
    from ...onepipe.paperdata import PaperDataError
    from . import paper

    try:
        section = paper.compare({**figs, "beacon_cpu": paper.measure_beacon_cpu()})
    except PaperDataError as exc:  # a damaged copy of the authors' data must not lose the run's numbers
        errors["paper"] = str(exc)
        return None
    md += paper.paper_markdown(section)
    section["plots"] = paper.plot_paper(section, results_dir, NAME)
    return section


def main(args: argparse.Namespace) -> int:
    sections, runtimes = _selected(args)
    if not sections or not runtimes:
        print(f"no section matches --only/--runtime (sections: {', '.join(SECTIONS)}; live: "
              f"{', '.join(LIVE_SECTIONS)})", file=sys.stderr)
        return 2
    if "live" in runtimes and os.geteuid() != 0:
        print("netstack bench onepipe: live needs root (namespaces, veths, nft); run as root or use --runtime sim",
              file=sys.stderr)
        return 2
    seconds = float(getattr(args, "duration", None) or DEFAULT_LIVE_SECONDS)
    workers = getattr(args, "workers", None)
    max_procs = QUICK_MAX_PROCS if getattr(args, "quick", False) else None
    results_dir = Path(getattr(args, "results_dir", "results"))
    say = Progress()
    notes = scale_notes(seconds, seconds / DEFAULT_LIVE_SECONDS)
    say(f"netstack bench onepipe: sections {', '.join(sections)}; runtimes {', '.join(runtimes)}")
    for k, v in notes.items():
        say(f"scale ({k}): {v}")
    errors: dict[str, str] = {}
    started = time.monotonic()
    prefix = f"opb{secrets.token_hex(2)}"  # live: never the "op" of the shipped topology
    if max_procs:
        say(f"--quick: virtual-time points of at most {max_procs} processes (the paper's 128-512 are left out)")
    payload: dict[str, Any] = {"sections": sections, "runtimes": runtimes, "scale": notes, "live_seconds": seconds,
                               "max_procs": max_procs,
                               "prefix": prefix if "live" in runtimes else None, "loadavg_before": loadavg()}
    with sigterm_unwinds():
        sim, live = _run(sections, runtimes, seconds, workers, prefix, say, errors, max_procs)
    figs = _assemble(sim, live)
    results_dir.mkdir(parents=True, exist_ok=True)
    verdict = live_mod.verdicts(live)
    md, plots = _markdown(figs, notes, results_dir)
    md += _invalid_markdown(verdict["invalid_rows"])
    payload["paper"] = _paper(figs, results_dir, md, errors)
    runs = [d for part in (sim, live) for sec in part.values() for d in sec["runs"]]
    payload.update(figs, runs=runs, plots=plots, errors=errors, wall_s=time.monotonic() - started,
                   loadavg_after=loadavg(), **verdict)
    path = write_results(results_dir, NAME, payload)
    text = "\n".join(md)
    (results_dir / f"{NAME}-latest.md").write_text(text)
    print(text)
    print(f"results: {path}; {results_dir / (NAME + '-latest.md')}; plots: {', '.join(plots) or 'none'}")
    if errors:
        print(f"errors: {errors}", file=sys.stderr)
        return 1
    return 0


__all__ = ["LIVE_SECTIONS", "SECTIONS", "main"]
