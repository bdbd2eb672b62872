"""Tests of the virtual-time runtime (netstack.sim): the loop, the network built from a topology,
determinism, conservation (hypothesis), scenarios, sweeps and the command line."""

from __future__ import annotations

from netstack.sim.network import Network
from netstack.topo.model import loads_topology

#: h1 - sw1 = sw2 - h2, 1 Gbit/s, 2 us on the switch link (a small Fig. 7)
PAIR = """
[topology]
name = "pair"
prefix = "simt"
[defaults]
rate = "1Gbit"
delay = "0"
[[nodes]]
name = "h1"
kind = "host"
ip = "10.0.0.1/24"
[[nodes]]
name = "h2"
kind = "host"
ip = "10.0.0.2/24"
[[nodes]]
name = "sw1"
kind = "switch"
[[nodes]]
name = "sw2"
kind = "switch"
[[links]]
name = "h1-sw1"
a = "h1"
b = "sw1"
[[links]]
name = "sw1-sw2"
a = "sw1"
b = "sw2"
delay = "2us"
{core}
[[links]]
name = "sw2-h2"
a = "sw2"
b = "h2"
"""


def pair(core: str = "", seed: int = 1) -> Network:
    """The PAIR topology with ``core`` (TOML tables of the sw1-sw2 link) in virtual time."""
    return Network(loads_topology(PAIR.replace("{core}", core)), seed=seed)


__all__ = ["PAIR", "pair"]
