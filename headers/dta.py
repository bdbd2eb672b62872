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
0x04    :class:`Postcarder`    ``key:32 hop:8 data:32``
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
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache
from typing import ClassVar

from .errors import HeaderError, check_bits, need
from .inet import UdpFrame, build_udp_frame, parse_udp_frame
from .registry import UdpPort

_BASE = struct.Struct("!BBB")
_KEYVAL = struct.Struct("!BI")  # shared prefix of Key-Write and Key-Increment, as in the P4 dta_keyval_static_h
_APPEND = struct.Struct("!II")
_KEYINC = struct.Struct("!BIQ")
_POSTCARDER = struct.Struct("!IBI")
_SKETCH = struct.Struct("!HHIBB")
_NACK = struct.Struct("!BB")
_NACK_EXT = struct.Struct("!HHI")

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


@dataclass(frozen=True, slots=True)
class DTABase:
    """The base header shared by every primitive (DTA §6.6, public ``dta_base_h``).

    ``seqnum`` numbers the reports of one reporter; the translator tracks it for reports
    marked ``retransmittable`` and NACKs a gap. ``immediate`` asks the collector to
    handle the report at once (§6.6 footnote 1; a proposal, carried but unused).
    ``reserved`` is sent as 0; it is decoded and re-encoded verbatim, never rejected, so
    a future flag (§6.6 reserves the byte for flags) passes through old code.
    """

    opcode: int
    seqnum: int = 0
    immediate: int = 0
    retransmittable: int = 0
    reserved: int = 0

    SIZE: ClassVar[int] = 3

    def __post_init__(self) -> None:
        check_bits("DTA", "opcode", self.opcode, 8)
        check_bits("DTA", "seqnum", self.seqnum, 8)
        check_bits("DTA", "immediate", self.immediate, 1)
        check_bits("DTA", "retransmittable", self.retransmittable, 1)
        check_bits("DTA", "reserved", self.reserved, 6)

    @classmethod
    def of(cls, primitive: Primitive, seqnum: int = 0, immediate: int = 0, retransmittable: int = 0) -> DTABase:
        """The base header announcing ``primitive`` (its opcode filled in)."""
        return cls(int(primitive.OPCODE), seqnum, immediate, retransmittable)

    def size(self) -> int:
        return 3

    def _flags(self) -> int:
        return self.immediate << 7 | self.retransmittable << 6 | self.reserved

    def to_bytes(self) -> bytes:
        return _BASE.pack(self.opcode, self.seqnum, self._flags())

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _BASE.pack_into(buf, offset, self.opcode, self.seqnum, self._flags())
        return 3

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> DTABase:
        need("DTA", data, offset, 3)
        opcode, seqnum, flags = _BASE.unpack_from(data, offset)
        return cls(opcode, seqnum, flags >> 7, flags >> 6 & 1, flags & 0x3F)


@dataclass(frozen=True, slots=True)
class KeyWrite:
    """Key-Write (0x01, DTA §6.1, §7.2.2): store ``data`` under ``key`` in ``redundancy`` slots.

    The translator clones the report ``redundancy`` (N) times; copy n writes
    ``checksum(key) || data`` to slot ``hash(key || n)``. N = 0 would write nothing, so it
    is rejected. ``data`` is k >= 1 32-bit words; the public builds use k = 1, 3 or 7 and
    nothing on the wire says k, so a decoder infers it from the UDP payload length.
    """

    redundancy: int
    key: int
    data: tuple[int, ...]

    OPCODE: ClassVar[int] = Opcode.KEY_WRITE
    SIZE: ClassVar[int] = 5  # fixed part; plus 4 bytes per data word

    def __post_init__(self) -> None:
        check_bits("KeyWrite", "redundancy", self.redundancy, 8)
        if self.redundancy < 1:
            raise HeaderError("KeyWrite", "redundancy must be at least 1")
        check_bits("KeyWrite", "key", self.key, 32)
        words = _word_tuple("KeyWrite", "data", self.data)
        if not 1 <= len(words) <= MAX_KEYWRITE_WORDS:
            raise HeaderError("KeyWrite", f"{len(words)} data words outside 1..{MAX_KEYWRITE_WORDS}")
        object.__setattr__(self, "data", words)

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
        return cls(redundancy, key, _words(count).unpack_from(data, offset + 5))


@dataclass(frozen=True, slots=True)
class Append:
    """Append (0x02, DTA §6.2, §7.2.3): add one 32-bit ``data`` entry to list ``list_id``."""

    list_id: int
    data: int

    OPCODE: ClassVar[int] = Opcode.APPEND
    SIZE: ClassVar[int] = 8

    def __post_init__(self) -> None:
        check_bits("Append", "list_id", self.list_id, 32)
        check_bits("Append", "data", self.data, 32)

    def size(self) -> int:
        return 8

    def to_bytes(self) -> bytes:
        return _APPEND.pack(self.list_id, self.data)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _APPEND.pack_into(buf, offset, self.list_id, self.data)
        return 8

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None) -> Append:
        """Decode 8 bytes; with ``end`` given they must be exactly the bytes up to ``end``."""
        stop = _limit("Append", data, offset, end)
        _need("Append", offset, stop, 8)
        _exact("Append", offset, end, 8)
        return cls(*_APPEND.unpack_from(data, offset))


@dataclass(frozen=True, slots=True)
class KeyIncrement:
    """Key-Increment (0x03, DTA §6.4, §7.2.2): add ``counter`` at ``redundancy`` slots of ``key``.

    Each of the N copies becomes a RoCEv2 Fetch&Add; a query takes the minimum of the N
    counters (count-min). As for Key-Write, N = 0 would do nothing and is rejected.
    """

    redundancy: int
    key: int
    counter: int

    OPCODE: ClassVar[int] = Opcode.KEY_INCREMENT
    SIZE: ClassVar[int] = 13

    def __post_init__(self) -> None:
        check_bits("KeyIncrement", "redundancy", self.redundancy, 8)
        if self.redundancy < 1:
            raise HeaderError("KeyIncrement", "redundancy must be at least 1")
        check_bits("KeyIncrement", "key", self.key, 32)
        check_bits("KeyIncrement", "counter", self.counter, 64)

    def size(self) -> int:
        return 13

    def to_bytes(self) -> bytes:
        return _KEYINC.pack(self.redundancy, self.key, self.counter)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _KEYINC.pack_into(buf, offset, self.redundancy, self.key, self.counter)
        return 13

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0,
                   end: int | None = None) -> KeyIncrement:
        """Decode 13 bytes; with ``end`` given they must be exactly the bytes up to ``end``."""
        stop = _limit("KeyIncrement", data, offset, end)
        _need("KeyIncrement", offset, stop, 13)
        _exact("KeyIncrement", offset, end, 13)
        return cls(*_KEYINC.unpack_from(data, offset))


@dataclass(frozen=True, slots=True)
class Postcarder:
    """Postcarder (0x04): one hop's 32-bit INT ``data`` for flow ``key`` at hop number ``hop``.

    Only in the public implementation (its translator caches the hops of a path and
    writes them together); carried here for decode/encode compatibility.
    """

    key: int
    hop: int
    data: int

    OPCODE: ClassVar[int] = Opcode.POSTCARDER
    SIZE: ClassVar[int] = 9

    def __post_init__(self) -> None:
        check_bits("Postcarder", "key", self.key, 32)
        check_bits("Postcarder", "hop", self.hop, 8)
        check_bits("Postcarder", "data", self.data, 32)

    def size(self) -> int:
        return 9

    def to_bytes(self) -> bytes:
        return _POSTCARDER.pack(self.key, self.hop, self.data)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _POSTCARDER.pack_into(buf, offset, self.key, self.hop, self.data)
        return 9

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0,
                   end: int | None = None) -> Postcarder:
        """Decode 9 bytes; with ``end`` given they must be exactly the bytes up to ``end``."""
        stop = _limit("Postcarder", data, offset, end)
        _need("Postcarder", offset, stop, 9)
        _exact("Postcarder", offset, end, 9)
        return cls(*_POSTCARDER.unpack_from(data, offset))


@dataclass(frozen=True, slots=True)
class SketchMerge:
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

    reporter_id: int
    sketch_id: int
    column: int
    rows: int
    merge: int
    counters: tuple[int, ...]

    OPCODE: ClassVar[int] = Opcode.SKETCH_MERGE
    SIZE: ClassVar[int] = 10  # fixed part; plus 4 bytes per row

    def __post_init__(self) -> None:
        check_bits("SketchMerge", "reporter_id", self.reporter_id, 16)
        check_bits("SketchMerge", "sketch_id", self.sketch_id, 16)
        check_bits("SketchMerge", "column", self.column, 32)
        check_bits("SketchMerge", "rows", self.rows, 8)
        if self.rows < 1:
            raise HeaderError("SketchMerge", "rows must be at least 1")
        check_bits("SketchMerge", "merge", self.merge, 8)
        if self.merge not in _MERGES:
            raise HeaderError("SketchMerge", f"merge={self.merge} is not a known merge function (0 SUM, 1 MAX)")
        counters = _word_tuple("SketchMerge", "counters", self.counters)
        if len(counters) != self.rows:
            raise HeaderError("SketchMerge", f"{len(counters)} counters but rows={self.rows}")
        object.__setattr__(self, "counters", counters)

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
        size = 10 + 4 * rows
        if end is not None and end - offset != size:
            raise HeaderError("SketchMerge", f"rows={rows} needs {4 * rows} bytes of counters, "
                              f"{end - offset - 10} remain before end", offset + 10)
        _need("SketchMerge", offset, stop, size)
        counters = _words(rows).unpack_from(data, offset + 10)
        return cls(reporter_id, sketch_id, column, rows, merge, counters)


_MERGES = frozenset(int(m) for m in MergeFunction)

Primitive = KeyWrite | Append | KeyIncrement | Postcarder | SketchMerge

#: Record class of each opcode: what a translator dispatches on.
PRIMITIVES: dict[int, type[Primitive]] = {
    Opcode.KEY_WRITE: KeyWrite,
    Opcode.APPEND: Append,
    Opcode.KEY_INCREMENT: KeyIncrement,
    Opcode.POSTCARDER: Postcarder,
    Opcode.SKETCH_MERGE: SketchMerge,
}


@dataclass(frozen=True, slots=True)
class DTANack:
    """Translator -> reporter NACK on UDP 40044 (DTA §6.3, §7.2.4; public ``dta_ack_h``).

    ``seqnum`` is, as in the public translator, the last report sequence number accepted
    in order (the one *before* the expected one), so the reporter resends from
    ``seqnum + 1``; ``nack`` = 1 (the public code never sends 0, which would be an ACK).
    ``sketch`` = 1 (ours; the public code sends that bit as 0 in its 7 reserved bits)
    appends an 8-byte extension telling Sketch-Merge reporter ``reporter_id`` to restart
    sketch ``sketch_id`` from ``expected_column``. Without it the three extension fields
    are ``None`` (as in the Scapy layer, where they are conditional).
    """

    seqnum: int
    nack: int = 1
    sketch: int = 0
    reserved: int = 0
    reporter_id: int | None = None
    sketch_id: int | None = None
    expected_column: int | None = None

    SIZE: ClassVar[int] = 2  # fixed part; 10 with the sketch extension

    def __post_init__(self) -> None:
        check_bits("DTANack", "seqnum", self.seqnum, 8)
        check_bits("DTANack", "nack", self.nack, 1)
        check_bits("DTANack", "sketch", self.sketch, 1)
        check_bits("DTANack", "reserved", self.reserved, 6)
        ext = (("reporter_id", 16), ("sketch_id", 16), ("expected_column", 32))
        if self.sketch:
            for name, bits in ext:
                if getattr(self, name) is None:
                    raise HeaderError("DTANack", f"sketch=1 needs {name}")
                check_bits("DTANack", name, getattr(self, name), bits)
        else:
            for name, _ in ext:
                if getattr(self, name) is not None:
                    raise HeaderError("DTANack", f"{name} is only carried when sketch=1")

    @classmethod
    def for_sketch(cls, seqnum: int, reporter_id: int, sketch_id: int, expected_column: int) -> DTANack:
        """The Sketch-Merge NACK: "restart sketch ``sketch_id`` from ``expected_column``"."""
        return cls(seqnum, 1, 1, 0, reporter_id, sketch_id, expected_column)

    def size(self) -> int:
        return 10 if self.sketch else 2

    def to_bytes(self) -> bytes:
        buf = bytearray(self.size())
        self.pack_into(buf)
        return bytes(buf)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        _NACK.pack_into(buf, offset, self.seqnum, self.nack << 7 | self.sketch << 6 | self.reserved)
        if not self.sketch:
            return 2
        _NACK_EXT.pack_into(buf, offset + 2, self.reporter_id, self.sketch_id, self.expected_column)
        return 10

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> DTANack:
        """Decode a NACK; bytes after it are ignored (the public translator turns a report into a
        NACK in place, so a NACK may be followed by padding or leftovers)."""
        need("DTANack", data, offset, 2)
        seqnum, flags = _NACK.unpack_from(data, offset)
        nack, sketch, reserved = flags >> 7, flags >> 6 & 1, flags & 0x3F
        if not sketch:
            return cls(seqnum, nack, 0, reserved)
        need("DTANack", data, offset, 10)
        reporter_id, sketch_id, expected_column = _NACK_EXT.unpack_from(data, offset + 2)
        return cls(seqnum, nack, 1, reserved, reporter_id, sketch_id, expected_column)


def decode_report(data: bytes | bytearray | memoryview, offset: int = 0,
                  end: int | None = None) -> tuple[DTABase, Primitive]:
    """Decode a whole report (base header and primitive) from ``offset`` to ``end``.

    ``end`` is the end of the UDP payload (default: the end of ``data``). When it is given
    the primitive must fill the payload exactly; Key-Write always takes everything up to
    the end (its word count is inferred). An unknown opcode raises :class:`HeaderError`.
    """
    stop = _limit("DTA", data, offset, end)
    _need("DTA", offset, stop, 3)
    base = DTABase.from_bytes(data, offset)
    cls = PRIMITIVES.get(base.opcode)
    if cls is None:
        raise HeaderError("DTA", f"unknown opcode {base.opcode:#04x}", offset)
    return base, cls.from_bytes(data, offset + 3, end)


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
