"""Queue length and sending rate over time at the §3.1 scenario's ports, in virtual time: the data
of the paper's Figs. 3-4.

"Congestion Detection in Lossless Networks" §3.1 shows, for port P2 (and says the same of P0 and
P1), the queue length and the marked packets over time (Fig. 3, single congestion point) and the
queue length and the sending rate (Fig. 4, multiple congestion points), ECN against TCD. A
:class:`PortSampler` reads each port every ``every_ns`` of virtual time from the simulated
switches, each served at the sample's time first (its links simulated up to then, as any event
then would), so that the numbers are exact: the class queue (``queue_bytes``), the bytes the port started
sending since the last sample as a rate (``tx_bps``) and the downstream ingress counter whose
XOFF pauses it (``peer_ingress_bytes``: the bytes of the frames that came in over this link and
are still queued anywhere in the next switch; P3's peer is a host, which never pauses it).
"""

from __future__ import annotations

from typing import Any

#: paper time between two samples (ns): 5 us, a few pause cycles' resolution at 40 Gbit/s
EVERY_PAPER_NS = 5_000


class PortSampler:
    """Samples ``ports`` (``{name: (switch, ifname, peer switch | None, peer ifname | None)}``) of
    ``net`` (a :class:`netstack.sim.Network`) in class ``cls`` every ``every_ns`` from ``t0`` to
    ``end``, by events on the network's own loop (reading only: it changes nothing)."""

    def __init__(self, net: Any, ports: dict[str, tuple[str, str, str | None, str | None]], t0: int, end: int,
                 every_ns: int, cls: int = 0) -> None:
        self.net = net
        self.ports = ports
        self.t0 = t0
        self.end = end
        self.every = max(1, int(every_ns))
        self.cls = cls
        self.t: list[int] = []
        self.rows: dict[str, dict[str, list[int]]] = {
            name: {"queue_bytes": [], "tx_bps": [], "peer_ingress_bytes": []} for name in ports}
        self._last_tx: dict[str, int] = {}
        self._nodes = sorted({n for node, _, peer, _ in ports.values() for n in (node, peer) if n is not None})

    def start(self) -> PortSampler:
        self.net.loop.call_at(self.t0, self._sample)
        return self

    def _state(self, node: str, ifname: str, now: int) -> dict[str, Any]:
        sw = self.net.switch(node)
        for p in sw.ports:
            if p.name == ifname:
                state: dict[str, Any] = p.state(now)
                return state
        raise KeyError(f"{node} has no port {ifname}")

    def _sample(self) -> None:
        now = self.net.loop.now
        cls = self.cls
        for node in self._nodes:
            # the simulation of a switch's links runs lazily, up to its next event: bring each up to
            # now first, as any event at this time would (netstack.sim.network.SwitchNode.service)
            self.net.service(node)
        self.t.append(now - self.t0)
        for name, (node, ifname, peer, peer_if) in self.ports.items():
            st = self._state(node, ifname, now)
            row = self.rows[name]
            row["queue_bytes"].append(int(st["queue_bytes"][cls]))
            tx = int(st["tx_bytes"])
            last = self._last_tx.get(name)
            row["tx_bps"].append(0 if last is None else (tx - last) * 8 * 1_000_000_000 // self.every)
            self._last_tx[name] = tx
            peer_bytes = 0
            if peer is not None and peer_if is not None:
                peer_bytes = int(self._state(peer, peer_if, now)["ingress_bytes"][cls])
            row["peer_ingress_bytes"].append(peer_bytes)
        if now + self.every <= self.end:
            self.net.loop.call_at(now + self.every, self._sample)

    def result(self) -> dict[str, Any]:
        """``{"every_ns", "t_ns": [...], "ports": {name: {"queue_bytes", "tx_bps",
        "peer_ingress_bytes"}}}`` (times from ``t0``; ``tx_bps`` over the interval ending at each
        sample, 0 at the first)."""
        return {"every_ns": self.every, "t_ns": list(self.t), "ports": self.rows}


__all__ = ["EVERY_PAPER_NS", "PortSampler"]
