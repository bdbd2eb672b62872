"""DTA from a topology file: ``[links.features.<end>] dta = {...}`` on the switch end of a
collector's link turns the translator on when the topology comes up, in both runtimes::

    [[links]]
    name = "sw2-c1"
    a = "sw2"
    b = "c1"
    [links.features.a]
    dta = { role = "translator", collector = "c1", window = 1536, grace_reports = 1000 }

"Direct Telemetry Access" §5: the translator is the collector's ToR, so the table goes on the
switch end of the link whose other end is a ``collector`` node, the port facing it. Options:
``role`` (required: ``"translator"``), ``collector`` (optional: the link's other end, named to
make the file say it), and ``dta_enable``'s (``netstack dta enable``; docs/dta.md): the
grace period ``grace_reports`` or ``grace_ms``, ``append_flush_ms`` (``false``: never flush,
the public behaviour), ``max_redundancy``, ``ack_every``, ``track_seqnum``,
``sketch_nack_holdoff_ms``, ``udp_sport``, ``nak_window_ms`` (``false``: no time bound) and
``nak_window_slack``, ``window`` and ``window_timeout_ms``, ``cls``, and the translator's own
``ip`` and ``mac`` (default: the highest free address of the collector's subnet, the port's MAC).

When it is turned on. The translator needs the collector's queue pairs (QPN, rkey, PSN: its
``connect_info``, the stand-in for RDMA_CM, §7.2.1), which exist only once the collector runs,
so :func:`attach` (the switch's side, called by the switch daemon at start and by
``netstack.sim``) attaches nothing; the collector's side connects it:

- live: ``netstack up`` writes the declaration into the collector daemon's config
  (:func:`netstack.dta.control.node_daemon`); the daemon, started after the switches, binds its
  QPs to the translator and sends ``dta_enable`` to the switch before it answers on its control
  socket, so the translator is on when ``netstack up`` returns. A switch daemon restarted
  (``netstack fault kill sw2 --restart``) gets it again (``control.after_restart``); a collector
  restarted over its saved state keeps the translator it had (its QPs are the same, §5.3);
- virtual time: ``netstack.dta.simhosts.connect`` builds each declared collector node's
  simulated collector and enables the translator on the switch, as the DTA scenarios do.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from headers.inet import mac_bytes

from ..topo.model import Link, NodeKind, Topology, TopologyError
from ..topo.validate.features import each_end

ROLE = "translator"
#: options given as whole non-negative numbers
INT_OPTIONS = ("grace_reports", "max_redundancy", "ack_every", "nak_window_slack", "window", "udp_sport")
#: options given in milliseconds (non-negative numbers); those in OFF_OPTIONS may be ``false``: off
MS_OPTIONS = ("grace_ms", "append_flush_ms", "sketch_nack_holdoff_ms", "nak_window_ms", "window_timeout_ms")
OFF_OPTIONS = ("append_flush_ms", "nak_window_ms")
KEYS = ("role", "collector", *INT_OPTIONS, *MS_OPTIONS, "track_seqnum", "cls", "ip", "mac")


@dataclass(frozen=True)
class DeclaredTranslator:
    """A translator a topology file declares: on ``switch``'s ``port``, facing ``collector``;
    ``options`` are ``dta_enable``'s as the file gives them (``false`` read as None)."""

    switch: str
    port: str
    collector: str
    link: str
    options: dict[str, Any]


def _check_value(key: str, value: Any) -> str | None:
    """What is wrong with one option's value, or None."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if key in INT_OPTIONS:
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return f"must be a whole number >= 0, got {value!r}"
        if key == "udp_sport" and value > 0xFFFF:
            return f"must be a UDP port (0..65535), got {value}"
    elif key in MS_OPTIONS:
        if not (number and value >= 0) and not (key in OFF_OPTIONS and value is False):
            off = " or false (off)" if key in OFF_OPTIONS else ""
            return f"must be a number of milliseconds >= 0{off}, got {value!r}"
    elif key == "track_seqnum" and not isinstance(value, bool):
        return f"must be true or false, got {value!r}"
    elif key == "cls" and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 7):
        return f"must be a traffic class 0..7, got {value!r}"
    elif key == "ip":
        try:
            ipaddress.IPv4Address(value)
        except (ipaddress.AddressValueError, ValueError, TypeError):
            return f"must be an IPv4 address, got {value!r}"
    elif key == "mac":
        try:
            mac_bytes(value)
        except (ValueError, TypeError, AttributeError):
            return f"must be a MAC address (02:00:00:00:00:01), got {value!r}"
    return None


def _placement(topology: Topology, link: Link, side: str, table: dict[str, Any], where: str) -> list[tuple[str, str]]:
    """Where the table may go: on a switch, facing a collector (DTA §5: the collector's ToR)."""
    end, other = (link.a, link.b) if side == "a" else (link.b, link.a)
    kind, peer = topology.node(end.node).kind, topology.node(other.node)
    if kind is not NodeKind.SWITCH:
        return [(where, f"{end.node} is a {kind.value}: the translator runs in the collector's ToR switch "
                        f"(DTA §5), so dta goes on the switch end of this link")]
    if peer.kind.value != "collector":
        return [(where, f"{other.node}, at the other end of {link.name}, is a {peer.kind.value}: the translator "
                        "goes on the switch port facing a collector node")]
    if "collector" in table and table["collector"] != other.node:
        return [(f"{where}.collector", f"{table['collector']!r} is not at the other end of {link.name} "
                                       f"({other.node} is)")]
    return []


def _end(topology: Topology, link: Link, side: str, table: Any, path: str) -> dict[str, Any]:
    """One end's checked options: ``{"role", "collector", "options": {dta_enable's}}``."""
    where = f"{path}.{side}.dta"
    if not isinstance(table, dict):
        raise TopologyError([(where, f"must be a table, not {type(table).__name__}")], topology.source)
    errors = [(f"{where}.{key}", f"unknown option (known: {', '.join(KEYS)})") for key in table if key not in KEYS]
    if table.get("role") != ROLE:
        errors.append((f"{where}.role", f"{table.get('role')!r} is not a role (the one role: {ROLE!r})"))
    errors += _placement(topology, link, side, table, where)
    for key, value in table.items():
        problem = _check_value(key, value) if key in KEYS else None
        if problem:
            errors.append((f"{where}.{key}", problem))
    if not errors and "ip" in table:
        used = {str(n.ip.ip) for n in topology.nodes if n.ip is not None}
        if table["ip"] in used:
            errors.append((f"{where}.ip", f"{table['ip']} is a node's address: the translator needs one of its own"))
    if errors:
        raise TopologyError(errors, topology.source)
    options = {k: (None if v is False and k in OFF_OPTIONS else v) for k, v in table.items()
               if k not in ("role", "collector")}
    _check_config(options, f"{where}", topology)
    collector = (link.b if side == "a" else link.a).node
    return {"role": ROLE, "collector": collector, "options": options}


def _check_config(options: dict[str, Any], where: str, topology: Topology) -> None:
    """What only the options together can get wrong (grace period as a count and a time, a
    window without a time-out...): the translator's own checks (TranslatorConfig)."""
    from .options import translator_kwargs
    from .translator import TranslatorConfig

    try:
        kwargs = translator_kwargs(options)
        TranslatorConfig({"regions": []}, b"\x02\0\0\0\0\x01", b"\x0a\0\0\x01", **kwargs)
    except (TypeError, ValueError) as exc:
        raise TopologyError([(where, str(exc))], topology.source) from None


def validate_link(topology: Topology, link: Link, tables: dict[str, Any], path: str) -> dict[str, Any]:
    """Check each end's ``dta`` table; ``{"a": options | None, "b": options | None}``, options
    JSON-able (they go into the switch daemon's config): ``{"role", "collector", "options"}``."""
    return each_end(topology, tables, lambda side, table: _end(topology, link, side, table, path))


def attach(switch: Any, port: str, options: dict[str, Any], now_ns: int | None = None) -> None:
    """Nothing to attach yet: the translator needs the collector's ``connect_info``, which the
    collector's side brings (module docstring, "When it is turned on"). Checked options only."""
    if options.get("role") != ROLE:
        raise ValueError(f"port {port}: dta role must be {ROLE!r}, got {options.get('role')!r}")


def declared(topology: Topology) -> list[DeclaredTranslator]:
    """Every translator ``topology`` declares, checked (TopologyError naming the field)."""
    out = []
    for link in topology.links:
        tables = {"a": link.a.features.get("dta"), "b": link.b.features.get("dta")}
        if tables["a"] is None and tables["b"] is None:
            continue
        checked = validate_link(topology, link, tables, f"links[{link.name}].features")
        for side, end in (("a", link.a), ("b", link.b)):
            if checked[side] is not None:
                out.append(DeclaredTranslator(end.node, end.ifname, checked[side]["collector"], link.name,
                                              dict(checked[side]["options"])))
    return out


def declared_for(topology: Topology, collector: str) -> DeclaredTranslator | None:
    """The translator declared for ``collector`` (a collector has one link, so at most one)."""
    return next((d for d in declared(topology) if d.collector == collector), None)


__all__ = ["KEYS", "ROLE", "DeclaredTranslator", "attach", "declared", "declared_for", "validate_link"]
