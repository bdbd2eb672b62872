"""The PNG plots of ``netstack bench linkguardian``, one per figure. Each ``plot_*`` returns
whether it wrote its file (False: matplotlib is not installed)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from ..plot import pyplot, save
from .params import LOSS_COPIES, PAPER_SPEED, SENSITIVITY_RATE, SPEED_RATES, TARGET_LOSS, TARGET_SPEED, label

#: marker and colour per mode, shared by both panels of Fig. 8
_STYLE = {"off": ("s", "tab:grey"), "blocking": ("o", "tab:blue"), "nb": ("^", "tab:orange")}


def plot_fig8(f8: dict[str, Any], path: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8))
    _fig8_loss(ax, f8)
    _fig8_speed(bx, f8)
    save(plt, fig, path, dpi=110)
    return True


def _fig8_loss(ax: Any, f8: dict[str, Any]) -> None:
    """Panel (a): effective loss against actual loss, with theory and the target."""
    xs = [1e-3, 0.1]
    ax.plot(xs, xs, color="grey", lw=1, label="off: effective = actual")
    ax.plot(xs, [x ** (LOSS_COPIES + 1) for x in xs], color="black", ls="--", lw=1,
            label=f"theory actual^{LOSS_COPIES + 1} (N={LOSS_COPIES})")
    for mode in ("off", "blocking", "nb"):
        pts = [r for r in f8["loss"] if r["mode"] == mode]
        if not pts:
            continue
        x = [r["actual_loss"] for r in pts]
        y = [r["effective"]["rate"] for r in pts]
        lo = [max(0.0, r["effective"]["rate"] - r["effective"]["ci95"][0]) for r in pts]
        hi = [r["effective"]["ci95"][1] - r["effective"]["rate"] for r in pts]
        m, c = _STYLE[mode]
        harness = pts[0]["harness"]
        n = f", N={pts[0]['copies']}" if pts[0]["copies"] else ""
        ax.errorbar(x, y, yerr=[lo, hi], fmt=m, color=c, capsize=4, label=f"{label(mode)} ({harness}{n}, 95% CI)")
    for mode in ("blocking", "nb"):
        pts = [r for r in f8["speed"] if r["mode"] == mode and r["nominal_loss"] > 0 and not r.get("sensitivity")]
        if pts:
            m, c = _STYLE[mode]
            ax.scatter([r["actual_loss"] for r in pts], [r["effective"]["ci95"][1] for r in pts], marker="v",
                       facecolors="none", edgecolors=c, label=f"{label(mode)} Eq. 2 N: 95% upper bound")
    ax.axhline(TARGET_LOSS, color="green", lw=0.8, ls=":", label=f"target {TARGET_LOSS:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("actual loss rate (measured on the link)")
    ax.set_ylabel("effective loss rate (end to end)")
    ax.set_title("Fig. 8 (a): effective loss, virtual time")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)


def _fig8_speed(bx: Any, f8: dict[str, Any]) -> None:
    """Panel (b): effective link speed relative to the unprotected lossless run."""
    rows = [r for r in f8["speed"] if r["frame_size"] == f8["speed"][0]["frame_size"]]
    groups = [(f"{a:g}", [r for r in rows if r["nominal_loss"] == a and not r.get("sensitivity")]) for a in SPEED_RATES]
    sens = [r for r in rows if r.get("sensitivity")]
    if sens:
        groups.append((f"{SENSITIVITY_RATE:g}\n(long delay)", [r for r in sens if r["nominal_loss"] > 0] or sens))
    width = 0.27
    for i, mode in enumerate(("off", "blocking", "nb")):
        xs_, ys_ = [], []
        for g, (_, rs) in enumerate(groups):
            r = next((r for r in rs if r["mode"] == mode), None)
            if r is not None and r["speed_vs_lossless"] is not None:
                xs_.append(g + (i - 1) * width)
                ys_.append(100 * r["speed_vs_lossless"])
        bx.bar(xs_, ys_, width, color=_STYLE[mode][1], label=label(mode))
    for mode in ("blocking", "nb"):
        bx.axhline(100 * TARGET_SPEED[mode], color=_STYLE[mode][1], ls=":", lw=1,
                   label=f"target {label(mode)} {TARGET_SPEED[mode]:.0%}")
    # the paper's own points (100G, 1e-3: §4.1 and the authors' artifact), beside ours in the 1e-3 group
    g = SPEED_RATES.index(SENSITIVITY_RATE)
    bx.scatter([g, g + width], [100 * PAPER_SPEED["blocking"], 100 * PAPER_SPEED["nb"]], marker="*", s=90,
               color="black", zorder=3, label=f"paper, 100G: LG {PAPER_SPEED['blocking']:.2%}, "
                                              f"LG_NB {PAPER_SPEED['nb']:.2%}")
    bx.set_xticks(range(len(groups)), [g for g, _ in groups])
    bx.set_ylim(50, 101)
    bx.set_xlabel("actual loss rate (nominal)")
    bx.set_ylabel("effective link speed, % of unprotected lossless")
    bx.set_title("Fig. 8 (b): effective link speed (netstack.sim, Eq. 2 N)")
    bx.legend(fontsize=7, loc="lower left")
    bx.grid(True, axis="y", alpha=0.3)


def plot_fig9(f9: dict[str, Any], path: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    runs = f9["runs"]
    fig, axes = plt.subplots(len(runs), 1, figsize=(10, 3.4 * len(runs)), sharex=True, squeeze=False)
    for ax, r in zip(axes[:, 0], runs, strict=True):
        s = r["tcp"]["samples"]
        ax.plot([x["t"] for x in s], [x["mbps"] for x in s], "-o", ms=3, color="tab:blue", label="TCP throughput")
        ev = {e["event"]: e["t"] for e in r["events"]}
        end = r["seconds"]
        if "corrupt" in ev:
            ax.axvspan(ev["corrupt"], end, color="tab:red", alpha=0.08, label=f"corruption {r['corrupt']:g}")
        if "lg_enable" in ev:
            ax.axvline(ev["lg_enable"], color="tab:green", ls="--", label="LinkGuardian enabled")
        ls = r["lg_samples"]
        rb = [(x["t"], x["reorder_buffer_bytes"] / 1e3) for x in ls if x.get("reorder_buffer_bytes") is not None]
        if rb:
            ax.plot([t for t, _ in rb], [b for _, b in rb], ":", color="tab:purple",
                    label="reordering buffer, KB (sampled)")
        tr = [(x["t"], x["tcp_retrans"]) for x in ls if x["tcp_retrans"] is not None]
        bx = ax.twinx()
        if len(tr) > 1:
            bx.bar([t for t, _ in tr[1:]], [b - a for (_, a), (_, b) in itertools.pairwise(tr)],
                   width=0.3, color="tab:grey", alpha=0.5, label="TCP retransmissions / sample")
        bx.set_ylabel("TCP retransmitted segments")
        rx = r["receiver"]
        k = r.get("recirc_factor", 1)
        ax.set_title(f"Fig. 9: Reno over sw1 = sw2, backpressure {'on' if r['backpressure'] else 'off'}, "
                     f"recirculation {'= link' if k == 1 else f'{k}x link'} "
                     f"(N={r['copies']}; pauses {rx.get('pauses_sent')}, reorder drops {rx.get('reorder_drops')}, "
                     f"peak reorder buffer {rx.get('reorder_buffer_max_bytes')} B)", fontsize=9)
        ax.set_ylabel("Mbit/s; KB")
        ax.set_ylim(0, 215)
        ax.grid(True, alpha=0.3)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = bx.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper center", ncol=4)
    axes[-1, 0].set_xlabel("seconds")
    save(plt, fig, path, dpi=110)
    return True


def plot_fig10(f10: dict[str, Any], path: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    points = (("p50", "p50"), ("p99", "p99"), ("p99.9", "p99.9"))
    width = 0.2
    colors = ("tab:grey", "tab:red", "tab:blue", "tab:orange")
    for i, (p, c) in enumerate(zip(f10["phases"], colors, strict=False)):
        ax.bar([j + (i - 1.5) * width for j in range(len(points))], [p["fct_us"][k] / 1e3 for k, _ in points],
               width, color=c, label=p["phase"])
    ax.set_xticks(range(len(points)), [lbl for _, lbl in points])
    ax.set_yscale("log")
    ax.set_ylabel("flow completion time, ms (log)")
    ax.set_title(f"Fig. 10: {f10['size_bytes']} B TCP request/response, {f10['flows']:,} flows per phase, "
                 f"corruption {f10['corrupt']:g}", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    save(plt, fig, path, dpi=110)
    return True
