"""The PNG plots of ``netstack bench dta``: Fig. 7, Fig. 8 (data longevity), Fig. 9 and the live ingestion rates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..plot import pyplot, save
from .search import sustained


def plots(results_dir: Path, live: list[dict[str, Any]], f7: list[dict[str, Any]],
          f9: list[dict[str, Any]], longevity: list[dict[str, Any]] | None = None) -> list[str]:
    """The plots of whatever ran, as the paths written ([] without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return []
    results_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if f7:
        written.append(_plot_fig7(plt, f7, results_dir / "bench-dta-fig7.png"))
    if longevity:
        written.append(_plot_fig8(plt, longevity, results_dir / "bench-dta-longevity.png"))
    if f9:
        written.append(_plot_fig9(plt, f9, results_dir / "bench-dta-fig9.png"))
    dta = [c for c in live if c["path"] == "dta" and sustained(c)]
    if dta:
        written.append(_plot_ingest(plt, dta, live, results_dir / "bench-dta-ingest.png"))
    return written


def _plot_fig7(plt: Any, f7: list[dict[str, Any]], path: Path) -> str:
    fig, ax = plt.subplots(figsize=(6, 4))
    colors = {}
    for n in sorted({r["redundancy"] for r in f7 if r["slot_hash"] == "crc32+mix"}):
        rs = [r for r in f7 if r["redundancy"] == n and r["slot_hash"] == "crc32+mix"]
        line, = ax.plot([r["load_factor"] for r in rs], [r["success"] for r in rs], "o-", label=f"N = {n}")
        colors[n] = line.get_color()
        ax.plot([r["load_factor"] for r in rs], [r["expected"] for r in rs], "--", color=line.get_color(),
                alpha=0.5)
    for n in sorted({r["redundancy"] for r in f7 if r["slot_hash"] == "crc32"}):
        rs = [r for r in f7 if r["redundancy"] == n and r["slot_hash"] == "crc32"]
        ax.plot([r["load_factor"] for r in rs], [r["success"] for r in rs], "x:", color=colors.get(n),
                label=f"N = {n}, public CRC32 slots")
    ax.set_xlabel("load factor (keys / slots)")
    ax.set_ylabel("query success rate")
    ax.set_title("Key-Write query success (Fig. 7); dashed: analytic")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    save(plt, fig, path, dpi=120)
    return str(path)


def _plot_fig8(plt: Any, curves: list[dict[str, Any]], path: Path) -> str:
    """The paper's Fig. 8 axes: queryability vs report age, one curve per store size (N = 2),
    plus the other N; measured markers, analytic dashed."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for c in curves:
        pts = c["points"]
        line, = ax.plot([p["age_reports"] for p in pts], [p["queryable"] for p in pts], "o-", markersize=3,
                        label=f"{c['memory_bytes'] / 1024:g} KiB ({c['slots']:,} slots), N = {c['redundancy']}")
        ax.plot([p["age_reports"] for p in pts], [p["analytic"] for p in pts], "--", color=line.get_color(),
                alpha=0.5)
    ax.set_xscale("log")
    ax.set_xlabel("report age (reports written since)")
    ax.set_ylabel("queryability")
    ax.set_title("Key-Write data longevity (Fig. 8); dashed: analytic")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    save(plt, fig, path, dpi=120)
    return str(path)


def _plot_fig9(plt: Any, f9: list[dict[str, Any]], path: Path) -> str:
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in (("wrong", "written keys: wrong answer"), ("absent_wrong", "absent keys: wrong answer")):
        pts = [(r["checksum_bits"], r[key]) for r in f9 if r[key] > 0]  # none seen: nothing to plot
        if pts:
            ax.semilogy([x for x, _ in pts], [y for _, y in pts], "o-", label=label)
    ax.semilogy([r["checksum_bits"] for r in f9], [r["absent_wrong_model"] for r in f9], "--",
                label="absent keys: model 1-(1-occ/(2^b-1))^N")
    ax.set_xlabel("checksum width (bits)")
    ax.set_ylabel(f"wrong-answer rate ({f9[0]['queries']} queries per width)")
    ax.set_title(f"Key-Write wrong answers vs checksum (Fig. 9), N = {f9[0]['redundancy']}, load 1.0")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    save(plt, fig, path, dpi=120)
    return str(path)


def _plot_ingest(plt: Any, dta: list[dict[str, Any]], live: list[dict[str, Any]], path: Path) -> str:
    """Sustained ingest of each DTA case (bars), the naive collector's on the same reports (red)."""
    naive = {c["kind"]: sustained(c) for c in live if c["path"] == "naive"}
    bound = any(c["reporter_bound"] for c in live if c["path"] == "naive")
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(range(len(dta)), [sustained(c) for c in dta], label="DTA: translator + RoCEv2 responder")
    labelled = False
    for i, c in enumerate(dta):
        if naive.get(c["kind"]):
            ax.hlines(naive[c["kind"]], i - 0.4, i + 0.4, colors="red",
                      label=None if labelled else "naive CPU collector (same reports)"
                      + (", a lower bound: reporter-bound" if bound else ""))
            labelled = True
    ax.set_xticks(range(len(dta)))
    ax.set_xticklabels([c["label"] for c in dta], rotation=30, ha="right")
    ax.set_ylabel("reports/s ingested, < 1 % loss")
    ax.set_title("DTA ingestion end to end (this 2-core VM)")
    top = max([sustained(c) for c in dta] + [v for v in naive.values() if v])
    ax.set_ylim(0, top * 1.35)
    ax.legend(loc="upper left", fontsize="small")
    save(plt, fig, path, dpi=120)
    return str(path)
