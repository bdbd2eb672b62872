"""The transactional KV store of docs/examples/onepipe_kv.py, live on the shipped ``onepipe``
topology (docs/onepipe-kv.md "Live"): two shards of two replicas, two clients, reliable 1Pipe.
A run with a replica killed mid-run, then a run on the same addresses, must both be strictly
serializable, with every surviving replica applying every transaction (issue 32)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from netstack.onepipe.control import enable_all
from netstack.topo.model import load_topology_spec

from .conftest import running

pytestmark = pytest.mark.netns
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "onepipe_kv.py"
SHARDS = ["10.0.0.1:40111,10.0.0.2:40111", "10.0.0.1:40112,10.0.0.2:40112"]
CLIENTS = ["10.0.0.3:40111", "10.0.0.4:40111"]
HOSTS = {"10.0.0.1": "h1", "10.0.0.2": "h2", "10.0.0.3": "h3", "10.0.0.4": "h4"}
START_S, SECONDS, DRAIN_S = 1.5, 1.5, 1.5
VICTIM = "10.0.0.2:40111"


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    for state in running(load_topology_spec("onepipe"), tmp_path_factory, "v"):
        enable_all(state.prefix)
        yield state


def kv_run(state, out: Path, kill: bool) -> dict:
    """Every process of the store in its host's namespace; ``kill``: the replica VICTIM gets
    SIGKILL halfway through the transactions. The checker's verdict, and each process's record."""
    out.mkdir()
    args = [a for s in SHARDS for a in ("--shard", s)] + [a for c in CLIENTS for a in ("--client", c)]
    procs = {}
    for me in [*(r for s in SHARDS for r in s.split(",")), *CLIENTS]:
        host = HOSTS[me.rpartition(":")[0]]
        procs[me] = subprocess.Popen(
            ["ip", "netns", "exec", state.namespaces[host], sys.executable, str(EXAMPLE), me, *args,
             "--start", str(START_S), "--seconds", str(SECONDS), "--drain", str(DRAIN_S), "--contention", "0.5",
             "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        if kill:
            time.sleep(START_S + SECONDS / 2 + 0.5)  # (the interpreters' start-up, ~0.5 s, then half the run)
            procs[VICTIM].send_signal(signal.SIGKILL)  # ip netns exec execs: the pid is the replica's
        errs = {me: p.communicate(timeout=60)[1] for me, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    check = subprocess.run([sys.executable, str(EXAMPLE), "--check", str(out)], capture_output=True, text=True,
                           timeout=60, check=False)
    records = {f.stem: json.loads(f.read_text()) for f in out.glob("*.json")}
    return {"check": check, "records": records, "errs": errs}


def test_a_replica_killed_mid_run_then_a_run_on_the_same_addresses_stay_strictly_serializable(fabric, tmp_path):
    """The second run reuses the first's addresses, whose processes the controller declares
    failed and tells the new ones of before their registration replies. The example took such a
    notice about a previous process as "this replica is dead" (its registration time was never
    recorded): a client stopped sending to two fresh replicas, they missed its transactions, and
    reads from them were stale, which the checker refused (live, 2026-12-06)."""
    for n, kill in enumerate((True, False)):
        got = kv_run(fabric, tmp_path / f"run{n}", kill)
        check, records = got["check"], got["records"]
        errs = {k: v[-500:] for k, v in got["errs"].items()}
        assert check.returncode == 0, (n, check.stdout, check.stderr[-2000:], errs)
        verdict = json.loads(check.stdout.strip().splitlines()[-1])
        assert verdict["strictly_serializable"] and verdict["txns"] > 0, verdict
        shards = {me: r["counters"] for me, r in records.items() if r["role"] == "shard"}
        clients = {me: r["counters"] for me, r in records.items() if r["role"] == "client"}
        assert len(clients) == 2 and all(c["pending"] == 0 and c["done"] > 0 for c in clients.values()), clients
        # every replica that ran to the end applied every transaction: none was taken for dead
        survivors = {me: c["applied"] for me, c in shards.items()}
        assert len(survivors) == (3 if kill else 4), survivors
        assert set(survivors.values()) == {verdict["txns"]}, (survivors, verdict["txns"])
