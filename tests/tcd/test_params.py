"""TCD's parameters: the derivation of T_on^max, K and W, overrides, refusals; the ECN baseline's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers.tcd import PortState, TcdCodepoints
from netstack.errors import ConfigError
from netstack.tcd.params import EcnParams, TcdParamError, TcdParams, marker_options

G40 = 40_000_000_000


def paper() -> dict:
    """TCD §3.1's CEE setting: 40 Gbit/s, 4 us links, PFC threshold 320 KB (XON 300 KB: ours)."""
    return {"rate_bps": G40, "xoff_bytes": 320_000, "xon_bytes": 300_000, "delay_ns": 4_000}


def test_derivation_at_the_papers_setting():
    p = TcdParams.derive(**paper())
    # (320000 - 300000) B * 8 / (40G - 36G) = 40 us; one 1500 B MTU at 40G = 300 ns; + 2 (4000 + 300)
    assert p.t_on_max_ns == 40_000 + 2 * (4_000 + 300) == 48_600
    # BDP 40G x 8 us = 40000 B, + the 20000 B band
    assert p.k_bytes == 60_000
    assert p.window_ns == p.t_on_max_ns
    assert p.initial is PortState.NON_CONGESTION
    assert p.derived["inputs"]["pfc_processing_ns"] == 300
    json.dumps(p.to_dict())


def test_r_min_and_processing_change_t_on_max():
    p = TcdParams.derive(**paper(), r_min_fraction=0.5, pfc_processing_ns=1_000)
    assert p.t_on_max_ns == 8_000 + 2 * (4_000 + 1_000)


def test_never_paused_port():
    p = TcdParams.derive(rate_bps=G40, xoff_bytes=None, xon_bytes=None, delay_ns=4_000)
    assert p.t_on_max_ns == 2 * 4_000 + 300
    assert p.k_bytes == 40_000
    assert "never paused" in p.derived["t_on_max_ns"]
    tiny = TcdParams.derive(rate_bps=G40, xoff_bytes=None, xon_bytes=None, delay_ns=0)
    assert tiny.k_bytes == 3_000  # at least two MTUs


def test_overrides_win_and_window_follows_t_on_max():
    p = TcdParams.derive(**paper(), t_on_max_ns=50_000_000, k_bytes=40_000)
    assert (p.t_on_max_ns, p.k_bytes, p.window_ns) == (50_000_000, 40_000, 50_000_000)
    assert p.derived["t_on_max_ns"] == "given" and p.derived["k_bytes"] == "given"
    p = TcdParams.derive(**paper(), window_ns=7)
    assert p.window_ns == 7 and p.derived["window_ns"] == "given"


def test_round_trip_through_a_dict():
    p = TcdParams.derive(**paper(), codepoints=TcdCodepoints(ect=1, ue=2, ce=3), initial=PortState.UNDETERMINED)
    q = TcdParams.from_dict(json.loads(json.dumps(p.to_dict())))
    assert q == p and q.derived == p.derived


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"xon_bytes": 320_000}, "xon_bytes", "below xoff"),
    ({"xon_bytes": 400_000}, "xon_bytes", "below xoff"),
    ({"rate_bps": None}, "rate_bps", "unpaced"),
    ({"rate_bps": 0}, "rate_bps", "> 0"),
    ({"rate_bps": -1}, "rate_bps", "> 0"),
    ({"rate_bps": 4e10}, "rate_bps", "integer"),
    ({"rate_bps": True}, "rate_bps", "integer"),
    ({"r_min_fraction": 1.0}, "r_min_fraction", "(0, 1)"),
    ({"r_min_fraction": 0}, "r_min_fraction", "(0, 1)"),
    ({"r_min_fraction": float("nan")}, "r_min_fraction", "number"),
    ({"r_min_fraction": True}, "r_min_fraction", "number"),
    ({"delay_ns": -1}, "delay_ns", ">= 0"),
    ({"delay_ns": 1.5}, "delay_ns", "integer"),
    ({"xoff_bytes": None}, "xoff_bytes", "both"),
    ({"xoff_bytes": "320KB"}, "xoff_bytes", "integer"),
    ({"xoff_bytes": False}, "xoff_bytes", "integer"),
    ({"t_on_max_ns": 0}, "t_on_max_ns", "> 0"),
    ({"k_bytes": -5}, "k_bytes", "> 0"),
    ({"window_ns": True}, "window_ns", "integer"),
    ({"mtu": 0}, "mtu", "> 0"),
])
def test_refusals_name_the_problem(change, field, words):
    with pytest.raises(TcdParamError) as exc:
        TcdParams.derive(**{**paper(), **change})
    assert exc.value.field == field and words in exc.value.problem
    assert isinstance(exc.value, ConfigError)


def test_direct_construction_is_checked():
    with pytest.raises(TcdParamError, match="t_on_max_ns"):
        TcdParams(0, 1, 1)
    with pytest.raises(TcdParamError, match="initial"):
        TcdParams(1, 1, 1, initial=7)
    with pytest.raises(TcdParamError, match="codepoints"):
        TcdParams(1, 1, 1, codepoints=(1, 2, 3))
    with pytest.raises(TcdParamError, match="unknown"):
        TcdParams.from_dict({"t_on_max_ns": 1, "k_bytes": 1, "window_ns": 1, "bogus": 2})


@settings(max_examples=200, deadline=None)
@given(rate=st.integers(1, 10**12), xon=st.integers(0, 10**7), band=st.integers(1, 10**7),
       delay=st.integers(0, 10**9), frac=st.floats(0.001, 0.999), mtu=st.integers(1, 9000),
       pfc=st.none() | st.integers(0, 10**6))
def test_valid_inputs_give_positive_params(rate, xon, band, delay, frac, mtu, pfc):
    p = TcdParams.derive(rate_bps=rate, xoff_bytes=xon + band, xon_bytes=xon, delay_ns=delay, r_min_fraction=frac,
                         mtu=mtu, pfc_processing_ns=pfc)
    assert p.t_on_max_ns > 0 and p.k_bytes >= 2 * mtu and p.window_ns == p.t_on_max_ns
    assert p.t_on_max_ns >= 2 * delay
    json.dumps(p.to_dict())


# ------------------------------------------------------------------------------ ECN baseline
def test_ecn_params_defaults_and_checks():
    e = EcnParams()
    assert (e.mode, e.k_bytes) == ("threshold", 200_000)  # TCD §3.1's K_max
    assert EcnParams.from_dict(e.to_dict()) == e
    for kw, field in [({"mode": "wred"}, "mode"), ({"k_bytes": -1}, "k_bytes"), ({"kmin_bytes": 300_000}, "kmin_bytes"),
                      ({"pmax": 0}, "pmax"), ({"pmax": 1.5}, "pmax"), ({"seed": 1.0}, "seed"),
                      ({"kmax_bytes": True}, "kmax_bytes")]:
        with pytest.raises(TcdParamError) as exc:
            EcnParams(**kw)
        assert exc.value.field == field
    assert EcnParams(pmax=1).pmax == 1.0


def test_marker_options():
    o = marker_options("tcd", rate_bps=G40, delay_ns=4_000, xoff_bytes=320_000, xon_bytes=300_000, classes=[3, 0])
    assert o["classes"] == [0, 3] and o["params"]["k_bytes"] == 60_000 and o["ecn"] is None
    o = marker_options("ecn", rate_bps=G40, delay_ns=4_000, xoff_bytes=320_000, xon_bytes=300_000)
    assert o["ecn"]["k_bytes"] == 60_000  # the same K as TCD's, by default
    o = marker_options("ecn", rate_bps=None, delay_ns=0, ecn_mode="red", ecn_pmax=0.2)
    assert o["params"] is None and o["ecn"]["mode"] == "red" and o["ecn"]["k_bytes"] == 200_000
    assert o["ce_rule"] == "tcd"
    o = marker_options("tcd", rate_bps=G40, delay_ns=4_000, ce_rule="ecn")  # CE by the baseline's rule
    assert o["ce_rule"] == "ecn" and o["ecn"] == {**EcnParams(k_bytes=o["params"]["k_bytes"]).to_dict()}
    o = marker_options("tcd", rate_bps=G40, delay_ns=4_000, ce_rule="ecn", ecn_mode="red", ecn_kmin_bytes=5_000)
    assert o["ecn"]["mode"] == "red" and o["ecn"]["kmax_bytes"] == 200_000 and o["ecn"]["pmax"] == 0.01
    for marker, kw, field in [("tcp", {}, "marker"), ("tcd", {"ecn_k_bytes": -1}, "ecn_k_bytes"),
                              ("tcd", {"ce_rule": "red"}, "ce_rule"),
                              ("tcd", {"bogus": 1}, "bogus"), ("ecn", {"ecn_pmax": 2.0}, "ecn_pmax"),
                              ("tcd", {"classes": [8]}, "classes"), ("tcd", {"classes": []}, "classes"),
                              ("tcd", {"classes": [1, 1]}, "classes")]:
        with pytest.raises(TcdParamError) as exc:
            marker_options(marker, rate_bps=G40, delay_ns=4_000, **kw)
        assert exc.value.field == field
