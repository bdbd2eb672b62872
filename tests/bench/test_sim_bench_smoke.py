"""``netstack bench sim`` runs end to end with tiny sizes and writes its JSON, table and plot.
A smoke test: the events/s it measures are never asserted (timings belong in benchmarks)."""

from __future__ import annotations

import argparse
import json

from netstack.bench import sim as bench


def test_sim_benchmark_runs_and_writes_results(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bench, "PAPER_LOSSES", (1e-3,))
    args = argparse.Namespace(results_dir=str(tmp_path), only=None, rounds=1, workers=2, frames=1500, work=0.05)
    monkeypatch.setattr(bench, "loop_baseline", lambda: {"events": 1, "wall_s": 1.0, "events_per_s": 1.0})
    assert bench.main(args) == 0
    doc = json.loads((tmp_path / "bench-sim-latest.json").read_text())
    sp = doc["speed"]
    assert {r["name"] for r in sp["rows"]} >= {"forwarding, 2 switches", "lg-stress, 100G", "tcsack-transfer"}
    assert all(r["events_per_s"] > 0 and r["us_per_frame"] > 0 for r in sp["rows"])
    assert sp["goal"]["events_per_s"] == 1_000_000 and "factor_short" in sp["goal"]
    assert sp["parallel"]["workers"] == 2 and sp["parallel"]["events"] > 0
    rows = doc["fig8_paper"]["rows"]
    assert {(r["gbps"], r["mode"]) for r in rows} == {(g, m) for g in (25, 100) for m in ("off", "blocking", "nb")}
    assert all(r["time_scale"] == 1.0 and r["frames"] == 1500 for r in rows)
    lg100 = next(r for r in rows if r["gbps"] == 100 and r["mode"] == "blocking")
    assert lg100["copies"] == 2 and lg100["ack_no_timeout_ns"] == 7000  # the paper's 100G settings, unscaled
    assert (tmp_path / "bench-sim-fig8.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "events/s" in out and "Fig. 8" in out


def test_only_virtual_time(tmp_path):
    args = argparse.Namespace(results_dir=str(tmp_path), only=None, runtime="live")
    assert bench.main(args) == 2
    assert bench.main(argparse.Namespace(results_dir=str(tmp_path), only=["nothing"])) == 2
