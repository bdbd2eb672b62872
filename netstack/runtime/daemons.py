"""A run's daemons: starting one in its node's namespace and waiting until it answers, stopping
them, and stopping and restarting one of a running topology (``netstack fault``)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import protocols
from ..io.control import ControlError, request
from ..topo import netns
from ..topo.model import Topology
from .lookup import running_hint
from .state import Daemon, RunState, RuntimeErrorNS, read_state, run_dir, stamped, state_path, write_state

READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class DaemonSpec:
    """A daemon a node kind's ``node_daemon`` asks ``up`` to start (``netstack.runtime``'s docstring)."""

    argv: list[str]  #: without ``--control``: up adds its socket
    suffix: str = ""  #: "" for the node's first daemon (``<node>.sock``), else ``<node>-<suffix>.sock``
    kind: str | None = None  #: the node's kind when None


def _spawn(prefix: str, node: str, argv: list[str], log_path: Path, metrics: str = "") -> int:
    """Start a daemon in ``node``'s namespace; ``metrics``: where it serves Prometheus metrics
    (in the environment, netstack.io.metrics.METRICS_ENV, so a restart keeps it)."""
    env = None
    if metrics:
        from ..io.metrics import METRICS_ENV

        env = {**os.environ, METRICS_ENV: metrics}
    return _popen_daemon(netns.ns_exec_argv(prefix, node, argv), log_path, env).pid


def _popen_daemon(argv: list[str], log_path: str | Path, env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    """Start a daemon process, its output appended to ``log_path``. One that serves metrics
    (:data:`netstack.io.metrics.METRICS_ENV`) gets this process's network namespace as an open
    file (the machine's: where its listener goes; /proc/1/ns/net is not readable everywhere)."""
    from ..io.metrics import METRICS_ENV, METRICS_NETNS_ENV

    fds: tuple[int, ...] = ()
    if env is not None and env.get(METRICS_ENV):
        fds = (os.open("/proc/self/ns/net", os.O_RDONLY),)
        env = {**env, METRICS_NETNS_ENV: f"/proc/self/fd/{fds[0]}"}
    try:
        with open(log_path, "ab") as logf:
            return subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, env=env, pass_fds=fds)
    finally:
        for fd in fds:
            os.close(fd)


def _metrics_address(topology: Topology, daemons: list[Daemon]) -> str:
    """The next daemon's metrics address: ``[topology] metrics_port`` + how many started before."""
    if topology.metrics_port is None:
        return ""
    return f"127.0.0.1:{topology.metrics_port + len(daemons)}"


def _tail(path: str | Path, lines: int = 15) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _wait_ready(daemon: Daemon, timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not daemon.alive():
            raise RuntimeErrorNS(f"{daemon.kind} daemon {daemon.key} exited during start-up; "
                                 f"log {daemon.log}:\n{_tail(daemon.log)}")
        if not daemon.control:
            return  # no control socket to ask: alive is all it can say
        with contextlib.suppress(OSError, ControlError, ValueError):
            request(daemon.control, "ping", timeout=1.0)
            return
        time.sleep(0.05)
    raise RuntimeErrorNS(f"{daemon.kind} daemon {daemon.key} did not answer on {daemon.control} "
                         f"within {timeout:.0f} s; log {daemon.log}:\n{_tail(daemon.log)}")


# ----------------------------------------------- stopping and restarting one daemon (netstack fault)
#: ``<run dir>/<daemon>.launch.json``: the argv and environment a daemon was started with, saved
#: when :func:`kill_daemon` stops it, so that :func:`restart_daemon` can start it again later
LAUNCH_SUFFIX = ".launch.json"


def namespace_state(prefix: str) -> RunState:
    """The namespace run's state (a container deployment's daemons are not ours to restart)."""
    try:
        return read_state(state_path(prefix))
    except FileNotFoundError:
        raise RuntimeErrorNS(f"no topology is running under prefix {prefix!r} as namespaces "
                             f"('netstack up'){running_hint('netns')}") from None


def _run_daemon(state: RunState, name: str) -> Daemon:
    for d in state.daemons:
        if d.key == name:
            return d
    raise RuntimeErrorNS(f"no daemon {name!r}; daemons: {', '.join(d.key for d in state.daemons)}")


def daemon_launch(prefix: str, name: str) -> tuple[list[str], dict[str, str] | None]:
    """(argv, environment) that started daemon ``name``: read from /proc while it runs (``ip netns
    exec`` execs the command, so the recorded pid is the daemon's own), else as saved when
    :func:`kill_daemon` stopped it, else for a switch what ``up`` gives it (environment None: ours)."""
    daemon = _run_daemon(namespace_state(prefix), name)
    if daemon.alive():
        with contextlib.suppress(OSError):
            argv = [a.decode() for a in Path(f"/proc/{daemon.pid}/cmdline").read_bytes().split(b"\0")[:-1]]
            env = dict(item.decode(errors="surrogateescape").partition("=")[::2]
                       for item in Path(f"/proc/{daemon.pid}/environ").read_bytes().split(b"\0") if b"=" in item)
            if argv:
                return argv, env
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        saved = json.loads((run_dir(prefix) / f"{daemon.key}{LAUNCH_SUFFIX}").read_text())
        return list(saved["argv"]), dict(saved["env"]) if saved.get("env") is not None else None
    if daemon.kind == "switch":
        rdir = run_dir(prefix)
        return [sys.executable, "-m", "daemons.switch", "--config", str(rdir / f"{daemon.node}.json"),
                "--control", daemon.control], None
    raise RuntimeErrorNS(f"{daemon.kind} daemon {daemon.key} is not running and was not stopped by "
                         f"'netstack fault': how it was started is not known")


def kill_daemon(prefix: str, name: str, sig: int = signal.SIGKILL, timeout: float = STOP_TIMEOUT_S) -> Daemon:
    """Send ``sig`` to daemon ``name``'s process group (it runs in a session of its own) and wait
    until it is gone; its argv and environment are saved first (:func:`daemon_launch`).
    RuntimeErrorNS if it is not running, or still runs ``timeout`` s after ``sig``."""
    daemon = _run_daemon(namespace_state(prefix), name)
    if not daemon.alive():
        raise RuntimeErrorNS(f"{daemon.kind} daemon {daemon.key} (pid {daemon.pid}) is not running")
    argv, env = daemon_launch(prefix, name)
    saved = run_dir(prefix) / f"{daemon.key}{LAUNCH_SUFFIX}"
    saved.write_text(json.dumps({"argv": argv, "env": env}))
    saved.chmod(0o600)  # its environment
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(daemon.pid, sig)
    deadline = time.monotonic() + timeout
    while daemon.alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(daemon.pid, os.WNOHANG)  # our child when up ran in this process
    if daemon.alive():
        raise RuntimeErrorNS(f"{daemon.kind} daemon {daemon.key} (pid {daemon.pid}) still runs {timeout:g} s after "
                             f"signal {signal.Signals(sig).name}")
    return daemon


def restart_daemon(prefix: str, name: str, timeout: float = READY_TIMEOUT_S) -> Daemon:
    """Start daemon ``name`` again, which must not be running: same argv and environment
    (:func:`daemon_launch`), so the same config and control socket, in its node's namespace, its
    log appended to; record the new pid in state.json (``status`` and ``down`` find it) and wait
    until it answers. Returns the new record; RuntimeErrorNS if it fails to start (log tail)."""
    old = _run_daemon(namespace_state(prefix), name)
    if old.alive():
        raise RuntimeErrorNS(f"{old.kind} daemon {old.key} is running (pid {old.pid}): stop it first")
    argv, env = daemon_launch(prefix, name)
    with open(old.log, "a") as logf:
        logf.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} netstack: restarting {old.key} "
                   f"(pid {old.pid} is gone) ---\n")
    proc = _popen_daemon(netns.ns_exec_argv(prefix, old.node, argv), old.log, env)
    new = stamped(Daemon(old.node, old.kind, proc.pid, old.control, old.log, old.name, old.metrics))
    state = namespace_state(prefix)  # read again: the newest, written whole below
    for d in state.daemons:
        if d.key == old.key:
            d.pid, d.start_ticks = new.pid, new.start_ticks
    write_state(state_path(prefix), state)
    _wait_ready(new, timeout)
    restore_protocols(prefix, new.node)
    return new


def restore_protocols(prefix: str, node: str) -> list[str]:
    """What the protocols turned on at run time on ``node``, turned on again after its daemon
    restarted: each control plug-in's ``after_restart(prefix, node)`` (LinkGuardian: the
    complementary role where the peer still runs one). Returns what was restored."""
    done: list[str] = []
    for name in protocols.control_modules():
        try:
            module = protocols.load(name)
        except ModuleNotFoundError:
            continue
        hook = getattr(module, "after_restart", None)
        if hook is not None:
            done += hook(prefix, node)
    return done


def stop_groups(pids: list[int], alive: Callable[[int], bool], timeout: float = STOP_TIMEOUT_S,
                ours: Callable[[int], bool] | None = None) -> None:
    """SIGTERM to each daemon's process group (they start in sessions of their own), SIGKILL to
    those still ``alive`` after ``timeout``. Shared by ``down`` and a container's node runner.
    Only the pids that are still ``ours`` (default: ``alive``) are signalled: a daemon long gone
    may have left its pid to another process since (Daemon.ours)."""
    pids = [pid for pid in pids if (ours or alive)(pid)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for pid in pids:
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def _stop(daemons: list[Daemon]) -> None:
    by_pid = {d.pid: d for d in daemons}
    stop_groups(list(by_pid), lambda pid: by_pid[pid].alive(), ours=lambda pid: by_pid[pid].ours())
    for d in daemons:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(d.pid, os.WNOHANG)
