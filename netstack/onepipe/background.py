"""Background TCP flows beside 1Pipe in virtual time (1Pipe: Scalable Total Order Communication in
Data Center Networks, §7.1, Fig. 12: "background flows" per host, and an oversubscribed fabric):
the ``onepipe`` scenario's ``bg_flows`` parameter.

Every host with a 1Pipe process opens ``bg_flows`` long-lived TCP connections (the simulator's
NewReno model, :mod:`netstack.sim.tcp`) to hosts drawn, with the run's seed, among those under
other ToRs (so that the flows cross the ToR-spine links, whose rate ``uplink_rate`` sets the
oversubscription), and keeps each one backlogged from the start of the sending period to its end:
every ``REFILL_NS`` a sender whose unacknowledged bytes fell below :data:`LOW_BYTES` is given
:data:`CHUNK_BYTES` more (a bounded buffer, not the whole run's bytes at once). Receivers read
and discard. 1Pipe's packets share the hosts' NICs and the switches' queues with them (one
class), so what they add is queueing. The result counts what the flows moved, and what the
fabric did meanwhile (drops and PFC pauses: :func:`fabric_counters`).

The hosts' NICs: every host of a run with flows gets a :class:`netstack.sim.nic.HostNic` in front
of its link (:func:`netstack.sim.nic.install_nics`): the paper's hosts send 1Pipe over an RDMA NIC
(RoCEv2, §7.1) and the flows through the kernel, two send queues that the NIC serves in turn, and
on a lossless fabric the NIC honours its ToR's PFC pauses. (With one FIFO and PFC, a paused host's
beacons waited behind the flows' backlog past 1Pipe's input timeout, and reliable 1Pipe declared
live processes failed: docs/onepipe.md, Fig. 12.)
"""

from __future__ import annotations

import random
from typing import Any

from ..sim.nic import install_nics

#: the first server port of the flows (one per flow of a host: k-th flow -> BG_PORT + k)
BG_PORT = 45000
CHUNK_BYTES = 128 * 1024
LOW_BYTES = 64 * 1024
REFILL_NS = 5_000
MAX_FLOWS = 64
#: the switch port counters :func:`fabric_counters` sums (netstack.switch.counters)
FABRIC_COUNTERS = ("queue_drops", "carrier_drops", "mtu_drops", "pauses_tx", "pause_refreshes_tx", "resumes_tx",
                   "pauses_rx", "pauses_refused", "pfc_watchdog_events")


def fabric_counters(net: Any) -> dict[str, Any]:
    """The switches' drops and PFC frames over the run (:data:`FABRIC_COUNTERS` summed over every
    port), and the ports that dropped (``switch:port`` -> frames)."""
    out: dict[str, Any] = dict.fromkeys(FABRIC_COUNTERS, 0)
    dropped: dict[str, int] = {}
    for name in sorted(net.switches):
        for port, c in net.switch(name).counters().items():
            for k in FABRIC_COUNTERS:
                out[k] += int(c.get(k) or 0)
            if c.get("queue_drops"):
                dropped[f"{name}:{port}"] = int(c["queue_drops"])
    out["drops_by_port"] = dropped
    return out


def _discard(ep: Any) -> None:
    ep.conn.read()  # (read and dropped: a sink)


class Background:
    """The flows of one run (module docstring): :meth:`start` before the run, :meth:`result` after."""

    def __init__(self, net: Any, hosts: list[str], tor_of: dict[str, str], flows: int, seed: int) -> None:
        from ..sim.tcp import connect

        rng = random.Random(f"{seed}/background")
        self.net = net
        self.nics = install_nics(net)
        self.pairs: list[tuple[Any, Any]] = []
        chunk = bytes(CHUNK_BYTES)
        self._chunk = chunk
        for h in hosts:
            away = [x for x in hosts if tor_of.get(x) != tor_of.get(h)] or [x for x in hosts if x != h]
            if not away:
                continue
            for k in range(flows):
                a, b = connect(net.host(h), net.host(rng.choice(away)), BG_PORT + k)
                b.on_data = _discard
                self.pairs.append((a, b))
        self.received_at_stop = 0
        self.refills = 0

    def start(self, at_ns: int, stop_ns: int) -> None:
        """Backlogged from ``at_ns`` to ``stop_ns`` (refilled every :data:`REFILL_NS`)."""
        loop = self.net.loop

        def refill() -> None:
            for a, _ in self.pairs:
                if a.conn.unacked < LOW_BYTES:
                    a.write(self._chunk)
                    self.refills += 1
            if loop.now + REFILL_NS < stop_ns:
                loop.call_at(loop.now + REFILL_NS, refill)
            else:
                loop.call_at(stop_ns, self._stop)

        loop.call_at(at_ns, refill)
        self._t0 = at_ns
        self._t1 = stop_ns

    def _stop(self) -> None:
        self.received_at_stop = sum(int(b.conn.counters().get("bytes_delivered") or 0) for _, b in self.pairs)

    def result(self) -> dict[str, Any]:
        senders = [a.conn.counters() for a, _ in self.pairs]
        span = max(1, self._t1 - self._t0)
        nics = self.nics
        gates = [n.gate for n in nics if n.gate is not None]
        waited = sum(n.waited_frames for n in nics)
        return {"flows": len(self.pairs), "refills": self.refills,
                "goodput_gbps": round(self.received_at_stop * 8 / span, 2),
                "retransmits": sum(int(c.get("retransmits") or 0) for c in senders),
                "timeouts": sum(int(c.get("timeouts") or 0) for c in senders),
                "fabric": fabric_counters(self.net),
                "nics": {"hosts": len(nics), "honour_pfc": len(gates),
                         "pauses": sum(g.c.pauses for g in gates), "paused_ns": sum(g.c.paused_ns for g in gates),
                         "peak_queued_bytes": max((n.peak_bytes for n in nics), default=0),
                         "onepipe_wait_ns_mean": round(sum(n.waited_ns for n in nics) / waited, 1) if waited else None}}


__all__ = ["BG_PORT", "CHUNK_BYTES", "FABRIC_COUNTERS", "LOW_BYTES", "MAX_FLOWS", "REFILL_NS", "Background",
           "fabric_counters"]
