"""``netstack bench tcd``'s FCT section: TCD's FCT comparison on the ``tcd-leafspine`` fabric (issue 30).

"Congestion Detection in Lossless Networks" (TCD, SIGCOMM 2021), abstract: congestion control with
TCD improves the FCT slowdown 3.3x at the median and 2.0x at p99. Each variant (workload x cc, at
load 0.6) is one ``netstack tcd fct`` comparison (``netstack.tcd.compare``): every seed's flows run
in virtual time with the cc alone (base: marker ``ecn``, DCQCN's RED) and with TCD (the same RED
where a port is not paused, UE where it is), pooled; the ratio base / tcd per class (contributor,
victim, other) and size bucket, with a paired bootstrap 95 % interval over seeds. The paper's gain
and issue 30's expectation for the victims (at least 2x at the median, 1.5x at p99) are *goals*,
reported and never an error. ``bench-tcd-fct.png``: per variant, the slowdown CDFs (all flows and
the victims, both arms) and the ratios per group with their intervals against the paper's.

This replaces the FCT runs on §3.1's chain (the ``tcd-fct`` scenario, still there for ``netstack
sim``): on the chain almost no flow was a victim of PFC and flow sizes were scaled by 0.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..tcd.compare import DEFAULT_FLOWS, PAPER_RATIO, TABLE_GROUPS, FctCompare, run_compare, table
from .output import Progress
from .plot import pyplot, save

#: (workload, cc) of each variant, load and seeds (flows per seed: ``DEFAULT_FLOWS``, the command's);
#: ``--quick``: tiny flows, two seeds
FCT_VARIANTS = (("websearch", "dcqcn"), ("websearch", "timely"), ("hadoop", "dcqcn"))
FCT_LOAD = 0.6
FCT_SEEDS = (1, 2, 3, 4)
QUICK_VARIANTS = (("websearch", "dcqcn"), ("websearch", "timely"))
QUICK_SEEDS = (1, 2)
QUICK_FLOWS = 6
QUICK_PARAMS = (("size_scale", 0.05),)
#: issue 30: "expect at least 2x at the median and 1.5x at p99 for victims"
VICTIM_GOAL = {"median": 2.0, "p99": 1.5}


def fct_compares(quick: bool) -> list[tuple[str, FctCompare]]:
    """(variant name, its comparison) of the section."""
    variants = QUICK_VARIANTS if quick else FCT_VARIANTS
    return [(f"{w} {cc}", FctCompare("tcd-leafspine", w, FCT_LOAD, cc, QUICK_SEEDS if quick else FCT_SEEDS,
                                     QUICK_FLOWS if quick else DEFAULT_FLOWS[w], QUICK_PARAMS if quick else ()))
            for w, cc in variants]


def fct_rows(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant and group (:data:`~netstack.tcd.compare.TABLE_GROUPS`): flows, both arms' median
    and p99 slowdown, the ratios and their ci95."""
    rows = []
    for v in variants:
        cmp = v["compare"]
        for g, _ in TABLE_GROUPS:
            b, t = cmp["arms"]["base"]["fct"][g], cmp["arms"]["tcd"]["fct"][g]
            rows.append({"variant": v["name"], "workload": v["workload"], "cc": v["cc"], "group": g,
                         "flows": b["flows"], "base_median": b["median"], "base_p99": b["p99"],
                         "tcd_median": t["median"], "tcd_p99": t["p99"],
                         "ratio_median": cmp["ratio"][g]["median"], "ratio_p99": cmp["ratio"][g]["p99"],
                         "ci95_median": cmp["ci95"][g]["median"], "ci95_p99": cmp["ci95"][g]["p99"]})
    return rows


def fct_targets(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Goals, reported and never an error: every flow's ratio against the paper's abstract, the
    victims' against issue 30's expectation."""
    out = []
    for v in variants:
        for group, goal, whose in (("all", PAPER_RATIO, "the paper's abstract"), ("victim", VICTIM_GOAL, "issue 30")):
            for q in ("median", "p99"):
                val = v["compare"]["ratio"][group][q]
                out.append({"kind": "goal", "what": f"FCT slowdown {v['cc']} / {v['cc']}+TCD, {q}, {group} flows, "
                                                    f"{v['workload']} at load {FCT_LOAD} ({whose})",
                            "value": val, "target": goal[q], "met": val >= goal[q] if val is not None else None})
    return out


def plot_fct(variants: list[dict[str, Any]], path: Path) -> bool:
    """Per variant: the slowdown CDFs (all flows, victims; base and tcd) and the ratio per group
    (median, p99) with its ci95, beside the paper's 3.3x and 2.0x."""
    plt = pyplot()
    if plt is None or not variants:
        return False
    fig, axes = plt.subplots(len(variants), 2, figsize=(12, 3.8 * len(variants)), squeeze=False)
    for row, v in zip(axes, variants, strict=True):
        _plot_cdfs(row[0], v)
        _plot_ratios(row[1], v)
    save(plt, fig, path, dpi=100)
    return True


def _plot_cdfs(ax: Any, v: dict[str, Any]) -> None:
    cmp = v["compare"]
    cc = v["cc"].upper()
    for arm, label, color in (("base", cc, "tab:red"), ("tcd", f"{cc}+TCD", "tab:blue")):
        flows = cmp["arms"][arm].get("flows") or {"fields": [], "rows": []}
        i_cls, i_slow = flows["fields"].index("class"), flows["fields"].index("slowdown")
        for sel, style in ((None, "-"), ("victim", "--")):
            vals = sorted(r[i_slow] for r in flows["rows"] if r[i_slow] is not None and sel in (None, r[i_cls]))
            if vals:
                ax.plot(vals, [(k + 1) / len(vals) for k in range(len(vals))], style, color=color,
                        label=f"{label}, {'victims' if sel else 'all flows'}")
    ax.set_xscale("log")
    ax.set_xlabel("FCT slowdown")
    ax.set_ylabel("CDF of flows")
    ax.set_title(f"{v['workload']}, {cc}, load {FCT_LOAD}: {cmp['flows']} flows, seeds "
                 f"{','.join(map(str, cmp['seeds']))}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def _plot_ratios(ax: Any, v: dict[str, Any]) -> None:
    cmp = v["compare"]
    groups = [g for g, _ in TABLE_GROUPS]
    width = 0.38
    for k, (q, color) in enumerate((("median", "tab:green"), ("p99", "tab:purple"))):
        xs = [i + (k - 0.5) * width for i in range(len(groups))]
        vals = [cmp["ratio"][g][q] or 0.0 for g in groups]
        err = [[max(0.0, r - (cmp["ci95"][g][q] or [r, r])[0]) for g, r in zip(groups, vals, strict=True)],
               [max(0.0, (cmp["ci95"][g][q] or [r, r])[1] - r) for g, r in zip(groups, vals, strict=True)]]
        ax.bar(xs, vals, width, yerr=err, capsize=2, color=color, label=f"ratio, {q} (95 % interval)")
        ax.axhline(PAPER_RATIO[q], color=color, ls=":", lw=1, label=f"the paper, {q}: {PAPER_RATIO[q]}x")
    ax.axhline(1.0, color="k", lw=0.6)
    ax.set_xticks(range(len(groups)), [label for _, label in TABLE_GROUPS], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(f"{v['cc'].upper()} / {v['cc'].upper()}+TCD slowdown")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)


#: the bars of :func:`plot_points`: (group, quantile, colour)
POINT_BARS = (("all", "median", "tab:green"), ("all", "p99", "tab:olive"), ("victim", "median", "tab:blue"),
              ("victim", "p99", "tab:cyan"), ("victim_large", "median", "tab:purple"))


def point_label(cmp: dict[str, Any]) -> str:
    """A short label of a saved ``netstack tcd fct`` result for :func:`plot_points`: workload, cc,
    load, and what differs from the defaults (the incast, the CE rule, the seeds)."""
    s = cmp["setup"]
    extra = [f"incast {s['incast']['kind']}"] if s["incast"]["kind"] != "persistent" else []
    extra += ["TCD's CE rule"] if s.get("ce_rule") == "tcd" else []
    extra += [f"seeds {cmp['seeds'][0]}-{cmp['seeds'][-1]}"] if len(cmp["seeds"]) != 8 else []
    return "\n".join([f"{s['workload']} {s['cc']}", f"load {s['load']:g}", *extra])


def plot_points(points: list[tuple[str, dict[str, Any]]], path: Path) -> bool:
    """One group of bars per comparison (``(label, netstack tcd fct's JSON)``): the ratio of all
    flows, the victims and the large victims, median and p99, with their ci95, beside the paper's."""
    plt = pyplot()
    if plt is None or not points:
        return False
    fig, ax = plt.subplots(figsize=(max(8.0, 1.3 * len(points) + 2), 4.6))
    width = 0.8 / len(POINT_BARS)
    for k, (g, q, color) in enumerate(POINT_BARS):
        xs = [i + (k - (len(POINT_BARS) - 1) / 2) * width for i in range(len(points))]
        vals = [cmp["ratio"][g][q] or 0.0 for _, cmp in points]
        cis = [cmp["ci95"][g][q] or [v, v] for (_, cmp), v in zip(points, vals, strict=True)]
        err = [[max(0.0, v - c[0]) for v, c in zip(vals, cis, strict=True)],
               [max(0.0, c[1] - v) for v, c in zip(vals, cis, strict=True)]]
        ax.bar(xs, vals, width, yerr=err, capsize=2, color=color, label=f"{g.replace('_', ' ')}, {q}")
    for q, ls in (("median", "--"), ("p99", ":")):
        ax.axhline(PAPER_RATIO[q], color="tab:red", ls=ls, lw=1, label=f"the paper, {q}: {PAPER_RATIO[q]}x")
    ax.axhline(1.0, color="k", lw=0.6)
    ax.set_xticks(range(len(points)), [label for label, _ in points], fontsize=8)
    ax.set_ylabel("slowdown ratio, cc / cc+TCD (95 % interval)")
    ax.set_title("TCD's FCT gain on tcd-leafspine (virtual time, 40 Gbit/s)")
    ax.grid(axis="y", alpha=0.3)
    ax.set_ylim(0, max(4.6, ax.get_ylim()[1]))  # (room for the legend above the paper's lines)
    ax.legend(fontsize=7, ncol=4, loc="upper center")
    save(plt, fig, path, dpi=100)
    return True


def section_fct(quick: bool, workers: int | None, results_dir: Path, say: Progress, out: dict[str, Any]) -> list[str]:
    """The FCT comparisons: rows, goals and the plot into ``out``; the Markdown lines."""
    variants = []
    md: list[str] = []
    for name, cmp in fct_compares(quick):
        say(f"fct: {name} on {cmp.topology}, load {cmp.load}, {cmp.flows} flows x seeds "
            f"{','.join(map(str, cmp.seeds))} x 2 arms")
        res = run_compare(cmp, workers=workers, progress=lambda m, n=name: say(f"fct {n}: {m}"), flow_list=True)
        variants.append({"name": name, "workload": cmp.workload, "cc": cmp.cc, "compare": res})
        md += [f"## FCT slowdown, {name}", "", table(res), ""]
    out["targets"] += fct_targets(variants)
    out["fct"] = {"rows": fct_rows(variants), "variants": variants, "paper_ratio": PAPER_RATIO,
                  "victim_goal": VICTIM_GOAL, "topology": "tcd-leafspine (40 Gbit/s / 4 us, time scale 1)"}
    png = results_dir / "bench-tcd-fct.png"
    if plot_fct(variants, png):
        out["plots"]["fct"] = str(png)
    for v in variants:  # every flow was for the CDFs: the JSON keeps the comparisons (megabytes less)
        for arm in v["compare"]["arms"].values():
            arm.pop("flows", None)
    return md


__all__ = ["FCT_LOAD", "FCT_SEEDS", "FCT_VARIANTS", "POINT_BARS", "QUICK_FLOWS", "QUICK_SEEDS",
           "QUICK_VARIANTS", "VICTIM_GOAL", "fct_compares", "fct_rows", "fct_targets", "plot_fct", "plot_points",
           "point_label", "section_fct"]
