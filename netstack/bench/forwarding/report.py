"""What ``netstack bench forwarding`` makes of its records: medians over the rounds, ratios to
the bare forwarder, where frames were lost, and the tables it prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..output import format_table
from .params import BMV2_REFERENCE, GOAL_RATIO


def where_lost(record: dict[str, Any]) -> str:
    parts = []
    if "forwarder" in record:
        f = record["forwarder"]
        if f.get("kernel_drops"):
            parts.append(f"fwd sock {si(f['kernel_drops'])}")
        if f.get("send_errors"):
            parts.append(f"fwd send {si(f['send_errors'])}")
    for node, st in record.get("switches", {}).items():
        for port, c in st.get("ports", {}).items():
            for key, label in (("kernel_drops", "sock"), ("queue_drops", "queue"), ("send_errors", "send"),
                               ("fcs_errors", "fcs")):
                if c.get(key):
                    parts.append(f"{node}/{port} {label} {si(c[key])}")
    if not record.get("dut_saturated", True):
        parts.insert(0, "none: generator-bound, rx is a lower bound")
    return ", ".join(parts) if parts else "-"


def si(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e3:
        return f"{n / 1e3:.0f}k"
    return f"{n:.0f}"


def median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summarise(records: list[dict[str, Any]], sizes: list[int], paths: list[str]) -> list[dict[str, Any]]:
    """Per size: the median rate of every path over the rounds, and for each switch path the median
    and range of its per-round ratio to the bare forwarder measured in the same round."""
    summary = []
    for size in sizes:
        row: dict[str, Any] = {"size_bytes": size}
        mine = [r for r in records if r["size_bytes"] == size]
        for path in paths:
            rates = [r["rx_fps"] for r in mine if r["path"] == path]
            if rates:
                row[f"{path}_rx_fps"] = median(rates)
                row[f"{path}_rx_fps_range"] = [min(rates), max(rates)]
        for sw in ("switch1", "switch2"):
            ratios = [r["ratio_vs_bare"] for r in mine if r["path"] == sw and r.get("ratio_vs_bare") is not None]
            if ratios:
                row[f"{sw}_vs_bare"] = median(ratios)
                row[f"{sw}_vs_bare_range"] = [min(ratios), max(ratios)]
        if "switch1_vs_bare" in row:
            row["goal_met"] = row["switch1_vs_bare"] >= GOAL_RATIO
        summary.append(row)
    return summary


def print_report(records: list[dict[str, Any]], summary: list[dict[str, Any]], paths: list[str], rounds: int,
                 notes: list[str], written: Path) -> None:
    """Every measurement, the medians over the rounds, the goal's verdict per size, the notes."""
    rows = []
    for r in records:
        ratio = r["ratio_vs_bare"]
        rows.append([r["round"] + 1, f"{r['size_bytes']} B", r["path"], r["offered_fps"], r["rx_fps"],
                     f"{r['loss']:.1%}", "-" if ratio is None else f"{ratio:.0%}",
                     f"{r['rx_fps'] * r['size_bytes'] * 8 / 1e6:.0f}", where_lost(r),
                     "yes" if r.get("valid", True) else "INVALID"])
    print(format_table(["round", "size", "path", "offered/s", "rx/s", "loss", "vs bare", "rx Mbit/s", "lost at",
                        "valid"], rows))
    print()
    med = []
    for row in summary:
        for path in paths:
            if f"{path}_rx_fps" not in row:
                continue
            lo, hi = row[f"{path}_rx_fps_range"]
            ratio = row.get(f"{path}_vs_bare")
            rng = row.get(f"{path}_vs_bare_range")
            med.append([f"{row['size_bytes']} B", path, row[f"{path}_rx_fps"], f"{si(lo)}-{si(hi)}",
                        "-" if ratio is None else f"{ratio:.0%}",
                        "-" if rng is None else f"{rng[0]:.0%}-{rng[1]:.0%}"])
    print(f"medians over {rounds} round(s):")
    print(format_table(["size", "path", "median rx/s", "rx/s range", "median vs bare", "vs bare range"], med))
    print()
    for row in summary:
        if "switch1_vs_bare" in row:
            verdict = "meets" if row["goal_met"] else "misses"
            lo, hi = row["switch1_vs_bare_range"]
            print(f"{row['size_bytes']} B: 1 switch reaches {row['switch1_vs_bare']:.0%} of the bare forwarder "
                  f"(median of {rounds}, range {lo:.0%}-{hi:.0%}; {verdict} the {GOAL_RATIO:.0%} goal)")
    lo, hi = BMV2_REFERENCE["frames_per_s_low"], BMV2_REFERENCE["frames_per_s_high"]
    print(f"reference (documented, not measured): BMv2 simple_switch ~{lo // 1000}-{hi // 1000} k frames/s")
    for n in notes:
        print(f"note: {n}")
    print(f"\nwrote {written}")
