"""A packet generator inside a switch: the paper's line-rate "stress test" source.

LinkGuardian §4.1: "Using the packet generator on sw2 (see Figure 7), we conduct a 'stress test' by
sending MTU-sized packets at line rate". A Tofino's generator feeds the pipeline of the switch
itself, so the protected egress port is never idle while the test runs and the link, not a
host, sets the pace. :class:`SwitchGenerator` does that in virtual time: it injects frames into
a switch as if they had arrived on one of its ports (the port toward the source host, so they
look like that host's traffic), and tops the egress queue toward the destination up to
``depth`` frames every ``depth / 2`` frame times (the queue cannot drain faster than one frame
per frame time, so it never runs dry and the link stays busy) and never overflows (nothing is
lost to the generator), whatever LinkGuardian's retransmissions, pauses and tags take from the
link: what reaches the destination measures the *effective link speed*.

Frames are :class:`~netstack.sim.hosts.UdpStream`'s (4-byte sequence number, zeros), from the
source host to the destination host, so a :class:`~netstack.sim.hosts.UdpSink` counts them.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from ..ethernet import line_time_exact_ns
from .packets import PROTO_UDP, UDP_HEADERS, Ipv4Flow

if TYPE_CHECKING:
    from .network import Network

_SEQ = struct.Struct("!I")


class SwitchGenerator:
    """``count`` frames of ``size`` bytes (Ethernet, without FCS; >= 46) from ``src`` to ``dst``
    (host names), injected into switch ``switch`` (default: ``src``'s switch), keeping ``depth``
    frames queued at the egress port toward ``dst``. Starts at ``start_ns``."""

    def __init__(self, net: Network, src: str, dst: str, *, count: int, size: int = 1500, depth: int = 8,
                 switch: str | None = None, dport: int = 5002, tos: int = 0, start_ns: int = 0) -> None:
        if size < UDP_HEADERS + 4:
            raise ValueError(f"size must be >= {UDP_HEADERS + 4} bytes (headers and a sequence number)")
        if depth < 1:
            raise ValueError("depth must be >= 1")
        s, d = net.host(src), net.host(dst)
        if switch is None:
            switch = next(lk.peer(src).node for lk in net.topology.links_of(src))
        self.net = net
        self.node = net.switches[switch]
        sw = self.node.switch
        # the port the frames seem to arrive on (toward src), and the one they leave by (toward dst)
        self.ingress = _port_toward(net, switch, src)
        self.egress = sw.ports[[p.name for p in sw.ports].index(_port_toward(net, switch, dst))]
        self.flow = Ipv4Flow(s.mac, d.mac, s.ip, d.ip, PROTO_UDP, tos)
        self.count = count
        self.size = size
        self.depth = depth
        self.dport = dport
        self._pad = bytes(size - UDP_HEADERS - 4)
        self.cls = sw.config.port(self.ingress).class_map[tos >> 5]
        rate = self.egress.cfg.rate_bps
        #: a frame's line time at the egress (the fastest the queue can drain)
        self.frame_ns = max(1, round(line_time_exact_ns(size, rate))) if rate else 1_000
        self.tick_ns = self.frame_ns * max(1, depth // 2)
        self.injected = 0
        self.first_ns: int | None = None
        net.loop.call_at(max(start_ns, net.loop.now), self._tick)

    def _tick(self) -> None:
        if self.injected >= self.count:
            return
        loop = self.net.loop
        now = loop.now
        if self.first_ns is None:
            self.first_ns = now
        queued = len(self.egress.queues.q[self.cls])
        n = min(self.depth - queued, self.count - self.injected)
        if n > 0:
            flow, dport, pad, pack = self.flow, self.dport, self._pad, _SEQ.pack
            frames = []
            for _ in range(n):
                frames.append(flow.udp(5001, dport, pack(self.injected & 0xFFFFFFFF) + pad))
                self.injected += 1
            self.node.switch.receive_batch(self.ingress, frames, now)
            self.node.service(now)
        if self.injected < self.count:
            loop.call_at(now + self.tick_ns, self._tick)

    def result(self) -> dict[str, Any]:
        return {"injected": self.injected, "size": self.size, "depth": self.depth, "first_ns": self.first_ns,
                "switch": self.node.name, "ingress": self.ingress, "egress": self.egress.name}


def _port_toward(net: Network, switch: str, host: str) -> str:
    """The port of ``switch`` its static forwarding sends ``host``'s MAC to."""
    mac = net.host(host).mac
    sw = net.switches[switch].switch
    idx = sw.fdb.lookup(mac)
    if idx is None:
        raise ValueError(f"{switch} has no route to {host}")
    return sw.ports[idx].name


__all__ = ["SwitchGenerator"]
