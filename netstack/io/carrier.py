"""Carrier of a daemon's interfaces, from the kernel's rtnetlink link notifications.

A veth has carrier while both of its ends are administratively up: ``netstack link ... down``
(or a real cable pulled) clears ``IFF_LOWER_UP`` on the peer and ``IFF_UP`` on the end set
down. :class:`CarrierWatch` joins the ``RTMGRP_LINK`` multicast group of the namespace it is
opened in, asks for one dump of every link to learn the starting state, and then reports each
change of its interfaces as ``(ifname, has_carrier)``. The messages are parsed with pyroute2's
rtnetlink marshal; the socket is non-blocking so that a daemon watches it from its event loop.
"""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Iterable
from typing import Any

from pyroute2.netlink.rtnl.marshal import MarshalRtnl

#: rtnetlink multicast group of link changes (linux/rtnetlink.h)
RTMGRP_LINK = 1
RTM_NEWLINK = 16
RTM_DELLINK = 17
RTM_GETLINK = 18
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
IFF_UP = 0x1
IFF_LOWER_UP = 0x10000


class CarrierWatch:
    """The carrier of ``ifnames`` in the current network namespace (see the module docstring)."""

    def __init__(self, ifnames: Iterable[str]) -> None:
        self.names = set(ifnames)
        #: ifname -> carrier, for the interfaces seen so far
        self.carrier: dict[str, bool] = {}
        self._marshal = MarshalRtnl()
        self._seq = 0
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC,
                                  socket.NETLINK_ROUTE)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            self.sock.bind((0, RTMGRP_LINK))
            self.request_dump()
        except OSError:
            self.sock.close()
            raise

    def fileno(self) -> int:
        return self.sock.fileno()

    def request_dump(self) -> None:
        """Ask the kernel for every link (answered on this socket, read by :meth:`read`)."""
        self._seq += 1
        # nlmsghdr (len, type, flags, seq, pid) + ifinfomsg (family, pad, type, index, flags, change)
        body = struct.pack("=BxHiII", socket.AF_UNSPEC, 0, 0, 0, 0)
        head = struct.pack("=IHHII", 16 + len(body), RTM_GETLINK, NLM_F_REQUEST | NLM_F_DUMP, self._seq, 0)
        self.sock.send(head + body)

    def read(self) -> list[tuple[str, bool]]:
        """Every pending notification; returns the changes of the watched interfaces, in order."""
        changes: list[tuple[str, bool]] = []
        while True:
            try:
                data = self.sock.recv(1 << 16)
            except BlockingIOError:
                return changes
            except OSError as exc:
                if exc.errno != errno.ENOBUFS:
                    raise
                self.request_dump()  # notifications were lost: learn the state afresh
                continue
            for msg in self._marshal.parse(data):
                self._take(msg, changes)

    def _take(self, msg: Any, changes: list[tuple[str, bool]]) -> None:
        kind = msg.get("header", {}).get("type") if hasattr(msg, "get_attr") else None
        if kind not in (RTM_NEWLINK, RTM_DELLINK):
            return  # (NLMSG_DONE, errors, anything else)
        name = msg.get_attr("IFLA_IFNAME")
        if name not in self.names:
            return
        flags = int(msg.get("flags", 0))
        up = kind == RTM_NEWLINK and bool(flags & IFF_UP) and bool(flags & IFF_LOWER_UP)
        if self.carrier.get(name) != up:
            self.carrier[name] = up
            changes.append((name, up))

    def close(self) -> None:
        self.sock.close()


__all__ = ["CarrierWatch"]
