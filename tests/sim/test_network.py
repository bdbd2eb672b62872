"""A topology in virtual time: the live runtime's switch configs, exact timing, the live impairments,
features from the file, and every frame accounted for."""

from __future__ import annotations

import itertools

import pytest

from netstack.linkguardian import features
from netstack.runtime import switch_config
from netstack.sim.hosts import UdpSink, UdpStream
from netstack.sim.network import CORRUPT_OFFSET, Network
from netstack.sim.packets import UDP_HEADERS, ipv4_checksum_ok
from netstack.sim.scenario import resolve_topology
from netstack.switch import SwitchConfig
from netstack.topo import netns
from netstack.topo.model import TopologyError, load_topology, loads_topology

from . import PAIR, pair


def test_switches_get_exactly_the_live_daemons_config():
    topo = load_topology(None)
    net = Network(topo)
    built = netns.plan(topo)
    for name in ("sw1", "sw2"):
        assert net.switch(name).config == SwitchConfig.from_json(switch_config(topo, built, name)["switch"])
    assert set(net.hosts) == {"h1", "h2", "c1"} and net.host("c1").kind.value == "collector"
    # one channel per direction of every link, host NICs on the host side
    assert len(net.channels) == 2 * len(topo.links)
    assert net.channel("h1-sw1", "h1").nic is not None and net.channel("h1-sw1", "sw1").nic is None


def test_a_frame_takes_serialisation_and_delay_at_every_hop_exactly():
    net = pair()
    sink = UdpSink(net.host("h2"))
    UdpStream(net.host("h1"), "h2", count=1, size=1000 - UDP_HEADERS)
    net.run()
    # 1000 B + 24 B of preamble/IFG/FCS at 1 Gbit/s = 8192 ns per hop; 2 us on sw1 = sw2 (the
    # software FCS is the frame's FCS, not extra line time)
    assert sink.first_ns == 3 * 8192 + 2000
    assert sink.unique == 1 and net.in_flight() == 0


def test_a_host_stack_delays_every_frame_once_each_way_and_keeps_their_order():
    # Host.stack_ns: the sender's stack before its NIC, the receiver's before its app, nothing else
    net = pair()
    net.host("h1").stack_ns = 700
    net.host("h2").stack_ns = 300
    sink = UdpSink(net.host("h2"), expect=50)
    UdpStream(net.host("h1"), "h2", count=50, size=1000 - UDP_HEADERS)
    net.run()
    assert sink.first_ns == 3 * 8192 + 2000 + 700 + 300
    assert sink.unique == 50 and sink.reordered == 0 and net.in_flight() == 0
    assert net.host("h1").tx_frames == net.host("h2").rx_frames == 50


def test_corruption_on_a_switch_link_becomes_an_fcs_drop_there():
    net = pair('[links.impairment]\ncorrupt = 0.05\nloss = 0.02\ndirection = "a>b"', seed=3)
    sink = UdpSink(net.host("h2"), expect=4000)
    UdpStream(net.host("h1"), "h2", count=4000, size=200)
    net.run()
    ch = net.channel("sw1-sw2", "sw1")
    c2 = net.switch("sw2").counters()["p-sw1"]
    assert ch.corrupted > 100 and ch.lost > 40
    assert c2["fcs_errors"] == ch.corrupted  # every corrupted frame fails the software FCS
    assert sink.unique == 4000 - ch.corrupted - ch.lost and sink.duplicates == 0
    assert net.channel("sw1-sw2", "sw2").sent == 0  # nothing went back: the impairment is one way


def test_corruption_on_a_host_link_is_a_checksum_drop_at_the_host_as_nft_does_it():
    text = PAIR.replace("{core}", "").replace('a = "sw2"\nb = "h2"\n',
                                              'a = "sw2"\nb = "h2"\n[links.impairment]\ncorrupt = 0.1\n')
    net = Network(loads_topology(text), seed=5)
    sink = UdpSink(net.host("h2"))
    seen = []
    orig = net.host("h2").on_frame

    def spy(port, frame):
        seen.append(frame)
        orig(port, frame)

    net.channel("sw2-h2", "sw2")._deliver = spy
    UdpStream(net.host("h1"), "h2", count=2000, size=100)
    net.run()
    ch = net.channel("sw2-h2", "sw2")
    bad = [f for f in seen if not ipv4_checksum_ok(f)]
    assert ch.corrupted > 100 and len(bad) == ch.corrupted
    assert all(f[CORRUPT_OFFSET] in (0x55, 0xAA) for f in bad)  # byte 22 (the TTL), as nft writes it
    assert net.host("h2").rx_checksum_drops == ch.corrupted and sink.unique == 2000 - ch.corrupted


def test_the_switch_backend_runs_the_sending_ports_gilbert_elliott_model():
    core = ('[links.impairment]\nbackend = "switch"\ncorrupt = 0.001\np_good_to_bad = 0.01\n'
            'p_bad_to_good = 0.2\ncorrupt_bad = 0.5\nseed = 99')
    net = pair(core, seed=4)
    port = net.switch("sw1").config.port("p-sw2")
    assert port.impairment is not None and port.impairment.p_good_to_bad == 0.01
    assert port.impairment.seed == 4  # the run's seed, not the file's (which seeds live runs)
    assert net.channel("sw1-sw2", "sw1").impair is None  # not drawn twice
    UdpStream(net.host("h1"), "h2", count=5000, size=100)
    sink = UdpSink(net.host("h2"))
    net.run()
    c1, c2 = net.switch("sw1").counters()["p-sw2"], net.switch("sw2").counters()["p-sw1"]
    # stationary: 0.01 / (0.01 + 0.2) of the frames in the bad state, half of those corrupted: ~2.5 %
    assert 60 < c1["impair_corrupted"] < 250 and c2["fcs_errors"] == c1["impair_corrupted"]
    assert sink.unique == 5000 - c1["impair_corrupted"]
    # bursty: the bad state's losses come in runs, far more back-to-back pairs than Bernoulli gives
    seq = sorted(set(range(5000)) - {i for i in range(5000) if sink.seen[i]})
    pairs = sum(1 for a, b in itertools.pairwise(seq) if b == a + 1)
    p = len(seq) / 5000
    assert pairs > 5 * p * len(seq)


def test_scripted_fates_lose_duplicate_and_reorder():
    net = pair()
    sink = UdpSink(net.host("h2"), record=True)
    fates = {3: (True, False, 0), 5: (False, True, 0), 7: (False, False, 50_000)}
    net.channel("sw1-sw2", "sw1").fate = lambda i, frame: fates.get(i, (False, False, 0))
    UdpStream(net.host("h1"), "h2", count=20, size=100, rate_pps=1_000_000)
    net.run()
    assert 3 not in sink.order and sink.duplicates == 1 and sink.order[-1] == 7 and sink.reordered == 1
    ch = net.channel("sw1-sw2", "sw1")
    assert ch.sent == 20 and ch.lost == 1 and ch.duplicated == 1 and ch.delivered == 20


def test_linkguardian_from_the_topology_file():
    net = Network(resolve_topology("lg-testbed"))
    (snd,), (rcv,) = features(net.switch("sw1")), features(net.switch("sw2"))
    assert (snd.role, snd.port, snd.enabled) == ("sender", "p-sw2", True)
    assert (rcv.role, rcv.port, rcv.enabled) == ("receiver", "p-sw1", True)
    # the paper's 100G settings scaled to the 100 Mbit/s link, N = 1 from the file
    assert snd.params.n_copies == 1 and snd.params.ack_no_timeout_ns == 7_000_000 and snd.params.time_scale == 1000
    assert net.features == {"sw1": ["p-sw2:linkguardian"], "sw2": ["p-sw1:linkguardian"]}


@pytest.mark.parametrize("tables,problem", [
    ('[links.features.a]\nlinkguardian = { role = "sender" }', "needs a sender at one end"),
    ('[links.features.a]\nlinkguardian = { role = "sender" }\n[links.features.b]\n'
     'linkguardian = { role = "sender" }', "both senders"),
    ('[links.features.a]\nlinkguardian = { role = "sender", mode = "fast" }\n[links.features.b]\n'
     'linkguardian = { role = "receiver" }', "mode"),
    ('[links.features.a]\nlinkguardian = { role = "sender", copies = 2 }\n[links.features.b]\n'
     'linkguardian = { role = "receiver", copies = 3 }', "differs from the other end"),
    ('[links.features.a]\nlinkguardian = { role = "sender", colour = 1 }\n[links.features.b]\n'
     'linkguardian = { role = "receiver" }', "unknown option"),
    ('[links.features.a]\nteleport = { }', "unknown feature"),
])
def test_bad_features_name_the_field(tables, problem):
    with pytest.raises(TopologyError, match=problem) as exc:
        pair(tables)
    assert "links[sw1-sw2].features" in str(exc.value)


def test_linkguardian_between_a_host_and_a_switch_is_refused():
    text = PAIR.replace("{core}", "").replace('name = "h1-sw1"\na = "h1"\nb = "sw1"\n',
                                              'name = "h1-sw1"\na = "h1"\nb = "sw1"\n[links.features.a]\n'
                                              'linkguardian = { role = "sender" }\n[links.features.b]\n'
                                              'linkguardian = { role = "receiver" }\n')
    with pytest.raises(TopologyError, match="between two switches"):
        Network(loads_topology(text))


def test_every_frame_is_accounted_for_and_nothing_is_left_in_flight():
    net = pair('[links.impairment]\nloss = 0.01\ncorrupt = 0.01\ndirection = "both"', seed=2)
    for src, dst, port in (("h1", "h2", 5002), ("h2", "h1", 5003)):
        UdpSink(net.host(dst), port=port)
        UdpStream(net.host(src), dst, count=3000, size=300, dport=port)
    net.run(until_ns=1_000_000)
    assert net.in_flight() > 0  # mid-run: frames on links and in queues
    net.run()
    assert net.in_flight() == 0
    for ch in net.channels:
        assert ch.sent == ch.delivered + ch.lost and ch.pending == 0
    c = net.counters()
    assert c["events"] == net.loop.events and c["now_ns"] == net.now


def test_a_declared_flap_loses_the_frames_of_its_outages_and_the_switches_count_them():
    # 10 000 datagrams at 100 kpps = 100 ms; two 10 ms outages from 20 ms on, 30 ms apart
    net = pair('[links.flap]\ndown = "10ms"\nup = "20ms"\ncount = 2\nstart = "20ms"')
    sink = UdpSink(net.host("h2"), expect=10_000)
    UdpStream(net.host("h1"), "h2", count=10_000, size=200, rate_pps=100_000)
    net.run()
    c1 = net.switch("sw1").counters()["p-sw2"]
    c2 = net.switch("sw2").counters()["p-sw1"]
    assert c1["link_down"] == c2["link_down"] == 2 and c1["carrier"] and c2["carrier"]
    lost = 10_000 - sink.unique
    assert lost == c1["carrier_drops"] + net.channel("sw1-sw2", "sw1").carrier_lost
    assert 1900 <= lost <= 2100  # 2 x 10 ms of a 100 kpps stream
    assert sink.duplicates == 0 and net.in_flight() == 0


def test_a_link_declared_down_carries_nothing_until_set_up():
    text = PAIR.replace("{core}", "").replace('a = "sw2"\nb = "h2"\n', 'a = "sw2"\nb = "h2"\nstate = "down"\n')
    net = Network(loads_topology(text))
    sink = UdpSink(net.host("h2"))
    UdpStream(net.host("h1"), "h2", count=100, size=200, rate_pps=10_000)
    net.run()
    assert sink.unique == 0 and net.switch("sw2").counters()["p-h2"]["carrier_drops"] == 100
    net.set_link("sw2-h2", True)
    UdpStream(net.host("h1"), "h2", count=100, size=200, rate_pps=10_000, start_ns=net.now)
    net.run()
    assert sink.unique == 100


def test_shaping_declared_on_a_host_link_runs_as_netem_would():
    text = PAIR.replace("{core}", "").replace(
        'a = "h1"\nb = "sw1"\n', 'a = "h1"\nb = "sw1"\n[links.impairment]\ndelay = "1ms"\njitter = "500us"\n'
                                 'duplicate = 0.1\n')
    net = Network(loads_topology(text), seed=5)
    sink = UdpSink(net.host("h2"), expect=2000)
    UdpStream(net.host("h1"), "h2", count=2000, size=200, rate_pps=100_000)
    net.run()
    ch = net.channel("h1-sw1", "h1")
    assert sink.unique == 2000 and sink.duplicates == ch.duplicated > 100
    assert sink.reordered > 0
