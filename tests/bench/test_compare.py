"""``netstack bench --compare OLD.json NEW.json``: ratios per row, regressions marked, bad input refused."""

from __future__ import annotations

import json

import pytest

from netstack.bench.compare import Row, compare_trees
from netstack.cli import main


def _result(rows: list[dict], **extra) -> dict:
    return {"benchmark": "bench-headers", "utc": "x", "machine": {"cpus": 2}, "min_time_s": 0.25,
            "results": rows, **extra}


def _write(tmp_path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_every_number_both_files_share_gets_its_ratio_and_a_direction():
    old = _result([{"header": "lg.LGData", "codec_decode_per_s": 100.0, "decode_us": 10.0, "size": 5}])
    new = _result([{"header": "lg.LGData", "codec_decode_per_s": 50.0, "decode_us": 5.0, "size": 5}])
    rows, equal = compare_trees(old, new)
    by = {r.metric: r for r in rows}
    assert set(by) == {"codec_decode_per_s", "decode_us"}
    assert by["codec_decode_per_s"].row == "results[lg.LGData,size=5]"
    assert by["codec_decode_per_s"].ratio == 0.5 and by["codec_decode_per_s"].verdict(0.1) == "WORSE"
    assert by["decode_us"].verdict(0.1) == "better"  # lower is better
    assert equal == 2  # min_time_s and size: parameters (machine is skipped)


def test_records_in_another_order_are_matched_by_their_names():
    a = {"header": "a", "per_s": 10.0}
    b = {"header": "b", "per_s": 20.0}
    rows, _ = compare_trees(_result([a, b]), _result([{**b, "per_s": 22.0}, {**a, "per_s": 9.5}]))
    assert sorted((r.row, round(r.ratio, 6)) for r in rows) == [("results[a]", 0.95), ("results[b]", 1.1)]
    assert all(r.verdict(0.2) == "" for r in rows)  # within the threshold


def test_unknown_direction_and_zero_are_shown_not_judged():
    r = Row("x", "frames", 0.0, 3.0)
    assert r.verdict(0.1) == "" and r.ratio == float("inf")
    assert Row("x", "packets", 10.0, 20.0).verdict(0.1) == ""


def test_the_command_prints_the_table_and_writes_json(tmp_path, capsys):
    old = _write(tmp_path, "old.json", _result([{"header": "h", "codec_decode_per_s": 100.0}]))
    new = _write(tmp_path, "new.json", _result([{"header": "h", "codec_decode_per_s": 300.0}]))
    assert main(["bench", "--compare", old, new, "--results-dir", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "| results[h] | codec_decode_per_s |" in out.replace("  ", " ").replace("  ", " ")
    assert "3x" in out and "1 better" in out
    doc = json.loads((tmp_path / "out" / "bench-compare-latest.json").read_text())
    assert doc["rows"] == [{"row": "results[h]", "metric": "codec_decode_per_s", "old": 100.0, "new": 300.0,
                            "ratio": 3.0, "verdict": "better"}]


@pytest.mark.parametrize("case", ["missing", "not json", "not an object", "two benchmarks", "with a benchmark"])
def test_bad_input_is_a_clear_error(tmp_path, capsys, case):
    good = _write(tmp_path, "good.json", _result([]))
    other = {"missing": str(tmp_path / "nope.json"),
             "not json": str(tmp_path / "bad.json"),
             "not an object": _write(tmp_path, "list.json", []),  # type: ignore[arg-type]
             "two benchmarks": _write(tmp_path, "dta.json", {"benchmark": "bench-dta"}),
             "with a benchmark": good}[case]
    if case == "not json":
        (tmp_path / "bad.json").write_text("{not json")
    argv = ["bench", "--compare", good, other] + (["headers"] if case == "with a benchmark" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert {"missing": "cannot read", "not json": "is not JSON", "not an object": "not a JSON object",
            "two benchmarks": "compare results of one benchmark", "with a benchmark": "not both"}[case] in err
