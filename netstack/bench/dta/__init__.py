"""``netstack bench dta``: DTA ingestion end to end, next to a naive CPU collector, plus the
Key-Write experiments of Fig. 7 (query success vs load factor) and Fig. 9 (wrong answers vs
checksum width).

Live part (real namespaces, real frames; one topology, generated)::

    h1 (reporter) --- sw2 (translator) --- c1 (collector daemon: RoCEv2 responder -> /dev/shm)

Links are 1 Gbit/s with no propagation delay and 4 MB buffers: a report or a RoCEv2 frame
occupies the link for well under 1.5 us, so the line-rate pacer never limits the rate and
what is measured is the software (reporter, switch + translator, responder).

- **DTA**: the reporter tool (``python -m netstack.dta.live report ... --duration D``) in h1
  sends as fast as it can, cycling over 4096 distinct reports; sw2's translator turns each into
  RDMA operations; c1's responder executes them on its regions. Ingested reports/s = memory
  operations the responder executed (Key-Write WRITEs / N, Append entries written,
  Key-Increment Fetch&Adds / N) per second, from counters sampled every 0.25 s over the
  steady part of the run (the first 0.5 s is warm-up).
- **naive CPU collector**: the same reports, the same reporter, with the translator disabled
  (sw2 just forwards them) to a Python process in c1 that receives them on a UDP socket,
  decodes each (the fast codec in ``headers.dta``) and inserts it into a dict / list /
  counter. Measured in the same run, on a topology identical except that c1 runs no
  collector daemon (whose raw socket would otherwise also see every report).

CPU placement on a 2-core machine (``NETSTACK_BENCH_PIN=0`` disables it): the switch daemon
sw2 has CPU 1 to itself; the reporter (at nice 19, so it only soaks up spare cycles) and the
collector process (the responder, or the naive collector) share CPU 0. Every process, the
kernel's veth work and this driver compete for 2 cores: the rates are this VM's, not a NIC's.

Sans-IO part (the real data structure in memory, no network): Fig. 7 writes K distinct keys
once each, in sequence, with redundancy N into a Key-Write store of S slots
(``CollectorMemory`` + ``KeyWriteLayout``, the layout the translator writes and the queries
read) and queries every key back; Fig. 9 does the same at load factor 1 with N = 2 for
checksum widths 8..32 bits and counts wrong answers for written keys and for keys never
written.

Also sans-IO: **data longevity** (Fig. 8, ``longevity``): Key-Write queryability vs the report's
age (reports written since) for several store sizes and N, measured on the real store beside the
analytic survival curve, with the half-life in reports and in seconds at the run's Key-Write N=2
rate. **Query rate** (``queryrate``): Key-Write queries/s answered from the collector's region
files by 1, 2 and 4 processes, beside a Python dict (the naive collector's store).

**Collector CPU per report, DTA vs naive** (the paper's point, §7.3: the collector's CPU does no
per-report work): c1's CPU per ingested report with DTA is all the responder's, the NIC stand-in
(a NIC's work on hardware, 0 host CPU), with the naive collector's (UDP receive + decode + insert,
host CPU on any hardware) beside it, live and in process; c1's CPU with no report flowing
(``collector_idle``) is what stays with the host.

Every live measurement says whether it counts (``measure.validity_of``, netstack.validity): the
processes measured are busy on purpose, so what decides is the CPU time other work took while the
reporter ran (netstack.cpushare, at most 15 % of all CPUs, as ``netstack bench forwarding``) and
whether the reporter sent for its planned duration. A measurement that does not count ends its
case's rate search; the case has no sustained rate, no ``vs_naive`` ratio and no bar in the plot,
and the measurement is listed (``invalid_rows``, "Invalid measurements (not counted)"):
``netstack bench dta`` then exits 3 (``INVALID RUN``). The benchmark has no correctness
cross-check (``cross_checks`` is empty).

Modules: ``params``, ``testbed`` (the generated topology, CPU placement), ``measure`` (one live
run, DTA or naive), ``search`` (the rate search), ``naive`` (the naive collector process,
``python -m netstack.bench.dta --role naive``), ``keywrite`` (Figs. 7 and 9), ``tables`` and
``plots``, ``longevity`` (Fig. 8), ``queryrate`` (with its query process,
``--role query``), ``inproc``; :func:`main` here runs them.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from ..output import loadavg, say, write_results
from ..proc import PIN_ENV, pin, sigterm_unwinds
from .inproc import inproc
from .keywrite import fig7, fig9
from .longevity import longevity
from .measure import measure_dta, measure_naive
from .params import (
    APPEND_B,
    DEFAULT_DURATION_S,
    DISTINCT_REPORTS,
    FIG7_REDUNDANCY,
    FIG7_SLOTS,
    FIG9_SLOTS,
    FIG9_WIDTHS,
    INCREMENT_N,
    KEEP_UP,
    KEYWRITE_N,
    LINK_BUFFER,
    LINK_RATE,
    LONGEVITY_RATE,
    LOSS_FREE,
    SAMPLE_S,
    WARMUP_S,
    WINDOWS_ENV,
)
from .plots import plots
from .queryrate import queryrate
from .search import find_rate, invalid_runs, keeps_up, sustained, vs_naive
from .tables import tables
from .testbed import cpu_plan, topology_toml

__all__ = ["main", "find_rate", "keeps_up", "fig7", "fig9", "inproc", "live_cases", "run_live", "measure_dta",
           "measure_naive", "plots", "tables", "invalid_runs", "vs_naive", "verdicts", "longevity", "queryrate",
           "collector_idle"]


def _case_label(kind: str, param: int) -> str:
    return {"keywrite": f"Key-Write N={param}", "append": f"Append B={param}",
            "increment": f"Key-Increment N={param}"}[kind]


def live_cases(only: list[str] | None) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    dta = [("keywrite", n) for n in KEYWRITE_N] + [("append", b) for b in APPEND_B] + [("increment", INCREMENT_N)]
    naive = [("keywrite", 2), ("append", 4), ("increment", INCREMENT_N)]

    def keep(path: str, kind: str, param: int) -> bool:
        # a path ("dta", "naive"), a kind ("keywrite", ...) or a case's label ("Key-Write N=1")
        return not only or any(s in path or s in kind or s == _case_label(kind, param) for s in only)

    return [c for c in dta if keep("dta", *c)], [c for c in naive if keep("naive", *c)]


def collector_idle(prefix: str, pids: dict[str, int], seconds: float = 1.0) -> dict[str, float]:
    """CPU share of each daemon with no report flowing, polled as during a measurement (status
    every :data:`SAMPLE_S`): what a DTA collector host spends without any report, the part of
    c1's CPU that is not the NIC stand-in's."""
    import time

    from ... import runtime
    from .measure import cpu_seconds

    c0 = {n: cpu_seconds(p) for n, p in pids.items()}
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        runtime.control(prefix, "sw2", "dta_status")
        runtime.control(prefix, "c1", "status")
        time.sleep(SAMPLE_S)
    dt = time.monotonic() - t0
    return {n: (cpu_seconds(p) - c0[n]) / dt for n, p in pids.items()}


def run_live(prefix: str, duration: float, dta_cases: list[tuple[str, int]],
             naive_cases: list[tuple[str, int]], idle: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Every live measurement; nothing of ``prefix`` is left when this returns or raises.
    ``idle`` receives the daemons' CPU share with no report flowing (:func:`collector_idle`)."""
    from ... import runtime
    from ...dta import control as dta_control
    from ...topo.model import loads_topology

    plan = cpu_plan()
    cases: list[dict[str, Any]] = []

    def bring_up(kind: str) -> dict[str, int]:
        topo = loads_topology(topology_toml(kind), f"<bench dta: h1 - sw2 - c1 ({kind})>")
        state = runtime.up(topo, prefix, progress=say)
        pids = {d.node: d.pid for d in state.daemons}
        if plan:
            for d in state.daemons:
                pin(d.pid, plan["switch"] if d.kind == "switch" else plan["collector"])
        return pids

    def run(path: str, kind: str, param: int, measure: Any, window: int | None = None) -> None:
        label = _case_label(kind, param) + ("" if window is None else f" [window {window}]")
        say(f"[{path} {label}] {duration:g} s per run ...")
        found = find_rate(measure, duration, say)
        cases.append({"path": path, "kind": kind, "param": param, "label": label, "window": window, **found})

    if dta_cases:
        try:
            pids = bring_up("collector")
            dta_control.enable_translator(prefix, "sw2", "c1")
            if idle is not None:
                idle.update(collector_idle(prefix, pids))
            for i, (kind, param) in enumerate(dta_cases):
                for w in windows():  # interleaved: every setting of a case before the next case
                    run("dta", kind, param, lambda rate, k=kind, p=param, i=i, w=w: measure_dta(
                        prefix, pids, k, p, duration, rate, plan, i, w), w)
        finally:
            runtime.down(prefix)
    if naive_cases:
        try:
            pids = bring_up("host")
            for i, (kind, param) in enumerate(naive_cases):
                run("naive", kind, param, lambda rate, k=kind, p=param, i=i: measure_naive(
                    prefix, pids, k, p, duration, rate, plan, i))
        finally:
            runtime.down(prefix)
    return cases


def windows() -> list[int | None]:
    """The translator windows each DTA case runs with (:data:`WINDOWS_ENV`; [None]: the default)."""
    spec = os.environ.get(WINDOWS_ENV, "").strip()
    if not spec:
        return [None]
    try:
        return [int(w) for w in spec.split(",")]
    except ValueError:
        raise SystemExit(f"{WINDOWS_ENV}={spec!r}: give comma-separated window sizes, e.g. 0,256,0,256") from None


def _notes(duration: float, plan: dict[str, list[int]] | None, live_on: bool, load_before: list[float]) -> list[str]:
    """What a reader needs to know to read the numbers (printed, and kept in the JSON)."""
    notes = [
        f"Topology h1 - sw2 - c1, links {LINK_RATE}, delay 0, buffer {LINK_BUFFER}: a report or RoCEv2 frame "
        "occupies a link < 1.5 us, so the pacer is never the limit; the translator (Python, in the switch "
        "daemon) and the responder (Python, in the collector daemon) are what is measured.",
        f"Per case: one overload run (the reporter, at nice 19, sends as fast as it can for {duration:g} s, cycling "
        f"over {DISTINCT_REPORTS} distinct reports), then paced runs starting at 95 % of the overload ingest rate, "
        f"going up 25 % while the path keeps up (< {LOSS_FREE:.0%} lost and >= {KEEP_UP:.0%} of the offered rate "
        "ingested during the run) or down 15 % until it does: 'sustained' is the fastest run that kept up. "
        f"Rates are counter slopes sampled every {SAMPLE_S} s after {WARMUP_S} s of warm-up.",
        "ingested = reports whose memory operations the collector's responder executed (Key-Write WRITEs / N, "
        "Append entries written, Key-Increment Fetch&Adds / N); loss = 1 - ingested / sent over the whole run. "
        "CPU us/report = user+system CPU of the process over the run / reports ingested (kernel work done in the "
        "process's context, e.g. veth delivery of what it sends, included).",
        "The naive CPU collector gets the same reports (translator disabled, sw2 forwards) on a UDP socket in c1, "
        "decodes each with headers.dta and inserts it into a dict/list/counter; same CPU as the responder. It keeps "
        "up with everything the reporter can offer while sharing that CPU ('reporter-bound'): its number is a "
        "lower bound, its CPU us/report the fair comparison.",
        "Fig. 7 / Fig. 9 are computed on the real data structure (CollectorMemory + KeyWriteLayout, the "
        "bytes the translator's WRITEs carry), without the network.",
    ]
    if not live_on:
        notes = notes[-1:]
    if plan and live_on:
        notes.append(f"CPU placement: sw2 alone on CPU {plan['switch']}; the collector process (responder or naive) "
                     f"and the reporter (nice 19) on CPU {plan['collector']}; {PIN_ENV}=0 disables pinning.")
    if load_before and load_before[0] > 0.5 and live_on:
        notes.append(f"1-min load average was {load_before[0]:.2f} at start: other work competed for the CPU.")
    return notes


def verdicts(invalid: list[dict[str, Any]], query: dict[str, Any] | None = None) -> dict[str, Any]:
    """``valid``, ``checks`` (each measurement that does not count a failed check), ``invalid_rows``
    and ``cross_checks`` (none here): what ``netstack bench`` ends with (netstack/bench/summary.py).
    A query-rate row that does not count (a starved query process) is one more invalid row."""
    invalid = list(invalid)
    for row in (query or {}).get("rows", []):
        if not row.get("valid", True):
            from ...validity import Validity

            invalid.append({"row": f"query rate, {row['processes']} process(es)", "reasons": Validity.of(row).reasons})
    return {"valid": not invalid,
            "checks": [{"name": r["row"], "expected": "a valid measurement", "measured": "; ".join(r["reasons"]),
                        "ok": False} for r in invalid],
            "invalid_rows": invalid, "cross_checks": []}


def longevity_rate(live: list[dict[str, Any]]) -> dict[str, Any]:
    """The report rate the longevity tables convert ages to seconds at: the Key-Write N=2 rate the
    live part sustained in this run, else :data:`LONGEVITY_RATE`."""
    for c in live:
        if c["path"] == "dta" and c["kind"] == "keywrite" and c["param"] == 2 and c.get("window") is None:
            r = sustained(c)
            if r:
                return {"per_s": r, "source": "live Key-Write N=2 sustained ingest, this run"}
    return {"per_s": LONGEVITY_RATE, "source": "nominal (no live Key-Write N=2 rate in this run)"}


def main(args: argparse.Namespace) -> int:
    duration = float(getattr(args, "duration", None) or DEFAULT_DURATION_S)
    only = getattr(args, "only", None)
    results_dir = Path(getattr(args, "results_dir", "results"))
    dta_cases, naive_cases = live_cases(only)
    do7 = not only or any(s in "fig7" for s in only)
    do9 = not only or any(s in "fig9" for s in only)
    do_inproc = not only or any(s in "inproc" for s in only)
    do_longevity = not only or any(s in "longevity" for s in only)
    do_query = not only or any(s in "queryrate" for s in only)
    if (dta_cases or naive_cases) and os.geteuid() != 0:
        print("netstack bench dta: the live part needs root (namespaces); run as root or use --only fig7 --only fig9 "
              "--only longevity --only queryrate --only inproc",
              file=sys.stderr)
        return 2
    plan = cpu_plan()
    live_on = bool(dta_cases or naive_cases)
    load_before = loadavg()
    notes = _notes(duration, plan, live_on, load_before)
    say(f"netstack bench dta: live cases {len(dta_cases)} DTA + {len(naive_cases)} naive, {duration:g} s each; "
        f"fig7 {'yes' if do7 else 'no'}, fig9 {'yes' if do9 else 'no'}, in-process {'yes' if do_inproc else 'no'}, "
        f"longevity {'yes' if do_longevity else 'no'}, query rate {'yes' if do_query else 'no'}")
    for n in notes:
        say(f"note: {n}")

    # the global --prefix names the testbed when given (a caller that must keep to its own prefix); else a fresh one
    prefix = getattr(args, "global_prefix", None) or f"bdta{secrets.token_hex(3)}"
    idle: dict[str, Any] = {}
    with sigterm_unwinds():
        live_records = run_live(prefix, duration, dta_cases, naive_cases, idle) if (dta_cases or naive_cases) else []
    f7: list[dict[str, Any]] = []
    f9: list[dict[str, Any]] = []
    engines: list[dict[str, Any]] = []
    if do_inproc:
        say("[inproc] CPU per frame of the translator and the responder, in process ...")
        engines = inproc()
    if do7:
        say(f"[fig7] Key-Write success vs load factor, N = {FIG7_REDUNDANCY}, {FIG7_SLOTS} slots ...")
        f7 = fig7()
    if do9:
        say(f"[fig9] wrong answers vs checksum width {FIG9_WIDTHS}, {FIG9_SLOTS} slots ...")
        f9 = fig9()
    vs_naive(live_records)
    rate = longevity_rate(live_records)
    lon: list[dict[str, Any]] = []
    if do_longevity:
        say("[longevity] Key-Write queryability vs report age (Fig. 8) ...")
        lon = longevity()
    query: dict[str, Any] = {}
    if do_query:
        say("[queryrate] Key-Write queries/s, 1 and more processes, vs the naive collector's dict ...")
        query = queryrate()
    invalid = invalid_runs(live_records)
    pngs = plots(results_dir, live_records, f7, f9, lon)
    table = tables(live_records, f7, f9, engines, longevity=lon, rate=rate, query=query, idle=idle)
    path = write_results(results_dir, "bench-dta", {
        "method": "reporter in h1 -> sw2 translator -> c1 RoCEv2 responder -> shared memory, vs a naive UDP "
                  "collector in c1, same run; Fig. 7/9 sans-IO on the Key-Write store",
        "duration_s": duration, "prefix": prefix,
        "link": {"rate": LINK_RATE, "delay": "0", "buffer": LINK_BUFFER},
        "cpu_plan": plan, "notes": notes, "plots": pngs, "loadavg_before": load_before, "loadavg_after": loadavg(),
        "live": live_records, "fig7": f7, "fig9": f9, "inproc": engines, "collector_idle": idle,
        "longevity": {"rate": rate, "curves": lon}, "queryrate": query, **verdicts(invalid, query),
    })
    md = results_dir / "bench-dta-latest.md"
    md.write_text(table + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    print(table)
    print()
    for n in notes:
        print(f"note: {n}")
    for p in pngs:
        print(f"plot: {p}")
    print(f"\nwrote {path} and {md}")
    return 0
