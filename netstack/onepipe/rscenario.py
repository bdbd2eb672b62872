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
through its core at reliable's measured costs (:mod:`.cpucost`); the controller has no CPU model
(it is off the data path).

``kill`` processes crash at ``kill_at_ns`` (default: the middle of the sending period): the last
``kill`` processes stop dead (no goodbye, as ``kill -9``). The run then reports the recovery, in
true time from the crash (1Pipe's Fig. 10): ``detect`` (the first switch report), ``record`` (the
failure record durable), ``release`` (every survivor finished its callback: the switches release
the input), ``resume`` (every survivor's commit barrier has passed T_f: delivery goes on).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from headers.onepipe import ts_from_ns, ts_unwrap

from ..engine import SendTo
from ..errors import ConfigError
from ..sim.packets import PROTO_UDP, UDP_HEADERS, Ipv4Flow, ip_payload_end
from . import feature
from .actions import Admit, Fence, ProcFail, RecordFailure, Release
from .controller import Controller, ControllerParams
from .cpucost import CpuCosts, OpCosts
from .ctlwire import parse_proc
from .params import PORT, OnePipeParams
from .reliable import ReliableEndpoint
from .simproc import OnePipeProcess


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
    """When each step of recovering from the crash happened (true ns), and who resumed."""

    def __init__(self) -> None:
        self.killed_at: int | None = None
        self.killed: set[Any] = set()
        self.t_f: dict[Any, int] = {}  # failed address -> T_f (wire)
        self.times: dict[str, int] = {}
        self.callbacks = 0
        self.waiting: set[Any] = set()  # survivors whose commit barrier has not passed every T_f yet
        self.loop: Any = None

    def mark(self, step: str) -> None:
        if self.killed_at is not None and step not in self.times:
            self.times[step] = self.loop.now

    def callback(self, proc: ReliableProcess) -> None:
        self.callbacks += 1

    def progress(self, proc: ReliableProcess) -> None:
        if proc not in self.waiting or len(self.t_f) < len(self.killed) or "release" not in self.times:
            return
        ep = proc.ep
        assert isinstance(ep, ReliableEndpoint)
        cb = ep.commit_barrier
        if cb is not None and all(cb > ts_unwrap(t, cb) for t in self.t_f.values()):
            self.waiting.discard(proc)
            if not self.waiting:
                self.mark("resume")

    def result(self) -> dict[str, Any]:
        k = self.killed_at
        return {"killed": len(self.killed), "callbacks": self.callbacks,
                **{f"{s}_ns": (self.times[s] - k) if k is not None and s in self.times else None
                   for s in ("detect", "record", "release", "resume")}}


class SimController:
    """The controller daemon's shell on a simulated host (module docstring)."""

    def __init__(self, run: Any, net: Any, host_name: str, params: ControllerParams, store_delay_ns: int) -> None:
        self.run = run
        self.net = net
        self.host = net.host(host_name)
        self.loop = self.host.loop
        self.ip = str(ipaddress.IPv4Address(self.host.ip))
        self.addr = (self.ip, PORT)
        self.ctl = Controller(params, self.loop.now)
        self.store_delay_ns = store_delay_ns
        self.records = 0
        self._flows: dict[str, Ipv4Flow] = {}
        self._timer: int | None = None
        self.host.bind_udp(PORT, self.on_frame, on_unreachable=self.on_unreachable)

    def on_frame(self, frame: bytes) -> None:
        src = (self.run.ip_str(frame[26:30]), frame[34] << 8 | frame[35])
        self.ctl.receive(frame[UDP_HEADERS:ip_payload_end(frame)], src, self.loop.now)
        self.flush()

    def on_unreachable(self, addr: tuple[str, int]) -> None:
        """The host's kernel passed on an ICMP port unreachable for a datagram we sent ``addr``
        (``netstack.io.udperr`` live): a probed process there is dead (Controller.unreachable)."""
        self.ctl.unreachable(addr, self.loop.now)
        self.flush()

    def on_report(self, report: dict[str, Any]) -> None:
        """A switch's report (``feature.enable(on_report=...)``), as the daemon's poll brings it."""
        self.loop.call_at(self.loop.now + 1, self._report, report)

    def _report(self, report: dict[str, Any]) -> None:
        text = str(report["input"])
        inp: Any = parse_proc(text) if ":" in text else text
        if inp in self.run.recovery.killed:
            self.run.recovery.mark("detect")
        last = report.get("last_commit")
        self.ctl.report(inp, None if last is None else ts_from_ns(last), self.loop.now)
        self.flush()

    def flush(self) -> None:
        while self.ctl.actions:
            for act in self.ctl.actions.take_all():
                self._act(act)
        self._arm()

    def _act(self, act: Any) -> None:
        now = self.loop.now
        if type(act) is SendTo:
            self._send(act.dst, act.data)
        elif type(act) is RecordFailure:
            self.loop.call_at(now + self.store_delay_ns, self._recorded, act)
        elif type(act) is Fence:
            last = [r["last_commit"] for r in self._on_switches(feature.fence, self._name(act.proc))]
            known = [x for x in last if x is not None]
            self.ctl.report(act.proc, ts_from_ns(max(known)) if known else None, now, "fence")
        elif type(act) is Release:
            if act.proc in self.run.recovery.killed:
                self.run.recovery.mark("release")
            self._on_switches(feature.release, self._name(act.proc), now, ban=isinstance(act.proc, tuple))
        elif type(act) is Admit:
            self._on_switches(feature.admit, self._name(act.proc))

    def _recorded(self, act: RecordFailure) -> None:
        self.records += 1
        if act.proc in self.run.recovery.killed:
            self.run.recovery.t_f[act.proc] = act.t_f
            self.run.recovery.mark("record")
        self.ctl.recorded(act.proc, act.incarnation, act.t_f, self.records, self.loop.now)
        self.flush()

    @staticmethod
    def _name(inp: Any) -> str:
        return f"{inp[0]}:{inp[1]}" if isinstance(inp, tuple) else str(inp)

    def _on_switches(self, fn: Any, *args: Any, **kw: Any) -> list[Any]:
        out = []
        for name, sn in self.net.switches.items():
            try:
                out.append(fn(sn.switch, *args, **kw))
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
        self.host.send(flow.udp(PORT, dst[1], data))

    def _arm(self) -> None:
        d = self.ctl.next_deadline()
        if d is None:
            return
        t = max(d, self.loop.now + 1)
        if self._timer is None or t < self._timer:
            self._timer = t
            self.loop.call_at(t, self._fire, t)

    def _fire(self, token: int) -> None:
        if token != self._timer:
            return
        self._timer = None
        self.ctl.on_timer(self.loop.now)
        self.flush()


def setup(net: Any, run: Any, p: dict[str, Any], ctl_host: str) -> SimController:
    """Before the switches are enabled and the processes exist: the controller on ``ctl_host``;
    ``run.ctl_addr`` and ``run.recovery`` are what :class:`ReliableProcess` reads."""
    ctl = SimController(run, net, ctl_host, ControllerParams.for_beacon(p["t_beacon_ns"]), int(p["store_delay_ns"]))
    for host in net.hosts.values():
        host.icmp_unreachable = True  # a crashed process's closed port answers as a kernel does
    run.ctl_addr = ctl.addr
    run.recovery = Recovery()
    run.recovery.loop = ctl.loop
    return ctl


def schedule_kills(run: Any, procs: list[Any], p: dict[str, Any], start: int, stop: int) -> None:
    """The last ``kill`` processes crash at ``kill_at_ns`` (0: mid-run): they stop, and their
sockets close (:meth:`ReliableProcess.crash`)."""
    k = int(p["kill"])
    if k <= 0:
        return
    at = int(p["kill_at_ns"]) or (start + stop) // 2
    victims = procs[-k:]
    rec = run.recovery
    rec.waiting = set(procs[:-k])

    def crash() -> None:
        rec.killed_at = rec.loop.now
        for v in victims:
            rec.killed.add(v.addr)
            v.crash()

    rec.loop.call_at(at, crash)


__all__ = ["Recovery", "ReliableProcess", "SimController", "schedule_kills", "setup"]
