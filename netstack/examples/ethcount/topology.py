"""ethcount from a topology file: ``[links.features.<end>] ethcount = {...}`` puts a counter on that
end's switch port, for the live daemons and ``netstack sim`` alike::

    [[links]]
    name = "h1-sw1"
    a = "h1"
    b = "sw1"
    [links.features.b]                                  # b: sw1's end, its port p-h1
    ethcount = { ethertype = 0x88b5, egress = true }

Options, both optional: ``ethertype`` (an integer, default 0x88b5) and ``egress`` (true: count
what the port sends too; default false: what it receives only).

The switch's feature loader (``netstack.switch.plugins``) finds this module through the registry
(``features={"ethcount": ...}`` in netstack/protocols.py) and calls the two functions every feature
module has: :func:`validate_link` when the file is loaded, with the link's two tables, and
:func:`attach` when a switch is built, with the options :func:`validate_link` returned (live, they
travel to the switch daemon as JSON in its config, so they must be plain values).
"""

from __future__ import annotations

from typing import Any

from netstack.errors import ConfigError
from netstack.topo.model import Link, NodeKind, Topology, TopologyError

from .engine import check_ethertype
from .feature import EthCountFeature, make_feature
from .header import DEFAULT_ETHERTYPE

KEYS = ("ethertype", "egress")


def _end(topology: Topology, node: str, table: Any, where: str) -> tuple[dict[str, Any] | None,
                                                                          list[tuple[str, str]]]:
    """One end's checked options, or the problems found, each with the path of its field."""
    kind = topology.node(node).kind
    if kind is not NodeKind.SWITCH:
        return None, [(where, f"{node} is a {kind.value}: ethcount counts at a switch's port")]
    if not isinstance(table, dict):
        return None, [(where, f"must be a table such as {{ ethertype = 0x88b5 }}, not {type(table).__name__}")]
    errors = [(f"{where}.{key}", f"unknown option (known: {', '.join(KEYS)})") for key in table if key not in KEYS]
    try:
        ethertype = check_ethertype(table.get("ethertype", DEFAULT_ETHERTYPE))
    except ConfigError as exc:
        errors.append((f"{where}.ethertype", exc.problem))
    egress = table.get("egress", False)
    if not isinstance(egress, bool):
        errors.append((f"{where}.egress", f"must be true or false, not {egress!r}"))
    if errors:
        return None, errors
    return {"ethertype": ethertype, "egress": egress}, []


def validate_link(topology: Topology, link: Link, tables: dict[str, Any], path: str) -> dict[str, Any]:
    """Check each end's ``ethcount`` table (``tables``: ``{"a": table | None, "b": ...}``); the
    options per end, ``{"a": options | None, "b": ...}``. Every problem of both ends is raised
    at once, as a :class:`TopologyError` naming each field (``links[h1-sw1].features.b.ethcount.egress``)."""
    out: dict[str, Any] = {}
    errors: list[tuple[str, str]] = []
    for side, end in (("a", link.a), ("b", link.b)):
        table = tables.get(side)
        out[side] = None
        if table is not None:
            out[side], problems = _end(topology, end.node, table, f"{path}.{side}.ethcount")
            errors += problems
    if errors:
        raise TopologyError(errors, topology.source)
    return out


def attach(switch: Any, port: str, options: dict[str, Any], now_ns: int | None = None) -> EthCountFeature:
    """Put the counter ``options`` describe (checked by :func:`validate_link`) on ``port`` of ``switch``."""
    feature = make_feature(options["ethertype"], options["egress"])
    switch.attach_feature(port, feature)
    return feature


__all__ = ["KEYS", "attach", "validate_link"]
