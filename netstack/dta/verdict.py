"""Is a ``dta report`` run a result? Its checks (:mod:`netstack.validity`; docs/dta.md "Is a
report run valid?").

A report run offers the translator a load: so many reports, at a rate or flat out, for a count or
a time. What the collector ingested is the result; it means something only if the load was
offered as planned and nobody on the path was starved:

- **reports sent as planned**: at least :data:`SHARE` of the planned count (``--count``, or
  ``--rate`` x ``--duration``); Sketch-Merge: every column of the sketch sent (the reporter
  finished its epoch);
- **at the planned rate** (``--rate``, for runs long enough to have one: at least
  :data:`MIN_RATE_REPORTS` reports): within :data:`RATE_TOLERANCE`. A reporter the machine
  starved falls behind (it catches up in bursts, a different load);
- **no process starved**: the reporter's own scheduling delay (``sched``), and the switch
  daemons' (the translator runs in its ToR's) and the collector daemon's over the run, p99 within
  the generic limit and the largest within the translator's window time-out (50 ms by default:
  the time the translator is configured to wait for the collector's answers; with the scheduling
  slack it no longer rewinds a window for a stall, docs/dta.md "The window time-out on a loaded
  host", but a full window held longer than the configuration meant sheds the reports meanwhile).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..validity import DEFAULT_P99_MS, Validity
from .requester import DEFAULT_WINDOW_TIMEOUT_NS

#: a reporter must send this share of its planned reports
SHARE = 0.95
#: how far its rate may be from the planned one
RATE_TOLERANCE = 0.10
#: fewer reports than this have no rate to speak of (the first one goes at once)
MIN_RATE_REPORTS = 50


def planned(kind: str, count: int, rate: float, duration: float | None, columns: int = 0) -> dict[str, Any]:
    """What a reporter run plans (the tool's ``planned``): ``reports`` (None: as many as it can
    in ``seconds``), ``rate`` (None: flat out), ``seconds`` (None: a count)."""
    if kind == "sketch":
        return {"reports": columns, "rate": rate or None, "seconds": None}
    if duration:
        return {"reports": round(rate * duration) if rate else None, "rate": rate or None, "seconds": duration}
    return {"reports": count, "rate": rate or None, "seconds": None}


def lag_limits(window_timeout_ns: int | None = None) -> dict[str, float]:
    """p99 within the generic limit, max within the window time-out (module docstring)."""
    return {"p99_ms": DEFAULT_P99_MS, "max_ms": (window_timeout_ns or DEFAULT_WINDOW_TIMEOUT_NS) / 1e6}


def _check_sent(v: Validity, result: Mapping[str, Any], plan: Mapping[str, Any]) -> None:
    sent = int(result.get("columns_sent", result.get("sent")) or 0)
    want = plan.get("reports")
    if result.get("kind") == "sketch":
        v.at_least("sketch columns sent", sent, int(want or 0), " (the whole epoch)")
    elif want is not None:
        v.planned("reports sent", sent, int(want), SHARE)
    else:  # flat out for a time: the time is the plan
        secs = float(result.get("seconds") or 0.0)
        v.at_least("reporting time (s)", round(secs, 3), round(SHARE * float(plan["seconds"]), 3),
                   f" ({SHARE:.0%} of {plan['seconds']:g} s planned)")


def _check_rate(v: Validity, result: Mapping[str, Any], plan: Mapping[str, Any]) -> None:
    rate, sent, secs = plan.get("rate"), int(result.get("sent") or 0), float(result.get("seconds") or 0.0)
    if not rate or sent < MIN_RATE_REPORTS or secs <= 0:
        return
    # the first report goes at once: n reports span n - 1 intervals
    v.near("report rate (/s)", round((sent - 1) / secs, 1), float(rate), RATE_TOLERANCE)


def report_validity(result: Mapping[str, Any], lags: Mapping[str, Mapping[str, Any] | None], *,
                    window_timeout_ns: int | None = None) -> Validity:
    """The checks of one reporter run: ``result`` is the reporter tool's JSON (with its
    ``planned``), ``lags`` every process's scheduling delay (the reporter's ``sched``, the
    daemons' over the run), ``window_timeout_ns`` the translator's configured time-out."""
    v = Validity()
    plan = result.get("planned") or {}
    _check_sent(v, result, plan)
    _check_rate(v, result, plan)
    v.not_starved(lags, **lag_limits(window_timeout_ns))
    return v


__all__ = ["MIN_RATE_REPORTS", "RATE_TOLERANCE", "SHARE", "lag_limits", "planned", "report_validity"]
