"""corruptd's decision logic (sans-IO) and its loop on the live testbed."""

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack.linkguardian.corruptd import CorruptionMonitor, expected_effective_loss

S = 1_000_000_000


def test_quiet_link_is_left_alone():
    m = CorruptionMonitor(threshold=1e-4)
    for i in range(20):
        assert m.observe("sw1-sw2", "sw1:sw2", tx_frames=10_000 * i, fcs_errors=0, now_ns=i * S) is None


def test_corrupting_link_is_protected_once_with_eq2_copies():
    m = CorruptionMonitor(threshold=1e-4, target=1e-8)
    decisions = [m.observe("sw1-sw2", "sw1:sw2", 10_000 * i, 10 * i, i * S) for i in range(10)]
    made = [d for d in decisions if d is not None]
    assert len(made) == 1
    d = made[0]
    assert d.actual_loss == pytest.approx(1e-3)
    assert d.copies == 2  # LinkGuardian §4.1: 1e-3 needs N = 2 for a 1e-8 target
    assert expected_effective_loss(1e-3, 2) == pytest.approx(1e-9)


def test_needs_enough_evidence():
    m = CorruptionMonitor(threshold=1e-4, min_frames=2000, min_errors=3)
    assert m.observe("l", "a:b", 0, 0, 0) is None
    assert m.observe("l", "a:b", 500, 2, S) is None  # too few frames and errors
    assert m.observe("l", "a:b", 5000, 5, 2 * S) is not None


def test_window_forgets_old_corruption():
    m = CorruptionMonitor(threshold=1e-3, window_ns=5 * S, min_frames=1000)
    m.observe("l", "a:b", 0, 0, 0)
    # a burst of errors long ago, then a clean link: the rate over the window falls
    m.observe("l", "a:b", 1000, 0, 1 * S)
    for i in range(2, 30):
        d = m.observe("l", "a:b", 1000 * i, 0, i * S)
        assert d is None
    assert m.rate("l", "a:b") == 0.0


@given(st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 50)), min_size=1, max_size=60))
def test_rate_never_negative_and_decision_only_above_threshold(steps):
    m = CorruptionMonitor(threshold=5e-3, min_frames=100, min_errors=1)
    tx = bad = 0
    for i, (dtx, dbad) in enumerate(steps):
        tx += dtx
        bad += min(dbad, dtx)
        d = m.observe("l", "a:b", tx, bad, i * S)
        if d is not None:
            assert d.actual_loss >= 5e-3 and d.copies >= 1
        r = m.rate("l", "a:b")
        assert r is None or r >= 0


def test_bad_settings():
    with pytest.raises(ValueError):
        CorruptionMonitor(threshold=0)
    with pytest.raises(ValueError):
        CorruptionMonitor(target=2)


@pytest.mark.netns
def test_corruptd_enables_lg_on_the_live_link(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    import subprocess

    from netstack import runtime
    from netstack.experiment import finish_tool, start_tool, tool_argv
    from netstack.linkguardian.corruptd import run_corruptd
    from netstack.topo import impair
    from netstack.topo.model import load_topology

    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path))
    prefix = "cd" + os.urandom(2).hex()
    state = runtime.up(load_topology(None), prefix, apply_impairments=False)
    try:
        impair.apply_impairment(prefix, state.namespaces["sw1"], "p-sw2", corrupt=0.02, backend="nft")
        sink = start_tool(state, "h2", "udp-sink", "--quiet", "1")
        # traffic runs while corruptd watches (its first poll is the baseline)
        sender = subprocess.Popen(tool_argv(state, "h1", "udp-send", "--dst", "10.0.0.2", "--count", "8000",
                                            "--rate", "4000"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        decisions = run_corruptd(prefix, CorruptionMonitor(threshold=1e-3, min_frames=1000), interval_s=0.3,
                                 duration_s=2.0, say=lambda m: None)
        sender.wait(timeout=60)
        finish_tool(sink)
        assert [(d.link, d.direction) for d in decisions] == [("sw1-sw2", "sw1:sw2")]
        lg = runtime.control(prefix, "sw1", "lg_status")
        assert lg["p-sw2"]["sender"]["enabled"]
    finally:
        runtime.down(prefix)
