"""The valid traffic of a campaign: the sequenced UDP stream that crosses the fuzzed ports (and its
verdict), the corpus of frames captured at those ports before the campaign (which the mutations
work on), and the ping afterwards."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from headers.fcs import fcs_ok

from .. import runtime
from ..runtime import RunState
from ..topo.nsenter import in_netns
from .ports import Link, raw_socket

STREAM_PORT = 47001


CORPUS_PORT = 47999


class Stream:
    """A sequenced UDP stream from one host to another, sent and received in this process;
    datagrams carry the campaign's nonce, so that no injected frame can pass for one."""

    def __init__(self, state: RunState, src: str, dst: str, rate: float, size: int = 200) -> None:
        self.nonce = os.urandom(8)
        self.dst = (state.host_ip(dst), STREAM_PORT)
        with in_netns(state.namespaces[src]):
            self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with in_netns(state.namespaces[dst]):
            self.rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.rx.bind(("0.0.0.0", STREAM_PORT))
        self.rx.setblocking(False)
        self.rate = rate
        self.pad = bytes(max(0, size - 12))
        self.sent = 0
        self.seen: set[int] = set()
        self.highest = -1
        self.duplicates = self.reordered = self.foreign = 0
        self.late: list[list[int]] = []
        self._t0: float | None = None

    def start(self) -> None:
        self._t0 = time.monotonic()

    def pump(self) -> None:
        """Send the datagrams due by now (at ``rate``); read what arrived."""
        if self._t0 is not None:
            self._send_until(int((time.monotonic() - self._t0) * self.rate))
        self.drain()

    def _send_until(self, due: int) -> None:
        while self.sent < due:
            with contextlib.suppress(OSError):
                self.tx.sendto(self.nonce + struct.pack("!I", self.sent) + self.pad, self.dst)
            self.sent += 1

    def drain(self) -> None:
        while True:
            try:
                data = self.rx.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            if len(data) < 12 or data[:8] != self.nonce:
                self.foreign += 1
                continue
            seq = struct.unpack_from("!I", data, 8)[0]
            if seq in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(seq)
            if seq < self.highest:
                self.reordered += 1
                if len(self.late) < 5:
                    self.late.append([seq, self.highest])
            else:
                self.highest = seq

    def send_all(self, count: int) -> None:
        """Send ``count`` more datagrams at the stream's rate (no injection meanwhile)."""
        base, t0 = self.sent, time.monotonic()
        while self.sent < base + count:
            self._send_until(min(base + count, base + int((time.monotonic() - t0) * self.rate)))
            self.drain()
            time.sleep(0.002)

    def finish(self, quiet: float = 0.6, timeout: float = 10.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last, seen = time.monotonic(), len(self.seen)
        while time.monotonic() < deadline and time.monotonic() - last < quiet:
            time.sleep(0.02)
            self.drain()
            if len(self.seen) != seen:
                last, seen = time.monotonic(), len(self.seen)
        return {"sent": self.sent, "received": len(self.seen), "lost": self.sent - len(self.seen),
                "duplicates": self.duplicates, "reordered": self.reordered, "late": self.late,
                "foreign": self.foreign}

    def reset(self) -> None:
        self.drain()
        self.seen.clear()
        self.sent = 0
        self.highest = -1
        self.duplicates = self.reordered = self.foreign = 0
        self.late = []
        self.nonce = os.urandom(8)
        self._t0 = None

    def close(self) -> None:
        self.tx.close()
        self.rx.close()


def stream_ok(res: dict[str, Any]) -> bool:
    return res["sent"] > 0 and res["lost"] == 0 and res["duplicates"] == 0 and res["reordered"] == 0


def stream_detail(s: dict[str, Any]) -> str:
    return (f"{s['received']}/{s['sent']} datagrams, lost {s['lost']}, duplicates {s['duplicates']}, "
            f"reordered {s['reordered']}" + (f", late {s['late']}" if s.get("late") else ""))


def capture(links: list[Link], traffic: Callable[[], None], limit: int = 300) -> list[bytes]:
    """Valid frames seen on the fuzzed links while ``traffic`` runs (ARP left out: a mutated ARP
    frame would poison a host's neighbour table, which says nothing about the daemons)."""
    socks = [raw_socket(link.ns, link.ifname, 0x0003) for link in links]
    fcs = {id(s): link.fcs for s, link in zip(socks, links, strict=True)}
    try:
        for s in socks:
            s.setblocking(False)
        traffic()
        time.sleep(0.2)
        out: list[bytes] = []
        for s in socks:
            while len(out) < limit:
                try:
                    frame = s.recv(65536)
                except BlockingIOError:
                    break
                if fcs[id(s)] and len(frame) > 18 and fcs_ok(frame):
                    frame = frame[:-4]
                if len(frame) >= 14 and frame[12:14] != b"\x08\x06":
                    out.append(frame)
        return out
    finally:
        for s in socks:
            s.close()


def corpus_traffic(state: RunState, pairs: list[tuple[str, str]], count: int = 40) -> Callable[[], None]:
    """UDP datagrams to a port nobody listens on (so the ICMP errors come back too)."""
    def run() -> None:
        for src, dst in pairs:
            with in_netns(state.namespaces[src]):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                for i in range(count):
                    with contextlib.suppress(OSError):
                        s.sendto(bytes([i]) * (20 + 17 * i % 300), (state.host_ip(dst), CORPUS_PORT))
                    time.sleep(0.002)
            finally:
                s.close()
    return run


def ping(state: RunState, src: str, dst: str) -> bool:
    import subprocess

    argv = runtime.node_exec_argv(state, src, ["ping", "-c", "3", "-i", "0.2", "-W", "1",
                                               state.host_ip(dst)])
    return subprocess.run(argv, capture_output=True, timeout=20, check=False).returncode == 0
