"""Scapy layers for DTA reports (UDP 40040) and NACKs (UDP 40044); codec in :mod:`headers.dta`.

``DTA`` is the 3-byte base header, bound to UDP destination port 40040, and dispatches on
``opcode`` to :class:`DTAKeyWrite`, :class:`DTAAppend`, :class:`DTAKeyIncrement`,
:class:`DTAPostcarder` or :class:`DTASketchMerge` (an unknown opcode dissects as Raw).
:class:`DTAPostcardSlot` is the slot a Postcarding WRITE carries (bound to nothing).
``DTANack`` is bound to UDP destination port 40044; its Sketch-Merge extension is present
when ``sketch`` is 1 and its fields are ``None`` otherwise, exactly as in the record.

An authenticated report (the optional trailer, docs/wire-formats.md) is built by appending
:class:`~headers.layers.auth.NetstackAuth` and dissected with :func:`sealed_report`.

Field names and values equal the codec records' fields one to one. The word lists
(Key-Write ``data``, Sketch-Merge ``counters``) hold :class:`Words`, a list that equals
the record's tuple, so ``layer.data == record.data``. Key-Write's ``data`` takes the rest of the layer, which
inside a UDP datagram is the rest of the UDP payload (Scapy's UDP trims padding by its
length field); Sketch-Merge ``rows`` counts ``counters`` and is filled in when left unset.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import scapy.layers.inet  # noqa: F401  (binds IP to Ether and UDP to IP so Ether(raw) reaches us)
from scapy.fields import (
    BitField,
    ByteEnumField,
    ByteField,
    ConditionalField,
    FieldLenField,
    FieldListField,
    IntField,
    LongField,
    ShortField,
    XIntField,
)
from scapy.layers.inet import UDP
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_layers

from headers import dta
from headers.auth import TRAILER_LEN
from headers.layers.auth import NetstackAuth
from headers.registry import UdpPort

_OPCODES = {op.value: op.name.lower() for op in dta.Opcode}
_MERGES = {m.value: m.name for m in dta.MergeFunction}


class Words(list[int]):
    """A list field's value that compares equal to the record's tuple of words.

    Scapy list fields hold lists (a 2- or 3-tuple in a field is read as a value *range*
    when a packet is built), the frozen records hold tuples; this list equals the tuple
    with the same words, so ``layer.data == record.data`` holds both ways.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, tuple):
            return list.__eq__(self, list(other))
        return list.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None


class _WordList(FieldListField):
    """A list of big-endian 32-bit words whose value is a :class:`Words`."""

    def __init__(self, name: str, default: list[int], **kwargs: Any) -> None:
        # scapy annotates ``default`` as a list of fields; it is the field's default value
        super().__init__(name, Words(default), IntField("word", 0), **kwargs)  # type: ignore[arg-type]

    def any2i(self, pkt: Any, x: Any) -> Words:
        # self.field is the IntField above, whose any2i passes ints through (scapy types it
        # Optional for fields whose default is None)
        if isinstance(x, (list, tuple)):
            return Words(cast("Iterable[int]", (self.field.any2i(pkt, e) for e in x)))
        return Words([cast(int, self.field.any2i(pkt, x))])

    def i2count(self, pkt: Any, val: Any) -> int:
        return len(val) if isinstance(val, (list, tuple)) else 1

    def do_copy(self, x: Any) -> Any:
        return Words(x) if isinstance(x, list) else x

    def getfield(self, pkt: Any, s: Any) -> Any:
        rest, val = super().getfield(pkt, s)
        return rest, Words(val)


class DTA(Packet):
    """DTA base header: ``opcode:8 seqnum:8 immediate:1 retransmittable:1 reserved:6``."""

    name = "DTA"
    fields_desc = [
        ByteEnumField("opcode", int(dta.Opcode.KEY_WRITE), _OPCODES),
        ByteField("seqnum", 0),
        BitField("immediate", 0, 1),
        BitField("retransmittable", 0, 1),
        BitField("reserved", 0, 6),
    ]


class DTAKeyWrite(Packet):
    """Key-Write (0x01): ``redundancy:8 key:32 data:32*k``, k from the remaining length."""

    name = "DTA Key-Write"
    fields_desc = [
        ByteField("redundancy", 1),
        IntField("key", 0),
        _WordList("data", [0], max_count=dta.MAX_KEYWRITE_WORDS),
    ]


class DTAAppend(Packet):
    """Append (0x02): ``list_id:32 data:32``."""

    name = "DTA Append"
    fields_desc = [IntField("list_id", 0), IntField("data", 0)]


class DTAKeyIncrement(Packet):
    """Key-Increment (0x03): ``redundancy:8 key:32 counter:64``."""

    name = "DTA Key-Increment"
    fields_desc = [ByteField("redundancy", 1), IntField("key", 0), LongField("counter", 0)]


class DTAPostcarder(Packet):
    """Postcarder (0x04, public implementation): ``key:32 hop:8 data:32``."""

    name = "DTA Postcarder"
    fields_desc = [IntField("key", 0), ByteField("hop", 0), IntField("data", 0)]


class DTASketchMerge(Packet):
    """Sketch-Merge (0x05, ours): ``reporter_id:16 sketch_id:16 column:32 rows:8 merge:8 counters:32*rows``."""

    name = "DTA Sketch-Merge"
    fields_desc = [
        ShortField("reporter_id", 0),
        ShortField("sketch_id", 0),
        IntField("column", 0),
        FieldLenField("rows", None, count_of="counters", fmt="B"),
        ByteEnumField("merge", int(dta.MergeFunction.SUM), _MERGES),
        _WordList("counters", [0], count_from=lambda pkt: pkt.rows, max_count=255),
    ]


class DTAPostcardSlot(Packet):
    """A Postcarding slot, the payload of the translator's WRITE (ours, not a report):
    ``checksum:32 present:32 hops:32*H``, H from the remaining length. Bound to nothing (an RDMA
    WRITE's payload is raw bytes to its reader): ``DTAPostcardSlot(bytes(pkt[RETH].payload))``."""

    name = "DTA Postcard slot"
    fields_desc = [
        XIntField("checksum", 0),
        XIntField("present", 0),
        _WordList("hops", [0] * 5, max_count=dta.MAX_POSTCARD_HOPS),
    ]


def _has_sketch_extension(pkt: Packet) -> bool:
    sketch: int = pkt.sketch
    return sketch == 1


class DTANack(Packet):
    """NACK (UDP 40044): ``seqnum:8 nack:1 sketch:1 reserved:6`` [+ ``reporter_id:16 sketch_id:16
    expected_column:32`` when ``sketch`` = 1]."""

    name = "DTA NACK"
    fields_desc = [
        ByteField("seqnum", 0),
        BitField("nack", 1, 1),
        BitField("sketch", 0, 1),
        BitField("reserved", 0, 6),
        ConditionalField(ShortField("reporter_id", None), _has_sketch_extension),
        ConditionalField(ShortField("sketch_id", None), _has_sketch_extension),
        ConditionalField(IntField("expected_column", None), _has_sketch_extension),
    ]


# Reports are recognised by destination port only: NACKs and replies may leave from 40040.
bind_layers(UDP, DTA, dport=int(UdpPort.DTA))
bind_layers(UDP, DTANack, dport=int(UdpPort.DTA_NACK))
bind_layers(DTA, DTAKeyWrite, opcode=int(dta.Opcode.KEY_WRITE))
bind_layers(DTA, DTAAppend, opcode=int(dta.Opcode.APPEND))
bind_layers(DTA, DTAKeyIncrement, opcode=int(dta.Opcode.KEY_INCREMENT))
bind_layers(DTA, DTAPostcarder, opcode=int(dta.Opcode.POSTCARDER))
bind_layers(DTA, DTASketchMerge, opcode=int(dta.Opcode.SKETCH_MERGE))


def sealed_report(frame: bytes | Packet) -> Packet:
    """An authenticated report frame (docs/wire-formats.md, DTA: the optional trailer) dissected
    as ``Ether/IP/UDP/DTA/<primitive>/NetstackAuth``.

    No header announces the trailer, so plain dissection reads it as part of the report (a
    Key-Write's ``data`` runs to the end of the UDP payload): this splits the UDP payload's last
    17 bytes off as :class:`~headers.layers.auth.NetstackAuth`. ``frame`` is the raw frame or a
    packet with a UDP layer (not modified). ValueError if the UDP payload is shorter than a
    trailer. Building needs no helper: ``.../DTA()/DTAAppend(...)/NetstackAuth(...)``.
    """
    pkt = Ether(frame) if isinstance(frame, bytes | bytearray) else frame.copy()
    if UDP not in pkt:
        raise ValueError("not a UDP frame")
    udp = pkt[UDP]
    payload = bytes(udp.payload)
    if len(payload) < TRAILER_LEN:
        raise ValueError(f"a {len(payload)}-byte UDP payload cannot end in a {TRAILER_LEN}-byte trailer")
    udp.remove_payload()
    udp.add_payload(DTA(payload[:-TRAILER_LEN]) / NetstackAuth(payload[-TRAILER_LEN:]))
    return pkt


#: Scapy layer of each codec record class (for generic codec-versus-Scapy tests).
LAYERS: dict[type, type[Packet]] = {
    dta.DTABase: DTA,
    dta.KeyWrite: DTAKeyWrite,
    dta.Append: DTAAppend,
    dta.KeyIncrement: DTAKeyIncrement,
    dta.Postcarder: DTAPostcarder,
    dta.SketchMerge: DTASketchMerge,
    dta.DTANack: DTANack,
}
