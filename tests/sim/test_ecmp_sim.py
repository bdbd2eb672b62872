"""ECMP and the flood tree in virtual time: ``netstack.sim.network.Network`` builds its switches
from the live daemons' configs (``runtime.switch_config``), so a leaf-spine topology with
``ecmp = true`` spreads flows exactly as the switch's hash predicts (the prediction the live
test, tests/integration/test_ecmp_live.py, checks the daemons against), keeps each flow on one
spine and in order, and a broadcast reaches every host once without circling."""

from __future__ import annotations

from netstack.runtime import switch_config
from netstack.sim.hosts import UdpSink, UdpStream
from netstack.sim.network import Network
from netstack.switch import Switch, SwitchConfig
from netstack.switch.ecmp import flow_key
from netstack.topo import netns
from netstack.topo.model import loads_topology
from tests.topologies import leaf_spine

FLOWS = 8
COUNT = 200


def predicted_port(topology, switch: str, frame: bytes) -> str:
    """The next hop ``switch``'s hash picks for ``frame``: an engine built from the config the
    live daemon gets, asked without sending anything."""
    sw = Switch(SwitchConfig.from_json(switch_config(topology, netns.plan(topology), switch)["switch"]))
    group = sw.ecmp[frame[:6]]  # type: ignore[index]
    return sw.ports[group.ports[group.choose(flow_key(frame))]].name


def test_flows_spread_over_both_spines_as_the_hash_predicts_and_each_stays_in_order():
    topo = loads_topology(leaf_spine())
    net = Network(topo)
    h1, h3 = net.host("h1"), net.host("h3")
    sinks = [UdpSink(h3, port=6000 + i, expect=COUNT, record=True) for i in range(FLOWS)]
    streams = [UdpStream(h1, "h3", count=COUNT, size=200, rate_pps=20_000, dport=6000 + i) for i in range(FLOWS)]
    net.run()
    assert net.in_flight() == 0
    want: dict[str, int] = {"p-spine1": 0, "p-spine2": 0}
    for stream, sink in zip(streams, sinks, strict=True):
        assert sink.unique == COUNT and sink.reordered == 0 and sink.order == list(range(COUNT))
        frame = stream.flow.udp(stream.sport, stream.dport, b"")
        want[predicted_port(topo, "leaf1", frame)] += COUNT
    assert net.counters()["switches"]["leaf1"]["ecmp"] == {"h3": want, "h4": {"p-spine1": 0, "p-spine2": 0}}
    assert "ecmp" not in net.counters()["switches"]["spine1"]
    assert min(want.values()) >= COUNT  # both spines carry flows
    spines = {s: net.switch(s).counters()["p-leaf2"]["tx_frames"] for s in ("spine1", "spine2")}
    assert spines == {"spine1": want["p-spine1"], "spine2": want["p-spine2"]}  # each flow crossed one spine


def test_a_broadcast_reaches_every_host_once_over_the_tree():
    topo = loads_topology(leaf_spine(leaves=3, spines=2))
    net = Network(topo)
    heard: dict[str, int] = {}
    for name, host in net.hosts.items():
        host.bind_ether(0x88B6, lambda frame, name=name: heard.__setitem__(name, heard.get(name, 0) + 1))
    h1 = net.host("h1")
    h1.send(b"\xff" * 6 + h1.mac + b"\x88\xb6" + bytes(46))
    net.run()
    assert net.in_flight() == 0
    assert heard == {f"h{i}": 1 for i in range(2, 7)}
    sent = sum(c["tx_frames"] for s in net.switches.values() for c in s.switch.counters().values())
    assert sent == (5 - 1) + 5  # a copy on each of the tree's links (5 switches) and to each other host
