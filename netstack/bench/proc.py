"""Helper processes of the live benchmarks: starting, waiting for, reading and killing them,
CPU pinning, and unwinding on SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
from collections.abc import Iterator
from typing import Any

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


def kill(proc: subprocess.Popen[str] | None, timeout: float = 2.0) -> None:
    """SIGKILL ``proc`` if it is still running and reap it (waiting at most ``timeout`` s)."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)


def popen(argv: list[str]) -> subprocess.Popen[str]:
    """``argv`` started with its stdout and stderr as text pipes and no stdin."""
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True)


@contextlib.contextmanager
def spawned(argv: list[str]) -> Iterator[subprocess.Popen[str]]:
    """:func:`popen`, killed on leaving the block whatever happened inside it."""
    proc = popen(argv)
    try:
        yield proc
    finally:
        kill(proc)


def wait_ready(proc: subprocess.Popen[str], what: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Wait for the ``ready`` line a helper prints once it is set up; kill it and raise if
    anything else (or nothing, within ``timeout``) comes."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != "ready":
        kill(proc)
        err = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"{what} did not start (got {line.strip()!r}): {err.strip()[-800:]}")


def json_result(proc: subprocess.Popen[str], what: str, timeout: float) -> dict[str, Any]:
    """The last JSON object line ``proc`` prints before it exits (within ``timeout`` s).

    Exit status 0 and death by SIGTERM (a helper told to stop and report) both count as
    success; anything else, or no JSON line, raises with the end of its stderr."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        raise RuntimeError(f"{what} did not finish within {timeout:.0f} s") from None
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode not in (0, -signal.SIGTERM) or not lines:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {err.strip()[-800:]}")
    return json.loads(lines[-1])


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
