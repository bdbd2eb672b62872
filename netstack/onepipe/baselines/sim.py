"""The baselines' simulated processes, sequencer host and switch stage on :mod:`netstack.sim`: the
engines of this package behind UDP ports, with the same offered load as 1Pipe
(:class:`~netstack.onepipe.load.PoissonScatterer`) and, when the run has CPU costs, one
:class:`~netstack.sim.cpu.HostCpu` per process (the paper's processes each run on their own core,
1Pipe §7.1) that every send and receive is charged to.

What each operation costs (``cpu_costs``, ns; a missing key costs what its fallback does):

- ``send_msg``: a datagram a process sends (a message; to a sequencer, a whole scattering);
- ``recv_msg``: a message a process receives;
- ``heartbeat``: a Lamport heartbeat received: the clock taken, nothing delivered (fallback:
  ``recv_msg``); sending one is a datagram like any other (``send_msg``);
- ``token``: taking the token and passing it on (fallback: ``recv_msg``).

Ports: the k-th process of a host binds ``BASE_PORT + k`` (outside 1Pipe's range, as the sequencer
baseline's). A datagram between two processes of one host is handed over by the host itself, as the
kernel does (never through the ToR); the token takes :data:`LOOPBACK_TOKEN_NS` for that hop, so that
a ring on one host does not spin within one instant.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ...sim.cpu import HostCpu
from ...sim.hosts import Host
from ...sim.packets import UDP_HEADERS, ip_payload_end
from ...sim.scenario import ScenarioError
from ...topo.model import NodeKind
from ..load import PoissonScatterer
from ..params import PORT
from .hostseq import StampingSequencer, pack_scattering, unpack_scattering
from .lamport import WIRE_SIZE as LAMPORT_WIRE
from .lamport import LamportMsg, LamportProcess
from .stamped import Stamped, StampedReceiver
from .switchseq import PAPER_NS_PER_MSG, SWSEQ_PORT, Route, SwitchSequencer
from .token import Token, TokenProcess

#: process k of a host binds BASE_PORT + k; the host sequencer listens on SEQ_PORT
BASE_PORT = 42000
SEQ_PORT = 42998
#: a token handed to a process of the same host arrives this much later (see the module docstring)
LOOPBACK_TOKEN_NS = 100
#: first payload byte of a token ring's datagrams
_K_MSG, _K_TOKEN = 1, 3


class Costs:
    """The per-operation CPU costs (ns) of a run; all 0 without a CPU model."""

    __slots__ = ("heartbeat", "on", "recv_msg", "send_msg", "token")

    def __init__(self, costs: Mapping[str, int] | None) -> None:
        c = dict(costs or {})
        self.on = costs is not None
        self.send_msg = int(c.get("send_msg", 0))
        self.recv_msg = int(c.get("recv_msg", 0))
        self.heartbeat = int(c.get("heartbeat", self.recv_msg))
        self.token = int(c.get("token", self.recv_msg))


class Results:
    """What every process of a run writes to: send times, latencies, the throughput window."""

    def __init__(self, window: tuple[int, int], record: bool = False, backlog_ns: int = 0) -> None:
        self.window = window
        #: with a core: the application blocks while its core owes more than this (ns)
        self.backlog_ns = backlog_ns
        self.sent_at: dict[tuple[int, int], int] = {}
        self.latency: list[int] = []
        #: with ``record``: every process's deliveries in order, ``(order key, sender, scattering)``
        self.log: dict[int, list[tuple[Any, int, int]]] | None = {} if record else None


class BaselineProcess(PoissonScatterer):
    """A process: its host, UDP port, optional core, and its delivery counters. Subclasses send
    (:meth:`scatter`) and take datagrams (:meth:`on_datagram`, after the receive cost was spent)."""

    def __init__(self, host: Host, idx: int, name: str, port: int, res: Results, cpu: HostCpu | None,
                 costs: Costs) -> None:
        self.host = host
        self.loop = host.loop
        self.idx = idx
        self.name = name
        self.port = port
        self.res = res
        self.cpu = cpu
        self.costs = costs
        self.peers: list[BaselineProcess] = []
        self.sent = self.scatterings = self.delivered = self.in_window = self.violations = 0
        self.last_key: Any = None
        self.nseq = 0
        host.bind_udp(port, self.on_frame)
        host.add(self)

    # ------------------------------------------------------------------ CPU and wire
    def work(self, cost: int, fn: Callable[..., None], *args: Any) -> None:
        """``fn(*args)`` once this process's core has spent ``cost`` on it (at once without a core)."""
        if self.cpu is None:
            fn(*args)
        else:
            self.cpu.run(cost, fn, *args)

    def transmit(self, dst: BaselineProcess, payload: bytes, delay: int = 0) -> None:
        """``payload`` to process ``dst``: through the NIC, or handed over by the host itself."""
        if dst.host is self.host:  # (through the host stack both ways when it has one: Host.stack_ns)
            self.loop.call_at(self.loop.now + delay + 2 * self.host.stack_ns, dst.on_frame,
                              self.host.flow(self.host.ip).udp(self.port, dst.port, payload))
        else:
            self.host.send(self.host.flow(dst.host.ip).udp(self.port, dst.port, payload))

    def on_frame(self, frame: bytes) -> None:
        data = frame[UDP_HEADERS:ip_payload_end(frame)]
        self.work(self.receive_cost(data), self.on_datagram, data)

    def receive_cost(self, data: bytes) -> int:
        return self.costs.recv_msg

    def on_datagram(self, data: bytes) -> None:
        raise NotImplementedError

    # ------------------------------------------------------------------ load and deliveries
    def _next(self) -> None:
        """The next Poisson scattering; with a core, the application blocks while its core owes more
        than ``backlog_ns`` (a send call waiting for the send path, as the 1Pipe processes of the same
        runs do, ``netstack.onepipe.simproc``): the core, not the offered load, sets the rate."""
        cpu = self.cpu
        if cpu is not None:
            over = cpu.backlog_ns() - self.res.backlog_ns
            if over > 0 and self.loop.now < self._stop:
                self.loop.call_at(self.loop.now + over, self._next)
                return
        super()._next()

    def scatter(self, dsts: list[Any], now: int) -> None:
        self.res.sent_at[(self.idx, self.nseq)] = now
        self.send_scattering(self.nseq, [d.idx for d in dsts])
        self.nseq += 1
        self.scatterings += 1
        self.sent += len(dsts)

    def send_scattering(self, sseq: int, dsts: list[int]) -> None:
        raise NotImplementedError

    def deliver(self, src: int, sseq: int, key: Any) -> None:
        """A message delivered; ``key`` is its place in the total order (checked: it only grows)."""
        if self.last_key is not None and key <= self.last_key:
            self.violations += 1
        self.last_key = key
        if self.res.log is not None:
            self.res.log.setdefault(self.idx, []).append((key, src, sseq))
        self.delivered += 1
        now = self.loop.now
        w = self.res.window
        if w[0] <= now < w[1]:
            self.in_window += 1
        sent = self.res.sent_at.get((src, sseq))
        if sent is not None:
            self.res.latency.append(now - sent)



# ---------------------------------------------------------------------- host sequencer
class SequencerHost:
    """The sequencer's host app: the :class:`~.hostseq.StampingSequencer` behind :data:`SEQ_PORT`."""

    def __init__(self, host: Host, procs: Sequence[BaselineProcess], service_ns: float, queue: int) -> None:
        self.host = host
        self.procs = list(procs)
        self.engine = StampingSequencer(len(procs), service_ns, queue)
        self.flows = [host.flow(p.host.ip) for p in procs]
        host.bind_udp(SEQ_PORT, self.on_frame)
        host.add(self)

    def on_frame(self, frame: bytes) -> None:
        src, sseq, dsts, payload = unpack_scattering(frame[UDP_HEADERS:ip_payload_end(frame)])
        for leave, d, m in self.engine.on_scattering(self.host.loop.now, src, sseq, dsts):
            # the message leaves when the server has finished it (the NIC then serialises it)
            self.host.send(self.flows[d].udp(SEQ_PORT, self.procs[d].port, m.pack() + payload), leave)


class StampedProcess(BaselineProcess):
    """A process whose messages are numbered before they travel (host or switch sequencer): it
    sends each scattering as one datagram and delivers in its destination numbers' order."""

    def __init__(self, *args: Any, to: tuple[Host, int], hold: bool = False, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.to_flow = self.host.flow(to[0].ip)
        self.to_port = to[1]
        self.receiver = StampedReceiver(hold)

    def send_scattering(self, sseq: int, dsts: list[int]) -> None:
        payload = pack_scattering(self.idx, sseq, dsts, bytes(self._size))
        self.work(self.costs.send_msg, self.host.send, self.to_flow.udp(self.port, self.to_port, payload))

    def on_datagram(self, data: bytes) -> None:
        for m in self.receiver.on_message(Stamped.unpack(data)):
            self.deliver(m.src, m.sseq, m.g)


# ---------------------------------------------------------------------- token ring
class TokenRingProcess(BaselineProcess):
    """A process of the token ring (:mod:`.token`)."""

    def __init__(self, *args: Any, batch: int, queue: int, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.engine: TokenProcess | None = None
        self.batch, self.queue = batch, queue
        self.receiver = StampedReceiver(hold=True)

    def join(self, nprocs: int) -> None:
        self.engine = TokenProcess(self.idx, nprocs, self.batch, self.queue)
        self.blocked = False

    def _next(self) -> None:
        """A send call blocks while the process's queue for the token is full (a bounded send
        buffer): the ring, not the offered load, sets the rate; the token's next visit resumes it."""
        e = self.engine
        if e is not None and e.queued + self._k > e.queue and self.loop.now < self._stop:
            self.blocked = True
            return
        super()._next()

    def send_scattering(self, sseq: int, dsts: list[int]) -> None:
        assert self.engine is not None
        self.engine.submit(sseq, dsts)  # a scattering that does not fit is counted by the engine

    def receive_cost(self, data: bytes) -> int:
        return self.costs.token if data[0] == _K_TOKEN else self.costs.recv_msg

    def on_datagram(self, data: bytes) -> None:
        if data[0] == _K_TOKEN:
            self.hold(Token.unpack(data, 1))
            return
        for m in self.receiver.on_message(Stamped.unpack(data, 1)):
            self.deliver(m.src, m.sseq, m.g)

    def hold(self, token: Token) -> None:
        """The token is here: send what it allows, then pass it on (after those sends, FIFO on the core)."""
        assert self.engine is not None
        msgs, nxt = self.engine.on_token(token)
        if self.blocked and msgs:
            self.blocked = False
            self.loop.call_at(self.loop.now, self._next)
        pad = bytes(self._size) if msgs else b""
        for d, m in msgs:
            self.work(self.costs.send_msg, self.transmit, self.peers_by_idx[d], bytes([_K_MSG]) + m.pack() + pad)
        if nxt is not None:
            to = self.peers_by_idx[self.engine.next]
            self.work(0, self.transmit, to, bytes([_K_TOKEN]) + nxt.pack(),
                      LOOPBACK_TOKEN_NS if to.host is self.host else 0)

    peers_by_idx: list[BaselineProcess]


# ---------------------------------------------------------------------- Lamport
class LamportNode(BaselineProcess):
    """A process of the Lamport baseline (:mod:`.lamport`): heartbeats every ``interval`` until ``end``."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.engine: LamportProcess | None = None
        self.peers_by_idx: list[BaselineProcess] = []

    def join(self, procs: list[BaselineProcess], first: int, interval: int, end: int) -> None:
        self.engine = LamportProcess(self.idx, len(procs))
        self.peers_by_idx = procs
        self.interval, self.end = interval, end
        self.loop.call_at(first, self._beat)

    def _beat(self) -> None:
        assert self.engine is not None
        for m in self.engine.heartbeat():
            self.work(self.costs.send_msg, self.transmit, self.peers_by_idx[m.dst], m.pack())
        t = self.loop.now + self.interval
        if t < self.end:
            self.loop.call_at(t, self._beat)

    def send_scattering(self, sseq: int, dsts: list[int]) -> None:
        assert self.engine is not None
        pad = bytes(self._size)
        for m in self.engine.send(sseq, dsts):
            self.work(self.costs.send_msg, self.transmit, self.peers_by_idx[m.dst], m.pack() + pad)

    def receive_cost(self, data: bytes) -> int:
        return self.costs.heartbeat if data[LAMPORT_WIRE - 1] else self.costs.recv_msg

    def on_datagram(self, data: bytes) -> None:
        assert self.engine is not None
        for m in self.engine.on_message(LamportMsg.unpack(data)):
            self.deliver(m.src, m.sseq, (m.ts, m.src))


# ---------------------------------------------------------------------- runs
#: the token holder sends at most this many scatterings before passing it on (our choice, see docs)
DEFAULT_TOKEN_BATCH = 8
#: with a core, the application blocks while it owes more than this (the scenario's cpu_backlog_ns default)
DEFAULT_BACKLOG_NS = 1_000
#: at most this share of a core for Lamport's heartbeats (1Pipe §7.1's example: 50 %)
DEFAULT_HB_SHARE = 0.5


class Run:
    """What a baseline is built from: the network, the parameters, the processes' places, the run's times."""

    def __init__(self, net: Any, p: dict[str, Any], placed: Sequence[tuple[str, str, int]], seq_host: str | None,
                 start: int, end: int, res: Results, costs: Costs) -> None:
        self.net, self.p, self.placed, self.seq_host = net, p, placed, seq_host
        self.start, self.end, self.res, self.costs = start, end, res, costs
        self.scale = float(p.get("time_scale", 1.0))

    def args(self, i: int) -> tuple[Any, ...]:
        """Process ``i``'s constructor arguments: its host, rank, name, port, results, core, costs."""
        name, h, port = self.placed[i]
        host = self.net.host(h)
        cpu = HostCpu(host.loop, name) if self.costs.on else None
        return host, i, name, BASE_PORT + (port - PORT), self.res, cpu, self.costs

    def tor(self, host: str) -> str:
        return str(self.net.topology.links_of(host)[0].peer(host).node)


class Baseline:
    """One baseline's processes on the network (built by the subclass), and what it reports."""

    procs: list[BaselineProcess]
    #: the network runs this much past the drain (what a sequencer's queue still holds)
    extra_ns = 0

    def __init__(self, run: Run) -> None:
        raise NotImplementedError

    def dropped(self) -> int:
        """Messages the ordering stage dropped before they entered the network."""
        return 0

    def counters(self) -> dict[str, Any]:
        return {}


class HostSeqBaseline(Baseline):
    def __init__(self, run: Run) -> None:
        if run.seq_host is None:
            raise ScenarioError(f"scenario onepipe: mode {run.p['mode']} needs a host for the sequencer "
                                "(seq_host, or a host named 'seq')")
        seqh = run.net.host(run.seq_host)
        self.procs = [StampedProcess(*run.args(i), to=(seqh, SEQ_PORT)) for i in range(len(run.placed))]
        self.seq = SequencerHost(seqh, self.procs, float(run.p["seq_service_ns"]), int(run.p["seq_queue"]))
        self.extra_ns = math.ceil(self.seq.engine.queue * self.seq.engine.service)

    def dropped(self) -> int:
        return self.seq.engine.c.dropped

    def counters(self) -> dict[str, Any]:
        return {"host": self.seq.host.name, **self.seq.engine.counters()}


def spine_of(net: Any) -> str:
    """The switch with the most switch neighbours (the fabric's spine)."""
    def fabric_degree(name: str) -> int:
        return sum(1 for link in net.topology.links_of(name) if link.peer(name).node in net.switches)
    return str(max(sorted(net.switches), key=fabric_degree))


class SwitchSeqBaseline(Baseline):
    def __init__(self, run: Run) -> None:
        net = run.net
        spine = str(run.p.get("swseq_switch") or spine_of(net))
        hosts = [n.name for n in net.topology.nodes if n.kind is NodeKind.HOST]

        def anchor(h: str) -> Host:
            # a host on another ToR: the path there climbs to the spine, whose ingress takes the datagram
            for o in hosts:
                if run.tor(o) != run.tor(h):
                    return net.host(o)  # type: ignore[no-any-return]
            raise ScenarioError("scenario onepipe: mode switchseq needs hosts under at least two ToRs "
                                "(the spine stamps what crosses it)")

        self.procs = [StampedProcess(*run.args(i), to=(anchor(h), SWSEQ_PORT))
                      for i, (_, h, _) in enumerate(run.placed)]
        down = {link.peer(spine).node: link.end(spine).ifname for link in net.topology.links_of(spine)}
        routes = [Route(down[run.tor(q.host.name)], q.host.mac, q.host.ip, q.port) for q in self.procs]
        ns = float(run.p.get("swseq_ns_per_msg") or 0) or PAPER_NS_PER_MSG * run.scale
        self.stage = SwitchSequencer(net.switch(spine), routes, ns, int(run.p["seq_queue"]))
        net.service(spine)

    def dropped(self) -> int:
        return self.stage.engine.c.dropped

    def counters(self) -> dict[str, Any]:
        return self.stage.counters()


class TokenBaseline(Baseline):
    def __init__(self, run: Run) -> None:
        self.batch = int(run.p.get("token_batch") or DEFAULT_TOKEN_BATCH)
        n = len(run.placed)
        k = max(1, min(int(run.p["fanout"]), n - 1))
        self.queue = int(run.p.get("token_queue") or 2 * self.batch * k)
        self.ring = [TokenRingProcess(*run.args(i), batch=self.batch, queue=self.queue) for i in range(n)]
        for t in self.ring:
            t.join(n)
            t.peers_by_idx = list(self.ring)
        self.procs = list(self.ring)
        run.net.loop.call_at(run.start, self.ring[0].hold, Token.first(n))

    def engines(self) -> list[TokenProcess]:
        return [t.engine for t in self.ring if t.engine is not None]

    def dropped(self) -> int:
        return sum(e.c.dropped for e in self.engines())

    def counters(self) -> dict[str, Any]:
        es = self.engines()
        return {"batch": self.batch, "queue": self.queue, "passes": sum(e.c.passes for e in es),
                "rounds": sum(e.c.passes for e in es) / max(1, len(es)), "token_dups": sum(e.c.token_dups for e in es),
                "token_bytes": len(Token.first(len(es)).pack()) + 1, "waiting_at_end": sum(e.queued for e in es),
                "held_at_end": sum(t.receiver.held for t in self.ring)}


def heartbeat_interval(base_ns: int, nprocs: int, costs: Costs, share: float) -> int:
    """The Lamport heartbeat interval: ``base_ns``, or longer so that the heartbeats' own work (``P - 1``
    sent and ``P - 1`` received an interval) stays within ``share`` of a core (1Pipe §7.1's trade-off:
    "even if 50% throughput is used for timestamp exchange")."""
    per = costs.send_msg + costs.heartbeat
    need = math.ceil((nprocs - 1) * per / share) if costs.on and share > 0 else 0
    return max(1, base_ns, need)


class LamportBaseline(Baseline):
    def __init__(self, run: Run) -> None:
        n = len(run.placed)
        self.nodes = [LamportNode(*run.args(i)) for i in range(n)]
        self.base = int(run.p.get("lamport_hb_ns") or run.p["t_beacon_ns"])
        self.share = float(run.p.get("lamport_hb_share") or DEFAULT_HB_SHARE)
        self.interval = heartbeat_interval(self.base, n, run.costs, self.share)
        for node in self.nodes:
            # staggered, so the P heartbeat bursts do not leave at one instant
            node.join(list(self.nodes), run.start + self.interval * node.idx // n, self.interval, run.end)
        self.procs = list(self.nodes)

    def counters(self) -> dict[str, Any]:
        es = [q.engine for q in self.nodes if q.engine is not None]
        return {"heartbeat_ns": self.interval, "heartbeat_base_ns": self.base, "heartbeat_share": self.share,
                "heartbeats_sent": sum(e.c.heartbeats_tx for e in es),
                "heartbeats_received": sum(e.c.heartbeats_rx for e in es),
                "held_at_end": sum(e.held for e in es), "max_held": max((e.c.max_held for e in es), default=0)}


BASELINES: dict[str, type[Baseline]] = {"hostseq": HostSeqBaseline, "sequencer": HostSeqBaseline,
                                         "switchseq": SwitchSeqBaseline, "token": TokenBaseline,
                                         "lamport": LamportBaseline}


def run_processes(net: Any, p: dict[str, Any], placed: Sequence[tuple[str, str, int]], seq_host: str | None,
                  seed: int, start: int, stop: int, window: tuple[int, int],
                  cpu_costs: Mapping[str, int] | None, record: bool = False) -> dict[str, Any]:
    """Run baseline ``p["mode"]`` (see :mod:`netstack.onepipe.baselines`); raw results (``record``:
    and every process's deliveries, ``log``)."""
    mode = p["mode"]
    if mode not in BASELINES:
        raise ScenarioError(f"scenario onepipe: no baseline {mode!r}")
    costs = Costs(cpu_costs)
    scale = float(p.get("time_scale", 1.0))
    res = Results(window, record, int(p.get("cpu_backlog_ns") or round(DEFAULT_BACKLOG_NS * scale)))
    end = stop + int(p["drain_ns"])
    base = BASELINES[mode](Run(net, p, placed, seq_host, start, end, res, costs))
    procs = base.procs
    cores = [q.cpu for q in procs if q.cpu is not None]
    done: list[list[int]] = []
    for edge in window:  # each core's work done by the window's start and end: its utilisation there
        net.loop.call_at(edge, lambda: done.append([c.done_ns() for c in cores]))
    for q in procs:
        q.peers = [o for o in procs if o is not q]
        q.start(q.peers, p["scatter_rate"], p["fanout"], p["size"], start, stop, random.Random(f"{seed}/{q.name}"))
    end += base.extra_ns
    net.run(end)

    sent = sum(q.sent for q in procs)
    own = base.counters()
    own["offered_msgs_per_s"] = sent / ((stop - start) / 1e9) if stop > start else 0.0
    if costs.on:
        span = window[1] - window[0]
        utils = [(b - a) / span for a, b in zip(*done, strict=True)] if len(done) == 2 and span > 0 else []
        own["cpu"] = {"costs_ns": {"send_msg": costs.send_msg, "recv_msg": costs.recv_msg,
                                   "heartbeat": costs.heartbeat, "token": costs.token},
                      # over the throughput window
                      "mean_utilisation": sum(utils) / len(utils) if utils else 0.0,
                      "max_utilisation": max(utils, default=0.0),
                      "max_backlog_ns": max((c.backlog_ns() for c in cores), default=0)}
    receivers = [q.receiver for q in procs if isinstance(q, (StampedProcess, TokenRingProcess))]
    lamports = [q.engine for q in procs if isinstance(q, LamportNode) and q.engine is not None]
    return {"sent": sent, "scatterings": sum(q.scatterings for q in procs),
            "delivered": sum(q.delivered for q in procs), "latency": res.latency,
            "in_window": sum(q.in_window for q in procs), "lost": sum(r.c.lost for r in receivers),
            "seq_dropped": base.dropped(), "violations": sum(q.violations for q in procs),
            "duplicates": sum(r.c.duplicates for r in receivers) + sum(e.c.duplicates for e in lamports),
            mode_key(mode): own, **({"log": res.log} if res.log is not None else {})}


def mode_key(mode: str) -> str:
    """The key of a mode's own counters in its result (the host sequencer's stays ``sequencer``)."""
    return "sequencer" if mode == "hostseq" else mode


__all__ = ["BASELINES", "BASE_PORT", "SEQ_PORT", "Baseline", "BaselineProcess", "Costs", "heartbeat_interval",
           "run_processes", "spine_of"]
