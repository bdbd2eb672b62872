"""Loss at the receiving library (the ``onepipe`` scenario's ``loss_at = "receivers"``), where
1Pipe's Fig. 9b places it ("1Pipe: Scalable Total Order Communication in Data Center Networks",
§7.1: "random message drop in lib1pipe receiver"): every datagram a process receives but the
controller's is dropped with probability ``loss``, seeded, in the simulated process's shell.

Small runs in virtual time; the rates are asserted within a few standard deviations of a
binomial draw, never a timing."""

from __future__ import annotations

import math

import pytest

from headers.onepipe import OnePipeOpcode, beacon
from netstack.onepipe.scenarios import fabric_topology
from netstack.onepipe.simproc import RxLoss
from netstack.sim.scenario import RunSpec, ScenarioError, canonical_json, run

SMALL = fabric_topology(tors=2, hosts_per_tor=2)  # 4 hosts (+ the sequencer's, where the controller runs)


def _run(duration_ns: int = 60_000, **params) -> dict:
    base = {"procs": 6, "rate": 100_000.0, "loss_at": "receivers"}
    return run(RunSpec("onepipe", SMALL, 1, duration_ns, {**base, **params}))


def _within(dropped: int, seen: int, p: float, sigmas: float = 5.0) -> bool:
    return abs(dropped - p * seen) <= sigmas * math.sqrt(seen * p * (1 - p))


def test_the_library_drops_at_the_stated_rate_and_counts_by_opcode() -> None:
    frame = beacon(1_000, 0).to_bytes()
    a, b = RxLoss(0.1, "7/rx-loss/p1"), RxLoss(0.1, "7/rx-loss/p1")
    got = [a.drops(frame) for _ in range(20_000)]
    assert got == [b.drops(frame) for _ in range(20_000)]  # seeded: the same draws
    assert a.seen == 20_000 and a.dropped == sum(got) and _within(a.dropped, a.seen, 0.1)
    assert a.by_op == {OnePipeOpcode.BEACON.name: a.dropped}
    none = RxLoss(1e-9, "7/rx-loss/p1")
    assert not any(none.drops(frame) for _ in range(1_000)) and none.seen == 1_000 and none.by_op == {}


def test_best_effort_under_receiver_loss_accounts_for_every_message() -> None:
    res = _run(loss=0.2, duration_ns=40_000)["result"]
    assert res["loss_at"] == "receivers" and res["impaired_ports"] == []  # the links carry everything
    rx = res["receiver_loss"]
    assert rx["dropped"] == sum(rx["dropped_by_opcode"].values()) > 0 and _within(rx["dropped"], rx["seen"], 0.2)
    assert rx["dropped_by_opcode"].get("DATA", 0) > 0 and rx["dropped_by_opcode"].get("BEACON", 0) > 0
    assert res["delivered"] < res["sent"] and res["send_failed"] + res["send_unknown"] > 0
    fates = ("delivered", "send_failed", "send_unknown", "in_flight_at_end")
    assert sum(res[k] for k in fates) == res["sent"] and res["unaccounted"] == 0
    assert res["order"]["ok"]


def test_reliable_retransmits_what_the_receivers_drop_and_delivers_everything_in_order() -> None:
    """R-1Pipe's prepare phase (§5: the sender uses ACKs to detect and recover losses) resends
    what a library dropped: every message delivered, in one order, nothing failed, nothing
    declared failed; the controller's datagrams are never dropped, so every process registers."""
    lossless = _run(mode="reliable", duration_ns=40_000)["result"]
    res = _run(mode="reliable", loss=0.1, duration_ns=40_000)["result"]
    rx = res["receiver_loss"]
    assert rx["dropped"] > 0 and _within(rx["dropped"], rx["seen"], 0.1)
    assert res["sent"] == lossless["sent"] and res["delivered"] == res["sent"]
    assert res["send_failed"] == res["send_unknown"] == res["unaccounted"] == 0
    assert res["order"]["ok"] and res["recovery"]["callbacks"] == 0
    assert res["endpoints"]["retransmits"] > lossless["endpoints"]["retransmits"]
    assert res["controller"]["registrations"] == 6
    assert res["latency_ns"]["mean"] > lossless["latency_ns"]["mean"]


def test_no_loss_at_the_receivers_is_the_run_without_loss() -> None:
    """loss 0 draws nothing: the same run as the default placement's, but for the recorded placement."""
    rx = _run(duration_ns=20_000)
    links = _run(duration_ns=20_000, loss_at="links")
    assert rx["result"].pop("loss_at") == "receivers" and "receiver_loss" not in rx["result"]
    assert "loss_at" not in links["params"] and "loss_at" not in links["result"]  # the default is not recorded
    assert canonical_json(rx["result"]) == canonical_json(links["result"])


def test_bad_placements_are_scenario_errors() -> None:
    with pytest.raises(ScenarioError, match="loss_at"):
        _run(loss_at="switches")
    with pytest.raises(ScenarioError, match="receiving library"):
        _run(loss_at="receivers", mode="sequencer", loss=0.01)


def test_the_paper_comparison_puts_be_and_r_with_receiver_loss_beside_the_paper() -> None:
    """``netstack bench onepipe``'s "paper vs ours" (netstack/bench/onepipe/paper.py): Fig. 9b's
    BE-chip and R-chip take the rows with the loss at the receivers, at the paper's own x, one row
    per point; the link-loss rows answer only when a run has no receiver rows (older results)."""
    from netstack.bench.onepipe import paper

    def row(system: str, loss: float, mean: float, loss_at: str = "receivers", procs: int = 512) -> dict:
        return {"runtime": "sim", "loss_at": loss_at, "system": system, "procs": procs, "loss": loss,
                "mean_us": mean, "unordered_mean_us": 1.0, "rx_seen": 1000, "rx_dropped": round(1000 * loss)}

    links = [row("1pipe", 0.0, 2.5, "links", 128), row("1pipe", 1e-1, 2.9, "links", 128)]
    figs = {"fig9b": {"sim": [row("1pipe", 1e-8, 3.0), row("1pipe", 1e-1, 3.5), row("1pipe_reliable", 1e-8, 4.0),
                              row("1pipe_reliable", 1e-1, 30.0), *links], "live": []}}
    rows = {(r["series"], r["x"]): r for r in paper.compare(figs)["rows"] if r["figure"] == "9b"}
    assert len(rows) == 9 * 8  # 5 series, R-chip loaded and 3 derived ones, 8 loss values: one row per point
    # (rows of no variant are the switch chip's: the host-delegate series say they have none)
    assert rows[("BE-host", "1e-1")]["ours"] is None and "host variant" in rows[("BE-host", "1e-1")]["note"]
    assert rows[("BE-chip", "1e-1")]["ours"] == 3.5 and rows[("BE-chip", "1e-8")]["x_ours"] is None
    assert rows[("R-chip", "1e-1")]["ours"] == 30.0 and rows[("R-chip", "1e-1")]["paper"] == pytest.approx(70.26)
    assert rows[("R-chip - BE-chip", "1e-1")]["ours"] == pytest.approx(26.5)
    assert rows[("BE-chip - unorder", "1e-8")]["ours"] == pytest.approx(2.0)
    assert "receivers" in rows[("R-chip", "1e-8")]["source"] and "100 of 1000" in rows[("R-chip", "1e-1")]["note"]
    assert rows[("R-chip", "1e-5")]["ours"] is None and "not measured at loss 1e-5" in rows[("R-chip", "1e-5")]["note"]
    # the loaded series: the loaded reliable rows (commit in beacons), only those; none in this run
    none = rows[(paper.R_CHIP_LOADED, "1e-8")]
    assert none["ours"] is None and "no loaded" in none["note"]
    # an older result's 10x rows (prompt COMMIT, not marked loaded) are not the paper's load
    figs["fig9b"]["sim"] += [{**row("1pipe_reliable", 1e-5, 50.0), "load": 10.0, "offered_per_proc": 4e5}]
    rows = {(r["series"], r["x"]): r for r in paper.compare(figs)["rows"] if r["figure"] == "9b"}
    assert rows[(paper.R_CHIP_LOADED, "1e-5")]["ours"] is None and rows[("R-chip", "1e-1")]["ours"] == 30.0
    loaded = [{**row("1pipe_reliable", x, 9.0 + 100 * x), "load": 64.0, "loaded": True, "commit": "beacons",
               "offered_per_proc": 2.56e6} for x in (1e-8, 1e-5)]
    figs["fig9b"]["sim"] += loaded
    rows = {(r["series"], r["x"]): r for r in paper.compare(figs)["rows"] if r["figure"] == "9b"}
    got = rows[(paper.R_CHIP_LOADED, "1e-5")]
    assert got["ours"] == pytest.approx(9.001) and got["paper"] == pytest.approx(20.49)
    assert "2.56 M msg/s a process (64x idle), commit in beacons" in got["source"]
    assert rows[("R-chip", "1e-1")]["ours"] == 30.0  # the idle series is still the idle rows
    assert rows[(paper.R_CHIP_LOADED, "1e-4")]["ours"] is None
    summary = paper.compare(figs)["summary"]["9b"]
    assert summary["points"] == 8 * 8  # the loaded series repeat the paper's points: not counted again
    for r in loaded:  # loaded runs judged invalid: no number, and said so
        r["valid"] = False
    rows = {(r["series"], r["x"]): r for r in paper.compare(figs)["rows"] if r["figure"] == "9b"}
    invalid = rows[(paper.R_CHIP_LOADED, "1e-5")]
    assert invalid["ours"] is None and "invalid" in invalid["note"]
    old = {(r["series"], r["x"]): r for r in paper.compare({"fig9b": {"sim": links, "live": []}})["rows"]
           if r["figure"] == "9b"}
    assert old[("BE-chip", "1e-8")]["ours"] == 2.5 and old[("BE-chip", "1e-8")]["x_ours"] == "0"
    assert old[("R-chip", "1e-1")]["ours"] is None and "not measured" in old[("R-chip", "1e-1")]["note"]
