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
           engines: list[dict[str, Any]] | None = None, *, longevity: list[dict[str, Any]] | None = None,
           rate: dict[str, Any] | None = None, query: dict[str, Any] | None = None,
           idle: dict[str, Any] | None = None) -> str:
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
    out += cpu_lines(live, engines or [], idle or {})
    out += invalid_lines(invalid_runs(live))
    out += longevity_lines(longevity or [], rate or {})
    out += query_lines(query or {})
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


_KIND = {"keywrite": "Key-Write N={}", "append": "Append B={}", "increment": "Key-Increment N={}"}


def cpu_lines(live: list[dict[str, Any]], engines: list[dict[str, Any]], idle: dict[str, Any]) -> list[str]:
    """Collector CPU per report, DTA vs naive, beside the ingest rates ("Direct Telemetry
    Access" §7.3: the collector's CPU does no per-report work; the NIC does it)."""
    out: list[str] = []
    counted = [c for c in live if c.get("valid", True)]
    naive = {c["kind"]: c for c in counted if c["path"] == "naive"}
    rows = []
    for c in counted:
        nv = naive.get(c["kind"])
        if c["path"] != "dta" or nv is None:
            continue
        d, n = c["sustained"] or c["overload"], nv["sustained"] or nv["overload"]
        bound = "≥ " if nv["reporter_bound"] else ""
        rows.append([c["label"], _k(sustained(c)), bound + _k(sustained(nv)),
                     _us(d["collector_cpu_us_per_report"]), "0", _us(n["collector_cpu_us_per_report"]),
                     _us(d["switch_cpu_us_per_report"])])
    if rows:
        share = idle.get("c1")
        out.append("\nCollector CPU per report, DTA vs naive (live, same run; c1 = the collector host). DTA's c1 "
                   "CPU is all the RDMA responder that stands in for the NIC (ring receive, RoCEv2 parse and ICRC, "
                   "the memory write, ACKs): on hardware it is the NIC's and the host CPU does 0 per report. The "
                   "naive collector's c1 CPU (UDP receive, decode, insert) is host CPU on any hardware. sw2's is the "
                   "translator, a switch pipeline on hardware:\n")
        out.append(format_table(["case", "DTA ingest/s", "naive ingest/s", "DTA c1 CPU us/report (NIC stand-in)",
                                 "DTA host CPU us/report on hardware", "naive c1 CPU us/report (host CPU)",
                                 "DTA sw2 CPU us/report (switch stand-in)"], rows))
        if share is not None:
            out.append(f"\nc1's collector daemon with no report flowing (status polled every 0.25 s): "
                       f"{share:.1%} of a CPU, the host-side work a DTA collector keeps (control, queries).")
    elif any(c["path"] == "naive" for c in live) and any(c["path"] == "dta" for c in live):
        out.append("\nCollector CPU per report, DTA vs naive (live): no DTA case and naive case of the same kind both "
                   "count in this run (see the invalid measurements below): not measured.")
    eng = [e for e in engines if "naive_us_per_report" in e]
    if eng:
        rows = [[_KIND[e["kind"]].format(e["param"]), _us2(e["responder_us_per_report"]), "0",
                 _us2(e["naive_us_per_report"]), _us2(e["translator_us_per_report"])] for e in eng]
        out.append("\nCollector CPU per report in process (no network, no daemon; best of "
                   f"{eng[0]['rounds']} runs): the responder (NIC stand-in) vs the naive collector's "
                   "decode + insert:\n")
        out.append(format_table(["case", "DTA responder us/report (NIC stand-in)", "DTA host CPU us/report on hardware",
                                 "naive decode + insert us/report (host CPU)", "translator us/report (switch)"], rows))
    return out


def _age_s(reports: float | None, per_s: float) -> str:
    return "-" if reports is None or not per_s else f"{reports / per_s:.3g} s"


def longevity_lines(curves: list[dict[str, Any]], rate: dict[str, Any]) -> list[str]:
    """Fig. 8: queryability vs age per store size and N, measured (analytic in parentheses), and
    the half-life in reports and in seconds at ``rate``."""
    if not curves:
        return []
    per_s = float(rate.get("per_s") or 0.0)
    ages = [p["age_per_slot"] for p in curves[0]["points"]]
    out = ["\nData longevity (Fig. 8) - Key-Write queryability vs report age (reports written since, in units "
           "of the store's slots S; 5 x 32-bit values + 32-bit checksum per slot; analytic in parentheses):\n"]
    rows = []
    for c in curves:
        by = {p["age_per_slot"]: p for p in c["points"]}
        rows.append([f"{c['slots']:,} slots ({c['memory_bytes'] / 1024:g} KiB), N = {c['redundancy']}",
                     *(f"{by[a]['queryable']:.3f} ({by[a]['analytic']:.3f})" if a in by else "-" for a in ages)])
    out.append(format_table(["store", *(f"age {a:g} S" for a in ages)], rows))
    rows = [[f"{c['slots']:,} slots, N = {c['redundancy']}",
             "-" if c["half_life_reports"] is None else f"{c['half_life_reports']:,.0f}",
             "-" if c["half_life_binned_analytic"] is None else f"{c['half_life_binned_analytic']:,.0f}",
             f"{c['half_life_analytic']:,.0f} ({c['half_life_analytic'] / c['slots']:.3f} S)",
             _age_s(c["half_life_reports"], per_s), _age_s(c["half_life_analytic"], per_s)] for c in curves]
    out.append(f"\nHalf-life (age at which half the reports are still queryable); seconds at {per_s / 1e3:.1f} k "
               f"reports/s ({rate.get('source', '')}):\n")
    out.append(format_table(["store", "measured (reports)", "analytic at the same bins", "analytic exact (reports)",
                             "measured (s)", "analytic (s)"], rows))
    return out


def query_lines(query: dict[str, Any]) -> list[str]:
    """Query rate: Key-Write queries/s with 1..P processes, the dict baseline beside."""
    if not query:
        return []
    base = query["baseline"]
    rows = [[r["processes"], r["cpus"], _k(r["queries_per_s"]), " / ".join(_k(x) for x in r["per_process_per_s"]),
             _us2(r["cpu_us_per_query"]), f"{r['found']:.3f}", "yes" if r["valid"] else "NO: " + "; ".join(
                 f"{c['name']} {c['measured']}" for c in r["checks"] if not c["ok"])] for r in query["rows"]]
    rows.append(["naive collector's dict, 1", "-", _k(base["queries_per_s"]), "-", _us2(base["cpu_us_per_query"]),
                 "1.000", "(baseline)"])
    return [f"\nQuery rate - Key-Write queries/s from the collector's memory files ({query['slots']:,} slots, "
            f"N = {query['redundancy']}, load factor {query['load_factor']:g}; each process maps the store and "
            "queries every P-th key; baseline: a Python dict, same keys):\n",
            format_table(["processes", "CPUs", "queries/s (all)", "per process", "CPU us/query", "found",
                          "counts"], rows)]
