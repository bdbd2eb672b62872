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

The pacing, the flow's end, burst mode and the rate log are :class:`netstack.tcd.pacing.PacedFlow`'s
(shared with TIMELY's sender). Timers are evaluated lazily, in virtual time: before a packet is
sent at its slot, and before a CNP is taken, every alpha decay and increase event due by then is
applied at its own time, so the result does not depend on how late the shell calls, and
:meth:`RateSender.next_deadline` is only the next packet's slot. Rates are line rates (Ethernet,
IPv4 and UDP headers, preamble, FCS and gap count, :mod:`netstack.ethernet`), as a NIC's rate
limiter counts them.

The parameters (:class:`DcqcnParams`) default to the DCQCN paper's, at its 40 Gbit/s (as we read
them: g = 1/256, K = T = 55 us, B = 10 MB, F = 5, R_AI = 40 Mbit/s, N = 50 us); alpha starts at 1
as in DCQCN (the first cut halves the rate; TCD's ns-3 port starts at 0.5: our choice of the
former); R_HAI = 200 Mbit/s and Rmin = 100 Mbit/s are our choices (the values of TCD's public ns-3
port and of DCQCN's authors' ns-3 model, scaled to 40 Gbit/s). :meth:`DcqcnParams.scaled` scales
them to a line rate and a time scale (docs/architecture.md "Time and scale": rates down, times
up, bytes as they are).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final

from headers.tcd import CnpKind, TcdCnp

from ..engine import ActionQueue
from ..errors import ConfigError
from .pacing import BURST_PACKETS, HOUR_NS, MAX_RATE, RATE_LOG_MAX, PacedFlow, check_int, check_real, scaled_params

if TYPE_CHECKING:
    from ..engine import Engine

#: the rate the DCQCN paper's parameters are given for
PAPER_LINE_RATE_BPS: Final = 40_000_000_000
MODES: Final = ("dcqcn", "dcqcn+tcd", "fixed")
#: ``burst_ns`` at the paper's scale: 2 us, the live testbed's 2 ms at its x1000 (its timers have
#: ~1 ms granularity). A time, so it scales like one: a sender held by PFC gets the same credit, in
#: packets, on a resume at every scale (the TCD multi scenario is scale-invariant only so)
BURST_NS: Final = 2_000


class DcqcnParamError(ConfigError):
    """A DCQCN or sender setting out of range; ``field`` names it."""


def _check_int(name: str, value: Any, lo: int, hi: int) -> None:
    check_int(DcqcnParamError, name, value, lo, hi)


def _check_real(name: str, value: Any, lo: float, hi: float, *, open_low: bool = False) -> None:
    check_real(DcqcnParamError, name, value, lo, hi, open_low=open_low)


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
        _check_int("line_rate_bps", self.line_rate_bps, 1_000, MAX_RATE)
        _check_int("r_min_bps", self.r_min_bps, 1, self.line_rate_bps)
        _check_real("g", self.g, 0.0, 1.0, open_low=True)
        _check_real("alpha0", self.alpha0, 0.0, 1.0)
        for name in ("alpha_timer_ns", "rate_timer_ns", "cnp_interval_ns", "burst_ns"):
            _check_int(name, getattr(self, name), 1, HOUR_NS)
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
        return scaled_params(cls, paper_rate_bps=PAPER_LINE_RATE_BPS, line_rate_bps=line_rate_bps,
                             time_scale=time_scale, rates=("r_min_bps", "r_ai_bps", "r_hai_bps"),
                             times=("alpha_timer_ns", "rate_timer_ns", "cnp_interval_ns", "burst_ns"),
                             overrides=overrides, error=DcqcnParamError, what="DCQCN")

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


class RateSender(PacedFlow):
    """A paced flow of TCD data packets under DCQCN (``dcqcn``), DCQCN + TCD (``dcqcn+tcd``) or at
    a fixed rate (``fixed``); sans-IO (docs/architecture.md "Engines are sans-IO").

    The flow's settings (``payload``, ``size_bytes``, ``duration_ns``, ``burst_bytes``,
    ``burst_period_ns``, ``start_ns``) are :class:`~netstack.tcd.pacing.PacedFlow`'s. ``rate_bps``:
    the fixed rate, or the initial Rc in the DCQCN modes (default: the line rate, as DCQCN starts).
    """

    c: RateSenderCounters

    def __init__(self, params: DcqcnParams, *, flow: int, mode: str = "dcqcn", payload: int = 1000,
                 size_bytes: int | None = None, duration_ns: int | None = None, rate_bps: int | None = None,
                 burst_bytes: int | None = None, burst_period_ns: int | None = None, start_ns: int = 0,
                 now_ns: int) -> None:
        self._validate(params, flow, mode, payload, size_bytes, duration_ns, rate_bps, burst_bytes,
                       burst_period_ns, start_ns, now_ns)
        rate = float(params.line_rate_bps if rate_bps is None else rate_bps)
        super().__init__(flow=flow, payload=payload, size_bytes=size_bytes, duration_ns=duration_ns,
                         burst_bytes=burst_bytes, burst_period_ns=burst_period_ns, start_ns=start_ns, now_ns=now_ns,
                         burst_ns=params.burst_ns, rate=rate)
        self.params = params
        self.mode = mode
        self.actions = ActionQueue()  # a sender's outputs are all return values
        self.c = RateSenderCounters()
        #: Rc (``rc``, the current rate) and Rt (bit/s), alpha
        self.rt = self.min_rc = rate
        self.alpha = float(params.alpha0)
        # DCQCN state, live from the first cut: stage counters, bytes since the last byte event,
        # the next increase-timer event and the next alpha decay (None: not running)
        self._time_stage = self._byte_stage = 0
        self._bytes_since = 0
        self._rate_timer_at: int | None = None
        self._alpha_at: int | None = None

    @staticmethod
    def _validate(params: DcqcnParams, flow: int, mode: str, payload: int, size_bytes: int | None,
                  duration_ns: int | None, rate_bps: int | None, burst_bytes: int | None,
                  burst_period_ns: int | None, start_ns: int, now_ns: int) -> None:
        if mode not in MODES:
            raise DcqcnParamError("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
        PacedFlow.check_flow(DcqcnParamError, flow, payload, size_bytes, duration_ns, burst_bytes, burst_period_ns,
                             start_ns, now_ns)
        if rate_bps is not None:
            _check_int("rate_bps", rate_bps, 1 if mode == "fixed" else params.r_min_bps, params.line_rate_bps)

    # ------------------------------------------------------------------ the pacing's hooks
    def _before_packet(self, t: int) -> None:
        self._advance(t)

    def _after_packet(self, size: int, t: int) -> None:
        self._count_bytes(size, t)

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
