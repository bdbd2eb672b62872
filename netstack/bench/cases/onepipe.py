"""Benchmark case for the 1Pipe header: fast codec vs the Scapy layer, same values."""

from __future__ import annotations

import struct

from headers.onepipe import OnePipeFlag, OnePipeHeader, OnePipeOpcode
from headers.record import field_values
from netstack.bench.common import Case

# a typical best-effort fragment: the last one of a message, timestamps near the 2^48 wrap
_RECORD = OnePipeHeader(
    msg_ts=(1 << 48) - 5_000, be_barrier=(1 << 48) - 7_500, commit_barrier=(1 << 48) - 20_000,
    psn=123_456, opcode=OnePipeOpcode.DATA, flags=OnePipeFlag.EOM,
)


def cases() -> list[Case]:
    from headers.layers.onepipe import OnePipe

    fields = field_values(_RECORD)
    # the baseline: the header's wire fields (48-bit timestamps as 16 + 32 bits, psn, opcode, flags)
    unpack = struct.Struct("!HIHIHIIBB").unpack_from
    values = tuple(fields.values())
    raw = _RECORD.to_bytes()
    buf = bytearray(42 + 24 + 64)  # Ethernet/IPv4/UDP in front, as a daemon's send buffer
    assert bytes(OnePipe(**fields)) == raw

    def encode() -> object:
        rec = OnePipeHeader(*values)
        rec.pack_into(buf, 42)
        return rec

    return [Case(
        name="onepipe.OnePipeHeader",
        encode=encode,
        decode=lambda: OnePipeHeader.from_bytes(raw),
        scapy_build=lambda: bytes(OnePipe(**fields)),
        scapy_dissect=lambda: OnePipe(raw),
        baseline=lambda: unpack(raw),
    )]
