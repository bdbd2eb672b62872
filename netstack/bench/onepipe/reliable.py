"""The reliable-1Pipe sections of ``netstack bench onepipe`` (docs/onepipe-reliable.md):

``store``
    The controller store's cost per failure record, measured on the real backends in this run:
    ``record_failure`` (one write-once record, what the controller awaits before any notice
    leaves, design topic §8) on the embedded SQLite store and on a local 3-member etcd cluster
    (Debian's etcd-server), ``STORE_RECORDS`` records each. The baseline is the embedded store.
``reliable``
    Reliable vs best-effort 1Pipe on the same load and fabric, sim (the paper's §7: reliable costs
    about 25 % of the throughput and adds one RTT of latency).
``fig10``
    Recovery time vs the number of hosts (one process a host, the paper's 2-32) for the paper's
    four failures (its Fig. 10): a process crash (``Host``), a ToR switch, a core link (a ToR's
    uplink to the spine its routes use) and a core switch (that spine); ``netstack.onepipe.rscenario``
    says how each is injected and detected. Sim at the paper's scale on the paper-scale fabric
    with a second spine (:data:`FIG10_FABRIC`: a link or a spine can fail and leave the rest
    connected), with the controller's store write taking no time (what the paper's figure counts).
    Per backend, the recovery time adds that backend's median write measured in ``store`` when a
    process failed: the controller awaits exactly one write (the failure record) on the recovery's
    critical path (the failures behind a ToR are written in parallel), and at the paper's
    microsecond scale simulating milliseconds of beacons while it waits would cost minutes and
    change nothing. A link or a spine is released without a record.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...onepipe.rscenario import FAILS
from ...onepipe.scenarios import fabric_topology
from ..output import format_table
from .spec import NIC_NS, Point, _spec

STORE_RECORDS = 50
RELIABLE_PROCS = (8, 32, 128)
#: fig8's load (sim.FIG8_RATE, FIG8_DURATION_NS): scatterings/s per process, the run's length, and
#: a drain long enough for the commit phase's round trip on top of best effort's
RELIABLE_RATE = 100_000.0
RELIABLE_DURATION_NS = 500_000
RELIABLE_DRAIN_NS = 120 * 3_000
#: the paper's x: hosts, one process each (its testbed's 32 servers)
FIG10_PROCS = (2, 4, 8, 16, 32)
#: what fails (rscenario.FAILS), in the paper's order: host, ToR switch, core link, core switch
FIG10_FAILS = FAILS
#: the paper's series (docs/data/onepipe-paper/failure_recovery) for each of ours
FIG10_SERIES = {"process": "Host", "tor": "ToR Switch", "core-link": "Core Link", "core-switch": "Core Switch"}
#: the bench's 4 ToRs x 8 hosts with two spines: routes go up to spine1, spine2 keeps the fabric
#: connected when spine1 or a link to it fails (the paper's testbed: 4 ToRs, 4 spines, 2 cores)
FIG10_FABRIC = fabric_topology(tors=4, hosts_per_tor=8, spines=2)
#: fail half way; long enough after it for detection (10 T_beacon), the record, the callbacks and
#: the release, even with a store write of tens of ms
FIG10_DURATION_NS = 300_000
FIG10_RATE = 20_000.0
#: with the controller's core charged (``ctl_msg_ns``) the recovery at 32 hosts takes milliseconds:
#: the drain after the sending period that leaves room for it
FIG10_CORE_DRAIN_NS = 8_000_000
#: the controller of each fig10 run: its core charged the kernel's cost of a datagram (measured in
#: the run, .ctlcost), and the baseline whose work takes no time
FIG10_CONTROLLERS = ("kernel", "free")


# ------------------------------------------------------------------------------------ store
async def _time_records(store: Any, n: int) -> list[float]:
    from ...onepipe.store import ProcessRecord

    out = []
    for i in range(n):
        pid = f"10.0.0.{1 + i % 250}-40101-{1 + i // 250}"
        await store.register_process(ProcessRecord(pid, f"10.0.0.{1 + i % 250}:40101", "h", time.time()))
        t = time.perf_counter()
        await store.record_failure(pid, 1_000_000 + i, "bench")
        out.append(time.perf_counter() - t)
    return out


def _row(backend: str, times: list[float], base: float | None) -> dict[str, Any]:
    ms = sorted(t * 1e3 for t in times)
    med = statistics.median(ms)
    return {"backend": backend, "records": len(ms), "mean_ms": statistics.fmean(ms), "p50_ms": med,
            "p99_ms": ms[min(len(ms) - 1, int(0.99 * len(ms)))], "max_ms": ms[-1],
            "vs_sqlite": (med / base) if base else None}


def measure_stores(say: Any, n: int | None = None) -> dict[str, Any]:
    """``{"rows": [...], "delays_ns": {backend: median ns}, "skipped": {backend: why}}``;
    ``n`` records per backend (default :data:`STORE_RECORDS`)."""
    n = n or STORE_RECORDS
    from ...onepipe.etcd import EtcdError, etcd_available, start_cluster
    from ...onepipe.store import EtcdStore, SqliteStore

    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="netstack-store-") as tmp:
        async def sqlite() -> list[float]:
            store = SqliteStore(Path(tmp) / "bench.sqlite3")
            try:
                return await _time_records(store, n)
            finally:
                await store.close()

        times = asyncio.run(sqlite())
        base = statistics.median(times) * 1e3
        rows.append(_row("sqlite", times, base))
        say(f"store: sqlite, {n} failure records, median {base:.2f} ms")
        if not etcd_available():
            skipped["etcd"] = "etcd-server is not installed (scripts/install.sh installs it)"
        else:
            try:
                with start_cluster(Path(tmp), members=3) as cluster:
                    async def etcd() -> list[float]:
                        store = EtcdStore(cluster.endpoints, run="bench")
                        try:
                            return await _time_records(store, n)
                        finally:
                            await store.close()

                    times = asyncio.run(etcd())
                rows.append(_row("etcd", times, base))
                say(f"store: etcd (3 members), {n} failure records, median {rows[-1]['p50_ms']:.2f} ms")
            except EtcdError as exc:
                skipped["etcd"] = str(exc)
    return {"rows": rows, "skipped": skipped,
            "delays_ns": {r["backend"]: round(r["p50_ms"] * 1e6) for r in rows}}


def store_table(rows: list[dict[str, Any]]) -> str:
    return format_table(["backend", "records", "mean ms", "p50 ms", "p99 ms", "max ms", "p50 vs sqlite"],
                        [[r["backend"], r["records"], f"{r['mean_ms']:.2f}", f"{r['p50_ms']:.2f}",
                          f"{r['p99_ms']:.2f}", f"{r['max_ms']:.2f}",
                          "-" if r["vs_sqlite"] is None else f"{r['vs_sqlite']:.1f}x"] for r in rows])


# ------------------------------------------------------------------------------ sim points
def reliable_points(scale: float) -> list[Point]:
    return [Point("reliable", _spec(p, RELIABLE_RATE, RELIABLE_DURATION_NS, scale, mode=mode,
                                    drain_ns=RELIABLE_DRAIN_NS),
                  {"procs": p, "system": "best effort" if mode == "onepipe" else "reliable"})
            for p in RELIABLE_PROCS for mode in ("onepipe", "reliable")]


def fig10_points(scale: float, delays_ns: dict[str, int], ctl_msg_ns: int = 0) -> list[Point]:
    """Every failure at every number of hosts, with the controller free and, when ``ctl_msg_ns``
    (the kernel's cost of a datagram, measured in the run) is given, with its core charged that."""
    # every host's stack as the testbed model's (spec.NIC_NS, calibrated on the paper's 1-hop latency):
    # the paper's recovery is the detection plus "6 network diameters plus the time to transmit and
    # process messages" (its §7, "Failure recovery"), and a diameter crosses two host stacks
    out = []
    for ctl in FIG10_CONTROLLERS:
        cost = ctl_msg_ns if ctl == "kernel" else 0
        if ctl == "kernel" and not cost:
            continue
        drain = FIG10_CORE_DRAIN_NS if cost else FIG10_DURATION_NS
        extra = {"ctl_msg_ns": cost} if cost else {}
        out += [Point("fig10", replace(_spec(p, FIG10_RATE, FIG10_DURATION_NS, scale, mode="reliable", kill=1,
                                             fail=fail, drain_ns=drain, nic_ns=NIC_NS, **extra),
                                       topology=FIG10_FABRIC),
                      {"procs": p, "fail": fail, "controller": ctl, "ctl_msg_ns": cost,
                       "store_ms": {b: d / 1e6 for b, d in delays_ns.items()}})
                for fail in FIG10_FAILS for p in FIG10_PROCS]
    return out


def _us(v: Any) -> float | None:
    return None if v is None else v / 1e3


def reliable_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    lat = res["latency_ns"]
    return [{"system": meta["system"], "procs": res["procs"], "sent": res["sent"], "delivered": res["delivered"],
             "offered_per_proc": res["offered_per_proc_per_s"], "delivered_per_proc": res["delivered_per_proc_per_s"],
             "mean_us": _us(lat["mean"]), "p50_us": _us(lat["p50"]), "p99_us": _us(lat["p99"]),
             "unordered_mean_us": _us(res["unordered_ns"]["mean"]), "send_failed": res["send_failed"],
             "packets": res["endpoints"].get("packets_sent", 0) + res["endpoints"].get("acks_sent", 0),
             "host_beacons": res["beacons"]["hosts"], "commits": res["endpoints"].get("commits_sent", 0),
             "wall_s": doc["engine"]["wall_s"], "order_ok": res["order"]["ok"]}]


def fig10_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    rec = res["recovery"]
    steps = ("detect", "record", "release", "resume")
    after = res["controller"].get("after_failure") or {}  # (from the failure on: rscenario)
    core = after.get("core") or {}
    known = fig10_defaults(meta)
    row = {"fail": known["fail"], "procs": meta["procs"],
           "controller": known["controller"], "ctl_msg_ns": meta.get("ctl_msg_ns", 0),
           **{f"{k}_us": _us(rec[f"{k}_ns"]) for k in steps},
           "component": rec.get("component", ""), "killed": rec["killed"],
           "declared": len(rec.get("declared", ())) if "declared" in rec else rec["killed"],
           "callbacks": rec["callbacks"], "order_ok": res["order"]["ok"],
           "controller_notices": res["controller"].get("notices_sent"),
           "controller_datagrams": after.get("datagrams"),
           "controller_relayed": after.get("relayed"),
           "controller_busy_us": _us(core.get("busy_ns")),
           "delivered": res["delivered"], "send_failed": res["send_failed"]}
    for backend, ms in meta["store_ms"].items():
        # a link or a spine is released without a record: no store write on its path
        wait = ms if row["record_us"] is not None else 0.0
        row[f"with_{backend}_ms"] = None if row["resume_us"] is None else row["resume_us"] / 1e3 + wait
    return [row]


def reliable_table(rows: list[dict[str, Any]]) -> str:
    by = {(r["procs"], r["system"]): r for r in rows}
    out = []
    for p in sorted({r["procs"] for r in rows}):
        be, rel = by.get((p, "best effort")), by.get((p, "reliable"))
        if be is None or rel is None:
            continue
        out.append([p, f"{be['offered_per_proc'] / 1e3:.0f}k", f"{be['delivered_per_proc'] / 1e3:.1f}k",
                    f"{rel['delivered_per_proc'] / 1e3:.1f}k", f"{be['mean_us']:.2f}", f"{rel['mean_us']:.2f}",
                    f"{rel['mean_us'] - be['mean_us']:+.2f}", f"{be['p99_us']:.2f}", f"{rel['p99_us']:.2f}",
                    f"{rel['packets'] / max(1, be['packets']):.2f}x", f"{rel['wall_s'] / max(1e-9, be['wall_s']):.2f}x",
                    "yes" if be["order_ok"] and rel["order_ok"] else "NO"])
    return format_table(["P", "offered/proc/s", "BE delivered/proc/s", "R delivered/proc/s", "BE mean us", "R mean us",
                         "R - BE us", "BE p99 us", "R p99 us", "R/BE packets", "R/BE sim CPU", "order ok"], out)


def fig10_defaults(row: dict[str, Any]) -> dict[str, Any]:
    """A fig10 row with the keys that older runs' rows lack: ``fail`` (before the other failures,
    every run was a process crash) and ``controller`` (before the controller's core, its work
    took no time: ``free``)."""
    return {**row, "fail": row.get("fail", "process"), "controller": row.get("controller", "free")}


def _fail(row: dict[str, Any]) -> str:
    return str(fig10_defaults(row)["fail"])


def _ctl(row: dict[str, Any]) -> str:
    return str(fig10_defaults(row)["controller"])


def fig10_table(rows: list[dict[str, Any]]) -> str:
    """One row per controller, failure and number of hosts, then the growth per host of each."""
    backends = sorted({k[5:-3] for r in rows for k in r if k.startswith("with_")})
    order = {f: i for i, f in enumerate(FIG10_FAILS)}
    ctls = {c: i for i, c in enumerate(FIG10_CONTROLLERS)}
    table = format_table(["controller", "failure", "hosts", "detect us", "recorded us", "released us", "recovered us",
                          "declared", "callbacks", "ctl datagrams in", "ctl core us",
                          *[f"with {b} ms" for b in backends], "order ok"],
                         [[_ctl(r), _fail(r), r["procs"], _f(r["detect_us"]), _f(r["record_us"]), _f(r["release_us"]),
                           _f(r["resume_us"]), r.get("declared", "-"), r["callbacks"],
                           r.get("controller_datagrams", "-"), _f(r.get("controller_busy_us")),
                           *[_f(r.get(f"with_{b}_ms"), 2) for b in backends], "yes" if r["order_ok"] else "NO"]
                          for r in sorted(rows, key=lambda r: (ctls.get(_ctl(r), len(ctls)),
                                                               order.get(_fail(r), len(order)), r["procs"]))])
    slopes = per_host_slopes(rows)
    if len(slopes) < 2:
        return table
    return table + "\n\nGrowth per host (least squares): " + "; ".join(
        f"{f} {'-' if v is None else f'{v:.2f} us'}" for f, v in slopes.items())


def _f(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def per_process_slope(rows: list[dict[str, Any]]) -> float | None:
    """Recovery time's growth per process (us) after a process crash, least squares over those
    rows (the paper: 3-15 us per host); of the rows with the controller's core charged when there
    are any (:data:`FIG10_CONTROLLERS`)."""
    ctl = "kernel" if any(_ctl(r) == "kernel" for r in rows) else "free"
    pts = [(r["procs"], r["resume_us"]) for r in rows
           if r["resume_us"] is not None and _fail(r) == "process" and _ctl(r) == ctl]
    if len(pts) < 2:
        return None
    mx = statistics.fmean(p for p, _ in pts)
    my = statistics.fmean(v for _, v in pts)
    den = sum((p - mx) ** 2 for p, _ in pts)
    return sum((p - mx) * (v - my) for p, v in pts) / den if den else None


def per_host_slopes(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """:func:`per_process_slope` for each controller and failure the rows have (one process a
    host), keyed ``"<failure>"`` for the free controller and ``"<failure> (kernel)"``."""
    keys = dict.fromkeys((_ctl(r), _fail(r)) for r in rows)
    return {f if c == "free" else f"{f} ({c})": per_process_slope(
        [{**r, "fail": "process"} for r in rows if _fail(r) == f and _ctl(r) == c]) for c, f in keys}


__all__ = ["FIG10_CONTROLLERS", "FIG10_FABRIC", "FIG10_FAILS", "FIG10_SERIES", "fig10_defaults", "fig10_points",
           "fig10_rows", "fig10_table", "measure_stores", "per_host_slopes", "per_process_slope", "reliable_points",
           "reliable_rows", "reliable_table", "store_table"]
