"""The graph ``netstack ui`` draws: a run state's nodes, links and ports, laid out in layers.

Rows, top to bottom: nodes of other kinds (a protocol's: a telemetry collector, a controller),
then the switches by tier (the farthest from the hosts on top: spines above leaves), then the
hosts. A switch's tier is its distance in switch hops from a switch that has a host. Within a row
the nodes are ordered by the mean position of their neighbours in the rows already placed (the
barycentre heuristic of layered graph drawing, which keeps links from crossing on trees and
leaf-spine fabrics), names in natural order breaking ties. Everything here is pure: it reads a
:class:`netstack.runtime.RunState` and returns JSON.
"""

from __future__ import annotations

import math
import re
from collections import deque
from typing import Any

from ..runtime import RunState

#: pixels between two nodes of a row, between two rows, and around the drawing
X_STEP = 96
Y_STEP = 130
MARGIN = 60
#: a small testbed is drawn this wide, so that the page does not blow it up to giant nodes
MIN_WIDTH = 480
#: nodes a row holds on one line; a longer row is staggered over several lines, STAGGER pixels apart
MAX_ROW = 12
STAGGER = 56
SWITCH = "switch"
HOST = "host"


def natural_key(name: str) -> list[Any]:
    """``h2`` before ``h10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def node_kinds(state: RunState) -> dict[str, str]:
    """Every node -> its kind: ``switch`` where a switch daemon runs, the kind of another daemon on
    the node (a protocol's node kind), else ``host``. Daemons of no node (a link's flapper) count
    for nothing."""
    kinds: dict[str, str] = {}
    for d in state.daemons:
        if d.node in state.namespaces and (d.kind == SWITCH or d.node not in kinds):
            kinds[d.node] = d.kind
    return {node: kinds.get(node, HOST) for node in state.namespaces}


def _neighbours(state: RunState) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {node: set() for node in state.namespaces}
    for link in state.links.values():
        if link.a in out and link.b in out:
            out[link.a].add(link.b)
            out[link.b].add(link.a)
    return out


def switch_tiers(kinds: dict[str, str], near: dict[str, set[str]]) -> dict[str, int]:
    """Each switch's distance in switch hops from the nearest switch with a host (0: a ToR); a
    switch that reaches no host is a ToR too."""
    switches = [n for n, k in kinds.items() if k == SWITCH]
    tier = {s: 0 for s in switches if any(kinds[m] == HOST for m in near[s])}
    todo = deque(tier)
    while todo:
        s = todo.popleft()
        for m in near[s]:
            if kinds[m] == SWITCH and m not in tier:
                tier[m] = tier[s] + 1
                todo.append(m)
    return {s: tier.get(s, 0) for s in switches}


def rows(state: RunState) -> list[list[str]]:
    """The rows of nodes, top to bottom, each in its drawing order."""
    kinds = node_kinds(state)
    near = _neighbours(state)
    tiers = switch_tiers(kinds, near)
    top = max(tiers.values(), default=0)
    layers = [[n for n, k in kinds.items() if k not in (SWITCH, HOST)]]
    layers += [[s for s, t in tiers.items() if t == level] for level in range(top, -1, -1)]
    layers.append([n for n, k in kinds.items() if k == HOST])
    placed: dict[str, float] = {}
    done: dict[int, list[str]] = {}
    # the switches first, from the top tier down, then the hosts below them and the others above
    for i in [*range(1, len(layers) - 1), len(layers) - 1, 0]:
        row = sorted(layers[i], key=lambda n: (_barycentre(n, near, placed), natural_key(n)))
        for pos, n in enumerate(row):
            placed[n] = (pos + 0.5) / len(row)
        done[i] = row
    return [done[i] for i in range(len(layers)) if done[i]]


def _barycentre(node: str, near: dict[str, set[str]], placed: dict[str, float]) -> float:
    known = [placed[m] for m in near[node] if m in placed]
    return sum(known) / len(known) if known else 0.5


def graph(state: RunState) -> dict[str, Any]:
    """``{"nodes": [...], "links": [...], "width", "height"}``: each node with its kind, address,
    row and position; each link with its ends' nodes and ports, rate and delay. A row longer than
    :data:`MAX_ROW` keeps its order from left to right but staggers its nodes over several lines
    (node i on line i mod k), so that a switch with many hosts does not make the drawing a strip."""
    kinds = node_kinds(state)
    layered = rows(state)
    widest = min(max((len(r) for r in layered), default=1), MAX_ROW)
    width = max(widest * X_STEP + 2 * MARGIN, MIN_WIDTH)
    nodes = []
    y = MARGIN
    for level, row in enumerate(layered):
        lines = math.ceil(len(row) / MAX_ROW)
        for pos, name in enumerate(row):
            x = MARGIN + (pos + 0.5) * (width - 2 * MARGIN) / len(row)
            nodes.append({"name": name, "kind": kinds[name], "row": level, "x": round(x, 1),
                          "y": y + (pos % lines) * STAGGER, "ip": state.hosts.get(name, "")})
        y += Y_STEP + (lines - 1) * STAGGER
    links = []
    for name, link in state.links.items():
        ends = {p.node: p.ifname for p in state.ends_of(name)}
        links.append({"name": name, "a": link.a, "b": link.b, "a_port": ends.get(link.a, ""),
                      "b_port": ends.get(link.b, ""), "rate_bps": link.rate_bps, "delay_ns": link.delay_ns,
                      "fcs": link.fcs})
    return {"nodes": nodes, "links": links, "width": width, "height": y - Y_STEP + MARGIN}


__all__ = ["graph", "natural_key", "node_kinds", "rows", "switch_tiers"]
