"""Pure tests of the sans-IO switch (netstack.switch). Shared helpers live here.

Time is always the fake ``now_ns`` the test passes in; nothing here reads a clock.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from headers.inet import build_udp_frame
from netstack.switch import PortConfig, Switch, SwitchConfig

GBPS = 1_000_000_000
MS = 1_000_000


def mac(i: int) -> bytes:
    """A locally administered unicast MAC for station ``i``."""
    return bytes([0x02, 0, 0, 0, i >> 8 & 0xFF, i & 0xFF])


def ip(i: int) -> bytes:
    return bytes([10, 0, i >> 8 & 0xFF, i & 0xFF])


def udp_frame(src: int = 1, dst: int = 2, size: int = 100, tos: int = 0, dst_mac: bytes | None = None) -> bytes:
    """An Ethernet/IPv4/UDP frame of exactly ``size`` bytes (>= 42) between stations."""
    payload = bytes(max(0, size - 42))
    return build_udp_frame(mac(src), dst_mac or mac(dst), ip(src), ip(dst), 1000, 2000, payload, tos=tos)


def class_tos(cls: int, ecn: int = 0) -> int:
    """A ToS byte whose IP precedence (DSCP >> 3) is ``cls``."""
    return cls << 5 | ecn


def raw_frame(dst: bytes, src: bytes, etype: int = 0x88B5, size: int = 60) -> bytes:
    return dst + src + struct.pack("!H", etype) + bytes(max(0, size - 14))


def make_switch(n: int = 2, name: str = "s1", static_fdb: dict | None = None,
                switch_only_ethertypes: tuple[int, ...] = (), **port_kw) -> Switch:
    """A switch with ports p0..p{n-1}; ``port_kw`` applies to every port, ``pN_kw`` keys to one."""
    ports = []
    for i in range(n):
        kw = dict(port_kw)
        kw.update(kw.pop(f"p{i}", {}))
        for j in range(n):
            kw.pop(f"p{j}", None)
        ports.append(PortConfig(f"p{i}", **kw))
    return Switch(SwitchConfig(name, tuple(ports), static_fdb or {},
                               switch_only_ethertypes=switch_only_ethertypes))


@dataclass
class Departure:
    port: str
    cls: int
    frame: bytes
    start: int
    end: int
    release: int | None


@dataclass
class Trace:
    """Records every frame a switch puts on a wire (via ``departure_hook``)."""

    departures: list[Departure] = field(default_factory=list)

    def __call__(self, port, cls, frame, start, end, release) -> None:
        self.departures.append(Departure(port, cls, frame, start, end, release))

    def on(self, port: str, cls: int | None = None) -> list[Departure]:
        return [d for d in self.departures if d.port == port and (cls is None or d.cls == cls)]


def traced(sw: Switch) -> Trace:
    tr = Trace()
    sw.departure_hook = tr
    return tr


def drain(sw: Switch, start: int, stop: int, step: int) -> list[tuple[int, str, bytes]]:
    """Call transmit every ``step`` ns from ``start`` to ``stop``; return (call time, port, frame)."""
    got = []
    t = start
    while t <= stop:
        for port, frame in sw.transmit(t):
            got.append((t, port, frame))
        t += step
    return got
