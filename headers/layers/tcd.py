"""TCD marking on Scapy packets; the rules and the fast in-place rewrite are in :mod:`headers.tcd`.

TCD needs no new layer: its marks live in the ECN bits of Scapy's ``IP.tos`` (and
``IPv6.tc``). These helpers apply exactly the rules of the fast path to a Scapy packet, for
crafting test traffic and for checking captures; they return a marked *copy* and leave the
original alone. When the mark changes, the copy's IPv4 checksum is cleared so Scapy
recomputes it from scratch when the packet is built; that full recomputation is what the
fast path's incremental update (RFC 1624) is tested against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from scapy.layers.inet import IP
from scapy.layers.inet6 import IPv6
from scapy.packet import Packet

from headers.errors import HeaderError
from headers.tcd import DEFAULT_CODEPOINTS, PortState, TcdCodepoints, ecn_mark_tos, mark_tos, state_from_tos


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
