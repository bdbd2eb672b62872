"""The rate search of ``netstack bench dta``: from one overload run to the highest offered rate a
path ingests with < 1 % loss, and what that search says a path sustains."""

from __future__ import annotations

from typing import Any

from .params import KEEP_UP, LOSS_FREE, REPORTER_SHORT, SEARCH_STEPS


def keeps_up(run: dict[str, Any]) -> bool:
    """Less than :data:`LOSS_FREE` lost, and ingesting at the offered rate while it was offered
    (not merely draining a backlog the socket buffers absorbed after the reporter stopped)."""
    ing = run["ingested_per_s"] or 0.0
    return run["loss"] < LOSS_FREE and ing >= KEEP_UP * run["offered_per_s"]


def find_rate(measure: Any, duration: float, say: Any = None) -> dict[str, Any]:
    """Overload once, then search for the highest offered rate the path ingests with < 1 % loss.

    ``measure(rate)`` runs one measurement (rate 0 = as fast as the reporter can). The first
    paced run is at 95 % of what the overload run ingested; while runs keep up, the rate goes
    up by 25 % (overload can ingest *less* than the path sustains when paced: the reporter's
    drops at a full socket contend with the reader), else down by 15 %, at most
    :data:`SEARCH_STEPS` paced runs. A path whose overload run already loses < 1 % is
    reporter-bound: its capacity is at least what was offered (``reporter_bound``); so is one
    whose reporter cannot deliver a paced rate asked of it."""
    say = say or (lambda msg: None)

    def tell(label: str, run: dict[str, Any]) -> None:
        say(f"    {label}: offered {run['offered_per_s'] / 1e3:.1f} k/s, "
            f"ingested {(run['ingested_per_s'] or 0) / 1e3:.1f} k/s, loss {run['loss']:.2%}"
            + (f", resyncs {run['resyncs']}" if run.get("resyncs") else ""))

    sat = measure(0)
    tell("overload", sat)
    out: dict[str, Any] = {"overload": sat, "runs": [], "sustained": None, "reporter_bound": False}
    if sat["loss"] < LOSS_FREE:
        out["sustained"] = sat
        out["reporter_bound"] = True
        return out
    base = sat["ingested_per_s"] or sat["offered_per_s"] * (1 - sat["loss"])
    rate = 0.95 * base
    best = None
    direction = 0
    for _ in range(SEARCH_STEPS):
        run = measure(rate)
        out["runs"].append(run)
        ok = keeps_up(run)
        tell(f"paced {rate / 1e3:.1f} k/s", run)
        if run["offered_per_s"] < REPORTER_SHORT * rate:  # the reporter, not the path, is the limit now
            out["reporter_bound"] = True
            if ok:
                best = run
            break
        if ok:
            best = run
        if direction == 0:
            direction = 1 if ok else -1
        if (direction == 1 and not ok) or (direction == -1 and ok):
            break
        rate *= 1.25 if direction == 1 else 0.85
    out["sustained"] = best
    return out


def sustained(case: dict[str, Any]) -> float | None:
    """The highest rate shown to be ingested: a paced run's offered rate (it kept up with it),
    or for a reporter-bound path what it ingested while the reporter went flat out."""
    s = case.get("sustained")
    if not s:
        return None
    if case.get("reporter_bound"):
        return min(s["ingested_per_s"] or 0.0, s["offered_per_s"])
    return s["offered_per_s"]
