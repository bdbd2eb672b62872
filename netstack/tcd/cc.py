"""A TCD end host's congestion control by name: DCQCN's reaction point or TIMELY, each with or
without TCD, or a fixed rate; the one place the live tool (``python -m netstack.tcd send --cc``),
the simulated hosts and the scenarios pick a sender and its parameters.

========  ==========================  ==========================================  ===============================
``cc``    parameters                  modes (:func:`cc_mode`: plain, with TCD)    sender
========  ==========================  ==========================================  ===============================
dcqcn     :class:`DcqcnParams`        ``dcqcn``, ``dcqcn+tcd``, ``fixed``         :class:`RateSender`
timely    :class:`TimelyParams`       ``timely``, ``timely+tcd``, ``fixed``       :class:`TimelySender`
========  ==========================  ==========================================  ===============================

Both senders have the same interface (``poll``, ``receive``, ``next_deadline``, ``on_timer``,
``done``, ``counters()``, ``c.rate_cuts``, ``c.holds``, ``rate_log``, ``start_ns``, ``done_ns``),
so :class:`~netstack.sim.transport.EngineSender` and :func:`netstack.io.paced.run_sender` run
either. One receiver serves both (:class:`~netstack.tcd.np.TcdReceiver` takes either parameter
set for its CNP interval): it sends CNPs to every flow and an ACK to every packet that asks.
"""

from __future__ import annotations

from typing import Any, Final

from ..errors import ConfigError
from .dcqcn import MODES as DCQCN_MODES
from .dcqcn import DcqcnParams, RateSender
from .timely import MODES as TIMELY_MODES
from .timely import TimelyParams, TimelySender

#: the congestion controls, the first the default
CCS: Final = ("dcqcn", "timely")
#: each one's engine modes
CC_MODES: Final = {"dcqcn": DCQCN_MODES, "timely": TIMELY_MODES}

CcParams = DcqcnParams | TimelyParams
CcSender = RateSender | TimelySender


def _check_cc(cc: str) -> None:
    if cc not in CCS:
        raise ConfigError("cc", f"must be one of {', '.join(CCS)}, got {cc!r}")


def cc_params(cc: str, line_rate_bps: int, time_scale: float = 1, **overrides: Any) -> CcParams:
    """``cc``'s parameters scaled to ``line_rate_bps`` and ``time_scale`` (``DcqcnParams.scaled`` or
    ``TimelyParams.scaled``), then ``overrides`` (that class's field names)."""
    _check_cc(cc)
    if cc == "timely":
        return TimelyParams.scaled(line_rate_bps, time_scale, **overrides)
    return DcqcnParams.scaled(line_rate_bps, time_scale, **overrides)


def cc_mode(cc: str, tcd: bool) -> str:
    """``cc``'s engine mode, with TCD's reaction to UE (``dcqcn+tcd``, ``timely+tcd``) or without."""
    _check_cc(cc)
    return f"{cc}+tcd" if tcd else cc


def make_sender(cc: str, mode: str, params: CcParams, *, flow: int, payload: int = 1000,
                size_bytes: int | None = None, duration_ns: int | None = None, rate_bps: int | None = None,
                burst_bytes: int | None = None, burst_period_ns: int | None = None, start_ns: int = 0,
                now_ns: int) -> CcSender:
    """A sender of ``cc`` in ``mode`` (one of ``CC_MODES[cc]``) with ``params`` of that cc's class;
    the rest are the senders' own settings (:class:`~netstack.tcd.pacing.PacedFlow`; ``rate_bps``:
    the fixed rate, or the initial one). ConfigError (naming the field) for a wrong combination."""
    _check_cc(cc)
    if mode not in CC_MODES[cc]:
        raise ConfigError("mode", f"{cc} runs {', '.join(CC_MODES[cc])}, not {mode!r}")
    kw: dict[str, Any] = {"flow": flow, "mode": mode, "payload": payload, "size_bytes": size_bytes,
                          "duration_ns": duration_ns, "rate_bps": rate_bps, "burst_bytes": burst_bytes,
                          "burst_period_ns": burst_period_ns, "start_ns": start_ns, "now_ns": now_ns}
    if cc == "timely":
        if not isinstance(params, TimelyParams):
            raise ConfigError("params", f"timely takes TimelyParams, got {type(params).__name__}")
        return TimelySender(params, **kw)
    if not isinstance(params, DcqcnParams):
        raise ConfigError("params", f"dcqcn takes DcqcnParams, got {type(params).__name__}")
    return RateSender(params, **kw)


__all__ = ["CCS", "CC_MODES", "CcParams", "CcSender", "cc_mode", "cc_params", "make_sender"]
