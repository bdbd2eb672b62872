"""A Dask cluster on stand-in machines: try ``netstack sim --scheduler`` across machines on one host.

``netstack dask up`` makes a lab (:mod:`netstack.lab`) of kind ``dask``: a machine ``sched`` running
``dask scheduler`` and machines ``w1``..``wN`` each running one ``dask worker`` (one process, one
thread), every one in its own network namespace, UTS namespace (hostname) and working directory,
so nothing is shared with the scheduler or the other workers but the LAN. The host is on the LAN
too (``host=True``): ``netstack sim`` runs there as the Dask client. This is what docs/sim.md
"Two machines on one host" describes and tests/sim/test_dask_cluster.py runs.

Every process is started with the interpreter that runs this code (``sys.executable -m
distributed.cli.dask_*``) and the same netstack source first on its path, as the same netstack
version on every real machine would be. A worker needs no shared file system: runs are sent as
their specs and their results come back through the scheduler to the client.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import lab as labmod
from ..errors import NetstackError

KIND = "dask"
DEFAULT_PREFIX = "dask"
DEFAULT_PORT = 8786
DEFAULT_TIMEOUT_S = 60.0
SCHEDULER = "sched"
MAX_WORKERS = 32
SCHEDULER_LOG = "scheduler.log"
WORKER_LOG = "worker.log"
#: how long ``status`` waits for the scheduler to answer
STATUS_TIMEOUT_S = 5.0

Say = Callable[[str], None]


class ClusterError(NetstackError):
    """The cluster could not be made, found or asked; the message says why (exit 2)."""


def _quiet(msg: str) -> None:
    pass


def require_root() -> None:
    if os.geteuid() != 0:
        raise ClusterError("a Dask lab makes network namespaces: run as root (sudo)")


def require_dask() -> None:
    if importlib.util.find_spec("distributed") is None:
        raise ClusterError("Dask's distributed scheduler is not installed: pip install 'netstack[dask]'")


def worker_names(n: int) -> list[str]:
    return [f"w{i}" for i in range(1, n + 1)]


def _env(workdir: str) -> dict[str, str]:
    """A machine's processes' environment: this netstack's source tree first on the path (a worker
    unpickles run specs and imports netstack.sim from it: the same code as the client's), and
    Dask's scratch space in the machine's own directory (its default, ``/tmp/dask-scratch-space``,
    is shared with every Dask on the host: the scheduler made it there)."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": root + (os.pathsep + path if path else ""), "DASK_TEMPORARY_DIRECTORY": workdir}


def scheduler_argv(address: str, port: int) -> list[str]:
    return [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", address, "--port", str(port),
            "--no-dashboard"]


def worker_argv(scheduler: str, name: str, address: str, workdir: str) -> list[str]:
    # --nworkers 1 --nthreads 1: one run at a time per machine, as on a real one-worker machine;
    # the nanny (the default) restarts a worker process that dies on its own
    return [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nworkers", "1", "--nthreads", "1",
            "--local-directory", workdir, "--no-dashboard", "--name", name, "--host", address]


def sweep_command(scheduler: str) -> str:
    """A small sweep to try the cluster with (the one docs/sim.md shows)."""
    return f"netstack sim lg-testbed --scenario lg-stream --seeds 1-8 --scheduler {scheduler}"


# --------------------------------------------------------------------------- up


def up(prefix: str = DEFAULT_PREFIX, workers: int = 2, *, subnet: str | None = None, port: int = DEFAULT_PORT,
       timeout_s: float = DEFAULT_TIMEOUT_S, say: Say = _quiet) -> dict[str, Any]:
    """Make the lab, start the scheduler and the workers, wait until the scheduler has every
    worker; on any failure take the lab down again (the logs' tails said first)."""
    require_root()
    require_dask()
    if not 1 <= workers <= MAX_WORKERS:
        raise ClusterError(f"--workers {workers}: between 1 and {MAX_WORKERS}")
    if not 1 <= port <= 65535:
        raise ClusterError(f"--port {port}: between 1 and 65535")
    if timeout_s <= 0:
        raise ClusterError(f"--timeout {timeout_s}: must be positive")
    names = worker_names(workers)
    try:
        lab = labmod.create(prefix, KIND, [SCHEDULER, *names], subnet=subnet, host=True, say=say)
    except labmod.LabError as exc:
        raise ClusterError(str(exc)) from None
    try:
        address = f"tcp://{lab.machine(SCHEDULER).address}:{port}"
        lab.extra.update({"scheduler": address, "port": port, "workers": names,
                          "logs": {SCHEDULER: str(Path(lab.machine(SCHEDULER).workdir) / SCHEDULER_LOG),
                                   **{n: str(Path(lab.machine(n).workdir) / WORKER_LOG) for n in names}}})
        labmod.save(lab)
        sm = lab.machine(SCHEDULER)
        labmod.spawn(lab, SCHEDULER, scheduler_argv(sm.address, port), log=SCHEDULER_LOG, env=_env(sm.workdir))
        say(f"scheduler on {SCHEDULER}: {address}")
        for n in names:
            m = lab.machine(n)
            labmod.spawn(lab, n, worker_argv(address, n, m.address, m.workdir), log=WORKER_LOG, env=_env(m.workdir))
        _wait_for_workers(lab, address, len(names), timeout_s, say)
    except BaseException as exc:
        if not isinstance(exc, KeyboardInterrupt):
            for line in log_tails(lab):
                say(line)
        labmod.destroy(prefix)
        if isinstance(exc, labmod.LabError):
            raise ClusterError(str(exc)) from None
        raise
    return describe(labmod.load(prefix))


def _wait_for_workers(lab: labmod.Lab, address: str, n: int, timeout_s: float, say: Say) -> None:
    """Until the scheduler lists ``n`` workers; a process that exits meanwhile ends the wait."""
    from distributed import Client

    deadline = time.monotonic() + timeout_s
    client: Any = None
    try:
        while True:
            dead = [f"{m} (pid {p})" for m, pids in lab.pids.items() for p in pids if not labmod.alive(p)]
            if dead:
                raise ClusterError(f"dask on {', '.join(dead)} exited during start-up (its log is above)")
            left = deadline - time.monotonic()
            if left <= 0:
                seen = len(client.scheduler_info()["workers"]) if client is not None else 0
                raise ClusterError(f"the cluster did not come up in {timeout_s:g} s: {seen} of {n} worker(s) "
                                   f"connected{'' if client is not None else ', the scheduler never answered'} "
                                   "(the logs are above)")
            if client is None:
                with contextlib.suppress(OSError, TimeoutError):
                    client = Client(address, timeout=min(3.0, max(left, 0.5)))
                continue
            have = len(client.scheduler_info()["workers"])
            if have >= n:
                say(f"{have} worker(s) connected to {address}")
                return
            time.sleep(0.2)
    finally:
        if client is not None:
            client.close()


def log_tails(lab: labmod.Lab, lines: int = 8) -> list[str]:
    out = []
    for name, path in lab.extra.get("logs", {}).items():
        try:
            text = Path(path).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        out.append(f"--- {name}: {path}")
        out += [f"  {line}" for line in text]
    return out


def describe(lab: labmod.Lab) -> dict[str, Any]:
    """What ``up`` prints with --json: the scheduler, the machines, their processes and logs."""
    logs = lab.extra.get("logs", {})
    machines = []
    for m in lab.machines:
        pids = lab.pids.get(m.name, [])
        machines.append({"name": m.name, "role": "scheduler" if m.name == SCHEDULER else "worker",
                         "netns": m.netns, "address": m.address, "hostname": m.hostname, "workdir": m.workdir,
                         "pid": pids[0] if pids else None, "alive": bool(pids) and labmod.alive(pids[0]),
                         "log": logs.get(m.name)})
    scheduler = lab.extra.get("scheduler")
    return {"prefix": lab.prefix, "kind": lab.kind, "subnet": lab.subnet, "host_address": lab.host_address,
            "host_interface": labmod.host_ifname(lab.prefix), "scheduler": scheduler, "machines": machines,
            "sweep": sweep_command(scheduler) if scheduler else None}


# --------------------------------------------------------------------------- status and down


def load(prefix: str) -> labmod.Lab:
    """The Dask lab ``prefix`` (ClusterError if there is none, or it is another kind's)."""
    try:
        lab = labmod.load(prefix)
    except labmod.LabError as exc:
        raise ClusterError(f"{exc}; make one with 'netstack dask up --prefix {prefix}'") from None
    if lab.kind != KIND:
        raise ClusterError(f"lab {prefix!r} is a {lab.kind} lab, not a Dask one: use its own command")
    return lab


def status(prefix: str = DEFAULT_PREFIX) -> dict[str, Any]:
    """The machines and their processes, and the workers the scheduler has (asked over the LAN).
    ``ok``: the scheduler answers and has every worker the lab started."""
    require_root()
    lab = load(prefix)
    doc = describe(lab)
    expected = len([m for m in lab.machines if m.name != SCHEDULER])
    workers, error = _ask(doc["scheduler"])
    doc.update({"answering": error is None, "error": error, "workers": workers, "expected_workers": expected,
                "ok": error is None and len(workers) >= expected})
    return doc


def _ask(address: str | None) -> tuple[list[dict[str, Any]], str | None]:
    if not address:
        return [], "no scheduler recorded"
    require_dask()
    from distributed import Client

    try:
        client = Client(address, timeout=STATUS_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        return [], f"scheduler {address} not answering ({type(exc).__name__})"
    try:
        info = client.scheduler_info()["workers"]
        processing = client.processing()
    finally:
        client.close()
    workers = [{"name": w.get("name"), "address": addr, "host": w.get("host"), "nthreads": w.get("nthreads"),
                "processing": len(processing.get(addr, ()))} for addr, w in sorted(info.items())]
    return workers, None


def down(prefix: str = DEFAULT_PREFIX) -> list[str]:
    """Take the lab down: processes (SIGTERM, then SIGKILL), namespaces, host veth, directories.
    Idempotent: no lab, nothing removed, an empty list. Refuses another kind's lab."""
    require_root()
    with contextlib.suppress(labmod.LabError):
        lab = labmod.load(prefix)
        if lab.kind != KIND:
            raise ClusterError(f"lab {prefix!r} is a {lab.kind} lab, not a Dask one: take it down with its own "
                               "command")
    try:
        return labmod.destroy(prefix)
    except labmod.LabError as exc:
        raise ClusterError(str(exc)) from None


__all__ = ["DEFAULT_PORT", "DEFAULT_PREFIX", "KIND", "SCHEDULER", "ClusterError", "describe", "down", "load",
           "log_tails", "status", "up", "worker_names"]
