"""Tables (Markdown) and plots (PNG) of ``netstack bench onepipe``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..output import format_table
from ..plot import pyplot, save

if TYPE_CHECKING:  # paper.py is imported where it is used: ``python -m netstack.bench.onepipe.paper`` runs it
    from .paper import Figure


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def _m(v: float | None) -> str:
    """A rate in M msg/s."""
    return "-" if v is None else f"{v / 1e6:.3f}"


def fig8_table(rows: list[dict[str, Any]]) -> str:
    by = {(r["system"], r["procs"]): r for r in rows}
    out = []
    for p in sorted({r["procs"] for r in rows}):
        one, un, seq = by.get(("1pipe", p), {}), by.get(("unordered", p), {}), by.get(("sequencer", p), {})
        out.append([p, _m(one.get("offered_per_proc")), _m(one.get("delivered_per_proc")),
                    _m(seq.get("delivered_per_proc")), _f(un.get("mean_us")), _f(one.get("mean_us")),
                    _f(one.get("p99_us")), _f(one.get("p999_us")), _f(seq.get("mean_us")), _f(seq.get("p99_us")),
                    one.get("send_failed", "-"), one.get("send_unknown", "-"), seq.get("seq_dropped", "-"),
                    "ok" if one.get("order_ok") and seq.get("order_ok", True) else "VIOLATED"])
    return format_table(["P", "offered M msg/s/proc", "1Pipe delivered", "sequencer delivered",
                         "unordered mean us", "1Pipe mean us", "1Pipe p99", "1Pipe p99.9", "sequencer mean us",
                         "sequencer p99", "1Pipe send-fails", "1Pipe send-unknown", "sequencer drops", "order"], out)


def sim_speed_table(rows: list[dict[str, Any]]) -> str:
    """``netstack.bench.onepipe.sim.sim_speed``: events per CPU-second per P and system."""
    out = [[r["procs"], r["system"], r["sim_events"], _f(r["sim_cpu_s"]), _f(r["sim_wall_s"]),
            _f(r["sim_events_per_cpu_s"], "{:,.0f}")] for r in rows]
    return format_table(["P", "run", "events", "CPU s", "wall s", "events per CPU-s"], out)


def live_table(rows: list[dict[str, Any]]) -> str:
    out = [[r["procs"], _f(r["loss"], "{:g}"), f"{r['offered_per_proc']:.0f}", f"{r['delivered_per_proc']:.0f}",
            r["send_failed"], r.get("send_unknown", "-"), r.get("in_flight_at_end", "-"), r["unaccounted"],
            _f(r["live_mean_ms"]), _f(r["mean_us"]), _f(r["p50_us"]),
            _f(r["p99_us"]), r["late_dropped"], "ok" if r["check_ok"] else "FAILED",
            "yes" if r.get("valid", True) else "INVALID"] for r in rows]
    return format_table(["P", "loss tor1-spine1", "offered msg/s/proc", "delivered msg/s/proc", "send-fails",
                         "send-unknown", "in flight at end", "unaccounted", "mean ms (live)",
                         "mean us (paper scale)", "p50 us", "p99 us", "late drops", "onepipe check", "valid run"], out)


def fig9a_table(rows: list[dict[str, Any]]) -> str:
    out = [[_f(r["t_beacon_us"], "{:g}"), _f(r["skew_us"], "{:g}"), r["switch_beacons"],
            _f(r["mean_abs_offset_us"]), _f(r["over_slowest_us"]), _f(r["unordered_mean_us"]),
            _f(r["latency_mean_us"]), _f(r["overhead_mean_us"]), _f(r["overhead_p99_us"]), _f(r["model_us"]),
            _f(r["ratio"]), "met" if r["met"] else "missed", r["messages"]] for r in rows]
    return format_table(["T_beacon us", "skew us", "switch beacons", "mean abs offset us", "offset over slowest us",
                         "unordered mean us", "1Pipe mean us", "overhead mean us", "barrier wait p99 us",
                         "model T/2+skew us", "overhead/model", "target (1.5x)", "messages"], out)


def fig9b_table(rows: list[dict[str, Any]]) -> str:
    out = [[r["runtime"], _f(r["loss"], "{:g}"), r["procs"], f"{r['delivered']}/{r['sent']}", _f(r["mean_us"]),
            _f(r["p99_us"]), _f(r.get("unordered_mean_us")), r["send_failed"], r.get("send_unknown", "-"),
            r["messages_lost"], r["late_dropped"], r["unaccounted"],
            "ok" if r.get("order_ok", r.get("check_ok")) else "VIOLATED"] for r in rows]
    return format_table(["runtime", "loss (ToR-spine, each way)", "P", "delivered/sent", "mean us", "p99 us",
                         "unordered mean us", "send-fails", "send-unknown", "lost (NAKed)", "late drops", "unaccounted",
                         "order"], out)


# ----------------------------------------------------------------------------------- plots
def plot_fig8(sim: list[dict[str, Any]], live: list[dict[str, Any]], path: Path) -> bool:
    plt = pyplot()
    if plt is None or not sim:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    styles = {"1pipe": ("o-", "1Pipe/BE"), "sequencer": ("s--", "sequencer"), "unordered": ("^:", "unordered")}
    for system, (style, label) in styles.items():
        pts = sorted((r for r in sim if r["system"] == system), key=lambda r: r["procs"])
        if not pts:
            continue
        if system != "unordered":
            a.plot([r["procs"] for r in pts], [r["delivered_per_proc"] / 1e6 for r in pts], style, label=label)
        pos = [r for r in pts if r["mean_us"]]  # a lone process's loopback arrives at once: none on a log axis
        b.plot([r["procs"] for r in pos], [r["mean_us"] for r in pos], style, label=f"{label} mean")
    if live:
        b.plot([r["procs"] for r in live], [r["mean_us"] for r in live], "D", label="1Pipe live (1000x, rescaled)")
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("processes")
        ax.grid(alpha=0.3)
        ax.legend()
    a.set_ylabel("delivered M msg/s per process")
    a.set_ylim(bottom=0)
    a.set_title("Fig. 8a: throughput per process (sim, 100G)")
    b.set_yscale("log")
    b.set_ylabel("latency (us)")
    b.set_title("Fig. 8b: delivery latency")
    save(plt, fig, path, dpi=110)
    return True


def plot_fig9a(rows: list[dict[str, Any]], path: Path) -> bool:
    plt = pyplot()
    built = [r for r in rows if r["switch_beacons"] == "prompt"]
    if plt is None or not built:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for skew in sorted({r["skew_us"] for r in built}):
        pts = sorted((r for r in built if r["skew_us"] == skew), key=lambda r: r["t_beacon_us"])
        line = a.plot([r["t_beacon_us"] for r in pts], [r["overhead_mean_us"] for r in pts], "o-",
                      label=f"skew {skew:g} us")
        a.plot([r["t_beacon_us"] for r in pts], [r["model_us"] for r in pts], ":", color=line[0].get_color())
    timer = sorted((r for r in rows if r["switch_beacons"] == "timer"), key=lambda r: r["t_beacon_us"])
    if timer:
        a.plot([r["t_beacon_us"] for r in timer], [r["overhead_mean_us"] for r in timer], "k^--",
               label="skew 0, switch beacons on the timer only")
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("T_beacon (us)")
    a.set_ylabel("mean overhead over unordered (us)")
    a.set_title("Fig. 9a: overhead vs T_beacon (dotted: T/2 + skew)")
    for t in sorted({r["t_beacon_us"] for r in built}):
        pts = sorted((r for r in built if r["t_beacon_us"] == t), key=lambda r: r["skew_us"])
        b.plot([r["mean_abs_offset_us"] for r in pts], [r["overhead_mean_us"] for r in pts], "o-",
               label=f"T_beacon {t:g} us")
    b.set_xlabel("mean |clock offset| (us)")
    b.set_ylabel("mean overhead (us)")
    b.set_title("overhead vs clock skew")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    save(plt, fig, path, dpi=110)
    return True


def plot_fig9b(rows: list[dict[str, Any]], path: Path) -> bool:
    plt = pyplot()
    if plt is None or not rows:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    floor = 1e-6
    sim = sorted((r for r in rows if r["runtime"] == "sim"), key=lambda r: r["loss"])
    if sim:
        ax.plot([max(r["loss"], floor) for r in sim], [r["mean_us"] for r in sim], "o-", label="1Pipe/BE (sim)")
        ax.plot([max(r["loss"], floor) for r in sim], [r["unordered_mean_us"] for r in sim], "^:", label="unordered")
    live = [r for r in rows if r["runtime"] == "live"]
    if live:
        ax.plot([max(r["loss"], floor) for r in live], [r["mean_us"] for r in live], "D",
                label="1Pipe live (1000x, rescaled)")
    ax.set_xscale("log")
    ax.set_xlabel(f"loss rate on ToR-spine links (0 drawn at {floor:g})")
    ax.set_ylabel("mean latency (us)")
    ax.set_title("Fig. 9b: latency vs loss")
    ax.grid(alpha=0.3)
    ax.legend()
    save(plt, fig, path, dpi=110)
    return True


# ------------------------------------------------------------------------ paper vs ours
def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _series_label(r: dict[str, Any]) -> str:
    return r["series"] + (" (live)" if r.get("runtime") == "live" else "")


def paper_table(rows: list[dict[str, Any]]) -> str:
    """One row per paper point; a series with no number of ours at all is one line (its x range,
    the paper's range and the reason), the JSON keeps every point."""
    out: list[list[object]] = []
    for series in dict.fromkeys(_series_label(r) for r in rows):
        pts = [r for r in rows if _series_label(r) == series]
        if all(r["ours"] is None for r in pts) and len(pts) > 1:
            lo, hi = min(r["paper"] for r in pts), max(r["paper"] for r in pts)
            out.append([series, f"{pts[0]['x']} .. {pts[-1]['x']} ({len(pts)})", f"{_g(lo)} .. {_g(hi)}", "-", "-",
                        "-", "-", pts[0]["note"]])
            continue
        for r in pts:
            x = r["x"] + (f" (ours at {r['x_ours']})" if r.get("x_ours") else "")
            flag = " **>2x**" if r["differs_2x"] else ""
            out.append([series, x, _g(r["paper"]), _g(r["ours"]), _f(r["ratio"]), _g(r["scale_factor"]),
                        _f(r["at_scale"]) + flag, r["note"]])
    return format_table(["series", "x", "paper", "ours", "ours/paper", "scale factor", "at scale", "note"], out)


def paper_markdown(section: dict[str, Any]) -> list[str]:
    """The "paper vs ours" section of bench-onepipe-latest.md: a table per figure."""
    from . import paper

    src = section["source"]
    md = ["## Paper vs ours: the authors' data beside this run", "",
          f"The paper's numbers: {src['repository']} at {src['commit'][:12]} (`gnuplot/<file>`, copied to "
          f"{src['files']}). ours/paper is the ratio; the scale factor is the ratio our setup alone predicts "
          "(1: alike; a rate we offer below the paper's: offered / paper); 'at scale' = ratio / scale factor, "
          "**>2x** where it is outside 0.5-2 (docs/onepipe-paper.md says why).", ""]
    for fig in paper.FIGURES:
        rows = [r for r in section["rows"] if r["figure"] == fig.id]
        s = section["summary"][fig.id]
        md += [f"### {fig.title} (`{fig.file}`; {fig.y_label})", "",
               f"Ours: {fig.scale}. {s['with_ours']} of {s['points']} points measured, {s['differs_2x']} outside 2x "
               "at scale.", "", paper_table(rows), ""]
    return md


def _positions(xs: list[str]) -> tuple[list[float], bool]:
    """Numeric x where every label is a number, else the labels' indices (categorical)."""
    from ...onepipe.paperdata import x_value

    nums = [x_value(x) for x in xs]
    if all(v is not None for v in nums):
        return [float(v) for v in nums if v is not None], True
    return [float(i) for i in range(len(xs))], False


def _panel(ax: Any, fig: Figure, rows: list[dict[str, Any]]) -> None:
    xs = list(dict.fromkeys(r["x"] for r in rows))
    pos, numeric = _positions(xs)
    at = dict(zip(xs, pos, strict=True))
    for i, series in enumerate(dict.fromkeys(r["series"] for r in rows)):
        pts = [r for r in rows if r["series"] == series and r["runtime"] == "sim"]
        c = f"C{i % 10}"
        ax.plot([at[r["x"]] for r in pts], [r["paper"] for r in pts], "o--", color=c, alpha=0.6, ms=4,
                label=f"paper {series}")
        ours = [r for r in pts if r["ours"] is not None]
        if ours:
            ax.plot([at[r["x"]] for r in ours], [r["ours"] for r in ours], "s-", color=c, ms=4, label=f"ours {series}")
        live = [r for r in rows if r["series"] == series and r["runtime"] == "live" and r["ours"] is not None]
        if live:
            ax.plot([at[r["x"]] for r in live], [r["ours"] for r in live], "D", color=c, ms=6,
                    label=f"ours {series} (live, 1000x)")
    if numeric and fig.logx and all(p > 0 for p in pos):
        ax.set_xscale("log")
    if not numeric:
        ax.set_xticks(pos, xs)
    if fig.logy:
        ax.set_yscale("log")
    ax.set_xlabel(fig.x_label)
    ax.set_ylabel(fig.y_label)
    ax.set_title(fig.title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)


def plot_paper(section: dict[str, Any], results_dir: Path, name: str) -> list[str]:
    """One PNG per paper figure (its panels side by side): the paper's series dashed, ours solid
    in the same colour on the same axes. The file names written (none without matplotlib)."""
    from . import paper

    plt = pyplot()
    if plt is None:
        return []
    written = []
    for number in dict.fromkeys(f.number for f in paper.FIGURES):
        figs = [f for f in paper.FIGURES if f.number == number]
        fig, axes = plt.subplots(1, len(figs), figsize=(5.5 * len(figs), 4.2), squeeze=False)
        for ax, f in zip(axes[0], figs, strict=True):
            _panel(ax, f, [r for r in section["rows"] if r["figure"] == f.id])
        out = f"{name}-paper-fig{number}.png"
        save(plt, fig, results_dir / out, dpi=100)
        written.append(out)
    return written


__all__ = ["fig8_table", "fig9a_table", "fig9b_table", "live_table", "paper_markdown", "paper_table", "plot_fig8",
           "plot_fig9a", "plot_fig9b", "plot_paper"]
