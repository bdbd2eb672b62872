"""``netstack capture``: the frames on one end of a link, from the kernel's capture path.

An AF_PACKET socket is opened in the node's namespace on the link's veth, with the user's BPF
filter compiled by ``tcpdump -ddd`` and attached in the kernel (SO_ATTACH_FILTER), so that only
matching frames are copied up. It sees both directions of that end: what the node receives and,
through the kernel's taps, what it sends (the switch daemons send through the qdisc layer, which
feeds the taps). Frames go to a pcapng file written by Scapy's ``PcapNgWriter`` (direction and
interface per packet), or, without a file, to a one-line summary each, decoded with the fast
codecs (headers.frame).

On a link with netstack's software FCS (switch-to-switch links, docs/wire-formats.md "Software
FCS trailer") the 4-byte trailer is kept in the frame as it was on the wire, and marked: a pcapng
comment per packet says the trailer is there and whether it checks.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from headers.errors import HeaderError
from headers.fcs import FCS_LEN, fcs_ok

from .errors import NetstackError

if TYPE_CHECKING:
    from .runtime import RunState

ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
#: sockaddr_ll.sll_pkttype of a frame the interface sent (linux/if_packet.h)
PACKET_OUTGOING = 4
#: pcapng EPB flags, direction bits: 1 inbound, 2 outbound
INBOUND, OUTBOUND = 1, 2
SNAPLEN = 65535
#: pcap link type of Ethernet frames
DLT_EN10MB = 1


class CaptureError(NetstackError):
    """Something the user can fix: an unknown link or end, a bad filter, a file not writable."""


@dataclass(frozen=True, slots=True)
class Tap:
    """Where a capture runs: ``node``'s end ``ifname`` (namespace ``netns``) of ``link``."""

    link: str
    node: str
    peer: str
    netns: str
    ifname: str
    fcs: bool

    @property
    def label(self) -> str:
        return f"{self.node}:{self.ifname}"


def resolve(state: RunState, link: str, end: str | None) -> Tap:
    """The end of ``link`` to capture on: ``A``/``B`` (the link's a/b end), a node of the link,
    or None (its a end)."""
    if link not in state.links:
        raise CaptureError(f"no link {link!r}; links: {', '.join(sorted(state.links)) or 'none'}")
    ends = {"a": state.links[link].a, "b": state.links[link].b}
    want = (end or "a")
    node = ends.get(want.lower()) or (want if want in ends.values() else None)
    if node is None:
        raise CaptureError(f"--end {end!r} is not an end of {link}: use A ({ends['a']}), B ({ends['b']}) "
                           "or one of those node names")
    port = next((p for p in state.ends_of(link) if p.node == node), None)
    if port is None:
        raise CaptureError(f"{node} has no port on {link} in the running topology")
    return Tap(link, node, port.peer, port.netns, port.ifname, port.fcs)


def compile_filter(expr: str) -> bytes:
    """A classic BPF program (struct sock_fprog's instructions) for ``expr``, compiled by
    tcpdump for Ethernet frames. Raises CaptureError when tcpdump is missing or refuses it."""
    tcpdump = shutil.which("tcpdump")
    if tcpdump is None:
        raise CaptureError("--filter needs tcpdump to compile the expression (apt-get install tcpdump; "
                           "scripts/install.sh installs it)")
    r = subprocess.run([tcpdump, "-ddd", "-y", "EN10MB", expr], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        said = r.stderr.strip().splitlines()
        raise CaptureError(f"--filter {expr!r}: {said[-1] if said else 'tcpdump refused it'}")
    lines = r.stdout.split("\n")
    try:
        count = int(lines[0])
        insns = [tuple(int(x) for x in line.split()) for line in lines[1:1 + count]]
        return b"".join(struct.pack("HBBI", code, jt, jf, k) for code, jt, jf, k in insns)
    except (ValueError, IndexError, struct.error):
        raise CaptureError(f"--filter {expr!r}: tcpdump printed no program I can read") from None


def _attach(sock: socket.socket, program: bytes) -> None:
    buf = ctypes.create_string_buffer(program)
    fprog = struct.pack("HL", len(program) // 8, ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


def open_socket(tap: Tap, program: bytes | None) -> socket.socket:
    """The capture socket, bound to the tap's veth inside its namespace, filter attached."""
    from .topo.nsenter import in_netns

    try:
        with in_netns(tap.netns):
            sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    except OSError as exc:
        raise CaptureError(f"cannot open a capture socket in {tap.netns}: {exc.strerror or exc}") from None
    try:
        if program is not None:
            # a filter attached after bind would let through what arrived in between
            _attach(sock, program)
        sock.bind((tap.ifname, 0))
    except OSError as exc:
        sock.close()
        raise CaptureError(f"cannot capture on {tap.label}: {exc.strerror or exc}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.settimeout(0.2)
    return sock


@dataclass(slots=True)
class Captured:
    frame: bytes
    at: float  # seconds since the epoch (the kernel's receive stamp is not read: close enough here)
    outbound: bool


def frames(sock: socket.socket, count: int | None, seconds: float | None,
           stop: Callable[[], bool] = lambda: False) -> Iterator[Captured]:
    """Captured frames until ``count`` of them, ``seconds`` elapsed or ``stop()``."""
    deadline = time.monotonic() + seconds if seconds else None
    n = 0
    while (count is None or n < count) and not stop():
        if deadline is not None and time.monotonic() >= deadline:
            return
        try:
            data, addr = sock.recvfrom(SNAPLEN)
        except TimeoutError:
            continue
        n += 1
        yield Captured(data, time.time(), addr[2] == PACKET_OUTGOING)


def fcs_note(tap: Tap, frame: bytes) -> str | None:
    """The mark a frame of a software-FCS link gets (None on other links)."""
    if not tap.fcs:
        return None
    if len(frame) < 14 + FCS_LEN:
        return "netstack software FCS link: frame too short for the 4-byte trailer"
    return f"netstack software FCS: last {FCS_LEN} bytes, {'ok' if fcs_ok(frame) else 'BAD'}"


def summary(tap: Tap, cap: Captured) -> str:
    """One line per frame: time, direction, length, the fast codecs' records."""
    from headers.frame import describe, dissect

    frame = cap.frame
    note = fcs_note(tap, frame)
    body = frame[:-FCS_LEN] if note and "last" in note else frame
    try:
        records, error = dissect(body)
        text = " | ".join(describe(r) for r in records)
        if error is not None:
            text += f" | malformed: {error}"
    except HeaderError as exc:  # dissect reports errors, but a decoder's contract is what holds
        text = f"malformed: {exc}"
    stamp = time.strftime("%H:%M:%S", time.localtime(cap.at)) + f".{int(cap.at % 1 * 1e6):06d}"
    way = f"{tap.node}>{tap.peer}" if cap.outbound else f"{tap.peer}>{tap.node}"
    fcs = f" [FCS {'ok' if 'ok' in note else 'BAD'}]" if note and "last" in note else ""
    return f"{stamp} {way} {len(frame)} B{fcs} {text}"


class PcapngOut:
    """A pcapng file written by Scapy's PcapNgWriter: one interface block for the tap, per packet
    its direction and, on a software-FCS link, the trailer's mark as a comment."""

    def __init__(self, path: str, tap: Tap) -> None:
        from scapy.utils import PcapNgWriter

        self.tap = tap
        try:
            self.writer = PcapNgWriter(path)
            self.writer.linktype = DLT_EN10MB  # (the pcapng writer takes no linktype argument)
            self.writer.write_header(None)  # a capture of no frame is still a valid file
        except OSError as exc:
            raise CaptureError(f"cannot write {path}: {exc.strerror or exc}") from None
        self.count = 0

    def write(self, cap: Captured) -> None:
        from scapy.packet import Raw

        pkt = Raw(load=cap.frame)  # the bytes as captured: no dissection per frame
        pkt.time = cap.at
        pkt.sniffed_on = self.tap.label
        pkt.direction = OUTBOUND if cap.outbound else INBOUND
        note = fcs_note(self.tap, cap.frame)
        if note:
            pkt.comments = [note.encode()]
        # write_packet, not write: write() warns that a Raw packet has no link type of its own,
        # although the file's interface block says Ethernet
        self.writer.write_packet(pkt)
        self.count += 1

    def close(self) -> None:
        self.writer.close()


def writable(path: str) -> None:
    """Refuse a path that cannot be written before anything is captured."""
    parent = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise CaptureError(f"cannot write {path}: it is a directory")
    if not os.path.isdir(parent):
        raise CaptureError(f"cannot write {path}: no directory {parent}")
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise CaptureError(f"cannot write {path}: permission denied")
