"""Topologies: namespaces, veth pairs, offloads and kernel-injected link impairments.

``model`` describes a topology (TOML file or the default) and validates it; ``netns`` builds
it as Linux network namespaces joined by veth pairs and tears it down; ``impair`` injects
loss and corruption on a veth with tc netem or nftables; ``nsenter`` (used by both) runs code
or opens netlink handles inside a namespace. See docs/topology.md.
"""

from .model import (
    Backend,
    Direction,
    Impairment,
    Link,
    LinkEnd,
    Node,
    NodeKind,
    Topology,
    TopologyError,
    default_topology,
    load_topology,
    loads_topology,
)

__all__ = [
    "Backend",
    "Direction",
    "Impairment",
    "Link",
    "LinkEnd",
    "Node",
    "NodeKind",
    "Topology",
    "TopologyError",
    "default_topology",
    "load_topology",
    "loads_topology",
]
