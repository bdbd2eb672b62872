"""Tests of the virtual-time runtime (netstack.sim): the loop, the network built from a topology,
determinism, conservation (hypothesis), scenarios, sweeps and the command line."""

from __future__ import annotations

from netstack.sim.network import Network
from netstack.topo.model import loads_topology
from tests.topologies import header, line

#: h1 - sw1 = sw2 - h2, 1 Gbit/s, 2 us on the switch link (a small Fig. 7); ``{core}``: where the
#: sw1-sw2 link's own tables go
PAIR = header("pair", prefix="simt", rate="1Gbit", delay="0") + line(core='delay = "2us"\n{core}\n')


def pair(core: str = "", seed: int = 1) -> Network:
    """The PAIR topology with ``core`` (TOML tables of the sw1-sw2 link) in virtual time."""
    return Network(loads_topology(PAIR.replace("{core}", core)), seed=seed)


__all__ = ["PAIR", "pair"]
