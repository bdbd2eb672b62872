"""Link impairment: command construction (pure), then nft loss/corruption measured with real traffic."""

from __future__ import annotations

import gzip
import json
import math
import os
import secrets
import select
import socket
import struct
import time

import pytest

from headers.fcs import append_fcs, fcs_ok
from netstack.topo import impair
from netstack.topo.impair import (
    DEFAULT_CORRUPT_OFFSET,
    ImpairmentError,
    active_impairment,
    apply_impairment,
    clear_impairment,
    netem_argv,
    netem_available,
    nft_script,
    nft_threshold,
    parse_netem_qdiscs,
    parse_nft_table,
)
from netstack.topo.model import Backend, loads_topology
from netstack.topo.netns import build, in_netns, teardown

from . import PAIR

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="namespace tests need root")


def _kernel_config_says_no_netem() -> bool:
    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            return "# CONFIG_NET_SCH_NETEM is not set" in f.read()
    except OSError:
        return False


# --------------------------------------------------------------------------- pure


@pytest.mark.parametrize(("p", "k"), [(0, 0), (1e-6, 1), (0.2, 200_000), (1, 1_000_000), (1e-3, 1000),
                                      (2.4e-6, 2), (2.6e-6, 3)])
def test_nft_threshold(p, k):
    assert nft_threshold(p) == k


@pytest.mark.parametrize("p", [1e-7, 4e-7])
def test_nft_threshold_below_resolution(p):
    with pytest.raises(ImpairmentError, match="resolution"):
        nft_threshold(p)


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_nft_threshold_out_of_range(p):
    with pytest.raises(ImpairmentError, match="not in"):
        nft_threshold(p)


def test_nft_script_loss_and_corrupt():
    s = nft_script("lab", "p-sw2", corrupt=1e-3, loss=0.2)
    lines = s.splitlines()
    assert lines[0] == "add table netdev netstack_lab"
    assert 'add chain netdev netstack_lab egress_p-sw2 { type filter hook egress device "p-sw2" priority 0' in lines[1]
    assert "flush chain netdev netstack_lab egress_p-sw2" in lines
    assert any("numgen random mod 1000000 < 200000 counter drop" in ln for ln in lines)
    assert any("numgen random mod 1000000 < 1000 counter jump corrupt_p-sw2" in ln for ln in lines)
    # offset 22 bytes = bit 176; a byte already 0x55 becomes 0xaa, any other becomes 0x55
    assert "add rule netdev netstack_lab corrupt_p-sw2 @ll,176,8 0x55 @ll,176,8 set 0xaa counter return" in lines
    assert "add rule netdev netstack_lab corrupt_p-sw2 @ll,176,8 set 0x55 counter" in lines
    # loss is decided before corruption
    first_drop = next(i for i, ln in enumerate(lines) if "drop" in ln)
    assert first_drop < next(i for i, ln in enumerate(lines) if "jump" in ln)


def test_nft_script_loss_only_and_offset():
    s = nft_script("lab", "eth0", loss=0.5)
    assert "drop" in s and "jump" not in s and "@ll" not in s
    s = nft_script("lab", "eth0", corrupt=0.5, corrupt_offset=30)
    assert "@ll,240,8" in s and "drop" not in s


def test_nft_script_certain_events_need_no_draw():
    # numgen's value is typed 0..999999, so probability 1 is written without a condition
    s = nft_script("lab", "eth0", corrupt=1.0, loss=1.0)
    assert "numgen" not in s
    assert "add rule netdev netstack_lab egress_eth0 counter drop" in s
    assert "add rule netdev netstack_lab egress_eth0 counter jump corrupt_eth0" in s


@pytest.mark.parametrize("bad", ["", "eth0; flush ruleset", "a" * 16, "-x", "eth 0"])
def test_bad_interface_names_rejected(bad):
    with pytest.raises(ImpairmentError, match="not an interface name"):
        nft_script("lab", bad, loss=0.1)
    with pytest.raises(ImpairmentError, match="not an interface name"):
        netem_argv(bad, loss=0.1)


def test_netem_argv():
    assert netem_argv("p-sw2", corrupt=1e-3, loss=0.2) == [
        "tc", "qdisc", "replace", "dev", "p-sw2", "root", "netem", "loss", "random", "20%", "corrupt", "0.1%"]
    assert netem_argv("eth0", corrupt=1e-9) == ["tc", "qdisc", "replace", "dev", "eth0", "root", "netem",
                                                 "corrupt", "1e-07%"]
    assert impair.netem_clear_argv("eth0") == ["tc", "qdisc", "del", "dev", "eth0", "root"]
    with pytest.raises(ImpairmentError):
        netem_argv("eth0", loss=2)


def test_netem_argv_shapes_as_netem_does():
    shaping = impair.Shaping(delay_ns=5_000_000, jitter_ns=1_500_000, duplicate=0.01, reorder=0.25)
    assert netem_argv("p-sw2", loss=0.1, shaping=shaping) == [
        "tc", "qdisc", "replace", "dev", "p-sw2", "root", "netem", "delay", "5000us", "1500us", "loss", "random",
        "10%", "duplicate", "1%", "reorder", "25%"]
    assert netem_argv("eth0", shaping=impair.Shaping(delay_ns=2500)) == [
        "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", "2.5us"]


@pytest.mark.parametrize(("kw", "said"), [
    ({"reorder": 0.1}, "reorder needs a delay"),
    ({"delay_ns": -1}, "not a time"),
    ({"duplicate": 2.0}, "not a probability"),
])
def test_shaping_is_checked(kw, said):
    with pytest.raises(ImpairmentError, match=said):
        impair.Shaping(**kw)


def test_choose_backend(monkeypatch):
    monkeypatch.setattr(impair, "netem_available", lambda refresh=False: False)
    choose = impair.choose_backend
    assert choose("auto", shapes=False, sender_is_switch=True) is impair.Backend.NFT
    assert choose("auto", shapes=True, sender_is_switch=True) is impair.Backend.SWITCH
    with pytest.raises(ImpairmentError, match="need netem"):
        choose("auto", shapes=True, sender_is_switch=False)
    with pytest.raises(ImpairmentError, match="nft cannot delay"):
        choose("nft", shapes=True, sender_is_switch=True)
    with pytest.raises(ImpairmentError, match="needs a switch at the sending end"):
        choose("switch", shapes=False, sender_is_switch=False)
    with pytest.raises(ImpairmentError, match="not a backend"):
        choose("tc", shapes=False, sender_is_switch=False)
    monkeypatch.setattr(impair, "netem_available", lambda refresh=False: True)
    assert choose("auto", shapes=True, sender_is_switch=False) is impair.Backend.NETEM
    assert choose("netem", shapes=True, sender_is_switch=False) is impair.Backend.NETEM


def test_parse_netem_qdiscs():
    listing = json.dumps([
        {"kind": "netem", "handle": "8001:", "root": True, "refcnt": 2,
         "options": {"limit": 1000, "loss-random": {"loss": 0.2, "correlation": 0},
                     "corrupt": {"corrupt": 0.001, "correlation": 0}, "ecn": False, "gap": 0},
         "bytes": 1000, "packets": 10, "drops": 2},
    ])
    assert parse_netem_qdiscs(listing) == {"backend": "netem", "corrupt": 0.001, "loss": 0.2, "dropped": 2,
                                          "corrupted": None, "sent": 10, "delay_ns": 0, "jitter_ns": 0,
                                          "duplicate": 0.0, "reorder": 0.0}
    # iproute2 prints netem's times in seconds and its probabilities as fractions
    shaped = json.dumps([
        {"kind": "netem", "handle": "8001:", "root": True,
         "options": {"limit": 1000, "delay": {"delay": 0.005, "jitter": 0.001, "correlation": 0},
                     "duplicate": {"duplicate": 0.01, "correlation": 0},
                     "reorder": {"reorder": 0.25, "correlation": 0}, "ecn": False, "gap": 1},
         "bytes": 0, "packets": 0, "drops": 0},
    ])
    got = parse_netem_qdiscs(shaped)
    assert got is not None
    assert (got["delay_ns"], got["jitter_ns"], got["duplicate"], got["reorder"]) == (5_000_000, 1_000_000, 0.01, 0.25)
    assert parse_netem_qdiscs('[{"kind": "noqueue", "handle": "0:", "root": true}]') is None
    assert parse_netem_qdiscs("[]") is None


def test_parse_nft_table():
    listing = {"nftables": [
        {"metainfo": {"version": "1.0.6"}},
        {"table": {"family": "netdev", "name": "netstack_lab", "handle": 2}},
        {"chain": {"family": "netdev", "table": "netstack_lab", "name": "egress_eth0", "hook": "egress"}},
        {"chain": {"family": "netdev", "table": "netstack_lab", "name": "corrupt_eth0"}},
        {"rule": {"chain": "egress_eth0", "comment": "netstack loss 200000/1000000",
                  "expr": [{"match": {}}, {"counter": {"packets": 7, "bytes": 700}}, {"drop": None}]}},
        {"rule": {"chain": "egress_eth0", "comment": "netstack corrupt 1000/1000000 offset 22",
                  "expr": [{"match": {}}, {"counter": {"packets": 3, "bytes": 300}}, {"jump": {"target": "x"}}]}},
    ]}
    assert parse_nft_table(listing, "eth0") == {"backend": "nft", "corrupt": 0.001, "loss": 0.2,
                                                "corrupt_offset": 22, "dropped": 7, "corrupted": 3}
    assert parse_nft_table(listing, "eth1") is None


def test_resolve_ns():
    assert impair._resolve_ns("lab", "sw1") == "lab-sw1"
    assert impair._resolve_ns("lab", "lab-sw1") == "lab-sw1"
    assert impair._resolve_ns("lab", None) is None


def test_resolve_backend():
    assert impair.resolve_backend("nft") is Backend.NFT
    assert impair.resolve_backend("netem") is Backend.NETEM
    assert impair.resolve_backend("auto") is (Backend.NETEM if netem_available() else Backend.NFT)
    with pytest.raises(ImpairmentError, match="not a backend"):
        impair.resolve_backend("tc")


@pytest.mark.skipif(not _kernel_config_says_no_netem(), reason="this kernel's config does not rule netem out")
def test_netem_unavailable_on_this_kernel():
    assert netem_available(refresh=True) is False
    if os.geteuid() == 0:
        assert impair._netem_live_probe() is False  # the live probe agrees, and cleans up
        assert not os.path.exists(f"/run/netns/netstack-probe-{os.getpid()}")


# --------------------------------------------------------------------------- live

ETH_TEST = 0x88B5  # IEEE 802 local experimental EtherType
PORT = 7100


@pytest.fixture
def pair():
    """Two host namespaces joined by one direct veth pair; always torn down."""
    prefix = "t" + secrets.token_hex(4)
    try:
        yield build(loads_topology(PAIR), prefix)
    finally:
        teardown(prefix)
        assert not [n for n in os.listdir("/run/netns") if n.startswith(f"{prefix}-")]
        assert impair.nft_table_name(prefix) not in impair.list_nft_tables(None)


def _udp(pair):
    with in_netns(pair.netns("b")):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        rx.bind(("10.9.0.2", PORT))
        rx.setblocking(False)
    with in_netns(pair.netns("a")):
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    return tx, rx


def _drain(rx, got: set[int], idle_s: float) -> None:
    while True:
        ready, _, _ = select.select([rx], [], [], idle_s)
        if not ready:
            return
        while True:
            try:
                data = rx.recv(2048)
            except BlockingIOError:
                break
            got.add(struct.unpack_from("!I", data)[0])


def _udp_burst(tx, rx, n: int, chunk: int = 100) -> set[int]:
    """Send n numbered datagrams in chunks the receiver drains in between (no socket overflow)."""
    got: set[int] = set()
    for start in range(0, n, chunk):
        for i in range(start, min(n, start + chunk)):
            tx.sendto(struct.pack("!I", i) + bytes(60), ("10.9.0.2", PORT))
        _drain(rx, got, 0.002)
    _drain(rx, got, 0.1)
    return got


def _resolved(tx, rx, timeout_s: float = 5.0) -> None:
    """The neighbour resolved and the path up: a datagram sent until one arrives (the first ones
    wait for ARP, longer than a drain's idle time when the machine is busy)."""
    deadline = time.monotonic() + timeout_s
    got: set[int] = set()
    while not got and time.monotonic() < deadline:
        tx.sendto(struct.pack("!I", 0) + bytes(60), ("10.9.0.2", PORT))
        _drain(rx, got, 0.2)
    assert got == {0}, "no datagram crossed the pair within 5 s"
    _drain(rx, got, 0.2)  # repeats still in flight


def _snmp(ns: str, section: str, field: str, path: str = "snmp") -> int:
    with in_netns(ns), open(f"/proc/thread-self/net/{path}") as f:
        lines = [ln.split() for ln in f if ln.startswith(section + ":")]
    header, values = lines[0], lines[1]
    return int(values[header.index(field)])


def _binomial_ok(k: int, n: int, p: float, sigmas: float = 6.0) -> bool:
    return abs(k - n * p) <= sigmas * math.sqrt(n * p * (1 - p)) + 1


@pytest.mark.netns
@needs_root
def test_nft_loss_matches_configuration(pair):
    prefix, ns_a = pair.prefix, pair.netns("a")
    tx, rx = _udp(pair)
    with tx, rx:
        _resolved(tx, rx)  # ARP resolved before the loss starts
        assert apply_impairment(prefix, "a", "eth0", loss=0.2, backend="nft") is Backend.NFT
        active = active_impairment(prefix, ns_a, "eth0")
        assert active is not None and active["backend"] == "nft" and active["loss"] == 0.2

        n = 4000
        got = _udp_burst(tx, rx, n)
        lost = n - len(got)
        assert _binomial_ok(lost, n, 0.2), f"lost {lost}/{n}, configured 0.2"
        assert _snmp(pair.netns("b"), "Udp", "RcvbufErrors") == 0, "loss must come from nft, not the socket"
        dropped = active_impairment(prefix, ns_a, "eth0")["dropped"]
        assert abs(dropped - lost) <= 3, (dropped, lost)  # the kernel's own count (ARP may add one or two)

        assert clear_impairment(prefix, ns_a, "eth0") is True
        assert active_impairment(prefix, ns_a, "eth0") is None
        assert clear_impairment(prefix, ns_a, "eth0") is False
        assert _udp_burst(tx, rx, 500) == set(range(500))
    assert impair.list_nft_tables(ns_a) == []  # the emptied table went with the last chain


def _raw_pair(pair):
    with in_netns(pair.netns("b")):
        rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_TEST))
        rx.bind(("eth0", ETH_TEST))
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        rx.setblocking(False)
    with in_netns(pair.netns("a")):
        tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        tx.bind(("eth0", 0))
    return tx, rx


def _frames(pair, n: int) -> list[bytes]:
    dst = bytes.fromhex(pair.mac("b", "a-b").replace(":", ""))
    src = bytes.fromhex(pair.mac("a", "a-b").replace(":", ""))
    frames = []
    for i in range(n):
        body = bytearray(struct.pack("!I", i) + bytes(range(40)))
        # half the frames already hold the value nft writes at the corrupted offset
        body[DEFAULT_CORRUPT_OFFSET - 14] = 0x55 if i % 2 else 0x17
        frames.append(append_fcs(dst + src + struct.pack("!H", ETH_TEST) + bytes(body)))
    return frames


def _raw_exchange(tx, rx, frames: list[bytes]) -> dict[int, bytes]:
    got: dict[int, bytes] = {}
    for start in range(0, len(frames), 100):
        for f in frames[start:start + 100]:
            tx.send(f)
        while True:
            ready, _, _ = select.select([rx], [], [], 0.05)
            if not ready:
                break
            while True:
                try:
                    data = rx.recv(4096)
                except BlockingIOError:
                    break
                got[struct.unpack_from("!I", data, 14)[0]] = data
    return got


@pytest.mark.netns
@needs_root
def test_nft_corruption_changes_one_covered_byte(pair):
    tx, rx = _raw_pair(pair)
    with tx, rx:
        # corrupt = 1: every frame is changed, whatever its byte held (the two-rule trick)
        apply_impairment(pair.prefix, "a", "eth0", corrupt=1.0, backend="nft")
        frames = _frames(pair, 200)
        got = _raw_exchange(tx, rx, frames)
        assert len(got) == len(frames), "corruption must not drop frames by itself"
        for i, sent in enumerate(frames):
            recv = got[i]
            diff = [j for j in range(len(sent)) if sent[j] != recv[j]]
            assert diff == [DEFAULT_CORRUPT_OFFSET]
            assert recv[DEFAULT_CORRUPT_OFFSET] == (0xAA if sent[DEFAULT_CORRUPT_OFFSET] == 0x55 else 0x55)
            assert fcs_ok(sent) and not fcs_ok(recv), "the software FCS catches it"

        # a fraction: the share of frames failing the FCS matches the configuration
        apply_impairment(pair.prefix, "a", "eth0", corrupt=0.3, backend="nft")
        frames = _frames(pair, 3000)
        got = _raw_exchange(tx, rx, frames)
        assert len(got) == len(frames)
        bad = sum(not fcs_ok(f) for f in got.values())
        assert _binomial_ok(bad, len(frames), 0.3), f"{bad}/{len(frames)} corrupted, configured 0.3"
        active = active_impairment(pair.prefix, "a", "eth0")
        assert active["corrupted"] == bad and active["corrupt"] == 0.3 and active["corrupt_offset"] == 22


@pytest.mark.netns
@needs_root
def test_nft_loss_drops_a_switch_port_batch_exactly_once(pair):
    """A frame an egress rule drops comes back from sendmmsg as ENOBUFS: the kernel took it and
    the stack dropped it. A switch port must not send it again (it once did: a configured loss
    p then only dropped the frames drawn twice, ~p^2)."""
    from netstack.io.packet import PacketPort

    _, rx = _raw_pair(pair)
    with in_netns(pair.netns("a")):
        port = PacketPort("eth0")
    try:
        apply_impairment(pair.prefix, "a", "eth0", loss=0.5, backend="nft")
        frames = _frames(pair, 2000)
        got: set[int] = set()
        for start in range(0, len(frames), 100):
            assert port.send_batch(frames[start:start + 100]) == 100  # taken (some dropped on the way)
            while select.select([rx], [], [], 0.05)[0]:
                while True:
                    try:
                        got.add(struct.unpack_from("!I", rx.recv(4096), 14)[0])
                    except BlockingIOError:
                        break
        lost = len(frames) - len(got)
        assert _binomial_ok(lost, len(frames), 0.5), f"lost {lost}/{len(frames)}, configured 0.5"
        assert port.tx_dropped == lost == active_impairment(pair.prefix, "a", "eth0")["dropped"]
        assert port.send_errors == 0
    finally:
        port.close()
        rx.close()


@pytest.mark.netns
@needs_root
def test_nft_corruption_seen_by_kernel_checksums(pair):
    ns_b = pair.netns("b")
    tx, rx = _udp(pair)
    with tx, rx:
        _resolved(tx, rx)  # (ARP first: on a busy machine it outlasts a burst's drain, CI 2026-12-07)
        assert _udp_burst(tx, rx, 5) == set(range(5))
        before = _snmp(ns_b, "IpExt", "InCsumErrors", "netstat")
        apply_impairment(pair.prefix, pair.netns("a"), "eth0", corrupt=1.0, backend="nft")
        assert _udp_burst(tx, rx, 50) == set()  # byte 22 is the IPv4 TTL: the header checksum fails
        assert _snmp(ns_b, "IpExt", "InCsumErrors", "netstat") - before == 50


@pytest.mark.netns
@needs_root
def test_apply_replaces_and_zero_clears(pair):
    prefix = pair.prefix
    apply_impairment(prefix, "a", "eth0", loss=0.1, corrupt=0.01, backend="nft")
    apply_impairment(prefix, "a", "eth0", loss=0.3, backend="nft")
    active = active_impairment(prefix, "a", "eth0")
    assert active["loss"] == 0.3 and active["corrupt"] == 0.0
    apply_impairment(prefix, "b", "eth0", corrupt=0.5, backend="nft")  # both directions, one table per namespace
    assert active_impairment(prefix, "b", "eth0")["corrupt"] == 0.5
    assert apply_impairment(prefix, "a", "eth0") is None
    assert active_impairment(prefix, "a", "eth0") is None
    assert active_impairment(prefix, "b", "eth0") is not None


@pytest.mark.netns
@needs_root
def test_errors_are_clear(pair):
    with pytest.raises(ImpairmentError, match="resolution"):
        apply_impairment(pair.prefix, "a", "eth0", corrupt=1e-8, backend="nft")
    with pytest.raises(ImpairmentError, match="not a probability"):
        apply_impairment(pair.prefix, "a", "eth0", loss=1.5, backend="nft")
    with pytest.raises(ImpairmentError, match="does not exist"):
        apply_impairment(pair.prefix, "nosuchnode", "eth0", loss=0.1, backend="nft")
    with pytest.raises(ImpairmentError, match="eth9"):
        apply_impairment(pair.prefix, "a", "eth9", loss=0.1, backend="nft")
    assert active_impairment(pair.prefix, "a", "eth0") is None
    if not netem_available():
        with pytest.raises(ImpairmentError, match="no netem"):
            apply_impairment(pair.prefix, "a", "eth0", loss=0.1, backend="netem")


@pytest.mark.netns
@needs_root
def test_netem_backend_live(pair):
    if not netem_available():
        pytest.skip("this kernel has no netem (CONFIG_NET_SCH_NETEM); the netem command is unit-tested above")
    assert apply_impairment(pair.prefix, "a", "eth0", corrupt=0.01, loss=0.2, backend="netem") is Backend.NETEM
    active = active_impairment(pair.prefix, "a", "eth0")
    assert active["backend"] == "netem"
    assert active["loss"] == pytest.approx(0.2, rel=1e-3) and active["corrupt"] == pytest.approx(0.01, rel=1e-3)
    tx, rx = _udp(pair)
    with tx, rx:
        apply_impairment(pair.prefix, "a", "eth0", loss=0.2, backend="netem")
        n = 4000
        lost = n - len(_udp_burst(tx, rx, n))
        assert _binomial_ok(lost, n, 0.2, sigmas=8), lost
    assert clear_impairment(pair.prefix, "a", "eth0") is True
    assert active_impairment(pair.prefix, "a", "eth0") is None
