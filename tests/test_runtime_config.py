"""Switch daemon configs derived from topologies (pure: nothing is built)."""

import pytest

from netstack.runtime import port_options, switch_config
from netstack.switch.config import SwitchConfig
from netstack.topo import netns
from netstack.topo.model import TopologyError, load_topology, loads_topology
from tests.topologies import H1, SW1, header, link


def test_default_topology_switch_configs():
    topo = load_topology(None)
    built = netns.plan(topo, "ns")
    sw1 = switch_config(topo, built, "sw1")["switch"]
    assert [p["name"] for p in sw1["ports"]] == ["p-h1", "p-sw2"]
    assert sw1["static_fdb"] == {"02:00:0a:00:00:01": "p-h1", "02:00:0a:00:00:02": "p-sw2",
                                 "02:00:0a:00:00:64": "p-sw2"}
    assert [p["fcs"] for p in sw1["ports"]] == [False, True]
    sw2 = switch_config(topo, built, "sw2")["switch"]
    assert sw2["static_fdb"]["02:00:0a:00:00:01"] == "p-sw1"
    assert sw2["static_fdb"]["02:00:0a:00:00:64"] == "p-c1"
    # the daemon accepts it (MAC strings are decoded by SwitchConfig.from_json)
    SwitchConfig.from_json(sw2)


def test_lossless_port_options_from_features():
    text = header("pfc") + H1 + SW1 + link("h1", "sw1", named=True, extra=(
        '[links.features.b]\nswitch = { lossless = true, xoff = "20KB", xon = "10KB", ecn_threshold = "30KB" }\n'))
    topo = loads_topology(text)
    port = switch_config(topo, netns.plan(topo, "x"), "sw1")["switch"]["ports"][0]
    assert port["lossless"] is True and port["xoff_bytes"] == 20_000 and port["xon_bytes"] == 10_000
    assert port["ecn_threshold_bytes"] == 30_000


@pytest.mark.parametrize("options,problem", [
    ({"loseless": True}, "unknown option"),
    ({"xoff": "lots"}, "xoff"),
    ({"lossless": "yes"}, "true/false"),
])
def test_bad_port_options_name_the_field(options, problem):
    with pytest.raises(TopologyError, match=problem):
        port_options("h1-sw1", options)


@pytest.mark.parametrize("options,problem", [
    ({"default_class": float("inf")}, "default_class: inf is not a priority class"),  # was OverflowError
    ({"default_class": 8}, r"default_class: 8 is not a priority class \(an integer 0-7\)"),
    ({"default_class": 2.7}, "default_class: 2.7 is not"),  # was silently class 2
    ({"default_class": True}, "default_class: True is not"),
    ({"pfc_watchdog": "soon"}, "pfc_watchdog"),
    ({"pfc_from_host": "yes"}, "true/false"),
    ({"pfc_enable": 3}, "pfc_enable: 3 is not a list of priority classes"),
    ({"pfc_enable": [8]}, "pfc_enable"),
    ({"pfc_enable": [True]}, "pfc_enable"),
])
def test_port_options_never_raise_anything_but_a_topology_error(options, problem):
    assert port_options("h1-sw1", {"default_class": 7}) == {"default_class": 7}
    with pytest.raises(TopologyError, match=problem):
        port_options("h1-sw1", options)


def test_ports_get_their_role_and_edge_ports_their_pfc_watchdog():
    """A port facing a host is an edge port (it drops what only switches send and has the PFC
    watchdog on); a port facing a switch is a fabric port (the protocols' own pauses last)."""
    from netstack.topo.model import load_topology

    topo = load_topology(None)  # the default topology, as netstack up builds it
    cfg = switch_config(topo, netns.plan(topo, "x"), "sw1")["switch"]
    ports = {p["name"]: p for p in cfg["ports"]}
    assert ports["p-h1"]["role"] == "edge" and ports["p-h1"]["pfc_watchdog_ns"] == 100_000_000
    assert ports["p-sw2"]["role"] == "fabric" and "pfc_watchdog_ns" not in ports["p-sw2"]
    assert 0xABCD in cfg["switch_only_ethertypes"]
    off = port_options("h1-sw1", {"pfc_watchdog": False})
    assert off == {"pfc_watchdog_ns": None}
    assert port_options("x", {"pfc_watchdog": "5ms"}) == {"pfc_watchdog_ns": 5_000_000}


def test_pfc_enable_per_port_and_the_onepipe_fabric_enables_none():
    assert port_options("x", {"pfc_enable": [3, 0, 3]}) == {"pfc_enable": [0, 3]}
    assert port_options("x", {"pfc_enable": []}) == {"pfc_enable": []}
    from netstack.topo.model import load_topology_spec

    topo = load_topology_spec("onepipe")
    ports = {p["name"]: p for p in switch_config(topo, netns.plan(topo, "x"), "tor1")["switch"]["ports"]}
    assert ports["p-spine1"]["pfc_enable"] == [] and "pfc_enable" not in ports["p-h1"]
