"""``netstack reproduce onepipe`` (netstack/onepipe/reproduce.py): the bench's paper rows become
claims, each figure gets its shape, and nothing in a result document makes it raise."""

from __future__ import annotations

import argparse
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.bench import onepipe as bench
from netstack.bench.onepipe import ctlcost as bench_ctlcost
from netstack.bench.onepipe import paper as bench_paper
from netstack.bench.onepipe import reliable as bench_reliable
from netstack.onepipe import reproduce as op
from netstack.reproduce.claims import NOT_ATTEMPTED, VERDICTS

IDS = [f.id for f in bench_paper.FIGURES]


def _row(series: str, x: str, paper: float, ours: float | None, figure: str = "8a", **kw):
    return {"figure": figure, "series": series, "x": x, "paper": paper, "ours": ours, "runtime": "sim", **kw}


def test_no_results_give_every_figure_not_attempted_with_the_reason():
    figs = op.figures({})
    assert [f.id for f in figs] == IDS
    for f in figs:
        assert f.verdict() == NOT_ATTEMPTED
        assert all("did not run" in c.note for c in f.claims)


json_values = st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=6),
                           lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                                                      max_size=4), max_leaves=20)
rows = st.lists(st.fixed_dictionaries({"figure": st.sampled_from(IDS), "series": st.text(max_size=12),
                                       "x": json_values, "paper": json_values, "ours": json_values}), max_size=8)


@settings(max_examples=300, deadline=None)
@given(doc=st.one_of(json_values, st.fixed_dictionaries({"paper": st.one_of(json_values, st.fixed_dictionaries(
    {"rows": st.one_of(rows, json_values), "summary": json_values, "plots": json_values}))})),
    live=st.one_of(st.none(), st.fixed_dictionaries({"runs": json_values})))
def test_any_document_gives_figures_and_never_raises(doc, live):
    figs = op.figures({op.BENCH: doc if isinstance(doc, dict) else None, op.LIVE: live})
    assert [f.id for f in figs] == IDS
    for f in figs:
        assert all(r["verdict"] in VERDICTS for r in f.rows())


def test_fig8a_shape_is_reliable_below_best_effort_at_the_largest_p():
    got = op.SHAPES["8a"]([_row("1Pipe/BE", "8", 5.0, 6.0), _row("1Pipe/R", "8", 4.0, 5.0),
                           _row("1Pipe/BE", "64", 5.0, 5.0), _row("1Pipe/R", "64", 4.0, 4.1)])
    assert got.holds is True and "0.820 at P=64" in got.measured
    assert op.SHAPES["8a"]([_row("1Pipe/BE", "64", 5.0, 5.0), _row("1Pipe/R", "64", 4.0, 5.5)]).holds is False
    assert op.SHAPES["8a"]([]).holds is None


def test_fig9b_shape_compares_where_the_rise_starts():
    def series(name, start):
        return [_row(name, x, 10.0 * (3 if float(x) >= 1e-5 else 1), 10.0 * (3 if float(x) >= start else 1), "9b")
                for x in ("1e-8", "1e-7", "1e-6", "1e-5", "1e-4", "1e-3")]

    assert op.SHAPES["9b"](series("BE-chip", 1e-5) + series("R-chip", 1e-4)).holds is True
    late = op.SHAPES["9b"](series("BE-chip", 1e-5) + series("R-chip", 1e-3))
    assert late.holds is False and "R-chip: ours from 0.001" in late.measured
    # with loaded series, those are judged and the idle ones only said
    r_loaded, be_loaded = op.FIG9B_LOADED["R-chip"], op.FIG9B_LOADED["BE-chip"]
    loaded = op.SHAPES["9b"](series("BE-chip", 1e-5) + series("R-chip", 1e-3) + series(r_loaded, 1e-5))
    assert loaded.holds is True
    assert "R-chip: ours from 0.001, the paper's from 1e-05 (not judged)" in loaded.measured
    assert op.SHAPES["9b"](series("BE-chip", 1e-5) + series("R-chip", 1e-5) + series(r_loaded, 1e-3)).holds is False
    flat_be = series(be_loaded, 1.0)  # never rises
    assert op.SHAPES["9b"](series("BE-chip", 1e-5) + series(be_loaded, 1.0) + series(r_loaded, 1e-5)).holds is False
    assert "BE-chip loaded: ours from never" in op.SHAPES["9b"](series("BE-chip", 1e-5) + flat_be
                                                                 + series(r_loaded, 1e-5)).measured
    # a loaded series alone is enough (no idle R-chip); one of fewer than 3 points is said and not judged
    assert op.SHAPES["9b"](series("BE-chip", 1e-5) + series(r_loaded, 1e-5)).holds is True
    few = op.SHAPES["9b"](series("BE-chip", 1e-5) + series("R-chip", 1e-5) + series(r_loaded, 1e-5)[:2])
    assert few.holds is True and "R-chip loaded: 2 point(s), too few (not judged)" in few.measured
    assert op.SHAPES["9b"](series("BE-chip", 1e-5)).holds is None  # no reliable at all


def test_the_loaded_series_names_are_the_bench_s() -> None:
    from netstack.bench.onepipe import paper

    assert {v: k for k, v in paper.FIG9B_LOADED.items()} == op.FIG9B_LOADED


def test_fig10_shape_is_growth_with_hosts():
    rows = [_row("ToR Switch", "2", 55.0, 45.0, "10"), _row("ToR Switch", "32", 458.0, 50.0, "10")]
    assert op.SHAPES["10"](rows).holds is False
    rows[1]["ours"] = 200.0
    assert op.SHAPES["10"](rows).holds is True


@pytest.fixture(scope="module")
def fig10_doc(tmp_path_factory):
    """A real run of the bench's fig10 section (``netstack bench onepipe --mode sim --only fig10
    --quick --duration 0.6 --workers 1``) in this process, at the two ends of its host counts
    (2 and 32: the growth the shape judges) rather than all five, with 3 store records rather than
    50, and without drawing the paper's overlay PNGs: a few seconds instead of ~17."""
    out = tmp_path_factory.mktemp("op10")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bench_reliable, "FIG10_PROCS", (min(bench_reliable.FIG10_PROCS), max(bench_reliable.FIG10_PROCS)))
        mp.setattr(bench_reliable, "STORE_RECORDS", 3)
        mp.setattr(bench_ctlcost, "BATCHES", 3)
        mp.setattr(bench_paper, "plot_paper", lambda *a, **k: [])
        assert bench.main(argparse.Namespace(runtime="sim", only=["fig10"], quick=True, duration=0.6, workers=1,
                                             results_dir=str(out))) == 0
    return json.loads((out / "bench-onepipe-latest.json").read_text())


def test_a_real_fig10_run_gives_its_numbers_and_shape(fig10_doc):
    figs = {f.id: f for f in op.figures({op.BENCH: fig10_doc})}
    fig10 = figs["10"]
    ours = [r for r in fig10_doc["paper"]["rows"] if r["figure"] == "10" and r["ours"] is not None]
    assert ours and [c.ours for c in fig10.claims if c.ours is not None] == [r["ours"] for r in ours]
    # the controller's core charged the kernel's cost measured in the run, the free one beside it
    assert {r["controller"] for r in fig10_doc["fig10"]["rows"]} == set(bench_reliable.FIG10_CONTROLLERS)
    assert fig10_doc["store"]["controller_core"]["per_datagram_ns"] > 0
    assert all("controller=kernel" in r["source"] for r in ours)
    tor = {float(r["x"]): r["ours"] for r in ours if r["series"] == "ToR Switch"}
    growth = tor[max(tor)] / tor[min(tor)]
    assert fig10.shape is not None and fig10.shape.holds is (growth >= 2.0)
    assert f"x{growth:.2f}" in fig10.shape.measured
    assert figs["8a"].verdict() == NOT_ATTEMPTED  # fig8 did not run
