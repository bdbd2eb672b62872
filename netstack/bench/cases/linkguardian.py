"""Benchmark cases for the LinkGuardian tags: fast codec vs the Scapy layers, same values."""

from __future__ import annotations

import struct

from headers.linkguardian import LGData, LGLeadingAck, LGLossNotification, LGTag, decode_tag
from headers.record import field_values
from netstack.bench.common import Case

# typical tags: a protected IPv4 frame, a piggybacked leading ACK, a loss notification on a courier
_RECORDS: tuple[LGTag, ...] = (
    LGData(seq_no=40000, next_type=0x0800, era=1, blocking=1),
    LGLeadingAck(leading_ack=39990, next_type=0x0800, era=1, piggybacked=1),
    LGLossNotification(leading_ack=39995, hole_size=2, first_lost_seq=39992, next_type=0, era=1),
)


def _case(record: LGTag) -> Case:
    from headers.layers import linkguardian as layers

    layer_cls = getattr(layers, type(record).__name__)
    fields = field_values(record)
    raw = record.to_bytes()
    # the baseline: the tag's wire fields (type/flags byte, seq_no or ACK, [hole, first lost,] next_type)
    unpack = struct.Struct("!BHBHH" if isinstance(record, LGLossNotification) else "!BHH").unpack_from
    cls = type(record)
    buf = bytearray(64)
    values = tuple(fields.values())
    assert bytes(layer_cls(**fields)) == raw

    def encode() -> object:
        rec = cls(*values)
        rec.pack_into(buf, 14)
        return rec

    return Case(
        name=f"linkguardian.{cls.__name__}",
        encode=encode,
        decode=lambda: decode_tag(raw),
        scapy_build=lambda: bytes(layer_cls(**fields)),
        scapy_dissect=lambda: layers.LinkGuardian(raw),
        baseline=lambda: unpack(raw),
    )


def cases() -> list[Case]:
    return [_case(r) for r in _RECORDS]
