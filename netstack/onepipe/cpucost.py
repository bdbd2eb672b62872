"""What each operation of a 1Pipe process costs its host core (issue 32): measured on our own
sans-IO engines, scaled to the paper's hardware by one stated factor.

1Pipe's Fig. 8a (1Pipe: Scalable Total Order Communication in Data Center Networks, §7.2) is a
capacity: a process does about 5.2 M msg/s best effort (the mean of the figure's 1Pipe/BE column,
2-512 processes) and reliable 1Pipe about 3.9 M, "due to 2PC overhead" (§7.2): the prepare's ACKs
and the commit are CPU work on the same core. The simulator's host CPU model
(:class:`netstack.sim.cpu.HostCpu`, one core per process) charges each engine call its cost here.

**What is measured** (:func:`.cpumeasure.measure`): a short ``onepipe`` run in virtual time (32 processes, one a
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
(no syscalls, no Python) on a 2013 Xeon against our pure-Python engines on this VM: 0.0025,
about 1/400.

:data:`DEFAULT_COSTS` is what the simulator uses (``cpu=true``): measured once (the date, the
machine and the numbers are in the comment above :data:`DEFAULT_MEASURED`). :func:`.cpumeasure.measure`
re-measures (``netstack bench onepipe`` prints it beside the defaults). It runs best effort and
reliable side by side in two threads (the interpreter switching between them every 50 ms), so
that both see the same load from the machine's other processes, five turns; :func:`calibrate`
calibrates each turn on its own and takes the median of each cost. A call a thread switch or a
preemption interrupted (over 20x its category's median) is left out, and so is each category's
slowest 1 %.
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
    """Both engines' costs (each cost's lowest over the turns, for the record) and every turn's
    pair, best effort's and reliable's measured one after the other (what :func:`calibrate` uses)."""

    be: EngineCost
    reliable: EngineCost
    when: str = ""
    machine: str = ""
    turns: list[tuple[EngineCost, EngineCost]] = field(default_factory=list)


class Probe:
    """Times every engine call of a simulated run (the processes call :meth:`record`)."""

    #: the slowest share of each category's calls left out of its mean: a preemption of this VM's
    #: process (milliseconds) would otherwise weigh as much as thousands of calls
    TRIM = 0.01
    OUTLIER = 20.0

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
        """The category's calls but the slowest :data:`TRIM`, and any over :data:`OUTLIER` x their
        median (a thread switch or a preemption in the middle of a call: milliseconds)."""
        def per_unit(x: tuple[int, int, int, int]) -> float:
            return x[0] / x[2] if x[2] else x[0]

        xs = sorted(self.samples[c], key=per_unit)
        cut = math.ceil(len(xs) * self.TRIM)
        xs = xs[:len(xs) - cut] if len(xs) > cut else xs
        if xs:
            limit = self.OUTLIER * per_unit(xs[len(xs) // 2])
            xs = [x for x in xs if per_unit(x) <= limit]
        return xs

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


def calibrate(m: Measured, paper_be: float = PAPER_BE_MSGS_PER_S, source: str = "") -> CpuCosts:
    """The model's costs from measured ones: the factor that gives best effort ``paper_be``
    messages/s per process (module docstring), applied to both engines. With several turns, each
    is calibrated on its own (reliable's costs against the best effort measured beside it, under
    the same load from others) and each cost is the median over the turns."""
    source = source or f"measured {m.when} on {m.machine}"
    if len(m.turns) > 1:
        each = [_calibrate(be, r, paper_be, source) for be, r in m.turns]

        def med(get: Any) -> OpCosts:
            return OpCosts(**{k: round(statistics.median(getattr(get(c), k) for c in each))
                              for k in OpCosts.__dataclass_fields__})

        return CpuCosts(med(lambda c: c.be), med(lambda c: c.reliable), statistics.median(c.factor for c in each),
                        paper_be, statistics.median(c.reliable_capacity for c in each), source)
    return _calibrate(m.be, m.reliable, paper_be, source)


def _calibrate(be: EngineCost, r: EngineCost, paper_be: float, source: str) -> CpuCosts:
    factor = 1e9 / (paper_be * be.per_msg() + be.per_s())

    def ops(e: EngineCost) -> OpCosts:
        return OpCosts(send=round(factor * e.send), data=round(factor * (e.data + e.deliver)),
                       ack=round(factor * e.ack), barrier=round(factor * e.barrier), timer=round(factor * e.timer),
                       timer_tx=round(factor * e.timer_tx))

    r_cap = (1e9 / factor - r.per_s()) / r.per_msg()
    return CpuCosts(ops(be), ops(r), factor, paper_be, r_cap, source)


def capacity(op: OpCosts, e: EngineCost) -> float:
    """The messages/s per process ``op`` allows with ``e``'s mix of ACKs, timers and beacons."""
    per_msg = op.send + op.data + e.acks_per_msg * op.ack
    per_s = e.timers_per_s * (op.timer + e.tx_per_timer * op.timer_tx) + e.barriers_per_s * op.barrier
    return (1e9 - per_s) / per_msg


# ----------------------------------------------------------------------------- the defaults
#: measured once with :func:`measure` (5 turns of best effort and reliable side by side, 32
#: processes, 20 us of load each) on 2026-12-06 18:39 UTC on this project's VM ("vm": 2 vCPUs of
#: an AMD EPYC, shared, load average 7-8 from other runs; CPython 3.11.7), each cost's lowest over
#: the turns, ns of wall time of our engines per operation:
#:
#:   best effort: send 17320 / msg, data 16449, deliver 11818 / msg, ack 9214, barrier 4567,
#:                timer 2403 + 4035 per datagram sent (5.9 a wake-up); 2.35 ACKs per message
#:   reliable:    send 22801 / msg, data 31321, deliver 4652 / msg, ack 22804, barrier 10359,
#:                timer 12000 (+ 0 per datagram: 0.89 a wake-up); 1.00 ACK per message
#:
#: calibrated turn by turn (factor 0.00221-0.00277; reliable over best effort 0.856, 0.831, 0.797,
#: 0.787, 0.847), the medians below: factor 0.00252, i.e. the paper's hosts do a message's work
#: about 400 times faster than our Python engines on this VM
DEFAULT_MEASURED = Measured(
    be=EngineCost(send=17319.8, data=16449.3, deliver=11817.8, ack=9213.6, barrier=4567.2, timer=2403.2,
                  acks_per_msg=2.348, timers_per_s=325_000.0, barriers_per_s=747_265.6, timer_tx=4035.2,
                  tx_per_timer=5.91),
    reliable=EngineCost(send=22801.4, data=31320.7, deliver=4651.7, ack=22804.0, barrier=10359.4, timer=12000.1,
                        acks_per_msg=1.0, timers_per_s=381_640.6, barriers_per_s=1_070_703.1, timer_tx=0.0,
                        tx_per_timer=0.886),
    when="2026-12-06 18:39 UTC", machine="vm x86_64 (AMD EPYC, 2 vCPUs) python 3.11.7")
#: the model's costs (ns of one core at the paper's scale): the medians over the turns above
DEFAULT_COSTS = CpuCosts(
    be=OpCosts(send=48, data=78, ack=26, barrier=13, timer=7, timer_tx=11),
    reliable=OpCosts(send=62, data=99, ack=63, barrier=28, timer=33, timer_tx=0),
    factor=0.0025202, be_capacity=PAPER_BE_MSGS_PER_S, reliable_capacity=4_286_398.0,
    source="measured 2026-12-06 18:39 UTC on vm x86_64 (AMD EPYC, 2 vCPUs) python 3.11.7, 5 turns, medians")


__all__ = ["CATEGORIES", "DEFAULT_COSTS", "DEFAULT_MEASURED", "PAPER_BE_MSGS_PER_S", "PAPER_R_MSGS_PER_S", "CpuCosts",
           "EngineCost", "Measured", "OpCosts", "Probe", "calibrate", "capacity", "category"]
