"""The ethcount probe: a 4-byte payload for frames of the counted EtherType, and its fast codec.

The counter itself reads only the EtherType (:mod:`.engine`). The probe is what the scenario and
the live test put after it, so that a receiver can tell which frames arrived::

     0               1               2               3
    +---------------+---------------+-------------------------------+
    |  version = 1  | reserved = 0  |       seq (big endian)        |
    +---------------+---------------+-------------------------------+

``seq`` numbers the probes of a stream from 0 and wraps at 2**16. ``reserved`` is sent as 0 and
refused otherwise, so that a later version may give it a meaning. A frame is padded to the
60-byte minimum after the probe; the padding is not part of it.

The codec follows the project's header rules (docs/architecture.md "Engines are sans-IO",
:mod:`headers.record`): a precompiled ``struct.Struct``; a decoder that raises
:class:`headers.HeaderError` and nothing else, whatever the bytes; a record that is a tuple,
validated when code builds it and built straight from the bytes when the decoder has checked them.
The Scapy layer for the same bytes is :mod:`.layer`.
"""

from __future__ import annotations

import struct
from typing import ClassVar

from headers.errors import HeaderError, check_bits, need
from headers.record import field, new, record

#: IEEE 802 "Local Experimental EtherType 1": free for experiments like this one (a topology may
#: name another: the counter counts whichever it is given)
DEFAULT_ETHERTYPE = 0x88B5
VERSION = 1
_PROBE = struct.Struct("!BBH")  # version, reserved, seq
_ETH = struct.Struct("!6s6sH")
#: the shortest Ethernet frame without its FCS (headers.registry.MIN_FRAME)
MIN_FRAME = 60


@record
class Probe(tuple[int]):
    """An ethcount probe: its sequence number (the version and reserved byte are fixed)."""

    __slots__ = ()
    seq: int = field(0)

    SIZE: ClassVar[int] = _PROBE.size
    FIELDS: ClassVar[tuple[str, ...]] = ("seq",)

    def __new__(cls, seq: int) -> Probe:
        check_bits("ethcount probe", "seq", seq, 16)
        return new(cls, (seq,))

    def to_bytes(self) -> bytes:
        return _PROBE.pack(VERSION, 0, self.seq)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> Probe:
        """The probe at ``offset``; :class:`HeaderError` if the bytes are not one."""
        need("ethcount probe", data, offset, _PROBE.size)
        version, reserved, seq = _PROBE.unpack_from(data, offset)
        if version != VERSION:
            raise HeaderError("ethcount probe", f"version {version} (only {VERSION} is known)", offset)
        if reserved:
            raise HeaderError("ethcount probe", f"reserved byte is {reserved:#04x}, not 0", offset + 1)
        return new(cls, (seq,))


def probe_frame(dst: bytes, src: bytes, seq: int, ethertype: int = DEFAULT_ETHERTYPE) -> bytes:
    """A whole Ethernet frame (without FCS) carrying probe ``seq``, padded to 60 bytes."""
    if len(dst) != 6 or len(src) != 6:
        raise HeaderError("ethcount probe", "MAC addresses must be 6 bytes")
    check_bits("ethcount probe", "ethertype", ethertype, 16)
    buf = bytearray(MIN_FRAME)
    _ETH.pack_into(buf, 0, dst, src, ethertype)
    buf[14:14 + _PROBE.size] = Probe(seq).to_bytes()
    return bytes(buf)


def parse_probe_frame(frame: bytes | bytearray | memoryview) -> Probe:
    """The probe of a frame :func:`probe_frame` built (any EtherType); :class:`HeaderError` otherwise."""
    return Probe.from_bytes(frame, 14)


__all__ = ["DEFAULT_ETHERTYPE", "MIN_FRAME", "VERSION", "Probe", "parse_probe_frame", "probe_frame"]
