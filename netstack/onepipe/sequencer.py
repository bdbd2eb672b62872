"""The central sequencer, as simulated host apps: the classic design 1Pipe is measured against
(the paper's §7, Fig. 8: a sequencer on a host), run on the same hosts, switches and load as 1Pipe.

The model (ours; the paper gives no such detail):

- a process sends each scattering as one datagram to the sequencer's host: its index, its
  scattering counter, the destinations and the message;
- the sequencer is one core with one counter. It serves scatterings in arrival order, stamps each
  with the next global sequence number and each of its messages with the next number of that
  destination, and sends the messages one after another; each costs ``service_ns``. At the
  paper's scale that is 100 ns, i.e. 10 M messages/s: what one CPU core of a kernel-bypass RPC
  stack handles with small messages (eRPC, Kalia et al., NSDI '19: "up to 10 million small RPCs
  per second" on one core). This service time is our model of a well-built software sequencer,
  not a measurement; a kernel UDP stack would be an order of magnitude slower;
- its queue holds ``queue`` messages (a NIC receive ring's worth); a scattering that does not fit
  is dropped whole and counted (``seq_dropped``): no sender learns of it (the sequencer has no
  send-fail callback);
- a receiver delivers in its per-destination order. Every path is FIFO (one static route), so a
  message arrives in that order or not at all: a gap is a message the network lost, counted
  (``lost``) and skipped.

The ports are outside 1Pipe's range (:data:`SEQ_PORT`; the k-th process of a host on
``SEQ_PORT + k``), so no 1Pipe switch feature would ever take these datagrams for its own.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from typing import Any

from ..sim.hosts import Host
from ..sim.packets import UDP_HEADERS, ip_payload_end
from .load import PoissonScatterer
from .params import PORT

#: the sequencer's UDP port; process k of a host binds SEQ_PORT + k
SEQ_PORT = 41000
#: to the sequencer: sender index, scattering counter, destinations; then the destinations (u32 each)
_TO_SEQ = struct.Struct("!IQH")
_DST = struct.Struct("!I")
#: from the sequencer: sender index, scattering counter, global sequence number, per-destination number
_FROM_SEQ = struct.Struct("!IQQQ")


class Sequencer:
    """The sequencer host's app (see the module docstring)."""

    def __init__(self, host: Host, procs: Sequence[SeqProcess], service_ns: int, queue: int) -> None:
        self.host = host
        self.loop = host.loop
        self.service = max(1, int(service_ns))
        self.queue = queue
        self.flows = [host.flow(p.host.ip) for p in procs]
        self.ports = [p.port for p in procs]
        self.per_dst = [0] * len(procs)
        self.next_global = 0
        self.busy = 0  # when the server finishes what it has accepted
        self.forwarded = self.dropped = self.max_backlog = 0
        host.bind_udp(SEQ_PORT, self.on_frame)
        host.add(self)

    def on_frame(self, frame: bytes) -> None:
        now = self.loop.now
        data = frame[UDP_HEADERS:ip_payload_end(frame)]
        src, seq, n = _TO_SEQ.unpack_from(data)
        at = _TO_SEQ.size
        dsts = [_DST.unpack_from(data, at + 4 * i)[0] for i in range(n)]
        payload = data[at + 4 * n:]
        backlog = -(-max(0, self.busy - now) // self.service)  # messages queued or in service
        if backlog + n > self.queue:
            self.dropped += n
            return
        self.max_backlog = max(self.max_backlog, backlog + n)
        t = max(self.busy, now)
        g = self.next_global
        self.next_global += 1
        for d in dsts:
            t += self.service
            pd = self.per_dst[d]
            self.per_dst[d] = pd + 1
            # the message leaves when the server has finished it (the NIC then serialises it)
            self.host.send(self.flows[d].udp(SEQ_PORT, self.ports[d], _FROM_SEQ.pack(src, seq, g, pd) + payload), t)
            self.forwarded += 1
        self.busy = t


class SeqProcess(PoissonScatterer):
    """A process of the sequencer baseline: it sends its scatterings to the sequencer and
    delivers what comes back in sequence order."""

    def __init__(self, host: Host, idx: int, name: str, port: int, seq_host: Host,
                 sent_at: dict[tuple[int, int], int], latency: list[int], window: tuple[int, int]) -> None:
        self.host = host
        self.loop = host.loop
        self.idx = idx
        self.name = name
        self.port = port
        self.to_seq = host.flow(seq_host.ip)
        self.sent_at = sent_at
        self.latency = latency
        self.sent = self.scatterings = self.delivered = self.lost = self.duplicates = 0
        self.violations = 0
        self.window = window
        self.in_window = 0
        self._expect = 0
        self._last_global = -1
        self._nseq = 0
        host.bind_udp(port, self.on_frame)
        host.add(self)

    def scatter(self, dsts: list[Any], now: int) -> None:
        head = _TO_SEQ.pack(self.idx, self._nseq, len(dsts)) + b"".join(_DST.pack(d.idx) for d in dsts)
        self.host.send(self.to_seq.udp(self.port, SEQ_PORT, head + bytes(self._size)))
        self.sent_at[(self.idx, self._nseq)] = now
        self._nseq += 1
        self.scatterings += 1
        self.sent += self._k

    def on_frame(self, frame: bytes) -> None:
        src, seq, g, pd = _FROM_SEQ.unpack_from(frame, UDP_HEADERS)
        if pd < self._expect:
            self.duplicates += 1
            return
        self.lost += pd - self._expect
        self._expect = pd + 1
        if g <= self._last_global:
            self.violations += 1  # cannot happen on FIFO paths: the check that it does not
        self._last_global = g
        self.delivered += 1
        now = self.loop.now
        if self.window[0] <= now < self.window[1]:
            self.in_window += 1
        sent = self.sent_at.get((src, seq))
        if sent is not None:
            self.latency.append(now - sent)


def run_sequencer(net: Any, p: dict[str, Any], placed: Sequence[tuple[str, str, int]], seq_host: str, seed: int,
                  start: int, stop: int, window: tuple[int, int]) -> dict[str, Any]:
    """Run the baseline on ``net`` for the processes ``placed`` (``[(name, host, 1Pipe port)]``,
    which give each its host and its rank there), sending from ``start`` to ``stop``; raw results
    (latencies in ns, unsorted; ``in_window``: deliveries inside ``window``)."""
    sent_at: dict[tuple[int, int], int] = {}
    latency: list[int] = []
    seqh = net.host(seq_host)
    procs = [SeqProcess(net.host(h), i, name, SEQ_PORT + (port - PORT), seqh, sent_at, latency, window)
             for i, (name, h, port) in enumerate(placed)]
    sequencer = Sequencer(seqh, procs, p["seq_service_ns"], p["seq_queue"])
    for proc in procs:
        peers = [q for q in procs if q is not proc]
        proc.start(peers, p["scatter_rate"], p["fanout"], p["size"], start, stop, random.Random(f"{seed}/{proc.name}"))
    net.run(stop + p["drain_ns"] + sequencer.queue * sequencer.service)  # and what its queue still holds
    sent = sum(q.sent for q in procs)
    delivered = sum(q.delivered for q in procs)
    return {
        "sent": sent, "scatterings": sum(q.scatterings for q in procs), "delivered": delivered,
        "latency": latency, "in_window": sum(q.in_window for q in procs), "lost": sum(q.lost for q in procs),
        "seq_dropped": sequencer.dropped,
        "violations": sum(q.violations for q in procs), "duplicates": sum(q.duplicates for q in procs),
        "sequencer": {"host": seq_host, "service_ns": sequencer.service, "queue": sequencer.queue,
                      "capacity_msgs_per_s": 1e9 / sequencer.service, "forwarded": sequencer.forwarded,
                      "dropped": sequencer.dropped, "max_backlog": sequencer.max_backlog,
                      "offered_msgs_per_s": sent / ((stop - start) / 1e9)},
    }


__all__ = ["SEQ_PORT", "SeqProcess", "Sequencer", "run_sequencer"]
