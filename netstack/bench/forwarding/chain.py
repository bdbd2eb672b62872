"""The chains of namespaces ``netstack bench forwarding`` measures, gen --- DUT --- sink: the
topology file of a chain of switches, and the Linux bridge in the middle namespace."""

from __future__ import annotations

import itertools
import textwrap
import time
from dataclasses import dataclass
from typing import Any

from .params import GEN_IP, LINK_BUFFER, LINK_RATE, SINK_IP


def chain_toml(name: str, middle: list[str]) -> str:
    """gen -- middle[0] -- ... -- middle[-1] -- sink, every middle node a switch."""
    chain = ["gen", *middle, "sink"]
    nodes = [
        f'[[nodes]]\nname = "gen"\nkind = "host"\nip = "{GEN_IP}/24"\n',
        f'[[nodes]]\nname = "sink"\nkind = "host"\nip = "{SINK_IP}/24"\n',
        *(f'[[nodes]]\nname = "{m}"\nkind = "switch"\n' for m in middle),
    ]
    links = [f'[[links]]\na = "{a}"\nb = "{b}"\n' for a, b in itertools.pairwise(chain)]
    head = textwrap.dedent(f"""\
        [topology]
        name = "{name}"

        [defaults]
        rate = "{LINK_RATE}"
        delay = "0"
        buffer = "{LINK_BUFFER}"
        """)
    return "\n".join([head, *nodes, *links])


@dataclass
class Chain:
    """What a measurement needs to know about the chain that is up."""

    prefix: str
    gen_ns: str
    gen_if: str
    gen_mac: str
    sink_ns: str
    sink_if: str
    sink_mac: str
    switches: list[str]


def chain_of(built: Any, switches: list[str]) -> Chain:
    gen_port = built.ports_of("gen")[0]
    sink_port = built.ports_of("sink")[0]
    return Chain(built.prefix, gen_port.netns, gen_port.ifname, gen_port.mac, sink_port.netns, sink_port.ifname,
                 sink_port.mac, switches)


def make_bridge(netns_name: str, ifnames: list[str]) -> None:
    from pyroute2 import IPRoute

    from ...topo.netns import in_netns

    with in_netns(netns_name):
        ipr = IPRoute()
    try:
        ipr.link("add", ifname="br0", kind="bridge")
        br = ipr.link_lookup(ifname="br0")[0]
        for ifn in ifnames:
            ipr.link("set", index=ipr.link_lookup(ifname=ifn)[0], master=br)
        ipr.link("set", index=br, state="up")
    finally:
        ipr.close()


def wait_bridge_forwarding(netns_name: str, ifnames: list[str], timeout: float = 5.0) -> None:
    """With STP off a bridge port forwards at once, but check: a port still 'learning' would
    silently drop the first frames and be charged to the bridge."""
    from pyroute2 import IPRoute

    from ...topo.netns import in_netns

    with in_netns(netns_name):
        ipr = IPRoute()
    try:
        deadline = time.monotonic() + timeout
        while True:
            states = {}
            for ifn in ifnames:
                link = ipr.get_links(ipr.link_lookup(ifname=ifn)[0])[0]
                info = link.get("IFLA_PROTINFO")
                state = info.get("IFLA_BRPORT_STATE") if info is not None else None
                states[ifn] = state
            if all(s in (None, 3) for s in states.values()):  # 3 = BR_STATE_FORWARDING
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"bridge ports not forwarding after {timeout:g} s: {states}")
            time.sleep(0.05)
    finally:
        ipr.close()
