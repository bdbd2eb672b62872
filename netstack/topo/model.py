"""Topology model: nodes, links, impairments, and the TOML file that describes them.

A topology is one layer-2 domain: hosts and collectors (single-homed, one IPv4 address each)
hang off software switches, switches are joined to each other by links, and every link is
one veth pair between two network namespaces. Everything that the builder, the daemons and
the tests need to agree on -- interface names, MAC addresses, device MTUs -- is computed here,
purely, so that any process can recompute it from the file and get the same answer.

Validation is total: a file that loads has no unknown keys, no dangling references, no
clashing names, addresses or MACs, and only names that fit the kernel's limits. Every
problem is reported with the path of the offending field (``links[1].rate``) in one
:class:`TopologyError` before anything is built.
"""

from __future__ import annotations

import copy
import enum
import hashlib
import ipaddress
import re
import sys
import tomllib
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
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
#: Resolution of the nft impairment backend (``numgen random mod 1000000``).
NFT_RESOLUTION = 1e-6

# Upper bounds (docs/topology.md "Bounds"): far above anything a test bed asks for, low
# enough that every quantity derived from them is a finite, modest integer and that no
# daemon can be told to hold more than 16 GiB for one port.
#: 10 Tbit/s: 6x the fastest Ethernet standard (1.6T); a userspace switch paces a few Gbit/s.
MAX_RATE_BPS = 10**13
#: 1 hour: a datacenter link has microseconds, a satellite hop a quarter of a second.
MAX_DELAY_NS = 3600 * 10**9
#: 16 GiB: ~780x a Tofino's whole 22 MB packet buffer; also bounds xoff/xon/ecn_threshold.
MAX_SIZE_BYTES = 16 * 2**30
#: rate x delay / 8 of one link: the bytes its sending switch holds while they propagate.
MAX_IN_FLIGHT_BYTES = MAX_SIZE_BYTES
#: A host clock's offset from the true time, either way: the bound of ``delay`` (an hour; PTP
#: keeps real clocks within a microsecond).
MAX_CLOCK_OFFSET_NS = MAX_DELAY_NS
#: A host clock's drift: 1 % (a quartz oscillator drifts by tens of ppm; beyond 1 % there is
#: no synchronised clock left). Per-host clocks are modelled with the same bound.
MAX_CLOCK_DRIFT_PPM = 10_000.0
_MAX_RATE_TEXT = f"rate of 10Tbit ({MAX_RATE_BPS} bit/s)"
_MAX_DELAY_TEXT = "delay of 1 hour (3600s)"
_MAX_SIZE_TEXT = f"size of 16GiB ({MAX_SIZE_BYTES} bytes)"

# Every validation regex is anchored with \A...\Z and used with fullmatch: "$" would also
# match before a trailing newline, and "h1\n" would pass as a node name.
_NODE_NAME_RE = re.compile(r"\A[A-Za-z][A-Za-z0-9_]*\Z")
_PREFIX_RE = re.compile(r"\A[a-z][a-z0-9]*\Z")
_LINK_NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_IFNAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
_MAC_RE = re.compile(r"\A[0-9a-f]{2}(:[0-9a-f]{2}){5}\Z")
_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_RATE_RE = re.compile(rf"\A({_NUM})\s*([kmgt]?)bit\Z", re.IGNORECASE)
_DELAY_RE = re.compile(rf"\A({_NUM})\s*(ns|us|µs|ms|s)\Z")
_SIZE_RE = re.compile(rf"\A({_NUM})\s*(b|kb|kib|mb|mib|gb|gib)\Z", re.IGNORECASE)

_RATE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_DELAY_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9}
_SIZE_UNITS = {"b": 1, "kb": 10**3, "kib": 2**10, "mb": 10**6, "mib": 2**20, "gb": 10**9, "gib": 2**30}


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
        the routes protocols reason about)."""
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


# --------------------------------------------------------------------------- value parsers
# Each returns the value or raises ValueError with the text that goes after "path: ".


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _at_most(value: Any, amount: float, limit: int, what: str) -> int:
    """``amount`` (parsed from ``value``) as an int, or ValueError if it is above ``limit``.
    Compared before rounding, so that inf and 1e400 are refused rather than overflowing."""
    if not amount <= limit:
        raise ValueError(f"{_show(value)} is above the maximum {what}")
    return round(amount)


def parse_rate(value: Any) -> int:
    """``"100Mbit"``, ``"1Gbit"``, ``"1.5kbit"`` or an int in bit/s -> bit/s (SI prefixes),
    at most :data:`MAX_RATE_BPS`."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"{_show(value)} is not a positive rate in bit/s")
        return _at_most(value, value, MAX_RATE_BPS, _MAX_RATE_TEXT)
    if isinstance(value, str):
        m = _RATE_RE.fullmatch(value.strip())
        if m:
            bps = float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]
            if bps >= 1:
                return _at_most(value, bps, MAX_RATE_BPS, _MAX_RATE_TEXT)
    raise ValueError(f"{_show(value)} is not a rate (use e.g. \"100Mbit\")")


def parse_delay(value: Any) -> int:
    """``"10us"``, ``"1ms"``, ``"1.5ms"``, ``"0"`` or ``0`` -> nanoseconds, at most :data:`MAX_DELAY_NS`."""
    if _is_number(value) and value == 0:
        return 0
    if isinstance(value, str):
        text = value.strip()
        if text == "0":
            return 0
        m = _DELAY_RE.fullmatch(text)
        if m:
            return _at_most(value, float(m.group(1)) * _DELAY_UNITS[m.group(2)], MAX_DELAY_NS, _MAX_DELAY_TEXT)
    raise ValueError(f"{_show(value)} is not a delay (use e.g. \"10us\" or \"1ms\")")


def parse_size(value: Any) -> int:
    """``"200KB"`` (1000-based), ``"256KiB"`` (1024-based), ``"1MB"`` or an int in bytes -> bytes,
    at most :data:`MAX_SIZE_BYTES`."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"{_show(value)} is not a positive size in bytes")
        return _at_most(value, value, MAX_SIZE_BYTES, _MAX_SIZE_TEXT)
    if isinstance(value, str):
        m = _SIZE_RE.fullmatch(value.strip())
        if m:
            n = _at_most(value, float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()], MAX_SIZE_BYTES, _MAX_SIZE_TEXT)
            if n > 0:
                return n
    raise ValueError(f"{_show(value)} is not a size in bytes (use e.g. \"200KB\", \"256KiB\" or 200000)")


def parse_clock_offset(value: Any) -> int:
    """A host clock's offset, a delay that may be negative: ``"2us"``, ``"-1.5us"``, ``"+1ms"``,
    ``"0"`` or ``0`` -> nanoseconds, at most :data:`MAX_CLOCK_OFFSET_NS` either way."""
    if _is_number(value) and value == 0:
        return 0
    if isinstance(value, str):
        text = value.strip()
        body = text[1:] if text[:1] in ("+", "-") else text
        sign = -1 if text[:1] == "-" else 1
        if body == "0":
            return 0
        m = _DELAY_RE.fullmatch(body)
        if m:
            amount = float(m.group(1)) * _DELAY_UNITS[m.group(2)]
            if not amount <= MAX_CLOCK_OFFSET_NS:  # (inf and 1e400 too, before rounding)
                raise ValueError(f"{_show(value)} is beyond the maximum clock offset of 1 hour (3600s) either way")
            return sign * round(amount)
    raise ValueError(f"{_show(value)} is not a clock offset (use e.g. \"2us\" or \"-1.5us\")")


def parse_drift_ppm(value: Any) -> float:
    """A host clock's drift in parts per million: a number, at most :data:`MAX_CLOCK_DRIFT_PPM` either way."""
    if _is_number(value):
        try:
            ppm = float(value)
        except OverflowError:  # an int beyond float's range
            ppm = float("inf")
        if abs(ppm) <= MAX_CLOCK_DRIFT_PPM:
            return ppm
        if ppm == ppm:  # (nan is no number of ppm)
            raise ValueError(f"{_show(value)} is beyond the maximum drift of {MAX_CLOCK_DRIFT_PPM:g} ppm either way")
    raise ValueError(f"{_show(value)} is not a drift in ppm (a number such as 20 or -3.5)")


def parse_probability(value: Any) -> float:
    """A per-frame probability: a number in [0, 1] (``1e-3``) or a percentage string (``"0.1%"``)."""
    p: float | None = None
    if _is_number(value):
        try:
            p = float(value)
        except OverflowError:  # an int beyond float's range
            p = None
    elif isinstance(value, str) and value.strip().endswith("%"):
        try:
            p = float(value.strip()[:-1]) / 100.0
        except ValueError:
            p = None
    if p is None or not (0.0 <= p <= 1.0) or p != p:
        raise ValueError(f"{_show(value)} is not a probability (use a number in [0, 1] such as 1e-3, or \"0.1%\")")
    return p


def _show(value: Any) -> str:
    """``value`` as a problem quotes it: a string in double quotes (control characters escaped,
    so that a message stays one line), anything else as its repr."""
    if isinstance(value, str):
        return f'"{value}"' if value.isprintable() else f'"{repr(value)[1:-1]}"'
    try:
        return repr(value)
    except ValueError:  # an int of more digits than str() converts (sys.get_int_max_str_digits)
        return f"a {'negative ' if value < 0 else ''}{value.bit_length()}-bit integer"


def _show_delay(ns: int) -> str:
    """Nanoseconds in the largest unit that divides them: 3600000000000 -> "3600s"."""
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns % scale == 0:
            return f"{ns // scale}{unit}"
    return f"{ns}ns"


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


def _normalise_mac(value: str) -> str:
    return value.strip().lower().replace("-", ":")


# --------------------------------------------------------------------------- validation


class _Errors:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, problem: str) -> None:
        self.items.append((path, problem))

    def __bool__(self) -> bool:
        return bool(self.items)


_TOP_KEYS = {"topology", "defaults", "nodes", "links"}
_TOPOLOGY_KEYS = {"name", "prefix", "paper_rate", "keys", "metrics_port"}
#: ``[topology] metrics_port``: the first daemon's port; the others count up from it
METRICS_PORTS = (1024, 65000)
_DEFAULT_KEYS = {"rate", "delay", "mtu", "buffer"}
_NODE_KEYS = {"name", "kind", "ip", "mac", "clock_offset", "clock_drift_ppm"}
_LINK_KEYS = {
    "name", "a", "b", "a_ifname", "b_ifname", "rate", "delay", "mtu", "headroom", "buffer", "fcs", "state", "flap",
    "impairment", "features",
}
_IMPAIRMENT_KEYS = {"corrupt", "loss", "direction", "backend", "p_good_to_bad", "p_bad_to_good", "loss_bad",
                    "corrupt_bad", "seed", "delay", "jitter", "duplicate", "reorder"}
_GILBERT_KEYS = ("p_good_to_bad", "p_bad_to_good", "loss_bad", "corrupt_bad")
_FEATURE_KEYS = {"a", "b"}


def _unknown(errors: _Errors, path: str, table: Mapping[str, Any], allowed: set[str]) -> None:
    for key in table:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            errors.add(where, f"unknown key (allowed: {', '.join(sorted(allowed))})")


def _table(errors: _Errors, path: str, value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        errors.add(path, f"must be a table, not {type(value).__name__}")
        return None
    return value


def _int_field(errors: _Errors, path: str, value: Any, lo: int, hi: int) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool):
        errors.add(path, f"{_show(value)} is not an integer")
        return None
    if not lo <= value <= hi:
        errors.add(path, f"{_show(value)} is out of range [{lo}, {hi}]")
        return None
    return value


def _parsed(errors: _Errors, path: str, value: Any, parser: Any) -> Any:
    try:
        return parser(value)
    except (ValueError, OverflowError) as exc:  # the parsers bound their values; OverflowError is a safety net
        errors.add(path, str(exc))
        return None


def netns_name(prefix: str, node: str) -> str:
    """The network namespace of ``node`` in the topology running under ``prefix``."""
    return f"{prefix}-{node}"


def validate_prefix(prefix: Any) -> str:
    """Check a namespace prefix; raise :class:`TopologyError` if it is unusable."""
    if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix) or len(prefix) > PREFIX_MAX:
        raise TopologyError(
            [("prefix", f"{_show(prefix)} is not a prefix (lower-case letter, then letters/digits, "
                        f"at most {PREFIX_MAX} characters, no '-')")]
        )
    return prefix


@dataclass(frozen=True)
class _LinkDefaults:
    """``[defaults]``: what a link that does not set its own ``rate``/``delay``/``mtu``/``buffer`` gets."""

    rate: int
    delay: int
    mtu: int
    buffer: int


@dataclass
class _NodeTable:
    """What ``[[nodes]]`` has declared: later nodes and every link are checked against it."""

    #: the valid nodes
    nodes: dict[str, Node] = field(default_factory=dict)
    #: every declared name -> its path, valid node or not: a link to an invalid node is not
    #: reported again (the node already is), and the built topology keeps this (file) order
    paths: dict[str, str] = field(default_factory=dict)
    #: (path, network) of the first address: one topology is one L2 subnet
    subnet: tuple[str, ipaddress.IPv4Network] | None = None
    ips: dict[ipaddress.IPv4Address, str] = field(default_factory=dict)  # address -> node


@dataclass
class _LinkTable:
    """The links built so far and the names later links must not clash with."""

    links: list[Link] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)  # link name -> path
    attached: dict[str, str] = field(default_factory=dict)  # single-homed node -> path of its link
    ifnames: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, ifname) -> path


def topology_from_dict(data: Mapping[str, Any], source: str = "<topology>") -> Topology:
    """Validate a parsed TOML document and build the :class:`Topology`."""
    errors = _Errors()
    if not isinstance(data, Mapping):
        raise TopologyError([("", "a topology must be a table")], source)
    _unknown(errors, "", data, _TOP_KEYS)
    # Every section reports into the same list, in this order, so that one TopologyError
    # names every problem of the file and always in the same order.
    name, prefix, paper_rate, keys, metrics_port = _parse_topology_section(errors, data)
    defaults = _parse_defaults(errors, data)
    nodes = _parse_nodes(errors, data)
    links = _parse_links(errors, data, nodes, defaults)
    if not errors:
        # Only a file whose every node and link is valid is complete enough to check as a whole.
        _check_whole(errors, nodes, links)
    if errors:
        raise TopologyError(errors.items, source)
    ordered_nodes = tuple(nodes.nodes[n] for n in nodes.paths if n in nodes.nodes)
    return Topology(name, prefix, ordered_nodes, tuple(links.links), source, paper_rate, keys, metrics_port)


def _parse_topology_section(errors: _Errors, data: Mapping[str, Any]
                            ) -> tuple[str, str, int | None, str | None, int | None]:
    """``[topology]``: name, namespace prefix, paper rate, key file and metrics port (the
    defaults where absent or invalid)."""
    name, prefix = "topology", DEFAULT_PREFIX
    paper_rate: int | None = None
    keys: str | None = None
    metrics_port: int | None = None
    top = _table(errors, "topology", data.get("topology", {}))
    if top is not None:
        _unknown(errors, "topology", top, _TOPOLOGY_KEYS)
        if "name" in top:
            if isinstance(top["name"], str) and top["name"].strip():
                name = top["name"]
            else:
                errors.add("topology.name", f"{_show(top['name'])} is not a non-empty string")
        if "paper_rate" in top:
            paper_rate = _parsed(errors, "topology.paper_rate", top["paper_rate"], parse_rate)
        if "prefix" in top:
            try:
                prefix = validate_prefix(top["prefix"])
            except TopologyError as exc:
                errors.add("topology.prefix", exc.errors[0][1])
        if "keys" in top:
            value = top["keys"]
            if isinstance(value, str) and value.strip() and "\0" not in value and len(value) <= 4096:
                keys = value
            else:
                errors.add("topology.keys", f"{_show(value)} is not a path to a key file")
        if "metrics_port" in top:
            value = top["metrics_port"]
            lo, hi = METRICS_PORTS
            if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
                metrics_port = value
            else:
                errors.add("topology.metrics_port", f"{_show(value)} is not a TCP port in {lo}..{hi}")
    return name, prefix, paper_rate, keys, metrics_port


def _parse_defaults(errors: _Errors, data: Mapping[str, Any]) -> _LinkDefaults:
    """``[defaults]``; an invalid value is reported and the built-in default stands in for it."""
    d_rate, d_delay, d_mtu, d_buffer = DEFAULT_RATE_BPS, DEFAULT_DELAY_NS, DEFAULT_MTU, DEFAULT_BUFFER_BYTES
    defaults = _table(errors, "defaults", data.get("defaults", {}))
    if defaults is not None:
        _unknown(errors, "defaults", defaults, _DEFAULT_KEYS)
        if "rate" in defaults:
            d_rate = _parsed(errors, "defaults.rate", defaults["rate"], parse_rate) or d_rate
        if "delay" in defaults:
            v = _parsed(errors, "defaults.delay", defaults["delay"], parse_delay)
            d_delay = d_delay if v is None else v
        if "mtu" in defaults:
            d_mtu = _int_field(errors, "defaults.mtu", defaults["mtu"], 68, 65535 - 256) or d_mtu
        if "buffer" in defaults:
            d_buffer = _parsed(errors, "defaults.buffer", defaults["buffer"], parse_size) or d_buffer
    return _LinkDefaults(d_rate, d_delay, d_mtu, d_buffer)


def _parse_nodes(errors: _Errors, data: Mapping[str, Any]) -> _NodeTable:
    """``[[nodes]]``, in file order."""
    table = _NodeTable()
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


def _parse_node(errors: _Errors, path: str, raw: Any, table: _NodeTable) -> None:
    """One ``[[nodes]]`` entry, added to ``table.nodes`` only if it is valid throughout."""
    t = _table(errors, path, raw)
    if t is None:
        return
    _unknown(errors, path, t, _NODE_KEYS)
    n_name = t.get("name")
    if not isinstance(n_name, str):
        errors.add(f"{path}.name", "missing" if n_name is None else f"{_show(n_name)} is not a string")
        return
    ok = _check_node_name(errors, path, n_name)
    if n_name in table.nodes or n_name in table.paths:
        errors.add(f"{path}.name", f"duplicate node name {_show(n_name)} (also {table.paths[n_name]})")
        return
    table.paths[n_name] = path
    kind_raw = t.get("kind")
    try:
        kind = NodeKind(kind_raw)
    except ValueError:
        allowed = ", ".join(k.value for k in NodeKind)
        problem = "missing" if kind_raw is None else f"{_show(kind_raw)} is not a node kind"
        errors.add(f"{path}.kind", f"{problem} (one of: {allowed})")
        return
    ip: ipaddress.IPv4Interface | None = None
    mac: str | None = None
    offset, drift = 0, 0.0
    if kind is NodeKind.SWITCH:
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
    if ok:
        table.nodes[n_name] = Node(n_name, kind, ip, mac, offset, drift)


def _check_node_name(errors: _Errors, path: str, n_name: str) -> bool:
    """Whether ``n_name`` can name a node (interface names derived from it must fit the kernel's limit)."""
    if not _NODE_NAME_RE.fullmatch(n_name):
        errors.add(f"{path}.name", f"{_show(n_name)} is not a node name (letter, then letters/digits/_)")
        return False
    if len(n_name) > NODE_NAME_MAX:
        errors.add(
            f"{path}.name",
            f"{_show(n_name)} is {len(n_name)} characters; at most {NODE_NAME_MAX} so that the switch "
            f"port \"p-{n_name}\" fits an interface name ({IFNAME_MAX})",
        )
        return False
    return True


def _parse_node_ip(
    errors: _Errors, path: str, t: dict[str, Any], kind: NodeKind, n_name: str, table: _NodeTable
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


def _parse_node_clock(errors: _Errors, path: str, t: dict[str, Any]) -> tuple[int, float, bool]:
    """A host-like node's clock: ``clock_offset`` and ``clock_drift_ppm`` (0: the true time),
    and whether they are valid."""
    offset, drift, ok = 0, 0.0, True
    if "clock_offset" in t:
        v = _parsed(errors, f"{path}.clock_offset", t["clock_offset"], parse_clock_offset)
        offset, ok = (0, False) if v is None else (v, ok)
    if "clock_drift_ppm" in t:
        d = _parsed(errors, f"{path}.clock_drift_ppm", t["clock_drift_ppm"], parse_drift_ppm)
        drift, ok = (0.0, False) if d is None else (d, ok)
    return offset, drift, ok


def _parse_node_mac(errors: _Errors, path: str, t: dict[str, Any]) -> tuple[str | None, bool]:
    """A host-like node's explicit MAC (None: derived from its address), and whether it is valid."""
    if "mac" not in t:
        return None, True
    raw_mac = t["mac"]
    if not isinstance(raw_mac, str) or not _MAC_RE.fullmatch(_normalise_mac(raw_mac)):
        errors.add(f"{path}.mac", f"{_show(raw_mac)} is not a MAC address (aa:bb:cc:dd:ee:ff)")
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


def _parse_links(errors: _Errors, data: Mapping[str, Any], nodes: _NodeTable, defaults: _LinkDefaults) -> _LinkTable:
    """``[[links]]``, in file order."""
    table = _LinkTable()
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
    errors: _Errors, path: str, raw: Any, nodes: _NodeTable, defaults: _LinkDefaults, table: _LinkTable
) -> None:
    """One ``[[links]]`` entry, appended to ``table.links`` only if it is valid and nothing before it
    in the file was invalid.

    Each part is checked even after an earlier one failed, so that one pass reports every
    problem; ``ok`` says whether this link is still buildable.
    """
    t = _table(errors, path, raw)
    if t is None:
        return
    _unknown(errors, path, t, _LINK_KEYS)
    ends, ok = _link_ends(errors, path, t, nodes)
    l_name = _link_name(errors, path, t, ends, ok, table)
    ok = ok and l_name is not None
    rate, delay, mtu, buffer = _link_numbers(errors, path, t, defaults)
    ok = ok and rate is not None and delay is not None and mtu is not None and buffer is not None
    ok = _check_in_flight(errors, path, rate, delay) and ok
    both_switches = ok and all(nodes.nodes[ends[s]].kind is NodeKind.SWITCH for s in ("a", "b"))
    fcs, headroom, framing_ok = _link_framing(errors, path, t, ok, both_switches)
    ok = ok and framing_ok
    impairment, impairment_ok = _link_impairment(errors, path, t, nodes, ends)
    ok = ok and impairment_ok
    features, features_ok = _link_features(errors, path, t)
    ok = ok and features_ok
    state, flap = _link_faults(errors, path, t)
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


_FLAP_KEYS = {"down", "up", "count", "start"}


def _link_faults(errors: _Errors, path: str, t: dict[str, Any]) -> tuple[str, Flap | None]:
    """``state = "up"|"down"`` and ``[links.flap] down, up, count, start`` of a link."""
    state = "up"
    if "state" in t:
        if t["state"] in ("up", "down"):
            state = t["state"]
        else:
            errors.add(f"{path}.state", f"{_show(t['state'])} is not a link state (up or down)")
    if "flap" not in t:
        return state, None
    ft = _table(errors, f"{path}.flap", t["flap"])
    if ft is None:
        return state, None
    before = len(errors.items)
    _unknown(errors, f"{path}.flap", ft, _FLAP_KEYS)
    times: dict[str, int | None] = {}
    for key in ("down", "up", "start"):
        if key in ft:
            times[key] = _parsed(errors, f"{path}.flap.{key}", ft[key], parse_delay)
        elif key != "start":
            errors.add(f"{path}.flap.{key}", "missing: how long the link stays " + key + " each time")
    for key in ("down", "up"):
        if times.get(key) == 0:
            errors.add(f"{path}.flap.{key}", "must be longer than 0")
    count = _int_field(errors, f"{path}.flap.count", ft["count"], 1, MAX_FLAPS) if "count" in ft else 1
    if state == "down":
        errors.add(f"{path}.flap", "a link declared state = \"down\" cannot flap")
    if len(errors.items) != before or count is None:
        return state, None
    return state, Flap(times["down"] or 0, times["up"] or 0, count, times.get("start") or 0)


def _link_ends(errors: _Errors, path: str, t: dict[str, Any], nodes: _NodeTable) -> tuple[dict[str, str], bool]:
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
            errors.add(f"{path}.{side}", f"{_show(v)} is not a node name")
            ok = False
        elif v not in nodes.paths:
            errors.add(f"{path}.{side}", f"unknown node {_show(v)}")
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
    errors: _Errors, path: str, t: dict[str, Any], ends: dict[str, str], ends_ok: bool, table: _LinkTable
) -> str | None:
    """The link's name, ``<a>-<b>`` unless set, registered in ``table``; None if it is invalid,
    taken, or (unset) the ends are not valid to derive it from."""
    l_name = t.get("name")
    if l_name is None:
        if ends_ok:
            l_name = f"{ends['a']}-{ends['b']}"
    elif not isinstance(l_name, str) or not _LINK_NAME_RE.fullmatch(l_name) or len(l_name) > LINK_NAME_MAX:
        errors.add(
            f"{path}.name",
            f"{_show(l_name)} is not a link name (letters, digits, '_', '.', '-'; at most {LINK_NAME_MAX})",
        )
        return None
    if l_name is not None:
        if l_name in table.paths:
            errors.add(f"{path}.name", f"duplicate link name {_show(l_name)} (also {table.paths[l_name]})")
            return None
        table.paths[l_name] = path
    return l_name


def _link_numbers(
    errors: _Errors, path: str, t: dict[str, Any], defaults: _LinkDefaults
) -> tuple[int | None, int | None, int | None, int | None]:
    """rate, delay, mtu and buffer: the link's own or ``[defaults]``; None where its own is invalid."""
    rate: int | None = defaults.rate
    if "rate" in t:
        rate = _parsed(errors, f"{path}.rate", t["rate"], parse_rate)
    delay: int | None = defaults.delay
    if "delay" in t:
        delay = _parsed(errors, f"{path}.delay", t["delay"], parse_delay)
    mtu: int | None = defaults.mtu
    if "mtu" in t:
        mtu = _int_field(errors, f"{path}.mtu", t["mtu"], 68, 65535 - 256)
    buffer: int | None = defaults.buffer
    if "buffer" in t:
        buffer = _parsed(errors, f"{path}.buffer", t["buffer"], parse_size)
    return rate, delay, mtu, buffer


def _check_in_flight(errors: _Errors, path: str, rate: int | None, delay: int | None) -> bool:
    """Whether the bytes a link's sending switch holds while they propagate (rate x delay / 8)
    stay within :data:`MAX_IN_FLIGHT_BYTES`; reported on ``delay``, the usual culprit."""
    if rate is None or delay is None or rate * delay <= MAX_IN_FLIGHT_BYTES * 8 * 10**9:
        return True
    errors.add(f"{path}.delay", f"{_show_delay(delay)} at {rate} bit/s keeps {rate * delay // (8 * 10**9)} bytes "
                                f"in flight (rate x delay / 8), above the limit of 16GiB ({MAX_IN_FLIGHT_BYTES} bytes)")
    return False


def _link_framing(
    errors: _Errors, path: str, t: dict[str, Any], ok: bool, both_switches: bool
) -> tuple[bool, int | None, bool]:
    """``fcs`` and ``headroom``, whose defaults depend on whether both ends are switches, and
    whether they are valid. ``ok``: the link is valid so far, so that its ends can be judged."""
    fcs = bool(both_switches)
    framing_ok = True
    if "fcs" in t:
        if not isinstance(t["fcs"], bool):
            errors.add(f"{path}.fcs", f"{_show(t['fcs'])} is not true/false")
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
        headroom = _int_field(errors, f"{path}.headroom", t["headroom"], 0, 256)
        framing_ok = framing_ok and headroom is not None
    return fcs, headroom, framing_ok


def _link_impairment(
    errors: _Errors, path: str, t: dict[str, Any], nodes: _NodeTable, ends: dict[str, str]
) -> tuple[Impairment | None, bool]:
    """The link's impairment (None: none), and whether it is valid, which for the switch
    backend includes a switch at every sending end."""
    if "impairment" not in t:
        return None, True
    impairment = _parse_impairment(errors, f"{path}.impairment", t["impairment"])
    if impairment is None:
        return None, False
    ok = True
    if impairment.backend is Backend.SWITCH and len(ends) == 2:
        sides = {Direction.A_TO_B: ("a",), Direction.B_TO_A: ("b",), Direction.BOTH: ("a", "b")}
        for side in sides[impairment.direction]:
            if nodes.nodes[ends[side]].kind is not NodeKind.SWITCH:
                errors.add(f"{path}.impairment.backend",
                           f"the switch backend runs in the sending switch; {ends[side]} ({side} end, "
                           f"direction {impairment.direction.value}) is a {nodes.nodes[ends[side]].kind.value} "
                           "(use nft or netem there)")
                ok = False
    return impairment, ok


def _link_features(errors: _Errors, path: str, t: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], bool]:
    """``features.a``/``features.b`` (copies: the topology must not share the caller's tables),
    and whether they are tables; what is in them is for the protocols to check."""
    features: dict[str, dict[str, Any]] = {"a": {}, "b": {}}
    if "features" not in t:
        return features, True
    ft = _table(errors, f"{path}.features", t["features"])
    if ft is None:
        return features, False
    ok = True
    _unknown(errors, f"{path}.features", ft, _FEATURE_KEYS)
    for side in ("a", "b"):
        if side in ft:
            st = _table(errors, f"{path}.features.{side}", ft[side])
            if st is None:
                ok = False
            else:
                features[side] = copy.deepcopy(st)
    return features, ok


def _link_ifnames(
    errors: _Errors, path: str, t: dict[str, Any], nodes: _NodeTable, ends: dict[str, str], table: _LinkTable
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
            if not isinstance(ifn, str) or not _IFNAME_RE.fullmatch(ifn) or len(ifn) > IFNAME_MAX or ifn == "lo":
                errors.add(
                    f"{path}.{key}",
                    f"{_show(ifn)} is not an interface name (letters, digits, '_', '.', '-'; "
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


def _check_whole(errors: _Errors, nodes: _NodeTable, links: _LinkTable) -> None:
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


def _parse_ip(errors: _Errors, path: str, raw: Any) -> ipaddress.IPv4Interface | None:
    if not isinstance(raw, str) or "/" not in raw:
        errors.add(path, f"{_show(raw)} is not an IPv4 address with prefix length (e.g. \"10.0.0.1/24\")")
        return None
    try:
        ip = ipaddress.ip_interface(raw.strip())
    except ValueError:
        errors.add(path, f"{_show(raw)} is not an IPv4 address with prefix length (e.g. \"10.0.0.1/24\")")
        return None
    if not isinstance(ip, ipaddress.IPv4Interface):
        errors.add(path, f"{_show(raw)}: only IPv4 is supported (IPv6 is disabled in the namespaces)")
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


def _parse_impairment(errors: _Errors, path: str, raw: Any) -> Impairment | None:
    t = _table(errors, path, raw)
    if t is None:
        return None
    before = len(errors.items)
    _unknown(errors, path, t, _IMPAIRMENT_KEYS)
    corrupt = loss = 0.0
    if "corrupt" in t:
        corrupt = _parsed(errors, f"{path}.corrupt", t["corrupt"], parse_probability) or 0.0
    if "loss" in t:
        loss = _parsed(errors, f"{path}.loss", t["loss"], parse_probability) or 0.0
    direction = Direction.A_TO_B
    if "direction" in t:
        try:
            direction = Direction(t["direction"])
        except ValueError:
            errors.add(f"{path}.direction", f"{_show(t['direction'])} is not a direction (one of: a>b, b>a, both)")
    backend = Backend.AUTO
    if "backend" in t:
        try:
            backend = Backend(t["backend"])
        except ValueError:
            errors.add(f"{path}.backend",
                       f"{_show(t['backend'])} is not a backend (one of: auto, netem, nft, switch)")
    gilbert = {"p_good_to_bad": 0.0, "p_bad_to_good": 1.0, "loss_bad": 0.0, "corrupt_bad": 0.0}
    for key in _GILBERT_KEYS:
        if key in t:
            v = _parsed(errors, f"{path}.{key}", t[key], parse_probability)
            if v is not None:
                gilbert[key] = v
                if backend is not Backend.SWITCH:
                    errors.add(f"{path}.{key}", "the Gilbert-Elliott model needs backend = \"switch\" "
                                                "(netem and nft draw every frame independently)")
    if gilbert["p_good_to_bad"] > 0 and gilbert["p_bad_to_good"] == 0:
        errors.add(f"{path}.p_bad_to_good", "must be > 0 when the bad state is reachable (p_good_to_bad > 0)")
    for good, bad in (("loss", "corrupt"), ("loss_bad", "corrupt_bad")):
        total = (loss if good == "loss" else gilbert[good]) + (corrupt if bad == "corrupt" else gilbert[bad])
        if total > 1.0:
            errors.add(f"{path}.{bad}", f"{good} + {bad} must not exceed 1")
    seed = 1
    if "seed" in t:
        seed = _int_field(errors, f"{path}.seed", t["seed"], 0, 2**63 - 1)
    if backend in (Backend.NFT, Backend.AUTO):
        # auto may fall back to nft, whose resolution is 1e-6: refuse what it cannot express.
        for key, p in (("corrupt", corrupt), ("loss", loss)):
            if p > 0 and round(p / NFT_RESOLUTION) == 0:
                errors.add(
                    f"{path}.{key}",
                    f"{p:g} is below the nft backend's resolution of {NFT_RESOLUTION:g} "
                    f"(use backend = \"netem\" on a kernel that has it, or the switch's own loss model)",
                )
    shaping = _parse_shaping(errors, path, t, backend)
    if len(errors.items) != before:
        return None
    assert seed is not None
    return Impairment(corrupt, loss, direction, backend, **gilbert, seed=seed, **shaping)


def _parse_shaping(errors: _Errors, path: str, t: dict[str, Any], backend: Backend) -> dict[str, Any]:
    """``delay``, ``jitter``, ``duplicate``, ``reorder`` of an impairment table (as netem's)."""
    out: dict[str, Any] = {"delay_ns": 0, "jitter_ns": 0, "duplicate": 0.0, "reorder": 0.0}
    for key, field_name, parse in (("delay", "delay_ns", parse_delay), ("jitter", "jitter_ns", parse_delay),
                                   ("duplicate", "duplicate", parse_probability),
                                   ("reorder", "reorder", parse_probability)):
        if key in t:
            v = _parsed(errors, f"{path}.{key}", t[key], parse)
            if v is not None:
                out[field_name] = v
    if out["reorder"] and not out["delay_ns"]:
        errors.add(f"{path}.reorder", "needs a delay to reorder against (as netem: the reordered frames go at "
                                      "once, the others wait the delay)")
    if backend is Backend.NFT and any(out.values()):
        shaped = next(k for k, f in (("delay", "delay_ns"), ("jitter", "jitter_ns"), ("duplicate", "duplicate"),
                                     ("reorder", "reorder")) if out[f])
        errors.add(f"{path}.{shaped}", "nft cannot delay, jitter, duplicate or reorder frames: use backend "
                                       "\"netem\", \"switch\" or \"auto\" (netem where the kernel has it, else "
                                       "the sending switch's own model)")
    return out


# --------------------------------------------------------------------------- loading


def loads_topology(text: str, source: str = "<string>") -> Topology:
    """Parse and validate a topology from TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError([("", f"not valid TOML: {exc}")], source) from None
    except ValueError:  # tomllib's int() of a number longer than sys.get_int_max_str_digits()
        raise TopologyError([("", f"not valid TOML: an integer has more than {sys.get_int_max_str_digits()} "
                                  "digits")], source) from None
    except RecursionError:
        raise TopologyError([("", "not valid TOML: arrays or tables nested too deeply")], source) from None
    return topology_from_dict(data, source)


def load_topology(path: str | Path | None = None) -> Topology:
    """Load a topology file; ``None`` gives the default topology."""
    if path is None:
        return default_topology()
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError([("", f"cannot read: {exc.strerror or exc}")], str(p)) from None
    except UnicodeDecodeError:
        raise TopologyError([("", "not UTF-8 text")], str(p)) from None
    return loads_topology(text, str(p))


DEFAULT_TOPOLOGY_RESOURCE = "default.toml"


def default_topology_text() -> str:
    return resources.files(__package__).joinpath(DEFAULT_TOPOLOGY_RESOURCE).read_text(encoding="utf-8")


def default_topology() -> Topology:
    """LinkGuardian's testbed in miniature: h1 - sw1 = sw2 - h2, collector c1 on sw2 (docs/topology.md)."""
    return loads_topology(default_topology_text(), f"<default topology: netstack/topo/{DEFAULT_TOPOLOGY_RESOURCE}>")


#: where the named topologies shipped with netstack live, next to this module
EXAMPLES_RESOURCE = "examples"


def shipped_topologies() -> dict[str, Path]:
    """The topologies shipped with netstack, by name: ``default`` and every
    ``netstack/topo/examples/<name>.toml`` (docs/topology.md "Shipped topologies")."""
    here = Path(__file__).resolve().parent
    named = {p.stem: p for p in (here / EXAMPLES_RESOURCE).glob("*.toml")}
    named["default"] = here / DEFAULT_TOPOLOGY_RESOURCE
    return dict(sorted(named.items()))


def load_topology_spec(spec: str | Path | None) -> Topology:
    """What a command's TOPOLOGY argument names: a file, else a shipped topology's name
    (:func:`shipped_topologies`), ``None`` the default. A file of that name wins over a name."""
    if spec is None:
        return default_topology()
    path = Path(spec)
    if not path.is_file():
        shipped = shipped_topologies()
        if str(spec) == "default":
            return default_topology()
        if str(spec) in shipped:
            return load_topology(shipped[str(spec)])
        if not path.exists():
            raise TopologyError([("", f"no such file, and not a shipped topology (shipped: {', '.join(shipped)})")],
                                str(spec))
    return load_topology(path)
