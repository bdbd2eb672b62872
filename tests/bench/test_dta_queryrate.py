"""``netstack bench dta``'s query rate and collector-CPU tables: query processes map the store the
collector would write and answer from it; the baseline and every row are reported and judged;
the CPU table labels the DTA collector's CPU as the NIC stand-in's and the naive one's as host
CPU. No timing is asserted."""

from __future__ import annotations

import tempfile

from netstack.bench.dta import verdicts
from netstack.bench.dta.inproc import naive_measure
from netstack.bench.dta.queryrate import build_store, run_processes
from netstack.bench.dta.tables import cpu_lines, query_lines
from netstack.dta.keywrite import expected_success


def test_query_processes_answer_from_the_collector_files() -> None:
    with tempfile.TemporaryDirectory() as d:
        keys = build_store(d, 1 << 10)
        assert len(set(keys)) == 1 << 10
        row = run_processes(d, 1 << 10, 1, seconds=0.05, lead_s=0.5)
    assert row["processes"] == 1 and row["queries"] > 0 and row["queries_per_s"] > 0
    assert abs(row["found"] - expected_success(1 << 10, 2, 1 << 10)) < 0.15  # a shuffled sample of the keys
    assert {c["name"] for c in row["checks"]} >= {"start spread of the query processes (s)"}
    query = {"slots": 1 << 10, "redundancy": 2, "load_factor": 1.0, "rows": [row],
             "baseline": {"queries_per_s": 1e6, "cpu_us_per_query": 0.1}}
    text = "\n".join(query_lines(query))
    assert "Query rate" in text and "naive collector's dict" in text
    bad = dict(row, valid=False, checks=[{"name": "x", "ok": False, "expected": "y", "measured": 1}])
    v = verdicts([], dict(query, rows=[bad]))
    assert not v["valid"] and v["invalid_rows"][0]["row"] == "query rate, 1 process(es)"


def _case(path: str, c1: float, bound: bool = False) -> dict:
    run = {"offered_per_s": 10_000.0, "ingested_per_s": 10_000.0, "loss": 0.0, "collector_cpu_us_per_report": c1,
           "switch_cpu_us_per_report": 20.0}
    return {"path": path, "kind": "keywrite", "param": 2, "label": "Key-Write N=2", "valid": True, "overload": run,
            "runs": [run], "sustained": run, "reporter_bound": bound}


def test_cpu_table_puts_dta_and_naive_side_by_side_labelled() -> None:
    text = "\n".join(cpu_lines([_case("dta", 10.5), _case("naive", 4.9, True)], [], {"c1": 0.03}))
    assert "NIC stand-in" in text and "host CPU" in text and "DTA host CPU us/report on hardware" in text
    row = next(line for line in text.splitlines() if "Key-Write N=2 |" in line)
    assert "10.5" in row and "4.9" in row and "≥ 10.0 k" in row
    assert "3.0% of a CPU" in text
    invalid = dict(_case("naive", 4.9), valid=False)
    assert "not measured" in "\n".join(cpu_lines([_case("dta", 10.5), invalid], [], {}))


def test_naive_decode_and_insert_runs_on_real_reports() -> None:
    for kind, param in (("keywrite", 2), ("append", 4), ("increment", 2)):
        assert naive_measure(kind, param, reports=200, rounds=1) > 0
