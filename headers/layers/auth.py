"""Scapy layer for the authentication trailer; codec in :mod:`headers.auth`.

``NetstackAuth`` is the 17-byte ``key_id:8 | era:32 | seq:32 | mac:64`` trailer. It is bound to
nothing: the trailer ends a frame and no header announces it (see :mod:`headers.auth`), so build
it by appending (``Ether()/IP()/UDP()/Raw(b"...")/NetstackAuth(...)``) and dissect it from the
last 17 bytes (``NetstackAuth(raw[-17:])``). Field names and values equal
:class:`headers.auth.AuthTrailer`'s; ``mac`` is 8 bytes. To craft a *valid* trailer, compute
the MAC with ``netstack.auth.frame.mac`` over the bytes before it.
"""

from __future__ import annotations

from typing import ClassVar

from scapy.fields import AnyField, ByteField, IntField, XStrFixedLenField
from scapy.packet import Packet

from headers.auth import MAC_LEN


class NetstackAuth(Packet):
    """The authentication trailer: key_id, era, seq, mac (8 bytes)."""

    name = "netstack auth trailer"
    fields_desc: ClassVar[list[AnyField]] = [
        ByteField("key_id", 0),
        IntField("era", 0),
        IntField("seq", 0),
        XStrFixedLenField("mac", b"\x00" * MAC_LEN, MAC_LEN),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes | None]:
        # nothing follows a trailer: whatever is left over is padding, not a payload
        return b"", s
