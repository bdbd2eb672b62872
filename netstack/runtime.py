"""Bring a topology up with its daemons, and down again (``netstack up`` / ``down``).

A running topology is: the namespaces and veths ``netstack.topo.netns.build`` made, one
switch daemon per switch node (``python -m daemons.switch`` inside the node's namespace),
the daemons protocols' node kinds ask for (``netstack.protocols``: ``node_daemon``), and a run
directory holding each daemon's config, control socket, log and pid plus ``state.json``.
Everything is keyed by the topology's prefix, so several can run at once.

A node kind's ``node_daemon(topology, built, node, run_dir, prefix, options)`` returns None
(nothing to run), one argv (one daemon, control socket ``<node>.sock``), or a list of
:class:`DaemonSpec` (daemons to start, each named ``<node>`` or ``<node>-<suffix>``) and
:class:`Daemon` (processes it started itself, e.g. a store those daemons use: recorded, so that
``status`` lists them and ``down`` stops them). ``options`` are ``up``'s: a module takes those
it names in ``NODE_OPTIONS``; an option no node of the topology takes is an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import protocols
from .errors import NetstackError
from .io.control import ControlError, request
from .topo import netns
from .topo.model import NodeKind, Topology, load_topology

DEFAULT_RUN_ROOT = "/run/netstack"
READY_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 3.0


class RuntimeErrorNS(NetstackError, RuntimeError):
    """netstack up/down failed; the message says what and where the logs are."""


def run_root() -> Path:
    return Path(os.environ.get("NETSTACK_RUN_DIR", DEFAULT_RUN_ROOT))


def run_dir(prefix: str) -> Path:
    return run_root() / prefix


@dataclass
class Daemon:
    node: str
    kind: str
    pid: int
    control: str  #: its control socket; "" for a process that has none (it is only started and stopped)
    log: str
    #: unique in the run: the node's name, or ``<node>-<suffix>`` for another daemon on that node
    #: (state files written before there could be several have none: the node's name)
    name: str = ""
    #: where it serves Prometheus metrics (``127.0.0.1:PORT`` on this machine); "" when it does not
    metrics: str = ""

    @property
    def key(self) -> str:
        return self.name or self.node

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # a zombie child of ours counts as dead
        with contextlib.suppress(OSError):
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                return False
        return True


@dataclass(frozen=True)
class DaemonSpec:
    """A daemon a node kind's ``node_daemon`` asks ``up`` to start (module docstring)."""

    argv: list[str]  #: without ``--control``: up adds its socket
    suffix: str = ""  #: "" for the node's first daemon (``<node>.sock``), else ``<node>-<suffix>.sock``
    kind: str | None = None  #: the node's kind when None


def switch_config(topology: Topology, built: netns.BuiltTopology, node: str) -> dict[str, Any]:
    """The daemon config of switch ``node``: one port per veth end, static entries for every
    host-like node's MAC toward the port that leads to it (shortest path over the links)."""
    ports = []
    for port in built.ports_of(node):
        link = topology.link(port.link)
        entry: dict[str, Any] = {
            "name": port.ifname,
            "rate_bps": link.rate_bps,
            "delay_ns": link.delay_ns,
            "buffer_bytes": link.buffer_bytes,
            "mtu": link.mtu,
            "fcs": port.fcs,
            "mac": port.mac,
            # a port to a host is an edge port: it drops what only switches send, and its PFC
            # watchdog is on; a port to a switch carries the protocols' own pauses (LinkGuardian
            # backpressure, a lossless fabric) for as long as they last (docs/security.md)
            "role": "fabric" if topology.node(port.peer_node).kind is NodeKind.SWITCH else "edge",
        }
        if entry["role"] == "edge":
            entry["pfc_watchdog_ns"] = EDGE_PFC_WATCHDOG_NS
        entry.update(port_options(link.name, link.end(node).features.get("switch", {})))
        imp = link.impairment
        if imp is not None and any(e.node == node for e in link.impaired_ends()) and (
                built.impairments.get((node, link.name), imp.backend.value) == "switch"):
            # the switch's own seeded model on this (sending) port: asked for, or what 'auto'
            # chose for a shaped link on a kernel without netem (netns.end_backend)
            entry["impairment"] = imp.model()
        ports.append(entry)
    first_hop = topology.first_hops(node)  # the port a node is first reached through is its static port
    static = {}
    for other, via in first_hop.items():
        n = topology.node(other)
        if n.kind is not NodeKind.SWITCH:
            static[built.mac(other, topology.links_of(other)[0].name)] = via
    from .switch.plugins import port_features

    features = {ifname: feats for (n, ifname), feats in port_features(topology).items() if n == node}
    out: dict[str, Any] = {"switch": {"name": node, "ports": ports, "static_fdb": static,
                                      "switch_only_ethertypes": list(protocols.switch_only_ethertypes())}}
    keys = topology.keys_path()
    if keys is not None:
        # the daemon loads the file itself: no key material in a config file or on a command line
        out["auth"] = {"keys": str(keys), "links": {p.ifname: p.link for p in built.ports_of(node)}}
    if features:
        out["features"] = features  # attached by the daemon at start (netstack.switch.plugins)
    return out


#: ``[links.features.<end>.switch]`` keys -> PortConfig fields (sizes accept "20KB" etc.)
PORT_OPTIONS = {
    "lossless": ("lossless", bool), "xoff": ("xoff_bytes", "size"), "xon": ("xon_bytes", "size"),
    "ecn_threshold": ("ecn_threshold_bytes", "size"), "default_class": ("default_class", "class"),
    "peer_mac_pfc": ("peer_mac", "peer"), "pfc_from_host": ("pfc_from_host", bool),
    "pfc_watchdog": ("pfc_watchdog_ns", "watchdog"), "pfc_enable": ("pfc_enable", "classes"),
}
#: The PFC watchdog on edge ports unless the file says otherwise: production switches detect a
#: pause storm in 100-400 ms; fabric ports have it off (see switch_config)
EDGE_PFC_WATCHDOG_NS = 100_000_000


def port_options(link: str, options: dict[str, Any]) -> dict[str, Any]:
    """Switch-port settings a topology file gives per link end, e.g.
    ``[links.features.b] switch = { lossless = true, xoff = "20KB", xon = "10KB" }``."""
    from .topo.model import TopologyError, parse_delay, parse_size

    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in PORT_OPTIONS:
            raise TopologyError([(f"links[{link}].features.switch.{key}",
                                  f"unknown option; known: {', '.join(sorted(PORT_OPTIONS))}")])
        field, kind = PORT_OPTIONS[key]
        try:
            if kind == "size":
                out[field] = parse_size(value)
            elif kind == "watchdog":
                off = value is False or value == "off" or value == 0
                out[field] = None if off else (parse_delay(value) or None)  # "0" is off too
            elif kind is bool:
                if not isinstance(value, bool):
                    raise ValueError(f"{value!r} is not true/false")
                out[field] = value
            elif kind == "classes":  # 802.1Qbb per-priority PFC enable: a list of priorities
                if not isinstance(value, list) or not all(
                        isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 7 for v in value):
                    raise ValueError(f"{value!r} is not a list of priority classes (integers 0-7; [] for none)")
                out[field] = sorted(set(value))
            elif kind == "class":  # an 802.1Qbb priority: PFC has eight
                if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 7:
                    raise ValueError(f"{value!r} is not a priority class (an integer 0-7)")
                out[field] = value
            else:
                out[field] = value
        except (TypeError, ValueError, OverflowError) as exc:
            raise TopologyError([(f"links[{link}].features.switch.{key}", str(exc))]) from None
    return out


def _spawn(prefix: str, node: str, argv: list[str], log_path: Path, metrics: str = "") -> int:
    """Start a daemon in ``node``'s namespace; ``metrics``: where it serves Prometheus metrics
    (in the environment, netstack.io.metrics.METRICS_ENV, so a restart keeps it)."""
    env = None
    if metrics:
        from .io.metrics import METRICS_ENV

        env = {**os.environ, METRICS_ENV: metrics}
    return _popen_daemon(netns.ns_exec_argv(prefix, node, argv), log_path, env).pid


def _popen_daemon(argv: list[str], log_path: str | Path, env: dict[str, str] | None) -> subprocess.Popen[bytes]:
    """Start a daemon process, its output appended to ``log_path``. One that serves metrics
    (:data:`netstack.io.metrics.METRICS_ENV`) gets this process's network namespace as an open
    file (the machine's: where its listener goes; /proc/1/ns/net is not readable everywhere)."""
    from .io.metrics import METRICS_ENV, METRICS_NETNS_ENV

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


def _run_state_file(prefix: str) -> dict[str, Any]:
    """The namespace run's state.json (a container deployment's daemons are not ours to restart)."""
    try:
        return dict(json.loads((run_dir(prefix) / "state.json").read_text()))
    except FileNotFoundError:
        raise RuntimeErrorNS(f"no topology is running under prefix {prefix!r} as namespaces "
                             f"('netstack up'){_running_hint('netns')}") from None


def _run_daemon(state: dict[str, Any], name: str) -> Daemon:
    for d in daemons_of(state):
        if d.key == name:
            return d
    raise RuntimeErrorNS(f"no daemon {name!r}; daemons: {', '.join(d.key for d in daemons_of(state))}")


def daemon_launch(prefix: str, name: str) -> tuple[list[str], dict[str, str] | None]:
    """(argv, environment) that started daemon ``name``: read from /proc while it runs (``ip netns
    exec`` execs the command, so the recorded pid is the daemon's own), else as saved when
    :func:`kill_daemon` stopped it, else for a switch what ``up`` gives it (environment None: ours)."""
    daemon = _run_daemon(_run_state_file(prefix), name)
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
    daemon = _run_daemon(_run_state_file(prefix), name)
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
    old = _run_daemon(_run_state_file(prefix), name)
    if old.alive():
        raise RuntimeErrorNS(f"{old.kind} daemon {old.key} is running (pid {old.pid}): stop it first")
    argv, env = daemon_launch(prefix, name)
    with open(old.log, "a") as logf:
        logf.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} netstack: restarting {old.key} "
                   f"(pid {old.pid} is gone) ---\n")
    proc = _popen_daemon(netns.ns_exec_argv(prefix, old.node, argv), old.log, env)
    new = Daemon(old.node, old.kind, proc.pid, old.control, old.log, old.name, old.metrics)
    path = run_dir(prefix) / "state.json"
    state = json.loads(path.read_text())  # read again: the newest, written whole (rename) below
    for d in state.get("daemons", []):
        if (d.get("name") or d["node"]) == old.key:
            d["pid"] = proc.pid
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, path)
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


def up(topology: Topology | None = None, prefix: str | None = None, *, apply_impairments: bool = True,
       progress: Any = None, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Build ``topology`` (default: the shipped default topology) and start its daemons. All or
    nothing: on failure everything is removed again and :class:`RuntimeErrorNS` is raised.
    ``options`` go to the node kinds' ``node_daemon`` (module docstring)."""
    topology = topology or load_topology(None)
    prefix = prefix or topology.prefix
    options = dict(options or {})
    say = progress or (lambda msg: None)
    check_options(topology, options)
    check_keys(topology)
    if prefix in netns.list_running():
        raise RuntimeErrorNS(f"a topology is already running under prefix {prefix!r}: "
                             f"'netstack down --prefix {prefix}' first, or choose another --prefix")
    rdir = run_dir(prefix)
    if rdir.exists():
        shutil.rmtree(rdir)  # leftovers of a crashed run whose namespaces are gone
    rdir.mkdir(parents=True)
    say(f"building {len(topology.nodes)} namespaces and {len(topology.links)} veth pairs (prefix {prefix})")
    try:
        built = netns.build(topology, prefix, apply_impairments=apply_impairments)
    except Exception:
        shutil.rmtree(rdir, ignore_errors=True)
        raise
    daemons: list[Daemon] = []
    try:
        for node in topology.switches:
            cfg_path = rdir / f"{node.name}.json"
            cfg_path.write_text(json.dumps(switch_config(topology, built, node.name), indent=2))
            sock = rdir / f"{node.name}.sock"
            log_path = rdir / f"{node.name}.log"
            argv = [sys.executable, "-m", "daemons.switch", "--config", str(cfg_path), "--control", str(sock)]
            metrics = _metrics_address(topology, daemons)
            pid = _spawn(prefix, node.name, argv, log_path, metrics)
            daemons.append(Daemon(node.name, "switch", pid, str(sock), str(log_path), node.name, metrics))
            say(f"started switch daemon {node.name} (pid {pid})")
        _start_node_daemons(topology, built, rdir, prefix, options, say, daemons)
        for d in daemons:
            _wait_ready(d)
    except BaseException:
        _stop(daemons)
        netns.teardown(prefix)
        shutil.rmtree(rdir, ignore_errors=True)
        raise
    state = {
        "prefix": prefix,
        "topology": topology.name,
        "source": topology.source,
        "started": time.time(),
        "namespaces": built.namespaces,
        "ports": [
            {"node": p.node, "link": p.link, "netns": p.netns, "ifname": p.ifname, "mac": p.mac,
             "peer": p.peer_node, "fcs": p.fcs}
            for p in built.ports.values()
        ],
        "hosts": {n.name: str(n.ip) for n in topology.nodes if n.ip is not None},
        "links": {link.name: {"a": link.a.node, "b": link.b.node, "rate_bps": link.rate_bps,
                              "delay_ns": link.delay_ns, "mtu": link.mtu, "fcs": link.fcs}
                  for link in topology.links},
        "impairments": {f"{n}/{link}": b for (n, link), b in built.impairments.items()},
        "daemons": [d.__dict__ for d in daemons],
    }
    (rdir / "state.json").write_text(json.dumps(state, indent=2))
    flappers = _start_flappers(topology, prefix, rdir, say)
    if flappers:
        state["daemons"] += [d.__dict__ for d in flappers]
        (rdir / "state.json").write_text(json.dumps(state, indent=2))
    return state


def _start_flappers(topology: Topology, prefix: str, rdir: Path, say: Any) -> list[Daemon]:
    """A ``netstack link LINK flap`` process per link the topology flaps (``[links.flap]``),
    started once the run state exists (it reads it); recorded as daemons of kind ``linkflap``
    (named ``flap-LINK``) so that ``netstack down`` stops them. Each leaves its link up."""
    out = []
    for link in topology.links:
        if link.flap is None:
            continue
        argv = [sys.executable, "-m", "netstack.cli", "link", link.name, "flap", *link.flap.argv(),
                "--prefix", prefix]
        log_path = rdir / f"flap-{link.name}.log"
        pid = _popen_daemon(argv, log_path, None).pid
        out.append(Daemon(link.name, "linkflap", pid, "", str(log_path), f"flap-{link.name}"))
        say(f"flapping link {link.name} ({' '.join(link.flap.argv())}; pid {pid})")
    return out


def check_keys(topology: Topology) -> None:
    """RuntimeErrorNS before anything is built if the topology's key file cannot be used."""
    path = topology.keys_path()
    if path is None:
        return
    from .auth.keys import KeyFileError, load

    try:
        load(path)
    except KeyFileError as exc:
        raise RuntimeErrorNS(f"topology {topology.name!r}: {exc} ('netstack keys generate {path}' makes one)") from None


def node_options() -> dict[str, list[str]]:
    """``{option: [node kinds whose node_daemon takes it]}`` (their modules' ``NODE_OPTIONS``)."""
    out: dict[str, list[str]] = {}
    for kind, module in protocols.node_kinds().items():
        for name in getattr(protocols.load(module), "NODE_OPTIONS", ()):
            out.setdefault(name, []).append(kind)
    return out


def check_options(topology: Topology, options: Mapping[str, Any]) -> None:
    """RuntimeErrorNS for an option no node of ``topology`` takes (before anything is built)."""
    takes = node_options()
    present = {n.kind.value for n in topology.nodes}
    for name in options:
        kinds = takes.get(name)
        if kinds is None:
            raise RuntimeErrorNS(f"unknown option {name!r}; node kinds take: {', '.join(sorted(takes)) or 'none'}")
        if not present & set(kinds):
            raise RuntimeErrorNS(f"option --{name.replace('_', '-')} needs a node of kind {' or '.join(kinds)}; "
                                 f"topology {topology.name!r} has none")


def _node_daemons(module: str, topology: Topology, built: netns.BuiltTopology, node: Any, rdir: Path,
                  prefix: str, options: Mapping[str, Any]) -> list[DaemonSpec | Daemon]:
    """What ``node_daemon`` returns, as a list (module docstring: the contract)."""
    got = protocols.load(module).node_daemon(topology, built, node, rdir, prefix, options)
    if got is None:
        return []  # a protocol daemon that is not installed
    if all(isinstance(a, str) for a in got):
        return [DaemonSpec(list(got))]
    for item in got:
        if not isinstance(item, DaemonSpec | Daemon):
            raise RuntimeErrorNS(f"{module}.node_daemon returned {item!r}: not an argv, DaemonSpec or Daemon")
    return list(got)


def _start_node_daemons(topology: Topology, built: netns.BuiltTopology, rdir: Path, prefix: str,
                        options: Mapping[str, Any], say: Any, daemons: list[Daemon]) -> None:
    """Start (or record) the daemons of every node whose kind a protocol registered, appending
    to ``daemons`` as they start, so that a failure half-way stops those already running."""
    kinds = protocols.node_kinds()
    for node in topology.nodes:
        module = kinds.get(node.kind.value)
        if module is None:
            continue  # a plain host
        for item in _node_daemons(module, topology, built, node, rdir, prefix, options):
            if isinstance(item, Daemon):
                daemons.append(item)
                say(f"started {item.kind} {item.key} (pid {item.pid})")
                continue
            name = f"{node.name}-{item.suffix}" if item.suffix else node.name
            sock, log_path = rdir / f"{name}.sock", rdir / f"{name}.log"
            metrics = _metrics_address(topology, daemons)
            pid = _spawn(prefix, node.name, [*item.argv, "--control", str(sock)], log_path, metrics)
            kind = item.kind or node.kind.value
            daemons.append(Daemon(node.name, kind, pid, str(sock), str(log_path), name, metrics))
            say(f"started {kind} daemon {name} (pid {pid})")


def topology_of(state: dict[str, Any]) -> Topology:
    """The topology a run was built from: its file, or the shipped topology of that name (the
    file as it reads now: edited since ``up``, it may no longer match what runs)."""
    from .topo.model import load_topology_spec, shipped_topologies

    source = state.get("source") or ""
    if Path(source).is_file():
        return load_topology(source)
    name = state.get("topology")
    return load_topology_spec(name if name in shipped_topologies() else None)


#: Which deployments the CLI looks at (``netstack --runtime``): ``netns`` (``netstack up``),
#: ``compose`` (containers: docker-compose or Swarm, docs/containers.md), or ``auto``: a
#: namespace run of that prefix, else a container deployment of it.
RUNTIMES = ("auto", "netns", "compose")
RUNTIME_ENV = "NETSTACK_RUNTIME"


def runtime_mode() -> str:
    mode = os.environ.get(RUNTIME_ENV, "auto") or "auto"
    if mode not in RUNTIMES:
        raise RuntimeErrorNS(f"{RUNTIME_ENV}={mode!r}: use one of {', '.join(RUNTIMES)}")
    return mode


def load_state(prefix: str) -> dict[str, Any]:
    """The run state of the topology under ``prefix``: the one ``netstack up`` wrote, or the one
    assembled from a container deployment's labels (``netstack.container.discover``)."""
    mode = runtime_mode()
    if mode != "compose":
        path = run_dir(prefix) / "state.json"
        with contextlib.suppress(FileNotFoundError):
            return dict(json.loads(path.read_text()))
    if mode != "netns":
        from .container.discover import compose_state

        found = compose_state(prefix)
        if found is not None:
            return found
    raise RuntimeErrorNS(f"no topology is running under prefix {prefix!r}{_running_hint(mode)}")


def _running_hint(mode: str) -> str:
    running = netns.list_running() if mode != "compose" else []
    if mode != "netns":
        from .container.discover import running_prefixes

        running += [f"{p} (containers)" for p in running_prefixes()]
    return f" (running: {', '.join(running)})" if running else " (nothing is running: 'netstack up')"


def node_exec_argv(state: dict[str, Any], node: str, argv: list[str]) -> list[str]:
    """argv that runs ``argv`` (a program of this machine) in ``node``'s network namespace,
    whichever runtime the state is of."""
    try:
        ns = state["namespaces"][node]
    except KeyError:
        raise RuntimeErrorNS(f"no node {node!r}; nodes: {', '.join(state['namespaces'])}") from None
    return netns.netns_exec_argv(ns, argv)


def host_path(state: dict[str, Any], node: str, path: str) -> str:
    """Where a path of ``node``'s file system is seen from this machine (in a container: under
    its ``/proc/<pid>/root``)."""
    root = (state.get("roots") or {}).get(node)
    return f"{root}{path}" if root else path


def daemons_of(state: dict[str, Any]) -> list[Daemon]:
    return [Daemon(**d) for d in state.get("daemons", [])]


def stop_groups(pids: list[int], alive: Callable[[int], bool], timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM to each daemon's process group (they start in sessions of their own), SIGKILL to
    those still ``alive`` after ``timeout``. Shared by ``down`` and a container's node runner."""
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
    stop_groups(list(by_pid), lambda pid: by_pid[pid].alive())
    for d in daemons:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(d.pid, os.WNOHANG)


def down(prefix: str) -> list[str]:
    """Stop the daemons and remove everything of ``prefix``. Idempotent. (Namespace runs only:
    a container deployment is stopped with docker-compose down / docker stack rm.)"""
    rdir = run_dir(prefix)
    with contextlib.suppress(OSError, ValueError):
        _stop(daemons_of(json.loads((rdir / "state.json").read_text())))
    removed = netns.teardown(prefix)  # also kills anything else still inside the namespaces
    shutil.rmtree(rdir, ignore_errors=True)
    cleanup_protocols(prefix)
    return removed


def cleanup_protocols(prefix: str) -> None:
    """What a daemon that died without its clean stop left outside the run directory (a DTA
    collector killed with SIGKILL keeps its shared-memory regions): each control plug-in's
    ``after_down(prefix)``."""
    for name in protocols.control_modules():
        try:
            module = protocols.load(name)
        except ModuleNotFoundError:
            continue
        hook = getattr(module, "after_down", None)
        if hook is not None:
            with contextlib.suppress(OSError):
                hook(prefix)


def down_all(*, prefixes: Collection[str] | None = None) -> list[str]:
    """Remove every netstack topology, including what a crashed run left behind; with
    ``prefixes``, only the topologies of those prefixes (found the same way: the tests recover
    their own crashed runs so, never touching another user's testbed)."""
    if isinstance(prefixes, str):  # a str is a Collection of one-letter prefixes: never meant
        raise TypeError("prefixes: a collection of prefixes, not one string")
    found = set(netns.list_running())
    root = run_root()
    if root.is_dir():
        found |= {p.name for p in root.iterdir() if p.is_dir()}
    if prefixes is not None:
        found &= set(prefixes)
    removed: list[str] = []
    for prefix in sorted(found):
        with contextlib.suppress(ValueError):
            removed += down(prefix)
    removed += netns.teardown_all(prefixes=prefixes)
    return removed


def status(prefix: str) -> dict[str, Any]:
    """Every daemon's counters (a daemon that does not answer is reported, not fatal)."""
    state = load_state(prefix)
    out: dict[str, Any] = {"prefix": prefix, "topology": state["topology"], "daemons": {}, "impairments": {}}
    from .topo.impair import ImpairmentError, active_impairment

    for p in state["ports"]:
        try:
            active = active_impairment(prefix, p["netns"], p["ifname"])
        except (ImpairmentError, OSError, ValueError) as exc:
            active = {"error": str(exc)}
        if active:
            out["impairments"][f"{p['node']}>{p['peer']}"] = {"link": p["link"], **active}
    peers = {(p["node"], p["ifname"]): p for p in state["ports"]}
    for d in daemons_of(state):
        if not d.control:  # nothing to ask: whether it runs
            out["daemons"][d.key] = {"kind": d.kind, "node": d.node, "pid": d.pid, "alive": d.alive()}
            continue
        try:
            out["daemons"][d.key] = st = request(d.control, "status", timeout=2.0)
        except (OSError, ControlError, ValueError) as exc:
            out["daemons"][d.key] = {"error": f"not answering ({exc}); log {d.log}", "alive": d.alive()}
            continue
        for ifname, counters in st.get("ports", {}).items():
            imp = counters.get("impairment")
            p = peers.get((d.node, ifname))
            if imp and p:
                out["impairments"][f"{p['node']}>{p['peer']}"] = {
                    "link": p["link"], "backend": "switch", **imp,
                    "dropped": counters.get("impair_lost"), "corrupted": counters.get("impair_corrupted"),
                    "reordered": counters.get("impair_reordered"), "duplicated": counters.get("impair_duplicated"),
                }
    return out


def loop_lags(prefix: str) -> dict[str, dict[str, Any] | None]:
    """Every daemon's scheduling-delay histogram (:mod:`netstack.looplag`; None: no answer)."""
    out: dict[str, dict[str, Any] | None] = {}
    for d in daemons_of(load_state(prefix)):
        if not d.control:
            continue
        try:
            out[d.key] = request(d.control, "loop_lag", timeout=2.0)
        except (OSError, ControlError, ValueError):
            out[d.key] = None
    return out


def control(prefix: str, node: str, cmd: str, **args: Any) -> Any:
    """Ask daemon ``node`` (its name: ``ctl-r2``; or a node's name: its first daemon with a
    control socket) ``cmd``."""
    state = load_state(prefix)
    served = [d for d in daemons_of(state) if d.control]
    match = next((d for d in served if d.key == node), None) or next((d for d in served if d.node == node), None)
    if match is not None:
        return request(match.control, cmd, **args)
    raise RuntimeErrorNS(f"no daemon runs on node {node!r} (daemons: {[d.key for d in served]})")


# ----------------------------------------------- stale run state, and every testbed (netstack ls)
def read_run_state(prefix: str) -> dict[str, Any] | None:
    """The namespace run's ``state.json`` under ``prefix``, or None (none, or unreadable)."""
    try:
        return dict(json.loads((run_dir(prefix) / "state.json").read_text()))
    except (OSError, ValueError, TypeError):
        return None


def missing_namespaces(state: Mapping[str, Any]) -> list[str]:
    """The namespaces a namespace run's state names that no longer exist: the state outlived them
    (a crash, a reboot, an ``ip netns del``). A container deployment's state names none."""
    if state.get("runtime") == "compose":
        return []
    return sorted(ns for ns in (state.get("namespaces") or {}).values()
                  if not os.path.exists(os.path.join(netns.NETNS_DIR, ns)))


def stale_reason(prefix: str) -> str | None:
    """One line saying why ``prefix``'s run state cannot be used (its namespaces are gone), or
    None: no namespace state of that prefix, or all of it is there. Only reads."""
    if os.environ.get(RUNTIME_ENV) == "compose":  # the command will not look at namespace runs
        return None
    state = read_run_state(prefix)
    if state is None:
        return None
    gone = missing_namespaces(state)
    if not gone:
        return None
    what = ("its namespaces are gone" if len(gone) == len(state.get("namespaces") or {})
            else f"namespace(s) {', '.join(gone)} of it are gone")
    return f"testbed {prefix}: {what} (stale state from a crash?); run 'netstack down --prefix {prefix}'"


def testbeds() -> list[dict[str, Any]]:
    """Every testbed of this machine, for ``netstack ls`` (``--runtime`` picks which kinds): the
    namespace runs under :func:`run_root`, netstack namespaces whose run state is not there
    (another ``NETSTACK_RUN_DIR``, or lost: state ``orphan``) and container deployments. Only
    reads: nothing of another user's testbed is changed or waited on."""
    mode = runtime_mode()
    out = _namespace_testbeds() if mode != "compose" else []
    if mode != "netns":
        out += _container_testbeds()
    return sorted(out, key=lambda t: (t["prefix"], t["runtime"]))


def _namespace_testbeds() -> list[dict[str, Any]]:
    root = run_root()
    try:
        dirs = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    except OSError:
        dirs = []
    found = {d.name: _run_entry(d) for d in dirs}
    orphans: dict[str, int] = {}
    for prefix, _node in netns.running_namespaces().values():  # (needs root to read the markers)
        if prefix not in found:
            orphans[prefix] = orphans.get(prefix, 0) + 1
    for prefix, n in orphans.items():
        found[prefix] = {"prefix": prefix, "runtime": "netns", "state": "orphan", "topology": None, "started": None,
                         "age_s": None, "owner": None, "daemons": None, "namespaces": {"present": n, "total": None},
                         "run_dir": None}
    return list(found.values())


def _run_entry(rdir: Path) -> dict[str, Any]:
    """One run directory as ``netstack ls`` lists it. States: ``running``; ``degraded`` (a daemon
    is not alive); ``broken`` (some namespaces gone); ``stale`` (all gone); ``no-state`` (no
    state.json: ``up`` is building it, or a crash left the directory)."""
    state = read_run_state(rdir.name)
    try:
        mtime = rdir.stat().st_mtime
    except OSError:
        mtime = time.time()
    try:
        daemons = daemons_of(state) if state is not None else []
    except TypeError:  # a state file of another netstack version
        daemons = []
    names = list((state or {}).get("namespaces", {}).values())
    gone = missing_namespaces(state) if state is not None else []
    alive = sum(d.alive() for d in daemons)
    if state is None:
        word = "no-state"
    elif names and len(gone) == len(names):
        word = "stale"
    else:
        word = "broken" if gone else "degraded" if alive < len(daemons) else "running"
    started = float((state or {}).get("started") or mtime)
    return {"prefix": rdir.name, "runtime": "netns", "state": word, "topology": (state or {}).get("topology"),
            "started": started, "age_s": round(max(0.0, time.time() - started), 1), "owner": _owner(rdir, daemons),
            "daemons": {"alive": alive, "total": len(daemons)},
            "namespaces": {"present": len(names) - len(gone), "total": len(names)}, "run_dir": str(rdir)}


def _owner(rdir: Path, daemons: list[Daemon]) -> dict[str, Any] | None:
    """Who ran ``netstack up``: the run directory's owner, and the ``SUDO_USER`` its daemons
    inherited when it ran under sudo (readable by root only; everyone is root on a shared box)."""
    import pwd

    try:
        uid = rdir.stat().st_uid
    except OSError:
        return None
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    out: dict[str, Any] = {"uid": uid, "user": user}
    for d in daemons:
        with contextlib.suppress(OSError):
            env = Path(f"/proc/{d.pid}/environ").read_bytes().split(b"\0")
            sudo = next((e[len(b"SUDO_USER="):].decode(errors="replace") for e in env if e.startswith(b"SUDO_USER=")),
                        None)
            if sudo:
                out["sudo_user"] = sudo
            break
    return out


def _container_testbeds() -> list[dict[str, Any]]:
    from .container.discover import compose_state, running_prefixes

    out = []
    for prefix in running_prefixes():
        state = compose_state(prefix)
        if state is None:
            continue  # gone since it was listed
        nodes = len(state.get("containers") or {})
        out.append({"prefix": prefix, "runtime": "compose", "state": "starting" if state.get("starting") else "running",
                    "topology": state.get("topology") or None, "started": None, "age_s": None, "owner": None,
                    "daemons": {"alive": None, "total": len(state.get("daemons") or [])},
                    "namespaces": {"present": nodes, "total": nodes + len(state.get("starting") or [])},
                    "run_dir": None})
    return out
