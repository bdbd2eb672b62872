"""TIMELY + TCD on the live testbed (issue 30): h1 and h2 send to h3 through sw1, whose port to h3
is the bottleneck (40 Mbit/s, 2 ms a link, the TCD scenarios' 1000x scale), with ``python -m
netstack.tcd send --cc timely`` on real UDP sockets in the hosts' namespaces; h3's receiver
answers every segment's ACK request. Smoke: the ACKs come back, the RTT samples see the path's
propagation delay, the two flows overload the port and TIMELY cuts, both flows complete."""

from __future__ import annotations

import sys

import pytest

from netstack import runtime, toolproc
from netstack.topo.model import loads_topology
from tests.topologies import H1, H2, H3, SW1, header, link

from .conftest import running, validated

pytestmark = pytest.mark.netns

TOPOLOGY = loads_topology(header("timely-live", rate="40Mbit", delay="2ms", buffer="8MB") + H1 + H2 + H3 + SW1
                          + link("h1", "sw1") + link("h2", "sw1") + link("sw1", "h3"))
#: the scale of the TCD scenarios: 40 Gbit/s parameters at 40 Mbit/s, times x1000
SCALE = ["--line-rate", "40Mbit", "--time-scale", "1000", "--quiet"]
SECONDS = 4.0
LIMITS = {"p99_ms": 20.0, "max_ms": 200.0}


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    yield from running(TOPOLOGY, tmp_path_factory, "y")


def _tool(state: runtime.RunState, node: str, *args: str) -> list[str]:
    return runtime.node_exec_argv(state, node, [sys.executable, "-m", "netstack.tcd", *args])


def _run(state: runtime.RunState) -> tuple[dict, dict[int, dict]]:
    recv = toolproc.popen(_tool(state, "h3", "recv", "--tcd", "--expect", "2", "--idle", "2", "--wait", "30", *SCALE))
    senders = {}
    try:
        toolproc.wait_ready(recv, "the receiver on h3", on="stderr", timeout=30)
        for flow, host in ((1, "h1"), (2, "h2")):
            senders[flow] = toolproc.popen(_tool(state, host, "send", "--dst", "10.0.0.3", "--flow", str(flow), "--cc",
                                                 "timely", "--mode", "tcd", "--seconds", str(SECONDS), *SCALE))
        sent = {f: toolproc.result(p, f"the sender of flow {f}", SECONDS + 60) for f, p in senders.items()}
        return toolproc.result(recv, "the receiver on h3", 60), sent
    finally:
        for proc in (recv, *senders.values()):
            toolproc.kill(proc, timeout=5)


def test_timely_senders_measure_rtts_and_share_the_bottleneck(bed):
    for attempt in validated(bed.prefix, **LIMITS):
        with attempt:
            received, sent = _run(bed)
            attempt.tool("receiver h3", received)
            for f, out in sent.items():
                attempt.tool(f"sender {f}", out)
            cuts = 0
            for f, out in sent.items():
                c = out["counters"]
                assert out["done"] and out["cc"] == "timely" and c["mode"] == "timely+tcd"
                assert c["rtt_samples"] >= 20 and c["acks_stale"] == c["acks_foreign"] == 0
                # sw1 delays every frame 2 ms on its way out (a host's end is a bare veth): no RTT
                # below 4 ms, and none past the 8 MB buffer's worth of queue
                assert c["min_rtt_seen_ns"] >= 4_000_000 and c["max_rtt_seen_ns"] < 3_000_000_000
                assert received["flows"][str(f)]["complete"] and received["flows"][str(f)]["acks"] == c["segments"]
                cuts += c["rate_cuts"]
            assert cuts > 0  # two senders at line rate into one port: the RTT rose and TIMELY cut
            assert received["malformed"] == 0
