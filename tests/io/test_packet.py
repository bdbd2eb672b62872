"""AF_PACKET ports on a real veth pair between two namespaces."""

import os
import socket
import subprocess
import time
import uuid

import pytest

from headers.inet import build_udp_frame
from netstack.io.packet import PacketPort

pytestmark = [
    pytest.mark.netns,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces"),
]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.fixture
def veth_pair():
    tag = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"nsk-t{tag}a", f"nsk-t{tag}b"
    try:
        _ip("netns", "add", ns_a)
        _ip("netns", "add", ns_b)
        _ip("-n", ns_a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", ns_b)
        _ip("-n", ns_a, "link", "set", "va", "up")
        _ip("-n", ns_b, "link", "set", "vb", "up")
        yield ns_a, ns_b
    finally:
        for ns in (ns_a, ns_b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _port_in(ns: str, ifname: str) -> PacketPort:
    from pyroute2 import netns

    netns.pushns(ns)
    try:
        return PacketPort(ifname)
    finally:
        netns.popns()


def test_batch_send_and_receive(veth_pair):
    ns_a, ns_b = veth_pair
    a = _port_in(ns_a, "va")
    b = _port_in(ns_b, "vb")
    try:
        frames = [
            build_udp_frame(b"\x02\0\0\0\0\x01", b"\x02\0\0\0\0\x02", b"\x0a\0\0\x01", b"\x0a\0\0\x02",
                            1000, 2000, i.to_bytes(4, "big") * 10)
            for i in range(200)
        ]
        assert a.send_batch(frames) == 200
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while len(got) < 200 and time.monotonic() < deadline:
            got += [f for f in b.recv_batch(64) if f[12:14] == b"\x08\x00" and f[36:38] == (2000).to_bytes(2, "big")]
            time.sleep(0.001)
        assert got == frames  # in order, intact
        assert a.recv_batch(64) == [] or all(f not in frames for f in a.recv_batch(64))  # own sends not read back
        packets, drops = b.read_kernel_stats()
        assert packets >= 200 and drops == 0
    finally:
        a.close()
        b.close()


def test_ring_reads_a_vlan_tagged_frame_whole_and_a_downed_link_leaves_an_error_to_clear(veth_pair):
    """The kernel strips an 802.1Q/802.1ad tag before packet sockets see a frame; the ring puts it
    back (a switch forwards frames as they came, and the software FCS covers the tag). A link
    that goes down leaves ENETDOWN pending on the socket, which take_error clears and counts."""
    ns_a, ns_b = veth_pair
    a = _port_in(ns_a, "va")
    b = _port_in(ns_b, "vb")
    try:
        mac = b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01"
        tagged = [mac + b"\x81\x00\x00\x05\x88\xb5" + bytes(50),
                  mac + b"\x88\xa8\x00\x07\x81\x00\x00\x05\x88\xb5" + bytes(46)]
        assert a.send_batch(tagged) == 2
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            got += [f for f in b.recv_batch(64) if f[:12] == mac]
            time.sleep(0.001)
        assert got == tagged
        assert b.take_error() == 0
        _ip("-n", ns_b, "link", "set", "vb", "down")
        deadline = time.monotonic() + 5
        err = 0
        while not err and time.monotonic() < deadline:
            err = b.take_error()
            time.sleep(0.01)
        assert err and b.link_errors == 1 and b.take_error() == 0  # taken once
    finally:
        a.close()
        b.close()


def test_oversize_frame_is_counted_not_raised(veth_pair):
    ns_a, _ = veth_pair
    a = _port_in(ns_a, "va")
    try:
        sent = a.send_batch([b"\x02" * 12 + b"\x08\x00" + b"x" * 20000])
        assert sent == 0 and a.send_errors == 1
    finally:
        a.close()


def _udp(i: int, size: int = 100) -> bytes:
    payload = (i.to_bytes(4, "big") * (size // 4 + 1))[: max(0, size - 42)]
    return build_udp_frame(b"\x02\0\0\0\0\x01", b"\x02\0\0\0\0\x02", b"\x0a\0\0\x01", b"\x0a\0\0\x02",
                           1000, 2000, payload)


def _ours(frames: list[bytes]) -> list[bytes]:
    return [f for f in frames if f[12:14] == b"\x08\x00" and f[36:38] == (2000).to_bytes(2, "big")]


@pytest.mark.parametrize("mode", ["ring", "mmsg", "recv"])
def test_every_receive_mode_delivers_in_order_across_ring_wrap(veth_pair, mode):
    """More frames than the ring has slots, in bursts with drains between: all arrive, in
    order, intact, whatever the receive mode (the ring wraps several times)."""
    from netstack.io.packet import RING_FRAMES

    ns_a, ns_b = veth_pair
    a = _port_in(ns_a, "va")
    from pyroute2 import netns

    netns.pushns(ns_b)
    try:
        b = PacketPort("vb", rx_mode=mode)
    finally:
        netns.popns()
    try:
        assert b.rx_mode == mode
        total = 3 * RING_FRAMES + 77
        sizes = [60, 64, 100, 1000, 1514]
        frames = [_udp(i, sizes[i % len(sizes)]) for i in range(total)]
        got: list[bytes] = []
        for start in range(0, total, 500):  # bursts well below the ring size
            assert a.send_batch(frames[start:start + 500]) == len(frames[start:start + 500])
            deadline = time.monotonic() + 5
            while len(got) < min(total, start + 500) and time.monotonic() < deadline:
                got += _ours(b.recv_batch(256))
        assert got == frames
        assert b.recv_batch(256) == []
        assert b.read_kernel_stats()[1] == 0 and b.rx_truncated == 0
    finally:
        a.close()
        b.close()


def test_ring_counts_frames_longer_than_its_slots(veth_pair):
    """A ring is sized from the MTU at open; a frame longer than a slot (the MTU was raised
    later) is counted and dropped, and the frames around it still arrive."""
    ns_a, ns_b = veth_pair
    a = _port_in(ns_a, "va")
    b = _port_in(ns_b, "vb")
    try:
        assert b.rx_mode == "ring"
        _ip("-n", ns_a, "link", "set", "va", "mtu", "9000")
        _ip("-n", ns_b, "link", "set", "vb", "mtu", "9000")
        a.close()
        a = _port_in(ns_a, "va")  # a sender that may now send jumbo frames
        frames = [_udp(1), _udp(2, 8000), _udp(3)]
        assert a.send_batch(frames) == 3
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            got += _ours(b.recv_batch(64))
        assert got == [frames[0], frames[2]]
        assert b.rx_truncated == 1
    finally:
        a.close()
        b.close()


def test_unknown_receive_mode_is_refused():
    with pytest.raises(ValueError, match="rx_mode"):
        PacketPort("lo", rx_mode="fast")


def test_ring_reads_runs_with_a_tagged_frame_among_them_whole_and_in_order(veth_pair):
    """The ring reader takes a run of ready slots in one step and hands a run holding a VLAN tag
    to put back to the slot-by-slot reader: either way every frame arrives whole, in order."""
    ns_a, ns_b = veth_pair
    a = _port_in(ns_a, "va")
    b = _port_in(ns_b, "vb")
    try:
        assert b.rx_mode == "ring"
        mac = b"\x02\0\0\0\0\x02\x02\0\0\0\0\x01"
        tagged = mac + b"\x81\x00\x00\x05\x08\x00" + bytes(50)
        frames = [_udp(i) for i in range(40)]
        frames[17:17] = [tagged]
        assert a.send_batch(frames) == len(frames)
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while len(got) < len(frames) and time.monotonic() < deadline:
            got += [f for f in b.recv_batch(256) if f[:12] == mac or _ours([f])]
            time.sleep(0.001)
        assert got == frames
    finally:
        a.close()
        b.close()


def test_a_small_ring_wraps_between_and_within_reads(veth_pair):
    """A ring of 8 slots read with limits that end runs at the end of the mapping, in the middle
    of it and across it: the frames come out in order, each once."""
    from pyroute2 import netns

    from netstack.io.packet import ETH_P_ALL, PACKET_IGNORE_OUTGOING, SOL_PACKET, RxRing, interface_mtu

    ns_a, ns_b = veth_pair
    a = _port_in(ns_a, "va")
    netns.pushns(ns_b)
    try:
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    finally:
        netns.popns()
    try:
        sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        ring = RxRing(sock, interface_mtu(sock, "vb"), frames=8)
        sock.bind(("vb", ETH_P_ALL))
        assert ring.frames == 8
        sent = 0
        got: list[bytes] = []
        # bursts of at most 6: a stray frame of the fresh link (IPv6 neighbour discovery) may take a slot
        for burst, limit in ((6, 6), (6, 3), (0, 5), (6, 6), (5, 2), (0, 8)):
            assert a.send_batch([_udp(sent + i) for i in range(burst)]) == burst
            sent += burst
            time.sleep(0.05)
            got += _ours(ring.recv(limit))
        deadline = time.monotonic() + 5
        while len(got) < sent and time.monotonic() < deadline:
            got += _ours(ring.recv(8))
            time.sleep(0.01)
        assert got == [_udp(i) for i in range(sent)]
    finally:
        ring.close()
        sock.close()
        a.close()


def test_large_batches_are_sent_from_the_frames_themselves_intact(veth_pair):
    """A batch too large to join is sent from the frames' own memory (bytes), or joined when a
    frame is not bytes: either way the frames arrive intact and in order."""
    ns_a, ns_b = veth_pair
    a = _port_in(ns_a, "va")
    b = _port_in(ns_b, "vb")
    try:
        big = [_udp(i, 1400) for i in range(100)]  # 140 KB: pointed at, not joined
        mixed = [_udp(100 + i, 1400) for i in range(100)]
        mixed[50] = bytearray(mixed[50])  # not bytes: the batch is joined
        assert a.send_batch(big) == 100
        assert a.send_batch(mixed) == 100
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while len(got) < 200 and time.monotonic() < deadline:
            got += _ours(b.recv_batch(256))
            time.sleep(0.001)
        assert got == big + [bytes(f) for f in mixed]
    finally:
        a.close()
        b.close()
