"""The ``onepipe-kv`` scenario: the transactional key-value store in virtual time, on 1Pipe or on
the two-phase-commit baseline, with the same hosts, switches and workload (issue 32; 1Pipe §7.3).

``shards x replicas`` shard processes and ``procs`` clients are dealt to the hosts one ToR after
another (shards first, so the replicas of a shard sit on different hosts); with ``mode=onepipe``
every switch runs 1Pipe (reliable 1Pipe's controller on the host ``seq``, as ``mode=reliable`` of
the ``onepipe`` scenario), with ``mode=2pc`` the switches only forward. Each client runs
transactions back to back (closed loop, YCSB+T: :mod:`.workload`) from ``warmup`` to ``stop``.
``loss`` drops that fraction of the frames on every switch-to-switch port; ``kill`` crashes one
process at ``kill_at_ns`` (default mid-run): ``client`` (the last client) or ``replica`` (shard 0's
last replica, ``replicas >= 2``).

Reported: transactions done, **throughput** (per client, in the last 80 % of the sending
period), **latency** (invoke to response) per class RO / WO / WR, 2PC's aborts and attempts, the
replicas' agreement (each replica's applied sequence a prefix of the longest), and the verdict of
the strict-serializability **check** (:mod:`.checker`) on the whole history (transactions still
pending at the end included, with the stamp the shards gave them if they ran).

Time-valued parameters left at 0 take the paper's value times the topology's time scale (1 at
100 Gbit/s): T_beacon 3 us (1Pipe §7), a 200 us run. This module does not import
``netstack.onepipe.scenarios`` (that module lists this scenario: no import cycle), so it has its
own small placement and fabric helpers.
"""

from __future__ import annotations

import random
from typing import Any

from ...sim.scenario import Context, Scenario, ScenarioError, time_scale
from ...switch import ImpairmentConfig
from ...topo.model import NodeKind, Topology, TopologyError
from .. import feature, rscenario
from .. import topology as op_topology
from ..clock import HostClock
from ..endpoint import sender_key
from ..params import PORT, PORT_RANGE, OnePipeParams
from ..simproc import OnePipeRun, model_costs
from .checker import Txn, check
from .client import KvClient
from .shard import KvShard
from .simkv import KvBestEffortProcess, KvReliableProcess, KvRun, TwoPCProcess
from .twopc import TwoPCClient, TwoPCShard
from .wire import SIDE_OFFSET
from .workload import DISTS, MIXES, Workload

MODES = ("onepipe", "2pc")
KILLS = ("", "client", "replica")
CLOCK_BASE_NS = 1_000_000_000
PAPER_T_BEACON_NS = 3_000
PAPER_DURATION_NS = 200_000
#: the controller's host (reliable 1Pipe), as the onepipe scenario's
CTL_HOST = "seq"

PARAMS: dict[str, Any] = {
    "mode": "onepipe", "procs": 4, "shards": 2, "replicas": 1, "reliable": True,
    "contention": 0.0, "hot": 4, "keys": 10_000, "dist": "uniform", "mix": "mixed", "writes": 0.5, "ops": 2,
    "loss": 0.0, "kill": "", "kill_at_ns": 0, "skew_ns": 0.0, "t_beacon_ns": 0, "rto_ns": 0, "backoff_ns": 0,
    "warmup_ns": 0, "drain_ns": 0, "store_delay_ns": 0, "check": True,
    # transactions in flight per client; the host CPU model (netstack.onepipe.cpucost, issue 32)
    "window": 1, "cpu": False,
}


def resolve(ctx: Context) -> dict[str, Any]:
    p = dict(ctx.params)
    if p["mode"] not in MODES:
        raise ScenarioError(f"scenario onepipe-kv: mode {p['mode']!r} is not one of {', '.join(MODES)}")
    if p["kill"] not in KILLS:
        raise ScenarioError(f"scenario onepipe-kv: kill {p['kill']!r}: one of client, replica (or empty)")
    if p["kill"] == "replica" and (p["mode"] == "2pc" or p["replicas"] < 2):
        raise ScenarioError("scenario onepipe-kv: kill=replica needs mode=onepipe and replicas >= 2")
    if p["kill"] and p["mode"] == "onepipe" and not p["reliable"]:
        raise ScenarioError("scenario onepipe-kv: a kill needs reliable 1Pipe (reliable=true)")
    for key in ("procs", "shards", "replicas", "ops", "hot", "keys", "window"):
        if p[key] < 1:
            raise ScenarioError(f"scenario onepipe-kv: {key} must be >= 1")
    if not 0 <= p["loss"] < 1 or not 0 <= p["contention"] <= 1:
        raise ScenarioError("scenario onepipe-kv: loss in [0, 1), contention in [0, 1]")
    if p["mix"] not in MIXES or p["dist"] not in DISTS:
        raise ScenarioError(f"scenario onepipe-kv: mix in {MIXES}, dist in {DISTS}")
    scale = time_scale(ctx.topology)
    p["time_scale"] = scale
    p["t_beacon_ns"] = int(p["t_beacon_ns"] or round(PAPER_T_BEACON_NS * scale))
    p["rto_ns"] = int(p["rto_ns"] or 100 * p["t_beacon_ns"])
    p["backoff_ns"] = int(p["backoff_ns"] or p["t_beacon_ns"])
    p["duration_ns"] = int(ctx.duration_ns or round(PAPER_DURATION_NS * scale))
    spread = 4 * p["skew_ns"]
    p["warmup_ns"] = int(p["warmup_ns"] or 10 * p["t_beacon_ns"] + 2 * spread)
    p["drain_ns"] = int(p["drain_ns"] or 3 * p["rto_ns"] + 20 * p["t_beacon_ns"] + spread)
    if p["mode"] == "2pc":
        p["replicas"] = 1  # like the paper's FaRM baseline: neither replicated nor durable
    return p


def hosts_by_tor(topology: Topology, exclude: str) -> list[str]:
    """Every host but ``exclude``, the first host of each ToR, then the second of each..."""
    by_tor: dict[str, list[str]] = {}
    for node in topology.nodes:
        if node.kind is NodeKind.HOST and node.name != exclude:
            links = topology.links_of(node.name)
            if links:
                by_tor.setdefault(links[0].peer(node.name).node, []).append(node.name)
    cols = list(by_tor.values())
    return [c[i] for i in range(max((len(c) for c in cols), default=0)) for c in cols if i < len(c)]


def place(topology: Topology, n: int, exclude: str) -> list[tuple[str, int]]:
    """``[(host, 1Pipe port)]`` for ``n`` processes, dealt round robin over :func:`hosts_by_tor`."""
    hosts = hosts_by_tor(topology, exclude)
    if not hosts:
        raise ScenarioError(f"topology {topology.name} has no host for the processes")
    if -(-n // len(hosts)) >= PORT_RANGE:
        raise ScenarioError(f"{n} processes need more than {PORT_RANGE - 1} ports a host")
    used: dict[str, int] = {}
    out = []
    for i in range(n):
        h = hosts[i % len(hosts)]
        used[h] = used.get(h, 0) + 1
        out.append((h, PORT + used[h]))
    return out


def clocks_for(topology: Topology, seed: int, skew_ns: float) -> dict[str, HostClock]:
    """Each host's clock from the run's start: offsets uniform in [-2 skew, 2 skew]."""
    rng = random.Random(f"{seed}/kv-clocks")
    return {n.name: HostClock(CLOCK_BASE_NS + (round(rng.uniform(-2 * skew_ns, 2 * skew_ns)) if skew_ns else 0),
                              0.0).from_epoch(0)
            for n in topology.nodes if n.kind is not NodeKind.SWITCH}


def impair(net: Any, loss: float, seed: int) -> int:
    """``loss`` on every switch-to-switch port, both ways; how many ports."""
    n = 0
    for link in net.topology.links if loss else ():
        if link.a.node in net.switches and link.b.node in net.switches:
            for end in (link.a, link.b):
                net.switch(end.node).set_impairment(end.ifname, ImpairmentConfig(loss=loss, seed=seed), net.now)
                net.service(end.node)
                n += 1
    return n


def _enable_onepipe(net: Any, p: dict[str, Any], run: OnePipeRun, ctx: Context) -> Any:
    """1Pipe in every switch (and reliable 1Pipe's controller); the controller shell or None."""
    topo = ctx.topology
    try:
        directions = op_topology.validate(topo)
    except TopologyError as exc:
        raise ScenarioError(f"scenario onepipe-kv: 1Pipe cannot run on {topo.name}: {exc}") from None
    ctl = None
    if p["reliable"]:
        if CTL_HOST not in {n.name for n in topo.nodes}:
            raise ScenarioError(f"scenario onepipe-kv: reliable 1Pipe needs a host {CTL_HOST!r} for its controller")
        ctl = rscenario.setup(net, run, p, CTL_HOST)
    t = p["t_beacon_ns"]
    sw = OnePipeParams(t_beacon_ns=t, timeout_beacons=10, ack_timeout_ns=100 * t)
    for name, sn in net.switches.items():
        feature.enable(sn.switch, directions[name], sw, net.now, beacon_ip=op_topology.beacon_ip(topo),
                       controller=ctl is not None, on_report=None if ctl is None else ctl.on_report)
        net.service(name)
    return ctl


def _build_onepipe(net: Any, p: dict[str, Any], kv: KvRun, ctx: Context) -> tuple[list[Any], list[Any], Any]:
    run = OnePipeRun(net, False, (kv.start, kv.stop), costs=model_costs() if p["cpu"] else None)
    ctl = _enable_onepipe(net, p, run, ctx)
    cls = KvReliableProcess if p["reliable"] else KvBestEffortProcess
    nshard = p["shards"] * p["replicas"]
    placed = place(ctx.topology, nshard + p["procs"], CTL_HOST)
    clocks = clocks_for(ctx.topology, ctx.seed, p["skew_ns"])
    params = OnePipeParams(t_beacon_ns=p["t_beacon_ns"], ack_timeout_ns=100 * p["t_beacon_ns"])
    procs: list[Any] = []
    for i, (host, port) in enumerate(placed):
        proc = cls(run, net.host(host), i, f"p{i + 1}", port, clocks[host], params)
        run.by_addr[proc.addr] = proc
        procs.append(proc)
    shards, clients = procs[:nshard], procs[nshard:]
    replicas = [[shards[s * p["replicas"] + r].addr for r in range(p["replicas"])] for s in range(p["shards"])]
    for i, proc in enumerate(shards):
        proc.attach(kv, proc.host, proc.port, shard=KvShard(i // p["replicas"], i % p["replicas"]))
    for i, proc in enumerate(clients):
        proc.attach(kv, proc.host, proc.port, client=KvClient(i + 1, replicas, query_timeout_ns=p["rto_ns"]))
    return shards, clients, ctl


def _build_2pc(net: Any, p: dict[str, Any], kv: KvRun, ctx: Context) -> tuple[list[Any], list[Any]]:
    placed = place(ctx.topology, p["shards"] + p["procs"], CTL_HOST)
    shards = [TwoPCProcess(kv, net.host(h), port + SIDE_OFFSET, f"s{i}", shard=TwoPCShard(i))
              for i, (h, port) in enumerate(placed[:p["shards"]])]
    addrs = [s.addr for s in shards]
    # a client process runs ``window`` coordinators, one transaction each (indices unique in the run)
    clients = [TwoPCProcess(kv, net.host(h), port + SIDE_OFFSET, f"c{i + 1}",
                            clients=[TwoPCClient((i + 1) * 1000 + w, addrs, rto_ns=p["rto_ns"],
                                                 backoff_ns=p["backoff_ns"],
                                                 rng=random.Random(f"{ctx.seed}/2pc/{i}/{w}"))
                                     for w in range(p["window"])])
               for i, (h, port) in enumerate(placed[p["shards"]:])]
    return shards, clients


def _schedule_kill(net: Any, p: dict[str, Any], shards: list[Any], clients: list[Any], run: Any) -> Any:
    """The victim (None: no kill); with reliable 1Pipe the recovery record follows it."""
    if not p["kill"]:
        return None
    victim = clients[-1] if p["kill"] == "client" else shards[p["replicas"] - 1]
    at = int(p["kill_at_ns"]) or (p["warmup_ns"] + p["warmup_ns"] + p["duration_ns"]) // 2
    if run is not None:  # reliable 1Pipe: the onepipe scenario's recovery record (detect, record, resume)
        others = [q for q in shards + clients if q is not victim]
        rscenario.schedule_kills(run, [*others, victim], {"kill": 1, "kill_at_ns": at}, 0, 0)
    else:
        net.loop.call_at(at, victim.crash)
    return victim


def kv_sim(net: Any, ctx: Context) -> dict[str, Any]:
    p = resolve(ctx)
    wl = Workload(keys=p["keys"], shards=p["shards"], ops=p["ops"], contention=p["contention"], hot=p["hot"],
                  dist=p["dist"], mix=p["mix"], writes=p["writes"])
    start = p["warmup_ns"]
    stop = start + p["duration_ns"]
    kv = KvRun(wl, start, stop, ctx.seed, p["window"], model_costs().baseline_costs() if p["cpu"] else None)
    ports = impair(net, p["loss"], ctx.seed)
    ctl = None
    if p["mode"] == "onepipe":
        shards, clients, ctl = _build_onepipe(net, p, kv, ctx)
        run = shards[0].run if ctl is not None else None
    else:
        shards, clients = _build_2pc(net, p, kv, ctx)
        run = None
    victim = _schedule_kill(net, p, shards, clients, run)
    for c in clients:
        for _ in range(p["window"]):
            net.loop.call_at(start, c.begin_next)
    net.run(stop + p["drain_ns"])
    out = result(p, kv, shards, clients, victim)
    out["impaired_ports"] = ports
    if ctl is not None:
        out["recovery"] = run.recovery.result() if victim is not None and run is not None else None
        out["controller"] = ctl.ctl.counters()
    return out


def pending_history(p: dict[str, Any], shards: list[Any], clients: list[Any]) -> list[Txn]:
    """The transactions clients began and never saw end, with the stamp the store gave them
    if they ran (1Pipe: the ts a shard applied them at; 2PC: a commit decision)."""
    out = []
    if p["mode"] == "onepipe":
        ran = {uid: (ts, sender_key(src)) for s in shards for ts, src, uid in s.shard.log}
        for c in clients:
            for uid, ops, invoke in c.pending_txns():
                out.append(Txn(uid, ops, (), invoke, None, ran.get(uid)))
    else:
        for c in clients:
            for eng in c.clients:
                a = eng.current
                if eng.busy and a is not None:
                    out.append(Txn(a.uid, eng.ops, (), eng.begun_ns, None, a.decided_ns if a.commit else None))
    return out


def _replicas_agree(p: dict[str, Any], shards: list[Any]) -> bool:
    if p["mode"] != "onepipe":
        return True
    for s in range(p["shards"]):
        logs = sorted((shards[s * p["replicas"] + r].shard.log for r in range(p["replicas"])), key=len)
        if any(log != logs[-1][:len(log)] for log in logs):
            return False
    return True


def latency_stats(values: list[int]) -> dict[str, Any]:
    """``{n, mean, p50, p99, max}`` of ``values`` (ns), nearest-rank percentiles."""
    if not values:
        return {"n": 0, "mean": None, "p50": None, "p99": None, "max": None}
    v = sorted(values)
    n = len(v)
    return {"n": n, "mean": sum(v) / n, "p50": v[max(0, -(-n // 2) - 1)], "p99": v[max(0, -(-99 * n // 100) - 1)],
            "max": v[-1]}


def _cpu(p: dict[str, Any], procs: list[Any]) -> dict[str, Any] | None:
    """The CPU model's summary: the costs, and the busiest core's work over the sending period
    (about its utilisation then: a saturated core is near 1)."""
    if not p["cpu"]:
        return None
    busy = [q.cpu.busy_ns for q in procs if q.cpu is not None]
    return {"costs": model_costs().summary(), "side_costs_ns": model_costs().baseline_costs(),
            "busiest_core_ns": max(busy, default=0), "busiest_core_share": max(busy, default=0) / p["duration_ns"]}


def result(p: dict[str, Any], kv: KvRun, shards: list[Any], clients: list[Any], victim: Any) -> dict[str, Any]:
    start, stop = kv.start, kv.stop
    a = start + (stop - start) // 5
    in_window = [d for d in kv.done if a <= d[0] < stop]
    history = kv.history + pending_history(p, shards, clients)
    verdict = check(history) if p["check"] else None
    cl = [e.counters() for c in clients for e in ([c.client] if p["mode"] == "onepipe" else c.clients)]
    sh = [s.shard.counters() for s in shards]
    total = {k: sum(x[k] for x in cl) for k in cl[0] if isinstance(cl[0][k], int)} if cl else {}
    by_class = {k: latency_stats([d[2] for d in in_window if d[1] == k]) for k in ("RO", "WO", "WR")}
    live = len(clients) - (victim in clients)
    return {
        "mode": p["mode"], "procs": p["procs"], "shards": p["shards"], "replicas": p["replicas"],
        "reliable": bool(p["reliable"]) if p["mode"] == "onepipe" else None,
        "contention": p["contention"], "mix": p["mix"], "writes": p["writes"] if p["mix"] == "ycsb" else None,
        "dist": p["dist"], "loss": p["loss"], "kill": p["kill"],
        "done": len(kv.done), "pending_at_end": len(history) - len(kv.history),
        "txn_per_s_per_client": len(in_window) / max(1, live) / ((stop - a) / 1e9),
        "txn_per_s": len(in_window) / ((stop - a) / 1e9),
        "latency_ns": latency_stats([d[2] for d in in_window]), "latency_by_class_ns": by_class,
        "attempts_per_txn": (total["attempts"] / total["begun"]) if p["mode"] == "2pc" and total.get("begun") else 1.0,
        "aborts": total.get("aborts", 0),
        "check": None if verdict is None else {"ok": verdict.ok, "reason": verdict.reason, "txns": len(history)},
        "replicas_agree": _replicas_agree(p, shards),
        "clients": total, "shard_counters": sh,
        "window": p["window"], "cpu": _cpu(p, shards + clients),
        "t_beacon_ns": p["t_beacon_ns"], "rto_ns": p["rto_ns"], "duration_ns": p["duration_ns"],
        "warmup_ns": p["warmup_ns"], "drain_ns": p["drain_ns"], "time_scale": p["time_scale"],
    }


SCENARIO = Scenario(
    "onepipe-kv", "a transactional key-value store (YCSB+T read/write/read-modify-write transactions across "
    "shards) ordered by reliable 1Pipe with no locks and no 2PC (mode=onepipe), or by lock-based two-phase "
    "commit over plain UDP (mode=2pc): throughput and latency vs contention, loss, a killed process, "
    "and a strict-serializability check of every transaction",
    PARAMS, run_sim=kv_sim)

SCENARIOS = [SCENARIO]

__all__ = ["MODES", "PARAMS", "SCENARIO", "SCENARIOS", "kv_sim", "place", "resolve"]
