"""Pure tests of LinkGuardian (netstack.linkguardian): params, engines, switch features.

Everything runs in virtual time (the fake ``now_ns`` passed in); nothing reads a clock.
Shared helpers live here.
"""

from __future__ import annotations

from headers.linkguardian import LGData, decode_tag, wrap
from netstack.linkguardian.sim import stream_frame

US = 1_000
MS = 1_000_000
GBPS = 1_000_000_000


def frame(i: int, size: int = 100) -> bytes:
    """A stream frame (EtherType 0x88B5) carrying index ``i``."""
    return stream_frame(i, size)


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
