"""Source address validation at an edge port (BCP 38, RFC 2827 "Network Ingress Filtering").

A ToR port faces one host, so it knows the only IPv4 source address a datagram entering there may
carry. Without this check a host forges any other host's address: the 1Pipe ToR keys a process by
(port, IP, UDP port), DTA's collector and T/C-SACK's receiver by the source address, and a forged
source turns into a forged identity (issue 34, finding 3: "switches forward spoofed source
addresses from edge ports").

An edge port with ``source_ips`` (``PortConfig``; the topology gives every edge port its host's
address, netstack/runtime/config.py) drops and counts (``edge_drops_spoofed``):

- an IPv4 frame (behind up to two VLAN tags, as the rest of the edge looks) whose source address
  is not one of them, or that is too short to hold one (a source that cannot be read is not shown
  to be the host's);
- an ARP frame whose sender protocol address is neither one of them nor 0.0.0.0 (an address
  probe, RFC 5227), or too short to hold one: otherwise a host poisons its neighbours' caches with
  another host's address, which re-opens the forgery one layer down.

Other EtherTypes pass (IPv6 is not routed by the testbed; the edge's other filters, switch-only
EtherTypes and PFC, still apply). The same function decides the switch's drop and the fuzzer's
prediction of it (netstack/fuzz/frames.py ``fate_of``).
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address

from ..errors import ConfigError

_VLAN_TPIDS = (0x8100, 0x88A8)
_IPV4 = 0x0800
_ARP = 0x0806
_ANY = b"\x00\x00\x00\x00"


def parse_source_ips(value: object, where: str) -> frozenset[bytes]:
    """``source_ips`` of a port config (a list of dotted-quad IPv4 addresses) as packed addresses;
    ConfigError naming ``where`` otherwise."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigError(where, f"must be a list of IPv4 addresses, got {value!r}")
    out = set()
    for v in value:
        try:
            if not isinstance(v, str):
                raise ValueError(v)
            out.add(IPv4Address(v).packed)
        except ValueError:
            raise ConfigError(where, f"{v!r} is not an IPv4 address") from None
    if not out:
        raise ConfigError(where, "must name at least one address (omit it for no filtering)")
    return frozenset(out)


def l3(frame: bytes) -> tuple[int, int]:
    """``(EtherType, offset of the payload)`` behind up to two VLAN tags."""
    o = 12
    etype = frame[12] << 8 | frame[13]
    for _ in range(2):
        if etype not in _VLAN_TPIDS or len(frame) < o + 6:
            break
        o += 4
        etype = frame[o] << 8 | frame[o + 1]
    return etype, o + 2


def spoofed(frame: bytes, allowed: frozenset[bytes]) -> bool:
    """Whether an edge port whose host owns ``allowed`` drops ``frame`` (module docstring);
    ``frame`` has its Ethernet header (14 bytes or more) and no FCS."""
    etype, o = l3(frame)
    if etype == _IPV4:
        return frame[o + 12:o + 16] not in allowed  # (short: b"" or a partial address, never allowed)
    if etype == _ARP:
        spa = frame[o + 14:o + 18]  # sender protocol address of IPv4-over-Ethernet ARP
        return spa != _ANY and spa not in allowed
    return False


__all__ = ["l3", "parse_source_ips", "spoofed"]
