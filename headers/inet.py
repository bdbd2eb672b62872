"""Ethernet II, IPv4 and UDP: the fast codecs every other header rides on.

Scapy already has layers for these (``scapy.layers.l2.Ether``, ``scapy.layers.inet``),
so only the fast codecs live here. IPv4 carries the ECN field TCD marks (see
:mod:`headers.tcd`) and is part of the RoCEv2 ICRC (see :mod:`headers.roce`).
"""

from __future__ import annotations

import struct
from typing import ClassVar, NamedTuple

from .errors import HeaderError, check_bits, need
from .record import field, new, record

_ETH = struct.Struct("!6s6sH")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")


def mac_str(mac: bytes) -> str:
    return ":".join(f"{b:02x}" for b in mac)


def mac_bytes(text: str) -> bytes:
    parts = text.replace("-", ":").split(":")
    if len(parts) != 6:
        raise HeaderError("MAC", f"{text!r} is not six colon-separated octets")
    try:
        raw = bytes(int(p, 16) for p in parts)
    except ValueError as exc:
        raise HeaderError("MAC", f"{text!r}: {exc}") from None
    return raw


def ip_str(addr: bytes) -> str:
    return ".".join(str(b) for b in addr)


def ip_bytes(text: str) -> bytes:
    parts = text.split(".")
    try:
        raw = bytes(int(p) for p in parts)
    except ValueError:
        raise HeaderError("IPv4", f"{text!r} is not a dotted-quad address") from None
    if len(raw) != 4:
        raise HeaderError("IPv4", f"{text!r} is not a dotted-quad address")
    return raw


def internet_checksum(data: bytes | bytearray | memoryview) -> int:
    """RFC 1071 one's-complement sum, returned ready to store."""
    if len(data) % 2:
        data = bytes(data) + b"\0"
    total = sum(memoryview(data).cast("H"))  # native order; fixed up below
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    # the sum was taken in host order; swap to network order on little-endian hosts
    value = ~total & 0xFFFF
    return int.from_bytes(value.to_bytes(2, "little"), "big") if _LITTLE else value


_LITTLE = struct.pack("=H", 1) == b"\x01\x00"


@record
class Ethernet(tuple[bytes, bytes, int]):
    """Ethernet II header (no FCS; see :mod:`headers.fcs`)."""

    __slots__ = ()

    dst: bytes = field(0)
    src: bytes = field(1)
    type: int = field(2)

    SIZE: ClassVar[int] = 14
    FIELDS: ClassVar[tuple[str, ...]] = ("dst", "src", "type")

    def __new__(cls, dst: bytes, src: bytes, type: int) -> Ethernet:
        if len(dst) != 6 or len(src) != 6:
            raise HeaderError("Ethernet", "MAC addresses must be 6 bytes")
        check_bits("Ethernet", "type", type, 16)
        return new(cls, (dst, src, type))

    def size(self) -> int:
        return 14

    def to_bytes(self) -> bytes:
        return _ETH.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _ETH.pack_into(buf, offset, *self)
        return 14

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> Ethernet:
        need("Ethernet", data, offset, 14)
        return new(cls, _ETH.unpack_from(data, offset))


@record
class IPv4(tuple[int, int, int, int, int, int, int, int | None, bytes, bytes]):
    """IPv4 header without options (options are skipped on decode, never emitted).

    The tuple is the wire layout (``vihl`` first); ``ihl`` is read from it."""

    __slots__ = ()

    vihl: int = field(0)  # version:4 (always 4) | ihl:4
    tos: int = field(1)  # DSCP << 2 | ECN; TCD marks the ECN bits
    total_length: int = field(2)
    ident: int = field(3)
    flags_frag: int = field(4)
    ttl: int = field(5)
    proto: int = field(6)
    checksum: int | None = field(7)  # None: computed on encode
    src: bytes = field(8)
    dst: bytes = field(9)

    SIZE: ClassVar[int] = 20
    FIELDS: ClassVar[tuple[str, ...]] = ("src", "dst", "proto", "total_length", "tos", "ident", "flags_frag", "ttl",
                                         "checksum", "ihl")

    def __new__(cls, src: bytes, dst: bytes, proto: int, total_length: int = 20, tos: int = 0, ident: int = 0,
                flags_frag: int = 0x4000, ttl: int = 64, checksum: int | None = None, ihl: int = 5) -> IPv4:
        if len(src) != 4 or len(dst) != 4:
            raise HeaderError("IPv4", "addresses must be 4 bytes")
        for name, value, bits in (("proto", proto, 8), ("total_length", total_length, 16), ("tos", tos, 8),
                                  ("ident", ident, 16), ("flags_frag", flags_frag, 16), ("ttl", ttl, 8)):
            check_bits("IPv4", name, value, bits)
        if checksum is not None:
            check_bits("IPv4", "checksum", checksum, 16)
        if not isinstance(ihl, int) or not 5 <= ihl <= 15:
            raise HeaderError("IPv4", f"ihl={ihl} outside 5..15")
        return new(cls, (0x40 | ihl, tos, total_length, ident, flags_frag, ttl, proto, checksum, src, dst))

    @property
    def ihl(self) -> int:
        return self[0] & 15

    @property
    def ecn(self) -> int:
        return self.tos & 3

    def size(self) -> int:
        return (self[0] & 15) * 4

    def to_bytes(self) -> bytes:
        buf = bytearray(20)
        self.pack_into(buf)
        return bytes(buf)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        if self.ihl != 5:
            raise HeaderError("IPv4", "encoding IPv4 options is not supported")
        _IPV4.pack_into(buf, offset, 0x45, self.tos, self.total_length, self.ident, self.flags_frag,
                        self.ttl, self.proto, 0, self.src, self.dst)
        csum = self.checksum
        if csum is None:
            csum = internet_checksum(memoryview(buf)[offset:offset + 20])
        struct.pack_into("!H", buf, offset + 10, csum)
        return 20

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> IPv4:
        need("IPv4", data, offset, 20)
        t = _IPV4.unpack_from(data, offset)
        vihl = t[0]
        if vihl >> 4 != 4:
            raise HeaderError("IPv4", f"version {vihl >> 4} is not 4", offset)
        ihl = vihl & 15
        if ihl < 5:
            raise HeaderError("IPv4", f"ihl={ihl} is below 5", offset)
        need("IPv4", data, offset, ihl * 4)
        if t[2] < ihl * 4:
            raise HeaderError("IPv4", f"total_length={t[2]} shorter than the header", offset)
        return new(cls, t)

    def checksum_ok(self, data: bytes | bytearray | memoryview, offset: int = 0) -> bool:
        return internet_checksum(memoryview(data)[offset:offset + self.ihl * 4]) == 0


@record
class UDP(tuple[int, int, int, int]):
    """UDP header. A checksum of 0 means "none" (allowed over IPv4, used by RoCEv2)."""

    __slots__ = ()

    sport: int = field(0)
    dport: int = field(1)
    length: int = field(2)
    checksum: int = field(3)

    SIZE: ClassVar[int] = 8
    FIELDS: ClassVar[tuple[str, ...]] = ("sport", "dport", "length", "checksum")

    def __new__(cls, sport: int, dport: int, length: int = 8, checksum: int = 0) -> UDP:
        for name, value in (("sport", sport), ("dport", dport), ("length", length), ("checksum", checksum)):
            check_bits("UDP", name, value, 16)
        return new(cls, (sport, dport, length, checksum))

    def size(self) -> int:
        return 8

    def to_bytes(self) -> bytes:
        return _UDP.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _UDP.pack_into(buf, offset, *self)
        return 8

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> UDP:
        need("UDP", data, offset, 8)
        t = _UDP.unpack_from(data, offset)
        if t[2] < 8:
            raise HeaderError("UDP", f"length={t[2]} shorter than the header", offset)
        return new(cls, t)


def udp_checksum(src: bytes, dst: bytes, udp_segment: bytes | bytearray | memoryview) -> int:
    """UDP checksum over the IPv4 pseudo-header; 0 is sent as 0xFFFF (RFC 768)."""
    pseudo = src + dst + struct.pack("!BBH", 0, 17, len(udp_segment))
    csum = internet_checksum(pseudo + bytes(udp_segment))
    return csum or 0xFFFF


def build_udp_frame(
    src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, sport: int, dport: int,
    payload: bytes | bytearray | memoryview, *, tos: int = 0, ttl: int = 64, ident: int = 0,
    checksum: bool = True,
) -> bytes:
    """Ethernet/IPv4/UDP/payload in one buffer: the shape of every UDP-borne header here."""
    n = len(payload)
    buf = bytearray(42 + n)
    _ETH.pack_into(buf, 0, dst_mac, src_mac, 0x0800)
    IPv4(src_ip, dst_ip, 17, 28 + n, tos, ident, 0x4000, ttl).pack_into(buf, 14)
    buf[42:] = payload
    csum = udp_checksum(src_ip, dst_ip, bytes(_UDP.pack(sport, dport, 8 + n, 0)) + bytes(payload)) if checksum else 0
    _UDP.pack_into(buf, 34, sport, dport, 8 + n, csum)
    return bytes(buf)


class _UdpFrameFields(NamedTuple):
    eth: Ethernet
    ip: IPv4
    udp: UDP
    payload_offset: int
    payload_length: int


@record
class UdpFrame(_UdpFrameFields):
    """A parsed Ethernet/IPv4/UDP frame: the headers and where the UDP payload sits."""

    __slots__ = ()

    FIELDS: ClassVar[tuple[str, ...]] = _UdpFrameFields._fields


#: Ethernet, IPv4 without options and UDP in one unpack (the parse_udp_frame fast path)
_ETH_IPV4_UDP = struct.Struct("!6s6sHBBHHHBBH4s4sHHHH").unpack_from


def parse_udp_frame(frame: bytes | bytearray | memoryview, offset: int = 0) -> UdpFrame:
    """Parse Ethernet/IPv4/UDP, validating lengths; raise :class:`HeaderError` otherwise."""
    # the common case (IPv4 without options, lengths consistent) in one unpack (issue 19); anything
    # else, well formed or not, goes the long way below, which words the error
    if offset >= 0 and len(frame) - offset >= 42:
        t = _ETH_IPV4_UDP(frame, offset)
        ip_end = offset + 14 + t[5]
        if (t[2] == 0x0800 and t[3] == 0x45 and t[9] == 17 and t[5] >= 20 and ip_end <= len(frame)
                and 8 <= t[15] <= t[5] - 20):
            return new(UdpFrame, (new(Ethernet, t[:3]), new(IPv4, t[3:13]), new(UDP, t[13:]), offset + 42,
                                  t[15] - 8))
    eth = Ethernet.from_bytes(frame, offset)
    if eth.type != 0x0800:
        raise HeaderError("Ethernet", f"type {eth.type:#06x} is not IPv4", offset + 12)
    ip = IPv4.from_bytes(frame, offset + 14)
    if ip.proto != 17:
        raise HeaderError("IPv4", f"protocol {ip.proto} is not UDP", offset + 23)
    ip_end = offset + 14 + ip.total_length
    if ip_end > len(frame):
        raise HeaderError("IPv4", f"total_length={ip.total_length} runs past the frame", offset + 16)
    uoff = offset + 14 + ip.ihl * 4
    udp = UDP.from_bytes(frame, uoff)
    if uoff + udp.length > ip_end:
        raise HeaderError("UDP", f"length={udp.length} runs past the IP datagram", uoff + 4)
    return new(UdpFrame, (eth, ip, udp, uoff + 8, udp.length - 8))


HEADERS = (Ethernet, IPv4, UDP)
