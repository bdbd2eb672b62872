"""1Pipe's 3-tier fabric and the paper's placement ("1Pipe: Scalable Total Order Communication in
Data Center Networks", §7.1: 32 servers under a 3-layer fat tree of 4 ToRs, 4 spines and 2 cores;
Fig. 9a's points are 1, 3 and 5 hops at <= 8, 16 and >= 32 processes).

:func:`fat_tree_topology` validates for 1Pipe in three tiers with up-then-down routes whatever the
order of its links; ``placement="pack"`` puts 8, 16 and 32 processes 1, 3 and 5 switches apart
and 512 at 16 a host; ``"spread"`` deals them as before; an unknown placement is refused; short
virtual-time runs at P = 32 packed deliver every message in one total order, best effort and
reliable; the shipped ``onepipe-fattree`` topology is the builder's and runs in virtual time."""

from __future__ import annotations

import random
import tomllib
from collections import Counter
from itertools import pairwise
from typing import Any

import pytest

from netstack.onepipe import topology as op_topology
from netstack.onepipe.check import check_logs
from netstack.onepipe.params import PORT
from netstack.onepipe.scenarios import (
    fabric_topology,
    fat_tree_topology,
    max_switch_hops,
    place,
    route_switches,
    tor_of,
    tors_nearest_first,
)
from netstack.sim.scenario import RunSpec, ScenarioError, run
from netstack.topo.model import load_topology_spec, shipped_topologies, topology_from_dict

PAPER = topology_from_dict(fat_tree_topology())  # 2 pods x 2 ToRs x 8 hosts, 2 aggs a pod, 2 cores, + seq
HOSTS = [n.name for n in PAPER.hosts if n.name != "seq"]


def _hosts(placed: list[tuple[str, str, int]]) -> list[str]:
    return [h for _, h, _ in placed]


# --------------------------------------------------------------------------------- the fabric


def test_the_papers_fabric_has_ten_switches_in_three_tiers():
    tiers = op_topology.switch_tiers(PAPER)
    assert sorted(tiers) == sorted(["core1", "core2", *(f"agg{i}" for i in range(1, 5)),
                                    *(f"tor{i}" for i in range(1, 5))])
    assert tiers == {**{f"tor{i}": 1 for i in range(1, 5)},
                                                 **{f"agg{i}": 2 for i in range(1, 5)}, "core1": 3, "core2": 3}
    assert len(HOSTS) == 32
    dirs = op_topology.validate(PAPER)
    assert dirs["agg1"] == {"p-tor1": "down", "p-tor2": "down", "p-core1": "up", "p-core2": "up"}
    assert set(dirs["core1"].values()) == {"down"} and dirs["tor3"]["p-agg3"] == "up"
    # one /16: every host hears its ToR's beacons, ToR t's hosts in 10.0.t.0
    assert len({n.ip.network for n in PAPER.hosts}) == 1 and str(PAPER.node("h9").ip) == "10.0.2.1/16"
    assert route_switches(PAPER, "h1", "h2") == ["tor1"]
    assert route_switches(PAPER, "h1", "h9") == ["tor1", "agg1", "tor2"]
    assert route_switches(PAPER, "h1", "h17") == ["tor1", "agg1", "core1", "agg3", "tor3"]
    assert route_switches(PAPER, "h32", "seq") == ["tor4", "agg3", "core1", "agg1", "tor1"]


def _assert_up_then_down(topo: Any) -> None:
    """Every route between two hosts climbs tiers strictly, then descends strictly (no valley)."""
    tiers = op_topology.switch_tiers(topo)
    hosts = [n.name for n in topo.hosts]
    hops: dict[str, dict[str, str]] = {}
    for a in hosts:
        for b in hosts:
            path = [tiers[s] for s in route_switches(topo, a, b, hops)]
            if not path:
                continue
            top = path.index(max(path))
            assert all(x < y for x, y in pairwise(path[:top + 1])), (a, b, path)
            assert all(x > y for x, y in pairwise(path[top:])), (a, b, path)


@pytest.mark.parametrize("shape", [{}, {"pods": 3, "tors_per_pod": 3, "aggs_per_pod": 3, "cores": 4,
                                        "hosts_per_tor": 2},
                                   {"pods": 1, "tors_per_pod": 2, "aggs_per_pod": 1, "cores": 1, "hosts_per_tor": 1}])
def test_routes_go_up_then_down_whatever_the_link_order(shape):
    """The builder's docstring argues that the breadth-first static routes are shortest paths and
    that no shortest path of a fat tree is a valley: the link order only picks among equal-cost
    hops. Shuffled link orders must validate too."""
    doc = fat_tree_topology(**shape)
    for seed in range(4):
        links = list(doc["links"])
        if seed:
            random.Random(seed).shuffle(links)
        topo = topology_from_dict({**doc, "links": links})
        op_topology.validate(topo)
        _assert_up_then_down(topo)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="at least one"):
        fat_tree_topology(cores=0)
    with pytest.raises(ValueError, match="250"):
        fat_tree_topology(pods=26, tors_per_pod=10)


# ------------------------------------------------------------------------------- the placement


@pytest.mark.parametrize("procs, hops, tors", [(1, 0, 1), (8, 1, 1), (9, 3, 2), (16, 3, 2), (17, 5, 3), (32, 5, 4),
                                               (64, 5, 4), (512, 5, 4)])
def test_pack_gives_the_papers_hops(procs, hops, tors):
    placed = place(PAPER, procs, exclude=["seq"], placement="pack")
    assert [name for name, _, _ in placed] == [f"p{i}" for i in range(1, procs + 1)]
    assert len({(h, port) for _, h, port in placed}) == procs  # no two processes on one port
    assert max_switch_hops(PAPER, _hosts(placed)) == hops
    assert len({tor_of(PAPER, h) for h in _hosts(placed)}) == tors


def test_pack_fills_a_tor_then_its_pod_then_the_next_pod():
    assert _hosts(place(PAPER, 8, exclude=["seq"], placement="pack")) == HOSTS[:8]  # tor1 only
    sixteen = _hosts(place(PAPER, 16, exclude=["seq"], placement="pack"))
    assert sixteen == HOSTS[:16]  # tor1 and tor2, pod 1
    assert {len(route_switches(PAPER, a, b)) for a in sixteen for b in sixteen if a != b} == {1, 3}
    assert _hosts(place(PAPER, 32, exclude=["seq"], placement="pack")) == HOSTS


def test_more_processes_than_hosts_share_them_evenly_in_blocks():
    placed = place(PAPER, 512, exclude=["seq"], placement="pack")
    assert set(Counter(_hosts(placed)).values()) == {16}
    assert placed[:3] == [("p1", "h1", PORT + 1), ("p2", "h1", PORT + 2), ("p3", "h1", PORT + 3)]
    assert placed[16] == ("p17", "h2", PORT + 1) and placed[-1] == ("p512", "h32", PORT + 16)
    odd = Counter(_hosts(place(PAPER, 40, exclude=["seq"], placement="pack")))
    assert [odd[h] for h in HOSTS] == [2] * 8 + [1] * 24  # 40 = 8 hosts x 2 + 24 x 1, the first ones more
    with pytest.raises(ScenarioError, match="ports"):
        place(PAPER, 32 * 99 + 1, exclude=["seq"], placement="pack")


def test_pack_takes_the_nearest_tor_next_whatever_the_file_order():
    doc = fat_tree_topology(hosts_per_tor=2, sequencer=False)
    by_name = {n["name"]: n for n in doc["nodes"]}
    # the hosts listed tor1, tor3, tor2, tor4: the file order alone would leave pod 1 for pod 2
    order = ["h1", "h2", "h5", "h6", "h3", "h4", "h7", "h8"]
    nodes = [n for n in doc["nodes"] if n["kind"] == "switch"] + [by_name[h] for h in order]
    topo = topology_from_dict({**doc, "nodes": nodes})
    assert tors_nearest_first(topo, ["tor1", "tor3", "tor2", "tor4"]) == ["tor1", "tor2", "tor3", "tor4"]
    placed = _hosts(place(topo, 4, placement="pack"))
    assert placed == ["h1", "h2", "h3", "h4"] and max_switch_hops(topo, placed) == 3


def test_spread_is_unchanged_and_the_default():
    small = topology_from_dict(fabric_topology(tors=2, hosts_per_tor=2))
    placed = place(small, 6, exclude=["seq"])
    assert placed == place(small, 6, exclude=["seq"], placement="spread")
    assert _hosts(placed) == ["h1", "h3", "h2", "h4", "h1", "h3"]
    assert [port for _, _, port in placed] == [PORT + 1] * 4 + [PORT + 2] * 2
    # on the fat tree, spread deals one process to each ToR in turn: 5 hops from P = 3 on
    spread = _hosts(place(PAPER, 8, exclude=["seq"]))
    assert spread == ["h1", "h9", "h17", "h25", "h2", "h10", "h18", "h26"]
    assert max_switch_hops(PAPER, spread) == 5


def test_an_unknown_placement_is_refused():
    with pytest.raises(ScenarioError, match="placement 'packed' is not one of spread, pack"):
        place(PAPER, 8, placement="packed")
    with pytest.raises(ScenarioError, match="placement"):
        run(RunSpec("onepipe", fat_tree_topology(hosts_per_tor=1), 1, 10_000, {"procs": 2, "placement": "random"}))


# ------------------------------------------------------------------------------ virtual time


@pytest.mark.parametrize("mode", ["onepipe", "reliable"])
def test_thirty_two_packed_processes_across_five_hops(mode, tmp_path):
    doc = run(RunSpec("onepipe", fat_tree_topology(), 1, 20_000,
                      {"procs": 32, "mode": mode, "placement": "pack", "rate": 100_000.0, "skew_ns": 300.0,
                       "log_dir": str(tmp_path)}))
    res = doc["result"]
    assert (res["placement"], res["max_switch_hops"], res["hosts_used"]) == ("pack", 5, 32)
    assert res["sent"] > 100 and res["delivered"] == res["sent"]
    assert res["send_failed"] == res["send_unknown"] == res["in_flight_at_end"] == 0
    assert res["order"] == {"ok": True, "violations": 0, "first": None}
    assert res["barrier_wait_ns"]["mean"] > 0
    verdict = check_logs([tmp_path])
    assert verdict.ok, verdict.summary()
    assert verdict.counts["messages"] == res["delivered"]


def test_the_default_placement_leaves_the_run_document_as_it_was():
    doc = run(RunSpec("onepipe", fabric_topology(tors=2, hosts_per_tor=2), 1, 10_000, {"procs": 4}))
    assert "placement" not in doc["params"] and "placement" not in doc["result"]
    assert "max_switch_hops" not in doc["result"]


# --------------------------------------------------------------------------- the shipped file


def test_the_shipped_fat_tree_is_the_builders_with_a_controller_and_clocks():
    path = shipped_topologies()["onepipe-fattree"]
    doc = tomllib.loads(path.read_text())
    built = fat_tree_topology(hosts_per_tor=1, rate="100Mbit", delay="10us", sequencer=False,
                              name="onepipe-fattree", prefix="opft")
    assert doc["topology"] == built["topology"] and doc["defaults"] == built["defaults"]
    nodes = [{k: v for k, v in n.items() if k != "clock_offset"} for n in doc["nodes"] if n["name"] != "ctl"]
    links = [{k: v for k, v in lk.items() if k != "features"} for lk in doc["links"] if lk["name"] != "ctl-core1"]
    assert nodes == built["nodes"] and links == built["links"]
    topo = load_topology_spec("onepipe-fattree")
    assert op_topology.validate(topo)["core1"]["p-ctl"] == "down"
    assert op_topology.switch_tiers(topo)["core1"] == 3  # the controller gives its switch no tier
    assert max_switch_hops(topo, ["h1", "h2"]) == 3 and max_switch_hops(topo, ["h1", "h3"]) == 5


def test_the_shipped_fat_tree_runs_in_virtual_time():
    doc = run(RunSpec("onepipe", "onepipe-fattree", 1, 30_000_000, {"procs": 4, "placement": "pack"}))
    res = doc["result"]
    assert doc["time_scale"] == 1000.0 and res["max_switch_hops"] == 5
    assert res["sent"] > 0 and res["delivered"] == res["sent"] and res["order"]["ok"]
