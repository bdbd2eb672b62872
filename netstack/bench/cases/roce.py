"""Benchmark cases for RoCEv2: each header (fast codec vs the Scapy layers, same values), and the
two whole frames DTA's data path handles, ICRC included (build_roce_frame / parse_roce_frame vs
Scapy building Ether/IP/UDP/BTH/... with contrib computing the ICRC, and ``Ether(raw)``)."""

from __future__ import annotations

import struct

from headers.record import field_values
from headers.roce import (
    AETH,
    BTH,
    RETH,
    AtomicAckETH,
    AtomicETH,
    ExtHeader,
    NakCode,
    Opcode,
    aeth_nak,
    build_roce_frame,
    parse_roce_frame,
)
from netstack.bench.common import Case

# What DTA's translator sends (docs/dta.md: P_Key 0xFFFF, MigReq 1) for a Key-Write slot:
# WRITE Only of an 8-byte slot (4-byte key checksum + 4-byte data), and the resync NAK back.
_WRITE_BTH = BTH(opcode=Opcode.RDMA_WRITE_ONLY, migreq=1, dqpn=0x000123, psn=0x00ABCD)
_RECORDS = (
    _WRITE_BTH,
    RETH(va=0x7F00_0000_1000, rkey=0x0000_1234, dma_len=8),
    AtomicETH(va=0x7F00_0000_2000, rkey=0x0000_1234, swap_add=1, compare=0),
    aeth_nak(NakCode.PSN_SEQUENCE_ERROR, msn=42),
    AtomicAckETH(orig_remote_data=0x1122_3344_5566_7788),
)
_MAC_A, _MAC_B = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
_IP_A, _IP_B = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
_SPORT = 49152
_SLOT = b"\x9a\xbc\xde\xf0\x00\x00\x00\x2a"


def _fields(record: object) -> dict[str, int]:
    return field_values(record)


# the baselines: each header's wire fields; a whole frame's are Ethernet, IPv4, UDP, BTH, the
# extended headers, the payload and the ICRC (read as a word; the CRC itself is not computed)
_FORMATS = {BTH: "BBHII", RETH: "QII", AtomicETH: "QIQQ", AETH: "I", AtomicAckETH: "Q"}
_FRAME_FORMAT = "!6s6sHBBHHHBBH4s4sHHHH"


def _header_case(record: BTH | ExtHeader) -> Case:
    from headers.layers import roce as layers

    cls = type(record)
    layer_cls = getattr(layers, cls.__name__)
    fields = _fields(record)
    values = tuple(fields.values())
    raw = record.to_bytes()
    buf = bytearray(42 + record.size())
    unpack = struct.Struct("!" + _FORMATS[cls]).unpack_from
    if cls is BTH:
        # contrib's BTH carries the ICRC as a trailer; icrc=0 skips computing it (no UDP below)
        extra = {"icrc": 0}
        raw_layer = raw + bytes(4)
    else:
        extra = {}
        raw_layer = raw
    assert bytes(layer_cls(**fields, **extra)) == raw_layer

    def encode() -> object:
        rec = cls(*values)
        rec.pack_into(buf, 42)
        return rec

    return Case(
        name=f"roce.{cls.__name__}",
        encode=encode,
        decode=lambda: cls.from_bytes(raw),
        scapy_build=lambda: bytes(layer_cls(**fields, **extra)),
        scapy_dissect=lambda: layer_cls(raw_layer),
        baseline=lambda: unpack(raw),
    )


def _frame_case(name: str, bth: BTH, ext: tuple[ExtHeader, ...], payload: bytes) -> Case:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    from headers.inet import ip_str, mac_str
    from headers.layers import roce as layers

    def scapy_build() -> bytes:
        pkt = (Ether(src=mac_str(_MAC_A), dst=mac_str(_MAC_B))
               / IP(src=ip_str(_IP_A), dst=ip_str(_IP_B), id=0, flags="DF")
               / UDP(sport=_SPORT, dport=4791, chksum=0) / layers.BTH(**_fields(bth)))
        for h in ext:
            pkt = pkt / getattr(layers, type(h).__name__)(**_fields(h))
        return bytes(pkt / Raw(payload) if payload else pkt)

    def encode() -> bytes:
        return build_roce_frame(_MAC_A, _MAC_B, _IP_A, _IP_B, _SPORT, bth, ext, payload)

    frame = encode()
    assert scapy_build() == frame and parse_roce_frame(frame).icrc_ok
    fmt = _FRAME_FORMAT + _FORMATS[BTH] + "".join(_FORMATS[type(h)] for h in ext) + f"{len(payload)}sI"
    assert struct.calcsize(fmt) == len(frame)
    unpack = struct.Struct(fmt).unpack_from
    return Case(
        name=name,
        encode=encode,
        decode=lambda: parse_roce_frame(frame),
        scapy_build=scapy_build,
        scapy_dissect=lambda: Ether(frame),
        baseline=lambda: unpack(frame),
    )


def cases() -> list[Case]:
    return [
        *(_header_case(r) for r in _RECORDS),
        _frame_case("roce.frame.WRITE_ONLY+ICRC", _WRITE_BTH, (_RECORDS[1],), _SLOT),
        _frame_case("roce.frame.ACKNOWLEDGE+ICRC", BTH(opcode=Opcode.ACKNOWLEDGE, dqpn=0x000456, psn=0x00ABCD),
                    (_RECORDS[3],), b""),
    ]
