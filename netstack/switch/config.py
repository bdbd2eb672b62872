"""Configuration records of the software switch, validated on construction.

Every check raises :class:`ConfigError` naming the offending field, so a bad topology
file or control-socket request gets a clear message instead of a crash on the data
path (docs/architecture.md "Engines are sans-IO": bad input anywhere gets a clear error).

Units are fixed so that nothing is ambiguous: rates in bit/s, times in ns, sizes in
bytes. Paper rates and times are scaled by the user (docs/architecture.md "Time and scale"); byte
quantities (buffers, thresholds) stay as in the paper.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from ipaddress import IPv4Address
from typing import Any

from headers.registry import PFC_DST_MAC

from ..errors import ConfigError
from ..ethernet import NUM_CLASSES

#: Per-frame wire overhead not present in the bytes Linux hands us: preamble (7) + SFD (1)
#: + inter-frame gap (12) = 20 B, plus the 4-byte FCS the kernel strips (netstack.ethernet).
#: 64-byte minimum frames then occupy the classic 84 B of line time. When a port carries the
#: software FCS trailer those 4 trailer bytes *are* that FCS and are not counted twice (port.py).
from ..ethernet import WIRE_OVERHEAD_BYTES as DEFAULT_OVERHEAD_BYTES
from .sourceguard import parse_source_ips

#: A port faces a host (edge) or another switch (fabric).
PORT_ROLES = ("edge", "fabric")

#: Identity map from IP precedence (DSCP >> 3) / 802.1p PCP to traffic class.
IDENTITY_CLASS_MAP = tuple(range(NUM_CLASSES))


def parse_mac(value: Any, field_name: str) -> bytes:
    """A MAC address from 6 bytes or ``"aa:bb:cc:dd:ee:ff"`` text."""
    if isinstance(value, bytes | bytearray):
        if len(value) != 6:
            raise ConfigError(field_name, f"MAC address must be 6 bytes, got {len(value)}")
        return bytes(value)
    if isinstance(value, str):
        parts = value.replace("-", ":").split(":")
        if len(parts) == 6 and all(1 <= len(p) <= 2 for p in parts):
            try:
                return bytes(int(p, 16) for p in parts)
            except ValueError:
                pass
        raise ConfigError(field_name, f"{value!r} is not a MAC address (six hex octets separated by ':')")
    raise ConfigError(field_name, f"MAC address must be bytes or text, got {type(value).__name__}")


def _int(value: Any, field_name: str, *, minimum: int = 0, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(field_name, f"must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(field_name, f"must be >= {minimum}, got {value}")
    return value


def _rate(value: Any, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(field_name, f"must be a number, got {value!r}")
    if not 0.0 <= value <= 1.0 or value != value:
        raise ConfigError(field_name, f"must be a probability in [0, 1], got {value!r}")
    return float(value)


def _known_keys(cls: type, data: Mapping[str, Any], where: str) -> None:
    names = {f.name for f in fields(cls) if f.init}
    for key in data:
        if key not in names:
            raise ConfigError(f"{where}{key}", f"unknown field (known: {', '.join(sorted(names))})")


@dataclass(frozen=True)
class ImpairmentConfig:
    """Seeded egress impairment of one port: Bernoulli or Gilbert-Elliott loss/corruption.

    The model has two states. In *good* it loses a frame with probability ``loss`` and
    corrupts it with ``corrupt``; in *bad*, ``loss_bad`` and ``corrupt_bad``. Before each
    frame the state moves good->bad with ``p_good_to_bad`` and bad->good with
    ``p_bad_to_good``. With ``p_good_to_bad = 0`` (the default) it is plain Bernoulli.
    Corruption overwrites one random byte with a different value, so the peer's software
    FCS check (docs/architecture.md "The live runtime") turns it into a counted *corruption
    loss*, as on LinkGuardian's optical links (LinkGuardian §2). ``seed`` makes runs
    reproducible; the port name is mixed in so that two ports with the same seed do not drop the same frames.

    The link can also be *shaped* as netem shapes one (tc-netem(8)): every frame that is not
    lost waits ``delay_ns`` more, give or take a uniform ``jitter_ns`` (never below 0), so a
    jittered link reorders, as netem's time-sorted queue does; with probability ``reorder``
    a frame skips that delay and overtakes the frames still held (netem's ``reorder``, which
    also needs a delay to reorder against); with probability ``duplicate`` it leaves twice.
    """

    loss: float = 0.0
    corrupt: float = 0.0
    p_good_to_bad: float = 0.0
    p_bad_to_good: float = 1.0
    loss_bad: float = 0.0
    corrupt_bad: float = 0.0
    seed: int = 0
    delay_ns: int = 0
    jitter_ns: int = 0
    duplicate: float = 0.0
    reorder: float = 0.0

    def __post_init__(self) -> None:
        for name in ("loss", "corrupt", "p_good_to_bad", "p_bad_to_good", "loss_bad", "corrupt_bad", "duplicate",
                     "reorder"):
            object.__setattr__(self, name, _rate(getattr(self, name), f"impairment.{name}"))
        for name in ("delay_ns", "jitter_ns"):
            object.__setattr__(self, name, _int(getattr(self, name), f"impairment.{name}"))
        if self.reorder and not self.delay_ns:
            raise ConfigError("impairment.reorder", "needs a delay_ns to reorder against (as netem's reorder does)")
        if self.loss + self.corrupt > 1.0:
            raise ConfigError("impairment.corrupt", "loss + corrupt must not exceed 1")
        if self.loss_bad + self.corrupt_bad > 1.0:
            raise ConfigError("impairment.corrupt_bad", "loss_bad + corrupt_bad must not exceed 1")
        if self.p_good_to_bad > 0 and self.p_bad_to_good == 0:
            raise ConfigError("impairment.p_bad_to_good", "must be > 0 when the bad state is reachable")
        _int(self.seed, "impairment.seed", minimum=-(1 << 63))

    @property
    def active(self) -> bool:
        return bool(self.loss or self.corrupt or (self.p_good_to_bad and (self.loss_bad or self.corrupt_bad))
                    or self.shapes)

    @property
    def shapes(self) -> bool:
        """Delay, jitter, reordering or duplication: the link no longer keeps its frames' order and count."""
        return bool(self.delay_ns or self.jitter_ns or self.duplicate or self.reorder)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ImpairmentConfig:
        _known_keys(cls, data, "impairment.")
        return cls(**data)


@dataclass(frozen=True)
class PortConfig:
    """One switch port (one veth end in the live runtime).

    - ``rate_bps``: emulated line rate; ``None``/0 = unpaced (frames leave at once).
    - ``delay_ns``: one-way propagation delay, emulated at this (sending) side.
    - ``buffer_bytes``: egress buffer shared by the port's 8 classes (tail drop when full).
    - ``mtu``: largest IP packet; frames longer than ``mtu + 18`` (Ethernet + one 802.1Q
      tag) are dropped at enqueue and counted (``mtu_drops``).
    - ``fcs``: software FCS on this link: checked and stripped on ingress, added on egress.
    - ``lossless``, ``xoff_bytes``, ``xon_bytes``, ``pfc_classes``: PFC generation from the
      ingress threshold (802.1Qbb; hysteresis as LinkGuardian Algorithm 2).
    - ``ecn_threshold_bytes``: mark CE on enqueue when the class queue exceeds it.
    - ``default_class``/``class_map``: classification at ingress (class_map maps IP
      precedence = DSCP >> 3, or the 802.1Q PCP, to a class).
    - ``mac``: this port's MAC (source of the PFC frames it sends; derived when omitted).
    - ``peer_mac``: when set, PFC frames are unicast to it instead of 01:80:C2:00:00:01,
      because Linux bridges drop the reserved group address (docs/architecture.md "The live runtime").
    - ``static_macs``: MACs statically reachable through this port.
    - ``overhead_bytes``: per-frame line overhead (see :data:`DEFAULT_OVERHEAD_BYTES`).
    - ``impairment``: seeded egress loss/corruption (the 'switch' impairment backend).
    - ``role``: ``"edge"`` (to a host) or ``"fabric"`` (to a switch). An edge port drops and
      counts the frames only switches may originate (``SwitchConfig.switch_only_ethertypes``:
      LinkGuardian's tags...) and, unless ``pfc_from_host``, PFC/PAUSE frames
      (docs/security.md "Edge filtering").
    - ``pfc_from_host``: an edge port honours the host's PFC/PAUSE frames (None: when the port
      is lossless, i.e. the host takes part in a lossless class).
    - ``pfc_enable``: the classes whose pauses (PFC or 802.3x PAUSE) this port honours, as an
      802.1Qbb switch enables PFC per priority; a pause for any other class is refused and
      counted (``pauses_refused``). None (the default): every class. A fabric port of a link
      that carries no lossless class can set ``()``, so that frames forged on the link cannot
      pause it (docs/faults.md, finding 5).
    - ``pfc_watchdog_ns``: a class kept paused by the peer for this long without a break is
      released, and pauses for it are ignored for as long again (counted,
      ``pfc_watchdog_events`` / ``pfc_watchdog_ignored``); None: off.
    - ``source_ips``: an edge port only forwards IPv4 datagrams (and ARP) whose source is one of
      these addresses, its host's (BCP 38: netstack/switch/sourceguard.py); the others are
      dropped and counted (``edge_drops_spoofed``). None: no filtering. Edge ports only.
    """

    name: str
    rate_bps: int | None = None
    delay_ns: int = 0
    buffer_bytes: int = 1 << 20
    mtu: int = 1500
    fcs: bool = False
    lossless: bool = False
    xoff_bytes: int | None = None
    xon_bytes: int | None = None
    ecn_threshold_bytes: int | None = None
    default_class: int = 0
    peer_mac: bytes | None = None
    static_macs: tuple[bytes, ...] = ()
    mac: bytes | None = None
    pfc_classes: tuple[int, ...] = IDENTITY_CLASS_MAP
    class_map: tuple[int, ...] = IDENTITY_CLASS_MAP
    overhead_bytes: int = DEFAULT_OVERHEAD_BYTES
    impairment: ImpairmentConfig | None = None
    role: str = "fabric"
    pfc_from_host: bool | None = None
    pfc_watchdog_ns: int | None = None
    pfc_enable: tuple[int, ...] | None = None
    source_ips: tuple[str, ...] | None = None
    #: ``source_ips`` packed, for the data path (derived)
    source_guard: frozenset[bytes] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def edge(self) -> bool:
        return self.role == "edge"

    @property
    def accepts_pfc(self) -> bool:
        """Does this port honour PFC/PAUSE from its peer? Always on a fabric port; on an edge
        port as ``pfc_from_host`` says (default: when the port is lossless)."""
        if self.role != "edge":
            return True
        return self.lossless if self.pfc_from_host is None else self.pfc_from_host

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or len(self.name) > 64:
            raise ConfigError("port.name", f"must be a non-empty string of at most 64 characters, got {self.name!r}")
        where = f"port {self.name}: "
        set_ = object.__setattr__
        rate = self.rate_bps
        if isinstance(rate, float) and rate.is_integer():
            rate = int(rate)
        rate = _int(rate, where + "rate_bps", optional=True)
        set_(self, "rate_bps", rate or None)
        _int(self.delay_ns, where + "delay_ns")
        _int(self.buffer_bytes, where + "buffer_bytes", minimum=1)
        _int(self.mtu, where + "mtu", minimum=46)
        _int(self.overhead_bytes, where + "overhead_bytes")
        for flag in ("fcs", "lossless"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(where + flag, f"must be true or false, got {getattr(self, flag)!r}")
        _int(self.ecn_threshold_bytes, where + "ecn_threshold_bytes", optional=True)
        xoff = _int(self.xoff_bytes, where + "xoff_bytes", minimum=1, optional=True)
        xon = _int(self.xon_bytes, where + "xon_bytes", optional=True)
        if self.lossless:
            if xoff is None or xon is None:
                raise ConfigError(where + ("xoff_bytes" if xoff is None else "xon_bytes"),
                                  "a lossless port needs both xoff_bytes and xon_bytes")
            if xon >= xoff:
                raise ConfigError(where + "xon_bytes", f"must be below xoff_bytes ({xon} >= {xoff})")
        _int(self.default_class, where + "default_class")
        if self.default_class >= NUM_CLASSES:
            raise ConfigError(where + "default_class", f"must be in 0..{NUM_CLASSES - 1}")
        cmap = self.class_map
        if not isinstance(cmap, tuple | list) or len(cmap) != NUM_CLASSES or not all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c < NUM_CLASSES for c in cmap
        ):
            raise ConfigError(where + "class_map", f"must be {NUM_CLASSES} classes in 0..{NUM_CLASSES - 1}")
        set_(self, "class_map", tuple(cmap))
        pcls = self.pfc_classes
        if not isinstance(pcls, tuple | list | set | frozenset) or not all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c < NUM_CLASSES for c in pcls
        ):
            raise ConfigError(where + "pfc_classes", f"must be classes in 0..{NUM_CLASSES - 1}")
        set_(self, "pfc_classes", tuple(sorted(set(pcls))))
        en = self.pfc_enable
        if en is not None:
            if not isinstance(en, tuple | list | set | frozenset) or not all(
                isinstance(c, int) and not isinstance(c, bool) and 0 <= c < NUM_CLASSES for c in en
            ):
                raise ConfigError(where + "pfc_enable", f"must be classes in 0..{NUM_CLASSES - 1} (or null: all)")
            set_(self, "pfc_enable", tuple(sorted(set(en))))
        if self.peer_mac is not None:
            set_(self, "peer_mac", parse_mac(self.peer_mac, where + "peer_mac"))
        if self.mac is not None:
            set_(self, "mac", parse_mac(self.mac, where + "mac"))
        if isinstance(self.static_macs, str | bytes | bytearray) or not isinstance(self.static_macs, Iterable):
            raise ConfigError(where + "static_macs", "must be a list of MAC addresses")
        macs = tuple(parse_mac(m, where + "static_macs") for m in self.static_macs)
        for m in macs:
            if m[0] & 1:
                raise ConfigError(where + "static_macs", f"{m.hex(':')} is a group address, not a station")
        set_(self, "static_macs", macs)
        imp = self.impairment
        if isinstance(imp, Mapping):
            imp = ImpairmentConfig.from_dict(imp)
            set_(self, "impairment", imp)
        if imp is not None and not isinstance(imp, ImpairmentConfig):
            raise ConfigError(where + "impairment", f"must be an ImpairmentConfig, got {type(imp).__name__}")
        if self.role not in PORT_ROLES:
            raise ConfigError(where + "role", f"must be one of {', '.join(PORT_ROLES)}, got {self.role!r}")
        if self.pfc_from_host is not None and not isinstance(self.pfc_from_host, bool):
            raise ConfigError(where + "pfc_from_host", f"must be true, false or null, got {self.pfc_from_host!r}")
        _int(self.pfc_watchdog_ns, where + "pfc_watchdog_ns", minimum=1, optional=True)
        if self.source_ips is not None:
            if self.role != "edge":
                raise ConfigError(where + "source_ips", "only an edge port filters source addresses (role = edge)")
            guard = parse_source_ips(self.source_ips, where + "source_ips")
            set_(self, "source_ips", tuple(sorted(str(IPv4Address(a)) for a in guard)))
            set_(self, "source_guard", guard)

    @property
    def pfc_enable_mask(self) -> int:
        """Bit ``c`` set when the port honours pauses for class ``c`` (``pfc_enable``)."""
        if self.pfc_enable is None:
            return (1 << NUM_CLASSES) - 1
        return sum(1 << c for c in self.pfc_enable)

    @property
    def pfc_dst(self) -> bytes:
        """Where this port's PFC frames go: the peer's unicast MAC if known (bridges drop the group address)."""
        return self.peer_mac if self.peer_mac is not None else PFC_DST_MAC

    @property
    def max_frame(self) -> int:
        return self.mtu + 18

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PortConfig:
        """Build from a parsed topology file (JSON/YAML); unknown keys are an error."""
        if not isinstance(data, Mapping):
            raise ConfigError("port", f"must be a mapping, got {type(data).__name__}")
        where = f"port {data.get('name', '?')}: "
        _known_keys(cls, data, where)
        kwargs = dict(data)
        for key in ("static_macs", "pfc_classes", "class_map", "pfc_enable"):
            if key in kwargs and isinstance(kwargs[key], list):
                kwargs[key] = tuple(kwargs[key])
        if "name" not in kwargs:
            raise ConfigError("port.name", "missing")
        return cls(**kwargs)

    def with_changes(self, **changes: Any) -> PortConfig:
        """A validated copy with ``changes`` applied (the run-time control path)."""
        for key in changes:
            if key not in {f.name for f in fields(self) if f.init}:
                raise ConfigError(f"port {self.name}: {key}", "unknown field")
        if "name" in changes and changes["name"] != self.name:
            raise ConfigError(f"port {self.name}: name", "cannot be changed at run time")
        return replace(self, **changes)


def derived_mac(switch_name: str, port_name: str) -> bytes:
    """A stable locally administered unicast MAC for a port that was given none."""
    h = zlib.crc32(f"{switch_name}/{port_name}".encode()).to_bytes(4, "big")
    return b"\x02\x5e" + h


@dataclass(frozen=True)
class SwitchConfig:
    """A switch: its ports and static forwarding entries (MAC -> port name).

    ``static_fdb`` entries and every port's ``static_macs`` are merged; a MAC may be
    static on one port only. ``fdb_max_entries`` bounds the learned table so that a
    flood of random source MACs cannot exhaust memory (learning stops when full; counted).

    ECMP (:mod:`netstack.switch.ecmp`): ``ecmp_groups`` maps a MAC to its equal-cost next
    hops (port names, in a stable order); such a MAC is static (learning never moves it, and
    ``Fdb.static`` holds its first port) and each frame to it leaves by the port the hash of
    its flow picks with the multiplier of ``ecmp_seed``. ``ecmp_names`` names the groups'
    MACs in the counters (the topology's node names). ``flood_ports``: the ports broadcasts and
    unknown unicast are flooded on (a spanning tree's, where the switches form a cycle); the
    others carry unicast only and learn nothing. None (the default): every port.
    """

    name: str
    ports: tuple[PortConfig, ...]
    static_fdb: Mapping[Any, str] = field(default_factory=dict)
    fdb_max_entries: int = 65536
    #: EtherTypes only a switch may originate (the protocols' own: ``netstack.protocols``);
    #: an edge port drops them
    switch_only_ethertypes: tuple[int, ...] = ()
    ecmp_groups: Mapping[Any, tuple[str, ...]] = field(default_factory=dict)
    ecmp_seed: int = 0
    ecmp_names: Mapping[Any, str] = field(default_factory=dict)
    flood_ports: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("switch.name", f"must be a non-empty string, got {self.name!r}")
        ports = self.ports
        if isinstance(ports, Mapping) or not isinstance(ports, Iterable):
            raise ConfigError("switch.ports", "must be a list of ports")
        ports = tuple(p if isinstance(p, PortConfig) else PortConfig.from_dict(p) for p in ports)
        if not ports:
            raise ConfigError("switch.ports", "a switch needs at least one port")
        object.__setattr__(self, "ports", ports)
        names = [p.name for p in ports]
        for n in names:
            if names.count(n) > 1:
                raise ConfigError("switch.ports", f"port name {n!r} is used twice")
        _int(self.fdb_max_entries, "switch.fdb_max_entries")
        et = self.switch_only_ethertypes
        if not isinstance(et, tuple | list) or not all(
                isinstance(e, int) and not isinstance(e, bool) and 0x600 <= e <= 0xFFFF for e in et):
            raise ConfigError("switch.switch_only_ethertypes", f"must be EtherTypes (0x0600..0xFFFF), got {et!r}")
        object.__setattr__(self, "switch_only_ethertypes", tuple(sorted(set(et))))
        if not isinstance(self.static_fdb, Mapping):
            raise ConfigError("switch.static_fdb", "must be a mapping MAC -> port name")
        normalized: dict[bytes, str] = {}
        for key, port in self.static_fdb.items():
            m = parse_mac(key, "switch.static_fdb")
            if m[0] & 1:
                raise ConfigError("switch.static_fdb", f"{m.hex(':')} is a group address, not a station")
            if port not in names:
                raise ConfigError("switch.static_fdb", f"{m.hex(':')} -> unknown port {port!r}")
            normalized[m] = port
        object.__setattr__(self, "static_fdb", normalized)
        self._check_ecmp(names)
        self.all_static()  # raises on a MAC static on two ports

    def _check_ecmp(self, names: list[str]) -> None:
        """``ecmp_groups``, ``ecmp_seed``, ``ecmp_names`` and ``flood_ports``, normalised (MACs as
        bytes, port lists as tuples)."""
        if not isinstance(self.ecmp_groups, Mapping):
            raise ConfigError("switch.ecmp_groups", "must be a mapping MAC -> port names")
        groups: dict[bytes, tuple[str, ...]] = {}
        for key, ports in self.ecmp_groups.items():
            m = parse_mac(key, "switch.ecmp_groups")
            where = f"switch.ecmp_groups.{m.hex(':')}"
            if m[0] & 1:
                raise ConfigError(where, "a group address is not a station")
            if isinstance(ports, str) or not isinstance(ports, Iterable):
                raise ConfigError(where, "must be a list of port names")
            ports = tuple(ports)
            if not ports or len(set(ports)) != len(ports) or any(p not in names for p in ports):
                raise ConfigError(where, f"must be distinct ports of this switch, got {list(ports)!r}")
            groups[m] = ports
        object.__setattr__(self, "ecmp_groups", groups)
        seed = self.ecmp_seed
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
            raise ConfigError("switch.ecmp_seed", f"must be an integer in 0..2**64-1, got {seed!r}")
        if not isinstance(self.ecmp_names, Mapping) or not all(isinstance(v, str) for v in self.ecmp_names.values()):
            raise ConfigError("switch.ecmp_names", "must be a mapping MAC -> name")
        object.__setattr__(self, "ecmp_names", {parse_mac(k, "switch.ecmp_names"): v
                                                for k, v in self.ecmp_names.items()})
        flood = self.flood_ports
        if flood is not None:
            if isinstance(flood, str) or not isinstance(flood, Iterable) or any(p not in names for p in flood):
                raise ConfigError("switch.flood_ports", f"must be a list of this switch's ports, got {flood!r}")
            object.__setattr__(self, "flood_ports", tuple(dict.fromkeys(flood)))

    def all_static(self) -> dict[bytes, str]:
        """``static_fdb`` merged with every port's ``static_macs`` and the first port of every
        ECMP group (MAC -> port name)."""
        merged: dict[bytes, str] = {}
        for p in self.ports:
            for m in p.static_macs:
                if m in merged and merged[m] != p.name:
                    raise ConfigError(f"port {p.name}: static_macs", f"{m.hex(':')} is also static on {merged[m]}")
                merged[m] = p.name
        for m, port in self.static_fdb.items():
            if m in merged and merged[m] != port:
                raise ConfigError("switch.static_fdb", f"{m.hex(':')} is static on {merged[m]} and {port}")
            merged[m] = port
        for m, group in self.ecmp_groups.items():
            if m in merged:
                raise ConfigError(f"switch.ecmp_groups.{m.hex(':')}", f"is also static on {merged[m]}")
            merged[m] = group[0]  # (what readers of Fdb.static see: the group's first next hop)
        return merged

    def port(self, name: str) -> PortConfig:
        for p in self.ports:
            if p.name == name:
                return p
        raise ConfigError("port", f"no port named {name!r}")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SwitchConfig:
        """From the JSON form a daemon config carries (``runtime.switch_config``): MACs as
        ``"02:00:..."`` strings, the impairment as a table."""
        if not isinstance(data, Mapping):
            raise ConfigError("switch", f"must be a mapping, got {type(data).__name__}")
        out = dict(data)
        ports = []
        for p in data.get("ports", []):
            if not isinstance(p, Mapping):
                raise ConfigError("port", f"must be a mapping, got {type(p).__name__}")
            p = dict(p)
            for key in ("mac", "peer_mac"):
                if isinstance(p.get(key), str):
                    p[key] = parse_mac(p[key], f"port {p.get('name', '?')}: {key}")
            if isinstance(p.get("static_macs"), list | tuple):
                p["static_macs"] = tuple(parse_mac(m, f"port {p.get('name', '?')}: static_macs")
                                         for m in p["static_macs"])
            if isinstance(p.get("impairment"), Mapping):
                p["impairment"] = ImpairmentConfig.from_dict(p["impairment"])
            ports.append(p)
        out["ports"] = ports
        return cls.from_dict(out)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SwitchConfig:
        if not isinstance(data, Mapping):
            raise ConfigError("switch", f"must be a mapping, got {type(data).__name__}")
        _known_keys(cls, data, "switch.")
        if "name" not in data or "ports" not in data:
            raise ConfigError("switch." + ("name" if "name" not in data else "ports"), "missing")
        return cls(**data)


__all__ = ["DEFAULT_OVERHEAD_BYTES", "IDENTITY_CLASS_MAP", "NUM_CLASSES", "PORT_ROLES", "ConfigError",
           "ImpairmentConfig", "PortConfig", "SwitchConfig", "derived_mac", "parse_mac"]
