"""``netstack reproduce dta`` (netstack/dta/reproduce.py): the paper's claims file, the module on
missing and garbage documents, and on a real document of ``netstack bench dta``'s in-process
sections (small sizes, a few seconds)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack.dta import reproduce as dta
from netstack.reproduce.claims import NOT_ATTEMPTED, REPRODUCED, VERDICTS, Figure
from netstack.reproduce.paperdata import load


def _rows(figs: list[Figure]) -> list[dict[str, Any]]:
    return [r for f in figs for r in f.to_dict()["claims"]]


def test_the_claims_file_loads_and_every_claim_of_it_has_a_row():
    pc = load("dta")
    rows = _rows(dta.figures({}))  # looks every claim the module uses up: a missing id raises here
    texts = {r["claim"] for r in rows}
    assert {c.text for c in pc.claims.values()} == texts
    assert len(rows) >= len(pc.claims)
    for c in pc.claims.values():
        assert c.source and c.figure


def test_the_paper_spec_names_its_experiments_and_data():
    ids = [e.id for e in dta.PAPER.experiments]
    assert ids == [dta.SIM, dta.LIVE]
    sim, live = dta.PAPER.experiments
    assert not sim.needs_root and live.needs_root
    assert "--results-dir" not in sim.quick + sim.full + live.quick + live.full
    root = Path(dta.__file__).resolve().parents[2]
    for path in dta.PAPER.data_sources:
        assert (root / path).is_file(), path


def test_no_result_gives_every_row_not_attempted_with_a_note():
    for results in ({}, {dta.SIM: None, dta.LIVE: None}, {dta.SIM: "garbage", dta.LIVE: 3},
                    {dta.SIM: {"fig7": "x", "fig9": [1, 2], "inproc": {}}, dta.LIVE: {"live": [None, 1]}}):
        rows = _rows(dta.figures(results))
        assert rows
        for r in rows:
            assert r["verdict"] == NOT_ATTEMPTED, r
            assert r["why"], r


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 70_000) | st.floats(allow_nan=True)
                    | st.text(max_size=5),
                    lambda ch: st.lists(ch, max_size=4) | st.dictionaries(st.text(max_size=4), ch, max_size=4),
                    max_leaves=12)
#: values that make the module's paths reachable (a kind, a parameter, a number it reads)
NEAR = st.one_of(JSON, st.sampled_from(["dta", "naive", "keywrite", "append", "crc32+mix", 1, 2, 4, 16, 0.5, 0,
                                        True, False]))
RUN = st.fixed_dictionaries({}, optional={
    k: NEAR for k in ("valid", "checks", "ingested_per_s", "offered_per_s", "rdma_ops_per_report")})
CASE = st.fixed_dictionaries({}, optional={
    "path": NEAR, "kind": NEAR, "param": NEAR, "window": st.none() | JSON, "overload": RUN | JSON,
    "runs": st.lists(RUN, max_size=3) | JSON, "sustained": RUN | JSON, "valid": NEAR, "reporter_bound": NEAR,
    "vs_naive": NEAR})
ROW = st.dictionaries(st.sampled_from(
    ["kind", "param", "redundancy", "load_factor", "success", "slot_hash", "checksum_bits", "wrong", "absent_wrong",
     "queries", "frames_per_report", "responder_us_per_report", "processes", "queries_per_s", "valid", "checks",
     "slots", "points", "half_life_reports", "queryable"]), NEAR, max_size=8)
DOC = st.fixed_dictionaries({}, optional={
    "live": st.lists(CASE, max_size=4) | JSON, "fig7": st.lists(ROW, max_size=6) | JSON,
    "fig9": st.lists(ROW, max_size=6) | JSON, "inproc": st.lists(ROW, max_size=4) | JSON,
    "longevity": st.fixed_dictionaries({"curves": st.lists(ROW, max_size=3) | JSON}) | JSON,
    "queryrate": st.fixed_dictionaries({"rows": st.lists(ROW, max_size=3)}) | JSON,
    "collector_idle": st.dictionaries(st.just("c1"), NEAR) | JSON})


@given(sim=st.none() | DOC | JSON, live=st.none() | DOC | JSON)
def test_odd_documents_never_raise(sim: Any, live: Any):
    figs = dta.figures({dta.SIM: sim, dta.LIVE: live})
    for f in figs:
        d = f.to_dict()
        assert d["verdict"] in VERDICTS
        for r in d["claims"]:
            assert r["verdict"] in VERDICTS
            assert r["ours"] is None or math.isfinite(r["ours"])


@pytest.fixture(scope="module")
def sim_doc(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    """A real ``netstack bench dta`` document of its in-process sections, run in this process with
    the bench's own code at small sizes (a few seconds instead of ~40)."""
    import importlib
    import json

    import netstack.bench.dta as bench

    # the package re-exports functions named as their modules: take the modules themselves
    inproc, keywrite, longevity = (importlib.import_module(f"netstack.bench.dta.{m}")
                                   for m in ("inproc", "keywrite", "longevity"))

    out = tmp_path_factory.mktemp("dta-sim")
    mp = pytest.MonkeyPatch()
    mp.setattr(bench, "fig7", lambda: keywrite.fig7(slots=512, seeds=1))
    mp.setattr(bench, "fig9", lambda: keywrite.fig9(slots=2048, seeds=1))
    mp.setattr(bench, "longevity", lambda: longevity.longevity(slots=(1 << 10, 1 << 11, 1 << 12), sample=1500))
    mp.setattr(bench, "inproc", lambda: [dict(r) for r in _small_inproc(inproc)])
    try:
        code = bench.main(argparse.Namespace(only=list(dta.SIM_SECTIONS), results_dir=str(out), duration=None))
    finally:
        mp.undo()
    assert code == 0
    return json.loads((out / "bench-dta-latest.json").read_text()), out


def _small_inproc(inproc: Any) -> list[dict[str, Any]]:
    rows = []
    for kind, param in inproc.CASES:
        row = inproc.measure(kind, param, reports=2000, rounds=1)
        row["responder_us_per_report"] = row["responder_us_per_frame"] * row["frames_per_report"]
        row["naive_us_per_report"] = inproc.naive_measure(kind, param, reports=2000, rounds=1)
        rows.append(row)
    return rows


def _by_source(figs: list[Figure], fig: str) -> dict[str, dict[str, Any]]:
    return {r["ours_source"]: r for f in figs if f.id == fig for r in f.to_dict()["claims"]}


def test_a_real_in_process_document_gives_numbers_and_verdicts(sim_doc: tuple[dict[str, Any], Path]):
    doc, out = sim_doc
    figs = dta.figures({dta.SIM: doc, dta.LIVE: None})
    by_id = {f.id: f for f in figs}
    for fid in ("fig7", "fig8", "fig9"):
        rows = by_id[fid].to_dict()["claims"]
        measured = [r for r in rows if not r["note"].startswith("not attempted")]
        assert measured and all(r["ours"] is not None and r["verdict"] != NOT_ATTEMPTED for r in measured), rows
        assert by_id[fid].shape is not None and by_id[fid].shape.holds is not None
        for image in by_id[fid].images:  # the bench drew what the figure shows (when matplotlib is there)
            assert (out / image).is_file() or not doc["plots"]
    # exact counts: N frames per Key-Write report, one WRITE per 16 Append reports
    frames = _by_source(figs, "fig6")
    row = next(r for s, r in frames.items() if s.startswith("dta-sim: inproc frames_per_report"))
    assert row["ours"] == 1.0 and row["verdict"] == REPRODUCED
    egress = next(r for s, r in _by_source(figs, "fig10").items() if s == "dta-sim: inproc frames_per_report, "
                                                                          "Append B=16")
    assert egress["ours"] == pytest.approx(1 / 16) and egress["verdict"] == REPRODUCED
    # the numbers are the document's: Fig. 9's wrong-answer rate at the narrowest checksum, Fig. 8's half-life
    narrow = min(doc["fig9"], key=lambda r: r["checksum_bits"])
    fig9 = next(r for r in by_id["fig9"].to_dict()["claims"] if r["ours_source"].startswith("dta-sim: fig9 absent"))
    assert fig9["ours"] == narrow["absent_wrong"]
    big = max((c for c in doc["longevity"]["curves"] if c["redundancy"] == 2), key=lambda c: c["slots"])
    (fig8,) = by_id["fig8"].to_dict()["claims"]
    assert fig8["ours"] == pytest.approx(big["half_life_reports"] / big["slots"])
    # the live rows say the live experiment did not run
    live_rows = [r for r in _rows(figs) if r["runtime"] == "live" and r["ours_source"].startswith("dta-live")]
    assert live_rows and all(r["verdict"] == NOT_ATTEMPTED and "dta-live" in r["why"] for r in live_rows)


def test_live_cases_that_do_not_count_are_judged_not_valid():
    """A case whose rate search a starved run ended: its best ingest is shown, judged not valid."""
    bad = {"valid": False, "checks": [{"name": "CPU time taken by other work", "expected": "<= 0.15",
                                       "measured": 0.6, "ok": False}]}
    good = {"valid": True, "checks": [{"name": "reporter seconds", "expected": ">= 0.9", "measured": 1.0, "ok": True}]}

    def case(param: int, rate: float, ok: bool) -> dict[str, Any]:
        run = {**(good if ok else bad), "offered_per_s": rate, "ingested_per_s": rate, "loss": 0.0,
               "rdma_ops_per_report": 1 / param}
        return {"path": "dta", "kind": "append", "param": param, "window": None, "overload": {**run, "loss": 0.5},
                "runs": [run], "sustained": run if ok else None, "reporter_bound": False, "valid": ok}

    live = {"live": [case(1, 50e3, True), case(4, 150e3, True), case(16, 90e3, False)], "collector_idle": {"c1": 0.02}}
    rows = _by_source(dta.figures({dta.LIVE: live}), "fig10")
    b4 = rows["dta-live: sustained ingest, Append B=4 over B=1"]
    assert b4["ours"] == pytest.approx(3.0) and b4["verdict"] == REPRODUCED and b4["validity"]["valid"] is True
    b16 = rows["dta-live: sustained ingest, Append B=16 over B=4"]
    assert b16["ours"] == pytest.approx(0.6) and b16["verdict"] == "not reproduced"
    assert b16["validity"]["valid"] is False and "other work" in b16["why"]
    shape = next(f for f in dta.figures({dta.LIVE: live}) if f.id == "fig10").shape
    assert shape is not None and shape.holds is True
