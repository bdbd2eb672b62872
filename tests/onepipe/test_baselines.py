"""1Pipe's Fig. 8 baselines (netstack.onepipe.baselines): each delivers in one total order in virtual
time; each engine, fed any interleaving, duplication or loss of its inputs, never delivers out of
order or twice; the throughput shapes the paper explains (token: a process's rate falls as 1/P;
switch sequencer: bounded by one switch) hold as inequalities between runs, never as timings."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.onepipe.baselines import MODES, run_baseline
from netstack.onepipe.baselines.hostseq import StampingSequencer, pack_scattering
from netstack.onepipe.baselines.lamport import LamportMsg, LamportProcess
from netstack.onepipe.baselines.sim import Costs, heartbeat_interval, run_processes
from netstack.onepipe.baselines.stamped import Stamped, StampedReceiver
from netstack.onepipe.baselines.switchseq import SWSEQ_PORT, Route, SwitchSequencer
from netstack.onepipe.baselines.token import Token, TokenProcess
from netstack.onepipe.scenarios import fabric_topology, place, throughput_window
from netstack.sim.network import Network
from netstack.sim.packets import UDP_HEADERS, Ipv4Flow
from netstack.sim.scenario import ScenarioError
from netstack.topo.model import topology_from_dict

SMALL = fabric_topology(tors=2, hosts_per_tor=2)  # 4 hosts (+ the sequencer's), 100 Gbit/s
COSTS = {"send_msg": 200, "recv_msg": 200, "heartbeat": 100, "token": 300}
PROPS = settings(max_examples=40, deadline=None)


def _run(mode: str, procs: int = 6, rate: float = 500_000.0, duration: int = 40_000, cpu: Any = None,
         **extra: Any) -> dict[str, Any]:
    topo = topology_from_dict(SMALL)
    net = Network(topo, seed=1)
    placed = place(topo, procs, exclude=["seq"])
    start, stop = 20_000, 20_000 + duration
    p = {"mode": mode, "scatter_rate": rate, "fanout": 2, "size": 64, "drain_ns": 40_000, "seq_service_ns": 100,
         "seq_queue": 4096, "t_beacon_ns": 3_000, "time_scale": 1.0, **extra}
    return run_processes(net, p, placed, "seq", 1, start, stop, throughput_window(start, stop), cpu, record=True)


def check_total_order(log: dict[int, list[tuple[Any, int, int]]]) -> None:
    """Every receiver in one order: keys only grow, one key per scattering everywhere, per-sender FIFO."""
    owner: dict[Any, tuple[int, int]] = {}
    for entries in log.values():
        keys = [k for k, _, _ in entries]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        last: dict[int, int] = {}
        for key, src, sseq in entries:
            assert owner.setdefault(key, (src, sseq)) == (src, sseq)
            assert sseq > last.get(src, -1)
            last[src] = sseq


# ------------------------------------------------------------------------------ in virtual time
@pytest.mark.parametrize("mode", ["hostseq", "switchseq", "token", "lamport"])
@pytest.mark.parametrize("cpu", [None, COSTS])
def test_every_baseline_delivers_in_one_total_order(mode: str, cpu: Any) -> None:
    res = _run(mode, cpu=cpu)
    assert res["sent"] > 50 and res["delivered"] == res["sent"]
    assert res["lost"] == res["seq_dropped"] == res["violations"] == res["duplicates"] == 0
    assert len(res["latency"]) == res["delivered"] and min(res["latency"]) > 0
    check_total_order(res["log"])
    own = res["sequencer" if mode == "hostseq" else mode]
    assert ("cpu" in own) == (cpu is not None)


def test_run_baseline_dispatches_and_keeps_the_sequencer_mode() -> None:
    topo = topology_from_dict(SMALL)
    placed = place(topo, 4, exclude=["seq"])
    p = {"mode": "sequencer", "scatter_rate": 200_000.0, "fanout": 2, "size": 64, "drain_ns": 20_000,
         "seq_service_ns": 100, "seq_queue": 64, "t_beacon_ns": 3_000}
    window = throughput_window(10_000, 30_000)
    old = run_baseline(Network(topo, seed=1), p, placed, "seq", 1, 10_000, 30_000, window, None)
    assert set(MODES) >= {"sequencer", "hostseq", "switchseq", "token", "lamport"}
    assert old["delivered"] == old["sent"] > 0 and old["sequencer"]["capacity_msgs_per_s"] == 10_000_000
    new = run_baseline(Network(topo, seed=1), {**p, "mode": "hostseq"}, placed, "seq", 1, 10_000, 30_000, window,
                       None)
    assert new["sent"] == old["sent"] and new["delivered"] == old["delivered"]  # same load, same model
    cpu = run_baseline(Network(topo, seed=1), p, placed, "seq", 1, 10_000, 30_000, window, COSTS)
    assert cpu["delivered"] == cpu["sent"] > 0 and cpu["sequencer"]["cpu"]["costs_ns"]["send_msg"] == 200
    with pytest.raises(ScenarioError, match="paxos"):
        run_baseline(Network(topo, seed=1), {**p, "mode": "paxos"}, placed, "seq", 1, 10_000, 30_000, window, None)
    with pytest.raises(ScenarioError, match="sequencer"):
        run_baseline(Network(topo, seed=1), {**p, "mode": "hostseq"}, placed, None, 1, 10_000, 30_000, window, None)
    one_tor = topology_from_dict(fabric_topology(tors=1, hosts_per_tor=2))
    with pytest.raises(ScenarioError, match="two ToRs"):
        run_baseline(Network(one_tor, seed=1), {**p, "mode": "switchseq"}, place(one_tor, 2, exclude=["seq"]),
                     "seq", 1, 10_000, 30_000, window, None)


def _per_proc(res: dict[str, Any], procs: int, duration: int = 40_000) -> float:
    a, b = throughput_window(0, duration)
    return float(res["in_window"]) / procs / ((b - a) / 1e9)


def test_token_ring_rate_per_process_falls_as_one_over_p() -> None:
    """Saturated (every process always has something to send), only the holder sends: the ring
    delivers about the same total whatever P, so a process gets about 1/P of it."""
    # 4 and 8 processes on 4 hosts: every hop of both rings crosses the spine, every scattering has 2 messages
    four, eight = (_run("token", procs=n, rate=5e6, cpu=COSTS, token_batch=4) for n in (4, 8))
    r4, r8 = _per_proc(four, 4), _per_proc(eight, 8)
    assert r8 < 0.7 * r4  # falls with P ...
    assert 0.8 * 4 * r4 < 8 * r8 < 1.2 * 4 * r4  # ... as 1/P: the ring's total stays
    for n, res in ((4, four), (8, eight)):  # saturated: the senders blocked, far below the Poisson load
        assert res["scatterings"] < 0.5 * 5e6 * 40e-6 * n and res["seq_dropped"] == 0


def test_switch_sequencer_is_bounded_by_one_switch() -> None:
    """With a stage of 100 ns a replica (10 M msg/s), more processes share the same total."""
    runs = {n: _run("switchseq", procs=n, rate=3e6, swseq_ns_per_msg=100, seq_queue=256) for n in (4, 8)}
    for n, res in runs.items():
        assert n * _per_proc(res, n) <= 1.02 * 10e6  # never more than the one stage
        assert res["seq_dropped"] > 0 and res["violations"] == 0
    assert _per_proc(runs[8], 8) < 0.7 * _per_proc(runs[4], 4)
    assert 4 * _per_proc(runs[4], 4) > 0.8 * 10e6  # and the stage is what binds


def test_lamport_rate_per_process_falls_as_heartbeats_take_the_core() -> None:
    """Saturated cores: P - 1 heartbeats each way per interval take a share of every core that grows
    with P, up to half of it (then the interval grows instead), so a process delivers less."""
    three, eight = (_run("lamport", procs=n, rate=5e6, cpu=COSTS) for n in (3, 8))
    assert eight["lamport"]["heartbeat_ns"] > three["lamport"]["heartbeat_ns"] == 3_000
    assert _per_proc(eight, 8) < 0.8 * _per_proc(three, 3)
    for res in (three, eight):
        assert res["lamport"]["cpu"]["mean_utilisation"] > 0.9 and res["delivered"] == res["sent"]


def test_lamport_heartbeat_interval_grows_with_p_under_a_cpu_model() -> None:
    c = Costs({"send_msg": 60, "heartbeat": 40})  # a heartbeat sent and one received: 100 ns
    assert heartbeat_interval(3_000, 4, Costs(None), 0.5) == 3_000
    assert heartbeat_interval(3_000, 4, c, 0.5) == 3_000
    assert heartbeat_interval(3_000, 64, c, 0.5) == 63 * 100 * 2 > 3_000
    assert heartbeat_interval(3_000, 128, c, 0.5) > heartbeat_interval(3_000, 64, c, 0.5)


# ------------------------------------------------------------------------------------- engines
@st.composite
def _stamped_stream(draw: st.DrawFn) -> tuple[list[Stamped], list[Stamped]]:
    """What a sequencer numbered for destination 0, and an arbitrary arrival of it (reordered,
    duplicated, some lost)."""
    nprocs = draw(st.integers(1, 4))
    seq = StampingSequencer(nprocs, 1.0, 10_000)
    mine: list[Stamped] = []
    for i in range(draw(st.integers(0, 25))):
        dsts = draw(st.lists(st.integers(0, nprocs - 1), min_size=1, max_size=nprocs, unique=True))
        mine += [m for _, d, m in seq.on_scattering(i, i % nprocs, i, dsts) if d == 0]
    arrivals = [m for m in mine for _ in range(draw(st.integers(0, 2)))]
    return mine, draw(st.permutations(arrivals))


@PROPS
@given(_stamped_stream(), st.booleans())
def test_stamped_receiver_never_delivers_out_of_order_or_twice(data: Any, hold: bool) -> None:
    sent, arrivals = data
    r = StampedReceiver(hold)
    out = [d for m in arrivals for d in r.on_message(m)]
    pds = [m.pd for m in out]
    assert pds == sorted(set(pds)) and [m.g for m in out] == sorted({m.g for m in out})
    assert r.c.violations == 0 and r.c.delivered == len(out)
    if hold and {m.pd for m in arrivals} == {m.pd for m in sent}:
        assert out == sent  # nothing lost: everything, in order, once
    r.close()
    assert r.held == 0 and r.c.delivered + r.c.lost >= len({m.pd for m in arrivals})


@PROPS
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 3), st.integers(0, 8),
                          st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True)), max_size=30),
       st.integers(1, 12), st.floats(0.5, 50))
def test_stamping_sequencer_numbers_each_destination_consecutively(arrivals: list[tuple[int, int, int, list[int]]],
                                                                     queue: int, service: float) -> None:
    """Scatterings at any times, duplicated or out of their sender's order: every destination's numbers
    run 0, 1, 2..., one global number a scattering, never one scattering stamped twice."""
    seq = StampingSequencer(4, service, queue)
    now, last_leave, g_seen = 0, 0, []
    per: dict[int, list[int]] = {d: [] for d in range(4)}
    stamped: list[tuple[int, int]] = []
    for gap, src, sseq, dsts in arrivals:
        now += gap
        out = seq.on_scattering(now, src, sseq, dsts)
        if not out:
            continue
        assert [d for _, d, _ in out] == dsts and len({m.g for _, _, m in out}) == 1
        for leave, d, m in out:
            assert leave >= now + service - 1 and leave >= last_leave
            last_leave = leave
            per[d].append(m.pd)
        g_seen.append(out[0][2].g)
        stamped.append((src, sseq))
    assert all(v == list(range(len(v))) for v in per.values())
    assert g_seen == list(range(len(g_seen)))
    assert len(set(stamped)) == len(stamped)  # never twice
    for src in range(4):
        mine = [q for s, q in stamped if s == src]
        assert mine == sorted(mine)
    assert seq.c.forwarded == sum(len(v) for v in per.values()) and seq.c.max_backlog <= queue
    assert seq.c.scatterings == len(stamped) and seq.c.scatterings + seq.c.stale <= len(arrivals)


@PROPS
@given(st.integers(2, 4), st.data())
def test_token_ring_never_delivers_out_of_order_or_twice(nprocs: int, data: st.DataObject) -> None:
    """Submissions, token passes (some duplicated) and message arrivals in any order, messages
    duplicated or lost: receivers deliver in one order, each message at most once."""
    procs = [TokenProcess(i, nprocs, data.draw(st.integers(1, 3)), 50) for i in range(nprocs)]
    rx = [StampedReceiver(hold=True) for _ in range(nprocs)]
    tokens: deque[tuple[int, Token]] = deque([(0, Token.first(nprocs))])
    wire: list[tuple[int, Stamped]] = []
    delivered: list[list[Stamped]] = [[] for _ in range(nprocs)]
    sseq = [0] * nprocs
    lossy = data.draw(st.booleans())
    for _ in range(data.draw(st.integers(0, 60))):
        act = data.draw(st.sampled_from(["submit", "token", "arrive", "arrive"]))
        if act == "submit":
            i = data.draw(st.integers(0, nprocs - 1))
            dsts = data.draw(st.lists(st.integers(0, nprocs - 1), min_size=1, max_size=nprocs, unique=True))
            procs[i].submit(sseq[i], dsts)
            sseq[i] += 1
        elif act == "token" and tokens:
            at, tok = tokens.popleft()
            if data.draw(st.booleans()) and tok.hop > 0:
                tokens.append((at, tok))  # a duplicate copy, delivered again later
            msgs, nxt = procs[at].on_token(tok)
            wire += msgs
            if nxt is not None:
                tokens.append((procs[at].next, nxt))
        elif wire:
            d, m = wire.pop(data.draw(st.integers(0, len(wire) - 1)))
            if lossy and data.draw(st.booleans()):
                continue
            if data.draw(st.booleans()):
                wire.append((d, m))  # duplicated
            delivered[d] += rx[d].on_message(m)
    for d, m in wire:  # the rest arrives
        delivered[d] += rx[d].on_message(m)
    order: dict[int, tuple[int, int]] = {}
    for out in delivered:
        assert [m.pd for m in out] == list(range(len(out)))  # in its order, once, no gap skipped
        assert [m.g for m in out] == sorted({m.g for m in out})
        for m in out:
            assert order.setdefault(m.g, (m.src, m.sseq)) == (m.src, m.sseq)
    if not lossy:
        assert all(r.held == 0 for r in rx)


@PROPS
@given(st.integers(2, 4), st.data())
def test_lamport_never_delivers_out_of_order_or_twice(nprocs: int, data: st.DataObject) -> None:
    """Sends and heartbeats in any order, every channel's datagrams reordered, duplicated or lost:
    each receiver delivers in (ts, sender) order, once, per-sender FIFO; without loss, a final round
    of heartbeats (two rounds) delivers everything."""
    procs = [LamportProcess(i, nprocs) for i in range(nprocs)]
    wire: list[LamportMsg] = []
    delivered: list[list[LamportMsg]] = [[] for _ in range(nprocs)]
    sent: list[int] = [0] * nprocs
    lossy = data.draw(st.booleans())
    for _ in range(data.draw(st.integers(0, 60))):
        act = data.draw(st.sampled_from(["send", "beat", "arrive", "arrive"]))
        i = data.draw(st.integers(0, nprocs - 1))
        if act == "send":
            dsts = data.draw(st.lists(st.sampled_from([q for q in range(nprocs) if q != i]), min_size=1, unique=True))
            wire += procs[i].send(sent[i], dsts)
            sent[i] += 1
        elif act == "beat":
            wire += procs[i].heartbeat()
        elif wire:
            m = wire.pop(data.draw(st.integers(0, len(wire) - 1)))
            if lossy and data.draw(st.booleans()):
                continue
            if data.draw(st.booleans()):
                wire.append(m)
            delivered[m.dst] += procs[m.dst].on_message(m)
    if not lossy:
        # two rounds: the first brings every clock past every timestamp sent, the second says so
        for _ in range(2):
            for q in procs:
                wire += q.heartbeat()
            random.Random(len(wire)).shuffle(wire)
            for m in wire:
                delivered[m.dst] += procs[m.dst].on_message(m)
            wire = []
    for out in delivered:
        keys = [(m.ts, m.src) for m in out]
        assert keys == sorted(set(keys)) and all(not m.hb for m in out)
        for src in range(nprocs):
            seqs = [m.sseq for m in out if m.src == src]
            assert seqs == sorted(set(seqs))
    if not lossy:
        assert all(q.held == 0 for q in procs)
        assert sum(len(o) for o in delivered) == sum(q.c.sent for q in procs)


class _FakeSwitch:
    """What :class:`SwitchSequencer` needs of a switch: its name, ports, and attach_feature."""

    class _Port:
        def __init__(self, name: str) -> None:
            self.name = name

    def __init__(self, ports: list[str]) -> None:
        self.name = "spine"
        self.ports = [self._Port(n) for n in ports]
        self.features: dict[str, Any] = {}

    def attach_feature(self, port: str, feature: Any) -> None:
        self.features[port] = feature


@PROPS
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3),
                          st.lists(st.integers(0, 3), min_size=1, max_size=4, unique=True)), max_size=25),
       st.lists(st.integers(0, 60), max_size=40), st.floats(0.5, 20), st.lists(st.integers(0, 24), max_size=6))
def test_switch_stage_sends_each_port_in_order_never_early(scatterings: list[tuple[int, int, list[int]]],
                                                         polls: list[int], ns: float, dups: list[int]) -> None:
    """Scatterings at ingress at any times, some again later (duplicated by the network), the ports'
    links free at any times: a port's replicas leave in their destination numbers' order, never
    before the pipeline has made them, and no message twice."""
    sw = _FakeSwitch(["p0", "p1"])
    mac, ip = bytes(6), bytes(4)
    routes = [Route("p0" if d < 2 else "p1", mac, ip, 100 + d) for d in range(4)]
    stage = SwitchSequencer(sw, routes, ns, 1_000)  # type: ignore[arg-type]
    flow = Ipv4Flow(mac, mac, ip, ip)
    events = sorted([(t, 0, i) for i, (t, _, _) in enumerate(scatterings)] + [(t, 1, 0) for t in polls]
                    + [(scatterings[i][0] + 5, 0, i) for i in dups if i < len(scatterings)])
    got: dict[int, list[int]] = {d: [] for d in range(4)}
    seen: set[tuple[int, int, int]] = set()
    for t, kind, i in events + [(10**6, 1, 0)] * 200:
        if kind == 0:
            _, src, dsts = scatterings[i]
            frame = flow.udp(5, SWSEQ_PORT, pack_scattering(src, i, dsts))  # (its index: counters only grow)
            assert sw.features["p0"].on_ingress(frame, t) is None  # consumed
        for port in ("p0", "p1"):
            q = stage.out[port]
            head = q[0][0] if q else None
            out = sw.features[port].idle_frame(t)
            if out is not None:
                assert head is not None and head <= t  # never before the pipeline made it
                m = Stamped.unpack(out, UDP_HEADERS)
                d = (out[36] << 8 | out[37]) - 100
                assert routes[d].port == port and (m.src, m.sseq, d) not in seen
                seen.add((m.src, m.sseq, d))
                got[d].append(m.pd)
    assert all(v == list(range(len(v))) for v in got.values())
    assert sum(len(v) for v in got.values()) == stage.engine.c.forwarded  # all sent in the end
    assert sw.features["p0"].on_ingress(flow.udp(5, 99, b"x"), 0) is not None  # other traffic passes
