"""The onepipe scenario's background TCP flows (netstack/onepipe/background.py; 1Pipe's Fig. 12):
they run, they cross the ToR uplinks, 1Pipe keeps its order beside them and waits longer."""

from __future__ import annotations

import pytest

from netstack.onepipe.scenarios import fabric_topology
from netstack.sim.scenario import RunSpec, ScenarioError, run

TOPO = fabric_topology(tors=2, hosts_per_tor=2, uplink_rate="200Gbit")
PARAMS = {"procs": 4, "rate": 20_000.0, "fanout": 2, "size": 64, "t_beacon_ns": 3_000}


def _run(**extra):
    return run(RunSpec("onepipe", TOPO, 1, 60_000, {**PARAMS, **extra}))["result"]


def test_backlogged_flows_move_data_and_1pipe_waits_behind_them_in_order():
    idle, busy = _run(), _run(bg_flows=2)
    assert "background" not in idle
    bg = busy["background"]
    assert bg["flows"] == 8 and bg["goodput_gbps"] > 50 and bg["refills"] > 8  # 2 a host, backlogged
    assert busy["order"]["ok"] and busy["delivered"] == busy["sent"] > 0
    assert busy["latency_ns"]["mean"] > 2 * idle["latency_ns"]["mean"]  # queued behind the flows


def test_bad_background_settings_are_refused():
    for bad in (-1, 65, 1.5, True):
        with pytest.raises(ScenarioError, match="bg_flows"):
            _run(bg_flows=bad)
    with pytest.raises(ScenarioError, match="beside 1Pipe"):
        _run(bg_flows=1, mode="sequencer")
