"""RoCEv2 on the data path at fixed offsets: prebuilt frame templates, the ICRC continued from a
precomputed prefix, and a one-``unpack`` read of the common Ethernet/IPv4/UDP/BTH header.

Why (profiled with ``netstack bench dta --only inproc``): building a request with the ``headers``
records (:func:`headers.roce.build_roce_frame`) validates a dozen dataclass fields, packs the
IPv4 header and computes its checksum, copies and masks the headers for the ICRC, for every
frame: about half of what the translator spent per frame. Everything in a DTA request except the
PSN, the address, the length and the payload is fixed per queue pair, so a :class:`RoceTemplate`
builds Ethernet/IPv4/UDP and the first eight bytes of the BTH once per (opcode, length) and
patches only the rest. The ICRC (IBTA vol. 1, RoCEv2 annex A17) is a CRC32 over the pseudo LRH,
the masked IP/UDP/BTH headers and the transport payload, in that order; the masked headers up to
the BTH's destination QP are the same for every frame of one length, so their CRC state is
cached and the frame's own bytes continue it (``zlib.crc32(rest, state)``).

The frames are byte-for-byte those :func:`headers.roce.build_roce_frame` builds (IPv4 without
options, identification 0, DF, TTL 64, TOS 0, UDP checksum 0; tests/dta/test_rocewire.py checks
it), so a reader of either kind sees no difference. Sans-IO: pure functions of their arguments.

The reader side, :data:`HEAD` / :func:`icrc_ok`, only covers the common case (IPv4 without
options, nothing stripped); callers fall back to the ``headers`` decoders for anything else, so
every refusal keeps the wording and the counter it had.
"""

from __future__ import annotations

import struct
import zlib

#: CRC32 state after the pseudo LRH (RoCEv2 has no LRH: the annex puts eight 0xFF bytes there).
LRH_CRC = zlib.crc32(b"\xff" * 8)
ROCEV2_PORT = 4791
ICRC_LEN = 4
#: Offsets in an Ethernet/IPv4 (no options)/UDP/RoCEv2 frame.
BTH_OFF = 42
EXT_OFF = 54

#: The header of a RoCEv2 frame up to the end of the BTH, in one unpack: source MAC, EtherType,
#: version|IHL, total length, protocol, source IP, destination IP, UDP source port, destination
#: port, length, BTH opcode, se|m|pad|tver, P_Key, resv8a|destination QP, ackreq|resv7|PSN.
HEAD = struct.Struct("!6x6sHBxH4xxB2x4s4sHHH2xBBHII")
#: The PSN word of the BTH, then a RETH (virtual address, rkey, DMA length): a WRITE's variable part.
WRITE_TAIL = struct.Struct("!IQII")
#: The PSN word, then an AtomicETH (virtual address, rkey, swap/add, compare).
ATOMIC_TAIL = struct.Struct("!IQIQQ")
#: The PSN word, then an AETH (syndrome << 24 | MSN): an ACKNOWLEDGE's variable part.
ACK_TAIL = struct.Struct("!II")
#: ... and an AtomicAckETH (the original value) for an ATOMIC ACKNOWLEDGE.
ATOMIC_ACK_TAIL = struct.Struct("!IIQ")
RETH = struct.Struct("!QII")
ATOMIC_ETH = struct.Struct("!QIQQ")
AETH = struct.Struct("!I")
ATOMIC_ACK_ETH = struct.Struct("!Q")
ICRC = struct.Struct("<I")  # on the wire least significant byte first (as scapy.contrib.roce)

_PAD = (b"", b"\0", b"\0\0", b"\0\0\0")


def ipv4_checksum(header: bytes | bytearray) -> int:
    """RFC 1071 one's-complement sum of a 20-byte IPv4 header (checksum field zero), to store."""
    total = sum(struct.unpack("!10H", header))
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


class RoceTemplate:
    """The fixed part of every RoCEv2 frame one end sends to one peer: Ethernet (``src_mac`` to
    ``dst_mac``), IPv4 (``src_ip`` to ``dst_ip``), UDP (``sport`` to ``dport``) and a BTH with
    MigReq 1, P_Key 0xFFFF and destination QP ``dqpn``.

    :meth:`frame` appends the PSN word, the extended headers and payload the caller packed, the
    pad and the ICRC. Per (opcode, length, pad) the header bytes and the ICRC state after them
    are computed once (a few distinct lengths per QP in practice)."""

    __slots__ = ("_dport", "_dqpn", "_eth", "_heads", "_ip_src_dst", "_sport")

    def __init__(self, src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, sport: int, dqpn: int,
                 dport: int = ROCEV2_PORT) -> None:
        if len(src_mac) != 6 or len(dst_mac) != 6 or len(src_ip) != 4 or len(dst_ip) != 4:
            raise ValueError("MACs must be 6 bytes and IPs 4 bytes")
        if not 0 <= sport <= 0xFFFF or not 0 <= dport <= 0xFFFF or not 0 <= dqpn <= 0xFFFFFF:
            raise ValueError("ports must be 16-bit and the QPN 24-bit")
        self._eth = bytes(dst_mac) + bytes(src_mac) + b"\x08\x00"
        self._ip_src_dst = bytes(src_ip) + bytes(dst_ip)
        self._sport = sport
        self._dport = dport
        self._dqpn = dqpn
        self._heads: dict[tuple[int, int, int], tuple[bytes, int]] = {}

    def _head(self, opcode: int, body_len: int, pad: int) -> tuple[bytes, int]:
        """Ethernet/IPv4/UDP and BTH bytes 0-7 for this shape, and the ICRC state after them."""
        udp_len = 8 + 12 + body_len + pad + ICRC_LEN
        ip = bytearray(struct.pack("!BBHHHBBH", 0x45, 0, 20 + udp_len, 0, 0x4000, 64, 17, 0) + self._ip_src_dst)
        struct.pack_into("!H", ip, 10, ipv4_checksum(ip))
        udp = struct.pack("!HHHH", self._sport, self._dport, udp_len, 0)
        bth = struct.pack("!BBHI", opcode, 0x40 | pad << 4, 0xFFFF, self._dqpn)
        # the ICRC's view: TOS, TTL and the IP checksum, the UDP checksum and resv8a as ones
        masked = bytearray(ip + udp + bth)
        masked[1] = masked[8] = masked[10] = masked[11] = 0xFF
        masked[26] = masked[27] = 0xFF
        masked[32] = 0xFF
        entry = (self._eth + bytes(ip) + udp + bth, zlib.crc32(masked, LRH_CRC))
        if len(self._heads) < 256:  # a handful of shapes per QP; bounded whatever the payloads
            self._heads[(opcode, body_len, pad)] = entry
        return entry

    def frame(self, opcode: int, psn_word: int, ext: bytes, payload: bytes = b"") -> bytes:
        """The whole frame: ``psn_word`` is ``ackreq << 31 | psn``; ``ext`` the packed extended
        headers; ``payload`` is padded to a multiple of four (BTH PadCnt)."""
        pad = -len(payload) & 3
        body_len = len(ext) + len(payload)
        head = self._heads.get((opcode, body_len, pad))
        if head is None:
            head = self._head(opcode, body_len, pad)
        rest = psn_word.to_bytes(4, "big") + ext + payload + _PAD[pad]
        return head[0] + rest + ICRC.pack(zlib.crc32(rest, head[1]))

    def packed(self, opcode: int, tail: bytes, payload: bytes = b"") -> bytes:
        """As :meth:`frame`, with the PSN word and the extended headers already packed together in
        ``tail`` (:data:`WRITE_TAIL`, :data:`ATOMIC_TAIL`, :data:`ACK_TAIL`...): one pack per frame."""
        pad = -len(payload) & 3
        body_len = len(tail) - 4 + len(payload)
        head = self._heads.get((opcode, body_len, pad))
        if head is None:
            head = self._head(opcode, body_len, pad)
        rest = tail + payload + _PAD[pad] if payload else tail
        return head[0] + rest + ICRC.pack(zlib.crc32(rest, head[1]))


def icrc_ok(frame: bytes | bytearray | memoryview, end: int) -> bool:
    """Whether the ICRC in ``frame[end - 4:end]`` is right, for an Ethernet/IPv4 frame whose IPv4
    header has no options (the caller checked that, and that ``end`` is the UDP datagram's end)."""
    masked = bytearray(frame[14:EXT_OFF])  # IPv4, UDP, BTH: the fields routers may change as ones
    masked[1] = masked[8] = masked[10] = masked[11] = 0xFF
    masked[26] = masked[27] = 0xFF
    masked[32] = 0xFF
    crc = zlib.crc32(masked, LRH_CRC)
    crc = zlib.crc32(memoryview(frame)[EXT_OFF:end - ICRC_LEN], crc)
    stored: int = ICRC.unpack_from(frame, end - ICRC_LEN)[0]
    return stored == crc
