"""``tcd-fct``: flow completion times of a mixed workload under DCQCN and DCQCN + TCD.

"Congestion Detection in Lossless Networks" (TCD, SIGCOMM 2021) reports, in its abstract and
its evaluation, that DCQCN + TCD improves the FCT slowdown over DCQCN by 3.3x at the median and
2.0x at the 99th percentile. The paper measures it in large ns-3 simulations; this scenario is
the same comparison, small enough for ``netstack/sim``, on the §3.1 chain (``topology_doc``,
``netstack.tcd.scenarios``)::

    s1 -- sw0 =P0=> sw1 =P1=> sw2 =P2=> sw3 -P3-> r1
              s2 ---^     s0 ---^     |  ^--- a0..aN-1
                                      '---> r0

Flows arrive as a Poisson process and go from a sender drawn uniformly among s0, s1, s2 and
a0..aN-1 to a receiver drawn uniformly among r0 and r1. Their sizes come from a flow-size CDF
(``netstack/sim/workloads``; websearch by default) times ``size_scale`` (default 0.1: the
websearch mean of 1.6 MB would need about a minute of wall time per run for a few hundred
flows; scaled, the largest flows, 3 MB, still exceed the 320 KB PFC threshold and ECN's 200 KB).
The arrival rate offers ``load`` x the receivers' links (each of r0's and r1's links is offered
``load`` of its rate on average): the congestion points are sw3's ports to the receivers, and
PFC pauses from sw3 spread up the chain to flows that only cross it (the victims TCD's UE mark
is for). Optionally the §3.1 bursts (a0..aN-1 -> r1, 64 KB each, ``burst_load`` of the line
rate for 3 ms from 0.5 ms) run on top.

Every flow is a :class:`~netstack.tcd.dcqcn.RateSender` of ``size_bytes`` on its own UDP port
(a RoCE NIC's queue pair: it honours PFC), in mode ``dcqcn`` when the topology's marker is
``ecn`` (a plain DCQCN NP at the receivers) and ``dcqcn+tcd`` when it is ``tcd`` (the NP sends
CNP-UE too). The marker is the topology's (:func:`~netstack.tcd.scenarios.marker_of`).

FCT and slowdown: a flow's FCT is from its arrival (the time it is handed to the sender) to the
arrival at the receiver of the packet that completes it (the receiver's ``complete_ns``; the
receiver's own ``fct_ns``, from packet 0's send stamp, is kept as ``fct_rx_ns``; the two differ
when the host was paused as the flow began). Its ideal FCT is its time alone on the path: every
packet's line time at the sending host's link, plus every link's propagation delay, plus the
last packet's line time at each later hop (store and forward). The FCT the receiver measures is
one-way, so the ideal uses the path's one-way base latency (not the RTT: small flows would score
below 1). Slowdown = FCT / ideal, >= 1.

Seeds: the flows (arrival times in the paper's time, sizes, ends) are drawn from the run's seed
alone, so the same seed gives the same flows to both markers and at any time scale.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headers.registry import UdpPort

from ..ethernet import UDP_HEADERS_BYTES, line_time_exact_ns
from ..sim.scenario import Context, Scenario, ScenarioError, time_scale
from ..sim.workload import FlowSizes, WorkloadError, flow_sizes
from ..traffic import percentiles
from .dcqcn import PAPER_LINE_RATE_BPS as PAPER_RATE_BPS

if TYPE_CHECKING:
    from collections.abc import Callable

#: the first flow id of the workload's flows (the §3.1 bursts use 100 + i)
FIRST_FID = 1000
MAX_FLOWS = 0xFFFF - FIRST_FID
RECEIVERS = ("r0", "r1")
#: the run loop checks for completed flows every STEP_NS of the paper's time
STEP_NS = 20_000
#: TCD §3.1: "A0-A14 send concurrent 64KB bursts", for about 3 ms; from 0.5 ms here, as the
#: ``tcd`` scenario's Workload schedules them
BURST_BYTES = 64 * 1024
PAPER_BURSTS = 15
BURST_START_NS = 500_000
BURST_NS = 3_000_000
#: size buckets (upper bound in bytes, inclusive) for the per-size slowdowns
SIZE_BUCKETS: tuple[tuple[str, float], ...] = (("<=10KB", 10_000), ("10KB-100KB", 100_000),
                                               ("100KB-1MB", 1_000_000), (">1MB", math.inf))

PARAMS: dict[str, Any] = {
    "flows": 200, "load": 0.6, "workload": "websearch", "size_scale": 0.1, "payload": 1400,
    "bursts": False, "burst_load": 0.9,
    #: the longest a run may take, in the paper's time (ms; x the time scale in virtual time);
    #: --duration overrides it
    "max_ms": 200.0,
    #: include the per-flow list in the result
    "flow_list": True,
}


@dataclass(frozen=True)
class FctFlow:
    """One flow of the workload: id, ends, size (bytes, after ``size_scale``) and arrival time
    in the paper's time (ns from the run's start)."""

    fid: int
    src: str
    dst: str
    size: int
    start_ns: int


def senders_of(bursters: int) -> list[str]:
    """The sending hosts: the chain's s0, s1, s2 and the burst hosts a0..a{bursters-1}."""
    return ["s0", "s1", "s2", *(f"a{i}" for i in range(bursters))]


def check_workload(scenario: str, flows: int, load: float, size_scale: float) -> None:
    """A Poisson workload's numbers, each refused with its range (ScenarioError naming ``scenario``)."""
    if not 1 <= flows <= MAX_FLOWS:
        raise ScenarioError(f"{scenario}: flows must be 1..{MAX_FLOWS}, got {flows}")
    if not 0 < load <= 1:
        raise ScenarioError(f"{scenario}: load must be in (0, 1], got {load}")
    if not 0 < size_scale <= 1:
        raise ScenarioError(f"{scenario}: size_scale must be in (0, 1], got {size_scale}")


def make_flows(seed: int, *, flows: int, load: float, sizes: FlowSizes, size_scale: float,
               senders: list[str], receivers: tuple[str, ...] = RECEIVERS,
               rate_bps: int = PAPER_RATE_BPS) -> list[FctFlow]:
    """The workload drawn from ``seed`` (and nothing else): Poisson arrivals offering ``load`` x
    ``rate_bps`` to each receiver, sizes from ``sizes`` x ``size_scale``, uniform ends."""
    check_workload("tcd-fct", flows, load, size_scale)
    rng = random.Random(f"{seed}/tcd-fct")
    mean = max(1.0, sizes.mean() * size_scale)
    gap_ns = mean * 8e9 / (load * rate_bps * len(receivers))
    out: list[FctFlow] = []
    t = 0.0
    for i in range(flows):
        size = max(1, round(sizes.sample(rng) * size_scale))
        src = rng.choice(senders)
        dst = rng.choice(receivers)
        out.append(FctFlow(FIRST_FID + i, src, dst, size, round(t)))
        t += rng.expovariate(1.0 / gap_ns)
    return out


def path_links(topology: Any, src: str, dst: str) -> list[tuple[int, int]]:
    """(rate bit/s, delay ns) of every link from ``src`` to ``dst`` along the static forwarding."""
    from ..sim.scenarios import host_path

    path = host_path(topology, src, dst)
    out = []
    for u, v in itertools.pairwise(path):
        link = next(lk for lk in topology.links_of(u) if lk.peer(u).node == v)
        out.append((link.rate_bps, link.delay_ns))
    return out


def packet_sizes(size: int, payload: int) -> list[int]:
    """The UDP payloads a RateSender of ``size_bytes`` sends (the last carries the remainder, at
    least the 16-byte TCD header)."""
    from headers.tcd import TcdData

    n, rest = divmod(size, payload)
    out = [payload] * n
    if rest:
        out.append(max(TcdData.SIZE, rest))
    return out or [TcdData.SIZE]


def ideal_ns(size: int, payload: int, links: list[tuple[int, int]]) -> int:
    """The flow's completion time alone on the path (module docstring): every packet at the first
    link's rate, every link's delay, the last packet's line time at each later hop."""
    pkts = packet_sizes(size, payload)
    first_rate = links[0][0]
    t = sum(line_time_exact_ns(UDP_HEADERS_BYTES + s, first_rate) for s in pkts)
    t += sum(d for _, d in links)
    t += sum(line_time_exact_ns(UDP_HEADERS_BYTES + pkts[-1], r) for r, _ in links[1:])
    return math.floor(t)  # whole ns, as the clock counts: a lower bound


def _sizes(spec: str) -> FlowSizes:
    try:
        return flow_sizes(spec)
    except WorkloadError as exc:
        raise ScenarioError(f"tcd-fct: {exc}") from None


def _bursters(topo: Any) -> int:
    return sum(1 for n in topo.nodes if n.name.startswith("a") and n.name[1:].isdigit())


def size_bucket(size: int) -> str:
    """The name of the :data:`SIZE_BUCKETS` entry ``size`` falls in."""
    for name, hi in SIZE_BUCKETS:
        if size <= hi:
            return name
    return SIZE_BUCKETS[-1][0]


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Median, p99 and mean slowdown (and FCT) of completed flows, overall and per size bucket."""
    done = [r for r in records if r["slowdown"] is not None]
    out: dict[str, Any] = {"flows": len(done)}
    if not done:
        return out
    slow = percentiles([r["slowdown"] for r in done], (50, 99))
    fct = percentiles([r["fct_ns"] / 1e3 for r in done], (50, 99))
    out.update(median=slow["p50"], p99=slow["p99"], mean=slow["mean"], fct_us_median=fct["p50"],
               fct_us_p99=fct["p99"])
    return out


# ----------------------------------------------------------------------------------- sim
def marker_of(topology: Any) -> str:
    """The marker the topology's ports run (the first ``tcd`` feature), as
    ``netstack.tcd.scenarios.marker_of`` reads it (that module registers this one, so this one
    does not import it)."""
    for link in topology.links:
        for end in (link.a, link.b):
            opts = end.features.get("tcd")
            if isinstance(opts, dict):
                return str(opts.get("marker", "tcd"))
    raise ScenarioError(f"tcd-fct: topology {topology.name} has no tcd marker on any port")


@dataclass(frozen=True)
class Burst:
    """One §3.1 burst host (``netstack.tcd.scenarios.Workload``'s A_i, paper units): ``share``
    bytes back to back at line rate every ``period_ns`` from ``start_ns`` for ``BURST_NS``."""

    fid: int
    src: str
    share: int
    period_ns: int
    start_ns: int = BURST_START_NS


def bursts_of(bursters: int, burst_load: float) -> list[Burst]:
    """TCD §3.1's 15 concurrent 64 KB bursts to r1, shared by ``bursters`` hosts, offered at
    ``burst_load`` of the line rate on average (the same schedule as the ``tcd`` scenario's)."""
    if not 0 < burst_load <= 1:
        raise ScenarioError(f"tcd-fct: burst_load must be in (0, 1], got {burst_load}")
    if bursters < 1:
        raise ScenarioError("tcd-fct: bursts need burst hosts a0..")
    share = -(-PAPER_BURSTS // bursters) * BURST_BYTES
    period = int(share * bursters * 8 / (burst_load * PAPER_RATE_BPS) * 1e9)
    return [Burst(100 + i, f"a{i}", share, period) for i in range(bursters)]


def run_sim(net: Any, ctx: Context) -> dict[str, Any]:
    """The workload in virtual time on ``net`` (built from ``ctx.topology``)."""
    from .dcqcn import DcqcnParams
    from .np import TcdReceiver

    p = ctx.params
    topo = ctx.topology
    marker = marker_of(topo)
    scale = time_scale(topo, PAPER_RATE_BPS)
    payload = int(p["payload"])
    if not 16 <= payload <= 1458:
        raise ScenarioError(f"tcd-fct: payload must be 16..1458 bytes (an MTU of 1500), got {payload}")
    sizes = _sizes(str(p["workload"]))
    bursters = _bursters(topo)
    flows = make_flows(ctx.seed, flows=int(p["flows"]), load=float(p["load"]), sizes=sizes,
                       size_scale=float(p["size_scale"]), senders=senders_of(bursters))
    bursts = bursts_of(bursters, float(p["burst_load"])) if p["bursts"] else []
    params = DcqcnParams.scaled(int(PAPER_RATE_BPS / scale), scale)
    run = _Run(net, params, "dcqcn+tcd" if marker == "tcd" else "dcqcn", payload, scale)
    receivers = {h: run.receiver(h, TcdReceiver(params, tcd=marker == "tcd")) for h in RECEIVERS}
    for f in flows:
        run.loop.call_at(run.t0 + int(f.start_ns * scale), run.start, f)
    for b in bursts:
        run.burst(b)
    limit = ctx.duration_ns if ctx.duration_ns is not None else int(float(p["max_ms"]) * 1e6 * scale)
    run.until_complete(flows, receivers, run.t0 + limit,
                       lambda done, now: ctx.progress(f"sim tcd-fct/{marker}: {done}/{len(flows)} flows complete "
                                                      f"at {now / scale / 1e6:.2f} paper-ms"))
    return _result(ctx, marker, scale, payload, sizes, flows, receivers, run, len(bursts))


class _Run:
    """The senders and receivers of one run on ``net``: every flow a RateSender on its own UDP
    port of its host (a queue pair of a RoCE NIC: it honours PFC), started at its arrival."""

    def __init__(self, net: Any, params: Any, mode: str, payload: int, scale: float) -> None:
        self.net = net
        self.loop = net.loop
        self.t0 = net.now
        self.params = params
        self.mode = mode
        self.payload = payload
        self.scale = scale
        self.engines: dict[int, Any] = {}
        self.arrivals: dict[int, int] = {}

    def receiver(self, host: str, rcv: Any) -> Any:
        from .simhosts import TcdReceiverApp

        TcdReceiverApp(self.net.host(host), rcv)
        return rcv

    def _sender(self, src: str, dst: str, eng: Any) -> None:
        from ..sim.transport import EngineSender

        EngineSender(self.net.host(src), dst, eng, int(UdpPort.TCD), tos=0x02, honour_pfc=True)

    def start(self, f: FctFlow) -> None:
        from .dcqcn import RateSender

        now = self.loop.now
        eng = RateSender(self.params, flow=f.fid, mode=self.mode, payload=self.payload, size_bytes=f.size,
                         start_ns=now, now_ns=now)
        self.engines[f.fid] = eng
        self.arrivals[f.fid] = now
        self._sender(f.src, f.dst, eng)

    def burst(self, b: Burst) -> None:
        from .dcqcn import RateSender

        s = self.scale
        eng = RateSender(self.params, flow=b.fid, mode="fixed", rate_bps=self.params.line_rate_bps,
                         payload=self.payload, duration_ns=int(BURST_NS * s), burst_bytes=b.share,
                         burst_period_ns=int(b.period_ns * s), start_ns=self.t0 + int(b.start_ns * s),
                         now_ns=self.loop.now)
        self._sender(b.src, "r1", eng)

    def until_complete(self, flows: list[FctFlow], receivers: dict[str, Any], end: int,
                       progress: Callable[[int, int], None]) -> None:
        """:func:`run_until_complete` for ``flows`` at ``receivers`` (by destination host)."""
        run_until_complete(self.loop, self.t0, self.scale, {f.fid: receivers[f.dst] for f in flows}, end, progress)


def run_until_complete(loop: Any, t0: int, scale: float, pending: dict[int, Any], end: int,
                       progress: Callable[[int, int], None], max_events: int = 20_000) -> None:
    """Run ``loop`` until every flow of ``pending`` (flow id -> its receiver) has completed there,
    nothing is left to run, or ``end``; in steps of :data:`STEP_NS` of the paper's time (x
    ``scale``), so that the clock stops near the last completion. ``progress(done, ns since t0)``
    whenever more flows are done."""
    total = len(pending)
    step = max(1, int(STEP_NS * scale))
    last = -1
    while pending and loop.next_time() is not None and loop.now < end:
        loop.run(min(end, loop.now + step), max_events=max_events)
        for fid, rcv in list(pending.items()):
            st = rcv.flow(fid)
            if st is not None and st.complete_ns is not None:
                del pending[fid]
        done = total - len(pending)
        if done != last:
            last = done
            progress(done, loop.now - t0)


def _result(ctx: Context, marker: str, scale: float, payload: int, sizes: FlowSizes, flows: list[FctFlow],
            receivers: dict[str, Any], run: _Run, bursts: int) -> dict[str, Any]:
    p = ctx.params
    topo = ctx.topology
    links: dict[tuple[str, str], list[tuple[int, int]]] = {}
    records: list[dict[str, Any]] = []
    marks = {"ce": 0, "ue": 0, "cnps_ce": 0, "cnps_ue": 0, "rate_cuts": 0, "holds": 0}
    for f in flows:
        key = (f.src, f.dst)
        if key not in links:
            links[key] = path_links(topo, f.src, f.dst)
        ideal = ideal_ns(f.size, payload, links[key])
        st = receivers[f.dst].flow(f.fid)
        eng = run.engines.get(f.fid)
        fct = fct_rx = None
        if st is not None and st.complete_ns is not None:
            fct = st.complete_ns - run.arrivals[f.fid]
            fct_rx = st.fct_ns
        if st is not None:
            marks["ce"] += st.ce
            marks["ue"] += st.ue
            marks["cnps_ce"] += st.cnps_ce
            marks["cnps_ue"] += st.cnps_ue
        if eng is not None:
            marks["rate_cuts"] += eng.c.rate_cuts
            marks["holds"] += eng.c.holds
        records.append({"fid": f.fid, "src": f.src, "dst": f.dst, "size": f.size, "arrival_ns": f.start_ns,
                        "fct_ns": fct, "fct_rx_ns": fct_rx, "ideal_ns": ideal,
                        "slowdown": round(fct / ideal, 4) if fct is not None else None,
                        "ce": st.ce if st is not None else 0, "ue": st.ue if st is not None else 0,
                        "rate_cuts": eng.c.rate_cuts if eng is not None else 0})
    by_size = {}
    for name, _ in SIZE_BUCKETS:
        sel = [r for r in records if size_bucket(r["size"]) == name]
        if sel:
            by_size[name] = summary(sel) | {"total": len(sel)}
    completed = sum(r["fct_ns"] is not None for r in records)
    out: dict[str, Any] = {
        "marker": marker, "mode": "dcqcn+tcd" if marker == "tcd" else "dcqcn", "scale": scale,
        "workload": sizes.name, "size_scale": float(p["size_scale"]),
        "mean_size": round(sizes.mean() * float(p["size_scale"])), "load": float(p["load"]),
        "flows_total": len(flows), "flows_completed": completed,
        "offered_ns": round(flows[-1].start_ns) if flows else 0,
        "slowdown": summary(records), "by_size": by_size, "marks": marks, "bursts": bursts,
    }
    if p["flow_list"]:
        out["flows"] = records
    return out


FCT_SCENARIO = Scenario(
    "tcd-fct", "TCD's FCT comparison on the §3.1 chain: Poisson flows from a CDF (websearch x size_scale) at a "
    "load of the receivers' links, DCQCN (marker ecn) or DCQCN + TCD (marker tcd, the topology's); FCT and "
    "slowdown per flow, median/p99 overall and by size", PARAMS, run_sim=run_sim, paper_rate_bps=PAPER_RATE_BPS)

__all__ = ["BURST_BYTES", "BURST_NS", "BURST_START_NS", "FCT_SCENARIO", "FIRST_FID", "PAPER_BURSTS", "PARAMS",
           "SIZE_BUCKETS", "Burst", "FctFlow", "bursts_of", "check_workload", "ideal_ns", "make_flows", "marker_of",
           "packet_sizes", "path_links", "run_sim", "run_until_complete", "senders_of", "size_bucket", "summary"]
