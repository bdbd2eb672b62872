"""The ``kv`` section of ``netstack bench onepipe``: the transactional key-value store of 1Pipe
("1Pipe: Scalable Total Order Communication in Data Center Networks", §7.3; Figs. 14a and 14b)
in virtual time, 1Pipe against lock-based two-phase commit (our stand-in for FaRM) on the same
fabric and seed (the ``onepipe-kv`` scenario, netstack/onepipe/kv/scenario.py; docs/onepipe-kv.md).

- Fig. 14a: transactions per second per client vs the number of clients, uniform keys and
  YCSB's Zipfian ones (``dist=zipf``), 50 % read-only (the scenario's default mix);
- Fig. 14b: mean latency per transaction class (read-only, write-only, read-modify-write) vs the
  share of writes (YCSB, ``mix=ycsb``), at :data:`KV_WRITES_PROCS` clients;
- Fig. 14c: KV operations per second in all vs the operations (keys) per transaction (the
  scenario's ``ops``), uniform and Zipfian keys, at :data:`KV_OPS_PROCS` clients.

Every run checks its transactions for strict serializability (``check_ok`` in the rows).
``paper.py`` sets the rows beside the paper's (``kv_ours``, ``kv14b_ours``, ``kv14c_ours``).
"""

from __future__ import annotations

from typing import Any

from ...sim.scenario import RunSpec
from .spec import FABRIC, SEED, Point

#: clients of Fig. 14a (the paper's x runs to 512 processes; ours to what runs in seconds)
KV_PROCS = (2, 4, 8, 16, 32)
KV_SHARDS = 4
#: Fig. 14b's write shares (the paper's x in %, /100) and its clients (the paper's: 512)
KV_WRITES = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5)
KV_WRITES_PROCS = 16
KV_DURATION_NS = 200_000
#: (the scenario's mode, its rows' name)
KV_MODES = ("onepipe", "2pc")
#: Fig. 14c's operations per transaction (the paper's x runs to 512 keys at 512 processes) and clients
KV_OPS = (2, 4, 8, 16, 32, 64)
KV_OPS_PROCS = 16
#: the scenario's default operations per transaction (Figs. 14a and 14b). The workload wants at least
#: as many hot keys as operations; with no contention the hot keys are only left out of the draws
#: (the Zipfian ranks start after them), so Fig. 14c's runs set ``hot`` to the operations
KV_DEFAULT_OPS = 2


def kv_points(scale: float) -> list[Point]:
    """Fig. 14a's runs (mode x key distribution x clients), Fig. 14b's (mode x write share), then
    Fig. 14c's (mode x key distribution x operations per transaction)."""
    dur = max(1, round(KV_DURATION_NS * scale))
    out = [Point("kv", RunSpec("onepipe-kv", FABRIC, SEED, dur, {"mode": mode, "procs": p, "shards": KV_SHARDS,
                                                                 "dist": dist}),
                 {"mode": mode, "dist": dist, "procs": p, "writes": None, "ops": KV_DEFAULT_OPS})
           for mode in KV_MODES for dist in ("uniform", "zipf") for p in KV_PROCS]
    out += [Point("kv", RunSpec("onepipe-kv", FABRIC, SEED, dur,
                                {"mode": mode, "procs": KV_WRITES_PROCS, "shards": KV_SHARDS, "dist": "zipf",
                                 "mix": "ycsb", "writes": w}),
                  {"mode": mode, "dist": "zipf", "procs": KV_WRITES_PROCS, "writes": w, "ops": KV_DEFAULT_OPS})
            for mode in KV_MODES for w in KV_WRITES]
    return out + [Point("kv", RunSpec("onepipe-kv", FABRIC, SEED, dur,
                                      {"mode": mode, "procs": KV_OPS_PROCS, "shards": KV_SHARDS, "dist": dist,
                                       "ops": n, "hot": max(4, n)}),
                        {"mode": mode, "dist": dist, "procs": KV_OPS_PROCS, "writes": None, "ops": n, "sweep": "ops"})
                  for mode in KV_MODES for dist in ("uniform", "zipf") for n in KV_OPS if n != KV_DEFAULT_OPS or
                  KV_OPS_PROCS not in KV_PROCS]


def kv_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    chk = res.get("check") or {}
    ops = meta.get("ops", KV_DEFAULT_OPS)
    return [{**meta, "txn_per_s_per_client": res["txn_per_s_per_client"], "done": res["done"],
             "kv_ops_per_s": res["txn_per_s_per_client"] * meta["procs"] * ops,
             "attempts_per_txn": res.get("attempts_per_txn"), "latency_by_class_ns": res["latency_by_class_ns"],
             "p99_us": None if not res["latency_ns"].get("p99") else res["latency_ns"]["p99"] / 1e3,
             "check_ok": bool(chk.get("ok"))}]


def kv_table(rows: list[dict[str, Any]]) -> str:
    from ..output import format_table

    def us(r: dict[str, Any], c: str) -> str:
        m = (r["latency_by_class_ns"].get(c) or {}).get("mean")
        return "-" if m is None else f"{m / 1e3:.2f}"

    return format_table(
        ["mode", "keys", "clients", "ops/txn", "writes", "M txn/s/client", "RO us", "WO us", "WR us", "attempts",
         "strict"],
        [[r["mode"], r["dist"], r["procs"], r.get("ops", KV_DEFAULT_OPS),
          "-" if r["writes"] is None else f"{100 * r['writes']:g} %",
          f"{r['txn_per_s_per_client'] / 1e6:.3f}", us(r, "RO"), us(r, "WO"), us(r, "WR"),
          "-" if r["attempts_per_txn"] is None else f"{r['attempts_per_txn']:.2f}", "yes" if r["check_ok"] else "NO"]
         for r in rows])


__all__ = ["KV_DEFAULT_OPS", "KV_MODES", "KV_OPS", "KV_OPS_PROCS", "KV_PROCS", "KV_WRITES", "KV_WRITES_PROCS",
           "kv_points", "kv_rows", "kv_table"]
