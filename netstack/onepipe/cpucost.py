"""What each operation of a 1Pipe process costs its host core (issue 32): measured on our own
sans-IO engines, scaled to the paper's hardware by one stated factor.

1Pipe's Fig. 8a (1Pipe: Scalable Total Order Communication in Data Center Networks, §7.2) is a
capacity: a process does about 5.2 M msg/s best effort (the mean of the figure's 1Pipe/BE column,
2-512 processes) and reliable 1Pipe about 3.9 M, "due to 2PC overhead" (§7.2): the prepare's ACKs
and the commit are CPU work on the same core. The simulator's host CPU model
(:class:`netstack.sim.cpu.HostCpu`, one core per process) charges each engine call its cost here.

**What is measured** (:func:`measure`): a short ``onepipe`` run in virtual time (32 processes, one a
host, a load that saturates the model's cores) with every call into the process's engine timed with
``time.perf_counter_ns`` (:class:`Probe`): ``Endpoint.send`` / ``ReliableEndpoint.send``,
``receive`` and ``on_timer``, wall time of the engine alone (not the simulator, not the shell). Each
call falls in one category, by what it handles:

- ``send``: a send call, per message of its scattering (DATA, or PREPARE);
- ``data``: a received DATA (best effort) or PREPARE (reliable), with its ACK;
- ``ack``: a received ACK or NAK (the sender settles what it covers; reliable: the commit rises);
- ``barrier``: a received BEACON, COMMIT or control packet;
- ``timer``: a timer wake-up (a beacon tick: the beacon, ACK repeats, timeouts, a COMMIT). What
  one sends grows with the connections it repeats ACKs on, so its cost is split by least squares
  into a base and ``timer_tx`` per datagram sent; the model charges the latter once the wake-up
  has run and its datagrams are known (:meth:`netstack.sim.cpu.HostCpu.charge`).

A call that delivers messages costs more than the same call that does not. The delivery work is
split off: per category, ``base`` = the mean of its calls that delivered nothing; the rest, over
every call that delivered, divided by the messages delivered, is ``deliver`` per message, which
the model adds to ``data`` (every received message is delivered once; reliable's commit-barrier
deliveries come on BEACON/COMMIT, whose cost is therefore the commit's). So the model charges each
call what its category's calls cost on average, and in total what the engines spent.

**The scale factor** (:func:`calibrate`): one number ``factor`` multiplies every measured cost. It
is chosen so that best effort's modelled capacity is the paper's: a process that sends ``X``
messages/s to peers that do the same receives ``X`` (each its ``data`` and ``deliver``), gets
``acks_per_msg * X`` ACKs back, and wakes and hears beacons at the rates the measurement saw; at
capacity that fills its core::

    factor * (X * (send + data + deliver + acks_per_msg * ack) + timers/s * timer + barriers/s * barrier) = 1 s

with ``X`` = :data:`PAPER_BE_MSGS_PER_S`. Reliable's costs are scaled by the *same* factor, so its
modelled capacity, and its ratio to best effort's, is what our engines' measured work gives: the
paper's 0.76 is not put in anywhere. What the factor stands for: the paper's C++ library with RDMA
(no syscalls, no Python) on a 2013 Xeon against our pure-Python engines on this VM; roughly 1/100.

:data:`DEFAULT_COSTS` is what the simulator uses (``cpu=true``): the constants of
:data:`DEFAULT_MEASURED`, measured once (the date, the machine and the numbers are in the comment
above it). :func:`measure` re-measures (``netstack bench onepipe`` prints it beside the defaults).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from headers.onepipe import OnePipeOpcode

from ..engine import SendTo
from .actions import Deliver

#: Fig. 8a's mean per-process rate, 2..512 processes (git show HEAD:gnuplot/total_order in the
#: paper's repository): 1Pipe/BE 5.10-5.30 (mean 5.16), 1Pipe/R 3.78-4.01 (mean 3.91) M msg/s
PAPER_BE_MSGS_PER_S = 5.16e6
PAPER_R_MSGS_PER_S = 3.91e6
#: the categories of an engine call (module docstring)
CATEGORIES = ("send", "data", "ack", "barrier", "timer")

_DATA_OPS = frozenset({int(OnePipeOpcode.DATA), int(OnePipeOpcode.PREPARE)})
_ACK_OPS = frozenset({int(OnePipeOpcode.ACK), int(OnePipeOpcode.NAK)})


def category(kind: str, op: int) -> str:
    """An engine call's category: ``kind`` "send", "timer" or "rx" (then ``op``, the opcode)."""
    if kind != "rx":
        return kind
    if op in _DATA_OPS:
        return "data"
    if op in _ACK_OPS:
        return "ack"
    return "barrier"


# ----------------------------------------------------------------------------- the model's costs
@dataclass(frozen=True)
class OpCosts:
    """One engine's cost per operation on the paper's hardware, ns of one core (integers: the
    simulator's clock counts ns; the rounding is under 0.5 ns an operation)."""

    send: int  # per message of a send call
    data: int  # per DATA / PREPARE received, with its delivery
    ack: int  # per ACK / NAK received
    barrier: int  # per BEACON / COMMIT / control packet received
    timer: int  # per timer wake-up
    timer_tx: int = 0  # per datagram a timer wake-up sent (a beacon, ACK repeats, a COMMIT), charged after it

    def rx(self, opcode: int) -> int:
        """What receiving a datagram with ``opcode`` costs."""
        if opcode in _DATA_OPS:
            return self.data
        if opcode in _ACK_OPS:
            return self.ack
        return self.barrier


@dataclass(frozen=True)
class CpuCosts:
    """Best effort's and reliable's :class:`OpCosts`, the factor that scaled them, and the
    capacities it implies (messages/s per process, all-to-all, :func:`calibrate`)."""

    be: OpCosts
    reliable: OpCosts
    factor: float
    be_capacity: float
    reliable_capacity: float
    source: str = ""

    def baseline_costs(self) -> dict[str, int]:
        """The per-operation costs the total-order baselines charge (``netstack.onepipe.baselines``):
        a message sent or received costs what best effort's does (our measured engine's send, and
        receive with delivery, the nearest measured work); a heartbeat what a beacon heard does; the
        token a control packet heard and a message sent."""
        return {"send_msg": self.be.send, "recv_msg": self.be.data, "heartbeat": self.be.barrier,
                "token": self.be.barrier + self.be.send}

    def summary(self) -> dict[str, Any]:
        return {"be_ns": asdict(self.be), "reliable_ns": asdict(self.reliable), "factor": self.factor,
                "be_capacity_msgs_per_s": self.be_capacity, "reliable_capacity_msgs_per_s": self.reliable_capacity,
                "reliable_over_be": self.reliable_capacity / self.be_capacity, "source": self.source}


# ----------------------------------------------------------------------------- measurement
@dataclass
class EngineCost:
    """One engine's measured costs on this machine, ns per operation (unscaled), and the mix of
    operations the measurement saw (per message sent, per process-second)."""

    send: float
    data: float
    deliver: float
    ack: float
    barrier: float
    timer: float
    acks_per_msg: float
    timers_per_s: float
    barriers_per_s: float
    timer_tx: float = 0.0  # per datagram a timer wake-up sent
    tx_per_timer: float = 0.0  # datagrams a timer wake-up sent, on average
    calls: dict[str, int] = field(default_factory=dict)

    def per_msg(self) -> float:
        """ns of work per message (sent, received, delivered, its ACKs), beacons aside."""
        return self.send + self.data + self.deliver + self.acks_per_msg * self.ack

    def per_s(self) -> float:
        """ns of work per second that does not scale with messages (timers, beacons heard)."""
        return self.timers_per_s * (self.timer + self.tx_per_timer * self.timer_tx) + self.barriers_per_s * self.barrier


@dataclass
class Measured:
    be: EngineCost
    reliable: EngineCost
    when: str = ""
    machine: str = ""


class Probe:
    """Times every engine call of a simulated run (the processes call :meth:`record`)."""

    #: the slowest share of each category's calls left out of its mean: a preemption of this VM's
    #: process (milliseconds) would otherwise weigh as much as thousands of calls
    TRIM = 0.01

    def __init__(self) -> None:
        #: category -> every call: (ns, messages delivered, units: messages sent for "send", else 1,
        #: datagrams sent)
        self.samples: dict[str, list[tuple[int, int, int, int]]] = {c: [] for c in CATEGORIES}

    def record(self, proc: Any, kind: str, op: int, ns: int) -> None:
        """``proc``'s engine spent ``ns`` on a call of ``kind`` ("send": ``op`` messages; "rx":
        ``op`` the opcode; "timer"); what it decided is in its action queue still."""
        acts = proc.ep.actions
        delivered = sent = 0
        for a in acts:
            t = type(a)
            if t is Deliver:
                delivered += 1
            elif t is SendTo:
                sent += 1
        self.samples[category(kind, op)].append((ns, delivered, op if kind == "send" else 1, sent))

    def _trimmed(self, c: str) -> list[tuple[int, int, int, int]]:
        xs = sorted(self.samples[c], key=lambda x: x[0] / x[2] if x[2] else x[0])
        cut = math.ceil(len(xs) * self.TRIM)
        return xs[:len(xs) - cut] if len(xs) > cut else xs

    def costs(self, procs: int, seconds: float) -> EngineCost:
        """Per-operation means (module docstring) for ``procs`` processes over ``seconds`` of
        virtual time."""
        kept = {c: self._trimmed(c) for c in CATEGORIES}
        base: dict[str, float] = {}
        for c in CATEGORIES:
            quiet = [x for x in kept[c] if not x[1]]
            units = sum(x[2] for x in quiet)
            base[c] = sum(x[0] for x in quiet) / units if units else (-1.0 if kept[c] else 0.0)
        timer_tx, tx_per_timer = 0.0, 0.0
        quiet_timers = [(x[0], x[3]) for x in kept["timer"] if not x[1]]
        if len(quiet_timers) > 1:  # a wake-up's cost grows with what it sends: least squares
            mx = statistics.fmean(x for _, x in quiet_timers)
            my = statistics.fmean(y for y, _ in quiet_timers)
            var = sum((x - mx) ** 2 for _, x in quiet_timers)
            if var > 0:
                timer_tx = max(0.0, sum((x - mx) * (y - my) for y, x in quiet_timers) / var)
                base["timer"] = max(0.0, my - timer_tx * mx)
                tx_per_timer = statistics.fmean(x[3] for x in self.samples["timer"])

        def expected(c: str, x: tuple[int, int, int, int]) -> float:
            b = base[c] * x[2]
            return b + timer_tx * x[3] if c == "timer" else b

        # what a call that delivered took beyond its category's base, per message delivered
        busy = [(c, x) for c in CATEGORIES if base[c] >= 0 for x in kept[c] if x[1]]
        delivered = sum(x[1] for _, x in busy)
        deliver = sum(x[0] - expected(c, x) for c, x in busy) / delivered if delivered else 0.0
        for c in CATEGORIES:
            if base[c] < 0:  # every call delivered: what is left after the per-delivery cost
                xs = kept[c]
                base[c] = max(0.0, sum(x[0] - deliver * x[1] for x in xs) / sum(x[2] for x in xs))
        calls = {c: len(self.samples[c]) for c in CATEGORIES}
        msgs = sum(x[2] for x in self.samples["send"]) or 1
        return EngineCost(
            send=base["send"], data=base["data"], deliver=max(0.0, deliver), ack=base["ack"],
            barrier=base["barrier"], timer=base["timer"], acks_per_msg=calls["ack"] / msgs,
            timers_per_s=calls["timer"] / procs / seconds, barriers_per_s=calls["barrier"] / procs / seconds,
            timer_tx=timer_tx, tx_per_timer=tx_per_timer, calls=calls)


#: the measurement's run: 32 processes, one a host on the paper's 32-host fabric (4 ToRs x 8 under
#: a spine, no oversubscription), so that every message crosses a switch and each receiver hears
#: from as many peers per beacon interval as at scale (what it acknowledges, and repeats, per tick)
MEASURE_PROCS = 32
MEASURE_DURATION_NS = 30_000


def _measure_once(mode: str, seed: int, duration_ns: int, costs: CpuCosts | None) -> EngineCost:
    from ..sim.scenario import RunSpec, run
    from . import simproc
    from .scenarios import fabric_topology

    topo = fabric_topology(tors=4, hosts_per_tor=MEASURE_PROCS // 4, rate="400Gbit", uplink_rate="3200Gbit")
    cap = costs.be_capacity if costs is not None else PAPER_BE_MSGS_PER_S
    # offered: four times best effort's capacity (scatterings of 2 messages): every core saturates
    params = {"procs": MEASURE_PROCS, "mode": mode, "fanout": 2, "size": 64, "t_beacon_ns": 3_000,
              "rate": 4 * cap / 2, "drain_ns": 30_000, "cpu": True}
    probe = Probe()
    with simproc.probing(probe, costs):
        doc = run(RunSpec("onepipe", topo, seed, duration_ns, params))
    # the probe timed the whole run (warm-up and drain too): per second of the run's virtual time
    return probe.costs(MEASURE_PROCS, doc["engine"]["virtual_ns"] / 1e9)


def _median(runs: list[EngineCost]) -> EngineCost:
    keys = ("send", "data", "deliver", "ack", "barrier", "timer", "acks_per_msg", "timers_per_s", "barriers_per_s",
            "timer_tx", "tx_per_timer")
    med = {k: statistics.median(getattr(r, k) for r in runs) for k in keys}
    return EngineCost(**med, calls=runs[0].calls)


def measure(repeats: int = 3, duration_ns: int = MEASURE_DURATION_NS, costs: CpuCosts | None = None,
            seed: int = 1) -> Measured:
    """Time our engines in a saturated run (module docstring), best effort and reliable,
    ``repeats`` times each; the median of each cost. ``costs``: the model the run saturates
    (default :data:`DEFAULT_COSTS`), so that the calls batch as they do in the benchmark."""
    import platform
    import time

    costs = costs or DEFAULT_COSTS
    be = [_measure_once("onepipe", seed + i, duration_ns, costs) for i in range(repeats)]
    rel = [_measure_once("reliable", seed + i, duration_ns, costs) for i in range(repeats)]
    machine = f"{platform.node()} {platform.processor() or platform.machine()} python {platform.python_version()}"
    return Measured(_median(be), _median(rel), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), machine)


def calibrate(m: Measured, paper_be: float = PAPER_BE_MSGS_PER_S, source: str = "") -> CpuCosts:
    """The model's costs from measured ones: the factor that gives best effort ``paper_be``
    messages/s per process (module docstring), applied to both engines."""
    factor = 1e9 / (paper_be * m.be.per_msg() + m.be.per_s())
    r = m.reliable

    def ops(e: EngineCost) -> OpCosts:
        return OpCosts(send=round(factor * e.send), data=round(factor * (e.data + e.deliver)),
                       ack=round(factor * e.ack), barrier=round(factor * e.barrier), timer=round(factor * e.timer),
                       timer_tx=round(factor * e.timer_tx))

    r_cap = (1e9 / factor - r.per_s()) / r.per_msg()
    return CpuCosts(ops(m.be), ops(r), factor, paper_be, r_cap, source or f"measured {m.when} on {m.machine}")


def capacity(op: OpCosts, e: EngineCost) -> float:
    """The messages/s per process ``op`` allows with ``e``'s mix of ACKs, timers and beacons."""
    per_msg = op.send + op.data + e.acks_per_msg * op.ack
    per_s = e.timers_per_s * (op.timer + e.tx_per_timer * op.timer_tx) + e.barriers_per_s * op.barrier
    return (1e9 - per_s) / per_msg


# ----------------------------------------------------------------------------- the defaults
#: measured with :func:`measure` (3 repeats, median) on PLACEHOLDER
DEFAULT_MEASURED = Measured(
    be=EngineCost(send=6000.0, data=8000.0, deliver=2000.0, ack=4000.0, barrier=3000.0, timer=3000.0,
                  acks_per_msg=1.0, timers_per_s=333_333.0, barriers_per_s=333_333.0),
    reliable=EngineCost(send=8000.0, data=10000.0, deliver=3000.0, ack=6000.0, barrier=4000.0, timer=5000.0,
                        acks_per_msg=1.0, timers_per_s=333_333.0, barriers_per_s=500_000.0),
    when="PLACEHOLDER", machine="PLACEHOLDER")
DEFAULT_COSTS = calibrate(DEFAULT_MEASURED)


__all__ = ["CATEGORIES", "DEFAULT_COSTS", "DEFAULT_MEASURED", "PAPER_BE_MSGS_PER_S", "PAPER_R_MSGS_PER_S", "CpuCosts",
           "EngineCost", "Measured", "OpCosts", "Probe", "calibrate", "capacity", "category", "measure"]
