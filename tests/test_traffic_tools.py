"""The traffic tools' /proc parsers (netstack.traffic): next hop and neighbour state."""

from __future__ import annotations

import socket
import struct

from hypothesis import given
from hypothesis import strategies as st

from netstack.traffic import neighbour_complete, next_hop

HEAD = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"


def _hex(addr: str) -> str:
    return f"{struct.unpack('=I', socket.inet_aton(addr))[0]:08X}"


def _route(dev: str, net: str, gw: str, flags: int, mask: str) -> str:
    return f"{dev}\t{_hex(net)}\t{_hex(gw)}\t{flags:04X}\t0\t0\t0\t{_hex(mask)}\t0\t0\t0\n"


ROUTES = HEAD + _route("eth0", "0.0.0.0", "10.0.0.254", 3, "0.0.0.0") + \
    _route("p-sw1", "10.0.0.0", "0.0.0.0", 1, "255.255.255.0") + \
    _route("p-x", "10.0.0.128", "10.0.0.9", 3, "255.255.255.128")


def test_on_link_destination_is_its_own_next_hop():
    assert next_hop("10.0.0.2", ROUTES) == ("p-sw1", "10.0.0.2")


def test_longest_prefix_wins_and_a_gateway_is_the_next_hop():
    assert next_hop("10.0.0.200", ROUTES) == ("p-x", "10.0.0.9")
    assert next_hop("192.0.2.7", ROUTES) == ("eth0", "10.0.0.254")


def test_no_route_and_routes_that_are_down():
    assert next_hop("10.0.0.2", HEAD) is None
    assert next_hop("10.0.0.2", HEAD + _route("p-sw1", "10.0.0.0", "0.0.0.0", 0, "255.255.255.0")) is None


def test_neighbour_complete_reads_the_flag_and_the_device():
    arp = ("IP address       HW type     Flags       HW address            Mask     Device\n"
           "10.0.0.2         0x1         0x2         02:00:00:00:00:02     *        p-sw1\n"
           "10.0.0.3         0x1         0x0         00:00:00:00:00:00     *        p-sw1\n")
    assert neighbour_complete("p-sw1", "10.0.0.2", arp)
    assert not neighbour_complete("p-sw1", "10.0.0.3", arp)  # incomplete: still resolving
    assert not neighbour_complete("eth0", "10.0.0.2", arp)


@given(st.text(), st.ip_addresses(v=4).map(str))
def test_parsers_never_raise_on_arbitrary_text(text, addr):
    # /proc is the kernel's, but a truncated read or an odd line must not kill a sender
    next_hop(addr, text)
    neighbour_complete("p-sw1", addr, text)
    neighbour_complete("p-sw1", addr, f"head\n{addr} 0x1 {text.split()[0] if text.split() else 'zz'} x * p-sw1\n")
