"""T/C-SACK: the data header and the compact selective ACK of the time/count ACK scheme.

The T/C-SACK draft (draft-chen-tsvwg-updated-ack-00) makes the sender window-less and rate-paced; the
receiver orders packets in its buffer and sends an ACK "when the preset time T or the
accumulated number of received packets N is reached", listing "the received packet
sequence number"; the sender resends what the ACK shows missing, and resends its last
packet when no ACK arrives within 2T. The draft's "A New ACK Packet Format" section is
"TBD", so the format below is ours: a compact one with a cumulative ack, SACK ranges, an ACK
sequence number and an echoed timestamp (docs/tcsack.md, docs/wire-formats.md "T/C-SACK"). Both messages ride on
UDP port 40200 and start with a ``kind`` byte so one socket can carry both.

Sequence numbers count *packets* (the draft speaks of packet sequence numbers), 32 bits,
compared with serial-number arithmetic (RFC 1982) so a long transfer may wrap.

Data (12 bytes, then the payload)::

     0                   1                   2                   3
     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
    +---------------+---------------+-------------------------------+
    |   kind = 1    |     flags     |            flow_id            |  0
    +---------------+---------------+-------------------------------+
    |                              seq                              |  4
    +---------------------------------------------------------------+
    |                   tsval (us, mod 2^32)                        |  8
    +---------------------------------------------------------------+
    |                           payload ...                         : 12

ACK (20 bytes, then ``n_blocks`` SACK blocks of 8 bytes)::

     0                   1                   2                   3
     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
    +---------------+---------------+-------------------------------+
    |   kind = 2    |     flags     |            flow_id            |  0
    +---------------+---------------+-------------------------------+
    |                            ack_seq                            |  4
    +---------------------------------------------------------------+
    |                            cum_ack                            |  8
    +---------------------------------------------------------------+
    |                             tsecr                             | 12
    +---------------+---------------+-------------------------------+
    |   n_blocks    |   reserved    |        ack_delay (us)         | 16
    +---------------+---------------+-------------------------------+
    |                       block[0].start                          | 20
    +---------------------------------------------------------------+
    |                       block[0].end                            | 24
    +---------------------------------------------------------------+
    :                 ... block[n_blocks - 1] ...                   :

``docs/wire-formats.md`` (T/C-SACK section) explains each field and the choices.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from enum import IntEnum, IntFlag
from operator import lt as _lt
from typing import ClassVar

from .errors import HeaderError, check_bits, need
from .record import field, new, record
from .serial import W32

_DATA = struct.Struct("!BBHII")
_ACK = struct.Struct("!BBHIIIBBH")
_BLOCK = struct.Struct("!II")

SEQ_BITS = W32.bits
SEQ_MOD = W32.space
SEQ_MASK = W32.mask
#: Serial-number comparisons are valid for values less than this far apart (RFC 1982).
SEQ_HALF = W32.half

#: Bytes in front of the ACK on the wire: IPv4 (no options) + UDP.
IPV4_UDP_OVERHEAD = 20 + 8


class TcsKind(IntEnum):
    DATA = 1
    ACK = 2


class TcsDataFlag(IntFlag):
    RETX = 0x01  # a retransmission of a packet an ACK reported missing
    LAST = 0x02  # the last packet of the transfer: lets the receiver report FIN_SEEN
    PROBE = 0x04  # the "resend the last packet when no ACK within 2T" copy (T/C-SACK draft §2)


class TcsAckFlag(IntFlag):
    TRIGGER_COUNT = 0x01  # sent because N packets arrived; clear: because T elapsed (T/C-SACK draft §2)
    FIN_SEEN = 0x02  # the receiver has seen the packet flagged LAST
    NAK = 0x04  # go-back-N baseline only (RoCE RC's "NAK sequence error"): resend from cum_ack


# --- serial-number arithmetic on 32-bit sequence numbers (RFC 1982): headers/serial.py's W32 ---
# (the half-way point is behind: seq_diff gives [-2^31, 2^31), exact when |a - b| < 2^31;
# seq_lt and seq_gt hold both ways for two numbers exactly 2^31 apart)

seq_add = W32.add
seq_diff = W32.diff
seq_lt = W32.lt
seq_le = W32.le
seq_gt = W32.gt
seq_ge = W32.ge
seq_max = W32.later
seq_min = W32.earlier


def max_blocks(mtu: int = 1500, overhead: int = IPV4_UDP_OVERHEAD) -> int:
    """How many SACK blocks fit in one ACK datagram on a link of ``mtu`` bytes.

    ``overhead`` is the IP + UDP header bytes (48 for IPv6 + UDP). The count is capped at 255,
    what the 8-bit ``n_blocks`` field can say.
    """
    room = mtu - overhead - TcsAck.SIZE
    if room < 0:
        raise HeaderError("TcsAck", f"an MTU of {mtu} cannot carry an ACK ({overhead + TcsAck.SIZE} bytes minimum)")
    return min(255, room // _BLOCK.size)


@record
class TcsData(tuple[int, int, int, int, int]):
    """T/C-SACK data header; the payload follows it up to the end of the UDP datagram.

    ``tsval`` is the sender clock in microseconds mod 2^32, echoed as ``tsecr`` for RTT
    samples. The tuple is the wire layout, ``kind`` included (headers/record.py).
    """

    __slots__ = ()

    kind: int = field(0)  # always TcsKind.DATA
    flags: int = field(1)
    flow_id: int = field(2)
    seq: int = field(3)
    tsval: int = field(4)

    KIND: ClassVar[int] = TcsKind.DATA
    SIZE: ClassVar[int] = 12
    FIELDS: ClassVar[tuple[str, ...]] = ("flow_id", "seq", "tsval", "flags")

    def __new__(cls, flow_id: int, seq: int, tsval: int = 0, flags: int = 0) -> TcsData:
        check_bits("TcsData", "flow_id", flow_id, 16)
        check_bits("TcsData", "seq", seq, 32)
        check_bits("TcsData", "tsval", tsval, 32)
        check_bits("TcsData", "flags", flags, 8)
        return new(cls, (1, flags, flow_id, seq, tsval))

    def size(self) -> int:
        return 12

    def to_bytes(self) -> bytes:
        return _DATA.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        need("TcsData", buf, offset, 12)
        _DATA.pack_into(buf, offset, *self)
        return 12

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> TcsData:
        need("TcsData", data, offset, 12)
        t = _DATA.unpack_from(data, offset)
        if t[0] != TcsKind.DATA:
            raise HeaderError("TcsData", f"kind={t[0]} is not DATA (1)", offset)
        return new(cls, t)


Block = tuple[int, int]


@record
class TcsAck(tuple[int, int, int, int, tuple[Block, ...], int, int]):
    """T/C-SACK acknowledgement: a cumulative point plus SACK blocks above it.

    Every ``seq`` before ``cum_ack`` has arrived (so ``cum_ack`` itself has not).
    ``blocks`` are half-open ``[start, end)`` runs of received sequence numbers above
    ``cum_ack``, ascending, non-empty, non-overlapping and non-adjacent (a gap of at least one
    missing packet between two blocks), all within 2^31 of ``cum_ack``. Everything between
    ``cum_ack`` and the end of the last block that no block covers is missing (:meth:`holes`);
    nothing is said about sequence numbers beyond the last block.

    ``ack_seq`` numbers the receiver's ACKs so the sender can drop a stale ACK that arrives
    after a newer one. ``tsecr`` echoes ``tsval`` of the most recently arrived data packet and
    ``ack_delay`` is how long the receiver held it before this ACK (microseconds, saturating at
    65535): the ACK is deliberately delayed by up to T, so the sender's RTT sample is
    ``now - tsecr - ack_delay``.
    """

    __slots__ = ()

    flow_id: int = field(0)
    ack_seq: int = field(1)
    cum_ack: int = field(2)
    tsecr: int = field(3)
    blocks: tuple[Block, ...] = field(4)
    flags: int = field(5)
    ack_delay: int = field(6)

    KIND: ClassVar[int] = TcsKind.ACK
    SIZE: ClassVar[int] = 20  # the fixed part; each block adds 8
    FIELDS: ClassVar[tuple[str, ...]] = ("flow_id", "ack_seq", "cum_ack", "tsecr", "blocks", "flags", "ack_delay")

    def __new__(cls, flow_id: int, ack_seq: int, cum_ack: int, tsecr: int = 0, blocks: Iterable[Block] = (),
                flags: int = 0, ack_delay: int = 0) -> TcsAck:
        check_bits("TcsAck", "flow_id", flow_id, 16)
        check_bits("TcsAck", "ack_seq", ack_seq, 32)
        check_bits("TcsAck", "cum_ack", cum_ack, 32)
        check_bits("TcsAck", "tsecr", tsecr, 32)
        check_bits("TcsAck", "flags", flags, 8)
        check_bits("TcsAck", "ack_delay", ack_delay, 16)
        pairs = _normalise_blocks(blocks)
        _check_blocks(cum_ack, pairs)
        return new(cls, (flow_id, ack_seq, cum_ack, tsecr, pairs, flags, ack_delay))

    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    def size(self) -> int:
        return 20 + 8 * len(self.blocks)

    def to_bytes(self) -> bytes:
        buf = bytearray(20 + 8 * len(self.blocks))
        self.pack_into(buf)
        return bytes(buf)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        n = 20 + 8 * len(self.blocks)
        need("TcsAck", buf, offset, n)
        _ACK.pack_into(buf, offset, 2, self.flags, self.flow_id, self.ack_seq, self.cum_ack, self.tsecr,
                       len(self.blocks), 0, self.ack_delay)
        pos = offset + 20
        for start, end in self.blocks:
            _BLOCK.pack_into(buf, pos, start, end)
            pos += 8
        return n

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None) -> TcsAck:
        """Decode an ACK at ``offset``; its blocks must end at or before ``end`` (default: the buffer end).

        The ACK is self-delimiting (``n_blocks``), so bytes after its last block are not read.
        The reserved byte is ignored on decode (sent as zero), as TCP treats reserved bits.
        """
        limit = _limit("TcsAck", data, offset, end)
        if offset < 0 or limit - offset < 20:
            raise HeaderError("TcsAck", f"truncated: need 20 bytes, have {max(0, limit - offset)}", offset)
        n = data[offset + 16]
        if n > MAX_BLOCKS:
            raise HeaderError("TcsAck", f"n_blocks={n} exceeds the {MAX_BLOCKS} that fit a 1500-byte MTU", offset + 16)
        if limit - offset < 20 + 8 * n:
            raise HeaderError("TcsAck", f"truncated: {n} blocks need {20 + 8 * n} bytes, have {limit - offset}",
                              offset)
        t = _ACK_N[n](data, offset)
        if t[0] != TcsKind.ACK:
            raise HeaderError("TcsAck", f"kind={t[0]} is not ACK (2)", offset)
        return _ack_of(t, n)

    def holes(self) -> tuple[Block, ...]:
        """The missing runs ``[start, end)`` this ACK reports: the gaps below its last block."""
        out = []
        nxt = self.cum_ack
        for start, end in self.blocks:
            out.append((nxt, start))
            nxt = end
        return tuple(out)

    def acked(self, seq: int) -> bool:
        """True when this ACK says ``seq`` has arrived (``seq`` within 2^31 of ``cum_ack``)."""
        rel = (seq - self.cum_ack) & SEQ_MASK
        if rel >= SEQ_HALF:
            return True  # before cum_ack
        for start, end in self.blocks:
            if rel < (start - self.cum_ack) & SEQ_MASK:
                return False
            if rel < (end - self.cum_ack) & SEQ_MASK:
                return True
        return False


#: SACK blocks an ACK may carry: what fits a 1500-byte MTU over IPv4/UDP (181). Enforced on
#: encode and decode so every ACK is a single unfragmented datagram.
MAX_BLOCKS = max_blocks(1500)

#: one precompiled struct per block count: the fixed part and every block in one unpack
_ACK_N = tuple(struct.Struct(f"!BBHIIIBBH{2 * n}I").unpack_from for n in range(MAX_BLOCKS + 1))


def _ack_of(t: tuple[int, ...], n: int) -> TcsAck:
    """The ACK record from the unpacked fixed part and ``n`` blocks (``t[9:]``), validating the
    blocks (their order relative to ``cum_ack`` is what the bytes can get wrong)."""
    cum = t[4]
    if n:
        words = t[9:]
        # fast verdict: as plain integers the 2n block bounds strictly ascend from above cum_ack to
        # below cum_ack + 2^31, which is _check_blocks' wrap-aware chain without a wrap; otherwise
        # (a wrap, or a bad ACK) the exact check decides and words the error
        if not (cum < words[0] and words[-1] - cum < SEQ_HALF and all(map(_lt, words, words[1:]))):
            _check_blocks(cum, tuple(zip(words[::2], words[1::2], strict=True)))
        it = iter(words)
        blocks: tuple[Block, ...] = tuple(zip(it, it, strict=False))
    else:
        blocks = ()
    return new(TcsAck, (t[2], t[3], cum, t[5], blocks, t[1], t[8]))


def _normalise_blocks(blocks: object) -> tuple[tuple[int, ...], ...]:
    """Accept any iterable of pairs (lists from JSON, say) but store tuples: the record stays
    hashable and compares equal to a decoded one."""
    if type(blocks) is tuple and all(type(b) is tuple for b in blocks):
        return blocks
    if not isinstance(blocks, Iterable):
        raise HeaderError("TcsAck", f"blocks must be a sequence of (start, end), got {type(blocks).__name__}")
    norm: list[tuple[int, ...]] = []
    for i, b in enumerate(blocks):
        if not isinstance(b, tuple | list):
            raise HeaderError("TcsAck", f"block {i} is not a (start, end) pair: {b!r}")
        norm.append(tuple(b))
    return tuple(norm)


def _check_blocks(cum_ack: int, blocks: tuple[tuple[int, ...], ...]) -> None:
    # Work in offsets from cum_ack so the checks are wrap-aware: every start and end must lie
    # strictly ascending in (0, 2^31) relative to cum_ack. That one chain says: above cum_ack
    # (a block at cum_ack would mean cum_ack arrived), non-empty, ascending, non-overlapping
    # and non-adjacent (end_i < start_i+1: a gap of at least one packet), all comparable.
    if len(blocks) > MAX_BLOCKS:
        raise HeaderError("TcsAck", f"{len(blocks)} blocks exceed the maximum of {MAX_BLOCKS}")
    prev = 0
    for i, block in enumerate(blocks):
        if len(block) != 2:
            raise HeaderError("TcsAck", f"block {i} is not a (start, end) pair: {block!r}")
        start, end = block
        if not (type(start) is int and type(end) is int and 0 <= start <= SEQ_MASK and 0 <= end <= SEQ_MASK):
            check_bits("TcsAck", f"block[{i}].start", start, 32)  # the slow path, for the error message
            check_bits("TcsAck", f"block[{i}].end", end, 32)
        rs = (start - cum_ack) & SEQ_MASK
        if rs == 0 or rs >= SEQ_HALF:
            raise HeaderError("TcsAck", f"block {i} [{start}, {end}) starts at or below cum_ack={cum_ack}")
        if rs <= prev:
            raise HeaderError("TcsAck", f"block {i} [{start}, {end}) overlaps or touches the previous block")
        re_ = (end - cum_ack) & SEQ_MASK
        if re_ <= rs:
            raise HeaderError("TcsAck", f"block {i} [{start}, {end}) is empty or inverted")
        if re_ >= SEQ_HALF:
            raise HeaderError("TcsAck", f"block {i} [{start}, {end}) reaches 2^31 or more beyond cum_ack={cum_ack}")
        prev = re_


def _limit(header: str, data: bytes | bytearray | memoryview, offset: int, end: int | None) -> int:
    n = len(data)
    if end is None:
        return n
    if not isinstance(end, int) or not 0 <= end <= n:
        raise HeaderError(header, f"end={end!r} outside the buffer of {n} bytes", offset)
    return end


def decode_tcsack(data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None) -> TcsData | TcsAck:
    """Decode the T/C-SACK message at ``offset``, dispatching on its ``kind`` byte.

    ``end`` is the end of the UDP payload; a data packet's payload is ``data[offset + 12:end]``.
    """
    limit = len(data) if end is None else _limit("T/C-SACK", data, offset, end)
    # the well-formed cases inline, one unpack each (issue 19); the rest goes the long way below
    if offset >= 0 and limit - offset >= 12:
        kind = data[offset]
        if kind == 1:
            return new(TcsData, _DATA_UNPACK(data, offset))
        if kind == 2 and limit - offset >= 20:
            n = data[offset + 16]
            if n <= MAX_BLOCKS and limit - offset >= 20 + 8 * n:
                t = _ACK_N[n](data, offset)
                if not n:
                    return new(TcsAck, (t[2], t[3], t[4], t[5], (), t[1], t[8]))
                words = t[9:]
                cum = t[4]
                if cum < words[0] and words[-1] - cum < SEQ_HALF and all(map(_lt, words, words[1:])):
                    it = iter(words)
                    return new(TcsAck, (t[2], t[3], cum, t[5], tuple(zip(it, it, strict=False)), t[1], t[8]))
                return _ack_of(t, n)
    if offset < 0 or limit - offset < 1:
        raise HeaderError("T/C-SACK", "truncated: no kind byte", offset)
    kind = data[offset]
    if kind == TcsKind.DATA:
        if limit - offset < 12:
            raise HeaderError("TcsData", f"truncated: need 12 bytes, have {limit - offset}", offset)
        return TcsData.from_bytes(data, offset)
    if kind == TcsKind.ACK:
        return TcsAck.from_bytes(data, offset, limit)
    raise HeaderError("T/C-SACK", f"unknown kind {kind}", offset)


_DATA_UNPACK = _DATA.unpack_from


HEADERS = (TcsData, TcsAck)
