"""Benchmark cases for DTA reports and NACKs: fast codec vs the Scapy layers, same values.

A primitive is measured as a whole report (base header + primitive), which is what a
translator decodes per packet: ``decode_report`` against Scapy's ``DTA`` layer dissecting
down to the primitive, and record construction + ``pack_report_into`` against
``bytes(DTA(...)/Primitive(...))``.
"""

from __future__ import annotations

import struct
from typing import Any

from headers.dta import (
    Append,
    DTABase,
    DTANack,
    KeyIncrement,
    KeyWrite,
    MergeFunction,
    Postcarder,
    Primitive,
    SketchMerge,
    decode_report,
    pack_report_into,
)
from headers.record import field_values
from netstack.bench.common import Case

# typical reports: the public generators' Key-Write (k = 1) and a 7-word one, an INT
# congestion event appended to a list, a flow counter, a postcard, a 5-row sketch column
_PRIMITIVES: tuple[tuple[str, Primitive], ...] = (
    ("KeyWrite(k=1)", KeyWrite(redundancy=4, key=0x0A000001, data=(1,))),
    ("KeyWrite(k=7)", KeyWrite(redundancy=2, key=0x0A000001, data=(1, 2, 3, 4, 5, 6, 7))),
    ("Append", Append(list_id=3, data=0xCAFEF00D)),
    ("KeyIncrement", KeyIncrement(redundancy=4, key=0x0A000001, counter=1500)),
    ("Postcarder", Postcarder(key=0x12345678, hop=2, data=0x0000BEEF)),
    ("SketchMerge(rows=5)", SketchMerge.for_column(reporter_id=7, sketch_id=1, column=42,
                                                   counters=(10, 20, 30, 40, 50), merge=MergeFunction.SUM)),
)

_NACKS: tuple[tuple[str, DTANack], ...] = (
    ("DTANack", DTANack(seqnum=41)),
    ("DTANack(sketch)", DTANack.for_sketch(seqnum=41, reporter_id=7, sketch_id=1, expected_column=6)),
)


def _fields(record: Any) -> dict[str, Any]:
    return field_values(record)


# the baselines: each primitive's wire fields after the base header's "!BBB", in one struct
_PRIMITIVE_FORMATS = {KeyWrite: "BI{n}I", Append: "II", KeyIncrement: "BIQ", Postcarder: "IBI",
                      SketchMerge: "HHIBB{n}I"}


def _report_format(primitive: Primitive) -> str:
    n = len(primitive.data) if isinstance(primitive, KeyWrite) else getattr(primitive, "rows", 0)
    return "!BBB" + _PRIMITIVE_FORMATS[type(primitive)].format(n=n)


def _report_case(label: str, primitive: Primitive) -> Case:
    from headers.layers import dta as layers

    base = DTABase.of(primitive, seqnum=17, retransmittable=1)
    base_fields = _fields(base)
    prim_fields = _fields(primitive)
    layer_cls = layers.LAYERS[type(primitive)]
    buf = bytearray(3 + primitive.size())
    pack_report_into(buf, 0, base, primitive)
    raw = bytes(buf)
    assert bytes(layers.DTA(**base_fields) / layer_cls(**prim_fields)) == raw
    cls = type(primitive)
    unpack = struct.Struct(_report_format(primitive)).unpack_from
    assert struct.calcsize(_report_format(primitive)) == len(raw)
    base_values = tuple(base_fields.values())
    prim_values = tuple(prim_fields.values())

    def encode() -> object:
        rec = cls(*prim_values)
        return pack_report_into(buf, 0, DTABase(*base_values), rec)

    return Case(
        name=f"dta.{label}",
        encode=encode,
        decode=lambda: decode_report(raw, 0, len(raw)),
        scapy_build=lambda: bytes(layers.DTA(**base_fields) / layer_cls(**prim_fields)),
        scapy_dissect=lambda: layers.DTA(raw),
        baseline=lambda: unpack(raw),
    )


def _record_case(label: str, record: DTABase | DTANack) -> Case:
    from headers.layers import dta as layers

    fields = _fields(record)
    layer_cls = layers.LAYERS[type(record)]
    raw = record.to_bytes()
    assert bytes(layer_cls(**fields)) == raw
    cls = type(record)
    values = tuple(fields.values())
    buf = bytearray(16)
    # the baseline: the wire fields (a NACK's sketch extension when it has one)
    fmt = "!BBB" if cls is DTABase else ("!BBHHI" if fields.get("sketch") else "!BB")
    assert struct.calcsize(fmt) == len(raw)
    unpack = struct.Struct(fmt).unpack_from

    def encode() -> object:
        return cls(*values).pack_into(buf, 0)

    return Case(
        name=f"dta.{label}",
        encode=encode,
        decode=lambda: cls.from_bytes(raw),
        scapy_build=lambda: bytes(layer_cls(**fields)),
        scapy_dissect=lambda: layer_cls(raw),
        baseline=lambda: unpack(raw),
    )


def cases() -> list[Case]:
    found = [_record_case("DTABase", DTABase(opcode=1, seqnum=17, retransmittable=1))]
    found += [_report_case(label, p) for label, p in _PRIMITIVES]
    found += [_record_case(label, n) for label, n in _NACKS]
    return found
