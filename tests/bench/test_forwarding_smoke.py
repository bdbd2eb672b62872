"""``netstack bench forwarding`` runs end to end, writes its JSON and leaves nothing behind.

A smoke test only: a very short run of every path with one frame size. Rates are never
asserted (a project rule: timings belong in benchmarks, not in pass/fail tests).
"""

from __future__ import annotations

import argparse
import json
import os

import pytest

from netstack import runtime
from netstack.bench import forwarding
from netstack.topo import impair, netns

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespace tests need root"),
]


def test_make_frame_has_the_requested_size_and_port() -> None:
    frame = forwarding.make_frame(64, "02:00:0a:4d:00:01", "02:00:0a:4d:00:02")
    assert len(frame) == 64
    assert int.from_bytes(frame[36:38], "big") == forwarding.UDP_PORT
    assert len(forwarding.make_frame(1500, "02:00:0a:4d:00:01", "02:00:0a:4d:00:02")) == 1500


def test_forwarding_benchmark_runs_writes_json_and_cleans_up(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path / "run"))
    # no wait for the daemons to fold the kernel's socket drops into their counters (once a second):
    # this test reads which switches answered, never those counts, and the wait was 4 x 1.1 s idle
    monkeypatch.setattr(forwarding, "STATS_WAIT_S", 0.0)
    args = argparse.Namespace(results_dir=str(tmp_path / "results"), min_time=0.25, only=None,
                              duration=0.2, sizes="64", rounds=2)
    assert forwarding.main(args) == 0

    payload = json.loads((tmp_path / "results" / "bench-forwarding-latest.json").read_text())
    for key in ("benchmark", "machine", "duration_s", "sizes_bytes", "paths", "prefix", "notes", "bmv2_reference",
                "goal", "summary", "results"):
        assert key in payload, key
    assert payload["benchmark"] == "bench-forwarding"
    assert payload["sizes_bytes"] == [64]
    assert payload["bmv2_reference"]["frames_per_s_low"] == 80_000
    assert payload["rounds"] == 2
    assert sorted((r["round"], r["path"], r["size_bytes"]) for r in payload["results"]) == sorted(
        (k, p, 64) for k in range(2) for p in forwarding.PATHS)
    for r in payload["results"]:
        for key in ("offered_fps", "rx_fps", "loss", "sent", "received", "ratio_vs_bare", "dut_saturated"):
            assert key in r, (r["path"], key)
        assert r["sent"] > 0, r["path"]
        assert r["received"] > 0, r["path"]  # something got through every device under test
        assert r["received"] <= r["sent"], r["path"]
    for r in payload["results"]:
        if r["path"].startswith("switch"):
            assert set(r["switches"]) == ({"sw1"} if r["path"] == "switch1" else {"sw1", "sw2"})
        if r["path"] == "bare":
            assert "kernel_drops" in r["forwarder"]
    # every measurement says whether it counts (netstack.validity: its duration, and the CPU time
    # other work took meanwhile); the ratios are made of valid ones only
    for r in payload["results"]:
        assert {c["name"] for c in r["checks"]} >= {"generator seconds"} and "foreign_share" in r["cpu"]
        assert r["valid"] == all(c["ok"] for c in r["checks"])
        if not r["valid"]:
            assert r["ratio_vs_bare"] is None
    assert payload["valid"] == all(r["valid"] for r in payload["results"])
    assert len(payload["invalid_rows"]) == sum(not r["valid"] for r in payload["results"])
    row = payload["summary"][0]
    counted = [r for r in payload["results"] if r["valid"] and r["path"] in ("bare", "switch1")]
    if {r["round"] for r in counted if r["path"] == "bare"} & {r["round"] for r in counted if r["path"] == "switch1"}:
        assert "switch1_vs_bare" in row and len(row["switch1_vs_bare_range"]) == 2

    out = capsys.readouterr().out
    assert "| round" in out and "switch2" in out and "medians over 2 round(s)" in out

    # Only what this run made: other users' testbeds may come and go on the machine meanwhile.
    prefix = payload["prefix"]
    assert netns.running_namespaces(prefix) == {}
    assert impair.nft_table_name(prefix) not in impair.list_nft_tables(None)
    assert not runtime.run_dir(prefix).exists()
    assert list((tmp_path / "run").glob("*")) == []  # nor of any other prefix it may have brought up


def test_main_tolerates_missing_options(tmp_path, monkeypatch) -> None:
    """The shared bench parser may lack --duration/--sizes; bad sizes are a clear error, not a crash."""
    args = argparse.Namespace(results_dir=str(tmp_path), min_time=0.25, only=["nothing-matches"])
    assert forwarding.main(args) == 2
    args = argparse.Namespace(results_dir=str(tmp_path), min_time=0.25, only=None, sizes="64,9999")
    assert forwarding.main(args) == 2
    assert not list(tmp_path.iterdir())


def test_summary_takes_medians_of_same_round_ratios() -> None:
    recs = []
    for rnd, (bare, sw) in enumerate([(200.0, 150.0), (100.0, 90.0), (300.0, 150.0)]):
        recs.append({"round": rnd, "size_bytes": 64, "path": "bare", "rx_fps": bare, "ratio_vs_bare": 1.0})
        recs.append({"round": rnd, "size_bytes": 64, "path": "switch1", "rx_fps": sw, "ratio_vs_bare": sw / bare})
    (row,) = forwarding.summarise(recs, [64], ["bare", "switch1"])
    assert row["bare_rx_fps"] == 200.0 and row["bare_rx_fps_range"] == [100.0, 300.0]
    assert row["switch1_vs_bare"] == 0.75  # median of 0.75, 0.9, 0.5 (not 150 / 200 by coincidence only)
    assert row["switch1_vs_bare_range"] == [0.5, 0.9]
    assert row["goal_met"] is False  # the goal: at least the bare forwarder's rate
    recs = [{**r, "rx_fps": r["rx_fps"] * 1.5, "ratio_vs_bare": r["ratio_vs_bare"] * 1.5}
            if r["path"] == "switch1" else r for r in recs]
    (row,) = forwarding.summarise(recs, [64], ["bare", "switch1"])
    assert row["switch1_vs_bare"] == 1.125 and row["goal_met"] is True
