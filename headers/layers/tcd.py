"""TCD on Scapy packets: marking helpers, and the end hosts' messages (codec in :mod:`headers.tcd`).

The marks need no layer: they live in the ECN bits of Scapy's ``IP.tos`` (and ``IPv6.tc``).
:func:`tcd_mark`, :func:`ecn_mark` and :func:`tcd_state` apply exactly the rules of the fast
path to a Scapy packet, for crafting test traffic and for checking captures; they return a
marked *copy* and leave the original alone. When the mark changes, the copy's IPv4 checksum
is cleared so Scapy recomputes it from scratch when the packet is built; that full
recomputation is what the fast path's incremental update (RFC 1624) is tested against.

The layers: ``TCD`` is what UDP dissects to when either port is 40300 (data goes *to* 40300,
CNPs and ACKs come back *from* it to the sender's port); it looks at the first byte and becomes
:class:`TcdData` (1, the version), :class:`TcdCnp` (0x81, the CNP opcode) or :class:`TcdAck`
(0xAC), else Raw. ``UDP()/TcdData()`` builds with dport 40300, ``UDP()/TcdCnp()`` and
``UDP()/TcdAck()`` with sport 40300. A CNP or ACK sent elsewhere (or cut out of a capture)
decodes with ``TcdCnp(raw)`` / ``TcdAck(raw)``. Field names and values equal the records' fields
(``TcdCnp.flow`` is the BTH DestQP); the layers add the fixed ones (``version``; the CNP's BTH
fields, ``reserved`` and ``icrc``; the ACK's ``type`` and ``flags``). A data packet's padding is Raw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import scapy.layers.inet  # noqa: F401  (binds IP to Ether and UDP to IP so Ether(raw) reaches us)
from scapy.config import conf
from scapy.fields import (
    BitField,
    ByteEnumField,
    ByteField,
    FlagsField,
    IntField,
    LongField,
    ShortField,
    StrFixedLenField,
    XByteField,
    XIntField,
    XShortField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet, bind_bottom_up, bind_top_down

from headers.errors import HeaderError
from headers.registry import UdpPort
from headers.roce import Opcode
from headers.tcd import (
    ACK_TYPE,
    DEFAULT_CODEPOINTS,
    TCD_VERSION,
    CnpKind,
    PortState,
    TcdCodepoints,
    ecn_mark_tos,
    mark_tos,
    state_from_tos,
)


def _ip_layer(pkt: Packet) -> IP | IPv6:
    for cls in (IP, IPv6):
        layer = pkt.getlayer(cls)
        if layer is not None:
            return cast("IP | IPv6", layer)  # getlayer(cls) returns an instance of cls
    raise HeaderError("TCD", f"no IP layer in {pkt.summary()}")


def _retos(pkt: Packet, new_tos_of: Callable[[int], int]) -> Packet:
    out = pkt.copy()
    ip = _ip_layer(out)
    if isinstance(ip, IP):
        tos = ip.tos
        new = new_tos_of(tos)
        if new != tos:
            ip.tos = new
            ip.chksum = None  # rebuilt from scratch by Scapy
    else:
        new = new_tos_of(ip.tc)
        ip.tc = new  # IPv6 has no header checksum
    return out


def tcd_mark(pkt: Packet, state: PortState | int, codepoints: TcdCodepoints = DEFAULT_CODEPOINTS) -> Packet:
    """A copy of ``pkt`` as a port in ``state`` forwards it (max-severity rule, :func:`headers.tcd.mark_tos`)."""
    return _retos(pkt, lambda tos: mark_tos(tos, state, codepoints))


def ecn_mark(pkt: Packet) -> Packet:
    """A copy of ``pkt`` with the plain-ECN baseline mark (ECT -> CE, Not-ECT unchanged)."""
    return _retos(pkt, ecn_mark_tos)


def tcd_state(pkt: Packet, codepoints: TcdCodepoints = DEFAULT_CODEPOINTS) -> PortState | None:
    """The most severe port state ``pkt`` reports, or None for a Not-ECT packet."""
    ip = _ip_layer(pkt)
    return state_from_tos(ip.tos if isinstance(ip, IP) else ip.tc, codepoints)


# --- the end hosts' messages ---------------------------------------------------------------------


class TCD(Packet):
    """Dispatcher: never instantiated itself; becomes TcdData or TcdCnp from the first byte."""

    name = "TCD"
    fields_desc = [ByteField("first", 0)]

    @classmethod
    def dispatch_hook(cls, _pkt: bytes | None = None, *args: Any, **kargs: Any) -> type[Packet]:
        if not _pkt:
            return TcdData
        if _pkt[0] == TCD_VERSION:
            return TcdData
        if _pkt[0] == Opcode.CNP:
            return TcdCnp
        if _pkt[0] == ACK_TYPE:
            return TcdAck
        return conf.raw_layer


class TcdData(Packet):
    """A TCD data header (fields as :class:`headers.tcd.TcdData`); the padding follows as Raw."""

    name = "TCD data"
    fields_desc = [
        ByteField("version", TCD_VERSION),
        FlagsField("flags", 0, 8, ["FIN", "ACK", "R2", "R3", "R4", "R5", "R6", "R7"]),
        ShortField("flow", 0),
        IntField("seq", 0),
        LongField("send_ts_ns", 0),
    ]

    def mysummary(self) -> str:
        return self.sprintf("TCD data flow=%flow% seq=%seq% %flags%")


class TcdCnp(Packet):
    """A RoCEv2 CNP with TCD's reserved bytes (fields as :class:`headers.tcd.TcdCnp`): the BTH
    (``flow`` is its DestQP), ``kind``, ``marked``, 13 reserved bytes and the ICRC (sent as 0)."""

    name = "TCD CNP"
    fields_desc = [
        ByteEnumField("opcode", int(Opcode.CNP), {int(Opcode.CNP): "CNP"}),
        BitField("solicited", 0, 1),
        BitField("migreq", 0, 1),
        BitField("padcount", 0, 2),
        BitField("version", 0, 4),
        XShortField("pkey", 0xFFFF),
        BitField("fecn", 0, 1),
        BitField("becn", 1, 1),
        BitField("resv6", 0, 6),
        BitField("flow", 0, 24),
        BitField("ackreq", 0, 1),
        BitField("resv7", 0, 7),
        BitField("psn", 0, 24),
        ByteEnumField("kind", int(CnpKind.CE), {k.value: k.name for k in CnpKind}),
        ShortField("marked", 0),
        StrFixedLenField("reserved", b"\x00" * 13, 13),
        XIntField("icrc", 0),
    ]

    def mysummary(self) -> str:
        return self.sprintf("TCD CNP-%kind% flow=%flow% marked=%marked%")


class TcdAck(Packet):
    """A TIMELY ACK (fields as :class:`headers.tcd.TcdAck`): the echoed ``seq`` and ``echo_ts_ns``
    and the segment's ``ce`` and ``ue`` marks; ``type`` 0xAC and ``flags`` 0 are fixed."""

    name = "TCD ACK"
    fields_desc = [
        XByteField("type", ACK_TYPE),
        XByteField("flags", 0),
        ShortField("flow", 0),
        IntField("seq", 0),
        LongField("echo_ts_ns", 0),
        ShortField("ce", 0),
        ShortField("ue", 0),
    ]

    def mysummary(self) -> str:
        return self.sprintf("TCD ACK flow=%flow% seq=%seq% ce=%ce% ue=%ue%")


for _port in ("sport", "dport"):
    bind_bottom_up(UDP, TCD, **{_port: int(UdpPort.TCD)})
bind_top_down(UDP, TcdData, dport=int(UdpPort.TCD))
bind_top_down(UDP, TcdCnp, sport=int(UdpPort.TCD))
bind_top_down(UDP, TcdAck, sport=int(UdpPort.TCD))
