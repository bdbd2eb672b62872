"""The sink side of ``netstack bench forwarding``: test frames counted in the kernel, on an
AF_PACKET socket with a BPF filter for the benchmark's UDP port that is never drained (so the
sink costs no user-space CPU)."""

from __future__ import annotations

import ctypes
import socket
import struct

from .params import ETH_P_ALL, PACKET_STATISTICS, SO_ATTACH_FILTER, SOL_PACKET, UDP_PORT


def udp_port_filter(port: int) -> list[tuple[int, int, int, int]]:
    """Classic BPF: accept IPv4/UDP (first fragment or whole) with destination port ``port``."""
    return [
        (0x28, 0, 0, 12),          # ldh [12]            EtherType
        (0x15, 0, 8, 0x0800),      # jeq #IPv4           else drop
        (0x30, 0, 0, 23),          # ldb [23]            IP protocol
        (0x15, 0, 6, 17),          # jeq #UDP           else drop
        (0x28, 0, 0, 20),          # ldh [20]            flags + fragment offset
        (0x45, 4, 0, 0x1FFF),      # jset #0x1fff       later fragment: drop
        (0xB1, 0, 0, 14),          # ldxb 4*([14]&0xf)   IP header length
        (0x48, 0, 0, 16),          # ldh [x+16]          UDP destination port
        (0x15, 0, 1, port),        # jeq #port          else drop
        (0x06, 0, 0, 0x40000),     # ret #262144         accept
        (0x06, 0, 0, 0),           # ret #0              drop
    ]


def attach_filter(sock: socket.socket, program: list[tuple[int, int, int, int]]) -> None:
    insns = b"".join(struct.pack("HBBI", *insn) for insn in program)
    buf = ctypes.create_string_buffer(insns, len(insns))
    fprog = struct.pack("HL", len(program), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


class SinkCounter:
    """Counts, in the kernel, test frames arriving on ``ifname`` of namespace ``netns``.

    PACKET_STATISTICS resets on every read; ``tp_packets`` includes ``tp_drops``, so it is
    every frame that passed the filter whether or not the (never drained) queue had room.
    """

    def __init__(self, netns_name: str, ifname: str, port: int = UDP_PORT) -> None:
        from ...topo.netns import in_netns

        with in_netns(netns_name):
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            attach_filter(self.sock, udp_port_filter(port))
            self.sock.bind((ifname, ETH_P_ALL))
        except OSError:
            self.sock.close()
            raise
        self.reset()

    def read(self) -> int:
        packets, _drops = struct.unpack("II", self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
        return packets

    def reset(self) -> None:
        self.read()

    def close(self) -> None:
        self.sock.close()
