"""ICMP errors on an unconnected UDP socket (Linux ``IP_RECVERR``, ip(7)).

An unconnected UDP socket normally never hears of the ICMP port unreachable its datagrams draw.
With ``IP_RECVERR`` the kernel queues each one on the socket's error queue, with the destination
of the datagram that caused it; the next receive fails with the error (asyncio and uvloop pass it
to ``DatagramProtocol.error_received``), and :func:`port_unreachable` reads the queue. The 1Pipe
controller uses it to tell a dead process (its port closed) from a slow one (issue 31,
docs/onepipe-reliable.md "Failure detection").
"""

from __future__ import annotations

import errno
import socket
import struct

#: <linux/in.h>; the socket module has no name for it
IP_RECVERR = getattr(socket, "IP_RECVERR", 11)
#: struct sock_extended_err (<linux/errqueue.h>): ee_errno, ee_origin, ee_type, ee_code
_EXTENDED_ERR = struct.Struct("=IBBB")
_ORIGIN_ICMP = 2
_ICMP_DEST_UNREACH, _ICMP_PORT_UNREACH = 3, 3
#: at most this many queued errors read per call (the queue is bounded by the socket's buffer)
MAX_ERRORS = 256


def bind_udp(ip: str, port: int) -> socket.socket:
    """A non-blocking IPv4 UDP socket bound to ``(ip, port)`` that queues the ICMP errors it
    draws. OSError as ``socket.bind`` raises it (the socket is closed then)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.IPPROTO_IP, IP_RECVERR, 1)
        sock.bind((ip, port))
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def port_unreachable(sock: socket.socket) -> list[tuple[str, int]]:
    """Read the socket's error queue: the destinations whose datagrams drew an ICMP port
    unreachable, oldest first. Other errors are read and dropped. Never blocks, never raises."""
    out: list[tuple[str, int]] = []
    for _ in range(MAX_ERRORS):
        try:
            _data, anc, _flags, addr = sock.recvmsg(1, 512, socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT)
        except OSError:  # empty (EAGAIN), or the socket is closed
            break
        for level, kind, data in anc:
            if level != socket.IPPROTO_IP or kind != IP_RECVERR or len(data) < _EXTENDED_ERR.size:
                continue
            err, origin, icmp_type, icmp_code = _EXTENDED_ERR.unpack_from(data)
            if (err == errno.ECONNREFUSED and origin == _ORIGIN_ICMP and icmp_type == _ICMP_DEST_UNREACH
                    and icmp_code == _ICMP_PORT_UNREACH and isinstance(addr, tuple)):
                out.append((str(addr[0]), int(addr[1])))
    return out


__all__ = ["IP_RECVERR", "bind_udp", "port_unreachable"]
