"""The ethcount probe as a Scapy layer: for crafting frames by hand and reading captures, never
on the data path (Scapy builds a few thousand frames a second; the fast codec is :mod:`.header`).

``Ether(dst=..., src=...) / EthCountProbe(seq=7)`` builds with the default EtherType 0x88B5. The
layer is *not* bound for dissection (``Ether(raw)`` leaves the payload Raw): the counted EtherType
is a topology option, and 0x88B5 is the IEEE local experimental value other experiments use too.
Dissect a probe frame with :func:`dissect`, or ``EthCountProbe(frame[14:])``.

Field names and values equal the record's (:class:`.header.Probe`); the layer adds the fixed
``version`` and ``reserved``. The padding to the minimum frame follows as ``Padding``.
"""

from __future__ import annotations

from scapy.fields import ByteField, ShortField
from scapy.layers.l2 import Ether
from scapy.packet import Packet, bind_top_down

from .header import DEFAULT_ETHERTYPE, VERSION


class EthCountProbe(Packet):
    """An ethcount probe (fields as :class:`.header.Probe`)."""

    name = "ethcount probe"
    fields_desc = [
        ByteField("version", VERSION),
        ByteField("reserved", 0),
        ShortField("seq", 0),
    ]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        # nothing follows a probe but the frame's padding
        return b"", s

    def mysummary(self) -> str:
        return str(self.sprintf("ethcount probe seq=%seq%"))


def dissect(frame: bytes, ethertype: int = DEFAULT_ETHERTYPE) -> Packet:
    """``frame`` as Ether / EthCountProbe when its EtherType is ``ethertype``, else as Scapy reads it."""
    pkt = Ether(frame)
    if len(frame) >= 14 and pkt.type == ethertype:
        pkt.remove_payload()
        pkt.add_payload(EthCountProbe(frame[14:]))
    return pkt


# building Ether() / EthCountProbe() sets the EtherType (the other direction is left unbound, above)
bind_top_down(Ether, EthCountProbe, type=DEFAULT_ETHERTYPE)

__all__ = ["EthCountProbe", "dissect"]
