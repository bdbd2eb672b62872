"""Eq. 2 and LGParams (LinkGuardian §3.3, §3.4, §4 "Parameters")."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack.linkguardian import LGParams, copies_for
from netstack.linkguardian.params import ARTIFACT_COPIES, PAPER_SETTINGS
from netstack.switch import ConfigError


@pytest.mark.parametrize(("actual", "n"), [(1e-5, 1), (1e-4, 1), (1e-3, 2)])
def test_eq2_values_of_section_4_1(actual, n):
    # §4.1: "LinkGuardian retransmits 1, 1, and 2 copies for each lost packet for these loss rates"
    assert copies_for(1e-8, actual) == n


def test_eq2_more_values():
    assert copies_for(1e-8, 1e-2) == 3  # 1e-2^4 = 1e-8 exactly: no extra copy for float noise
    assert copies_for(1e-8, 5e-2) == 6
    assert copies_for(1e-8, 1e-9) == 1  # already below target: still one copy (at least 1)
    assert copies_for(1e-6, 1e-3) == 1


@given(st.floats(1e-12, 0.5), st.floats(1e-6, 0.9))
def test_eq2_meets_the_target_with_the_fewest_copies(target, actual):
    n = copies_for(target, actual)
    assert n >= 1
    # Eq. 1 holds for N (up to float noise) ...
    assert actual ** (n + 1) <= target * (1 + 1e-6)
    # ... and N - 1 would not do (unless N is the floor of 1)
    if n > 1:
        assert actual ** n > target * (1 - 1e-6)


@pytest.mark.parametrize(("target", "actual"), [(1e-8, 0.0), (1e-8, 1.0), (1e-8, 1.5), (0.0, 1e-3), (1.0, 1e-3),
                                                (1e-8, -0.1), (1e-8, math.nan), ("x", 1e-3), (1e-8, None),
                                                (True, 0.1)])
def test_eq2_rejects_meaningless_rates(target, actual):
    with pytest.raises(ValueError):
        copies_for(target, actual)


def test_defaults_are_the_papers_100g_settings():
    p = LGParams()
    assert p.mode == "blocking" and p.blocking
    assert p.ack_no_timeout_ns == 7_000  # §4 "Parameters": 7 us at 100G
    assert p.pause_threshold_bytes == 40_000 and p.resume_bytes == 37_000  # pause - 2 MTU (§3.3)
    assert p.max_dummies == 3 and p.lack_repeats == 2
    assert p.data_classes == (0, 1, 2, 3, 4, 5, 6) and p.retx_class == 7
    assert p.n_copies == ARTIFACT_COPIES  # nothing measured: the artifact's fixed 2


def test_copies_explicit_or_from_measured_loss():
    assert LGParams(copies=4, actual_loss=1e-5).n_copies == 4
    assert LGParams(actual_loss=1e-3).n_copies == 2
    assert LGParams(actual_loss=1e-4, target_loss=1e-12).n_copies == 2


def test_paper_settings_per_link_speed():
    for gbps, (timeout, pause, resume) in PAPER_SETTINGS.items():
        p = LGParams.paper(gbps)
        assert (p.ack_no_timeout_ns, p.pause_threshold_bytes, p.resume_bytes) == (timeout, pause, resume)
    assert LGParams.paper(25).ack_no_timeout_ns == 7_500
    with pytest.raises(ConfigError):
        LGParams.paper(40)


def test_scaled_stretches_times_and_keeps_bytes():
    p = LGParams().scaled(1000)  # 100G -> 100 Mb/s
    assert p.ack_no_timeout_ns == 7_000_000
    assert p.pause_threshold_bytes == 40_000 and p.resume_bytes == 37_000
    assert p.tx_buffer_limit_bytes == LGParams().tx_buffer_limit_bytes
    assert p.time_scale == 1000.0
    assert p.scaled(2).time_scale == 2000.0
    with pytest.raises(ConfigError):
        LGParams().scaled(0)


@pytest.mark.parametrize("changes", [
    {"mode": "fast"},
    {"copies": 0},
    {"copies": 17},
    {"copies": 1.5},
    {"target_loss": 0},
    {"actual_loss": 1.0},
    {"ack_no_timeout_ns": 0},
    {"pause_threshold_bytes": 1000, "resume_threshold_bytes": 1000},
    {"pause_threshold_bytes": 0},
    {"max_dummies": -1},
    {"lack_repeats": 0},
    {"reorder_buffer_limit_bytes": 1000},  # below the pause threshold with backpressure on
    {"data_class": 8},
    {"data_class": ()},
    {"data_class": "0"},
    {"retx_class": 3},  # inside the default data classes
    {"data_class": (0, 1), "retx_class": 0},
    {"backpressure": "yes"},
    {"time_scale": -1},
])
def test_invalid_settings_raise_config_error(changes):
    with pytest.raises(ConfigError) as exc:
        LGParams(**changes)
    assert "linkguardian." in str(exc.value)


def test_resume_default_never_negative_and_overflow_allowed_without_backpressure():
    assert LGParams(pause_threshold_bytes=2000, reorder_buffer_limit_bytes=4000).resume_bytes == 0
    p = LGParams(backpressure=False, reorder_buffer_limit_bytes=1000)
    assert p.reorder_buffer_limit_bytes == 1000


def test_dict_round_trip_and_unknown_keys():
    p = LGParams(mode="nb", copies=3, data_class=[0, 2], retx_class=5, ack_no_timeout_ns=2 * 10**6)
    d = p.to_dict()
    json.dumps(d)
    assert d["data_class"] == [0, 2] and d["n_copies"] == 3 and d["resume_bytes"] == 37_000
    back = {k: v for k, v in d.items() if k not in ("n_copies", "resume_bytes")}
    assert LGParams.from_dict(back) == p
    with pytest.raises(ConfigError, match="unknown field"):
        LGParams.from_dict({"thresh": 1})
    with pytest.raises(ConfigError):
        p.with_changes(copies=0)
    assert p.with_changes(copies=1).n_copies == 1
