"""The run's ports: the veth pairs a campaign fuzzes (the daemon's port and the far end it sends
from), their kernel counters and MTUs, raw sockets on them, and the nodes' addresses."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass

from .. import runtime
from ..runtime import RunState
from ..switch.sourceguard import parse_source_ips
from ..topo.nsenter import in_netns, iproute
from .errors import FuzzError


@dataclass
class Link:
    """One veth pair of the run: the daemon port fuzzed, and the far end frames are sent from."""

    node: str  #: the switch whose port receives
    ifname: str
    ns: str
    mac: bytes
    far_node: str
    far_ifname: str
    far_ns: str
    fcs: bool
    edge: bool
    accepts_pfc: bool
    #: the port's BCP 38 source addresses, packed (None: no filtering; netstack/switch/sourceguard.py)
    source_guard: frozenset[bytes] | None = None


def find_link(state: RunState, node: str, peer: str) -> Link:
    port = next((p for p in state.ports if p.node == node and p.peer == peer), None)
    far = next((p for p in state.ports if p.node == peer and p.peer == node), None)
    if port is None or far is None:
        raise FuzzError(f"no link between {node} and {peer} in the running topology")
    cfg = json.loads((runtime.run_dir(state.prefix) / f"{node}.json").read_text())
    pc = next(p for p in cfg["switch"]["ports"] if p["name"] == port.ifname)
    edge = pc.get("role") == "edge"
    lossless = bool(pc.get("lossless"))
    accepts = True if not edge else (lossless if pc.get("pfc_from_host") is None else bool(pc["pfc_from_host"]))
    guard = pc.get("source_ips")
    return Link(node, port.ifname, port.netns, bytes.fromhex(port.mac.replace(":", "")), peer,
                far.ifname, far.netns, bool(port.fcs), edge, accepts,
                None if not edge or guard is None else parse_source_ips(guard, f"{node}/{port.ifname} source_ips"))


def iface_stats(ns: str, ifname: str) -> dict[str, int]:
    """The kernel's counters of an interface (netlink IFLA_STATS64)."""
    with iproute(ns) as ipr:
        link = ipr.link("get", ifname=ifname)[0]
    stats = link.get_attr("IFLA_STATS64") or link.get_attr("IFLA_STATS")
    return {k: int(stats[k]) for k in ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")}


def iface_mtu(ns: str, ifname: str) -> int:
    with iproute(ns) as ipr:
        return int(ipr.link("get", ifname=ifname)[0].get_attr("IFLA_MTU"))


def raw_socket(ns: str, ifname: str, proto: int = 0) -> socket.socket:
    with in_netns(ns):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(proto))
    s.bind((ifname, proto))  # (Python converts the protocol to network order itself)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    return s


def mac_of(state: RunState, node: str) -> bytes:
    port = next(p for p in state.ports if p.node == node)
    return bytes.fromhex(port.mac.replace(":", ""))


def ip_of(state: RunState, node: str) -> bytes:
    return socket.inet_aton(state.host_ip(node))
