"""Simulated hosts: a NIC, a shared neighbour table, and the host models (apps) scenarios run.

A :class:`Host` stands where a host namespace stands live. Apps bind to a UDP or TCP port (or
an EtherType for raw frames) and send whole frames built by :mod:`netstack.sim.packets`; the
host drops frames whose IPv4 header a link corrupted (checksum, as the kernel does) and
counts what no app claimed. Host models in this package:

- :class:`UdpStream` / :class:`UdpSink`: a sequenced UDP stream at a given rate (by default
  the NIC's line rate) and its receiver, with the same counters and JSON fields as the live
  tools ``udp-send`` / ``udp-sink`` (``netstack.traffic``), so one scenario reads the same
  either way;
- :mod:`netstack.sim.tcp`: a loss-based TCP model (NewReno, :mod:`netstack.sim.reno`) with bulk
  transfers, request/response FCT and open-loop flow workloads (:mod:`netstack.sim.workload`);
- :mod:`netstack.sim.transport`: paced sender and timer-driven receiver engines over UDP, the
  skeleton of the protocols' own simulated hosts (``netstack.tcsack.simhosts``, ``netstack.tcd.simhosts``).

An app is any object; it usually keeps the host, binds handlers in its constructor and
schedules itself with ``host.loop.call_at``. ``result()`` (JSON-able) is what scenarios report.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Protocol

from ..ethernet import line_time_exact_ns
from ..switch.pacer import Pacer
from ..topo.model import NodeKind, Topology
from .loop import EventLoop
from .packets import (
    PROTO_ICMP,
    PROTO_TCP,
    PROTO_UDP,
    UDP_HEADERS,
    Ipv4Flow,
    icmp_port_unreachable,
    icmp_unreachable_fields,
    ipv4_checksum_ok,
)

#: the kernel's rate limit on ICMP errors per destination (Linux: ``net.ipv4.icmp_ratelimit`` 1000 ms,
#: a burst of ``XRLIM_BURST_FACTOR`` 6): real time, whatever the topology's time scale
ICMP_INTERVAL_NS = 1_000_000_000
ICMP_BURST = 6


class Nic(Protocol):
    """What a host needs of its link (``netstack.sim.network.Channel``): a paced send."""

    nic: Pacer | None

    def send(self, frame: bytes, at_ns: int | None = None) -> None: ...


class HostNetwork(Protocol):
    """What hosts and their apps need of the network (``netstack.sim.network.Network``): the
    clock, the run's seed and topology, the other hosts and their addresses."""

    loop: EventLoop
    seed: int
    topology: Topology

    def host(self, name: str) -> Host: ...

    def mac_of(self, ip: bytes) -> bytes: ...

Handler = Callable[[bytes], None]
_SEQ = struct.Struct("!I")


class Host:
    """One host or collector node: MAC, IPv4 address, NIC (a :class:`~netstack.sim.network.Channel`)."""

    def __init__(self, net: HostNetwork, name: str, kind: NodeKind, mac: bytes, ip: bytes, ifname: str) -> None:
        self.net = net
        self.loop = net.loop
        self.name = name
        self.kind = kind
        self.mac = mac
        self.ip = ip
        self.ifname = ifname
        self.nic: Nic = None  # type: ignore[assignment]  # set by the network
        self.apps: list[Any] = []
        #: per-host state that several apps share, by name (``netstack.sim.tcp``'s stack: "tcp")
        self.services: dict[str, Any] = {}
        self._udp: dict[int, Handler] = {}
        self._tcp: dict[int, Handler] = {}
        self._ether: dict[int, Handler] = {}
        self._flows: dict[tuple[bytes, int, int], Ipv4Flow] = {}
        self._next_port = 40000
        self.tx_frames = self.tx_bytes = 0
        self.rx_frames = self.rx_bytes = 0
        self.rx_checksum_drops = 0
        self.rx_not_mine = 0
        self.rx_unclaimed = 0
        #: answer a UDP datagram to a port nobody holds with ICMP port unreachable, as a kernel does
        #: (off by default: a scenario that wants it says so, and no other run changes)
        self.icmp_unreachable = False
        self._udp_errors: dict[int, Callable[[tuple[str, int]], None]] = {}
        self._icmp_tokens: dict[bytes, tuple[float, int]] = {}  # destination -> (tokens, last refill ns)
        self.icmp_sent = self.icmp_limited = 0
        #: the host stack's one-way latency, ns, paid by every frame this host sends (before the NIC
        #: puts it on the link) and receives (before an app sees it): the library, PCIe and the NIC's
        #: pipeline that a simulated link leaves out (1Pipe's scenario parameter ``nic_ns``,
        #: netstack.onepipe.scenarios). 0, the default: apps touch the wire directly, no extra event
        self.stack_ns = 0

    # ------------------------------------------------------------------- binding
    def bind_udp(self, port: int, handler: Handler,
                 on_unreachable: Callable[[tuple[str, int]], None] | None = None) -> None:
        """Frames to UDP ``port`` of this host go to ``handler(frame)``; an ICMP port unreachable
        about a datagram sent from it goes to ``on_unreachable((ip, port))`` (the destination that
        had no socket), as a socket with ``IP_RECVERR`` reads it (netstack.io.udperr)."""
        self._bind(self._udp, port, handler, "UDP")
        if on_unreachable is not None:
            self._udp_errors[port] = on_unreachable

    def unbind_udp(self, port: int) -> None:
        """The socket on ``port`` closes (its process died): datagrams to it are unclaimed, and
        answered with ICMP port unreachable when :attr:`icmp_unreachable` is on."""
        self._udp.pop(port, None)
        self._udp_errors.pop(port, None)

    def bind_tcp(self, port: int, handler: Handler) -> None:
        self._bind(self._tcp, port, handler, "TCP")

    def bind_ether(self, ethertype: int, handler: Handler) -> None:
        """Non-IPv4 frames of ``ethertype`` go to ``handler(frame)``."""
        self._bind(self._ether, ethertype, handler, "EtherType")

    def _bind(self, table: dict[int, Handler], key: int, handler: Handler, what: str) -> None:
        if key in table:
            raise ValueError(f"{self.name}: {what} {key} is already bound")
        table[key] = handler

    def ephemeral_port(self) -> int:
        """A free local port for a client (distinct for every call on this host)."""
        while True:
            p = self._next_port
            self._next_port = 40000 if p >= 60999 else p + 1
            if p not in self._udp and p not in self._tcp:
                return p

    def add(self, app: Any) -> Any:
        self.apps.append(app)
        return app

    # ----------------------------------------------------------------------- send
    def flow(self, dst: str | bytes, proto: int = PROTO_UDP, tos: int = 0) -> Ipv4Flow:
        """Headers toward ``dst`` (a host name or an IPv4 address as 4 bytes)."""
        ip = self.net.host(dst).ip if isinstance(dst, str) else dst
        key = (ip, proto, tos)
        f = self._flows.get(key)
        if f is None:
            f = self._flows[key] = Ipv4Flow(self.mac, self.net.mac_of(ip), self.ip, ip, proto, tos)
        return f

    def send(self, frame: bytes, at_ns: int | None = None) -> None:
        """Put ``frame`` on the NIC now (or at ``at_ns`` >= now, for a paced batch); with a host
        stack (:attr:`stack_ns`) it reaches the NIC that much later, in the order it was sent."""
        self.tx_frames += 1
        self.tx_bytes += len(frame)
        stack = self.stack_ns
        if stack:
            at = (self.loop.now if at_ns is None else at_ns) + stack
            self.loop.call_at(at, self.nic.send, frame, at)
            return
        self.nic.send(frame, at_ns)

    # -------------------------------------------------------------------- receive
    def on_frame(self, _port: str, frame: bytes) -> None:
        self.rx_frames += 1
        self.rx_bytes += len(frame)
        if self.stack_ns:  # the host stack's receive half: the frame reaches its app that much later
            self.loop.call_at(self.loop.now + self.stack_ns, self._dispatch, frame)
        else:
            self._dispatch(frame)

    def _dispatch(self, frame: bytes) -> None:
        if frame[12] == 0x08 and frame[13] == 0x00:
            if not ipv4_checksum_ok(frame):
                self.rx_checksum_drops += 1  # a link corrupted the header: the kernel drops it
                return
            if frame[30:34] != self.ip:
                self.rx_not_mine += 1
                return
            proto = frame[23]
            if proto == PROTO_ICMP:
                self._on_icmp(frame)
                return
            table = self._udp if proto == PROTO_UDP else self._tcp if proto == PROTO_TCP else None
            h = None if table is None or len(frame) < 38 else table.get(frame[36] << 8 | frame[37])
            if h is None and proto == PROTO_UDP and self.icmp_unreachable and len(frame) >= UDP_HEADERS:
                self.rx_unclaimed += 1
                self._port_unreachable(frame)
                return
        elif len(frame) >= 14:
            h = self._ether.get(frame[12] << 8 | frame[13])
        else:
            h = None
        if h is None:
            self.rx_unclaimed += 1
        else:
            h(frame)

    def _port_unreachable(self, frame: bytes) -> None:
        """Answer ``frame`` (UDP to a port nobody holds) as the kernel does, within its rate limit."""
        src = frame[26:30]
        now = self.loop.now
        tokens, last = self._icmp_tokens.get(src, (float(ICMP_BURST), now))
        tokens = min(float(ICMP_BURST), tokens + (now - last) / ICMP_INTERVAL_NS)
        if tokens < 1.0:
            self.icmp_limited += 1
            self._icmp_tokens[src] = (tokens, now)
            return
        try:
            flow = self.flow(src, PROTO_ICMP)
        except KeyError:
            return  # no host has that address (a switch's own source): nowhere to send it
        self._icmp_tokens[src] = (tokens - 1.0, now)
        self.icmp_sent += 1
        self.send(icmp_port_unreachable(flow, frame))

    def _on_icmp(self, frame: bytes) -> None:
        got = icmp_unreachable_fields(frame)
        handler = None if got is None else self._udp_errors.get(got[0])
        if got is None or handler is None:
            self.rx_unclaimed += 1
            return
        handler((".".join(str(b) for b in got[1]), got[2]))

    def counters(self) -> dict[str, Any]:
        out = {"kind": self.kind.value, "tx_frames": self.tx_frames, "tx_bytes": self.tx_bytes,
               "rx_frames": self.rx_frames, "rx_bytes": self.rx_bytes, "rx_checksum_drops": self.rx_checksum_drops,
               "rx_not_mine": self.rx_not_mine, "rx_unclaimed": self.rx_unclaimed}
        if self.icmp_unreachable:
            out.update(icmp_sent=self.icmp_sent, icmp_limited=self.icmp_limited)
        return out


class UdpStream:
    """A sequenced UDP stream (``netstack.traffic udp-send``'s datagrams: a 4-byte sequence number,
    then zeros), ``count`` datagrams of ``size`` payload bytes at ``rate_pps`` datagrams/s or
    ``rate_bps`` line rate (default: the NIC's rate, i.e. line rate, the "stress test" of LinkGuardian
    §4.1), starting at ``start_ns``.

    Frames are handed to the NIC ``batch`` at a time with their exact departure times, so a
    line-rate stream costs the event loop about one event per frame (its arrival), not two.
    """

    def __init__(self, host: Host, dst: str, *, count: int, size: int = 1472, rate_pps: float | None = None,
                 rate_bps: float | None = None, dport: int = 5002, tos: int = 0, start_ns: int = 0,
                 batch: int = 64) -> None:
        if size < 4:
            raise ValueError("size must be >= 4 (the sequence number)")
        if count < 0:
            raise ValueError("count must be >= 0")
        self.host = host
        self.count = count
        self.size = size
        self.flow = host.flow(dst, PROTO_UDP, tos)
        self.sport = host.ephemeral_port()
        self.dport = dport
        self._pad = bytes(size - 4)
        frame_len = UDP_HEADERS + size
        if rate_pps:
            self.gap = 1e9 / rate_pps
        else:
            line = rate_bps or host.nic.nic.rate  # type: ignore[union-attr]
            self.gap = line_time_exact_ns(frame_len, line) if line else 0.0
        self.start_ns = start_ns
        self.batch = max(1, batch)
        self.sent = 0
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        host.add(self)
        host.loop.call_at(max(start_ns, host.loop.now), self._tick)

    def _tick(self) -> None:
        host = self.host
        now = host.loop.now
        if self.first_ns is None:
            self.first_ns = now
        n = min(self.batch, self.count - self.sent)
        flow, sport, dport, pad, pack = self.flow, self.sport, self.dport, self._pad, _SEQ.pack
        t = now
        for _ in range(n):
            t = self.start_ns + round(self.sent * self.gap)
            if t < now:
                t = now
            host.send(flow.udp(sport, dport, pack(self.sent & 0xFFFFFFFF) + pad), t)
            self.sent += 1
        self.last_ns = t
        if self.sent < self.count:
            nxt = self.start_ns + round(self.sent * self.gap)
            host.loop.call_at(max(nxt, now), self._tick)

    def result(self) -> dict[str, Any]:
        return {"tool": "udp-send", "sent": self.sent, "size": self.size,
                "seconds": ((self.last_ns or 0) - (self.first_ns or 0)) / 1e9, "send_retries": 0,
                "neighbour_resolved": True}


class UdpSink:
    """The receiving end of :class:`UdpStream` (``netstack.traffic udp-sink``'s counters)."""

    MAX_LATE = 10

    def __init__(self, host: Host, *, port: int = 5002, expect: int = 0, record: bool = False) -> None:
        self.host = host
        self.expect = expect
        self.seen = bytearray()
        self.received = self.unique = self.duplicates = self.reordered = 0
        self.highest = -1
        self.late: list[list[int]] = []
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.bytes = 0
        self.order: list[int] | None = [] if record else None
        host.bind_udp(port, self.on_frame)
        host.add(self)

    def on_frame(self, frame: bytes) -> None:
        if len(frame) < UDP_HEADERS + 4:
            return  # not a sequenced datagram
        now = self.host.loop.now
        if self.first_ns is None:
            self.first_ns = now
        self.last_ns = now
        self.received += 1
        seq = _SEQ.unpack_from(frame, UDP_HEADERS)[0]
        seen = self.seen
        if seq >= len(seen):
            seen.extend(bytes(seq + 1 - len(seen) + 4096))
        if seen[seq]:
            self.duplicates += 1
            return
        seen[seq] = 1
        self.unique += 1
        self.bytes += (frame[38] << 8 | frame[39]) - 8
        if self.order is not None:
            self.order.append(seq)
        if seq < self.highest:
            self.reordered += 1
            if len(self.late) < self.MAX_LATE:
                self.late.append([seq, self.highest])
        else:
            self.highest = seq

    def result(self) -> dict[str, Any]:
        expected = self.expect or self.highest + 1
        lost = max(0, expected - self.unique)
        return {"tool": "udp-sink", "received": self.received, "unique": self.unique,
                "duplicates": self.duplicates, "reordered": self.reordered, "late": self.late,
                "expected": expected, "lost": lost, "loss": lost / expected if expected > 0 else 0.0,
                "seconds": ((self.last_ns or 0) - (self.first_ns or 0)) / 1e9, "bytes": self.bytes}


__all__ = ["Host", "UdpSink", "UdpStream"]
