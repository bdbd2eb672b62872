"""``tcd-fabric-fct``: flow completion times on a leaf-spine fabric with an incast, for DCQCN or TIMELY
with and without TCD (issue 30).

"Congestion Detection in Lossless Networks" (TCD, SIGCOMM 2021) reports, in its abstract, that
congestion control with TCD improves the FCT slowdown 3.3x at the median and 2.0x at the 99th
percentile. Its evaluation setup (§5) was not available to us; this scenario is our reading of
what makes TCD matter (§3.1): flows that only *share* a link PFC pauses (victims) are marked CE by
a queue-length rule and slow down for congestion they did not cause.

**Topology**: the shipped ``tcd-leafspine`` (:func:`leafspine_doc`; docs/tcd.md "FCT on a leaf-spine
fabric"): 2 spines, 4 leaves, 4 hosts a leaf, every link 40 Gbit/s with 4 us of delay (2:1
oversubscribed uplinks), ECMP, every switch port lossless (XOFF 320 KB, XON 288 KB) and marked.

**Workload** (drawn from the run's seed alone: the same flows for both arms):

- *background*: ``flows`` flows arriving as a Poisson process from ``warmup_us`` on, each between
  two hosts drawn uniformly (source != destination), sizes from a CDF (``websearch`` or
  ``fb-hadoop``) x ``size_scale`` (1: full size), at a rate that offers ``load`` x each host's link
  on average;
- *incast* to one receiver (``incast_receiver``; default the first host of the first leaf) from
  ``incast_senders`` hosts on the other leaves (drawn from the seed, spread over those leaves):
  ``persistent`` (default): each sends at line rate, a fixed-rate sender held only by PFC (TCD
  §3.1's incast hosts are RoCE NICs "PFC holds back": a backlogged incast); ``bursts``:
  ``incast_bytes`` from each at once every period, offering ``incast_load`` x the receiver's link
  (§3.1's 64 KB bursts); ``none``. Either lasts from time 0 until the last background flow has
  arrived (the flows still running then finish without it). The incast is not measured: it is
  the congestion, not a flow of the workload.

Every background flow is a sender of ``cc`` (``dcqcn`` or ``timely``; ``netstack.tcd.cc``) on its
own UDP port of its host (a RoCE queue pair honouring PFC), in the cc's TCD mode when the
topology's marker is ``tcd`` (every host's NP then sends CNP-UE too).

**Classes**, by the flow's path (the hops its frames take, ECMP's choice included, read from the
switches' own tables for the flow's 5-tuple: :func:`flow_path`), the same in both arms:

- ``contributor``: the flow goes to the incast receiver, through the congested port;
- ``victim``: not a contributor, and its path shares a directed link with an incast sender's path
  before the congested port (the sender's host link, the leaf uplinks ECMP put the incast on, the
  spine links down to the receiver's leaf): the links PFC from the congested port pauses;
- ``other``: the rest.

Size buckets: ``small`` (< 100 KB), ``large`` (> 1 MB), ``medium``. FCT and slowdown are as in
``netstack.tcd.fct``: from the flow's arrival to the receiver's last packet, over the flow alone
on its path.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..sim.scenario import Context, Scenario, ScenarioError, time_scale
from ..sim.workload import FlowSizes, WorkloadError, flow_sizes
from ..switch.ecmp import flow_key
from ..topo.model import NodeKind, Topology
from .fct import FIRST_FID, FctFlow, check_workload, ideal_ns, marker_of, run_until_complete
from .paper import PAPER_RATE_BPS, defaults_table, lossless_port, scaled_delay_ns
from .params import MARKERS

if TYPE_CHECKING:
    from ..sim.network import Network

# ------------------------------------------------------------------------------ topology
#: the shipped tcd-leafspine's shape (docs/tcd.md "FCT on a leaf-spine fabric")
SPINES = 2
LEAVES = 4
HOSTS_PER_LEAF = 4
#: DCQCN's recommended RED marking (DCQCN §5: Kmin 5 KB, Kmax 200 KB, Pmax 1 %), both arms' CE rule
RED_MARKING = {"ecn_mode": "red", "ecn_kmin": "5000B", "ecn_kmax": "200000B", "ecn_pmax": 0.01}


def leafspine_doc(marker: str = "tcd", *, rate_bps: int = PAPER_RATE_BPS, delay_ns: int | None = None,
                  spines: int = SPINES, leaves: int = LEAVES, hosts_per_leaf: int = HOSTS_PER_LEAF,
                  name: str = "tcd-leafspine", buffer: str = "8MB") -> dict[str, Any]:
    """The leaf-spine fabric as a TOML document (what ``tomllib`` gives for the shipped
    ``tcd-leafspine``): hosts h0.. (``hosts_per_leaf`` a leaf, leaf0 first), leaves leaf0..,
    spines spine0.., every leaf linked to every spine, all links ``rate_bps`` with ``delay_ns``
    (default the paper's 4 us x 40 Gbit/s / ``rate_bps``: the live scale stretches times as it
    slows rates), ECMP on; every switch end lossless (the paper's XOFF 320 KB, XON 288 KB) with
    a ``tcd`` marker whose CE rule is DCQCN's RED (:data:`RED_MARKING`) under either marker."""
    if marker not in MARKERS:
        raise ScenarioError(f"unknown marker {marker!r} (one of: {', '.join(MARKERS)})")
    if delay_ns is None:
        delay_ns = scaled_delay_ns(rate_bps)
    pfc = lossless_port()
    mark = {"marker": marker, "ce_rule": "ecn", **RED_MARKING}
    hosts = [(f"h{i}", f"leaf{i // hosts_per_leaf}") for i in range(leaves * hosts_per_leaf)]
    nodes: list[dict[str, Any]] = [{"name": h, "kind": "host", "ip": f"10.0.0.{i + 1}/24"}
                                   for i, (h, _) in enumerate(hosts)]
    nodes += [{"name": f"leaf{i}", "kind": "switch"} for i in range(leaves)]
    nodes += [{"name": f"spine{i}", "kind": "switch"} for i in range(spines)]
    links: list[dict[str, Any]] = [{"name": f"{leaf}-{h}", "a": leaf, "b": h,
                                    "features": {"a": {"switch": dict(pfc), "tcd": dict(mark)}}} for h, leaf in hosts]
    for i in range(leaves):
        for j in range(spines):
            end = {"switch": dict(pfc), "tcd": dict(mark)}
            links.append({"name": f"leaf{i}-spine{j}", "a": f"leaf{i}", "b": f"spine{j}",
                          "features": {"a": dict(end), "b": {"switch": dict(pfc), "tcd": dict(mark)}}})
    return {
        "topology": {"name": name, "prefix": "tls", "paper_rate": "40Gbit", "ecmp": True},
        "defaults": defaults_table(rate_bps, delay_ns, buffer),
        "nodes": nodes, "links": links,
    }


# ------------------------------------------------------------------------------ workload
INCASTS = ("persistent", "bursts", "none")
CLASSES = ("contributor", "victim", "other")
#: size buckets (bytes): small below, large above; the rest is medium
SMALL_BELOW = 100_000
LARGE_ABOVE = 1_000_000
#: the incast's flow ids (100 + i, as the §3.1 bursts'); the workload's start at FIRST_FID
INCAST_FID = 100


def size_bucket(size: int) -> str:
    """``small`` (< 100 KB), ``large`` (> 1 MB) or ``medium``."""
    return "small" if size < SMALL_BELOW else "large" if size > LARGE_ABOVE else "medium"


def hosts_by_switch(topology: Topology) -> dict[str, list[str]]:
    """``{switch: [its hosts, in file order]}`` (every host-like node hangs off one switch)."""
    out: dict[str, list[str]] = {}
    for node in topology.nodes:
        if node.kind is NodeKind.SWITCH or not topology.links_of(node.name):
            continue
        peer = topology.links_of(node.name)[0].peer(node.name).node
        if topology.node(peer).kind is NodeKind.SWITCH:
            out.setdefault(peer, []).append(node.name)
    return out


def make_background(seed: int, *, flows: int, load: float, sizes: FlowSizes, size_scale: float, hosts: list[str],
                    rate_bps: int = PAPER_RATE_BPS, start_ns: int = 0) -> list[FctFlow]:
    """The background flows drawn from ``seed`` alone: Poisson arrivals from ``start_ns`` offering
    ``load`` x ``rate_bps`` from each of ``hosts`` on average, uniform ends (source != destination),
    sizes from ``sizes`` x ``size_scale`` (times in the paper's ns)."""
    check_workload("tcd-fabric-fct", flows, load, size_scale)
    if len(hosts) < 2:
        raise ScenarioError("tcd-fabric-fct: the topology needs two hosts or more")
    rng = random.Random(f"{seed}/tcd-fabric-fct")
    mean = max(1.0, sizes.mean() * size_scale)
    gap_ns = mean * 8e9 / (load * rate_bps * len(hosts))
    out: list[FctFlow] = []
    t = float(start_ns)
    for i in range(flows):
        size = max(1, round(sizes.sample(rng) * size_scale))
        src = rng.choice(hosts)
        dst = rng.choice([h for h in hosts if h != src])
        out.append(FctFlow(FIRST_FID + i, src, dst, size, round(t)))
        t += rng.expovariate(1.0 / gap_ns)
    return out


def incast_plan(seed: int, topology: Topology, receiver: str | None, senders: int) -> tuple[str, list[str]]:
    """(the receiver, the incast's senders): ``senders`` hosts on the other switches than the
    receiver's, drawn from ``seed``, spread over those switches round robin (the first host of the
    first switch is the receiver when none is named)."""
    by_switch = hosts_by_switch(topology)
    if not by_switch:
        raise ScenarioError(f"tcd-fabric-fct: topology {topology.name} has no host on a switch")
    if not receiver:
        receiver = next(iter(by_switch.values()))[0]
    home = next((sw for sw, hs in by_switch.items() if receiver in hs), None)
    if home is None:
        raise ScenarioError(f"tcd-fabric-fct: incast_receiver {receiver!r} is no host of {topology.name}")
    rng = random.Random(f"{seed}/tcd-fabric-fct/incast")
    pools = [rng.sample(hs, len(hs)) for sw, hs in by_switch.items() if sw != home]
    room = sum(len(p) for p in pools)
    if not 0 <= senders <= room:
        raise ScenarioError(f"tcd-fabric-fct: incast_senders must be 0..{room} (the hosts off the receiver's "
                            f"switch {home}), got {senders}")
    chosen: list[str] = []
    while len(chosen) < senders:
        for pool in pools:
            if pool and len(chosen) < senders:
                chosen.append(pool.pop())
    return receiver, chosen


def _sizes(spec: str) -> FlowSizes:
    try:
        return flow_sizes(spec)
    except WorkloadError as exc:
        raise ScenarioError(f"tcd-fabric-fct: {exc}") from None


# ------------------------------------------------------------------------------ paths
def flow_path(net: Network, src: str, frame: bytes) -> list[str]:
    """The nodes a frame from host ``src`` crosses, as the switches forward it: each switch's ECMP
    group for the destination MAC picks by the frame's flow key (as the data path does), else its
    static entry. ScenarioError if a switch has no entry or the walk loops."""
    topo = net.topology
    node = topo.links_of(src)[0].peer(src).node
    path = [src, node]
    while topo.node(node).kind is NodeKind.SWITCH:
        sw = net.switch(node)
        group = (sw.ecmp or {}).get(frame[:6])
        idx = group.ports[group.choose(flow_key(frame))] if group is not None else sw.fdb.static.get(frame[:6])
        if idx is None or len(path) > len(topo.nodes):
            raise ScenarioError(f"tcd-fabric-fct: no path from {src} at {node}")
        ifname = sw.ports[idx].name
        node = next(link.peer(node).node for link, end in topo.ends_of(node) if end.ifname == ifname)
        path.append(node)
    return path


def hops(path: list[str]) -> set[tuple[str, str]]:
    """The directed links of a path."""
    return set(itertools.pairwise(path))


def classify(path: list[str], receiver: str, incast_links: set[tuple[str, str]]) -> str:
    """``contributor``, ``victim`` or ``other`` (module docstring)."""
    if path[-1] == receiver:
        return "contributor"
    return "victim" if hops(path) & incast_links else "other"


def path_links(topology: Topology, path: list[str]) -> list[tuple[int, int]]:
    """(rate bit/s, delay ns) of each link of ``path``."""
    out = []
    for u, v in itertools.pairwise(path):
        link = next(lk for lk in topology.links_of(u) if lk.peer(u).node == v)
        out.append((link.rate_bps, link.delay_ns))
    return out


PARAMS: dict[str, Any] = {
    "flows": 300, "load": 0.6, "workload": "websearch", "size_scale": 1.0, "payload": 1400, "cc": "dcqcn",
    "incast": "persistent", "incast_senders": 6, "incast_receiver": "", "incast_load": 0.9,
    "incast_bytes": 64 * 1024,
    #: the background flows arrive from here (paper us): the incast's congestion tree has built by then
    "warmup_us": 500.0,
    #: the longest a run may take, in the paper's time (ms); --duration overrides it
    "max_ms": 500.0,
    #: include the per-flow list in the result
    "flow_list": True,
}


@dataclass(frozen=True)
class Setup:
    """One run's checked settings."""

    marker: str
    cc: str
    mode: str
    scale: float
    payload: int
    sizes: FlowSizes
    receiver: str
    incast: list[str]


# ----------------------------------------------------------------------------------- sim
def _setup(net: Network, ctx: Context) -> Setup:
    from .cc import CCS, cc_mode

    p = ctx.params
    topo = ctx.topology
    marker = marker_of(topo)
    cc = str(p["cc"])
    if cc not in CCS:
        raise ScenarioError(f"tcd-fabric-fct: cc must be one of {', '.join(CCS)}, got {cc!r}")
    if p["incast"] not in INCASTS:
        raise ScenarioError(f"tcd-fabric-fct: incast must be one of {', '.join(INCASTS)}, got {p['incast']!r}")
    payload = int(p["payload"])
    if not 16 <= payload <= 1458:
        raise ScenarioError(f"tcd-fabric-fct: payload must be 16..1458 bytes (an MTU of 1500), got {payload}")
    n = int(p["incast_senders"]) if p["incast"] != "none" else 0
    receiver, senders = incast_plan(ctx.seed, topo, str(p["incast_receiver"]) or None, n)
    return Setup(marker, cc, cc_mode(cc, marker == "tcd"), time_scale(topo, PAPER_RATE_BPS), payload,
                 _sizes(str(p["workload"])), receiver, senders)


def run_sim(net: Network, ctx: Context) -> dict[str, Any]:
    """The workload in virtual time on ``net`` (built from ``ctx.topology``)."""
    p = ctx.params
    s = _setup(net, ctx)
    hosts = [h for hs in hosts_by_switch(ctx.topology).values() for h in hs]
    flows = make_background(ctx.seed, flows=int(p["flows"]), load=float(p["load"]), sizes=s.sizes,
                            size_scale=float(p["size_scale"]), hosts=hosts,
                            start_ns=int(float(p["warmup_us"]) * 1000))
    run = FabricRun(net, s, hosts)
    limit = ctx.duration_ns if ctx.duration_ns is not None else int(float(p["max_ms"]) * 1e6 * s.scale)
    # the incast lasts while the background flows arrive (module docstring)
    run.start_incast(str(p["incast"]), float(p["incast_load"]), int(p["incast_bytes"]),
                     min(limit, max(1, int(flows[-1].start_ns * s.scale))))
    for f in flows:
        run.loop.call_at(run.t0 + int(f.start_ns * s.scale), run.start, f)
    run.until_complete(flows, run.t0 + limit,
                       lambda done, now: ctx.progress(f"sim tcd-fabric-fct/{s.marker}/{s.cc}: {done}/{len(flows)} "
                                                      f"flows complete at {now / s.scale / 1e6:.2f} paper-ms"))
    return run.result(ctx, flows)


class FabricRun:
    """The receivers (one NP on every host), the incast and the background senders of one run."""

    def __init__(self, net: Network, setup: Setup, hosts: list[str]) -> None:
        from .cc import cc_params
        from .dcqcn import DcqcnParams
        from .np import TcdReceiver
        from .simhosts import TcdReceiverApp

        self.net = net
        self.loop = net.loop
        self.t0 = net.now
        self.s = setup
        rate = int(PAPER_RATE_BPS / setup.scale)
        self.params = cc_params(setup.cc, rate, setup.scale)
        #: the incast's fixed-rate senders are DCQCN's RateSender under either cc (no ACKs asked)
        self.fixed_params = DcqcnParams.scaled(rate, setup.scale)
        self.receivers = {h: TcdReceiver(self.params, tcd=setup.marker == "tcd") for h in hosts}
        for h, rcv in self.receivers.items():
            TcdReceiverApp(net.host(h), rcv)
        self.engines: dict[int, Any] = {}
        self.arrivals: dict[int, int] = {}
        self.paths: dict[int, list[str]] = {}
        self.incast_links: set[tuple[str, str]] = set()

    def _sender(self, src: str, dst: str, eng: Any) -> list[str]:
        """``eng`` on ``src`` toward ``dst``; the path its frames take."""
        from .simhosts import sender_app

        app = sender_app(self.net.host(src), dst, eng)
        return flow_path(self.net, src, app.flow.udp(app.sport, app.dport, b""))

    def start_incast(self, kind: str, load: float, burst: int, duration_ns: int) -> None:
        """The incast senders, from the run's start for ``duration_ns`` (module docstring); their
        links before the congested port are the incast's (``incast_links``)."""
        from .dcqcn import RateSender

        s, pr = self.s, self.fixed_params
        n = len(s.incast)
        if kind == "none" or not n:
            return
        kw: dict[str, Any] = {"mode": "fixed", "rate_bps": pr.line_rate_bps, "payload": s.payload,
                              "duration_ns": duration_ns, "start_ns": self.t0, "now_ns": self.t0}
        if kind == "bursts":
            if not 0 < load <= 1 or burst < 1:
                raise ScenarioError(f"tcd-fabric-fct: bursts need incast_load in (0, 1] and incast_bytes >= 1, "
                                    f"got {load} and {burst}")
            kw.update(burst_bytes=burst, burst_period_ns=int(burst * n * 8 / (load * PAPER_RATE_BPS) * 1e9 * s.scale))
        for i, src in enumerate(s.incast):
            path = self._sender(src, s.receiver, RateSender(pr, flow=INCAST_FID + i, **kw))
            self.incast_links |= hops(path[:-1])  # (the last hop is the congested port itself)

    def start(self, f: FctFlow) -> None:
        from .cc import make_sender

        now = self.loop.now
        eng = make_sender(self.s.cc, self.s.mode, self.params, flow=f.fid, payload=self.s.payload,
                          size_bytes=f.size, start_ns=now, now_ns=now)
        self.engines[f.fid] = eng
        self.arrivals[f.fid] = now
        self.paths[f.fid] = self._sender(f.src, f.dst, eng)

    def until_complete(self, flows: list[FctFlow], end: int, progress: Any) -> None:
        """Run until every background flow has completed at its receiver, or ``end`` (the incast
        never ends by itself): ``netstack.tcd.fct.run_until_complete``."""
        run_until_complete(self.loop, self.t0, self.s.scale, {f.fid: self.receivers[f.dst] for f in flows}, end,
                           progress, max_events=50_000)

    def result(self, ctx: Context, flows: list[FctFlow]) -> dict[str, Any]:
        return fabric_result(self, ctx, flows)


def flow_record(run: FabricRun, f: FctFlow) -> dict[str, Any]:
    """One background flow's result: ends, size, class, bucket, path, FCT, ideal, slowdown, marks."""
    path = run.paths.get(f.fid)
    ideal = ideal_ns(f.size, run.s.payload, path_links(run.net.topology, path)) if path else None
    st = run.receivers[f.dst].flow(f.fid)
    eng = run.engines.get(f.fid)
    fct = None
    if st is not None and st.complete_ns is not None:
        fct = st.complete_ns - run.arrivals[f.fid]
    return {"fid": f.fid, "src": f.src, "dst": f.dst, "size": f.size, "arrival_ns": f.start_ns,
            "class": classify(path, run.s.receiver, run.incast_links) if path else None,
            "bucket": size_bucket(f.size), "path": ">".join(path or []), "fct_ns": fct, "ideal_ns": ideal,
            "slowdown": round(fct / ideal, 4) if fct is not None and ideal else None,
            "ce": st.ce if st is not None else 0, "ue": st.ue if st is not None else 0,
            "rate_cuts": eng.c.rate_cuts if eng is not None else 0, "holds": eng.c.holds if eng is not None else 0}


def marking_of(net: Network) -> dict[str, Any]:
    """The marking every switch port runs (each port's marker settings, counted by distinct set):
    ``{"marker", "ce_rule", "ecn": {...}, "tcd": {t_on_max_ns, k_bytes, window_ns} | None, "ports"}``,
    or ``{"variants": [...]}`` when the ports differ."""
    from .control import markers

    seen: dict[str, dict[str, Any]] = {}
    for name in net.switches:
        for m in markers(net.switch(name)).values():
            st = m.status()
            p = st["params"]
            tcd = None if st["marker"] == "ecn" else {k: p[k] for k in ("t_on_max_ns", "k_bytes", "window_ns")}
            entry = {"marker": st["marker"], "ce_rule": st.get("ce_rule"),
                     "ecn": p if st["marker"] == "ecn" else st.get("ecn"), "tcd": tcd}
            key = repr(entry)
            seen.setdefault(key, {**entry, "ports": 0})["ports"] += 1
    variants = list(seen.values())
    return variants[0] if len(variants) == 1 else {"variants": variants}


def pauses_of(net: Network, incast_links: set[tuple[str, str]]) -> dict[str, Any]:
    """PFC pauses each marked switch port received (``"switch>peer": n``, the ports with any), and
    the sums on the incast's links and elsewhere."""
    from .control import markers, port_report

    topo = net.topology
    ports: dict[str, int] = {}
    for name in net.switches:
        peer_of = {end.ifname: link.peer(name).node for link, end in topo.ends_of(name)}
        for ifname, m in markers(net.switch(name)).items():
            n = int(port_report(m, net.now)["counters"].get("pauses") or 0)
            if n:
                ports[f"{name}>{peer_of[ifname]}"] = n
    on = sum(n for k, n in ports.items() if tuple(k.split(">")) in incast_links)
    return {"ports": dict(sorted(ports.items())), "on_incast_links": on, "elsewhere": sum(ports.values()) - on}


def fabric_result(run: FabricRun, ctx: Context, flows: list[FctFlow]) -> dict[str, Any]:
    p = ctx.params
    s = run.s
    records = [flow_record(run, f) for f in flows]
    marks = {k: sum(r[k] for r in records) for k in ("ce", "ue", "rate_cuts", "holds")}
    out: dict[str, Any] = {
        "marker": s.marker, "cc": s.cc, "mode": s.mode, "scale": s.scale, "workload": s.sizes.name,
        "size_scale": float(p["size_scale"]), "mean_size": round(s.sizes.mean() * float(p["size_scale"])),
        "load": float(p["load"]),
        "incast": {"kind": p["incast"] if s.incast else "none", "receiver": s.receiver, "senders": s.incast,
                   "links": sorted(f"{a}>{b}" for a, b in run.incast_links)},
        "flows_total": len(flows), "flows_completed": sum(r["fct_ns"] is not None for r in records),
        "classes": {c: sum(r["class"] == c for r in records) for c in CLASSES},
        "marking": marking_of(run.net), "pauses": pauses_of(run.net, run.incast_links), "marks": marks,
        "end_paper_ms": round((run.loop.now - run.t0) / s.scale / 1e6, 4),
    }
    if p["flow_list"]:
        out["flows"] = records
    return out


FABRIC_SCENARIO = Scenario(
    "tcd-fabric-fct", "TCD's FCT comparison on a leaf-spine fabric (tcd-leafspine): Poisson flows from a CDF at a "
    "load of the hosts' links plus an incast to one host, DCQCN or TIMELY (cc) with TCD (marker tcd) or without "
    "(marker ecn); per flow FCT, slowdown, class (contributor, victim, other) and size bucket",
    PARAMS, run_sim=run_sim, paper_rate_bps=PAPER_RATE_BPS)

__all__ = ["CLASSES", "FABRIC_SCENARIO", "HOSTS_PER_LEAF", "INCASTS", "LARGE_ABOVE", "LEAVES", "PARAMS",
           "RED_MARKING", "SMALL_BELOW", "SPINES", "FabricRun", "Setup", "classify", "flow_path", "hops",
           "hosts_by_switch", "incast_plan", "leafspine_doc", "make_background", "marking_of", "path_links",
           "pauses_of", "run_sim", "size_bucket"]
