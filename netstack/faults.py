"""Faults injected into a running topology (``netstack fault``; docs/faults.md).

Each fault is a function here, reusable without the command line, and each returns a JSON-able
account of what it did and of what the network counted meanwhile:

- :func:`kill`: a daemon killed (``SIGKILL``/``SIGTERM``) and optionally restarted with the same
  argv, config, control socket and log (``runtime.kill_daemon`` / ``runtime.restart_daemon``),
  or frozen (``SIGSTOP``) for a while and resumed; :func:`start` restarts one left down;
- :func:`set_link`: a link's veth end(s) set administratively down or up (the peer then has no
  carrier), in the nodes' namespaces with pyroute2;
- :func:`pause_storm`: 802.1Qbb pause frames (quanta 0xFFFF for one class) sent out of one end
  of a link for a while from an AF_PACKET socket in that node's namespace, and what the peer
  switch made of them (pauses honoured, refused at the edge, released by its PFC watchdog);
- :func:`clock_jump`: the clock of a host's 1Pipe processes stepped by some milliseconds,
  through the host's clock-jump file ``<run dir>/onepipe-clock-<host>.json`` (:data:`CLOCK_FILE`).

Namespace runs (``netstack up``) only. Every error a user can make is a :class:`FaultError`
whose message says what to do instead; nothing is changed before the arguments are checked.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import procstat, runtime
from .errors import NetstackError
from .io.control import ControlError

#: Signals ``kill`` sends: KILL (a crash), TERM (a clean stop), STOP (a freeze, then CONT)
SIGNALS = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM, "STOP": signal.SIGSTOP}
#: The host clock-jump file the 1Pipe live processes follow (``netstack.onepipe.runner.clock_file``,
#: docs/onepipe.md "Clock jumps"): ``{"offset_ns": N}`` steps the host's clock from the topology
#: (``clock_offset``, ``clock_drift_ppm``) by N ns; N is the sum of every jump (we also keep
#: ``host`` and ``jumps``, a list of ``{"ns", "at"}``, which the processes ignore)
CLOCK_FILE = "onepipe-clock-{host}.json"
#: How long pause_storm waits for the peer to have counted the last pause frames it sent
SETTLE_S = 1.0
#: The largest clock step accepted (an hour): beyond it, a typo rather than a fault
MAX_JUMP_MS = 3_600_000.0

Say = Callable[[str], None]


class FaultError(NetstackError):
    """A fault that cannot be injected as asked; the message says why and what to do."""


def _quiet(_msg: str) -> None:
    pass


def run_state(prefix: str) -> runtime.RunState:
    """The state of the namespace run under ``prefix`` (FaultError when there is none)."""
    try:
        return runtime.namespace_state(prefix)
    except runtime.RuntimeErrorNS as exc:
        raise FaultError(str(exc)) from None


# =========================================================================== daemons


def daemon_names(state: runtime.RunState, target: str) -> list[runtime.Daemon]:
    """The daemon ``target`` names: a daemon's name (``ctl-r2``), or a node running exactly one."""
    daemons = state.daemons
    exact = [d for d in daemons if d.key == target]
    if exact:
        return exact
    on_node = [d for d in daemons if d.node == target]
    if len(on_node) == 1:
        return on_node
    if on_node:
        raise FaultError(f"node {target} runs several daemons ({', '.join(d.key for d in on_node)}): name one")
    if target in state.namespaces:
        served = sorted({d.node for d in daemons})
        raise FaultError(f"node {target} runs no daemon (a plain host); nodes with daemons: {', '.join(served)}")
    raise FaultError(f"no node or daemon {target!r}; nodes: {', '.join(state.namespaces)}")


def kill(prefix: str, target: str, *, sig: str = "KILL", restart: bool = False, down_ms: float = 0.0,
         say: Say = _quiet) -> dict[str, Any]:
    """Kill daemon ``target`` with ``sig`` (``KILL``, ``TERM``); with ``restart``, start it again
    ``down_ms`` after it is gone and wait until it answers. ``STOP`` freezes it: for ``down_ms``
    and then resumes it (``SIGCONT``), or, without ``down_ms``, until :func:`start` resumes it.
    A frozen daemon is a stall, not a crash: its sockets stay open and fill up."""
    if sig not in SIGNALS:
        raise FaultError(f"signal {sig!r}: use one of {', '.join(SIGNALS)}")
    if down_ms < 0:
        raise FaultError(f"--down-ms {down_ms:g}: a time cannot be negative")
    if sig == "STOP" and restart:
        raise FaultError("--signal STOP freezes the daemon (resumed after --down-ms or by 'netstack fault start'): "
                         "it takes no --restart")
    if down_ms and not restart and sig != "STOP":
        raise FaultError("--down-ms says when to restart: give --restart too")
    (daemon,) = daemon_names(run_state(prefix), target)
    if daemon.kind == "linkflap" and (restart or sig == "STOP"):
        raise FaultError(f"{daemon.key} flaps a link (the topology's [links.flap]); it can be killed, not restarted "
                         "or frozen ('netstack link ... flap' runs another)")
    out: dict[str, Any] = {"daemon": daemon.key, "node": daemon.node, "kind": daemon.kind, "signal": sig,
                           "pid": daemon.pid}
    if not daemon.alive():
        raise FaultError(f"{daemon.kind} daemon {daemon.key} (pid {daemon.pid}) is not running; "
                         f"'netstack fault start {daemon.key}' starts it")
    if _frozen(daemon.pid):
        if sig == "STOP":
            raise FaultError(f"{daemon.kind} daemon {daemon.key} (pid {daemon.pid}) is frozen already; "
                             f"'netstack fault start {daemon.key}' resumes it")
        if sig == "TERM":
            os.killpg(daemon.pid, signal.SIGCONT)  # a stopped process acts on SIGTERM only once resumed
    if sig == "STOP":
        os.killpg(daemon.pid, signal.SIGSTOP)
        deadline = time.monotonic() + runtime.STOP_TIMEOUT_S
        while not _frozen(daemon.pid) and daemon.alive() and time.monotonic() < deadline:
            time.sleep(0.005)  # stopped once the kernel has delivered it: then report it frozen
        out["frozen"] = True
        if not down_ms:
            say(f"{daemon.kind} daemon {daemon.key} (pid {daemon.pid}) frozen (SIGSTOP) until "
                f"'netstack fault start {daemon.key}'")
            return out
        say(f"{daemon.kind} daemon {daemon.key} (pid {daemon.pid}) frozen (SIGSTOP) for {down_ms:g} ms")
        try:
            time.sleep(down_ms / 1e3)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(daemon.pid, signal.SIGCONT)
        out.update(frozen_ms=down_ms, resumed=daemon.alive())
        return out
    t0 = time.monotonic()
    try:
        runtime.kill_daemon(prefix, daemon.key, SIGNALS[sig])
    except runtime.RuntimeErrorNS as exc:
        raise FaultError(str(exc)) from None
    out["killed"] = True
    say(f"{daemon.kind} daemon {daemon.key} (pid {daemon.pid}) killed with SIG{sig}")
    if not restart:
        return out
    time.sleep(max(0.0, down_ms / 1e3 - (time.monotonic() - t0)))
    new = _restart(prefix, daemon.key)
    out.update(restarted=True, new_pid=new.pid, down_ms=round((time.monotonic() - t0) * 1e3, 1))
    say(f"{daemon.kind} daemon {daemon.key} restarted (pid {new.pid}) and answering")
    return out


def start(prefix: str, target: str, say: Say = _quiet) -> dict[str, Any]:
    """Bring daemon ``target`` back after :func:`kill`: resume it when frozen (``SIGCONT``), else
    start it again (same argv, config, control socket, log) and wait until it answers."""
    (daemon,) = daemon_names(run_state(prefix), target)
    out: dict[str, Any] = {"daemon": daemon.key, "node": daemon.node, "kind": daemon.kind, "pid": daemon.pid}
    if daemon.alive() and _frozen(daemon.pid):
        os.killpg(daemon.pid, signal.SIGCONT)
        say(f"{daemon.kind} daemon {daemon.key} (pid {daemon.pid}) resumed (SIGCONT)")
        return {**out, "resumed": True}
    if daemon.alive():
        raise FaultError(f"{daemon.kind} daemon {daemon.key} is running (pid {daemon.pid})")
    new = _restart(prefix, daemon.key)
    say(f"{daemon.kind} daemon {daemon.key} started (pid {new.pid}) and answering")
    return {**out, "new_pid": new.pid, "restarted": True}


def _frozen(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP): state T in /proc/<pid>/stat."""
    return procstat.state(pid) in ("T", "t")


def _restart(prefix: str, name: str) -> runtime.Daemon:
    try:
        return runtime.restart_daemon(prefix, name)
    except runtime.RuntimeErrorNS as exc:
        raise FaultError(f"restart failed: {exc}") from None


# =========================================================================== links


def link_ports(state: runtime.RunState, link: str, end: str = "both") -> list[runtime.RunPort]:
    """The ports of ``link`` that ``end`` names: ``a``, ``b``, ``both`` or a node of the link."""
    if link not in state.links:
        raise FaultError(f"no link {link!r}; links: {', '.join(state.links)}")
    ends = {"a": state.links[link].a, "b": state.links[link].b}
    want = end.lower() if end.lower() in ("a", "b", "both") else end
    if want == "both":
        nodes = set(ends.values())
    elif want in ends:
        nodes = {ends[want]}
    elif want in ends.values():
        nodes = {want}
    else:
        raise FaultError(f"--end {end!r}: use A ({ends['a']}), B ({ends['b']}) or both")
    ports = [p for p in state.ends_of(link) if p.node in nodes]
    return sorted(ports, key=lambda p: p.node != ends["a"])


def set_link(prefix: str, link: str, up: bool, end: str = "both", say: Say = _quiet) -> dict[str, Any]:
    """Set ``link``'s veth end(s) administratively up or down in their namespaces. A veth whose
    peer end is down has no carrier, so one end down stops the link both ways; a daemon sending
    on its own downed end gets ENETDOWN (counted ``send_errors``), one sending toward a downed
    peer has its frames dropped by the kernel (the veth's tx_dropped)."""
    from .topo.nsenter import iproute

    state = run_state(prefix)
    ports = link_ports(state, link, end)
    done = []
    for p in ports:
        with iproute(p.netns) as ipr:
            found = ipr.link_lookup(ifname=p.ifname)
            if not found:
                raise FaultError(f"{p.ifname} of {p.node} is gone (namespace {p.netns})")
            ipr.link("set", index=found[0], state="up" if up else "down")
        done.append(f"{p.node}/{p.ifname}")
        say(f"{p.node}/{p.ifname} {'up' if up else 'down'}")
    operstate = link_state(state, link)
    return {"link": link, "state": "up" if up else "down", "ends": done, "operstate": operstate,
            "switches": carrier_view(prefix, state, link, operstate)}


#: What ``set_link`` reports of each switch end of the link (its port's status counters)
CARRIER_COUNTERS = ("carrier", "link_down", "carrier_drops")
#: How long ``carrier_view`` waits for a switch daemon to have seen a carrier change
CARRIER_SETTLE_S = 1.0


def carrier_view(prefix: str, state: runtime.RunState, link: str,
                 operstate: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    """``{"node/ifname": {carrier, link_down, carrier_drops}}`` of the link's switch ends, from
    their daemons' status. Given ``operstate`` (what the kernel says now), waits up to
    :data:`CARRIER_SETTLE_S` for each daemon to agree (an end has carrier when its operstate is UP)."""
    switches = {d.node: d for d in state.daemons if d.kind == "switch"}
    out: dict[str, dict[str, Any]] = {}
    for p in link_ports(state, link):
        daemon = switches.get(p.node)
        if daemon is None:
            continue
        where = f"{p.node}/{p.ifname}"
        want = None if operstate is None else operstate.get(where) == "UP"
        deadline = time.monotonic() + CARRIER_SETTLE_S
        while True:
            try:
                st = runtime.control(prefix, daemon.key, "status")["ports"][p.ifname]
            except (OSError, ValueError, KeyError, ControlError, runtime.RuntimeErrorNS) as exc:
                out[where] = {"error": f"switch daemon {daemon.key} does not answer: {exc}"}
                break
            out[where] = {k: st.get(k) for k in CARRIER_COUNTERS}
            if want is None or st.get("carrier") == want or time.monotonic() > deadline:
                break
            time.sleep(0.01)
    return out


def link_state(state: runtime.RunState, link: str) -> dict[str, str]:
    """``{"node/ifname": operstate}`` of both ends of ``link`` (UP, DOWN, LOWERLAYERDOWN...)."""
    from .topo.nsenter import iproute

    out = {}
    for p in link_ports(state, link):
        with iproute(p.netns) as ipr:
            found = ipr.link_lookup(ifname=p.ifname)
            msg = ipr.get_links(found[0])[0] if found else None
        out[f"{p.node}/{p.ifname}"] = msg.get_attr("IFLA_OPERSTATE") if msg is not None else "GONE"
    return out


# =========================================================================== pause storm


def pause_frame(src_mac: str, cls: int, fcs: bool) -> bytes:
    """An 802.1Qbb pause of class ``cls`` for the longest time (quanta 0xFFFF), from ``src_mac``;
    with the software FCS trailer the project's switch-to-switch links carry when ``fcs``."""
    from headers.fcs import append_fcs
    from headers.pfc import MAX_QUANTA, PFC_CLASSES, PFCFrame

    quanta = [0] * PFC_CLASSES
    quanta[cls] = MAX_QUANTA
    frame = PFCFrame(1 << cls, tuple(quanta)).to_frame(src=bytes.fromhex(src_mac.replace(":", "")))
    return append_fcs(frame) if fcs else frame


def _peer_port_config(prefix: str, node: str, ifname: str) -> dict[str, Any]:
    """The switch config ``up`` wrote for ``node``'s port ``ifname`` ({} when unreadable)."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        cfg = json.loads((runtime.run_dir(prefix) / f"{node}.json").read_text())
        return next(p for p in cfg["switch"]["ports"] if p["name"] == ifname)
    return {}


_STORM_COUNTERS = ("pfc_rx", "pauses_rx", "pauses_refused", "edge_drops_pfc", "pfc_watchdog_events",
                   "pfc_watchdog_ignored", "mac_control_rx", "fcs_errors")


def _send_for(ns: str, ifname: str, frame: bytes, seconds: float, pps: float,
              started: Callable[[], None] | None) -> tuple[int, int, float]:
    """Send ``frame`` out of ``ifname`` in namespace ``ns`` at ``pps`` for ``seconds`` (an
    AF_PACKET socket opened there): (frames, send errors, seconds it took)."""
    from .topo.nsenter import in_netns

    with in_netns(ns):
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    sent = errors = 0
    try:
        sock.bind((ifname, 0))
        if started is not None:
            started()
        t0 = time.monotonic()
        period = 1.0 / pps
        while True:
            due = t0 + sent * period
            now = time.monotonic()
            if due - t0 >= seconds:
                break
            if due > now:
                time.sleep(due - now)
            try:
                sock.send(frame)
            except OSError:
                errors += 1
            sent += 1
        return sent, errors, time.monotonic() - t0
    finally:
        sock.close()


def pause_storm(prefix: str, link: str, from_node: str, *, seconds: float = 1.0, cls: int = 0, pps: float = 100.0,
                say: Say = _quiet, started: Callable[[], None] | None = None) -> dict[str, Any]:
    """Send pause frames for class ``cls`` out of ``from_node``'s end of ``link`` at ``pps`` for
    ``seconds``, and report what the peer switch counted meanwhile: pauses received and
    honoured, refused at an edge port, released by its PFC watchdog (``pfc_watchdog_events``),
    ignored during the watchdog's recovery, and how long ``cls`` was paused (``paused_ns``)."""
    if not seconds > 0:
        raise FaultError(f"--seconds {seconds:g}: the storm must last a positive time")
    if not pps > 0:
        raise FaultError(f"--pps {pps:g}: give a positive rate")
    if not 0 <= cls <= 7:
        raise FaultError(f"--class {cls}: a priority class is 0-7")
    state = run_state(prefix)
    ends = link_ports(state, link)
    mine = [p for p in ends if p.node == from_node]
    if not mine:
        raise FaultError(f"--from {from_node!r} is not an end of {link} ({' or '.join(p.node for p in ends)})")
    port = mine[0]
    peer = next(p for p in ends if p is not port)
    peer_daemon = next((d for d in state.daemons if d.node == peer.node and d.kind == "switch"), None)
    cfg = _peer_port_config(prefix, peer.node, peer.ifname) if peer_daemon is not None else {}
    frame = pause_frame(port.mac, cls, port.fcs)

    def counters() -> dict[str, Any] | None:
        if peer_daemon is None:
            return None
        try:
            st = runtime.control(prefix, peer_daemon.key, "status")["ports"][peer.ifname]
        except (OSError, ValueError, KeyError, ControlError, runtime.RuntimeErrorNS) as exc:
            raise FaultError(f"switch daemon {peer_daemon.key} does not answer: {exc}") from None
        return {**{k: st.get(k, 0) for k in _STORM_COUNTERS}, "paused_ns": st["paused_ns"][cls],
                "paused": st["paused"][cls]}

    before = counters()
    say(f"pause storm: class {cls} from {from_node}/{port.ifname} toward {peer.node}/{peer.ifname}, "
        f"{pps:g} frames/s for {seconds:g} s")
    sent, errors, elapsed = _send_for(port.netns, port.ifname, frame, seconds, pps, started)
    after = counters()
    deadline = time.monotonic() + SETTLE_S
    while (before is not None and after is not None and time.monotonic() < deadline
           and after["pfc_rx"] + after["edge_drops_pfc"] - before["pfc_rx"] - before["edge_drops_pfc"] < sent - errors):
        time.sleep(0.02)  # the peer reads its port asynchronously: let it count the last frames
        after = counters()
    out: dict[str, Any] = {"link": link, "from": f"{from_node}/{port.ifname}",
                           "to": f"{peer.node}/{peer.ifname}", "class": cls, "frames": sent,
                           "send_errors": errors, "seconds": round(elapsed, 3), "pps": pps}
    if before is None or after is None:
        out["peer"] = None  # a host: nothing there counts pauses
        return out
    delta = {k: after[k] - before[k] for k in _STORM_COUNTERS}
    out.update(peer=peer_daemon.key if peer_daemon else None, counted=delta,
               paused_ms=round((after["paused_ns"] - before["paused_ns"]) / 1e6, 1),
               still_paused=after["paused"], watchdog_ms=(cfg.get("pfc_watchdog_ns") or 0) / 1e6 or None,
               role=cfg.get("role"), honours_pfc=_honours(cfg, cls))
    return out


def _honours(cfg: dict[str, Any], cls: int) -> bool:
    """Whether the switch port ``cfg`` (its daemon config) honours pauses for class ``cls``: an
    edge port only when it takes a host's pauses, any port only for a class it enables PFC for."""
    takes = cfg.get("role") != "edge" or bool(cfg.get("pfc_from_host", cfg.get("lossless", False)))
    enabled = cfg.get("pfc_enable")
    return takes and (enabled is None or cls in enabled)


# =========================================================================== clock jump


def clock_file(prefix: str, host: str) -> Path:
    """Where ``host``'s 1Pipe processes read their clock step (the runner's own path if it has one)."""
    from .onepipe import runner

    own = getattr(runner, "clock_file", None)
    return Path(own(prefix, host)) if own is not None else runtime.run_dir(prefix) / CLOCK_FILE.format(host=host)


def onepipe_processes(prefix: str, host: str) -> dict[str, dict[str, Any]]:
    """The live 1Pipe processes of ``netstack onepipe run`` on ``host``: {name: {pid, host, addr}}."""
    from .onepipe.runner import process_alive, read_procs_file

    info = read_procs_file(prefix) or {}
    return {n: p for n, p in (info.get("processes") or {}).items()
            if p.get("host") == host and process_alive(int(p["pid"]), n)}


def clock_jump(prefix: str, host: str, ms: float, say: Say = _quiet) -> dict[str, Any]:
    """Step the clock of ``host``'s 1Pipe processes by ``ms`` (negative: backwards): add it to
    ``offset_ns`` in the host's clock file, which those processes follow (docs/faults.md)."""
    if not ms or abs(ms) > MAX_JUMP_MS:
        raise FaultError(f"--ms {ms:g}: give a non-zero jump of at most {MAX_JUMP_MS:g} ms either way")
    state = run_state(prefix)
    if host not in state.namespaces:
        raise FaultError(f"no node {host!r}; hosts: {', '.join(state.hosts)}")
    if host not in state.hosts:
        raise FaultError(f"{host} is not a host (no address): only hosts' clocks run 1Pipe processes")
    procs = onepipe_processes(prefix, host)
    if not procs:
        raise FaultError(f"no 1Pipe process runs on {host} ('netstack onepipe run --prefix {prefix}' starts them)")
    path = clock_file(prefix, host)
    old: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        old = json.loads(path.read_text())
    step = round(ms * 1e6)
    offset = int(old.get("offset_ns", 0)) + step
    data = {"host": host, "offset_ns": offset, "jumps": [*old.get("jumps", []), {"ns": step, "at": time.time()}]}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # whole or not at all: a process never reads half a file
    say(f"clock of {host} stepped {ms:+g} ms ({', '.join(sorted(procs))} follow {path})")
    return {"host": host, "jump_ns": step, "offset_ns": offset, "file": str(path),
            "processes": {n: p["pid"] for n, p in sorted(procs.items())}}


__all__ = ["CLOCK_FILE", "SIGNALS", "FaultError", "clock_file", "clock_jump", "daemon_names", "kill", "link_ports",
           "link_state", "onepipe_processes", "pause_frame", "pause_storm", "set_link", "start"]
