"""``netstack bench auth`` runs, prints its tables and writes its JSON (no timings asserted): the
``mac`` part without root, the live ``linkguardian`` part (keys off vs on) as root, where every run
is judged and only the valid ones count (whichever they were on this shared machine)."""

from __future__ import annotations

import argparse
import json
import os

import pytest

from netstack.bench import auth as bench
from netstack.cli import main


def test_mac_part_writes_rows_for_each_size(tmp_path, capsys):
    assert main(["bench", "auth", "--only", "mac", "--min-time", "0.01", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fresh CMAC" in out and "seal" in out
    doc = json.loads(next(tmp_path.glob("bench-auth-*.json")).read_text())
    assert [r["size"] for r in doc["mac"]] == [64, 1500]
    assert all(r["seal"] > 0 and r["open"] > 0 and r["copy"] > 0 for r in doc["mac"])
    # no live run, nothing to starve: valid, with nothing to list
    assert doc["valid"] is True and doc["checks"] == doc["invalid_rows"] == doc["cross_checks"] == []


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="namespace tests need root")
def test_linkguardian_part_counts_only_valid_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path / "run"))
    # 1 s transfers (4 of them, each on a testbed of its own): thousands of sealed LinkGuardian
    # control frames each, and a scheduling-delay verdict each, as at 2 s
    args = argparse.Namespace(results_dir=str(tmp_path / "results"), only=["linkguardian"], duration=1.0, rounds=2)
    assert bench.main(args) == 0
    doc = json.loads((tmp_path / "results" / "bench-auth-latest.json").read_text())
    runs = doc["linkguardian_runs"]
    assert [(r["round"], r["auth"]) for r in runs] == [(1, False), (1, True), (2, False), (2, True)]
    for r in runs:  # each judged by every process's scheduling delay over its TCP transfer
        assert [c["name"] for c in r["checks"]] == ["scheduling delay"]
        assert r["valid"] == r["checks"][0]["ok"]
        assert r["auth_sealed"] > 0 if r["auth"] else r["auth_sealed"] == 0
        if not r["valid"]:
            assert r["vs_keys_off"] is None  # an invalid run carries no ratio
    invalid = [r for r in runs if not r["valid"]]
    assert doc["valid"] is (not invalid) and len(doc["invalid_rows"]) == len(invalid) == len(doc["checks"])
    assert doc["cross_checks"] == []
    summary = doc["linkguardian"]
    counted = [r["round"] for r in runs if r["auth"] and r["vs_keys_off"] is not None]
    assert summary["rounds_counted"] == len(counted)
    assert (summary["on_vs_off"] is None) == (not counted)
    for side, keyed in (("off", False), ("on", True)):
        assert summary[side]["runs_valid"] == sum(r["valid"] for r in runs if r["auth"] == keyed)
    out = capsys.readouterr().out
    assert "keys on / off" in out and ("Invalid runs (not counted" in out) == bool(invalid)
    assert list((tmp_path / "run").glob("*")) == []
