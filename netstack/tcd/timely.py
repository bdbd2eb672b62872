"""TIMELY's sender (RTT-gradient rate control), with TCD's reaction to an undetermined mark.

TIMELY ("TIMELY: RTT-based Congestion Control for the Datacenter", Mittal et al., SIGCOMM 2015)
is rate-based: the sender measures an RTT per *completion event* (the ACK of a segment, §3.1,
§4.2) and sets its rate from it (§4.3, Algorithm 1); TCD ("Congestion Detection in Lossless
Networks", SIGCOMM 2021) pairs it, as it pairs DCQCN, with its ternary marks. The rules, as
:class:`TimelySender` runs them on each RTT sample ``new_rtt`` (Algorithm 1)::

    new_rtt_diff = new_rtt - prev_rtt;  prev_rtt = new_rtt        (0 on the first sample)
    rtt_diff = (1 - alpha) * rtt_diff + alpha * new_rtt_diff
    normalized_gradient = rtt_diff / min_rtt
    new_rtt < T_low:              rate += delta                   (additive increase)
    new_rtt > T_high:             rate *= 1 - beta * (1 - T_high / new_rtt)
    normalized_gradient <= 0:     rate += N * delta               (N = hai_n once the gradient was
                                                                    <= 0 for hai_after completions
                                                                    in a row, HAI; else N = 1)
    else:                         rate *= 1 - beta * normalized_gradient

then ``min_rate <= rate <= line rate``. The run of non-positive gradients counts every sample the
algorithm takes (in each region of RTT); a positive gradient ends it (our reading of "N = 5 if
gradient < 0 for five completion events", with the branch's own test, <= 0). The authors' code
snippet also scales each step by the time since the previous update over min_rtt
(``delta_factor``); Algorithm 1 has no such factor and neither have we.

**Completions, segments and the RTT** (TIMELY §3.1, §4.2; the ACK is our format,
:class:`headers.tcd.TcdAck`). The sender sets the ACK flag on the data packet that completes each
``segment_bytes`` of payload (a segment, TIMELY §6: 16 KB) and remembers its send time; the
receiver (:class:`netstack.tcd.np.TcdReceiver`) answers it at once, echoing ``seq`` and
``send_ts_ns`` and counting the CE and UE marks of the flow's packets since its previous ACK. The
RTT sample is the ACK's arrival minus the echoed send time. TIMELY sends a segment back to back at
line rate and paces between segments, so it subtracts the segment's serialization from
"completion time - send time" (§3.1); we pace every packet at the current rate (the same pacer as
DCQCN's sender, :class:`netstack.tcd.pacing.PacedFlow`: our choice) and time the segment's *last*
packet, which leaves the same thing: propagation, queueing and one packet's serialization per
hop. An ACK is taken once, for a segment still outstanding, with the echoed time we sent it;
anything else (a duplicate, a late ACK overtaken by a later one, another flow's, bytes we never
sent) is counted and changes nothing. CNPs (the receiver is DCQCN's NP for every flow: it cannot
tell a TIMELY flow) are counted and ignored: TIMELY reacts to delay only.

**TIMELY + TCD** (mode ``timely+tcd``). The RTT of a flow that crosses an *undetermined* port
(PFC switches it ON and OFF, TCD §3.2.1) grows with the pauses, which the flow did not cause;
plain TIMELY cuts for them. The TCD paper's end-host section (§4) was not available to us, so the
rule is **our choice**, the counterpart of DCQCN + TCD's hold (netstack/tcd/dcqcn.py): a completion
whose segment carried UE marks and no CE mark **holds**: the rate stays (no decrease in any
region, and no increase either), ``rtt_diff`` and the run of non-positive gradients are left as
they were (the pause's RTT growth is not the flow's gradient), and ``prev_rtt`` becomes the
sample, so that the next gradient measures the change from here rather than charge the whole
pause to the first unmarked segment. A segment with any CE mark (a congestion port on the path:
this flow contributes) takes Algorithm 1 as usual; so does every sample in mode ``timely``, which
ignores the marks. Mode ``fixed`` sends at a constant rate and only measures.

**Parameters** (:class:`TimelyParams`; each field's comment gives its source): TIMELY §6, "unless
mentioned otherwise": segment 16 KB, T_low 50 us, T_high 500 us, delta 10 Mbit/s, beta 0.8;
Algorithm 1: N = 5 after five completions. Not given in the TIMELY text we could check, so **our
choice**: alpha = 0.02 (what the TIMELY authors' published code snippet recommends; the HPCC
authors' ns-3 TIMELY model uses 0.875, with which two flows into one port swing between 10 % and
90 % of it in our virtual-time test, where 0.02 settles at half each: docs/tcd.md), min_rtt = 20
us (the HPCC authors' ns-3 model; TIMELY normalizes by "the minimum RTT" and never fixes it),
the line rate the paper's delta goes with (10 Gbit/s, the authors' snippet: "10Mbps for 10Gbps
line rate"), min_rate = line rate / 400 (DCQCN's Rmin at 40 Gbit/s, 100 Mbit/s, in proportion),
the initial rate (the line rate, as DCQCN starts). :meth:`TimelyParams.scaled` scales them as
``DcqcnParams.scaled`` does (docs/architecture.md "Time and scale"): rates in proportion to the
line rate over 10 Gbit/s, times (T_low, T_high, min_rtt, the NP's CNP interval, the pacer's
credit) times the time scale, bytes (the segment) as they are.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final

from headers.tcd import TcdAck, TcdCnp, TcdDataFlag, decode_feedback

from ..engine import ActionQueue
from ..errors import ConfigError
from .pacing import HOUR_NS, MAX_RATE, PacedFlow, check_int, check_real, scaled_params

if TYPE_CHECKING:
    from ..engine import Engine

#: the line rate TIMELY's delta is given for (the authors' code snippet: "10Mbps for 10Gbps line rate")
PAPER_LINE_RATE_BPS: Final = 10_000_000_000
MODES: Final = ("timely", "timely+tcd", "fixed")
#: segments awaiting their ACK, at most (the oldest is given up beyond: ``acks_unanswered``)
PENDING_MAX: Final = 1024
_U32 = 0xFFFFFFFF


class TimelyParamError(ConfigError):
    """A TIMELY or sender setting out of range; ``field`` names it."""


def _int(name: str, value: Any, lo: int, hi: int) -> None:
    check_int(TimelyParamError, name, value, lo, hi)


@dataclass(frozen=True)
class TimelyParams:
    """TIMELY's settings (rates in bit/s, times in ns, the segment in bytes) and the NP's CNP interval."""

    line_rate_bps: int = PAPER_LINE_RATE_BPS
    r_min_bps: int = 25_000_000  # our choice: line rate / 400 (DCQCN's Rmin in proportion)
    alpha: float = 0.02  # EWMA weight of the new RTT difference: our choice (the authors' code snippet)
    beta: float = 0.8  # multiplicative decrement factor: TIMELY §6
    delta_bps: int = 10_000_000  # additive increment: TIMELY §6 (at 10 Gbit/s)
    t_low_ns: int = 50_000  # below: additive increase whatever the gradient: TIMELY §6
    t_high_ns: int = 500_000  # above: multiplicative decrease by T_high / RTT: TIMELY §6
    min_rtt_ns: int = 20_000  # normalizes the gradient: our choice (HPCC authors' ns-3 model)
    hai_after: int = 5  # non-positive gradients in a row before HAI: Algorithm 1
    hai_n: int = 5  # HAI's multiple of delta: Algorithm 1
    segment_bytes: int = 16_384  # payload per completion event (one ACK): TIMELY §6, 16 KB
    cnp_interval_ns: int = 50_000  # the receiver's (DCQCN's NP) CNP interval, for TcdReceiver
    burst_ns: int = 2_000  # a late poll's credit at most: the pacer's, as DcqcnParams.burst_ns

    def __post_init__(self) -> None:
        _int("line_rate_bps", self.line_rate_bps, 1_000, MAX_RATE)
        _int("r_min_bps", self.r_min_bps, 1, self.line_rate_bps)
        check_real(TimelyParamError, "alpha", self.alpha, 0.0, 1.0, open_low=True)
        check_real(TimelyParamError, "beta", self.beta, 0.0, 1.0, open_low=True)
        _int("delta_bps", self.delta_bps, 0, self.line_rate_bps)
        _int("t_low_ns", self.t_low_ns, 0, HOUR_NS)
        _int("t_high_ns", self.t_high_ns, 1, HOUR_NS)
        if self.t_high_ns <= self.t_low_ns:
            raise TimelyParamError("t_high_ns", f"must be above t_low_ns ({self.t_low_ns}), got {self.t_high_ns}")
        for name in ("min_rtt_ns", "cnp_interval_ns", "burst_ns"):
            _int(name, getattr(self, name), 1, HOUR_NS)
        _int("hai_after", self.hai_after, 1, 10_000)
        _int("hai_n", self.hai_n, 1, 10_000)
        _int("segment_bytes", self.segment_bytes, 1, 1 << 40)

    @classmethod
    def scaled(cls, line_rate_bps: int, time_scale: float = 1, **overrides: Any) -> TimelyParams:
        """The paper's parameters at ``line_rate_bps``: its rates (delta, min rate) in proportion
        to the line rate over 10 Gbit/s, its times (T_low, T_high, min_rtt, the CNP interval,
        burst_ns) times ``time_scale``, the segment as it is; then ``overrides`` (field names)."""
        return scaled_params(cls, paper_rate_bps=PAPER_LINE_RATE_BPS, line_rate_bps=line_rate_bps,
                             time_scale=time_scale, rates=("r_min_bps", "delta_bps"),
                             times=("t_low_ns", "t_high_ns", "min_rtt_ns", "cnp_interval_ns", "burst_ns"),
                             overrides=overrides, error=TimelyParamError, what="TIMELY")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class TimelySenderCounters:
    """What a :class:`TimelySender` counts (``counters()`` adds its rate, RTTs and state)."""

    packets_sent: int = 0
    bytes_sent: int = 0  # UDP payload bytes: TCD header and padding
    segments: int = 0  # ACK requests sent (completion events asked for)
    acks_rx: int = 0  # ACKs decoded, whatever they said
    acks_foreign: int = 0  # another flow's: ignored
    acks_stale: int = 0  # for no outstanding segment (duplicate, overtaken, never sent): ignored
    acks_unanswered: int = 0  # segments given up: a later one's ACK came first, or too many outstanding
    clock_regressions: int = 0  # an ACK "before" its echoed send time: ignored
    rtt_samples: int = 0
    ce_segments: int = 0  # samples whose segment carried CE marks
    ue_segments: int = 0  # ... UE marks and no CE
    additive_increase: int = 0  # RTT < T_low
    gradient_increase: int = 0  # gradient <= 0, N = 1
    hai_increase: int = 0  # gradient <= 0, N = hai_n
    t_high_cuts: int = 0  # RTT > T_high
    gradient_cuts: int = 0  # gradient > 0
    rate_cuts: int = 0  # t_high_cuts + gradient_cuts
    holds: int = 0  # UE-only samples in mode timely+tcd
    cnps_rx: int = 0  # CNPs of this flow: counted, ignored
    cnps_ce: int = 0
    cnps_ue: int = 0
    cnps_foreign: int = 0


class TimelySender(PacedFlow):
    """A paced flow of TCD data packets under TIMELY (``timely``), TIMELY + TCD (``timely+tcd``) or
    at a fixed rate that only measures its RTT (``fixed``); sans-IO (docs/architecture.md "Engines
    are sans-IO"), with :class:`~netstack.tcd.dcqcn.RateSender`'s interface: ``poll(now_ns)``,
    ``receive(datagram, now_ns)`` (an ACK or a CNP), ``next_deadline()``, ``on_timer(now_ns)``,
    ``done``, ``counters()``.

    The flow's settings (``payload``, ``size_bytes``, ``duration_ns``, ``burst_bytes``,
    ``burst_period_ns``, ``start_ns``) are :class:`~netstack.tcd.pacing.PacedFlow`'s. ``rate_bps``:
    the fixed rate, or the initial rate (default: the line rate).
    """

    c: TimelySenderCounters

    def __init__(self, params: TimelyParams, *, flow: int, mode: str = "timely", payload: int = 1000,
                 size_bytes: int | None = None, duration_ns: int | None = None, rate_bps: int | None = None,
                 burst_bytes: int | None = None, burst_period_ns: int | None = None, start_ns: int = 0,
                 now_ns: int) -> None:
        if not isinstance(params, TimelyParams):
            raise TimelyParamError("params", f"must be TimelyParams, got {type(params).__name__}")
        if mode not in MODES:
            raise TimelyParamError("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
        PacedFlow.check_flow(TimelyParamError, flow, payload, size_bytes, duration_ns, burst_bytes, burst_period_ns,
                             start_ns, now_ns)
        if rate_bps is not None:
            _int("rate_bps", rate_bps, 1 if mode == "fixed" else params.r_min_bps, params.line_rate_bps)
        rate = float(params.line_rate_bps if rate_bps is None else rate_bps)
        super().__init__(flow=flow, payload=payload, size_bytes=size_bytes, duration_ns=duration_ns,
                         burst_bytes=burst_bytes, burst_period_ns=burst_period_ns, start_ns=start_ns, now_ns=now_ns,
                         burst_ns=params.burst_ns, rate=rate)
        self.params = params
        self.mode = mode
        self.actions = ActionQueue()  # a sender's outputs are all return values
        self.c = TimelySenderCounters()
        self.min_rc = rate
        #: Algorithm 1's state: prev_rtt (None before the first sample), rtt_diff (ns), the
        #: normalized gradient of the last sample, the run of non-positive gradients
        self.prev_rtt: int | None = None
        self.rtt_diff = 0.0
        self.gradient = 0.0
        self.neg_run = 0
        self.last_rtt: int | None = None
        self.min_rtt_seen: int | None = None
        self.max_rtt_seen: int | None = None
        self._seg_bytes = 0
        self._pending: dict[int, int] = {}  # seq of a segment's last packet -> its send time

    # ------------------------------------------------------------------ segments
    def _packet_flags(self, size: int, t: int) -> int:
        """The ACK flag on the packet that completes a segment; remember when it went."""
        self._seg_bytes += size
        if self._seg_bytes < self.params.segment_bytes:
            return 0
        self._seg_bytes = 0
        pending = self._pending
        if len(pending) >= PENDING_MAX:
            del pending[next(iter(pending))]
            self.c.acks_unanswered += 1
        pending[self._seq & _U32] = t
        self.c.segments += 1
        return int(TcdDataFlag.ACK)

    # ------------------------------------------------------------------ feedback
    def receive(self, datagram: bytes, now_ns: int) -> None:
        """A UDP payload from the receiver: an ACK or a CNP (HeaderError if it is neither)."""
        msg = decode_feedback(datagram)
        if isinstance(msg, TcdAck):
            self.on_ack(msg, now_ns)
        else:
            self.on_cnp(msg, now_ns)

    def on_cnp(self, cnp: TcdCnp, now_ns: int) -> None:
        """Counted and ignored: TIMELY reacts to delay (the marks reach it in the ACKs)."""
        c = self.c
        if cnp.flow != self.flow:
            c.cnps_foreign += 1
            return
        c.cnps_rx += 1
        if cnp.kind:
            c.cnps_ue += 1
        else:
            c.cnps_ce += 1

    def on_ack(self, ack: TcdAck, now_ns: int) -> None:
        """A completion event: an RTT sample for the segment it acknowledges, if it is outstanding."""
        c = self.c
        c.acks_rx += 1
        if ack.flow != self.flow:
            c.acks_foreign += 1
            return
        sent = self._pending.get(ack.seq)
        if sent is None or sent != ack.echo_ts_ns:
            c.acks_stale += 1
            return
        self._settle(ack.seq)
        rtt = now_ns - sent
        if rtt < 0:
            c.clock_regressions += 1
            return
        self._measured(rtt)
        if ack.ce:
            c.ce_segments += 1
        elif ack.ue:
            c.ue_segments += 1
        if self.mode == "fixed":
            return
        if self.mode == "timely+tcd" and ack.ue and not ack.ce:
            self._hold(rtt)
        else:
            self.update(rtt, now_ns)

    def _settle(self, seq: int) -> None:
        """Drop ``seq``'s segment and every one sent before it (their ACKs were overtaken)."""
        pending = self._pending
        for key in list(pending):
            del pending[key]
            if key == seq:
                return
            self.c.acks_unanswered += 1

    def _measured(self, rtt: int) -> None:
        self.c.rtt_samples += 1
        self.last_rtt = rtt
        self.min_rtt_seen = rtt if self.min_rtt_seen is None else min(self.min_rtt_seen, rtt)
        self.max_rtt_seen = rtt if self.max_rtt_seen is None else max(self.max_rtt_seen, rtt)

    def _hold(self, rtt: int) -> None:
        """TIMELY + TCD on a UE-only segment (module docstring): the rate, rtt_diff and the run stay."""
        self.c.holds += 1
        self.prev_rtt = rtt

    # ------------------------------------------------------------------ Algorithm 1
    def update(self, new_rtt: int, now_ns: int) -> None:
        """TIMELY's rate computation on one RTT sample (TIMELY §4.3, Algorithm 1; module docstring)."""
        p, c = self.params, self.c
        new_rtt_diff = 0 if self.prev_rtt is None else new_rtt - self.prev_rtt
        self.prev_rtt = new_rtt
        self.rtt_diff = (1 - p.alpha) * self.rtt_diff + p.alpha * new_rtt_diff
        g = self.gradient = self.rtt_diff / p.min_rtt_ns
        self.neg_run = self.neg_run + 1 if g <= 0 else 0
        rate = self.rc
        if new_rtt < p.t_low_ns:
            rate += p.delta_bps
            c.additive_increase += 1
        elif new_rtt > p.t_high_ns:
            rate *= 1 - p.beta * (1 - p.t_high_ns / new_rtt)
            c.t_high_cuts += 1
            c.rate_cuts += 1
        elif g <= 0:
            hai = self.neg_run >= p.hai_after
            rate += (p.hai_n if hai else 1) * p.delta_bps
            if hai:
                c.hai_increase += 1
            else:
                c.gradient_increase += 1
        else:
            rate *= 1 - p.beta * g
            c.gradient_cuts += 1
            c.rate_cuts += 1
        self.rc = min(float(p.line_rate_bps), max(float(p.r_min_bps), rate))
        self.min_rc = min(self.min_rc, self.rc)
        self._log(now_ns)

    def on_timer(self, now_ns: int) -> None:
        """TIMELY has no timers: its clock is the completions (kept for the engines' interface)."""

    # ------------------------------------------------------------------ reports
    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "flow": self.flow}
        out.update(asdict(self.c))
        out.update(rc_bps=round(self.rc), min_rc_bps=round(self.min_rc), rtt_diff_ns=round(self.rtt_diff, 3),
                   gradient=round(self.gradient, 6), neg_run=self.neg_run, last_rtt_ns=self.last_rtt,
                   min_rtt_seen_ns=self.min_rtt_seen, max_rtt_seen_ns=self.max_rtt_seen, pending=len(self._pending),
                   done=self._done, start_ns=self.start_ns, done_ns=self.done_ns)
        return out

    def check_counters(self) -> dict[str, int]:
        """Feedback refused (each changed nothing), by reason (the SenderBase-like contract)."""
        c = self.c
        return {"acks_foreign": c.acks_foreign, "acks_stale": c.acks_stale, "clock_regressions": c.clock_regressions,
                "cnps_foreign": c.cnps_foreign}


if TYPE_CHECKING:
    _sender_is_an_engine: type[Engine] = TimelySender


__all__ = ["MODES", "PAPER_LINE_RATE_BPS", "PENDING_MAX", "TimelyParamError", "TimelyParams", "TimelySender",
           "TimelySenderCounters"]
