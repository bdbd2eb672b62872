"""Scapy layers for the LinkGuardian tags (EtherType 0xABCD); codec in :mod:`headers.linkguardian`.

``LinkGuardian`` is bound to Ether (and Dot1Q) type 0xABCD for dissection and dispatches on
the first two bits to :class:`LGData`, :class:`LGLeadingAck` or :class:`LGLossNotification`
(type 11, the sender-internal buffered copy, dissects as Raw). Each tag chooses its payload
from ``next_type`` exactly as Ether chooses from ``type`` (a lookup in ``Ether.payload_guess``),
so IPv4, ARP, IPv6, PFC and stacked tags all dissect; ``next_type == 0`` means nothing
follows and any remaining bytes are Ethernet padding.

Field names and values equal the codec records' fields; the layers add the ``type`` and
``pad`` bits, which the records keep implicit. Leaving ``next_type`` unset when building
fills it from the payload like Ether's ``type`` (0 when there is no payload).
"""

from __future__ import annotations

from typing import Any, ClassVar

from scapy.config import conf
from scapy.data import ETHER_TYPES
from scapy.fields import AnyField, BitEnumField, BitField, ByteField, ShortField, XShortEnumField

# imported for their bindings: IP and IPv6 on Ether, so next_type 0x0800 / 0x86DD dissect
from scapy.layers import inet, inet6  # noqa: F401
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import Packet, bind_bottom_up, bind_top_down

from headers.linkguardian import LGType
from headers.registry import EtherType

ETHER_TYPES[EtherType.LINKGUARDIAN] = "LinkGuardian"

_TYPE_NAMES = {t.value: t.name.lower() for t in LGType}


def _ether_type_of(payload: Packet) -> int:
    """The EtherType Ether would stamp for ``payload`` (0: nothing identifiable follows)."""
    if not payload:
        return 0
    return int(payload.overload_fields.get(Ether, {}).get("type", 0))


def _class_for(next_type: int) -> type[Packet]:
    """The layer Ether would dissect after ``type == next_type``."""
    if not next_type:
        return conf.padding_layer
    for fval, cls in Ether.payload_guess:
        if len(fval) == 1 and fval.get("type") == next_type:
            return cls
    return conf.raw_layer


class _NextTypeField(XShortEnumField):
    """``next_type``; ``None`` is filled in from the payload at build time."""

    def __init__(self, name: str) -> None:
        super().__init__(name, None, ETHER_TYPES)

    def i2m(self, pkt: Packet | None, x: Any) -> int:
        if x is None:
            x = _ether_type_of(pkt.payload) if pkt is not None else 0
        return int(super().i2m(pkt, x))


class LinkGuardian(Packet):
    """Any LinkGuardian tag: dissects into the concrete class named by the 2 type bits."""

    name = "LinkGuardian"
    fields_desc: ClassVar[list[AnyField]] = []

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        if _pkt:
            return _BY_TYPE.get(_pkt[0] >> 6, conf.raw_layer)
        return cls

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if "next_type" not in self.fields and "next_type" not in self.default_fields:
            return conf.raw_layer  # the bare base layer has no fields
        return _class_for(self.next_type)


class LGData(LinkGuardian):
    """Data tag (§3.5): type 00, pad, era, retx, dummy, blocking, rx_buffered, seq_no."""

    name = "LinkGuardian data"
    fields_desc = [
        BitEnumField("type", LGType.DATA, 2, _TYPE_NAMES),
        BitField("pad", 0, 1),
        BitField("era", 0, 1),
        BitField("retx", 0, 1),
        BitField("dummy", 0, 1),
        BitField("blocking", 1, 1),
        BitField("rx_buffered", 0, 1),
        ShortField("seq_no", 0),
        _NextTypeField("next_type"),
    ]


class LGLeadingAck(LinkGuardian):
    """Leading-ACK tag (§3.1): type 01, piggybacked, era, pad:4, leading_ack."""

    name = "LinkGuardian leading ACK"
    fields_desc = [
        BitEnumField("type", LGType.LEADING_ACK, 2, _TYPE_NAMES),
        BitField("piggybacked", 0, 1),
        BitField("era", 0, 1),
        BitField("pad", 0, 4),
        ShortField("leading_ack", 0),
        _NextTypeField("next_type"),
    ]


class LGLossNotification(LinkGuardian):
    """Loss notification: type 10, the leading-ACK fields, hole_size, first_lost_seq."""

    name = "LinkGuardian loss notification"
    fields_desc = [
        BitEnumField("type", LGType.LOSS_NOTIFICATION, 2, _TYPE_NAMES),
        BitField("piggybacked", 0, 1),
        BitField("era", 0, 1),
        BitField("pad", 0, 4),
        ShortField("leading_ack", 0),
        ByteField("hole_size", 1),
        ShortField("first_lost_seq", 0),
        _NextTypeField("next_type"),
    ]


_BY_TYPE: dict[int, type[Packet]] = {
    LGType.DATA: LGData,
    LGType.LEADING_ACK: LGLeadingAck,
    LGType.LOSS_NOTIFICATION: LGLossNotification,
}

LAYERS = (LGData, LGLeadingAck, LGLossNotification)

# Dissection goes through the dispatching base; building any concrete tag on Ether/Dot1Q (or
# on another tag, via _NextTypeField) stamps 0xABCD.
for _lower in (Ether, Dot1Q):
    bind_bottom_up(_lower, LinkGuardian, type=EtherType.LINKGUARDIAN)
    for _tag in (LinkGuardian, *LAYERS):
        bind_top_down(_lower, _tag, type=EtherType.LINKGUARDIAN)

__all__ = ["LAYERS", "LGData", "LGLeadingAck", "LGLossNotification", "LinkGuardian"]
