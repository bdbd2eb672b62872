"""DCQCN's reaction point (the rate-based sender), with TCD's reaction to an undetermined mark.

DCQCN ("Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, §3 "The DCQCN
algorithm": the RP's rate decrease, alpha update and rate increase) paces each flow at a current
rate Rc and remembers a target rate Rt. TCD ("Congestion Detection in Lossless Networks",
SIGCOMM 2021) tells flows that *contribute* to congestion (CE marks) from flows only slowed by
PFC (UE marks, "undetermined"): those should neither cut nor increase.

The reaction point, as :class:`RateSender` runs it:

- **CNP-CE** (and, in mode ``dcqcn``, any CNP): ``Rt = Rc`` (always when ``clamp_target``,
  otherwise only if an increase happened since the last cut, as the DCQCN authors' ns-3 model
  does); ``alpha = (1-g)alpha + g``; ``Rc = max(Rmin, Rc(1 - alpha/2))``; the byte counter, the timer and
  both stage counters restart: fast recovery begins.
- **No CNP for ``alpha_timer`` (K)**: ``alpha = (1-g)alpha``, every K since the last CNP.
- **Rate increase**, an event every ``rate_timer`` (T) and every ``byte_counter`` (B) bytes sent,
  each counting its own stage: while both stages are below F, fast recovery ``Rc = (Rt+Rc)/2``;
  once one reaches F, additive increase ``Rt += R_AI; Rc = (Rt+Rc)/2``; once both have, hyper
  increase ``Rt += i·R_HAI; Rc = (Rt+Rc)/2`` with ``i = min(stages) - F + 1`` (the DCQCN
  authors' ns-3 model). Rc and Rt are capped at the line rate (our choice for Rt, as NICs do).
  The timers and the byte counter start with the first cut: before it the flow runs at its
  initial rate (DCQCN has no slow start).
- **CNP-UE** in mode ``dcqcn+tcd``: hold. Rc and Rt stay, alpha is not raised (it decays as
  usual), the increase timer and the byte counter restart so that no fast-recovery, AI or HAI
  step fires in this interval; the stage counters stay (not a congestion signal, so no return to
  fast recovery: our choice).
- **CNP-UE** in mode ``dcqcn``: a cut, like a CNP-CE. The baseline cannot tell the marks apart:
  its NP would have sent a plain CNP for the ECN mark anyway, and a DCQCN RP cuts on every CNP
  (our choice of how the baseline meets a UE-CNP; a plain NP, ``TcdReceiver(tcd=False)``, sends
  none).
- mode ``fixed``: a constant rate; CNPs are counted and ignored.

Timers are evaluated lazily, in virtual time: before a packet is sent at its slot, and before a
CNP is taken, every alpha decay and increase event due by then is applied at its own time, so the
result does not depend on how late the shell calls, and :meth:`RateSender.next_deadline` is only
the next packet's slot. Rates are line rates (Ethernet, IPv4 and UDP headers, preamble, FCS and
gap count, :mod:`netstack.ethernet`), as a NIC's rate limiter counts them.

The parameters (:class:`DcqcnParams`) default to the DCQCN paper's, at its 40 Gbit/s (as we read
them: g = 1/256, K = T = 55 us, B = 10 MB, F = 5, R_AI = 40 Mbit/s, N = 50 us); alpha starts at 1
as in DCQCN (the first cut halves the rate; TCD's ns-3 port starts at 0.5: our choice of the
former); R_HAI = 200 Mbit/s and Rmin = 100 Mbit/s are our choices (the values of TCD's public ns-3
port and of DCQCN's authors' ns-3 model, scaled to 40 Gbit/s). :meth:`DcqcnParams.scaled` scales
them to a line rate and a time scale (docs/architecture.md "Time and scale": rates down, times
up, bytes as they are).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Final

from headers.tcd import CnpKind, TcdCnp, TcdData, TcdDataFlag

from ..engine import ActionQueue
from ..errors import ConfigError
from ..ethernet import UDP_HEADERS_BYTES, line_time_exact_ns

if TYPE_CHECKING:
    from ..engine import Engine

#: the rate the DCQCN paper's parameters are given for
PAPER_LINE_RATE_BPS: Final = 40_000_000_000
MODES: Final = ("dcqcn", "dcqcn+tcd", "fixed")
#: a late poll releases at most this many packets' or ``DcqcnParams.burst_ns``' worth of credit
BURST_PACKETS: Final = 64
#: ``burst_ns`` at the paper's scale: 2 us, the live testbed's 2 ms at its x1000 (its timers have
#: ~1 ms granularity). A time, so it scales like one: a sender held by PFC gets the same credit, in
#: packets, on a resume at every scale (the TCD multi scenario is scale-invariant only so)
BURST_NS: Final = 2_000
#: rate-log samples kept (halved, every other sample dropped, when full)
RATE_LOG_MAX: Final = 4096
_HOUR_NS = 3_600_000_000_000
_MAX_RATE = 10**13


class DcqcnParamError(ConfigError):
    """A DCQCN or sender setting out of range; ``field`` names it."""


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise DcqcnParamError(name, f"must be an integer in [{lo}, {hi}], got {value!r}")


def _check_real(name: str, value: Any, lo: float, hi: float, *, open_low: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) \
        and (lo < value if open_low else lo <= value) and value <= hi
    if not ok:
        raise DcqcnParamError(name, f"must be a number in {'(' if open_low else '['}{lo}, {hi}], got {value!r}")


@dataclass(frozen=True)
class DcqcnParams:
    """DCQCN's reaction- and notification-point settings (rates in bit/s, times in ns)."""

    line_rate_bps: int = PAPER_LINE_RATE_BPS
    r_min_bps: int = 100_000_000
    g: float = 1 / 256
    alpha0: float = 1.0
    alpha_timer_ns: int = 55_000  # K: alpha decays once per K without a CNP
    rate_timer_ns: int = 55_000  # T: a rate-increase event every T
    byte_counter_bytes: int = 10_000_000  # B: ... and every B bytes sent
    f_stages: int = 5  # F: fast-recovery stages
    r_ai_bps: int = 40_000_000
    r_hai_bps: int = 200_000_000
    clamp_target: bool = True
    cnp_interval_ns: int = 50_000  # N: the NP sends at most one CNP per flow per N
    burst_ns: int = BURST_NS  # a late poll (or a PFC resume) releases at most this long's credit

    def __post_init__(self) -> None:
        _check_int("line_rate_bps", self.line_rate_bps, 1_000, _MAX_RATE)
        _check_int("r_min_bps", self.r_min_bps, 1, self.line_rate_bps)
        _check_real("g", self.g, 0.0, 1.0, open_low=True)
        _check_real("alpha0", self.alpha0, 0.0, 1.0)
        for name in ("alpha_timer_ns", "rate_timer_ns", "cnp_interval_ns", "burst_ns"):
            _check_int(name, getattr(self, name), 1, _HOUR_NS)
        _check_int("byte_counter_bytes", self.byte_counter_bytes, 1, 1 << 50)
        _check_int("f_stages", self.f_stages, 1, 10_000)
        _check_int("r_ai_bps", self.r_ai_bps, 0, self.line_rate_bps)
        _check_int("r_hai_bps", self.r_hai_bps, 0, self.line_rate_bps)
        if not isinstance(self.clamp_target, bool):
            raise DcqcnParamError("clamp_target", f"must be true or false, got {self.clamp_target!r}")

    @classmethod
    def scaled(cls, line_rate_bps: int, time_scale: float = 1, **overrides: Any) -> DcqcnParams:
        """The paper's parameters at ``line_rate_bps``: its rates (R_AI, R_HAI, Rmin) in
        proportion to the line rate over its 40 Gbit/s, its timers (K, T, N, burst_ns) times
        ``time_scale``, the byte counter as it is; then ``overrides`` (field names)."""
        _check_int("line_rate_bps", line_rate_bps, 1_000, _MAX_RATE)
        _check_real("time_scale", time_scale, 0.0, 1e9, open_low=True)
        paper = cls()
        f = line_rate_bps / PAPER_LINE_RATE_BPS
        values: dict[str, Any] = {
            "line_rate_bps": line_rate_bps,
            "r_min_bps": max(1, round(paper.r_min_bps * f)),
            "r_ai_bps": round(paper.r_ai_bps * f),
            "r_hai_bps": round(paper.r_hai_bps * f),
            "alpha_timer_ns": max(1, round(paper.alpha_timer_ns * time_scale)),
            "rate_timer_ns": max(1, round(paper.rate_timer_ns * time_scale)),
            "cnp_interval_ns": max(1, round(paper.cnp_interval_ns * time_scale)),
            "burst_ns": max(1, round(paper.burst_ns * time_scale)),
        }
        known = {f.name for f in fields(cls)}
        for name in overrides:
            if name not in known:
                raise DcqcnParamError(name, f"is not a DCQCN parameter (one of: {', '.join(sorted(known))})")
        values.update(overrides)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class RateSenderCounters:
    """What a :class:`RateSender` counts (``counters()`` adds its rates and state)."""

    packets_sent: int = 0
    bytes_sent: int = 0  # UDP payload bytes: TCD header and padding
    cnps_rx: int = 0  # CNPs of this flow
    cnps_ce: int = 0
    cnps_ue: int = 0
    cnps_foreign: int = 0  # another flow's CNPs: ignored
    rate_cuts: int = 0
    holds: int = 0  # CNP-UE holds (mode dcqcn+tcd)
    fast_recovery: int = 0  # increase steps, by phase
    additive_increase: int = 0
    hyper_increase: int = 0
    timer_events: int = 0  # increase events, by trigger
    byte_events: int = 0
    alpha_decays: int = 0


class RateSender:
    """A paced flow of TCD data packets under DCQCN (``dcqcn``), DCQCN + TCD (``dcqcn+tcd``) or at
    a fixed rate (``fixed``); sans-IO (docs/architecture.md "Engines are sans-IO").

    ``payload``: UDP payload bytes per packet (the 16-byte :class:`~headers.tcd.TcdData` header
    and zero padding). The flow ends after ``size_bytes`` payload bytes (the last packet carries
    the remainder, at least 16 bytes) or once ``duration_ns`` has passed since the start (the
    last packet whose slot falls before the end), whichever comes first; with neither it never
    ends. Its last packet carries FIN. ``rate_bps``: the fixed rate, or the initial Rc in the
    DCQCN modes (default: the line rate, as DCQCN starts). ``burst_bytes`` / ``burst_period_ns``:
    send ``burst_bytes`` at the current rate every ``burst_period_ns`` (a burst that outlasts its
    period delays the next). ``start_ns``: the first packet's time (not before ``now_ns``).
    """

    def __init__(self, params: DcqcnParams, *, flow: int, mode: str = "dcqcn", payload: int = 1000,
                 size_bytes: int | None = None, duration_ns: int | None = None, rate_bps: int | None = None,
                 burst_bytes: int | None = None, burst_period_ns: int | None = None, start_ns: int = 0,
                 now_ns: int) -> None:
        self._validate(params, flow, mode, payload, size_bytes, duration_ns, rate_bps, burst_bytes,
                       burst_period_ns, start_ns, now_ns)
        self.params = params
        self.flow = flow
        self.mode = mode
        self.payload = payload
        self.actions = ActionQueue()  # a sender's outputs are all return values
        self.c = RateSenderCounters()
        rate = float(params.line_rate_bps if rate_bps is None else rate_bps)
        #: Rc and Rt (bit/s), alpha
        self.rc = self.rt = self.min_rc = rate
        self.alpha = float(params.alpha0)
        self.start_ns = max(start_ns, now_ns)
        self.done_ns: int | None = None
        self._done = False
        self._seq = 0
        self._next = float(self.start_ns)  # the next packet's slot
        self._remaining = size_bytes
        self._end = None if duration_ns is None else self.start_ns + duration_ns
        self._burst = burst_bytes
        self._period = burst_period_ns
        self._burst_left = burst_bytes or 0
        self._burst_start = self.start_ns
        # DCQCN state, live from the first cut: stage counters, bytes since the last byte event,
        # the next increase-timer event and the next alpha decay (None: not running)
        self._time_stage = self._byte_stage = 0
        self._bytes_since = 0
        self._rate_timer_at: int | None = None
        self._alpha_at: int | None = None
        #: (t_ns, Rc in bit/s) at the start and at every change of Rc (bounded: RATE_LOG_MAX)
        self.rate_log: list[tuple[int, int]] = [(self.start_ns, round(rate))]
        self._log_stride = 1
        self._log_skip = 0

    @staticmethod
    def _validate(params: DcqcnParams, flow: int, mode: str, payload: int, size_bytes: int | None,
                  duration_ns: int | None, rate_bps: int | None, burst_bytes: int | None,
                  burst_period_ns: int | None, start_ns: int, now_ns: int) -> None:
        if mode not in MODES:
            raise DcqcnParamError("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
        _check_int("flow", flow, 0, 0xFFFF)
        _check_int("payload", payload, TcdData.SIZE, 65_507)
        if size_bytes is not None:
            _check_int("size_bytes", size_bytes, 1, 1 << 50)
        if duration_ns is not None:
            _check_int("duration_ns", duration_ns, 1, 1 << 62)
        if rate_bps is not None:
            _check_int("rate_bps", rate_bps, 1 if mode == "fixed" else params.r_min_bps, params.line_rate_bps)
        if (burst_bytes is None) != (burst_period_ns is None):
            raise DcqcnParamError("burst_bytes", "burst mode needs both burst_bytes and burst_period_ns")
        if burst_bytes is not None:
            _check_int("burst_bytes", burst_bytes, 1, 1 << 40)
            _check_int("burst_period_ns", burst_period_ns, 1, _HOUR_NS)
        _check_int("start_ns", start_ns, -(1 << 62), 1 << 62)
        _check_int("now_ns", now_ns, -(1 << 62), 1 << 62)

    # ------------------------------------------------------------------ state
    @property
    def done(self) -> bool:
        """The packet with FIN has been released."""
        return self._done

    @property
    def rate_bps(self) -> float:
        """The current rate Rc (bit/s)."""
        return self.rc

    def next_deadline(self) -> int | None:
        return None if self._done else math.ceil(self._next)

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

    def poll(self, now_ns: int) -> list[bytes]:
        """The datagrams due by ``now_ns`` at the current rate (send them now, in order): at most
        :data:`BURST_PACKETS`, and no credit older than ``params.burst_ns`` or that many packets."""
        out: list[bytes] = []
        if self._done or self._next > now_ns:
            return out
        floor = now_ns - min(self.params.burst_ns, BURST_PACKETS * self._gap(self.payload))
        if self._end is not None:
            floor = min(floor, self._end - 1)  # a late poll still ends the flow with its FIN
        nxt = max(self._next, floor)
        while nxt <= now_ns and len(out) < BURST_PACKETS:
            t = math.floor(nxt)
            self._advance(t)
            size = self._size()
            nxt += self._gap(size)
            if self._burst is not None:
                self._burst_left -= size
                if self._burst_left <= 0:  # this burst is out: the next starts at its period
                    assert self._period is not None
                    self._burst_start += self._period
                    self._burst_left = self._burst
                    nxt = max(nxt, float(self._burst_start))
            fin = (self._remaining is not None and self._remaining <= size) or (self._end is not None
                                                                                and nxt >= self._end)
            out.append(TcdData(self.flow, self._seq & 0xFFFFFFFF, t, TcdDataFlag.FIN if fin else 0).to_bytes(size))
            self._seq += 1
            self.c.packets_sent += 1
            self.c.bytes_sent += size
            if self._remaining is not None:
                self._remaining -= size
            if fin:
                self._done = True
                self.done_ns = t
                break
            self._count_bytes(size, t)
        self._next = nxt
        return out

    # ------------------------------------------------------------------ CNPs
    def receive(self, datagram: bytes, now_ns: int) -> None:
        """A UDP payload from the receiver (HeaderError if it is not a CNP)."""
        self.on_cnp(TcdCnp.from_bytes(datagram), now_ns)

    def on_cnp(self, cnp: TcdCnp, now_ns: int) -> None:
        c = self.c
        if cnp.flow != self.flow:
            c.cnps_foreign += 1
            return
        c.cnps_rx += 1
        ue = cnp.kind == CnpKind.UE
        if ue:
            c.cnps_ue += 1
        else:
            c.cnps_ce += 1
        if self.mode == "fixed":
            return
        self._advance(now_ns)
        if ue and self.mode == "dcqcn+tcd":
            self._hold(now_ns)
        else:
            self._cut(now_ns)

    def _cut(self, now: int) -> None:
        """DCQCN's rate decrease on a CNP."""
        p = self.params
        if p.clamp_target or self._time_stage or self._byte_stage:
            self.rt = self.rc
        self.alpha = (1 - p.g) * self.alpha + p.g
        self.rc = max(float(p.r_min_bps), self.rc * (1 - self.alpha / 2))
        self.min_rc = min(self.min_rc, self.rc)
        self._time_stage = self._byte_stage = 0
        self._bytes_since = 0
        self._rate_timer_at = now + p.rate_timer_ns
        self._alpha_at = now + p.alpha_timer_ns
        self.c.rate_cuts += 1
        self._log(now)

    def _hold(self, now: int) -> None:
        """TCD's reaction to a CNP-UE: no cut, and no increase step in this interval."""
        self.c.holds += 1
        if self._rate_timer_at is not None:
            self._rate_timer_at = now + self.params.rate_timer_ns
            self._bytes_since = 0

    # ------------------------------------------------------------------ increase
    def on_timer(self, now_ns: int) -> None:
        """Apply the alpha decays and increase-timer events due by ``now_ns`` (``poll`` and
        ``receive`` do it themselves: a shell need not call this; it brings the state shown by
        ``counters()`` up to date)."""
        if self.mode != "fixed":
            self._advance(now_ns)

    def _advance(self, t: int) -> None:
        """Apply every alpha decay and increase-timer event due by ``t``, each at its own time."""
        p = self.params
        if self._alpha_at is not None and self._alpha_at <= t:
            k = (t - self._alpha_at) // p.alpha_timer_ns + 1
            self.alpha *= (1 - p.g) ** k
            self._alpha_at += k * p.alpha_timer_ns
            self.c.alpha_decays += k
        at = self._rate_timer_at
        if at is None:
            return
        while at <= t:
            before = (self.rc, self.rt)
            self._time_stage += 1
            self.c.timer_events += 1
            self._increase(at)
            at += p.rate_timer_ns
            if at <= t and (self.rc, self.rt) == before and self._settled():
                # nothing left to recover (at line rate, say): the events until t change nothing
                # but the stage count, so a long idle period costs one step, not one per T
                k = (t - at) // p.rate_timer_ns + 1
                self._time_stage += k
                self.c.timer_events += k
                at += k * p.rate_timer_ns
        self._rate_timer_at = at

    def _settled(self) -> bool:
        """No later timer event can raise Rt (the byte stage stays: nothing is being sent)."""
        p = self.params
        return self.rt >= p.line_rate_bps or (p.r_ai_bps == 0 and (p.r_hai_bps == 0
                                                                   or self._byte_stage < p.f_stages))

    def _count_bytes(self, size: int, t: int) -> None:
        if self._rate_timer_at is None or self.mode == "fixed":
            return
        self._bytes_since += size
        if self._bytes_since >= self.params.byte_counter_bytes:
            self._bytes_since = 0
            self._byte_stage += 1
            self.c.byte_events += 1
            self._increase(t)

    def _increase(self, t: int) -> None:
        p = self.params
        f = p.f_stages
        hi, lo = max(self._time_stage, self._byte_stage), min(self._time_stage, self._byte_stage)
        line = float(p.line_rate_bps)
        if hi < f:
            self.c.fast_recovery += 1
        elif lo < f:
            self.rt = min(line, self.rt + p.r_ai_bps)
            self.c.additive_increase += 1
        else:
            self.rt = min(line, self.rt + (lo - f + 1) * p.r_hai_bps)
            self.c.hyper_increase += 1
        self.rc = min(line, (self.rt + self.rc) / 2)
        self._log(t)

    def _log(self, t: int) -> None:
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

    # ------------------------------------------------------------------ reports
    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "flow": self.flow}
        out.update(asdict(self.c))
        out.update(rc_bps=round(self.rc), rt_bps=round(self.rt), min_rc_bps=round(self.min_rc),
                   alpha=round(self.alpha, 6), time_stage=self._time_stage, byte_stage=self._byte_stage,
                   done=self._done, start_ns=self.start_ns, done_ns=self.done_ns)
        return out

    def check_counters(self) -> dict[str, int]:
        """CNPs refused (each changed nothing), by reason (the SenderBase-like contract)."""
        return {"cnps_foreign": self.c.cnps_foreign}


if TYPE_CHECKING:
    _sender_is_an_engine: type[Engine] = RateSender


__all__ = ["BURST_NS", "BURST_PACKETS", "MODES", "PAPER_LINE_RATE_BPS", "RATE_LOG_MAX", "DcqcnParamError",
           "DcqcnParams", "RateSender", "RateSenderCounters"]
