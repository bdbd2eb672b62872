"""Determinism: the same topology, scenario, parameters and seed give byte-identical results JSON;
another seed draws other frame fates."""

from __future__ import annotations

import pytest

from netstack.sim.hosts import UdpSink, UdpStream
from netstack.sim.network import Network
from netstack.sim.scenario import RunSpec, canonical_json, resolve_topology, run

CASES = [
    ("lg-stream", "lg-testbed", {"count": 3000, "rate_pps": 5000.0}),
    ("lg-stress", "lg-100g", {"frames": 3000}),
    ("udp-stream", "default", {"count": 2000}),
    ("tcsack-transfer", None, {"bytes": 200_000, "rate_bps": 50_000_000}),
]


@pytest.mark.parametrize("scenario,topology,params", CASES, ids=[c[0] for c in CASES])
def test_the_same_seed_gives_byte_identical_results(scenario, topology, params):
    a = run(RunSpec(scenario, topology, 5, None, params))
    b = run(RunSpec(scenario, topology, 5, None, params))
    assert canonical_json(a) == canonical_json(b)
    assert a["engine"]["events"] == b["engine"]["events"] > 0


@pytest.mark.parametrize("scenario,topology,params", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_another_seed_gives_other_results(scenario, topology, params):
    a = run(RunSpec(scenario, topology, 5, None, params))
    b = run(RunSpec(scenario, topology, 6, None, params))
    assert canonical_json(a) != canonical_json(b)


@pytest.mark.parametrize("topology", ["lg-testbed", "default"])
def test_another_seed_loses_other_frames(topology):
    def lost(seed):
        net = Network(resolve_topology(topology), seed=seed)
        sink = UdpSink(net.host("h2"))
        UdpStream(net.host("h1"), "h2", count=5000, size=200, rate_pps=5000)
        net.run()
        ch = net.channel("sw1-sw2", "sw1")
        return ch.corrupted, frozenset(i for i in range(5000) if not sink.seen[i]), sink.result()

    a, b, again = lost(5), lost(6), lost(5)
    assert a[0] > 0 and b[0] > 0
    assert a != b and a == again
