"""The host CPU model in the onepipe scenario (issue 32, netstack/onepipe/cpucost.py): with ``cpu``
on, a process's core, not the offered load, sets what it delivers, and reliable 1Pipe's core
delivers less than best effort's by the ratio of their costs; with it off, every run is what it was."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers.onepipe import OnePipeOpcode
from netstack.onepipe import cpucost
from netstack.onepipe.cpucost import CpuCosts, EngineCost, Measured, OpCosts, Probe, calibrate
from netstack.onepipe.scenarios import fabric_topology
from netstack.sim.scenario import RunSpec, run

SMALL = fabric_topology(tors=2, hosts_per_tor=2)  # 4 hosts (+ seq, the reliable controller's), 100 Gbit/s
COSTS = cpucost.DEFAULT_COSTS
DATA, ACK = int(OnePipeOpcode.DATA), int(OnePipeOpcode.ACK)


def _run(mode: str = "onepipe", cpu: bool = True, rate: float | None = None, duration: int = 40_000,
         **extra: Any) -> dict[str, Any]:
    # offered: four times best effort's modelled capacity (scatterings of 2 messages)
    params = {"procs": 4, "mode": mode, "cpu": cpu, "rate": rate or 2 * COSTS.be_capacity, "drain_ns": 30_000,
              **extra}
    return run(RunSpec("onepipe", SMALL, 1, duration, params))


@pytest.fixture(scope="module")
def saturated() -> dict[str, dict[str, Any]]:
    return {mode: _run(mode) for mode in ("onepipe", "reliable")}


def test_a_saturated_core_delivers_at_the_modelled_capacity(saturated: dict[str, dict[str, Any]]) -> None:
    for mode, doc in saturated.items():
        res = doc["result"]
        cpu = res["cpu"]
        assert res["order"]["ok"] and res["send_failed"] == 0, mode
        assert res["throughput_window_ns"] == [12_000, 40_000]  # the saturated pipeline has filled
        assert cpu["utilisation"]["min"] > 0.95, mode  # every core busy all through the window
        # the core sets the rate: far below what was offered, near what the model's costs allow (the
        # capacity is calibrated at 32 processes, whose mix of ACKs per message differs from 4's)
        assert res["delivered_per_proc_per_s"] < 0.5 * 4 * COSTS.be_capacity, mode
        assert res["delivered_per_proc_per_s"] == pytest.approx(cpu["capacity_per_proc_per_s"], rel=0.3), mode
        # the application blocked: its core never owes much more than the limit plus one datagram's work
        assert cpu["backlog_at_stop_ns"]["max"] < cpu["backlog_limit_ns"] + 2_000, mode


def test_reliable_delivers_less_than_best_effort_by_the_ratio_of_their_costs(
        saturated: dict[str, dict[str, Any]]) -> None:
    be, rel = saturated["onepipe"]["result"], saturated["reliable"]["result"]
    ratio = rel["delivered_per_proc_per_s"] / be["delivered_per_proc_per_s"]
    assert ratio < 0.95
    assert ratio == pytest.approx(COSTS.reliable_capacity / COSTS.be_capacity, rel=0.35)
    # the same load without the model: reliable delivers what best effort does
    off = {m: _run(m, cpu=False, rate=COSTS.be_capacity / 4)["result"]["delivered_per_proc_per_s"]
           for m in ("onepipe", "reliable")}
    assert off["reliable"] == pytest.approx(off["onepipe"], rel=0.25)


def test_without_the_model_the_same_load_is_delivered_as_offered() -> None:
    doc = _run(cpu=False, rate=COSTS.be_capacity)  # twice the capacity
    res = doc["result"]
    assert "cpu" not in res and "cpu" not in doc["params"]  # runs without it record nothing new
    assert res["delivered_per_proc_per_s"] > 1.5 * COSTS.be_capacity  # nothing limits it


def test_an_unsaturated_core_delivers_the_offered_load() -> None:
    res = _run(rate=COSTS.be_capacity / 8)["result"]  # a quarter of capacity
    assert res["cpu"]["utilisation"]["mean"] < 0.6
    assert res["delivered_per_proc_per_s"] == pytest.approx(res["offered_per_proc_per_s"], rel=0.3)


def test_the_probe_splits_delivery_work_off_the_calls_that_delivered() -> None:
    class Ep:
        def __init__(self) -> None:
            self.actions: list[Any] = []

    class Proc:
        ep = Ep()

    from netstack.onepipe.actions import Deliver

    probe = Probe()
    probe.TRIM = 0.0  # a handful of calls: keep every one
    proc = Proc()
    for _ in range(10):
        probe.record(proc, "rx", DATA, 100)  # delivers nothing: 100 ns
    proc.ep.actions = [Deliver(1, "a", b""), Deliver(2, "a", b"")]
    probe.record(proc, "rx", DATA, 160)  # the same call delivering two: 30 ns a message
    proc.ep.actions = []
    probe.record(proc, "send", 2, 80)
    probe.record(proc, "timer", 0, 50)
    e = probe.costs(procs=1, seconds=1.0)
    assert e.data == 100 and e.deliver == 30 and e.send == 40 and e.timer == 50 and e.ack == 0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1.0, 50_000.0), min_size=12, max_size=12), st.floats(0.1, 3.0), st.floats(0.1, 3.0))
def test_calibration_gives_best_effort_the_papers_rate_and_reliable_its_measured_share(
        xs: list[float], acks_be: float, acks_r: float) -> None:
    def engine(v: list[float], acks: float) -> EngineCost:
        return EngineCost(send=v[0], data=v[1], deliver=v[2], ack=v[3], barrier=v[4], timer=v[5], acks_per_msg=acks,
                          timers_per_s=333_333.0, barriers_per_s=200_000.0)

    m = Measured(engine(xs[:6], acks_be), engine(xs[6:], acks_r))
    c: CpuCosts = calibrate(m)
    assert c.be_capacity == cpucost.PAPER_BE_MSGS_PER_S
    spent = c.factor * (c.be_capacity * m.be.per_msg() + m.be.per_s())
    assert spent == pytest.approx(1e9)  # best effort's core full at the paper's rate
    # reliable: the same factor, so its share of the core follows from the measured work alone
    r_spent = c.factor * (max(c.reliable_capacity, 0.0) * m.reliable.per_msg() + m.reliable.per_s())
    assert r_spent == pytest.approx(1e9) or c.reliable_capacity <= 0
    assert isinstance(c.be, OpCosts) and c.be.send == round(c.factor * xs[0])


def test_the_probe_leaves_out_the_slowest_calls() -> None:
    class Proc:
        class ep:  # a stand-in for the endpoint: no actions
            actions: list[Any] = []

    probe = Probe()
    for _ in range(199):
        probe.record(Proc(), "rx", ACK, 1_000)
    probe.record(Proc(), "rx", ACK, 5_000_000)  # the process was preempted for 5 ms
    assert probe.costs(procs=1, seconds=1.0).ack == 1_000
