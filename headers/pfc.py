"""IEEE 802.1Qbb priority-based flow control (PFC) frames: the fast codec.

LinkGuardian's receiver throttles the sender's *normal* queue with real PFC pause/resume
frames (LinkGuardian §3.3 Algorithm 2 and §3.5 "Backpressuring the normal packet queue"); TCD
(docs/papers.md "TCD") observes the same frames. A PFC frame is an 802.3 MAC control frame:

    Ethernet (dst 01:80:C2:00:00:01, EtherType 0x8808) | opcode 0x0101 |
    class_enable_vector:16 | 8 x quanta:16 | zero padding to the 60-byte minimum frame

:class:`PFCFrame` encodes the MAC control payload from the opcode onwards (20 bytes);
:func:`build_pfc_frame` / :meth:`PFCFrame.to_frame` add the Ethernet header and padding.

The upper octet of the class-enable vector is reserved: sent as zero and, as 802.1Qbb
asks, ignored on receipt, so :attr:`PFCFrame.class_enable` is the 8-bit lower octet (bit i
= priority class i). A quanta value for a class whose enable bit is clear means nothing to
the receiver; we still carry it unchanged so that decode/encode is lossless.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import ClassVar

from .errors import HeaderError, check_bits, need
from .record import field, new, record
from .registry import MIN_FRAME, PFC_DST_MAC, EtherType

#: 802.3 MAC control opcode of a class-based (priority) flow control frame.
PFC_OPCODE = 0x0101
#: Number of priority classes (802.1p priorities) a PFC frame addresses.
PFC_CLASSES = 8
#: One pause quantum is 512 bit times (802.3 Annex 31B / 802.1Qbb).
BIT_TIMES_PER_QUANTUM = 512
#: The largest pause (802.1Qbb has no "forever"; senders refresh a pause before it expires).
MAX_QUANTA = 0xFFFF

_PAYLOAD = struct.Struct("!HH8H")
_ETH = struct.Struct("!6s6sH")
_ZERO_QUANTA = (0,) * PFC_CLASSES


@record
class PFCFrame(tuple[int, tuple[int, ...]]):
    """The MAC control payload of a PFC frame: which classes, and for how long.

    ``quanta[i]`` is the pause time of class ``i`` in 512-bit-time quanta; 0 resumes it
    immediately (Algorithm 2's *resume*), 0xFFFF is LinkGuardian's *pause*.
    A list is accepted for ``quanta`` and stored as a tuple.
    """

    __slots__ = ()

    class_enable: int = field(0)
    quanta: tuple[int, ...] = field(1)

    SIZE: ClassVar[int] = 20
    FIELDS: ClassVar[tuple[str, ...]] = ("class_enable", "quanta")

    def __new__(cls, class_enable: int, quanta: tuple[int, ...] | list[int] = _ZERO_QUANTA) -> PFCFrame:
        check_bits("PFC", "class_enable", class_enable, 8)
        if isinstance(quanta, list):
            quanta = tuple(quanta)
        if not isinstance(quanta, tuple) or len(quanta) != PFC_CLASSES:
            raise HeaderError("PFC", f"quanta must be a tuple of {PFC_CLASSES} ints, got {quanta!r}")
        for i, q in enumerate(quanta):
            check_bits("PFC", f"quanta[{i}]", q, 16)
        return new(cls, (class_enable, quanta))

    @property
    def classes(self) -> tuple[int, ...]:
        """The enabled priority classes, lowest first."""
        return vector_to_classes(self.class_enable)

    def size(self) -> int:
        return 20

    def to_bytes(self) -> bytes:
        return _PAYLOAD.pack(PFC_OPCODE, self.class_enable, *self.quanta)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        need("PFC", buf, offset, 20)
        _PAYLOAD.pack_into(buf, offset, PFC_OPCODE, self.class_enable, *self.quanta)
        return 20

    def to_frame(self, dst: bytes = PFC_DST_MAC, src: bytes = b"\0" * 6) -> bytes:
        """The whole 60-byte Ethernet frame (without FCS; see :mod:`headers.fcs`)."""
        if len(dst) != 6 or len(src) != 6:
            raise HeaderError("PFC", "MAC addresses must be 6 bytes")
        buf = bytearray(MIN_FRAME)
        _ETH.pack_into(buf, 0, dst, src, EtherType.MAC_CONTROL)
        _PAYLOAD.pack_into(buf, 14, PFC_OPCODE, self.class_enable, *self.quanta)
        return bytes(buf)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> PFCFrame:
        need("PFC", data, offset, 20)
        t = _PAYLOAD.unpack_from(data, offset)
        if t[0] != PFC_OPCODE:
            raise HeaderError("PFC", f"MAC control opcode {t[0]:#06x} is not PFC ({PFC_OPCODE:#06x})", offset)
        # the reserved upper octet of the enable vector is ignored on receipt (802.1Qbb)
        return new(cls, (t[1] & 0xFF, t[2:]))


HEADERS = (PFCFrame,)


def classes_to_vector(classes: Iterable[int]) -> int:
    """The class-enable vector with bit ``i`` set for every class ``i`` in ``classes``."""
    vector = 0
    for c in classes:
        if not isinstance(c, int) or not 0 <= c < PFC_CLASSES:
            raise HeaderError("PFC", f"priority class {c!r} outside 0..{PFC_CLASSES - 1}")
        vector |= 1 << c
    return vector


def vector_to_classes(vector: int) -> tuple[int, ...]:
    """The classes whose bit is set in a class-enable vector, lowest first."""
    return tuple(i for i in range(PFC_CLASSES) if vector >> i & 1)


def build_pfc_frame(
    src_mac: bytes, class_enable: int, quanta: Sequence[int], dst_mac: bytes = PFC_DST_MAC
) -> bytes:
    """A 60-byte PFC frame (14-byte Ethernet header + 46-byte padded MAC control payload).

    Use the peer's unicast MAC as ``dst_mac`` wherever a Linux bridge sits on the link:
    bridges drop frames to the reserved group address (docs/architecture.md "The live runtime").
    """
    return PFCFrame(class_enable, tuple(quanta)).to_frame(dst_mac, src_mac)


def parse_pfc_frame(frame: bytes | bytearray | memoryview, offset: int = 0) -> PFCFrame:
    """Decode an Ethernet frame holding PFC; :class:`HeaderError` unless 0x8808 + opcode 0x0101.

    The destination MAC is not checked (PFC may be unicast to the peer) and trailing
    padding is ignored.
    """
    if offset >= 0 and len(frame) - offset >= 34:
        # one unpack from the EtherType on (issue 19); the checks below are what the bytes can get wrong
        t = _ETYPE_PAYLOAD(frame, offset + 12)
        if t[0] == _MAC_CONTROL and t[1] == PFC_OPCODE:
            return new(PFCFrame, (t[2] & 0xFF, t[3:]))
    need("PFC", frame, offset, 14 + 20)
    etype = struct.unpack_from("!H", frame, offset + 12)[0]
    if etype != EtherType.MAC_CONTROL:
        raise HeaderError("PFC", f"EtherType {etype:#06x} is not MAC control (0x8808)", offset + 12)
    return PFCFrame.from_bytes(frame, offset + 14)


_ETYPE_PAYLOAD = struct.Struct("!HHH8H").unpack_from
_MAC_CONTROL = int(EtherType.MAC_CONTROL)


def pause_frame(
    src_mac: bytes, classes: Iterable[int], quanta: int = MAX_QUANTA, dst_mac: bytes = PFC_DST_MAC
) -> bytes:
    """Pause ``classes`` for ``quanta`` (others untouched): LinkGuardian pauses class 1 with 0xFFFF."""
    vector = classes_to_vector(classes)
    check_bits("PFC", "quanta", quanta, 16)
    return build_pfc_frame(src_mac, vector, [quanta if vector >> i & 1 else 0 for i in range(PFC_CLASSES)],
                           dst_mac)


def resume_frame(src_mac: bytes, classes: Iterable[int], dst_mac: bytes = PFC_DST_MAC) -> bytes:
    """Resume ``classes`` at once: enabled with a pause time of 0 quanta."""
    return pause_frame(src_mac, classes, 0, dst_mac)


def quanta_to_ns(quanta: int, link_rate_bps: int | float) -> int:
    """Pause duration of ``quanta`` on a link of ``link_rate_bps``, in ns, rounded up.

    A quantum is 512 bit times *of the link that carries the frame*. In netstack that is
    the emulated (paced) rate of the switch port, not the veth's, which has no rate: a
    pause of 0xFFFF quanta lasts 335 us at 100 Gb/s but 33.5 ms on a port paced at 1 Gb/s.
    """
    check_bits("PFC", "quanta", quanta, 16)
    if not isinstance(link_rate_bps, int | float) or not link_rate_bps > 0:
        raise HeaderError("PFC", f"link rate {link_rate_bps!r} b/s must be positive")
    bits = quanta * BIT_TIMES_PER_QUANTUM
    if isinstance(link_rate_bps, int):
        return -(-bits * 1_000_000_000 // link_rate_bps)
    return int(-(-bits * 1e9 // link_rate_bps))
