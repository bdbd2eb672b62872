"""Scapy side of 802.1Qbb PFC: scapy's own ``scapy.contrib.mac_control``, plus conversions.

Scapy already ships the MAC control layers (``MACControlClassBasedFlowControl`` is PFC,
bound to Ether/Dot1Q type 0x8808), so we load that module rather than bind a competing
layer: importing this module is what makes ``Ether(raw)`` dissect PFC. What it adds is a
thin :func:`PFC` builder taking the codec's fields (``class_enable``, ``quanta``) and the
conversions between those and contrib's per-class fields (``cN_enabled``,
``cN_pause_time``) that the codec <-> layer agreement tests use.

Differences worth knowing: contrib names the reserved octet ``_reserved`` (our codec
ignores it on receipt), and contrib pads a frame to 64 bytes *including* a 4-byte FCS it
does not emit, so ``bytes(Ether()/PFC(...))`` is the same 60 bytes as
:func:`headers.pfc.build_pfc_frame`; a lone ``bytes(PFC(...))`` is padded to 64.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scapy.contrib.mac_control import MACControl, MACControlClassBasedFlowControl
from scapy.layers.l2 import Ether
from scapy.packet import Packet

from headers.inet import mac_str
from headers.pfc import PFC_CLASSES, PFCFrame
from headers.registry import PFC_DST_MAC, EtherType

_ZERO = (0,) * PFC_CLASSES


def layer_fields(class_enable: int, quanta: Sequence[int] = _ZERO) -> dict[str, int]:
    """contrib's field values for a class-enable vector and 8 quanta."""
    fields = {f"c{i}_enabled": class_enable >> i & 1 for i in range(PFC_CLASSES)}
    fields.update({f"c{i}_pause_time": int(quanta[i]) for i in range(PFC_CLASSES)})
    return fields


def record_to_fields(record: PFCFrame) -> dict[str, int]:
    """contrib's field values for a :class:`~headers.pfc.PFCFrame`."""
    return layer_fields(record.class_enable, record.quanta)


def layer_class_enable(layer: Packet) -> int:
    """The 8-bit class-enable vector of a dissected or built contrib PFC layer."""
    return sum((layer.getfieldval(f"c{i}_enabled") & 1) << i for i in range(PFC_CLASSES))


def layer_quanta(layer: Packet) -> tuple[int, ...]:
    """The 8 pause times of a contrib PFC layer, class 0 first."""
    return tuple(int(layer.getfieldval(f"c{i}_pause_time")) for i in range(PFC_CLASSES))


def layer_to_record(layer: Packet) -> PFCFrame:
    """The codec record equal to a contrib PFC layer (found anywhere in ``layer``)."""
    pfc = layer[MACControlClassBasedFlowControl]
    return PFCFrame(layer_class_enable(pfc), layer_quanta(pfc))


def PFC(class_enable: int = 0, quanta: Sequence[int] = _ZERO) -> MACControlClassBasedFlowControl:
    """contrib's PFC layer built from the codec's fields (``Ether(...)/PFC(...)``)."""
    # typed as Packet's **fields (Any): a dict[str, int] would also be checked against _pkt & co.
    fields: dict[str, Any] = layer_fields(class_enable, quanta)
    return MACControlClassBasedFlowControl(**fields)


def pfc_frame(src: bytes | str, class_enable: int, quanta: Sequence[int] = _ZERO,
              dst: bytes | str = PFC_DST_MAC) -> Packet:
    """A whole ``Ether/PFC`` packet; ``bytes()`` of it equals :func:`headers.pfc.build_pfc_frame`."""
    src_s = mac_str(src) if isinstance(src, bytes) else src
    dst_s = mac_str(dst) if isinstance(dst, bytes) else dst
    return Ether(dst=dst_s, src=src_s, type=EtherType.MAC_CONTROL) / PFC(class_enable, quanta)


__all__ = [
    "PFC",
    "MACControl",
    "MACControlClassBasedFlowControl",
    "layer_class_enable",
    "layer_fields",
    "layer_quanta",
    "layer_to_record",
    "pfc_frame",
    "record_to_fields",
]
