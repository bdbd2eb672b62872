"""Benchmark cases for T/C-SACK data and ACK headers: fast codec vs the Scapy layers, same values."""

from __future__ import annotations

import struct

from headers.record import field_values
from headers.tcsack import TcsAck, TcsAckFlag, TcsData, TcsDataFlag, decode_tcsack
from netstack.bench.common import Case

# a retransmitted data packet, and a count-triggered ACK reporting four holes (five blocks)
_RECORDS: tuple[TcsData | TcsAck, ...] = (
    TcsData(flow_id=3, seq=1_000_017, tsval=987_654_321, flags=TcsDataFlag.RETX),
    TcsAck(flow_id=3, ack_seq=4242, cum_ack=1_000_000, tsecr=987_654_000, flags=TcsAckFlag.TRIGGER_COUNT,
           ack_delay=350, blocks=tuple((1_000_000 + 10 * i + 2, 1_000_000 + 10 * i + 9) for i in range(5))),
)


def _case(record: TcsData | TcsAck) -> Case:
    from headers.layers import tcsack as layers

    cls = type(record)
    layer_cls = getattr(layers, cls.__name__)
    fields = field_values(record)
    # the baseline: the message's wire fields (an ACK's fixed part and its blocks in one struct)
    fmt = "!BBHII" if cls is TcsData else f"!BBHIIIBBH{2 * len(fields['blocks'])}I"
    unpack = struct.Struct(fmt).unpack_from
    values = tuple(fields.values())
    raw = record.to_bytes()
    buf = bytearray(42 + record.size() + 64)
    assert bytes(layer_cls(**fields)) == raw

    def encode() -> object:
        rec = cls(*values)
        rec.pack_into(buf, 42)
        return rec

    return Case(
        name=f"tcsack.{cls.__name__}",
        encode=encode,
        decode=lambda: decode_tcsack(raw),
        scapy_build=lambda: bytes(layer_cls(**fields)),
        scapy_dissect=lambda: layers.TCSACK(raw),
        baseline=lambda: unpack(raw),
    )


def cases() -> list[Case]:
    return [_case(r) for r in _RECORDS]
