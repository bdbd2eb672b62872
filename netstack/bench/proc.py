"""Helper processes of the live benchmarks: starting, waiting for, reading and killing them
(netstack/toolproc.py, with the benchmarks' conventions: ``ready`` on stdout within
``READY_TIMEOUT_S``, SIGTERM counts as a clean end), CPU pinning, and unwinding on SIGTERM."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

from .. import toolproc

#: set to 0 to run the benchmarks' processes unpinned
PIN_ENV = "NETSTACK_BENCH_PIN"
#: seconds a helper process gets to print its ``ready`` line
READY_TIMEOUT_S = 10.0


def pinnable_cpus() -> list[int] | None:
    """The CPUs this process may run on, ascending, when there are at least two and pinning
    is not disabled (``NETSTACK_BENCH_PIN=0``); else None."""
    if os.environ.get(PIN_ENV, "1") == "0":
        return None
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except OSError:
        return None
    return cpus if len(cpus) >= 2 else None


def pin(pid: int, cpus: list[int]) -> None:
    """Pin every thread of ``pid`` to ``cpus`` (a process's affinity is per thread)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        with contextlib.suppress(ProcessLookupError, OSError):
            os.sched_setaffinity(tid, cpus)


#: the shared runner's pieces, under the names the benchmarks use (netstack/toolproc.py)
kill = toolproc.kill
popen = toolproc.popen
spawned = toolproc.spawned


def wait_ready(proc: subprocess.Popen[str], what: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Wait for the ``ready`` line a helper prints on stdout once it is set up; kill it and raise
    (a RuntimeError) if anything else (or nothing, within ``timeout``) comes."""
    toolproc.wait_ready(proc, what, on="stdout", timeout=timeout)


def json_result(proc: subprocess.Popen[str], what: str, timeout: float) -> dict[str, Any]:
    """The last JSON object line ``proc`` prints before it exits (within ``timeout`` s).

    Exit status 0 and death by SIGTERM (a helper told to stop and report) both count as
    success; anything else, or no JSON line, raises (a RuntimeError) with the end of its stderr."""
    return toolproc.result(proc, what, timeout, ok=(0, -signal.SIGTERM))


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt inside the block, so a benchmark killed mid-run still
    unwinds through the ``finally`` blocks that remove its namespaces and processes."""

    def _term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, _term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
