"""BCP 38 at an edge port (issue 34, finding 3: "switches forward spoofed source addresses from
edge ports"): an edge port with ``source_ips`` forwards IPv4 and ARP only from its host's
addresses, and drops and counts the rest (``edge_drops_spoofed``); netstack/switch/sourceguard.py.
The fuzzer's per-frame prediction (``netstack.fuzz.fate_of``) agrees with the switch frame by
frame, on arbitrary bytes, through the fast path and the general one."""

from __future__ import annotations

import struct
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack import fuzz
from netstack.errors import ConfigError
from netstack.runtime.config import port_options
from netstack.switch.config import PortConfig
from netstack.switch.sourceguard import spoofed
from netstack.topo.model import TopologyError
from tests.switch import ip, mac, make_switch, raw_frame, udp_frame

HOST = ip(1)  # 10.0.0.1: the host behind p0
EDGE = {"role": "edge", "source_ips": ("10.0.0.1",)}


def edge_switch(**p0):
    return make_switch(2, static_fdb={mac(2): "p1", mac(1): "p0"}, p0={**EDGE, **p0})


def arp(sender_ip: bytes, src: int = 1) -> bytes:
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, mac(src), sender_ip, bytes(6), ip(2))
    return b"\xff" * 6 + mac(src) + b"\x08\x06" + body


def vlan(frame: bytes, vid: int = 5) -> bytes:
    return frame[:12] + struct.pack("!HH", 0x8100, vid) + frame[12:]


def sent(sw, port: str = "p1") -> list[bytes]:
    return [f for name, f in sw.transmit(10**9) if name == port]


def test_an_edge_port_forwards_its_hosts_source_and_drops_any_other():
    sw = edge_switch()
    own, forged = udp_frame(src=1, dst=2), udp_frame(src=7, dst=2)
    forged = forged[:6] + mac(1) + forged[12:]  # the host's own MAC, another host's IP
    sw.receive_batch("p0", [own, forged, own], 0)
    assert sent(sw) == [own, own]
    c = sw.ports[0].c
    assert c.edge_drops_spoofed == 1 and c.rx_frames == 3


def test_arp_from_another_address_is_dropped_but_a_probe_passes():
    sw = edge_switch()
    sw.receive_batch("p0", [arp(HOST), arp(ip(9)), arp(b"\0\0\0\0"), arp(HOST)[:30]], 0)
    assert sw.ports[0].c.edge_drops_spoofed == 2  # the poisoning and the truncated one
    assert len([f for _, f in sw.transmit(10**9)]) == 2


def test_tagged_short_and_other_frames():
    sw = edge_switch()
    forged = udp_frame(src=7, dst=2)
    frames = [vlan(forged), vlan(udp_frame(src=1, dst=2)), udp_frame(src=1, dst=2)[:28],
              raw_frame(mac(2), mac(1), etype=0x86DD)]
    sw.receive_batch("p0", frames, 0)
    assert sw.ports[0].c.edge_drops_spoofed == 2  # the tagged forgery and the IPv4 too short to show its source
    assert spoofed(frames[2], frozenset({HOST})) and not spoofed(frames[3], frozenset({HOST}))


def test_without_source_ips_or_on_a_fabric_port_nothing_is_filtered():
    sw = make_switch(2, static_fdb={mac(2): "p1"}, p0={"role": "edge"})
    sw.receive_batch("p0", [udp_frame(src=7, dst=2)], 0)
    assert sw.ports[0].c.edge_drops_spoofed == 0 and len(sent(sw)) == 1
    with pytest.raises(ConfigError, match="source_ips"):
        PortConfig("p0", role="fabric", source_ips=("10.0.0.1",))
    for bad in (["10.0.0.300"], [], "10.0.0.1", [1]):
        with pytest.raises(ConfigError, match="source_ips"):
            PortConfig("p0", role="edge", source_ips=bad)
    assert PortConfig("p0", role="edge", source_ips=["10.0.0.2", "10.0.0.1"]).source_ips == ("10.0.0.1", "10.0.0.2")


def test_the_filter_can_be_changed_at_run_time():
    sw = edge_switch()
    forged = udp_frame(src=7, dst=2)
    sw.update_port("p0", 0, source_ips=("10.0.0.1", "10.0.0.7"))
    sw.receive_batch("p0", [forged], 1)
    sw.update_port("p0", 2, source_ips=None)
    sw.receive_batch("p0", [udp_frame(src=8, dst=2)], 3)
    assert sw.ports[0].c.edge_drops_spoofed == 0 and len(sent(sw)) == 2


def test_the_topology_option():
    assert port_options("l", {"source_ips": ["10.0.0.1", "10.0.0.9"]}) == {"source_ips": ["10.0.0.1", "10.0.0.9"]}
    assert port_options("l", {"source_ips": False}) == {"source_ips": None}
    for bad in (True, [], ["x"], "10.0.0.1"):
        with pytest.raises(TopologyError, match="source_ips"):
            port_options("l", {"source_ips": bad})


def test_a_run_on_the_fast_path_drops_exactly_its_forged_frames():
    """A run of frames that share their first 16 bytes takes the fast path unless one of them is
    forged: then every frame goes frame by frame, and only the forged one is dropped."""
    sw = edge_switch()
    own = [udp_frame(src=1, dst=2, size=100 + i) for i in range(12)]
    forged = udp_frame(src=7, dst=2, size=100)
    forged = forged[:6] + mac(1) + forged[12:]
    sw.receive_batch("p0", [*own[:6], forged, *own[6:]], 0)
    sw.receive_batch("p0", own, 1)
    assert sent(sw) == own + own and sw.ports[0].c.edge_drops_spoofed == 1


_LINK = fuzz.Link("s1", "p0", "ns", mac(0x80), "h1", "eth0", "ns-h1", False, True, False, frozenset({HOST}))
_ADDRS = st.sampled_from([HOST, ip(7), b"\0\0\0\0"])


@st.composite
def edge_frames(draw) -> bytes:
    """IPv4 and ARP frames from the host's address and others, tagged or not, cut short or not,
    and arbitrary bytes."""
    kind = draw(st.sampled_from(["udp", "arp", "raw"]))
    if kind == "raw":
        return draw(st.binary(min_size=14, max_size=80))
    src = draw(_ADDRS)
    frame = udp_frame(src=1, dst=2, size=draw(st.integers(42, 90))) if kind == "udp" else arp(src)
    if kind == "udp":
        frame = frame[:26] + src + frame[30:]
    if draw(st.booleans()):
        frame = vlan(frame)
    return frame[:draw(st.integers(14, len(frame)))] if draw(st.booleans()) else frame


@given(st.lists(edge_frames(), max_size=40), st.integers(1, 8))
def test_the_switch_counts_what_the_fuzzers_prediction_says(frames, repeat):
    """Each frame's fate from its bytes (netstack.fuzz.fate_of, which the live campaigns check the
    daemons against) equals the switch's counters, also when runs repeat a frame (fast path)."""
    sw = edge_switch()
    # (a tagged frame too short to untag never reaches a live switch: its kernel drops it)
    batch = [f for f in frames for _ in range(repeat) if fuzz.kernel_view(f) is not None]
    sw.receive_batch("p0", batch, 0)
    want = Counter(fuzz.fate_of(f, _LINK, frozenset()) for f in batch)
    c = sw.ports[0].c
    assert c.edge_drops_spoofed == want["edge_drops_spoofed"]
    assert c.malformed + c.edge_drops_pfc + c.mac_control_rx == want["malformed"] + want["edge_drops_pfc"] + \
        want["mac_control_rx"]
