"""The ``tcd-fct`` scenario (netstack.tcd.fct) in virtual time: small runs on the §3.1 chain.

Behaviour only: every flow completes, the run's seed alone fixes the flows (both markers see the same
ones), slowdowns are >= 1 and a flow alone on the path meets its ideal. Which marker gives the
lower slowdown is a measurement (``netstack bench tcd``), never asserted here."""

from __future__ import annotations

import pytest

from netstack.sim.scenario import RunSpec, ScenarioError, get, run
from netstack.sim.workload import flow_sizes
from netstack.tcd.fct import (
    BURST_NS,
    FIRST_FID,
    bursts_of,
    ideal_ns,
    make_flows,
    packet_sizes,
    path_links,
    senders_of,
)
from netstack.tcd.scenarios import Workload, topology_doc
from netstack.topo.model import topology_from_dict

GBIT = 1_000_000_000
SMALL = {"flows": 30, "load": 0.5, "size_scale": 0.02}


def _run(marker: str, seed: int = 3, rate: int = 40 * GBIT, **params) -> dict:
    return run(RunSpec("tcd-fct", topology_doc("single", marker, rate_bps=rate), seed, None, {**SMALL, **params}))


@pytest.fixture(scope="module")
def both() -> dict[str, dict]:
    return {m: _run(m) for m in ("ecn", "tcd")}


def test_registered_as_a_virtual_time_scenario():
    sc = get("tcd-fct")
    assert sc.runtimes == ("sim",) and sc.paper_rate_bps == 40 * GBIT
    assert {"flows", "load", "workload", "size_scale", "bursts", "max_ms"} <= set(sc.params)


def test_every_flow_completes_with_a_slowdown_of_at_least_one(both):
    for marker, doc in both.items():
        res = doc["result"]
        assert res["marker"] == marker and res["mode"] == ("dcqcn+tcd" if marker == "tcd" else "dcqcn")
        assert doc["time_scale"] == 1.0
        assert res["flows_total"] == res["flows_completed"] == 30 == len(res["flows"])
        for f in res["flows"]:
            assert f["fct_ns"] is not None and f["fct_ns"] >= f["ideal_ns"] > 0
            assert f["slowdown"] >= 1.0 and f["fct_rx_ns"] <= f["fct_ns"]
        s = res["slowdown"]
        assert s["flows"] == 30 and 1.0 <= s["median"] <= s["p99"]
        assert sum(b["total"] for b in res["by_size"].values()) == 30


def test_the_seed_alone_fixes_the_flows(both):
    def key(doc: dict) -> list[tuple]:
        return [(f["fid"], f["src"], f["dst"], f["size"], f["arrival_ns"], f["ideal_ns"])
                for f in doc["result"]["flows"]]

    assert key(both["ecn"]) == key(both["tcd"])
    other = _run("ecn", seed=4)
    assert key(other) != key(both["ecn"])
    again = _run("tcd")
    assert again["result"] == both["tcd"]["result"]  # deterministic


def test_make_flows_draws_from_the_seed_only():
    sizes = flow_sizes("websearch")
    kw = {"flows": 50, "load": 0.6, "sizes": sizes, "size_scale": 0.1, "senders": senders_of(15)}
    a, b = make_flows(7, **kw), make_flows(7, **kw)
    assert a == b and a != make_flows(8, **kw)
    assert [f.fid for f in a] == list(range(FIRST_FID, FIRST_FID + 50))
    assert all(f.src in kw["senders"] and f.dst in ("r0", "r1") and f.size >= 1 for f in a)
    assert [f.start_ns for f in a] == sorted(f.start_ns for f in a) and a[0].start_ns == 0
    with pytest.raises(ScenarioError, match="load"):
        make_flows(1, **{**kw, "load": 0})
    with pytest.raises(ScenarioError, match="flows"):
        make_flows(1, **{**kw, "flows": 0})


def test_a_flow_alone_meets_its_ideal():
    """One flow on an empty chain: its FCT is the ideal (every packet at line rate, the path's
    delays, store and forward of the last packet), at the paper's rate and scaled 1000x; within
    the clock's whole nanoseconds (each packet's line time is rounded up: 163 ns over 72 packets
    at 40 Gbit/s)."""
    for rate in (40 * GBIT, 40_000_000):
        doc = _run("tcd", seed=1, rate=rate, flows=1, size_scale=1.0, workload="100000")
        f = doc["result"]["flows"][0]
        assert f["size"] == 100_000 and 1.0 <= f["slowdown"] <= 1.01


def test_ideal_counts_every_packet_and_hop():
    topo = topology_from_dict(topology_doc("single", "tcd", rate_bps=40 * GBIT), "<t>")
    links = path_links(topo, "s1", "r1")
    assert len(links) == 5 and all(r == 40 * GBIT and d == 4_000 for r, d in links)
    assert packet_sizes(3000, 1400) == [1400, 1400, 200] and packet_sizes(5, 1400) == [16]
    # one 1000-byte packet: (1000 + 42 + 24) bytes at 40G = 213.2 ns per hop, 5 hops, 20 us of delay
    assert ideal_ns(1000, 1400, links) == int(5 * 1066 * 8 / 40 + 20_000)


def test_the_bursts_are_the_tcd_scenarios():
    for n, load in ((15, 0.9), (4, 0.5)):
        ours = bursts_of(n, load)
        theirs = [f for f in Workload("single", bursters=n, burst_load=load).flows() if f.kind == "burst"]
        assert [(b.fid, b.src, b.share, b.period_ns, b.start_ns, b.start_ns + BURST_NS) for b in ours] == \
            [(f.fid, f.src, f.burst_bytes, f.burst_period_ns, f.start_ns, f.stop_ns) for f in theirs]


def test_with_the_bursts_on_top_every_flow_still_completes():
    doc = _run("tcd", flows=10, bursts=True, burst_load=0.1)
    res = doc["result"]
    assert res["bursts"] == 15 and res["flows_completed"] == 10
    assert all(f["slowdown"] >= 1.0 for f in res["flows"])


@pytest.mark.parametrize("params,problem", [({"payload": 9000}, "payload"), ({"size_scale": 0}, "size_scale"),
                                            ({"workload": "nope"}, "workload"), ({"bursts": True, "burst_load": 2.0},
                                                                                 "burst_load")])
def test_bad_parameters_are_clear_errors(params, problem):
    with pytest.raises(ScenarioError, match=problem):
        _run("ecn", **params)
