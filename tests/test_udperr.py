"""netstack.io.udperr: the kernel's ICMP port unreachable, read from a UDP socket's error queue
(loopback in this namespace: a datagram to a port nobody holds)."""

from __future__ import annotations

import contextlib
import socket
import time

from netstack.io.udperr import bind_udp, port_unreachable


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _drain(sock: socket.socket, seconds: float = 2.0) -> list[tuple[str, int]]:
    got: list[tuple[str, int]] = []
    end = time.monotonic() + seconds
    while not got and time.monotonic() < end:
        with contextlib.suppress(OSError):  # the pending error (ECONNREFUSED), or nothing yet (EAGAIN)
            sock.recvfrom(64)
        got = port_unreachable(sock)
        if not got:
            time.sleep(0.01)
    return got


def test_a_datagram_to_a_closed_port_is_reported_with_its_destination():
    sock = bind_udp("127.0.0.1", 0)
    try:
        port = _closed_port()
        sock.sendto(b"probe", ("127.0.0.1", port))
        assert _drain(sock) == [("127.0.0.1", port)]
        assert port_unreachable(sock) == []  # read once
    finally:
        sock.close()


def test_an_open_port_draws_nothing_and_a_closed_socket_reads_nothing():
    sock = bind_udp("127.0.0.1", 0)
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        peer.bind(("127.0.0.1", 0))
        sock.sendto(b"probe", peer.getsockname())
        assert peer.recv(64) == b"probe"
        assert port_unreachable(sock) == []
    finally:
        peer.close()
        sock.close()
    assert port_unreachable(sock) == []
