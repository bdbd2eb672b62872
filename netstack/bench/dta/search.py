"""The rate search of ``netstack bench dta``: from one overload run to the highest offered rate a
path ingests with < 1 % loss, and what that search says a path sustains."""

from __future__ import annotations

from typing import Any

from ...validity import Validity
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
    whose reporter cannot deliver a paced rate asked of it.

    A measurement that does not count (``valid`` false: other work took the CPUs, the reporter
    fell short of its duration; netstack.validity) ends the search: every later step would be
    steered by it. The case is then ``valid`` false, with no ``sustained`` rate, and its runs kept
    for the record (:func:`invalid_runs` lists them)."""
    say = say or (lambda msg: None)

    def tell(label: str, run: dict[str, Any]) -> None:
        say(f"    {label}: offered {run['offered_per_s'] / 1e3:.1f} k/s, "
            f"ingested {(run['ingested_per_s'] or 0) / 1e3:.1f} k/s, loss {run['loss']:.2%}"
            + (f", resyncs {run['resyncs']}" if run.get("resyncs") else "")
            + ("" if run.get("valid", True) else "; INVALID (not counted): " + "; ".join(Validity.of(run).reasons)))

    sat = measure(0)
    tell("overload", sat)
    out: dict[str, Any] = {"overload": sat, "runs": [], "sustained": None, "reporter_bound": False,
                           "valid": bool(sat.get("valid", True))}
    if not out["valid"]:
        return out
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
        tell(f"paced {rate / 1e3:.1f} k/s", run)
        if not run.get("valid", True):
            out["valid"] = False
            return out
        ok = keeps_up(run)
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
    or for a reporter-bound path what it ingested while the reporter went flat out; None for a
    case whose search a measurement that does not count ended (it shows nothing)."""
    s = case.get("sustained")
    if not s or not case.get("valid", True):
        return None
    if case.get("reporter_bound"):
        return min(s["ingested_per_s"] or 0.0, s["offered_per_s"])
    return s["offered_per_s"]


def _run_label(run: dict[str, Any]) -> str:
    return "overload" if not run.get("rate") else f"paced {run['rate'] / 1e3:.1f} k/s"


def invalid_runs(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every measurement that does not count, as ``{"row", "reasons"}``: listed, never counted."""
    out = []
    for c in cases:
        for run in (c["overload"], *c["runs"]):
            if not run.get("valid", True):
                out.append({"row": f"{c['path']} {c['label']} {_run_label(run)}",
                            "reasons": Validity.of(run).reasons or ["the run says it is invalid"]})
    return out


def vs_naive(cases: list[dict[str, Any]]) -> None:
    """Each DTA case's sustained rate over the naive collector's on the same reports
    (``vs_naive``); None where either case does not count or shows no rate."""
    naive = {c["kind"]: sustained(c) for c in cases if c["path"] == "naive"}
    for c in cases:
        if c["path"] == "dta":
            mine, base = sustained(c), naive.get(c["kind"])
            c["vs_naive"] = mine / base if mine and base else None
