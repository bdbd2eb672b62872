"""The switch daemon's config for one switch node of a built topology (``<run dir>/<node>.json``),
and the switch-port settings a topology file gives per link end."""

from __future__ import annotations

import ipaddress
from typing import Any

from .. import protocols
from ..topo import netns, routes
from ..topo.model import NodeKind, Topology


def switch_config(topology: Topology, built: netns.BuiltTopology, node: str) -> dict[str, Any]:
    """The daemon config of switch ``node``: one port per veth end, and its forwarding
    (:func:`forwarding`: static entries, ECMP groups, flood ports)."""
    ports = []
    for port in built.ports_of(node):
        link = topology.link(port.link)
        entry: dict[str, Any] = {
            "name": port.ifname,
            "rate_bps": link.rate_bps,
            "delay_ns": link.delay_ns,
            "buffer_bytes": link.buffer_bytes,
            "mtu": link.mtu,
            "fcs": port.fcs,
            "mac": port.mac,
            # a port to a host is an edge port: it drops what only switches send, and its PFC
            # watchdog is on; a port to a switch carries the protocols' own pauses (LinkGuardian
            # backpressure, a lossless fabric) for as long as they last (docs/security.md)
            "role": "fabric" if topology.node(port.peer_node).kind is NodeKind.SWITCH else "edge",
        }
        if entry["role"] == "edge":
            entry["pfc_watchdog_ns"] = EDGE_PFC_WATCHDOG_NS
            peer_ip = topology.node(port.peer_node).ip
            if peer_ip is not None:
                # BCP 38 at the ToR: the host may only send from its own address (issue 34, finding
                # 3; netstack/switch/sourceguard.py); a topology can widen it with source_ips
                entry["source_ips"] = [str(peer_ip.ip)]
        entry.update(port_options(link.name, link.end(node).features.get("switch", {})))
        imp = link.impairment
        if imp is not None and any(e.node == node for e in link.impaired_ends()) and (
                built.impairments.get((node, link.name), imp.backend.value) == "switch"):
            # the switch's own seeded model on this (sending) port: asked for, or what 'auto'
            # chose for a shaped link on a kernel without netem (netns.end_backend)
            entry["impairment"] = imp.model()
        ports.append(entry)
    from ..switch.plugins import port_features

    features = {ifname: feats for (n, ifname), feats in port_features(topology).items() if n == node}
    out: dict[str, Any] = {"switch": {"name": node, "ports": ports, **forwarding(topology, built, node),
                                      "switch_only_ethertypes": list(protocols.switch_only_ethertypes())}}
    keys = topology.keys_path()
    if keys is not None:
        # the daemon loads the file itself: no key material in a config file or on a command line
        out["auth"] = {"keys": str(keys), "links": {p.ifname: p.link for p in built.ports_of(node)}}
    if features:
        out["features"] = features  # attached by the daemon at start (netstack.switch.plugins)
    return out


def forwarding(topology: Topology, built: netns.BuiltTopology, node: str) -> dict[str, Any]:
    """Switch ``node``'s forwarding config: ``static_fdb``, a static entry for every host-like
    node's MAC toward the port that leads to it (``Topology.first_hops``: the first of a breadth
    first search, links in file order); with ECMP on (docs/topology.md "ECMP"), ``ecmp_groups``
    instead for the hosts it reaches over several equal-cost next hops, with the switch's
    ``ecmp_seed`` and the hosts' names; and ``flood_ports`` where the switches form a cycle
    (netstack.topo.routes). Without ECMP and loops: exactly the static entries of before."""
    hops = routes.equal_cost_hops(topology, node) if routes.ecmp_on(topology, node) else {}
    static: dict[str, str] = {}
    groups: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for other, via in topology.first_hops(node).items():
        if topology.node(other).kind is NodeKind.SWITCH:
            continue
        mac = built.mac(other, topology.links_of(other)[0].name)
        if len(hops.get(other, ())) > 1:
            groups[mac] = list(hops[other])  # (the first is ``via``)
            names[mac] = other
        else:
            static[mac] = via
    out: dict[str, Any] = {"static_fdb": static}
    if groups:
        out.update(ecmp_groups=groups, ecmp_seed=routes.ecmp_seed(topology, node), ecmp_names=names)
    flood = routes.flood_ports(topology, node)
    if flood is not None:
        out["flood_ports"] = list(flood)
    return out


#: ``[links.features.<end>.switch]`` keys -> PortConfig fields (sizes accept "20KB" etc.)
PORT_OPTIONS = {
    "lossless": ("lossless", bool), "xoff": ("xoff_bytes", "size"), "xon": ("xon_bytes", "size"),
    "ecn_threshold": ("ecn_threshold_bytes", "size"), "default_class": ("default_class", "class"),
    "peer_mac_pfc": ("peer_mac", "peer"), "pfc_from_host": ("pfc_from_host", bool),
    "pfc_watchdog": ("pfc_watchdog_ns", "watchdog"), "pfc_enable": ("pfc_enable", "classes"),
    "source_ips": ("source_ips", "sources"),
}
#: The PFC watchdog on edge ports unless the file says otherwise: production switches detect a
#: pause storm in 100-400 ms; fabric ports have it off (see switch_config)
EDGE_PFC_WATCHDOG_NS = 100_000_000


def port_options(link: str, options: dict[str, Any]) -> dict[str, Any]:
    """Switch-port settings a topology file gives per link end, e.g.
    ``[links.features.b] switch = { lossless = true, xoff = "20KB", xon = "10KB" }``."""
    from ..topo.model import TopologyError, parse_delay, parse_size

    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in PORT_OPTIONS:
            raise TopologyError([(f"links[{link}].features.switch.{key}",
                                  f"unknown option; known: {', '.join(sorted(PORT_OPTIONS))}")])
        field, kind = PORT_OPTIONS[key]
        try:
            if kind == "size":
                out[field] = parse_size(value)
            elif kind == "watchdog":
                off = value is False or value == "off" or value == 0
                out[field] = None if off else (parse_delay(value) or None)  # "0" is off too
            elif kind is bool:
                if not isinstance(value, bool):
                    raise ValueError(f"{value!r} is not true/false")
                out[field] = value
            elif kind == "classes":  # 802.1Qbb per-priority PFC enable: a list of priorities
                if not isinstance(value, list) or not all(
                        isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 7 for v in value):
                    raise ValueError(f"{value!r} is not a list of priority classes (integers 0-7; [] for none)")
                out[field] = sorted(set(value))
            elif kind == "sources":  # BCP 38 at an edge port: the host's addresses, or false (off)
                if value is False:
                    out[field] = None
                elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                    out[field] = [str(ipaddress.IPv4Address(v)) for v in value]
                else:
                    raise ValueError(f"{value!r} is not a list of IPv4 addresses (or false: no filtering)")
            elif kind == "class":  # an 802.1Qbb priority: PFC has eight
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 7:
                    raise ValueError(f"{value!r} is not a priority class (an integer 0-7)")
                out[field] = value
            else:
                out[field] = value
        except (TypeError, ValueError, OverflowError) as exc:
            raise TopologyError([(f"links[{link}].features.switch.{key}", str(exc))]) from None
    return out
