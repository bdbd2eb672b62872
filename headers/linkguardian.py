"""LinkGuardian tags (LinkGuardian paper, §3 and §3.5): the fast codec and sequence-number arithmetic.

Every frame on a protected link carries one 3-byte LinkGuardian tag (6 bytes for a loss
notification) after the Ethernet header, EtherType 0xABCD as in the public P4
implementation. The first two bits of every tag are its type, so a receiver can look
ahead one byte and dispatch (:func:`decode_tag`).

Where we differ from the public P4 code: each tag is followed by a 2-byte ``next_type``,
the EtherType of what follows, exactly like an 802.1Q tag. The P4 program rewrote the
EtherType to IPv4 when it stripped the tag, which loses ARP, IPv6, PFC and stacked tags
(a leading ACK piggybacked on a reverse frame that is itself protected data). With
``next_type`` any payload survives decapsulation. ``next_type == 0`` means "nothing
follows" (dummy frames of §3.2 and explicit-ACK couriers of §3.1); bytes after such a
tag are Ethernet minimum-frame padding and carry no meaning.

Reserved ``pad`` bits are sent as zero and ignored on receipt (the P4 code never reads
them), so a decoded record re-encodes to the consumed bytes with its pad bits cleared.

Type 11 is the sender's internal "buffered copy" header (the Tx-buffer copy kept by
recirculation on Tofino). It never crosses a link, so decoding it raises
:class:`~headers.errors.HeaderError`: a frame carrying it is malformed.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import ClassVar

from .errors import HeaderError, check_bits, need
from .record import field, new, record
from .registry import EtherType
from .serial import W16, W17

# type(1 B incl. flags) | seq_no or leading_ack (2 B) | next_type (2 B)
_TAG = struct.Struct("!BHH")
# the loss notification: leading-ACK tag, then hole_size:8, first_lost_seq:16, next_type:16
_LOSS = struct.Struct("!BHBHH")


class LGType(IntEnum):
    """The 2-bit type common to all tags (public P4: LINKRADAR_HDR_TYPE_*)."""

    DATA = 0b00
    LEADING_ACK = 0b01
    LOSS_NOTIFICATION = 0b10
    BUFFERED = 0b11  # sender-internal Tx-buffer copy; never on a link


#: Sequence numbers are 16 bits (§3.5: N = 65536); the era bit extends them to 17.
SEQ_SPACE = W16.space
_HALF = W16.half
_MASK = W16.mask


def _type_of(header: str, first: int, want: LGType, offset: int) -> None:
    got = first >> 6
    if got != want:
        raise HeaderError(header, f"type bits {got:02b} are not {want.name} ({int(want):02b})", offset)


@record
class LGData(tuple[int, int, int]):
    """Data tag stamped on every protected frame by the sender switch (§3, §3.5).

    ``era`` qualifies ``seq_no`` (§3.5 wrap-around). ``retx`` marks a retransmitted
    copy (§3.4), ``dummy`` a tail-loss probe from the self-replenishing dummy queue
    (§3.2; it carries the *next* seq_no and normally ``next_type == 0``), ``blocking``
    tells the receiver to preserve order (§3.3; 0 = LinkGuardianNB) and ``rx_buffered``
    is the receiver's own mark for frames parked in its reordering buffer (Algorithm 1).

    The tuple is the wire layout (``first_byte``, ``seq_no``, ``next_type``); the flags are
    read from ``first_byte`` (headers/record.py).
    """

    __slots__ = ()

    first_byte: int = field(0)  # type 00 | pad | era | retx | dummy | blocking | rx_buffered (pad kept 0)
    seq_no: int = field(1)
    next_type: int = field(2)

    TYPE: ClassVar[LGType] = LGType.DATA
    SIZE: ClassVar[int] = 5
    FIELDS: ClassVar[tuple[str, ...]] = ("seq_no", "next_type", "era", "retx", "dummy", "blocking", "rx_buffered")

    def __new__(cls, seq_no: int, next_type: int = EtherType.IPV4, era: int = 0, retx: int = 0, dummy: int = 0,
                blocking: int = 1, rx_buffered: int = 0) -> LGData:
        for name, value in (("era", era), ("retx", retx), ("dummy", dummy), ("blocking", blocking),
                            ("rx_buffered", rx_buffered)):
            check_bits("LGData", name, value, 1)
        check_bits("LGData", "seq_no", seq_no, 16)
        check_bits("LGData", "next_type", next_type, 16)
        first = era << 4 | retx << 3 | dummy << 2 | blocking << 1 | rx_buffered
        return new(cls, (first, int(seq_no), int(next_type)))

    @property
    def era(self) -> int:
        return self[0] >> 4 & 1

    @property
    def retx(self) -> int:
        return self[0] >> 3 & 1

    @property
    def dummy(self) -> int:
        return self[0] >> 2 & 1

    @property
    def blocking(self) -> int:
        return self[0] >> 1 & 1

    @property
    def rx_buffered(self) -> int:
        return self[0] & 1

    def size(self) -> int:
        return 5

    def to_bytes(self) -> bytes:
        return _TAG.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        need("LGData", buf, offset, 5)
        _TAG.pack_into(buf, offset, *self)
        return 5

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> LGData:
        need("LGData", data, offset, 5)
        t = _TAG.unpack_from(data, offset)
        first = t[0]
        if first >= 0x20:
            _type_of("LGData", first, LGType.DATA, offset)
            t = (first & 0x1F, t[1], t[2])  # bit 5 is pad: ignored on receipt
        return new(cls, t)


@record
class LGLeadingAck(tuple[int, int, int]):
    """Leading-ACK tag from the receiver switch (§3.1).

    ``leading_ack`` (with its ``era``) tells the sender which frames it may free from its
    Tx buffer. ``piggybacked`` is 1 when the tag rides on a reverse-direction frame
    (``next_type`` = that frame's EtherType) and 0 on an explicit ACK "courier" from the
    self-replenishing low-priority ACK queue, which carries nothing (``next_type == 0``).
    """

    __slots__ = ()

    first_byte: int = field(0)  # type 01 | piggybacked | era | 4 pad bits (kept 0)
    leading_ack: int = field(1)
    next_type: int = field(2)

    TYPE: ClassVar[LGType] = LGType.LEADING_ACK
    SIZE: ClassVar[int] = 5
    FIELDS: ClassVar[tuple[str, ...]] = ("leading_ack", "next_type", "era", "piggybacked")

    def __new__(cls, leading_ack: int, next_type: int = 0, era: int = 0, piggybacked: int = 0) -> LGLeadingAck:
        check_bits("LGLeadingAck", "piggybacked", piggybacked, 1)
        check_bits("LGLeadingAck", "era", era, 1)
        check_bits("LGLeadingAck", "leading_ack", leading_ack, 16)
        check_bits("LGLeadingAck", "next_type", next_type, 16)
        return new(cls, (0x40 | piggybacked << 5 | era << 4, int(leading_ack), int(next_type)))

    @property
    def era(self) -> int:
        return self[0] >> 4 & 1

    @property
    def piggybacked(self) -> int:
        return self[0] >> 5 & 1

    def size(self) -> int:
        return 5

    def to_bytes(self) -> bytes:
        return _TAG.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        need("LGLeadingAck", buf, offset, 5)
        _TAG.pack_into(buf, offset, *self)
        return 5

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> LGLeadingAck:
        need("LGLeadingAck", data, offset, 5)
        t = _TAG.unpack_from(data, offset)
        first = t[0]
        if first & 0xCF != 0x40:
            _type_of("LGLeadingAck", first, LGType.LEADING_ACK, offset)
            t = (first & 0xF0, t[1], t[2])  # low 4 bits are pad: ignored on receipt
        return new(cls, t)


@record
class LGLossNotification(tuple[int, int, int, int, int]):
    """Loss notification: a leading ACK plus the hole it reports (§3, Fig. 5 "Lost3").

    Sent by the receiver at the highest priority when a seq_no gap is seen. The frames
    ``first_lost_seq .. first_lost_seq + hole_size - 1`` (mod 2^16) are to be
    retransmitted. ``era`` qualifies ``leading_ack``; ``first_lost_seq`` carries no era
    of its own (as in the public P4 header) and is resolved by the sender with
    :func:`unwrap_seq` against its own counter, which is always within N/2 of it. A hole of
    size 0 reports nothing and is rejected.
    """

    __slots__ = ()

    first_byte: int = field(0)  # type 10 | piggybacked | era | 4 pad bits (kept 0)
    leading_ack: int = field(1)
    hole_size: int = field(2)
    first_lost_seq: int = field(3)
    next_type: int = field(4)

    TYPE: ClassVar[LGType] = LGType.LOSS_NOTIFICATION
    SIZE: ClassVar[int] = 8
    FIELDS: ClassVar[tuple[str, ...]] = ("leading_ack", "hole_size", "first_lost_seq", "next_type", "era",
                                         "piggybacked")

    def __new__(cls, leading_ack: int, hole_size: int, first_lost_seq: int, next_type: int = 0, era: int = 0,
                piggybacked: int = 0) -> LGLossNotification:
        check_bits("LGLossNotification", "piggybacked", piggybacked, 1)
        check_bits("LGLossNotification", "era", era, 1)
        check_bits("LGLossNotification", "leading_ack", leading_ack, 16)
        check_bits("LGLossNotification", "hole_size", hole_size, 8)
        check_bits("LGLossNotification", "first_lost_seq", first_lost_seq, 16)
        check_bits("LGLossNotification", "next_type", next_type, 16)
        if hole_size == 0:
            raise HeaderError("LGLossNotification", "hole_size=0 reports no loss")
        return new(cls, (0x80 | piggybacked << 5 | era << 4, int(leading_ack), int(hole_size), int(first_lost_seq),
                         int(next_type)))

    @property
    def era(self) -> int:
        return self[0] >> 4 & 1

    @property
    def piggybacked(self) -> int:
        return self[0] >> 5 & 1

    def size(self) -> int:
        return 8

    def to_bytes(self) -> bytes:
        return _LOSS.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        need("LGLossNotification", buf, offset, 8)
        _LOSS.pack_into(buf, offset, *self)
        return 8

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> LGLossNotification:
        need("LGLossNotification", data, offset, 8)
        t = _LOSS.unpack_from(data, offset)
        first = t[0]
        if first & 0xCF != 0x80:
            _type_of("LGLossNotification", first, LGType.LOSS_NOTIFICATION, offset)
            t = (first & 0xF0, *t[1:])  # low 4 bits are pad: ignored on receipt
        if t[2] == 0:
            raise HeaderError("LGLossNotification", "hole_size=0 reports no loss", offset + 3)
        return new(cls, t)


LGTag = LGData | LGLeadingAck | LGLossNotification

HEADERS = (LGData, LGLeadingAck, LGLossNotification)

_BY_TYPE: tuple[type[LGData] | type[LGLeadingAck] | type[LGLossNotification], ...] = HEADERS
_TAG_UNPACK = _TAG.unpack_from
_LOSS_UNPACK = _LOSS.unpack_from


def peek_type(data: bytes | bytearray | memoryview, offset: int = 0) -> LGType:
    """The type of the tag at ``offset`` without decoding it (one-byte lookahead)."""
    need("LinkGuardian", data, offset, 1)
    return LGType(data[offset] >> 6)


def decode_tag(data: bytes | bytearray | memoryview, offset: int = 0) -> LGTag:
    """Decode whichever tag sits at ``offset``, dispatching on its 2 type bits.

    The tag's ``size()`` says where the next header (of EtherType ``next_type``) starts.
    """
    # the common case inline (one call, one unpack: issue 19); anything unusual (pad bits
    # set, a short buffer, type 11, hole_size 0) goes the long way, which words the error
    if offset >= 0 and len(data) - offset >= 5:
        first = data[offset]
        if first < 0x20:
            return new(LGData, _TAG_UNPACK(data, offset))
        if first & 0xCF == 0x40:
            return new(LGLeadingAck, _TAG_UNPACK(data, offset))
        if first & 0xCF == 0x80 and len(data) - offset >= 8:
            t = _LOSS_UNPACK(data, offset)
            if t[2]:
                return new(LGLossNotification, t)
    need("LinkGuardian", data, offset, 1)
    kind = data[offset] >> 6
    if kind == LGType.BUFFERED:
        raise HeaderError("LinkGuardian", "type 11 (buffered copy) is sender-internal, never on a link", offset)
    return _BY_TYPE[kind].from_bytes(data, offset)


# ---------------------------------------------------------------------------------------
# The fast path: what the switch engines write and walk per frame, without records or
# validation. The same layouts as the records above, in one place with them.
# ---------------------------------------------------------------------------------------

#: EtherType 0xABCD as an int (compared with ``frame[12] << 8 | frame[13]``)
ETHERTYPE = int(EtherType.LINKGUARDIAN)
#: the front of every tag as inserted after the Ethernet addresses: EtherType, the
#: type/flags byte and seq_no (or leading_ack). The tag's next_type is the EtherType that
#: was in the frame already, right after the insertion point.
TAG_HEAD = struct.Struct("!HBH")
#: a whole loss notification after the Ethernet addresses: EtherType, type/era byte,
#: leading_ack, hole_size, first_lost_seq, next_type
LOSS_HEAD = struct.Struct("!HBHBHH")
#: sizes of the tags themselves (first byte to next_type included)
TAG_SIZE = 5
LOSS_TAG_SIZE = 8

#: flag bits of a data tag's first byte (:class:`LGData`)
DATA_ERA = 0x10
DATA_RETX = 0x08
DATA_DUMMY = 0x04
DATA_BLOCKING = 0x02
DATA_RX_BUFFERED = 0x01
#: first bytes of the receiver's tags (era bit to be or-ed in): a leading ACK on an explicit
#: courier, one piggybacked on reverse traffic, a loss notification (:class:`LGLeadingAck`,
#: :class:`LGLossNotification`)
LACK_EXPLICIT = LGType.LEADING_ACK << 6
LACK_PIGGYBACKED_FLAG = 0x20
LACK_PIGGYBACKED = LACK_EXPLICIT | LACK_PIGGYBACKED_FLAG
LOSS_NOTIFICATION = LGType.LOSS_NOTIFICATION << 6


def era_flag(counter: int) -> int:
    """The era bit of absolute counter ``counter``, in its place in a tag's first byte (0x10)."""
    return counter >> 12 & DATA_ERA


def find_tag(frame: bytes | bytearray | memoryview, want: int, offset: int = 14) -> int | None:
    """Offset of the first tag of type ``want`` in the tag stack starting at ``offset`` (just
    after the EtherType 0xABCD), or None if the stack ends without one. HeaderError on a
    truncated tag or a sender-internal type 11 tag."""
    o = offset
    n = len(frame)
    while True:
        if n < o + TAG_SIZE:
            raise HeaderError("LinkGuardian", "truncated tag", o)
        kind = frame[o] >> 6
        if kind == want:
            return o
        if kind == LGType.BUFFERED:
            raise HeaderError("LinkGuardian", "type 11 (buffered copy) is sender-internal, never on a link", o)
        size = LOSS_TAG_SIZE if kind == LGType.LOSS_NOTIFICATION else TAG_SIZE
        if n < o + size:
            raise HeaderError("LinkGuardian", "truncated tag", o)
        if frame[o + size - 2] << 8 | frame[o + size - 1] != ETHERTYPE:
            return None
        o += size


# ---------------------------------------------------------------------------------------
# Sequence numbers with the era bit (§3.5 "Handling seqNo Wrap-around").
#
# A (era, seq) pair is a 17-bit view of an absolute, ever-increasing frame counter:
# seq = counter mod N and era = (counter div N) mod 2. These helpers are meant for the data
# path, so they trust their arguments (era in {0, 1}, seq in 0..N-1) and do not validate.
# ---------------------------------------------------------------------------------------


def next_seq(era: int, seq: int) -> tuple[int, int]:
    """The (era, seq) after ``(era, seq)``: the era toggles each time seq wraps to 0."""
    if seq == _MASK:
        return era ^ 1, 0
    return era, seq + 1


def seq_compare(a_era: int, a_seq: int, b_era: int, b_seq: int) -> int:
    """-1, 0 or 1 as ``a`` is before, equal to or after ``b``.

    §3.5: two seq_nos of the same era compare directly; of different eras, subtract N/2
    from both (mod N) first. Correct whenever the two are not more than N/2 apart, which
    the Tx buffer and reordering buffer sizes guarantee by a wide margin.
    """
    if a_era != b_era:
        a_seq = (a_seq - _HALF) & _MASK
        b_seq = (b_seq - _HALF) & _MASK
    return (a_seq > b_seq) - (a_seq < b_seq)


def seq_lt(a_era: int, a_seq: int, b_era: int, b_seq: int) -> bool:
    """True when ``a`` comes before ``b`` (same precondition as :func:`seq_compare`)."""
    if a_era != b_era:
        return (a_seq - _HALF) & _MASK < (b_seq - _HALF) & _MASK
    return a_seq < b_seq


def seq_distance(from_era: int, from_seq: int, to_era: int, to_seq: int) -> int:
    """How many frames ``to`` is ahead of ``from`` (negative when it is behind).

    The receiver's hole size is ``seq_distance(expected, received)``. Computed on the
    17-bit (era, seq) value (:data:`headers.serial.W17`), so it is exact whenever the two are
    less than N apart; exactly N apart reads as behind.
    """
    return W17.diff(to_era << 16 | to_seq, from_era << 16 | from_seq)


def wrap(counter: int) -> tuple[int, int]:
    """The (era, seq) stamped for absolute frame counter ``counter``."""
    return counter >> 16 & 1, counter & _MASK


#: ``unwrap(era, seq, reference)``: the absolute counter nearest to ``reference`` whose
#: (era, seq) is the one given: the 17-bit serial number era:seq unwrapped (headers/serial.py).
#: Exact whenever the true counter is less than N from ``reference`` (for example the sender's
#: next counter when it resolves a leading ACK or ``first_lost_seq``); exactly N below or above
#: reads as below. Near the start of time the answer can be negative: a value from "before
#: counter 0". Bound to W17's own function, not wrapped, as the receiver calls it on every frame.
unwrap = W17.unwrap_era

#: ``unwrap_seq(seq, reference)``: the absolute counter nearest to ``reference`` whose 16-bit
#: seq_no is ``seq`` (no era), for fields that carry no era of their own, such as a loss
#: notification's ``first_lost_seq``. Exact whenever the true counter lies from N/2 below to
#: N/2 - 1 above ``reference``.
unwrap_seq = W16.unwrap
