"""Scapy layers for T/C-SACK (UDP 40200); codec in :mod:`headers.tcsack`.

``TCSACK`` is what UDP dissects to when either port is 40200: it looks at the first byte
(``kind``) and becomes :class:`TcsData` (1) or :class:`TcsAck` (2); any other kind dissects
as Raw. Data goes to the receiver's port 40200; ACKs come back *from* 40200 to the sender's
port, hence the source-port binding. Building ``UDP()/TcsData()`` or ``UDP()/TcsAck()`` sets
both ports to 40200 unless given.

Field names and values equal the records' fields one to one; the layers add ``kind`` and,
for the ACK, ``n_blocks`` (filled from ``blocks`` when left unset) and ``reserved``, which
the records keep implicit. ``TcsAck.blocks`` holds a tuple of ``(start, end)`` tuples, the
record's own type, so ``layer.blocks == record.blocks``. A data packet's payload is Raw.
"""

from __future__ import annotations

import struct
from typing import Any

import scapy.layers.inet  # noqa: F401  (binds IP to Ether and UDP to IP so Ether(raw) reaches us)
from scapy.config import conf
from scapy.fields import ByteEnumField, ByteField, Field, FieldLenField, FlagsField, IntField, ShortField
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_bottom_up, bind_top_down

from headers.registry import UdpPort
from headers.tcsack import TcsKind

_KINDS = {k.value: k.name for k in TcsKind}
_BLOCK = struct.Struct("!II")

Blocks = tuple[tuple[int, int], ...]


class _SackBlocksField(Field[Blocks, bytes]):
    """``n_blocks`` blocks of ``start:32 | end:32``, held as a tuple of (start, end) tuples.

    Scapy's list fields hold lists, and a 2-tuple in a field is read as a value range when
    building; a tuple of tuples, handled here whole, matches the record exactly.
    """

    __slots__ = ["count_from"]

    def __init__(self, name: str, count_from: str) -> None:
        super().__init__(name, (), "!II")
        self.count_from = count_from

    def h2i(self, pkt: Packet | None, x: Any) -> Blocks:
        if x is None:
            return ()
        return tuple((int(s), int(e)) for s, e in x)

    def any2i(self, pkt: Packet | None, x: Any) -> Blocks:
        return self.h2i(pkt, x)

    def i2count(self, pkt: Packet | None, x: Blocks) -> int:
        return len(x) if x else 0

    def i2len(self, pkt: Packet, x: Blocks) -> int:
        return 8 * len(x) if x else 0

    def addfield(self, pkt: Packet, s: bytes, val: Blocks | None) -> bytes:
        return s + b"".join(_BLOCK.pack(start, end) for start, end in val or ())

    def getfield(self, pkt: Packet, s: bytes) -> tuple[bytes, Blocks]:
        n = min(getattr(pkt, self.count_from) or 0, len(s) // 8)  # a truncated capture: what is there
        return s[8 * n:], tuple(_BLOCK.iter_unpack(s[:8 * n]))

    def i2repr(self, pkt: Packet | None, x: Blocks) -> str:
        return "[" + ", ".join(f"[{s}, {e})" for s, e in x or ()) + "]"


class TCSACK(Packet):
    """Dispatcher: never instantiated itself; becomes TcsData or TcsAck from the kind byte."""

    name = "T/C-SACK"
    fields_desc = [ByteEnumField("kind", 0, _KINDS)]

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        if not _pkt:
            return TcsData
        kind = _pkt[0]
        if kind == TcsKind.DATA:
            return TcsData
        if kind == TcsKind.ACK:
            return TcsAck
        return conf.raw_layer


_DATA_FLAGS = ["RETX", "LAST", "PROBE", "R3", "R4", "R5", "R6", "R7"]
_ACK_FLAGS = ["TRIGGER_COUNT", "FIN_SEEN", "R2", "R3", "R4", "R5", "R6", "R7"]


class TcsData(Packet):
    name = "T/C-SACK data"
    fields_desc = [
        ByteEnumField("kind", int(TcsKind.DATA), _KINDS),
        FlagsField("flags", 0, 8, _DATA_FLAGS),
        ShortField("flow_id", 0),
        IntField("seq", 0),
        IntField("tsval", 0),
    ]

    def mysummary(self) -> str:
        return self.sprintf("T/C-SACK data flow=%flow_id% seq=%seq% %flags%")


class TcsAck(Packet):
    name = "T/C-SACK ACK"
    fields_desc = [
        ByteEnumField("kind", int(TcsKind.ACK), _KINDS),
        FlagsField("flags", 0, 8, _ACK_FLAGS),
        ShortField("flow_id", 0),
        IntField("ack_seq", 0),
        IntField("cum_ack", 0),
        IntField("tsecr", 0),
        FieldLenField("n_blocks", None, count_of="blocks", fmt="B"),
        ByteField("reserved", 0),
        ShortField("ack_delay", 0),
        _SackBlocksField("blocks", count_from="n_blocks"),
    ]

    def mysummary(self) -> str:
        return self.sprintf("T/C-SACK ACK flow=%flow_id% #%ack_seq% cum=%cum_ack% blocks=%blocks%")


for _port in ("sport", "dport"):
    bind_bottom_up(UDP, TCSACK, **{_port: int(UdpPort.TCSACK)})
bind_top_down(UDP, TcsData, sport=int(UdpPort.TCSACK), dport=int(UdpPort.TCSACK))
bind_top_down(UDP, TcsAck, sport=int(UdpPort.TCSACK), dport=int(UdpPort.TCSACK))
