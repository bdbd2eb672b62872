"""The ``tcd-leafspine`` topology and the ``tcd-fabric-fct`` scenario (netstack.tcd.fabric, issue 30):
the shipped file is the generator's, every switch port lossless at the paper's 320 KB and marked
with DCQCN's RED under either marker, ECMP over both spines; the workload is drawn from the run's
seed alone; a flow's path is the one the switches' hash picks; the classes and size buckets by
their rules.
Which arm gives the lower slowdown is a measurement (docs/tcd.md), never asserted here."""

from __future__ import annotations

import tomllib

import pytest

from netstack.sim.network import Network
from netstack.sim.scenario import RunSpec, ScenarioError, run, time_scale
from netstack.sim.workload import flow_sizes
from netstack.switch.plugins import port_features
from netstack.tcd.fabric import (
    classify,
    flow_path,
    hops,
    hosts_by_switch,
    incast_plan,
    leafspine_doc,
    make_background,
    size_bucket,
)
from netstack.tcd.marker import EcnMarker, TcdMarker
from netstack.tcd.scenarios import load_doc
from netstack.topo.model import NodeKind, load_topology_spec, shipped_topologies, topology_from_dict
from tests.sim.test_ecmp_sim import predicted_port

GBIT = 1_000_000_000
TINY = {"flows": 8, "size_scale": 0.02}


@pytest.fixture(scope="module")
def topo():
    return load_topology_spec("tcd-leafspine")


def test_the_shipped_file_is_the_generators_document():
    path = shipped_topologies()["tcd-leafspine"]
    assert tomllib.loads(path.read_text()) == leafspine_doc()


def test_leafspine_shape_rates_and_oversubscription(topo):
    assert topo.ecmp is True and time_scale(topo, 40 * GBIT) == 1.0
    assert all(lk.rate_bps == 40 * GBIT and lk.delay_ns == 4_000 for lk in topo.links)
    by_switch = hosts_by_switch(topo)
    assert by_switch == {f"leaf{i}": [f"h{4 * i + j}" for j in range(4)] for i in range(4)}
    for leaf in by_switch:
        ups = [lk for lk in topo.links_of(leaf) if lk.peer(leaf).node.startswith("spine")]
        assert len(ups) == 2  # 4 hosts x 40 down, 2 x 40 up: 2:1
    assert {lk.peer("spine0").node for lk in topo.links_of("spine0")} == set(by_switch)


def test_every_switch_port_is_lossless_at_320kb_and_marked_by_red(topo):
    features = port_features(topo)
    ends = [end for link in topo.links for end in (link.a, link.b) if topo.node(end.node).kind is NodeKind.SWITCH]
    assert len(ends) == 16 + 2 * 8
    for end in ends:
        sw = end.features["switch"]
        assert sw["lossless"] is True and sw["xoff"] == "320000B" and sw["xon"] == "288000B"
        opts = features[(end.node, end.ifname)]["tcd"]
        assert opts["marker"] == "tcd" and opts["ce_rule"] == "ecn"
        assert {k: opts["ecn"][k] for k in ("mode", "kmin_bytes", "kmax_bytes", "pmax")} == \
            {"mode": "red", "kmin_bytes": 5_000, "kmax_bytes": 200_000, "pmax": 0.01}
        assert opts["params"]["k_bytes"] == 72_000 and opts["params"]["t_on_max_ns"] == 72_600


def test_both_markers_on_every_switch_port_and_ecmp_over_both_spines():
    for marker, kind in (("tcd", TcdMarker), ("ecn", EcnMarker)):
        net = Network(load_doc("tcd-leafspine", marker))
        for name in net.switches:
            for port in net.switch(name).ports:
                assert isinstance(port.marker, kind), (name, port.name)
                if marker == "tcd":
                    assert port.marker.ce_rule == "ecn"
        assert sorted(g.names for g in net.switch("leaf1").ecmp.values())[0] == ("p-spine0", "p-spine1")
        assert len(net.switch("leaf1").ecmp) == 12  # every host off leaf1


def test_flow_path_is_the_hashs_choice(topo):
    net = Network(topo)
    seen = set()
    for sport in range(40000, 40016):
        frame = net.host("h5").flow("h9", tos=2).udp(sport, 40300, b"")
        path = flow_path(net, "h5", frame)
        assert path[0] == "h5" and path[1] == "leaf1" and path[3] == "leaf2" and path[4] == "h9"
        assert f"p-{path[2]}" == predicted_port(topo, "leaf1", frame)
        seen.add(path[2])
    assert seen == {"spine0", "spine1"}
    assert flow_path(net, "h5", net.host("h5").flow("h6").udp(1, 2, b"")) == ["h5", "leaf1", "h6"]


def test_classes_and_buckets_by_their_rules():
    incast = hops(["h5", "leaf1", "spine0", "leaf0"]) | hops(["h9", "leaf2", "spine1", "leaf0"])
    assert classify(["h12", "leaf3", "spine1", "leaf0", "h0"], "h0", incast) == "contributor"
    assert classify(["h5", "leaf1", "h6"], "h0", incast) == "victim"  # the incast sender's own link
    assert classify(["h4", "leaf1", "spine0", "leaf3", "h13"], "h0", incast) == "victim"  # its uplink
    assert classify(["h13", "leaf3", "spine1", "leaf0", "h2"], "h0", incast) == "victim"  # spine -> leaf0
    assert classify(["h4", "leaf1", "spine1", "leaf3", "h13"], "h0", incast) == "other"
    assert classify(["h1", "leaf0", "spine0", "leaf1", "h4"], "h0", incast) == "other"  # the other way
    assert [size_bucket(s) for s in (1, 99_999, 100_000, 1_000_000, 1_000_001)] == \
        ["small", "small", "medium", "medium", "large"]


def test_incast_plan_spreads_over_the_other_leaves(topo):
    recv, senders = incast_plan(3, topo, None, 6)
    assert recv == "h0" and len(set(senders)) == 6
    leaves = [s for s in senders for leaf, hs in hosts_by_switch(topo).items() if s in hs and leaf != "leaf0"]
    assert leaves == senders
    assert sorted(int(s[1:]) // 4 for s in senders) == [1, 1, 2, 2, 3, 3]
    assert incast_plan(3, topo, None, 6) == (recv, senders) and incast_plan(4, topo, None, 6) != (recv, senders)
    assert incast_plan(1, topo, "h7", 3)[1] and all(int(s[1:]) // 4 != 1 for s in incast_plan(1, topo, "h7", 12)[1])
    for receiver, n in (("h0", 13), ("h0", -1), ("leaf0", 2), ("nope", 1)):
        with pytest.raises(ScenarioError):
            incast_plan(1, topo, receiver, n)


def test_background_flows_are_the_seeds_alone():
    sizes = flow_sizes("websearch")
    hosts = [f"h{i}" for i in range(16)]
    kw = {"flows": 400, "load": 0.5, "sizes": sizes, "size_scale": 1.0, "hosts": hosts, "start_ns": 500_000}
    a = make_background(7, **kw)
    assert a == make_background(7, **kw) and a != make_background(8, **kw)
    assert all(f.src != f.dst and f.src in hosts and f.dst in hosts for f in a)
    assert a[0].start_ns == 500_000 and [f.start_ns for f in a] == sorted(f.start_ns for f in a)
    # the offered load: bytes over the arrival span, against 0.5 of 16 hosts' 40 Gbit/s (within 25 %)
    span_s = (a[-1].start_ns - a[0].start_ns) / 1e9
    assert 0.75 < sum(f.size for f in a) * 8 / span_s / (0.5 * 16 * 40 * GBIT) < 1.25
    with pytest.raises(ScenarioError, match="load"):
        make_background(1, **{**kw, "load": 1.5})


def test_a_tiny_run_of_each_arm_classifies_every_flow_alike():
    docs = {m: run(RunSpec("tcd-fabric-fct", leafspine_doc(m), 2, None, TINY))["result"] for m in ("ecn", "tcd")}
    key = [(f["fid"], f["path"], f["class"], f["size"]) for f in docs["ecn"]["flows"]]
    assert key == [(f["fid"], f["path"], f["class"], f["size"]) for f in docs["tcd"]["flows"]]
    for marker, res in docs.items():
        assert res["flows_total"] == res["flows_completed"] == 8
        assert res["mode"] == ("dcqcn+tcd" if marker == "tcd" else "dcqcn")
        assert all(f["slowdown"] >= 1.0 for f in res["flows"])
        assert res["incast"]["receiver"] == "h0" and len(res["incast"]["senders"]) == 6
        assert "spine0>leaf0" in res["incast"]["links"] or "spine1>leaf0" in res["incast"]["links"]
        assert res["marking"]["ports"] == 32 and res["marking"]["ecn"]["mode"] == "red"
        assert res["marking"]["marker"] == marker and res["pauses"]["on_incast_links"] > 0
    assert docs["tcd"]["marking"]["ce_rule"] == "ecn" and docs["tcd"]["marking"]["tcd"]["k_bytes"] == 72_000
    assert topology_from_dict(leafspine_doc("ecn", rate_bps=40_000_000), "x").links[0].delay_ns == 4_000_000
