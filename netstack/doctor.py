"""``netstack doctor``: measure this machine and say which live experiments will be trustworthy here.

A live run on a starved machine is not evidence (:mod:`netstack.validity`), and a run on a machine
without network namespaces or nftables does not happen at all. The doctor measures, in a few
seconds, what the live runs depend on:

- **scheduling delay**: a uvloop loop (what the daemons run) and a plain asyncio loop sampled by
  :func:`netstack.looplag.monitor`, and a :class:`~netstack.looplag.ThreadSampler` (what the
  blocking traffic tools run);
- **timer granularity**: how long ``asyncio.sleep`` of 0.1, 1 and 5 ms really takes under each loop
  (docs/architecture.md: uvloop truncates to whole milliseconds);
- **CPU**: the usable CPUs, the share of one core a busy loop gets, and how idle the machine's
  CPUs were while the loops were measured (/proc/stat, steal included);
- **load**: /proc/loadavg and the other netstack testbeds running here (read only);
- **capabilities**: root; a throwaway network namespace (created, given a veth, an nftables netdev
  table like ``netstack impair``'s and a netem qdisc, then deleted); docker, etcd, tcpdump; the
  versions of Python, uvloop and pyroute2.

Then :func:`assess` holds the measurements against :data:`NEEDS`, one row per experiment with the
limits its own protocol timers set. Measuring (:func:`measure`) and judging (:func:`assess`) are
separate so that the verdicts can be tested on hand-made measurements.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import importlib.metadata
import math
import os
import platform
import secrets
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import looplag
from .topo.nsenter import NETNS_DIR
from .validity import DEFAULT_MAX_MS, DEFAULT_P99_MS, EXIT_FAILED, EXIT_OK

OK, WARN, FAIL = "OK", "WARN", "FAIL"
_RANK = {OK: 0, WARN: 1, FAIL: 2}

#: the throwaway namespace's name: this, then random hex. No dash, so it can never look like a
#: netstack node's ``<prefix>-<node>`` namespace (netstack.topo.netns), and no other run's cleanup
#: or listing ever considers it.
PROBE_PREFIX = "nsdoctor"
#: the nft "prefix" of the probe table (netstack.topo.impair.nft_table_name); only ever inside the
#: throwaway namespace
PROBE_NFT_PREFIX = "doctor"
#: what each ``asyncio.sleep`` of the timer measurement asks for, in seconds
TIMER_ASKS_S = (0.0001, 0.001, 0.005)
#: a sleep may end this much later than asked before the timers look starved: the ~1 ms timer
#: granularity both loops have (docs/architecture.md "The live runtime"), plus as much again
TIMER_SLACK_MS = 2.0
#: the share of one core a busy loop must get for the live experiments: the documented results
#: were measured on this 2-core VM with about one core free for the experiment's processes
#: (README's demo table; docs/testbed.md's forwarding benchmark pins the forwarders to one core)
ONE_CORE = 0.9
#: the live experiments run several processes at once (daemons, traffic tools): at least two CPUs,
#: the development machine's count, on which every documented number was measured
MIN_CPUS = 2


@dataclass(frozen=True)
class Plan:
    """How long each measurement runs (``--quick`` or the default)."""

    uvloop_s: float
    asyncio_s: float
    timer_reps: int
    spin_s: float
    command_timeout_s: float


QUICK = Plan(uvloop_s=0.8, asyncio_s=0.3, timer_reps=10, spin_s=0.4, command_timeout_s=3.0)
FULL = Plan(uvloop_s=3.0, asyncio_s=1.2, timer_reps=40, spin_s=1.0, command_timeout_s=6.0)


# =========================================================================== the requirements


@dataclass(frozen=True)
class Need:
    """What one experiment needs from the machine; a limit of None: none of its own."""

    title: str
    #: scheduling-delay limits (ms), held against the worst of ``loops``
    p99_ms: float | None = None
    max_ms: float | None = None
    #: which of the doctor's samplers stand for the experiment's processes: "uvloop" (the switch
    #: daemons, 1Pipe's processes) and "thread" (blocking tools: netstack.traffic, T/C-SACK's and
    #: TCD's ends, DTA's reporter)
    loops: tuple[str, ...] = ("uvloop", "thread")
    core_share: float = 0.0
    cpus: int = 1
    caps: tuple[str, ...] = ()
    #: True: an extra that needs something this machine may lack; missing it is a WARN (the
    #: experiment cannot start and says why), not an untrustworthy result
    optional: bool = False
    #: where the limits come from
    source: str = ""


_LIVE = ("root", "netns")


def _run_limits() -> tuple[dict[str, float], ...]:
    """The scheduling-delay limits the live runs themselves apply (netstack.validity), so that
    the doctor's verdict and a run's own never disagree: LinkGuardian's stream, 1Pipe (best
    effort, the shipped parameters), TCD (T_on^max at the live scale), DTA, T/C-SACK."""
    from .dta.verdict import lag_limits as dta_limits
    from .onepipe.params import OnePipeParams
    from .onepipe.verdict import limits as onepipe_limits
    from .sim.scenarios import STREAM_LAG_LIMITS
    from .tcd.verdict import lag_limits as tcd_limits
    from .tcsack.params import TcsParams
    from .tcsack.verdict import lag_limits as tcsack_limits

    tcd = tcd_limits(TCD_T_ON_MAX_NS)
    return (dict(STREAM_LAG_LIMITS), onepipe_limits(OnePipeParams(), reliable=False),
            {"p99_ms": tcd.p99_ms, "max_ms": tcd.max_ms}, dta_limits(), tcsack_limits(TcsParams().t_ns))


#: T_on^max of TCD's §3.1 scenario at the live x1000 scale (netstack/tcd/scenarios.py)
TCD_T_ON_MAX_NS = 72_600_000
_LG, _ONEPIPE, _TCD, _DTA, _TCSACK = _run_limits()

#: Every experiment's requirements, in one place. Live times are the papers' x 1000
#: (docs/architecture.md "Time and scale"); "well below" a timer is taken as half of it.
NEEDS: dict[str, Need] = {
    "generic": Need(
        "any live run (the generic limits)", p99_ms=DEFAULT_P99_MS, max_ms=DEFAULT_MAX_MS, caps=(*_LIVE, "python"),
        source="netstack/validity.py DEFAULT_P99_MS and DEFAULT_MAX_MS: what every live run's scheduling-delay "
               "check holds each process to; namespaces need root; the daemons run on uvloop, built with pyroute2"),
    "linkguardian": Need(
        "LinkGuardian live (demo, bench linkguardian)", **_LG, core_share=ONE_CORE, cpus=MIN_CPUS,
        caps=(*_LIVE, "loss_injection"),
        source="the limits a live stream's run holds every process to (netstack/sim/scenarios.py "
               "STREAM_LAG_LIMITS): p99 well inside the scaled ackNoTimeout, 7 ms, which the switch daemon "
               "extends by twice its recent delay; no stall longer than the 200 KB buffers hold at the "
               "stream's rate; a core for two switch daemons and the traffic tools; corruption by nft or netem"),
    "onepipe": Need(
        "1Pipe (onepipe run --procs 8)", **_ONEPIPE, loops=("uvloop",), core_share=ONE_CORE, cpus=MIN_CPUS,
        caps=_LIVE,
        source="the limits onepipe run holds every process to (netstack/onepipe/verdict.py limits, best effort): "
               "p99 and max within the input timeout, 10 beacon intervals = 30 ms live, the shortest timer that "
               "declares anything; a core for 8 processes and the switch daemons, all on uvloop"),
    "tcd": Need(
        "TCD live (tcd run single|multi)", **_TCD, core_share=ONE_CORE, cpus=MIN_CPUS, caps=_LIVE,
        source="the limits tcd run holds every process to (netstack/tcd/verdict.py lag_limits): max T_on^max at "
               "the live scale, 72.6 ms, p99 a quarter of it; a core for 4 switch daemons and 20 hosts' tools"),
    "dta": Need(
        "DTA (dta report)", **_DTA, core_share=ONE_CORE, cpus=MIN_CPUS, caps=_LIVE,
        source="the limits dta report holds every process to (netstack/dta/verdict.py lag_limits): max the "
               "translator's window time-out, 50 ms; a core for the reporter, the switch daemons and the collector"),
    "tcsack": Need(
        "T/C-SACK (tcsack transfer)", **_TCSACK, core_share=ONE_CORE, cpus=MIN_CPUS, caps=_LIVE,
        source="the limits tcsack transfer holds every process to (netstack/tcsack/verdict.py lag_limits): p99 "
               "within T = 2 ms, no tighter than the live timers' 5 ms granularity; a core for both ends and the "
               "switch daemons"),
    "containers": Need(
        "containers (docker-compose, Swarm)", caps=("root", "docker"), optional=True,
        source="docs/containers.md: a Docker engine that answers (and the row of the protocol run in them)"),
    "onepipe-etcd": Need(
        "1Pipe controller on etcd (up --store etcd)", caps=("etcd",), optional=True,
        source="docs/onepipe-reliable.md: the etcd binary runs a 3-member cluster (and the 1Pipe row)"),
    "netem": Need(
        "netem impairments (--backend netem, a host's delay)", caps=("root", "netem"), optional=True,
        source="docs/testbed.md Impairment: without sch_netem, loss and corruption use nft and a switch's "
               "egress is shaped by its own model; only a host's egress needs netem"),
    "capture-filter": Need(
        "capture --filter", caps=("tcpdump",), optional=True,
        source="netstack/capture.py compiles the BPF filter with tcpdump -ddd"),
}

#: what each capability name in :data:`NEEDS` is (a check's name, and "no ..." in a verdict's reason)
CAP_TITLES = {"root": "root", "netns": "network namespaces", "nft": "nftables netdev tables",
              "netem": "netem qdisc", "loss_injection": "nft or netem (loss, corruption)",
              "docker": "Docker engine", "etcd": "etcd", "tcpdump": "tcpdump",
              "python": "Python, uvloop, pyroute2"}


# =========================================================================== measuring: time


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))]


async def _lag_window(seconds: float) -> dict[str, Any]:
    hist = looplag.LagHistogram(time.monotonic_ns())
    task = asyncio.create_task(looplag.monitor(hist))
    await asyncio.sleep(seconds)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return looplag.summary(hist.snapshot())


def _cpu_ticks() -> list[int] | None:
    """The machine's CPU time so far (/proc/stat "cpu": user nice system idle iowait irq softirq
    steal), or None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    return [int(x) for x in fields[1:9]] + [0] * max(0, 9 - len(fields))


def cpu_use(before: Sequence[int] | None, after: Sequence[int] | None, cpus: int) -> dict[str, Any]:
    """How the machine's CPUs were used between two :func:`_cpu_ticks` readings: the busy and
    stolen shares and the cores left idle (everyone's work counts, ours too, which is small here)."""
    if before is None or after is None:
        return {"busy_frac": None, "steal_frac": None, "free_cores": None}
    d = [a - b for a, b in zip(after, before, strict=True)]
    total = sum(d)
    if total <= 0:
        return {"busy_frac": None, "steal_frac": None, "free_cores": None}
    idle = d[3] + d[4]  # idle and iowait: a CPU that could have run us
    return {"busy_frac": round(1 - idle / total, 4), "steal_frac": round(d[7] / total, 4),
            "free_cores": round(cpus * idle / total, 2)}


def loop_lag(plan: Plan) -> dict[str, Any]:
    """Scheduling delay of a uvloop loop, then of a plain asyncio loop, with a blocking thread
    sampled throughout; and how busy the machine's CPUs were meanwhile."""
    import uvloop

    ticks0 = _cpu_ticks()
    t0 = time.monotonic()
    with looplag.ThreadSampler() as thread:
        # uvloop.run, not uvloop.install: a global uvloop policy breaks pyroute2's netlink, which
        # the capability probe uses afterwards (docs/architecture.md "The live runtime")
        uv = uvloop.run(_lag_window(plan.uvloop_s))
        aio = asyncio.run(_lag_window(plan.asyncio_s))
    wall = time.monotonic() - t0
    cpus = os.cpu_count() or 1
    return {"uvloop": uv, "asyncio": aio, "thread": thread.summary(), "seconds": round(wall, 2),
            "machine_cpu": cpu_use(ticks0, _cpu_ticks(), cpus)}


async def _sleeps(reps: int) -> list[dict[str, Any]]:
    took: dict[float, list[float]] = {ask: [] for ask in TIMER_ASKS_S}
    for _ in range(reps):
        for ask in TIMER_ASKS_S:  # interleaved, so that a burst of load hits every size alike
            t0 = time.monotonic_ns()
            await asyncio.sleep(ask)
            took[ask].append((time.monotonic_ns() - t0) / 1e6)
    out = []
    for ask, values in took.items():
        values.sort()
        out.append({"asked_ms": ask * 1e3, "p50_ms": round(_percentile(values, 0.5), 3),
                    "p99_ms": round(_percentile(values, 0.99), 3), "max_ms": round(values[-1], 3),
                    "samples": len(values)})
    return out


def timer_granularity(plan: Plan) -> dict[str, Any]:
    """How long ``asyncio.sleep(ask)`` really takes under uvloop and under plain asyncio."""
    import uvloop

    return {"uvloop": uvloop.run(_sleeps(plan.timer_reps)), "asyncio": asyncio.run(_sleeps(plan.timer_reps))}


def core_share(seconds: float) -> dict[str, Any]:
    """The share of one core a busy loop gets: its thread's CPU time over the wall time it spun.
    1.0 on an idle machine; on a loaded one the scheduler hands the core to others meanwhile."""
    wall0, cpu0 = time.perf_counter(), time.thread_time()
    while time.perf_counter() - wall0 < seconds:
        pass
    wall, cpu = time.perf_counter() - wall0, time.thread_time() - cpu0
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - Linux has it
        usable = os.cpu_count() or 1
    return {"core_share": round(min(1.0, cpu / wall), 3), "spin_s": round(wall, 2), "cpus": os.cpu_count() or 1,
            "usable_cpus": usable}


def load() -> dict[str, Any]:
    """/proc/loadavg and the netstack testbeds running here, found by their namespaces' markers
    (netstack.topo.netns; reading only)."""
    try:
        with open("/proc/loadavg") as f:
            parts = f.read().split()
        loadavg: list[float] | None = [float(x) for x in parts[:3]]
        runnable = parts[3]
    except (OSError, ValueError, IndexError):
        loadavg, runnable = None, None
    testbeds: list[str] = []
    namespaces = 0
    if os.geteuid() == 0:  # a namespace's marker is read from inside it, which needs root
        from .topo.netns import running_namespaces

        found = running_namespaces()
        namespaces = len(found)
        testbeds = sorted({prefix for prefix, _node in found.values()})
    return {"loadavg": loadavg, "runnable": runnable, "testbeds": testbeds, "namespaces": namespaces,
            "looked": os.geteuid() == 0}


# =========================================================================== measuring: capabilities


def _run(argv: list[str], timeout: float, stdin: str | None = None) -> tuple[int, str, str]:
    """Run a command; ``(returncode, stdout, stderr)``, 127 when it is not there, 124 on time-out."""
    try:
        p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, "", f"{' '.join(argv[:2])}: no answer within {timeout:g} s"
    return p.returncode, p.stdout, p.stderr


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _veth(ns: str) -> dict[str, Any]:
    """A veth pair inside ``ns`` through pyroute2's netlink, as ``netstack up`` makes its links."""
    from .topo.nsenter import iproute

    try:
        with iproute(ns) as ipr:
            ipr.link("add", ifname="doc0", kind="veth", peer="doc1")
            for name in ("doc0", "doc1"):
                ipr.link("set", index=ipr.link_lookup(ifname=name)[0], state="up")
    except Exception as exc:  # a netlink refusal, whatever its class: the capability is missing
        return {"ok": False, "detail": f"veth in a namespace (pyroute2): {exc}"}
    return {"ok": True, "detail": "veth pair via pyroute2"}


def _nft_in(ns: str, timeout: float) -> dict[str, Any]:
    """What ``netstack impair --backend nft`` installs (netstack.topo.impair.nft_script: a netdev
    egress chain with random loss and a corrupting payload rewrite), on the probe's veth."""
    from .topo.impair import nft_script

    rc, out, err = _run(["nft", "--version"], timeout)
    # "nftables v1.0.6 (Lester Gooch #5)": the version word
    version = next((w for w in out.split() if w.startswith("v")), out.strip()) if rc == 0 else None
    if version is None:
        return {"ok": False, "version": None, "detail": "nft not installed (apt-get install nftables)"}
    script = nft_script(PROBE_NFT_PREFIX, "doc0", corrupt=0.01, loss=0.001)
    rc, out, err = _run(["ip", "netns", "exec", ns, "nft", "-f", "-"], timeout, stdin=script)
    if rc != 0:
        return {"ok": False, "version": version, "detail": f"netdev egress table refused: {_last_line(err or out)}"}
    return {"ok": True, "version": version, "detail": f"{version}; netdev egress table with loss and corruption"}


def _netem_kernel(timeout: float) -> dict[str, Any]:
    """What the kernel says about sch_netem before anything is tried: its build config and modprobe."""
    config = None
    with contextlib.suppress(OSError), gzip.open("/proc/config.gz", "rt") as f:
        for line in f:
            if line.startswith(("CONFIG_NET_SCH_NETEM=", "# CONFIG_NET_SCH_NETEM ")):
                config = line.strip()
                break
    rc, _out, _err = _run(["modprobe", "-n", "sch_netem"], timeout)
    modprobe = "found" if rc == 0 else ("no modprobe" if rc == 127 else "not found")
    return {"config": config, "modprobe": modprobe}


def _netem_in(ns: str, timeout: float) -> dict[str, Any]:
    """A real netem qdisc on the probe's veth: the only proof the kernel runs netem."""
    kernel = _netem_kernel(timeout)
    rc, out, err = _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "doc0", "root", "netem",
                         "delay", "1ms"], timeout)
    if rc == 0:
        return {"ok": True, "detail": "tc qdisc add ... netem: ok", **kernel}
    said = _last_line(err or out).removeprefix("Error: ") or f"exit {rc}"
    return {"ok": False, "error": said, "detail": f"tc netem: {said.rstrip('.')}; modprobe -n: {kernel['modprobe']}",
            **kernel}


def probe_namespace(timeout: float) -> dict[str, Any]:
    """Create a throwaway namespace (unique name), try a veth, an nft netdev table and a netem
    qdisc in it, and delete it again, whatever happened. ``removed`` says it is gone."""
    if os.geteuid() != 0:
        why = {"ok": False, "detail": "not tried: needs root"}
        return {"netns": {**why, "namespace": None, "removed": None}, "nft": dict(why), "netem": dict(why)}
    if shutil.which("ip") is None:
        why = {"ok": False, "detail": "not tried: no ip binary (apt-get install iproute2)"}
        return {"netns": {**why, "namespace": None, "removed": None}, "nft": dict(why), "netem": dict(why)}
    name = f"{PROBE_PREFIX}{secrets.token_hex(4)}"
    path = os.path.join(NETNS_DIR, name)
    skipped = {"ok": False, "detail": "not tried: no namespace"}
    out: dict[str, Any] = {"nft": dict(skipped), "netem": dict(skipped),
                           "netns": {"ok": False, "detail": "interrupted", "namespace": name}}
    created = False
    try:
        rc, _o, err = _run(["ip", "netns", "add", name], timeout)
        created = rc == 0 or os.path.exists(path)  # a time-out may still have made it
        if rc != 0:
            out["netns"] = {"ok": False, "detail": f"ip netns add: {_last_line(err)}", "namespace": name}
            return out
        veth = _veth(name)
        out["netns"] = {"ok": veth["ok"], "namespace": name,
                        "detail": f"created and deleted {name}; {veth['detail']}"}
        if veth["ok"]:
            out["nft"] = _nft_in(name, timeout)
            out["netem"] = _netem_in(name, timeout)
    finally:
        if created:
            # deleting the namespace also removes its veths, nft tables and qdiscs
            _run(["ip", "netns", "delete", name], timeout)
        out["netns"]["removed"] = not os.path.exists(path)
    return out


def _docker(timeout: float) -> dict[str, Any]:
    rc, out, err = _run(["docker", "version", "--format", "{{.Client.Version}} {{.Server.Version}}"], timeout)
    if rc == 127:
        return {"ok": False, "client": None, "server": None, "detail": "no docker client"}
    versions = out.split()
    client = versions[0] if versions else None
    server = versions[1] if rc == 0 and len(versions) > 1 else None
    if server is None:
        return {"ok": False, "client": client, "server": None, "error": _last_line(err) or f"exit {rc}",
                "detail": f"client {client or '?'}; daemon not answering"}
    return {"ok": True, "client": client, "server": server, "detail": f"client {client}, daemon {server}"}


def _etcd(timeout: float) -> dict[str, Any]:
    rc, out, err = _run(["etcd", "--version"], timeout)
    first = (out.strip().splitlines() or [""])[0]
    if rc != 0:
        return {"ok": False, "version": None, "detail": _last_line(err) or f"etcd --version: exit {rc}"}
    version = first.split(":", 1)[1].strip() if ":" in first else first
    return {"ok": True, "version": version, "detail": f"etcd {version}"}


def _tcpdump(timeout: float) -> dict[str, Any]:
    """tcpdump present and compiling a filter the way ``netstack capture --filter`` does."""
    from .capture import CaptureError, compile_filter

    rc, out, err = _run(["tcpdump", "--version"], timeout)
    said = (out or err).strip().splitlines()
    # "tcpdump version 4.99.3": the last word
    version = said[0].split()[-1] if rc == 0 and said and said[0].split() else None
    if version is None:
        return {"ok": False, "version": None, "detail": "no tcpdump (apt-get install tcpdump)"}
    try:
        compile_filter("udp port 40040")
    except CaptureError as exc:
        return {"ok": False, "version": version, "detail": f"{version}; cannot compile a filter: {exc}"}
    return {"ok": True, "version": version, "detail": f"{version}; compiles capture filters"}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def capabilities(plan: Plan) -> dict[str, Any]:
    """Every capability a live experiment may need, each ``{"ok": bool, "detail": str, ...}``."""
    root = os.geteuid() == 0
    caps: dict[str, Any] = {"root": {"ok": root, "detail": f"uid {os.geteuid()}"}}
    caps.update(probe_namespace(plan.command_timeout_s))
    caps["docker"] = _docker(plan.command_timeout_s)
    caps["etcd"] = _etcd(plan.command_timeout_s)
    caps["tcpdump"] = _tcpdump(plan.command_timeout_s)
    versions = {"python": platform.python_version(), "uvloop": _version("uvloop"), "pyroute2": _version("pyroute2"),
                "kernel": platform.release()}
    caps["python"] = {"ok": None not in (versions["uvloop"], versions["pyroute2"]), **versions,
                      "detail": f"Python {versions['python']}, uvloop {versions['uvloop']}, "
                                f"pyroute2 {versions['pyroute2']}"}
    return caps


def measure(quick: bool = False, say: Callable[[str], None] = lambda _msg: None) -> dict[str, Any]:
    """Every measurement (a JSON-able dict); ``say`` gets a progress line before each step."""
    plan = QUICK if quick else FULL
    t0 = time.monotonic()
    say(f"event-loop lag: uvloop {plan.uvloop_s:g} s, asyncio {plan.asyncio_s:g} s, a blocking thread throughout")
    lag = loop_lag(plan)
    say(f"timer granularity: asyncio.sleep of {', '.join(f'{a * 1e3:g}' for a in TIMER_ASKS_S)} ms, "
        f"{plan.timer_reps} each, uvloop and asyncio")
    timers = timer_granularity(plan)
    say(f"one core's share for a busy loop: {plan.spin_s:g} s")
    cpu = core_share(plan.spin_s)
    say("load, other testbeds, capabilities (a throwaway namespace, nft, netem, docker, etcd, tcpdump)")
    doc = {"mode": "quick" if quick else "full", "lag": lag, "timers": timers, "cpu": cpu, "load": load(),
           "caps": capabilities(plan)}
    doc["seconds"] = round(time.monotonic() - t0, 2)
    return doc


# =========================================================================== judging


def _check(name: str, measured: str, limit: str, status: str, value: Any = None) -> dict[str, Any]:
    return {"name": name, "measured": measured, "limit": limit, "status": status, "value": value}


def caps_of(m: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Capability name -> ``{"ok", "detail"}``, with the derived ``loss_injection`` (nft or netem)."""
    caps = {k: {"ok": bool(v.get("ok")), "detail": str(v.get("detail", ""))}
            for k, v in m["caps"].items() if isinstance(v, Mapping)}
    nft, netem = caps.get("nft", {"ok": False}), caps.get("netem", {"ok": False})
    caps["loss_injection"] = {"ok": nft["ok"] or netem["ok"],
                              "detail": f"nft: {nft.get('detail', '?')}; netem: {netem.get('detail', '?')}"}
    return caps


def worst_lag(m: Mapping[str, Any], loops: Sequence[str] = ("uvloop", "thread")) -> dict[str, Any]:
    """The lag an experiment sees: the worst of the samplers that stand for its processes."""
    lag = m["lag"]
    p99_at = max(loops, key=lambda k: lag[k]["p99_ms"])
    max_at = max(loops, key=lambda k: lag[k]["max_ms"])
    return {"p99_ms": lag[p99_at]["p99_ms"], "p99_at": p99_at, "max_ms": lag[max_at]["max_ms"], "max_at": max_at}


def _ms(v: float) -> str:
    return f"{v:.3g} ms"


def _lag_row(name: str, s: Mapping[str, Any], fail: str) -> dict[str, Any]:
    ok = s["p99_ms"] <= DEFAULT_P99_MS and s["max_ms"] <= DEFAULT_MAX_MS and s["samples"] > 0
    measured = (f"p50 {_ms(s['p50_ms'])}, p99 {_ms(s['p99_ms'])}, max {_ms(s['max_ms'])} "
                f"({s['samples']} samples)")
    return _check(name, measured, f"p99 <= {DEFAULT_P99_MS:g} ms, max <= {DEFAULT_MAX_MS:g} ms", OK if ok else fail,
                  dict(s))


def _timer_row(loop: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    late = max(r["p99_ms"] - r["asked_ms"] for r in rows)
    measured = ", ".join(f"{r['asked_ms']:g}->{r['p50_ms']:.2f}" for r in rows) + f" ms (p50); p99 late {late:.2f} ms"
    return _check(f"timers, {loop}: sleep(asked) took", measured, f"p99 late <= {TIMER_SLACK_MS:g} ms",
                  OK if late <= TIMER_SLACK_MS else WARN, {"worst_p99_late_ms": round(late, 3)})


def _load_rows(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    cpu, ld, mc = m["cpu"], m["load"], m["lag"]["machine_cpu"]
    rows = []
    free = mc.get("free_cores")
    if free is not None:
        rows.append(_check("idle CPUs while measuring (/proc/stat)",
                           f"{free:.2f} of {cpu['cpus']} (busy {mc['busy_frac']:.0%}, steal {mc['steal_frac']:.0%})",
                           ">= 1 idle", OK if free >= 1.0 else WARN, dict(mc)))
    if ld["loadavg"] is not None:
        la, most = ld["loadavg"], max(cpu["cpus"] - 1, 1)
        rows.append(_check("load average (1, 5, 15 min)", f"{la[0]:.2f} {la[1]:.2f} {la[2]:.2f} ({ld['runnable']})",
                           f"1 min <= {most} (a core left)", OK if la[0] <= most else WARN, la))
    if ld["looked"]:
        others = ", ".join(ld["testbeds"]) or "none"
        rows.append(_check("other netstack testbeds", f"{others} ({ld['namespaces']} namespaces)", "none",
                           WARN if ld["testbeds"] else OK, ld["testbeds"]))
    else:
        rows.append(_check("other netstack testbeds", "not looked (needs root)", "none", WARN))
    return rows


def machine_checks(m: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The measurements, each against the generic limit (or the live experiments' common need):
    FAIL where a required experiment cannot be trusted because of it, WARN where it is only a
    warning sign (or matters only to an optional extra)."""
    lag, cpu = m["lag"], m["cpu"]
    rows = [_lag_row("event-loop lag, uvloop (daemons)", lag["uvloop"], FAIL),
            _lag_row("event-loop lag, blocking thread (traffic tools)", lag["thread"], FAIL),
            _lag_row("event-loop lag, asyncio (--no-uvloop only)", lag["asyncio"], WARN),
            _timer_row("uvloop", m["timers"]["uvloop"]), _timer_row("asyncio", m["timers"]["asyncio"]),
            _check("busy loop's share of one core", f"{cpu['core_share']:.2f} over {cpu['spin_s']:g} s",
                   f">= {ONE_CORE:g}", OK if cpu["core_share"] >= ONE_CORE else FAIL, cpu["core_share"]),
            _check("usable CPUs", f"{cpu['usable_cpus']} of {cpu['cpus']}", f">= {MIN_CPUS}",
                   OK if cpu["usable_cpus"] >= MIN_CPUS else FAIL, cpu["usable_cpus"])]
    rows += _load_rows(m)
    caps = m["caps"]
    limits = {"root": "uid 0", "netns": "create, veth, delete", "nft": "netdev egress table", "netem": "netem qdisc",
              "docker": "daemon answers", "etcd": "installed", "tcpdump": "compiles filters",
              "python": "uvloop and pyroute2 importable"}
    for key, limit in limits.items():
        c = caps[key]
        required = key in ("root", "netns", "python")  # every required live experiment needs these
        rows.append(_check(CAP_TITLES[key], c["detail"], limit,
                           OK if c["ok"] else (FAIL if required else WARN), bool(c["ok"])))
    if caps["netns"].get("removed") is False:
        rows.append(_check("throwaway namespace removed", caps["netns"]["namespace"], "gone", FAIL, False))
    return rows


def judge(key: str, need: Need, m: Mapping[str, Any]) -> dict[str, Any]:
    """One experiment's verdict: its checks (lag, core share, CPUs, capabilities), the worst of
    their statuses, and a reason per check that is not OK."""
    bad = WARN if need.optional else FAIL
    lag, caps, cpu = worst_lag(m, need.loops), caps_of(m), m["cpu"]
    checks, reasons = [], []

    def add(name: str, measured: str, limit: str, ok: bool, value: Any, reason: str) -> None:
        checks.append(_check(name, measured, limit, OK if ok else bad, value))
        if not ok:
            reasons.append(reason)

    if need.p99_ms is not None:
        p99 = f"{_ms(lag['p99_ms'])} ({lag['p99_at']})"
        add("lag p99", p99, f"<= {need.p99_ms:g} ms", lag["p99_ms"] <= need.p99_ms, lag["p99_ms"],
            f"lag p99 {p99} > {need.p99_ms:g} ms")
    if need.max_ms is not None:
        mx = f"{_ms(lag['max_ms'])} ({lag['max_at']})"
        add("lag max", mx, f"<= {need.max_ms:g} ms", lag["max_ms"] <= need.max_ms, lag["max_ms"],
            f"lag max {mx} > {need.max_ms:g} ms")
    if need.core_share:
        share = cpu["core_share"]
        add("core share", f"{share:.2f}", f">= {need.core_share:g}", share >= need.core_share, share,
            f"core share {share:.2f} < {need.core_share:g}")
    if need.cpus > 1:
        n = cpu["usable_cpus"]
        add("CPUs", str(n), f">= {need.cpus}", n >= need.cpus, n, f"{n} CPUs < {need.cpus}")
    for cap in need.caps:
        have = caps.get(cap, {"ok": False, "detail": "not measured"})
        add(CAP_TITLES[cap], have["detail"], "yes", have["ok"], have["ok"], f"no {CAP_TITLES[cap]} ({have['detail']})")
    verdict = max((c["status"] for c in checks), key=_RANK.__getitem__, default=OK)
    return {"key": key, "title": need.title, "verdict": verdict, "optional": need.optional,
            "needs": needs_text(need), "reasons": reasons, "checks": checks, "source": need.source}


def needs_text(need: Need) -> str:
    """The row's requirements in a few words, for the verdict table."""
    parts = []
    if need.p99_ms is not None:
        parts.append(f"lag p99 <= {need.p99_ms:g} ms")
    if need.max_ms is not None:
        parts.append(f"max <= {need.max_ms:g} ms")
    if need.core_share:
        parts.append(f"core >= {need.core_share:g}")
    parts += [c.replace("loss_injection", "nft|netem") for c in need.caps]
    if need.loops != ("uvloop", "thread"):
        parts.append("(lag: " + ", ".join(need.loops) + ")")
    return ", ".join(parts)


def assess(m: Mapping[str, Any]) -> dict[str, Any]:
    """The measurements with the checks and every experiment's verdict added; ``exit_code``:
    :data:`~netstack.validity.EXIT_FAILED` when a required experiment will not be trustworthy here."""
    checks = machine_checks(m)
    experiments = [judge(key, need, m) for key, need in NEEDS.items()]
    untrusted = [e["key"] for e in experiments if e["verdict"] == FAIL and not e["optional"]]
    unavailable = [e["key"] for e in experiments if e["verdict"] != OK and e["optional"]]
    trusted = [e["key"] for e in experiments if e["verdict"] != FAIL and not e["optional"]]
    verdict = max((c["status"] for c in checks), key=_RANK.__getitem__, default=OK)
    if untrusted:
        verdict = FAIL
    # a FAIL row always fails a required experiment too, except the probe's own leftover namespace
    return {**m, "checks": checks, "experiments": experiments, "trustworthy": trusted, "untrustworthy": untrusted,
            "extras_missing": unavailable, "verdict": verdict, "ok": verdict != FAIL,
            "exit_code": EXIT_FAILED if verdict == FAIL else EXIT_OK}


def summary_line(doc: Mapping[str, Any]) -> str:
    """One line: how many live experiments are trustworthy here, and which are not and why."""
    first = {e["key"]: e["reasons"][0] for e in doc["experiments"] if e["reasons"]}
    text = "trustworthy here: " + (", ".join(doc["trustworthy"]) or "nothing")
    if doc["untrustworthy"]:
        by_reason: dict[str, list[str]] = {}  # one starved core fails every row: say it once
        for key in doc["untrustworthy"]:
            by_reason.setdefault(first.get(key, "?"), []).append(key)
        text += "; NOT: " + "; ".join(f"{', '.join(keys)} ({why})" for why, keys in by_reason.items())
    if doc["extras_missing"]:
        text += "; extras missing: " + ", ".join(doc["extras_missing"])
    return text


__all__ = ["CAP_TITLES", "FAIL", "FULL", "NEEDS", "OK", "PROBE_PREFIX", "QUICK", "WARN", "Need", "Plan", "assess",
           "capabilities", "core_share", "cpu_use", "judge", "load", "loop_lag", "machine_checks", "measure",
           "probe_namespace", "summary_line", "timer_granularity", "worst_lag"]
