"""ethcount's scenario for ``netstack sim``: ``ethcount-stream``, in virtual time.

A host (``src``, default h1) sends ``count`` frames to another (``dst``, default h2), one every
``1 / rate_pps`` seconds: every ``every``-th is a probe of the counted EtherType
(:mod:`.header`, numbered from 0), the others are of :data:`OTHER_ETHERTYPE`. The counter the
topology file declares on the switch port facing ``src`` must count exactly the probes, and the
destination must receive every one of them, in order::

    netstack sim netstack/examples/ethcount/ethcount.toml --scenario ethcount-stream
    netstack sim netstack/examples/ethcount/ethcount.toml --scenario ethcount-stream --param every=2,5

The result reports every ethcount counter of every switch (``counted``, keyed ``node/port``), and
``ok``: whether the first hop counted exactly as many as were sent and ``dst`` got them all, in
order (the column ``netstack sim``'s table shows). The
scenario runs in virtual time only; the same frames on the live testbed are the example's live test
(tests/test_ethcount_live.py in this folder).

A scenario is a :class:`netstack.sim.scenario.Scenario` in this module's ``SCENARIOS``: the
registry (``scenarios=`` in netstack/protocols.py) is how ``netstack sim`` finds it.
"""

from __future__ import annotations

from typing import Any

from netstack.sim.scenario import Context, Scenario, ScenarioError
from netstack.topo.model import NodeKind, Topology

from .feature import counters_on
from .header import parse_probe_frame, probe_frame

#: what the frames that are not probes carry: IEEE 802 "Local Experimental EtherType 2"
OTHER_ETHERTYPE = 0x88B6
#: virtual time the run lasts after the last frame was sent: each has long arrived by then
SETTLE_NS = 10_000_000
PARAMS: dict[str, Any] = {"src": "h1", "dst": "h2", "count": 1000, "every": 3, "rate_pps": 10_000.0}


def first_hop(topology: Topology, host: str) -> tuple[str, str]:
    """The switch ``host`` is attached to and that switch's port facing it."""
    try:
        link = topology.links_of(host)[0]
    except (KeyError, IndexError):
        raise ScenarioError(f"no host {host!r} with a link in topology {topology.name!r}") from None
    peer = link.peer(host)
    if topology.node(peer.node).kind is not NodeKind.SWITCH:
        raise ScenarioError(f"{host} is linked to {peer.node}, which is no switch")
    return peer.node, peer.ifname


class ProbeSink:
    """A simulated host app: receives the probes of ``ethertype`` and notes their numbers."""

    def __init__(self, host: Any, ethertype: int) -> None:
        self.seqs: list[int] = []
        host.bind_ether(ethertype, self.on_frame)

    def on_frame(self, frame: bytes) -> None:
        self.seqs.append(parse_probe_frame(frame).seq)

    def result(self) -> dict[str, Any]:
        return {"probes": len(self.seqs), "in_order": self.seqs == sorted(self.seqs)}


def _check(p: dict[str, Any]) -> None:
    if p["count"] < 1 or p["every"] < 1 or p["rate_pps"] <= 0:
        raise ScenarioError("ethcount-stream: count and every must be >= 1, rate_pps > 0")
    if -(-p["count"] // p["every"]) > 2 ** 16:
        raise ScenarioError(f"ethcount-stream: at most {2 ** 16} probes (their seq has 16 bits)")


def stream_sim(net: Any, ctx: Context) -> dict[str, Any]:
    """``ethcount-stream`` on :class:`netstack.sim.network.Network` (the topology's switches with
    their features attached, hosts as models)."""
    p = ctx.params
    _check(p)
    switch, port = first_hop(ctx.topology, p["src"])
    feature = counters_on(net.switch(switch)).get(port)
    if feature is None:
        raise ScenarioError(f"{switch}/{port} counts nothing: declare ethcount on that link end in the topology "
                            "file, as netstack/examples/ethcount/ethcount.toml does")
    ethertype = feature.counter.ethertype
    src, dst = net.host(p["src"]), net.host(p["dst"])
    sink = ProbeSink(dst, ethertype)
    gap_ns = round(1e9 / p["rate_pps"])
    probes = 0
    for i in range(p["count"]):
        if i % p["every"] == 0:
            frame = probe_frame(dst.mac, src.mac, probes, ethertype)
            probes += 1
        else:  # a probe's bytes under another EtherType: only the EtherType tells the two apart
            frame = probe_frame(dst.mac, src.mac, i % 2 ** 16, OTHER_ETHERTYPE)
        src.send(frame, i * gap_ns)  # queued on the NIC now, leaving at its time
    net.run(p["count"] * gap_ns + SETTLE_NS)
    counted = {f"{name}/{port_name}": f.status() for name in sorted(net.switches)
               for port_name, f in sorted(counters_on(net.switch(name)).items())}
    first = counted[f"{switch}/{port}"]["ingress"]["frames"]
    received = sink.result()
    return {"ethertype": f"{ethertype:#06x}", "first_hop": f"{switch}/{port}",
            "sent": {"probes": probes, "other": p["count"] - probes}, "counted": counted, "received": received,
            "ok": first == probes and received["probes"] == probes and received["in_order"]}


SCENARIOS = [
    Scenario("ethcount-stream",
             "frames of the counted EtherType among others, src -> dst: the counter at src's switch port counts "
             "exactly the probes (the worked example, netstack/examples/ethcount)",
             PARAMS, run_sim=stream_sim),
]

__all__ = ["OTHER_ETHERTYPE", "PARAMS", "SCENARIOS", "ProbeSink", "first_hop", "stream_sim"]
