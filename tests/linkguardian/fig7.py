"""LinkGuardian Fig. 7's testbed on netstack.sim, for the feature tests.

h1 - sw1 = sw2 - h2: two real software switches, the protected link sw1 = sw2 with the software
FCS and the switch's seeded corruption model, LinkGuardian attached through the daemons' entry
points (``enable_receiver`` / ``enable_sender``). Traffic is UDP (the frames carry a sequence
number): a stream from h1 to h2 (port 5002) and one back from h2 to h1 (port 5003), counted by
UdpSinks that keep the delivery order. A frame with LinkGuardian's EtherType reaching a host is
counted as leaked.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from netstack.linkguardian import LGParams, enable_receiver, enable_sender
from netstack.linkguardian.scenarios import stress_topology
from netstack.sim.hosts import UdpSink, UdpStream
from netstack.sim.network import Network
from netstack.sim.packets import UDP_HEADERS
from netstack.sim.pktgen import SwitchGenerator
from netstack.topo.model import topology_from_dict

from . import GBPS

FWD_PORT = 5002
BACK_PORT = 5003
LG_ETHERTYPE = 0xABCD


class Fig7:
    """``lg`` is the LinkGuardian settings (None: the paper's 100G ones scaled to ``rate_bps``);
    ``auth`` a KeyRing: the link's control frames are sealed (docs/security.md);
    ``unprotected`` builds no features; ``protect=False`` attaches them disabled. A frame sw1 puts on
    the protected link for which ``forward_filter(frame, t)`` is False is lost (after the seeded
    corruption): a scripted loss."""

    def __init__(self, *, rate_bps: int = GBPS, delay_ns: int = 1_000, corrupt: float = 0.0, seed: int = 1,
                 lg: LGParams | None = None, unprotected: bool = False, protect: bool = True,
                 reverse_corrupt: bool = False, buffer_bytes: int = 4 << 20,
                 forward_filter: Callable[[bytes, int], bool] | None = None, auth: Any = None) -> None:
        doc = stress_topology(rate_bps=rate_bps, delay_ns=delay_ns, corrupt=corrupt, mode=None,
                              buffer_bytes=buffer_bytes)
        if corrupt and reverse_corrupt:
            doc["links"][1]["impairment"]["direction"] = "both"
        self.net = Network(topology_from_dict(doc), seed=seed)
        self.sw1 = self.net.switch("sw1")
        self.sw2 = self.net.switch("sw2")
        self.rate_bps = rate_bps
        if lg is None and not unprotected:
            lg = LGParams().scaled(100e9 / rate_bps)
        self.params = None if unprotected else lg
        self.sender = self.receiver = None
        if auth is not None:  # a KeyRing: both switches seal/open the link's control (the daemon's job live)
            from netstack.auth.context import AuthContext

            self.sw1.auth = AuthContext.start(auth, 1.7e9, {"p-sw2": "sw1-sw2"})
            self.sw2.auth = AuthContext.start(auth, 1.7e9, {"p-sw1": "sw1-sw2"})
        if self.params is not None:
            self.receiver = enable_receiver(self.sw2, "p-sw1", self.params, 0)
            self.sender = enable_sender(self.sw1, "p-sw2", self.params, 0)
            if not protect:
                self.disable(0)
        self.h1, self.h2 = self.net.host("h1"), self.net.host("h2")
        self.sink = UdpSink(self.h2, port=FWD_PORT, record=True)
        self.back = UdpSink(self.h1, port=BACK_PORT, record=True)
        self.leaked = 0
        for h in (self.h1, self.h2):
            h.bind_ether(LG_ETHERTYPE, self._leak)
        self.dropped: list[bytes] = []
        if forward_filter is not None:
            keep = forward_filter

            def fate(i: int, frame: bytes) -> tuple[bool, bool, int]:
                if not keep(frame, self.net.now):
                    self.dropped.append(frame)
                    return True, False, 0
                return False, False, 0

            self.net.channel("sw1-sw2", "sw1").fate = fate
        self.generators: list[SwitchGenerator] = []
        self.streams: list[UdpStream] = []
        self._n1 = 0

    def _leak(self, frame: bytes) -> None:
        self.leaked += 1

    # ------------------------------------------------------------------ protection
    def enable(self, now_ns: int) -> None:
        assert self.receiver is not None and self.sender is not None
        self.receiver.enable(now_ns)
        self.sender.enable(now_ns)
        self.net.service("sw1")
        self.net.service("sw2")

    def disable(self, now_ns: int) -> None:
        if self.sender is not None:
            self.sender.disable(now_ns)
        if self.receiver is not None:
            self.receiver.disable(now_ns)

    # --------------------------------------------------------------------- traffic
    def backlog(self, count: int, size: int, depth: int = 8) -> SwitchGenerator:
        """``count`` frames of ``size`` bytes h1 -> h2, ``depth`` kept queued at sw1's protected egress."""
        g = SwitchGenerator(self.net, "h1", "h2", count=count, size=size, depth=depth, dport=FWD_PORT)
        self.generators.append(g)
        return g

    def stream(self, count: int, size: int, *, rate_bps: float | None = None, host: str = "h1",
               start_ns: int = 0) -> UdpStream:
        """``count`` frames of ``size`` bytes at ``rate_bps`` (default line rate) from ``host`` to the other."""
        src, dst, port = (self.h1, "h2", FWD_PORT) if host == "h1" else (self.h2, "h1", BACK_PORT)
        s = UdpStream(src, dst, count=count, size=size - UDP_HEADERS, rate_bps=rate_bps, dport=port,
                      start_ns=start_ns)
        self.streams.append(s)
        return s

    def send(self, size: int, at_ns: int = 0) -> None:
        """One frame h1 -> h2 of ``size`` bytes, next in sequence, put on h1's NIC at ``at_ns``."""
        import struct

        flow = self.h1.flow("h2")
        self.h1.send(flow.udp(4999, FWD_PORT, struct.pack("!I", self._n1) + bytes(size - UDP_HEADERS - 4)), at_ns)
        self._n1 += 1

    def run(self, until_ns: int | None = None) -> int:
        return self.net.run(until_ns)

    # ---------------------------------------------------------------------- report
    @property
    def offered(self) -> int:
        return (sum(g.injected for g in self.generators) + sum(s.sent for s in self.streams if s.host is self.h1)
                + self._n1)

    def delivered(self) -> list[int]:
        return list(self.sink.order or [])

    def report(self) -> dict[str, Any]:
        """Fig. 7's counters: A offered, B protected egress, C protected ingress, D delivered."""
        c1 = self.sw1.counters()["p-sw2"]
        c2 = self.sw2.counters()["p-sw1"]
        a, b = self.offered, c1["tx_frames"]
        c = c2["rx_frames"] - c2["fcs_errors"] - c2["malformed"]
        d = self.sink.unique
        first = min([g.first_ns for g in self.generators if g.first_ns is not None]
                    + [s.first_ns for s in self.streams if s.first_ns is not None and s.host is self.h1] or [0])
        dur = (self.sink.last_ns - first) if self.sink.last_ns is not None else None
        wire = self.sink.bytes + self.sink.unique * (UDP_HEADERS + 24)  # payload, headers, line overhead
        goodput = wire * 8e9 / dur if dur else 0.0
        out: dict[str, Any] = {
            "offered_A": a, "protected_egress_B": b, "protected_ingress_C": c, "delivered_D": d,
            "actual_loss": 1 - c / b if b else 0.0, "effective_loss": 1 - d / a if a else 0.0,
            "duplicates": self.sink.duplicates, "out_of_order": self.sink.reordered,
            "effective_link_speed": goodput / self.rate_bps if dur else None, "fcs_errors": c2["fcs_errors"],
            "egress_queue_drops": c1["queue_drops"], "leaked_lg_frames": self.leaked,
            "protected": self.params is not None,
            "time_scale": self.params.time_scale if self.params is not None else 1.0,
        }
        if self.sender is not None and self.receiver is not None:
            s, r = self.sender.engine, self.receiver.engine
            out.update(copies=s.copies, retransmissions=s.c.retransmissions, retx_frames=s.c.retx_frames,
                       holes_not_buffered=s.c.holes_not_buffered, dummies_sent=s.c.dummies_sent, timeouts=r.c.timeouts,
                       holes_detected=r.c.holes_detected, reorder_buffer_max_bytes=r.c.reorder_buffer_max_bytes,
                       reorder_drops=r.c.reorder_drops, pauses_sent=r.c.pauses_sent, resumes_sent=r.c.resumes_sent)
        return out


__all__ = ["BACK_PORT", "FWD_PORT", "Fig7"]
