"""1Pipe's Fig. 10 failures in virtual time (netstack/onepipe/rscenario.py, ``fail``): a ToR switch,
a core link and a core switch besides a process, on a two-spine fabric, and the controller's rules
for them (netstack/onepipe/controller.py, ``Controller.know_tors``; design topic §8 in
docs/papers.md, docs/onepipe-reliable.md "Switch and link failures").

Behaviour only, never timings: the right processes are declared failed (those behind a failed
ToR; nobody for a link or a spine), every survivor delivers again after the failure, the total
order holds, and a link's release waits for the processes behind a silent ToR."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from netstack.errors import ConfigError
from netstack.onepipe.actions import RecordFailure, Release
from netstack.onepipe.controller import Controller, ControllerParams
from netstack.onepipe.ctlwire import register_request
from netstack.onepipe.rscenario import reroute
from netstack.onepipe.scenarios import CLOCK_BASE_NS, fabric_topology
from netstack.sim.network import Network
from netstack.sim.scenario import RunSpec, ScenarioError, resolve_topology, run

US = 1_000
AT = 150 * US  # the failure, true time
#: 2 ToRs x 2 hosts under two spines, the controller's host on tor1: p1, p3 on tor1, p2, p4 on tor2
FABRIC = fabric_topology(tors=2, hosts_per_tor=2, spines=2)
TOR2 = ["10.0.2.1:40101", "10.0.2.2:40101"]


def _run(fail: str, tmp: Path | None = None, fabric: dict[str, Any] = FABRIC, **kw: Any) -> dict[str, Any]:
    params = {"procs": 4, "mode": "reliable", "rate": 100_000.0, "fanout": 2, "size": 64, "t_beacon_ns": 3 * US,
              "kill": 1, "fail": fail, "kill_at_ns": AT, "drain_ns": 200 * US, **kw}
    if tmp is not None:
        params["log_dir"] = str(tmp)
    return dict(run(RunSpec("onepipe", fabric, 1, 300 * US, params))["result"])


def _delivered_after(tmp: Path, procs: list[str], after_ns: int) -> dict[str, int]:
    """Per process, how many messages it delivered that were stamped after ``after_ns`` (true time)."""
    out = {}
    for name in procs:
        lines = (tmp / f"{name}.jsonl").read_text().splitlines()
        out[name] = sum(json.loads(line)["ts"] > CLOCK_BASE_NS + after_ns for line in lines)
    return out


# ------------------------------------------------------------------------- the scenario

def test_a_tor_failure_declares_the_processes_behind_it_and_the_survivors_deliver_again(tmp_path: Path) -> None:
    res = _run("tor", tmp_path)
    rec = res["recovery"]
    assert rec["fail"] == "tor" and rec["component"] == "tor2" and rec["killed"] == 2
    assert rec["declared"] == TOR2  # exactly the processes behind it
    assert rec["inputs"] == ["spine1/p-tor2", "spine2/p-tor2"]  # both spines found it silent
    assert res["controller"]["tors_cut_off"] == 1 and res["controller"]["cut_off"] == 2
    assert 0 < rec["detect_ns"] <= rec["record_ns"] <= rec["release_ns"] <= rec["resume_ns"]
    assert res["order"]["ok"]
    assert all(n > 0 for n in _delivered_after(tmp_path, ["p1", "p3"], AT).values())


@pytest.mark.parametrize(("fail", "component", "inputs"), [
    ("core-link", "tor2-spine1", ["spine1/p-tor2", "tor2/p-spine1"]),
    ("core-switch", "spine1", ["tor1/p-spine1", "tor2/p-spine1"]),
])
def test_a_core_link_or_switch_failure_declares_nobody_and_loses_nothing(tmp_path: Path, fail: str, component: str,
                                                                         inputs: list[str]) -> None:
    res = _run(fail, tmp_path)
    rec = res["recovery"]
    assert rec["component"] == component and rec["inputs"] == inputs
    assert rec["declared"] == [] and rec["killed"] == 0 and rec["record_ns"] is None
    assert rec["detect_ns"] is not None and rec["release_ns"] is not None and rec["resume_ns"] is not None
    assert res["order"]["ok"] and res["send_failed"] == 0 and res["delivered"] == res["sent"]
    assert all(n > 0 for n in _delivered_after(tmp_path, ["p1", "p2", "p3", "p4"], AT).values())


def test_a_process_crash_still_declares_only_that_process() -> None:
    rec = _run("process")["recovery"]
    assert rec["killed"] == 1 and "fail" not in rec  # (a crash's record is as it was)
    assert rec["resume_ns"] is not None


@pytest.mark.parametrize(("fail", "kw", "why"), [
    ("core-link", {"fabric": fabric_topology(tors=2, hosts_per_tor=2)}, "another path"),
    ("core-switch", {"fabric": fabric_topology(tors=2, hosts_per_tor=2)}, "another path"),
    ("tor", {"procs": 1}, "controller's switch"),
    ("tor", {"kill": 2}, "kill=1"),
    ("power", {}, "not one of"),
])
def test_a_failure_the_fabric_cannot_take_is_refused(fail: str, kw: dict[str, Any], why: str) -> None:
    with pytest.raises(ScenarioError, match=why):
        _run(fail, **kw)


def test_reroute_moves_a_switchs_routes_off_a_failed_link() -> None:
    net = Network(resolve_topology(FABRIC))
    tor2 = net.switch("tor2")
    port = {p.name: p.index for p in tor2.ports}
    h1 = net.host("h1").mac
    assert tor2.fdb.lookup(h1) == port["p-spine1"]  # routes go up to the first spine
    reroute(net, {"tor2-spine1"}, set())
    assert tor2.fdb.lookup(h1) == port["p-spine2"]
    spine1 = net.switch("spine1")
    assert spine1.fdb.lookup(net.host("h3").mac) == {p.name: p.index for p in spine1.ports}["p-tor2"]  # nowhere else


# --------------------------------------------------------------------- the controller's rules

T = 1_000
PARAMS = replace(ControllerParams.for_beacon(T), max_strikes=0)
T0 = 1_000_000
A, B, C = ("10.0.1.1", 40101), ("10.0.2.1", 40101), ("10.0.2.2", 40101)
UP = ["spine1/p-tor2", "spine2/p-tor2"]


def _world() -> Controller:
    ctl = Controller(PARAMS, T0)
    ctl.know_tors({"tor1": (["spine1/p-tor1", "spine2/p-tor1"], [A]), "tor2": (UP, [B, C])})
    for i, addr in enumerate((A, B, C)):
        ctl.receive(register_request(i + 1, 0, False), addr, T0)
    ctl.actions.take_all()
    return ctl


def test_one_silent_uplink_is_a_core_link_released_after_the_window() -> None:
    ctl = _world()
    ctl.report(UP[0], 700, T0)
    assert ctl.actions.take_all() == []  # the ToR's other uplinks may fall silent too
    ctl.on_timer(T0 + PARAMS.report_window_ns)
    assert ctl.actions.take_all() == [Release(UP[0])]
    assert [p["state"] for p in ctl.view()["processes"]] == ["live"] * 3


def test_every_uplink_silent_declares_the_processes_behind_and_holds_the_links_until_released() -> None:
    ctl = _world()
    ctl.report(UP[0], 700, T0)
    ctl.report(UP[1], 900, T0 + 10)
    ctl.on_timer(T0 + PARAMS.report_window_ns)
    ctl.on_timer(T0 + 2 * PARAMS.report_window_ns)  # the processes' own report window
    recs = [a for a in ctl.actions.take_all() if isinstance(a, RecordFailure)]
    assert {(r.proc, r.t_f) for r in recs} == {(B, 900), (C, 900)}  # T_f: the highest commit frozen
    for fid, r in enumerate(recs, 1):
        ctl.recorded(r.proc, r.incarnation, r.t_f, fid, T0 + 3 * T)
    acts = ctl.actions.take_all()
    assert not [a for a in acts if isinstance(a, Release)]  # A's callbacks outstanding: nothing released
    ctl.receive(_callback(1), A, T0 + 4 * T)
    assert ctl.actions.take_all() == [Release(recs[0].proc)]  # the uplinks wait for both
    ctl.receive(_callback(2), A, T0 + 5 * T)
    assert ctl.actions.take_all() == [Release(recs[1].proc), Release(UP[0]), Release(UP[1])]
    assert ctl.counters()["cut_off"] == 2


def test_a_failure_released_by_the_cut_itself_does_not_release_the_uplinks_early() -> None:
    ctl = _world()
    ctl.report(B, 600, T0)  # B failed on its own first: its callbacks wait for A and C
    ctl.on_timer(T0 + T)
    (rec,) = [a for a in ctl.actions.take_all() if isinstance(a, RecordFailure)]
    ctl.recorded(rec.proc, rec.incarnation, rec.t_f, 1, T0 + T)
    ctl.receive(_callback(1), A, T0 + 2 * T)
    ctl.actions.take_all()
    ctl.report(UP[0], 700, T0 + 3 * T)
    ctl.report(UP[1], 700, T0 + 3 * T)
    ctl.on_timer(T0 + 4 * T)  # the cut: C declared, which leaves B's failure nobody to wait for
    assert [a for a in ctl.actions.take_all() if isinstance(a, Release)] == [Release(B)]
    ctl.on_timer(T0 + 5 * T)
    (rec,) = [a for a in ctl.actions.take_all() if isinstance(a, RecordFailure)]
    assert rec.proc == C
    ctl.recorded(rec.proc, rec.incarnation, rec.t_f, 2, T0 + 5 * T)
    assert not [a for a in ctl.actions.take_all() if isinstance(a, Release)]  # A has not called back
    ctl.receive(_callback(2), A, T0 + 6 * T)
    assert ctl.actions.take_all() == [Release(C), Release(UP[0]), Release(UP[1])]


def test_an_uplink_released_before_counts_as_down_when_the_last_one_falls_silent() -> None:
    ctl = _world()
    ctl.report(UP[0], 700, T0)
    ctl.on_timer(T0 + T)
    assert ctl.actions.take_all() == [Release(UP[0])]
    ctl.report(UP[1], 800, T0 + 50 * T)  # (we never learn that the first came back: safe at worst)
    ctl.on_timer(T0 + 51 * T)
    ctl.on_timer(T0 + 52 * T)
    assert {a.proc for a in ctl.actions.take_all() if isinstance(a, RecordFailure)} == {B, C}


def test_without_a_description_a_link_is_released_at_once_and_bad_descriptions_are_refused() -> None:
    ctl = Controller(PARAMS, T0)
    ctl.report("spine1/p-tor2", 700, T0)
    assert ctl.actions.take_all() == [Release("spine1/p-tor2")]
    assert ctl.counters()["uplink_reports"] == 0
    for bad in ({"tor1": ([], [A])}, {"tor1": (["x"], [("nope", 1)])}, {"a": (["x"], []), "b": (["x"], [])}):
        with pytest.raises(ConfigError):
            ctl.know_tors(bad)  # type: ignore[arg-type]


def _callback(fid: int) -> bytes:
    from netstack.onepipe.ctlwire import callback_done

    return callback_done(fid)


# ------------------------------------------------------------------ the controller's core (ctl_msg_ns)

CORE_NS = 2_000


@pytest.mark.parametrize("fail", ["process", "tor"])
def test_the_controllers_core_handles_its_datagrams_one_at_a_time(fail: str) -> None:
    """With ``ctl_msg_ns`` every datagram the controller sends or receives from the failure on
    occupies its one core: the release comes no sooner than the record plus every notice and
    every callback at that cost, and later than with a free controller; the core's work is whole
    datagrams, and the survivors still resume in total order."""
    free = _run(fail)
    res = _run(fail, ctl_msg_ns=CORE_NS, drain_ns=3_000 * US)  # (a slow controller takes longer)
    rec, ctl = res["recovery"], res["controller"]["after_failure"]
    core = ctl["core"]
    # every datagram in and out after the failure went through the core, at its cost
    assert core["msg_ns"] == CORE_NS and (core["inputs"], core["queued"]) >= (ctl["datagrams"], 0)
    # (an input at no cost: a timer, a report; at its cost: a datagram, an ICMP port unreachable)
    assert CORE_NS * (ctl["datagrams"] + core["sent"]) <= core["busy_ns"] <= CORE_NS * (core["inputs"] + core["sent"])
    assert core["sent"] >= ctl["notices_sent"] and ctl["callbacks"] > 0
    assert rec["release_ns"] >= rec["record_ns"] + CORE_NS * (ctl["notices_sent"] + ctl["callbacks"])
    assert rec["resume_ns"] > free["recovery"]["resume_ns"]
    assert res["order"]["ok"] and "core" not in free["controller"]["after_failure"]


def test_a_link_failure_costs_the_controllers_core_nothing() -> None:
    res = _run("core-link", ctl_msg_ns=CORE_NS)
    core = res["controller"]["after_failure"]["core"]
    assert core["busy_ns"] == core["sent"] == 0  # (no process failed: no notice, no callback)
    assert res["recovery"]["resume_ns"] is not None


@pytest.mark.parametrize(("kw", "why"), [
    ({"ctl_msg_ns": -1}, "ctl_msg_ns must be"),
    ({"ctl_msg_ns": True}, "ctl_msg_ns"),
    ({"ctl_msg_ns": 1.5}, "ctl_msg_ns"),
    ({"ctl_msg_ns": 100, "mode": "onepipe"}, "has no controller"),
    ({"ctl_msg_ns": 100, "kill": 0}, "needs one"),
])
def test_a_bad_controller_core_is_refused(kw: dict[str, Any], why: str) -> None:
    with pytest.raises(ScenarioError, match=why):
        _run("process", **kw)
