"""The key-value store's processes in virtual time (the ``onepipe-kv`` scenario, :mod:`.scenario`).

A 1Pipe process is the ``onepipe`` scenario's simulated process (:mod:`netstack.onepipe.simproc`:
the real endpoint, its socket, clock and timer; :mod:`netstack.onepipe.rscenario`'s reliable one
with ``reliable``) running a shard replica (:class:`.shard.KvShard`) or a client
(:class:`.client.KvClient`) instead of the Poisson load; each also has its side socket, a plain
UDP port (:data:`.wire.SIDE_OFFSET`). A 2PC process has only the side socket. Clients run
closed loop: the next transaction starts when the last one is done, until the run's ``stop``.
Each client keeps its history (:class:`.checker.Txn`, in true time) for the checker.
"""

from __future__ import annotations

import ipaddress
import random
from typing import Any

from headers.onepipe import TS_MASK

from ...engine import SendTo
from ...sim.cpu import HostCpu
from ...sim.packets import PROTO_UDP, UDP_HEADERS, Ipv4Flow, ip_payload_end
from ..actions import Deliver, ProcFail, SendFail
from ..endpoint import sender_key
from ..rscenario import ReliableProcess
from ..simproc import OnePipeProcess
from .checker import Txn
from .client import Done, KvClient
from .shard import KvShard
from .twopc import TwoPCClient, TwoPCShard
from .wire import SIDE_OFFSET, Kind, WireError, client_of, head
from .workload import Workload, txn_class


class KvRun:
    """What the processes of one run share: the side sockets by address, the workload, the
    sending period, the history."""

    def __init__(self, workload: Workload, start: int, stop: int, seed: int, window: int = 1,
                 side_costs: dict[str, int] | None = None) -> None:
        self.workload = workload
        #: transactions in flight per client (closed loop: the next begins when one is done)
        self.window = window
        #: the CPU model's cost of a side-socket datagram received / sent (None: no CPU model)
        self.side_costs = side_costs
        self.start = start
        self.stop = stop
        self.seed = seed
        self.sides: dict[Any, SideSocket] = {}
        self.history: list[Txn] = []
        #: (true respond time, txn class, latency ns) of every transaction done
        self.done: list[tuple[int, str, int]] = []


class SideSocket:
    """A process's plain UDP socket on a simulated host (the host hands a datagram to a process on
    the same host over, as the kernel does live)."""

    def __init__(self, kv: KvRun, owner: Any, host: Any, port: int) -> None:
        self.kv = kv
        self.owner = owner
        self.host = host
        self.loop = host.loop
        self.ip = str(ipaddress.IPv4Address(host.ip))
        self.port = port
        self.addr = (self.ip, port)
        self._flows: dict[str, Ipv4Flow] = {}
        host.bind_udp(port, self.on_frame)
        kv.sides[self.addr] = self

    def on_frame(self, frame: bytes) -> None:
        src = (str(ipaddress.IPv4Address(frame[26:30])), frame[34] << 8 | frame[35])
        self.owner.on_side(frame[UDP_HEADERS:ip_payload_end(frame)], src)

    def send(self, dst: Any, data: bytes) -> None:
        if dst[0] == self.ip:
            peer = self.kv.sides.get(dst)
            if peer is not None:
                self.loop.call_at(self.loop.now + 2 * self.host.stack_ns, peer.owner.on_side, data, self.addr)
            return
        flow = self._flows.get(dst[0])
        if flow is None:
            ip = ipaddress.IPv4Address(dst[0]).packed
            flow = self._flows[dst[0]] = Ipv4Flow(self.host.mac, self.host.net.mac_of(ip), self.host.ip, ip,
                                                  PROTO_UDP, 0)
        self.host.send(flow.udp(self.port, dst[1], data))


class _KvShell:
    """The key-value application on a 1Pipe process (mixed into the ``onepipe`` scenario's
    process classes): a shard replica or a client with up to ``kv.window`` transactions in flight.
    With the CPU model (``kv.side_costs``) the side socket's datagrams cost the process's core too,
    and so does the send call (the endpoint's own work is the base class's)."""

    loop: Any
    dead: bool
    ep: Any
    clock: Any
    addr: Any
    cpu: Any
    costs: Any
    kv: KvRun
    side: SideSocket
    #: set by :meth:`attach` (the base class's constructor already flushes, before it)
    shard: KvShard | None = None
    client: KvClient | None = None

    def attach(self, kv: KvRun, host: Any, port: int, *, shard: KvShard | None = None,
               client: KvClient | None = None) -> None:
        self.kv = kv
        self.shard = shard
        self.client = client
        self.side = SideSocket(kv, self, host, port + SIDE_OFFSET)
        self._rng = random.Random(f"{kv.seed}/kv/{port}/{host.name}")
        self._cur: dict[int, tuple[Any, int]] = {}  # uid -> (ops, invoke) of each transaction in flight
        self._ktimer: int | None = None
        self._n = 0

    # ---------------------------------------------------------------- 1Pipe's side
    def _deliver(self, act: Deliver) -> None:
        self.arrivals.pop((act.src, act.ts & TS_MASK), None)  # type: ignore[attr-defined]
        if self.shard is not None:
            self.shard.deliver(act.ts, act.src, act.msg, self.loop.now)
            self._drain(self.shard)

    def on_action(self, act: Any) -> None:
        super().on_action(act)  # type: ignore[misc]
        if type(act) is ProcFail and self.client is not None:
            self.client.proc_failed(act.proc)
            self._check_failed()

    def flush(self) -> None:
        if self.client is not None and self.ep.actions:
            for act in self.ep.actions.take(SendFail):
                redo = self.client.send_failed(act.ts, act.dst, act.msg)
                cur = None if redo is None else self._cur.pop(redo[0], None)
                if cur is not None:
                    # after this batch: its ProcFail (later in it) must mark the failed replica first
                    self.loop.call_at(self.loop.now + 1, self._redo, cur[0], cur[1])
        super().flush()  # type: ignore[misc]

    def _redo(self, ops: Any, invoke: int) -> None:
        """Run a recalled transaction again, as the same invocation (it ran nowhere)."""
        if not self.dead:
            self._send_txn(ops, invoke)

    # ---------------------------------------------------------------- the side socket
    def on_side(self, data: bytes, src: Any) -> None:
        if self.dead:
            return
        costs = self.kv.side_costs
        if costs is None or self.cpu is None:
            self._on_side(data, src)
        else:
            self.cpu.run(costs["recv_msg"], self._on_side, data, src)

    def _on_side(self, data: bytes, src: Any) -> None:
        if self.dead:
            return
        try:
            kind, _uid = head(data)
        except WireError:
            return
        if self.shard is not None and kind is Kind.QUERY:
            self.shard.query(src, data, self.loop.now)
            self._drain(self.shard)
        elif self.client is not None and kind is Kind.RESULT:
            done = self.client.on_result(data, self.loop.now)
            self._drain(self.client)
            if done is not None:
                self._finished(done)

    def _drain(self, eng: Any) -> None:
        costs = self.kv.side_costs
        for act in eng.actions.take_all():
            if type(act) is SendTo:
                if costs is None or self.cpu is None:
                    self.side.send(act.dst, act.data)
                else:
                    self.cpu.run(costs["send_msg"], self.side.send, act.dst, act.data)
        if eng is self.client:
            self._arm_client()

    # ---------------------------------------------------------------- the client's loop
    def begin_next(self) -> None:
        client = self.client
        now = self.loop.now
        if self.dead or client is None or now >= self.kv.stop or len(self._cur) >= self.kv.window:
            return
        self._n += 1
        self._send_txn(self.kv.workload.txn(self._rng, client.index * 10_000_000 + self._n), now)

    def _send_txn(self, ops: Any, invoke: int) -> None:
        client = self.client
        assert client is not None
        uid, scatter = client.begin(ops, self.loop.now)
        if not scatter:
            self._check_failed()
            return
        self._cur[uid] = (ops, invoke)
        if self.cpu is None:
            self._ep_send(uid, scatter)
        else:  # the send call's work, each message's cost (the engine stamps it when it runs)
            self.cpu.run(self.costs.send * len(scatter), self._ep_send, uid, scatter)

    def _ep_send(self, uid: int, scatter: list[tuple[Any, bytes]]) -> None:
        client = self.client
        if self.dead or client is None or uid not in self._cur:
            return
        now = self.loop.now
        seq = self.ep.send(scatter, self.clock.now(now))
        if seq is None:  # nothing left: the send buffer was full (or every destination failed)
            client.pending.pop(uid, None)
            ops, invoke = self._cur.pop(uid)
            self.loop.call_at(now + 1000, self._redo, ops, invoke)
        self.flush()
        self._arm_client()

    def _finished(self, done: Done) -> None:
        now = self.loop.now
        cur = self._cur.pop(done.uid, None)
        invoke = done.begun_ns if cur is None else cur[1]
        self.kv.history.append(Txn(done.uid, done.ops, done.reads, invoke, now, (done.ts, sender_key(self.addr))))
        self.kv.done.append((now, txn_class(done.ops), now - invoke))
        self.loop.call_at(now, self.begin_next)

    def _check_failed(self) -> None:
        assert self.client is not None
        for uid in self.client.take_failed():
            if self._cur.pop(uid, None) is not None:
                self.loop.call_at(self.loop.now, self.begin_next)

    def _arm_client(self) -> None:
        d = None if self.client is None else self.client.next_deadline()
        if d is None:
            return
        t = max(d, self.loop.now + 1)
        if self._ktimer is None or t < self._ktimer:
            self._ktimer = t
            self.loop.call_at(t, self._kfire, t)

    def _kfire(self, token: int) -> None:
        if token != self._ktimer or self.dead or self.client is None:
            return
        self._ktimer = None
        self.client.on_timer(self.loop.now)
        self._drain(self.client)

    def pending_txns(self) -> list[tuple[int, Any, int]]:
        """``(uid, ops, invoke)`` of every transaction begun and not done."""
        return [(uid, ops, inv) for uid, (ops, inv) in self._cur.items()]


class KvReliableProcess(_KvShell, ReliableProcess):
    """A process of the store on reliable 1Pipe."""


class KvBestEffortProcess(_KvShell, OnePipeProcess):
    """A process of the store on best-effort 1Pipe (correct only without loss or failure)."""


class TwoPCProcess:
    """A process of the 2PC baseline on its side socket only: a shard, or a client running
    ``kv.window`` coordinators (one transaction each, at a time). With the CPU model every datagram
    received or sent costs its core what a best-effort 1Pipe message does
    (:meth:`netstack.onepipe.cpucost.CpuCosts.baseline_costs`)."""

    def __init__(self, kv: KvRun, host: Any, port: int, name: str, *, shard: TwoPCShard | None = None,
                 clients: list[TwoPCClient] | None = None) -> None:
        self.kv = kv
        self.loop = host.loop
        self.name = name
        self.shard = shard
        self.clients = clients or []
        self._by_index = {c.index: c for c in self.clients}
        self.dead = False
        self.side = SideSocket(kv, self, host, port)
        self.addr = self.side.addr
        self.cpu = HostCpu(self.loop, name) if kv.side_costs is not None else None
        self._rng = random.Random(f"{kv.seed}/kv/{port}/{host.name}")
        self._timer: int | None = None
        self._n = 0

    def crash(self) -> None:
        self.dead = True

    def on_side(self, data: bytes, src: Any) -> None:
        if self.dead:
            return
        if self.cpu is None or self.kv.side_costs is None:
            self._on_side(data, src)
        else:
            self.cpu.run(self.kv.side_costs["recv_msg"], self._on_side, data, src)

    def _on_side(self, data: bytes, src: Any) -> None:
        if self.dead:
            return
        now = self.loop.now
        if self.shard is not None:
            self.shard.receive(src, data, now)
            self._drain(self.shard)
            return
        try:
            eng = self._by_index.get(client_of(head(data)[1]))
        except WireError:
            return
        if eng is None:
            return
        done = eng.receive(data, now)
        self._drain(eng)
        if done is not None:
            self.kv.history.append(Txn(done.uid, done.ops, done.reads, done.begun_ns, now, done.ts))
            self.kv.done.append((now, txn_class(done.ops), now - done.begun_ns))
            self.loop.call_at(now, self.begin_next)

    def _drain(self, eng: Any) -> None:
        costs = self.kv.side_costs
        for act in eng.actions.take_all():
            if type(act) is SendTo:
                if self.cpu is None or costs is None:
                    self.side.send(act.dst, act.data)
                else:
                    self.cpu.run(costs["send_msg"], self.side.send, act.dst, act.data)
        if eng is not self.shard:
            self._arm()

    def begin_next(self) -> None:
        now = self.loop.now
        if self.dead or now >= self.kv.stop:
            return
        for client in self.clients:
            if not client.busy:
                self._n += 1
                client.begin(self.kv.workload.txn(self._rng, client.index * 10_000_000 + self._n), now)
                self._drain(client)
                return

    def _arm(self) -> None:
        d = min((t for t in (c.next_deadline() for c in self.clients) if t is not None), default=None)
        if d is None:
            return
        t = max(d, self.loop.now + 1)
        if self._timer is None or t < self._timer:
            self._timer = t
            self.loop.call_at(t, self._fire, t)

    def _fire(self, token: int) -> None:
        if token != self._timer or self.dead:
            return
        self._timer = None
        for c in self.clients:
            c.on_timer(self.loop.now)
            self._drain(c)


__all__ = ["KvBestEffortProcess", "KvReliableProcess", "KvRun", "SideSocket", "TwoPCProcess"]
