"""``netstack bench tcd --quick`` runs end to end and writes its JSON, tables and PNGs. A smoke
test: no timing, and not which of DCQCN and DCQCN + TCD gives the lower slowdown (that is what
the benchmark measures)."""

from __future__ import annotations

import argparse
import json

from netstack.bench import tcd as bench


def test_quick_bench_writes_json_tables_and_plots(tmp_path, capsys):
    args = argparse.Namespace(results_dir=str(tmp_path), only=None, workers=2, quick=True, live=False, runtime=None)
    assert bench.main(args) == 0
    doc = json.loads((tmp_path / "bench-tcd-latest.json").read_text())
    assert doc["benchmark"] == "bench-tcd" and doc["quick"] is True and doc["errors"] == {}
    assert doc["sections"] == ["scenarios", "fct"] and doc["scale"]["time_scale"] == 1.0
    sc = doc["scenarios"]
    assert {(r["scenario"], r["marker"], r["flow"]) for r in sc["flows"]} == \
        {(k, m, f) for k in ("single", "multi") for m in ("ecn", "tcd") for f in ("F0", "F1", "F2")}
    assert all(r["packets"] > 0 for r in sc["flows"])
    assert all(r["undetermined"] == 0 for r in sc["flows"] if r["marker"] == "ecn")  # ECN has no UE
    tcd_ports = [r for r in sc["ports"] if r["marker"] == "tcd"]
    assert {r["port"] for r in tcd_ports} == {"P0", "P1", "P2", "P3"}
    assert all(r["congestion_ms"] is not None for r in tcd_ports)
    fct = doc["fct"]
    assert {(r["variant"], r["cc"]) for r in fct["rows"]} == {("websearch", "dcqcn"), ("websearch", "dcqcn+tcd")}
    for r in fct["rows"]:
        assert r["completed"] == r["total"] == fct["flows"] and r["median"] >= 1.0 and r["p99"] >= r["median"]
    tcd_row = next(r for r in fct["rows"] if r["cc"] == "dcqcn+tcd")
    assert tcd_row["ratio_median"] > 0 and tcd_row["ratio_p99"] > 0
    assert {d["scenario"] for d in doc["runs"]} == {"tcd", "tcd-fct"} and len(doc["runs"]) == 6
    for name in ("states", "marks", "fct"):
        assert (tmp_path / f"bench-tcd-{name}.png").stat().st_size > 0
    md = (tmp_path / "bench-tcd-latest.md").read_text()
    out = capsys.readouterr().out
    assert "DCQCN/TCD median" in md and "undetermined" in out


def test_no_section_is_a_clear_error(tmp_path):
    assert bench.main(argparse.Namespace(results_dir=str(tmp_path), only=["nothing"])) == 2
    # live is off unless asked for: --only live alone matches nothing
    assert bench.main(argparse.Namespace(results_dir=str(tmp_path), only=["live"], live=False)) == 2
