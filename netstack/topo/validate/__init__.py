"""A parsed topology file checked section by section and built into the model's classes
(:mod:`netstack.topo.classes`): ``[topology]`` (:mod:`.topology`), ``[defaults]``
(:mod:`.defaults`), ``[[nodes]]`` (:mod:`.nodes`), ``[[links]]`` (:mod:`.links`) with their
``impairment`` (:mod:`.impairment`), ``state`` and ``flap`` (:mod:`.flap`) and ``features``
(:mod:`.features`), and the tables protocols own (``[onepipe]``: copied here, checked by the
protocols, :mod:`netstack.topo.sections`); :mod:`.fields` holds what they share (the list of problems, the checks of
one field, the name patterns). Every section reports into one list, each problem with the path
of its field (``links[1].impairment.delay``), so that one :class:`TopologyError` names every
problem of a file, always in the same order."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ... import protocols
from ..classes import NodeKind, Topology, TopologyError
from .defaults import parse_defaults
from .fields import Errors, as_table, unknown_keys
from .links import LinkTable, parse_links
from .nodes import NodeTable, parse_nodes
from .topology import parse_topology_ecmp, parse_topology_section

_TOP_KEYS = set(protocols.GENERIC_SECTIONS)


def topology_from_dict(data: Mapping[str, Any], source: str = "<topology>") -> Topology:
    """Validate a parsed TOML document and build the :class:`Topology`."""
    errors = Errors()
    if not isinstance(data, Mapping):
        raise TopologyError([("", "a topology must be a table")], source)
    owned = protocols.sections()
    unknown_keys(errors, "", data, _TOP_KEYS | set(owned))
    # Every section reports into the same list, in this order, so that one TopologyError
    # names every problem of the file and always in the same order.
    name, prefix, paper_rate, keys, metrics_port = parse_topology_section(errors, data)
    ecmp, ecmp_seed = parse_topology_ecmp(errors, data)
    defaults = parse_defaults(errors, data)
    nodes = parse_nodes(errors, data)
    links = parse_links(errors, data, nodes, defaults)
    sections = _protocol_tables(errors, data, owned)
    if not errors:
        # Only a file whose every node and link is valid is complete enough to check as a whole.
        _check_whole(errors, nodes, links)
    if errors:
        raise TopologyError(errors.items, source)
    ordered_nodes = tuple(nodes.nodes[n] for n in nodes.paths if n in nodes.nodes)
    return Topology(name, prefix, ordered_nodes, tuple(links.links), source, paper_rate, keys, metrics_port,
                    sections, ecmp=ecmp, ecmp_seed=ecmp_seed)


def _protocol_tables(errors: Errors, data: Mapping[str, Any], owned: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The protocols' top-level tables, copied (the topology must not share the caller's); that
    each is a table is checked here, what is in it by its protocol."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(owned):
        if name not in data:
            continue
        table = as_table(errors, name, data[name])
        if table is not None:
            out[name] = copy.deepcopy(table)
    return out


def _check_whole(errors: Errors, nodes: NodeTable, links: LinkTable) -> None:
    """What only the whole file shows: a host-like node without a link, a MAC used twice."""
    for n_name, node in nodes.nodes.items():
        if node.kind is not NodeKind.SWITCH and n_name not in links.attached:
            errors.add(f"{nodes.paths[n_name]}", f"{node.kind.value} {n_name} has no link")
    macs: dict[str, str] = {}
    for link in links.links:
        for end in link.ends:
            where = f"{links.paths[link.name]} ({end.node} end)"
            if end.mac in macs:
                errors.add(where, f"MAC {end.mac} is already used by {macs[end.mac]}")
            macs[end.mac] = where
