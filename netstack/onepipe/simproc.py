"""The simulated 1Pipe processes of the ``onepipe`` scenario (:mod:`.scenarios`, whose docstring
describes the model): a process is an endpoint on a simulated host's UDP port with its shell
(socket, clock, timer) and its application (Poisson scatterings); the run's meter measures every
delivery and checks the order in memory. :mod:`.rscenario` runs the reliable endpoint in it."""

from __future__ import annotations

import ipaddress
import random
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from time import perf_counter_ns
from typing import Any

from headers.onepipe import TS_MASK, OnePipeFlag, OnePipeOpcode
from headers.registry import BROADCAST_MAC

from ..engine import SendTo
from ..sim.cpu import HostCpu
from ..sim.hosts import Host
from ..sim.packets import PROTO_UDP, UDP_HEADERS, Ipv4Flow, ip_payload_end
from .actions import Deliver, SendFail
from .check import log_record
from .clock import HostClock
from .cpucost import DEFAULT_COSTS, CpuCosts, OpCosts, Probe
from .endpoint import UPLINK, Endpoint, sender_key
from .load import PoissonScatterer
from .params import PORT, OnePipeParams

_SEQ = struct.Struct("!Q")
_MESSAGE_OPS = (int(OnePipeOpcode.DATA), int(OnePipeOpcode.PREPARE))
_EOM = int(OnePipeFlag.EOM)
_ECT0 = 0b10  # the live shell's IP_TOS: switches may mark instead of drop (DCTCP)
_OP_NAMES = {int(op): op.name for op in OnePipeOpcode}

class _Meter:
    """What every receiver reports, and the in-memory order check."""

    def __init__(self, log: bool, window: tuple[int, int]) -> None:
        self.sent_at: dict[tuple[int, int], int] = {}  # (sender index, scattering) -> true send time
        self.window = window
        self.in_window = 0  # deliveries inside the throughput window
        self.latency: list[int] = []
        self.unordered: list[int] = []
        self.wait: list[int] = []
        self.violations = 0
        self.first: str | None = None
        self.scat_ts: dict[tuple[int, int], int] = {}
        #: (sender index, scattering, receiver index) of every delivery: the fate of a message its
        #: sender reported unknown (issue 31: a late or lost ACK, the message may be delivered)
        self.got: set[tuple[int, int, int]] = set()
        self.logs: dict[str, list[str]] | None = {} if log else None

    def violation(self, text: str) -> None:
        self.violations += 1
        if self.first is None:
            self.first = text

    def record(self, rx: Any, src: Any, seq: int, ts: int, now: int, arrival: int | None) -> None:
        """``rx`` delivered ``src``'s message of scattering ``seq`` (timestamp ``ts``) at ``now``."""
        if self.window[0] <= now < self.window[1]:
            self.in_window += 1
        self.got.add((src.idx, seq, rx.idx))
        sent = self.sent_at.get((src.idx, seq))
        if sent is not None:
            self.latency.append(now - sent)
            if arrival is not None:
                self.unordered.append(arrival - sent)
                self.wait.append(now - arrival)
        order = (ts, src.key)
        if rx.last_order is not None and order < rx.last_order:
            self.violation(f"{rx.name} delivered {src.name}#{seq} (ts {ts}) after ts {rx.last_order[0]}")
        rx.last_order = order
        if seq < rx.last_seq.get(src.idx, -1):
            self.violation(f"{rx.name}: {src.name}#{seq} after #{rx.last_seq[src.idx]} (FIFO)")
        rx.last_seq[src.idx] = seq
        first_ts = self.scat_ts.setdefault((src.idx, seq), ts)
        if first_ts != ts:
            self.violation(f"{src.name}#{seq} delivered with ts {ts} and {first_ts}")
        if self.logs is not None:
            self.logs.setdefault(rx.name, []).append(
                log_record(rx.name, src.name, ts, seq, f"{src.name}.{seq}.{rx.name}", rx.clock.now(now)))


class RxLoss:
    """Loss in a process's receiving library (scenario parameter ``loss_at = "receivers"``): the
    placement of 1Pipe's Fig. 9b, "we simulate random message drop in lib1pipe receiver" (Li et
    al., "1Pipe: Scalable Total Order Communication in Data Center Networks", SIGCOMM 2021,
    §7.1). lib1pipe's polling thread is what receives every packet for the process (§6, "poll
    RDMA completion queues and process received packets, including generating end-to-end ACKs
    and retransmitting lost packets"), so every datagram of the data path is dropped with
    probability ``loss``, independently: messages (DATA, PREPARE), their ACKs and NAKs, RECALLs
    and the barrier packets the ToR sends (BEACON, COMMIT; §7.1 names "a lost beacon packet" and
    "a lost message in prepare phase" as what the loss costs). The controller's messages are not
    dropped (the shell checks the source): they are the failure handling Fig. 10 measures, and
    §7.1 explains Fig. 9b's rise by lost beacons and prepare-phase retransmissions alone (a lost
    notice or relay would instead stall a recovery). The drop happens in the shell, before
    the engine (and, with the CPU model on, the core) sees the datagram: the sans-IO engines
    never know. Seeded per process, counted by opcode."""

    def __init__(self, loss: float, seed: str) -> None:
        self.loss = loss
        self._rng = random.Random(seed)
        self.seen = 0
        self.dropped = 0
        self.by_op: dict[str, int] = {}

    def drops(self, data: bytes) -> bool:
        """Whether this datagram is lost (counted either way)."""
        self.seen += 1
        if self._rng.random() >= self.loss:
            return False
        self.dropped += 1
        op = _OP_NAMES.get(data[22], "other") if len(data) > 22 else "short"
        self.by_op[op] = self.by_op.get(op, 0) + 1
        return True


def rx_loss_summary(procs: Any) -> dict[str, Any]:
    """What the processes' receiving libraries dropped, in all (:class:`RxLoss`)."""
    losses = [q.rx_loss for q in procs if q.rx_loss is not None]
    seen = sum(x.seen for x in losses)
    dropped = sum(x.dropped for x in losses)
    by_op: dict[str, int] = {}
    for x in losses:
        for k, v in x.by_op.items():
            by_op[k] = by_op.get(k, 0) + v
    return {"loss": losses[0].loss if losses else 0.0, "seen": seen, "dropped": dropped,
            "rate": dropped / seen if seen else None, "dropped_by_opcode": dict(sorted(by_op.items()))}


class OnePipeProcess(PoissonScatterer):
    """One 1Pipe process on a simulated host: the :class:`Endpoint` and its shell (socket,
    clock, timer), and the application that scatters."""

    def __init__(self, run: OnePipeRun, host: Host, idx: int, name: str, port: int, clock: HostClock,
                 params: OnePipeParams) -> None:
        self.run = run
        self.host = host
        self.loop = host.loop
        self.idx = idx
        self.name = name
        self.port = port
        self.ip = str(ipaddress.IPv4Address(host.ip))
        self.addr = (self.ip, port)
        self.key = sender_key(self.addr)
        self.clock = clock
        self.ep = self.make_endpoint(params, clock.now(self.loop.now))
        if run.variant != "chip":  # the switches forward data untouched: barriers come in beacons (.variant)
            self.ep.beacon_barriers = True
        self.dead = False  # crashed (the reliable runs' failures): hears, sends and times nothing
        self.arrivals: dict[tuple[Any, int], int] = {}  # (src, wire ts) -> true arrival of the last fragment
        self.last_order: tuple[int, int] | None = None
        self.last_seq: dict[int, int] = {}
        self.sent = self.scatterings = self.refused = self.failed = self.delivered = 0
        #: (scattering, destination address) of each message its sender gave up waiting for
        #: (``SendFail(known=False)``): failed or delivered, the sender cannot tell (accounting.py)
        self.unknown: list[tuple[int, Any]] = []
        self._nseq = 0
        self._timer: int | None = None
        self._flows: dict[str, Ipv4Flow] = {}
        bcast = ipaddress.ip_network(f"{self.ip}/{run.prefixlen}", strict=False).broadcast_address
        self._uplink = Ipv4Flow(host.mac, BROADCAST_MAC, host.ip, bcast.packed, PROTO_UDP, _ECT0)
        #: the host CPU model (issue 32, scenario parameter ``cpu``): this process's core and what each
        #: of its engine's operations costs there; None: an infinitely fast host (the default)
        self.cpu: HostCpu | None = None
        self.costs: OpCosts | None = None
        self._timer_queued = False  # cpu: a timer wake-up waits for the core (arm nothing meanwhile)
        #: loss at the receiving library (scenario parameter ``loss_at = "receivers"``, :class:`RxLoss`)
        self.rx_loss: RxLoss | None = RxLoss(run.rx_loss, f"{run.rx_seed}/rx-loss/{name}") if run.rx_loss else None
        if run.costs is not None:
            self.cpu = HostCpu(self.loop, name)
            self.costs = self.op_costs(run.costs)
        host.bind_udp(port, self.on_frame)
        host.add(self)
        self.flush()

    def make_endpoint(self, params: OnePipeParams, now: int) -> Endpoint:
        return Endpoint(params, self.addr, now)

    def op_costs(self, costs: CpuCosts) -> OpCosts:
        """This engine's costs per operation (best effort's; the reliable process overrides it)."""
        return costs.be

    # ------------------------------------------------------------------ the shell
    def on_frame(self, frame: bytes) -> None:
        if self.dead:
            return
        src = (self.run.ip_str(frame[26:30]), frame[34] << 8 | frame[35])
        self.on_datagram(frame[UDP_HEADERS:ip_payload_end(frame)], src, frame[15] & 3 == 3)

    def on_datagram(self, data: bytes, src: Any, ce: bool = False) -> None:
        if self.dead:
            return
        if self.rx_loss is not None and src != self.run.ctl_addr and self.rx_loss.drops(data):
            return  # lost in the receiving library: neither the core nor the engine sees it
        cpu = self.cpu
        if cpu is None:
            self._receive(data, src, ce)
        else:  # the core handles it once it has spent the datagram's cost, after what came before
            assert self.costs is not None
            cpu.run(self.costs.rx(data[22] if len(data) > 22 else -1), self._receive, data, src, ce)

    def _receive(self, data: bytes, src: Any, ce: bool) -> None:
        now = self.loop.now
        if self.dead:
            return
        if len(data) >= 24 and data[22] in _MESSAGE_OPS and data[23] & _EOM:
            self.arrivals[(src, int.from_bytes(data[:6], "big"))] = now
        probe = self.run.probe
        if probe is None:
            self.ep.receive(data, src, self.clock.now(now), ce)
        else:
            t0 = perf_counter_ns()
            self.ep.receive(data, src, self.clock.now(now), ce)
            probe.record(self, "rx", data[22] if len(data) > 22 else -1, perf_counter_ns() - t0)
        self.flush()

    def flush(self) -> None:
        ep = self.ep
        if ep.actions:
            for act in ep.actions.take_all():
                if type(act) is SendTo:
                    self._send(act.dst, act.data)
                elif type(act) is Deliver:
                    self._deliver(act)
                elif type(act) is SendFail:
                    if act.known:
                        self.failed += 1
                    else:
                        self.unknown.append((_SEQ.unpack_from(act.msg)[0] if len(act.msg) >= 8 else -1, act.dst))
                else:
                    self.on_action(act)
        self._arm()

    def on_action(self, act: Any) -> None:
        """Any other action (the reliable engine's ``ProcFail``)."""

    def _send(self, dst: Any, data: bytes) -> None:
        if dst == UPLINK:
            self.host.send(self._uplink.udp(self.port, PORT, data))
        elif dst[0] == self.ip:  # the host hands it over itself (loopback): never on the wire
            peer = self.run.by_addr.get(dst)
            if peer is not None:  # (through the host stack both ways, as NIC loopback goes: Host.stack_ns)
                self.loop.call_at(self.loop.now + 2 * self.host.stack_ns, peer.on_datagram, data, self.addr)
        else:
            flow = self._flows.get(dst[0])
            if flow is None:
                ip = ipaddress.IPv4Address(dst[0]).packed
                flow = self._flows[dst[0]] = Ipv4Flow(self.host.mac, self.host.net.mac_of(ip), self.host.ip, ip,
                                                      PROTO_UDP, _ECT0)
            self.host.send(flow.udp(self.port, dst[1], data))

    def _deliver(self, act: Deliver) -> None:
        now = self.loop.now
        self.delivered += 1
        src = self.run.by_addr[act.src]
        seq = _SEQ.unpack_from(act.msg)[0] if len(act.msg) >= 8 else -1
        arrival = self.arrivals.pop((act.src, act.ts & TS_MASK), None)
        self.run.meter.record(self, src, seq, act.ts, now, arrival)

    def _arm(self) -> None:
        if self._timer_queued:
            return  # the core has a wake-up queued: it re-arms once that has run
        now = self.loop.now
        d = self.ep.next_deadline()
        if d is None:
            return
        t = self.clock.to_true(d)
        if t <= now:
            t = now + 1  # nothing was due at now: look again just after
        if self._timer is None or t < self._timer:
            self._timer = t
            self.loop.call_at(t, self._fire, t)

    def _fire(self, token: int) -> None:
        if token != self._timer or self.dead:
            return  # an earlier wake-up replaced this one
        self._timer = None
        cpu = self.cpu
        if cpu is None:
            self._on_timer()
        else:
            assert self.costs is not None
            self._timer_queued = True
            cpu.run(self.costs.timer, self._on_timer)

    def _on_timer(self) -> None:
        self._timer_queued = False
        if self.dead:
            return
        probe = self.run.probe
        if probe is None:
            self.ep.on_timer(self.clock.now(self.loop.now))
        else:
            t0 = perf_counter_ns()
            self.ep.on_timer(self.clock.now(self.loop.now))
            probe.record(self, "timer", 0, perf_counter_ns() - t0)
        cpu, costs = self.cpu, self.costs
        if cpu is not None and costs is not None and costs.timer_tx:
            # what the wake-up sent (its beacon, ACK repeats, a COMMIT) is known now: its cost follows
            cpu.charge(costs.timer_tx * sum(1 for a in self.ep.actions if type(a) is SendTo))
        self.flush()

    # ------------------------------------------------------------------ the application
    def _next(self) -> None:
        """The next Poisson scattering (:class:`.load.PoissonScatterer`); with the CPU model, the
        application blocks while its core owes more than ``cpu_backlog_ns`` (a send call that
        waits for the send path, as a saturated sender's does), so the core, not the offered
        load, sets the rate, and its queue stays bounded."""
        cpu = self.cpu
        if cpu is not None and not self.dead:
            over = cpu.backlog_ns() - self.run.cpu_backlog_ns
            if over > 0 and self.loop.now < self._stop:
                self.loop.call_at(self.loop.now + over, self._next)
                return
        super()._next()

    def scatter(self, dsts: list[Any], now: int) -> None:
        if self.dead:
            return
        cpu = self.cpu
        if cpu is None:
            self._scatter(dsts, now)
        else:  # the send call's work: each message's cost (the engine stamps it when it runs)
            assert self.costs is not None
            cpu.run(self.costs.send * len(dsts), self._scatter, dsts, now)

    def _scatter(self, dsts: list[Any], now: int) -> None:
        """``now``: when the application called send (true time; the latency counts from it)."""
        if self.dead:
            return
        msg = _SEQ.pack(self._nseq) + bytes(max(0, self._size - _SEQ.size))
        probe = self.run.probe
        t0 = perf_counter_ns() if probe is not None else 0
        got = self.ep.send([(d.addr, msg) for d in dsts], self.clock.now(self.loop.now))
        if probe is not None:
            probe.record(self, "send", len(dsts), perf_counter_ns() - t0)
        if got is None:
            self.refused += self._k  # the send buffer was full: the send failed at once
        else:
            self.run.meter.sent_at[(self.idx, got)] = now
            self._nseq += 1
            self.scatterings += 1
            self.sent += self._k
        self.flush()


#: per thread (cpumeasure.measure runs best effort and reliable side by side in two threads)
_probing = threading.local()


@contextmanager
def probing(probe: Probe, costs: CpuCosts | None = None) -> Iterator[None]:
    """Runs started inside, in this thread, time their processes' engine calls with ``probe``
    (and, with the CPU model on, charge ``costs`` instead of the default ones):
    :func:`.cpumeasure.measure`."""
    old = getattr(_probing, "state", (None, None))
    _probing.state = (probe, costs)
    try:
        yield
    finally:
        _probing.state = old


def model_costs() -> CpuCosts:
    """The costs the CPU model charges: :data:`.cpucost.DEFAULT_COSTS` (inside :func:`probing`,
    its own)."""
    costs: CpuCosts | None = getattr(_probing, "state", (None, None))[1]
    return costs or DEFAULT_COSTS


class OnePipeRun:
    """The processes of one run and what they share (addresses, the meter)."""

    def __init__(self, net: Any, log: bool, window: tuple[int, int], costs: CpuCosts | None = None,
                 cpu_backlog_ns: int = 0) -> None:
        self.net = net
        self.meter = _Meter(log, window)
        #: the host CPU model (scenario parameter ``cpu``): every process gets a core and these costs
        self.costs = costs
        #: cpu: an application blocks while its core owes more than this (ns)
        self.cpu_backlog_ns = cpu_backlog_ns
        #: cpumeasure.measure: times every engine call (None: nothing is timed)
        self.probe: Probe | None = getattr(_probing, "state", (None, None))[0]
        self.by_addr: dict[Any, OnePipeProcess] = {}
        #: loss_at = "receivers": every process's library drops a received datagram with this
        #: probability (:class:`RxLoss`), seeded from ``rx_seed``; 0: none
        self.rx_loss = 0.0
        self.rx_seed: Any = 0
        #: where the switches' 1Pipe processing runs (scenario parameter ``variant``, :mod:`.variant`)
        self.variant = "chip"
        #: mode=reliable (.rscenario): the controller's address and the crash's recovery record
        self.ctl_addr: Any = None
        self.recovery: Any = None
        self._ips: dict[bytes, str] = {}
        nets = [n.ip for n in net.topology.nodes if n.ip is not None]
        self.prefixlen = nets[0].network.prefixlen if nets else 24

    def ip_str(self, raw: bytes) -> str:
        s = self._ips.get(raw)
        if s is None:
            s = self._ips[raw] = str(ipaddress.IPv4Address(raw))
        return s


__all__ = ["OnePipeProcess", "OnePipeRun", "RxLoss", "model_costs", "probing", "rx_loss_summary"]
