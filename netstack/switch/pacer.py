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

from ..ethernet import serialisation_ns

_NS = 1_000_000_000


class Pacer:
    __slots__ = ("_x", "busy_until", "rate")

    def __init__(self, rate_bps: int | None) -> None:
        self.rate = rate_bps or 0
        self._x = 0
        self.busy_until = 0

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

    def duration_ns(self, wire_bytes: int) -> int:
        """Serialisation time of ``wire_bytes`` (rounded up), 0 when unpaced."""
        return serialisation_ns(wire_bytes, self.rate) if self.rate else 0

    def set_rate(self, rate_bps: int | None) -> None:
        """Change the rate; the frame on the wire keeps its end time, later frames use the new rate."""
        self.rate = rate_bps or 0
        self._x = self.busy_until * self.rate
