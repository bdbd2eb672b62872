"""Reliable 1Pipe in virtual time: ``mode = "reliable"`` of the ``onepipe`` scenario
(docs/onepipe-reliable.md; design topics §7-§8 in docs/papers.md).

The real engines on :mod:`netstack.sim`, as live: every process a
:class:`~.reliable.ReliableEndpoint` (:class:`ReliableProcess`); every switch the real feature
with ``controller=True`` (commit aggregation, holds, failure reports); the controller engine
(:class:`~.controller.Controller`) on the sequencer's host (``seq``), reached through the
fabric like any host, its shell (:class:`SimController`) doing what the live daemon does:
switch reports in, fence / release / admit on the switches (as control requests would, at
once), store writes as a delay (``store_delay_ns``: the bench measures it on the real store and
passes it in; the simulator cannot wait for a real store in virtual time).

With the host CPU model on (``cpu``, issue 32) each process's receive, send and timer work goes
through its core at reliable's measured costs (:mod:`.cpucost`). With ``ctl_msg_ns`` > 0 the
controller has one core too (:class:`.ctlcore.ControllerCore`, which says how it works and why:
1Pipe's Fig. 10), every datagram it sends or receives at that cost; the engine's timer slack is
twice the longest an input waited for it. The core starts at the failure (``kill`` > 0 is needed):
the registrations before it are done at no cost, as the paper's processes had registered long
before its failures; charged, they would cost the controller O(processes^2) datagrams (each
newcomer is announced to every other), milliseconds of virtual time before any failure could be
measured (unanswered REGISTERs back off: OnePipeParams.register_wait_ns). ``ctl_msg_ns`` 0 (the default) is a
controller whose work takes no time; the bench passes the kernel's cost of a datagram measured in
the same run (netstack/bench/onepipe/ctlcost.py).

A failure comes at ``kill_at_ns`` (default: the middle of the sending period) when ``kill`` > 0;
``fail`` says what fails (1Pipe's Fig. 10 and its failure recovery; design topic §8):

``process`` (the default)
    the last ``kill`` processes stop dead (no goodbye, as ``kill -9``): their sockets close.
``tor``
    the ToR switch of the last process: every link of it loses its carrier and every process
    behind it crashes. Nobody hears the ToR's uplinks any more: the spines report them, and the
    controller, which knows the fabric (:meth:`.controller.Controller.know_tors`, given here from
    the topology and the placement), declares the processes behind it failed.
``core-link``
    the link between the last process's ToR and the switch its routes go up to (the first of
    its uplinks), both ways. Both ends report it; the controller releases it: nobody failed.
``core-switch``
    that switch (a spine): all its links lose their carrier; its neighbours report them.

For the last three ``kill`` must be 1, and the fabric must leave every other process connected
to the controller's host (``fabric_topology(spines=2)`` for a link or a spine; the controller's
own ToR may not fail). A failed switch is dead: its reports, and the controller's requests to it,
are dropped. The simulator has no routing protocol: when a switch or a link fails, the static
routes of every switch are recomputed at once on the fabric without it (the breadth-first first
hops the switch configs are built with, kept up-down as 1Pipe's §3 needs: :func:`reroute`), an
idealised routing protocol that converges at the failure (ours; the paper's recovery times are
1Pipe's, not the routing's).

The run then reports the recovery, in true time from the failure (1Pipe's Fig. 10): ``detect``
(the first switch report about the failed component: a killed process, or a link input facing
the failed switch or link), ``record`` (the first failure record durable; none when nobody
failed), ``release`` (the last release among the failed processes and reported inputs: every
survivor finished its callbacks), ``resume`` (every survivor's commit barrier has passed every
T_f and every commit the failed inputs froze: delivery goes on). Besides, for ``tor``,
``core-link`` and ``core-switch``: ``fail``, ``component``, ``inputs`` (the failed inputs
reported) and ``declared`` (every process the controller recorded failed).
"""

from __future__ import annotations

import ipaddress
from collections import deque
from typing import Any

from headers.onepipe import ts_from_ns, ts_max, ts_unwrap

from ..engine import SendTo
from ..errors import ConfigError
from ..sim.packets import PROTO_UDP, UDP_HEADERS, Ipv4Flow, ip_payload_end
from ..sim.scenario import ScenarioError
from ..topo.model import NodeKind, Topology
from . import feature
from . import topology as op_topology
from .actions import Admit, Fence, ProcFail, RecordFailure, Release
from .controller import Controller, ControllerParams
from .cpucost import CpuCosts, OpCosts
from .ctlcore import ControllerCore
from .ctlwire import parse_proc
from .params import PORT, OnePipeParams
from .reliable import ReliableEndpoint
from .simproc import OnePipeProcess

#: what ``fail`` may name (module docstring)
FAILS = ("process", "tor", "core-link", "core-switch")
#: when the controller's core starts until schedule_kills sets it to the failure
NEVER = 1 << 62


class ReliableProcess(OnePipeProcess):
    """A :class:`OnePipeProcess` running the reliable engine."""

    def make_endpoint(self, params: OnePipeParams, now: int) -> ReliableEndpoint:
        return ReliableEndpoint(params, self.addr, now, controller=self.run.ctl_addr, nonce=self.idx + 1)

    def op_costs(self, costs: CpuCosts) -> OpCosts:
        """The CPU model's costs (scenario parameter ``cpu``): reliable's, measured on this engine
        (prepare, its ACK, the commit: :mod:`.cpucost`)."""
        return costs.reliable

    def on_action(self, act: Any) -> None:
        if type(act) is ProcFail:
            self.run.recovery.callback(self)

    def flush(self) -> None:
        super().flush()
        self.run.recovery.progress(self)

    def crash(self) -> None:
        self.dead = True
        # its socket closes with it: the host's kernel answers what comes for it with ICMP port
        # unreachable, which the controller hears (as the live daemon does, issue 31)
        self.host.unbind_udp(self.port)


class Recovery:
    """When each step of recovering from the failure happened (true ns), and who resumed."""

    def __init__(self) -> None:
        self.killed_at: int | None = None
        self.killed: set[Any] = set()
        self.t_f: dict[Any, int] = {}  # failed address -> T_f (wire)
        self.times: dict[str, int] = {}
        self.callbacks = 0
        self.waiting: set[Any] = set()  # survivors whose commit barrier has not passed every T_f yet
        self.loop: Any = None
        self.fail = "process"
        self.component = ""
        #: the link inputs facing the failed switch or link (``switch/port``), known at the failure
        self.inputs: set[str] = set()
        self.frozen: dict[str, int | None] = {}  # ... reported: the highest commit each froze (wire)
        self.released_at: dict[Any, int] = {}  # failed processes and reported inputs -> their release
        self.declared: set[Any] = set()  # every process recorded failed
        self.ctl: SimController | None = None

    def mark(self, step: str) -> None:
        if self.killed_at is not None and step not in self.times:
            self.times[step] = self.loop.now

    def reported(self, inp: Any, commit: int | None) -> None:
        """A switch reported ``inp`` (an address, or ``switch/port``) with the commit it froze."""
        if inp in self.killed or inp in self.inputs:
            self.mark("detect")
        if inp in self.inputs:
            old = self.frozen.get(inp)
            self.frozen[inp] = commit if old is None else old if commit is None else ts_max(old, commit)

    def released(self, inp: Any) -> None:
        if inp not in self.killed and inp not in self.frozen:
            return
        self.released_at.setdefault(inp, self.loop.now)
        if self.killed <= self.released_at.keys() and self.frozen.keys() <= self.released_at.keys():
            self.mark("release")

    def callback(self, proc: ReliableProcess) -> None:
        self.callbacks += 1

    def progress(self, proc: ReliableProcess) -> None:
        if proc not in self.waiting or len(self.t_f) < len(self.killed) or "release" not in self.times:
            return
        ep = proc.ep
        assert isinstance(ep, ReliableEndpoint)
        cb = ep.commit_barrier
        marks = [*self.t_f.values(), *(c for c in self.frozen.values() if c is not None)]
        if cb is not None and all(cb > ts_unwrap(t, cb) for t in marks):
            self.waiting.discard(proc)
            if not self.waiting:
                self.mark("resume")

    def result(self) -> dict[str, Any]:
        k = self.killed_at
        out = {"killed": len(self.killed), "callbacks": self.callbacks,
               **{f"{s}_ns": (self.times[s] - k) if k is not None and s in self.times else None
                  for s in ("detect", "record", "release", "resume")}}
        if self.fail != "process":  # (a process crash's record is as it was before the other failures)
            out.update(fail=self.fail, component=self.component, inputs=sorted(self.frozen),
                       declared=sorted(f"{a[0]}:{a[1]}" for a in self.declared))
        return out


class SimController:
    """The controller daemon's shell on a simulated host (module docstring)."""

    def __init__(self, run: Any, net: Any, host_name: str, params: ControllerParams, store_delay_ns: int,
                 msg_ns: int = 0) -> None:
        self.run = run
        self.net = net
        self.host = net.host(host_name)
        self.loop = self.host.loop
        self.ip = str(ipaddress.IPv4Address(self.host.ip))
        self.addr = (self.ip, PORT)
        self.ctl = Controller(params, self.loop.now)
        self.store_delay_ns = store_delay_ns
        #: the controller's core (module docstring; schedule_kills starts it at the failure): None
        #: when its work takes no time
        self.msg_ns = msg_ns
        self.core = ControllerCore(self.loop, msg_ns, start_ns=NEVER) if msg_ns > 0 else None
        #: the engine's counters when the failure came (schedule_kills): what the recovery added
        self.counters_at_failure: dict[str, Any] | None = None
        self.records = 0
        #: switches that failed (fail=tor, core-switch): they report nothing and take no request
        self.dead: set[str] = set()
        self._flows: dict[str, Ipv4Flow] = {}
        self._timer: int | None = None
        self.host.bind_udp(PORT, self.on_frame, on_unreachable=self.on_unreachable)

    def _on_core(self, cost_ns: int, fn: Any, *args: Any) -> None:
        """An input: ``fn(*args)`` handles it once the controller's core has read it (at once
        without a core)."""
        if self.core is None:
            fn(*args)
        else:
            self.core.submit(cost_ns, fn, *args)

    def on_frame(self, frame: bytes) -> None:
        self._on_core(self.msg_ns, self._receive, frame)

    def _receive(self, frame: bytes) -> None:
        src = (self.run.ip_str(frame[26:30]), frame[34] << 8 | frame[35])
        self.ctl.receive(frame[UDP_HEADERS:ip_payload_end(frame)], src, self.loop.now)
        self.flush()

    def on_unreachable(self, addr: tuple[str, int]) -> None:
        """The host's kernel passed on an ICMP port unreachable for a datagram we sent ``addr``
        (``netstack.io.udperr`` live): a probed process there is dead (Controller.unreachable)."""
        self._on_core(self.msg_ns, self._unreachable, addr)

    def _unreachable(self, addr: tuple[str, int]) -> None:
        self.ctl.unreachable(addr, self.loop.now)
        self.flush()

    def on_report(self, report: dict[str, Any], switch: str | None = None) -> None:
        """A switch's report (``feature.enable(on_report=...)``), as the daemon's poll brings it;
        ``switch`` names the reporter (:meth:`reporter`)."""
        self.loop.call_at(self.loop.now + 1, self._on_core, 0, self._report, report, switch)

    def reporter(self, switch: str) -> Any:
        """The ``on_report`` callback for ``switch``: a fabric port's report names the link input
        as ``switch/port`` (a port name means something at its own switch only: with two spines
        both have a ``p-tor1``), as the controller gets it and releases it."""
        return lambda report: self.on_report(report, switch)

    def _report(self, report: dict[str, Any], switch: str | None) -> None:
        if switch in self.dead:
            return  # (a dead switch's timers still run in the simulator: it reports nothing)
        text = str(report["input"])
        inp: Any = parse_proc(text) if ":" in text else text if switch is None else f"{switch}/{text}"
        last = report.get("last_commit")
        commit = None if last is None else ts_from_ns(last)
        self.run.recovery.reported(inp, commit)
        self.ctl.report(inp, commit, self.loop.now)
        self.flush()

    def flush(self) -> None:
        while self.ctl.actions:
            for act in self.ctl.actions.take_all():
                self._act(act)
        self._slack()
        self._arm()

    def _act(self, act: Any) -> None:
        now = self.loop.now
        if type(act) is SendTo:
            self._send(act.dst, act.data)
        elif type(act) is RecordFailure:
            self.loop.call_at(now + self.store_delay_ns, self._on_core, 0, self._recorded, act)
        elif type(act) is Fence:
            last = [r["last_commit"] for r in self._on_switches(feature.fence, self._name(act.proc))]
            known = [x for x in last if x is not None]
            self.ctl.report(act.proc, ts_from_ns(max(known)) if known else None, now, "fence")
        elif type(act) is Release:
            self.run.recovery.released(act.proc)
            self._on_switches(feature.release, self._name(act.proc), now, ban=isinstance(act.proc, tuple))
        elif type(act) is Admit:
            self._on_switches(feature.admit, self._name(act.proc))

    def _recorded(self, act: RecordFailure) -> None:
        self.records += 1
        self.run.recovery.declared.add(act.proc)
        if act.proc in self.run.recovery.killed:
            self.run.recovery.t_f[act.proc] = act.t_f
            self.run.recovery.mark("record")
        self.ctl.recorded(act.proc, act.incarnation, act.t_f, self.records, self.loop.now)
        self.flush()

    @staticmethod
    def _name(inp: Any) -> str:
        return f"{inp[0]}:{inp[1]}" if isinstance(inp, tuple) else str(inp)

    def _on_switches(self, fn: Any, text: str, *args: Any, **kw: Any) -> list[Any]:
        """``fn(switch, input, ...)`` on every live switch, or on its own for a ``switch/port``."""
        out = []
        at, sep, port = text.partition("/")
        for name, sn in self.net.switches.items():
            if name in self.dead or (sep and name != at):
                continue
            try:
                out.append(fn(sn.switch, port if sep else text, *args, **kw))
            except ConfigError:  # a link name another switch does not have
                continue
            self.net.service(name)
        return out

    def _send(self, dst: Any, data: bytes) -> None:
        flow = self._flows.get(dst[0])
        if flow is None:
            ip = ipaddress.IPv4Address(dst[0]).packed
            flow = self._flows[dst[0]] = Ipv4Flow(self.host.mac, self.host.net.mac_of(ip), self.host.ip, ip,
                                                  PROTO_UDP, 0)
        frame = flow.udp(PORT, dst[1], data)
        if self.core is None:
            self.host.send(frame)
        else:
            self.core.send(self.host.send, frame)

    def _arm(self) -> None:
        d = self.ctl.next_deadline()
        if d is None:
            return
        t = max(d, self.loop.now + 1)
        if self._timer is None or t < self._timer:
            self._timer = t
            self.loop.call_at(t, self._on_core, 0, self._fire, t)

    def _fire(self, token: int) -> None:
        if token != self._timer:
            return
        self._timer = None
        self._slack()
        self.ctl.on_timer(self.loop.now)
        self.flush()

    def _slack(self) -> None:
        if self.core is not None:
            # as the live daemon's (twice the largest lag it has seen): a request of ours waited
            # in our queue before it left, and its answer waits there again before we read it
            self.ctl.set_timer_slack(2 * self.core.peak_wait_ns)

    def snapshot(self) -> None:
        """(At the failure.) The engine's counters so far."""
        self.counters_at_failure = self.ctl.counters()

    def recovery_counters(self) -> dict[str, Any]:
        """What the engine counted from the failure on (its numeric counters), and the core's."""
        now, before = self.ctl.counters(), self.counters_at_failure or {}
        out = {k: v - before.get(k, 0) for k, v in now.items()
               if type(v) is int and k in ("datagrams", "notices_sent", "notice_retries", "callbacks", "relayed",
                                           "recall_acks_sent", "duplicate_recalls", "notices_to_strays")}
        if self.core is not None:
            out["core"] = self.core.counters(self.loop.now)
        return out


def setup(net: Any, run: Any, p: dict[str, Any], ctl_host: str) -> SimController:
    """Before the switches are enabled and the processes exist: the controller on ``ctl_host``;
    ``run.ctl_addr`` and ``run.recovery`` are what :class:`ReliableProcess` reads."""
    ctl = SimController(run, net, ctl_host, ControllerParams.for_beacon(p["t_beacon_ns"]), int(p["store_delay_ns"]),
                        int(p.get("ctl_msg_ns", 0)))
    for host in net.hosts.values():
        host.icmp_unreachable = True  # a crashed process's closed port answers as a kernel does
    run.ctl_addr = ctl.addr
    run.recovery = Recovery()
    run.recovery.loop = ctl.loop
    run.recovery.ctl = ctl
    return ctl


def schedule_kills(run: Any, procs: list[Any], p: dict[str, Any], start: int, stop: int) -> None:
    """The failure ``fail`` (module docstring) at ``kill_at_ns`` (0: mid-run) when ``kill`` > 0;
    ScenarioError for a failure this fabric cannot take. The controller learns the fabric's ToRs
    (:func:`tors_of`) first, whatever fails."""
    fail = str(p.get("fail", "process"))
    if fail not in FAILS:
        raise ScenarioError(f"scenario onepipe: fail {fail!r} is not one of {', '.join(FAILS)}")
    rec = run.recovery
    ctl = rec.ctl
    assert ctl is not None
    net = run.net
    topo: Topology = net.topology
    ctl.ctl.know_tors(tors_of(topo, procs))
    k = int(p["kill"])
    if k <= 0:
        return
    at = int(p["kill_at_ns"]) or (start + stop) // 2
    rec.fail = fail
    if ctl.core is not None:
        ctl.core.start_ns = at  # (submit and send take no core before it)
    if fail == "process":
        victims = procs[-k:]
        dead: set[str] = set()
        down: set[str] = set()
    else:
        if k != 1:
            raise ScenarioError(f"scenario onepipe: fail={fail} takes kill=1 (one component), not {k}")
        tor = _switch_of(topo, procs[-1].host.name)
        if fail == "tor":
            rec.component, dead = tor, {tor}
        else:
            up = next((lk for lk in topo.links_of(tor) if _is_switch(topo, lk.peer(tor).node)), None)
            if up is None:
                raise ScenarioError(f"scenario onepipe: fail={fail}: {tor} has no link to another switch")
            if fail == "core-link":
                rec.component, dead = up.name, set()
            else:
                rec.component = up.peer(tor).node
                dead = {rec.component}
        down = {lk.name for lk in topo.links if lk.name == rec.component or dead & {lk.a.node, lk.b.node}}
        victims = [q for q in procs if _switch_of(topo, q.host.name) in dead]
        rec.inputs = {f"{e.node}/{e.ifname}" for lk in topo.links if lk.name in down
                      for e in lk.ends if _is_switch(topo, e.node) and e.node not in dead}
    survivors = [q for q in procs if q not in victims]
    _check_connected(topo, down, dead, ctl.host.name, survivors, fail)
    rec.waiting = set(survivors)

    def crash() -> None:
        rec.killed_at = rec.loop.now
        ctl.snapshot()
        for v in victims:
            rec.killed.add(v.addr)
            v.crash()
        if down:
            ctl.dead |= dead
            for name in sorted(down):
                net.set_link(name, False)
            reroute(net, down, dead)

    rec.loop.call_at(at, crash)


def _is_switch(topo: Topology, name: str) -> bool:
    return topo.node(name).kind is NodeKind.SWITCH


def _switch_of(topo: Topology, host: str) -> str:
    return topo.links_of(host)[0].peer(host).node


def tors_of(topo: Topology, procs: list[Any]) -> dict[str, tuple[list[str], list[Any]]]:
    """``{switch: (its uplinks, the processes behind it)}`` for every switch with processes on its
    hosts, an uplink named as the controller gets the neighbour's report about it
    (``neighbour/port``): what the controller needs to tell a failed ToR from a core link
    (:meth:`.controller.Controller.know_tors`)."""
    out: dict[str, tuple[list[str], list[Any]]] = {}
    for q in procs:
        tor = _switch_of(topo, q.host.name)
        if tor not in out:
            ups = [f"{lk.peer(tor).node}/{lk.peer(tor).ifname}" for lk in topo.links_of(tor)
                   if _is_switch(topo, lk.peer(tor).node)]
            out[tor] = (ups, [])
        out[tor][1].append(q.addr)
    return {t: v for t, v in out.items() if v[0]}  # (a lone switch has nobody to hear it)


def _check_connected(topo: Topology, down: set[str], dead: set[str], ctl_host: str, survivors: list[Any],
                     fail: str) -> None:
    """Every survivor's host still reaches the controller's once ``down`` and ``dead`` are gone."""
    if _switch_of(topo, ctl_host) in dead:
        raise ScenarioError(f"scenario onepipe: fail={fail} would take the controller's switch down")
    seen = {ctl_host}
    todo = deque([ctl_host])
    while todo:
        node = todo.popleft()
        for lk in topo.links_of(node):
            peer = lk.peer(node).node
            if lk.name not in down and peer not in dead and peer not in seen:
                seen.add(peer)
                todo.append(peer)
    lost = sorted({q.host.name for q in survivors} - seen)
    if lost:
        raise ScenarioError(f"scenario onepipe: fail={fail} would cut hosts {', '.join(lost)} off the controller's "
                            "(a core link or switch needs another path: fabric_topology(spines=2))")


def reroute(net: Any, down: set[str], dead: set[str]) -> None:
    """The routing protocol the simulator lacks, converged at once: every live switch's static
    entry for each host it still reaches, by the shortest path on the fabric without the links in
    ``down`` that goes up, then only down (1Pipe §3: routing must stay a DAG, a valley would enter a
    switch from above and leave it upward; :mod:`.topology`), the first such path in link order,
    as the switch configs' breadth-first first hops are. A host with no such path keeps its entry
    (toward a port without carrier, or through a switch nobody forwards it to any more)."""
    topo = net.topology
    tiers = op_topology.switch_tiers(topo)
    for name, sn in net.switches.items():
        if name in dead:
            continue
        index = {port.name: port.index for port in sn.switch.ports}
        for host, ifname in _up_down_hops(topo, name, tiers, down).items():
            sn.switch.fdb.static[net.hosts[host].mac] = index[ifname]
        net.service(name)


def _up_down_hops(topo: Topology, switch: str, tiers: dict[str, int], down: set[str]) -> dict[str, str]:
    """``{host: the port of switch}`` on the shortest valley-free path to each host (:func:`reroute`)."""
    first: dict[str, str] = {}
    seen: set[tuple[str, bool]] = {(switch, False)}
    todo: deque[tuple[str, bool, str | None]] = deque([(switch, False, None)])
    while todo:
        node, descending, via = todo.popleft()
        for lk, end in topo.ends_of(node):
            if lk.name in down:
                continue
            peer = lk.peer(node).node
            hop = via or end.ifname
            if not _is_switch(topo, peer):
                first.setdefault(peer, hop)  # a host: always a step down
                continue
            lower = tiers.get(peer, 0) < tiers.get(node, 0)
            if descending and not lower:
                continue  # down, then up again: a valley
            state = (peer, descending or lower)
            if state not in seen:
                seen.add(state)
                todo.append((peer, state[1], hop))
    return first


__all__ = ["FAILS", "Recovery", "ReliableProcess", "SimController", "reroute", "schedule_kills", "setup", "tors_of"]
