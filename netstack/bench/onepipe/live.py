"""The live sections of ``netstack bench onepipe``: ``netstack onepipe run`` (:func:`netstack.onepipe.runner.run`)
on the shipped ``onepipe`` topology (two ToRs, a spine, four hosts with skewed clocks) at the
project's 1000x scale (T_beacon = 3 ms), brought up once by the benchmark under its own prefix and
always torn down. Every run's logs pass ``netstack onepipe check``; latency comes from them."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...onepipe.check import check_logs
from ...onepipe.params import LIVE_SCALE, OnePipeParams
from ...onepipe.scenarios import latency_stats

TOPOLOGY = "onepipe"
FIG8_PROCS = (4, 8, 16)
#: scatterings/s per process: 100 k/s at the paper's scale, the sim's rate, 1000x slower
RATE = 100.0
FANOUT = 2
SIZE = 64
DRAIN_S = 1.0
FIG9B_PROCS = 8
#: the ToR-spine link the losses go on, both directions (``--loss LINK:RATE``)
LOSS_LINK = "tor1-spine1"
FIG9B_LOSSES = (1e-3, 1e-2)
Say = Callable[[str], None]


def log_latencies(out: Path, summary: dict[str, Any]) -> list[int]:
    """Delivery latency of every logged message, in true ns: the receiver's clock at delivery
    minus the message's timestamp (its sender's clock when it left), each clock's offset from the
    topology removed (the drift is 0 on the shipped topology)."""
    host_of = {p: h for h, ps in summary["placement"].items() for p in ps}
    offset = {h: c["offset_ns"] for h, c in summary.get("clocks", {}).items()}
    out_ns = []
    for log in sorted(out.glob("*.jsonl")):
        with log.open() as f:
            for line in f:
                r = json.loads(line)
                rx = offset.get(host_of.get(r["receiver"], ""), 0)
                tx = offset.get(host_of.get(r["src"], ""), 0)
                out_ns.append((r["at"] - rx) - (r["ts"] - tx))
    return out_ns


def one_run(prefix: str, procs: int, seconds: float, loss: float, work: Path, say: Say) -> dict[str, Any]:
    """One ``netstack onepipe run``; its row (latencies in us at the paper's scale: / 1000)."""
    from ...onepipe import runner

    out = work / f"p{procs}-loss{loss:g}"
    losses = [f"{LOSS_LINK}:{loss:g}"] if loss else []
    summary = runner.run(prefix, procs=procs, seconds=seconds, out=out, loss=losses, rate=RATE, fanout=FANOUT,
                         size=SIZE, drain=DRAIN_S, params=OnePipeParams(), say=say)
    verdict = check_logs([out], allow_empty=True)
    lat = latency_stats(log_latencies(out, summary))
    scale = LIVE_SCALE
    row = {"runtime": "live", "procs": procs, "loss": loss, "seconds": seconds, "sent": summary["messages_sent"],
           "delivered": summary["delivered"], "send_failed": summary["send_failed"],
           "send_unknown": summary["send_unknown"], "in_flight_at_end": summary["in_flight_at_end"],
           "unaccounted": summary["unaccounted"],
           "offered_per_proc": summary["messages_sent"] / procs / seconds,
           "delivered_per_proc": summary["delivered"] / procs / seconds,
           **{f"{k}_us": (lat[k] / scale / 1e3 if lat[k] is not None else None)
              for k in ("mean", "p50", "p99", "p999")},
           "live_mean_ms": lat["mean"] / 1e6 if lat["mean"] is not None else None,
           "check_ok": verdict.ok, "check": verdict.summary().splitlines()[0],
           "late_dropped": sum(p["counters"].get("late_dropped", 0) for p in summary["processes"].values()),
           "messages_lost": sum(p["counters"].get("messages_lost", 0) for p in summary["processes"].values()),
           # did the run happen as planned (netstack/onepipe/verdict.py): an invalid row is listed,
           # kept out of the plots; its order check still counts (a safety property holds at any timing)
           "valid": summary.get("valid", True), "checks": summary.get("checks", [])}
    say(f"live: P={procs} loss={loss:g}: {row['delivered']}/{row['sent']} delivered, {row['send_failed']} send-fails, "
        f"{row['send_unknown']} unknown, "
        f"mean latency {row['live_mean_ms'] or 0:.2f} ms (= {row['mean_us'] or 0:.2f} us at the paper's scale); "
        f"check {'ok' if verdict.ok else 'FAILED'}")
    return {"row": row, "summary": {k: v for k, v in summary.items() if k != "processes"},
            "check": verdict.as_dict()}


def run_live(sections: list[str], prefix: str, seconds: float, say: Say) -> dict[str, Any]:
    """The live points of ``sections`` on one testbed; ``{section: {"rows", "runs"}}``."""
    from ... import runtime
    from ...topo.model import load_topology_spec

    plan = [("fig8", p, 0.0) for p in FIG8_PROCS if "fig8" in sections]
    # fig9b's lossless point is fig8's run with as many processes, when there is one
    reuse = "fig9b" in sections and ("fig8", FIG9B_PROCS, 0.0) in plan
    losses = FIG9B_LOSSES if reuse else (0.0, *FIG9B_LOSSES)
    plan += [("fig9b", FIG9B_PROCS, loss) for loss in losses if "fig9b" in sections]
    if not plan:
        return {}
    topo = load_topology_spec(TOPOLOGY)
    say(f"live: bringing up {TOPOLOGY} under prefix {prefix} for {len(plan)} runs of {seconds:g} s "
        f"(~{len(plan) * (seconds + DRAIN_S + 4):.0f} s)")
    out: dict[str, Any] = {}
    runtime.up(topo, prefix)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-onepipe-") as tmp:
            for section, procs, loss in plan:
                r = one_run(prefix, procs, seconds, loss, Path(tmp), say)
                sec = out.setdefault(section, {"rows": [], "runs": []})
                sec["rows"].append(r["row"])
                sec["runs"].append({k: v for k, v in r.items() if k != "row"})
                if reuse and section == "fig8" and procs == FIG9B_PROCS:
                    out.setdefault("fig9b", {"rows": [], "runs": []})["rows"].append(r["row"])
    finally:
        runtime.down(prefix)
        say(f"live: {TOPOLOGY} torn down (prefix {prefix})")
    return out


def verdicts(live: dict[str, Any]) -> dict[str, Any]:
    """The live rows' validity (an invalid one: listed under "Invalid runs (not counted)", left
    out of the plots) and the cross-check every run answers whatever its timing: the logs keep
    total order (``netstack onepipe check``). Keys as every benchmark's payload has them
    (docs/testbed.md "Run validity")."""
    rows = [r for sec in live.values() for r in sec["rows"]]
    rows = list({id(r): r for r in rows}.values())  # fig9b may reuse fig8's row
    invalid = [{"row": f"live P={r['procs']} loss={r['loss']:g}",
                "reasons": [f"{c['name']}: expected {c['expected']}, measured {c['measured']}"
                            for c in r["checks"] if not c["ok"]]} for r in rows if not r["valid"]]
    checks = [{"name": i["row"], "expected": "a valid live run", "measured": "; ".join(i["reasons"]), "ok": False}
              for i in invalid]
    cross = [{"what": ORDER_CHECK, "ok": all(r["check_ok"] for r in rows)}] if rows else []
    return {"valid": not invalid, "checks": checks, "invalid_rows": invalid, "cross_checks": cross}


#: the live runs' correctness cross-check
ORDER_CHECK = "every live run's logs keep total order, valid run or not (netstack onepipe check)"

__all__ = ["FIG8_PROCS", "FIG9B_LOSSES", "LOSS_LINK", "ORDER_CHECK", "log_latencies", "run_live", "verdicts"]
