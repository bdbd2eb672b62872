"""The traffic tools (netstack.traffic) over the live testbed: JSON results that add up."""

from __future__ import annotations

import sys

import pytest

from netstack import toolproc

pytestmark = pytest.mark.netns


def _tool(state, node: str, *args: str, background: bool = False):
    argv = ["ip", "netns", "exec", state.namespaces[node], sys.executable, "-m", "netstack.traffic", *args]
    if background:
        return toolproc.start(argv, f"{args[0]} in {node}", ready_on="stderr")
    return toolproc.run(argv, f"{args[0]} in {node}", 120)


def test_sequenced_udp_counts(testbed):
    sink = _tool(testbed, "h2", "udp-sink", "--quiet", "1", "--expect", "2000", background=True)
    sent = _tool(testbed, "h1", "udp-send", "--dst", "10.0.0.2", "--count", "2000", "--rate", "4000")
    res = toolproc.result(sink, "udp-sink in h2", 60)
    assert sent["sent"] == 2000
    assert res["unique"] == 2000 and res["lost"] == 0 and res["duplicates"] == 0 and res["reordered"] == 0


def test_request_response_fct(testbed):
    server = _tool(testbed, "h2", "rr-server", background=True)
    try:
        res = _tool(testbed, "h1", "rr-client", "--dst", "10.0.0.2", "--flows", "200")
    finally:
        server.wait(timeout=30)
    assert res["flows"] == 200
    fct = res["fct_us"]
    assert 0 < fct["p50"] <= fct["p99"] <= fct["p100"]


def test_udp_send_resolves_the_next_hop_first_so_nothing_is_reordered(testbed):
    """With ARP unresolved, the kernel queues the first datagrams and, when the reply comes,
    a datagram sent meanwhile overtakes the queue (measured: ~1 run in 12 reordered 30+
    datagrams at 6,000/s). udp-send resolves the neighbour first (empty probe, which the sink
    ignores), so every run below must arrive complete and in order."""
    from .conftest import sh

    for _ in range(6):
        for node in ("h1", "h2"):
            assert sh(testbed, node, "ip", "neigh", "flush", "all").returncode == 0
        sink = _tool(testbed, "h2", "udp-sink", "--quiet", "1", "--expect", "1500", background=True)
        sent = _tool(testbed, "h1", "udp-send", "--dst", "10.0.0.2", "--count", "1500", "--rate", "6000")
        res = toolproc.result(sink, "udp-sink in h2", 60)
        assert sent["neighbour_resolved"] is True
        assert res["received"] == 1500, res  # the probe is not counted
        assert res["reordered"] == 0 and res["late"] == [] and res["lost"] == 0, res
