"""1Pipe's view of a topology: switch tiers, the up/down direction of every switch port, and the
checks that barriers can flow (1Pipe §3, design topics in docs/papers.md).

1Pipe §3: each physical switch is an *up* and a *down* logical switch joined by a loopback, so
that routing is a DAG; without it a barrier could wait on itself and never advance. Here a
switch's *tier* is its hop distance from the nearest end node (host or collector: every node
that is not a switch), a ToR being 1. A port toward an end node or toward a switch of a lower
tier is ``down``; toward a switch of the same or a higher tier it is ``up``
(:func:`port_directions`). An up output carries the minimum over the down inputs only, a down
output the minimum over all inputs (:mod:`.barrier`).

:func:`validate` refuses, with a :class:`~netstack.topo.model.TopologyError` naming the problem:

- a switch that reaches no end node (it has no tier);
- directions whose logical up/down graph has a cycle (:func:`check_dag`): tiers from hop
  distance never make one, directions given by hand can;
- a route the switches actually take (their static forwarding: the first hop of a breadth-first
  search from each switch, as ``netstack.runtime.switch_config`` builds it) that enters a switch
  from above and leaves it upward again (:func:`check_routes`): the up logical switch did not
  count that input, so the barrier it writes would not hold for the packet. A chain of three
  ToRs is such a topology: the middle one passes traffic between its two peers.
"""

from __future__ import annotations

import ipaddress
from collections import deque

from ..topo.model import NodeKind, Topology, TopologyError
from .barrier import DOWN, UP
from .graph import find_cycle

Directions = dict[str, dict[str, str]]


def _is_switch(topology: Topology, name: str) -> bool:
    return topology.node(name).kind is NodeKind.SWITCH


#: the node kind of the reliable 1Pipe controller (netstack.protocols, netstack.onepipe.ctlnode)
CONTROLLER_KIND = "onepipe-controller"


def switch_tiers(topology: Topology) -> dict[str, int]:
    """``{switch: tier}``: hop distance from the nearest end node (a ToR is 1). A switch that
    reaches no end node is left out (:func:`validate` refuses it)."""
    tier: dict[str, int] = {}
    todo: deque[str] = deque()
    for node in topology.nodes:
        # the controller is no 1Pipe process (design topic §8): hung off a spine, it must not make
        # that spine a ToR
        if node.kind is NodeKind.SWITCH or node.kind.value == CONTROLLER_KIND:
            continue
        for link in topology.links_of(node.name):
            peer = link.peer(node.name).node
            if _is_switch(topology, peer) and peer not in tier:
                tier[peer] = 1
                todo.append(peer)
    while todo:
        sw = todo.popleft()
        for link in topology.links_of(sw):
            peer = link.peer(sw).node
            if _is_switch(topology, peer) and peer not in tier:
                tier[peer] = tier[sw] + 1
                todo.append(peer)
    return tier


def port_directions(topology: Topology, switch: str, tiers: dict[str, int] | None = None) -> dict[str, str]:
    """``{port ifname: "up" | "down"}`` for ``switch`` (its ports are named as the topology
    names its link ends, ``p-<peer>`` by default; docs/topology.md)."""
    if tiers is None:
        tiers = switch_tiers(topology)
    if not _is_switch(topology, switch):
        raise TopologyError([("nodes", f"{switch} is a {topology.node(switch).kind.value}, not a switch")],
                            topology.source)
    if switch not in tiers:
        raise TopologyError([("nodes", f"switch {switch} reaches no host: 1Pipe cannot give it a tier")],
                            topology.source)
    mine = tiers[switch]
    out: dict[str, str] = {}
    for link, end in topology.ends_of(switch):
        peer = link.peer(switch).node
        below = not _is_switch(topology, peer) or tiers.get(peer, mine) < mine
        out[end.ifname] = DOWN if below else UP
    return out


def all_directions(topology: Topology) -> Directions:
    """``{switch: port_directions(...)}`` for every switch."""
    tiers = switch_tiers(topology)
    return {sw.name: port_directions(topology, sw.name, tiers) for sw in topology.switches}


def _logical_edges(topology: Topology, directions: Directions) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """Where a packet can go between logical switches ``(switch, "up" | "down")``: the loopback
    from up to down, and over each switch-to-switch link from the logical switch owning the
    sending port (its direction) to the one the receiving port feeds (a port facing down feeds
    the up logical switch, a port facing up only the down one)."""
    edges: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for sw in directions:
        edges.setdefault((sw, UP), set()).add((sw, DOWN))
        edges.setdefault((sw, DOWN), set())
    for link in topology.links:
        a, b = link.a, link.b
        if a.node not in directions or b.node not in directions:
            continue
        for src, dst in ((a, b), (b, a)):
            out_dir = directions[src.node].get(src.ifname)
            in_dir = directions[dst.node].get(dst.ifname)
            if out_dir is None or in_dir is None:
                continue
            edges[(src.node, out_dir)].add((dst.node, UP if in_dir == DOWN else DOWN))
    return edges


def check_dag(topology: Topology, directions: Directions) -> None:
    """Refuse directions whose logical up/down graph has a cycle (1Pipe §3), naming one."""
    edges = _logical_edges(topology, directions)
    path = find_cycle({node: sorted(edges[node]) for node in sorted(edges)})
    if path:
        text = " -> ".join(f"{s}.{d}" for s, d in [*path, path[0]])
        raise TopologyError([("links", f"1Pipe needs routing to be a DAG (up/down logical switches), "
                                       f"and these port directions make a cycle: {text}")], topology.source)


def first_hops(topology: Topology, switch: str) -> dict[str, str]:
    """``{node: port ifname}``: the port ``switch`` forwards toward each node by, as its static
    forwarding does (``Topology.first_hops``, the rule of ``netstack.runtime.switch_config``)."""
    return topology.first_hops(switch)


def check_routes(topology: Topology, directions: Directions) -> None:
    """Refuse a route between two end nodes that enters a switch from above (an ``up`` port) and
    leaves it by an ``up`` port: a valley, which 1Pipe's DAG routing forbids (1Pipe §3)."""
    hops = {sw: first_hops(topology, sw) for sw in directions}
    ends = [n.name for n in topology.nodes if n.kind is not NodeKind.SWITCH]
    for src in ends:
        links = topology.links_of(src)
        if not links:
            continue
        for dst in ends:
            if dst == src:
                continue
            node, entered = links[0].peer(src).node, links[0].peer(src).ifname
            path = [src]
            while _is_switch(topology, node) and node in directions:
                path.append(node)
                out = hops[node].get(dst)
                if out is None or len(path) > len(topology.nodes) + 1:
                    break  # unreachable (or a loop, which breadth-first hops never make)
                if directions[node].get(entered) == UP and directions[node].get(out) == UP:
                    raise TopologyError([("links", f"the route {src} -> {dst} ({' -> '.join(path)} ...) enters "
                                                   f"{node} from above ({entered}) and leaves it upward ({out}): "
                                                   "1Pipe needs routes that only go up, then only down (a DAG)")],
                                        topology.source)
                link = next(lk for lk, e in topology.ends_of(node) if e.ifname == out)
                node, entered = link.peer(node).node, link.peer(node).ifname


def validate(topology: Topology, directions: Directions | None = None) -> Directions:
    """Check that 1Pipe can run on ``topology`` (module docstring); return the directions
    (computed from the tiers unless given)."""
    tiers = switch_tiers(topology)
    lost = [sw.name for sw in topology.switches if sw.name not in tiers]
    if lost:
        raise TopologyError([("nodes", f"switch {name} reaches no host: 1Pipe cannot give it a tier")
                             for name in lost], topology.source)
    if directions is None:
        directions = {sw.name: port_directions(topology, sw.name, tiers) for sw in topology.switches}
    check_dag(topology, directions)
    check_routes(topology, directions)
    return directions


def beacon_ip(topology: Topology) -> str:
    """A source address for the beacons a ToR sends its processes: the highest address of the
    end nodes' subnet that no node uses (a switch has no address; the receiving kernel wants a
    unicast source that is not its own)."""
    used = {n.ip.ip for n in topology.nodes if n.ip is not None}
    nets = [n.ip.network for n in topology.nodes if n.ip is not None]
    if not nets:
        raise TopologyError([("nodes", "no node has an address: 1Pipe needs hosts")], topology.source)
    net = nets[0]
    for offset in range(2, min(net.num_addresses, 1 << 16)):
        candidate = ipaddress.IPv4Address(int(net.broadcast_address) - offset + 1)
        if candidate not in used and candidate != net.network_address:
            return str(candidate)
    raise TopologyError([("nodes", f"no free address left in {net} for the switches' beacons")], topology.source)


__all__ = ["Directions", "all_directions", "beacon_ip", "check_dag", "check_routes", "first_hops",
           "port_directions", "switch_tiers", "validate"]
