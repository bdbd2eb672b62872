"""Query rate (``netstack bench dta --only queryrate``): how many Key-Write queries per second the
collector's CPU answers from DTA memory, with one and with several processes ("Direct Telemetry
Access", §8.1.5 "Query Speed"; the public collector benchmarks it with several threads sharing
the keys, each taking every T-th).

The collector's CPU does no per-report work in DTA (§7.3): it is free to answer queries, and
this is the rate at which it does. A Key-Write store of :data:`~.params.QUERY_SLOTS` slots is
written at load factor 1 with N = 2 into region files (``CollectorMemory`` with a directory, as
the collector daemon keeps them in /dev/shm), and P processes each map it read-only
(``CollectorQuery.open``, as ``netstack dta query`` does) and query every P-th key, round and
round, for :data:`~.params.QUERY_S` seconds, all starting at one instant. Python's interpreter
lock is per process, hence processes, not threads.

Baseline, same run: the naive collector's store, a dict from key to data, looked up for the
same keys by one process (what its CPU would answer queries with, besides ingesting).

A measurement counts only if each query process ran on a CPU for at least
:data:`~.params.QUERY_CPU_SHARE` of its seconds (with more processes than CPUs, which share them on
purpose: if together they used that share of all the CPUs), and they started within a tenth of
the run of each other: a process that got less was starved by other work, and its rate says as
much about the neighbour as about the query path.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from typing import Any

from ...validity import Validity
from .params import QUERY_CPU_SHARE, QUERY_PROCESSES, QUERY_S, QUERY_SLOTS

REDUNDANCY = 2


def _keys(slots: int) -> list[int]:
    return random.Random(7).sample(range(1, 1 << 32), slots)


def build_store(directory: str, slots: int = QUERY_SLOTS) -> list[int]:
    """Region files in ``directory``: a Key-Write store of ``slots`` slots holding ``slots`` keys
    (load factor 1, N = 2), key i with data (i,); returns the keys."""
    from ...dta.keywrite import KeyWriteLayout
    from ...dta.memory import CollectorMemory

    keys = _keys(slots)
    mem = CollectorMemory("querybench", directory=directory, rng=random.Random(0))
    try:
        region = mem.add_keywrite(slots, max_redundancy=REDUNDANCY)
        layout = KeyWriteLayout.from_dict(region.layout)
        for i, key in enumerate(keys):
            payload = layout.encode_slot(key, (i,))
            for n in range(REDUNDANCY):
                region.write(region.base_va + layout.slot_offset(key, n), payload)
    finally:
        mem.close()
    return keys


def role_query(p: dict[str, Any]) -> int:
    """One query process (``python -m netstack.bench.dta --role query``): map the store, take
    every ``step``-th key from ``offset``, wait for the common start, query round and round, print
    the counts as JSON."""
    from ...dta.query import CollectorQuery

    keys = _keys(int(p["slots"]))[int(p["offset"])::int(p["step"])]
    random.Random(int(p["offset"])).shuffle(keys)  # old and new keys mixed: "found" is the store's, not the oldest's
    q = CollectorQuery.open(p["directory"])
    get = q.keywrite_get
    count = found = 0
    while time.monotonic() < p["start_at"]:
        time.sleep(0.001)
    t0, c0 = time.monotonic(), time.process_time()
    end = t0 + float(p["seconds"])
    while time.monotonic() < end:
        for key in keys[:256] if len(keys) > 256 else keys:  # the clock read every 256 queries at most
            found += get(key) is not None
        count += min(256, len(keys))
        keys = keys[256:] + keys[:256]
    t1, c1 = time.monotonic(), time.process_time()
    q.close()
    print(json.dumps({"pid": os.getpid(), "queries": count, "found": found, "start": t0, "end": t1,
                      "cpu_s": c1 - c0}), flush=True)
    return 0


def run_processes(directory: str, slots: int, processes: int, seconds: float = QUERY_S,
                  lead_s: float | None = None) -> dict[str, Any]:
    """``processes`` query processes over the store's keys (each every P-th), started at one
    instant ``lead_s`` from now (default: late enough for every interpreter, even on a busy host)."""
    from ..proc import json_result

    start_at = time.monotonic() + (2.0 + 0.5 * processes if lead_s is None else lead_s)
    procs = [subprocess.Popen([sys.executable, "-m", "netstack.bench.dta", "--role", "query", "--params", json.dumps(
        {"directory": directory, "slots": slots, "offset": i, "step": processes, "start_at": start_at,
         "seconds": seconds})], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(processes)]
    try:
        res = [json_result(p, f"query process {i}", 60 + seconds) for i, p in enumerate(procs)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
    start, end = min(r["start"] for r in res), max(r["end"] for r in res)
    total = sum(r["queries"] for r in res)
    cpus = len(os.sched_getaffinity(0))
    v = Validity()
    shares = [r["cpu_s"] / (r["end"] - r["start"]) for r in res if r["end"] > r["start"]]
    if processes <= cpus:
        v.at_least("CPU share of the least-served query process", round(min(shares), 3), QUERY_CPU_SHARE,
                   " (each could have a CPU to itself: the rest went to other work)")
    else:  # more processes than CPUs: they share them on purpose, but together they should have had them all
        v.at_least("CPUs used by the query processes together", round(sum(shares), 3), QUERY_CPU_SHARE * cpus,
                   f" ({QUERY_CPU_SHARE:.0%} of the {cpus} CPUs: the rest went to other work)")
    late = max(r["start"] for r in res) - start
    v.at_most("start spread of the query processes (s)", round(late, 3), 0.1 * seconds)
    return {"processes": processes, "cpus": cpus, "seconds": end - start, "queries": total,
            "queries_per_s": total / (end - start),
            "per_process_per_s": [r["queries"] / (r["end"] - r["start"]) for r in res],
            "found": sum(r["found"] for r in res) / total if total else 0.0,
            "cpu_us_per_query": sum(r["cpu_s"] for r in res) / total * 1e6 if total else None,
            "cpu_shares": shares, **v.to_dict()}


def dict_baseline(keys: list[int], seconds: float = QUERY_S) -> dict[str, Any]:
    """The naive collector's store (a dict) looked up for the same keys, one process."""
    store = {key: (i,) for i, key in enumerate(keys)}
    get = store.get
    count = 0
    t0, c0 = time.monotonic(), time.process_time()
    end = t0 + seconds
    while time.monotonic() < end:
        for key in keys[:4096]:
            get(key)
        count += min(4096, len(keys))
    t1, c1 = time.monotonic(), time.process_time()
    return {"processes": 1, "queries": count, "seconds": t1 - t0, "queries_per_s": count / (t1 - t0),
            "cpu_us_per_query": (c1 - c0) / count * 1e6}


def queryrate(processes: tuple[int, ...] = QUERY_PROCESSES, slots: int = QUERY_SLOTS,
              seconds: float = QUERY_S, lead_s: float | None = None) -> dict[str, Any]:
    """Every process count of ``processes``, and the dict baseline, on one store."""
    with tempfile.TemporaryDirectory(prefix="netstack-dta-query-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                                     else None) as directory:
        keys = build_store(directory, slots)
        rows = [run_processes(directory, slots, p, seconds, lead_s) for p in processes]
    return {"slots": slots, "redundancy": REDUNDANCY, "load_factor": 1.0, "rows": rows,
            "baseline": dict_baseline(keys, seconds)}
