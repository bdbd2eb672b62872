"""hypothesis: random small topologies (2-5 switches, shortest-path static forwarding, so every
route is a DAG toward its host) with random rates, delays, buffers, impairments and lossless (PFC)
ports, and random UDP streams between random hosts.

- Conservation: no frame is created or lost except by a counted impairment or drop. Every frame
  a host or a switch (PFC) put on a link was delivered to a host, dropped by a switch (FCS, queue,
  MTU...), lost by an impairment, or consumed as MAC control; nothing is left in flight.
- No event is ever scheduled in the past (the loop raises SimError if one is), and a switch never
  hands over a frame after its release time except a MAC control frame (counted, bounded).
"""

from __future__ import annotations

from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from netstack.sim.hosts import UdpSink, UdpStream
from netstack.sim.network import Network
from netstack.topo.model import NodeKind, topology_from_dict

RATES = ["10Mbit", "100Mbit", "1Gbit", "10Gbit"]
DELAYS = ["0", "500ns", "5us", "50us"]
BUFFERS = ["3KB", "20KB", "200KB"]

#: switch counters that are drops (a frame that arrived and went no further)
SWITCH_DROPS = ("fcs_errors", "malformed", "filtered", "queue_drops", "mtu_drops", "feature_consumed")


@st.composite
def topologies(draw: Any) -> dict[str, Any]:
    n_sw = draw(st.integers(2, 5))
    n_h = draw(st.integers(2, 4))
    switches = [f"s{i}" for i in range(n_sw)]
    hosts = [f"h{i}" for i in range(n_h)]
    edges = [(switches[i], switches[draw(st.integers(0, i - 1))]) for i in range(1, n_sw)]  # a spanning tree
    extra = draw(st.lists(st.tuples(st.integers(0, n_sw - 1), st.integers(0, n_sw - 1)), max_size=3))
    for a, b in extra:  # cycles: forwarding still follows one shortest-path tree per destination
        pair = (switches[max(a, b)], switches[min(a, b)])
        if a != b and pair not in edges and pair[::-1] not in edges:
            edges.append(pair)
    edges += [(h, switches[draw(st.integers(0, n_sw - 1))]) for h in hosts]
    links = []
    for a, b in edges:
        link: dict[str, Any] = {"name": f"{a}-{b}", "a": a, "b": b, "rate": draw(st.sampled_from(RATES)),
                                "delay": draw(st.sampled_from(DELAYS)), "buffer": draw(st.sampled_from(BUFFERS))}
        if draw(st.booleans()):
            imp: dict[str, Any] = {"loss": draw(st.sampled_from([0.0, 0.01, 0.2])),
                                   "corrupt": draw(st.sampled_from([0.0, 0.01, 0.2])),
                                   "direction": draw(st.sampled_from(["a>b", "b>a", "both"]))}
            if a.startswith("s") and b.startswith("s") and draw(st.booleans()):
                imp["backend"] = "switch"
                imp["direction"] = draw(st.sampled_from(["a>b", "b>a", "both"]))
            link["impairment"] = imp
        if b.startswith("s") and draw(st.booleans()):
            # a lossless ingress port: PFC pauses toward its peer when 2 KB are queued from it
            link["features"] = {"b": {"switch": {"lossless": True, "xoff": "2KB", "xon": "500B"}}}
        links.append(link)
    return {"topology": {"name": "random", "prefix": "rnd"},
            "nodes": [{"name": h, "kind": "host", "ip": f"10.0.0.{i + 1}/24"} for i, h in enumerate(hosts)]
            + [{"name": s, "kind": "switch"} for s in switches],
            "links": links}


STREAMS = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 200), st.integers(4, 1472),
                             st.sampled_from([1e3, 1e5, 1e7])), min_size=1, max_size=5)


@settings(max_examples=150)
@given(doc=topologies(), streams=STREAMS, seed=st.integers(0, 2**32))
def test_no_frame_is_created_or_lost_unaccounted(doc, streams, seed):
    topo = topology_from_dict(doc)
    net = Network(topo, seed=seed)
    hosts = sorted(net.hosts)
    for i, (a, b, count, size, pps) in enumerate(streams):
        src, dst = hosts[a % len(hosts)], hosts[b % len(hosts)]
        if src == dst:
            continue
        UdpSink(net.host(dst), port=6000 + i)
        UdpStream(net.host(src), dst, count=count, size=size, rate_pps=pps, dport=6000 + i)
    net.run()  # SimError here would be an event in the past

    assert net.in_flight() == 0
    for ch in net.channels:
        assert ch.sent == ch.delivered + ch.lost and ch.pending == 0
    created = sum(h.tx_frames for h in net.hosts.values())
    consumed = sum(h.rx_frames for h in net.hosts.values())
    late = 0
    for sn in net.switches.values():
        c = sn.switch.counters()
        for p in c.values():
            created += p["pauses_tx"] + p["resumes_tx"] + p["pause_refreshes_tx"]  # PFC: the switch's own
            # (impair_lost: the switch backend's own impairment lost it on the wire)
            consumed += p["mac_control_rx"] + p["impair_lost"] + sum(p[k] for k in SWITCH_DROPS)
        consumed += sn.switch.switch_counters()["unknown_port"]
    consumed += sum(ch.lost for ch in net.channels)
    late = sum(ch.late for ch in net.channels)
    assert created == consumed, (created, consumed)
    # only MAC control frames (PFC) can be handed over past their release time (port.add_control)
    pfc = sum(p["pauses_tx"] + p["resumes_tx"] + p["pause_refreshes_tx"]
              for sn in net.switches.values() for p in sn.switch.counters().values())
    assert late <= pfc
    drops = {k: sum(p[k] for sn in net.switches.values() for p in sn.switch.counters().values()) for k in SWITCH_DROPS}
    for what, n in (("pfc", pfc), ("late", late), ("queue drops", drops["queue_drops"]),
                    ("fcs drops", drops["fcs_errors"]), ("link losses", sum(ch.lost for ch in net.channels)),
                    ("host checksum drops", sum(h.rx_checksum_drops for h in net.hosts.values()))):
        event(f"{what}: {'yes' if n else 'no'}")
    assert all(n.kind is not NodeKind.SWITCH or n.name in net.switches for n in topo.nodes)
