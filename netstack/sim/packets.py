"""Frames the simulated hosts send and read: Ethernet/IPv4 with UDP or TCP, built with ``struct``.

The host models (``netstack.sim.hosts``) put real frames on the simulated links, byte for byte
what a kernel would send (no IP options, UDP checksum 0 as RFC 768 allows for IPv4), so the
switches classify, mark (ECN) and forward them exactly as they do live frames. The IPv4
header checksum is real: a host drops a frame whose header a link corrupted, as the kernel
does (docs/architecture.md "The live runtime": nft corrupts byte 22, the TTL). The TCP checksum is left 0: the simulated
TCP model is not the kernel's and nothing here verifies it.

A :class:`Ipv4Flow` precomputes everything that is constant between two hosts for one
protocol, so a frame costs one ``pack_into`` and a checksum of two changing fields.
"""

from __future__ import annotations

import struct

from ..ethernet import UDP_HEADERS_BYTES

ETH_IPV4 = b"\x08\x00"
PROTO_TCP = 6
PROTO_UDP = 17
#: Ethernet (14) + IPv4 (20) + UDP (8)
UDP_HEADERS = UDP_HEADERS_BYTES
#: Ethernet (14) + IPv4 (20) + TCP (20)
TCP_HEADERS = 54

_IP = struct.Struct("!BBHHHBBH4s4s")
_UDP = struct.Struct("!HHHH")
_TCP = struct.Struct("!HHIIBBHHH")
_H2 = struct.Struct("!H")
_WORDS = struct.Struct("!10H")


def _fold(total: int) -> int:
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def ipv4_checksum_ok(frame: bytes, offset: int = 14) -> bool:
    """The IPv4 header checksum of a 20-byte header at ``offset`` verifies."""
    if len(frame) < offset + 20:
        return False
    total = sum(_WORDS.unpack_from(frame, offset))
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return total == 0xFFFF


class Ipv4Flow:
    """Headers from one host to another for one protocol: Ethernet, IPv4 (TOS, TTL 64, DF).

    ``udp(sport, dport, payload)`` and ``tcp(sport, dport, seq, ack, flags, window, payload)``
    return whole frames. ``tos`` carries DSCP (the switch's class) and ECN (ECT(0) = 2 for a
    flow that wants marks).
    """

    __slots__ = ("_base", "_eth", "dst_ip", "ident", "proto", "src_ip", "tos")

    def __init__(self, src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, proto: int = PROTO_UDP,
                 tos: int = 0) -> None:
        self._eth = dst_mac + src_mac + ETH_IPV4
        self.src_ip = src_ip
        self.dst_ip = dst_ip
        self.proto = proto
        self.tos = tos
        self.ident = 0
        # checksum words of every field but total length and identification
        words = _WORDS.unpack(_IP.pack(0x45, tos, 0, 0, 0x4000, 64, proto, 0, src_ip, dst_ip))
        self._base = sum(words)

    def _ip(self, buf: bytearray, length: int) -> None:
        ident = self.ident
        self.ident = (ident + 1) & 0xFFFF
        csum = _fold(self._base + length + ident)
        _IP.pack_into(buf, 14, 0x45, self.tos, length, ident, 0x4000, 64, self.proto, csum, self.src_ip, self.dst_ip)

    def udp(self, sport: int, dport: int, payload: bytes) -> bytes:
        n = len(payload)
        buf = bytearray(self._eth + bytes(28) + payload)
        self._ip(buf, 28 + n)
        _UDP.pack_into(buf, 34, sport, dport, 8 + n, 0)
        return bytes(buf)

    def tcp(self, sport: int, dport: int, seq: int, ack: int, flags: int, window: int, payload: bytes = b"") -> bytes:
        buf = bytearray(self._eth + bytes(40) + payload)
        self._ip(buf, 40 + len(payload))
        _TCP.pack_into(buf, 34, sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags, window, 0, 0)
        return bytes(buf)


PROTO_ICMP = 1
ICMP_DEST_UNREACH, ICMP_PORT_UNREACH = 3, 3


def icmp_port_unreachable(flow: Ipv4Flow, original: bytes) -> bytes:
    """The ICMP port unreachable a kernel sends back for the UDP frame ``original`` (RFC 792: the
    offending IP header and the first 8 bytes of its payload), on ``flow`` (an ICMP flow back to
    the sender). The ICMP checksum is real."""
    quoted = original[14:14 + 28]
    body = bytearray(struct.pack("!BBHI", ICMP_DEST_UNREACH, ICMP_PORT_UNREACH, 0, 0) + quoted)
    if len(body) % 2:
        body.append(0)
    struct.pack_into("!H", body, 2, _fold(sum(struct.unpack(f"!{len(body) // 2}H", body))))
    n = 8 + len(quoted)
    buf = bytearray(flow._eth + bytes(20) + bytes(body[:n]))
    flow._ip(buf, 20 + n)
    return bytes(buf)


def icmp_unreachable_fields(frame: bytes) -> tuple[int, bytes, int] | None:
    """``(the offending datagram's source port, its destination IP, its destination port)`` of an
    ICMP port unreachable about a UDP datagram, else None."""
    if (len(frame) < 14 + 20 + 8 + 28 or frame[12:14] != ETH_IPV4 or frame[23] != PROTO_ICMP
            or frame[14] != 0x45 or frame[34] != ICMP_DEST_UNREACH or frame[35] != ICMP_PORT_UNREACH):
        return None
    q = 42  # the quoted IP header
    if frame[q] != 0x45 or frame[q + 9] != PROTO_UDP:
        return None
    sport, dport = struct.unpack_from("!HH", frame, q + 20)
    return sport, frame[q + 16:q + 20], dport


def udp_fields(frame: bytes) -> tuple[bytes, int, int, int] | None:
    """``(src ip, sport, dport, payload offset)`` of an Ethernet/IPv4/UDP frame, else None."""
    if len(frame) < UDP_HEADERS or frame[12:14] != ETH_IPV4 or frame[23] != PROTO_UDP or frame[14] != 0x45:
        return None
    sport, dport = struct.unpack_from("!HH", frame, 34)
    return frame[26:30], sport, dport, UDP_HEADERS


def tcp_fields(frame: bytes) -> tuple[int, int, int, int, int, int, int] | None:
    """``(sport, dport, seq, ack, flags, window, payload offset)`` of an Ethernet/IPv4/TCP frame."""
    if len(frame) < TCP_HEADERS or frame[12:14] != ETH_IPV4 or frame[23] != PROTO_TCP or frame[14] != 0x45:
        return None
    sport, dport, seq, ack, off, flags, window, _, _ = _TCP.unpack_from(frame, 34)
    return sport, dport, seq, ack, flags, window, 34 + (off >> 4) * 4


def ip_payload_end(frame: bytes) -> int:
    """Where the IPv4 datagram ends (a short frame was padded to 60 bytes)."""
    return 14 + (frame[16] << 8 | frame[17])


def ecn(frame: bytes) -> int:
    """The ECN field of an IPv4 frame (3 = CE: a switch marked it)."""
    return frame[15] & 3


__all__ = ["ICMP_DEST_UNREACH", "ICMP_PORT_UNREACH", "PROTO_ICMP", "PROTO_TCP", "PROTO_UDP", "TCP_HEADERS",
           "UDP_HEADERS", "Ipv4Flow", "ecn", "icmp_port_unreachable", "icmp_unreachable_fields", "ip_payload_end",
           "ipv4_checksum_ok", "tcp_fields", "udp_fields"]
