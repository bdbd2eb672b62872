"""The line-rate pacer of one port: when the link is free, exactly, over any horizon.

A frame of ``wire_bytes`` occupies the link for ``wire_bytes * 8 / rate`` seconds. At
10 Gb/s an 84-byte minimum frame takes 67.2 ns, so rounding each frame to whole ns would
drift by ~1 % over a busy period. The pacer therefore keeps the end of the link's busy
period as an integer in units of 1/rate ns (``_x = busy_until_ns * rate`` exactly) and
only rounds (up) when reporting ``busy_until``: back-to-back frames accumulate without
error, so a backlogged port releases ``rate * t`` bits by time ``t`` to within one frame
(the invariant tests/switch/test_pacer.py checks).

``rate_bps`` of ``None``/0 means unpaced: a frame takes no time.
"""

from __future__ import annotations

from itertools import accumulate
from math import gcd

from ..ethernet import MIN_FRAME, serialisation_ns

_NS = 1_000_000_000


def _ratio(rate: int) -> tuple[int, int, int]:
    """``(a, b, g)`` with 8e9 = a * g and rate = b * g, g their gcd (Pacer.plan's unit)."""
    g = gcd(8 * _NS, rate) or 1
    return 8 * _NS // g, rate // g, g


class Pacer:
    __slots__ = ("_planned", "_ratio", "_x", "busy_until", "rate")

    def __init__(self, rate_bps: int | None) -> None:
        self.rate = rate_bps or 0
        self._x = 0
        self.busy_until = 0
        self._planned: tuple[int, int, list[int]] = (0, 0, [])
        self._ratio = _ratio(self.rate)

    def start(self, start_ns: int, wire_bytes: int) -> int:
        """Put a frame on the wire at ``start_ns`` (>= busy_until); return when its last bit leaves."""
        rate = self.rate
        if not rate:
            if start_ns > self.busy_until:
                self.busy_until = start_ns
            return self.busy_until
        if start_ns > self.busy_until:
            # the link was idle: the new busy period starts on a whole ns
            self._x = start_ns * rate
        # else back to back: continue from the exact (fractional) end of the previous frame
        self._x += wire_bytes * 8 * _NS
        self.busy_until = -(-self._x // rate)
        return self.busy_until

    def plan(self, start_ns: int, sizes: list[int], overhead: int, delay: int = 0) -> list[int]:
        """When frames of ``sizes`` bytes (padded to the minimum frame, plus ``overhead`` bytes
        of line time each) sent back to back from ``start_ns`` (>= busy_until) on a paced link
        would end, plus ``delay``: what :meth:`start` would return for each (+ delay), by the
        same exact arithmetic, one comprehension per step. Nothing changes until
        :meth:`advance` takes some of them.

        The arithmetic is kept on small integers, where CPython is fastest: relative to the
        whole ns before the first frame (``_x`` itself is ns x rate, beyond 2**90), and in units
        of ``gcd(8e9, rate)`` (8e9/rate is 2/25 at 100 Gbit/s)."""
        rate = self.rate
        x0 = start_ns * rate if start_ns > self.busy_until else self._x
        base, rest = divmod(x0, rate)
        line = [n + overhead if n > MIN_FRAME else MIN_FRAME + overhead for n in sizes]
        sent = list(accumulate(line))  # line bytes of frames 0..i
        self._planned = (base, rest, sent)
        a, b, g = self._ratio
        whole, part = divmod(rest, g)
        base += delay
        if part:  # a fraction of a unit is left: every end rounds up past the quotient
            base += 1
            return [base + (whole + s * a) // b for s in sent]
        return [base - (-(whole + s * a) // b) for s in sent]  # rounded up, as in start()

    def advance(self, frames: int, end_ns: int) -> None:
        """Take the first ``frames`` frames of the last :meth:`plan`; the last of them ends at ``end_ns``."""
        base, rest, sent = self._planned
        self._x = base * self.rate + rest + sent[frames - 1] * 8 * _NS
        self.busy_until = end_ns

    def duration_ns(self, wire_bytes: int) -> int:
        """Serialisation time of ``wire_bytes`` (rounded up), 0 when unpaced."""
        return serialisation_ns(wire_bytes, self.rate) if self.rate else 0

    def set_rate(self, rate_bps: int | None) -> None:
        """Change the rate; the frame on the wire keeps its end time, later frames use the new rate."""
        self.rate = rate_bps or 0
        self._x = self.busy_until * self.rate
        self._ratio = _ratio(self.rate)
