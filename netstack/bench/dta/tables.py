"""The Markdown tables of ``netstack bench dta``: live ingestion (DTA and the naive collector),
Fig. 7 and Fig. 9."""

from __future__ import annotations

from typing import Any

from ..output import format_table
from .params import SEEDS
from .search import invalid_runs, sustained


def _k(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e3:.1f} k"


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _us2(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def tables(live: list[dict[str, Any]], f7: list[dict[str, Any]], f9: list[dict[str, Any]],
           engines: list[dict[str, Any]] | None = None) -> str:
    out = []
    if engines:
        labels = {"keywrite": "Key-Write N={}", "append": "Append B={}", "increment": "Key-Increment N={}"}
        rows = [[labels[e["kind"]].format(e["param"]), f"{e['frames_per_report']:.3g}",
                 _us2(e["translator_us_per_report"]), _us2(e["translator_us_per_frame"]),
                 _us2(e["responder_us_per_frame"]),
                 _us2(e["responses_us_per_response"]) if e["responses_per_frame"] else "-"] for e in engines]
        out.append("Engines in process (CPU per report / frame, best of "
                   f"{engines[0]['rounds']} runs of {engines[0]['reports']} reports; no network):\n")
        out.append(format_table(["case", "RoCEv2 frames/report", "translator us/report", "translator us/frame",
                                 "responder us/frame", "translator us/response"], rows))
        out.append("")
    # a case whose search a measurement that does not count ended is listed below, not tabulated
    counted = [c for c in live if c.get("valid", True)]
    naive = {c["kind"]: c for c in counted if c["path"] == "naive"}
    rows = []
    for c in counted:
        if c["path"] != "dta":
            continue
        s, o = c["sustained"], c["overload"]
        nv = naive.get(c["kind"])
        nrate = sustained(nv) if nv else None
        ratio = c.get("vs_naive")
        ref = s or o
        rows.append([c["label"], _k(sustained(c)), f"{ref['rdma_ops_per_report']:.3g}"
                     if ref["rdma_ops_per_report"] is not None else "-",
                     _us(ref["switch_cpu_us_per_report"]), _us(ref["collector_cpu_us_per_report"]),
                     _k(o["offered_per_s"]), _k(o["ingested_per_s"]), f"{o['loss']:.0%}",
                     f"{o['resyncs']}/{o['collector_socket_drops']}",
                     ("≥ " if nv and nv["reporter_bound"] else "") + _k(nrate) if nv else "-",
                     ("≤ " if nv and nv["reporter_bound"] else "") + f"{ratio:.2f}" if ratio else "-"])
    if rows:
        out.append("Ingestion end to end (h1 reporter -> sw2 translator -> c1 RoCEv2 responder -> memory):\n")
        out.append(format_table(["case", "sustained ingest/s (<1% loss)", "RDMA ops/report",
                                 "sw2 CPU us/report", "c1 CPU us/report", "overload: offered/s", "overload: ingested/s",
                                 "overload: loss", "overload: resyncs/c1 socket drops", "naive collector/s",
                                 "DTA / naive"], rows))
    nrows = []
    for c in counted:
        if c["path"] != "naive":
            continue
        s, o = c["sustained"], c["overload"]
        nrows.append([c["label"], ("≥ " if c["reporter_bound"] else "") + _k(sustained(c)),
                      _us((s or o)["collector_cpu_us_per_report"]), _us((s or o)["switch_cpu_us_per_report"]),
                      _k(o["offered_per_s"]), f"{o['loss']:.1%}",
                      "reporter-bound (kept up with all it was offered)" if c["reporter_bound"] else "saturated"])
    if nrows:
        out.append("\nNaive CPU collector (translator off; UDP socket + decode + insert into a dict/list in c1):\n")
        out.append(format_table(["same reports as", "ingest/s", "c1 CPU us/report", "sw2 CPU us/report",
                                 "overload: offered/s", "overload: loss", "limit"], nrows))
    out += invalid_lines(invalid_runs(live))
    if f7:
        lfs = sorted({r["load_factor"] for r in f7})
        rows = []
        for mode in ("crc32+mix", "crc32"):
            for n in sorted({r["redundancy"] for r in f7 if r["slot_hash"] == mode}):
                by = {r["load_factor"]: r for r in f7 if r["redundancy"] == n and r["slot_hash"] == mode}
                label = f"N = {n}" if mode == "crc32+mix" else f"N = {n}, public CRC32 slots"
                rows.append([label, *(f"{by[lf]['success']:.3f} ({by[lf]['expected']:.3f})" for lf in lfs)])
        out.append(f"\nFig. 7 - Key-Write query success vs load factor ({f7[0]['slots']} slots, {SEEDS} seeds; "
                   "analytic in parentheses):\n")
        out.append(format_table(["", *(f"LF {lf:g}" for lf in lfs)], rows))
    if f9:
        rows = [[r["checksum_bits"], f"{r['right']:.4f}", f"{r['missing']:.4f}", f"{r['wrong']:.2e}",
                 f"{r['absent_wrong']:.2e}", f"{r['absent_wrong_model']:.2e}"] for r in f9]
        out.append(f"\nFig. 9 - wrong answers vs checksum width (N = {f9[0]['redundancy']}, load factor 1, "
                   f"{f9[0]['slots']} slots, {f9[0]['queries']} queries per width):\n")
        out.append(format_table(["checksum bits", "right", "not found", "wrong (written keys)",
                                 "wrong (absent keys)", "absent: model"], rows))
    return "\n".join(out)


def invalid_lines(invalid: list[dict[str, Any]]) -> list[str]:
    """The measurements that do not count, with their reasons (the cases they ended: not above)."""
    if not invalid:
        return []
    return ["\nInvalid measurements (not counted; their cases are left out of the tables, ratios and plot above: "
            "other work took the CPUs, or the reporter fell short of its duration):\n",
            *[f"- {r['row']}: {'; '.join(r['reasons'])}" for r in invalid]]
