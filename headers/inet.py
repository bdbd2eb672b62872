"""Ethernet II, IPv4 and UDP: the fast codecs every other header rides on.

Scapy already has layers for these (``scapy.layers.l2.Ether``, ``scapy.layers.inet``),
so only the fast codecs live here. IPv4 carries the ECN field TCD marks (see
:mod:`headers.tcd`) and is part of the RoCEv2 ICRC (see :mod:`headers.roce`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from .errors import HeaderError, check_bits, need

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


@dataclass(frozen=True, slots=True)
class Ethernet:
    """Ethernet II header (no FCS; see :mod:`headers.fcs`)."""

    dst: bytes
    src: bytes
    type: int

    SIZE: ClassVar[int] = 14

    def __post_init__(self) -> None:
        if len(self.dst) != 6 or len(self.src) != 6:
            raise HeaderError("Ethernet", "MAC addresses must be 6 bytes")
        check_bits("Ethernet", "type", self.type, 16)

    def size(self) -> int:
        return 14

    def to_bytes(self) -> bytes:
        return _ETH.pack(self.dst, self.src, self.type)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _ETH.pack_into(buf, offset, self.dst, self.src, self.type)
        return 14

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> Ethernet:
        need("Ethernet", data, offset, 14)
        dst, src, etype = _ETH.unpack_from(data, offset)
        return cls(dst, src, etype)


@dataclass(frozen=True, slots=True)
class IPv4:
    """IPv4 header without options (options are skipped on decode, never emitted)."""

    src: bytes
    dst: bytes
    proto: int
    total_length: int = 20
    tos: int = 0  # DSCP << 2 | ECN; TCD marks the ECN bits
    ident: int = 0
    flags_frag: int = 0x4000  # DF
    ttl: int = 64
    checksum: int | None = None  # None: computed on encode
    ihl: int = 5

    SIZE: ClassVar[int] = 20

    def __post_init__(self) -> None:
        if len(self.src) != 4 or len(self.dst) != 4:
            raise HeaderError("IPv4", "addresses must be 4 bytes")
        for name, bits in (("proto", 8), ("total_length", 16), ("tos", 8), ("ident", 16),
                           ("flags_frag", 16), ("ttl", 8)):
            check_bits("IPv4", name, getattr(self, name), bits)
        if self.checksum is not None:
            check_bits("IPv4", "checksum", self.checksum, 16)
        if not 5 <= self.ihl <= 15:
            raise HeaderError("IPv4", f"ihl={self.ihl} outside 5..15")

    @property
    def ecn(self) -> int:
        return self.tos & 3

    def size(self) -> int:
        return self.ihl * 4

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
        vihl, tos, tot, ident, ff, ttl, proto, csum, src, dst = _IPV4.unpack_from(data, offset)
        if vihl >> 4 != 4:
            raise HeaderError("IPv4", f"version {vihl >> 4} is not 4", offset)
        ihl = vihl & 15
        if ihl < 5:
            raise HeaderError("IPv4", f"ihl={ihl} is below 5", offset)
        need("IPv4", data, offset, ihl * 4)
        if tot < ihl * 4:
            raise HeaderError("IPv4", f"total_length={tot} shorter than the header", offset)
        return cls(src, dst, proto, tot, tos, ident, ff, ttl, csum, ihl)

    def checksum_ok(self, data: bytes | bytearray | memoryview, offset: int = 0) -> bool:
        return internet_checksum(memoryview(data)[offset:offset + self.ihl * 4]) == 0


@dataclass(frozen=True, slots=True)
class UDP:
    """UDP header. A checksum of 0 means "none" (allowed over IPv4, used by RoCEv2)."""

    sport: int
    dport: int
    length: int = 8
    checksum: int = 0

    SIZE: ClassVar[int] = 8

    def __post_init__(self) -> None:
        for name in ("sport", "dport", "length", "checksum"):
            check_bits("UDP", name, getattr(self, name), 16)

    def size(self) -> int:
        return 8

    def to_bytes(self) -> bytes:
        return _UDP.pack(self.sport, self.dport, self.length, self.checksum)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _UDP.pack_into(buf, offset, self.sport, self.dport, self.length, self.checksum)
        return 8

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> UDP:
        need("UDP", data, offset, 8)
        sport, dport, length, csum = _UDP.unpack_from(data, offset)
        if length < 8:
            raise HeaderError("UDP", f"length={length} shorter than the header", offset)
        return cls(sport, dport, length, csum)


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


@dataclass(frozen=True, slots=True)
class UdpFrame:
    """A parsed Ethernet/IPv4/UDP frame: the headers and where the UDP payload sits."""

    eth: Ethernet
    ip: IPv4
    udp: UDP
    payload_offset: int
    payload_length: int


def parse_udp_frame(frame: bytes | bytearray | memoryview, offset: int = 0) -> UdpFrame:
    """Parse Ethernet/IPv4/UDP, validating lengths; raise :class:`HeaderError` otherwise."""
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
    return UdpFrame(eth, ip, udp, uoff + 8, udp.length - 8)


HEADERS = (Ethernet, IPv4, UDP)
