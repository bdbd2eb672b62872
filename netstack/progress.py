"""What every long-running command shows: progress lines on stderr while it runs, a heartbeat
during a long silent wait, and one summary line on stderr when it ends.

The summary goes to stderr whatever the output mode, after stdout is flushed: stdout keeps its
tables and JSON exactly as they were (other tools parse them), and the summary is still the last
line a terminal shows. Progress lines reuse :func:`netstack.bench.output.say` (unstamped) with a
``[tag]`` prefix, as ``netstack up`` (``[up]``) and ``netstack fault`` (``[fault]``) print theirs.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator

from .bench.output import say

#: seconds between heartbeat lines during a long wait
HEARTBEAT_S = 5.0


def took(seconds: float) -> str:
    """A wall-clock duration for a summary: ``0.42 s``, ``12.3 s``, ``4 min 05 s``."""
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class Reporter:
    """Progress and the closing summary of one command run, e.g. ``Reporter("onepipe run")``.

    ``reporter(msg)`` prints ``[tag] msg`` (nothing with ``quiet``); ``heartbeat(what)`` prints
    ``[tag] what: 10 s elapsed`` every :data:`HEARTBEAT_S` while its block runs (so a wait shorter
    than that prints nothing); ``summary(msg)`` prints ``netstack tag: msg`` once, even with
    ``quiet`` (it is the command's result, not its progress)."""

    def __init__(self, tag: str, *, quiet: bool = False) -> None:
        self.tag = tag
        self.quiet = quiet
        self.t0 = time.monotonic()
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    def took(self) -> str:
        """The time since the command started, for its summary (``in 12.3 s``)."""
        return took(self.elapsed())

    def __call__(self, msg: str) -> None:
        if not self.quiet:
            with self._lock:
                say(f"[{self.tag}] {msg}")

    @contextlib.contextmanager
    def heartbeat(self, what: str | Callable[[], str], expect_s: float | None = None,
                  every_s: float = HEARTBEAT_S) -> Iterator[None]:
        """Say how long ``what`` has been running, every ``every_s``, until the block ends;
        ``expect_s``: how long it should take (shown as ``of ~N s``). ``what`` may be a callable,
        asked at each beat (a count that grows)."""
        if self.quiet:
            yield
            return
        stop = threading.Event()
        t0 = time.monotonic()
        of = f" of ~{expect_s:.0f} s" if expect_s else ""

        def beat() -> None:
            while not stop.wait(every_s):
                self(f"{what() if callable(what) else what}: {time.monotonic() - t0:.0f} s{of} elapsed")

        thread = threading.Thread(target=beat, name=f"heartbeat {self.tag}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=1.0)

    def summary(self, msg: str) -> None:
        """The command's one closing line, on stderr after whatever stdout carries."""
        sys.stdout.flush()
        with self._lock:
            say(f"netstack {self.tag}: {msg}")
