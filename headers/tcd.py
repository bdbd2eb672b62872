"""TCD: ternary congestion marks carried in the 2-bit IP ECN field.

TCD ("Congestion Detection in Lossless Networks", SIGCOMM '21) labels each switch egress port *congestion*,
*non-congestion* or *undetermined* (§3.2.1: ON-OFF because PFC pauses it). Packets carry the
worst label they met so the receiver can tell contributors (CE) from flows only slowed by
flow control (UE). The encoding below is not confirmed from the paper; it is our choice,
documented in docs/papers.md ("TCD") and docs/wire-formats.md, and we keep it configurable:

    ECN bits (the low 2 bits of the IPv4 TOS / IPv6 traffic class byte, RFC 3168 §5)
    +-----+-----------------+---------------------------------------------+
    | 00  | Not-ECT         | not ECN/TCD capable: never marked           |
    | 01  | ECT(1)  -> "UE" | crossed an undetermined port (TCD)          |
    | 10  | ECT(0)  -> ECT  | what a TCD sender sets; no mark yet         |
    | 11  | CE              | crossed a congestion port                   |
    +-----+-----------------+---------------------------------------------+

Marks only move up in severity, ECT < UE < CE (docs/wire-formats.md, TCD: a later hop never downgrades
a mark), so a packet arrives carrying the most severe state of any port on its path.
A Not-ECT packet is never marked, mirroring RFC 3168 §5 (a router must not set CE on a
Not-ECT packet: the end points would not understand it). The plain-ECN baseline
(:func:`ecn_mark_tos`) is the RFC 3168 rule that DCQCN's queue-threshold marking applies.

The marks themselves need no header record: they are the IP ECN field, decoded by
:mod:`headers.inet`. This module holds the marking rules and an in-place rewrite of an IPv4
frame with an incremental checksum update (RFC 1624), which is what a switch port does per
packet; and the messages of TCD's end hosts (DCQCN + TCD and TIMELY + TCD, netstack/tcd/dcqcn.py,
netstack/tcd/timely.py and netstack/tcd/np.py), :class:`TcdData`, :class:`TcdCnp` and
:class:`TcdAck`, the records in ``HEADERS``.

Data packet: UDP to port 40300 (``UdpPort.TCD``), sent with IP ECN = ECT(0) (TOS 0x02 with
DSCP 0) so that switches can mark it; a 16-byte header, then zero padding up to the sender's
packet size (the receiver ignores the padding's content)::

     0                   1                   2                   3
     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
    +---------------+---------------+-------------------------------+
    |  version = 1  |flags (FIN,ACK)|             flow              |  0
    +---------------+---------------+-------------------------------+
    |                     seq (per flow, from 0)                    |  4
    +---------------------------------------------------------------+
    |                  send_ts_ns (sender's clock, ns)              |  8
    |                                                               |
    +---------------------------------------------------------------+
    :                        padding ...                            : 16

``flags`` bit 0 is FIN (the last packet of the flow), bit 1 ACK (answer with a :class:`TcdAck`:
the last packet of a TIMELY segment); the other bits are reserved, sent as 0 and refused on
decode. ``send_ts_ns`` is the sender's CLOCK_MONOTONIC (live hosts share one kernel clock) or
the simulator's clock.

CNP: the RoCEv2 Congestion Notification Packet (IBTA RoCEv2 annex A17) as the UDP payload,
32 bytes: a BTH with opcode 0x81 (CNP), P_Key 0xFFFF, BECN = 1, DestQP = the data flow's
``flow``, PSN 0; 16 reserved bytes; the 4-byte ICRC. The annex leaves the 16 bytes reserved;
TCD's use of them is our choice::

    reserved byte 0      kind: 0 = CNP-CE (congestion: the plain CNP a DCQCN NP sends),
                               1 = CNP-UE (only undetermined marks in the interval: TCD)
    reserved bytes 1-2   marked: marked packets of the flow in the interval (u16, big endian,
                         saturating at 65535)
    reserved bytes 3-15  zero (ignored on decode)

Over kernel UDP sockets the kernel picks the IP identification and the UDP checksum, which the
ICRC covers, so a sender cannot compute it: the ICRC is sent as zero and the reaction point
does not check it. The CNP goes (our choice) to the data flow's source IP and source UDP port,
from port 40300, not to 4791: several paced senders on one host each get their own CNPs on
their own socket.

ACK (TIMELY's completion event, our format): a TIMELY sender (netstack/tcd/timely.py, "TIMELY:
RTT-based Congestion Control for the Datacenter", SIGCOMM 2015) sets flag bit 1, ACK, on the last
data packet of each segment; the receiver answers it at once with a 20-byte ACK, from port 40300
to the flow's source address and port, like a CNP. It echoes the packet's ``seq`` and
``send_ts_ns`` (the sender's RTT sample is its arrival time minus the echo) and counts the CE and
UE marks of the flow's packets since the previous ACK (the segment)::

     0                   1                   2                   3
     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
    +---------------+---------------+-------------------------------+
    |  type = 0xAC  |  flags = 0    |             flow              |  0
    +---------------+---------------+-------------------------------+
    |                  seq (the acknowledged packet's)              |  4
    +---------------------------------------------------------------+
    |                  echo_ts_ns (its send_ts_ns)                  |  8
    |                                                               |
    +-------------------------------+-------------------------------+
    |     ce (u16, saturating)      |     ue (u16, saturating)      | 16
    +-------------------------------+-------------------------------+

``type`` 0xAC tells it from a data packet (version 1) and a CNP (BTH opcode 0x81); the flags are
reserved, sent as 0 and refused on decode; ``ue`` is 0 from a receiver that does not run TCD.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from enum import IntEnum, IntFlag
from typing import ClassVar

from .errors import HeaderError, check_bits, need
from .roce import BTH, Opcode

_U16 = struct.Struct("!H")
_DATA = struct.Struct("!BBHIQ")  # version, flags, flow, seq, send_ts_ns
_CNP_TAIL = struct.Struct("!BH13xI")  # kind, marked, 13 reserved bytes, ICRC
_ACK = struct.Struct("!BBHIQHH")  # type, flags, flow, seq, echo_ts_ns, ce, ue

ECN_MASK = 0b11


class Ecn(IntEnum):
    """The four ECN codepoints (RFC 3168 §5)."""

    NOT_ECT = 0b00
    ECT_1 = 0b01
    ECT_0 = 0b10
    CE = 0b11


class PortState(IntEnum):
    """TCD's ternary port state (TCD §3.2.1), valued by severity.

    The paper writes the states as 0 (non-congestion), 1 (congestion) and "/" (undetermined);
    those are labels, not an encoding. Our values order them by marking severity so that
    ``max()`` is the marking rule.
    """

    NON_CONGESTION = 0
    UNDETERMINED = 1
    CONGESTION = 2


@dataclass(frozen=True, slots=True)
class TcdCodepoints:
    """Which ECN codepoint means "ECT, not marked", "undetermined" and "congestion".

    The default is not confirmed from the paper; our choice, documented in docs/papers.md.
    The three must be distinct and none may be Not-ECT (00), because a Not-ECT packet is never
    marked: with 00 as a mark, a marked packet and a non-capable one would look alike. So the
    choices are the permutations of {01, 10, 11}.
    """

    ect: int = Ecn.ECT_0
    ue: int = Ecn.ECT_1
    ce: int = Ecn.CE
    # _table[state][ecn] -> new ecn; precomputed so mark_tos is one index per packet
    _table: tuple[tuple[int, int, int, int], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("ect", "ue", "ce"):
            check_bits("TCD", name, getattr(self, name), 2)
        if Ecn.NOT_ECT in (self.ect, self.ue, self.ce):
            raise HeaderError("TCD", "Not-ECT (00) cannot be a TCD codepoint: Not-ECT packets are never marked")
        if len({self.ect, self.ue, self.ce}) != 3:
            raise HeaderError("TCD", f"codepoints ect={self.ect:02b} ue={self.ue:02b} ce={self.ce:02b} must differ")
        by_severity = (int(self.ect), int(self.ue), int(self.ce))  # index = PortState value
        severity = {by_severity[0]: 0, by_severity[1]: 1, by_severity[2]: 2}
        table = []
        for state in PortState:
            row = [0]  # Not-ECT is never marked
            for ecn in (1, 2, 3):
                row.append(by_severity[max(severity[ecn], state)])
            table.append(tuple(row))
        object.__setattr__(self, "_table", tuple(table))

    def state_of(self, ecn: int) -> PortState | None:
        """The most severe port state an ECN value reports (None for Not-ECT)."""
        if ecn == self.ce:
            return PortState.CONGESTION
        if ecn == self.ue:
            return PortState.UNDETERMINED
        if ecn == self.ect:
            return PortState.NON_CONGESTION
        return None

    def codepoint(self, state: PortState) -> int:
        """The ECN value that reports ``state``."""
        return (self.ect, self.ue, self.ce)[_check_state(state)]


DEFAULT_CODEPOINTS = TcdCodepoints()


def _check_state(state: PortState | int) -> int:
    if type(state) is not PortState and (not isinstance(state, int) or isinstance(state, bool)
                                         or not 0 <= state <= 2):
        raise HeaderError("TCD", f"{state!r} is not a PortState")
    return int(state)


def mark_tos(tos: int, state: PortState | int, codepoints: TcdCodepoints = DEFAULT_CODEPOINTS) -> int:
    """The TOS byte after a port in ``state`` forwards the packet: the max-severity rule.

    Non-congestion leaves the mark alone, undetermined raises ECT to UE, congestion raises
    anything ECN-capable to CE; nothing is ever lowered and Not-ECT is never touched. The DSCP
    bits are preserved.
    """
    check_bits("TCD", "tos", tos, 8)
    return (tos & 0xFC) | codepoints._table[_check_state(state)][tos & ECN_MASK]


def state_from_tos(tos: int, codepoints: TcdCodepoints = DEFAULT_CODEPOINTS) -> PortState | None:
    """The most severe port state the packet met, or None when it is Not-ECT (unmonitored)."""
    check_bits("TCD", "tos", tos, 8)
    return codepoints.state_of(tos & ECN_MASK)


def ecn_mark_tos(tos: int) -> int:
    """Plain ECN marking (RFC 3168 §5), the baseline: CE if ECT(0)/ECT(1), else unchanged.

    The caller decides *whether* to mark (queue above K, RED); this applies the mark.
    """
    check_bits("ECN", "tos", tos, 8)
    return tos | Ecn.CE if tos & ECN_MASK else tos


def checksum_adjust(checksum: int, old_word: int, new_word: int) -> int:
    """RFC 1624 eqn. 3: the Internet checksum after one 16-bit word changes from old to new.

    ``HC' = ~(~HC + ~m + m')`` in one's-complement arithmetic. Unlike RFC 1141's
    ``HC + m - m'`` it never produces 0xFFFF where a full recomputation gives 0x0000, so the
    result always equals a recomputation from scratch (tested against Scapy). An incorrect
    checksum stays incorrect by the same amount: corruption is not laundered by a rewrite.
    """
    s = (~checksum & 0xFFFF) + (~old_word & 0xFFFF) + new_word
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def mark_ipv4_frame_inplace(
    buf: bytearray | memoryview, l3_offset: int, state: PortState | int,
    codepoints: TcdCodepoints = DEFAULT_CODEPOINTS,
) -> bool:
    """Apply TCD marking to the IPv4 header at ``l3_offset`` of a frame, in place.

    Rewrites the ECN bits of the TOS byte and updates the header checksum incrementally
    (RFC 1624), so a switch port never re-encodes or re-sums the header. Returns True when
    the packet changed. Raises :class:`HeaderError` if there is no well-formed IPv4 header
    there (the buffer is then untouched).
    """
    row = codepoints._table[_check_state(state)]
    return _mark_ipv4(buf, l3_offset, row)


def ecn_mark_ipv4_frame_inplace(buf: bytearray | memoryview, l3_offset: int) -> bool:
    """The plain-ECN baseline of :func:`mark_ipv4_frame_inplace` (RFC 3168: ECT -> CE)."""
    return _mark_ipv4(buf, l3_offset, _ECN_ROW)


_ECN_ROW = (0, 3, 3, 3)  # Not-ECT stays; ECT(1), ECT(0) and CE become CE


def _mark_ipv4(buf: bytearray | memoryview, l3_offset: int, row: tuple[int, ...]) -> bool:
    need("IPv4", buf, l3_offset, 20)
    vihl = buf[l3_offset]
    if vihl >> 4 != 4:
        raise HeaderError("IPv4", f"version {vihl >> 4} is not 4", l3_offset)
    if vihl & 15 < 5:
        raise HeaderError("IPv4", f"ihl={vihl & 15} is below 5", l3_offset)
    need("IPv4", buf, l3_offset, (vihl & 15) * 4)
    tos = buf[l3_offset + 1]
    new_tos = (tos & 0xFC) | row[tos & ECN_MASK]
    if new_tos == tos:
        return False
    (csum,) = _U16.unpack_from(buf, l3_offset + 10)
    # the TOS byte is the low half of the header's first 16-bit word (version/IHL, TOS)
    csum = checksum_adjust(csum, vihl << 8 | tos, vihl << 8 | new_tos)
    buf[l3_offset + 1] = new_tos
    _U16.pack_into(buf, l3_offset + 10, csum)
    return True


# --- the end hosts' messages (DCQCN + TCD) ------------------------------------------------------

#: the TCD data header's version byte
TCD_VERSION = 1


class TcdDataFlag(IntFlag):
    FIN = 0x01  # the last packet of the flow: the receiver's flow completion time ends with it
    ACK = 0x02  # the last packet of a TIMELY segment: the receiver answers with a TcdAck at once


#: the flag bits a data packet may set (the others are reserved)
DATA_FLAGS = int(TcdDataFlag.FIN | TcdDataFlag.ACK)
#: the first byte of a TcdAck
ACK_TYPE = 0xAC


class CnpKind(IntEnum):
    """What a CNP reports (our use of the CNP's first reserved byte)."""

    CE = 0  # congestion marks: the plain CNP a DCQCN NP sends
    UE = 1  # only undetermined marks (TCD): the reaction point holds its rate


@dataclass(frozen=True, slots=True)
class TcdData:
    """The header of a TCD data packet (16 bytes); zero padding follows to the packet size."""

    flow: int
    seq: int
    send_ts_ns: int
    flags: int = 0

    SIZE: ClassVar[int] = 16
    VERSION: ClassVar[int] = TCD_VERSION

    def __post_init__(self) -> None:
        check_bits("TcdData", "flow", self.flow, 16)
        check_bits("TcdData", "seq", self.seq, 32)
        check_bits("TcdData", "send_ts_ns", self.send_ts_ns, 64)
        check_bits("TcdData", "flags", self.flags, 8)
        if self.flags & ~DATA_FLAGS:
            raise HeaderError("TcdData", f"flags={self.flags:#04x} sets reserved bits (only FIN, 0x01, and ACK, "
                              "0x02, are defined)")

    @property
    def fin(self) -> bool:
        return bool(self.flags & TcdDataFlag.FIN)

    @property
    def ack(self) -> bool:
        """The sender asks for a :class:`TcdAck` (the last packet of a TIMELY segment)."""
        return bool(self.flags & TcdDataFlag.ACK)

    def size(self) -> int:
        return 16

    def to_bytes(self, size: int = 16) -> bytes:
        """The header, zero-padded to ``size`` bytes (a whole datagram of that size)."""
        if size < 16:
            raise HeaderError("TcdData", f"a datagram of {size} bytes cannot hold the 16-byte header")
        head = _DATA.pack(TCD_VERSION, self.flags, self.flow, self.seq, self.send_ts_ns)
        return head if size == 16 else head + bytes(size - 16)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        need("TcdData", buf, offset, 16)
        _DATA.pack_into(buf, offset, TCD_VERSION, self.flags, self.flow, self.seq, self.send_ts_ns)
        return 16

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> TcdData:
        """Decode the header at ``offset``; whatever follows it (the padding) is not read."""
        need("TcdData", data, offset, 16)
        version, flags, flow, seq, ts = _DATA.unpack_from(data, offset)
        if version != TCD_VERSION:
            raise HeaderError("TcdData", f"version={version} is not {TCD_VERSION}", offset)
        if flags & ~DATA_FLAGS:
            raise HeaderError("TcdData", f"flags={flags:#04x} sets reserved bits", offset + 1)
        return cls(flow, seq, ts, flags)


@dataclass(frozen=True, slots=True)
class TcdCnp:
    """A RoCEv2 CNP (32 bytes: BTH, 16 reserved bytes, ICRC) for data flow ``flow`` (its DestQP),
    with TCD's ``kind`` and ``marked`` count in the reserved bytes; the ICRC is sent as zero and
    not checked (module docstring)."""

    flow: int
    kind: int = CnpKind.CE
    marked: int = 0

    SIZE: ClassVar[int] = 32

    def __post_init__(self) -> None:
        check_bits("TcdCnp", "flow", self.flow, 16)
        check_bits("TcdCnp", "marked", self.marked, 16)
        if type(self.kind) is not CnpKind:
            if isinstance(self.kind, bool) or not isinstance(self.kind, int) or self.kind not in (0, 1):
                raise HeaderError("TcdCnp", f"kind={self.kind!r} is neither CE (0) nor UE (1)")
            object.__setattr__(self, "kind", CnpKind(self.kind))

    def size(self) -> int:
        return 32

    def to_bytes(self) -> bytes:
        buf = bytearray(32)
        self.pack_into(buf)
        return bytes(buf)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        need("TcdCnp", buf, offset, 32)
        BTH(opcode=Opcode.CNP, becn=1, dqpn=self.flow).pack_into(buf, offset)
        _CNP_TAIL.pack_into(buf, offset + 12, self.kind, self.marked, 0)
        return 32

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> TcdCnp:
        """Decode a CNP that fills ``data`` from ``offset`` to its end (a CNP is one datagram:
        shorter or longer is an error). Only the opcode, DestQP and TCD's bytes are checked; the
        other BTH fields, the reserved bytes 3-15 and the ICRC are ignored."""
        need("TcdCnp", data, offset, 32)
        if len(data) - offset != 32:
            raise HeaderError("TcdCnp", f"a CNP is 32 bytes, got {len(data) - offset}", offset)
        opcode = data[offset]
        if opcode != Opcode.CNP:
            raise HeaderError("TcdCnp", f"BTH opcode {opcode:#04x} is not CNP (0x81)", offset)
        if data[offset + 5]:
            raise HeaderError("TcdCnp", f"DestQP {int.from_bytes(data[offset + 5:offset + 8], 'big')} "
                              "is beyond a 16-bit flow", offset + 5)
        (flow,) = _U16.unpack_from(data, offset + 6)
        kind, marked, _icrc = _CNP_TAIL.unpack_from(data, offset + 12)
        if kind > CnpKind.UE:
            raise HeaderError("TcdCnp", f"kind={kind} is neither CE (0) nor UE (1)", offset + 12)
        return cls(flow, CnpKind(kind), marked)


@dataclass(frozen=True, slots=True)
class TcdAck:
    """The receiver's answer to a data packet with the ACK flag (20 bytes, module docstring): the
    packet's ``seq`` and ``send_ts_ns`` echoed, and the CE and UE marks of the flow's packets since
    the previous ACK."""

    flow: int
    seq: int
    echo_ts_ns: int
    ce: int = 0
    ue: int = 0

    SIZE: ClassVar[int] = 20
    TYPE: ClassVar[int] = ACK_TYPE

    def __post_init__(self) -> None:
        check_bits("TcdAck", "flow", self.flow, 16)
        check_bits("TcdAck", "seq", self.seq, 32)
        check_bits("TcdAck", "echo_ts_ns", self.echo_ts_ns, 64)
        check_bits("TcdAck", "ce", self.ce, 16)
        check_bits("TcdAck", "ue", self.ue, 16)

    def size(self) -> int:
        return 20

    def to_bytes(self) -> bytes:
        return _ACK.pack(ACK_TYPE, 0, self.flow, self.seq, self.echo_ts_ns, self.ce, self.ue)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        need("TcdAck", buf, offset, 20)
        _ACK.pack_into(buf, offset, ACK_TYPE, 0, self.flow, self.seq, self.echo_ts_ns, self.ce, self.ue)
        return 20

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> TcdAck:
        """Decode an ACK that fills ``data`` from ``offset`` to its end (one datagram, as a CNP)."""
        need("TcdAck", data, offset, 20)
        if len(data) - offset != 20:
            raise HeaderError("TcdAck", f"an ACK is 20 bytes, got {len(data) - offset}", offset)
        kind, flags, flow, seq, ts, ce, ue = _ACK.unpack_from(data, offset)
        if kind != ACK_TYPE:
            raise HeaderError("TcdAck", f"type {kind:#04x} is not an ACK ({ACK_TYPE:#04x})", offset)
        if flags:
            raise HeaderError("TcdAck", f"flags={flags:#04x} sets reserved bits", offset + 1)
        return cls(flow, seq, ts, ce, ue)


def decode_feedback(data: bytes | bytearray | memoryview) -> TcdCnp | TcdAck:
    """What a receiver sends a sender, by its first byte: a CNP (0x81) or an ACK (0xAC);
    HeaderError for anything else."""
    need("TCD feedback", data, 0, 1)
    if data[0] == ACK_TYPE:
        return TcdAck.from_bytes(data)
    if data[0] == Opcode.CNP:
        return TcdCnp.from_bytes(data)
    raise HeaderError("TCD feedback", f"first byte {data[0]:#04x} is neither a CNP (0x81) nor an ACK (0xac)")


HEADERS = (TcdData, TcdCnp, TcdAck)
