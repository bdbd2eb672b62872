"""Pure tests of LinkGuardian (netstack.linkguardian): params, engines, switch features.

Everything runs in virtual time (the fake ``now_ns`` passed in); nothing reads a clock.
Shared helpers live here.
"""

from __future__ import annotations

import struct

from headers.linkguardian import LGData, decode_tag, wrap

US = 1_000
MS = 1_000_000
GBPS = 1_000_000_000


H1_MAC = bytes.fromhex("020000000101")
H2_MAC = bytes.fromhex("020000000202")


def frame(i: int, size: int = 100) -> bytes:
    """A frame of ``size`` bytes (IEEE local experimental EtherType 0x88B5, not IP) carrying index
    ``i`` at bytes 18..25."""
    head = H2_MAC + H1_MAC + b"\x88\xb5" + b"LGS\x00" + struct.pack("!Q", i)
    return head + bytes(max(0, size - len(head)))


def index_of(inner: bytes) -> int:
    return int.from_bytes(inner[18:26], "big")


def data_tag(tagged: bytes) -> LGData:
    tag = decode_tag(tagged, 14)
    assert isinstance(tag, LGData)
    return tag


def stamp_for(counter: int, inner: bytes, *, retx: int = 0, dummy: int = 0, blocking: int = 1) -> bytes:
    """A data-tagged frame for absolute ``counter`` built with the header codec (not the engine)."""
    era, seq = wrap(counter)
    tag = LGData(seq_no=seq, next_type=int.from_bytes(inner[12:14], "big"), era=era, retx=retx, dummy=dummy,
                 blocking=blocking)
    return inner[:12] + b"\xab\xcd" + tag.to_bytes() + inner[14:]


__all__ = ["GBPS", "MS", "US", "data_tag", "frame", "index_of", "stamp_for"]
