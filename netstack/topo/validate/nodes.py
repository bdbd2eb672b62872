"""``[[nodes]]``: names, kinds, addresses (one topology is one L2 subnet), MACs, host clocks and a
switch's ECMP keys, each node checked against the ones before it."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..classes import IFNAME_MAX, NODE_NAME_MAX, Node, NodeKind
from ..values import parse_clock_offset, parse_drift_ppm, show
from .fields import MAC_RE, NODE_NAME_RE, Errors, as_table, parsed, unknown_keys
from .topology import parse_ecmp_keys

_NODE_KEYS = {"name", "kind", "ip", "mac", "clock_offset", "clock_drift_ppm", "ecmp", "ecmp_seed"}


@dataclass
class NodeTable:
    """What ``[[nodes]]`` has declared: later nodes and every link are checked against it."""

    #: the valid nodes
    nodes: dict[str, Node] = field(default_factory=dict)
    #: every declared name -> its path, valid node or not: a link to an invalid node is not
    #: reported again (the node already is), and the built topology keeps this (file) order
    paths: dict[str, str] = field(default_factory=dict)
    #: (path, network) of the first address: one topology is one L2 subnet
    subnet: tuple[str, ipaddress.IPv4Network] | None = None
    ips: dict[ipaddress.IPv4Address, str] = field(default_factory=dict)  # address -> node


def parse_nodes(errors: Errors, data: Mapping[str, Any]) -> NodeTable:
    """``[[nodes]]``, in file order."""
    table = NodeTable()
    raw_nodes = data.get("nodes")
    if raw_nodes is None:
        errors.add("nodes", "missing: a topology needs [[nodes]]")
        raw_nodes = []
    elif not isinstance(raw_nodes, list):
        errors.add("nodes", "must be an array of tables ([[nodes]])")
        raw_nodes = []
    for i, raw in enumerate(raw_nodes):
        _parse_node(errors, f"nodes[{i}]", raw, table)
    return table


def _parse_node(errors: Errors, path: str, raw: Any, table: NodeTable) -> None:
    """One ``[[nodes]]`` entry, added to ``table.nodes`` only if it is valid throughout."""
    t = as_table(errors, path, raw)
    if t is None:
        return
    unknown_keys(errors, path, t, _NODE_KEYS)
    n_name = t.get("name")
    if not isinstance(n_name, str):
        errors.add(f"{path}.name", "missing" if n_name is None else f"{show(n_name)} is not a string")
        return
    ok = _check_node_name(errors, path, n_name)
    if n_name in table.nodes or n_name in table.paths:
        errors.add(f"{path}.name", f"duplicate node name {show(n_name)} (also {table.paths[n_name]})")
        return
    table.paths[n_name] = path
    kind_raw = t.get("kind")
    try:
        kind = NodeKind(kind_raw)
    except ValueError:
        allowed = ", ".join(k.value for k in NodeKind)
        problem = "missing" if kind_raw is None else f"{show(kind_raw)} is not a node kind"
        errors.add(f"{path}.kind", f"{problem} (one of: {allowed})")
        return
    ip: ipaddress.IPv4Interface | None = None
    mac: str | None = None
    offset, drift = 0, 0.0
    ecmp, ecmp_seed = None, None
    if kind is NodeKind.SWITCH:
        bad = len(errors.items)
        ecmp, ecmp_seed = parse_ecmp_keys(errors, path, t)
        ok = ok and len(errors.items) == bad
        for key in ("ip", "mac"):
            if key in t:
                errors.add(f"{path}.{key}", "switches have no address (their ports are plain L2 ports)")
                ok = False
        for key in ("clock_offset", "clock_drift_ppm"):
            if key in t:
                errors.add(f"{path}.{key}", "only hosts have a clock here (a switch forwards what the hosts stamp)")
                ok = False
    else:
        ip, ip_ok = _parse_node_ip(errors, path, t, kind, n_name, table)
        mac, mac_ok = _parse_node_mac(errors, path, t)
        offset, drift, clock_ok = _parse_node_clock(errors, path, t)
        ok = ok and ip_ok and mac_ok and clock_ok
        for key in ("ecmp", "ecmp_seed"):
            if key in t:
                errors.add(f"{path}.{key}", "only switches forward: ECMP is a switch's (on its [[nodes]] entry or "
                                            "for all in [topology])")
                ok = False
    if ok:
        table.nodes[n_name] = Node(n_name, kind, ip, mac, offset, drift, ecmp, ecmp_seed)


def _check_node_name(errors: Errors, path: str, n_name: str) -> bool:
    """Whether ``n_name`` can name a node (interface names derived from it must fit the kernel's limit)."""
    if not NODE_NAME_RE.fullmatch(n_name):
        errors.add(f"{path}.name", f"{show(n_name)} is not a node name (letter, then letters/digits/_)")
        return False
    if len(n_name) > NODE_NAME_MAX:
        errors.add(
            f"{path}.name",
            f"{show(n_name)} is {len(n_name)} characters; at most {NODE_NAME_MAX} so that the switch "
            f"port \"p-{n_name}\" fits an interface name ({IFNAME_MAX})",
        )
        return False
    return True


def _parse_node_ip(
    errors: Errors, path: str, t: dict[str, Any], kind: NodeKind, n_name: str, table: NodeTable
) -> tuple[ipaddress.IPv4Interface | None, bool]:
    """A host-like node's address, and whether it is valid: present, unique, in the topology's subnet."""
    raw_ip = t.get("ip")
    if raw_ip is None:
        errors.add(f"{path}.ip", f"missing: a {kind.value} needs an IPv4 address such as \"10.0.0.1/24\"")
        return None, False
    ip = _parse_ip(errors, f"{path}.ip", raw_ip)
    if ip is None:
        return None, False
    ok = True
    if ip.ip in table.ips:
        errors.add(f"{path}.ip", f"{ip.ip} is already the address of {table.ips[ip.ip]}")
        ok = False
    table.ips[ip.ip] = n_name
    if table.subnet is None:
        table.subnet = (path, ip.network)
    elif ip.network != table.subnet[1]:
        errors.add(
            f"{path}.ip",
            f"{ip} is not in subnet {table.subnet[1]} of {table.subnet[0]} (one topology is one L2 subnet)",
        )
        ok = False
    return ip, ok


def _parse_node_clock(errors: Errors, path: str, t: dict[str, Any]) -> tuple[int, float, bool]:
    """A host-like node's clock: ``clock_offset`` and ``clock_drift_ppm`` (0: the true time),
    and whether they are valid."""
    offset, drift, ok = 0, 0.0, True
    if "clock_offset" in t:
        v = parsed(errors, f"{path}.clock_offset", t["clock_offset"], parse_clock_offset)
        offset, ok = (0, False) if v is None else (v, ok)
    if "clock_drift_ppm" in t:
        d = parsed(errors, f"{path}.clock_drift_ppm", t["clock_drift_ppm"], parse_drift_ppm)
        drift, ok = (0.0, False) if d is None else (d, ok)
    return offset, drift, ok


def _parse_node_mac(errors: Errors, path: str, t: dict[str, Any]) -> tuple[str | None, bool]:
    """A host-like node's explicit MAC (None: derived from its address), and whether it is valid."""
    if "mac" not in t:
        return None, True
    raw_mac = t["mac"]
    if not isinstance(raw_mac, str) or not MAC_RE.fullmatch(_normalise_mac(raw_mac)):
        errors.add(f"{path}.mac", f"{show(raw_mac)} is not a MAC address (aa:bb:cc:dd:ee:ff)")
        return None, False
    mac = _normalise_mac(raw_mac)
    first = int(mac[:2], 16)
    if first & 1:
        errors.add(f"{path}.mac", f"{mac} is a multicast address; an interface needs a unicast MAC")
        return mac, False
    if mac == "00:00:00:00:00:00":
        errors.add(f"{path}.mac", "00:00:00:00:00:00 is not a usable MAC")
        return mac, False
    return mac, True


def _normalise_mac(value: str) -> str:
    return value.strip().lower().replace("-", ":")


def _parse_ip(errors: Errors, path: str, raw: Any) -> ipaddress.IPv4Interface | None:
    if not isinstance(raw, str) or "/" not in raw:
        errors.add(path, f"{show(raw)} is not an IPv4 address with prefix length (e.g. \"10.0.0.1/24\")")
        return None
    try:
        ip = ipaddress.ip_interface(raw.strip())
    except ValueError:
        errors.add(path, f"{show(raw)} is not an IPv4 address with prefix length (e.g. \"10.0.0.1/24\")")
        return None
    if not isinstance(ip, ipaddress.IPv4Interface):
        errors.add(path, f"{show(raw)}: only IPv4 is supported (IPv6 is disabled in the namespaces)")
        return None
    net = ip.network
    if net.prefixlen > 30 and net.prefixlen != 31:
        errors.add(path, f"{ip}: a /{net.prefixlen} leaves no room for two hosts")
        return None
    if net.prefixlen <= 30 and ip.ip in (net.network_address, net.broadcast_address):
        errors.add(path, f"{ip} is the network or broadcast address of {net}")
        return None
    if ip.ip.is_multicast or ip.ip.is_loopback or ip.ip.is_unspecified:
        errors.add(path, f"{ip.ip} is not a unicast host address")
        return None
    return ip
