"""netstack.sim.hosts: a simulated kernel answers a UDP datagram to a port nobody holds with ICMP
port unreachable (when the scenario turns it on), within the kernel's per-destination rate limit,
and the sender's socket hears the destination (as ``IP_RECVERR`` reads it live)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from netstack.sim.hosts import ICMP_BURST, ICMP_INTERVAL_NS
from netstack.sim.network import Network
from netstack.sim.packets import PROTO_UDP, Ipv4Flow, icmp_port_unreachable, icmp_unreachable_fields, ipv4_checksum_ok
from netstack.topo.model import load_topology_spec


def _net() -> Network:
    return Network(load_topology_spec("default"), seed=1)


def test_a_closed_port_draws_port_unreachables_within_the_rate_limit():
    net = _net()
    h1, h2 = net.host("h1"), net.host("h2")
    heard: list[tuple[str, int]] = []
    h1.bind_udp(5000, lambda _f: None, on_unreachable=heard.append)
    h2.bind_udp(6000, lambda _f: None)
    h2.icmp_unreachable = True
    h2.unbind_udp(6000)  # its process died: the socket is gone
    flow = h1.flow("h2")
    for _ in range(ICMP_BURST + 3):
        h1.send(flow.udp(5000, 6000, b"probe"))
    net.run(net.loop.now + 10_000_000)
    dst = (".".join(str(b) for b in h2.ip), 6000)
    assert heard == [dst] * ICMP_BURST and h2.icmp_limited == 3
    h1.send(flow.udp(5000, 6000, b"probe"))  # a second later the bucket has a token again
    net.run(net.loop.now + ICMP_INTERVAL_NS)
    h1.send(flow.udp(5000, 6000, b"probe"))
    net.run(net.loop.now + 10_000_000)
    assert len(heard) == ICMP_BURST + 1 and h2.counters()["icmp_sent"] == ICMP_BURST + 1


def test_off_by_default_nothing_answers():
    net = _net()
    h1, h2 = net.host("h1"), net.host("h2")
    heard: list[tuple[str, int]] = []
    h1.bind_udp(5000, lambda _f: None, on_unreachable=heard.append)
    h1.send(h1.flow("h2").udp(5000, 6000, b"x"))
    net.run(net.loop.now + 10_000_000)
    assert heard == [] and h2.rx_unclaimed == 1 and "icmp_sent" not in h2.counters()


@given(payload=st.binary(max_size=64), sport=st.integers(1, 65535), dport=st.integers(1, 65535))
def test_the_icmp_frame_quotes_the_datagram_and_parses_back(payload, sport, dport):
    a, b = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
    original = Ipv4Flow(b"\x02" * 6, b"\x04" * 6, a, b, PROTO_UDP).udp(sport, dport, payload)
    icmp = icmp_port_unreachable(Ipv4Flow(b"\x04" * 6, b"\x02" * 6, b, a, 1), original)
    assert ipv4_checksum_ok(icmp) and icmp_unreachable_fields(icmp) == (sport, b, dport)
    assert icmp_unreachable_fields(original) is None


@given(frame=st.binary(max_size=120))
def test_arbitrary_bytes_are_no_icmp_unreachable_or_a_parsed_one(frame):
    got = icmp_unreachable_fields(frame)
    assert got is None or (isinstance(got[0], int) and len(got[1]) == 4)
