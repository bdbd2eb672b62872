"""The virtual-time sections of ``netstack bench onepipe``: every point a run of the ``onepipe``
scenario (``netstack.onepipe.scenarios``) at the paper's scale, on :data:`FABRIC`, in parallel
through ``netstack.sim.sweep``. Rows are flat dicts (latencies in us) for the tables and plots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...sim.sweep import sweep
from . import reliable
from .spec import FABRIC, FANOUT, T_BEACON_NS, Point, _spec

FIG8_PROCS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
#: scatterings/s per process (x FANOUT messages): the paper's processes send 5 M msg/s each, which
#: pure Python cannot simulate for 512 of them; 0.2 M msg/s each keeps every run short and puts
#: the sequencer's knee (10 M msg/s) at ~50 processes, inside the sweep
FIG8_RATE = 100_000.0
FIG8_DURATION_NS = 500_000
FIG8_DRAIN_NS = 30 * T_BEACON_NS  # lossless: every message is delivered within a few T_beacon
SEQ_SERVICE_NS = 100  # netstack.onepipe.sequencer: one core, 10 M msg/s
SEQ_QUEUE = 4096

#: Fig. 9a: an idle system (the paper's §7: "zero queuing delay"): one process per host, a scattering
#: every 50 us each, so links carry mostly beacons and the barrier wait shows whole
FIG9A_PROCS = 32
FIG9A_RATE = 20_000.0
FIG9A_DURATION_NS = 1_000_000
FIG9A_T_BEACONS = (1_000, 3_000, 10_000, 30_000)
FIG9A_SKEWS = (0, 300, 1_000, 3_000)
#: switches beaconing 10x as often as hosts (a deployment setting of the real feature): how much of
#: the overhead is the switches' idle-output beacon phase
#: the target (issue): mean overhead within 1.5x of T_beacon/2 + mean skew (the paper's §7)
TARGET_FACTOR = 1.5

#: Fig. 9b: the idle load of Fig. 9a (the paper's Fig. 9 is "message delivery latency"), where a lost
#: beacon is what stalls delivery, with four times its processes
FIG9B_PROCS = 128
FIG9B_RATE = FIG9A_RATE
FIG9B_DURATION_NS = 500_000
FIG9B_LOSSES = (0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)

Say = Callable[[str], None]


def fig8_points(scale: float) -> list[Point]:
    out = []
    for p in FIG8_PROCS:
        for mode in ("onepipe", "sequencer"):
            extra = {"mode": mode, "drain_ns": FIG8_DRAIN_NS}
            if mode == "sequencer":
                extra.update(seq_service_ns=SEQ_SERVICE_NS, seq_queue=SEQ_QUEUE)
            out.append(Point("fig8", _spec(p, FIG8_RATE, FIG8_DURATION_NS, scale, **extra), {"procs": p}))
    return out


def fig9a_points(scale: float) -> list[Point]:
    out = []
    for t in FIG9A_T_BEACONS:
        for skew in FIG9A_SKEWS:
            spec = _spec(FIG9A_PROCS, FIG9A_RATE, FIG9A_DURATION_NS, scale, t_beacon_ns=t, skew_ns=float(skew))
            out.append(Point("fig9a", spec, {"t_beacon_ns": t, "skew_ns": skew, "switch_beacons": "prompt"}))
    for t in FIG9A_T_BEACONS:  # the baseline: switches beacon on their T_beacon timer only
        spec = _spec(FIG9A_PROCS, FIG9A_RATE, FIG9A_DURATION_NS, scale, t_beacon_ns=t, skew_ns=0.0,
                     prompt_beacons=False)
        out.append(Point("fig9a", spec, {"t_beacon_ns": t, "skew_ns": 0, "switch_beacons": "timer"}))
    return out


def fig9b_points(scale: float) -> list[Point]:
    return [Point("fig9b", _spec(FIG9B_PROCS, FIG9B_RATE, FIG9B_DURATION_NS, scale, loss=loss), {"loss": loss})
            for loss in FIG9B_LOSSES]


POINTS = {"fig8": fig8_points, "fig9a": fig9a_points, "fig9b": fig9b_points}


def _points(section: str, scale: float, store_delays: dict[str, int]) -> list[Point]:
    if section == "reliable":
        return reliable.reliable_points(scale)
    if section == "fig10":
        return reliable.fig10_points(scale, store_delays)
    return POINTS[section](scale) if section in POINTS else []


def run_points(sections: list[str], scale: float, workers: int | None, say: Say,
               store_delays: dict[str, int] | None = None) -> dict[str, Any]:
    """Every sim point of ``sections`` in one sweep; ``{section: {"rows", "runs"}}``.
    ``store_delays``: fig10's store backends and their measured write time (ns)."""
    points = [pt for s in sections for pt in _points(s, scale, store_delays or {})]
    if not points:
        return {}
    say(f"sim: {len(points)} runs of the onepipe scenario at the paper's scale ({workers or 'one per CPU'} workers)")

    def progress(done: int, total: int, r: dict[str, Any]) -> None:
        pr = r.get("params", {})
        what = f"{pr.get('mode', 'onepipe')} P={pr.get('procs')} T={pr.get('t_beacon_ns')} skew={pr.get('skew_ns')}"
        if "error" in r:
            say(f"sim [{done}/{total}] {what}: FAILED {r['error']}")
            return
        res = r["result"]
        lat = res["latency_ns"]["mean"]
        say(f"sim [{done}/{total}] {what} loss={res['loss']:g}: {res['delivered']}/{res['sent']} delivered, "
            f"mean latency {(lat or 0) / 1e3:.2f} us, {r['engine']['wall_s']:.1f} s")

    docs = sweep([pt.spec for pt in points], workers=workers, progress=progress)
    out: dict[str, Any] = {}
    for pt, doc in zip(points, docs, strict=True):
        if "error" in doc:
            raise RuntimeError(f"sim run {pt.spec.label()} failed: {doc['error']}")
        sec = out.setdefault(pt.section, {"rows": [], "runs": []})
        sec["runs"].append(doc)
        sec["rows"].extend(_rows(pt.section)(doc, pt.meta))
    return out


def _us(v: float | None) -> float | None:
    return None if v is None else v / 1e3


def _lat(stats: dict[str, Any]) -> dict[str, Any]:
    return {f"{k}_us": _us(stats[k]) for k in ("mean", "p50", "p99", "p999")}


def _common(res: dict[str, Any]) -> dict[str, Any]:
    return {"procs": res["procs"], "sent": res["sent"], "delivered": res["delivered"],
            "offered_per_proc": res["offered_per_proc_per_s"], "delivered_per_proc": res["delivered_per_proc_per_s"]}


def engine_speed(doc: dict[str, Any]) -> dict[str, Any]:
    """What the run cost the simulator (issue 31): events, CPU and wall seconds, events per CPU-second."""
    eng = doc.get("engine", {})
    events, cpu = eng.get("events"), eng.get("cpu_s")
    return {"sim_events": events, "sim_cpu_s": cpu, "sim_wall_s": eng.get("wall_s"),
            "sim_events_per_cpu_s": events / cpu if events and cpu else None}


def fig8_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    if res["mode"] == "sequencer":
        seq = res["sequencer"]
        return [{"system": "sequencer", **_common(res), **_lat(res["latency_ns"]), "seq_dropped": res["seq_dropped"],
                 "lost": res["lost"], "seq_capacity": seq["capacity_msgs_per_s"],
                 "seq_offered": seq["offered_msgs_per_s"], "max_backlog": seq["max_backlog"],
                 "order_ok": res["order"]["ok"], **engine_speed(doc)}]
    one = {"system": "1pipe", **_common(res), **_lat(res["latency_ns"]), "send_failed": res["send_failed"],
           "send_unknown": res["send_unknown"],
           "late_dropped": res["late_dropped"], "barrier_wait_mean_us": _us(res["barrier_wait_ns"]["mean"]),
           "beacons": res["beacons"]["hosts"] + res["beacons"]["switches"], "order_ok": res["order"]["ok"],
           **engine_speed(doc)}
    unordered = {"system": "unordered", **_common(res), **_lat(res["unordered_ns"])}
    return [one, unordered]


def fig9a_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    skew = res["skew"]
    model = meta["t_beacon_ns"] / 2 + skew["mean_abs_offset_ns"]
    over = res["overhead_ns"]
    return [{**meta, "t_beacon_us": meta["t_beacon_ns"] / 1e3, "skew_us": meta["skew_ns"] / 1e3,
             "mean_abs_offset_us": skew["mean_abs_offset_ns"] / 1e3,
             "over_slowest_us": skew["mean_over_slowest_ns"] / 1e3,
             "latency_mean_us": _us(res["latency_ns"]["mean"]), "latency_p99_us": _us(res["latency_ns"]["p99"]),
             "unordered_mean_us": _us(res["unordered_ns"]["mean"]), "overhead_mean_us": _us(over),
             "overhead_p99_us": _us(res["barrier_wait_ns"]["p99"]), "model_us": model / 1e3,
             "ratio": over / model if over is not None and model else None,
             "met": over is not None and over <= TARGET_FACTOR * model, "messages": res["latency_ns"]["n"],
             "order_ok": res["order"]["ok"]}]


def fig9b_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    return [{"runtime": "sim", "loss": meta["loss"], **_common(res), **_lat(res["latency_ns"]),
             "unordered_mean_us": _us(res["unordered_ns"]["mean"]), "send_failed": res["send_failed"],
             "send_unknown": res["send_unknown"],
             "messages_lost": res["messages_lost"], "late_dropped": res["late_dropped"],
             "unaccounted": res["unaccounted"], "order_ok": res["order"]["ok"]}]


ROWS = {"fig8": fig8_rows, "fig9a": fig9a_rows, "fig9b": fig9b_rows}


def _rows(section: str) -> Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]:
    return {**ROWS, "reliable": reliable.reliable_rows, "fig10": reliable.fig10_rows}[section]


def saturation(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the sequencer saturates (its delivered rate falls below 90 % of the offered one) and
    how flat 1Pipe's per-process rate stays (its worst delivered/offered over the sweep)."""
    seq = sorted((r for r in rows if r["system"] == "sequencer"), key=lambda r: r["procs"])
    one = [r for r in rows if r["system"] == "1pipe"]
    knee = next((r["procs"] for r in seq if r["offered_per_proc"] and
                 r["delivered_per_proc"] < 0.9 * r["offered_per_proc"]), None)
    cap = seq[0]["seq_capacity"] if seq else None
    rate = FIG8_RATE * FANOUT
    return {"sequencer_saturates_at_procs": knee, "sequencer_capacity_msgs_per_s": cap,
            "predicted_knee_procs": cap / rate if cap else None,
            "onepipe_min_delivered_over_offered": min((r["delivered_per_proc"] / r["offered_per_proc"]
                                                       for r in one if r["offered_per_proc"]), default=None)}


def sim_speed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per P, what the simulator did per CPU-second on each system's run (issue 31: it should
    not fall with P)."""
    out = []
    for r in sorted((r for r in rows if r["system"] in ("1pipe", "sequencer") and r.get("sim_events")),
                    key=lambda r: (r["procs"], r["system"])):
        out.append({k: r[k] for k in ("procs", "system", "sim_events", "sim_cpu_s", "sim_wall_s",
                                      "sim_events_per_cpu_s")})
    return out


def target_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Fig. 9a's target over the as-built points (switches beaconing at the hosts' T_beacon)."""
    built = [r for r in rows if r["switch_beacons"] == "prompt"]
    return {"factor": TARGET_FACTOR, "model": "T_beacon/2 + mean |clock offset| (the paper's §7)",
            "points": len(built), "met": sum(1 for r in built if r["met"]),
            "all_met": bool(built) and all(r["met"] for r in built),
            "worst_ratio": max((r["ratio"] for r in built if r["ratio"] is not None), default=None)}


__all__ = ["FABRIC", "FIG8_PROCS", "FIG9A_SKEWS", "FIG9A_T_BEACONS", "FIG9B_LOSSES", "POINTS", "engine_speed",
           "run_points", "saturation", "sim_speed", "target_summary"]
