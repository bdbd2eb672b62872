"""The TCP host models (netstack.sim.reno, netstack.sim.tcp) and flow-size workloads
(netstack.sim.workload): the NewReno engine's rules one by one, hypothesis through loss,
duplication, reordering and the 32-bit wrap, and the tcp-rr / tcp-flows scenarios."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.sim.network import Network
from netstack.sim.reno import ACK, RenoConnection, RenoParams, Segment
from netstack.sim.scenario import RunSpec, ScenarioError, run
from netstack.sim.tcp import FlowArrivals, RequestResponse, bulk_transfer, connect
from netstack.sim.workload import EmpiricalCDF, Fixed, WorkloadError, flow_sizes, shipped
from netstack.tcsack.scenarios import path_topology
from netstack.topo.model import topology_from_dict

from . import pair

M32 = 0xFFFFFFFF


def direct(rate_bps: int = 100_000_000, delay_ns: int = 500_000) -> Network:
    """h1 - h2 on one link (no switch), whose two directions a test can script frame by frame."""
    return Network(topology_from_dict({
        "topology": {"name": "tcp-direct"},
        "defaults": {"rate": rate_bps, "delay": f"{delay_ns}ns"},
        "nodes": [{"name": "h1", "kind": "host", "ip": "10.0.0.1/24"},
                  {"name": "h2", "kind": "host", "ip": "10.0.0.2/24"}],
        "links": [{"name": "h1-h2", "a": "h1", "b": "h2"}],
    }))


def scripted(fwd, rev) -> Network:
    """:func:`direct` with the i-th frame of each direction's fate scripted (lost, duplicated,
    extra delay in 100 us), then a clean path, so that every transfer must end."""
    net = direct()
    for src, sched in (("h1", fwd), ("h2", rev)):
        def fate(i, frame, sched=sched):
            if i < len(sched):
                lost, dup, extra = sched[i]
                return lost, dup, extra * 100_000
            return False, False, 0
        net.channel("h1-h2", src).fate = fate
    return net


# ----------------------------------------------------------------------- the engine's rules
def _pair(params: RenoParams | None = None, isn: int = 1000, peer: int = 5000):
    return RenoConnection(params, isn=isn, peer_isn=peer), RenoConnection(params, isn=peer, peer_isn=isn)


def test_initial_window_is_ten_segments_and_slow_start_grows_per_ack():
    a, b = _pair()
    a.write(bytes(100 * 1460))
    first = a.poll(0)
    assert len(first) == 10 and all(len(s.payload) == 1460 for s in first)
    for s in first:
        b.receive(s, 1000)
        for ack in b.poll(1000):
            a.receive(ack, 2000)
    assert a.cwnd == 20 * 1460 and a.c.acks_rx == 10
    assert len(a.poll(2000)) == 20  # one RTT of slow start doubled the window


def test_three_duplicate_acks_retransmit_the_hole_once_and_halve_the_window():
    a, b = _pair()
    a.write(bytes(10 * 1460))
    segs = a.poll(0)
    acks = []
    for i, s in enumerate(segs):
        if i == 2:
            continue  # lost
        b.receive(s, 100)
        acks += b.poll(100)
    flight = a.flight
    for ack in acks:
        a.receive(ack, 200)
    out = a.poll(200)
    assert a.c.fast_retransmits == 1 and a.in_recovery and a.c.timeouts == 0
    assert out[0].seq == (1000 + 2 * 1460) & M32 and len(out[0].payload) == 1460
    assert a.ssthresh == (flight - 2 * 1460) // 2  # the flight when the third duplicate came
    b.receive(out[0], 300)
    (full,) = b.poll(300)
    a.receive(full, 400)
    assert not a.in_recovery and a.unacked == 0 and b.c.bytes_delivered == 10 * 1460
    assert a.cwnd <= a.ssthresh


def test_a_lost_tail_waits_for_the_retransmission_timer_then_goes_back_to_one_segment():
    p = RenoParams(min_rto_ns=1_000_000, init_rto_ns=1_000_000)
    a, b = _pair(p)
    a.write(bytes(3 * 1460))
    a.poll(0)  # everything lost
    assert a.next_deadline() == 1_000_000
    assert a.poll(999_999) == []
    out = a.poll(1_000_000)
    assert a.c.timeouts == 1 and a.cwnd == 1460 and len(out) == 1 and out[0].seq == 1000
    assert a.next_deadline() == 3_000_000  # backed off
    b.receive(out[0], 1_100_000)
    a.receive(b.poll(1_100_000)[0], 1_200_000)
    assert a.snd_una == 1460 and a.c.retransmits == 1


def test_rtt_estimate_and_karn():
    a, b = _pair(RenoParams(min_rto_ns=1000, init_rto_ns=1_000_000))
    a.write(bytes(1460))
    (s,) = a.poll(0)
    b.receive(s, 40_000)
    a.receive(b.poll(40_000)[0], 80_000)
    assert a.srtt == 80_000 and a.rto == 80_000 + 4 * 40_000
    a.write(bytes(1460))
    a.poll(100_000)
    out = a.poll(100_000 + a.rto)  # timeout: the resend is not timed
    assert a.c.timeouts == 1 and out
    b.receive(out[0], 500_000)
    a.receive(b.poll(500_000)[0], 900_000)
    assert a.srtt == 80_000


def test_acks_for_unsent_data_are_ignored():
    a, _ = _pair()
    a.write(bytes(1460))
    a.poll(0)
    a.receive(Segment((5000) & M32, (1000 + 10 * 1460) & M32, ACK, b""), 10)
    assert a.snd_una == 0 and a.unacked == 1460


def test_params_are_checked():
    for bad in ({"mss": 0}, {"init_cwnd": 0}, {"min_rto_ns": 0}, {"rwnd": 100}):
        with pytest.raises(ValueError):
            RenoParams(**bad)


# ------------------------------------------------------------------------- through a network
FATE = st.tuples(st.booleans(), st.booleans(), st.integers(0, 30))


@settings(max_examples=120, deadline=None)
@given(size=st.integers(0, 40_000), fwd=st.lists(FATE, max_size=80), rev=st.lists(FATE, max_size=80),
       isn=st.one_of(st.integers(0, M32), st.integers(M32 - 20_000, M32)), peer=st.integers(0, M32),
       mss=st.integers(100, 1460))
def test_every_transfer_delivers_exactly_in_order(size, fwd, rev, isn, peer, mss):
    """Loss, duplication and reordering (an extra delay lets later frames overtake) on both
    directions, then a clean path: every byte arrives once, in order, across the wrap."""
    net = scripted(fwd, rev)
    data = bytes((i * 31 + 7) & 0xFF for i in range(size))
    p = RenoParams(mss=mss, min_rto_ns=2_000_000, init_rto_ns=2_000_000, max_rto_ns=50_000_000)
    res = bulk_transfer(net, "h1", "h2", data, params=p, isns=(isn, peer), max_ns=600_000_000_000)
    assert res["ok"], res
    assert res["receiver"]["bytes_delivered"] == size
    assert net.loop.pending() == 0 or res["sender"]["unacked"] == 0


@settings(max_examples=80, deadline=None)
@given(pieces=st.lists(st.tuples(st.integers(1, 3000), st.integers(0, 30)), min_size=1, max_size=25),
       fwd=st.lists(FATE, max_size=60), rev=st.lists(FATE, max_size=60), mss=st.integers(100, 1460))
def test_writes_at_any_time_arrive_once_in_order(pieces, fwd, rev, mss):
    """Writes of any size at any time (so segments are cut at other offsets after a resend, and
    a resent segment overlaps what the receiver holds): the stream still arrives exactly."""
    net = scripted(fwd, rev)
    p = RenoParams(mss=mss, min_rto_ns=2_000_000, init_rto_ns=2_000_000, max_rto_ns=50_000_000)
    a, b = connect(net.host("h1"), net.host("h2"), 5001, p)
    got = bytearray()
    b.on_data = lambda ep: got.extend(ep.conn.read())
    data = bytearray()
    t = 0
    for n, gap in pieces:
        piece = bytes((len(data) + i) * 13 & 0xFF for i in range(n))
        data += piece
        t += gap * 200_000
        net.loop.call_at(t, a.write, piece)
    net.run(600_000_000_000)
    assert got == data and a.conn.unacked == 0


def test_reno_over_the_switches_loses_throughput_to_random_loss():
    """Loss-based: 3 % random loss each way on a 4 ms round trip at 100 Mbit/s costs most of the
    throughput (Mathis: ~MSS/RTT x 1.22/sqrt(p) = 20 Mbit/s); the lossless run fills the link."""
    goodput = {}
    for loss in (0.0, 0.03):
        net = Network(topology_from_dict(path_topology(rate_bps=100_000_000, one_way_ns=2_000_000, loss=loss)),
                      seed=3)
        res = bulk_transfer(net, "h1", "h2", 3_000_000)
        assert res["ok"]
        goodput[loss] = res["goodput_bps"]
        if loss:
            assert res["sender"]["fast_retransmits"] > 0
    assert goodput[0.0] > 80e6 and goodput[0.03] < 0.5 * goodput[0.0]


def test_request_response_measures_one_fct_per_flow():
    net = pair()
    rr = RequestResponse(net, "h1", "h2", sizes=Fixed(143), flows=50)
    net.run()
    res = rr.result()
    assert rr.done and res["flows"] == 50 and res["tool"] == "rr-client"
    # lossless and idle: every exchange takes the same time, one round trip and change
    assert res["fct_us"]["p50"] == res["fct_us"]["p100"] > 4.0  # > 2 x 2 us of propagation
    assert res["client"]["retransmits"] == 0 and res["server"]["bytes_delivered"] == 50 * 143


def test_open_loop_flows_never_beat_the_empty_path():
    net = pair()
    fa = FlowArrivals(net, "h1", "h2", sizes=flow_sizes("fb-hadoop"), load=0.3, flows=200, seed=2)
    net.run()
    res = fa.result()
    assert fa.done and res["flows"] == 200
    assert res["slowdown"]["p50"] >= 1.0 and min(f / fa.ideal_ns(s) for s, _, f in fa.records) >= 0.999
    assert sum(c["flows"] for c in res["by_size"].values()) == 200


def test_tcp_scenarios_run_in_the_common_schema():
    doc = run(RunSpec("tcp-rr", "default", 1, None, {"flows": 20}))
    assert doc["result"]["flows"] == 20 and doc["runtime"] == "sim"
    doc = run(RunSpec("tcp-flows", "default", 1, None, {"flows": 20, "workload": "google-rpc"}))
    assert doc["result"]["flows"] == 20
    doc = run(RunSpec("tcsack-transfer", "default", 1, None, {"proto": "tcp", "bytes": 100_000}))
    assert doc["result"]["ok"] and doc["result"]["goodput_bps"] > 0
    with pytest.raises(ScenarioError, match="not a number of bytes"):
        run(RunSpec("tcp-rr", "default", 1, None, {"size": "no-such-workload"}))
    with pytest.raises(ScenarioError, match="load"):
        run(RunSpec("tcp-flows", "default", 1, None, {"load": 1.5}))


# ------------------------------------------------------------------------------- workloads
def test_shipped_workloads_load_and_sample_near_their_mean():
    assert {"websearch", "fb-hadoop", "google-rpc"} <= set(shipped())
    for name in shipped():
        d = flow_sizes(name)
        rng = random.Random(1)
        xs = [d.sample(rng) for _ in range(50_000)]
        assert min(xs) >= 1
        assert abs(sum(xs) / len(xs) - d.mean()) < 0.1 * d.mean(), name
    assert flow_sizes(143) == Fixed(143) and flow_sizes("24387").mean() == 24387


def test_cdf_files_are_checked_with_the_line(tmp_path):
    cases = {"1 2 3\n": ":1: want", "a b\n": "not two numbers", "10 0.5\n5 1\n": "must not decrease",
             "10 0.5\n": "not 1", "10 1.5\n": "outside", "": "no points"}
    for text, problem in cases.items():
        f = tmp_path / "w.cdf"
        f.write_text(text)
        with pytest.raises(WorkloadError, match=problem):
            EmpiricalCDF.from_file(f)
    f = tmp_path / "pct.cdf"
    f.write_text("# percent\n100 50\n200 100\n")
    d = EmpiricalCDF.from_file(f)
    assert d.probs == [0.5, 1.0] and d.mean() == 0.5 * 100 + 0.5 * 150
    with pytest.raises(WorkloadError, match="shipped workload"):
        flow_sizes("nonsense")
    with pytest.raises(WorkloadError):
        flow_sizes(0)


@given(st.lists(st.tuples(st.floats(0, 1e7, allow_nan=False), st.floats(0, 1, allow_nan=False)), min_size=1,
                max_size=12), st.integers(0, 2**32))
def test_any_valid_cdf_samples_inside_its_range(points, seed):
    pts = sorted(points)
    pts = [(s, p) for (s, _), p in zip(pts, sorted(p for _, p in pts), strict=True)]
    pts[-1] = (pts[-1][0], 1.0)
    d = EmpiricalCDF(pts)
    rng = random.Random(seed)
    for _ in range(50):
        x = d.sample(rng)
        assert 1 <= x <= max(1, round(pts[-1][0]))
