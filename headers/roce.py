"""RoCEv2: the InfiniBand transport headers DTA's translator writes into collector memory with.

DTA (DTA §5, §7.2) turns telemetry reports into RoCEv2 operations on the collector's
registered memory: RDMA WRITE Only + RETH for Key-Write and Append (§7.2.2, §7.2.3),
FETCH_ADD + AtomicETH for Key-Increment (§6.4), and it parses the collector's ACKNOWLEDGE +
AETH to resynchronise a queue pair's PSN after a NAK (§5.3). A RoCEv2 packet is

    Ethernet / IPv4 / UDP (dport 4791, checksum 0) / BTH / [extended headers] / payload / ICRC

where the ICRC is the IBTA "invariant CRC" (IBTA vol. 1, RoCEv2 annex A17): a CRC32 over a pseudo
LRH of eight 0xFF bytes, the IP and UDP headers and the transport packet, with every field a
router may rewrite in flight masked to ones. The public translator leaves the ICRC blank and
asks users to disable the NIC's check; we compute it (docs/dta.md, docs/wire-formats.md "RoCEv2").

Field names follow ``scapy.contrib.roce`` (BTH) and the IBTA names elsewhere, so the Scapy
layers in :mod:`headers.layers.roce` carry the same names and values.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from enum import IntEnum
from typing import ClassVar, NamedTuple

from .errors import HeaderError, check_bits, need
from .inet import UDP, Ethernet, IPv4, parse_udp_frame
from .record import field, new, record
from .registry import EtherType, IpProto, UdpPort

_BTH = struct.Struct("!BBHII")  # opcode, se|m|pad|tver, pkey, resv8a|dqpn, a|resv7|psn
_RETH = struct.Struct("!QII")
_ATOMIC_ETH = struct.Struct("!QIQQ")
_AETH = struct.Struct("!BBH")  # syndrome, msn (bits 23..16, 15..0)
_ATOMIC_ACK_ETH = struct.Struct("!Q")
_ICRC = struct.Struct("<I")
_IP4_LOCATE = struct.Struct("!BxH5xB")  # version|ihl, total length, protocol
_IP6_LOCATE = struct.Struct("!HB")  # payload length, next header
_U16 = struct.Struct("!H")  # the CRC's bytes go on the wire least significant first

#: Length of the invariant CRC trailer that ends every RoCEv2 packet.
ICRC_LEN = 4

#: CRC32 state after the pseudo LRH: RoCEv2 has no IB Local Route Header, so the annex
#: substitutes eight bytes of ones for it. Precomputed once; every ICRC starts here.
_PSEUDO_LRH_CRC = zlib.crc32(b"\xff" * 8)


class Opcode(IntEnum):
    """BTH opcodes of the Reliable Connection transport (IBTA vol. 1 ch. 9; the high three bits
    are the transport, 000 = RC). Listed: the ones DTA and our responder use, plus the RC
    SEND/WRITE fragments and READ responses so a capture reads sensibly; and the CNP (0x81),
    the one non-RC opcode, which TCD's end hosts send (no extended headers follow its BTH)."""

    SEND_FIRST = 0x00
    SEND_MIDDLE = 0x01
    SEND_LAST = 0x02
    SEND_ONLY = 0x04
    RDMA_WRITE_FIRST = 0x06
    RDMA_WRITE_MIDDLE = 0x07
    RDMA_WRITE_LAST = 0x08
    RDMA_WRITE_ONLY = 0x0A
    RDMA_READ_REQUEST = 0x0C
    RDMA_READ_RESPONSE_FIRST = 0x0D
    RDMA_READ_RESPONSE_MIDDLE = 0x0E
    RDMA_READ_RESPONSE_LAST = 0x0F
    RDMA_READ_RESPONSE_ONLY = 0x10
    ACKNOWLEDGE = 0x11
    ATOMIC_ACKNOWLEDGE = 0x12
    COMPARE_SWAP = 0x13
    FETCH_ADD = 0x14
    #: not RC: the Congestion Notification Packet (IBTA RoCEv2 annex A17; transport 100, the
    #: "CNP" transport): BTH, 16 reserved bytes, ICRC. DCQCN's NP sends it ("Congestion Control
    #: for Large-Scale RDMA Deployments", §3.2); :class:`headers.tcd.TcdCnp` is TCD's use of it
    CNP = 0x81


class AethKind(IntEnum):
    """Bits 6:5 of the AETH syndrome (IBTA vol. 1 ch. 9). ``RESERVED`` (0b10) never appears in
    a valid AETH; :func:`decode_syndrome` rejects it."""

    ACK = 0
    RNR_NAK = 1
    RESERVED = 2
    NAK = 3


class NakCode(IntEnum):
    """Low five bits of a NAK syndrome. DTA's translator resets its PSN register on
    ``PSN_SEQUENCE_ERROR`` (§5.3); our collector answers a bad rkey or an out-of-bounds
    address with ``REMOTE_ACCESS_ERROR`` (docs/dta.md "The collector daemon")."""

    PSN_SEQUENCE_ERROR = 0
    INVALID_REQUEST = 1
    REMOTE_ACCESS_ERROR = 2
    REMOTE_OPERATIONAL_ERROR = 3
    INVALID_RD_REQUEST = 4


#: ACK credit count meaning "no credit information" (IBTA vol. 1 ch. 9): the responder does not
#: limit the requester, which is what a userspace collector with ample memory wants.
CREDITS_INVALID = 0x1F


@record
class BTH(tuple[int, int, int, int, int]):
    """Base Transport Header, 12 bytes; first after the UDP header in every RoCEv2 packet.

    Defaults match ``scapy.contrib.roce.BTH`` (P_Key 0xFFFF, the default partition, which
    is also what DTA's translator sends). ``fecn``/``becn``/``resv6`` form the byte the IBTA
    calls resv8a; it is masked out of the ICRC, so switches may set FECN/BECN freely. The
    tuple is the wire layout (five struct fields); the bit fields are properties.
    """

    __slots__ = ()

    opcode: int = field(0)
    flags_byte: int = field(1)  # solicited:1 | migreq:1 | padcount:2 | version:4
    pkey: int = field(2)
    dqpn_word: int = field(3)  # fecn:1 | becn:1 | resv6:6 | dqpn:24 (the IBTA's resv8a, then DestQP)
    psn_word: int = field(4)  # ackreq:1 | resv7:7 | psn:24

    SIZE: ClassVar[int] = 12
    _BITS: ClassVar[tuple[tuple[str, int], ...]] = (
        ("opcode", 8), ("solicited", 1), ("migreq", 1), ("padcount", 2), ("version", 4), ("pkey", 16),
        ("fecn", 1), ("becn", 1), ("resv6", 6), ("dqpn", 24), ("ackreq", 1), ("resv7", 7), ("psn", 24),
    )
    FIELDS: ClassVar[tuple[str, ...]] = tuple(name for name, _ in _BITS)

    def __new__(cls, opcode: int = 0, solicited: int = 0, migreq: int = 0, padcount: int = 0, version: int = 0,
                pkey: int = 0xFFFF, fecn: int = 0, becn: int = 0, resv6: int = 0, dqpn: int = 0, ackreq: int = 0,
                resv7: int = 0, psn: int = 0) -> BTH:
        # migreq: DTA's translator sends 1 (docs/wire-formats.md "BTH"); padcount: pad bytes after
        # the payload to reach a multiple of 4; version: 0 is the only one defined; dqpn: DTA has
        # one queue pair per collector store (§7.2.1); psn: per-QP, the resync of §5.3 rewinds it
        values = (opcode, solicited, migreq, padcount, version, pkey, fecn, becn, resv6, dqpn, ackreq, resv7, psn)
        for (name, bits), value in zip(cls._BITS, values, strict=True):
            check_bits("BTH", name, value, bits)
        return new(cls, (int(opcode), solicited << 7 | migreq << 6 | padcount << 4 | version, int(pkey),
                         (fecn << 7 | becn << 6 | resv6) << 24 | dqpn, (ackreq << 7 | resv7) << 24 | psn))

    @property
    def solicited(self) -> int:
        return self[1] >> 7

    @property
    def migreq(self) -> int:
        return self[1] >> 6 & 1

    @property
    def padcount(self) -> int:
        return self[1] >> 4 & 3

    @property
    def version(self) -> int:
        return self[1] & 15

    @property
    def fecn(self) -> int:
        return self[3] >> 31

    @property
    def becn(self) -> int:
        return self[3] >> 30 & 1

    @property
    def resv6(self) -> int:
        return self[3] >> 24 & 0x3F

    @property
    def dqpn(self) -> int:
        return self[3] & 0xFFFFFF

    @property
    def ackreq(self) -> int:
        return self[4] >> 31

    @property
    def resv7(self) -> int:
        return self[4] >> 24 & 0x7F

    @property
    def psn(self) -> int:
        return self[4] & 0xFFFFFF

    def size(self) -> int:
        return 12

    def to_bytes(self) -> bytes:
        return _BTH.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _BTH.pack_into(buf, offset, *self)
        return 12

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> BTH:
        if offset < 0 or len(data) - offset < 12:
            need("BTH", data, offset, 12)
        return new(cls, _BTH_UNPACK(data, offset))


@record
class RETH(tuple[int, int, int]):
    """RDMA Extended Transport Header, 16 bytes: where in the responder's memory.

    Follows the BTH of RDMA WRITE First/Only and RDMA READ Request. DTA's Key-Write puts the
    slot address ``base + slot * slot_size`` in ``va`` (§7.2.2)."""

    __slots__ = ()

    va: int = field(0)  # virtual address in the registered region
    rkey: int = field(1)  # remote key of the region (learnt at setup, §7.2.1)
    dma_len: int = field(2)  # length of the whole message in bytes

    SIZE: ClassVar[int] = 16
    FIELDS: ClassVar[tuple[str, ...]] = ("va", "rkey", "dma_len")

    def __new__(cls, va: int = 0, rkey: int = 0, dma_len: int = 0) -> RETH:
        check_bits("RETH", "va", va, 64)
        check_bits("RETH", "rkey", rkey, 32)
        check_bits("RETH", "dma_len", dma_len, 32)
        return new(cls, (va, rkey, dma_len))

    def size(self) -> int:
        return 16

    def to_bytes(self) -> bytes:
        return _RETH.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _RETH.pack_into(buf, offset, *self)
        return 16

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> RETH:
        if offset < 0 or len(data) - offset < 16:
            need("RETH", data, offset, 16)
        return new(cls, _RETH_UNPACK(data, offset))


@record
class AtomicETH(tuple[int, int, int, int]):
    """Atomic Extended Transport Header, 28 bytes; follows COMPARE_SWAP and FETCH_ADD.

    DTA's Key-Increment is N FETCH_ADDs of the report's counter (§6.4), so ``swap_add``
    carries the addend; ``compare`` only matters for COMPARE_SWAP. ``va`` must be 8-byte
    aligned (IBTA); that is the responder's check, not the codec's."""

    __slots__ = ()

    va: int = field(0)
    rkey: int = field(1)
    swap_add: int = field(2)  # swap data (COMPARE_SWAP) or add data (FETCH_ADD)
    compare: int = field(3)

    SIZE: ClassVar[int] = 28
    FIELDS: ClassVar[tuple[str, ...]] = ("va", "rkey", "swap_add", "compare")

    def __new__(cls, va: int = 0, rkey: int = 0, swap_add: int = 0, compare: int = 0) -> AtomicETH:
        check_bits("AtomicETH", "va", va, 64)
        check_bits("AtomicETH", "rkey", rkey, 32)
        check_bits("AtomicETH", "swap_add", swap_add, 64)
        check_bits("AtomicETH", "compare", compare, 64)
        return new(cls, (va, rkey, swap_add, compare))

    def size(self) -> int:
        return 28

    def to_bytes(self) -> bytes:
        return _ATOMIC_ETH.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _ATOMIC_ETH.pack_into(buf, offset, *self)
        return 28

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> AtomicETH:
        if offset < 0 or len(data) - offset < 28:
            need("AtomicETH", data, offset, 28)
        return new(cls, _ATOMIC_ETH_UNPACK(data, offset))


@record
class AETH(tuple[int, int, int]):
    """ACK Extended Transport Header, 4 bytes: the responder's verdict.

    ``syndrome`` = reserved:1 | kind:2 | value:5 (see :func:`decode_syndrome`); ``msn`` is the
    responder's message sequence number. The translator reads these to resynchronise (§5.3).
    The record accepts any syndrome byte so that every 4-byte string decodes and re-encodes
    exactly; :func:`decode_syndrome` is where reserved encodings are refused. The tuple is the
    wire layout (the 24-bit ``msn`` as its high byte and low 16 bits)."""

    __slots__ = ()

    syndrome: int = field(0)
    msn_hi: int = field(1)
    msn_lo: int = field(2)

    SIZE: ClassVar[int] = 4
    FIELDS: ClassVar[tuple[str, ...]] = ("syndrome", "msn")

    def __new__(cls, syndrome: int = 0, msn: int = 0) -> AETH:
        check_bits("AETH", "syndrome", syndrome, 8)
        check_bits("AETH", "msn", msn, 24)
        return new(cls, (int(syndrome), msn >> 16, msn & 0xFFFF))

    @property
    def msn(self) -> int:
        return self[1] << 16 | self[2]

    def size(self) -> int:
        return 4

    def to_bytes(self) -> bytes:
        return _AETH.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _AETH.pack_into(buf, offset, *self)
        return 4

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> AETH:
        if offset < 0 or len(data) - offset < 4:
            need("AETH", data, offset, 4)
        return new(cls, _AETH_UNPACK(data, offset))

    def decode(self) -> tuple[AethKind, int]:
        """``decode_syndrome(self.syndrome)``."""
        return decode_syndrome(self.syndrome)


@record
class AtomicAckETH(tuple[int]):
    """Atomic ACK Extended Transport Header, 8 bytes: the memory's value before the atomic.

    Follows the AETH of ATOMIC_ACKNOWLEDGE."""

    __slots__ = ()

    orig_remote_data: int = field(0)

    SIZE: ClassVar[int] = 8
    FIELDS: ClassVar[tuple[str, ...]] = ("orig_remote_data",)

    def __new__(cls, orig_remote_data: int = 0) -> AtomicAckETH:
        check_bits("AtomicAckETH", "orig_remote_data", orig_remote_data, 64)
        return new(cls, (orig_remote_data,))

    def size(self) -> int:
        return 8

    def to_bytes(self) -> bytes:
        return _ATOMIC_ACK_ETH.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _ATOMIC_ACK_ETH.pack_into(buf, offset, *self)
        return 8

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> AtomicAckETH:
        if offset < 0 or len(data) - offset < 8:
            need("AtomicAckETH", data, offset, 8)
        return new(cls, _ATOMIC_ACK_ETH_UNPACK(data, offset))


_BTH_UNPACK = _BTH.unpack_from
_RETH_UNPACK = _RETH.unpack_from
_ATOMIC_ETH_UNPACK = _ATOMIC_ETH.unpack_from
_AETH_UNPACK = _AETH.unpack_from
_ATOMIC_ACK_ETH_UNPACK = _ATOMIC_ACK_ETH.unpack_from


HEADERS = (BTH, RETH, AtomicETH, AETH, AtomicAckETH)

ExtHeader = RETH | AtomicETH | AETH | AtomicAckETH


# --- AETH syndromes ------------------------------------------------------------------------

def aeth_ack(msn: int, credits: int = CREDITS_INVALID) -> AETH:
    """A positive ACK; ``credits`` is the 5-bit end-to-end credit code (0x1F: none given)."""
    check_bits("AETH", "credits", credits, 5)
    return AETH(AethKind.ACK << 5 | credits, msn)


def aeth_nak(code: int, msn: int) -> AETH:
    """A NAK with ``code`` (a :class:`NakCode`; 5-31 are reserved but encodable)."""
    check_bits("AETH", "NAK code", code, 5)
    return AETH(AethKind.NAK << 5 | code, msn)


def aeth_rnr_nak(timer: int, msn: int) -> AETH:
    """A receiver-not-ready NAK; ``timer`` is the 5-bit RNR timer code (IBTA RNR timer table)."""
    check_bits("AETH", "RNR timer", timer, 5)
    return AETH(AethKind.RNR_NAK << 5 | timer, msn)


def decode_syndrome(syndrome: int) -> tuple[AethKind, int]:
    """Split an AETH syndrome into (kind, value).

    The value is the credit count for ACK, the timer code for RNR NAK and the NAK code
    (a :class:`NakCode` when it is one of the defined codes, else the raw int) for NAK.
    Raises :class:`HeaderError` for the reserved encodings (bit 7 set, or kind 0b10)."""
    check_bits("AETH", "syndrome", syndrome, 8)
    if syndrome & 0x80:
        raise HeaderError("AETH", f"syndrome {syndrome:#04x} has the reserved bit 7 set")
    kind = AethKind(syndrome >> 5)
    if kind is AethKind.RESERVED:
        raise HeaderError("AETH", f"syndrome {syndrome:#04x} uses the reserved kind 0b10")
    value = syndrome & 0x1F
    if kind is AethKind.NAK and value <= max(NakCode):
        return kind, NakCode(value)
    return kind, value


# --- which extended headers follow which opcode ---------------------------------------------

#: Extended headers, in wire order, after the BTH of each opcode (IBTA vol. 1 ch. 9). Any
#: opcode not listed carries none; that includes the WITH_IMMEDIATE / WITH_INVALIDATE
#: opcodes, whose 4-byte ImmDt / IETH we do not model (it stays at the front of the payload),
#: and every non-RC transport.
EXT_HEADERS: dict[int, tuple[type[ExtHeader], ...]] = {
    Opcode.RDMA_WRITE_FIRST: (RETH,),
    Opcode.RDMA_WRITE_ONLY: (RETH,),
    Opcode.RDMA_READ_REQUEST: (RETH,),
    Opcode.RDMA_READ_RESPONSE_FIRST: (AETH,),
    Opcode.RDMA_READ_RESPONSE_LAST: (AETH,),
    Opcode.RDMA_READ_RESPONSE_ONLY: (AETH,),
    Opcode.ACKNOWLEDGE: (AETH,),
    Opcode.ATOMIC_ACKNOWLEDGE: (AETH, AtomicAckETH),
    Opcode.COMPARE_SWAP: (AtomicETH,),
    Opcode.FETCH_ADD: (AtomicETH,),
}


def ext_headers_for(opcode: int) -> tuple[type[ExtHeader], ...]:
    """The extended header classes that follow a BTH with ``opcode``, in wire order."""
    return EXT_HEADERS.get(opcode, ())


def pad_count(payload_length: int) -> int:
    """Pad bytes that bring a payload to a multiple of 4 (the BTH ``padcount``)."""
    return -payload_length & 3


# --- ICRC -----------------------------------------------------------------------------------

def _icrc(mv: memoryview, l3: int, udp: int, end: int, v6: bool) -> int:
    """Invariant CRC of the packet whose IP header starts at ``l3``, UDP header at ``udp`` and
    whose ICRC occupies ``end - 4 .. end``. Offsets must already be validated.

    Only the IP/UDP/BTH headers (at most 60 + 8 + 12 bytes) are copied, to mask the variant
    fields; the transport payload is fed to zlib straight from the caller's buffer."""
    hdr = bytearray(mv[l3:udp + 20])
    u = udp - l3
    if v6:
        # traffic class and flow label (routers rewrite them), hop limit
        hdr[0] |= 0x0F
        hdr[1] = hdr[2] = hdr[3] = 0xFF
        hdr[7] = 0xFF
    else:
        hdr[1] = 0xFF  # TOS: DSCP and ECN (switches mark ECN, e.g. TCD)
        hdr[8] = 0xFF  # TTL
        hdr[10] = hdr[11] = 0xFF  # header checksum follows TTL/TOS
    hdr[u + 6] = hdr[u + 7] = 0xFF  # UDP checksum
    hdr[u + 12] = 0xFF  # BTH resv8a: FECN, BECN and resv6
    crc = zlib.crc32(hdr, _PSEUDO_LRH_CRC)
    return zlib.crc32(mv[udp + 20:end - ICRC_LEN], crc) & 0xFFFFFFFF


def _locate(frame: bytes | bytearray | memoryview, l3_offset: int) -> tuple[int, int, bool]:
    """Find (udp offset, end of the UDP datagram, is IPv6) from the IP header at ``l3_offset``,
    checking that the datagram holds a BTH and an ICRC and fits in ``frame``."""
    need("RoCEv2", frame, l3_offset, 1)
    version = frame[l3_offset] >> 4
    if version == 4:
        # read the three fields we need rather than build an IPv4 record: this is per packet
        need("IPv4", frame, l3_offset, 20)
        vihl, total_length, proto = _IP4_LOCATE.unpack_from(frame, l3_offset)
        hlen = (vihl & 15) * 4
        if hlen < 20:
            raise HeaderError("IPv4", f"ihl={vihl & 15} is below 5", l3_offset)
        need("IPv4", frame, l3_offset, hlen)
        if total_length < hlen:
            raise HeaderError("IPv4", f"total_length={total_length} shorter than the header", l3_offset + 2)
        if proto != IpProto.UDP:
            raise HeaderError("RoCEv2", f"IP protocol {proto} is not UDP", l3_offset + 9)
        udp = l3_offset + hlen
        ip_end = l3_offset + total_length
        v6 = False
    elif version == 6:
        need("IPv6", frame, l3_offset, 40)
        plen, nxt = _IP6_LOCATE.unpack_from(frame, l3_offset + 4)
        if nxt != IpProto.UDP:
            # extension headers would sit between IPv6 and UDP; RoCEv2 does not use them
            raise HeaderError("RoCEv2", f"IPv6 next header {nxt} is not UDP", l3_offset + 6)
        udp = l3_offset + 40
        ip_end = udp + plen
        v6 = True
    else:
        raise HeaderError("RoCEv2", f"IP version {version} is neither 4 nor 6", l3_offset)
    need("UDP", frame, udp, 8)
    (ulen,) = _U16.unpack_from(frame, udp + 4)
    end = udp + ulen
    if ulen < 8 + BTH.SIZE + ICRC_LEN:
        raise HeaderError("RoCEv2", f"UDP length {ulen} cannot hold a BTH and an ICRC", udp + 4)
    if end > ip_end:
        raise HeaderError("UDP", f"length={ulen} runs past the IP datagram", udp + 4)
    if end > len(frame):
        raise HeaderError("RoCEv2", f"UDP datagram ends at byte {end}, frame has {len(frame)}", udp + 4)
    return udp, end, v6


def icrc_of(frame: bytes | bytearray | memoryview, l3_offset: int = 14) -> int:
    """The ICRC that belongs in the last four bytes of the UDP datagram of ``frame``.

    ``frame`` is an Ethernet frame (``l3_offset=14``) or a bare IPv4/IPv6 packet
    (``l3_offset=0``); it must already contain the 4-byte ICRC slot (its content is ignored)
    and may carry Ethernet padding after the datagram. Covered, in order: eight 0xFF bytes,
    the IP header with TOS, TTL and checksum set to ones (IPv6: traffic class, flow label and
    hop limit), the UDP header with checksum ones, the BTH with resv8a ones, then everything
    up to the ICRC. Stored on the wire least-significant byte first (as scapy.contrib.roce)."""
    udp, end, v6 = _locate(frame, l3_offset)
    return _icrc(memoryview(frame), l3_offset, udp, end, v6)


def write_icrc(buf: bytearray | memoryview, l3_offset: int = 14) -> int:
    """Compute the ICRC of the packet in ``buf`` and store it in place; return it."""
    udp, end, v6 = _locate(buf, l3_offset)
    value = _icrc(memoryview(buf), l3_offset, udp, end, v6)
    _ICRC.pack_into(buf, end - ICRC_LEN, value)
    return value


def append_icrc(frame: bytes | bytearray | memoryview, l3_offset: int = 14) -> bytes:
    """``frame`` plus its ICRC, for a frame whose IP and UDP lengths already count the four
    ICRC bytes that are not there yet (the way a builder lays out the lengths)."""
    buf = bytearray(len(frame) + ICRC_LEN)
    buf[:len(frame)] = frame
    udp, end, v6 = _locate(buf, l3_offset)
    if end != len(buf):
        raise HeaderError("RoCEv2", f"UDP datagram ends at byte {end - ICRC_LEN} + ICRC, "
                          f"frame ends at {len(frame)}", udp + 4)
    _ICRC.pack_into(buf, end - ICRC_LEN, _icrc(memoryview(buf), l3_offset, udp, end, v6))
    return bytes(buf)


def check_icrc(frame: bytes | bytearray | memoryview, l3_offset: int = 14) -> bool:
    """True when the stored ICRC is right. Raises :class:`HeaderError` when no ICRC can be
    located (not IP/UDP, truncated, lengths inconsistent), like every decoder here."""
    udp, end, v6 = _locate(frame, l3_offset)
    mv = memoryview(frame)
    stored: int = _ICRC.unpack_from(mv, end - ICRC_LEN)[0]
    return stored == _icrc(mv, l3_offset, udp, end, v6)


# --- whole frames ---------------------------------------------------------------------------

def build_roce_frame(
    src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, sport: int, bth: BTH,
    ext_headers: Sequence[ExtHeader], payload: bytes | bytearray | memoryview = b"", *,
    tos: int = 0, ttl: int = 64, ident: int = 0, strict: bool = True,
) -> bytes:
    """Ethernet/IPv4/UDP(4791, checksum 0)/BTH/ext/payload/pad/ICRC in one buffer.

    ``bth.padcount`` zero bytes are appended after ``payload`` (use :func:`pad_count` to
    choose it); :func:`parse_roce_frame` removes them again. With ``strict`` the extended
    headers must be exactly those :data:`EXT_HEADERS` prescribes for ``bth.opcode``, so
    that every frame built here parses back. The UDP checksum is 0, as RoCEv2 NICs send it
    (the ICRC protects the datagram). No Ethernet padding is added: a 58-byte SEND Only
    or CNP goes out short, which veth and AF_PACKET accept."""
    if strict:
        want = ext_headers_for(bth.opcode)
        got = tuple(type(h) for h in ext_headers)
        if got != want:
            raise HeaderError("RoCEv2", f"opcode {bth.opcode:#04x} takes {[c.__name__ for c in want]}, "
                              f"got {[c.__name__ for c in got]}")
    ext_len = sum(h.size() for h in ext_headers)
    n = len(payload)
    udp_len = 8 + 12 + ext_len + n + bth.padcount + ICRC_LEN
    eth = Ethernet(dst_mac, src_mac, EtherType.IPV4)
    ip = IPv4(src_ip, dst_ip, IpProto.UDP, 20 + udp_len, tos, ident, 0x4000, ttl)
    buf = bytearray(34 + udp_len)
    eth.pack_into(buf, 0)
    ip.pack_into(buf, 14)
    UDP(sport, UdpPort.ROCEV2, udp_len, 0).pack_into(buf, 34)
    off = 42 + bth.pack_into(buf, 42)
    for h in ext_headers:
        off += h.pack_into(buf, off)
    buf[off:off + n] = payload
    end = len(buf)
    _ICRC.pack_into(buf, end - ICRC_LEN, _icrc(memoryview(buf), 14, 34, end, False))
    return bytes(buf)


class _RoceFrameFields(NamedTuple):
    eth: Ethernet
    ip: IPv4
    udp: UDP
    bth: BTH
    reth: RETH | None
    atomic_eth: AtomicETH | None
    aeth: AETH | None
    atomic_ack_eth: AtomicAckETH | None
    payload: memoryview
    payload_offset: int
    icrc: int
    icrc_ok: bool


@record
class RoceFrame(_RoceFrameFields):
    """A parsed Ethernet/IPv4/UDP/RoCEv2 frame.

    ``payload`` is the message data: after the extended headers, before the ``padcount``
    pad bytes and the ICRC. It is a view into the buffer handed to :func:`parse_roce_frame`
    (no copy on the data path); take ``bytes(payload)`` if that buffer will be reused.
    ``icrc`` is the value stored on the wire, ``icrc_ok`` whether it is right. Extended
    headers the opcode does not carry are None."""

    __slots__ = ()

    FIELDS: ClassVar[tuple[str, ...]] = _RoceFrameFields._fields

    @property
    def ext(self) -> tuple[ExtHeader, ...]:
        """The extended headers present, in wire order."""
        return tuple(h for h in (self.reth, self.atomic_eth, self.aeth, self.atomic_ack_eth) if h is not None)


def parse_roce_frame(frame: bytes | bytearray | memoryview, offset: int = 0) -> RoceFrame:
    """Parse a RoCEv2 frame; raise :class:`HeaderError` when it is not one or is malformed.

    A wrong ICRC is not an error here: it is reported in ``icrc_ok`` so that the caller
    counts and drops (a NIC silently drops such packets; a test wants to see them)."""
    uf = parse_udp_frame(frame, offset)
    if uf.udp.dport != UdpPort.ROCEV2:
        raise HeaderError("RoCEv2", f"UDP destination port {uf.udp.dport} is not {UdpPort.ROCEV2:d}",
                          uf.payload_offset - 6)
    bth_off = uf.payload_offset
    end = bth_off + uf.payload_length
    if uf.payload_length < BTH.SIZE + ICRC_LEN:
        raise HeaderError("RoCEv2", f"UDP payload of {uf.payload_length} bytes cannot hold a BTH and an ICRC",
                          bth_off)
    bth = new(BTH, _BTH_UNPACK(frame, bth_off))  # the UDP payload holds it: checked just above
    off = bth_off + 12
    opcode = bth[0]
    reth = atomic_eth = aeth = atomic_ack_eth = None
    for cls in EXT_HEADERS.get(opcode, ()):
        if end - ICRC_LEN - off < cls.SIZE:
            raise HeaderError("RoCEv2", f"opcode {opcode:#04x} needs a {cls.__name__} of {cls.SIZE} bytes, "
                              f"{end - ICRC_LEN - off} left before the ICRC", off)
        if cls is RETH:
            reth = new(RETH, _RETH_UNPACK(frame, off))
        elif cls is AtomicETH:
            atomic_eth = new(AtomicETH, _ATOMIC_ETH_UNPACK(frame, off))
        elif cls is AETH:
            aeth = AETH.from_bytes(frame, off)
        else:
            atomic_ack_eth = new(AtomicAckETH, _ATOMIC_ACK_ETH_UNPACK(frame, off))
        off += cls.SIZE
    padcount = bth[1] >> 4 & 3
    data_end = end - ICRC_LEN - padcount
    if data_end < off:
        raise HeaderError("RoCEv2", f"padcount={padcount} exceeds the {end - ICRC_LEN - off}-byte payload",
                          bth_off + 1)
    mv = memoryview(frame)
    stored = _ICRC.unpack_from(mv, end - ICRC_LEN)[0]
    ok = stored == _icrc(mv, offset + 14, bth_off - 8, end, False)
    return new(RoceFrame, (uf.eth, uf.ip, uf.udp, bth, reth, atomic_eth, aeth, atomic_ack_eth,
                           mv[off:data_end], off, stored, ok))
