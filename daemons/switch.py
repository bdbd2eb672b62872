"""The switch daemon: the sans-IO ``netstack.switch.Switch`` wired to AF_PACKET ports.

Thin shell (docs/architecture.md "A frame through a switch daemon"): read a batch from a
readable port, hand each frame to the engine with ``now_ns``, send what ``transmit(now)``
releases in one batch per port, sleep until ``next_deadline()``. Run inside the switch's namespace:

    python -m daemons.switch --config sw1.json --control sw1.sock

SIGTERM/SIGINT shut it down cleanly. A frame never kills it: the engine counts malformed
frames, and anything unexpected from a feature is logged and counted here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from daemons.common import daemon_parser, run_daemon, serve_metrics
from netstack import protocols
from netstack.auth import keys
from netstack.auth.context import AuthContext
from netstack.auth.watch import KeyFileWatch
from netstack.io.carrier import CarrierWatch
from netstack.io.control import ControlError, ControlServer
from netstack.io.packet import PacketPort
from netstack.looplag import LagHistogram
from netstack.switch import Switch, plugins
from netstack.switch.config import ConfigError, SwitchConfig

log = logging.getLogger("netstack.switch")

#: Frames drained from one port per readiness callback: bounded so that one busy port
#: cannot starve the others or the pacer's timer (docs/architecture.md "The live runtime").
#: 512 on the plain-port fast path takes ~0.5 ms at saturation on the 2-core VM, and halves
#: the per-callback costs (event loop, timer, batch set-up) against 256.
RX_BATCH = 512
#: uvloop truncates timers to whole milliseconds and fires sub-ms ones at once
#: (docs/architecture.md "The live runtime"):
#: never sleep less than this, and release every frame that became due meanwhile.
MIN_SLEEP_S = 0.001
STATS_INTERVAL_S = 1.0
#: a timer that fires this late first reads what waits in the sockets (SwitchShell._on_timer)
LATE_TIMER_NS = 1_000_000
#: how often the recent scheduling delay is passed to the engine, and how many times over
LAG_FOLLOW_S = 0.1
SLACK_FACTOR = 2


class SwitchShell:
    """The daemon around one :class:`Switch`. Protocol control plug-ins (``switch_handlers(shell)``,
    see ``netstack.protocols``) use ``switch``, ``port_of``, ``flush`` and ``log``."""

    log = log

    def __init__(self, switch: Switch, ports: dict[str, PacketPort]) -> None:
        self.switch = switch
        self.ports = ports
        self.loop = asyncio.get_running_loop()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0
        self.internal_errors = 0
        self.started_ns = time.monotonic_ns()
        #: protocol name -> its control plug-in's ``switch_status(shell)`` (filled by handlers())
        self._status_hooks: dict[str, Any] = {}
        #: per port: the link errors already answered with a rearm (poll_kernel_stats)
        self._rearmed: dict[str, int] = {}

    # --- data path -----------------------------------------------------------------
    def on_readable(self, name: str) -> None:
        port = self.ports[name]
        frames = port.recv_batch(RX_BATCH)
        if not frames:
            # readable with nothing to read: a pending error (the link went down); clear it, or
            # the fd stays readable for ever and the loop may stop watching it
            if port.take_error():
                log.warning("port %s: link error (interface down?)", name)
            return
        self._ingest(name, frames)
        # a fresh clock: the batch took a while to process, and the frames it put on a fast link
        # are due by now; sent in this callback, they leave while still in the cache
        self.flush()

    def _ingest(self, name: str, frames: list[bytes]) -> None:
        now = time.monotonic_ns()
        try:
            self.switch.receive_batch(name, frames, now)
        except Exception:
            # a bug in a feature must not kill the switch: lose the offending frame (the engine
            # says how far the batch got), log, count, and go on with the rest, one by one
            self._internal_error(name)
            for frame in frames[self.switch.batch_done:]:
                try:
                    self.switch.receive(name, frame, now)
                except Exception:
                    self._internal_error(name)

    def _internal_error(self, name: str) -> None:
        self.internal_errors += 1
        if self.internal_errors <= 10:
            log.exception("internal error on a frame from %s", name)

    def flush(self, now: int | None = None) -> None:
        if now is None:
            now = time.monotonic_ns()
        try:
            out = self.switch.transmit_by_port(now)
        except Exception:
            self.internal_errors += 1
            log.exception("internal error in transmit")
            out = []
        for name, frames in out:
            self.ports[name].send_batch(frames)
        self._arm(now)

    def _arm(self, now: int) -> None:
        deadline = self.switch.next_deadline()
        if deadline is None:
            return
        if self._timer is not None:
            if self._timer_at <= deadline:
                return
            self._timer.cancel()
        delay = max((deadline - now) / 1e9, MIN_SLEEP_S)
        self._timer_at = deadline
        self._timer = self.loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        now = time.monotonic_ns()
        if now - self._timer_at > LATE_TIMER_NS:
            # Woken late (the host was busy): frames that arrived before the deadline may still
            # wait in the sockets, and the loop may run this timer before their readiness
            # callbacks. Read them first, so that a timer never declares lost (LinkGuardian's
            # ackNoTimeout) what is already here.
            for name, port in self.ports.items():
                frames = port.recv_batch(RX_BATCH)
                if frames:
                    self._ingest(name, frames)
        self.flush()

    async def follow_lag(self, lag: LagHistogram) -> None:
        """Tell the engine how late this process has recently been scheduled
        (Switch.set_timer_slack): timers that declare a failure wait that much longer, twice
        over, as a repair needs two processes scheduled (the peer that resends, this one that
        reads). docs/testbed.md "Timers on a loaded host"."""
        while True:
            await asyncio.sleep(LAG_FOLLOW_S)
            slack = SLACK_FACTOR * lag.recent_max_ns(time.monotonic_ns())
            if slack != self.switch.timer_slack_ns:
                self.switch.set_timer_slack(slack)

    def rearm(self, name: str) -> None:
        """Watch ``name``'s socket again: after a pending error (a link that went down and came
        back) the event loop may have stopped calling on_readable for it."""
        fd = self.ports[name].fd
        self.loop.remove_reader(fd)
        self.loop.add_reader(fd, self.on_readable, name)

    async def poll_kernel_stats(self) -> None:
        while True:
            for name, port in self.ports.items():
                with contextlib.suppress(OSError):
                    port.take_error()
                if port.link_errors > self._rearmed.get(name, 0):  # seen here or in on_readable
                    self._rearmed[name] = port.link_errors
                    self.rearm(name)
                    self.flush()
                before = port.kernel_drops
                try:
                    port.read_kernel_stats()
                except OSError:
                    continue
                if port.kernel_drops > before:
                    self.switch.add_kernel_drops(name, port.kernel_drops - before)
            await asyncio.sleep(STATS_INTERVAL_S)

    def on_carrier(self, watch: CarrierWatch, port_of_ifname: dict[str, str]) -> None:
        """Link notifications: a port that lost its carrier drops and counts what it holds and
        what is forwarded to it until the carrier is back (``Switch.set_carrier``)."""
        try:
            changes = watch.read()
        except OSError as exc:
            log.warning("carrier watch: %s", exc)
            return
        now = time.monotonic_ns()
        for ifname, up in changes:
            name = port_of_ifname[ifname]
            try:
                changed = self.switch.set_carrier(name, up, now)
            except Exception:
                self._internal_error(name)
                continue
            if changed:
                log.info("port %s (%s): carrier %s", name, ifname, "up" if up else "down")
            if up:
                # The link's loss left an error pending on the port's socket, and the loop may have
                # stopped watching it (PacketPort.take_error): clear it and watch the socket again
                # now, not at the next kernel-stats poll up to a second later, which left the port
                # deaf after every flap while its peer already sent (LinkGuardian's holes behind
                # it then overflowed both buffers).
                port = self.ports[name]
                with contextlib.suppress(OSError):
                    port.take_error()
                self._rearmed[name] = port.link_errors
                self.rearm(name)
                frames = port.recv_batch(RX_BATCH)
                if frames:
                    self._ingest(name, frames)
        if changes:
            self.flush(now)

    # --- control socket --------------------------------------------------------------
    def handlers(self) -> dict[str, Any]:
        builtin: dict[str, Any] = {
            "status": self.ctl_status,
            "ping": lambda req: "pong",
            "set_port": self.ctl_set_port,
            "set_impairment": self.ctl_set_impairment,
            "clear_counters": self.ctl_clear,
            "fdb": lambda req: self.switch.fdb_entries(),
            "auth_status": lambda req: self.switch.auth.status() if self.switch.auth is not None else None,
        }
        return {**builtin, **self._plugin_handlers(set(builtin))}

    def _plugin_handlers(self, taken: set[str]) -> dict[str, Any]:
        """Control commands the protocols contribute (``switch_handlers(shell)`` of each control
        plug-in in ``netstack.protocols`` that has one): this shell serves them without knowing
        them. A command that clashes with a built-in or another plug-in's is a programming error."""
        handlers: dict[str, Any] = {}
        for name in protocols.control_modules():
            try:
                module = protocols.load(name)
            except ModuleNotFoundError as exc:
                if exc.name != name:
                    raise
                continue
            report = getattr(module, "switch_status", None)
            if report is not None:
                self._status_hooks[name.rsplit(".", 2)[-2]] = report
            contribute = getattr(module, "switch_handlers", None)
            if contribute is None:
                continue  # an end-host protocol: nothing runs in the switch
            for cmd, handler in contribute(self).items():
                if cmd in handlers or cmd in taken:
                    raise RuntimeError(f"control command {cmd!r} from {name} is already taken")
                handlers[cmd] = handler
        return handlers

    def ctl_status(self, req: dict[str, Any]) -> dict[str, Any]:
        ports = self.switch.counters()
        for name, port in self.ports.items():
            ports[name]["send_errors"] = port.send_errors
            ports[name]["tx_dropped"] = port.tx_dropped
            ports[name]["ifname"] = port.ifname
            ports[name]["link_errors"] = port.link_errors
            imp = self.switch.config.port(name).impairment
            ports[name]["impairment"] = dataclasses.asdict(imp) if imp is not None else None
        return {
            "switch": self.switch.config.name if hasattr(self.switch, "config") else None,
            "pid": os.getpid(),
            "uptime_s": (time.monotonic_ns() - self.started_ns) / 1e9,
            "internal_errors": self.internal_errors,
            "ports": ports,
            "switch_counters": self.switch.switch_counters(),
            # frames per next hop of every ECMP group: {destination: {port: frames}} ({}: none)
            "ecmp": self.switch.ecmp_counters(),
            "auth": self.switch.auth.status() if self.switch.auth is not None else None,
            # what each protocol running in this switch reports (``switch_status(shell)`` of its
            # control plug-in; a protocol that is off reports nothing)
            "protocols": {name: st for name, report in self._status_hooks.items()
                          if (st := report(self)) is not None},
        }

    def port_of(self, req: dict[str, Any]) -> str:
        """The request's ``port``, which must be one of this switch's (ControlError otherwise)."""
        name = req.get("port")
        if name not in self.ports:
            raise ControlError(f"no port {name!r}; ports: {sorted(self.ports)}")
        return name

    def ctl_set_port(self, req: dict[str, Any]) -> dict[str, Any]:
        name = self.port_of(req)
        changes = {k: v for k, v in req.items() if k not in ("cmd", "port")}
        try:
            cfg = self.switch.update_port(name, time.monotonic_ns(), **changes)
        except ConfigError as exc:
            raise ControlError(str(exc)) from None
        self.flush()
        return {"port": name, "changed": sorted(changes), "rate_bps": cfg.rate_bps}

    def ctl_set_impairment(self, req: dict[str, Any]) -> dict[str, Any] | None:
        name = self.port_of(req)
        try:
            self.switch.set_impairment(name, req.get("impairment"), time.monotonic_ns())
        except ConfigError as exc:
            raise ControlError(str(exc)) from None
        return req.get("impairment")

    def ctl_clear(self, req: dict[str, Any]) -> str:
        port = req.get("port")
        if port is not None:
            self.port_of(req)
        self.switch.clear_counters(port)
        return "cleared"


def load_config(path: Path) -> tuple[SwitchConfig, dict[str, str], dict[str, Any], dict[str, Any]]:
    """The daemon's JSON config: ``{"switch": SwitchConfig dict, "ifnames": {port: ifname},
    "features": {port: {feature: options}}, "auth": {"keys": key file, "links": {port: link}}}``
    (``runtime.switch_config`` writes it; ``auth`` only when the topology names a key file)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SystemExit(f"switch daemon: cannot read config {path}: {exc}") from None
    try:
        cfg = SwitchConfig.from_json(data["switch"])
    except (KeyError, ConfigError, TypeError, ValueError) as exc:
        raise SystemExit(f"switch daemon: bad config {path}: {exc}") from None
    ifnames = data.get("ifnames") or {p.name: p.name for p in cfg.ports}
    features = data.get("features") or {}
    if not isinstance(features, dict):
        raise SystemExit(f"switch daemon: bad config {path}: features must be a mapping port -> features")
    auth = data.get("auth") or {}
    if not isinstance(auth, dict) or ("keys" in auth and not isinstance(auth["keys"], str)):
        raise SystemExit(f"switch daemon: bad config {path}: auth must be {{\"keys\": path, \"links\": {{...}}}}")
    return cfg, ifnames, features, auth


def start_auth(switch: Switch, auth: dict[str, Any]) -> KeyFileWatch | None:
    """Load the key file the config names into ``switch.auth`` (before any feature attaches);
    the watcher that follows it (:func:`apply_keys`)."""
    if not auth.get("keys"):
        return None
    try:
        ring = keys.load(auth["keys"])
    except keys.KeyFileError as exc:
        raise SystemExit(f"switch daemon: {exc}") from None
    links = auth.get("links") or {}
    switch.auth = AuthContext.start(ring, time.time(), {str(k): str(v) for k, v in links.items()})
    log.info("authenticated frames: keys from %s (key %d current)", ring.source, ring.current)
    return KeyFileWatch(auth["keys"], ring, log)


def apply_keys(ctx: AuthContext, ring: keys.KeyRing, reloaded: bool) -> None:
    """After each poll of the key file: a rotation (new file) reaches every sealer and opener,
    and an old key stops being accepted when its overlap ends (netstack keys rotate)."""
    if reloaded:
        ctx.reload(ring, time.time())
    else:
        ctx.refresh(time.time())


async def amain(args: argparse.Namespace) -> int:
    cfg, ifnames, features, auth = load_config(args.config)
    switch = Switch(cfg)
    watch = start_auth(switch, auth)
    try:
        attached = plugins.attach(switch, features, time.monotonic_ns())
    except (ConfigError, ValueError, TypeError) as exc:
        log.error("cannot attach the topology's features: %s", exc)
        return 1
    if attached:
        log.info("features from the topology: %s", ", ".join(attached))
    ports: dict[str, PacketPort] = {}
    try:
        for p in cfg.ports:
            ports[p.name] = PacketPort(ifnames.get(p.name, p.name))
    except OSError as exc:
        for port in ports.values():
            port.close()
        log.error("cannot open port: %s", exc)
        return 1
    shell = SwitchShell(switch, ports)
    loop = asyncio.get_running_loop()
    for name, port in ports.items():
        loop.add_reader(port.fd, shell.on_readable, name)
    port_of_ifname = {ifnames.get(n, n): n for n in ports}
    try:
        carrier: CarrierWatch | None = CarrierWatch(port_of_ifname)
    except OSError as exc:
        carrier = None  # the data path works without it; ports are then taken to be up
        log.warning("cannot watch the ports' carrier (rtnetlink): %s", exc)
    if carrier is not None:
        loop.add_reader(carrier.fileno(), shell.on_carrier, carrier, port_of_ifname)
    control = ControlServer(str(args.control), shell.handlers())
    await control.start()
    metrics = await serve_metrics(shell.handlers()["status"], {"node": cfg.name})
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    stats = asyncio.create_task(shell.poll_kernel_stats())
    lag_task = asyncio.create_task(shell.follow_lag(control.lag))
    key_task = (asyncio.create_task(watch.follow(functools.partial(apply_keys, switch.auth)))
                if watch is not None else None)
    log.info("switch %s up: ports %s", cfg.name, ", ".join(f"{n}={ifnames.get(n, n)}" for n in ports))
    try:
        await stop.wait()
    finally:
        log.info("switch %s shutting down", cfg.name)
        stats.cancel()
        lag_task.cancel()
        if key_task is not None:
            key_task.cancel()
        for port in ports.values():
            loop.remove_reader(port.fd)
            port.close()
        if carrier is not None:
            loop.remove_reader(carrier.fileno())
            carrier.close()
        await control.close()
        if metrics is not None:
            metrics.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = daemon_parser("python -m daemons.switch", __doc__, "switch")
    return run_daemon(parser.parse_args(argv), amain)


if __name__ == "__main__":
    sys.exit(main())
