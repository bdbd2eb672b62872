"""TCD's FCT comparison (netstack.tcd.compare, ``netstack tcd fct``; issue 30): groups, quantiles, the
ratio (base over tcd) and its paired bootstrap interval over seeds, on hand-made flows; and the
command's JSON contract on a tiny virtual-time run of both ccs."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack import cli
from netstack.tcd.compare import (
    GROUPS,
    QUANTILES,
    FctCompare,
    bootstrap_ci,
    compare,
    group_stats,
    groups_of,
    quantile,
    ratios_of,
    slowdowns,
)
from netstack.traffic import percentiles


def flow(slowdown: float | None, cls: str = "victim", size: int = 2_000_000, fid: int = 1) -> dict:
    bucket = "small" if size < 100_000 else "large" if size > 1_000_000 else "medium"
    return {"fid": fid, "src": "h1", "dst": "h2", "size": size, "arrival_ns": 0, "class": cls, "bucket": bucket,
            "slowdown": slowdown, "ce": 0, "ue": 0}


def test_groups_of_a_flow():
    assert groups_of(flow(1.0, "victim", 2_000_000)) == ["all", "victim", "large", "victim_large"]
    assert groups_of(flow(1.0, "other", 50_000)) == ["all", "other", "small", "other_small"]
    assert groups_of(flow(1.0, "contributor", 500_000)) == ["all", "contributor", "medium"]
    assert set(GROUPS) >= {"all", "victim", "small", "large", "contributor", "other", "victim_large"}


def test_quantiles_are_nearest_rank_and_incomplete_flows_are_left_out():
    vals = [float(v) for v in range(1, 101)]
    assert quantile(vals, 50) == percentiles(vals, (50,))["p50"] == 50.0 and quantile(vals, 99) == 99.0
    assert quantile([1.0, 1.0, 2.0, 2.0, 2.0], 50) == 2.0 == quantile([1.0, 1.0, 2.0, 2.0, 2.0] * 2, 50)
    assert quantile([5.0], 99) == 5.0 and quantile([], 50) is None
    st_ = group_stats([flow(2.0), flow(4.0, fid=2), flow(None, fid=3)])
    assert st_["victim"] == {"flows": 3, "completed": 2, "median": 2.0, "p99": 4.0}
    assert st_["other"] == {"flows": 0, "completed": 0, "median": None, "p99": None}


def test_ratio_is_base_over_tcd():
    base = slowdowns([flow(6.0), flow(6.0, "other", 10_000, 2)])
    tcd = slowdowns([flow(2.0), flow(3.0, "other", 10_000, 2)])
    r = ratios_of(base, tcd)
    assert r["victim"] == {"median": 3.0, "p99": 3.0} and r["other_small"] == {"median": 2.0, "p99": 2.0}
    assert r["contributor"] == {"median": None, "p99": None}


def test_one_seed_or_identical_seeds_give_a_point_interval():
    b, t = slowdowns([flow(6.0), flow(8.0, fid=2)]), slowdowns([flow(2.0), flow(4.0, fid=2)])
    assert bootstrap_ci([b], [t])["victim"] == {"median": [3.0, 3.0], "p99": [2.0, 2.0]}
    assert bootstrap_ci([b, b, b], [t, t, t])["victim"]["median"] == [3.0, 3.0]
    assert bootstrap_ci([b], [t])["contributor"] == {"median": None, "p99": None}


seed_values = st.lists(st.floats(1.0, 1000.0, allow_nan=False), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(seeds=st.lists(st.tuples(seed_values, seed_values), min_size=1, max_size=5))
def test_ci95_stays_within_what_the_per_seed_quantiles_allow(seeds):
    """Every seed's flows pooled never leave the range of the seeds' own quantiles, so neither does
    any resample's ratio: lo >= min(base)/max(tcd) and hi <= max(base)/min(tcd), per quantile."""
    base = [slowdowns([flow(v, fid=i) for i, v in enumerate(b)]) for b, _ in seeds]
    tcd = [slowdowns([flow(v, fid=i) for i, v in enumerate(t)]) for _, t in seeds]
    ci = bootstrap_ci(base, tcd, draws=200)
    for name, q in QUANTILES.items():
        bq = [quantile(s["victim"], q) for s in base]
        tq = [quantile(s["victim"], q) for s in tcd]
        lo, hi = ci["victim"][name]
        assert lo <= hi
        assert min(bq) / max(tq) - 1e-3 <= lo and hi <= max(bq) / min(tq) + 1e-3
        if len(seeds) == 1:
            assert lo == hi == round(bq[0] / tq[0], 4)


def _doc(marker: str, seed: int, values: list[float]) -> dict:
    flows = [flow(v, fid=i) for i, v in enumerate(values)]
    res = {"marker": marker, "mode": "dcqcn+tcd" if marker == "tcd" else "dcqcn", "marking": {"marker": marker},
           "flows": flows, "flows_total": len(flows), "flows_completed": len(flows), "end_paper_ms": 1.0,
           "marks": {"ce": 1, "ue": 0, "rate_cuts": 0, "holds": 0}, "pauses": {"on_incast_links": 3, "elsewhere": 0},
           "workload": "websearch", "size_scale": 1.0, "mean_size": 1, "scale": 1.0,
           "incast": {"kind": "persistent", "receiver": "h0", "senders": ["h4"]},
           "classes": {"contributor": 0, "victim": len(flows), "other": 0}}
    return {"result": res, "engine": {"wall_s": 1.0}}


def test_compare_of_run_documents():
    runs = [("base", 1, _doc("ecn", 1, [4.0, 8.0])), ("tcd", 1, _doc("tcd", 1, [2.0, 2.0])),
            ("base", 2, _doc("ecn", 2, [6.0, 6.0])), ("tcd", 2, _doc("tcd", 2, [3.0, 3.0]))]
    out = compare(FctCompare(seeds=(1, 2)), runs, flow_list=True)
    assert set(out) == {"arms", "ratio", "ci95", "flows", "seeds", "setup"}
    assert out["flows"] == 4 and out["seeds"] == [1, 2]
    assert out["ratio"]["victim"]["median"] == pytest.approx(6.0 / 2.0)
    assert out["arms"]["base"]["fct"]["victim"]["completed"] == 4
    assert out["arms"]["tcd"]["flows"]["rows"][0][:2] == [1, 0]
    with pytest.raises(ValueError, match="different flows"):
        compare(FctCompare(seeds=(1,)), [runs[0], ("tcd", 1, _doc("tcd", 1, [2.0]))])


@pytest.mark.parametrize("cc", ["dcqcn", "timely"])
def test_tcd_fct_prints_the_json_contract(cc, capsys):
    argv = ["tcd", "fct", "--topology", "tcd-leafspine", "--workload", "websearch", "--load", "0.6",
            "--seeds", "1-2", "--cc", cc, "--flows", "4", "--size-scale", "0.02", "--workers", "2", "--json"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"arms", "ratio", "ci95", "flows", "seeds", "setup"}
    assert set(out["arms"]) == {"base", "tcd"} and out["flows"] == 8 and out["seeds"] == [1, 2]
    for arm, marker in (("base", "ecn"), ("tcd", "tcd")):
        a = out["arms"][arm]
        assert {"marking", "fct"} <= set(a) and set(a["fct"]) == set(GROUPS)
        assert a["marking"]["marker"] == marker and a["marking"]["ecn"]["mode"] == "red"
        assert a["mode"] == (f"{cc}+tcd" if arm == "tcd" else cc)
    assert set(out["ratio"]) == set(GROUPS) and set(out["ci95"]) == {"method", *GROUPS}
    assert {"all", "victim", "small", "large"} <= set(out["ratio"])
    assert all(set(out["ratio"][g]) == {"median", "p99"} for g in GROUPS)
    assert out["setup"]["cc"] == cc and out["setup"]["load"] == 0.6


def test_ce_rule_tcd_switches_only_the_tcd_arms_rule():
    from netstack.tcd.compare import ARMS

    runs = FctCompare(seeds=(1,), ce_rule="tcd").specs()
    rules = {arm: {end["tcd"]["ce_rule"] for link in spec.topology["links"] for end in link["features"].values()
                   if "tcd" in end} for arm, _, spec in runs}
    assert rules == {"base": {"ecn"}, "tcd": {"tcd"}} and set(ARMS) == set(rules)
    assert {arm: {r for link in spec.topology["links"] for end in link["features"].values() if "tcd" in end
                  for r in [end["tcd"]["marker"]]} for arm, _, spec in runs} == {"base": {"ecn"}, "tcd": {"tcd"}}
    with pytest.raises(ValueError, match="ce_rule"):
        FctCompare(seeds=(1,), ce_rule="red").specs()


@pytest.mark.parametrize("argv", [["--load", "0"], ["--load", "x"], ["--seeds", "3-1"], ["--cc", "reno"],
                                  ["--workload", "rpc"], ["--flows", "0"], ["--topology", "nope"],
                                  ["--incast-senders", "13"], ["--workers", "0"], ["--ce-rule", "red"]])
def test_bad_arguments_exit_2(argv, capsys):
    try:
        code = cli.main(["tcd", "fct", *argv])
    except SystemExit as exc:  # (argparse's own refusals)
        code = exc.code
    assert code == 2
    assert "error" in capsys.readouterr().err
