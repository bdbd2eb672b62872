"""The virtual-time sections of ``netstack bench onepipe``: every point a run of the ``onepipe``
scenario (``netstack.onepipe.scenarios``) at the paper's scale, on :data:`FABRIC`, in parallel
through ``netstack.sim.sweep``. Rows are flat dicts (latencies in us) for the tables and plots.

Fig. 8 runs with the host CPU model (issue 32, docs/onepipe-cpu.md) on :data:`FIG8_FABRIC`: every
process's core saturates, so its rows show capacity per process: ``1pipe`` (best effort),
``1pipe_reliable``, ``sequencer`` and the modes of ``netstack.onepipe.baselines`` when it is there;
``saturation`` adds reliable over best effort per P beside the paper's 0.76."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from headers.onepipe import OnePipeHeader

from ...ethernet import UDP_HEADERS_BYTES, wire_bytes
from ...onepipe import cpucost, cpumeasure
from ...onepipe.scenarios import PAPER_CPU_FILL_NS, SEQ_HOST, baselines, fabric_topology, window_of
from ...sim.scenario import RunSpec
from ...sim.sweep import sweep
from ...topo.values import parse_rate
from . import fig12, kv, reliable, testbed
from .spec import FABRIC, FANOUT, SEED, SIZE, T_BEACON_NS, Point, _spec

FIG8_PROCS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
#: Fig. 8 runs with the host CPU model on (issue 32; netstack/onepipe/cpucost.py): one core per
#: process at our engines' measured costs, scaled so that best effort's capacity is the paper's
#: 5.16 M msg/s per process. Every process offers FIG8_OVERLOAD times that (Poisson), so its core
#: saturates and the delivered rate per process is the capacity, not the offered load. Twice is
#: not enough: a core busy with its peers' messages blocks its own application, and one whose
#: peers send less to it then idles (measured: 91 % busy at P = 2); four times keeps every core busy.
FIG8_OVERLOAD = 4.0
FIG8_RATE = FIG8_OVERLOAD * cpucost.DEFAULT_COSTS.be_capacity / FANOUT  # scatterings/s per process
#: the throughput window of every Fig. 8 point (at the default --duration): 16 beacon periods.
#: Saturated best effort's delivery rate oscillates with a period of about 12 us (4 T_beacon), so
#: a short window is a random draw: over sliding 8 us windows at P = 512 it ranged 2.94-5.91 M
#: msg/s a process, and the 8-18 us windows the sweep had at P >= 128 made best effort fall below
#: reliable at 512; over 48 us it is 4.3-4.7 at every P from 64 to 512, reliable 4.0-4.1
#: (measured 2026-12-07, issue 32)
FIG8_WINDOW_NS = 16 * T_BEACON_NS
#: the virtual time of load, the same at every P: the window starts PAPER_CPU_FILL_NS (12 us) into
#: it (netstack/onepipe/scenarios.py window_of: the saturated pipeline has filled; measured: with
#: 5 us of load the first microseconds, when cores only send, inflate the rate) and runs to its
#: end. A saturated process sends ~5 M msg/s and the simulator does a few tens of thousands of
#: events a second of CPU on this VM: P = 512 costs about a minute a run (best effort; reliable
#: less), the whole sweep to 512 about 5-6 minutes of CPU
FIG8_DURATION_NS = PAPER_CPU_FILL_NS + FIG8_WINDOW_NS
#: the baselines count deliveries inside the window (a sequencer's queue takes its time to fill):
#: at least this long, and but for the host sequencer only up to FIG8_BASELINE_MAX_PROCS processes
#: (past it each is saturated already, and their runs would take most of the sweep's time)
FIG8_BASELINE_MIN_NS = 20_000
FIG8_BASELINE_MAX_PROCS = 128
FIG8_BASELINE_OVERLOAD = 2.0  # their processes cost best effort's send and receive: 2x saturates them
FIG8_DRAIN_NS = 5 * T_BEACON_NS  # lossless: every message is delivered within a few T_beacon
#: the paper's testbed has no oversubscription (§7.1, "our traffic pattern is all-to-all"): the
#: ToR-spine links carry what their 8 hosts send; hosts at 400 Gbit/s, because our 64-byte
#: messages travel as UDP datagrams with a 24-byte 1Pipe header and software ACKs, best effort's
#: repeated on the next beacon ticks (endpoint.ACK_REPEATS, ours: 2-3 ACKs a message at large P).
#: The paper's ACKs are software too (1Pipe §6.1: lib1pipe sends RDMA UD packets and its polling
#: thread generates the end-to-end ACKs) but not repeated. At 16 processes a host (P = 512) ours
#: is about 150 Gbit/s a host, which would make the 100 Gbit/s link, not the cores, the bottleneck
FIG8_FABRIC = fabric_topology(tors=4, hosts_per_tor=8, rate="400Gbit", uplink_rate="3200Gbit",
                              name="onepipe-fabric-cpu")
#: the host sequencer's time per message: the paper's own sequencer's capacity, read off its Fig. 8a
#: column (HostSeq flattens at about 53 M msg/s in all: 3.33 x 16, 1.69 x 32, 0.85 x 64; a sequencer
#: at a host's RDMA NIC), a calibration as the CPU model's is. Where its queue starts to build (the
#: knee, and Fig. 8b's jump in latency) then follows from what each process offers: predicted. The
#: scenario's default, 100 ns (10 M msg/s: one core of eRPC, Kalia et al., NSDI '19), is our own
#: sequencer, not the paper's (docs/onepipe-baselines.md has both)
SEQ_SERVICE_NS = 19
SEQ_QUEUE = 4096
#: fig8's systems: (scenario mode, the rows' system name)
FIG8_ONEPIPE = (("onepipe", "1pipe"), ("reliable", "1pipe_reliable"), ("sequencer", "sequencer"))
#: the paper's Fig. 8a reliable / best effort (1Pipe/R over 1Pipe/BE, mean over 2..512 processes)
PAPER_R_OVER_BE = cpucost.PAPER_R_MSGS_PER_S / cpucost.PAPER_BE_MSGS_PER_S

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
#: beacon is what stalls delivery. Two placements of the loss (the scenario's ``loss_at``):
#: - "receivers", the paper's (§7.1: "we simulate random message drop in lib1pipe receiver ... with
#:   512 processes"): every process's library drops what it receives, best effort and reliable (the
#:   paper's BE-chip and R-chip), at 512 processes and the paper's x values (its file loss_latency);
#: - "links", ours before issue 32 (kept, labelled): every ToR-spine link both ways, best effort only,
#:   at 128 processes
FIG9B_PROCS = 128
FIG9B_RATE = FIG9A_RATE
FIG9B_DURATION_NS = 500_000
FIG9B_LOSSES = (0.0, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
FIG9B_RX_PROCS = 512
FIG9B_RX_LOSSES = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
#: (scenario mode, variant, the rows' system) of the receiver-loss runs: the paper's BE-chip, R-chip,
#: BE-host and R-host, on its testbed as the fig9a-testbed section models it (netstack/bench/onepipe/
#: testbed.py: the fat tree's switches on the processes' routes, packed, the calibrated host stack)
FIG9B_RX_SYSTEMS = (("onepipe", "chip", "1pipe"), ("reliable", "chip", "1pipe_reliable"),
                    ("onepipe", "host", "1pipe"), ("reliable", "host", "1pipe_reliable"))
#: Fig. 9b again, loaded. The paper does not state Fig. 9b's load, but its own numbers, read through
#: its explanation (each loss stalls every receiver), imply its Fig. 8 load (docs/onepipe-paper.md),
#: so reliable on the chip runs again at the paper's Fig. 8a reliable throughput
#: (cpucost.PAPER_R_MSGS_PER_S, 3.91 M msg/s a process) capped at what our host links carry: the
#: paper's R-chip column's other answer (paper.R_CHIP_LOADED, rows marked ``loaded``).
#: Each message is a DATA frame one way and an ACK the other (FIG9B_MSG_WIRE_BITS, 244 B of line),
#: and a host's processes send and receive alike, so at 3.91 M a 100 Gbit/s host link would carry
#: 122 Gbit/s. FIG9B_LINK_SHARE of the link leaves the beacons (about 4 %) and the bursts of random
#: destinations room. Measured (reliable, 512 processes, 100 us, lossless, 2026-12-07): 0.8 (64x
#: the idle load) delivered everything at 12.4 us, no retransmission; 0.9 (72x) collapsed with our
#: prompt COMMITs (342,203 retransmissions, 121 us mean), and without them had not finished after
#: 3 minutes (stopped; which of the two overloads it, not shown). Reliable's commit barrier rides on
#: the beacons (``prompt_commit`` off), the paper's design: our prompt COMMIT (16 a host every
#: 0.75 us, 15 Gbit/s) is ours
FIG9B_HOST_LINK_BPS = parse_rate(testbed.TESTBED["defaults"]["rate"])  # host links (fabric: faster)
FIG9B_HOSTS = sum(n["kind"] == "host" and n["name"] != SEQ_HOST for n in testbed.TESTBED["nodes"])
FIG9B_LINK_SHARE = 0.8
FIG9B_MSG_WIRE_BITS = 8 * (wire_bytes(UDP_HEADERS_BYTES + OnePipeHeader.SIZE + SIZE)
                           + wire_bytes(UDP_HEADERS_BYTES + OnePipeHeader.SIZE))
FIG9B_LOADED_MSGS_PER_S = min(cpucost.PAPER_R_MSGS_PER_S, FIG9B_LINK_SHARE * FIG9B_HOST_LINK_BPS
                              / (FIG9B_RX_PROCS / FIG9B_HOSTS * FIG9B_MSG_WIRE_BITS))
FIG9B_LOADS = (FIG9B_LOADED_MSGS_PER_S / (FIG9B_RATE * FANOUT),)
#: (scenario mode, the rows' system) of the loaded runs: reliable only. Best effort at the same
#: load did not carry it (run of 2026-12-07, commit b310164, 500 us: 61.4 us mean latency and
#: 609,242 of 658,412 messages delivered at 1e-8, nothing dropped on purpose; reliable delivered
#: everything at 12.5 us), not investigated: it stays idle, and Fig. 9b judges it there
FIG9B_LOADED_SYSTEMS = (("reliable", "1pipe_reliable"),)
#: fewer loss values (1e-8 standing for lossless, as in the paper's file): 512 processes loaded cost
#: the simulator minutes a point (about 5.5 at 500 us). As long as the idle runs: at 1e-5 they see
#: about 20 losses of a DATA or an ACK
FIG9B_LOADED_LOSSES = (1e-8, 1e-6, 1e-5, 1e-4)
FIG9B_LOADED_DURATION_NS = FIG9B_DURATION_NS

Say = Callable[[str], None]


def fig8_systems() -> list[tuple[str, str]]:
    """(mode, system) of every Fig. 8 run: 1Pipe best effort and reliable, the host sequencer, and
    the baselines of ``netstack.onepipe.baselines`` when it is there (``hostseq`` is the sequencer)."""
    extra = baselines()
    more = [] if extra is None else [m for m in extra.MODES if m not in ("sequencer", "hostseq")]
    return [*FIG8_ONEPIPE, *((m, m) for m in more)]


def fig8_window_ns(scale: float) -> int:
    """How long every Fig. 8 point's throughput window is at ``scale`` (the bench's --duration
    over its default): FIG8_WINDOW_NS at 1, shorter below."""
    a, b = window_of({"cpu": True, "time_scale": 1.0}, 0, max(1, round(FIG8_DURATION_NS * scale)))
    return b - a


def fig8_points(scale: float) -> list[Point]:
    """With the CPU model on, every system offered FIG8_OVERLOAD x best effort's capacity. Without
    the baselines package the sequencer's processes have no cores (netstack.onepipe.sequencer):
    they offer best effort's capacity, what a process's core could send."""
    out = []
    cores = baselines() is not None
    for p in FIG8_PROCS:
        for mode, system in fig8_systems():
            duration = FIG8_DURATION_NS
            rate = FIG8_RATE
            if mode not in ("onepipe", "reliable"):
                if p > FIG8_BASELINE_MAX_PROCS and mode != "sequencer":
                    continue
                duration = max(duration, FIG8_BASELINE_MIN_NS)
                rate = FIG8_RATE * (FIG8_BASELINE_OVERLOAD if cores else 1.0) / FIG8_OVERLOAD
            extra: dict[str, Any] = {"mode": mode, "drain_ns": FIG8_DRAIN_NS, "cpu": True}
            if mode == "sequencer":
                extra.update(seq_service_ns=SEQ_SERVICE_NS, seq_queue=SEQ_QUEUE)
            params = {"procs": p, "rate": rate, "fanout": FANOUT, "size": SIZE, "t_beacon_ns": T_BEACON_NS, **extra}
            spec = RunSpec("onepipe", FIG8_FABRIC, SEED, max(1, round(duration * scale)), params)
            out.append(Point("fig8", spec, {"procs": p, "system": system}))
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
    """The receiver-loss runs (the paper's placement: BE and R at 512 processes), then the
    link-loss ones (best effort at 128)."""
    topo = testbed.testbed_topology(FIG9B_RX_PROCS)
    out = []
    for mode, variant, system in FIG9B_RX_SYSTEMS:
        for loss in FIG9B_RX_LOSSES:
            params = testbed.testbed_params(FIG9B_RX_PROCS, FIG9B_RATE, mode, variant, loss=loss,
                                            loss_at="receivers")
            out.append(Point("fig9b", RunSpec("onepipe", topo, SEED, max(1, round(FIG9B_DURATION_NS * scale)), params),
                             {"loss": loss, "loss_at": "receivers", "system": system, "variant": variant}))
    for load in FIG9B_LOADS:  # the loaded systems on the chip (FIG9B_LOADED_SYSTEMS: reliable)
        for (mode, system), loss in itertools.product(FIG9B_LOADED_SYSTEMS, FIG9B_LOADED_LOSSES):
            commit = {"prompt_commit": False} if mode == "reliable" else {}
            params = testbed.testbed_params(FIG9B_RX_PROCS, FIG9B_RATE * load, mode, loss=loss,
                                            loss_at="receivers", **commit)
            out.append(Point("fig9b", RunSpec("onepipe", topo, SEED, max(1, round(FIG9B_LOADED_DURATION_NS * scale)),
                                              params),
                             {"loss": loss, "loss_at": "receivers", "system": system, "variant": "chip",
                              "load": load, "loaded": True, **({"commit": "beacons"} if commit else {})}))
    return out + [Point("fig9b", _spec(FIG9B_PROCS, FIG9B_RATE, FIG9B_DURATION_NS, scale, loss=loss),
                        {"loss": loss, "loss_at": "links", "system": "1pipe"}) for loss in FIG9B_LOSSES]


POINTS = {"fig8": fig8_points, "fig9a": fig9a_points, "fig9b": fig9b_points}


def _points(section: str, scale: float, store_delays: dict[str, int], ctl_msg_ns: int = 0) -> list[Point]:
    if section == "reliable":
        return reliable.reliable_points(scale)
    if section == "fig10":
        return reliable.fig10_points(scale, store_delays, ctl_msg_ns)
    if section == "kv":
        return kv.kv_points(scale)
    if section == "fig12":
        return fig12.fig12_points(scale)
    if section == testbed.SECTION:
        return testbed.testbed_points(scale)
    return POINTS[section](scale) if section in POINTS else []


def cpu_costs(say: Say) -> dict[str, Any]:
    """The CPU model's costs: the defaults the runs use, and a fresh measurement on this machine
    (our engines timed again, :func:`netstack.onepipe.cpumeasure.measure`), printed."""
    d = cpucost.DEFAULT_COSTS
    say(f"cpu model (defaults, {d.source}): factor {d.factor:.5f}; best effort {d.be}, reliable {d.reliable} "
        f"(ns at the paper's scale); capacity {d.be_capacity / 1e6:.2f} / {d.reliable_capacity / 1e6:.2f} M msg/s "
        f"per process, R/BE {d.reliable_capacity / d.be_capacity:.3f} (paper {PAPER_R_OVER_BE:.3f})")
    m = cpumeasure.measure(repeats=3)
    now = cpucost.calibrate(m)
    say(f"cpu model re-measured now ({now.source}): our ns per operation, best effort {_ns(m.be)}, "
        f"reliable {_ns(m.reliable)}; factor {now.factor:.5f}, R/BE {now.reliable_capacity / now.be_capacity:.3f}")
    return {"default": d.summary(), "measured_now": {**now.summary(), "raw_ns": {"be": vars(m.be),
                                                                                "reliable": vars(m.reliable)}}}


def _ns(e: cpucost.EngineCost) -> str:
    return ", ".join(f"{k} {getattr(e, k):.0f}" for k in ("send", "data", "deliver", "ack", "barrier", "timer"))


def run_points(sections: list[str], scale: float, workers: int | None, say: Say,
               store_delays: dict[str, int] | None = None, max_procs: int | None = None,
               ctl_msg_ns: int = 0) -> dict[str, Any]:
    """Every sim point of ``sections`` in one sweep; ``{section: {"rows", "runs"}}`` (fig8 also
    ``"cpu_costs"``: :func:`cpu_costs`). ``store_delays``: fig10's store backends and their
    measured write time (ns); ``ctl_msg_ns``: the controller core's cost per datagram measured in
    this run (:mod:`.ctlcost`; 0: fig10 runs its free controller only). ``max_procs``: leave out
    the points with more processes (``--quick``: a run of 512 processes costs about a minute of
    CPU, the rest together a few minutes)."""
    points = [pt for s in sections for pt in _points(s, scale, store_delays or {}, ctl_msg_ns)
              if max_procs is None or int(pt.spec.params.get("procs", 0)) <= max_procs]
    if not points:
        return {}
    costs = cpu_costs(say) if any(pt.section == "fig8" for pt in points) else None
    say(f"sim: {len(points)} runs of the onepipe scenario at the paper's scale ({workers or 'one per CPU'} workers)")

    def progress(done: int, total: int, r: dict[str, Any]) -> None:
        pr = r.get("params", {})
        what = f"{pr.get('mode', 'onepipe')} P={pr.get('procs')} T={pr.get('t_beacon_ns')} skew={pr.get('skew_ns')}"
        if "error" in r:
            say(f"sim [{done}/{total}] {what}: FAILED {r['error']}")
            return
        res = r["result"]
        lat = res["latency_ns"]["mean"]
        if r.get("scenario") == "onepipe-kv" or "txn_per_s_per_client" in res:  # (the kv section's runs)
            say(f"sim [{done}/{total}] kv {pr.get('mode')} P={pr.get('procs')} {pr.get('dist', '')}"
                f"{' writes=' + str(pr['writes']) if pr.get('mix') == 'ycsb' else ''}: {res['done']} txns, "
                f"{res['txn_per_s_per_client'] / 1e6:.3f} M txn/s/client, {r['engine']['wall_s']:.1f} s")
            return
        where = f" at {res['loss_at']}" if res.get("loss_at") else ""
        say(f"sim [{done}/{total}] {what} loss={res['loss']:g}{where}: {res['delivered']}/{res['sent']} delivered, "
            f"mean latency {(lat or 0) / 1e3:.2f} us, {r['engine']['wall_s']:.1f} s")

    docs = sweep([pt.spec for pt in points], workers=workers, progress=progress)
    out: dict[str, Any] = {}
    for pt, doc in zip(points, docs, strict=True):
        if "error" in doc:
            raise RuntimeError(f"sim run {pt.spec.label()} failed: {doc['error']}")
        sec = out.setdefault(pt.section, {"rows": [], "runs": []})
        sec["runs"].append(doc)
        sec["rows"].extend(_rows(pt.section)(doc, pt.meta))
    if costs is not None and "fig8" in out:
        out["fig8"]["cpu_costs"] = costs
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


def _cpu(res: dict[str, Any]) -> dict[str, Any]:
    """The CPU model's columns of a row (issue 32): its cores' mean and lowest utilisation over the
    throughput window, the capacity the model predicts, the backlog the cores ended with."""
    cpu = res.get("cpu")
    if cpu is None:  # a baseline reports its cores under its own key
        cpu = next((v["cpu"] for v in res.values() if isinstance(v, dict) and isinstance(v.get("cpu"), dict)), None)
    if not isinstance(cpu, dict) or "utilisation" not in cpu:
        return {"cpu_model": bool(cpu)}
    util = cpu["utilisation"]
    backlog = cpu.get("backlog_at_stop_ns")
    return {"cpu_model": True,
            "cpu_util_mean": util.get("mean") if isinstance(util, dict) else util,
            "cpu_util_min": util.get("min") if isinstance(util, dict) else cpu.get("utilisation_min"),
            "cpu_capacity_per_proc": cpu.get("capacity_per_proc_per_s"),
            "cpu_backlog_at_stop_us": _us(backlog.get("max")) if isinstance(backlog, dict) else None}


def fig8_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    system = meta.get("system") or ("sequencer" if res["mode"] == "sequencer" else "1pipe")
    if res["mode"] not in ("onepipe", "reliable"):
        seq = res.get("sequencer") or {}
        return [{"system": system, **_common(res), **_lat(res["latency_ns"]), "seq_dropped": res["seq_dropped"],
                 "lost": res["lost"], "seq_capacity": seq.get("capacity_msgs_per_s"),
                 "seq_offered": seq.get("offered_msgs_per_s"), "max_backlog": seq.get("max_backlog"),
                 "order_ok": res["order"]["ok"], **_cpu(res), **engine_speed(doc)}]
    one = {"system": system, **_common(res), **_lat(res["latency_ns"]), "send_failed": res["send_failed"],
           "send_unknown": res["send_unknown"],
           "late_dropped": res["late_dropped"], "barrier_wait_mean_us": _us(res["barrier_wait_ns"]["mean"]),
           "beacons": res["beacons"]["hosts"] + res["beacons"]["switches"], "order_ok": res["order"]["ok"],
           **_cpu(res), **engine_speed(doc)}
    one.update(ack_columns(res))
    if res["mode"] == "reliable":
        return [one]
    unordered = {"system": "unordered", **_common(res), **_lat(res["unordered_ns"])}
    return [one, unordered]


def ack_columns(res: dict[str, Any]) -> dict[str, Any]:
    """ACKs per delivered message over the whole run (the endpoints' counters ``acks_sent``, repeats
    included, and ``ack_repeats``), and what the CPU model charges for them per delivered message:
    each ACK received (``ack``) and each repeat sent by a beacon tick (``timer_tx``); sending an
    ACK the first time is in the cost of the DATA that moved it (``data``). Best effort's repeats
    (endpoint.ACK_REPEATS, ours) are a cost the paper's best effort does not pay (1Pipe §6.1:
    lib1pipe's polling thread ACKs end to end, no repeats)."""
    ep, n = res.get("endpoints") or {}, res.get("delivered") or 0
    costs = (res.get("cpu") or {}).get("costs_ns") or {}
    if not n or "acks_sent" not in ep:
        return {"acks_per_msg": None, "ack_repeats_per_msg": None, "ack_ns_per_msg": None}
    acks, repeats = ep["acks_sent"] / n, ep.get("ack_repeats", 0) / n
    ns = acks * costs["ack"] + repeats * costs.get("timer_tx", 0) if "ack" in costs else None
    return {"acks_per_msg": acks, "ack_repeats_per_msg": repeats, "ack_ns_per_msg": ns}


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
    """One row per run: where the loss was (``loss_at``), which system, the latency and its parts
    (unordered: the message whole at its receiver; barrier wait: the rest), every message's fate,
    and what the loss did: datagrams the receiving libraries dropped (by opcode: a lost barrier
    packet is a BEACON), reliable's retransmissions and controller relays, failures declared."""
    res = doc["result"]
    rx = res.get("receiver_loss") or {}
    ctl = res.get("controller") or {}
    return [{"runtime": "sim", "loss": meta["loss"], "loss_at": meta.get("loss_at", "links"),
             "system": meta.get("system", "1pipe"), "variant": meta.get("variant", "chip"),
             "load": meta.get("load", 1.0), **{k: meta[k] for k in ("loaded", "commit") if k in meta}, **_common(res),
             **_lat(res["latency_ns"]),
             "unordered_mean_us": _us(res["unordered_ns"]["mean"]),
             "barrier_wait_mean_us": _us(res["barrier_wait_ns"]["mean"]),
             "barrier_wait_p99_us": _us(res["barrier_wait_ns"]["p99"]), "send_failed": res["send_failed"],
             "send_unknown": res["send_unknown"],
             "messages_lost": res["messages_lost"], "late_dropped": res["late_dropped"],
             "unaccounted": res["unaccounted"], "order_ok": res["order"]["ok"],
             "rx_seen": rx.get("seen"), "rx_dropped": rx.get("dropped"),
             "rx_dropped_by_opcode": rx.get("dropped_by_opcode"),
             "retransmits": res["endpoints"].get("retransmits"), "relayed": ctl.get("relayed"),
             "failures_declared": (res.get("recovery") or {}).get("callbacks"), **engine_speed(doc)}]


ROWS = {"fig8": fig8_rows, "fig9a": fig9a_rows, "fig9b": fig9b_rows}


def _rows(section: str) -> Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]:
    return {**ROWS, "reliable": reliable.reliable_rows, "fig10": reliable.fig10_rows, "kv": kv.kv_rows,
            "fig12": fig12.fig12_rows, testbed.SECTION: testbed.testbed_rows}[section]


def saturation(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the sequencer saturates (its delivered rate per process falls below 90 % of best
    effort 1Pipe's, which with the CPU model is a process's capacity), how flat 1Pipe's
    per-process rate stays, and reliable vs best effort per P (the paper's Fig. 8a: 0.76)."""
    seq = sorted((r for r in rows if r["system"] == "sequencer"), key=lambda r: r["procs"])
    one = {r["procs"]: r for r in rows if r["system"] == "1pipe"}
    knee = next((r["procs"] for r in seq if r["procs"] in one and
                 r["delivered_per_proc"] < 0.9 * one[r["procs"]]["delivered_per_proc"]), None)
    cap = seq[0]["seq_capacity"] if seq else None
    rate = cpucost.DEFAULT_COSTS.be_capacity
    rows_rb = reliable_vs_be(rows)
    ratios = [r["reliable_over_be"] for r in rows_rb if r["procs"] > 1 and r["reliable_over_be"] is not None]
    rates = [r["delivered_per_proc"] for r in one.values()]
    return {"sequencer_saturates_at_procs": knee, "sequencer_capacity_msgs_per_s": cap,
            "predicted_knee_procs": cap / rate if cap else None,
            "onepipe_delivered_per_proc_min": min(rates, default=None),
            "onepipe_delivered_per_proc_max": max(rates, default=None),
            "reliable_vs_be": rows_rb,
            "reliable_over_be_mean": sum(ratios) / len(ratios) if ratios else None,
            "reliable_over_be_paper": PAPER_R_OVER_BE, "cpu_model": cpucost.DEFAULT_COSTS.summary()}


def reliable_vs_be(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per P: best effort's and reliable's delivered rate per process and their ratio, with the
    ratio the CPU model predicts from the two engines' costs alone."""
    be = {r["procs"]: r for r in rows if r["system"] == "1pipe"}
    rel = {r["procs"]: r for r in rows if r["system"] == "1pipe_reliable"}
    d = cpucost.DEFAULT_COSTS
    out = []
    for p in sorted(be.keys() & rel.keys()):
        b, r = be[p]["delivered_per_proc"], rel[p]["delivered_per_proc"]
        out.append({"procs": p, "be_per_proc": b, "reliable_per_proc": r, "reliable_over_be": r / b if b else None,
                    "model": d.reliable_capacity / d.be_capacity, "paper": PAPER_R_OVER_BE,
                    # ACKs per delivered message (sim.ack_columns): best effort's grow with P as its
                    # receivers stop coalescing, and its repeats with them
                    **{f"{who}_{k}": row.get(k) for who, row in (("be", be[p]), ("reliable", rel[p]))
                       for k in ("acks_per_msg", "ack_repeats_per_msg", "ack_ns_per_msg")}})
    return out


def sim_speed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per P, what the simulator did per CPU-second on each system's run (issue 31: it should
    not fall with P)."""
    out = []
    for r in sorted((r for r in rows if r["system"] != "unordered" and r.get("sim_events")),
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


__all__ = ["FABRIC", "FIG8_FABRIC", "FIG8_PROCS", "FIG9A_SKEWS", "FIG9A_T_BEACONS", "FIG9B_LOSSES",
           "FIG9B_RX_LOSSES", "FIG9B_RX_PROCS", "POINTS",
           "ack_columns", "cpu_costs", "engine_speed", "fig8_systems", "fig8_window_ns", "reliable_vs_be", "run_points",
           "saturation", "sim_speed", "target_summary"]
