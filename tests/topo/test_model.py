"""Topology model: parsing, defaults, naming, and every validation error (pure, no root)."""

from __future__ import annotations

import ipaddress
import textwrap

import pytest

from netstack.topo import model
from netstack.topo.model import (
    Backend,
    Direction,
    NodeKind,
    TopologyError,
    default_topology,
    derived_mac,
    load_topology,
    loads_topology,
    parse_delay,
    parse_probability,
    parse_rate,
    parse_size,
)
from tests.topologies import LINE_LINKS, LINE_NODES

NODES = LINE_NODES
LINKS = LINE_LINKS
GOOD = NODES + LINKS


def _load(text: str) -> model.Topology:
    return loads_topology(textwrap.dedent(text), "test.toml")


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("text", "bps"),
    [("100Mbit", 100_000_000), ("1Gbit", 10**9), ("1.5kbit", 1500), ("10mbit", 10**7), ("250bit", 250),
     (12345, 12345), ("2.5Gbit", 2_500_000_000), ("1Tbit", 10**12)],
)
def test_parse_rate(text, bps):
    assert parse_rate(text) == bps


@pytest.mark.parametrize("bad", ["100Mb", "100Mbps", "100MB", "fast", "", "-1Mbit", 0, -5, True, 1.5, "0Mbit"])
def test_parse_rate_rejects(bad):
    with pytest.raises(ValueError, match=r"is not a (positive )?rate"):
        parse_rate(bad)


@pytest.mark.parametrize(
    ("text", "ns"),
    [("10us", 10_000), ("1ms", 1_000_000), ("1.5ms", 1_500_000), ("50ns", 50), ("2s", 2 * 10**9), ("0", 0),
     (0, 0), ("7µs", 7000)],
)
def test_parse_delay(text, ns):
    assert parse_delay(text) == ns


@pytest.mark.parametrize("bad", ["10", "1 min", 5, "fast", "-1ms", None])
def test_parse_delay_rejects(bad):
    with pytest.raises(ValueError, match="is not a delay"):
        parse_delay(bad)


@pytest.mark.parametrize(
    ("text", "n"),
    [("200KB", 200_000), ("256KiB", 262_144), ("1MB", 10**6), ("1MiB", 2**20), ("1500B", 1500), (4096, 4096),
     ("1.5kb", 1500)],
)
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["200Kbit", "lots", 0, -1, "0KB", True])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError, match="size"):
        parse_size(bad)


@pytest.mark.parametrize(("text", "p"), [(0.001, 0.001), (1e-3, 0.001), ("0.1%", 0.001), (0, 0.0), (1, 1.0),
                                         ("100%", 1.0)])
def test_parse_probability(text, p):
    assert parse_probability(text) == pytest.approx(p)


@pytest.mark.parametrize("bad", [1.5, -0.1, "0.1", "x%", "150%", True, float("nan")])
def test_parse_probability_rejects(bad):
    with pytest.raises(ValueError, match="is not a probability"):
        parse_probability(bad)


# --------------------------------------------------------------------------- good files


def test_default_topology_shape():
    t = default_topology()
    assert t.name == "linkguardian-testbed"
    assert t.prefix == "ns"
    assert {n.name: n.kind for n in t.nodes} == {
        "h1": NodeKind.HOST, "h2": NodeKind.HOST, "c1": NodeKind.COLLECTOR,
        "sw1": NodeKind.SWITCH, "sw2": NodeKind.SWITCH,
    }
    assert str(t.node("h1").ip) == "10.0.0.1/24"
    assert str(t.node("h2").ip) == "10.0.0.2/24"
    assert str(t.node("c1").ip) == "10.0.0.100/24"
    assert [(lk.name, lk.a.node, lk.b.node) for lk in t.links] == [
        ("h1-sw1", "h1", "sw1"), ("sw1-sw2", "sw1", "sw2"), ("sw2-h2", "sw2", "h2"), ("sw2-c1", "sw2", "c1"),
    ]
    for lk in t.links:
        assert lk.rate_bps == 100_000_000
        assert lk.delay_ns == 10_000
        assert lk.mtu == 1500
        assert lk.buffer_bytes == 200_000
    core = t.link("sw1-sw2")
    assert core.fcs and core.headroom == model.DEFAULT_SWITCH_HEADROOM and core.device_mtu == 1564
    assert core.impairment is not None
    assert core.impairment.corrupt == 1e-3 and core.impairment.direction is Direction.A_TO_B
    assert [e.node for e in core.impaired_ends()] == ["sw1"]
    for name in ("h1-sw1", "sw2-h2", "sw2-c1"):
        assert not t.link(name).fcs and t.link(name).device_mtu == 1500 and t.link(name).impairment is None


def test_default_topology_interface_names_and_macs():
    t = default_topology()
    assert t.iface("h1", "h1-sw1").ifname == "eth0"
    assert t.iface("sw1", "h1-sw1").ifname == "p-h1"
    assert t.iface("sw1", "sw1-sw2").ifname == "p-sw2"
    assert t.iface("sw2", "sw1-sw2").ifname == "p-sw1"
    assert t.iface("sw2", "sw2-c1").ifname == "p-c1"
    assert t.iface("h1", "h1-sw1").mac == "02:00:0a:00:00:01"
    assert t.iface("c1", "sw2-c1").mac == "02:00:0a:00:00:64"
    assert t.iface("sw1", "sw1-sw2").mac == derived_mac("sw1", "sw1-sw2")
    macs = [end.mac for lk in t.links for end in lk.ends]
    assert len(set(macs)) == len(macs)
    for mac in macs:
        first = int(mac[:2], 16)
        assert first & 0x02 and not first & 0x01  # locally administered unicast


def test_macs_are_deterministic():
    assert derived_mac("sw1", "sw1-sw2") == derived_mac("sw1", "sw1-sw2")
    assert derived_mac("sw1", "sw1-sw2") != derived_mac("sw2", "sw1-sw2")
    assert default_topology() == default_topology()


def test_minimal_file_defaults():
    t = _load(GOOD)
    assert t.prefix == "ns" and t.name == "topology"
    assert [lk.name for lk in t.links] == ["h1-sw1", "sw1-sw2", "sw2-h2"]
    assert t.link("sw1-sw2").fcs and not t.link("h1-sw1").fcs
    assert all(lk.impairment is None for lk in t.links)
    assert t.links_of("sw1") == [t.link("h1-sw1"), t.link("sw1-sw2")]
    assert [n.name for n in t.hosts] == ["h1", "h2"] and [n.name for n in t.switches] == ["sw1", "sw2"]


def test_full_featured_file():
    t = _load(
        """
        [topology]
        name = "custom"
        prefix = "lg2"

        [defaults]
        rate = "1Gbit"
        delay = "1ms"
        mtu = 9000
        buffer = "1MiB"
        """
        + NODES.replace('ip = "10.0.0.2/24"', 'ip = "10.0.0.2/24"\nmac = "02:AA:bb:cc:dd:ee"')
        + """
        [[links]]
        name = "edge1"
        a = "h1"
        b = "sw1"
        b_ifname = "sw1-h1"
        rate = 250000000

        [[links]]
        name = "core"
        a = "sw1"
        b = "sw2"
        buffer = 65536
        headroom = 32
        [links.impairment]
        corrupt = "0.5%"
        loss = 1e-4
        direction = "both"
        backend = "nft"
        [links.features.a]
        linkguardian = { role = "sender", target_loss = 1e-8 }
        [links.features.b]
        linkguardian = { role = "receiver", blocking = true }

        [[links]]
        name = "edge2"
        a = "sw2"
        b = "h2"
        fcs = false
        """
    )
    assert t.prefix == "lg2" and t.name == "custom"
    e1, core, e2 = t.links
    assert e1.rate_bps == 250_000_000 and e1.delay_ns == 1_000_000 and e1.mtu == 9000
    assert e1.buffer_bytes == 2**20 and e1.b.ifname == "sw1-h1"
    assert core.buffer_bytes == 65536 and core.device_mtu == 9032
    imp = core.impairment
    assert imp is not None and imp.corrupt == pytest.approx(0.005) and imp.loss == 1e-4
    assert imp.direction is Direction.BOTH and imp.backend is Backend.NFT
    assert [e.node for e in core.impaired_ends()] == ["sw1", "sw2"]
    assert core.a.features == {"linkguardian": {"role": "sender", "target_loss": 1e-8}}
    assert core.b.features["linkguardian"]["blocking"] is True
    assert e2.b.mac == "02:aa:bb:cc:dd:ee"


def test_link_shaping_keys_parse_as_netem_would_take_them():
    t = _load(GOOD + '\n[links.impairment]\ndelay = "5ms"\njitter = "500us"\nduplicate = "1%"\nreorder = 0.25\n'
                     'direction = "both"\n')
    imp = t.links[-1].impairment
    assert imp is not None and imp.active and imp.shapes
    assert (imp.delay_ns, imp.jitter_ns, imp.duplicate, imp.reorder) == (5_000_000, 500_000, 0.01, 0.25)
    assert imp.backend is Backend.AUTO and imp.corrupt == imp.loss == 0
    model = imp.model()
    assert model["delay_ns"] == 5_000_000 and model["reorder"] == 0.25


def test_direct_host_to_host_link():
    t = _load(
        """
        [[nodes]]
        name = "a"
        kind = "host"
        ip = "192.168.7.1/30"
        [[nodes]]
        name = "b"
        kind = "host"
        ip = "192.168.7.2/30"
        [[links]]
        a = "a"
        b = "b"
        [links.impairment]
        loss = 0.2
        """
    )
    (link,) = t.links
    assert link.a.ifname == link.b.ifname == "eth0"
    assert not link.fcs and link.headroom == 0
    assert t.node("a").ip == ipaddress.ip_interface("192.168.7.1/30")


def test_load_from_file(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text(GOOD)
    assert load_topology(path).source == str(path)
    assert load_topology(None) == default_topology()


def test_load_missing_file(tmp_path):
    with pytest.raises(TopologyError, match="cannot read"):
        load_topology(tmp_path / "nope.toml")


def test_all_errors_reported_at_once():
    with pytest.raises(TopologyError) as info:
        _load(GOOD.replace('ip = "10.0.0.2/24"', 'ip = "nonsense"') + '\n[topology]\nprefix = "Bad-Prefix"\n')
    paths = [p for p, _ in info.value.errors]
    assert "nodes[1].ip" in paths and "topology.prefix" in paths
    assert "2 problems" in str(info.value)


# --------------------------------------------------------------------------- bad files

# (id, file text, field path the error must name, words the problem must contain)
BAD = [
    ("toml-syntax", "[[nodes]\nname=1", "", "not valid TOML"),
    ("unknown-top-key", 'colour = "red"\n' + GOOD, "colour", "unknown key"),
    ("unknown-topology-key", GOOD + '\n[topology]\nowner = "me"\n', "topology.owner", "unknown key"),
    ("bad-topology-name", GOOD + '\n[topology]\nname = ""\n', "topology.name", "non-empty string"),
    ("bad-prefix-dash", GOOD + '\n[topology]\nprefix = "my-lab"\n', "topology.prefix", "is not a prefix"),
    ("bad-prefix-long", GOOD + '\n[topology]\nprefix = "abcdefghijklmnop"\n', "topology.prefix", "at most 12"),
    ("unknown-default-key", GOOD + '\n[defaults]\nspeed = "1Gbit"\n', "defaults.speed", "unknown key"),
    ("bad-default-rate", GOOD + '\n[defaults]\nrate = "1Gb"\n', "defaults.rate",
     '"1Gb" is not a rate (use e.g. "100Mbit")'),
    ("bad-default-mtu", GOOD + "\n[defaults]\nmtu = 20\n", "defaults.mtu", "out of range"),
    ("no-nodes", LINKS, "nodes", "missing"),
    ("nodes-not-array", 'nodes = "h1"\n', "nodes", "array of tables"),
    ("unknown-node-key", GOOD.replace('kind = "switch"', 'kind = "switch"\nvendor = "x"', 1),
     "nodes[2].vendor", "unknown key"),
    ("node-no-name", GOOD.replace('name = "sw2"\n', "", 1), "nodes[3].name", "missing"),
    ("node-bad-name", GOOD.replace('"sw2"', '"sw 2"', 1), "nodes[3].name", "is not a node name"),
    ("node-name-dash", GOOD.replace('name = "sw2"', 'name = "sw-2"'), "nodes[3].name", "is not a node name"),
    ("node-name-too-long", GOOD.replace('"sw2"', '"switchnumber2"').replace('"switchnumber2"', '"switchnumber22"'),
     "nodes[3].name", "fits an interface name"),
    ("duplicate-node", GOOD + '\n[[nodes]]\nname = "sw1"\nkind = "switch"\n', "nodes[4].name",
     "duplicate node name"),
    ("bad-kind", GOOD.replace('kind = "switch"', 'kind = "router"', 1), "nodes[2].kind", "is not a node kind"),
    ("missing-kind", GOOD.replace('kind = "switch"\n', "", 1), "nodes[2].kind", "missing"),
    ("host-no-ip", GOOD.replace('ip = "10.0.0.1/24"\n', ""), "nodes[0].ip", "needs an IPv4 address"),
    ("ip-no-prefixlen", GOOD.replace('"10.0.0.1/24"', '"10.0.0.1"'), "nodes[0].ip", "with prefix length"),
    ("ip-garbage", GOOD.replace('"10.0.0.1/24"', '"10.0.0.300/24"'), "nodes[0].ip", "is not an IPv4 address"),
    ("ip-v6", GOOD.replace('"10.0.0.1/24"', '"fd00::1/64"'), "nodes[0].ip", "only IPv4"),
    ("ip-network-address", GOOD.replace('"10.0.0.1/24"', '"10.0.0.0/24"'), "nodes[0].ip", "network or broadcast"),
    ("ip-broadcast", GOOD.replace('"10.0.0.1/24"', '"10.0.0.255/24"'), "nodes[0].ip", "network or broadcast"),
    ("ip-slash32", GOOD.replace('"10.0.0.1/24"', '"10.0.0.1/32"'), "nodes[0].ip", "no room"),
    ("ip-clash", GOOD.replace('"10.0.0.2/24"', '"10.0.0.1/24"'), "nodes[1].ip", "already the address of h1"),
    ("subnet-mismatch", GOOD.replace('"10.0.0.2/24"', '"10.0.1.2/24"'), "nodes[1].ip", "is not in subnet"),
    ("prefixlen-mismatch", GOOD.replace('"10.0.0.2/24"', '"10.0.0.2/16"'), "nodes[1].ip", "is not in subnet"),
    ("switch-with-ip", GOOD.replace('kind = "switch"', 'kind = "switch"\nip = "10.0.0.9/24"', 1),
     "nodes[2].ip", "switches have no address"),
    ("bad-mac", GOOD.replace('ip = "10.0.0.1/24"', 'ip = "10.0.0.1/24"\nmac = "02:00:00:00:00"'),
     "nodes[0].mac", "is not a MAC address"),
    ("multicast-mac", GOOD.replace('ip = "10.0.0.1/24"', 'ip = "10.0.0.1/24"\nmac = "01:00:5e:00:00:01"'),
     "nodes[0].mac", "multicast"),
    ("mac-clash", GOOD.replace('ip = "10.0.0.1/24"', 'ip = "10.0.0.1/24"\nmac = "02:00:0a:00:00:02"'),
     "links[2] (h2 end)", "is already used by"),
    ("links-not-array", 'links = "h1-sw1"\n' + NODES, "links", "array of tables"),
    ("unknown-link-key", GOOD.replace('a = "h1"', 'a = "h1"\ncolour = "blue"'), "links[0].colour", "unknown key"),
    ("link-missing-end", GOOD.replace('b = "sw1"\n', "", 1), "links[0].b", "missing"),
    ("link-unknown-node", GOOD.replace('b = "sw1"', 'b = "sw9"', 1), "links[0].b", 'unknown node "sw9"'),
    ("link-self-loop", GOOD.replace('a = "sw1"\nb = "sw2"', 'a = "sw1"\nb = "sw1"'), "links[1].b", "to itself"),
    ("link-bad-name", GOOD.replace('a = "h1"', 'name = "h1 to sw1"\na = "h1"'), "links[0].name",
     "is not a link name"),
    ("duplicate-link-name", GOOD.replace('a = "sw2"\nb = "h2"', 'name = "h1-sw1"\na = "sw2"\nb = "h2"'),
     "links[2].name", "duplicate link name"),
    ("bad-rate", GOOD.replace('a = "sw1"\nb = "sw2"', 'a = "sw1"\nb = "sw2"\nrate = "100Mb"'),
     "links[1].rate", '"100Mb" is not a rate (use e.g. "100Mbit")'),
    ("bad-delay", GOOD.replace('a = "sw1"\nb = "sw2"', 'a = "sw1"\nb = "sw2"\ndelay = 10'),
     "links[1].delay", "is not a delay"),
    ("bad-mtu", GOOD.replace('a = "sw1"\nb = "sw2"', 'a = "sw1"\nb = "sw2"\nmtu = "1500"'),
     "links[1].mtu", "is not an integer"),
    ("bad-buffer", GOOD.replace('a = "sw1"\nb = "sw2"', 'a = "sw1"\nb = "sw2"\nbuffer = "200Kbit"'),
     "links[1].buffer", "is not a size"),
    ("bad-headroom", GOOD.replace('a = "sw1"\nb = "sw2"', 'a = "sw1"\nb = "sw2"\nheadroom = 1000'),
     "links[1].headroom", "out of range"),
    ("bad-fcs-type", GOOD.replace('a = "sw1"\nb = "sw2"', 'a = "sw1"\nb = "sw2"\nfcs = "yes"'),
     "links[1].fcs", "true/false"),
    ("fcs-on-host-link", GOOD.replace('a = "h1"\nb = "sw1"', 'a = "h1"\nb = "sw1"\nfcs = true'),
     "links[0].fcs", "switch at both ends"),
    ("host-two-links", GOOD + '\n[[links]]\nname = "extra"\na = "h1"\nb = "sw2"\n', "links[3].a",
     "single-homed"),
    ("host-no-link", GOOD + '\n[[nodes]]\nname = "h3"\nkind = "host"\nip = "10.0.0.3/24"\n', "nodes[4]",
     "has no link"),
    ("parallel-links-same-ifname", GOOD + '\n[[links]]\nname = "second"\na = "sw1"\nb = "sw2"\n',
     "links[3].a_ifname", "set a_ifname"),
    ("explicit-ifname-clash", GOOD.replace('a = "sw2"\nb = "h2"', 'a = "sw2"\nb = "h2"\na_ifname = "p-sw1"'),
     "links[2].a_ifname", "already used by links[1]"),
    ("ifname-too-long", GOOD.replace('a = "h1"', 'a = "h1"\na_ifname = "averyveryverylongname"'),
     "links[0].a_ifname", "is not an interface name"),
    ("ifname-lo", GOOD.replace('a = "h1"', 'a = "h1"\na_ifname = "lo"'), "links[0].a_ifname",
     "is not an interface name"),
    ("ifname-slash", GOOD.replace('a = "h1"', 'a = "h1"\na_ifname = "eth/0"'), "links[0].a_ifname",
     "is not an interface name"),
    ("impairment-not-table", GOOD.replace('a = "sw1"\nb = "sw2"', 'a = "sw1"\nb = "sw2"\nimpairment = 0.1'),
     "links[1].impairment", "must be a table"),
    ("impairment-unknown-key", GOOD + '\n[links.impairment]\nlatency = "1ms"\n', "links[2].impairment.latency",
     "unknown key"),
    ("impairment-bad-jitter", GOOD + '\n[links.impairment]\njitter = "soon"\n', "links[2].impairment.jitter",
     "is not a delay"),
    ("impairment-reorder-no-delay", GOOD + "\n[links.impairment]\nreorder = 0.1\n", "links[2].impairment.reorder",
     "needs a delay"),
    ("impairment-nft-shaping", GOOD + '\n[links.impairment]\nbackend = "nft"\nduplicate = 0.1\n',
     "links[2].impairment.duplicate", "nft cannot"),
    ("impairment-bad-corrupt", GOOD + "\n[links.impairment]\ncorrupt = 2\n", "links[2].impairment.corrupt",
     "is not a probability"),
    ("impairment-bad-loss", GOOD + '\n[links.impairment]\nloss = "lots"\n', "links[2].impairment.loss",
     "is not a probability"),
    ("impairment-bad-direction", GOOD + '\n[links.impairment]\nloss = 0.1\ndirection = "a<b"\n',
     "links[2].impairment.direction", "is not a direction"),
    ("impairment-bad-backend", GOOD + '\n[links.impairment]\nloss = 0.1\nbackend = "tc"\n',
     "links[2].impairment.backend", "is not a backend"),
    ("impairment-below-nft-resolution", GOOD + '\n[links.impairment]\ncorrupt = 1e-8\nbackend = "nft"\n',
     "links[2].impairment.corrupt", "resolution"),
    ("features-not-table", GOOD + '\n[links.features]\nc = {}\n', "links[2].features.c", "unknown key"),
    ("features-end-not-table", GOOD + '\n[links.features]\na = "lg"\n', "links[2].features.a", "must be a table"),
]


@pytest.mark.parametrize(("text", "path", "words"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_topology_names_field_and_problem(text, path, words):
    with pytest.raises(TopologyError) as info:
        _load(text)
    err = info.value
    assert any(p == path and words in problem for p, problem in err.errors), err.errors
    assert words in str(err) and "test.toml" in str(err)
    if path:
        assert f"{path}: " in str(err)


def test_below_resolution_allowed_for_netem():
    t = _load(GOOD + '\n[links.impairment]\ncorrupt = 1e-8\nbackend = "netem"\n')
    assert t.links[2].impairment is not None and t.links[2].impairment.corrupt == 1e-8


def test_validate_prefix():
    assert model.validate_prefix("t1") == "t1"
    for bad in ("", "1a", "a-b", "A", "x" * 13, None):
        with pytest.raises(TopologyError):
            model.validate_prefix(bad)
