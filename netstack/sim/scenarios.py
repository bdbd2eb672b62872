"""Generic scenarios: traffic between two hosts of any topology, in either runtime.

- ``udp-stream``: a sequenced UDP stream (``netstack.traffic udp-send`` -> ``udp-sink`` live; the
  :class:`~netstack.sim.hosts.UdpStream` / :class:`~netstack.sim.hosts.UdpSink` host models in
  virtual time): loss, duplicates, reordering, and the paper's link counters B and C on the
  first switch-to-switch link of the path (LinkGuardian Fig. 7).
- ``forwarding``: the same stream at the source NIC's line rate, for the simulator's own speed
  (``netstack bench sim``): events/s and cost per frame through the switches.

Other packages add their own (``netstack.linkguardian.scenarios``, ``netstack.tcsack.scenarios``,
``netstack.sim.tcp``).
"""

from __future__ import annotations

import itertools
import secrets
from collections import deque
from typing import Any

from ..stats import loss_estimate
from ..topo.model import NodeKind, Topology
from ..validity import Validity
from .hosts import UdpSink, UdpStream
from .scenario import Context, Scenario, ScenarioError

#: the udp-stream parameters (the live tools' options)
STREAM_PARAMS: dict[str, Any] = {
    "src": "h1", "dst": "h2", "count": 10_000, "size": 400, "rate_pps": 5000.0, "dport": 5002, "link": "",
}


# ------------------------------------------------------------------------------ paths
def host_path(topology: Topology, src: str, dst: str) -> list[str]:
    """Nodes from ``src`` to ``dst`` along the static forwarding (shortest path, BFS in file order,
    as ``runtime.switch_config`` computes it)."""
    for name in (src, dst):
        try:
            node = topology.node(name)
        except KeyError:
            raise ScenarioError(f"no node {name!r} in topology {topology.name!r}") from None
        if node.kind is NodeKind.SWITCH:
            raise ScenarioError(f"{name} is a switch; give a host or collector")
    prev: dict[str, str | None] = {src: None}
    queue = deque([src])
    while queue:
        cur = queue.popleft()
        if cur == dst:
            break
        if cur != src and topology.node(cur).kind is not NodeKind.SWITCH:
            continue
        for link in topology.links_of(cur):
            nxt = link.peer(cur).node
            if nxt not in prev:
                prev[nxt] = cur
                queue.append(nxt)
    if dst not in prev:
        raise ScenarioError(f"{dst} is not reachable from {src}")
    path = [dst]
    while prev[path[-1]] is not None:
        path.append(prev[path[-1]])  # type: ignore[arg-type]
    return path[::-1]


def measured_link(topology: Topology, src: str, dst: str, name: str = "") -> dict[str, str]:
    """The link whose counters B (sent) and C (received intact) a scenario reports: ``name``, or the
    first switch-to-switch link on the path. ``{"link", "sender", "sender_port", "receiver", "receiver_port"}``."""
    path = host_path(topology, src, dst)
    hops = list(itertools.pairwise(path))
    kinds = {n.name: n.kind for n in topology.nodes}
    for u, v in hops:
        link = next(lk for lk in topology.links_of(u) if lk.peer(u).node == v)
        if (name and link.name == name) or (not name and kinds[u] is NodeKind.SWITCH
                                            and kinds[v] is NodeKind.SWITCH):
            return {"link": link.name, "sender": u, "sender_port": link.end(u).ifname, "receiver": v,
                    "receiver_port": link.end(v).ifname}
    if name:
        raise ScenarioError(f"link {name!r} is not on the path {' - '.join(path)}")
    u, v = hops[len(hops) // 2]
    link = next(lk for lk in topology.links_of(u) if lk.peer(u).node == v)
    return {"link": link.name, "sender": u, "sender_port": link.end(u).ifname, "receiver": v,
            "receiver_port": link.end(v).ifname}


def link_report(where: dict[str, str], sender_port: dict[str, Any], receiver_port: dict[str, Any]) -> dict[str, Any]:
    """Counters B and C of LinkGuardian Fig. 7 from the two ends' port counters (as ``netstack status``
    gives them): actual loss = 1 - C/B."""
    b = sender_port["tx_frames"]
    bad = receiver_port["fcs_errors"] + receiver_port["malformed"]
    c = receiver_port["rx_frames"] - bad
    return {**where, "sent_B": b, "received_C": c, "fcs_drops": receiver_port["fcs_errors"],
            "actual_loss": 1 - c / b if b else 0.0}


def _diff(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    return {k: after[k] - before.get(k, 0) if isinstance(after[k], int) else after[k] for k in after}


def stream_count(ctx: Context) -> int:
    """Datagrams to send: ``count``, or ``rate_pps`` x the run's duration when one is given."""
    p = ctx.params
    if ctx.duration_ns is not None:
        return max(1, round(p["rate_pps"] * ctx.duration_ns / 1e9))
    return int(p["count"])


def summarize_stream(send: dict[str, Any], sink: dict[str, Any], link: dict[str, Any]) -> dict[str, Any]:
    """The fields a stream scenario reports, the same in both runtimes."""
    sent = send["sent"]
    lost = max(0, sent - sink["unique"])
    return {
        "send": send, "sink": sink, "link": link,
        "effective_loss": loss_estimate(lost, sent),
        # in-order delivery: the share of delivered datagrams that arrived after every lower one
        "reordered": loss_estimate(sink["reordered"], max(1, sink["unique"])),
        "duplicates": sink["duplicates"],
    }


# ------------------------------------------------------------------------- udp-stream
def udp_stream_sim(net: Any, ctx: Context) -> dict[str, Any]:
    p = ctx.params
    count = stream_count(ctx)
    where = measured_link(ctx.topology, p["src"], p["dst"], p["link"])
    sink = UdpSink(net.host(p["dst"]), port=p["dport"], expect=count)
    src = UdpStream(net.host(p["src"]), p["dst"], count=count, size=p["size"], rate_pps=p["rate_pps"] or None,
                    dport=p["dport"])
    run_stream(net, src)
    ports_s = net.switch(where["sender"]).counters()[where["sender_port"]]
    ports_r = net.switch(where["receiver"]).counters()[where["receiver_port"]]
    return summarize_stream(src.result(), sink.result(), link_report(where, ports_s, ports_r))


#: virtual time a stream's run may last after its last datagram left (every repair, timeout and
#: courier of the protocols here settles well within it)
SETTLE_NS = 5_000_000_000


def run_stream(net: Any, src: UdpStream) -> None:
    """Run until the network is idle, at most :data:`SETTLE_NS` past the stream's last datagram."""
    end = src.start_ns + round(src.count * src.gap)
    net.run(end + SETTLE_NS)


def live_prefix(ctx: Context) -> str:
    return ctx.prefix or f"sim{secrets.token_hex(3)}"


def udp_stream_live(ctx: Context, extra: Any = None) -> dict[str, Any]:
    """The stream on the real testbed: ``netstack up`` of the topology (its impairments and
    features included), udp-sink and udp-send in the hosts' namespaces, counters from the daemons,
    everything torn down after. ``extra(state)`` adds fields (a protocol's own status)."""
    from .. import experiment, runtime

    p = ctx.params
    count = stream_count(ctx)
    topo = ctx.topology
    where = measured_link(topo, p["src"], p["dst"], p["link"])
    dst_ip = str(topo.node(p["dst"]).ip.ip)  # type: ignore[union-attr]
    prefix = live_prefix(ctx)
    ctx.progress(f"live: bringing up {topo.name} under prefix {prefix}")
    state = runtime.up(topo, prefix)
    lag = experiment.LagWindow(prefix)
    try:
        def ports() -> tuple[dict[str, Any], dict[str, Any]]:
            st = runtime.status(prefix)["daemons"]
            return (st[where["sender"]]["ports"][where["sender_port"]],
                    st[where["receiver"]]["ports"][where["receiver_port"]])

        sink = experiment.start_tool(state, p["dst"], "udp-sink", "--port", str(p["dport"]), "--quiet", "1.5",
                                     "--expect", str(count))
        before = ports()
        lag.start()
        ctx.progress(f"live: {count} datagrams {p['src']} -> {p['dst']} at {p['rate_pps']:g}/s")
        send = experiment.run_tool(state, p["src"], "udp-send", "--dst", dst_ip, "--port", str(p["dport"]),
                                   "--count", str(count), "--rate", str(p["rate_pps"]), "--size", str(p["size"]),
                                   timeout=count / max(1.0, p["rate_pps"]) + 120)
        recv = experiment.finish_tool(sink)
        lag.stop()
        after = ports()
        out = summarize_stream(send, recv, link_report(where, _diff(after[0], before[0]), _diff(after[1], before[1])))
        if extra is not None:
            out.update(extra(state))
        lag.add_tool(f"{p['src']} udp-send", send)
        lag.add_tool(f"{p['dst']} udp-sink", recv)
        return stream_validity(send, count, p["rate_pps"], lag).annotate(out)
    finally:
        runtime.down(prefix)


def stream_validity(send: dict[str, Any], count: int, rate_pps: float, lag: Any) -> Validity:
    """A live stream happened as planned: every datagram sent, at the planned rate (a sender the
    machine held back sends late, in bursts the links were not meant to see), and no process
    waited for the CPU longer than the switches' timers tolerate (netstack.validity)."""
    v = Validity()
    v.planned("datagrams sent", int(send.get("sent", 0)), count, share=1.0)
    if rate_pps:
        took = float(send.get("seconds") or 0.0)
        v.at_least("send rate (datagrams/s)", round(count / took, 1) if took > 0 else 0.0, 0.9 * rate_pps,
                   f" (90 % of the planned {rate_pps:g}/s)")
    lag.check(v, **STREAM_LAG_LIMITS)
    return v


#: scheduling delay a live stream tolerates: well inside LinkGuardian's scaled ackNoTimeout (7 ms,
#: which the switch daemon extends by twice the recent delay) at the 99th percentile, and no
#: stall longer than the 200 KB buffers hold at the stream's rate (~100 ms at 5,000 x 400 B/s)
STREAM_LAG_LIMITS = {"p99_ms": 20.0, "max_ms": 100.0}


# ------------------------------------------------------------------------- forwarding
def forwarding_sim(net: Any, ctx: Context) -> dict[str, Any]:
    """Line-rate MTU frames through the path: what the event loop and the switches cost."""
    p = ctx.params
    count = int(p["count"])
    sink = UdpSink(net.host(p["dst"]), port=5002, expect=count)
    src = UdpStream(net.host(p["src"]), p["dst"], count=count, size=p["size"], dport=5002)
    net.run(ctx.duration_ns)
    hops = len(host_path(ctx.topology, p["src"], p["dst"])) - 1
    return {"send": src.result(), "sink": sink.result(), "hops": hops,
            "goodput_bps": sink.bytes * 8e9 / max(1, (sink.last_ns or 0) - (src.first_ns or 0))}


def two_switch_topology(core: dict[str, Any], *, name: str, prefix: str, rate_bps: int,
                        buffer_bytes: int | None = None, paper_rate_bps: int | None = None) -> dict[str, Any]:
    """h1 - sw1 = sw2 - h2 as a topology document (the shape of LinkGuardian Fig. 7's testbed): every
    link at ``rate_bps`` without delay unless ``core`` (the sw1 = sw2 link's table: delay,
    impairment, features) says otherwise."""
    defaults: dict[str, Any] = {"rate": int(rate_bps), "delay": "0"}
    if buffer_bytes is not None:
        defaults["buffer"] = int(buffer_bytes)
    top: dict[str, Any] = {"name": name, "prefix": prefix}
    if paper_rate_bps:
        top["paper_rate"] = int(paper_rate_bps)
    return {
        "topology": top,
        "defaults": defaults,
        "nodes": [{"name": "h1", "kind": "host", "ip": "10.0.0.1/24"},
                  {"name": "h2", "kind": "host", "ip": "10.0.0.2/24"},
                  {"name": "sw1", "kind": "switch"}, {"name": "sw2", "kind": "switch"}],
        "links": [{"name": "h1-sw1", "a": "h1", "b": "sw1"}, {"name": "sw1-sw2", "a": "sw1", "b": "sw2", **core},
                  {"name": "sw2-h2", "a": "sw2", "b": "h2"}],
    }


SCENARIOS = [
    Scenario("udp-stream", "a sequenced UDP stream from src to dst (udp-send -> udp-sink): loss, duplicates, "
             "reordering, and the link counters B/C of the first switch-to-switch link (or 'link')",
             STREAM_PARAMS, run_sim=udp_stream_sim, run_live=udp_stream_live),
    Scenario("forwarding", "UDP at the source NIC's line rate through the path: the simulator's speed "
             "(events/s, cost per frame)", {"src": "h1", "dst": "h2", "count": 20_000, "size": 1472},
             run_sim=forwarding_sim),
]

__all__ = ["SCENARIOS", "host_path", "link_report", "live_prefix", "measured_link", "stream_count",
           "summarize_stream", "two_switch_topology", "udp_stream_live", "udp_stream_sim"]
