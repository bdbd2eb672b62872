"""Is a live ``netstack onepipe run`` a result? Its checks (:mod:`netstack.validity`, issue 28).

A run on a machine that starved it is not evidence about 1Pipe: a process that waited 300 ms
for a CPU is declared failed by a correct failure detector, and a best-effort sender whose ACKs
sat in its socket reports delivered messages lost. :func:`judge` reads a run's summary (what
:func:`netstack.onepipe.runner.run` returns, before ``valid`` and ``checks`` are added) and
makes the checks; docs/onepipe.md "Run validity" lists them:

- **processes**: every process of the run reported back (those killed on purpose are named);
- **messages sent**: what the processes still alive sent against the plan (``procs`` x
  scatterings in ``seconds`` at ``rate`` x destinations, less the killed ones' share);
- **on schedule**: every process started scattering when the run said and sent its last
  scattering by the planned end (a process the host did not run in time falls behind: its late
  scatterings go out at once, in a burst);
- **accounting** (nothing killed): every message sent was delivered, reported by its sender
  (send-fail: known not delivered; send-unknown: its ACK timeout fired) or listed in flight at
  its sender's end (issue 31, :mod:`.accounting`): nothing unaccounted, and no message reported
  failed was delivered (a known failure is never a delivered message);
- **false loss reports** (best effort, nothing killed, no loss or clock step injected): no message
  reported unknown was delivered: only the ACK timeout reports one, and with no loss it fires
  for a delivered message only when the ACK came later than the timeout, a delay the network did
  not make;
- **input timeouts** (best effort, nothing killed, no fault injected): no switch timed out an input
  that then spoke again (``rejoins``, :mod:`.barrier`): a process or switch silent for the input
  timeout while it ran (§6), whose next messages may come late and be reported lost;
- **process failures** (reliable, nothing killed, no clock step): no process was declared failed
  while it ran: with no fault injected a failure means the failure detector was fooled (§8);
- **scheduling delay**: every process's and daemon's event-loop lag (:mod:`netstack.looplag`)
  within :func:`limits`, derived from the protocol's own timers.

:func:`account` and :func:`false_failures` compute the two inputs that come from the run's logs.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..validity import Validity
from ..validity import verdict_line as _verdict_line
from .params import OnePipeParams

#: how late a process may send its last scattering, as a share of ``seconds`` (at least
#: :data:`MIN_LATE_S`): beyond it the run did not offer the planned rate over the planned time
LATE_SHARE = 0.05
MIN_LATE_S = 0.1


def limits(params: OnePipeParams, reliable: bool) -> dict[str, float]:
    """The scheduling delay a run of 1Pipe with ``params`` tolerates, in ms (every process's and
    daemon's event-loop lag, :mod:`netstack.looplag`), each from one of the protocol's timers:

    - ``p99_ms`` = the input timeout (``timeout_beacons`` x ``T_beacon``, 30 ms live, §6), the
      shortest timer that declares anything (an input out of its switch's minimum): more than one
      wake-up in a hundred later than that, and a process's beacons miss its ToR's timeout over and
      over. (Not ``T_beacon`` itself, nor the 12 ms retransmission timeout: on this 2-core machine
      eight Python processes and four daemons wake up 10-20 ms late at p99 when nothing else runs,
      docs/onepipe.md "Run validity"; the consequence, reliable runs' retransmissions mostly
      spurious, is documented there.)
    - ``max_ms``, best effort: the input timeout too, which has no slack (feature.py
      ``set_timer_slack``): a process or a switch stalled longer is timed out by its neighbour, and
      what it stamps when it comes back may reach receivers below their barrier, dropped and
      reported lost: loss the network did not make.
    - ``max_ms``, reliable: half the failure timeout (``failure_beacons`` x ``T_beacon``, 300 ms
      live; §8 step 1). The switch's timer slack covers the switch's own delay, not the process's:
      a process stalled that long is silent at its ToR; half leaves room for what the 5 ms sampler
      does not see (a stall is measured once it ends, a beacon gap adds a beacon interval and
      the ToR's own delay).
    """
    max_ms = params.failure_timeout_ns / 2e6 if reliable else params.input_timeout_ns / 1e6
    return {"p99_ms": params.input_timeout_ns / 1e6, "max_ms": max_ms}


def planned_messages(procs: int, seconds: float, rate: float, fanout: int) -> int:
    """What one process of a run of ``procs`` sends: its scatterings (one every ``1/rate`` s
    while less than ``seconds`` have passed on its schedule, as :mod:`.live` does) times its
    destinations (``fanout`` others, at most every other process)."""
    if procs < 2 or rate <= 0 or seconds <= 0:
        return 0
    period = 1 / rate
    n = max(0, math.ceil(seconds * rate) - 1)
    while n * period < seconds:  # the same float arithmetic as the scattering loop
        n += 1
    while n > 0 and (n - 1) * period >= seconds:
        n -= 1
    return n * min(fanout, procs - 1)


def judge(doc: Mapping[str, Any]) -> Validity:
    """The checks of a run summary (module docstring)."""
    v = Validity()
    killed = list(doc.get("killed") or [])
    # (the killed ones are listed too, with their counts from the logs: not reports)
    procs = {n: p for n, p in doc["processes"].items() if n not in killed and not p.get("missing")}
    v.add("processes", len(procs) + len(killed) == doc["procs"] and not doc.get("missing"),
          f"{doc['procs']} processes ran to the end" + (f" ({len(killed)} killed on purpose)" if killed else ""),
          {"reported": len(procs), "killed": killed, **({"missing": doc["missing"]} if doc.get("missing") else {})})
    plan = planned_messages(doc["procs"], doc["seconds"], doc["rate"], doc["fanout"]) * len(procs)
    v.planned("messages sent", sum(p["messages_sent"] for p in procs.values()), plan, share=1.0)
    _on_schedule(v, {**doc, "processes": procs})
    faults = _faults(doc)
    acc = doc.get("accounting")
    if not killed and acc is not None:
        v.add("accounting", acc["lost_unreported"] == 0 and not acc.get("failed_and_delivered"),
              "every message sent delivered, reported by its sender (send-fail, send-unknown) or in flight at "
              "its end, none reported failed yet delivered (issue 31)", acc)
        if not doc.get("reliable") and not faults:
            late = acc.get("unknown_delivered", acc["delivered_and_reported"])
            v.add("false loss reports", late == 0,
                  "0 messages both delivered and reported unknown (no loss injected: an ACK later than the "
                  "ACK timeout)", late)
    if not killed and not doc.get("reliable") and not faults and doc.get("input_rejoins") is not None:
        back = doc["input_rejoins"]
        v.add("input timeouts", not back, "no input timed out at its switch while it ran (§6: silent for the "
              "input timeout, then heard again)", {"rejoins": sum(back.values()), "inputs": sorted(back)[:8]}
              if back else 0)
    if doc.get("reliable") and not killed and "clock step" not in faults:
        fails = list(doc.get("failures") or [])
        v.add("process failures", not fails, "no process declared failed while it ran (no fault injected, §8)",
              [f"{f['name']}: {f['how']}" for f in fails] or 0)
    lim = limits(OnePipeParams(**doc["params"]), bool(doc.get("reliable")))
    v.not_starved(doc.get("sched") or {}, p99_ms=lim["p99_ms"], max_ms=lim["max_ms"])
    return v


def _faults(doc: Mapping[str, Any]) -> list[str]:
    """The faults the run itself injected: loss on links, clock steps."""
    out = []
    if doc.get("loss"):
        out.append("loss")
    if any(p.get("clock_steps") for p in doc["processes"].values()):
        out.append("clock step")
    return out


def _on_schedule(v: Validity, doc: Mapping[str, Any]) -> None:
    seconds = float(doc["seconds"])
    tol = max(MIN_LATE_S, LATE_SHARE * seconds)
    worst: tuple[str | None, float] = (None, 0.0)
    behind: tuple[str | None, float] = (None, 0.0)
    for name, p in doc["processes"].items():
        sc = p.get("scatter") or {}
        # how long after the planned end the last scattering left (a punctual run: about 0)
        late = float(sc.get("started_late_s", 0.0)) + float(sc.get("span_s", seconds)) - seconds
        if worst[0] is None or late > worst[1]:
            worst = (name, late)
        if float(sc.get("max_behind_s", 0.0)) > behind[1]:
            behind = (name, float(sc["max_behind_s"]))
    v.add("on schedule", worst[1] <= tol,
          f"every process scattered for {seconds:g} s from the run's start, its last scattering at most "
          f"{tol:g} s late", {"worst_late_s": round(worst[1], 4), "worst_at": worst[0],
                              "max_behind_s": round(behind[1], 4), "max_behind_at": behind[0]})


# --------------------------------------------------------------------------- from the logs


def account(out: Path) -> dict[str, Any]:
    """Every message of the run by its fate, from the logs in ``out``: :func:`.accounting.tally`
    (the count ``run``, ``check`` and ``status`` share) in the keys the checks read: ``sent``,
    ``delivered``, ``reported_lost`` (send-fail: known not delivered), ``send_unknown``,
    ``in_flight_at_end``, ``lost_unreported`` (unaccounted, a few ids in ``examples``),
    ``delivered_and_reported`` (delivered and reported either way), ``unknown_delivered``,
    ``failed_and_delivered``."""
    from .accounting import tally

    t = tally(out)
    c = t.totals
    return {"sent": c["messages_sent"], "delivered": c["delivered"], "reported_lost": c["send_failed"],
            "send_unknown": c["send_unknown"], "in_flight_at_end": c["in_flight_at_end"],
            "lost_unreported": c["unaccounted"],
            "delivered_and_reported": t.unknown_delivered + t.failed_and_delivered,
            "unknown_delivered": t.unknown_delivered, "failed_and_delivered": t.failed_and_delivered,
            "examples": list(t.examples)}


def false_failures(out: Path, procs: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The processes of a reliable run declared failed while they ran, from each process's
    summary in ``procs`` (``incarnations``: the ones it registered as; ``counters.recoveries``:
    the times it was told it had failed and recovered) and ``out/proc-fail/`` (docs/onepipe.md):
    one that recovered during the run, or whose failure, as the incarnation it ran as, some process
    heard of before that process logged its own end. (A process that ends is timed out and
    declared failed: that is its end, not a failure; a failure of an incarnation from an earlier
    run is a restart.)"""
    stopped: dict[str, int] = {}
    heard: dict[str, list[tuple[int, int]]] = {}
    for p in sorted((out / "proc-fail").glob("*.jsonl")):
        for line in p.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if not isinstance(e, dict):
                continue
            if "stopped" in e and e.get("name") == p.stem:
                stopped[p.stem] = int(e["at"])
            elif "incarnation" in e and isinstance(e.get("name"), str) and isinstance(e.get("at"), int):
                heard.setdefault(e["name"], []).append((e.get("incarnation") or 0, e["at"]))
    found = []
    for name, summary in sorted(procs.items()):
        incs = list(summary.get("incarnations") or [])
        recovered = int((summary.get("counters") or {}).get("recoveries") or 0)
        if recovered or len(incs) > 1:
            # (an incarnation replaced within one batch of datagrams is not in ``incarnations``:
            # the engine's own count of recoveries is the one to trust)
            found.append({"name": name, "how": f"declared failed while it ran: recovered {max(recovered, 1)} "
                                               f"time(s), ended as incarnation {incs[-1] if incs else '?'}"})
            continue
        if not incs:
            continue
        end = stopped.get(name)
        early = [at for inc, at in heard.get(name, []) if inc == incs[0] and (end is None or at < end)]
        if early:
            found.append({"name": name, "how": f"incarnation {incs[0]} declared failed before it ended "
                                               f"({len(early)} processes heard)"})
    return found


def verdict_line(doc: Mapping[str, Any]) -> str:
    """The human summary's verdict, naming the checks (netstack.validity.verdict_line)."""
    return _verdict_line(doc, names=True)


__all__ = ["LATE_SHARE", "MIN_LATE_S", "account", "false_failures", "judge", "limits", "planned_messages",
           "verdict_line"]
