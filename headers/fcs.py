"""Software FCS: the CRC32 trailer that emulates the MAC's frame check on veth links.

veth carries no Ethernet FCS, so a frame corrupted in the kernel (nft byte overwrite or
netem corrupt) would arrive as plausible garbage. Switch-to-switch links therefore carry
the IEEE 802.3 CRC32 as a 4-byte little-endian trailer (the order a real MAC transmits
it); the receiving port checks it and drops failures, which turns corruption into
corruption *loss* exactly as on the optical links of LinkGuardian §2.
"""

from __future__ import annotations

import struct
import zlib

from .errors import HeaderError
from .registry import FCS_LEN

_LE32 = struct.Struct("<I")

#: CRC32 of a frame with its own (correct) FCS appended: the 802.3 residue. Checking
#: ``crc32(frame_with_fcs) == FCS_RESIDUE`` avoids slicing on the data path.
FCS_RESIDUE = 0x2144DF1C


def fcs(frame: bytes | bytearray | memoryview) -> int:
    """The 802.3 FCS value of ``frame`` (without trailer)."""
    return zlib.crc32(frame) & 0xFFFFFFFF


def append_fcs(frame: bytes | bytearray | memoryview) -> bytes:
    """Return ``frame`` followed by its 4-byte FCS trailer."""
    return bytes(frame) + _LE32.pack(zlib.crc32(frame) & 0xFFFFFFFF)


def fcs_ok(frame_with_fcs: bytes | bytearray | memoryview) -> bool:
    """True when the last 4 bytes are the correct FCS of the rest."""
    return len(frame_with_fcs) > FCS_LEN and zlib.crc32(frame_with_fcs) & 0xFFFFFFFF == FCS_RESIDUE


def strip_fcs(frame_with_fcs: bytes | bytearray | memoryview) -> bytes:
    """Check and remove the trailer; raise :class:`HeaderError` on a mismatch."""
    n = len(frame_with_fcs)
    if n <= FCS_LEN:
        raise HeaderError("FCS", f"frame of {n} bytes is too short to carry an FCS", 0)
    if zlib.crc32(frame_with_fcs) & 0xFFFFFFFF != FCS_RESIDUE:
        got = _LE32.unpack_from(frame_with_fcs, n - FCS_LEN)[0]
        want = zlib.crc32(memoryview(frame_with_fcs)[: n - FCS_LEN]) & 0xFFFFFFFF
        raise HeaderError("FCS", f"mismatch: trailer {got:#010x}, computed {want:#010x}", n - FCS_LEN)
    return bytes(memoryview(frame_with_fcs)[: n - FCS_LEN])
