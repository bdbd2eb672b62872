"""Switch daemon configs derived from topologies (pure: nothing is built)."""

import pytest

from netstack.runtime import port_options, switch_config
from netstack.switch.config import SwitchConfig
from netstack.topo import netns
from netstack.topo.model import TopologyError, load_topology, loads_topology


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
    text = """
[topology]
name = "pfc"
[[nodes]]
name = "h1"
kind = "host"
ip = "10.0.0.1/24"
[[nodes]]
name = "sw1"
kind = "switch"
[[links]]
name = "h1-sw1"
a = "h1"
b = "sw1"
[links.features.b]
switch = { lossless = true, xoff = "20KB", xon = "10KB", ecn_threshold = "30KB" }
"""
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
