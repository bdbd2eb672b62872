"""ECMP on the live testbed (docs/topology.md "ECMP"): a leaf-spine fabric, two leaves under two
spines with two hosts each, ``ecmp = true``. ARP finds its way over the flood tree (the fabric
is a loop), UDP flows from h1 to h3 spread over both spines exactly as the switch's hash
predicts (the prediction tests/sim/test_ecmp_sim.py checks the virtual-time runtime against),
and one flow's datagrams all cross one spine and arrive in order."""

from __future__ import annotations

import json

import pytest

from netstack import runtime
from netstack.topo.model import loads_topology
from tests.sim.test_ecmp_sim import predicted_port
from tests.topologies import leaf_spine

from .conftest import in_node, running, sh, validated

pytestmark = pytest.mark.netns

TOPOLOGY = loads_topology(leaf_spine("ecmp-live"))
DPORT = 7000
#: what a starved run may not pass for (netstack.validity): a daemon asleep that long drops datagrams
LIMITS = {"p99_ms": 50.0, "max_ms": 300.0}
#: frames besides the test's a leaf may send toward h3 meanwhile (the kernel's ARP probes)
SLACK = 6

SINK = r"""
import json, socket, sys, time
n_expect, dport = int(sys.argv[1]), int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
s.bind(("0.0.0.0", dport))
s.settimeout(2.0)
print("ready", flush=True)
flows = {}
n = 0
while n < n_expect:
    try:
        data, (_, sport) = s.recvfrom(2048)
    except socket.timeout:
        break
    flows.setdefault(sport, []).append(int.from_bytes(data[:4], "big"))
    n += 1
print(json.dumps({str(p): seqs for p, seqs in flows.items()}))
"""

SEND = r"""
import socket, sys, time
dst, dport, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
socks = []
for sport in map(int, sys.argv[4:]):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", sport))
    socks.append(s)
pad = bytes(196)
for seq in range(count):
    for s in socks:  # the flows interleaved, as several connections of one host are
        s.sendto(seq.to_bytes(4, "big") + pad, (dst, dport))
    time.sleep(0.002)
"""


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    yield from running(TOPOLOGY, tmp_path_factory, "e")


def _flows(state, sports: list[int], count: int) -> dict[int, list[int]]:
    """``count`` datagrams on each of the flows h1:sport -> h3:DPORT: what h3 received, per flow."""
    sink = in_node(state, "h3", SINK, str(count * len(sports)), str(DPORT), background=True)
    try:
        assert sink.stdout.readline().strip() == "ready"
        sent = in_node(state, "h1", SEND, state.host_ip("h3"), str(DPORT), str(count), *map(str, sports))
        assert sent.returncode == 0, sent.stderr
        out, _ = sink.communicate(timeout=60)
    finally:
        if sink.poll() is None:
            sink.kill()
            sink.communicate()
    return {int(p): seqs for p, seqs in json.loads(out.strip().splitlines()[-1]).items()}


def _predicted(sport: int) -> str:
    from headers.inet import build_udp_frame

    h1, h3 = TOPOLOGY.node("h1"), TOPOLOGY.node("h3")
    assert h1.ip is not None and h3.ip is not None
    frame = build_udp_frame(bytes.fromhex("02000a000001"), bytes.fromhex("02000a000003"), h1.ip.ip.packed,
                            h3.ip.ip.packed, sport, DPORT, b"")
    return predicted_port(TOPOLOGY, "leaf1", frame)


def _clear(state, *nodes: str) -> None:
    for node in nodes:
        runtime.control(state.prefix, node, "clear_counters")


def test_ping_crosses_the_fabric_arp_over_the_flood_tree(fabric):
    for src, dst in (("h1", "h3"), ("h4", "h2"), ("h2", "h1")):
        r = sh(fabric, src, "ping", "-c", "2", "-i", "0.2", "-W", "2", fabric.host_ip(dst))
        assert r.returncode == 0, (src, dst, r.stdout, r.stderr)
    st = runtime.status(fabric.prefix)["daemons"]
    assert st["leaf1"]["ecmp"].keys() == {"h3", "h4"} and st["spine1"]["ecmp"] == {}
    # nothing circles: every switch has handled a handful of frames, not a storm
    assert all(sum(p["rx_frames"] for p in d["ports"].values()) < 200 for d in st.values()), st


def test_udp_flows_spread_over_both_spines_as_the_hash_predicts(fabric):
    sports = list(range(41000, 41008))
    predicted = {p: _predicted(p) for p in sports}
    assert set(predicted.values()) == {"p-spine1", "p-spine2"}  # (these eight take both: checked in sim too)
    assert sh(fabric, "h1", "ping", "-c", "1", "-W", "2", fabric.host_ip("h3")).returncode == 0  # ARP resolved
    for attempt in validated(fabric.prefix, **LIMITS):
        with attempt:
            _clear(fabric, "leaf1")
            got = _flows(fabric, sports, 100)
            assert {p: len(s) for p, s in got.items()} == {p: 100 for p in sports}
            counts = runtime.status(fabric.prefix)["daemons"]["leaf1"]["ecmp"]["h3"]
            for port in ("p-spine1", "p-spine2"):
                want = 100 * sum(v == port for v in predicted.values())
                assert want <= counts[port] <= want + SLACK, (port, counts, predicted)


def test_one_flow_takes_one_spine_and_arrives_in_order(fabric):
    sport = 42000
    spine = _predicted(sport).removeprefix("p-")
    other = "spine2" if spine == "spine1" else "spine1"
    assert sh(fabric, "h1", "ping", "-c", "1", "-W", "2", fabric.host_ip("h3")).returncode == 0
    for attempt in validated(fabric.prefix, **LIMITS):
        with attempt:
            _clear(fabric, "leaf1", "spine1", "spine2")
            got = _flows(fabric, [sport], 400)
            assert got[sport] == list(range(400))  # all of them, in order
            st = runtime.status(fabric.prefix)["daemons"]
            assert 400 <= st["leaf1"]["ecmp"]["h3"][f"p-{spine}"] <= 400 + SLACK
            assert st["leaf1"]["ecmp"]["h3"][f"p-{other}"] <= SLACK
            assert 400 <= st[spine]["ports"]["p-leaf2"]["tx_frames"] <= 400 + SLACK
            assert st[other]["ports"]["p-leaf2"]["tx_frames"] <= SLACK
