"""The switch side of Postcarding (issue 33), sans-IO: a switch on a flow's path sends a postcard.

INT in postcard mode ("Direct Telemetry Access" §2, Table 1: INT path tracing, 32-bit switch IDs
per hop under the flow's 5-tuple key) has each switch report its own hop instead of stacking its
value into the packet. :class:`HopReporter` is that reporter for one switch: a frame it forwards in
(``on_frame(frame, now_ns)``), at most one Postcarder report out per flow and ``interval_ns``:
Ethernet/IPv4/UDP(40041 -> 40040) to the collector, ``key`` = :func:`flow_key` of the frame's
5-tuple, ``hop`` = this switch's hop number, ``data`` = its 32-bit value (by default its switch
id, :func:`switch_id`). The translator gathers a flow's postcards into one slot
(:mod:`netstack.dta.postcard`); the switch feature that runs this is
:class:`netstack.dta.feature.HopReporterFeature`.

Choices where INT and the public artifact leave it open (docs/dta.md "Postcarding"):

- **Hop numbers are configured per switch**, in path order (``netstack dta enable --postcards
  sw1,sw2``): our switches are layer 2 and do not decrement the IP TTL an INT switch could count
  hops with, and the public reporter is a single switch. A flow in the other direction gets the
  same numbers; its slot still names the switches.
- **Flow key** = CRC32 of the 13-byte 5-tuple (source, destination, protocol, source and
  destination port; ports 0 for protocols without them), the key the public postcard generator's
  5-tuple stands for; ``netstack dta query postcard`` takes the 5-tuple as well as the key.
- **What is not a flow**: anything but IPv4, and DTA's own traffic (UDP to 40040 or 40044, RoCEv2
  to or from 4791): telemetry about telemetry would postcard itself.
- **Rate**: one postcard per flow per ``interval_ns`` (default 100 ms; the flows table is bounded,
  least recently reported first out), as an INT switch samples rather than reports every packet.
"""

from __future__ import annotations

import struct
import zlib
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from headers.dta import DTABase, Postcarder, build_report_frame
from headers.registry import UdpPort

from ..engine import ActionQueue, Engine

#: Flows whose last postcard time is kept (the oldest are forgotten: they postcard again).
MAX_FLOWS = 65536
DEFAULT_INTERVAL_NS = 100_000_000
_NOT_FLOWS = frozenset({int(UdpPort.DTA), int(UdpPort.DTA_NACK), int(UdpPort.ROCEV2)})
_TUPLE = struct.Struct("!4s4sBHH")


def flow_key_of(src: bytes, dst: bytes, proto: int, sport: int = 0, dport: int = 0) -> int:
    """The 32-bit flow key of a 5-tuple (addresses as 4 bytes each)."""
    return zlib.crc32(_TUPLE.pack(src, dst, proto, sport, dport))


def flow_key(frame: bytes | bytearray | memoryview) -> int | None:
    """The flow key of an Ethernet/IPv4 frame, or None when it is no flow this reporter reports
    (not IPv4, truncated, a non-first fragment, or DTA's own UDP traffic)."""
    n = len(frame)
    if n < 34 or frame[12] != 0x08 or frame[13] != 0x00 or frame[14] >> 4 != 4:
        return None
    ihl = (frame[14] & 15) * 4
    if ihl < 20 or n < 14 + ihl:
        return None
    proto = frame[23]
    src, dst = bytes(frame[26:30]), bytes(frame[30:34])
    sport = dport = 0
    if proto in (6, 17):
        if frame[20] & 0x1F or frame[21]:  # a later fragment has no ports
            return None
        u = 14 + ihl
        if n < u + 4:
            return None
        sport, dport = frame[u] << 8 | frame[u + 1], frame[u + 2] << 8 | frame[u + 3]
        if proto == 17 and (dport in _NOT_FLOWS or sport == UdpPort.ROCEV2):
            return None
    return flow_key_of(src, dst, proto, sport, dport)


_PROTOS = {"tcp": 6, "udp": 17, "icmp": 1}


def parse_flow(text: str) -> int:
    """A flow key from ``text``: the key itself (``0x5eed``, ``24301``) or a 5-tuple
    ``SRC[:SPORT]>DST[:DPORT]/PROTO`` (``10.0.0.1:6666>10.0.0.2:7777/udp``; PROTO a number or
    tcp, udp, icmp). ValueError says what is wrong."""
    import ipaddress

    text = text.strip()
    if ">" not in text:
        key = int(text, 0)
        if not 0 <= key <= 0xFFFFFFFF:
            raise ValueError(f"flow key {text!r} is not a 32-bit value")
        return key
    try:
        ends, proto_s = text.rsplit("/", 1)
        proto = _PROTOS.get(proto_s.lower()) if not proto_s.isdigit() else int(proto_s)
        if proto is None or not 0 <= proto <= 255:
            raise ValueError(f"protocol {proto_s!r}")
        src_s, dst_s = ends.split(">")
        (src, sport), (dst, dport) = (_end(src_s), _end(dst_s))
        return flow_key_of(ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed, proto, sport, dport)
    except ValueError as exc:
        raise ValueError(f"flow {text!r}: {exc} (a key, or SRC[:SPORT]>DST[:DPORT]/PROTO)") from None


def _end(text: str) -> tuple[str, int]:
    host, _, port = text.partition(":")
    p = int(port) if port else 0
    if not 0 <= p <= 0xFFFF:
        raise ValueError(f"port {port!r}")
    return host, p


def switch_id(name: str) -> int:
    """A switch's default 32-bit value in its postcards: CRC32 of its name."""
    return zlib.crc32(name.encode())


@dataclass(frozen=True)
class HopReporterConfig:
    """``hop``: this switch's hop number (1..255); ``value``: the 32-bit data of its postcards;
    ``collector_ip``/``collector_mac``: where postcards go; ``mac``/``ip``: their source;
    ``interval_ns``: at most one postcard per flow this often."""

    hop: int
    value: int
    collector_ip: bytes
    collector_mac: bytes
    mac: bytes
    ip: bytes
    interval_ns: int = DEFAULT_INTERVAL_NS

    def __post_init__(self) -> None:
        if not isinstance(self.hop, int) or not 1 <= self.hop <= 255:
            raise ValueError(f"hop={self.hop!r} outside 1..255")
        if not isinstance(self.value, int) or not 0 <= self.value <= 0xFFFFFFFF:
            raise ValueError(f"value={self.value!r} is not a 32-bit value")
        if len(self.collector_ip) != 4 or len(self.ip) != 4 or len(self.collector_mac) != 6 or len(self.mac) != 6:
            raise ValueError("addresses: 4-byte IPs and 6-byte MACs")
        if not isinstance(self.interval_ns, int) or self.interval_ns < 0:
            raise ValueError(f"interval_ns={self.interval_ns!r} must be a non-negative int")


@dataclass
class HopReporterCounters:
    frames: int = 0  # frames looked at
    not_flows: int = 0  # not IPv4, or DTA's own traffic
    postcards: int = 0  # postcards sent
    suppressed: int = 0  # a flow postcarded less than interval_ns ago


class HopReporter:
    """One switch's postcard reporter (module docstring). Its output is :meth:`on_frame`'s
    return value; ``actions`` stays empty; no timers."""

    def __init__(self, config: HopReporterConfig) -> None:
        self.config = config
        self.actions = ActionQueue()
        self.c = HopReporterCounters()
        self._last: OrderedDict[int, int] = OrderedDict()

    def on_frame(self, frame: bytes | bytearray | memoryview, now_ns: int) -> bytes | None:
        """The postcard ``frame`` draws (a whole Ethernet frame for the collector), or None."""
        c = self.c
        c.frames += 1
        key = flow_key(frame)
        if key is None:
            c.not_flows += 1
            return None
        last = self._last.get(key)
        cfg = self.config
        if last is not None and now_ns - last < cfg.interval_ns:
            c.suppressed += 1
            return None
        self._last[key] = now_ns
        self._last.move_to_end(key)
        if len(self._last) > MAX_FLOWS:
            self._last.popitem(last=False)
        c.postcards += 1
        prim = Postcarder(key, cfg.hop, cfg.value)
        return build_report_frame(cfg.mac, cfg.collector_mac, cfg.ip, cfg.collector_ip, DTABase.of(prim), prim)

    def next_deadline(self) -> int | None:
        return None  # no timers: a postcard leaves with the frame that drew it

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self.c)
        out["hop"] = self.config.hop
        out["value"] = self.config.value
        out["flows"] = len(self._last)
        return out


if TYPE_CHECKING:
    _hopreporter: type[Engine] = HopReporter
