"""The verdict rules of ``netstack reproduce`` (netstack/reproduce/claims.py), and the papers'
claims files (netstack/reproduce/paperdata.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack.reproduce import paperdata
from netstack.reproduce.claims import (
    NOT_ATTEMPTED,
    NOT_REPRODUCED,
    REPRODUCED,
    SHAPE_ONLY,
    VERDICTS,
    Check,
    Claim,
    Figure,
    Shape,
    Tolerance,
    Validity,
    verdict,
)

INVALID = Validity(False, (Check("lag p99", "<= 20 ms", 80.0, False),))


def test_within_the_tolerance_is_reproduced_outside_is_not():
    assert verdict(Claim("x", paper=10.0, ours=15.0), None)[0] == REPRODUCED
    assert verdict(Claim("x", paper=10.0, ours=25.0), None)[0] == NOT_REPRODUCED
    assert verdict(Claim("x", paper=10.0, ours=4.0), None)[0] == NOT_REPRODUCED


def test_the_scale_factor_is_divided_out():
    """A rate measured on links 1000x slower: ours / paper is 1e-3, at scale 1."""
    c = Claim("rate", paper=100.0, ours=0.1, scale_factor=1e-3)
    assert c.at_scale == pytest.approx(1.0)
    assert verdict(c, None)[0] == REPRODUCED


def test_outside_the_tolerance_with_the_shape_holding_is_shape_only():
    c = Claim("x", paper=10.0, ours=30.0)
    assert verdict(c, Shape("rises", True))[0] == SHAPE_ONLY
    assert verdict(c, Shape("rises", False))[0] == NOT_REPRODUCED
    assert verdict(c, Shape("rises", None))[0] == NOT_REPRODUCED


def test_an_invalid_run_is_never_evidence():
    c = Claim("x", paper=10.0, ours=10.0, runtime="live", validity=INVALID)
    v, why = verdict(c, Shape("rises", True))
    assert v == NOT_REPRODUCED
    assert "lag p99" in why


def test_no_number_is_not_attempted_with_the_reason():
    v, why = verdict(Claim("x", paper=10.0, ours=None, note="not built: TPC-C"), None)
    assert (v, why) == (NOT_ATTEMPTED, "not built: TPC-C")


def test_a_statement_is_judged_by_its_check():
    assert verdict(Claim("ECN marks F0", paper=None, ours=3.0, check=True), None)[0] == REPRODUCED
    assert verdict(Claim("ECN marks F0", paper=None, ours=0.0, check=False), None)[0] == NOT_REPRODUCED
    assert verdict(Claim("ECN marks F0", paper=None, ours=None, check=None), None)[0] == NOT_ATTEMPTED


def test_a_paper_value_of_zero_has_no_ratio():
    assert verdict(Claim("x", paper=0.0, ours=3.0), None)[0] == NOT_ATTEMPTED


def test_a_tighter_tolerance():
    t = Tolerance(0.9, 1.1)
    assert verdict(Claim("x", paper=1.0, ours=1.05, tolerance=t), None)[0] == REPRODUCED
    assert verdict(Claim("x", paper=1.0, ours=1.2, tolerance=t), None)[0] == NOT_REPRODUCED
    assert t.text() == "0.9-1.1x"
    assert Tolerance().text() == "within 2x"


def test_validity_of_runs_keeps_the_failed_checks():
    ok = {"valid": True, "checks": [{"name": "sent", "expected": "1000", "measured": 1000, "ok": True}]}
    bad = {"valid": False, "checks": [{"name": "lag", "expected": "<= 20 ms", "measured": 90, "ok": False},
                                      {"name": "sent", "expected": "1000", "measured": 1000, "ok": True}]}
    v = Validity.of_runs([ok, bad])
    assert v.valid is False
    assert [c.name for c in v.checks] == ["lag"]
    assert Validity.of_runs([ok]).valid is True
    assert Validity.of_runs([{}]).valid is None
    assert "INVALID" in v.text()


def test_a_figures_verdict_is_its_worst_attempted_claim():
    good = Claim("a", paper=1.0, ours=1.0)
    far = Claim("b", paper=1.0, ours=9.0)
    none = Claim("c", paper=1.0, ours=None)
    assert Figure("f", "t", (good, none)).verdict() == REPRODUCED
    assert Figure("f", "t", (good, far), Shape("s", True)).verdict() == SHAPE_ONLY
    assert Figure("f", "t", (good, far)).verdict() == NOT_REPRODUCED
    assert Figure("f", "t", (none,)).verdict() == NOT_ATTEMPTED


numbers = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6))


@given(paper=numbers, ours=numbers, factor=st.floats(allow_nan=True, allow_infinity=True),
       shape=st.sampled_from([None, True, False]), valid=st.sampled_from([None, True, False]),
       check=st.sampled_from([None, True, False]))
def test_every_claim_gets_exactly_one_verdict(paper, ours, factor, shape, valid, check):
    c = Claim("x", paper=paper, ours=ours, scale_factor=factor, validity=Validity(valid), check=check)
    v, why = verdict(c, None if shape is None else Shape("s", shape))
    assert v in VERDICTS and isinstance(why, str) and why
    if v == REPRODUCED and paper is not None:
        assert c.at_scale is not None and 0.5 <= c.at_scale <= 2.0 and not math.isnan(c.at_scale)


def test_claims_files_load_and_refuse_malformed_ones(tmp_path):
    d = tmp_path / "x-paper"
    d.mkdir()
    (d / "claims.toml").write_text('[source]\npaper = "P"\n[[claim]]\nid = "a"\nfigure = "Fig. 1"\ntext = "t"\n'
                                   'value = 2.5\nsource = "§1"\n')
    got = paperdata.load("x", tmp_path)
    assert got.value("a") == 2.5
    assert paperdata.claim(got["a"], 5.0).ratio == 2.0
    with pytest.raises(paperdata.PaperDataError, match="no claim 'b'"):
        got["b"]
    for bad, msg in [('[[claim]]\nid="a"', "needs a \\[source\\]"),
                     ('[source]\npaper="P"\n[[claim]]\nid="a"\nfigure="F"\ntext="t"\nsource="s"\nvalue="2"', "number"),
                     ('[source]\npaper="P"\n[[claim]]\nid="a"\nfigure="F"\ntext="t"\nsource="s"\nextra=1', "unknown"),
                     ("not = [toml", "not TOML")]:
        (d / "claims.toml").write_text(bad)
        with pytest.raises(paperdata.PaperDataError, match=msg):
            paperdata.load("x", tmp_path)
    with pytest.raises(paperdata.PaperDataError, match="cannot read"):
        paperdata.load("nothing", tmp_path)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=12))
def test_validity_of_any_document_never_raises(doc):
    for v in (Validity.of_run(doc if isinstance(doc, dict) else None), Validity.of_runs([doc] if isinstance(doc, dict)
                                                                                       else [])):
        assert v.valid in (None, True, False) and isinstance(v.text(), str)
    if isinstance(doc, dict):
        Validity.of_run({**doc, "valid": True, "checks": doc})
