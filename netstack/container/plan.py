"""How a topology maps onto container networking (docs/containers.md "Links are tunnels").

Every link of the topology becomes two things:

- an **underlay**: a docker network of its own (a bridge under compose, an overlay under
  Swarm) with a small subnet carved from one base range, joining the two containers;
- a **point-to-point VXLAN tunnel** between the two containers over that underlay, created by
  the node runner inside each container with the port's name, MAC and MTU from the topology.

The tunnel, not the docker network, is the link the daemons see. A docker network is a Linux
bridge (or a bridge plus VXLAN for an overlay): it never forwards 01:80:C2:00:00:01, so PFC
would not reach the peer switch; it learns and floods; and across machines an overlay only
delivers unicast frames to the MAC docker gave the container, so frames addressed to a host
behind a switch would be dropped. Inside the tunnel every frame the veth runtime carries
(pause frames, LinkGuardian tags, unknown unicast, the software FCS trailer) crosses as on a veth.

Everything here is pure: the compose generator (host side) and the node runner (container
side) compute the same plan from the same topology and base range.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from ..errors import NetstackError
from ..topo.model import Topology

#: The base range the per-link subnets are carved from unless told otherwise; chosen outside
#: docker's default pools (172.17-31/16 and 192.168/20 per network) to avoid clashes.
DEFAULT_UNDERLAY = "10.199.0.0/16"
#: One /28 per link: the two containers, the bridge's gateway and, under Swarm, one load
#: balancer address per machine, with room for restarted tasks.
LINK_PREFIXLEN = 28
#: What VXLAN over IPv4 adds to an inner frame: outer Ethernet 14 + IPv4 20 + UDP 8 + VXLAN 8.
#: The underlay's MTU is the tunnel's device MTU plus this, so a full-size inner frame
#: (with the switches' FCS trailer and tags) is never fragmented inside one machine.
VXLAN_OVERHEAD = 50
VXLAN_PORT = 4789
#: The tunnel of link i carries VNI i + 1 (every link has its own underlay anyway; distinct
#: VNIs keep two tunnels of one container apart on the shared UDP port).
VNI_BASE = 1


#: The state file each node runner writes in its run directory (netstack.container.node), which
#: the CLI reads (netstack.container.discover), and its phases: waiting for the peers to appear
#: (their names resolve), then up.
NODE_STATE = "node-{node}.json"
JOINING, READY = "joining", "ready"


class PlanError(NetstackError, ValueError):
    """The topology does not fit the underlay range (or another container-mode limit)."""


@dataclass(frozen=True)
class LinkPlan:
    index: int
    link: str
    network: str  #: the docker network's name in the compose file (the project prefixes it)
    subnet: ipaddress.IPv4Network
    vni: int
    device_mtu: int  #: the tunnel's MTU, as the veth's in the namespace runtime
    underlay_mtu: int
    a: str
    b: str

    def alias(self, node: str) -> str:
        """The DNS name of ``node``'s container on this link's network (docker's embedded DNS)."""
        return f"{node}.{self.network}"

    def underlay_ifname(self) -> str:
        """What the node runner renames the container's interface on this network to: docker
        names them eth0, eth1, ... in an order of its own, and a host's tunnel is eth0."""
        return f"ul{self.index}"


def network_name(link: str) -> str:
    """A docker network name for a link (link names already fit docker's alphabet)."""
    return f"link-{link}"


def plan_links(topology: Topology, underlay: str = DEFAULT_UNDERLAY) -> list[LinkPlan]:
    try:
        base = ipaddress.IPv4Network(underlay)
    except ValueError as exc:
        raise PlanError(f"underlay range {underlay!r}: {exc}") from None
    if base.prefixlen > LINK_PREFIXLEN:
        raise PlanError(f"underlay range {base} is smaller than one /{LINK_PREFIXLEN}")
    for node in topology.nodes:
        if node.ip is not None and node.ip.network.overlaps(base):
            raise PlanError(f"node {node.name}'s address {node.ip} lies in the underlay range {base}: "
                            "give another range (--underlay)")
    subnets = base.subnets(new_prefix=LINK_PREFIXLEN)
    out = []
    for i, link in enumerate(topology.links):
        subnet = next(subnets, None)
        if subnet is None:
            raise PlanError(f"underlay range {base} holds {2 ** (LINK_PREFIXLEN - base.prefixlen)} links of "
                            f"/{LINK_PREFIXLEN}; topology {topology.name!r} has {len(topology.links)}: "
                            "give a larger range (--underlay)")
        out.append(LinkPlan(index=i, link=link.name, network=network_name(link.name), subnet=subnet,
                            vni=VNI_BASE + i, device_mtu=link.device_mtu,
                            underlay_mtu=link.device_mtu + VXLAN_OVERHEAD, a=link.a.node, b=link.b.node))
    return out
