"""``netstack bench dta`` runs end to end on one case each way (DTA and the naive collector, Key-Write
N=2), writes its JSON and tables, judges every measurement and counts only the valid ones, and
leaves nothing behind.

A smoke test only: rates are never asserted (a project rule: timings belong in benchmarks), and
neither is whether this shared machine let other work take the CPUs during a measurement: an
invalid one must be listed, its case must carry no rate and no ratio, whichever it was.
"""

from __future__ import annotations

import argparse
import json
import os

import pytest

from netstack import runtime
from netstack.bench import dta as bench
from netstack.bench.dta.search import sustained
from netstack.topo import impair, netns

pytestmark = [pytest.mark.netns, pytest.mark.skipif(os.geteuid() != 0, reason="namespace tests need root")]


def test_dta_benchmark_counts_only_valid_measurements_and_cleans_up(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path / "run"))
    args = argparse.Namespace(results_dir=str(tmp_path / "results"), only=["Key-Write N=2"], duration=1.0)
    assert bench.main(args) == 0
    doc = json.loads((tmp_path / "results" / "bench-dta-latest.json").read_text())
    assert [(c["path"], c["label"]) for c in doc["live"]] == [("dta", "Key-Write N=2"), ("naive", "Key-Write N=2")]
    assert doc["fig7"] == [] and doc["fig9"] == [] and doc["inproc"] == []
    assert doc["longevity"]["curves"] == [] and doc["queryrate"] == {}
    assert set(doc["collector_idle"]) == {"sw2", "c1"}  # the daemons' CPU with no report flowing

    measurements = [(c, m) for c in doc["live"] for m in (c["overload"], *c["runs"])]
    for _, m in measurements:  # each judged by its duration and the CPU time other work took meanwhile
        assert {c["name"] for c in m["checks"]} >= {"reporter seconds"} and "foreign_share" in m["cpu"]
        assert m["valid"] == all(c["ok"] for c in m["checks"])
    invalid = [m for _, m in measurements if not m["valid"]]
    assert doc["valid"] is (not invalid)
    assert len(doc["invalid_rows"]) == len(invalid) == len(doc["checks"]) and doc["cross_checks"] == []
    for c in doc["live"]:
        assert c["valid"] == all(m["valid"] for m in (c["overload"], *c["runs"]))
        if not c["valid"]:  # its search ended at the invalid measurement: no rate, no ratio
            assert c["sustained"] is None and not (c["overload"]["valid"] and c["runs"] and c["runs"][-1]["valid"])
            assert c.get("vs_naive") is None
    dta_case, naive_case = doc["live"]
    assert "vs_naive" in dta_case
    if dta_case["valid"] and naive_case["valid"] and sustained(dta_case) and sustained(naive_case):
        assert dta_case["vs_naive"] == pytest.approx(sustained(dta_case) / sustained(naive_case))

    out = capsys.readouterr().out
    assert ("Invalid measurements (not counted" in out) == bool(invalid)
    # collector CPU per report, DTA (the NIC stand-in) beside naive (host CPU), when both cases count
    both = dta_case["valid"] and naive_case["valid"]
    assert ("DTA c1 CPU us/report (NIC stand-in)" in out) == both
    assert ("Collector CPU per report, DTA vs naive (live): no DTA case" in out) == (not both)
    prefix = doc["prefix"]
    assert netns.running_namespaces(prefix) == {}
    assert impair.nft_table_name(prefix) not in impair.list_nft_tables(None)
    assert not runtime.run_dir(prefix).exists()
    assert list((tmp_path / "run").glob("*")) == []
