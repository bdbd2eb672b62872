"""L2 forwarding: static entries from the topology plus source learning, and classification.

Issue text: "L2 forwarding (static from the topology, plus learning)". A transparent
bridge (IEEE 802.1D/802.1Q): learn the source MAC of every frame on its ingress port,
send a known unicast destination to its port, flood unknown unicast, broadcast and
multicast to every port but the ingress one, and never forward frames to the reserved
01:80:C2:00:00:0x block — those (PAUSE, PFC, LACP, STP, LLDP) are consumed by the
receiving port (802.1Q Table 8-1).
"""

from __future__ import annotations

#: First five octets of the IEEE 802.1Q reserved (never forwarded) group addresses.
_RESERVED_PREFIX = b"\x01\x80\xc2\x00\x00"


def is_link_local(frame: bytes) -> bool:
    """True for a destination in 01:80:C2:00:00:00..0F (bridges must not forward these)."""
    return frame[0] == 0x01 and frame[:5] == _RESERVED_PREFIX and frame[5] < 0x10


class Fdb:
    """The forwarding database: MAC (6 bytes) -> port index.

    Static entries always win: learning never moves a static MAC, so a frame spoofing a
    static address cannot steal its traffic. The learned table is bounded (``max_learned``);
    once full, new addresses are not learned (they keep being flooded) and ``full_events``
    counts it.
    """

    __slots__ = ("full_events", "learned", "max_learned", "moves", "static")

    def __init__(self, static: dict[bytes, int] | None = None, max_learned: int = 65536) -> None:
        self.static: dict[bytes, int] = dict(static or {})
        self.learned: dict[bytes, int] = {}
        self.max_learned = max_learned
        self.full_events = 0
        self.moves = 0

    def learn(self, mac: bytes, port: int) -> None:
        if mac[0] & 1 or mac in self.static:
            return  # group addresses are never a source; static entries are not moved
        old = self.learned.get(mac)
        if old == port:
            return
        if old is None:
            if len(self.learned) >= self.max_learned:
                self.full_events += 1
                return
        else:
            self.moves += 1  # the station moved (or someone spoofed it): last one wins, as in 802.1D
        self.learned[mac] = port

    def lookup(self, mac: bytes) -> int | None:
        port = self.static.get(mac)
        if port is None:
            port = self.learned.get(mac)
        return port

    def __len__(self) -> int:
        return len(self.static) + len(self.learned)


def classify(frame: bytes, class_map: tuple[int, ...], default_class: int) -> int:
    """Traffic class of a frame at ingress.

    IPv4: IP precedence (DSCP >> 3, i.e. ToS >> 5) through ``class_map``. 802.1Q-tagged:
    the PCP through ``class_map`` (a tagged frame says its priority explicitly). Anything
    else: ``default_class``. ``frame`` has at least the 14-byte Ethernet header.
    """
    etype = frame[12] << 8 | frame[13]
    if etype == 0x0800:
        if len(frame) > 15 and frame[14] >> 4 == 4:
            return class_map[frame[15] >> 5]
        return default_class
    if etype == 0x8100 and len(frame) > 14:
        return class_map[frame[14] >> 5]
    return default_class

