"""Throughput and latency vs contention, 1Pipe vs 2PC, in virtual time (docs/onepipe-kv.md "Ours,
in virtual time"): ``python -m netstack.onepipe.kv.sweep [--json OUT]``.

Every point is one ``onepipe-kv`` run on the same fabric (:func:`netstack.onepipe.scenarios.fabric_topology`,
100 Gbit/s, time scale 1) with the same seed, so the two modes see the same transactions; each
row prints the mean latency per class (RO / WO / WR, us), the 99th percentile of all, throughput
(M txn/s per client), 2PC's attempts per transaction and the strict-serializability verdict.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from ...sim.network import Network
from ...sim.scenario import Context, resolve_topology
from .scenario import SCENARIO, kv_sim

CONTENTION = (0.0, 0.01, 0.05, 0.1, 0.2, 0.5)


def one(topology: Any, duration_ns: int, seed: int, **params: Any) -> dict[str, Any]:
    topo = resolve_topology(topology)
    ctx = Context(topo, seed, duration_ns, SCENARIO.check_params(params))
    cpu = time.process_time()
    out = kv_sim(Network(topo, seed=seed), ctx)
    out["cpu_s"] = round(time.process_time() - cpu, 2)
    return out


def row(r: dict[str, Any]) -> str:
    def us(c: str) -> str:
        m = r["latency_by_class_ns"][c]["mean"]
        return "-" if m is None else f"{m / 1e3:.2f}"

    chk = r["check"]
    x = r["contention"] if r["writes"] is None else r["writes"]
    return (f"| {r['mode']:7} | {x:>5.3f} | {us('RO'):>6} | {us('WO'):>6} | {us('WR'):>6} | "
            f"{r['latency_ns']['p99'] / 1e3 if r['latency_ns']['p99'] else 0:>7.2f} | "
            f"{r['txn_per_s_per_client'] / 1e6:>7.3f} | {r['attempts_per_txn']:>8.2f} | {r['done']:>6} | "
            f"{'yes' if chk and chk['ok'] else 'NO'} |")


def main() -> None:
    from ..scenarios import fabric_topology  # the sweep's own import: the scenario module must not

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tors", type=int, default=4)
    ap.add_argument("--hosts-per-tor", type=int, default=4)
    ap.add_argument("--procs", type=int, default=16, help="clients (default 16)")
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--duration-us", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--contention", type=float, nargs="*", default=list(CONTENTION))
    ap.add_argument("--writes", type=float, nargs="*", default=None,
                    help="sweep mix=ycsb's write fraction instead of the contention (the paper's x axis)")
    ap.add_argument("--param", action="append", default=[], help="KEY=VALUE for every run (e.g. dist=zipf)")
    ap.add_argument("--json", help="write every run's result here")
    a = ap.parse_args()
    topo = fabric_topology(tors=a.tors, hosts_per_tor=a.hosts_per_tor)
    extra = dict(kv.split("=", 1) for kv in a.param)
    x = "cont." if a.writes is None else "writ."
    print(f"| mode    | {x} | RO us  | WO us  | WR us  | p99 us  | Mtxn/s/c | attempts |   done | strict |")
    print("|---------|-------|--------|--------|--------|---------|---------|----------|--------|--------|")
    results = []
    points = [{"contention": c} for c in a.contention] if a.writes is None else \
        [{"contention": a.contention[0] if len(a.contention) == 1 else 0.0, "mix": "ycsb", "writes": w}
         for w in a.writes]
    for point in points:
        for mode in ("onepipe", "2pc"):
            r = one(topo, a.duration_us * 1000, a.seed, mode=mode, procs=a.procs, shards=a.shards,
                    **{**extra, **point})
            results.append(r)
            print(row(r), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
