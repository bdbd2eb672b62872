"""The optional authentication trailer: ``key_id:8 | era:32 | seq:32 | mac:64`` (17 bytes, network order).

A protocol that authenticates its frames appends this trailer to the bytes it protects
(``netstack.auth.frame.Sealer``). The MAC covers the protected bytes *and* the first
:data:`AUTH_INPUT_LEN` bytes of the trailer, so a sealed frame is ``data || key_id || era || seq || mac``
and the MAC input is exactly everything but the last :data:`MAC_LEN` bytes: a receiver hands one
contiguous slice to the MAC, no copy.

The trailer sits at the *end* (not after a header) so that it can be added to any existing
frame layout without moving a field; it is found from the end, hence ``decode_trailer(buf, end)``
reads the last 17 bytes before ``end``. Whether a frame carries one is a property of the link or
deployment (keys configured), never signalled in-band: an in-band "authenticated" flag would let
an attacker strip the trailer and clear the flag.

This codec checks only the layout; which key ids exist and whether the MAC is right is
:mod:`netstack.auth`'s job (headers import nothing of netstack).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import ClassVar

from .errors import HeaderError, check_bits

#: the authenticated part of the trailer: key_id, era, seq
AUTH_INPUT = struct.Struct("!BII")
#: the whole trailer; the MAC is the 8-byte string at the end
TRAILER = struct.Struct("!BII8s")
AUTH_INPUT_LEN = AUTH_INPUT.size
MAC_LEN = 8
TRAILER_LEN = TRAILER.size
assert (AUTH_INPUT_LEN, TRAILER_LEN) == (9, 17)


@dataclass(frozen=True, slots=True)
class AuthTrailer:
    """One trailer. ``key_id`` names the key (1..255 in key files; 0 is representable), ``era`` and
    ``seq`` are the sender's replay counter (a restarted sender uses a newer era) and ``mac`` is
    the first 8 bytes of AES-CMAC over the protected data and the 9 bytes before it."""

    key_id: int
    era: int
    seq: int
    mac: bytes

    SIZE: ClassVar[int] = TRAILER_LEN

    def __post_init__(self) -> None:
        check_bits("AuthTrailer", "key_id", self.key_id, 8)
        check_bits("AuthTrailer", "era", self.era, 32)
        check_bits("AuthTrailer", "seq", self.seq, 32)
        if not isinstance(self.mac, bytes) or len(self.mac) != MAC_LEN:
            raise HeaderError("AuthTrailer", f"mac must be {MAC_LEN} bytes")

    def auth_input(self) -> bytes:
        """The 9 authenticated bytes (key_id, era, seq) that follow the data in the MAC input."""
        return AUTH_INPUT.pack(self.key_id, self.era, self.seq)

    def encode(self) -> bytes:
        return TRAILER.pack(self.key_id, self.era, self.seq, self.mac)


def decode_trailer(buf: bytes | bytearray | memoryview, end: int | None = None) -> AuthTrailer:
    """The trailer in the last 17 bytes of ``buf[:end]`` (``end`` defaults to ``len(buf)``).

    Raises :class:`HeaderError` when fewer than 17 bytes precede ``end`` or ``end`` is not a
    position in ``buf``; every field value is valid, so nothing else can go wrong.
    """
    if end is None:
        end = len(buf)
    elif isinstance(end, bool) or not isinstance(end, int) or not 0 <= end <= len(buf):
        raise HeaderError("AuthTrailer", f"end={end!r} is not a position in a {len(buf)}-byte buffer")
    if end < TRAILER_LEN:
        raise HeaderError("AuthTrailer", f"truncated: need {TRAILER_LEN} bytes, have {end}", 0)
    key_id, era, seq, mac = TRAILER.unpack_from(buf, end - TRAILER_LEN)
    return AuthTrailer(key_id, era, seq, mac)
