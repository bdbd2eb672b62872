"""Sending: the injectors' frames in batches at a bounded rate from one seeded ``random.Random``
(the same seed, the same frames in the same order), the valid traffic pumped between batches,
progress on stderr, each frame's fate counted as it goes."""

from __future__ import annotations

import errno
import random
import time
from typing import Protocol, TextIO

from headers import strategies as hs

from .frames import Injector, fate_of


class Pumped(Protocol):
    """Valid traffic sent at its own rate between the batches (the stream, DTA's reports)."""

    def pump(self) -> None: ...


BATCH = 50


PROGRESS_S = 1.0


class Sender:
    """Sends the injectors' frames in batches at a bounded rate, pumping the stream between
    batches and reporting progress on stderr."""

    def __init__(self, injectors: list[Injector], rng: random.Random, rate: float, out: TextIO,
                 label: str, switch_only: frozenset[int]) -> None:
        self.injectors = injectors
        self.rng = rng
        self.draw = hs.RandomDraw(rng)
        self.rate = rate
        self.out = out
        self.label = label
        self.switch_only = switch_only
        self.table = [i for i in injectors for _ in range(i.weight)]
        self.total = 0
        self.started = time.monotonic()
        self.inject_s = 0.0  #: time spent injecting (the phases without the checks between them)
        self._run_t0: float | None = None

    def run(self, count: int, stream: Pumped | None, guard: bool, total: int) -> None:
        t0 = self._run_t0 = time.monotonic()
        next_report = t0 + PROGRESS_S
        done = 0
        while done < count:
            n = min(BATCH, count - done)
            for _ in range(n):
                self._one(guard)
            done += n
            self.total += n
            if stream is not None:
                stream.pump()
            now = time.monotonic()
            wait = t0 + done / self.rate - now
            if wait > 0:
                time.sleep(wait)
            if now >= next_report:
                next_report = now + PROGRESS_S
                self.progress(total)
        self.inject_s += time.monotonic() - t0
        self._run_t0 = None

    def progress(self, total: int) -> None:
        busy = self.inject_s + (time.monotonic() - self._run_t0 if self._run_t0 is not None else 0.0)
        print(f"fuzz {self.label}: {self.total}/{total} frames sent, {self.total / max(1e-9, busy):,.0f} frames/s",
              file=self.out, flush=True)

    def _one(self, guard: bool) -> None:
        inj = self.table[self.rng.randrange(len(self.table))]
        frame = inj.frame(self.rng, self.draw, guard)
        assert inj.sock is not None
        while True:
            try:
                inj.sock.send(frame)
            except OSError as exc:
                if exc.errno in (errno.ENOBUFS, errno.EAGAIN):
                    time.sleep(0.001)
                    continue
                inj.refused += 1
                return
            break
        inj.sent += 1
        fate = fate_of(frame, inj.link, self.switch_only)
        inj.fate[fate] += 1
        inj.example.setdefault(fate, frame.hex())
