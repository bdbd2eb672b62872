"""The paced half of TCD's senders: a flow of TCD data packets at a current rate, shared by DCQCN's
reaction point (:class:`netstack.tcd.dcqcn.RateSender`) and TIMELY's sender
(:class:`netstack.tcd.timely.TimelySender`); sans-IO (docs/architecture.md "Engines are sans-IO").

:class:`PacedFlow` owns what both do alike: the packets' sizes and sequence numbers, the flow's
end (a size, a duration, or neither), burst mode, the pacing at the current rate ``rc`` (bit/s,
a line rate: Ethernet, IPv4 and UDP headers, preamble, FCS and gap count, as a NIC's rate limiter
counts them, :mod:`netstack.ethernet`), the bounded credit of a late poll, and the rate log. A
congestion control subclass sets ``rc`` and hooks in around each packet: :meth:`_before_packet`
(the timers due by its slot), :meth:`_packet_flags` (flags besides FIN, e.g. TIMELY's ACK
request) and :meth:`_after_packet` (byte counters). It keeps its counters in ``c``, a dataclass
with at least ``packets_sent`` and ``bytes_sent``.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, Final, Protocol, TypeVar

from headers.tcd import TcdData, TcdDataFlag

from ..errors import ConfigError
from ..ethernet import UDP_HEADERS_BYTES, line_time_exact_ns

#: a late poll releases at most this many packets' or ``burst_ns``' worth of credit
BURST_PACKETS: Final = 64
#: rate-log samples kept (halved, every other sample dropped, when full)
RATE_LOG_MAX: Final = 4096
HOUR_NS: Final = 3_600_000_000_000
MAX_RATE: Final = 10**13
P = TypeVar("P")


def check_int(error: type[ConfigError], name: str, value: Any, lo: int, hi: int) -> None:
    """Raise ``error(name, ...)`` unless ``value`` is an integer (not a bool) in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise error(name, f"must be an integer in [{lo}, {hi}], got {value!r}")


def check_real(error: type[ConfigError], name: str, value: Any, lo: float, hi: float, *,
               open_low: bool = False) -> None:
    """Raise ``error(name, ...)`` unless ``value`` is a finite number in [lo, hi] (or (lo, hi])."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) \
        and (lo < value if open_low else lo <= value) and value <= hi
    if not ok:
        raise error(name, f"must be a number in {'(' if open_low else '['}{lo}, {hi}], got {value!r}")


def scaled_params(cls: type[P], *, paper_rate_bps: int, line_rate_bps: int, time_scale: float,
                  rates: tuple[str, ...], times: tuple[str, ...], overrides: dict[str, Any],
                  error: type[ConfigError], what: str) -> P:
    """A parameter dataclass's paper defaults at ``line_rate_bps``: its ``rates`` in proportion to
    the line rate over ``paper_rate_bps`` (``r_min_bps`` at least 1), its ``times`` times
    ``time_scale`` (at least 1 ns), the rest as they are; then ``overrides`` (field names; an
    unknown one is refused with ``error`` naming it as not ``what``'s). docs/architecture.md "Time
    and scale"."""
    check_int(error, "line_rate_bps", line_rate_bps, 1_000, MAX_RATE)
    check_real(error, "time_scale", time_scale, 0.0, 1e9, open_low=True)
    paper = cls()
    f = line_rate_bps / paper_rate_bps
    values: dict[str, Any] = {"line_rate_bps": line_rate_bps}
    for name in rates:
        values[name] = round(getattr(paper, name) * f)
    if "r_min_bps" in values:
        values["r_min_bps"] = max(1, values["r_min_bps"])
    for name in times:
        values[name] = max(1, round(getattr(paper, name) * time_scale))
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    for name in overrides:
        if name not in known:
            raise error(name, f"is not a {what} parameter (one of: {', '.join(sorted(known))})")
    return cls(**{**values, **overrides})


class SentCounters(Protocol):
    """What :class:`PacedFlow` counts in its subclass's ``c``."""

    packets_sent: int
    bytes_sent: int  # UDP payload bytes: TCD header and padding


class PacedFlow:
    """A paced flow of TCD data packets (the module docstring); a subclass sets ``rc`` and ``c``.

    ``payload``: UDP payload bytes per packet (the 16-byte :class:`~headers.tcd.TcdData` header
    and zero padding). The flow ends after ``size_bytes`` payload bytes (the last packet carries
    the remainder, at least 16 bytes) or once ``duration_ns`` has passed since the start (the
    last packet whose slot falls before the end), whichever comes first; with neither it never
    ends. Its last packet carries FIN. ``burst_bytes`` / ``burst_period_ns``: send
    ``burst_bytes`` at the current rate every ``burst_period_ns`` (a burst that outlasts its
    period delays the next). ``start_ns``: the first packet's time (not before ``now_ns``).
    ``burst_ns``: a late poll (or a PFC resume) releases at most this long's credit.
    """

    c: SentCounters
    #: the current rate (bit/s)
    rc: float

    def __init__(self, *, flow: int, payload: int, size_bytes: int | None, duration_ns: int | None,
                 burst_bytes: int | None, burst_period_ns: int | None, start_ns: int, now_ns: int,
                 burst_ns: int, rate: float) -> None:
        self.flow = flow
        self.payload = payload
        self.rc = rate
        self.start_ns = max(start_ns, now_ns)
        self.done_ns: int | None = None
        self._burst_ns = burst_ns
        self._done = False
        self._seq = 0
        self._next = float(self.start_ns)  # the next packet's slot
        self._remaining = size_bytes
        self._end = None if duration_ns is None else self.start_ns + duration_ns
        self._burst = burst_bytes
        self._period = burst_period_ns
        self._burst_left = burst_bytes or 0
        self._burst_start = self.start_ns
        #: (t_ns, rate in bit/s) at the start and at every change of the rate (bounded: RATE_LOG_MAX)
        self.rate_log: list[tuple[int, int]] = [(self.start_ns, round(rate))]
        self._log_stride = 1
        self._log_skip = 0

    @staticmethod
    def check_flow(error: type[ConfigError], flow: int, payload: int, size_bytes: int | None,
                   duration_ns: int | None, burst_bytes: int | None, burst_period_ns: int | None, start_ns: int,
                   now_ns: int) -> None:
        """The flow's own settings, each refused with ``error`` naming it."""
        check_int(error, "flow", flow, 0, 0xFFFF)
        check_int(error, "payload", payload, TcdData.SIZE, 65_507)
        if size_bytes is not None:
            check_int(error, "size_bytes", size_bytes, 1, 1 << 50)
        if duration_ns is not None:
            check_int(error, "duration_ns", duration_ns, 1, 1 << 62)
        if (burst_bytes is None) != (burst_period_ns is None):
            raise error("burst_bytes", "burst mode needs both burst_bytes and burst_period_ns")
        if burst_bytes is not None:
            check_int(error, "burst_bytes", burst_bytes, 1, 1 << 40)
            check_int(error, "burst_period_ns", burst_period_ns, 1, HOUR_NS)
        check_int(error, "start_ns", start_ns, -(1 << 62), 1 << 62)
        check_int(error, "now_ns", now_ns, -(1 << 62), 1 << 62)

    # ------------------------------------------------------------------ state
    @property
    def done(self) -> bool:
        """The packet with FIN has been released."""
        return self._done

    @property
    def rate_bps(self) -> float:
        """The current rate (bit/s)."""
        return self.rc

    def next_deadline(self) -> int | None:
        return None if self._done else math.ceil(self._next)

    # ------------------------------------------------------------------ the hooks
    def _before_packet(self, t: int) -> None:
        """Before the packet of slot ``t`` is built (DCQCN: the timers due by then)."""

    def _packet_flags(self, size: int, t: int) -> int:
        """Flags besides FIN for the packet about to go (its seq is ``self._seq``)."""
        return 0

    def _after_packet(self, size: int, t: int) -> None:
        """After a packet (not the last) went at ``t`` (DCQCN: the byte counter)."""

    # ------------------------------------------------------------------ pacing
    def _gap(self, size: int) -> float:
        return line_time_exact_ns(UDP_HEADERS_BYTES + size, self.rc)

    def _size(self) -> int:
        size = self.payload
        if self._remaining is not None and self._remaining < size:
            size = self._remaining
        if self._burst is not None and self._burst_left < size:
            size = self._burst_left
        return max(TcdData.SIZE, size)

    def _burst_step(self, size: int, nxt: float) -> float:
        """Count ``size`` against the current burst; the next slot (the next burst's start once it is out)."""
        self._burst_left -= size
        if self._burst_left <= 0:  # this burst is out: the next starts at its period
            assert self._period is not None and self._burst is not None
            self._burst_start += self._period
            self._burst_left = self._burst
            nxt = max(nxt, float(self._burst_start))
        return nxt

    def poll(self, now_ns: int) -> list[bytes]:
        """The datagrams due by ``now_ns`` at the current rate (send them now, in order): at most
        :data:`BURST_PACKETS`, and no credit older than ``burst_ns`` or that many packets."""
        out: list[bytes] = []
        if self._done or self._next > now_ns:
            return out
        floor = now_ns - min(self._burst_ns, BURST_PACKETS * self._gap(self.payload))
        if self._end is not None:
            floor = min(floor, self._end - 1)  # a late poll still ends the flow with its FIN
        nxt = max(self._next, floor)
        c = self.c
        while nxt <= now_ns and len(out) < BURST_PACKETS:
            t = math.floor(nxt)
            self._before_packet(t)
            size = self._size()
            nxt += self._gap(size)
            if self._burst is not None:
                nxt = self._burst_step(size, nxt)
            fin = (self._remaining is not None and self._remaining <= size) or (self._end is not None
                                                                                and nxt >= self._end)
            flags = (TcdDataFlag.FIN if fin else 0) | self._packet_flags(size, t)
            out.append(TcdData(self.flow, self._seq & 0xFFFFFFFF, t, flags).to_bytes(size))
            self._seq += 1
            c.packets_sent += 1
            c.bytes_sent += size
            if self._remaining is not None:
                self._remaining -= size
            if fin:
                self._done = True
                self.done_ns = t
                break
            self._after_packet(size, t)
        self._next = nxt
        return out

    # ------------------------------------------------------------------ reports
    def _log(self, t: int) -> None:
        """Log the current rate at ``t`` if it changed (every other sample once the log is full)."""
        rc = round(self.rc)
        log = self.rate_log
        if log[-1][1] == rc:
            return
        if self._log_skip:
            self._log_skip -= 1
            return
        log.append((t, rc))
        self._log_skip = self._log_stride - 1
        if len(log) >= RATE_LOG_MAX:
            del log[1::2]  # keep the first sample, then every other one
            self._log_stride *= 2


__all__ = ["BURST_PACKETS", "HOUR_NS", "MAX_RATE", "RATE_LOG_MAX", "PacedFlow", "SentCounters", "check_int",
           "check_real", "scaled_params"]
