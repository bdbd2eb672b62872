"""Reliable 1Pipe's controller daemon: the sans-IO ``netstack.onepipe.controller.Controller`` on a
UDP socket, a store and the switch daemons' control sockets.

1Pipe design topic §8 (docs/papers.md; docs/onepipe-reliable.md "Running the controller").
``netstack up`` starts one or more replicas on the topology's ``onepipe-controller`` node:

    python -m daemons.onepipe_controller --config ctl.json --control ctl.sock --replica ctl-r1

- **Election.** Every replica serves its control socket at once (``status``: ``standby``) and
  campaigns for the lead in the store (``store.campaign``). The winner restores the engine from
  the store (processes, failure records, undeliverable recalls: ``Controller.restore``), only then
  binds ``ip:40100`` and serves. A leader that loses its lease exits with status 3 (another
  replica takes over; nothing is restarted). SIGTERM resigns the lead, so a standby takes over at once.
- **One consumer.** Datagrams, the switches' reports and timer wake-ups go through one queue; one
  task feeds them to the engine and carries the engine's actions out in their order, awaiting
  each store write before what follows it (a failure notice never leaves before its record is
  durable). Store errors are logged and retried; a datagram never kills the daemon.
- **Switches.** Every ``POLL_BEACONS`` T_beacon each switch's ``onepipe_reports`` is polled (a persistent
  connection per switch, asyncio, so the loop never blocks); each report is fed to the engine.
  ``Fence``/``Release``/``Admit`` go to every switch (a fabric link's release only to the
  switches that reported it: a port name means something only at its own switch).

A new leader polls every switch from its first report, and skips those stamped (``at_ns``)
more than a lease and a second before it took the lead: the previous leader had them, and an
old report about a process that has re-joined since would declare its new incarnation failed.
Reports from the interregnum (the old leader dead, its lease not yet lapsed) are taken. With the
suspicion phase (issue 31, ``max_strikes`` > 0) a process's old reports are taken too: the engine
probes before it declares, so a live process (re-joined, or one the previous leader was probing
when it died, whose input its switch still holds) answers and is admitted back.

Time is ``time.monotonic_ns()``, the clock the switch daemons stamp with (also their reports'
``at_ns``; the engine times only its own timers with it: the T_f it picks are the processes'
commit timestamps).

**Timers on a loaded host** (docs/onepipe-reliable.md). Every ``LAG_FOLLOW_S`` the daemon gives the
engine ``SLACK_FACTOR`` times the largest scheduling delay of its own event loop in the last
seconds (``Controller.set_timer_slack``, through the one queue): a process is declared failed
for not answering only after the answer timeout plus that slack. ``status`` shows both
(``timers_in_force``).

**Keys.** With a key file in the config (the topology's ``[topology] keys``; its path, the daemon
reads it) every datagram is opened with the controller key before the engine sees it and every
one sent is sealed (``netstack.onepipe.auth.ControllerAuth``; docs/onepipe-reliable.md
"Authenticated controller messages"); refused ones are counted (``status``: ``auth``). A leader's
era is the first whole second after it took the lead, and it serves from then on: so a later
leader's era is above it, and processes take the new leader's messages at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import functools
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar

from daemons.common import daemon_parser, run_daemon, serve_metrics
from headers.onepipe import ts_max
from netstack.auth.frame import era_now
from netstack.auth.sign import load_signing_key
from netstack.auth.watch import KeyFileWatch
from netstack.engine import SendTo
from netstack.errors import ConfigError
from netstack.io.control import ControlError, ControlServer
from netstack.io.udperr import bind_udp, port_unreachable
from netstack.looplag import LagHistogram
from netstack.onepipe.actions import (
    Admit,
    ControllerAction,
    Fence,
    RecordFailure,
    RecordRecall,
    RegisterProcess,
    Release,
)
from netstack.onepipe.auth import ControllerAuth, controller_keys
from netstack.onepipe.controller import Controller, show
from netstack.onepipe.ctlnode import ControllerConfig, live_timers, load_config
from netstack.onepipe.ctlwire import Addr, parse_proc, proc_id
from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.store import (
    ControllerStore,
    EtcdStore,
    ProcessRecord,
    SqliteStore,
    StaleFailureError,
    StoreError,
)

log = logging.getLogger("netstack.onepipe.controller")
T = TypeVar("T")

#: exit status of a leader that lost its lease (another replica leads now)
LOST_LEASE = 3
#: a switch control request that takes longer than this is given up (the switch is wedged or gone)
SWITCH_TIMEOUT_S = 2.0
#: store retries back off up to this
MAX_BACKOFF_S = 2.0
#: switches are polled for reports every this many beacon intervals (30 ms live): a tenth of the
#: live failure timeout (100 T_beacon), and a poll per beacon interval per switch cost the switch
#: daemons and the controller a third of a core on this 2-core testbed, enough to slow every
#: 1Pipe process in a run
POLL_BEACONS = 10
#: a switch whose poll failed (1Pipe off there, or the daemon is gone) is polled this often until it
#: answers: a report is still taken within this of 1Pipe's enable (before it, there is none)
IDLE_POLL_S = 0.1
#: the shortest timer the loop is asked for (uvloop's resolution is a millisecond)
MIN_SLEEP_S = 0.001
#: a leader keeps trying to bind ip:port this long (the previous leader's socket may linger)
BIND_TIMEOUT_S = 10.0
#: how often the engine's timer slack follows this daemon's scheduling delay, and how many times
#: the recent maximum it is: an answer that comes late needs two processes scheduled (the process
#: that answers, this daemon that reads it), as the switch daemon's slack (daemons/switch.py)
LAG_FOLLOW_S = 0.1
SLACK_FACTOR = 2


_SWITCH_ERRORS = (ControlError, OSError, TimeoutError, ValueError, asyncio.IncompleteReadError)


class LostLease(Exception):
    """This replica is no longer the leader: it must stop acting at once."""


@dataclass(eq=False)
class ShellCounters:
    """What the daemon around the engine counts (``status``: ``shell``)."""

    datagrams_in: int = 0
    datagrams_refused: int = 0  # not authentic (keys): never seen by the engine (``auth`` says why)
    datagrams_out: int = 0
    send_errors: int = 0
    reports_polled: int = 0  # switch reports fed to the engine
    port_unreachable: int = 0  # ICMP port unreachable for our datagrams, fed to the engine (issue 31)
    reports_dropped: int = 0  # reports a switch dropped before we polled them (its ring overflowed)
    reports_before_lead: int = 0  # reports the previous leader had (module docstring): skipped
    switch_reenabled: int = 0  # a switch's report sequence restarted (1Pipe enabled afresh there)
    switch_errors: int = 0  # fences, releases and admits a switch refused or did not answer
    polls_failed: int = 0  # report polls that failed (1Pipe off in that switch, or it is not there)
    store_calls: int = 0
    store_errors: int = 0  # failed store calls (each retried)
    stale_failures: int = 0  # a failure record already in the store with another T_f
    internal_errors: int = 0  # exceptions from the engine or an action: logged, the event dropped


# =========================================================================== switches

class SwitchClient:
    """One switch daemon's control socket, kept open: polled every POLL_BEACONS T_beacon, connecting each
    time would cost more than the request. One request at a time (a lock): replies are lines in
    request order."""

    def __init__(self, name: str, path: str) -> None:
        self.name = name
        self.path = path
        self._lock = asyncio.Lock()
        self._conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def request(self, cmd: str, **args: Any) -> Any:
        """The reply's result; ControlError when the switch refuses, OSError/TimeoutError when it
        is not there (the connection is then dropped and made again next time)."""
        async with self._lock:
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation
                # that lands as the reply does, and the poller then never stops (a hang at close)
                async with asyncio.timeout(SWITCH_TIMEOUT_S):
                    return await self._exchange(cmd, args)
            except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError):
                await self.close()
                raise

    async def _exchange(self, cmd: str, args: dict[str, Any]) -> Any:
        if self._conn is None:
            self._conn = await asyncio.open_unix_connection(self.path, limit=1 << 22)
        reader, writer = self._conn
        writer.write((json.dumps({"cmd": cmd, **args}) + "\n").encode())
        await writer.drain()
        line = await reader.readline()
        if not line:
            raise ConnectionResetError(f"{self.path}: the switch daemon closed the connection")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise ControlError(str(reply.get("error", "unknown error")))
        return reply.get("result")

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn[1].close()
            with contextlib.suppress(Exception):
                await conn[1].wait_closed()


# =========================================================================== the shell

class _Datagrams(asyncio.DatagramProtocol):
    def __init__(self, put: Callable[[tuple[Any, ...]], None], sock: socket.socket) -> None:
        self.put = put
        self.sock = sock

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        self.put(("dgram", data, addr))

    def error_received(self, exc: Exception) -> None:
        # the socket queues ICMP errors (netstack.io.udperr): a port unreachable names a process
        # whose socket is gone, which the engine takes as proof of death for a probed one
        log.debug("UDP error: %s", exc)
        for addr in port_unreachable(self.sock):
            self.put(("unreachable", addr))


class ControllerShell:
    """The daemon around one :class:`Controller` (module docstring)."""

    def __init__(self, cfg: ControllerConfig, store: ControllerStore, replica: str) -> None:
        self.cfg = cfg
        self.store = store
        self.replica = replica
        self.role = "standby"
        self.engine: Controller | None = None
        self.c = ShellCounters()
        self.events: asyncio.Queue[tuple[Any, ...]] = asyncio.Queue()
        self.switches = {name: SwitchClient(name, path) for name, path in sorted(cfg.switches.items())}
        self.since = dict.fromkeys(self.switches, 0)
        #: each switch's last answer: "ok", or why not ("1Pipe is not enabled ...", a socket error)
        self.switch_state: dict[str, str] = dict.fromkeys(self.switches, "not asked yet")
        self.link_reporters: dict[str, set[str]] = {}  # fabric port name -> switches that reported it
        #: every address that ever registered (the store's, then RegisterProcess): only these are
        #: banned when released (``_release``)
        self.registered: set[Addr] = set()
        self.transport: asyncio.DatagramTransport | None = None
        self.started_ns = time.monotonic_ns()
        self._timer: asyncio.TimerHandle | None = None
        self._dropped = dict.fromkeys(self.switches, 0)  # each switch's last "dropped"
        self.lead_ns: int | None = None  # when this replica started to lead
        #: with keys: the key file (followed for rotations) and the controller key's sealer and openers
        self.keyfile: KeyFileWatch | None = None
        self.auth: ControllerAuth | None = None
        #: this daemon's scheduling delay (the control socket measures it): the timer slack follows it
        self.lag: LagHistogram | None = None

    # ------------------------------------------------------------------ control socket
    def handlers(self) -> dict[str, Any]:
        return {"ping": lambda req: "pong", "status": self.ctl_status, "onepipe_params": self.ctl_params}

    def ctl_params(self, req: dict[str, Any]) -> dict[str, Any]:
        """The switches' 1Pipe parameters changed (``netstack onepipe enable --t-beacon-ms``): poll
        their reports every ``POLL_BEACONS`` of the new T_beacon and scale the engine's timers to it
        (``live_timers``), on every replica, so that a standby that takes over has them too."""
        try:
            params = OnePipeParams(**req.get("params", {}))
        except (ConfigError, TypeError) as exc:
            raise ControlError(f"bad 1Pipe parameters: {exc}") from None
        timers = live_timers(params)
        self.cfg = replace(self.cfg, params=params, controller=timers)
        if self.engine is not None:
            self.engine.params = timers
        log.info("T_beacon %g ms: polling every %g ms, timers %s", params.t_beacon_ns / 1e6,
                 params.t_beacon_ns * POLL_BEACONS / 1e6, asdict(timers))
        return {"t_beacon_ns": params.t_beacon_ns, "timers": asdict(timers)}

    def ctl_status(self, req: dict[str, Any]) -> dict[str, Any]:
        return {
            "role": self.role, "replica": self.replica, "store": self.cfg.store.backend, "pid": os.getpid(),
            "address": f"{self.cfg.ip}:{self.cfg.port}", "uptime_s": (time.monotonic_ns() - self.started_ns) / 1e9,
            "view": self.engine.view() if self.engine is not None else None,
            "counters": self.engine.counters() if self.engine is not None else {},
            "shell": asdict(self.c), "switches": {n: {"since": self.since[n], "state": self.switch_state[n]}
                                                  for n in self.switches},
            "auth": self.auth.counters() if self.auth is not None else None,
            "t_beacon_ns": self.cfg.params.t_beacon_ns, "timers": asdict(self.cfg.controller),
            # the answer timeout as in force now: configured + slack (docs/onepipe-reliable.md
            # "Timers on a loaded host")
            "timers_in_force": None if self.engine is None else {
                "timer_slack_ns": self.engine.timer_slack_ns, "answer_timeout_ns": self.engine.answer_timeout_ns},
        }

    # ------------------------------------------------------------------ leading
    async def lead(self) -> None:
        """Campaign, restore, bind, then serve until cancelled (or LostLease)."""
        await self._campaign()
        self.lead_ns = time.monotonic_ns()
        self.engine = await self._restore()
        await self._start_auth()
        await self._bind()
        self.role = "leader"
        tasks = [asyncio.create_task(self._consume(), name="consume"),
                 asyncio.create_task(self._watch_lease(), name="lease"),
                 *(asyncio.create_task(self._poll(name), name=f"poll-{name}") for name in self.switches)]
        if self.keyfile is not None:
            tasks.append(asyncio.create_task(self._follow_keys(), name="keys"))
        if self.lag is not None:
            tasks.append(asyncio.create_task(self._follow_lag(self.lag), name="lag"))
        self._wake()  # the restored engine may have notices and releases to drive at once
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                t.result()  # LostLease (or a bug) ends the lead
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _campaign(self) -> None:
        log.info("replica %s campaigning for %r (store %s)", self.replica, self.cfg.election, self.cfg.store.backend)
        while True:
            try:
                await self.store.campaign(self.cfg.election, ttl_s=self.cfg.lease_ttl_s)
                break
            except StoreError as exc:  # the store is unreachable for now: a standby waits it out
                self.c.store_errors += 1
                log.error("campaign failed (retrying in 1 s): %s", exc)
                await asyncio.sleep(1.0)
        log.info("replica %s leads", self.replica)

    async def _restore(self) -> Controller:
        processes = [p for p in map(_parse_id, [r.proc_id for r in await self._store(self.store.list_processes)])
                     if p is not None]
        failures = []
        for f in await self._store(self.store.list_failures):
            p = _parse_id(f.proc_id)
            if p is not None:
                failures.append((p[0], p[1], f.t_f, f.revision))
        recalls = []
        for r in await self._store(self.store.list_recalls):
            s, d = _parse_id(r.sender), _parse_id(r.receiver)
            if s is not None and d is not None:
                recalls.append((s[0], s[1], r.seq, d[0], d[1]))
        self.registered = {addr for addr, _ in processes}
        engine = Controller.restore(self.cfg.controller, time.monotonic_ns(), processes=processes,
                                    failures=failures, recalls=recalls)
        log.info("restored %d processes, %d failure records, %d undeliverable recalls from the store",
                 len(processes), len(failures), len(recalls))
        return engine

    async def _start_auth(self) -> None:
        """With a key file: the controller key's sealer, in an era above every earlier leader's (the
        first whole second after this one took the lead; it waits for it, under a second)."""
        if not self.cfg.keys:
            return
        self.keyfile = KeyFileWatch(self.cfg.keys, log=log)  # KeyFileError (a ValueError): this replica cannot lead
        era = era_now(time.time()) + 1
        await asyncio.sleep(max(0.0, era - time.time()))
        if not self.store.is_leader(self.cfg.election):
            raise LostLease(f"replica {self.replica} lost its lease on {self.cfg.election!r} before it served")
        keys = controller_keys(self.keyfile.ring, self.cfg.prefix, time.time())
        # what this replica sends is signed with the key file's controller signing key, which no process
        # is given (issue 34, finding 3; netstack/auth/sign.py): KeyFileError if it is missing
        self.auth = ControllerAuth((self.cfg.ip, self.cfg.port), keys, era, load_signing_key(self.cfg.keys),
                                   self.cfg.prefix)
        log.info("controller messages authenticated: keys from %s (key %d current, era %d)", self.cfg.keys,
                 self.keyfile.ring.current, era)

    async def _follow_keys(self) -> None:
        assert self.keyfile is not None and self.auth is not None
        auth = self.auth
        # re-derived after every poll, changed or not: an old key also ends with time alone
        await self.keyfile.follow(lambda ring, _reloaded: auth.update_keys(
            controller_keys(ring, self.cfg.prefix, time.time())))

    async def _follow_lag(self, lag: LagHistogram) -> None:
        """The engine's timer slack follows this daemon's recent scheduling delay (module docstring),
        through the one consumer, so that it changes between two events, never inside one."""
        last = 0
        while True:
            await asyncio.sleep(LAG_FOLLOW_S)
            slack = SLACK_FACTOR * lag.recent_max_ns(time.monotonic_ns())
            if slack != last:
                last = slack
                self.events.put_nowait(("slack", slack))

    async def _bind(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + BIND_TIMEOUT_S
        while True:
            try:
                sock = bind_udp(self.cfg.ip, self.cfg.port)
                transport, _ = await loop.create_datagram_endpoint(
                    functools.partial(_Datagrams, self.events.put_nowait, sock), sock=sock)
                break
            except OSError as exc:
                # the previous leader's socket (it lost its lease and is exiting): wait for it
                if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.1)
        self.transport = transport
        log.info("serving on %s:%d", self.cfg.ip, self.cfg.port)

    async def _watch_lease(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.lease_ttl_s / 4)
            if not self.store.is_leader(self.cfg.election):
                raise LostLease(f"replica {self.replica} lost its lease on {self.cfg.election!r}")

    # ------------------------------------------------------------------ the one consumer
    async def _consume(self) -> None:
        engine = self.engine
        assert engine is not None
        await self._carry_out(engine)  # what restore decided: notices and releases to drive again
        while True:
            event = await self.events.get()
            now = time.monotonic_ns()
            try:
                self._feed(engine, event, now)
                await self._carry_out(engine)
            except LostLease:
                raise
            except Exception:
                self.c.internal_errors += 1
                log.exception("internal error on %s: the event is dropped", event[0])
                engine.actions.clear()  # (half-done: what is left would go out of order)
            self._wake()

    def _feed(self, engine: Controller, event: tuple[Any, ...], now: int) -> None:
        kind = event[0]
        if kind == "dgram":
            self.c.datagrams_in += 1
            src = (str(event[2][0]), int(event[2][1]))
            data = event[1] if self.auth is None else self.auth.open(src, event[1])
            if data is None:
                self.c.datagrams_refused += 1  # forged, replayed, unsealed...: counted per reason in auth
                return
            engine.receive(data, src, now)
        elif kind == "report":
            engine.report(event[1], event[2], now, reporter=event[3])
        elif kind == "unreachable":
            self.c.port_unreachable += 1
            log.info("ICMP port unreachable from %s", show(event[1]))  # (the kernel rate-limits them)
            engine.unreachable(event[1], now)
        elif kind == "slack":
            engine.set_timer_slack(event[1])  # (_consume re-arms the timer after every event)
        elif kind == "timer":
            deadline = engine.next_deadline()
            if deadline is not None and deadline <= now:
                engine.on_timer(now)

    def _wake(self) -> None:
        """(Re)arm the one timer at the engine's next deadline: it posts a ``timer`` event."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadline = self.engine.next_deadline() if self.engine is not None else None
        if deadline is not None:
            delay = (deadline - time.monotonic_ns()) / 1e9
            # uvloop fires a sub-millisecond timer at once: wait at least 1 ms for one not yet due,
            # or the loop would spin until it is
            delay = 0.0 if delay <= 0 else max(delay, MIN_SLEEP_S)
            self._timer = asyncio.get_running_loop().call_later(delay, self.events.put_nowait, ("timer",))

    async def _carry_out(self, engine: Controller) -> None:
        """Every pending action, in decision order; actions an action causes (a fence's report)
        come after the rest, as they were decided later."""
        while engine.actions:
            for action in engine.actions.take_all():
                await self._do(engine, action)

    async def _do(self, engine: Controller, a: ControllerAction) -> None:
        if isinstance(a, SendTo):
            self._send(a.dst, a.data)
        elif isinstance(a, RegisterProcess):
            await self._register(a.proc, a.incarnation)
        elif isinstance(a, RecordFailure):
            await self._record(engine, a)
        elif isinstance(a, RecordRecall):
            await self._store(self.store.add_recall, proc_id(a.sender, a.sender_inc), a.psn,
                              proc_id(a.receiver, a.receiver_inc))
        elif isinstance(a, Fence):
            last = await self._fence(a.proc)
            engine.report(a.proc, last, time.monotonic_ns(), reporter="fence")
        elif isinstance(a, Release):
            await self._release(a.proc)
        elif isinstance(a, Admit):
            await self._every_switch("onepipe_admit", input=show(a.proc))
        else:
            log.warning("action %r is not the controller's: ignored", a)

    def _send(self, dst: Addr, data: bytes) -> None:
        if self.transport is None:
            return
        if self.auth is not None:
            data = self.auth.seal(dst, data)
        try:
            self.transport.sendto(data, dst)
            self.c.datagrams_out += 1
        except OSError as exc:
            self.c.send_errors += 1
            log.debug("send to %s failed: %s", dst, exc)

    async def _register(self, addr: Addr, inc: int) -> None:
        self.registered.add(addr)
        host = self.cfg.hosts.get(addr[0]) or addr[0]
        rec = ProcessRecord(proc_id(addr, inc), show(addr), host, time.time())
        await self._store(self.store.register_process, rec)

    async def _record(self, engine: Controller, a: RecordFailure) -> None:
        pid = proc_id(a.proc, a.incarnation)
        # a failure's timeline in the log (report, record, notices, release): rare, and what an
        # operator asks about first
        log.info("recording the failure of %s (T_f %d): %s", pid, a.t_f, a.reason)
        began = time.monotonic()
        try:
            await self._store(self.store.record_failure, pid, a.t_f, a.reason)
        except StaleFailureError as exc:
            # a record is write-once: the one in the store is what every process was (or will be) told
            self.c.stale_failures += 1
            log.error("%s", exc)
        rec = await self._store(self.store.get_failure, pid)
        if rec is None:
            log.error("failure record of %s is not in the store after writing it", pid)
            return
        log.info("failure of %s recorded as revision %d in %.1f ms: its notices leave", pid, rec.revision,
                 (time.monotonic() - began) * 1e3)
        engine.recorded(a.proc, a.incarnation, rec.t_f, rec.revision, time.monotonic_ns())

    async def _store(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        """``await fn(*args)``, retried with back-off on a store error for as long as this replica
        leads (a write must not be skipped: what follows it depends on it)."""
        backoff = 0.05
        while True:
            try:
                out = await fn(*args)
                self.c.store_calls += 1
                return out
            except StaleFailureError:
                raise
            except StoreError as exc:
                self.c.store_errors += 1
                log.error("store %s failed (retrying in %.2f s): %s", fn.__name__, backoff, exc)
            if self.role == "leader" and not self.store.is_leader(self.cfg.election):
                raise LostLease(f"replica {self.replica} lost its lease while the store failed")
            await asyncio.sleep(backoff)
            backoff = min(MAX_BACKOFF_S, backoff * 2)

    # ------------------------------------------------------------------ switches
    async def _switch(self, name: str, cmd: str, **args: Any) -> Any:
        """One request to one switch; None when it fails (logged when the switch's state changes,
        not on every poll)."""
        try:
            out = await self.switches[name].request(cmd, **args)
        except _SWITCH_ERRORS as exc:
            self.c.switch_errors += 1
            log.warning("switch %s: %s %s failed: %s", name, cmd, args, exc or type(exc).__name__)
            self._switch_is(name, str(exc) or type(exc).__name__)
            return None
        self._switch_is(name, "ok")
        return out

    def _switch_is(self, name: str, state: str) -> None:
        if self.switch_state[name] != state:
            log.info("switch %s: %s", name, state)
            self.switch_state[name] = state

    async def _every_switch(self, cmd: str, **args: Any) -> dict[str, Any]:
        names = list(self.switches)
        got = await asyncio.gather(*(self._switch(n, cmd, **args) for n in names))
        return dict(zip(names, got, strict=True))

    async def _fence(self, addr: Addr) -> int | None:
        """Freeze ``addr``'s commit input at every switch; the latest last commit any knows."""
        last: int | None = None
        for out in (await self._every_switch("onepipe_fence", input=show(addr))).values():
            value = out.get("last_commit") if isinstance(out, dict) and out.get("known") else None
            if isinstance(value, int) and not isinstance(value, bool):
                last = value if last is None else ts_max(last, value)
        return last

    async def _release(self, inp: Addr | str) -> None:
        if isinstance(inp, str):
            # a fabric port: only at the switches that reported it (another switch's port of that
            # name is another link); none left: an earlier release took them all
            where = self.link_reporters.pop(inp, set())
            await asyncio.gather(*(self._switch(n, "onepipe_release", input=inp, ban=False) for n in sorted(where)))
        else:
            log.info("releasing %s at every switch: every survivor ran its callback", show(inp))
            # banned until it registers again: a failed process that is still alive must not bring
            # its stuck commit back. A process that never registered (best effort) never will, so
            # a ban would be for good; and banned best-effort processes measurably suffer (ACKs
            # past their timeout in tests/integration/test_onepipe_live.py's loss case): no ban
            await self._every_switch("onepipe_release", input=show(inp), ban=inp in self.registered)

    async def _poll(self, name: str) -> None:
        while True:
            period = self.cfg.params.t_beacon_ns * POLL_BEACONS / 1e9  # (ctl_params may change it)
            try:
                page = await self.switches[name].request("onepipe_reports", since=self.since[name])
            except _SWITCH_ERRORS as exc:
                self.c.polls_failed += 1
                self._switch_is(name, str(exc) or type(exc).__name__)
                if isinstance(exc, ControlError):
                    self.since[name] = self._dropped[name] = 0  # 1Pipe is off there: its next enable starts at 0
                await asyncio.sleep(max(period, IDLE_POLL_S))
                continue
            self._switch_is(name, "ok")
            try:
                self._take_page(name, page if isinstance(page, dict) else {})
            except Exception:  # a page we cannot read must not end the polling (nor the lead)
                self.c.internal_errors += 1
                log.exception("switch %s: unreadable reports page %r", name, page)
            await asyncio.sleep(period)

    def _take_page(self, name: str, page: dict[str, Any]) -> None:
        nxt = page.get("next")
        if not isinstance(nxt, int) or isinstance(nxt, bool):
            return
        if nxt < self.since[name]:
            # 1Pipe was enabled afresh in that switch: its sequence restarted; read it from 0 next time
            self.c.switch_reenabled += 1
            self.since[name] = self._dropped[name] = 0
            return
        for r in page.get("reports") or []:
            self._take_report(name, r)
        self.since[name] = nxt
        dropped = page.get("dropped")
        if isinstance(dropped, int) and dropped > self._dropped[name]:
            # reports we never saw: their inputs stay frozen in that switch until released by hand
            log.error("switch %s dropped %d reports before they were polled", name, dropped - self._dropped[name])
            self.c.reports_dropped += dropped - self._dropped[name]
            self._dropped[name] = dropped

    def _take_report(self, switch: str, r: Any) -> None:
        if not isinstance(r, dict) or not isinstance(r.get("input"), str):
            return
        at, lead = r.get("at_ns"), self.lead_ns
        text = r["input"]
        try:
            inp: Addr | str = parse_proc(text)
        except ConfigError:
            inp = text  # a fabric port
        # a process's old report is taken when the engine probes before it declares (issue 31):
        # alive (its new incarnation, or a process the previous leader was probing), it answers
        if (isinstance(at, int) and lead is not None and at < lead - int((self.cfg.lease_ttl_s + 1.0) * 1e9)
                and (isinstance(inp, str) or self.cfg.controller.max_strikes == 0)):
            self.c.reports_before_lead += 1
            return
        if isinstance(inp, str):
            self.link_reporters.setdefault(text, set()).add(switch)
        self.c.reports_polled += 1
        log.info("switch %s reports %s silent (last commit %s), %s", switch, text, r.get("last_commit"),
                 f"{(time.monotonic_ns() - at) / 1e6:.0f} ms ago" if isinstance(at, int) else "at an unknown time")
        # reporter "switch": the engine then knows the input is frozen already and fences nothing
        self.events.put_nowait(("report", inp, r.get("last_commit"), "switch"))

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self.transport is not None:
            self.transport.close()
        for client in self.switches.values():
            await client.close()


def _parse_id(text: str) -> tuple[Addr, int] | None:
    """A store id ``10.0.0.1-40101-3`` as ``((ip, port), incarnation)``; None (logged) when it is none."""
    try:
        ip, port, inc = text.rsplit("-", 2)
        addr = parse_proc(f"{ip}:{port}")
        return addr, int(inc)
    except (ValueError, ConfigError):
        log.error("store id %r is no process incarnation: skipped", text)
        return None


# =========================================================================== entry point

def open_store(cfg: ControllerConfig, replica: str) -> ControllerStore:
    if cfg.store.backend == "etcd":
        return EtcdStore(list(cfg.store.endpoints), run=cfg.store.run, replica=replica)
    return SqliteStore(cfg.store.path, replica=replica)


async def _serve(shell: ControllerShell, stop: asyncio.Event) -> int:
    """Lead (or wait to) until SIGTERM; the exit status."""
    leading = asyncio.create_task(shell.lead())
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait([leading, stopping], return_when=asyncio.FIRST_COMPLETED)
    if not leading.done():
        leading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await leading
        return 0
    stopping.cancel()
    exc = leading.exception()
    if isinstance(exc, LostLease):
        log.error("%s: exiting", exc)
        return LOST_LEASE
    if exc is not None:
        log.error("replica %s cannot lead: %s", shell.replica, exc, exc_info=exc)
        return 1
    return 0


async def amain(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config)
        replica = args.replica or f"{cfg.name}-r1"
        store = open_store(cfg, replica)
    except (ConfigError, StoreError) as exc:
        raise SystemExit(f"onepipe controller daemon: {exc}") from None
    shell = ControllerShell(cfg, store, replica)
    loop = asyncio.get_running_loop()
    control = ControlServer(str(args.control), shell.handlers())
    shell.lag = control.lag
    await control.start()
    metrics = await serve_metrics(shell.ctl_status, {"node": cfg.name, "daemon": replica})
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        rc = await _serve(shell, stop)
    finally:
        await shell.close()
        # a clean stop hands the lead over at once; bounded: at `netstack down` the store may be
        # stopping too, and the lease lapses by itself anyway
        if stop.is_set() and store.is_leader(cfg.election):
            with contextlib.suppress(StoreError, TimeoutError):
                await asyncio.wait_for(store.resign(cfg.election), 1.0)
        with contextlib.suppress(StoreError, TimeoutError):
            await asyncio.wait_for(store.close(), 1.0)
        await control.close()
        if metrics is not None:
            metrics.close()
        log.info("replica %s stopped", replica)
    return rc


def main(argv: list[str] | None = None) -> int:
    parser = daemon_parser("python -m daemons.onepipe_controller", __doc__, "controller")
    parser.add_argument("--replica", default=None, help="this replica's id in the election (default: <node>-r1)")
    # asyncio's own loop, not uvloop: the controller's socket queues ICMP errors (IP_RECVERR, to
    # tell a killed process from a slow one), and uvloop 0.23's UDP transport crashed the daemon
    # (SIGSEGV in libc) on this machine when many came at once; asyncio hands each to
    # error_received. The controller is off the data path: a few datagrams per process and failure.
    return run_daemon(parser.parse_args(argv), amain, uvloop_ok=False)


if __name__ == "__main__":
    sys.exit(main())
