"""What a topology says about forwarding beyond a switch's first hops (``Topology.first_hops``):
every equal-cost next hop toward a host (ECMP), the switch's ECMP seed, and the spanning tree
the switches flood on when they form a cycle. Pure functions of the model, shared by both
runtimes through ``netstack.runtime.switch_config`` (docs/topology.md "ECMP").

- :func:`equal_cost_hops`: for each host-like node a switch reaches, the interfaces of every
  shortest path's first hop (paths through switches only, as ``first_hops``), in the order of
  the switch's links in the file, so the first is ``first_hops``'s. Parallel links between two
  switches are equal-cost hops too.
- :func:`ecmp_on`, :func:`ecmp_seed`: a switch's ``[[nodes]]`` ``ecmp``/``ecmp_seed``, else
  ``[topology]``'s; a seed not given is derived from the switch's name (and the topology's
  ``ecmp_seed``), so that no two switches hash alike.
- :func:`flood_tree`: a spanning tree of the switch graph (a forest, if it has several parts),
  breadth first from the switch with the most neighbouring switches (the first in the file
  among equals), links in file order: a switch floods broadcasts and unknown unicast on its
  ports to hosts and its tree links only (:func:`flood_ports`), so nothing circles when the
  switches form a loop (two spines and their leaves), and every host still hears a broadcast.
  Where the switch graph has no cycle the tree is all of it and nothing changes.
"""

from __future__ import annotations

import hashlib
from collections import deque

from .classes import NodeKind, Topology


def _switch_adjacency(topology: Topology) -> dict[str, list[tuple[str, str]]]:
    """``{switch: [(link, neighbouring switch)]}``, links in file order (parallel links each)."""
    adj: dict[str, list[tuple[str, str]]] = {n.name: [] for n in topology.switches}
    for link in topology.links:
        a, b = link.a.node, link.b.node
        if a in adj and b in adj:
            adj[a].append((link.name, b))
            adj[b].append((link.name, a))
    return adj


def _distances(adj: dict[str, list[tuple[str, str]]], start: str) -> dict[str, int]:
    """Hops from switch ``start`` to every switch it reaches."""
    dist = {start: 0}
    queue = deque([start])
    while queue:
        s = queue.popleft()
        for _, peer in adj[s]:
            if peer not in dist:
                dist[peer] = dist[s] + 1
                queue.append(peer)
    return dist


def equal_cost_hops(topology: Topology, switch: str) -> dict[str, tuple[str, ...]]:
    """``{host-like node: the interfaces of ``switch`` on a shortest path to it}`` (see the module
    docstring); hosts the switch does not reach are left out."""
    adj = _switch_adjacency(topology)
    ends = topology.ends_of(switch)
    from_switch: dict[str, dict[str, int]] = {}
    out: dict[str, tuple[str, ...]] = {}
    for node in topology.nodes:
        if node.kind is NodeKind.SWITCH or not topology.links_of(node.name):
            continue
        attach = topology.links_of(node.name)[0].peer(node.name).node  # a host-like node is single-homed
        if attach not in adj:
            continue  # linked to another host: no switch reaches it
        if attach == switch:
            out[node.name] = tuple(end.ifname for link, end in ends if link.peer(switch).node == node.name)
            continue
        dist = from_switch.setdefault(attach, _distances(adj, attach))
        if switch not in dist:
            continue
        want = dist[switch] - 1
        out[node.name] = tuple(end.ifname for link, end in ends if dist.get(link.peer(switch).node) == want)
    return out


def ecmp_on(topology: Topology, switch: str) -> bool:
    """Whether ``switch`` spreads flows over equal-cost next hops (its own ``ecmp``, else the topology's)."""
    own = topology.node(switch).ecmp
    return topology.ecmp if own is None else own


def ecmp_seed(topology: Topology, switch: str) -> int:
    """``switch``'s ECMP seed (0 to 2**63 - 1): its own ``ecmp_seed``, else derived from its name
    and the topology's ``ecmp_seed`` (SHA-256: switches of one topology differ, and the same
    names and seed give the same seeds everywhere)."""
    own = topology.node(switch).ecmp_seed
    if own is not None:
        return own
    base = "" if topology.ecmp_seed is None else f"{topology.ecmp_seed}/"
    return int.from_bytes(hashlib.sha256(f"ecmp/{base}{switch}".encode()).digest()[:8], "big") >> 1


def has_switch_cycle(topology: Topology) -> bool:
    """Whether the switches and the links between them (parallel links too) form a cycle."""
    parent = {n.name: n.name for n in topology.switches}

    def root(s: str) -> str:
        while parent[s] != s:
            parent[s] = parent[parent[s]]
            s = parent[s]
        return s

    for link in topology.links:
        a, b = link.a.node, link.b.node
        if a in parent and b in parent:
            ra, rb = root(a), root(b)
            if ra == rb:
                return True
            parent[ra] = rb
    return False


def flood_tree(topology: Topology) -> frozenset[str]:
    """The names of the switch-to-switch links of the spanning tree (see the module docstring)."""
    adj = _switch_adjacency(topology)
    order = sorted(adj, key=lambda s: -len({peer for _, peer in adj[s]}))  # (stable: file order among equals)
    tree: set[str] = set()
    seen: set[str] = set()
    for root in order:
        if root in seen:
            continue
        seen.add(root)
        queue = deque([root])
        while queue:
            s = queue.popleft()
            for link, peer in adj[s]:
                if peer not in seen:
                    seen.add(peer)
                    tree.add(link)
                    queue.append(peer)
    return frozenset(tree)


def flood_ports(topology: Topology, switch: str) -> tuple[str, ...] | None:
    """The interfaces ``switch`` floods on: every port to a host-like node and its tree links;
    None (every port, as without a tree) where the switch graph has no cycle."""
    if not has_switch_cycle(topology):
        return None
    tree = flood_tree(topology)
    return tuple(end.ifname for link, end in topology.ends_of(switch)
                 if topology.node(link.peer(switch).node).kind is not NodeKind.SWITCH or link.name in tree)


__all__ = ["ecmp_on", "ecmp_seed", "equal_cost_hops", "flood_ports", "flood_tree", "has_switch_cycle"]
