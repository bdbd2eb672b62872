"""Helper processes with a line protocol: the one way netstack starts a tool, waits for it to
say ``ready``, collects the last JSON line it prints, and kills it on the way out.

The traffic tools (``python -m netstack.traffic``, ``netstack.tcd``, ``netstack.tcsack``), the
benchmarks' generators and forwarders and the 1Pipe processes all speak it: a server-side tool
prints ``ready`` on one of its streams once it is bound (the traffic tools on stderr, the
benchmarks' helpers on stdout), progress goes to stderr, and the result is a JSON object on
the last line of stdout that starts with ``{``.

Standard library only, so that any layer (experiments, benchmarks, scenarios, the fuzzer, the
protocols' control plug-ins) can use it.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

#: the line a tool prints once it is set up
READY = "ready"
#: how much of a failed tool's stderr goes into the error message
STDERR_TAIL = 800
#: the longest first line read while waiting for ``ready``
MAX_LINE = 4096

Stream = Literal["stdout", "stderr"]


class ToolError(RuntimeError):
    """A tool did not start, did not finish in time, failed, or printed no JSON result."""


def popen(argv: list[str], *, progress: bool = False) -> subprocess.Popen[str]:
    """``argv`` started with stdout (and stderr, unless ``progress``) as text pipes and no stdin.

    ``progress``: stderr is this process's own, so that a tool's progress lines reach the user
    as they come (they are then not in an error message)."""
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=None if progress else subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)


def kill(proc: subprocess.Popen[str] | None, timeout: float = 2.0) -> None:
    """SIGKILL ``proc`` if it is still running and reap it (waiting at most ``timeout`` s)."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)


@contextlib.contextmanager
def spawned(argv: list[str], *, progress: bool = False) -> Iterator[subprocess.Popen[str]]:
    """:func:`popen`, killed and reaped on leaving the block whatever happened inside it."""
    proc = popen(argv, progress=progress)
    try:
        yield proc
    finally:
        kill(proc)


def wait_ready(proc: subprocess.Popen[str], what: str, *, on: Stream = "stdout", timeout: float | None = None,
               error: type[Exception] = ToolError) -> None:
    """Wait for the ``ready`` line ``proc`` prints on ``on`` once it is set up; if anything else
    comes (or nothing, within ``timeout`` s; None waits as long as it takes), kill and reap it
    and raise ``error`` with the end of its stderr."""
    pipe = proc.stdout if on == "stdout" else proc.stderr
    assert pipe is not None, f"{what}: its {on} is not a pipe"
    line = _read_line(pipe.fileno(), timeout)
    if line.strip() == READY:
        return
    kill(proc)
    err = proc.stderr.read() if proc.stderr is not None else ""
    raise error(f"{what} did not start (got {line.strip()!r}): {err.strip()[-STDERR_TAIL:]}")


def _read_line(fd: int, timeout: float | None) -> str:
    """One line from ``fd``, a byte at a time: whatever the tool prints after it stays in the
    pipe for :func:`finish` (a buffered ``readline`` may swallow it, and ``communicate`` reads
    the pipe itself). Up to the newline, EOF, ``MAX_LINE`` bytes or ``timeout`` s."""
    deadline = None if timeout is None else time.monotonic() + timeout
    got = bytearray()
    while len(got) < MAX_LINE:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
        b = os.read(fd, 1)
        if not b or b == b"\n":
            break
        got += b
    return got.decode(errors="replace")


def start(argv: list[str], what: str, *, ready_on: Stream = "stdout", timeout: float | None = None,
          error: type[Exception] = ToolError) -> subprocess.Popen[str]:
    """:func:`popen` then :func:`wait_ready`: the process, once it said it is ready."""
    proc = popen(argv)
    wait_ready(proc, what, on=ready_on, timeout=timeout, error=error)
    return proc


def last_json(out: str) -> dict[str, Any] | None:
    """The last line of ``out`` that starts with ``{``, parsed; None if there is none or it is
    not a JSON object (a tool's result comes after whatever else it printed)."""
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if not lines:
        return None
    try:
        doc = json.loads(lines[-1])
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


@dataclass
class Finished:
    """How a tool ended: its exit status, what it printed (stderr is empty when it was not a
    pipe), and whether it was killed for taking longer than it was given."""

    returncode: int
    out: str
    err: str
    timed_out: bool = False

    def json(self) -> dict[str, Any] | None:
        return last_json(self.out)


def finish(proc: subprocess.Popen[str], timeout: float) -> Finished:
    """Wait up to ``timeout`` s for ``proc`` to exit and read what it printed; one that takes
    longer is killed, reaped and read to the end (``timed_out``)."""
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill(proc)
        timed_out = True
        try:  # bounded: a grandchild may still hold the pipes open
            out, err = proc.communicate(timeout=2.0)
        except subprocess.TimeoutExpired:
            out, err = "", ""
    return Finished(proc.returncode, out or "", err or "", timed_out)


def result(proc: subprocess.Popen[str], what: str, timeout: float, *, ok: tuple[int, ...] = (0,),
           error: type[Exception] = ToolError) -> dict[str, Any]:
    """The JSON result ``proc`` prints before it exits (within ``timeout`` s, else it is killed).

    An exit status outside ``ok`` (a helper told to stop with SIGTERM may count: ``-SIGTERM``),
    or no JSON line, raises ``error`` with the end of its stderr."""
    done = finish(proc, timeout)
    if done.timed_out:
        raise error(f"{what} did not finish within {timeout:.0f} s")
    doc = done.json()
    if done.returncode not in ok or doc is None:
        said = done.err.strip()[-STDERR_TAIL:] or f"no JSON result in {done.out.strip()[-200:]!r}"
        raise error(f"{what} failed (exit {done.returncode}): {said}")
    return doc


def run(argv: list[str], what: str, timeout: float, *, progress: bool = False,
        error: type[Exception] = ToolError) -> dict[str, Any]:
    """Run ``argv`` to the end (killed after ``timeout`` s) and return its JSON result;
    ``progress``: its stderr is passed through (:func:`popen`). Killed whatever interrupts it."""
    with spawned(argv, progress=progress) as proc:
        return result(proc, what, timeout, error=error)
