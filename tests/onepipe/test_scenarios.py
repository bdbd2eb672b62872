"""The ``onepipe`` scenario: the real endpoints and switch feature on ``netstack.sim``.

Small runs in virtual time: every message delivered in one total order (checked in memory and by
``netstack onepipe check`` on the logs the run writes), runs are a function of their seed, clock
skew costs latency and never order, loss is accounted for, and the sequencer baseline saturates.
Timings are never asserted beyond "more" and "less" between two runs of the same seed."""

from __future__ import annotations

import pytest

from netstack.onepipe import topology as op_topology
from netstack.onepipe.check import check_logs
from netstack.onepipe.params import PORT
from netstack.onepipe.scenarios import fabric_topology, latency_stats, place
from netstack.sim.scenario import RunSpec, ScenarioError, canonical_json, resolve_topology, run

SMALL = fabric_topology(tors=2, hosts_per_tor=2)  # 4 hosts (+ the sequencer's), 100 Gbit/s


def _run(seed: int = 1, duration_ns: int = 60_000, topology=SMALL, **params) -> dict:
    base = {"procs": 6, "rate": 100_000.0}
    return run(RunSpec("onepipe", topology, seed, duration_ns, {**base, **params}))


def test_every_message_is_delivered_in_one_total_order(tmp_path) -> None:
    doc = _run(log_dir=str(tmp_path))
    res = doc["result"]
    assert doc["time_scale"] == 1.0 and res["t_beacon_ns"] == 3_000
    assert res["sent"] > 50 and res["delivered"] == res["sent"]
    assert res["send_failed"] == 0 and res["unaccounted"] == 0 and res["late_dropped"] == 0
    assert res["order"] == {"ok": True, "violations": 0, "first": None}
    # six processes on four hosts: two hosts run two, whose datagrams to each other never leave the host
    assert res["hosts_used"] == 4
    lat, un, wait = res["latency_ns"], res["unordered_ns"], res["barrier_wait_ns"]
    assert lat["n"] == res["delivered"] and un["n"] == lat["n"] == wait["n"]
    assert lat["mean"] >= un["mean"] and wait["mean"] > 0 and res["overhead_ns"] == pytest.approx(wait["mean"])
    assert res["beacons"]["hosts"] > 0 and res["beacons"]["switches"] > 0
    verdict = check_logs([tmp_path])
    assert verdict.ok, verdict.summary()
    assert verdict.counts["messages"] == res["delivered"] and verdict.counts["receivers"] == 6


def test_a_run_is_a_function_of_its_seed() -> None:
    a, b, c = _run(seed=3), _run(seed=3), _run(seed=4)
    assert canonical_json(a) == canonical_json(b)
    assert canonical_json(a) != canonical_json(c)


def test_clock_skew_costs_latency_and_never_order(tmp_path) -> None:
    even = _run(skew_ns=0.0)["result"]
    skewed_doc = _run(skew_ns=10_000.0, log_dir=str(tmp_path))
    skewed = skewed_doc["result"]
    assert skewed["skew"]["mean_abs_offset_ns"] > 5_000 and even["skew"]["mean_abs_offset_ns"] == 0
    assert skewed["delivered"] == skewed["sent"] and skewed["order"]["ok"]
    assert skewed["latency_ns"]["mean"] > even["latency_ns"]["mean"] + 2_000
    assert check_logs([tmp_path]).ok


def test_loss_is_accounted_for_and_never_breaks_the_order() -> None:
    res = _run(loss=0.05, duration_ns=40_000)["result"]
    assert len(res["impaired_ports"]) == 4  # tor1 and tor2 <-> spine1, both directions
    assert res["delivered"] < res["sent"] and res["send_failed"] + res["send_unknown"] > 0
    # every message has exactly one fate (netstack/onepipe/accounting.py), none negative; the drain is long
    # enough that none is still in flight, so each lost message was reported (none forgotten)
    fates = ("delivered", "send_failed", "send_unknown", "in_flight_at_end")
    assert sum(res[k] for k in fates) == res["sent"] and all(res[k] >= 0 for k in fates)
    assert res["in_flight_at_end"] == res["unaccounted"] == 0
    assert res["order"]["ok"]


def test_the_shipped_topology_runs_at_its_own_scale() -> None:
    # 100 Mbit/s links and millisecond clock offsets: every default scales 1000x (T_beacon 3 ms)
    doc = run(RunSpec("onepipe", "onepipe", 1, None, {"procs": 4}))
    res = doc["result"]
    assert doc["time_scale"] == 1000.0 and res["t_beacon_ns"] == 3_000_000
    assert res["skew"]["offsets_ns"] == {"h1": 0, "h2": 1_000_000, "h3": -2_000_000, "h4": 500_000}
    assert res["sent"] > 0 and res["delivered"] == res["sent"] and res["order"]["ok"]


def test_the_sequencer_baseline_orders_and_saturates() -> None:
    ok = _run(mode="sequencer")["result"]
    assert ok["delivered"] == ok["sent"] and ok["order"]["ok"] and ok["seq_dropped"] == 0
    assert ok["latency_ns"]["n"] == ok["delivered"] and ok["unordered_ns"]["n"] == 0
    # 2 us a message is 0.5 M msg/s: far below the 1.2 M msg/s six processes offer
    slow = _run(mode="sequencer", seq_service_ns=2_000, seq_queue=16)["result"]
    assert slow["sequencer"]["capacity_msgs_per_s"] == 500_000
    assert slow["seq_dropped"] > 0 and slow["delivered_per_proc_per_s"] < 0.6 * slow["offered_per_proc_per_s"]
    assert slow["latency_ns"]["mean"] > 10 * ok["latency_ns"]["mean"]


def test_placement_spreads_processes_over_the_tors() -> None:
    topo = resolve_topology(SMALL)
    placed = place(topo, 6, exclude=["seq"])
    assert [h for _, h, _ in placed] == ["h1", "h3", "h2", "h4", "h1", "h3"]  # h1, h2 on tor1; h3, h4 on tor2
    assert [port for _, _, port in placed] == [PORT + 1] * 4 + [PORT + 2] * 2
    with pytest.raises(ScenarioError, match="ports"):
        place(topo, 4 * 99 + 1, exclude=["seq"])
    assert set(op_topology.validate(topo)) == {"spine1", "tor1", "tor2"}


def test_bad_parameters_are_scenario_errors() -> None:
    with pytest.raises(ScenarioError, match="mode"):
        _run(mode="paxos")
    with pytest.raises(ScenarioError, match="rate"):
        _run(rate=-1.0)
    with pytest.raises(ScenarioError, match="sequencer"):
        run(RunSpec("onepipe", fabric_topology(tors=1, hosts_per_tor=2, sequencer=False), 1, 10_000,
                    {"procs": 2, "mode": "sequencer"}))


def test_latency_stats() -> None:
    s = latency_stats(list(range(1, 1001)))
    assert s == {"n": 1000, "mean": 500.5, "p50": 500, "p99": 990, "p999": 999, "max": 1000}
    assert latency_stats([])["mean"] is None


def test_reliable_mode_delivers_everything_in_one_order_a_little_later_than_best_effort() -> None:
    """mode=reliable (netstack.onepipe.rscenario): the reliable endpoint, the switches under a
    controller on the sequencer's host. Same seed and load: the same messages, all delivered, in
    order; the commit phase adds latency (one round trip, design topic §7)."""
    be = _run(duration_ns=40_000)["result"]
    rel = _run(duration_ns=40_000, mode="reliable")["result"]
    assert rel["sent"] == be["sent"] > 20
    assert rel["delivered"] == rel["sent"] and rel["send_failed"] == 0
    assert rel["order"]["ok"] and rel["late_dropped"] == 0
    assert rel["latency_ns"]["mean"] > be["latency_ns"]["mean"]
    assert rel["endpoints"]["registrations"] == 6 and rel["controller"]["registrations"] == 6


@pytest.mark.parametrize("mode", ["onepipe", "reliable", "hostseq"])
def test_a_host_stack_slows_every_path_and_never_the_order(mode: str) -> None:
    """``nic_ns`` (netstack.sim.hosts.Host.stack_ns): every host's stack one way, each way. The
    unordered latency (the message whole at its receiver) grows by the two stacks it crosses on
    every path, same-host ones included (six processes on four hosts); the rest keeps its order."""
    base = _run(duration_ns=40_000, mode=mode)
    slow = _run(duration_ns=40_000, mode=mode, nic_ns=800)
    a, b = base["result"], slow["result"]
    assert "nic_ns" not in base["params"] and "nic_ns" not in a and b["nic_ns"] == 800
    assert b["sent"] == a["sent"] > 20 and b["delivered"] == b["sent"] and b["order"]["ok"]
    if mode != "hostseq":  # (a baseline has no unordered baseline of its own)
        assert b["unordered_ns"]["mean"] >= a["unordered_ns"]["mean"] + 1_600 - 1
    assert b["latency_ns"]["mean"] > a["latency_ns"]["mean"] + 1_000
    with pytest.raises(ScenarioError, match="nic_ns"):
        _run(nic_ns=-1)


def test_reliable_mode_recovers_from_a_crash() -> None:
    """kill=1: the last process crashes mid-run; the controller hears of it from its ToR, records
    it, every survivor runs its callback, the switches release it and delivery goes on. The steps
    come in that order, and everything the survivors sent to each other is delivered in order."""
    res = _run(duration_ns=200_000, mode="reliable", kill=1, rate=20_000.0, drain_ns=200_000)["result"]
    rec = res["recovery"]
    assert rec["killed"] == 1 and rec["callbacks"] == 5
    assert 0 < rec["detect_ns"] <= rec["record_ns"] <= rec["release_ns"] <= rec["resume_ns"]
    assert res["order"]["ok"] and res["late_dropped"] == 0
    assert res["controller"]["releases"] >= 1


def test_reliable_mode_needs_a_host_for_the_controller() -> None:
    with pytest.raises(ScenarioError, match="controller"):
        _run(topology=fabric_topology(tors=2, hosts_per_tor=2, sequencer=False), mode="reliable")
