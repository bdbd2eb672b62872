"""The frames a campaign sends and what they should do: an :class:`Injector` draws each frame from
its seeded ``headers.strategies`` generator (random bytes, valid frames, mutations; a valid FCS or
not), and :func:`fate_of` says from the frame's bytes alone what the receiving kernel and the
switch's ingress pipeline do with it, which the accounting checks afterwards
(:mod:`netstack.fuzz.checks`). The predicates a target guards its checked phase with are here
when they are about any protocol's frames (:func:`spoofs`), in the target's module otherwise."""

from __future__ import annotations

import random
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from headers import strategies as hs
from headers.fcs import append_fcs, fcs_ok

from ..switch.forwarding import is_link_local
from ..switch.sourceguard import spoofed
from .ports import Link

#: draws of a frame the checked phase may not send before it is made inert (:attr:`Injector.forbidden`)
FORBIDDEN_TRIES = 20


@dataclass
class Injector:
    """Frames from a generator into one link's daemon port, with what they should do there."""

    name: str
    link: Link
    gen: hs.Gen[bytes]
    #: frames the campaign sends with a valid FCS only outside the checked stream phase (see
    #: the LinkGuardian target): with a valid FCS they act on protocol state by design
    guarded: Callable[[bytes], bool] | None = None
    #: frames the campaign never sends in a checked phase, FCS or not (drawn again instead): forgeries
    #: the protocol does not claim to withstand without keys (see the 1Pipe and T/C-SACK targets)
    forbidden: Callable[[bytes], bool] | None = None
    weight: int = 1
    sock: socket.socket | None = None
    max_len: int = 1514
    sent: int = 0
    refused: int = 0  #: send() failed (the kernel refused the frame, e.g. longer than the MTU)
    fate: Counter[str] = field(default_factory=Counter)
    example: dict[str, str] = field(default_factory=dict)  #: one frame (hex) per fate

    def frame(self, rng: random.Random, d: hs.RandomDraw, guard: bool) -> bytes:
        frame = self.gen(d)[:self.max_len]
        if guard and self.forbidden is not None:
            for _ in range(FORBIDDEN_TRIES):
                if not self.forbidden(frame):
                    break
                frame = self.gen(d)[:self.max_len]
            else:
                frame = frame[:12] + b"\x88\xb5" + frame[14:]  # (local experimental EtherType: inert)
        if len(frame) < 14:
            frame += bytes(14 - len(frame))  # (the kernel pads a shorter frame so: send what arrives)
        if not self.link.fcs:
            return frame
        valid = rng.random() < 0.5
        if valid and guard and self.guarded is not None and self.guarded(frame):
            valid = False
        if valid:
            return append_fcs(frame)[:self.max_len + 4]
        if fcs_ok(frame) and len(frame) > 4:  # (2^-32: a random tail that is a valid FCS)
            frame = frame[:-1] + bytes([frame[-1] ^ 1])
        return frame


#: EtherTypes the kernel untags before any packet socket sees the frame (802.1Q, 802.1ad)
VLAN_TYPES = (0x8100, 0x88A8)


#: the fate of a tagged frame too short to untag: the kernel drops it before any packet socket
KERNEL_VLAN_SHORT = "kernel_vlan_short"


def kernel_view(frame: bytes) -> bytes | None:
    """The frame as the daemon reads it. The receiving kernel takes an outer 802.1Q / 802.1ad
    tag off before packet sockets see the frame (``skb_vlan_untag`` in
    ``__netif_receive_skb_core``) and the daemon's ring puts it back from the slot header
    (netstack/io/packet.py ``RxRing``), so a tagged frame arrives whole; but the kernel drops a
    tagged frame with fewer than 6 bytes after its Ethernet header, uncounted by any socket."""
    if len(frame) >= 14 and (frame[12] << 8 | frame[13]) in VLAN_TYPES and len(frame) < 20:
        return None
    return frame


def fate_of(frame: bytes, link: Link, switch_only: frozenset[int]) -> str:
    """What the receiving switch's ingress pipeline does with ``frame`` before its features
    (netstack/switch/core.py ``Switch._receive``), decided from the frame's bytes alone."""
    seen = kernel_view(frame)
    if seen is None:
        return KERNEL_VLAN_SHORT
    frame = seen
    if link.fcs:
        if len(frame) < 18:
            return "malformed"
        if not fcs_ok(frame):
            return "fcs_errors"
        frame = frame[:-4]
    elif len(frame) < 14:
        return "malformed"
    etype = frame[12] << 8 | frame[13]
    if etype == 0x8808 or (frame[0] == 0x01 and is_link_local(frame)):
        if link.edge and not link.accepts_pfc and etype == 0x8808:
            return "edge_drops_pfc"
        if malformed_pfc(frame):
            return "malformed"
        return "mac_control_rx"
    if link.edge:
        if etype in VLAN_TYPES:  # the edge looks through VLAN tags (Switch._receive)
            from ..switch.core import inner_ethertype

            etype = inner_ethertype(frame)
            if etype == 0x8808 and not link.accepts_pfc:
                return "edge_drops_pfc"
        if etype in switch_only:
            return "edge_drops_switch_only"
        if link.source_guard is not None and spoofed(frame, link.source_guard):
            return "edge_drops_spoofed"
    return "passed"


def malformed_pfc(frame: bytes) -> bool:
    """A PFC frame (MAC control opcode 0x0101) of 18 to 33 bytes (without FCS): long enough for the
    switch to look at its opcode, too short for its 20-byte payload; counted as malformed
    (``Switch._mac_control``)."""
    return 18 <= len(frame) < 34 and frame[12:16] == b"\x88\x08\x01\x01"


def udp_source(frame: bytes) -> tuple[bytes, int | None, bool] | None:
    """``(source IP, UDP source port, fragment)`` of an IPv4/UDP frame as the receiving host's
    kernel reads it (through up to two VLAN tags, which it takes off); the port is None when the
    frame is too short to say, and a fragment's (it may reassemble with another). None: not a
    UDP datagram over IPv4 a kernel would take."""
    off = 12
    for _ in range(2):
        if len(frame) >= off + 6 and (frame[off] << 8 | frame[off + 1]) in VLAN_TYPES:
            off += 4
    ip = off + 2
    if len(frame) < ip + 20 or frame[off:ip] != b"\x08\x00" or frame[ip] >> 4 != 4 or frame[ip + 9] != 17:
        return None
    ihl = (frame[ip] & 15) * 4
    if ihl < 20:
        return None
    frag = bool((frame[ip + 6] << 8 | frame[ip + 7]) & 0x3FFF)
    sport = frame[ip + ihl] << 8 | frame[ip + ihl + 1] if len(frame) >= ip + ihl + 2 and not frag else None
    return bytes(frame[ip + 12:ip + 16]), sport, frag


def udp_payload(frame: bytes) -> bytes | None:
    """The UDP payload of an IPv4/UDP frame that is no fragment (through VLAN tags), as far as the
    frame has it; None otherwise."""
    got = udp_source(frame)
    if got is None or got[2]:
        return None
    off = 12
    for _ in range(2):
        if (frame[off] << 8 | frame[off + 1]) in VLAN_TYPES:
            off += 4
    return bytes(frame[off + 2 + (frame[off + 2] & 15) * 4 + 8:])


def spoofs(addrs: set[tuple[bytes, int]]) -> Callable[[bytes], bool]:
    """A predicate: the frame is a UDP datagram from one of ``addrs`` (IP, port), or may become
    one (a fragment from one of their IPs, or too short to tell): a forgery of a protocol
    endpoint's own traffic, which no protocol here withstands without keys."""
    ips = {ip for ip, _ in addrs}

    def check(frame: bytes) -> bool:
        got = udp_source(frame)
        if got is None or got[0] not in ips:
            return False
        src, sport, frag = got
        return frag or sport is None or (src, sport) in addrs

    return check


def switch_only() -> frozenset[int]:
    from .. import protocols

    return frozenset(protocols.switch_only_ethertypes())
