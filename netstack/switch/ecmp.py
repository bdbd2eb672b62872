"""ECMP: a static entry with several equal-cost next hops, one chosen per flow by a seeded hash.

A destination MAC whose static entry is an *ECMP group* (``SwitchConfig.ecmp_groups``: the
topology gives a switch several equal-cost shortest paths to a host, e.g. one through each
spine of a leaf-spine fabric) leaves on one of the group's ports, chosen per frame by a hash
of the frame's flow, so that every frame of a flow takes the same path (no reordering within
a flow) while flows spread over the paths (RFC 2992, hash-threshold).

The hash has two steps:

1. :func:`flow_key`, the same for every switch: CRC32 (``zlib.crc32``, in C) of the flow's
   fields. An untagged IPv4 frame: source and destination address, the protocol (as the CRC's
   start value) and, for TCP, UDP, DCCP and SCTP when the frame is not a fragment, both ports
   (where the IPv4 options end). A fragment, another protocol or a truncated transport header:
   the addresses and the protocol. Anything else (ARP, a VLAN tag, non-IP): the MACs and the
   EtherType. Whatever the bytes, a key comes out (never an exception).
2. :meth:`EcmpGroup.pick`, per switch: multiply-shift hashing (Dietzfelbinger et al.) of the
   key with the switch's own odd 32-bit multiplier, derived from its seed (:func:`multiplier`),
   then the top of the product scaled to the group's size:
   ``((key * a) mod 2**32) * n >> 32``. The seed chooses the hash *function*, not an offset:
   a seeded CRC (``crc32(key, seed)``) would be affine in its seed, so two switches with two
   next hops each would choose exactly alike or exactly opposite for every flow
   (polarization); multipliers of two seeds agree on about half the flows (tests/switch/test_ecmp.py).

About 0.25 µs per frame on this machine (two integer operations and one CRC of 12 bytes); a
run of one flow's frames in the plain-port fast path is split by the chosen port and queued in
whole-list steps (``Switch._enqueue_group_run``).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from zlib import crc32

_IPV4 = b"\x08\x00"
#: IP protocols whose first 4 bytes are the source and destination port
_PORTED = frozenset((6, 17, 33, 132))  # TCP, UDP, DCCP, SCTP
_MASK32 = 0xFFFFFFFF
#: EtherType IPv4, version 4 and a 20-byte header (no options)
_IPV4_PLAIN = b"\x08\x00\x45"
#: (EtherType and version/IHL, flags and fragment offset, protocol) of an IPv4 frame
_FAST = struct.Struct("!12x3s5xHxB").unpack_from


def flow_key(frame: bytes) -> int:
    """The frame's flow as a 32-bit number (step 1 of the module docstring). ``frame`` has at
    least its 14-byte Ethernet header; any bytes give a key."""
    if frame[12:14] == _IPV4 and len(frame) >= 34 and frame[14] >> 4 == 4:
        proto = frame[23]
        ihl = (frame[14] & 15) << 2
        if proto in _PORTED and ihl >= 20 and not (frame[20] & 0x3F or frame[21]):  # (MF, offset: a fragment)
            if ihl == 20:
                if len(frame) >= 38:
                    return crc32(frame[26:38], proto)
            elif len(frame) >= 18 + ihl:
                # the same key as without options: CRC32 continues over the ports
                return crc32(frame[14 + ihl:18 + ihl], crc32(frame[26:34], proto))
        return crc32(frame[26:34], proto)
    return crc32(frame[:14])


def multiplier(seed: int) -> int:
    """The odd 32-bit multiplier of a switch's ECMP hash, from its seed (0 to 2**64 - 1):
    SHA-256, so that neighbouring seeds give unrelated multipliers."""
    digest = hashlib.sha256(b"netstack-ecmp/" + seed.to_bytes(8, "big")).digest()
    return int.from_bytes(digest[:4], "big") | 1


@dataclass
class EcmpCounters:
    """Frames the hash sent to each next hop of one group, in the group's port order (counted
    when chosen, before the egress queue: what that queue drops is the port's ``queue_drops``)."""

    frames: list[int] = field(default_factory=list)


class EcmpGroup:
    """One destination's equal-cost next hops: port indices in a stable order (the topology's
    link order), the switch's multiplier, and the frames sent to each."""

    __slots__ = ("a", "c", "n", "names", "ports")

    def __init__(self, ports: tuple[int, ...], names: tuple[str, ...], a: int) -> None:
        self.ports = ports
        self.names = names
        self.n = len(ports)
        self.a = a
        self.c = EcmpCounters([0] * len(ports))

    def choose(self, key: int) -> int:
        """The position in the group of the next hop for flow ``key`` (step 2), uncounted."""
        return ((key * self.a) & _MASK32) * self.n >> 32

    def pick(self, frame: bytes) -> int:
        """The port index ``frame`` leaves by, counted: the data path's call. (The common frame,
        TCP or UDP in IPv4 without options and unfragmented, is keyed here as :func:`flow_key`
        keys it, with one ``unpack_from`` for the bytes it decides on.)"""
        if len(frame) >= 38:
            head, frag, proto = _FAST(frame)
            if head == _IPV4_PLAIN and not frag & 0x3FFF and proto in _PORTED:
                key = crc32(frame[26:38], proto)
            else:
                key = flow_key(frame)
        else:
            key = flow_key(frame)
        i = ((key * self.a) & _MASK32) * self.n >> 32
        self.c.frames[i] += 1
        return self.ports[i]

    def counters(self) -> dict[str, int]:
        """``{port name: frames}``, in the group's order."""
        return dict(zip(self.names, self.c.frames, strict=True))

    def clear(self) -> None:
        self.c.frames = [0] * self.n


__all__ = ["EcmpCounters", "EcmpGroup", "flow_key", "multiplier"]
