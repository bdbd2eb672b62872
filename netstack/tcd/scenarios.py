"""TCD §3.1's two scenarios, in virtual time and on the live testbed.

"Congestion Detection in Lossless Networks" (TCD), §3.1: all links 40 Gbit/s with 4 us of
propagation delay and a 320 KB PFC threshold. S1 sends a long-lived flow F1 to R1; A0-A14 send
concurrent 64 KB bursts to R1 for about 3 ms from time 0; after the bursts start, F0 and F2 send
at a constant rate to R0: 5 Gbit/s each in the *single congestion point* scenario (P3, the
port to R1, is the only congestion point; P0-P2 are only paused), 25 Gbit/s each in the
*multiple congestion points* one (P2 is a second, covered, congestion point that shows once P3
drains).

The paper text we have does not give its Fig. 3.1.1, so the chain below is our reading of the text (docs/tcd.md
"Scenarios"): F1 crosses P0-P3, F2 joins at P1, F0 at P2, and the bursts enter at P3's switch::

    s1 -- sw0 =P0=> sw1 =P1=> sw2 =P2=> sw3 -P3-> r1      F1: s1 -> r1 (DCQCN)
              s2 ---^     s0 ---^     |  ^--- a0..aN-1     F2: s2 -> r0, F0: s0 -> r0 (constant)
                                      '---> r0            A0..: a_i -> r1 (64 KB bursts)

Scaling (docs/architecture.md "Time and scale"): a topology at rate C runs the paper's workload
with times multiplied by 40 Gbit/s / C and rates by C / 40 Gbit/s; bytes (bursts, PFC thresholds,
ECN's K) are unchanged. The shipped ``tcd-single`` and ``tcd-multi`` topologies are C = 40 Mbit/s
(times x1000: 4 ms links, a 3 s burst period); :func:`topology_doc` at 40 Gbit/s / 4 us is the
paper's own scale, which only ``netstack/sim`` can run.

One difference is forced by the live testbed and kept in the simulator so that both run the
same workload: Linux hosts do not honour PFC, so a burst host would keep sending into a paused
switch. The bursts are therefore offered at 90 % of the line rate in total (the paper's incast
is controlled by PAUSEs at the hosts' NICs); they still make P3 the congestion point, because
F1 comes on top.
"""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headers.registry import UdpPort

from .. import toolproc
from ..ethernet import UDP_HEADERS_BYTES, WIRE_OVERHEAD_BYTES
from ..sim.scenario import Context, Scenario, ScenarioError
from ..topo.model import Topology
from .paper import (
    ECN_K_BYTES,
    PAPER_DELAY_NS,
    PAPER_RATE_BPS,
    XOFF_BYTES,
    XON_BYTES,
    defaults_table,
    lossless_port,
    scaled_delay_ns,
)
from .series import EVERY_PAPER_NS, PortSampler
from .verdict import lag_limits, scenario_validity

if TYPE_CHECKING:
    from ..runtime import RunState

BURST_BYTES = 64 * 1024
#: TCD §3.1: "A0-A14 send concurrent 64KB bursts"
PAPER_BURSTS = 15
#: the live testbed's scale (the shipped files)
LIVE_RATE_BPS = 40_000_000
KINDS = ("single", "multi")
MARKERS = ("ecn", "tcd")
#: ports by their paper names -> (switch, interface)
PORTS = {"P0": ("sw0", "p-sw1"), "P1": ("sw1", "p-sw2"), "P2": ("sw2", "p-sw3"), "P3": ("sw3", "p-r1")}
STATES = ("non_congestion", "undetermined", "congestion")


@dataclass(frozen=True)
class Flow:
    """One sender: ``name`` as in the paper, host, destination host, flow id, kind, and its
    schedule in the paper's time (ns) and rate (bit/s at 40 Gbit/s)."""

    name: str
    src: str
    dst: str
    fid: int
    kind: str  # "dcqcn" (F1: cut by CNPs), "fixed" (F0, F2), "burst" (A_i)
    start_ns: int
    stop_ns: int
    rate_bps: int | None = None
    burst_period_ns: int | None = None
    burst_bytes: int | None = None


@dataclass(frozen=True)
class Workload:
    """TCD §3.1's schedule in the paper's units: F1 alone from 0 (its rate settles at the line
    rate), the bursts for 3 ms from ``warmup``, F0 and F2 from 0.2 ms after the bursts start
    until the end."""

    kind: str
    bursters: int = PAPER_BURSTS
    warmup_ns: int = 500_000
    burst_ns: int = 3_000_000
    f02_delay_ns: int = 200_000
    tail_ns: int = 2_000_000
    burst_load: float = 0.9
    #: F1's congestion control: "fixed" runs it at f1_rate_bps throughout; "dcqcn" lets DCQCN (or
    #: DCQCN + TCD, with marker tcd) set its rate from line rate on
    f1: str = "fixed"
    f1_rate_bps: int = 12_000_000_000

    @property
    def end_ns(self) -> int:
        return self.warmup_ns + self.burst_ns + self.tail_ns

    @property
    def f02_rate_bps(self) -> int:
        # §3.1: 5 Gbit/s each (single congestion point), 25 Gbit/s each (multiple)
        return 5_000_000_000 if self.kind == "single" else 25_000_000_000

    @property
    def traffic_end_ns(self) -> int:
        """When the long flows stop: with the bursts in the single-congestion-point scenario (the
        seed's observation window: "bursts start at time 0 and last for about 3ms"), 2 ms later in
        the multiple one, whose covered congestion point P2 must show once P3 has drained (§3.1)."""
        b_end = self.warmup_ns + self.burst_ns
        return b_end if self.kind == "single" else self.end_ns

    def flows(self) -> list[Flow]:
        b0, end = self.warmup_ns, self.traffic_end_ns
        f02 = b0 + self.f02_delay_ns
        out = [Flow("F0", "s0", "r0", 0, "fixed", f02, end, self.f02_rate_bps),
               Flow("F1", "s1", "r1", 1, "dcqcn", 0, end, PAPER_RATE_BPS) if self.f1 == "dcqcn" else
               Flow("F1", "s1", "r1", 1, "fixed", 0, end, self.f1_rate_bps),
               Flow("F2", "s2", "r0", 2, "fixed", f02, end, self.f02_rate_bps)]
        # the paper's 15 concurrent 64 KB bursts, shared by our burst hosts, each sending its share
        # back to back at line rate; rounds repeat so that they offer burst_load x C on average
        share = -(-PAPER_BURSTS // self.bursters) * BURST_BYTES
        period = int(share * self.bursters * 8 / (self.burst_load * PAPER_RATE_BPS) * 1e9)
        for i in range(self.bursters):
            out.append(Flow(f"A{i}", f"a{i}", "r1", 100 + i, "burst", b0, b0 + self.burst_ns, PAPER_RATE_BPS,
                            period, share))
        return out


def _f1(mode: str) -> str:
    if mode not in ("fixed", "dcqcn"):
        raise ScenarioError(f"f1 must be 'fixed' or 'dcqcn', not {mode!r}")
    return mode


def _check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise ScenarioError(f"unknown TCD scenario {kind!r} (one of: {', '.join(KINDS)})")


def _check_marker(marker: str) -> None:
    if marker not in MARKERS:
        raise ScenarioError(f"unknown marker {marker!r} (one of: {', '.join(MARKERS)})")


# ------------------------------------------------------------------------------- topology
def topology_doc(kind: str, marker: str = "tcd", *, rate_bps: int = LIVE_RATE_BPS, delay_ns: int | None = None,
                 bursters: int = PAPER_BURSTS, buffer: str = "8MB") -> dict[str, Any]:
    """The scenario's topology as a TOML document (the dict ``tomllib`` would give).

    ``delay_ns`` defaults to the paper's 4 us times the scale (40 Gbit/s over ``rate_bps``).
    Every switch port is lossless with the paper's thresholds; P0-P3 and sw3's port to R0 carry
    ``marker`` (the ECN baseline at the paper's K_max, or TCD with derived parameters)."""
    _check_kind(kind)
    _check_marker(marker)
    if delay_ns is None:
        delay_ns = scaled_delay_ns(rate_bps)
    pfc = lossless_port()
    mark = {"marker": marker, "ecn_k": f"{ECN_K_BYTES}B"}
    hosts = [("s1", "sw0", "10.0.0.11"), ("s2", "sw1", "10.0.0.12"), ("s0", "sw2", "10.0.0.10"),
             ("r0", "sw3", "10.0.0.20"), ("r1", "sw3", "10.0.0.21")]
    hosts += [(f"a{i}", "sw3", f"10.0.0.{30 + i}") for i in range(bursters)]
    nodes = [{"name": n, "kind": "host", "ip": f"{ip}/24"} for n, _, ip in hosts]
    nodes += [{"name": f"sw{i}", "kind": "switch"} for i in range(4)]
    links: list[dict[str, Any]] = []
    for i in range(3):  # the chain: P0, P1, P2
        links.append({"name": f"sw{i}-sw{i + 1}", "a": f"sw{i}", "b": f"sw{i + 1}",
                      "features": {"a": {"switch": dict(pfc), "tcd": dict(mark)}, "b": {"switch": dict(pfc)}}})
    for name, sw, _ in hosts:
        end: dict[str, Any] = {"switch": dict(pfc)}
        if name in ("r0", "r1"):  # P3 (to R1) and R0's port: where F0-F2 and the bursts leave
            end["tcd"] = dict(mark)
        links.append({"name": f"{sw}-{name}", "a": sw, "b": name, "features": {"a": end}})
    return {
        "topology": {"name": f"tcd-{kind}", "prefix": "tcd", "paper_rate": "40Gbit"},
        "defaults": defaults_table(rate_bps, delay_ns, buffer),
        "nodes": nodes, "links": links,
    }


def load_doc(topology: Topology | str | Path, marker: str | None) -> Topology:
    """A scenario topology (a shipped name, a file, or a Topology) with every ``tcd`` marker set to
    ``marker`` (None: as the file says)."""
    from ..topo.model import load_topology_spec, topology_from_dict

    if isinstance(topology, Topology) and marker is None:
        return topology
    src = topology.source if isinstance(topology, Topology) else topology
    found = marker_doc(src, marker)
    if found is None:
        return load_topology_spec(str(src))  # its own error
    return topology_from_dict(found[0], str(found[1]))


def marker_doc(src: str | Path, marker: str | None) -> tuple[dict[str, Any], Path] | None:
    """(the TOML document of a topology file or shipped name, with every ``tcd`` marker set to
    ``marker`` (None: as it is), its path); None when ``src`` is neither."""
    from ..topo.model import shipped_topologies

    path = Path(src) if Path(str(src)).is_file() else shipped_topologies().get(str(src))
    if path is None:
        return None
    doc = tomllib.loads(path.read_text())
    if marker is not None:
        _check_marker(marker)
        for link in doc.get("links", []):
            for end in (link.get("features") or {}).values():
                if isinstance(end, dict) and isinstance(end.get("tcd"), dict):
                    end["tcd"]["marker"] = marker
    return doc, path


def scale_of(topology: Topology) -> float:
    """How many times slower than the paper the topology runs (40 Gbit/s over its links' rate)."""
    from ..sim.scenario import time_scale

    return time_scale(topology, PAPER_RATE_BPS)


def t_on_max_ns(topology: Topology) -> int:
    """P2's T_on^max as its marker derives it (netstack/tcd/params.py ``derive``): from the
    sw2-sw3 link's rate and delay and the PFC thresholds that pause P2 (72.6 ms at the live
    scale, 72.6 us at the paper's)."""
    from .params import TcdParams
    from .topology import pfc_source

    node, _ = PORTS["P2"]
    for link in topology.links:
        if {link.a.node, link.b.node} == {node, "sw3"}:
            pfc, _ = pfc_source(topology, link, "a" if link.a.node == node else "b")
            return TcdParams.derive(rate_bps=link.rate_bps, delay_ns=link.delay_ns, xoff_bytes=pfc["xoff_bytes"],
                                    xon_bytes=pfc["xon_bytes"]).t_on_max_ns
    raise ScenarioError(f"topology {topology.name} has no link from sw2 to sw3 (P2)")


def marker_of(topology: Topology) -> str:
    """Which marker the topology's P ports run (the first ``tcd`` feature found)."""
    for link in topology.links:
        for end in (link.a, link.b):
            opts = end.features.get("tcd")
            if isinstance(opts, dict):
                return str(opts.get("marker", "tcd"))
    raise ScenarioError(f"topology {topology.name} has no tcd marker on any port ([links.features.<end>] tcd = ...)")


# ------------------------------------------------------------------------------ reports
def send_rate_bps(c: dict[str, Any]) -> float | None:
    """A sender's average rate on the wire (bit/s, the unit of its configured rate: frames with
    their UDP/IP/Ethernet headers and the Ethernet overhead) from its first packet's slot to its
    last (``start_ns`` .. ``done_ns`` of its counters); None if it did not finish."""
    start, done, packets = c.get("start_ns"), c.get("done_ns"), int(c.get("packets_sent") or 0)
    if start is None or done is None or done <= start or packets < 2:
        return None
    wire = int(c.get("bytes_sent") or 0) + packets * (UDP_HEADERS_BYTES + WIRE_OVERHEAD_BYTES)
    # (the last packet's own line time is not in start..done: the rate of the packets before it)
    return (wire - wire / packets) * 8e9 / (done - start)


def flow_report(flows: list[Flow], received: dict[int, dict[str, Any]],
                sent: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{"F0": {"packets", "ce", "undetermined", "bytes", ...}, ...}``: the stable part first;
    ``rate_bps``: the sender's average rate from its first to its last packet (:func:`send_rate_bps`)."""
    out = {}
    for f in flows:
        r = received.get(f.fid) or {}
        s = sent.get(f.name) or {}
        out[f.name] = {"packets": int(r.get("packets", 0)), "ce": int(r.get("ce", 0)),
                       "undetermined": int(r.get("ue", 0)), "bytes": int(r.get("bytes", 0)),
                       "src": f.src, "dst": f.dst, "kind": f.kind, "sent": int(s.get("packets_sent", 0)),
                       "cnps_received": int(s.get("cnps_ce", 0)) + int(s.get("cnps_ue", 0)),
                       "rate_cuts": int(s.get("rate_cuts", 0)), "fct_ns": r.get("fct_ns"),
                       "rate_bps": _round(send_rate_bps(s))}
    return out


def flow_names(flows: list[Flow], topology: Topology) -> dict[str, str]:
    """A marker's flow key (``"<source IP>><destination IP>"``, netstack/tcd/marker.py) -> the
    flow's name: each §3.1 flow has its own source host."""
    ips = {n.name: str(n.ip.ip) for n in topology.nodes if n.ip is not None}
    return {f"{ips[f.src]}>{ips[f.dst]}": f.name for f in flows if f.src in ips and f.dst in ips}


def flow_marks(marks: dict[str, dict[str, int]] | None, names: dict[str, str]) -> dict[str, dict[str, int]]:
    """A port's marks per flow by flow name (F0, F1, F2, A0...), only the flows it marked; a pair
    that is no flow of the scenario under its key."""
    out: dict[str, dict[str, int]] = {}
    for key, m in (marks or {}).items():
        out[names.get(key, key)] = {"ce": int(m.get("ce", 0)), "ue": int(m.get("ue", 0))}
    return dict(sorted(out.items(), key=lambda kv: (kv[0][0] != "F", len(kv[0]), kv[0])))


def port_report(name: str, rep: dict[str, Any], t0: int, timeline: list[tuple[int, int]] | None,
                marks: dict[str, dict[str, int]] | None = None) -> dict[str, Any]:
    """One P port: its marker, state, time in each state (ms of the run's clock), marks in total
    and per flow (``flow_marks``: the CE and UE marks this port decided, TCD §3.1 "F1 is partly
    marked at P2")."""
    node, ifname = PORTS[name]
    c = rep.get("counters") or {}
    times = rep.get("time_in_state_ns") or {}
    out: dict[str, Any] = {"node": node, "port": ifname, "marker": rep.get("marker"), "state": rep.get("state"),
                           "time_in_state_ns": {s: int(times.get(s, 0)) for s in STATES} if times else None,
                           "marked_ce": int(c.get("marked_ce", c.get("marked", 0))),
                           "marked_ue": int(c.get("marked_ue", 0)),
                           "transitions": c.get("transitions"), "pauses": c.get("pauses"),
                           "ecn_would_mark": c.get("ecn_would_mark"), "flow_marks": marks or {}}
    if timeline is not None:
        out["timeline"] = [[max(0, t - t0), s] for t, s in timeline]
    return out


def _counter(rep: dict[str, Any], key: str) -> int:
    return int((rep.get("counters") or {}).get(key, 0))


# ----------------------------------------------------------------------------------- sim
def run_sim(net: Any, ctx: Context) -> dict[str, Any]:
    """The scenario in virtual time on ``net`` (built from ``ctx.topology``)."""
    from ..sim.transport import EngineSender
    from .control import markers
    from .control import port_report as marker_report
    from .dcqcn import DcqcnParams, RateSender
    from .np import TcdReceiver
    from .simhosts import TcdReceiverApp

    p = ctx.params
    kind = p["kind"]
    _check_kind(kind)
    topo = ctx.topology
    marker = marker_of(topo)
    scale = scale_of(topo)
    rate = int(PAPER_RATE_BPS / scale)
    wl = Workload(kind, bursters=_bursters(topo), burst_load=float(p["burst_load"]), f1=_f1(p["f1"]))
    flows = wl.flows()
    params = DcqcnParams.scaled(rate, scale)
    t0 = net.now
    receivers: dict[str, TcdReceiver] = {}
    for host in ("r0", "r1"):
        receivers[host] = TcdReceiver(params, tcd=marker == "tcd")
        TcdReceiverApp(net.host(host), receivers[host])
    senders: dict[str, RateSender] = {}
    apps: dict[str, EngineSender] = {}
    for f in flows:
        eng = _sender(f, params, scale, marker, t0, int(p["payload"]))
        senders[f.name] = eng
        apps[f.name] = EngineSender(net.host(f.src), f.dst, eng, int(UdpPort.TCD), tos=0x02, honour_pfc=True)
    end = t0 + int(wl.end_ns * scale) + int(0.5e6 * scale)
    sampler = PortSampler(net, _sampled_ports(), t0, end, int(EVERY_PAPER_NS * scale)).start() \
        if p["series"] else None
    while net.loop.next_time() is not None and net.loop.now < end:
        net.loop.run(end, max_events=50_000)
        ctx.progress(f"sim {kind}/{marker}: {(net.loop.now - t0) / scale / 1e6:.2f} of "
                     f"{(end - t0) / scale / 1e6:.2f} paper-ms")
    received = {fid: r for rcv in receivers.values() for fid, r in rcv.flows().items()}
    sent = {name: s.counters() for name, s in senders.items()}
    for name, app in apps.items():
        if app.gate is not None:  # the host's PFC gate: how long the sender was held
            sent[name]["pfc_paused_ns"] = app.gate.counters()["pfc_paused_ns"]
    ports = {}
    names = flow_names(flows, topo)
    for name, (node, ifname) in PORTS.items():
        m = markers(net.switch(node)).get(ifname)
        if m is None:
            continue
        rep = marker_report(m, net.now)
        tl = _timeline(m) if p["timeline"] else None
        ports[name] = port_report(name, rep, t0, tl, flow_marks(m.flow_marks(), names))
    result = _result(kind, marker, scale, flows, received, sent, ports,
                     senders["F1"].rate_log if p["timeline"] else None, t0)
    if sampler is not None:
        result["series"] = sampler.result()
    # virtual time: nothing can starve a process (no scheduling delay to report), the other
    # checks are the live run's
    result["sched"] = {}
    plans = _plans(flows, params, scale, int(p["payload"]), sent)
    return scenario_validity(kind, result, plans, None, None).annotate(result)


def _sampled_ports() -> dict[str, tuple[str, str, str | None, str | None]]:
    """P0-P3 and, for each, the next switch's port that its PFC pauses come from (P3's peer is R1)."""
    out: dict[str, tuple[str, str, str | None, str | None]] = {}
    for name, (node, ifname) in PORTS.items():
        peer = ifname.removeprefix("p-")
        out[name] = (node, ifname, peer, f"p-{node}") if peer.startswith("sw") else (node, ifname, None, None)
    return out


def _timeline(m: Any) -> list[tuple[int, int]] | None:
    dets = getattr(m, "detectors", None)
    if not dets:
        return None
    busiest = max(dets, key=lambda cls: sum(m.c.classes[cls].to_dict().values()))
    return [(int(t), int(s)) for t, s in m.timeline(busiest)]


def _bursters(topo: Topology) -> int:
    return sum(1 for n in topo.nodes if n.name.startswith("a") and n.name[1:].isdigit())


def _sender(f: Flow, params: Any, scale: float, marker: str, t0: int, payload: int) -> Any:
    from .dcqcn import RateSender

    start = t0 + int(f.start_ns * scale)
    dur = int((f.stop_ns - f.start_ns) * scale)
    rate = int(f.rate_bps / scale) if f.rate_bps else None
    if f.kind == "dcqcn":
        return RateSender(params, flow=f.fid, mode="dcqcn+tcd" if marker == "tcd" else "dcqcn", payload=payload,
                          duration_ns=dur, start_ns=start, now_ns=t0)
    if f.kind == "fixed":
        return RateSender(params, flow=f.fid, mode="fixed", rate_bps=rate, payload=payload, duration_ns=dur,
                          start_ns=start, now_ns=t0)
    assert f.burst_period_ns is not None
    return RateSender(params, flow=f.fid, mode="fixed", rate_bps=rate, payload=payload, duration_ns=dur,
                      burst_bytes=f.burst_bytes, burst_period_ns=int(f.burst_period_ns * scale), start_ns=start,
                      now_ns=t0)


def planned_send(f: Flow, params: Any, scale: float, payload: int) -> tuple[int, float | None] | None:
    """(packets, average rate on the wire) that ``f``'s sender schedules: its own engine run in
    virtual time, never paused, never cut (None for F1 under DCQCN, whose rate is the run's
    outcome). What a run's sender is held to (netstack/tcd/verdict.py); the rate is measured as
    :func:`send_rate_bps` measures the run's."""
    if f.kind == "dcqcn":
        return None
    eng = _sender(f, params, scale, "tcd", 0, payload)
    count = 0
    while not eng.done:
        t = eng.next_deadline()
        if t is None:  # pragma: no cover - a flow with a duration always ends
            break
        count += len(eng.poll(t))
    return count, send_rate_bps(eng.counters())


def planned_packets(f: Flow, params: Any, scale: float, payload: int) -> int | None:
    """The packets ``f``'s sender schedules (:func:`planned_send`)."""
    plan = planned_send(f, params, scale, payload)
    return None if plan is None else plan[0]


def _plans(flows: list[Flow], params: Any, scale: float, payload: int,
           sent: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per flow what verdict.scenario_validity holds its sender to: planned packets and rate, the
    time its host was paused by PFC (``pfc_paused_ns``, the gate's count), how long it was to send."""
    out = {}
    for f in flows:
        c = sent.get(f.name) or {}
        packets, rate = planned_send(f, params, scale, payload) or (None, None)
        out[f.name] = {"packets": packets, "rate_bps": _round(rate),
                       "paused_ns": c.get("pfc_paused_ns"), "active_ns": int((f.stop_ns - f.start_ns) * scale),
                       "done": bool(c.get("done"))}
    return out


def _round(rate: float | None) -> int | None:
    return None if rate is None else round(rate)


def _result(kind: str, marker: str, scale: float, flows: list[Flow], received: dict[int, dict[str, Any]],
            sent: dict[str, dict[str, Any]], ports: dict[str, Any], f1_rate: Any, t0: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "scenario": kind, "marker": marker, "scale": scale,
        "flows": flow_report(flows, received, sent),
        "ports": ports,
    }
    if f1_rate is not None:
        out["f1_rate"] = [[max(0, int(t) - t0), int(r)] for t, r in f1_rate]
    return out


# ---------------------------------------------------------------------------------- live
def run_live(ctx: Context) -> dict[str, Any]:
    """Bring the scenario's topology up, run every sender and receiver as a real process in its
    host's namespace (``python -m netstack.tcd``), read the ports' TCD state, tear it down."""
    from .. import runtime
    from ..sim.scenarios import live_prefix

    p = ctx.params
    kind = p["kind"]
    _check_kind(kind)
    topo = ctx.topology
    marker = marker_of(topo)
    prefix = ctx.prefix or live_prefix(ctx)
    ctx.progress(f"live: bringing up {topo.name} ({marker}) under prefix {prefix}")
    state = runtime.up(topo, prefix)
    try:
        return _live(state, prefix, ctx, kind, marker, topo)
    finally:
        runtime.down(prefix)


def _tool(state: RunState, node: str, *args: str) -> list[str]:
    from ..runtime import node_exec_argv

    return node_exec_argv(state, node, [sys.executable, "-m", "netstack.tcd", *args])


def _live(state: RunState, prefix: str, ctx: Context, kind: str, marker: str, topo: Topology) -> dict[str, Any]:
    from ..experiment import LagWindow
    from .dcqcn import DcqcnParams

    p = ctx.params
    scale = scale_of(topo)
    rate = int(PAPER_RATE_BPS / scale)
    wl = Workload(kind, bursters=_bursters(topo), burst_load=float(p["burst_load"]), f1=_f1(p["f1"]))
    flows = wl.flows()
    common = ["--line-rate", f"{rate}", "--time-scale", f"{scale:g}", "--quiet"]
    procs: list[subprocess.Popen[str]] = []
    try:
        recv = _start_receivers(state, marker, common, procs)
        # every sender gets its start as a delay from a common zero, a little ahead so that all
        # of them are up by then (the namespaces share CLOCK_MONOTONIC)
        zero = time.monotonic() + 1.5 + 0.15 * len(flows)
        send = _start_senders(state, topo, flows, zero, scale, marker, int(p["payload"]), common, procs)
        total = wl.end_ns * scale / 1e9
        ctx.progress(f"live {kind}/{marker}: {len(flows)} senders, {total:.1f} s of traffic")
        # the switches' scheduling delay over the traffic: from the common zero (the 20 processes'
        # start-up before it is not the run) to the senders' end
        time.sleep(max(0.0, zero - time.monotonic()))
        lags = LagWindow(prefix).start()
        sent = {name: _finish(proc, f"sender {name}", total + 60) for name, proc in send.items()}
        lags.stop()
        # the ports' state at the end of the traffic, before the receivers' idle wait
        ports = _read_ports(prefix, bool(p["timeline"]), int(zero * 1e9), flow_names(flows, topo))
        reports = {host: _finish(proc, f"receiver on {host}", 60) for host, proc in recv.items()}
    finally:
        for proc in procs:
            toolproc.kill(proc, timeout=5)
    for name, rep in sent.items():
        lags.add_tool(f"sender {name}", rep)
    for host, rep in reports.items():
        lags.add_tool(f"receiver {host}", rep)
    received = {int(fid): r for rep in reports.values() for fid, r in rep.get("flows", {}).items()}
    counters = {n: s.get("counters", s) for n, s in sent.items()}
    f1 = sent.get("F1", {}).get("rate_log") if p["timeline"] else None
    result = _result(kind, marker, scale, flows, received, counters, ports, f1, int(zero * 1e9))
    result["sched"] = dict(lags.lags)  # every process's scheduling delay over the traffic
    plans = _plans(flows, DcqcnParams.scaled(rate, scale), scale, int(p["payload"]), counters)
    return scenario_validity(kind, result, plans, lags.lags, lag_limits(t_on_max_ns(topo))).annotate(result)


def _start_receivers(state: RunState, marker: str, common: list[str],
                     procs: list[subprocess.Popen[str]]) -> dict[str, subprocess.Popen[str]]:
    """R0's and R1's receivers (``python -m netstack.tcd recv``), once each says it is ready."""
    recv: dict[str, subprocess.Popen[str]] = {}
    for host in ("r0", "r1"):
        argv = _tool(state, host, "recv", "--tcd" if marker == "tcd" else "--no-tcd", "--idle", "1.5",
                     "--wait", "60", *common)
        recv[host] = toolproc.popen(argv)
        procs.append(recv[host])
    for host, proc in recv.items():
        toolproc.wait_ready(proc, f"the receiver on {host}", on="stderr", error=ScenarioError)
    return recv


def _start_senders(state: RunState, topo: Topology, flows: list[Flow], zero: float, scale: float, marker: str,
                   payload: int, common: list[str],
                   procs: list[subprocess.Popen[str]]) -> dict[str, subprocess.Popen[str]]:
    """Every flow's sender (``python -m netstack.tcd send``), each starting at its time after ``zero``."""
    ips = {n.name: str(n.ip.ip) for n in topo.nodes if n.ip is not None}
    send: dict[str, subprocess.Popen[str]] = {}
    for f in flows:
        seconds = (f.stop_ns - f.start_ns) * scale / 1e9
        args = ["send", "--dst", ips[f.dst], "--flow", str(f.fid), "--seconds", f"{seconds:.3f}",
                "--start-at", f"{zero + f.start_ns * scale / 1e9:.6f}", "--payload", str(payload), *common]
        if f.kind == "dcqcn":
            args += ["--mode", "tcd" if marker == "tcd" else "dcqcn"]
        else:
            args += ["--mode", "fixed", "--rate", str(int(f.rate_bps / scale))]  # type: ignore[operator]
            if f.kind == "burst":
                args += ["--burst", str(f.burst_bytes), "--burst-period",
                         f"{int(f.burst_period_ns * scale)}ns"]  # type: ignore[operator]
        send[f.name] = toolproc.popen(_tool(state, f.src, *args))
        procs.append(send[f.name])
    return send


def _read_ports(prefix: str, timeline: bool, t0_ns: int, names: dict[str, str]) -> dict[str, Any]:
    """P0-P3's markers as their switch daemons report them (``tcd_status``)."""
    from ..io.control import request
    from ..runtime import load_state

    st = load_state(prefix)
    controls = {d.node: d.control for d in st.daemons if d.kind == "switch"}
    ports = {}
    for name, (node, ifname) in PORTS.items():
        rep = request(controls[node], "tcd_status", port=ifname, timeline=timeline, timeout=10.0)
        port = rep["ports"][ifname]
        tl = None
        if timeline and port.get("timeline"):
            cls = str(port["summary"]["counters"].get("class", 0))
            tl = [(int(t), int(s)) for t, s in port["timeline"].get(cls, [])]
        ports[name] = port_report(name, port["summary"], t0_ns, tl, flow_marks(port.get("flows"), names))
    return ports


def _finish(proc: subprocess.Popen[str], what: str, timeout: float) -> dict[str, Any]:
    return toolproc.result(proc, f"the {what}", timeout, error=ScenarioError)


PARAMS: dict[str, Any] = {"kind": "single", "payload": 1400, "timeline": False, "burst_load": 0.9, "f1": "fixed",
                          "series": False}

SCENARIOS = [
    Scenario("tcd", "TCD §3.1 on the tcd-single / tcd-multi topologies (kind=single|multi; the marker is the "
             "topology's): per flow packets, CE and undetermined marks; per port P0-P3 the time in each state",
             PARAMS, run_sim=run_sim, run_live=run_live, paper_rate_bps=PAPER_RATE_BPS),
]

__all__ = ["BURST_BYTES", "ECN_K_BYTES", "KINDS", "MARKERS", "PAPER_DELAY_NS", "PAPER_RATE_BPS", "PORTS",
           "SCENARIOS", "XOFF_BYTES", "XON_BYTES", "Flow", "Workload", "flow_marks", "flow_names", "load_doc",
           "marker_doc", "marker_of", "planned_packets", "planned_send", "run_live", "run_sim", "scale_of",
           "send_rate_bps", "t_on_max_ns", "topology_doc"]

from .fct import FCT_SCENARIO  # noqa: E402

SCENARIOS.append(FCT_SCENARIO)

from .fabric import FABRIC_SCENARIO  # noqa: E402

SCENARIOS.append(FABRIC_SCENARIO)
