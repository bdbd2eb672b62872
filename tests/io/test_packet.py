"""AF_PACKET ports on a real veth pair between two namespaces."""

import os
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


def test_oversize_frame_is_counted_not_raised(veth_pair):
    ns_a, _ = veth_pair
    a = _port_in(ns_a, "va")
    try:
        sent = a.send_batch([b"\x02" * 12 + b"\x08\x00" + b"x" * 20000])
        assert sent == 0 and a.send_errors == 1
    finally:
        a.close()
