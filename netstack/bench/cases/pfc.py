"""Benchmark case for 802.1Qbb PFC frames: fast codec vs scapy.contrib.mac_control, same frame."""

from __future__ import annotations

import struct

from headers.pfc import MAX_QUANTA, build_pfc_frame, parse_pfc_frame
from headers.registry import PFC_DST_MAC
from netstack.bench.common import Case

_SRC = bytes.fromhex("020000000001")
_CLASS_ENABLE = 0b10  # LinkGuardian pauses the sender's normal (class 1) queue
_QUANTA = (0, MAX_QUANTA, 0, 0, 0, 0, 0, 0)


def cases() -> list[Case]:
    from scapy.layers.l2 import Ether

    from headers.layers.pfc import pfc_frame

    # the baseline: the frame's wire fields (addresses, EtherType, opcode, enable vector, 8 quanta)
    unpack = struct.Struct("!6s6sHHH8H").unpack_from
    frame = build_pfc_frame(_SRC, _CLASS_ENABLE, _QUANTA, PFC_DST_MAC)
    assert bytes(pfc_frame(_SRC, _CLASS_ENABLE, _QUANTA, PFC_DST_MAC)) == frame
    return [
        Case(
            name="pfc.PFCFrame",
            encode=lambda: build_pfc_frame(_SRC, _CLASS_ENABLE, _QUANTA, PFC_DST_MAC),
            decode=lambda: parse_pfc_frame(frame),
            scapy_build=lambda: bytes(pfc_frame(_SRC, _CLASS_ENABLE, _QUANTA, PFC_DST_MAC)),
            scapy_dissect=lambda: Ether(frame),
            baseline=lambda: unpack(frame),
        )
    ]
