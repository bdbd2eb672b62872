"""ECMP in the switch engine (netstack/switch/ecmp.py, ``SwitchConfig.ecmp_groups``,
``flood_ports``): a flow sticks to one next hop whatever the seed, flows spread over every next
hop, any bytes give a port, two seeds choose differently, learning leaves a group alone,
floods stay on the flood ports, and the plain-port fast path queues exactly what the frame by
frame path queues."""

from __future__ import annotations

import random
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.switch import ConfigError, PortConfig, Switch, SwitchConfig
from netstack.switch.ecmp import EcmpGroup, flow_key, multiplier

from . import GBPS, class_tos, mac, raw_frame

DST = mac(7)
SRC = mac(1)
GROUP = ("p1", "p2", "p3")


def ipv4_frame(src_ip: bytes, dst_ip: bytes, proto: int, sport: int = 0, dport: int = 0, *, payload: bytes = b"",
               ident: int = 0, ttl: int = 64, frag: int = 0x4000, options: bytes = b"", tos: int = 0,
               dst_mac: bytes = DST, src_mac: bytes = SRC) -> bytes:
    """Ethernet/IPv4 (with ``options``)/a 4-byte port header (when ``proto`` has ports)/payload."""
    l4 = struct.pack("!HH", sport, dport) + payload
    ihl = 5 + len(options) // 4
    ip = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, tos, 4 * ihl + len(l4), ident, frag, ttl, proto, 0, src_ip,
                     dst_ip) + options
    return dst_mac + src_mac + b"\x08\x00" + ip + l4


def udp(sport: int, dport: int = 5000, src: int = 1, dst: int = 7, size: int = 100, **kw) -> bytes:
    return ipv4_frame(bytes([10, 0, 0, src]), bytes([10, 0, 0, dst]), 17, sport, dport,
                      payload=bytes(max(0, size - 42)), **kw)


def group(seed: int = 0, n: int = 3) -> EcmpGroup:
    return EcmpGroup(tuple(range(1, n + 1)), tuple(f"p{i}" for i in range(1, n + 1)), multiplier(seed))


def ecmp_switch(seed: int = 0, n_ports: int = 4, flood: tuple[str, ...] | None = None, **port_kw) -> Switch:
    ports = tuple(PortConfig(f"p{i}", **port_kw) for i in range(n_ports))
    return Switch(SwitchConfig("s1", ports, {SRC: "p0"}, ecmp_groups={DST: GROUP}, ecmp_seed=seed,
                               ecmp_names={DST: "h7"}, flood_ports=flood))


def port_of(sw: Switch, frame: bytes, in_port: str = "p0") -> list[str]:
    """The ports ``frame`` leaves ``sw`` by (an unpaced switch releases at once)."""
    sw.receive(in_port, frame, sw.now + 1)
    return [p for p, _ in sw.transmit(sw.now + 1)]


# ------------------------------------------------------------------------------ the hash
flows = st.tuples(st.binary(min_size=4, max_size=4), st.binary(min_size=4, max_size=4), st.sampled_from([6, 17, 132]),
                  st.integers(0, 65535), st.integers(0, 65535))


@given(flows, st.integers(0, 2**64 - 1), st.lists(st.tuples(st.integers(0, 1400), st.integers(0, 65535),
                                                             st.integers(1, 255), st.integers(0, 63)),
                                                   min_size=2, max_size=6))
def test_every_frame_of_a_flow_takes_one_next_hop_whatever_the_seed(flow, seed, frames):
    """Length, payload, IP ID, TTL and ToS differ from frame to frame of a flow; the port does not."""
    src, dst, proto, sport, dport = flow
    g = group(seed)
    picked = {g.pick(ipv4_frame(src, dst, proto, sport, dport, payload=bytes(size), ident=ident, ttl=ttl,
                                tos=tos << 2)) for size, ident, ttl, tos in frames}
    assert len(picked) == 1


def test_the_key_is_the_five_tuple_and_its_fields_each_count():
    base = ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x07", 17, 1000, 2000)
    assert flow_key(base) == zlib.crc32(b"\x0a\0\0\x01\x0a\0\0\x07" + struct.pack("!HH", 1000, 2000), 17)
    others = [ipv4_frame(b"\x0a\0\0\x02", b"\x0a\0\0\x07", 17, 1000, 2000),
              ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x08", 17, 1000, 2000),
              ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x07", 6, 1000, 2000),
              ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x07", 17, 1001, 2000),
              ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x07", 17, 1000, 2001)]
    assert len({flow_key(f) for f in [base, *others]}) == 6


def test_options_fragments_and_portless_protocols_hash_what_there_is():
    plain = ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x07", 6, 1000, 2000)
    with_options = ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x07", 6, 1000, 2000, options=b"\x01\x01\x01\x00")
    assert flow_key(with_options) == flow_key(plain)  # the ports where the options end
    l3 = zlib.crc32(b"\x0a\0\0\x01\x0a\0\0\x07", 17)
    first_fragment = ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x07", 17, 1000, 2000, frag=0x2000)  # MF
    later_fragment = ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x07", 17, 4242, 4242, frag=0x00B9)  # offset, no ports
    assert flow_key(first_fragment) == flow_key(later_fragment) == l3  # a datagram's fragments stay together
    icmp = ipv4_frame(b"\x0a\0\0\x01", b"\x0a\0\0\x07", 1, 0x0800, 0x1234)
    assert flow_key(icmp) == zlib.crc32(b"\x0a\0\0\x01\x0a\0\0\x07", 1)
    truncated = plain[:36]  # the ports cut off
    assert flow_key(truncated) == zlib.crc32(b"\x0a\0\0\x01\x0a\0\0\x07", 6)
    arp = raw_frame(DST, SRC, 0x0806, 60)
    assert flow_key(arp) == zlib.crc32(arp[:14])
    tagged = DST + SRC + b"\x81\x00\x00\x07" + plain[12:]
    assert flow_key(tagged) == zlib.crc32(tagged[:14])


@given(st.binary(min_size=14, max_size=80), st.integers(0, 2**64 - 1), st.integers(1, 8))
def test_any_bytes_give_a_next_hop_of_the_group(frame, seed, n):
    g = group(seed, n)
    port = g.pick(frame)
    assert port in g.ports
    assert port == g.ports[g.choose(flow_key(frame))]  # the fast path keys as flow_key does
    assert sum(g.c.frames) == 1


@given(flows, st.integers(0, 2**64 - 1), st.integers(1, 8))
def test_the_fast_key_and_flow_key_agree_on_ipv4(flow, seed, n):
    src, dst, proto, sport, dport = flow
    g = group(seed, n)
    for frame in (ipv4_frame(src, dst, proto, sport, dport), ipv4_frame(src, dst, proto, sport, dport, frag=0x2000)):
        assert g.pick(frame) == g.ports[g.choose(flow_key(frame))]


def _chi_square(counts: list[int]) -> float:
    expected = sum(counts) / len(counts)
    return sum((c - expected) ** 2 / expected for c in counts)


@pytest.mark.parametrize("n", [2, 3, 4])
@pytest.mark.parametrize("seed", [0, 1, 2, 0xDEADBEEF, 2**63 + 5])
def test_random_flows_spread_evenly_over_every_next_hop(n, seed):
    """4000 random 5-tuples (a fixed stream: no flake) over n next hops: every hop within 10 % of
    its share, and a chi-square far below what 3 degrees of freedom give once in 10^5 (25)."""
    rng = random.Random(seed)
    g = group(seed, n)
    for _ in range(4000):
        g.pick(ipv4_frame(rng.randbytes(4), rng.randbytes(4), rng.choice((6, 17)), rng.getrandbits(16),
                          rng.getrandbits(16)))
    counts = g.c.frames
    assert all(abs(c - 4000 / n) < 0.1 * 4000 / n for c in counts), counts
    assert _chi_square(counts) < 25


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_hosts_flows_with_consecutive_source_ports_spread_too(seed):
    """What a testbed sends: one host pair, the source port counting up (the worst case for a
    linear hash of the key)."""
    g = group(seed, 2)
    for sport in range(40000, 41000):
        g.pick(udp(sport))
    a, b = g.c.frames
    assert abs(a - b) < 100, (a, b)
    g8 = group(seed, 2)
    for sport in range(40000, 40008):
        g8.pick(udp(sport))
    assert min(g8.c.frames) >= 1  # eight flows use both hops


def test_two_switches_seeds_choose_independently_no_polarization():
    """Two switches with two next hops each agree on about half the flows, whatever their seeds;
    a seeded CRC (``crc32(key, seed)``) would agree on all of them or on none."""
    rng = random.Random(7)
    frames = [ipv4_frame(rng.randbytes(4), rng.randbytes(4), 17, rng.getrandbits(16), 5000) for _ in range(4000)]
    keys = [flow_key(f) for f in frames]
    for s1, s2 in [(0, 1), (1, 2), (12345, 54321), (2**64 - 1, 0)]:
        a, b = group(s1, 2), group(s2, 2)
        agree = sum(a.choose(k) == b.choose(k) for k in keys) / len(keys)
        assert 0.4 < agree < 0.6, (s1, s2, agree)
    crc_agree = sum(zlib.crc32(f[26:38], 1) & 1 == zlib.crc32(f[26:38], 2) & 1 for f in frames) / len(frames)
    assert crc_agree in (0.0, 1.0)  # (why the seed picks a multiplier instead)


_KEYS = [flow_key(udp(sport, 5000, src=1 + sport % 7, dst=200 - sport % 5)) for sport in range(30000, 31000)]


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_any_two_seeds_agree_on_about_half_of_the_flows(s1, s2):
    if s1 == s2:
        return
    a, b = group(s1, 2), group(s2, 2)
    agree = sum(a.choose(k) == b.choose(k) for k in _KEYS) / len(_KEYS)
    assert 0.35 < agree < 0.65, agree


def test_seeds_give_distinct_odd_multipliers():
    ms = [multiplier(s) for s in range(2000)]
    assert len(set(ms)) == 2000 and all(m & 1 and 0 < m < 2**32 for m in ms)


# ----------------------------------------------------------------------------- the switch
def test_a_frame_to_a_group_leaves_by_the_port_its_flow_picks_and_is_counted():
    sw = ecmp_switch(seed=3)
    g = group(3)
    used = set()
    for sport in range(1000, 1032):
        frame = udp(sport)
        want = GROUP[g.choose(flow_key(frame))]
        assert port_of(sw, frame) == [want]
        used.add(want)
    assert used == set(GROUP)
    counts = sw.ecmp_counters()
    assert list(counts) == ["h7"] and list(counts["h7"]) == list(GROUP) and sum(counts["h7"].values()) == 32
    assert next(r for r in sw.fdb_entries() if r["mac"] == DST.hex(":")) == {
        "mac": DST.hex(":"), "port": "p1", "static": True, "ecmp": list(GROUP)}
    assert sw.fdb.static[DST] == 1  # readers of the static table see the group's first port
    sw.clear_counters()
    assert sum(sw.ecmp_counters()["h7"].values()) == 0


def test_a_switch_without_groups_reports_none():
    sw = Switch(SwitchConfig("s1", (PortConfig("p0"), PortConfig("p1")), {DST: "p1"}))
    assert sw.ecmp is None and sw.ecmp_counters() == {}
    assert port_of(sw, udp(1)) == ["p1"]


def test_learning_never_moves_a_group_and_unnamed_groups_show_their_mac():
    ports = tuple(PortConfig(f"p{i}") for i in range(4))
    sw = Switch(SwitchConfig("s1", ports, ecmp_groups={DST.hex(":"): list(GROUP)}))
    sw.receive("p0", udp(1, src=7, src_mac=DST, dst_mac=mac(9)), 1)  # the group's MAC as a source on p0
    assert DST not in sw.fdb.learned and sw.fdb.moves == 0
    assert port_of(sw, udp(5)) != ["p0"]
    assert list(sw.ecmp_counters()) == [DST.hex(":")]


def test_floods_stay_on_the_flood_ports_and_blocked_ports_learn_nothing():
    sw = ecmp_switch(flood=("p0", "p1"))
    broadcast = raw_frame(b"\xff" * 6, mac(5), 0x0806)
    assert port_of(sw, broadcast) == ["p1"]  # not p2, p3: off the tree
    assert sorted(port_of(sw, raw_frame(mac(9), mac(5)))) == ["p1"]  # unknown unicast likewise
    assert port_of(sw, raw_frame(mac(5), mac(6)), "p2") == ["p0"]  # p2 forwards (p0 learned mac 5)...
    assert mac(6) not in sw.fdb.learned  # ...but learns nothing
    assert sw.fdb.learned[mac(5)] == 0
    every = ecmp_switch()
    assert sorted(port_of(every, broadcast)) == ["p1", "p2", "p3"]  # no flood ports: every port


@pytest.mark.parametrize(("kw", "field"), [
    ({"ecmp_groups": {DST: ("p1", "p9")}}, "switch.ecmp_groups.02:00:00:00:00:07"),
    ({"ecmp_groups": {DST: ("p1", "p1")}}, "switch.ecmp_groups.02:00:00:00:00:07"),
    ({"ecmp_groups": {DST: ()}}, "switch.ecmp_groups.02:00:00:00:00:07"),
    ({"ecmp_groups": {DST: "p1"}}, "switch.ecmp_groups.02:00:00:00:00:07"),
    ({"ecmp_groups": {b"\x01" * 6: ("p1",)}}, "switch.ecmp_groups.01:01:01:01:01:01"),
    ({"ecmp_groups": {DST: ("p1", "p2")}, "static_fdb": {DST: "p1"}}, "switch.ecmp_groups.02:00:00:00:00:07"),
    ({"ecmp_groups": ["p1"]}, "switch.ecmp_groups"),
    ({"ecmp_seed": -1}, "switch.ecmp_seed"),
    ({"ecmp_seed": 2**64}, "switch.ecmp_seed"),
    ({"ecmp_seed": True}, "switch.ecmp_seed"),
    ({"ecmp_names": {DST: 3}}, "switch.ecmp_names"),
    ({"flood_ports": ("p0", "p7")}, "switch.flood_ports"),
    ({"flood_ports": "p0"}, "switch.flood_ports"),
])
def test_a_bad_ecmp_config_names_its_field(kw, field):
    with pytest.raises(ConfigError) as err:
        SwitchConfig("s1", (PortConfig("p0"), PortConfig("p1"), PortConfig("p2")), **kw)
    assert err.value.field == field


def test_the_json_form_a_daemon_config_carries():
    cfg = SwitchConfig.from_json({"name": "s1", "ports": [{"name": f"p{i}"} for i in range(4)],
                                  "ecmp_groups": {DST.hex(":"): list(GROUP)}, "ecmp_seed": 9,
                                  "ecmp_names": {DST.hex(":"): "h7"}, "flood_ports": ["p0", "p1"]})
    assert cfg.ecmp_groups == {DST: GROUP} and cfg.ecmp_names == {DST: "h7"} and cfg.flood_ports == ("p0", "p1")
    assert cfg.all_static() == {DST: "p1"}


# --------------------------------------------------------------- fast path = frame by frame
#: (source port of the flow, frames, size): runs of flows from mac 1 to the group's MAC
flow_run = st.tuples(st.integers(0, 15), st.integers(1, 40), st.integers(60, 1514))
batches = st.lists(st.tuples(st.integers(0, 40_000), st.lists(flow_run, min_size=1, max_size=6),
                             st.booleans()), min_size=1, max_size=12)


def _build(fast: bool, lossless: bool) -> Switch:
    ports = [PortConfig("p0", rate_bps=GBPS, **({"lossless": True, "xoff_bytes": 20_000, "xon_bytes": 8_000}
                                                 if lossless else {})),
             PortConfig("p1", rate_bps=GBPS, buffer_bytes=30_000), PortConfig("p2", rate_bps=2 * GBPS),
             PortConfig("p3", rate_bps=None), PortConfig("p4", rate_bps=GBPS, ecn_threshold_bytes=5_000)]
    sw = Switch(SwitchConfig("s1", tuple(ports), {SRC: "p0"}, ecmp_groups={DST: ("p1", "p2", "p3", "p4")},
                             ecmp_seed=11))
    if not fast:
        sw.plain_path = False
        sw.departure_hook = lambda *args: None
    return sw


def _play(events, fast: bool, lossless: bool):
    sw = _build(fast, lossless)
    out = []
    t = fid = 0
    for gap, runs, shuffle in events:
        t += gap
        frames = []
        for flow, count, size in runs:
            for _ in range(count):
                fid += 1
                body = bytearray(udp(40000 + flow, size=size, tos=class_tos(flow % 4 if lossless else 0)))
                body[42:46] = fid.to_bytes(4, "big")
                frames.append(bytes(body))
        if shuffle:
            frames = frames[::2] + frames[1::2]  # flows interleaved within one header run
        sw.receive_batch("p0", frames, t)
        out += [(t, p, fs) for p, fs in sw.transmit_by_port(t)]
    t += 10**9
    out += [(t, p, fs) for p, fs in sw.transmit_by_port(t)]
    return out, sw.counters(), sw.ecmp_counters(), sorted(sw.fdb_entries(), key=str)


@settings(max_examples=100, deadline=None)
@given(batches, st.booleans())
def test_the_fast_path_queues_a_group_exactly_as_frame_by_frame(events, lossless):
    assert _play(events, True, lossless) == _play(events, False, lossless)
