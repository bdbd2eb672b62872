"""The topology model's classes: nodes, links and their ends, impairments, flaps and the
topology itself, with its error and the names and MACs derived from them (docs/topology.md).
Frozen dataclasses, built from a file by :mod:`netstack.topo.validate` only after every check
passed; everything the builder, the daemons and the tests need to agree on is computed from
them, purely."""

from __future__ import annotations

import enum
import hashlib
import ipaddress
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NetstackError

#: Linux IFNAMSIZ is 16 including the terminating NUL.
IFNAME_MAX = 15
#: Node names must leave room for the ``p-`` of a switch port named after its peer.
NODE_NAME_MAX = IFNAME_MAX - 2
PREFIX_MAX = 12
LINK_NAME_MAX = 32

DEFAULT_PREFIX = "ns"
DEFAULT_RATE_BPS = 100_000_000  # 100 Mbit/s: the paper's 100G scaled down 1000x (docs/architecture.md "Time and scale")
DEFAULT_DELAY_NS = 10_000  # 10 us propagation: a few metres of fibre plus a PHY, as in a rack
DEFAULT_MTU = 1500
DEFAULT_BUFFER_BYTES = 200_000  # 200 KB per egress port, ~16 ms at 100 Mbit/s, ~133 full frames
#: Extra device MTU on switch-to-switch links, for what the switches add to a host's
#: full-size frame there: the 4-byte software FCS trailer, LinkGuardian tags (3 B each +
#: 2 B next-EtherType) and room to spare. AF_PACKET refuses to send a frame longer than
#: device MTU + 14, so without it a 1514-byte host frame plus FCS could not be forwarded.
DEFAULT_SWITCH_HEADROOM = 64


class TopologyError(NetstackError, ValueError):
    """A topology file (or dict) is invalid. ``errors`` lists ``(field_path, problem)``."""

    def __init__(self, errors: list[tuple[str, str]], source: str = "<topology>") -> None:
        self.errors = list(errors)
        self.source = source
        lines = [f"{path}: {problem}" if path else problem for path, problem in self.errors]
        if len(lines) == 1:
            msg = f"{source}: {lines[0]}"
        else:
            msg = f"{source}: {len(lines)} problems:\n  " + "\n  ".join(lines)
        super().__init__(msg)


def _node_kinds() -> dict[str, str]:
    """switch and host, and the kinds protocols add (``netstack.protocols``: DTA's collector,
    a host that runs the collector daemon), as enum members."""
    from .. import protocols

    kinds = {"HOST": "host", "SWITCH": "switch"}
    for kind in protocols.node_kinds():
        kinds[kind.upper().replace("-", "_")] = kind
    return kinds


#: What a node is. Every kind but SWITCH is host-like: single-homed, one IPv4 address.
if TYPE_CHECKING:
    class NodeKind(enum.StrEnum):
        """(For type checkers: the two built-in kinds; the protocols' kinds exist at run time.)"""

        HOST = "host"
        SWITCH = "switch"
else:
    NodeKind = enum.StrEnum("NodeKind", _node_kinds())


class Direction(enum.StrEnum):
    A_TO_B = "a>b"
    B_TO_A = "b>a"
    BOTH = "both"


class Backend(enum.StrEnum):
    AUTO = "auto"
    NETEM = "netem"
    NFT = "nft"
    #: the switch's own seeded model (netstack.switch.impair) on the sending switch port:
    #: the only backend with the bursty Gilbert-Elliott model, and reproducible from ``seed``
    SWITCH = "switch"


@dataclass(frozen=True)
class Node:
    name: str
    kind: NodeKind
    ip: ipaddress.IPv4Interface | None = None  # hosts and collectors only
    mac: str | None = None  # explicit MAC of a host's/collector's single interface
    #: the host's clock (host-like nodes only): host time = true time + offset + true time x
    #: drift / 1e6 (docs/topology.md "Per-host clocks"); zero: the true time
    clock_offset_ns: int = 0
    clock_drift_ppm: float = 0.0
    #: a switch's own ``ecmp`` (None: the topology's) and ``ecmp_seed`` (None: derived from the
    #: topology's and the switch's name; docs/topology.md "ECMP", netstack.topo.routes)
    ecmp: bool | None = None
    ecmp_seed: int | None = None

    @property
    def has_ip(self) -> bool:
        return self.kind is not NodeKind.SWITCH


@dataclass(frozen=True)
class Impairment:
    """Loss/corruption on a link (see ``netstack.topo.impair`` and ``netstack.switch.impair``).

    ``corrupt`` and ``loss`` are probabilities per frame (0.001 = 0.1 %), applied on the
    egress of the sending end(s) chosen by ``direction``. The kernel backends (netem, nft)
    draw each frame independently; the ``switch`` backend runs the switch's seeded model,
    which can also be the two-state Gilbert-Elliott chain (``p_good_to_bad`` > 0: in the bad
    state ``loss_bad``/``corrupt_bad`` apply). ``seed`` seeds that model on live runs; the
    virtual-time runtime (netstack.sim) seeds every impairment from its own ``--seed``.

    ``delay_ns``, ``jitter_ns``, ``duplicate`` and ``reorder`` shape the link as tc-netem(8)
    does (netem, or the switch backend's same model; nft cannot): frames held ``delay`` ±
    ``jitter`` longer (so jitter reorders), a ``reorder`` share sent at once past the held ones,
    a ``duplicate`` share sent twice.
    """

    corrupt: float = 0.0
    loss: float = 0.0
    direction: Direction = Direction.A_TO_B
    backend: Backend = Backend.AUTO
    p_good_to_bad: float = 0.0
    p_bad_to_good: float = 1.0
    loss_bad: float = 0.0
    corrupt_bad: float = 0.0
    seed: int = 1
    delay_ns: int = 0
    jitter_ns: int = 0
    duplicate: float = 0.0
    reorder: float = 0.0

    @property
    def active(self) -> bool:
        return (self.corrupt > 0 or self.loss > 0
                or (self.p_good_to_bad > 0 and (self.loss_bad > 0 or self.corrupt_bad > 0)) or self.shapes)

    @property
    def shapes(self) -> bool:
        """Delay, jitter, duplication or reordering (netem or the switch backend; not nft)."""
        return bool(self.delay_ns or self.jitter_ns or self.duplicate or self.reorder)

    @property
    def gilbert_elliott(self) -> bool:
        return self.p_good_to_bad > 0

    def model(self, seed: int | None = None) -> dict[str, Any]:
        """The switch model's settings (``netstack.switch.ImpairmentConfig`` fields) for this impairment."""
        return {"loss": self.loss, "corrupt": self.corrupt, "p_good_to_bad": self.p_good_to_bad,
                "p_bad_to_good": self.p_bad_to_good, "loss_bad": self.loss_bad, "corrupt_bad": self.corrupt_bad,
                "seed": self.seed if seed is None else seed, "delay_ns": self.delay_ns, "jitter_ns": self.jitter_ns,
                "duplicate": self.duplicate, "reorder": self.reorder}


@dataclass(frozen=True)
class Flap:
    """A link that ``netstack up`` flaps on its own (``[links.flap]``): ``start`` after the
    daemons are up, down for ``down``, up for ``up``, ``count`` times (``netstack link ... flap``)."""

    down_ns: int
    up_ns: int
    count: int = 1
    start_ns: int = 0

    def argv(self) -> list[str]:
        """The ``netstack link LINK flap`` options that run it."""
        return ["--down-ms", f"{self.down_ns / 1e6:g}", "--up-ms", f"{self.up_ns / 1e6:g}", "--count",
                str(self.count), "--after-ms", f"{self.start_ns / 1e6:g}"]


#: The most flaps a topology may ask of one link (a typo guard, not a limit of the runtime)
MAX_FLAPS = 1_000_000


@dataclass(frozen=True)
class LinkEnd:
    """One end of a link: the node, its interface (veth end) there and that interface's MAC."""

    node: str
    ifname: str
    mac: str
    features: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Link:
    name: str
    a: LinkEnd
    b: LinkEnd
    rate_bps: int = DEFAULT_RATE_BPS
    delay_ns: int = DEFAULT_DELAY_NS
    mtu: int = DEFAULT_MTU
    headroom: int = 0
    buffer_bytes: int = DEFAULT_BUFFER_BYTES
    fcs: bool = False
    impairment: Impairment | None = None
    #: ``"down"``: ``netstack up`` leaves the link down (its veths administratively down)
    state: str = "up"
    flap: Flap | None = None

    @property
    def device_mtu(self) -> int:
        """MTU set on both veth ends: the IP MTU plus the switch headroom."""
        return self.mtu + self.headroom

    @property
    def ends(self) -> tuple[LinkEnd, LinkEnd]:
        return (self.a, self.b)

    def end(self, node: str) -> LinkEnd:
        if self.a.node == node:
            return self.a
        if self.b.node == node:
            return self.b
        raise KeyError(f"node {node!r} is not an end of link {self.name!r}")

    def peer(self, node: str) -> LinkEnd:
        return self.b if self.end(node) is self.a else self.a

    def impaired_ends(self) -> list[LinkEnd]:
        """The ends whose egress carries this link's impairment."""
        imp = self.impairment
        if imp is None or not imp.active:
            return []
        return {
            Direction.A_TO_B: [self.a],
            Direction.B_TO_A: [self.b],
            Direction.BOTH: [self.a, self.b],
        }[imp.direction]


@dataclass(frozen=True)
class Topology:
    name: str
    prefix: str
    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    source: str = field(default="<topology>", compare=False)
    #: the link rate of the paper setting this topology models (``[topology] paper_rate``), from
    #: which results derive their time scale (docs/architecture.md "Time and scale"); None: not said
    paper_rate_bps: int | None = None
    #: ``[topology] keys``: the key file (``netstack keys generate``) the protocols' authenticated
    #: frames derive their keys from, as written (relative: to the topology file's directory);
    #: None: no authentication
    keys: str | None = None
    #: ``[topology] metrics_port``: every daemon serves Prometheus metrics on 127.0.0.1 of the
    #: machine, the first on this port and each next one on the next (netstack.io.metrics);
    #: None: no metrics
    metrics_port: int | None = None
    #: the protocols' own top-level tables (``[onepipe]``, ``[tcsack]``: ``netstack.protocols``
    #: ``sections``), as written; their modules check them (:mod:`netstack.topo.sections`)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: ``[topology] ecmp``: every switch forwards to a host over all its equal-cost next hops
    #: (a switch's own ``ecmp`` overrides it); ``ecmp_seed``: the seed the switches' seeds are
    #: derived from (None: from their names alone). docs/topology.md "ECMP", netstack.topo.routes
    ecmp: bool = False
    ecmp_seed: int | None = None

    def keys_path(self) -> Path | None:
        """:attr:`keys` resolved: a relative path is taken from the topology file's directory."""
        if self.keys is None:
            return None
        path = Path(self.keys).expanduser()
        if not path.is_absolute() and Path(self.source).is_file():
            path = Path(self.source).resolve().parent / path
        return path

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node {name!r} in topology {self.name!r}")

    def link(self, name: str) -> Link:
        for link in self.links:
            if link.name == name:
                return link
        raise KeyError(f"no link {name!r} in topology {self.name!r}")

    def links_of(self, node: str) -> list[Link]:
        return [link for link in self.links if node in (link.a.node, link.b.node)]

    def ends_of(self, node: str) -> list[tuple[Link, LinkEnd]]:
        """Every (link, this node's end of it), in file order."""
        return [(link, link.end(node)) for link in self.links_of(node)]

    def iface(self, node: str, link: str) -> LinkEnd:
        return self.link(link).end(node)

    def first_hops(self, switch: str) -> dict[str, str]:
        """``{node: interface}``: the port ``switch`` reaches every other node by, breadth first
        through switches only, links in file order (a switch's static forwarding entries, and
        the routes protocols reason about). With ECMP a host's entry holds every equal-cost
        first hop, this one first (:func:`netstack.topo.routes.equal_cost_hops`)."""
        first: dict[str, str] = {}
        for link, end in self.ends_of(switch):
            first.setdefault(link.peer(switch).node, end.ifname)
        seen = {switch, *first}
        queue = deque(first.items())
        while queue:
            current, via = queue.popleft()
            if self.node(current).kind is not NodeKind.SWITCH:
                continue
            for link in self.links_of(current):
                nxt = link.peer(current).node
                if nxt not in seen:
                    seen.add(nxt)
                    first[nxt] = via
                    queue.append((nxt, via))
        return first

    def nodes_of_kind(self, kind: NodeKind) -> list[Node]:
        return [n for n in self.nodes if n.kind is kind]

    @property
    def hosts(self) -> list[Node]:
        return self.nodes_of_kind(NodeKind.HOST)

    @property
    def switches(self) -> list[Node]:
        return self.nodes_of_kind(NodeKind.SWITCH)

    def endpoints(self) -> Iterator[tuple[Node, Link, LinkEnd]]:
        for link in self.links:
            for end in link.ends:
                yield self.node(end.node), link, end


def derived_mac(node: str, link: str) -> str:
    """Stable locally administered unicast MAC for ``node``'s end of ``link``.

    02:xx:xx:xx:xx:xx with the low 40 bits from SHA-256 of ``node/link``: the same names give
    the same MAC on every run and every machine (captures stay comparable), and the 0x02
    first octet (locally administered, unicast) cannot clash with any vendor's address.
    """
    digest = hashlib.sha256(f"{node}/{link}".encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


def ip_mac(ip: ipaddress.IPv4Interface) -> str:
    """Readable default MAC of a host/collector: 02:00 then its IPv4 address (10.0.0.1 -> 02:00:0a:00:00:01)."""
    return ":".join(f"{b:02x}" for b in (0x02, 0x00, *ip.ip.packed))


def netns_name(prefix: str, node: str) -> str:
    """The network namespace of ``node`` in the topology running under ``prefix``."""
    return f"{prefix}-{node}"
