"""``netstack onepipe run``: P 1Pipe processes spread over a running testbed's hosts, scattering
concurrently for S seconds, each writing its delivery log; ``netstack onepipe kill``: SIGKILL one
of them while the run goes on.

Processes are named ``p1 .. pP`` and dealt to the hosts in turn (sorted by name), each on its
own UDP port from 1Pipe's range (``PORT + 1``, ``PORT + 2``... per host). Each is its own OS
process, ``python -m netstack.onepipe.live`` in its host's namespace with the host's clock from
the topology (``clock_offset``, ``clock_drift_ppm``), so that killing one is a real crash. They
join together (``--join-at``) once every interpreter has started, and scatter half a second
later (``--start-at``): one that joined early could be starved while the others start. Every
process's pid, host and address are in ``<run dir of the testbed>/onepipe-procs.json``
(:data:`PROCS_FILE`; ``kill`` and ``status`` read it), with the run's state (:func:`run_phase`):
written ``starting`` as soon as the run has taken its output directory, each process added as it
is spawned, ``finished`` or ``aborted`` at the end (kept, so that ``kill`` can say so). 1Pipe is
(re-)enabled in every switch first, so that every run starts from fresh switch state, with the
switches' parameters if it was on.
``--loss LINK:RATE`` drops that share of the frames in both directions of the link with
nftables for the run and removes it afterwards.

``reliable=True`` (``--reliable``) runs reliable 1Pipe (design topics §7-§8 in docs/papers.md):
it needs the controller, a topology node of kind :data:`CONTROLLER_KIND`; the switches are
enabled under it (failed inputs wait for its release) and the processes register with it.

The logs (``DIR/<process>.jsonl``, ``DIR/send-fail/``, ``DIR/send-unknown/``, ``DIR/in-flight/``,
``DIR/sent/``, ``DIR/proc-fail/``) are :mod:`.live`'s; ``DIR/run.json`` has the run's parameters,
its ``mode``, every message counted by its fate from those logs (:mod:`.accounting`, issue 31:
``messages_sent = delivered + send_failed + send_unknown + in_flight_at_end``, in total and per
process), every process's own report, and ``killed``: the processes that died of SIGKILL (they
wrote their logs up to then). A run that aborts still writes it (:func:`write_aborted`).

A topology with a key file (``[topology] keys``) authenticates 1Pipe's frames (docs/onepipe.md
"Authenticated beacons and barriers"): each process is given the key file's *path* and the domain
(the prefix) and reads the keys itself. Each process also follows its host's clock-jump file,
:func:`clock_file` (docs/onepipe.md "Clock jumps"): a fault tool writes ``{"offset_ns": N}`` there
to step that host's clock by N ns during the run; ``DIR/run.json`` lists the steps each process
applied (``clock_steps``). Stale files are removed when a run starts.

Every run is judged (:mod:`.verdict`, issue 28 "run validity"): the processes report their own
scheduling delay (``sched``) and how they kept their schedule (``scatter``), the daemons' delay
over the run comes from their control sockets (:class:`netstack.experiment.LagWindow`), the
accounting and the failures declared while processes ran from the logs; the summary carries
``valid`` and ``checks`` (and ``run.json`` too), and the verdict is said at the end.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import procstat, toolproc
from .control import CONTROLLER_KIND, OnePipeControlError, enable_all, status_all, switches_of
from .params import PORT, PORT_RANGE, OnePipeParams

if TYPE_CHECKING:
    from ..runtime import Daemon, RunState

#: in the testbed's run directory from a run's start on: ``{"state", "out", "runner", "reliable",
#: "started", "start_at", "seconds", "drain", "processes": {name: {"pid", "host", "addr"}}}``
PROCS_FILE = "onepipe-procs.json"
#: a host's clock-jump file in the testbed's run directory (:func:`clock_file`)
CLOCK_FILE = "onepipe-clock-{host}.json"
#: the start-up handshake in the testbed's run directory (:func:`_go`): each process touches a file
#: in ``GO_FILE.ready/`` once its interpreter runs, the runner then writes ``GO_FILE``
GO_FILE = "onepipe-go.json"
#: how long the processes may take to start, at least, and per process (P interpreters importing at
#: once on a small machine: measured 2-3 s for 32 on 2 cores)
GO_WAIT_S, GO_WAIT_PER_PROC_S = 30.0, 1.0
Addr = tuple[str, int]


def end_hosts(state: RunState) -> list[str]:
    """The hosts of a run: nodes with an address that run no daemon of their own."""
    with_daemon = {d.node for d in state.daemons}
    return sorted(n for n in state.hosts if n not in with_daemon)


def place(hosts: list[str], procs: int) -> dict[str, list[str]]:
    """``{host: [process, ...]}``: ``p1 .. pP`` dealt to the hosts in turn."""
    if procs < 1:
        raise OnePipeControlError("--procs must be at least 1")
    if not hosts:
        raise OnePipeControlError("the running topology has no host")
    per_host = -(-procs // len(hosts))
    if per_host >= PORT_RANGE:
        raise OnePipeControlError(f"{procs} processes need more than {PORT_RANGE - 1} ports on a host")
    out: dict[str, list[str]] = {h: [] for h in hosts}
    for i in range(procs):
        out[hosts[i % len(hosts)]].append(f"p{i + 1}")
    return {h: ps for h, ps in out.items() if ps}


def host_clocks(state: RunState) -> dict[str, tuple[int, float]]:
    """``{host: (offset_ns, drift_ppm)}`` from the topology the run was built from (none: 0, 0)."""
    from ..runtime import topology_of
    from ..topo.model import TopologyError
    from .clock import host_clock

    try:
        topo = topology_of(state)
    except TopologyError:
        return {}
    out = {}
    for node in topo.nodes:
        clock = host_clock(topo, node)
        if clock.offset_ns or clock.drift_ppm:
            out[node.name] = (clock.offset_ns, clock.drift_ppm)
    return out


def clock_file(prefix: str, host: str) -> Path:
    """The clock-jump file of ``host`` in the run under ``prefix``: the processes on that host read
    ``{"offset_ns": N}`` from it (at most every 100 ms) and step their host clock by N ns from then
    on (docs/onepipe.md "Clock jumps"). Write it whole (write a temporary file, rename it over)."""
    from ..runtime import run_dir

    return run_dir(prefix) / CLOCK_FILE.format(host=host)


def key_file(state: RunState) -> Path | None:
    """The key file of the topology the run was built from (None: no keys, frames unsealed)."""
    from ..runtime import topology_of
    from ..topo.model import TopologyError

    try:
        return topology_of(state).keys_path()
    except TopologyError:
        return None


def parse_loss(spec: str, links: dict[str, Any]) -> tuple[str, float]:
    """``LINK:RATE`` -> (link, probability), checked against the running links."""
    link, _, rate = spec.rpartition(":")
    if not link or link not in links:
        raise OnePipeControlError(f"--loss {spec!r}: no link {link!r}; links: {', '.join(sorted(links))}")
    try:
        p = float(rate)
    except ValueError:
        raise OnePipeControlError(f"--loss {spec!r}: {rate!r} is not a probability") from None
    if not 0.0 <= p < 1.0:
        raise OnePipeControlError(f"--loss {spec!r}: the rate must be in [0, 1)")
    return link, p


def run(prefix: str, *, procs: int, seconds: float, out: str | Path, loss: Sequence[str] = (),
        rate: float = 100.0, fanout: int = 2, size: int = 64, drain: float = 1.0, seed: str = "1",
        params: OnePipeParams | None = None, reliable: bool = False,
        say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the processes; the summary (also written to ``OUT/run.json``). A run that aborts once
    it has taken ``OUT`` (an exception, a process that did not finish in time, Ctrl-C) still
    writes ``OUT/run.json``: the mode, the arguments, ``aborted`` (why) and the count of what its
    logs hold so far (:func:`write_aborted`); the exception goes on."""
    from ..runtime import load_state

    state = load_state(prefix)
    controller = find_controller(prefix, state) if reliable else None
    _refuse_a_second_run(prefix)
    placed = place(end_hosts(state), procs)
    losses = [parse_loss(s, state.links) for s in loss]
    out = _fresh_out(Path(out))
    run_args = dict(procs=procs, seconds=seconds, rate=rate, fanout=fanout, size=size, drain=drain,
                    loss=[f"{k}:{v:g}" for k, v in losses], reliable=reliable,
                    authenticated=key_file(state) is not None,
                    controller=None if controller is None else f"{controller[1][0]}:{controller[1][1]}")
    _write_procs_file(prefix, {"state": "starting", "out": str(out), "runner": os.getpid(), "reliable": reliable,
                               "started": time.time(), "seconds": seconds, "drain": drain, "processes": {}})
    try:
        summary = _run(prefix, state, out, placed, losses, controller, params, seed, run_args, say)
    except BaseException as exc:
        write_aborted(out, run_args, abort_reason(exc))
        _end_procs_file(prefix, "aborted", keep=state.runtime == "netns")
        raise
    _end_procs_file(prefix, "finished", keep=state.runtime == "netns")
    return summary


def abort_reason(exc: BaseException) -> str:
    """Why a run aborted, in a line: Ctrl-C, the error's own message, or its type."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    return str(exc).strip().splitlines()[0][:400] if str(exc).strip() else type(exc).__name__


def write_aborted(out: Path, run_args: dict[str, Any], reason: str) -> dict[str, Any]:
    """``OUT/run.json`` for a run that did not finish: its mode and arguments, ``aborted``, no
    verdict (``valid`` false), the count of what the logs hold so far (never raises: an abort
    must not hide its cause)."""
    doc: dict[str, Any] = {"tool": "netstack onepipe run", "out": str(out), **run_args,
                           "mode": mode_of(bool(run_args.get("reliable"))), "aborted": reason, "valid": False,
                           "checks": [], "killed": []}
    try:
        from .accounting import tally

        t = tally(out)
        doc.update(t.totals, processes={n: {**c, "incarnation": 1} for n, c in t.per_sender.items()},
                   accounting=t.as_dict())
        (out / "run.json").write_text(json.dumps(doc, indent=2))
    except Exception:  # best effort: the abort's own error is what the user must see
        with contextlib.suppress(OSError):
            (out / "run.json").write_text(json.dumps(doc, indent=2))
    return doc


def mode_of(reliable: bool) -> str:
    """``run.json``'s ``mode``: ``reliable`` or ``best_effort``."""
    return "reliable" if reliable else "best_effort"


def _run(prefix: str, state: RunState, out: Path, placed: dict[str, list[str]], losses: list[tuple[str, float]],
         controller: tuple[str, Addr] | None, params: OnePipeParams | None, seed: str, run_args: dict[str, Any],
         say: Callable[[str], None]) -> dict[str, Any]:
    from ..experiment import LagWindow
    from ..runtime import run_dir
    from ..topo.impair import apply_impairment, clear_impairment

    a = run_args
    params = _enable(prefix, state, params, controller, say)
    addrs = {p: (state.host_ip(h), PORT + 1 + i) for h, ps in placed.items() for i, p in enumerate(ps)}
    clocks = host_clocks(state)
    impaired = []
    try:
        for link, p in losses:
            for end in state.ends_of(link):
                apply_impairment(prefix, end.netns, end.ifname, loss=p, backend="nft")
                impaired.append(end)
            say(f"dropping {p:g} of the frames on {link} (both directions, nft)")
        go = run_dir(prefix) / GO_FILE
        _clear_go(go)
        argv = _live_argv(prefix, state, addrs, out, a, seed, params, controller, go)
        for host in placed:
            clock_file(prefix, host).unlink(missing_ok=True)  # a step left by an earlier run
        running = _spawn(prefix, state, placed, addrs, clocks, argv, a["reliable"], out, None, a)
        try:
            join_at = _go(prefix, go, running, say)
        except BaseException:
            for proc in running.values():
                toolproc.kill(proc)
            _clear_go(go)
            raise
        say(f"{a['procs']} {'reliable ' if a['reliable'] else ''}processes on {len(placed)} hosts scatter for "
            f"{a['seconds']:g} s ({a['rate']:g} scatterings/s each, {a['fanout']} destinations)")
        try:
            # the daemons' scheduling delay over the run, from the join on, as the processes
            # measure theirs (starting P interpreters is no part of the run)
            time.sleep(max(0.0, join_at - time.time()))
            lags = LagWindow(prefix).start()
        except BaseException:  # (Ctrl-C while they join): none is left behind
            for proc in running.values():
                toolproc.kill(proc)
            raise
        results, killed = _collect(running, timeout=a["seconds"] + a["drain"] + 60)
        daemon_lags = lags.stop()
    finally:
        _clear_go(run_dir(prefix) / GO_FILE)  # (every process read it long ago, or is gone)
        for end in impaired:
            clear_impairment(prefix, end.netns, end.ifname)
    for name in killed:
        say(f"{name} was killed (SIGKILL): its logs end where it died")
    summary = _summary(out, results, killed, placed, addrs, clocks, params, run_args)
    return _judge(prefix, out, summary, daemon_lags, say)


def _clear_go(go: Path) -> None:
    go.unlink(missing_ok=True)
    ready = go.with_name(go.name + ".ready")
    if ready.is_dir():
        for f in ready.iterdir():
            f.unlink(missing_ok=True)
        ready.rmdir()


def _go(prefix: str, go: Path, running: dict[str, subprocess.Popen[str]], say: Callable[[str], None]) -> float:
    """The start-up handshake: wait until every process's interpreter runs (its file in
    ``go.ready/``), then tell them all when to join (``join_at``, returned) and to start scattering
    (half a second later). A fixed delay instead left the last of 32 interpreters a second late on 2
    cores: its ToR timed it out and the processes that started on time stopped a second before it,
    which it took for failures. OnePipeControlError when a process exits first or the wait is over."""
    ready = go.with_name(go.name + ".ready")
    limit = GO_WAIT_S + GO_WAIT_PER_PROC_S * len(running)
    begun = time.monotonic()
    said = begun
    while True:
        # (each process's file is named after the processes it runs: one each, here)
        names = {f.name for f in ready.iterdir()} if ready.is_dir() else set()
        n = len(names & running.keys())
        gone = [name for name, proc in running.items() if proc.poll() is not None]
        # SIGKILLed while it started (netstack onepipe kill works at any moment): the run goes on
        # without it, as with a process killed later; any other exit is a failure to start
        failed = [name for name in gone if running[name].returncode != -signal.SIGKILL]
        if failed:
            raise OnePipeControlError(f"process {failed[0]} exited (status {running[failed[0]].returncode}) "
                                      f"before it was ready ({n} of {len(running)} ready)")
        if running.keys() <= names | set(gone):
            break
        now = time.monotonic()
        if now - begun > limit:
            raise OnePipeControlError(f"only {n} of {len(running)} processes started within {limit:.0f} s")
        if now - said >= 5.0:
            said = now
            say(f"{n} of {len(running)} processes ready")
        time.sleep(0.02)
    # they poll the go file every 20 ms: a moment for all to read it, more when there are many
    join_at = time.time() + 0.2 + 0.005 * len(running)
    tmp = go.with_suffix(".tmp")
    tmp.write_text(json.dumps({"join_at": join_at, "start_at": join_at + 0.5}))
    tmp.replace(go)
    with contextlib.suppress(OSError, ValueError):
        info = json.loads(procs_file(prefix).read_text())
        info["start_at"] = join_at + 0.5
        _write_procs_file(prefix, info)
    # (every process read it once its join is near: the runner's own wait for the join follows)
    return join_at


def _live_argv(prefix: str, state: RunState, addrs: dict[str, Addr], out: Path, a: dict[str, Any], seed: str,
               params: OnePipeParams, controller: tuple[str, Addr] | None, go: Path) -> list[str]:
    """The arguments every ``netstack.onepipe.live`` process of the run shares."""
    argv = ["--all-procs", ",".join(f"{p}:{ip}:{port}" for p, (ip, port) in addrs.items()), "--out", str(out),
            "--seconds", str(a["seconds"]), "--rate", str(a["rate"]), "--fanout", str(a["fanout"]),
            "--size", str(a["size"]), "--drain", str(a["drain"]), "--seed", seed,
            "--params", json.dumps(params.to_dict()),
            # every process joins at once when all have started (the handshake of _go), then
            # scatters once they are registered and have a barrier
            "--go-file", str(go),
            # one epoch for every host: the skews start at the topology's offsets
            "--clock-epoch-ns", str(time.monotonic_ns())]
    if controller is not None:
        argv += ["--reliable", "--controller", f"{controller[1][0]}:{controller[1][1]}"]
    keys = key_file(state)
    if keys is not None:  # the path, never the keys: each process reads the file itself
        argv += ["--keys", str(keys), "--domain", prefix]
    return argv


def _judge(prefix: str, out: Path, summary: dict[str, Any], daemon_lags: dict[str, Any],
           say: Callable[[str], None]) -> dict[str, Any]:
    """The run's validity (:mod:`.verdict`) into ``summary`` and ``OUT/run.json``; said at the end."""
    from .verdict import account, false_failures, judge, verdict_line

    procs = summary["processes"]
    summary["sched"] = {**{n: p["sched"] for n, p in procs.items() if p.get("sched") is not None}, **daemon_lags}
    summary["accounting"] = account(out)
    if summary["reliable"]:
        summary["failures"] = false_failures(out, procs)
    switches = _switch_status(prefix)
    summary["input_rejoins"] = None if switches is None else input_rejoins(switches)
    summary["timer_slack"] = _slacks(prefix, procs, switches or {})
    judge(summary).annotate(summary)
    (out / "run.json").write_text(json.dumps(summary, indent=2))
    say(verdict_line(summary))
    return summary


def _switch_status(prefix: str) -> dict[str, Any] | None:
    """Every switch's ``onepipe_status`` after the run; None when one does not answer."""
    from ..io.control import ControlError

    try:
        return status_all(prefix)
    except (RuntimeError, OSError, ControlError):
        return None


def input_rejoins(switches: dict[str, Any]) -> dict[str, int]:
    """``{"switch/port/input": rejoins}`` of every input that timed out and spoke again since 1Pipe
    was enabled (``onepipe_status``): silent for the input timeout while it still ran (§6)."""
    out = {}
    for sw, st in switches.items():
        for port, p in ((st or {}).get("ports") or {}).items():
            for key, inp in (p.get("inputs") or {}).items():
                if inp.get("rejoins"):
                    out[f"{sw}/{port}/{key}"] = int(inp["rejoins"])
    return out


def _slacks(prefix: str, procs: dict[str, Any], switches: dict[str, Any]) -> dict[str, Any]:
    """The timer slack the run's timers took (docs/onepipe-reliable.md "Timers on a loaded
    host"): the largest any process's ACK timeout had, each switch's timers now, and the
    controller's answer timeout now."""
    out: dict[str, Any] = {"processes_max_ns": max((p.get("counters", {}).get("timer_slack_max_ns", 0)
                                                    for p in procs.values()), default=0),
                           "switches": {sw: st.get("timers") for sw, st in switches.items() if st is not None}}
    st = controller_status(prefix)
    if st is not None and "error" not in st:
        out["controller"] = st.get("timers_in_force")
    return out


def _fresh_out(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    from .live import AUX_DIRS

    for old in [*out.glob("*.jsonl"), *(f for d in AUX_DIRS for f in out.glob(f"{d}/*.jsonl")), out / "run.json"]:
        old.unlink(missing_ok=True)  # a log left from an earlier run would join the check
    return out


#: the live failure timeout, in beacon intervals (300 ms at the live T_beacon of 3 ms)
LIVE_FAILURE_BEACONS = 100


def _enable(prefix: str, state: RunState, params: OnePipeParams | None, controller: Any,
            say: Callable[[str], None]) -> OnePipeParams:
    """(Re-)enable 1Pipe in every switch; the parameters the processes must use.

    Every run starts from fresh switch state (a previous run's inputs would hold the barrier
    until they time out), with the parameters the switches run if 1Pipe is on (``netstack
    onepipe enable --t-beacon-ms ...``): the processes must beacon at the switches' T_beacon."""
    on = [st for st in status_all(prefix).values() if st is not None]
    if on and params is None:
        params = OnePipeParams(**on[0]["params"])
    params = params or OnePipeParams()
    if params.failure_beacons == 0:
        # live Python processes on a shared machine stall for tens of ms (GC, the scheduler): a
        # failure is final for the process, so the live failure timeout is longer than the
        # paper's 10 T_beacon (OnePipeParams.failure_beacons)
        params = params.with_(failure_beacons=max(params.timeout_beacons, LIVE_FAILURE_BEACONS))
    say(f"{'re-' if on else ''}enabling 1Pipe in {', '.join(switches_of(state))} (T_beacon "
        f"{params.t_beacon_ns / 1e6:g} ms{', under the controller ' + controller[0] if controller else ''})")
    # best effort: the switches' default (under the controller when the topology has one, which
    # then hears of the timed-out inputs of processes it never registered, and releases them)
    enable_all(prefix, params, controller=True if controller is not None else None)
    return params


def _spawn(prefix: str, state: RunState, placed: dict[str, list[str]], addrs: dict[str, Addr],
           clocks: dict[str, tuple[int, float]], common: list[str], reliable: bool,
           out: Path, start_at: float | None, run_args: dict[str, Any]) -> dict[str, subprocess.Popen[str]]:
    """One ``python -m netstack.onepipe.live`` per process in its host's namespace; the pid file."""
    from ..runtime import node_exec_argv

    running: dict[str, subprocess.Popen[str]] = {}
    hosts = {p: h for h, ps in placed.items() for p in ps}
    started = time.time()
    try:
        for name, host in hosts.items():
            offset, drift = clocks.get(host, (0, 0.0))
            bcast = str(ipaddress.ip_interface(state.hosts[host]).network.broadcast_address)
            # ``ip netns exec`` (and ``nsenter``) exec the command: the pid is the process's own
            argv = node_exec_argv(state, host, [
                sys.executable, "-m", "netstack.onepipe.live", "--procs", name, *common,
                "--clock-offset-ns", str(offset), "--clock-drift-ppm", str(drift), "--broadcast", bcast,
                "--clock-file", str(clock_file(prefix, host))])
            running[name] = toolproc.popen(argv)
            # every process in the file as soon as it runs: kill can reach it at once
            _write_procs_file(prefix, {
                "state": "running" if len(running) == len(hosts) else "starting", "out": str(out),
                "runner": os.getpid(), "reliable": reliable, "started": started, "start_at": start_at,
                "seconds": run_args["seconds"], "drain": run_args["drain"],
                "processes": {n: {"pid": running[n].pid, "host": hosts[n], "addr": f"{addrs[n][0]}:{addrs[n][1]}"}
                              for n in running}})
    except BaseException:
        for proc in running.values():
            toolproc.kill(proc)
        raise
    return running


def _collect(running: dict[str, subprocess.Popen[str]], timeout: float) -> tuple[dict[str, Any], list[str]]:
    """``({process: its live summary}, [processes killed by SIGKILL])``; OnePipeControlError when
    another failed (a crash, a timeout)."""
    results: dict[str, Any] = {}
    killed: list[str] = []
    deadline = time.monotonic() + timeout
    errors = []
    try:
        for name, proc in running.items():
            done = toolproc.finish(proc, max(1.0, deadline - time.monotonic()))
            if done.timed_out:
                errors.append(f"{name}: did not finish in time")
                continue
            if done.returncode == -signal.SIGKILL:
                killed.append(name)  # netstack onepipe kill, or anyone's kill -9: a crash the run is about
                continue
            doc = done.json()
            if done.returncode != 0 or doc is None:
                errors.append(f"{name}: exit {done.returncode}: {done.err.strip()[-400:]}")
                continue
            results.update(doc["processes"])
    finally:
        for proc in running.values():
            toolproc.kill(proc)
    if errors:
        raise OnePipeControlError("1Pipe processes failed: " + "; ".join(errors))
    return results, killed


def _summary(out: Path, procs: dict[str, Any], killed: list[str], placed: dict[str, list[str]],
             addrs: dict[str, Addr], clocks: dict[str, tuple[int, float]], params: OnePipeParams,
             run_args: dict[str, Any]) -> dict[str, Any]:
    """The run's document: every count from the logs (:func:`.accounting.tally`, the one count
    ``check`` and ``status`` use too), every process's own report (killed ones: ``killed`` true)."""
    from .accounting import COUNTERS, tally

    t = tally(out)
    incs = incarnations(out)
    names = sorted({*procs, *killed, *(p for ps in placed.values() for p in ps)}, key=_proc_number)
    per: dict[str, Any] = {}
    for n in names:
        own = procs.get(n, {"killed": True} if n in killed else {"missing": True})
        per[n] = {**own, **t.per_sender.get(n, dict.fromkeys(COUNTERS, 0)), "received": t.received.get(n, 0),
                  "incarnation": incs.get(n, 1)}
    summary = {"tool": "netstack onepipe run", "out": str(out), **run_args, "mode": mode_of(run_args["reliable"]),
               "params": params.to_dict(), "placement": placed,
               "addresses": {p: f"{ip}:{port}" for p, (ip, port) in addrs.items()},
               "clocks": {h: {"offset_ns": o, "drift_ppm": d} for h, (o, d) in clocks.items()},
               **t.totals, "killed": sorted(killed, key=_proc_number), "processes": per}
    (out / "run.json").write_text(json.dumps(summary, indent=2))  # (again with the verdict: _judge)
    return summary


def incarnations(out: Path) -> dict[str, int]:
    """Each process's last incarnation, from the registrations in ``proc-fail/`` (reliable runs;
    a process that never registered is not listed: 1)."""
    from .accounting import read_lines

    got: dict[str, int] = {}
    for p in sorted((out / "proc-fail").glob("*.jsonl")):
        for e in read_lines(p):
            if type(e.get("registered")) is int and e.get("name") in (None, p.stem):
                got[p.stem] = e["registered"]
    return got


def _proc_number(name: str) -> int:
    return int(name[1:]) if name[1:].isdigit() else 0


# --------------------------------------------------------------------------- the controller


def controllers(state: RunState) -> list[Daemon]:
    """The run's controller daemons (``state.daemons`` of kind :data:`CONTROLLER_KIND`)."""
    return [d for d in state.daemons if d.kind == CONTROLLER_KIND and d.control]


def controller_addr(state: RunState, daemon: Daemon) -> Addr:
    """Where processes reach a controller daemon unless its status says (``address``): its
    node's address, 1Pipe's port."""
    return state.host_ip(daemon.node), PORT


def controller_status(prefix: str, state: RunState | None = None) -> dict[str, Any] | None:
    """The controller's ``status`` (``{"node", "addr", "role", "view", ...}``; the leader's when
    there are replicas), ``{"node", "addr", "error"}`` when it does not answer, None when the
    topology has no controller."""
    from ..io.control import ControlError, request
    from ..runtime import load_state

    state = state if state is not None else load_state(prefix)
    found = []
    for d in controllers(state):
        ip, port = controller_addr(state, d)
        where = {"node": d.key, "addr": f"{ip}:{port}"}
        try:
            st = request(d.control, "status", timeout=2.0)
        except (ControlError, OSError, ValueError) as exc:
            found.append({**where, "error": f"not answering ({exc})"})
            continue
        st = st if isinstance(st, dict) else {"status": st}
        found.append({**where, **st, "addr": st.get("address") or where["addr"]})
    if not found:
        return None
    return next((f for f in found if f.get("role") == "leader"), next((f for f in found if "error" not in f),
                                                                      found[0]))


def find_controller(prefix: str, state: RunState) -> tuple[str, Addr]:
    """``(node, address)`` of the controller reliable processes register with; a clear
    OnePipeControlError when there is none, or it does not answer."""
    st = controller_status(prefix, state)
    if st is None:
        raise OnePipeControlError(
            f"--reliable needs the 1Pipe controller: a topology node of kind {CONTROLLER_KIND!r}, and none runs "
            f"under prefix {prefix!r} (the shipped onepipe topology has one: netstack up onepipe)")
    if "error" in st:
        raise OnePipeControlError(f"the 1Pipe controller {st['node']} is {st['error']}: --reliable needs it")
    ip, _, port = st["addr"].rpartition(":")
    return st["node"], (ip, int(port))


# --------------------------------------------------------------------------- the run in progress


def procs_file(prefix: str) -> Path:
    from ..runtime import run_dir

    return run_dir(prefix) / PROCS_FILE


def _write_procs_file(prefix: str, info: dict[str, Any]) -> None:
    path = procs_file(prefix)
    path.parent.mkdir(parents=True, exist_ok=True)  # a container deployment has no run directory here
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info, indent=2))
    tmp.replace(path)  # whole or not at all: kill may read it any time


def running_since(prefix: str, since: float) -> dict[str, Any] | None:
    """The run under ``prefix`` if it started at or after ``since`` (wall clock) and every one of
    its processes has been spawned (state ``running``); else None. (The file outlives its run,
    ``finished``, and says ``starting`` before the processes are up.)"""
    info = read_procs_file(prefix)
    ok = info is not None and info.get("state") == "running" and float(info.get("started") or 0) >= since
    return info if ok else None


def read_procs_file(prefix: str) -> dict[str, Any] | None:
    """The run in progress under ``prefix`` (:data:`PROCS_FILE`), or None."""
    try:
        info = json.loads(procs_file(prefix).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return info if isinstance(info, dict) and isinstance(info.get("processes"), dict) else None


def process_alive(pid: int, name: str) -> bool:
    """Whether ``pid`` is still 1Pipe process ``name`` of a run (not dead, not a zombie waiting
    for the runner, not another program that got the pid since)."""
    if procstat.state(pid) in ("", "Z"):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    try:
        i = argv.index(b"--procs")
    except ValueError:
        return False
    return b"netstack.onepipe.live" in argv and i + 1 < len(argv) and name in argv[i + 1].decode().split(",")


#: a run's states, as ``kill`` and ``status`` name them (:func:`run_phase`)
PHASES = ("no run", "starting", "running", "draining", "finished", "aborted")


def _end_procs_file(prefix: str, state: str, keep: bool = True) -> None:
    """Mark the run's file ``finished`` or ``aborted`` (kept: ``kill`` then says so, and ``down``
    removes it with the run directory). Not ``keep`` (a container deployment, whose run directory
    on this machine holds only this file, and which docker-compose down does not know of): the
    file and the directory it made are removed instead, and ``kill`` then finds no run."""
    info = read_procs_file(prefix)
    if info is None or info.get("runner") != os.getpid():
        return
    with contextlib.suppress(OSError):
        if keep:
            _write_procs_file(prefix, {**info, "state": state, "ended": time.time()})
        else:
            procs_file(prefix).unlink()
            procs_file(prefix).parent.rmdir()  # (only when empty: nothing else of anyone's goes)


def _runner_alive(pid: Any) -> bool:
    return isinstance(pid, int) and Path(f"/proc/{pid}").exists()


def run_phase(info: dict[str, Any] | None, now: float, runner_alive: Callable[[Any], bool] = _runner_alive) -> str:
    """Where the run under a prefix is (one of :data:`PHASES`), from its file (:data:`PROCS_FILE`)
    at wall-clock ``now``: ``starting`` until its processes scatter, ``running`` while they do,
    ``draining`` after (they receive for ``--drain`` more, then end, and the runner judges the
    run), ``finished`` or ``aborted`` once the runner said so; a runner gone without a word
    (killed itself) left a finished run."""
    if info is None:
        return "no run"
    state = info.get("state")
    if state in ("finished", "aborted"):
        return str(state)
    if not runner_alive(info.get("runner")):
        return "finished"
    start = info.get("start_at")
    if state == "starting" or not isinstance(start, (int, float)) or now < start:
        return "starting"
    return "running" if now < start + float(info.get("seconds") or 0) else "draining"


def _refuse_a_second_run(prefix: str) -> None:
    info = read_procs_file(prefix)
    if info is None:
        return
    phase = run_phase(info, time.time())
    alive = [n for n, p in info["processes"].items() if process_alive(p["pid"], n)]
    if alive or phase in ("starting", "running", "draining"):
        raise OnePipeControlError(f"a 1Pipe run is already in progress under prefix {prefix!r} ({phase}, "
                                  f"{len(alive)} processes, logs in {info.get('out')}): wait for it to end")


def choose_victim(prefix: str, info: dict[str, Any] | None, phase: str, proc: str,
                  alive: Callable[[int, str], bool] = lambda pid, name: process_alive(pid, name)) -> tuple[str, Any]:
    """``(name, its entry)`` of the process ``kill`` should SIGKILL, or NotFound naming the run's
    state: no run; the run starting (its processes not up yet), finished or aborted; no such
    process; one that already ended (on its own while the run drains, or died earlier)."""
    from ..errors import NotFound

    where = f"under prefix {prefix!r}"
    if info is None or phase == "no run":
        raise NotFound(f"no 1Pipe run {where} (netstack onepipe run)")
    if phase in ("finished", "aborted"):
        raise NotFound(f"the 1Pipe run {where} has {'finished' if phase == 'finished' else 'aborted'} "
                       f"(logs in {info.get('out')}): nothing to kill")
    procs = info["processes"]
    name = proc if proc in procs else next((n for n, p in procs.items() if p.get("addr") == proc), None)
    if name is None:
        if phase == "starting":
            raise NotFound(f"the 1Pipe run {where} is starting: {proc!r} is not up yet "
                           f"({len(procs)} processes so far); try again in a moment")
        raise NotFound(f"no process {proc!r} in the 1Pipe run {where} ({phase}): "
                       f"{', '.join(sorted(procs, key=_proc_number))} (a name, or its ip:port)")
    p = procs[name]
    if not alive(p["pid"], name):
        what = f"{name} (pid {p['pid']}, {p['addr']} on {p['host']})"
        if phase == "draining":
            raise NotFound(f"{what} has ended: the run {where} is draining (its processes end on their own "
                           "after the scattering and the drain)")
        raise NotFound(f"{what} is already dead: the run {where} is {phase}")
    return name, p


def kill(prefix: str, proc: str, wait_s: float = 15.0) -> dict[str, Any]:
    """SIGKILL process ``proc`` (``p3`` or ``ip:port``) of the run in progress under ``prefix``:
    ``{"name", "pid", "host", "addr", "state"}``. A run still starting is waited for (up to
    ``wait_s``) until the process is up; otherwise NotFound naming the run's state
    (:func:`choose_victim`)."""
    from ..runtime import load_state

    load_state(prefix)  # no testbed: its own clear error
    deadline = time.monotonic() + wait_s
    while True:
        info = read_procs_file(prefix)
        phase = run_phase(info, time.time())
        starting = phase == "starting" and info is not None and proc not in info["processes"] and not any(
            p.get("addr") == proc for p in info["processes"].values())
        if not starting or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    name, p = choose_victim(prefix, info, phase, proc)
    try:
        os.kill(p["pid"], signal.SIGKILL)
    except ProcessLookupError:
        from ..errors import NotFound

        raise NotFound(f"{name} (pid {p['pid']}, {p['addr']} on {p['host']}) is already dead: the run under "
                       f"prefix {prefix!r} is {phase}") from None
    return {"name": name, **p, "state": phase}


__all__ = ["CLOCK_FILE", "CONTROLLER_KIND", "PROCS_FILE", "clock_file", "controller_addr", "controller_status",
           "controllers", "end_hosts", "find_controller", "host_clocks", "input_rejoins", "key_file", "kill",
           "PHASES", "abort_reason", "choose_victim", "incarnations", "mode_of", "parse_loss", "place",
           "process_alive", "read_procs_file", "run", "run_phase", "running_since", "write_aborted"]
