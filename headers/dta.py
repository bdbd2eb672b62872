"""DTA (Direct Telemetry Access) reports and NACKs: the fast codec.

A reporter sends a report over UDP to port 40040 (source port 40041 by default); the
collector's ToR switch, the *translator*, turns it into RoCEv2 operations on the
collector's memory (DTA §5, §7.2). A report is the 3-byte base header (§6.6) then a
primitive sub-header chosen by the opcode:

======  =================  =======================================================
opcode  record             body
======  =================  =======================================================
0x01    :class:`KeyWrite`      ``redundancy:8 key:32 data:32*k`` (k >= 1)
0x02    :class:`Append`        ``list_id:32 data:32``
0x03    :class:`KeyIncrement`  ``redundancy:8 key:32 counter:64``
0x04    :class:`Postcarder`    ``key:32 hop:8 data:32`` (Postcarding; the slot the translator
                               writes for a flow is :class:`PostcardSlot`)
0x05    :class:`SketchMerge`   ``reporter_id:16 sketch_id:16 column:32 rows:8 merge:8
                               counters:32*rows`` (ours; DTA §6.3, §7.2.4)
======  =================  =======================================================

Opcodes 0x01-0x04, the 3-byte base and the 2-byte NACK are wire-compatible with the
public implementation (jonlanglet/DTA, the form its generators send, with NACK tracking);
Sketch-Merge and the NACK's sketch extension are ours because the public code has no
Sketch-Merge. All integers are big-endian (network order, as the P4 deparser emits them).
docs/wire-formats.md (DTA section) has the bit diagrams and every choice made where the paper is silent.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from enum import IntEnum
from functools import lru_cache
from typing import Any, ClassVar

from .errors import HeaderError, check_bits, need
from .inet import UdpFrame, build_udp_frame, parse_udp_frame
from .record import field, new, record
from .registry import UdpPort

_BASE = struct.Struct("!BBB")
_KEYVAL = struct.Struct("!BI")  # shared prefix of Key-Write and Key-Increment, as in the P4 dta_keyval_static_h
_APPEND = struct.Struct("!II")
_KEYINC = struct.Struct("!BIQ")
_POSTCARDER = struct.Struct("!IBI")
_SKETCH = struct.Struct("!HHIBB")
_NACK = struct.Struct("!BB")

#: The largest Key-Write whose report still fits in one IPv4/UDP datagram
#: (65535 - 20 IPv4 - 8 UDP - 3 base - 5 redundancy/key, in 4-byte words).
MAX_KEYWRITE_WORDS = (65535 - 20 - 8 - 3 - 5) // 4


@lru_cache(maxsize=64)
def _words(count: int) -> struct.Struct:
    """A precompiled struct for ``count`` big-endian 32-bit words (k = 1, 3, 7 are the common ones)."""
    return struct.Struct(f"!{count}I")


for _k in (1, 3, 5, 7):  # the public Key-Write builds (1, 3, 7 words) and a 5-row sketch column (§7.2.4)
    _words(_k)
del _k


class Opcode(IntEnum):
    """DTA primitive opcodes (base header byte 0). 0x01-0x04 as in the public translator."""

    KEY_WRITE = 0x01
    APPEND = 0x02
    KEY_INCREMENT = 0x03
    POSTCARDER = 0x04
    SKETCH_MERGE = 0x05  # ours: the public code has no Sketch-Merge


class MergeFunction(IntEnum):
    """How the translator merges a Sketch-Merge column into its aggregate (DTA §6.3)."""

    SUM = 0  # counter-wise sum: Count-Min and Count sketches
    MAX = 1  # register-wise max: HyperLogLog


def _limit(header: str, data: bytes | bytearray | memoryview, offset: int, end: int | None) -> int:
    """Validate ``offset``/``end`` against the buffer and return the effective end."""
    n = len(data)
    if end is None:
        end = n
    elif not 0 <= end <= n:
        raise HeaderError(header, f"end={end} outside the buffer of {n} bytes", offset)
    if not 0 <= offset <= end:
        raise HeaderError(header, f"offset outside 0..{end}", offset)
    return end


def _need(header: str, offset: int, end: int, size: int) -> None:
    """Raise unless ``size`` bytes are available between ``offset`` and ``end``."""
    if end - offset < size:
        raise HeaderError(header, f"truncated: need {size} bytes, have {end - offset}", offset)


def _exact(header: str, offset: int, end: int | None, size: int) -> None:
    """With an explicit ``end`` (the UDP payload's end), the body must fill it exactly."""
    if end is not None and end - offset != size:
        raise HeaderError(header, f"body is {size} bytes but {end - offset} bytes remain before end", offset)


def _word_tuple(header: str, field: str, value: object) -> tuple[int, ...]:
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple):
        raise HeaderError(header, f"{field} must be a tuple of ints, got {type(value).__name__}")
    for i, word in enumerate(value):
        check_bits(header, f"{field}[{i}]", word, 32)
    return value


@record
class DTABase(tuple[int, int, int]):
    """The base header shared by every primitive (DTA §6.6, public ``dta_base_h``).

    ``seqnum`` numbers the reports of one reporter; the translator tracks it for reports
    marked ``retransmittable`` and NACKs a gap. ``immediate`` asks the collector to
    handle the report at once (§6.6 footnote 1; a proposal, carried but unused).
    ``reserved`` is sent as 0; it is decoded and re-encoded verbatim, never rejected, so
    a future flag (§6.6 reserves the byte for flags) passes through old code. The tuple is
    the wire layout; the three flags are read from ``flags_byte`` (headers/record.py).
    """

    __slots__ = ()

    opcode: int = field(0)
    seqnum: int = field(1)
    flags_byte: int = field(2)  # immediate:1 | retransmittable:1 | reserved:6

    SIZE: ClassVar[int] = 3
    FIELDS: ClassVar[tuple[str, ...]] = ("opcode", "seqnum", "immediate", "retransmittable", "reserved")

    def __new__(cls, opcode: int, seqnum: int = 0, immediate: int = 0, retransmittable: int = 0,
                reserved: int = 0) -> DTABase:
        check_bits("DTA", "opcode", opcode, 8)
        check_bits("DTA", "seqnum", seqnum, 8)
        check_bits("DTA", "immediate", immediate, 1)
        check_bits("DTA", "retransmittable", retransmittable, 1)
        check_bits("DTA", "reserved", reserved, 6)
        return new(cls, (int(opcode), int(seqnum), immediate << 7 | retransmittable << 6 | reserved))

    @classmethod
    def of(cls, primitive: Primitive, seqnum: int = 0, immediate: int = 0, retransmittable: int = 0) -> DTABase:
        """The base header announcing ``primitive`` (its opcode filled in)."""
        return cls(int(primitive.OPCODE), seqnum, immediate, retransmittable)

    @property
    def immediate(self) -> int:
        return self[2] >> 7

    @property
    def retransmittable(self) -> int:
        return self[2] >> 6 & 1

    @property
    def reserved(self) -> int:
        return self[2] & 0x3F

    def size(self) -> int:
        return 3

    def to_bytes(self) -> bytes:
        return _BASE.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _BASE.pack_into(buf, offset, *self)
        return 3

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> DTABase:
        if offset < 0 or len(data) - offset < 3:
            need("DTA", data, offset, 3)
        raw = _BASE_RAW(data, offset)[0]
        return _BASES.get(raw) or _base_of(raw)


@record
class KeyWrite(tuple[int, int, tuple[int, ...]]):
    """Key-Write (0x01, DTA §6.1, §7.2.2): store ``data`` under ``key`` in ``redundancy`` slots.

    The translator clones the report ``redundancy`` (N) times; copy n writes
    ``checksum(key) || data`` to slot ``hash(key || n)``. N = 0 would write nothing, so it
    is rejected. ``data`` is k >= 1 32-bit words; the public builds use k = 1, 3 or 7 and
    nothing on the wire says k, so a decoder infers it from the UDP payload length.
    """

    __slots__ = ()

    redundancy: int = field(0)
    key: int = field(1)
    data: tuple[int, ...] = field(2)

    OPCODE: ClassVar[int] = Opcode.KEY_WRITE
    SIZE: ClassVar[int] = 5  # fixed part; plus 4 bytes per data word
    FIELDS: ClassVar[tuple[str, ...]] = ("redundancy", "key", "data")

    def __new__(cls, redundancy: int, key: int, data: tuple[int, ...] | list[int]) -> KeyWrite:
        check_bits("KeyWrite", "redundancy", redundancy, 8)
        if redundancy < 1:
            raise HeaderError("KeyWrite", "redundancy must be at least 1")
        check_bits("KeyWrite", "key", key, 32)
        words = _word_tuple("KeyWrite", "data", data)
        if not 1 <= len(words) <= MAX_KEYWRITE_WORDS:
            raise HeaderError("KeyWrite", f"{len(words)} data words outside 1..{MAX_KEYWRITE_WORDS}")
        return new(cls, (redundancy, key, words))

    def size(self) -> int:
        return 5 + 4 * len(self.data)

    def to_bytes(self) -> bytes:
        return _KEYVAL.pack(self.redundancy, self.key) + _words(len(self.data)).pack(*self.data)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _KEYVAL.pack_into(buf, offset, self.redundancy, self.key)
        _words(len(self.data)).pack_into(buf, offset + 5, *self.data)
        return 5 + 4 * len(self.data)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None) -> KeyWrite:
        """Decode from ``offset`` to ``end`` (default: the end of ``data``): all of it is data words."""
        stop = _limit("KeyWrite", data, offset, end)
        _need("KeyWrite", offset, stop, 9)
        rest = stop - offset - 5
        if rest % 4:
            raise HeaderError("KeyWrite", f"{rest} bytes of data is not a whole number of 32-bit words", offset + 5)
        count = rest // 4
        if count > MAX_KEYWRITE_WORDS:
            raise HeaderError("KeyWrite", f"{count} data words exceed {MAX_KEYWRITE_WORDS}", offset + 5)
        redundancy, key = _KEYVAL.unpack_from(data, offset)
        if redundancy < 1:
            raise HeaderError("KeyWrite", "redundancy must be at least 1", offset)
        return new(cls, (redundancy, key, _words(count).unpack_from(data, offset + 5)))


@record
class Append(tuple[int, int]):
    """Append (0x02, DTA §6.2, §7.2.3): add one 32-bit ``data`` entry to list ``list_id``."""

    __slots__ = ()

    list_id: int = field(0)
    data: int = field(1)

    OPCODE: ClassVar[int] = Opcode.APPEND
    SIZE: ClassVar[int] = 8
    FIELDS: ClassVar[tuple[str, ...]] = ("list_id", "data")

    def __new__(cls, list_id: int, data: int) -> Append:
        check_bits("Append", "list_id", list_id, 32)
        check_bits("Append", "data", data, 32)
        return new(cls, (list_id, data))

    def size(self) -> int:
        return 8

    def to_bytes(self) -> bytes:
        return _APPEND.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _APPEND.pack_into(buf, offset, *self)
        return 8

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None) -> Append:
        """Decode 8 bytes; with ``end`` given they must be exactly the bytes up to ``end``."""
        stop = _limit("Append", data, offset, end)
        _need("Append", offset, stop, 8)
        _exact("Append", offset, end, 8)
        return new(cls, _APPEND.unpack_from(data, offset))


@record
class KeyIncrement(tuple[int, int, int]):
    """Key-Increment (0x03, DTA §6.4, §7.2.2): add ``counter`` at ``redundancy`` slots of ``key``.

    Each of the N copies becomes a RoCEv2 Fetch&Add; a query takes the minimum of the N
    counters (count-min). As for Key-Write, N = 0 would do nothing and is rejected.
    """

    __slots__ = ()

    redundancy: int = field(0)
    key: int = field(1)
    counter: int = field(2)

    OPCODE: ClassVar[int] = Opcode.KEY_INCREMENT
    SIZE: ClassVar[int] = 13
    FIELDS: ClassVar[tuple[str, ...]] = ("redundancy", "key", "counter")

    def __new__(cls, redundancy: int, key: int, counter: int) -> KeyIncrement:
        check_bits("KeyIncrement", "redundancy", redundancy, 8)
        if redundancy < 1:
            raise HeaderError("KeyIncrement", "redundancy must be at least 1")
        check_bits("KeyIncrement", "key", key, 32)
        check_bits("KeyIncrement", "counter", counter, 64)
        return new(cls, (redundancy, key, counter))

    def size(self) -> int:
        return 13

    def to_bytes(self) -> bytes:
        return _KEYINC.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _KEYINC.pack_into(buf, offset, *self)
        return 13

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0,
                   end: int | None = None) -> KeyIncrement:
        """Decode 13 bytes; with ``end`` given they must be exactly the bytes up to ``end``."""
        stop = _limit("KeyIncrement", data, offset, end)
        _need("KeyIncrement", offset, stop, 13)
        _exact("KeyIncrement", offset, end, 13)
        t = _KEYINC.unpack_from(data, offset)
        if t[0] < 1:
            raise HeaderError("KeyIncrement", "redundancy must be at least 1", offset)
        return new(cls, t)


@record
class Postcarder(tuple[int, int, int]):
    """Postcarder (0x04): one hop's 32-bit INT ``data`` for flow ``key`` at hop number ``hop``.

    Only in the public implementation (its translator caches the hops of a path and
    writes them together); carried here for decode/encode compatibility.
    """

    __slots__ = ()

    key: int = field(0)
    hop: int = field(1)
    data: int = field(2)

    OPCODE: ClassVar[int] = Opcode.POSTCARDER
    SIZE: ClassVar[int] = 9
    FIELDS: ClassVar[tuple[str, ...]] = ("key", "hop", "data")

    def __new__(cls, key: int, hop: int, data: int) -> Postcarder:
        check_bits("Postcarder", "key", key, 32)
        check_bits("Postcarder", "hop", hop, 8)
        check_bits("Postcarder", "data", data, 32)
        return new(cls, (key, hop, data))

    def size(self) -> int:
        return 9

    def to_bytes(self) -> bytes:
        return _POSTCARDER.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _POSTCARDER.pack_into(buf, offset, *self)
        return 9

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0,
                   end: int | None = None) -> Postcarder:
        """Decode 9 bytes; with ``end`` given they must be exactly the bytes up to ``end``."""
        stop = _limit("Postcarder", data, offset, end)
        _need("Postcarder", offset, stop, 9)
        _exact("Postcarder", offset, end, 9)
        return new(cls, _POSTCARDER.unpack_from(data, offset))


@record
class SketchMerge(tuple[int, int, int, int, int, tuple[int, ...]]):
    """Sketch-Merge (0x05, ours; DTA §6.3, §7.2.4): one column of a reporter's sketch.

    A column is ``rows`` 32-bit counters (one per hash row, e.g. 5 for a 5-row sketch,
    §7.2.4). Each reporter sends the columns of sketch ``sketch_id`` *sequentially*
    (``column`` 0, 1, 2, ...); the translator tracks the next column it expects per
    (``reporter_id``, ``sketch_id``) and answers a gap with a :class:`DTANack` carrying the
    column to restart from (§6.3: column 7 after 5 -> "starts over from column 6").
    ``merge`` says how the column joins the aggregate (:class:`MergeFunction`). ``rows`` is
    on the wire so a truncated or padded column is detected; it must equal
    ``len(counters)``.
    """

    __slots__ = ()

    reporter_id: int = field(0)
    sketch_id: int = field(1)
    column: int = field(2)
    rows: int = field(3)
    merge: int = field(4)
    counters: tuple[int, ...] = field(5)

    OPCODE: ClassVar[int] = Opcode.SKETCH_MERGE
    SIZE: ClassVar[int] = 10  # fixed part; plus 4 bytes per row
    FIELDS: ClassVar[tuple[str, ...]] = ("reporter_id", "sketch_id", "column", "rows", "merge", "counters")

    def __new__(cls, reporter_id: int, sketch_id: int, column: int, rows: int, merge: int,
                counters: tuple[int, ...] | list[int]) -> SketchMerge:
        check_bits("SketchMerge", "reporter_id", reporter_id, 16)
        check_bits("SketchMerge", "sketch_id", sketch_id, 16)
        check_bits("SketchMerge", "column", column, 32)
        check_bits("SketchMerge", "rows", rows, 8)
        if rows < 1:
            raise HeaderError("SketchMerge", "rows must be at least 1")
        check_bits("SketchMerge", "merge", merge, 8)
        if merge not in _MERGES:
            raise HeaderError("SketchMerge", f"merge={merge} is not a known merge function (0 SUM, 1 MAX)")
        words = _word_tuple("SketchMerge", "counters", counters)
        if len(words) != rows:
            raise HeaderError("SketchMerge", f"{len(words)} counters but rows={rows}")
        return new(cls, (reporter_id, sketch_id, column, rows, merge, words))

    @classmethod
    def for_column(cls, reporter_id: int, sketch_id: int, column: int, counters: tuple[int, ...] | list[int],
                   merge: int = MergeFunction.SUM) -> SketchMerge:
        """A report for one column, ``rows`` taken from ``counters``."""
        return cls(reporter_id, sketch_id, column, len(counters), merge, tuple(counters))

    def size(self) -> int:
        return 10 + 4 * self.rows

    def to_bytes(self) -> bytes:
        head = _SKETCH.pack(self.reporter_id, self.sketch_id, self.column, self.rows, self.merge)
        return head + _words(self.rows).pack(*self.counters)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _SKETCH.pack_into(buf, offset, self.reporter_id, self.sketch_id, self.column, self.rows, self.merge)
        _words(self.rows).pack_into(buf, offset + 10, *self.counters)
        return 10 + 4 * self.rows

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0,
                   end: int | None = None) -> SketchMerge:
        """Decode one column; with ``end`` given, ``rows`` counters must fill exactly up to ``end``."""
        stop = _limit("SketchMerge", data, offset, end)
        _need("SketchMerge", offset, stop, 10)
        reporter_id, sketch_id, column, rows, merge = _SKETCH.unpack_from(data, offset)
        if rows < 1:
            raise HeaderError("SketchMerge", "rows=0: a column has at least one counter", offset + 8)
        if merge not in _MERGES:
            raise HeaderError("SketchMerge", f"merge={merge} is not a known merge function (0 SUM, 1 MAX)",
                              offset + 9)
        size = 10 + 4 * rows
        if end is not None and end - offset != size:
            raise HeaderError("SketchMerge", f"rows={rows} needs {4 * rows} bytes of counters, "
                              f"{end - offset - 10} remain before end", offset + 10)
        _need("SketchMerge", offset, stop, size)
        counters = _words(rows).unpack_from(data, offset + 10)
        return new(cls, (reporter_id, sketch_id, column, rows, merge, counters))


_MERGES = frozenset(int(m) for m in MergeFunction)
#: Hops a Postcarding slot holds at most (one bit each in ``present``).
MAX_POSTCARD_HOPS = 32
_SLOT_HEAD = struct.Struct("!II")


@record
class PostcardSlot(tuple[int, int, tuple[int, ...]]):
    """A Postcarding slot as the translator WRITEs it into collector memory (ours; issue 33).

    ``checksum:32 present:32 hops:32*H``: the flow key's 32-bit checksum, a mask with bit
    ``h - 1`` set for every hop ``h`` that reported, then H hop words (0 where absent). Not a
    report on the wire of the reporters but the RDMA WRITE's payload (the public translator's
    ``rdma_payload_postcarder_h`` has the five hop words only); its slot in the region and the
    checksum are :mod:`netstack.dta.postcard`'s. H is not on the wire: a decoder infers it from
    the length, or is told it (``hops``), as the collector's layout says.
    """

    __slots__ = ()

    checksum: int = field(0)
    present: int = field(1)
    hops: tuple[int, ...] = field(2)

    SIZE: ClassVar[int] = 8  # fixed part; plus 4 bytes per hop
    FIELDS: ClassVar[tuple[str, ...]] = ("checksum", "present", "hops")

    def __new__(cls, checksum: int, present: int, hops: tuple[int, ...] | list[int]) -> PostcardSlot:
        check_bits("PostcardSlot", "checksum", checksum, 32)
        words = _word_tuple("PostcardSlot", "hops", hops)
        if not 1 <= len(words) <= MAX_POSTCARD_HOPS:
            raise HeaderError("PostcardSlot", f"{len(words)} hops outside 1..{MAX_POSTCARD_HOPS}")
        check_bits("PostcardSlot", "present", present, len(words))
        return new(cls, (checksum, present, words))

    def size(self) -> int:
        return 8 + 4 * len(self.hops)

    def to_bytes(self) -> bytes:
        return _SLOT_HEAD.pack(self.checksum, self.present) + _words(len(self.hops)).pack(*self.hops)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _SLOT_HEAD.pack_into(buf, offset, self.checksum, self.present)
        _words(len(self.hops)).pack_into(buf, offset + 8, *self.hops)
        return 8 + 4 * len(self.hops)

    def reported(self) -> dict[int, int]:
        """{hop number (1-based): data} for the hops whose ``present`` bit is set."""
        return {h + 1: v for h, v in enumerate(self.hops) if self.present >> h & 1}

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None,
                   hops: int | None = None) -> PostcardSlot:
        """Decode ``hops`` hop words (None: every whole word up to ``end``, the end of ``data`` by default)."""
        stop = _limit("PostcardSlot", data, offset, end)
        if hops is None:
            rest = stop - offset - 8
            if rest < 4 or rest % 4:
                raise HeaderError("PostcardSlot", f"{max(rest, 0)} bytes of hops is not 1 or more 32-bit words",
                                  offset)
            hops = rest // 4
        if not isinstance(hops, int) or not 1 <= hops <= MAX_POSTCARD_HOPS:
            raise HeaderError("PostcardSlot", f"hops={hops!r} outside 1..{MAX_POSTCARD_HOPS}", offset)
        _need("PostcardSlot", offset, stop, 8 + 4 * hops)
        checksum, present = _SLOT_HEAD.unpack_from(data, offset)
        if present >> hops:
            raise HeaderError("PostcardSlot", f"present={present:#x} marks hops beyond {hops}", offset + 4)
        return new(cls, (checksum, present, _words(hops).unpack_from(data, offset + 8)))



Primitive = KeyWrite | Append | KeyIncrement | Postcarder | SketchMerge

#: Record class of each opcode: what a translator dispatches on.
PRIMITIVES: dict[int, type[Primitive]] = {
    Opcode.KEY_WRITE: KeyWrite,
    Opcode.APPEND: Append,
    Opcode.KEY_INCREMENT: KeyIncrement,
    Opcode.POSTCARDER: Postcarder,
    Opcode.SKETCH_MERGE: SketchMerge,
}


@record
class DTANack(tuple[int, int, int | None, int | None, int | None]):
    """Translator -> reporter NACK on UDP 40044 (DTA §6.3, §7.2.4; public ``dta_ack_h``).

    ``seqnum`` is, as in the public translator, the last report sequence number accepted
    in order (the one *before* the expected one), so the reporter resends from
    ``seqnum + 1``; ``nack`` = 1 (the public code never sends 0, which would be an ACK).
    ``sketch`` = 1 (ours; the public code sends that bit as 0 in its 7 reserved bits)
    appends an 8-byte extension telling Sketch-Merge reporter ``reporter_id`` to restart
    sketch ``sketch_id`` from ``expected_column``. Without it the three extension fields
    are ``None`` (as in the Scapy layer, where they are conditional). The tuple is the wire
    layout; ``nack``, ``sketch`` and ``reserved`` are read from ``flags_byte``.
    """

    __slots__ = ()

    seqnum: int = field(0)
    flags_byte: int = field(1)  # nack:1 | sketch:1 | reserved:6
    reporter_id: int | None = field(2)
    sketch_id: int | None = field(3)
    expected_column: int | None = field(4)

    SIZE: ClassVar[int] = 2  # fixed part; 10 with the sketch extension
    FIELDS: ClassVar[tuple[str, ...]] = ("seqnum", "nack", "sketch", "reserved", "reporter_id", "sketch_id",
                                         "expected_column")

    def __new__(cls, seqnum: int, nack: int = 1, sketch: int = 0, reserved: int = 0, reporter_id: int | None = None,
                sketch_id: int | None = None, expected_column: int | None = None) -> DTANack:
        check_bits("DTANack", "seqnum", seqnum, 8)
        check_bits("DTANack", "nack", nack, 1)
        check_bits("DTANack", "sketch", sketch, 1)
        check_bits("DTANack", "reserved", reserved, 6)
        ext = (("reporter_id", reporter_id, 16), ("sketch_id", sketch_id, 16), ("expected_column", expected_column, 32))
        for name, value, bits in ext:
            if sketch:
                if value is None:
                    raise HeaderError("DTANack", f"sketch=1 needs {name}")
                check_bits("DTANack", name, value, bits)
            elif value is not None:
                raise HeaderError("DTANack", f"{name} is only carried when sketch=1")
        return new(cls, (seqnum, nack << 7 | sketch << 6 | reserved, reporter_id, sketch_id, expected_column))

    @classmethod
    def for_sketch(cls, seqnum: int, reporter_id: int, sketch_id: int, expected_column: int) -> DTANack:
        """The Sketch-Merge NACK: "restart sketch ``sketch_id`` from ``expected_column``"."""
        return cls(seqnum, 1, 1, 0, reporter_id, sketch_id, expected_column)

    @property
    def nack(self) -> int:
        return self[1] >> 7

    @property
    def sketch(self) -> int:
        return self[1] >> 6 & 1

    @property
    def reserved(self) -> int:
        return self[1] & 0x3F

    def size(self) -> int:
        return 10 if self[1] & 0x40 else 2

    def to_bytes(self) -> bytes:
        if self[1] & 0x40:
            return _NACK_SKETCH.pack(*self)
        return _NACK.pack(self[0], self[1])

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        if self[1] & 0x40:
            _NACK_SKETCH.pack_into(buf, offset, *self)
            return 10
        _NACK.pack_into(buf, offset, self[0], self[1])
        return 2

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> DTANack:
        """Decode a NACK; bytes after it are ignored (the public translator turns a report into a
        NACK in place, so a NACK may be followed by padding or leftovers)."""
        if offset < 0 or len(data) - offset < 2:
            need("DTANack", data, offset, 2)
        flags = data[offset + 1]
        if not flags & 0x40:
            key = data[offset] << 8 | flags
            return _NACKS.get(key) or _nack_of(key)
        if len(data) - offset < 10:
            need("DTANack", data, offset, 10)
        return new(cls, _NACK_SKETCH_UNPACK(data, offset))


_NACK_SKETCH = struct.Struct("!BBHHI")
_NACK_SKETCH_UNPACK = _NACK_SKETCH.unpack_from

# Records are immutable, so decoders share one record per distinct base header (2^24 at most,
# a few thousand in practice: 256 seqnums x opcodes x flags) and per distinct plain NACK (2^16):
# a dict lookup instead of building a record per packet (issue 19). Bounded all the same.
_CACHE_MAX = 4096
_BASE_RAW = struct.Struct("!3s").unpack_from
_BASES: dict[bytes, DTABase] = {}
_NACKS: dict[int, DTANack] = {}


def _base_of(raw: bytes) -> DTABase:
    if len(_BASES) >= _CACHE_MAX:
        _BASES.clear()
    base = _BASES[raw] = new(DTABase, _BASE.unpack(raw))
    return base


def _nack_of(key: int) -> DTANack:
    if len(_NACKS) >= _CACHE_MAX:
        _NACKS.clear()
    nack = _NACKS[key] = new(DTANack, (key >> 8, key & 0xFF, None, None, None))
    return nack


def decode_report(data: bytes | bytearray | memoryview, offset: int = 0,
                  end: int | None = None) -> tuple[DTABase, Primitive]:
    """Decode a whole report (base header and primitive) from ``offset`` to ``end``.

    ``end`` is the end of the UDP payload (default: the end of ``data``). When it is given
    the primitive must fill the payload exactly; Key-Write always takes everything up to
    the end (its word count is inferred). An unknown opcode raises :class:`HeaderError`.
    """
    stop = len(data) if end is None else end
    rest = stop - offset - 3  # bytes of primitive
    # the well-formed reports inline, base and primitive in one unpack (issue 19); anything else
    # (or an unusual ``end``) goes the long way below, which words the error
    if rest > 0 and offset >= 0 and stop <= len(data):
        opcode = data[offset]
        t: tuple[Any, ...] = ()
        if opcode == 1:
            count = (rest - 5) >> 2
            if rest & 3 == 1 and 0 < count <= MAX_KEYWRITE_WORDS:
                t = (_KW_REPORT.get(count) or _kw_report(count))(data, offset)
                if t[1]:
                    prim: Primitive = new(KeyWrite, (t[1], t[2], t[3:]))
                    return _BASES.get(t[0]) or _base_of(t[0]), prim
        elif opcode == 2:
            if rest == 8 or (end is None and rest > 8):
                t = _APPEND_REPORT(data, offset)
                return _BASES.get(t[0]) or _base_of(t[0]), new(Append, t[1:])
        elif opcode == 3:
            if rest == 13 or (end is None and rest > 13):
                t = _KEYINC_REPORT(data, offset)
                if t[1]:
                    return _BASES.get(t[0]) or _base_of(t[0]), new(KeyIncrement, t[1:])
        elif opcode == 4:
            if rest == 9 or (end is None and rest > 9):
                t = _POSTCARDER_REPORT(data, offset)
                return _BASES.get(t[0]) or _base_of(t[0]), new(Postcarder, t[1:])
        elif opcode == 5 and rest >= 14:
            rows = data[offset + 11]
            if rest == 10 + 4 * rows or (end is None and rest > 10 + 4 * rows):
                t = (_SKETCH_REPORT.get(rows) or _sketch_report(rows))(data, offset)
                if rows and t[5] in _MERGES:
                    return _BASES.get(t[0]) or _base_of(t[0]), new(SketchMerge, (*t[1:6], t[6:]))
    stop = _limit("DTA", data, offset, end)
    _need("DTA", offset, stop, 3)
    base = DTABase.from_bytes(data, offset)
    cls = PRIMITIVES.get(base.opcode)
    if cls is None:
        raise HeaderError("DTA", f"unknown opcode {base.opcode:#04x}", offset)
    return base, cls.from_bytes(data, offset + 3, end)


# base header (3 bytes, the key of _BASES) and primitive as one struct (the decode_report fast
# path): fixed-size primitives, and Key-Write / Sketch-Merge per word count, compiled on first use
_APPEND_REPORT = struct.Struct("!3sII").unpack_from
_KEYINC_REPORT = struct.Struct("!3sBIQ").unpack_from
_POSTCARDER_REPORT = struct.Struct("!3sIBI").unpack_from
_Unpack = Callable[[bytes | bytearray | memoryview, int], tuple[Any, ...]]
_KW_REPORT: dict[int, _Unpack] = {}
_SKETCH_REPORT: dict[int, _Unpack] = {}


def _kw_report(count: int) -> _Unpack:
    if len(_KW_REPORT) >= 64:  # bounded: the word count comes from the wire
        _KW_REPORT.clear()
    fn = _KW_REPORT[count] = struct.Struct(f"!3sBI{count}I").unpack_from
    return fn


def _sketch_report(rows: int) -> _Unpack:
    fn = _SKETCH_REPORT[rows] = struct.Struct(f"!3sHHIBB{rows}I").unpack_from
    return fn


for _k in (1, 3, 5, 7):  # the public Key-Write builds (1, 3, 7 words) and a 5-row sketch column (§7.2.4)
    _kw_report(_k)
    _sketch_report(_k)
del _k


def pack_report_into(buf: bytearray | memoryview, offset: int, base: DTABase, primitive: Primitive) -> int:
    """Write ``base`` and ``primitive`` at ``offset``; return the bytes written."""
    if PRIMITIVES.get(base.opcode) is not type(primitive):
        raise HeaderError("DTA", f"opcode {base.opcode:#04x} does not announce a {type(primitive).__name__}")
    base.pack_into(buf, offset)
    return 3 + primitive.pack_into(buf, offset + 3)


def encode_report(base: DTABase, primitive: Primitive) -> bytes:
    """The UDP payload of a report; ``base.opcode`` must match the primitive's record class."""
    buf = bytearray(3 + primitive.size())
    pack_report_into(buf, 0, base, primitive)
    return bytes(buf)


def build_report_frame(src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, base: DTABase,
                       primitive: Primitive, sport: int = UdpPort.DTA_SOURCE) -> bytes:
    """Ethernet/IPv4/UDP(dport 40040)/report, as a reporter emits it."""
    return build_udp_frame(src_mac, dst_mac, src_ip, dst_ip, sport, UdpPort.DTA, encode_report(base, primitive))


def build_nack_frame(src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, nack: DTANack,
                     sport: int = UdpPort.DTA, dport: int = UdpPort.DTA_NACK) -> bytes:
    """Ethernet/IPv4/UDP(dport 40044)/NACK, translator back to reporter.

    The public translator keeps the report's source port; only the destination port
    (40044) identifies a NACK, so ``sport`` is free (default: the report port 40040).
    """
    return build_udp_frame(src_mac, dst_mac, src_ip, dst_ip, sport, dport, nack.to_bytes())


def parse_report_frame(frame: bytes | bytearray | memoryview,
                       offset: int = 0) -> tuple[UdpFrame, DTABase, Primitive]:
    """Parse Ethernet/IPv4/UDP/report; the UDP destination port must be 40040."""
    udp = parse_udp_frame(frame, offset)
    if udp.udp.dport != UdpPort.DTA:
        raise HeaderError("DTA", f"UDP destination port {udp.udp.dport} is not {int(UdpPort.DTA)}",
                          udp.payload_offset - 6)
    base, primitive = decode_report(frame, udp.payload_offset, udp.payload_offset + udp.payload_length)
    return udp, base, primitive


def parse_nack_frame(frame: bytes | bytearray | memoryview, offset: int = 0) -> tuple[UdpFrame, DTANack]:
    """Parse Ethernet/IPv4/UDP/NACK; the UDP destination port must be 40044."""
    udp = parse_udp_frame(frame, offset)
    if udp.udp.dport != UdpPort.DTA_NACK:
        raise HeaderError("DTANack", f"UDP destination port {udp.udp.dport} is not {int(UdpPort.DTA_NACK)}",
                          udp.payload_offset - 6)
    payload_end = udp.payload_offset + udp.payload_length
    return udp, DTANack.from_bytes(memoryview(frame)[:payload_end], udp.payload_offset)


HEADERS = (DTABase, KeyWrite, Append, KeyIncrement, Postcarder, SketchMerge, DTANack)
