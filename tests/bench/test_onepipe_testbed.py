"""The model of 1Pipe's testbed (netstack/bench/onepipe/testbed.py) and the load of Fig. 9b's
loaded runs (netstack/bench/onepipe/sim.py): built, not run."""

from __future__ import annotations

import pytest

from netstack.bench.onepipe import sim, testbed
from netstack.onepipe import cpucost
from netstack.onepipe.scenarios import fat_tree_topology
from netstack.sim.scenario import resolve_topology, time_scale


@pytest.mark.parametrize("procs", [1, 8, 16, 32, 512])
def test_the_testbed_has_no_oversubscription_and_keeps_the_time_scale(procs: int) -> None:
    """1Pipe §7.1: "The network has no oversubscription". Our one route per pair carries what the
    paper's parallel links do, so the fabric links are 16 host links' worth; the time scale stays
    1 whether or not pruning left a fabric link (one ToR at P <= 8)."""
    topo = resolve_topology(testbed.testbed_topology(procs))
    kinds = {n.name: n.kind.value for n in topo.nodes}
    fabric = [lk for lk in topo.links if kinds[lk.a.node] == kinds[lk.b.node] == "switch"]
    hosts = [lk for lk in topo.links if lk not in fabric]
    assert {lk.rate_bps for lk in hosts} == {100 * 10**9}
    assert {lk.rate_bps for lk in fabric} <= {1600 * 10**9} and (procs <= 8) == (not fabric)
    assert time_scale(topo) == 1.0


def test_a_scaled_testbed_keeps_its_scale_on_one_tor() -> None:
    full = fat_tree_topology(rate="100Mbit", uplink_rate="1600Mbit")
    full["topology"]["paper_rate"] = "1600Gbit"  # 1000x slower than the paper's
    for procs in (8, 32):
        assert time_scale(resolve_topology(testbed.testbed_topology(procs, full))) == pytest.approx(1000.0)


def test_the_loaded_runs_offer_what_a_host_link_carries() -> None:
    """A DATA (1Pipe's header, 64 B, UDP/IP/Ethernet: 154 B of line) and an ACK (90 B) a message,
    16 processes a host: 80 % of 100 Gbit/s is 2.56 M msg/s a process, under the paper's 3.91 M."""
    assert sim.FIG9B_MSG_WIRE_BITS == 8 * (154 + 90)
    assert sim.FIG9B_HOSTS == 32 and sim.FIG9B_HOST_LINK_BPS == 100 * 10**9
    rate = sim.FIG9B_LOADED_MSGS_PER_S
    assert rate == pytest.approx(0.8 * 100e9 / (16 * 8 * 244)) and rate < cpucost.PAPER_R_MSGS_PER_S
    assert sim.FIG9B_LOADS[0] * sim.FIG9B_RATE * 2 == pytest.approx(rate)
