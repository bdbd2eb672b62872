"""``netstack bench sim``: the virtual-time runtime's own speed, and LinkGuardian at the paper's rates.

Two sections (``--only`` picks by substring):

``speed``
    Simulated events per second and the cost per simulated frame for each scenario (``netstack
    sim``'s own runs, in this process, ``--rounds`` times, medians), against a baseline measured
    in the same run: the bare event loop (callbacks that only re-schedule themselves), i.e. what
    the heap costs before any switch or host does anything. The issue's goal is 1 M events/s for
    a plain two-switch forwarding scenario (``forwarding`` on the default topology); the table
    says how far pure Python gets. Then the same forwarding work as a sweep over every CPU
    (``netstack.sim.sweep``): aggregate events/s, the scale-out a sweep gets.

``fig8-paper``
    LinkGuardian Fig. 8 at the paper's own 25 and 100 Gbit/s, nothing scaled (``time_scale`` 1): the
    ``lg-stress`` scenario (the sending switch's generator keeps the link busy with MTU frames)
    at the paper's production loss rates 1e-5, 1e-4 and 1e-3 (§4.1), off / LG / LG_NB with Eq. 2's
    N for the 1e-8 target and the paper's settings for that speed (ackNoTimeout 7 / 7.5 us,
    pause/resume thresholds). Effective loss with its 95 % interval against Eq. 2's expectation,
    effective link speed against the paper's (100G at 1e-3: 92.25 % LG, 98.74 % LG_NB), and the
    receiver's reordering buffer and the sender's Tx buffer peaks against the paper's "< 90 KB"
    at 100G. The runs go to ``--workers`` processes.

Output: ``<results>/bench-sim-<UTC>.json`` (+ ``-latest``), Markdown tables printed and written to
``bench-sim-latest.md``, ``bench-sim-fig8.png``; progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from ..sim.loop import EventLoop
from ..sim.scenario import RunSpec, run
from ..sim.sweep import sweep
from .output import Progress, format_table, loadavg, write_results
from .plot import pyplot, save

SECTIONS = ("speed", "fig8-paper")
GOAL_EVENTS_PER_S = 1_000_000
DEFAULT_ROUNDS = 3

#: one switch between the two hosts (h1 - sw1 - h2), 1 Gbit/s
ONE_SWITCH: dict[str, Any] = {
    "topology": {"name": "one-switch", "prefix": "one"}, "defaults": {"rate": "1Gbit", "delay": "1us"},
    "nodes": [{"name": "h1", "kind": "host", "ip": "10.0.0.1/24"}, {"name": "h2", "kind": "host", "ip": "10.0.0.2/24"},
              {"name": "sw1", "kind": "switch"}],
    "links": [{"name": "h1-sw1", "a": "h1", "b": "sw1"}, {"name": "sw1-h2", "a": "sw1", "b": "h2"}],
}


def speed_cases(scale: float) -> list[tuple[str, str, RunSpec]]:
    """(name, what it is, spec); ``scale`` multiplies the work of each."""
    from ..tcsack.scenarios import path_topology

    def n(x: int) -> int:
        return max(1, round(x * scale))

    return [
        ("forwarding, 1 switch", "line-rate 1500 B UDP h1 -> sw1 -> h2",
         RunSpec("forwarding", ONE_SWITCH, 1, None, {"count": n(20_000)})),
        ("forwarding, 2 switches", "the default topology: line-rate 1500 B UDP h1 -> sw1 = sw2 -> h2 (the goal's case)",
         RunSpec("forwarding", "default", 1, None, {"count": n(20_000)})),
        ("forwarding, 64 B", "minimum-size frames at line rate through the default topology",
         RunSpec("forwarding", "default", 1, None, {"count": n(20_000), "size": 18})),
        ("lg-stream", "LinkGuardian at 1e-2, N = 1 (lg-testbed, scaled 1000x): dummies, couriers, repairs",
         RunSpec("lg-stream", "lg-testbed", 1, None, {"count": n(5_000)})),
        ("lg-stress, 100G", "Fig. 8's stress test at the paper's 100 Gbit/s, 1e-3 (lg-100g)",
         RunSpec("lg-stress", "lg-100g", 1, None, {"frames": n(10_000)})),
        ("tcsack-transfer", "T/C-SACK, 2 MB over h1 - sw1 = sw2 - h2, RTT 4 ms, 1 % loss each way",
         RunSpec("tcsack-transfer", path_topology(loss=0.01), 1, None, {"bytes": n(2_000_000)})),
        ("tcp-rr", "143 B request/response on one connection of the NewReno model (default topology)",
         RunSpec("tcp-rr", "default", 1, None, {"flows": n(3_000)})),
        ("tcp-flows", "open-loop Facebook-Hadoop flows at 50 % load, NewReno model (default topology)",
         RunSpec("tcp-flows", "default", 1, None, {"flows": n(300), "workload": "fb-hadoop", "load": 0.5})),
    ]


def loop_baseline(events: int = 1_000_000, timers: int = 64) -> dict[str, Any]:
    """The bare event loop: ``timers`` callbacks that each re-schedule themselves 1 us later."""
    loop = EventLoop()
    left = [events]

    def tick() -> None:
        left[0] -= 1
        if left[0] > 0:
            loop.call_at(loop.now + 1000, tick)

    for i in range(timers):
        loop.call_at(i, tick)
    t0 = time.perf_counter()
    loop.run()
    wall = time.perf_counter() - t0
    return {"events": loop.events, "wall_s": wall, "events_per_s": loop.events / wall}


def run_speed(rounds: int, scale: float, workers: int | None, say: Progress) -> dict[str, Any]:
    rows = []
    base = [loop_baseline() for _ in range(rounds)]
    loop_eps = statistics.median(b["events_per_s"] for b in base)
    say(f"speed: bare event loop {loop_eps / 1e6:.2f} M events/s (median of {rounds})")
    for name, what, spec in speed_cases(scale):
        docs = []
        for r in range(rounds):
            doc = run(spec)
            if doc["result"].get("ok") is False:
                raise RuntimeError(f"{name}: the scenario did not complete: {doc['result']}")
            docs.append(doc)
            say(f"speed: {name} round {r + 1}/{rounds}: {doc['engine']['events_per_s']:,} events/s, "
                f"{doc['engine']['us_per_frame']} us/frame")
        eng = [d["engine"] for d in docs]
        rows.append({
            "name": name, "what": what, "scenario": spec.scenario, "topology": docs[0]["topology"]["name"],
            "time_scale": docs[0]["time_scale"], "events": eng[0]["events"], "frames": eng[0]["frames"],
            "events_per_frame": eng[0]["events_per_frame"], "virtual_s": eng[0]["virtual_ns"] / 1e9,
            "events_per_s": statistics.median(e["events_per_s"] for e in eng),
            "events_per_s_range": [min(e["events_per_s"] for e in eng), max(e["events_per_s"] for e in eng)],
            "us_per_frame": statistics.median(e["us_per_frame"] for e in eng),
            "wall_s": statistics.median(e["wall_s"] for e in eng),
        })
    goal_row = next(r for r in rows if r["name"] == "forwarding, 2 switches")
    # scale-out: the same forwarding run as independent sweep points, one process per CPU
    n = workers or os.cpu_count() or 1
    spec = speed_cases(scale)[1][2]
    specs = [RunSpec(spec.scenario, spec.topology, s, None, spec.params) for s in range(1, 2 * n + 1)]
    t0 = time.perf_counter()
    out = sweep(specs, workers=n)
    wall = time.perf_counter() - t0
    total = sum(d["engine"]["events"] for d in out)
    parallel = {"workers": n, "runs": len(specs), "events": total, "wall_s": wall, "events_per_s": total / wall,
                "vs_one_process": (total / wall) / goal_row["events_per_s"]}
    say(f"speed: sweep of {len(specs)} forwarding runs on {n} processes: {total / wall:,.0f} events/s in aggregate")
    return {"loop_baseline": {"runs": base, "events_per_s": loop_eps}, "rows": rows, "parallel": parallel,
            "goal": {"events_per_s": GOAL_EVENTS_PER_S, "scenario": goal_row["name"],
                     "measured": goal_row["events_per_s"], "met": goal_row["events_per_s"] >= GOAL_EVENTS_PER_S,
                     "factor_short": GOAL_EVENTS_PER_S / goal_row["events_per_s"]}}


# ------------------------------------------------------------------------- Fig. 8 at the paper's rates
PAPER_RATES = (100, 25)
PAPER_LOSSES = (1e-5, 1e-4, 1e-3)
#: one crossing of the paper's maximum resume flight time (§4 "Parameters": 1.6 us at 100G, 1.9 us at 25G)
ONE_WAY_NS = {100: 800, 25: 950}
#: the Tofino's recirculation port is 100G whatever the link (§4: 25G links recirculate at 100G)
RECIRC_RATE = "100Gbit"
#: LinkGuardian §4.1, Fig. 8 (the paper's text): effective link speed at 1e-3 on 100G
PAPER_SPEED = {(100, "blocking"): 0.9225, (100, "nb"): 0.9874}
#: §1: "requiring less than 90KB of packet buffer" (100G, 1e-3)
PAPER_BUFFER_BYTES = 90_000
DEFAULT_FRAMES = 200_000


def run_fig8_paper(frames: int, workers: int | None, say: Progress) -> dict[str, Any]:
    from ..linkguardian.params import copies_for
    from ..linkguardian.scenarios import stress_topology

    jobs = []
    seed = 500
    for gbps in PAPER_RATES:
        for loss in PAPER_LOSSES:
            for mode in (None, "blocking", "nb"):
                seed += 1
                topo = stress_topology(rate_bps=gbps * 10**9, delay_ns=ONE_WAY_NS[gbps], corrupt=loss, mode=mode,
                                       paper_gbps=gbps, recirc_rate=RECIRC_RATE, name=f"lg-{gbps}g")
                jobs.append(((gbps, loss, mode or "off"), RunSpec("lg-stress", topo, seed, None, {"frames": frames})))
    say(f"fig8-paper: {len(jobs)} runs of {frames:,} MTU frames at 25 and 100 Gbit/s, unscaled, "
        f"on {workers or 'one per CPU'} worker(s)")

    def progress(done: int, total: int, doc: dict[str, Any]) -> None:
        if "error" in doc:
            say(f"fig8-paper [{done}/{total}]: FAILED {doc['error']}")
            return
        r = doc["result"]
        say(f"fig8-paper [{done}/{total}]: {doc['topology']['name']} actual {r['actual_loss']:.1e}: "
            f"{r['effective_loss']['lost']} lost, link speed {100 * (r['effective_link_speed'] or 0):.2f} %, "
            f"{doc['engine']['wall_s']:.0f} s")

    docs = sweep([spec for _, spec in jobs], workers=workers, progress=progress)
    rows = []
    for (key, _), doc in zip(jobs, docs, strict=True):
        if "error" in doc:
            raise RuntimeError(f"fig8-paper run {key} failed: {doc['error']}")
        gbps, loss, mode = key
        r = doc["result"]
        lg = r.get("linkguardian", {})
        n = r.get("copies")
        rows.append({
            "gbps": gbps, "loss": loss, "mode": mode, "copies": n, "eq2_copies": copies_for(1e-8, loss),
            "frames": r["offered_A"], "actual_loss": r["actual_loss"], "effective": r["effective_loss"],
            "expected_effective": loss ** (n + 1) if n else loss, "speed_vs_line": r["effective_link_speed"],
            "reorder_buffer_max_bytes": lg.get("receiver", {}).get("reorder_buffer_max_bytes"),
            "tx_buffer_max_bytes": lg.get("sender", {}).get("tx_buffer_max_bytes"),
            "pauses": lg.get("receiver", {}).get("pauses_sent"), "timeouts": lg.get("receiver", {}).get("timeouts"),
            "time_scale": doc["time_scale"], "ack_no_timeout_ns": lg.get("params", {}).get("ack_no_timeout_ns"),
            "wall_s": doc["engine"]["wall_s"], "events_per_s": doc["engine"]["events_per_s"],
        })
    base = {(r["gbps"]): r["speed_vs_line"] for r in rows if r["mode"] == "off" and r["loss"] == min(PAPER_LOSSES)}
    for r in rows:
        b = base.get(r["gbps"])
        r["speed_vs_unprotected"] = r["speed_vs_line"] / b if b and r["speed_vs_line"] else None
        r["paper_speed"] = PAPER_SPEED.get((r["gbps"], r["mode"])) if r["loss"] == 1e-3 else None
    peak = max(r["reorder_buffer_max_bytes"] or 0 for r in rows if r["gbps"] == 100 and r["mode"] == "blocking")
    return {"rows": rows, "runs": docs, "frames": frames,
            "buffer": {"paper_bytes": PAPER_BUFFER_BYTES, "reorder_peak_100g_bytes": peak,
                       "met": peak < PAPER_BUFFER_BYTES}}


# ---------------------------------------------------------------------------------- output
def speed_table(sp: dict[str, Any]) -> str:
    rows = [["bare event loop", "-", "-", "-", f"{sp['loop_baseline']['events_per_s']:,.0f}", "-", "-", "-"]]
    for r in sp["rows"]:
        lo, hi = r["events_per_s_range"]
        rows.append([r["name"], r["topology"], f"{r['time_scale']:g}", f"{r['frames']:,}",
                     f"{r['events_per_s']:,.0f}", f"{lo:,.0f}-{hi:,.0f}", f"{r['events_per_frame']:.2f}",
                     f"{r['us_per_frame']:.2f}"])
    p = sp["parallel"]
    rows.append([f"forwarding, 2 switches x {p['runs']} (sweep, {p['workers']} processes)", "default", "1000",
                 "-", f"{p['events_per_s']:,.0f}", "-", "-", "-"])
    return format_table(["scenario", "topology", "time scale", "frames on links", "events/s (median)", "range",
                         "events per frame", "us per frame"], rows)


def fig8_table(f8: dict[str, Any]) -> str:
    rows = []
    for r in f8["rows"]:
        e = r["effective"]
        rows.append([f"{r['gbps']}G", f"{r['loss']:g}", {"off": "off", "blocking": "LG", "nb": "LG_NB"}[r["mode"]],
                     r["copies"] or "-", f"{r['frames']:,}", f"{r['actual_loss']:.2e}", e["lost"],
                     f"[{e['ci95'][0]:.1e}, {e['ci95'][1]:.1e}]", f"{r['expected_effective']:.0e}",
                     f"{100 * r['speed_vs_line']:.2f} %" if r["speed_vs_line"] else "-",
                     f"{100 * r['paper_speed']:.2f} %" if r["paper_speed"] else "-",
                     r["reorder_buffer_max_bytes"] if r["reorder_buffer_max_bytes"] is not None else "-",
                     r["tx_buffer_max_bytes"] if r["tx_buffer_max_bytes"] is not None else "-",
                     "-" if r["pauses"] is None else r["pauses"], "-" if r["timeouts"] is None else r["timeouts"]])
    return format_table(["link", "actual", "mode", "N", "frames", "measured actual", "lost", "effective 95% CI",
                         "expected actual^(N+1)", "link speed", "paper", "reorder buffer peak B", "Tx buffer peak B",
                         "pauses", "ackNoTimeouts"], rows)


def plot_fig8(f8: dict[str, Any], path: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    style = {"off": ("s", "tab:grey"), "blocking": ("o", "tab:blue"), "nb": ("^", "tab:orange")}
    for gbps, ax in zip(PAPER_RATES, axes, strict=True):
        for mode in ("off", "blocking", "nb"):
            pts = [r for r in f8["rows"] if r["gbps"] == gbps and r["mode"] == mode]
            m, c = style[mode]
            ax.plot([r["loss"] for r in pts], [100 * (r["speed_vs_line"] or 0) for r in pts], m + "-", color=c,
                    label={"off": "unprotected", "blocking": "LG", "nb": "LG_NB"}[mode])
        for (g, mode), v in PAPER_SPEED.items():
            if g == gbps:
                ax.scatter([1e-3], [100 * v], marker="*", s=140, color=style[mode][1], edgecolors="black",
                           label=f"paper {'LG' if mode == 'blocking' else 'LG_NB'}", zorder=5)
        ax.set_xscale("log")
        ax.set_xlabel("actual loss rate")
        ax.set_ylabel("effective link speed, % of line rate")
        ax.set_title(f"Fig. 8 at {gbps} Gbit/s, unscaled (netstack.sim)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    save(plt, fig, path, dpi=110)
    return True


def main(args: argparse.Namespace) -> int:
    only = getattr(args, "only", None)
    sections = [s for s in SECTIONS if not only or any(o in s for o in only)]
    if getattr(args, "runtime", None) == "live":
        print("netstack bench sim is virtual time only (--runtime sim)", file=sys.stderr)
        return 2
    if not sections:
        print(f"no section matches --only (sections: {', '.join(SECTIONS)})", file=sys.stderr)
        return 2
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    workers = getattr(args, "workers", None)
    frames = getattr(args, "frames", None) or DEFAULT_FRAMES
    scale = getattr(args, "work", None) or 1.0
    results_dir = Path(getattr(args, "results_dir", "results"))
    say = Progress()
    say(f"netstack bench sim: sections {', '.join(sections)}; {rounds} round(s) per speed case; "
        f"fig8-paper: {frames:,} frames per point")
    payload: dict[str, Any] = {"sections": sections, "rounds": rounds, "loadavg_before": loadavg()}
    started = time.monotonic()
    md = ["# netstack bench sim", ""]
    if "speed" in sections:
        sp = run_speed(rounds, scale, workers, say)
        payload["speed"] = sp
        g = sp["goal"]
        verdict = "met" if g["met"] else f"{g['factor_short']:.1f}x short"
        md += ["## Simulator speed (one process, medians)", "", speed_table(sp), "",
               f"Goal: {g['events_per_s']:,} events/s on '{g['scenario']}'; measured {g['measured']:,.0f} ({verdict}).",
               ""]
    if "fig8-paper" in sections:
        f8 = run_fig8_paper(frames, workers, say)
        payload["fig8_paper"] = f8
        results_dir.mkdir(parents=True, exist_ok=True)
        png = results_dir / "bench-sim-fig8.png"
        if plot_fig8(f8, png):
            payload["plot"] = str(png)
        b = f8["buffer"]
        md += ["## LinkGuardian Fig. 8 at the paper's 25 and 100 Gbit/s (unscaled, virtual time)", "",
               fig8_table(f8), "",
               f"Reordering buffer peak at 100G (LG): {b['reorder_peak_100g_bytes']:,} B (paper: < "
               f"{b['paper_bytes']:,} B).", "", f"![Fig. 8 at the paper's rates]({png.name})", ""]
    payload["wall_s"] = time.monotonic() - started
    payload["loadavg_after"] = loadavg()
    path = write_results(results_dir, "bench-sim", payload)
    text = "\n".join(md)
    (results_dir / "bench-sim-latest.md").write_text(text)
    print(text)
    print(f"results: {path}")
    return 0
