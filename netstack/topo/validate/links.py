"""``[[links]]``: the ends, the name, rate, delay, MTU and buffer, the FCS and headroom, the
interface names; each link checked against the nodes and the links before it, with its
impairment (:mod:`.impairment`), state and flap (:mod:`.flap`) and feature tables
(:mod:`.features`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..classes import (
    DEFAULT_SWITCH_HEADROOM,
    IFNAME_MAX,
    LINK_NAME_MAX,
    Link,
    LinkEnd,
    Node,
    NodeKind,
    derived_mac,
    ip_mac,
)
from ..values import MAX_IN_FLIGHT_BYTES, parse_delay, parse_rate, parse_size, show, show_delay
from .defaults import LinkDefaults
from .features import link_features
from .fields import IFNAME_RE, LINK_NAME_RE, Errors, as_table, int_field, parsed, unknown_keys
from .flap import link_faults
from .impairment import link_impairment
from .nodes import NodeTable

_LINK_KEYS = {
    "name", "a", "b", "a_ifname", "b_ifname", "rate", "delay", "mtu", "headroom", "buffer", "fcs", "state", "flap",
    "impairment", "features",
}


@dataclass
class LinkTable:
    """The links built so far and the names later links must not clash with."""

    links: list[Link] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)  # link name -> path
    attached: dict[str, str] = field(default_factory=dict)  # single-homed node -> path of its link
    ifnames: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, ifname) -> path


def parse_links(errors: Errors, data: Mapping[str, Any], nodes: NodeTable, defaults: LinkDefaults) -> LinkTable:
    """``[[links]]``, in file order."""
    table = LinkTable()
    raw_links = data.get("links")
    if raw_links is None:
        raw_links = []
    elif not isinstance(raw_links, list):
        errors.add("links", "must be an array of tables ([[links]])")
        raw_links = []
    for i, raw in enumerate(raw_links):
        _parse_link(errors, f"links[{i}]", raw, nodes, defaults, table)
    return table


def _parse_link(
    errors: Errors, path: str, raw: Any, nodes: NodeTable, defaults: LinkDefaults, table: LinkTable
) -> None:
    """One ``[[links]]`` entry, appended to ``table.links`` only if it is valid and nothing before it
    in the file was invalid.

    Each part is checked even after an earlier one failed, so that one pass reports every
    problem; ``ok`` says whether this link is still buildable.
    """
    t = as_table(errors, path, raw)
    if t is None:
        return
    unknown_keys(errors, path, t, _LINK_KEYS)
    ends, ok = _link_ends(errors, path, t, nodes)
    l_name = _link_name(errors, path, t, ends, ok, table)
    ok = ok and l_name is not None
    rate, delay, mtu, buffer = _link_numbers(errors, path, t, defaults)
    ok = ok and rate is not None and delay is not None and mtu is not None and buffer is not None
    ok = _check_in_flight(errors, path, rate, delay) and ok
    both_switches = ok and all(nodes.nodes[ends[s]].kind is NodeKind.SWITCH for s in ("a", "b"))
    fcs, headroom, framing_ok = _link_framing(errors, path, t, ok, both_switches)
    ok = ok and framing_ok
    impairment, impairment_ok = link_impairment(errors, path, t, nodes, ends)
    ok = ok and impairment_ok
    features, features_ok = link_features(errors, path, t)
    ok = ok and features_ok
    state, flap = link_faults(errors, path, t)
    resolved_ifnames, ifnames_ok = _link_ifnames(errors, path, t, nodes, ends, table)
    ok = ok and ifnames_ok

    if not ok or errors:
        # Keep validating the rest, but never build a half-checked link.
        return
    assert l_name is not None and rate is not None and delay is not None and mtu is not None
    assert buffer is not None and headroom is not None
    link_ends = [
        _link_end(nodes.nodes[ends[side]], l_name, resolved_ifnames[side], features[side]) for side in ("a", "b")
    ]
    table.links.append(
        Link(l_name, link_ends[0], link_ends[1], rate, delay, mtu, headroom, buffer, fcs, impairment, state, flap)
    )


def _link_ends(errors: Errors, path: str, t: dict[str, Any], nodes: NodeTable) -> tuple[dict[str, str], bool]:
    """``a`` and ``b``: side -> node for each end that names a valid node, and whether both
    ends do so and are different nodes."""
    ok = True
    ends: dict[str, str] = {}
    for side in ("a", "b"):
        v = t.get(side)
        if v is None:
            errors.add(f"{path}.{side}", "missing: name the node at this end")
            ok = False
        elif not isinstance(v, str):
            errors.add(f"{path}.{side}", f"{show(v)} is not a node name")
            ok = False
        elif v not in nodes.paths:
            errors.add(f"{path}.{side}", f"unknown node {show(v)}")
            ok = False
        elif v not in nodes.nodes:
            ok = False  # the node itself is invalid and already reported
        else:
            ends[side] = v
    if ok and ends["a"] == ends["b"]:
        errors.add(f"{path}.b", f"a link cannot join {ends['a']} to itself")
        ok = False
    return ends, ok


def _link_name(
    errors: Errors, path: str, t: dict[str, Any], ends: dict[str, str], ends_ok: bool, table: LinkTable
) -> str | None:
    """The link's name, ``<a>-<b>`` unless set, registered in ``table``; None if it is invalid,
    taken, or (unset) the ends are not valid to derive it from."""
    l_name = t.get("name")
    if l_name is None:
        if ends_ok:
            l_name = f"{ends['a']}-{ends['b']}"
    elif not isinstance(l_name, str) or not LINK_NAME_RE.fullmatch(l_name) or len(l_name) > LINK_NAME_MAX:
        errors.add(
            f"{path}.name",
            f"{show(l_name)} is not a link name (letters, digits, '_', '.', '-'; at most {LINK_NAME_MAX})",
        )
        return None
    if l_name is not None:
        if l_name in table.paths:
            errors.add(f"{path}.name", f"duplicate link name {show(l_name)} (also {table.paths[l_name]})")
            return None
        table.paths[l_name] = path
    return l_name


def _link_numbers(
    errors: Errors, path: str, t: dict[str, Any], defaults: LinkDefaults
) -> tuple[int | None, int | None, int | None, int | None]:
    """rate, delay, mtu and buffer: the link's own or ``[defaults]``; None where its own is invalid."""
    rate: int | None = defaults.rate
    if "rate" in t:
        rate = parsed(errors, f"{path}.rate", t["rate"], parse_rate)
    delay: int | None = defaults.delay
    if "delay" in t:
        delay = parsed(errors, f"{path}.delay", t["delay"], parse_delay)
    mtu: int | None = defaults.mtu
    if "mtu" in t:
        mtu = int_field(errors, f"{path}.mtu", t["mtu"], 68, 65535 - 256)
    buffer: int | None = defaults.buffer
    if "buffer" in t:
        buffer = parsed(errors, f"{path}.buffer", t["buffer"], parse_size)
    return rate, delay, mtu, buffer


def _check_in_flight(errors: Errors, path: str, rate: int | None, delay: int | None) -> bool:
    """Whether the bytes a link's sending switch holds while they propagate (rate x delay / 8)
    stay within :data:`MAX_IN_FLIGHT_BYTES`; reported on ``delay``, the usual culprit."""
    if rate is None or delay is None or rate * delay <= MAX_IN_FLIGHT_BYTES * 8 * 10**9:
        return True
    errors.add(f"{path}.delay", f"{show_delay(delay)} at {rate} bit/s keeps {rate * delay // (8 * 10**9)} bytes "
                                f"in flight (rate x delay / 8), above the limit of 16GiB ({MAX_IN_FLIGHT_BYTES} bytes)")
    return False


def _link_framing(
    errors: Errors, path: str, t: dict[str, Any], ok: bool, both_switches: bool
) -> tuple[bool, int | None, bool]:
    """``fcs`` and ``headroom``, whose defaults depend on whether both ends are switches, and
    whether they are valid. ``ok``: the link is valid so far, so that its ends can be judged."""
    fcs = bool(both_switches)
    framing_ok = True
    if "fcs" in t:
        if not isinstance(t["fcs"], bool):
            errors.add(f"{path}.fcs", f"{show(t['fcs'])} is not true/false")
            framing_ok = False
        else:
            fcs = t["fcs"]
            if fcs and ok and not both_switches:
                errors.add(
                    f"{path}.fcs",
                    "the software FCS needs a switch at both ends (a kernel host neither adds nor checks it)",
                )
                framing_ok = False
    headroom: int | None = DEFAULT_SWITCH_HEADROOM if both_switches else 0
    if "headroom" in t:
        headroom = int_field(errors, f"{path}.headroom", t["headroom"], 0, 256)
        framing_ok = framing_ok and headroom is not None
    return fcs, headroom, framing_ok


def _link_ifnames(
    errors: Errors, path: str, t: dict[str, Any], nodes: NodeTable, ends: dict[str, str], table: LinkTable
) -> tuple[dict[str, str], bool]:
    """Each end's interface name (``a_ifname``/``b_ifname``, else ``eth0`` on a host-like node
    and ``p-<peer>`` on a switch), unique on its node, and whether both are valid. Also
    records each host-like end in ``table.attached``: they are single-homed. Both need two
    valid, different ends, so without them there is nothing to check."""
    resolved_ifnames: dict[str, str] = {}
    ok = True
    if len(ends) != 2 or ends["a"] == ends["b"]:
        return resolved_ifnames, ok
    for side, other in (("a", "b"), ("b", "a")):
        node = nodes.nodes[ends[side]]
        key = f"{side}_ifname"
        if node.kind is not NodeKind.SWITCH:
            if node.name in table.attached:
                errors.add(
                    f"{path}.{side}",
                    f"{node.kind.value} {node.name} already has a link ({table.attached[node.name]}); "
                    f"hosts (and every host-like node kind) are single-homed",
                )
                ok = False
                continue  # its interface name clash would only repeat the point
            table.attached[node.name] = path
        if key in t:
            ifn = t[key]
            if not isinstance(ifn, str) or not IFNAME_RE.fullmatch(ifn) or len(ifn) > IFNAME_MAX or ifn == "lo":
                errors.add(
                    f"{path}.{key}",
                    f"{show(ifn)} is not an interface name (letters, digits, '_', '.', '-'; "
                    f"at most {IFNAME_MAX}; not \"lo\")",
                )
                ok = False
                continue
        else:
            ifn = "eth0" if node.kind is not NodeKind.SWITCH else f"p-{ends[other]}"
        if (node.name, ifn) in table.ifnames:
            errors.add(
                f"{path}.{key}",
                f"interface {ifn} of {node.name} is already used by {table.ifnames[(node.name, ifn)]}"
                + ("" if key in t else f"; set {key} to tell the two links apart"),
            )
            ok = False
        else:
            table.ifnames[(node.name, ifn)] = path
            resolved_ifnames[side] = ifn
    return resolved_ifnames, ok


def _link_end(node: Node, link: str, ifname: str, features: dict[str, Any]) -> LinkEnd:
    """``node``'s end of a valid link: a switch port's MAC is derived from the node and link
    names, a host-like node's interface has the node's own."""
    if node.kind is NodeKind.SWITCH:
        mac = derived_mac(node.name, link)
    else:
        assert node.ip is not None
        mac = node.mac or ip_mac(node.ip)
    return LinkEnd(node.name, ifname, mac, features)
