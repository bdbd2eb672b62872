"""1Pipe in virtual time: the ``onepipe`` scenario (``netstack sim TOPOLOGY --scenario onepipe``).

The real engines run as they do live, on :mod:`netstack.sim`:

- every 1Pipe process is an :class:`~.endpoint.Endpoint` on a simulated host's UDP port
  (``PORT + 1``, ``PORT + 2``... per host, as ``netstack onepipe run`` places them); its beacons go
  to the subnet's broadcast address on ``PORT``, where the ToR's feature consumes them; a datagram
  to a process on the same host is handed over by the host itself, as the kernel does live (it
  never reaches the ToR, so its barrier moves nothing: design topic §4 in docs/papers.md);
- every switch runs the real switch feature (:func:`.feature.enable`, directions from
  :func:`.topology.validate`);
- every host has its own clock: the topology's (``clock_offset``, ``clock_drift_ppm``), or offsets
  drawn for the run (``skew_ns``: uniform in ``[-2 skew, 2 skew]``, so the mean ``|offset|`` from
  the true time, what PTP reports, is ``skew``). Clocks count from the run's start
  (:meth:`.clock.HostClock.from_epoch`) and read ``CLOCK_BASE_NS`` more than the true time, as a
  monotonic clock reads the uptime: host times stay positive whatever the offsets;
- processes scatter: Poisson arrivals at ``rate`` scatterings/s each, ``fanout`` distinct random
  destinations among the other processes (a lone process scatters to itself), ``size`` bytes a
  message (its sender's scattering counter first, as ``netstack.onepipe.live`` writes it). With
  fewer than ``fanout`` other processes, scatterings come faster so that each process still
  offers ``rate x fanout`` messages/s.

``mode = "sequencer"`` runs the classic design 1Pipe is measured against instead, on the same
hosts, switches and load (:mod:`.sequencer`). When the package :mod:`netstack.onepipe.baselines`
is there, its ``MODES`` (more total-order baselines) run through its ``run_baseline`` the same way.

``cpu`` (default off: hosts are infinitely fast, as before issue 32) turns on the host CPU model:
every process gets one core (:class:`netstack.sim.cpu.HostCpu`) and each of its engine's calls
(a send, per message; a datagram received, by opcode; a timer wake-up) is done once that core
has spent the call's cost, in FIFO order with the rest of its work. The costs are measured on
our engines and scaled to the paper's hardware (:mod:`.cpucost`: best effort's make the paper's
5.2 M msg/s per process; reliable's follow from our measured work). The application then blocks
while its core owes more than ``cpu_backlog_ns`` (0: 1 us at the paper's scale), so a load above
capacity saturates the core instead of queueing without bound, and the delivered rate per
process is the modelled capacity (its throughput window starts at least 12 us into the
sending period, when the saturated pipeline delivers steadily). The result gains ``cpu``: the
model, its costs, each process's utilisation over the throughput window and the cores' backlog. The baselines
(:mod:`netstack.onepipe.baselines`, the sequencer too when ``cpu`` is on) charge their processes'
cores best effort's measured costs per message sent and received (``CpuCosts.baseline_costs``).

Measured per delivered message, in true (virtual) time: **latency** = delivery - the moment the
application called ``send`` for its scattering; **unordered** = the arrival of the message's last
fragment at the receiver's endpoint - that same moment: the *unordered baseline* (the same path
and load, delivered as soon as it is whole, no barrier wait), measured in the same run; **barrier
wait** = latency - unordered. Also the per-process delivered rate, send-fails, late drops, lost
messages, beacons, and an in-memory order check (every receiver in ``(ts, sender)`` order with
per-sender FIFO and one ts per scattering: together, one total order). ``log_dir`` writes the
delivery logs in the format ``netstack onepipe check`` reads.

``loss`` is a drop probability, placed by ``loss_at``: ``"links"`` (the default) on every
switch-to-switch port, both ways (the sending switch's seeded impairment); ``"receivers"`` in
every process's receiving library, where 1Pipe's Fig. 9b puts it (its §7.1: "random message drop
in lib1pipe receiver"): every datagram a process receives but the controller's is dropped with
that probability, seeded, in the simulated process's shell, never in the engines
(:class:`.simproc.RxLoss` says what is dropped and why). The result then gains
``receiver_loss``: datagrams seen, dropped, and dropped by opcode. ``"receivers"`` is 1Pipe's
library: modes ``onepipe`` and ``reliable`` only.

Time-valued parameters left at 0 take the paper's value times the topology's time scale (1 at
100 Gbit/s, 1000 on the shipped ``onepipe`` topology): ``T_beacon`` 3 us (the paper's §7), 100k
scatterings/s per process, a 200 us run. :func:`fabric_topology` builds the paper-scale fabric
(k ToRs x h hosts under one spine, 100 Gbit/s, unscaled) with a sequencer host;
:func:`fat_tree_topology` the paper's 3-tier testbed (4 ToRs, 4 aggs, 2 cores: 1, 3 and 5 hops).
``placement`` puts the processes on the hosts (:func:`place`): ``"spread"`` (the default) across
the ToRs, ``"pack"`` ToR by ToR as the paper's testbed did; the result then gains ``placement`` and
``max_switch_hops``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..sim.scenario import Context, Scenario, ScenarioError, time_scale
from ..switch import ImpairmentConfig
from ..topo.model import NodeKind, Topology, TopologyError
from . import feature, rscenario
from . import topology as op_topology
from .background import MAX_FLOWS, Background
from .clock import HostClock, host_clock
from .cpucost import CpuCosts
from .kv.scenario import SCENARIO as KV_SCENARIO
from .params import PORT, PORT_RANGE, OnePipeParams
from .sequencer import run_sequencer
from .simproc import OnePipeProcess, OnePipeRun, model_costs, rx_loss_summary
from .variant import CHIP, VARIANTS
from .variant import delay_ns as variant_delay

#: what a host clock reads at the run's start (true time 0), besides its offset
CLOCK_BASE_NS = 1_000_000_000
#: the paper's values (its §7), multiplied by the topology's time scale when a parameter is 0
PAPER_T_BEACON_NS = 3_000
PAPER_RATE = 100_000.0  # scatterings/s per process: ours (the paper's 5 M msg/s cost too much to simulate)
PAPER_DURATION_NS = 200_000
#: the sequencer's service time per message it forwards (our model, see .sequencer)
PAPER_SEQ_SERVICE_NS = 100
#: the host the sequencer runs on when ``seq_host`` is empty and the topology has one of that name
SEQ_HOST = "seq"
MODES = ("onepipe", "reliable", "sequencer")
#: where ``loss`` drops packets (module docstring): the ToR-spine links, or the processes' receiving libraries
LOSS_AT = ("links", "receivers")
#: where the processes go (:func:`place`): dealt across the ToRs, or packed ToR by ToR as on 1Pipe's testbed
PLACEMENTS = ("spread", "pack")

PARAMS: dict[str, Any] = {
    "procs": 8, "mode": "onepipe", "rate": 0.0, "fanout": 2, "size": 64,
    "t_beacon_ns": 0, "switch_t_beacon_ns": 0, "prompt_beacons": True, "skew_ns": -1.0, "drift_ppm": 0.0, "loss": 0.0,
    "loss_at": "links",
    "placement": "spread",
    "warmup_ns": 0, "drain_ns": 0, "seq_host": "", "seq_service_ns": 0, "seq_queue": 4096, "log_dir": "",
    # mode=reliable (netstack.onepipe.rscenario): the controller runs on the sequencer's host
    "kill": 0, "kill_at_ns": 0, "store_delay_ns": 0,
    # ... the controller's core: ns of it per datagram the controller sends or receives (0: no core)
    "ctl_msg_ns": 0,
    # ... what fails (rscenario.FAILS): process, tor, core-link, core-switch (1Pipe's Fig. 10)
    "fail": "process",
    # background TCP flows per host beside 1Pipe (1Pipe's Fig. 12, netstack.onepipe.background)
    "bg_flows": 0,
    # the host CPU model (issue 32, netstack.onepipe.cpucost): off by default
    "cpu": False, "cpu_backlog_ns": 0,
    # the baselines' own knobs (issue 32, netstack.onepipe.baselines; 0 / "": their defaults)
    "token_batch": 0, "token_queue": 0, "swseq_ns_per_msg": 0.0, "swseq_switch": "", "lamport_hb_ns": 0,
    "lamport_hb_share": 0.0,
    # the host stack's one-way latency on every host, each way (issue 32, netstack.sim.hosts.Host.stack_ns)
    "nic_ns": 0,
    # reliable: a sender's commit barrier in a prompt COMMIT as well as its beacons (ours), or in its beacons only
    "prompt_commit": True,
    # where the switches' 1Pipe processing runs (netstack.onepipe.variant): "chip", "cpu" or "host"; the
    # one-way delay to a cpu's or host's registers (0: the variant's default, variant.delay_ns)
    "variant": "chip", "variant_delay_ns": 0,
}
#: parameters added after runs were fingerprinted (tests/sim/golden.json): at their default they
#: are left out of a run's recorded parameters, so that those runs' documents stay byte for byte
LATE_PARAMS = {"cpu": False, "cpu_backlog_ns": 0, "token_batch": 0, "token_queue": 0, "swseq_ns_per_msg": 0.0,
               "swseq_switch": "", "lamport_hb_ns": 0, "lamport_hb_share": 0.0, "loss_at": "links",
               "placement": "spread",
               "fail": "process", "bg_flows": 0, "nic_ns": 0, "ctl_msg_ns": 0,
               "prompt_commit": True, "variant": "chip", "variant_delay_ns": 0}
#: cpu: the application blocks while its core owes more than this (paper scale, ns)
PAPER_CPU_BACKLOG_NS = 1_000
#: cpu: the throughput window starts at least this long into the sending period (window_of)
PAPER_CPU_FILL_NS = 12_000



# ----------------------------------------------------------------------------- statistics
def latency_stats(values: Sequence[int]) -> dict[str, Any]:
    """``{n, mean, p50, p99, p999, max}`` of ``values`` (ns); nearest-rank percentiles."""
    if not values:
        return {"n": 0, "mean": None, "p50": None, "p99": None, "p999": None, "max": None}
    v = sorted(values)
    n = len(v)

    def rank(p: float) -> int:
        return v[min(n - 1, max(0, math.ceil(p * n) - 1))]

    return {"n": n, "mean": sum(v) / n, "p50": rank(0.5), "p99": rank(0.99), "p999": rank(0.999), "max": v[-1]}


# ------------------------------------------------------------------------------ topology
def fabric_topology(*, tors: int = 4, hosts_per_tor: int = 8, rate: str = "100Gbit", delay: str = "250ns",
                    sequencer: bool = True, name: str = "onepipe-fabric", prefix: str = "opf",
                    uplink_rate: str | None = None, spines: int = 1) -> dict[str, Any]:
    """``tors`` ToRs x ``hosts_per_tor`` hosts under one spine, every link at ``rate`` (the paper's
    100 Gbit/s: time scale 1) with ``delay`` each, as a topology document. ``sequencer``: one more
    host, ``seq``, on the first ToR (where the central sequencer baseline runs; 1Pipe runs leave
    it idle, so both see the same fabric). Hosts are ``h1..hN`` in 10.0.0.0/16 (ToR ``t``'s host
    ``i`` is 10.0.t.i), one subnet, so host beacons reach their ToR as broadcasts. ``uplink_rate``:
    the ToR-spine links' rate when it differs (e.g. ``hosts_per_tor`` x ``rate``: no
    oversubscription, as the paper's testbed, §7.1); the time scale stays 1. ``spines``: every ToR
    linked to each of ``spine1..spineS`` (a leaf-spine fabric, so that a core link or switch can
    fail and leave the rest connected: Fig. 10, netstack.onepipe.rscenario); routes stay static,
    the first spine's (no ECMP: 1Pipe's barrier is written for the one port a frame takes)."""
    if tors < 1 or hosts_per_tor < 1 or tors * hosts_per_tor > 250 * 250 or spines < 1:
        raise ValueError("need at least one ToR, one host per ToR and one spine")
    nodes: list[dict[str, Any]] = [{"name": f"spine{s}", "kind": "switch"} for s in range(1, spines + 1)]
    links: list[dict[str, Any]] = []
    n = 0
    for t in range(1, tors + 1):
        tor = f"tor{t}"
        nodes.append({"name": tor, "kind": "switch"})
        for s in range(1, spines + 1):
            uplink: dict[str, Any] = {"name": f"{tor}-spine{s}", "a": tor, "b": f"spine{s}"}
            if uplink_rate is not None:
                uplink["rate"] = uplink_rate
            links.append(uplink)
        for i in range(1, hosts_per_tor + 1):
            n += 1
            nodes.append({"name": f"h{n}", "kind": "host", "ip": f"10.0.{t}.{i}/16"})
            links.append({"name": f"h{n}-{tor}", "a": f"h{n}", "b": tor})
    return _fabric_document(nodes, links, sequencer=sequencer, name=name, prefix=prefix, rate=rate, delay=delay,
                            uplink_rate=uplink_rate)


def _fabric_document(nodes: list[dict[str, Any]], links: list[dict[str, Any]], *, sequencer: bool, name: str,
                     prefix: str, rate: str, delay: str, uplink_rate: str | None) -> dict[str, Any]:
    """The topology document of a generated fabric: ``nodes`` and ``links``, plus the ``seq`` host
    on tor1 when ``sequencer``, every link at ``rate`` and ``delay`` unless it says otherwise."""
    if sequencer:
        nodes.append({"name": SEQ_HOST, "kind": "host", "ip": "10.0.0.200/16"})
        links.append({"name": f"{SEQ_HOST}-tor1", "a": SEQ_HOST, "b": "tor1"})
    # faster uplinks model a fabric without oversubscription, not a faster paper: the paper's rate is
    # the fastest switch-to-switch link, so that the time scale stays 1 (the paper's times, unscaled)
    return {"topology": {"name": name, "prefix": prefix, "paper_rate": uplink_rate or "100Gbit"},
            "defaults": {"rate": rate, "delay": delay, "mtu": 1500, "buffer": "200KB"},
            "nodes": nodes, "links": links}


def fat_tree_topology(*, pods: int = 2, tors_per_pod: int = 2, aggs_per_pod: int = 2, cores: int = 2,
                      hosts_per_tor: int = 8, rate: str = "100Gbit", delay: str = "250ns",
                      uplink_rate: str | None = None, sequencer: bool = True, name: str = "onepipe-fattree",
                      prefix: str = "opt") -> dict[str, Any]:
    """A 3-tier fat tree as a topology document: the shape of 1Pipe's testbed (1Pipe: Scalable
    Total Order Communication in Data Center Networks, §7.1: 32 servers under 10 switches, 4 ToRs,
    4 spines and 2 cores, 100 Gbit/s), which is the default. ``pods`` pods, each of ``tors_per_pod``
    ToRs and ``aggs_per_pod`` aggregation switches, every ToR linked to every agg of its pod and
    every agg to each of the ``cores`` cores; ``hosts_per_tor`` hosts a ToR. Host to host that is 1
    switch under one ToR, 3 within a pod and 5 across pods: the paper's 1, 3 and 5 hops.

    Names: ``core1..``, ``agg1..`` and ``tor1..`` numbered pod after pod (pod 1 holds tor1, tor2,
    agg1, agg2 by default), hosts ``h1..hN`` ToR after ToR. The rest is :func:`fabric_topology`'s:
    one /16 (the ``t``-th ToR's host ``i`` is 10.0.t.i) so that host beacons reach their ToR as
    broadcasts, ``rate`` and ``delay`` on every link, ``uplink_rate`` on every switch-to-switch
    link when given (the paper's rate is the fastest of those: time scale 1), and the ``seq`` host
    (the sequencer's and the controller's) on tor1.

    Routes are the switches' static first hops (a breadth-first search, links in file order:
    :func:`.topology.first_hops`), so each hop lies on a shortest path to the destination host. In
    this fat tree no shortest path is a valley (1Pipe §3: up only, then down only, or the barrier an
    up port writes would not hold for a packet that came from above): in a valley X, B, Y (down
    from X to B, up again to Y) X links every switch Y can go on to (every agg of a pod links every
    ToR of the pod, every agg every core), so going from X straight there is two hops shorter.
    :func:`.topology.validate` checks the routes all the same. The link order only picks
    among equal-cost hops: each ToR's uplinks are listed agg by agg and each agg's core links core
    by core, so a ToR sends up through its pod's first agg and an agg through core1, one path per
    pair of hosts, as :func:`fabric_topology`'s first spine (no ECMP: the switch feature aggregates
    the barrier of the one port a frame takes)."""
    if min(pods, tors_per_pod, aggs_per_pod, cores, hosts_per_tor) < 1:
        raise ValueError("need at least one pod, ToR, agg, core and host per ToR")
    if pods * tors_per_pod > 250 or hosts_per_tor > 250:
        raise ValueError("at most 250 ToRs and 250 hosts a ToR (10.0.t.i addresses)")
    nodes: list[dict[str, Any]] = [{"name": f"core{c}", "kind": "switch"} for c in range(1, cores + 1)]
    nodes += [{"name": f"agg{a}", "kind": "switch"} for a in range(1, pods * aggs_per_pod + 1)]
    links: list[dict[str, Any]] = []

    def fabric_link(a: str, b: str) -> None:
        link: dict[str, Any] = {"name": f"{a}-{b}", "a": a, "b": b}
        if uplink_rate is not None:
            link["rate"] = uplink_rate
        links.append(link)

    n = 0
    for pod in range(pods):
        aggs = [f"agg{pod * aggs_per_pod + a}" for a in range(1, aggs_per_pod + 1)]
        for t in range(pod * tors_per_pod + 1, (pod + 1) * tors_per_pod + 1):
            tor = f"tor{t}"
            nodes.append({"name": tor, "kind": "switch"})
            for agg in aggs:
                fabric_link(tor, agg)
            for i in range(1, hosts_per_tor + 1):
                n += 1
                nodes.append({"name": f"h{n}", "kind": "host", "ip": f"10.0.{t}.{i}/16"})
                links.append({"name": f"h{n}-{tor}", "a": f"h{n}", "b": tor})
    for a in range(1, pods * aggs_per_pod + 1):
        for c in range(1, cores + 1):
            fabric_link(f"agg{a}", f"core{c}")
    return _fabric_document(nodes, links, sequencer=sequencer, name=name, prefix=prefix, rate=rate, delay=delay,
                            uplink_rate=uplink_rate)


def tor_of(topology: Topology, host: str) -> str:
    """The switch ``host`` hangs off (its first link's peer)."""
    links = topology.links_of(host)
    if not links:
        raise ScenarioError(f"host {host} has no link")
    return links[0].peer(host).node


def place(topology: Topology, procs: int, exclude: Sequence[str] = (),
          placement: str = "spread") -> list[tuple[str, str, int]]:
    """``[(process, host, udp port)]`` for ``p1..pP``; the k-th process of a host binds ``PORT + k``.

    ``placement`` (:data:`PLACEMENTS`): ``"spread"`` deals the processes to the hosts one ToR after
    another (the first host of each ToR, then the second of each...), so that even a few processes
    span the fabric. ``"pack"`` fills the hosts in order instead, the hosts of one ToR, then of the
    nearest next ToR (:func:`tors_nearest_first`: the rest of a pod before the next pod), one
    process a host while there are hosts left; with more processes than hosts, every host takes
    ``P / hosts`` of them as evenly as possible (the first ones one more), in consecutive blocks.
    That is 1Pipe's testbed placement (1Pipe: Scalable Total Order Communication in Data Center
    Networks, §7.1 and Fig. 9a: 1, 3 and 5 hops at <= 8, 16 and >= 32 processes, 16 processes a
    host at 512): on :func:`fat_tree_topology`'s 4 ToRs x 8 hosts, 8 processes sit under one ToR
    (1 switch between any two), 16 under the two ToRs of a pod (3), 32 and more on every host (5).
    Filling a host before the next would put 16 processes on one host, 0 hops apart."""
    if placement not in PLACEMENTS:
        raise ScenarioError(f"placement {placement!r} is not one of {', '.join(PLACEMENTS)}")
    if procs < 1:
        raise ScenarioError("procs must be at least 1")
    by_tor: dict[str, list[str]] = {}
    for node in topology.nodes:
        if node.kind is NodeKind.HOST and node.name not in exclude:
            by_tor.setdefault(tor_of(topology, node.name), []).append(node.name)
    columns = list(by_tor.values())
    if placement == "pack":
        hosts = [h for tor in tors_nearest_first(topology, list(by_tor)) for h in by_tor[tor]]
    else:
        hosts = [col[i] for i in range(max((len(c) for c in columns), default=0)) for col in columns if i < len(col)]
    if not hosts:
        raise ScenarioError(f"topology {topology.name} has no host for the processes")
    if -(-procs // len(hosts)) >= PORT_RANGE:
        raise ScenarioError(f"{procs} processes need more than {PORT_RANGE - 1} ports on a host "
                            f"({len(hosts)} hosts)")
    out = []
    if placement == "pack":
        n_hosts = min(procs, len(hosts))
        each, more = divmod(procs, n_hosts)
        for j, h in enumerate(hosts[:n_hosts]):
            for k in range(1, each + (j < more) + 1):
                out.append((f"p{len(out) + 1}", h, PORT + k))
        return out
    used: dict[str, int] = {}
    for i in range(procs):
        h = hosts[i % len(hosts)]
        used[h] = used.get(h, 0) + 1
        out.append((f"p{i + 1}", h, PORT + used[h]))
    return out


def _switch_distances(topology: Topology, start: str) -> dict[str, int]:
    """Links from ``start`` to every switch it reaches through switches only."""
    dist = {start: 0}
    todo = [start]
    for node in todo:  # (breadth first: the list grows behind the loop)
        for link in topology.links_of(node):
            peer = link.peer(node).node
            if peer not in dist and topology.node(peer).kind is NodeKind.SWITCH:
                dist[peer] = dist[node] + 1
                todo.append(peer)
    return dist


def tors_nearest_first(topology: Topology, tors: Sequence[str]) -> list[str]:
    """``tors`` from the first on, each next the one nearest (fewest switch-to-switch links) to any
    taken before it, ties in the given order: in a fat tree the ToRs of a pod before the next pod,
    however the file lists them (``placement="pack"``)."""
    if not tors:
        return []
    dist = {t: _switch_distances(topology, t) for t in tors}
    order, left = [tors[0]], list(tors[1:])
    near = {t: dist[tors[0]].get(t, math.inf) for t in left}
    while left:
        nxt = min(left, key=near.__getitem__)  # (the first of equals)
        left.remove(nxt)
        order.append(nxt)
        for t in left:
            near[t] = min(near[t], dist[nxt].get(t, math.inf))
    return order


def route_switches(topology: Topology, src: str, dst: str,
                   hops: dict[str, dict[str, str]] | None = None) -> list[str]:
    """The switches a frame from host ``src`` to host ``dst`` crosses along the switches' static
    routes (:func:`.topology.first_hops`; ``hops`` keeps them between calls); none from a host to
    itself (the host hands it over)."""
    if src == dst:
        return []
    hops = {} if hops is None else hops
    path: list[str] = []
    node = tor_of(topology, src)
    while topology.node(node).kind is NodeKind.SWITCH and len(path) <= len(topology.nodes):
        path.append(node)
        if node not in hops:
            hops[node] = op_topology.first_hops(topology, node)
        out = hops[node].get(dst)
        if out is None:
            raise ScenarioError(f"no route from {src} to {dst} at {node}")
        node = next(link for link, end in topology.ends_of(node) if end.ifname == out).peer(node).node
    return path


def max_switch_hops(topology: Topology, hosts: Sequence[str]) -> int:
    """The most switches between any two of ``hosts`` (:func:`route_switches`): 1Pipe's "hops"."""
    distinct = sorted(set(hosts))
    hops: dict[str, dict[str, str]] = {}
    return max((len(route_switches(topology, a, b, hops)) for a in distinct for b in distinct if a != b), default=0)


def draw_clocks(topology: Topology, seed: int, skew_ns: float, drift_ppm: float) -> dict[str, HostClock]:
    """Every host's clock, from the run's start: the topology's when ``skew_ns < 0``, else offsets
    uniform in ``[-2 skew, 2 skew]`` (mean ``|offset|`` = skew) and drifts uniform in
    ``[-drift, drift]``, drawn from ``seed``."""
    rng = random.Random(f"{seed}/clocks")
    out = {}
    for node in topology.nodes:
        if node.kind is NodeKind.SWITCH:
            continue
        if skew_ns < 0:
            c = host_clock(topology, node)
        else:
            off = round(rng.uniform(-2 * skew_ns, 2 * skew_ns)) if skew_ns else 0
            c = HostClock(off, rng.uniform(-drift_ppm, drift_ppm) if drift_ppm else 0.0)
        out[node.name] = HostClock(c.offset_ns + CLOCK_BASE_NS, c.drift_ppm).from_epoch(0)
    return out


def skew_summary(clocks: dict[str, HostClock], hosts: Sequence[str]) -> dict[str, Any]:
    """The offsets the processes' hosts run with: mean ``|offset|`` (the skew PTP reports), the
    mean pairwise difference, and the skew term a receiver actually waits for on average (a
    sender's offset over the slowest clock's: the barrier is the minimum over every process)."""
    offs = [clocks[h].offset_ns - CLOCK_BASE_NS for h in hosts]
    if not offs:
        return {}
    lo = min(offs)
    pairs = [abs(a - b) for i, a in enumerate(offs) for b in offs[i + 1:]]
    return {"offsets_ns": {h: clocks[h].offset_ns - CLOCK_BASE_NS for h in sorted(set(hosts))},
            "mean_abs_offset_ns": sum(abs(o) for o in offs) / len(offs),
            "mean_pairwise_ns": sum(pairs) / len(pairs) if pairs else 0.0,
            "max_spread_ns": max(offs) - lo, "mean_over_slowest_ns": sum(o - lo for o in offs) / len(offs)}


# ----------------------------------------------------------------------------- parameters
def baselines() -> Any:
    """The package :mod:`netstack.onepipe.baselines` when it is there and offers ``MODES`` and
    ``run_baseline`` (more total-order baselines, written separately), else None."""
    try:
        from . import baselines as mod
    except ModuleNotFoundError as exc:
        if exc.name not in (f"{__package__}.baselines", "baselines"):
            raise
        return None
    return mod if hasattr(mod, "MODES") and hasattr(mod, "run_baseline") else None


def all_modes() -> tuple[str, ...]:
    """:data:`MODES` and the baselines package's."""
    extra = baselines()
    return MODES + tuple(m for m in (extra.MODES if extra is not None else ()) if m not in MODES)


def resolve(ctx: Context) -> dict[str, Any]:
    """The run's parameters with every 0 replaced by the paper's value at the topology's scale.
    ``cpu`` (bool) turns the host CPU model on (module docstring); ``cpu_backlog_ns`` 0 becomes
    1 us at the topology's scale."""
    p = dict(ctx.params)
    scale = time_scale(ctx.topology)
    modes = all_modes()
    if p["mode"] not in modes:
        raise ScenarioError(f"scenario onepipe: mode {p['mode']!r} is not one of {', '.join(modes)}")
    for key in ("procs", "fanout", "size", "seq_queue"):
        if p[key] < 1:
            raise ScenarioError(f"scenario onepipe: {key} must be >= 1")
    if not 0 <= p["loss"] < 1:
        raise ScenarioError("scenario onepipe: loss must be in [0, 1)")
    if p["loss_at"] not in LOSS_AT:
        raise ScenarioError(f"scenario onepipe: loss_at {p['loss_at']!r} is not one of {', '.join(LOSS_AT)}")
    if p["placement"] not in PLACEMENTS:
        raise ScenarioError(f"scenario onepipe: placement {p['placement']!r} is not one of {', '.join(PLACEMENTS)}")
    if p["variant"] not in VARIANTS:
        raise ScenarioError(f"scenario onepipe: variant {p['variant']!r} is not one of {', '.join(VARIANTS)}")
    if p["variant"] != CHIP and p["mode"] not in ("onepipe", "reliable"):
        raise ScenarioError(f"scenario onepipe: variant {p['variant']} is where 1Pipe's switches aggregate barriers: "
                            f"mode {p['mode']} has none (variant=chip)")
    vd = p["variant_delay_ns"]
    if isinstance(vd, bool) or not isinstance(vd, int) or vd < 0:
        raise ScenarioError("scenario onepipe: variant_delay_ns must be a whole number of ns >= 0 (0: the default)")
    cm = p["ctl_msg_ns"]
    if isinstance(cm, bool) or not isinstance(cm, int) or cm < 0:
        raise ScenarioError("scenario onepipe: ctl_msg_ns must be a whole number of ns >= 0 (0: the controller's work "
                            "takes no time)")
    if cm and p["mode"] != "reliable":
        raise ScenarioError(f"scenario onepipe: ctl_msg_ns is the reliable controller's cost per datagram: mode "
                            f"{p['mode']} has no controller (mode=reliable)")
    if cm and not p["kill"]:
        raise ScenarioError("scenario onepipe: ctl_msg_ns charges the controller from the failure on: it needs one "
                            "(kill > 0)")
    if p["loss_at"] == "receivers" and p["mode"] not in ("onepipe", "reliable"):
        raise ScenarioError(f"scenario onepipe: loss_at=receivers drops in 1Pipe's receiving library: mode "
                            f"{p['mode']} has none (use loss_at=links)")
    if isinstance(p["bg_flows"], bool) or not isinstance(p["bg_flows"], int) or not 0 <= p["bg_flows"] <= MAX_FLOWS:
        raise ScenarioError(f"scenario onepipe: bg_flows must be a whole number of TCP flows per host, 0-{MAX_FLOWS}")
    if p["bg_flows"] and p["mode"] not in ("onepipe", "reliable"):
        raise ScenarioError(f"scenario onepipe: bg_flows runs beside 1Pipe (mode onepipe or reliable), not {p['mode']}")
    for key in ("rate", "t_beacon_ns", "switch_t_beacon_ns", "seq_service_ns", "warmup_ns", "drain_ns", "drift_ppm",
                "cpu_backlog_ns", "nic_ns"):
        if p[key] < 0:
            raise ScenarioError(f"scenario onepipe: {key} must be >= 0 (0: the default)")
    p["t_beacon_ns"] = int(p["t_beacon_ns"] or round(PAPER_T_BEACON_NS * scale))
    p["switch_t_beacon_ns"] = int(p["switch_t_beacon_ns"] or p["t_beacon_ns"])
    p["rate"] = float(p["rate"] or PAPER_RATE / scale)
    p["seq_service_ns"] = int(p["seq_service_ns"] or round(PAPER_SEQ_SERVICE_NS * scale))
    p["duration_ns"] = int(ctx.duration_ns or round(PAPER_DURATION_NS * scale))
    p["ack_timeout_ns"] = 100 * p["t_beacon_ns"]
    p["cpu"] = bool(p["cpu"])
    p["cpu_backlog_ns"] = int(p["cpu_backlog_ns"] or round(PAPER_CPU_BACKLOG_NS * scale))
    p["nic_ns"] = int(p["nic_ns"])  # 0 is none (not a paper value: the paper states no host stack latency)
    p["time_scale"] = scale
    return p


def settle_times(p: dict[str, Any], clocks: dict[str, HostClock]) -> None:
    """``warmup_ns`` (every process has joined: its first barrier came, design topic §4) and
    ``drain_ns`` (the last messages are delivered or their send-fail has fired), when left at 0:
    both allow for the spread of the clocks, which the barrier waits for."""
    offs = [c.offset_ns for c in clocks.values()]
    spread = max(offs) - min(offs) if offs else 0
    t = p["t_beacon_ns"]
    p["warmup_ns"] = int(p["warmup_ns"] or 10 * t + 2 * spread)
    p["drain_ns"] = int(p["drain_ns"] or p["ack_timeout_ns"] + 20 * t + spread)


def endpoint_params(p: dict[str, Any]) -> OnePipeParams:
    return OnePipeParams(t_beacon_ns=p["t_beacon_ns"], ack_timeout_ns=p["ack_timeout_ns"],
                         prompt_commit=bool(p["prompt_commit"]))


def switch_params(p: dict[str, Any]) -> OnePipeParams:
    """The switches' parameters: their own T_beacon, and an input timeout of at least 10 of the
    hosts' beacon intervals (design topic §6) whatever the switches' interval."""
    t = p["switch_t_beacon_ns"]
    return OnePipeParams(t_beacon_ns=t, timeout_beacons=max(10, -(-10 * p["t_beacon_ns"] // t)),
                         ack_timeout_ns=max(t, p["ack_timeout_ns"]), prompt_beacons=bool(p["prompt_beacons"]))


def impair_fabric(net: Any, loss: float, seed: int) -> list[str]:
    """``loss`` on every switch-to-switch port, both directions (the sending switch's own seeded
    impairment, as ``backend = "switch"`` links have); the ports, ``switch/port``."""
    if not loss:
        return []
    out = []
    for link in net.topology.links:
        if link.a.node in net.switches and link.b.node in net.switches:
            for end in (link.a, link.b):
                net.switch(end.node).set_impairment(end.ifname, ImpairmentConfig(loss=loss, seed=seed), net.now)
                net.service(end.node)
                out.append(f"{end.node}/{end.ifname}")
    return out


def seq_host_of(topology: Topology, p: dict[str, Any]) -> str | None:
    """The sequencer's host: ``seq_host``, else a host named ``seq``; None if neither exists."""
    names = {n.name for n in topology.nodes if n.kind is NodeKind.HOST}
    if p["seq_host"]:
        if p["seq_host"] not in names:
            raise ScenarioError(f"scenario onepipe: no host {p['seq_host']!r} for the sequencer")
        return str(p["seq_host"])
    return SEQ_HOST if SEQ_HOST in names else None


# ---------------------------------------------------------------------------- scenario
def onepipe_sim(net: Any, ctx: Context) -> dict[str, Any]:
    p = resolve(ctx)
    for key, default in LATE_PARAMS.items():
        if ctx.params.get(key) == default:
            del ctx.params[key]  # the run's document records what it did before the parameter existed
    topo = ctx.topology
    seq_host = seq_host_of(topo, p)
    extra = baselines()
    if extra is None or p["mode"] not in extra.MODES or (p["mode"] == "sequencer" and not p["cpu"]):
        extra = None  # without the CPU model the sequencer stays netstack.onepipe.sequencer's, to the event
    if p["mode"] in ("sequencer", "hostseq", "reliable") and seq_host is None:
        raise ScenarioError(f"scenario onepipe: mode {p['mode']} needs a host for the sequencer or the controller "
                            f"(seq_host, or a host named {SEQ_HOST!r})")
    placed = place(topo, p["procs"], exclude=[seq_host] if seq_host else [], placement=p["placement"])
    for host in net.hosts.values():  # every host's stack, the sequencer's and the controller's too
        host.stack_ns = p["nic_ns"]
    clocks = draw_clocks(topo, ctx.seed, p["skew_ns"], p["drift_ppm"])
    settle_times(p, clocks)
    impaired = impair_fabric(net, p["loss"] if p["loss_at"] == "links" else 0.0, ctx.seed)
    start = p["warmup_ns"]
    stop = start + p["duration_ns"]
    fanout = min(p["fanout"], max(1, p["procs"] - 1))
    p["scatter_rate"] = p["rate"] * p["fanout"] / fanout  # the message rate stays rate x fanout
    if extra is not None:  # the baselines package's modes, and the sequencer with the CPU model
        costs = model_costs().baseline_costs() if p["cpu"] else None
        out = _sequencer_result(extra.run_baseline(net, p, placed, seq_host, ctx.seed, start, stop,
                                                   window_of(p, start, stop), costs))
    elif p["mode"] == "sequencer":
        assert seq_host is not None
        out = _sequencer_result(run_sequencer(net, p, placed, seq_host, ctx.seed, start, stop,
                                              window_of(p, start, stop)))
        if p["cpu"]:
            out["cpu"] = {"model": "none: this sequencer baseline's processes have no core model "
                                   "(netstack/onepipe/sequencer.py; its sequencer is its own one-core model)"}
    elif p["mode"] not in ("onepipe", "reliable"):
        raise ScenarioError(f"scenario onepipe: mode {p['mode']!r} needs the package netstack.onepipe.baselines")
    else:
        out = _run_onepipe(net, ctx, p, placed, clocks, start, stop)
    hosts = [h for _, h, _ in placed]
    out.update(mode=p["mode"], procs=p["procs"], hosts_used=len(set(hosts)), rate_per_proc=p["rate"],
               fanout=fanout, scatter_rate=p["scatter_rate"], size=p["size"], t_beacon_ns=p["t_beacon_ns"],
               switch_t_beacon_ns=p["switch_t_beacon_ns"], loss=p["loss"], impaired_ports=impaired,
               duration_ns=p["duration_ns"], warmup_ns=p["warmup_ns"], drain_ns=p["drain_ns"],
               skew=skew_summary(clocks, hosts), time_scale=p["time_scale"],
               offered_per_proc_per_s=out["sent"] / p["procs"] / (p["duration_ns"] / 1e9))
    if p["loss_at"] != "links":  # recorded where it is not the default, so that older runs' documents stay as they were
        out["loss_at"] = p["loss_at"]
    if p["placement"] != "spread":  # (likewise) with the most switches between two processes: 1Pipe's hops
        out.update(placement=p["placement"], max_switch_hops=max_switch_hops(topo, hosts))
    if p["nic_ns"]:
        out["nic_ns"] = p["nic_ns"]
    a, b = window_of(p, start, stop)
    out["throughput_window_ns"] = [a - start, b - start]
    out["delivered_per_proc_per_s"] = out.pop("in_window") / p["procs"] / ((b - a) / 1e9)
    return out


def window_of(p: dict[str, Any], start: int, stop: int) -> tuple[int, int]:
    """The run's throughput window: :func:`throughput_window`; with the CPU model it starts at least
    ``PAPER_CPU_FILL_NS`` (at the topology's scale) into the sending period, when saturated cores
    deliver in steady state (reliable's latency there is ~10 us; in the first microseconds a core
    only sends, its peers' messages not yet arrived)."""
    a, b = throughput_window(start, stop)
    if p.get("cpu"):
        fill = start + round(PAPER_CPU_FILL_NS * p["time_scale"])
        if fill > a and fill < b - (b - start) // 5:
            a = fill
    return a, b


def throughput_window(start: int, stop: int) -> tuple[int, int]:
    """Deliveries in the last 80 % of the sending period make the delivered rate: the first 20 %
    lets the pipeline fill (a delivery trails its send by the latency), and what is delivered
    after the senders stop (the drain) would hide a saturated sequencer's backlog."""
    return start + (stop - start) // 5, stop


def _run_onepipe(net: Any, ctx: Context, p: dict[str, Any], placed: list[tuple[str, str, int]],
                 clocks: dict[str, HostClock], start: int, stop: int) -> dict[str, Any]:
    topo = ctx.topology
    try:
        directions = op_topology.validate(topo)
    except TopologyError as exc:
        raise ScenarioError(f"scenario onepipe: 1Pipe cannot run on {topo.name}: {exc}") from None
    sw_params = switch_params(p)
    bip = op_topology.beacon_ip(topo)
    run = OnePipeRun(net, bool(p["log_dir"]), window_of(p, start, stop),
                     model_costs() if p["cpu"] else None, p["cpu_backlog_ns"])
    if p["loss_at"] == "receivers" and p["loss"]:
        run.rx_loss, run.rx_seed = float(p["loss"]), ctx.seed  # every process's library drops (simproc.RxLoss)
    run.variant = p["variant"]  # (its processes take barriers from beacons only unless chip)
    delays = {name: p["variant_delay_ns"] or variant_delay(p["variant"], topo, name, nic_ns=p.get("nic_ns", 0),
                                                           scale=p["time_scale"]) for name in net.switches}
    cls: type[OnePipeProcess] = OnePipeProcess
    ctl = None
    if p["mode"] == "reliable":
        ctl = rscenario.setup(net, run, p, str(seq_host_of(topo, p)))
        cls = rscenario.ReliableProcess
    for name, sn in net.switches.items():
        feature.enable(sn.switch, directions[name], sw_params, net.now, beacon_ip=bip, controller=ctl is not None,
                       on_report=None if ctl is None else ctl.reporter(name), variant=p["variant"],
                       variant_delay_ns=delays[name])
        net.service(name)
    params = endpoint_params(p)
    procs = []
    for i, (name, host, port) in enumerate(placed):
        proc = cls(run, net.host(host), i, name, port, clocks[host], params)
        run.by_addr[proc.addr] = proc
        procs.append(proc)
    if ctl is not None:
        rscenario.schedule_kills(run, procs, p, start, stop)
    for proc in procs:
        peers = [q for q in procs if q is not proc]
        proc.start(peers, p["scatter_rate"], p["fanout"], p["size"], start, stop,
                   random.Random(f"{ctx.seed}/{proc.name}"))
    meter = CpuMeter(net.loop, procs, window_of(p, start, stop)) if run.costs is not None else None
    bg = None
    if p["bg_flows"]:
        hosts = sorted({h for _, h, _ in placed})
        bg = Background(net, hosts, {h: tor_of(topo, h) for h in hosts}, p["bg_flows"], ctx.seed)
        bg.start(0, stop)  # (from the start: the flows are at their rate once the processes scatter)
    net.run(stop + p["drain_ns"])
    out = _onepipe_result(net, run, procs, p)
    if bg is not None:
        out["background"] = bg.result()
    if run.rx_loss:
        out["receiver_loss"] = rx_loss_summary(procs)
    if meter is not None:
        assert run.costs is not None
        out["cpu"] = meter.result(run.costs, p)
    if ctl is not None:
        out["recovery"] = run.recovery.result()
        out["controller"] = ctl.ctl.counters()
        if ctl.counters_at_failure is not None:  # (kill > 0: what the recovery added, and the core's work)
            out["controller"]["after_failure"] = ctl.recovery_counters()
    if p["variant"] != CHIP:  # (recorded where it is not the default: older runs' documents stay as they were)
        out["variant"] = {"name": p["variant"], "delay_ns": {k: delays[k] for k in sorted(delays)}}
    return out


class CpuMeter:
    """Each process core's work done inside the throughput window (snapshots at its two ends)."""

    def __init__(self, loop: Any, procs: list[OnePipeProcess], window: tuple[int, int]) -> None:
        self.procs = procs
        self.window = window
        self.at: list[list[int]] = []
        self.backlog_at_stop: list[int] = []
        for t in window:
            loop.call_at(t, self._snap)

    def _snap(self) -> None:
        self.at.append([q.cpu.done_ns() if q.cpu is not None else 0 for q in self.procs])
        if len(self.at) == 2:
            self.backlog_at_stop = [q.cpu.backlog_ns() if q.cpu is not None else 0 for q in self.procs]

    def result(self, costs: CpuCosts, p: dict[str, Any]) -> dict[str, Any]:
        a, b = self.window
        span = b - a
        util = ([(y - x) / span for x, y in zip(self.at[0], self.at[1], strict=True)]
                if len(self.at) == 2 and span > 0 else [])
        cores = [q.cpu for q in self.procs if q.cpu is not None]
        reliable = p["mode"] == "reliable"
        return {
            "model": "one core per process, FIFO (netstack.sim.cpu.HostCpu); costs measured on our engines, "
                     "scaled to the paper's hardware (netstack.onepipe.cpucost)",
            "costs_ns": asdict(costs.reliable if reliable else costs.be), "factor": costs.factor,
            "capacity_per_proc_per_s": costs.reliable_capacity if reliable else costs.be_capacity,
            "source": costs.source, "backlog_limit_ns": p["cpu_backlog_ns"],
            "utilisation": {"mean": sum(util) / len(util) if util else None, "min": min(util, default=None),
                            "max": max(util, default=None)},
            "per_process": {q.name: round(u, 4) for q, u in zip(self.procs, util, strict=False)},
            "busy_ns": sum(c.busy_ns for c in cores), "jobs": sum(c.jobs for c in cores),
            "peak_backlog_ns": max((c.peak_backlog_ns for c in cores), default=0),
            "backlog_at_stop_ns": {"mean": sum(self.backlog_at_stop) / len(self.backlog_at_stop)
                                   if self.backlog_at_stop else None, "max": max(self.backlog_at_stop, default=None)},
        }


def _onepipe_result(net: Any, run: OnePipeRun, procs: list[OnePipeProcess], p: dict[str, Any]) -> dict[str, Any]:
    m = run.meter
    total: dict[str, int] = {}
    for proc in procs:
        for k, v in proc.ep.counters().items():
            if isinstance(v, int) and not isinstance(v, bool) and not k.endswith("barrier"):
                total[k] = total.get(k, 0) + v
    sw: dict[str, int] = {}
    for sn in net.switches.values():
        for f in feature.features(sn.switch).values():
            for k, v in vars_of(f.c).items():
                sw[k] = sw.get(k, 0) + v
    sent = sum(q.sent for q in procs)
    delivered = sum(q.delivered for q in procs)
    failed = sum(q.failed for q in procs)
    # a message reported unknown is delivered when its receiver delivered it (the live count's
    # rule, netstack/onepipe/accounting.py), else send_unknown
    unknown_delivered = sum((q.idx, seq, run.by_addr[dst].idx) in m.got
                            for q in procs for seq, dst in q.unknown if dst in run.by_addr)
    unknown = sum(len(q.unknown) for q in procs) - unknown_delivered
    in_flight = sent - delivered - failed - unknown
    if p["log_dir"]:
        write_logs(Path(p["log_dir"]), m.logs or {}, [q.name for q in procs])
    lat, unord = latency_stats(m.latency), latency_stats(m.unordered)
    return {
        "sent": sent, "scatterings": sum(q.scatterings for q in procs), "refused": sum(q.refused for q in procs),
        "in_window": m.in_window,
        "delivered": delivered, "send_failed": failed, "send_unknown": unknown, "unknown_delivered": unknown_delivered,
        # in virtual time every message's fate is known: what is neither is still in flight at the end
        "in_flight_at_end": in_flight, "unaccounted": in_flight,
        "latency_ns": lat, "unordered_ns": unord, "barrier_wait_ns": latency_stats(m.wait),
        "overhead_ns": (lat["mean"] - unord["mean"]) if lat["n"] and unord["n"] else None,
        "order": {"ok": m.violations == 0, "violations": m.violations, "first": m.first},
        "late_dropped": total.get("late_dropped", 0), "messages_lost": total.get("messages_lost", 0),
        "beacons": {"hosts": total.get("beacons_sent", 0), "switches": sw.get("beacons_tx", 0)},
        "endpoints": total, "switches": sw,
    }


def _sequencer_result(raw: dict[str, Any]) -> dict[str, Any]:
    """The sequencer baseline's raw results in the fields a 1Pipe run reports."""
    lat = latency_stats(raw.pop("latency"))
    violations = raw.pop("violations")
    return {**raw, "send_failed": 0, "send_unknown": 0,
            "unaccounted": raw["sent"] - raw["delivered"] - raw["lost"] - raw["seq_dropped"],
            "latency_ns": lat, "unordered_ns": latency_stats([]), "barrier_wait_ns": latency_stats([]),
            "overhead_ns": None, "order": {"ok": violations == 0, "violations": violations, "first": None}}


def vars_of(counters: Any) -> dict[str, int]:
    return {k: getattr(counters, k) for k in counters.__dataclass_fields__}


def write_logs(out: Path, logs: dict[str, list[str]], names: Sequence[str]) -> None:
    """``OUT/<process>.jsonl`` for every process (empty for one that delivered nothing), in the
    format of :mod:`.check`."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.jsonl"):
        old.unlink()
    for name in names:
        (out / f"{name}.jsonl").write_text("".join(logs.get(name, [])))


SCENARIOS = [
    Scenario("onepipe", "1Pipe (best effort): P processes scatter to random destinations through the switches' "
             "barrier aggregation (or, mode=sequencer, through a central sequencer): delivered msgs/s per "
             "process, latency vs the unordered baseline, barrier wait, losses, beacons, total-order check",
             PARAMS, run_sim=onepipe_sim),
    KV_SCENARIO,  # the transactional key-value store on 1Pipe beside 2PC (issue 32; docs/onepipe-kv.md)
]

__all__ = ["CLOCK_BASE_NS", "LOSS_AT", "MODES", "PAPER_CPU_FILL_NS", "PARAMS", "SCENARIOS", "CpuMeter",
           "OnePipeProcess", "OnePipeRun", "all_modes", "baselines", "draw_clocks", "fabric_topology", "latency_stats",
           "onepipe_sim", "place", "resolve", "skew_summary", "tor_of", "window_of",
           "PLACEMENTS", "fat_tree_topology", "max_switch_hops", "route_switches", "tors_nearest_first"]
