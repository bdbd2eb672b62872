"""``netstack fuzz TARGET``: random and mutated frames into a live daemon's port, with valid
traffic interleaved, then checks that the daemons survived, that their counters account for
every frame, and that the protocol's invariant still holds (docs/faults.md, "Fuzzing campaign").

A campaign brings up its own topology under a unique prefix (or uses a running one), captures
a corpus of valid frames at the ports it will fuzz, and sends ``frames`` frames from
``headers.strategies`` generators seeded with ``seed`` (the same frames for the same seed): a
mix of random bytes, valid frames of the target's protocols aimed at the port's daemon, and
mutations of both and of the corpus. It sends them from raw sockets at the far end of the
fuzzed links, in batches at a bounded rate, while a sequenced UDP stream crosses the fuzzed
ports. Afterwards:

- **alive**: every daemon of the run has its pid and answers ``ping`` on its control socket;
  every switch reports ``internal_errors == 0``;
- **accounting**, per fuzzed port (counter deltas over the campaign, read once everything is
  quiet; ``K`` = the daemon's ``kernel_drops``, frames its socket ring had no room for):

  * wire: frames the kernel put on the veth at the far end (``tx_packets``: ours and the
    peer's own) = frames the port's interface received (``rx_packets``) + veth drops;
  * daemon: the interface's ``rx_packets`` = the daemon's ``rx_frames`` + ``K``;
  * fate: for each counter an injected frame's bytes alone decide (``fcs_errors``,
    ``edge_drops_pfc``, ``edge_drops_switch_only``, ``mac_control_rx``), the delta equals
    what the campaign computed from the frames it sent plus what the peer's own counters say
    it sent of that kind (its PFC frames), within ``K`` below;
  * conservation, on a switch with two ports whose other port runs no feature: ``rx_frames``
    = the sum of every drop and consume counter of the port + the frames forwarded out of the
    other port (its per-class ``tx_frames_class`` + ``queue_drops`` + ``mtu_drops``);
- **invariant** of the target (:data:`TARGETS`).

The exit status is 0 only when every check passed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import socket
import struct
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from headers import strategies as hs
from headers.fcs import append_fcs, fcs_ok
from headers.linkguardian import ETHERTYPE as LG_ETHERTYPE

from . import runtime
from .io.control import ControlError, request
from .switch.forwarding import is_link_local
from .topo.model import load_topology
from .topo.nsenter import in_netns, iproute

#: what each target fuzzes; the order is the order of implementation priority
TARGETS = {
    "switch": "plain forwarding and edge filtering: frames from h1 into sw1's edge port p-h1 "
              "(invariant: a sequenced UDP stream h1 -> h2 through that port arrives complete and in "
              "order, and h1 pings h2 afterwards)",
    "linkguardian": "LinkGuardian on sw1-sw2: frames into sw2's receiver (sent on sw1's p-sw2) and into "
                    "sw1's sender (sent on sw2's p-sw1), with and without a valid FCS (invariant: the "
                    "stream h1 -> h2 stays complete and in order while frames the protocol is meant "
                    "to withstand arrive; then, after forged LinkGuardian and PFC frames with a valid "
                    "FCS, the receiver's state stayed bounded and a new stream is complete and in order)",
    "dta": "DTA's translator on sw2: reports and anything else from h2 into p-h2, RoCEv2 responses and anything "
           "else from c1 into p-c1, while h1's genuine Key-Writes flow (invariant: afterwards, every genuine "
           "Key-Write is executed by the collector and reads back its value)",
}
DEFAULT_RATE = 5000
BATCH = 50
PROGRESS_S = 1.0
STREAM_PORT = 47001
CORPUS_PORT = 47999
SETTLE_MAX_S = 8.0


class FuzzError(RuntimeError):
    """The campaign could not be run (not a failed check): the message says why."""


# ============================================================================ the run's ports
@dataclass
class Link:
    """One veth pair of the run: the daemon port fuzzed, and the far end frames are sent from."""

    node: str  #: the switch whose port receives
    ifname: str
    ns: str
    mac: bytes
    far_node: str
    far_ifname: str
    far_ns: str
    fcs: bool
    edge: bool
    accepts_pfc: bool


def find_link(state: dict[str, Any], node: str, peer: str) -> Link:
    port = next((p for p in state["ports"] if p["node"] == node and p["peer"] == peer), None)
    far = next((p for p in state["ports"] if p["node"] == peer and p["peer"] == node), None)
    if port is None or far is None:
        raise FuzzError(f"no link between {node} and {peer} in the running topology")
    cfg = json.loads((runtime.run_dir(state["prefix"]) / f"{node}.json").read_text())
    pc = next(p for p in cfg["switch"]["ports"] if p["name"] == port["ifname"])
    edge = pc.get("role") == "edge"
    lossless = bool(pc.get("lossless"))
    accepts = True if not edge else (lossless if pc.get("pfc_from_host") is None else bool(pc["pfc_from_host"]))
    return Link(node, port["ifname"], port["netns"], bytes.fromhex(port["mac"].replace(":", "")), peer,
                far["ifname"], far["netns"], bool(port["fcs"]), edge, accepts)


def iface_stats(ns: str, ifname: str) -> dict[str, int]:
    """The kernel's counters of an interface (netlink IFLA_STATS64)."""
    with iproute(ns) as ipr:
        link = ipr.link("get", ifname=ifname)[0]
    stats = link.get_attr("IFLA_STATS64") or link.get_attr("IFLA_STATS")
    return {k: int(stats[k]) for k in ("rx_packets", "tx_packets", "rx_dropped", "tx_dropped")}


def iface_mtu(ns: str, ifname: str) -> int:
    with iproute(ns) as ipr:
        return int(ipr.link("get", ifname=ifname)[0].get_attr("IFLA_MTU"))


def raw_socket(ns: str, ifname: str, proto: int = 0) -> socket.socket:
    with in_netns(ns):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(proto))
    s.bind((ifname, proto))  # (Python converts the protocol to network order itself)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    return s


def mac_of(state: dict[str, Any], node: str) -> bytes:
    port = next(p for p in state["ports"] if p["node"] == node)
    return bytes.fromhex(port["mac"].replace(":", ""))


def ip_of(state: dict[str, Any], node: str) -> bytes:
    return socket.inet_aton(state["hosts"][node].split("/")[0])


# ============================================================================ frames and fates
@dataclass
class Injector:
    """Frames from a generator into one link's daemon port, with what they should do there."""

    name: str
    link: Link
    gen: hs.Gen[bytes]
    #: frames the campaign sends with a valid FCS only outside the checked stream phase (see
    #: the LinkGuardian target): with a valid FCS they act on protocol state by design
    guarded: Callable[[bytes], bool] | None = None
    weight: int = 1
    sock: socket.socket | None = None
    max_len: int = 1514
    sent: int = 0
    refused: int = 0  #: send() failed (the kernel refused the frame, e.g. longer than the MTU)
    fate: Counter[str] = field(default_factory=Counter)
    example: dict[str, str] = field(default_factory=dict)  #: one frame (hex) per fate

    def frame(self, rng: random.Random, d: hs.RandomDraw, guard: bool) -> bytes:
        frame = self.gen(d)[:self.max_len]
        if len(frame) < 14:
            frame += bytes(14 - len(frame))  # (the kernel pads a shorter frame so: send what arrives)
        if not self.link.fcs:
            return frame
        valid = rng.random() < 0.5
        if valid and guard and self.guarded is not None and self.guarded(frame):
            valid = False
        if valid:
            return append_fcs(frame)[:self.max_len + 4]
        if fcs_ok(frame) and len(frame) > 4:  # (2^-32: a random tail that is a valid FCS)
            frame = frame[:-1] + bytes([frame[-1] ^ 1])
        return frame


#: EtherTypes the kernel untags before any packet socket sees the frame (802.1Q, 802.1ad)
VLAN_TYPES = (0x8100, 0x88A8)
#: the fate of a tagged frame too short to untag: the kernel drops it before any packet socket
KERNEL_VLAN_SHORT = "kernel_vlan_short"


def kernel_view(frame: bytes) -> bytes | None:
    """The frame as the daemon reads it. The receiving kernel takes an outer 802.1Q / 802.1ad
    tag off before packet sockets see the frame (``skb_vlan_untag`` in
    ``__netif_receive_skb_core``) and the daemon's ring puts it back from the slot header
    (netstack/io/packet.py ``RxRing``), so a tagged frame arrives whole; but the kernel drops a
    tagged frame with fewer than 6 bytes after its Ethernet header, uncounted by any socket."""
    if len(frame) >= 14 and (frame[12] << 8 | frame[13]) in VLAN_TYPES and len(frame) < 20:
        return None
    return frame


def fate_of(frame: bytes, link: Link, switch_only: frozenset[int]) -> str:
    """What the receiving switch's ingress pipeline does with ``frame`` before its features
    (netstack/switch/core.py ``Switch._receive``), decided from the frame's bytes alone."""
    seen = kernel_view(frame)
    if seen is None:
        return KERNEL_VLAN_SHORT
    frame = seen
    if link.fcs:
        if len(frame) < 18:
            return "malformed"
        if not fcs_ok(frame):
            return "fcs_errors"
        frame = frame[:-4]
    elif len(frame) < 14:
        return "malformed"
    etype = frame[12] << 8 | frame[13]
    if etype == 0x8808 or (frame[0] == 0x01 and is_link_local(frame)):
        if link.edge and not link.accepts_pfc and etype == 0x8808:
            return "edge_drops_pfc"
        if malformed_pfc(frame):
            return "malformed"
        return "mac_control_rx"
    if link.edge:
        if etype in VLAN_TYPES:  # the edge looks through VLAN tags (Switch._receive)
            from .switch.core import inner_ethertype

            etype = inner_ethertype(frame)
            if etype == 0x8808 and not link.accepts_pfc:
                return "edge_drops_pfc"
        if etype in switch_only:
            return "edge_drops_switch_only"
    return "passed"


def malformed_pfc(frame: bytes) -> bool:
    """A PFC frame (MAC control opcode 0x0101) of 18 to 33 bytes (without FCS): long enough for the
    switch to look at its opcode, too short for its 20-byte payload; counted as malformed
    (``Switch._mac_control``)."""
    return 18 <= len(frame) < 34 and frame[12:16] == b"\x88\x08\x01\x01"


def lg_or_mac_control(frame: bytes) -> bool:
    """A frame the link's protocols act on as protocol state: a LinkGuardian frame (its tags
    move the receiver's sequence state and the sender's Tx buffer) or MAC control (PFC, PAUSE,
    link-local groups)."""
    if len(frame) < 14:
        return False
    etype = frame[12] << 8 | frame[13]
    return etype in (LG_ETHERTYPE, 0x8808) or is_link_local(frame)


# ============================================================================ the stream
class Stream:
    """A sequenced UDP stream from one host to another, sent and received in this process;
    datagrams carry the campaign's nonce, so that no injected frame can pass for one."""

    def __init__(self, state: dict[str, Any], src: str, dst: str, rate: float, size: int = 200) -> None:
        self.nonce = os.urandom(8)
        self.dst = (state["hosts"][dst].split("/")[0], STREAM_PORT)
        with in_netns(state["namespaces"][src]):
            self.tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with in_netns(state["namespaces"][dst]):
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


# ============================================================================ counters
def snapshot(state: dict[str, Any], links: list[Link]) -> dict[str, Any]:
    """Every switch daemon's status and the kernel counters of both ends of each fuzzed link."""
    st = runtime.status(state["prefix"])["daemons"]
    kernel = {}
    for link in links:
        kernel[f"{link.node}/{link.ifname}"] = iface_stats(link.ns, link.ifname)
        kernel[f"{link.far_node}/{link.far_ifname}"] = iface_stats(link.far_ns, link.far_ifname)
    return {"daemons": st, "kernel": kernel}


def _fingerprint(snap: dict[str, Any]) -> Any:
    ports = {name: {p: (c.get("rx_frames"), c.get("tx_frames"), c.get("kernel_drops"))
                    for p, c in d.get("ports", {}).items()} for name, d in snap["daemons"].items()}
    return ports, snap["kernel"]


def settled(state: dict[str, Any], links: list[Link], timeout: float = SETTLE_MAX_S) -> tuple[dict[str, Any], bool]:
    """A snapshot taken once two in a row, more than the daemons' kernel-statistics interval
    apart (1 s), agree: nothing in flight, ``kernel_drops`` up to date."""
    deadline = time.monotonic() + timeout
    snap = snapshot(state, links)
    while True:
        time.sleep(1.1)
        again = snapshot(state, links)
        if _fingerprint(again) == _fingerprint(snap):
            return again, True
        snap = again
        if time.monotonic() > deadline:
            return snap, False


def _port(snap: dict[str, Any], node: str, ifname: str) -> dict[str, Any]:
    return dict(snap["daemons"][node]["ports"][ifname])


def _delta(before: dict[str, Any], after: dict[str, Any], node: str, ifname: str, key: str) -> int:
    a = _port(after, node, ifname)[key]
    b = _port(before, node, ifname)[key]
    if isinstance(a, list):
        return sum(a) - sum(b)
    return int(a) - int(b)


#: counters an ingress frame ends in before forwarding (netstack/switch/core.py)
DISPOSITIONS = ("fcs_errors", "malformed", "edge_drops_pfc", "mac_control_rx", "edge_drops_switch_only",
                "feature_consumed", "mac_control_dropped", "filtered")
#: what a switch port sends of its own accord as MAC control (its PFC frames)
PFC_SENT = ("pauses_tx", "resumes_tx", "pause_refreshes_tx")


def account(inj: list[Injector], before: dict[str, Any], after: dict[str, Any],
            featureless: Callable[[str, str], bool]) -> list[dict[str, Any]]:
    """The accounting checks of each fuzzed port (module docstring); one row per check."""
    rows: list[dict[str, Any]] = []
    by_link: dict[str, list[Injector]] = {}
    for i in inj:
        by_link.setdefault(f"{i.link.node}/{i.link.ifname}", []).append(i)
    for key, group in by_link.items():
        link = group[0].link
        n, p = link.node, link.ifname
        d = {k: _delta(before, after, n, p, k) for k in ("rx_frames", "kernel_drops", *DISPOSITIONS)}
        kb, ka = before["kernel"], after["kernel"]
        far = f"{link.far_node}/{link.far_ifname}"
        t_k = ka[far]["tx_packets"] - kb[far]["tx_packets"]
        r_k = ka[key]["rx_packets"] - kb[key]["rx_packets"]
        veth = ka[far]["tx_dropped"] - kb[far]["tx_dropped"]
        k = d["kernel_drops"]
        sent = sum(i.sent for i in group)
        rows.append(_row(key, "wire", f"far end sent {t_k} (injected {sent} + its own {t_k - sent}) = "
                         f"port received {r_k} + veth drops {veth}", t_k == r_k + veth and t_k >= sent))
        fates: Counter[str] = Counter()
        for i in group:
            fates.update(i.fate)
        short = fates[KERNEL_VLAN_SHORT]
        rows.append(_row(key, "daemon", f"port received {r_k} = rx_frames {d['rx_frames']} + kernel_drops {k} + "
                         f"short 802.1Q frames the kernel dropped before any socket {short}",
                         r_k == d["rx_frames"] + k + short))
        peer_pfc = 0
        if link.far_node in after["daemons"] and "ports" in after["daemons"][link.far_node]:
            peer_pfc = sum(_delta(before, after, link.far_node, link.far_ifname, c) for c in PFC_SENT)
        for counter in ("fcs_errors", "edge_drops_pfc", "edge_drops_switch_only", "mac_control_rx"):
            want = fates[counter] + (peer_pfc if counter == "mac_control_rx" else 0)
            got = d[counter]
            ok = want - k <= got <= want
            rows.append(_row(key, counter, f"{got} counted, {want} expected"
                             + (f" ({fates[counter]} injected + {peer_pfc} PFC from {link.far_node})"
                                if counter == "mac_control_rx" and peer_pfc else "")
                             + (f" (within kernel_drops {k})" if k else ""), ok))
        other = _other_port(after, n, p)
        if other is not None and featureless(n, other):
            fwd = sum(_delta(before, after, n, other, c) for c in ("tx_frames_class", "queue_drops", "mtu_drops"))
            total = sum(d[c] for c in DISPOSITIONS) + fwd
            rows.append(_row(key, "conservation", f"rx_frames {d['rx_frames']} = drops and consumed "
                             f"{total - fwd} + forwarded out of {other} {fwd}", d["rx_frames"] == total))
    return rows


def _other_port(snap: dict[str, Any], node: str, ifname: str) -> str | None:
    ports = list(snap["daemons"][node]["ports"])
    return next(p for p in ports if p != ifname) if len(ports) == 2 else None


def _row(where: str, check: str, detail: str, ok: bool) -> dict[str, Any]:
    return {"where": where, "check": check, "detail": detail, "ok": bool(ok)}


def liveness(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Every daemon of the run alive and answering ``ping``; switches without internal errors."""
    rows = []
    for dmn in runtime.daemons_of(state):
        alive = dmn.alive()
        answer = "no control socket"
        if dmn.control:
            try:
                answer = str(request(dmn.control, "ping", timeout=2.0))
            except (OSError, ControlError, ValueError) as exc:
                answer = f"no answer ({exc})"
        ok = alive and (not dmn.control or answer == "pong")
        rows.append(_row(dmn.key, "alive", f"pid {dmn.pid} {'alive' if alive else 'GONE'}, ping: {answer}", ok))
        if dmn.kind == "switch" and dmn.control and ok:
            errors = request(dmn.control, "status", timeout=2.0).get("internal_errors")
            rows.append(_row(dmn.key, "internal_errors", f"{errors}", errors == 0))
    return rows


# ============================================================================ sending
class Sender:
    """Sends the injectors' frames in batches at a bounded rate, pumping the stream between
    batches and reporting progress on stderr."""

    def __init__(self, injectors: list[Injector], rng: random.Random, rate: float, out: TextIO,
                 label: str, switch_only: frozenset[int]) -> None:
        self.injectors = injectors
        self.rng = rng
        self.draw = hs.RandomDraw(rng)
        self.rate = rate
        self.out = out
        self.label = label
        self.switch_only = switch_only
        self.table = [i for i in injectors for _ in range(i.weight)]
        self.total = 0
        self.started = time.monotonic()
        self.inject_s = 0.0  #: time spent injecting (the phases without the checks between them)
        self._run_t0: float | None = None

    def run(self, count: int, stream: Stream | Reports | None, guard: bool, total: int) -> None:
        t0 = self._run_t0 = time.monotonic()
        next_report = t0 + PROGRESS_S
        done = 0
        while done < count:
            n = min(BATCH, count - done)
            for _ in range(n):
                self._one(guard)
            done += n
            self.total += n
            if stream is not None:
                stream.pump()
            now = time.monotonic()
            wait = t0 + done / self.rate - now
            if wait > 0:
                time.sleep(wait)
            if now >= next_report:
                next_report = now + PROGRESS_S
                self.progress(total)
        self.inject_s += time.monotonic() - t0
        self._run_t0 = None

    def progress(self, total: int) -> None:
        busy = self.inject_s + (time.monotonic() - self._run_t0 if self._run_t0 is not None else 0.0)
        print(f"fuzz {self.label}: {self.total}/{total} frames sent, {self.total / max(1e-9, busy):,.0f} frames/s",
              file=self.out, flush=True)

    def _one(self, guard: bool) -> None:
        inj = self.table[self.rng.randrange(len(self.table))]
        frame = inj.frame(self.rng, self.draw, guard)
        assert inj.sock is not None
        while True:
            try:
                inj.sock.send(frame)
            except OSError as exc:
                if exc.errno in (errno.ENOBUFS, errno.EAGAIN):
                    time.sleep(0.001)
                    continue
                inj.refused += 1
                return
            break
        inj.sent += 1
        fate = fate_of(frame, inj.link, self.switch_only)
        inj.fate[fate] += 1
        inj.example.setdefault(fate, frame.hex())


# ============================================================================ corpus
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


def corpus_traffic(state: dict[str, Any], pairs: list[tuple[str, str]], count: int = 40) -> Callable[[], None]:
    """UDP datagrams to a port nobody listens on (so the ICMP errors come back too)."""
    def run() -> None:
        for src, dst in pairs:
            with in_netns(state["namespaces"][src]):
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                for i in range(count):
                    with contextlib.suppress(OSError):
                        s.sendto(bytes([i]) * (20 + 17 * i % 300), (state["hosts"][dst].split("/")[0], CORPUS_PORT))
                    time.sleep(0.002)
            finally:
                s.close()
    return run


def ping(state: dict[str, Any], src: str, dst: str) -> bool:
    import subprocess

    argv = runtime.node_exec_argv(state, src, ["ping", "-c", "3", "-i", "0.2", "-W", "1",
                                               state["hosts"][dst].split("/")[0]])
    return subprocess.run(argv, capture_output=True, timeout=20, check=False).returncode == 0


# ============================================================================ campaigns
@dataclass
class Options:
    target: str
    frames: int
    seed: int
    prefix: str | None = None
    keep: bool = False
    rate: float = DEFAULT_RATE
    out: TextIO = sys.stderr


@dataclass
class Result:
    target: str
    prefix: str
    seed: int
    frames: int
    sent: int = 0
    refused: int = 0
    duration_s: float = 0.0  #: injecting
    wall_s: float = 0.0  #: the campaign from its first frame to its checks
    checks: list[dict[str, Any]] = field(default_factory=list)
    injectors: dict[str, Any] = field(default_factory=dict)
    stream: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c["ok"] for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "prefix": self.prefix, "seed": self.seed, "frames": self.frames,
                "sent": self.sent, "refused": self.refused, "duration_s": round(self.duration_s, 2),
                "wall_s": round(self.wall_s, 2),
                "rate": round(self.sent / self.duration_s) if self.duration_s else 0, "ok": self.ok,
                "checks": self.checks, "injectors": self.injectors, "stream": self.stream, "notes": self.notes}


@contextlib.contextmanager
def topology(opts: Options, name: str | None) -> Iterator[dict[str, Any]]:
    """The run to fuzz: ``opts.prefix``'s if one runs, else ``name`` brought up under a unique
    prefix and torn down afterwards (unless ``keep``), also on Ctrl-C or failure."""
    if opts.prefix is not None and opts.prefix in runtime.netns.list_running():
        yield runtime.load_state(opts.prefix)
        return
    prefix = opts.prefix or "fz" + uuid.uuid4().hex[:5]
    from .topo.model import load_topology_spec

    topo = load_topology(None) if name is None else load_topology_spec(name)
    print(f"fuzz {opts.target}: bringing up {topo.name} under prefix {prefix}", file=opts.out, flush=True)
    state = runtime.up(topo, prefix, apply_impairments=False)
    try:
        yield state
    finally:
        if opts.keep:
            print(f"fuzz {opts.target}: --keep: {prefix} left running ('netstack down --prefix {prefix}')",
                  file=opts.out, flush=True)
        else:
            runtime.down(prefix)


def _finish(res: Result, injectors: list[Injector], sender: Sender) -> None:
    res.sent = sum(i.sent for i in injectors)
    res.refused = sum(i.refused for i in injectors)
    res.duration_s = sender.inject_s
    res.wall_s = time.monotonic() - sender.started
    for i in injectors:
        res.injectors[i.name] = {"port": f"{i.link.node}/{i.link.ifname}", "from": f"{i.link.far_node}/"
                                 f"{i.link.far_ifname}", "sent": i.sent, "refused": i.refused,
                                 "fates": dict(i.fate), "examples": i.example}


def switch_only() -> frozenset[int]:
    from . import protocols

    return frozenset(protocols.switch_only_ethertypes())


def run_switch(opts: Options) -> Result:
    with topology(opts, None) as state:
        res = Result("switch", state["prefix"], opts.seed, opts.frames)
        link = find_link(state, "sw1", "h1")
        ends = hs.Endpoints(dst_macs=[mac_of(state, n) for n in ("h2", "c1")] + [b"\xff" * 6, link.mac],
                            src_macs=[mac_of(state, "h1")], dst_ips=[ip_of(state, n) for n in ("h2", "c1")],
                            src_ips=[ip_of(state, "h1")])
        corpus = capture([link], corpus_traffic(state, [("h1", "h2"), ("h2", "h1")]))
        res.notes.append(f"corpus: {len(corpus)} frames captured at {link.node}/{link.ifname}")
        valid = hs.frame_gen(None, ends)
        inj = Injector("h1>sw1", link, hs.fuzz_gen(valid, corpus, max_len=iface_mtu(link.far_ns, link.far_ifname)
                                                   + 14))
        return _campaign(opts, state, res, [inj], ("h1", "h2"), lambda node, port: True)


def _open(injectors: list[Injector]) -> None:
    for i in injectors:
        i.sock = raw_socket(i.link.far_ns, i.link.far_ifname)
        i.max_len = iface_mtu(i.link.far_ns, i.link.far_ifname) + 14


def _campaign(opts: Options, state: dict[str, Any], res: Result, injectors: list[Injector],
              stream_ends: tuple[str, str], featureless: Callable[[str, str], bool]) -> Result:
    """One phase: the stream and every injector at once; accounting, liveness, stream check."""
    links = list({id(i.link): i.link for i in injectors}.values())
    rng = random.Random(opts.seed)
    _open(injectors)
    stream = Stream(state, *stream_ends, rate=max(200.0, min(2000.0, opts.rate / 5)))
    try:
        before, quiet = settled(state, links)
        sender = Sender(injectors, rng, opts.rate, opts.out, opts.target, switch_only())
        stream.start()
        sender.run(opts.frames, stream, guard=False, total=opts.frames)
        sender.progress(opts.frames)
        res.stream = stream.finish()
        after, quiet2 = settled(state, links)
        _finish(res, injectors, sender)
        res.checks += liveness(state)
        res.checks += account(injectors, before, after, featureless)
        if not (quiet and quiet2):
            res.notes.append("counters were still moving when read: accounting may be off by frames in flight")
        res.checks.append(_row(f"{stream_ends[0]}>{stream_ends[1]}", "stream",
                               _stream_detail(res.stream), stream_ok(res.stream)))
        ok = ping(state, *stream_ends)
        res.checks.append(_row(f"{stream_ends[0]}>{stream_ends[1]}", "ping", "answered" if ok else "NO ANSWER", ok))
    finally:
        stream.close()
        for i in injectors:
            if i.sock is not None:
                i.sock.close()
    return res


def _stream_detail(s: dict[str, Any]) -> str:
    return (f"{s['received']}/{s['sent']} datagrams, lost {s['lost']}, duplicates {s['duplicates']}, "
            f"reordered {s['reordered']}" + (f", late {s['late']}" if s.get("late") else ""))


# ============================================================================ LinkGuardian
def run_linkguardian(opts: Options) -> Result:
    from .linkguardian.control import disable_link, enable_link

    with topology(opts, None) as state:
        prefix = state["prefix"]
        res = Result("linkguardian", prefix, opts.seed, opts.frames)
        rx = find_link(state, "sw2", "sw1")  # into sw2's receiver, sent on sw1's p-sw2
        tx = find_link(state, "sw1", "sw2")  # into sw1's sender, sent on sw2's p-sw1
        links = [rx, tx]
        before, quiet = settled(state, links)
        enable_link(prefix, "sw1-sw2", copies=2)
        injectors: list[Injector] = []
        try:
            corpus = capture(links, corpus_traffic(state, [("h1", "h2"), ("h2", "h1"), ("h1", "c1")]))
            res.notes.append(f"corpus: {len(corpus)} frames captured on sw1-sw2 (LinkGuardian on)")
            injectors = _lg_injectors(state, rx, tx, corpus)
            _open(injectors)
            _lg_phases(opts, state, res, injectors)
            lg = runtime.control(prefix, "sw2", "lg_status")
        finally:
            disable_link(prefix, "sw1-sw2")
            for i in injectors:
                if i.sock is not None:
                    i.sock.close()
        after, quiet2 = settled(state, links)
        res.checks += liveness(state)
        res.checks += account(injectors, before, after, lambda node, port: (node, port) != ("sw1", "p-sw2"))
        res.checks += _lg_bounds(lg)
        if not (quiet and quiet2):
            res.notes.append("counters were still moving when read: accounting may be off by frames in flight")
        return res


def _lg_injectors(state: dict[str, Any], rx: Link, tx: Link, corpus: list[bytes]) -> list[Injector]:
    from .linkguardian import LG_CONTROL_MAC

    hosts = [mac_of(state, n) for n in ("h1", "h2", "c1")]
    into_rx = hs.Endpoints(dst_macs=[*hosts, b"\xff" * 6, rx.mac], src_macs=hosts,
                           dst_ips=[ip_of(state, n) for n in ("h2", "c1")], src_ips=[ip_of(state, "h1")])
    into_tx = hs.Endpoints(dst_macs=[LG_CONTROL_MAC, tx.mac, *hosts], src_macs=[rx.mac, *hosts],
                           dst_ips=[ip_of(state, "h1")], src_ips=[ip_of(state, n) for n in ("h2", "c1")])
    lg_heavy = ["linkguardian"] * 4 + ["pfc", "pause", "udp", "ethernet", "dta", "roce"]
    return [
        Injector("sw1>sw2 receiver", rx, hs.fuzz_gen(hs.frame_gen(lg_heavy, into_rx), corpus),
                 guarded=lg_or_mac_control),
        Injector("sw2>sw1 sender", tx, hs.fuzz_gen(hs.frame_gen(lg_heavy, into_tx), corpus),
                 guarded=lg_or_mac_control),
    ]


def _lg_phases(opts: Options, state: dict[str, Any], res: Result, injectors: list[Injector]) -> None:
    """Phase 1: the stream runs while frames arrive that LinkGuardian must withstand (any frame
    without a valid FCS; with a valid one, anything but LinkGuardian tags and MAC control,
    which docs/security.md lists as what an attacker on the link can forge without keys): the
    stream must be complete and in order. Phase 2: everything, forged tags and PFC with a
    valid FCS included, while a stream runs (not checked). Phase 3: no injection; a new
    stream must be complete and in order (LinkGuardian recovered)."""
    rng = random.Random(opts.seed)
    stream = Stream(state, "h1", "h2", rate=max(200.0, min(2000.0, opts.rate / 5)))
    try:
        sender = Sender(injectors, rng, opts.rate, opts.out, opts.target, switch_only())
        first = opts.frames // 2
        stream.start()
        sender.run(first, stream, guard=True, total=opts.frames)
        phase1 = stream.finish()
        res.checks.append(_row("h1>h2", "stream (phase 1)", _stream_detail(phase1), stream_ok(phase1)))
        stream.reset()
        stream.start()
        sender.run(opts.frames - first, stream, guard=False, total=opts.frames)
        sender.progress(opts.frames)
        phase2 = stream.finish()
        stream.reset()
        time.sleep(0.5)  # holes the attack opened time out (ackNoTimeout is milliseconds)
        stream.send_all(2000)
        phase3 = stream.finish()
        res.checks.append(_row("h1>h2", "stream (phase 3)", _stream_detail(phase3), stream_ok(phase3)))
        res.stream = {"phase1": phase1, "phase2 (not checked)": phase2, "phase3": phase3}
        _finish(res, injectors, sender)
    finally:
        stream.close()


def _lg_bounds(lg: dict[str, Any]) -> list[dict[str, Any]]:
    """The receiver's state stayed within its bounds through the attack."""
    st = lg.get("p-sw1", {}).get("receiver", {})
    c, p = st.get("counters", {}), st.get("params", {})
    limit = p.get("reorder_buffer_limit_bytes")
    peak = c.get("reorder_buffer_max_bytes", 0)
    ok = limit is not None and peak <= limit
    return [_row("sw2/p-sw1", "lg bounds", f"reordering buffer peak {peak} B <= limit {limit} B; resyncs "
                 f"{c.get('resyncs')}, holes abandoned {c.get('holes_abandoned')}, mode switches "
                 f"{c.get('mode_switches')}", ok)]


# ============================================================================ DTA
class Reports:
    """Genuine DTA Key-Write reports from a host to the collector, sent in this process at a
    rate (``pump``, like :class:`Stream`) or all at once (``send``)."""

    def __init__(self, state: dict[str, Any], src: str, collector_ip: str, rate: float, first_key: int,
                 redundancy: int = 2) -> None:
        from headers import dta

        self._dta = dta
        with in_netns(state["namespaces"][src]):
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("0.0.0.0", 40041))
        self.dst = (collector_ip, 40040)
        self.rate = rate
        self.first_key = first_key
        self.redundancy = redundancy
        self.sent = 0
        self._t0: float | None = None

    @staticmethod
    def value_of(key: int) -> int:
        return (key * 2654435761) & 0xFFFFFFFF

    def _send_one(self) -> None:
        key = self.first_key + self.sent
        prim = self._dta.KeyWrite(self.redundancy, key, (self.value_of(key),))
        with contextlib.suppress(OSError):
            self.sock.sendto(self._dta.encode_report(self._dta.DTABase.of(prim, self.sent & 0xFF), prim), self.dst)
        self.sent += 1

    def start(self) -> None:
        self._t0 = time.monotonic()

    def pump(self) -> None:
        if self._t0 is not None:
            due = int((time.monotonic() - self._t0) * self.rate)
            while self.sent < due:
                self._send_one()

    def send(self, count: int) -> list[int]:
        keys = []
        for _ in range(count):
            keys.append(self.first_key + self.sent)
            self._send_one()
            time.sleep(1 / self.rate)
        return keys

    def close(self) -> None:
        self.sock.close()


def run_dta(opts: Options) -> Result:
    from .dta import control as dta_control

    with topology(opts, None) as state:
        prefix = state["prefix"]
        res = Result("dta", prefix, opts.seed, opts.frames)
        rep = find_link(state, "sw2", "h2")  # reports (and anything else) from a reporter's edge
        col = find_link(state, "sw2", "c1")  # RoCEv2 responses (and anything else) from the collector's edge
        links = [rep, col]
        before, quiet = settled(state, links)
        info = dta_control.enable_translator(prefix, "sw2", "c1")
        injectors: list[Injector] = []
        try:
            c_ip = state["hosts"]["c1"].split("/")[0]
            warm = Reports(state, "h2", c_ip, 2000.0, 500_000)
            try:
                corpus = capture(links, lambda: warm.send(100))
            finally:
                warm.close()
            res.notes.append(f"corpus: {len(corpus)} frames captured at sw2's p-h2 and p-c1 (reports, RoCEv2)")
            injectors = _dta_injectors(state, info, rep, col, corpus)
            _open(injectors)
            _dta_phases(opts, state, res, injectors, info)
        finally:
            dta_control.disable_translator(prefix, "sw2")
            for i in injectors:
                if i.sock is not None:
                    i.sock.close()
        after, quiet2 = settled(state, links)
        res.checks += liveness(state)
        res.checks += account(injectors, before, after, lambda node, port: False)
        if not (quiet and quiet2):
            res.notes.append("counters were still moving when read: accounting may be off by frames in flight")
        return res


def _dta_injectors(state: dict[str, Any], info: dict[str, Any], rep: Link, col: Link,
                   corpus: list[bytes]) -> list[Injector]:
    c1, h2 = mac_of(state, "c1"), mac_of(state, "h2")
    t_mac = bytes.fromhex(str(info["translator_mac"]).replace(":", ""))
    t_ip = socket.inet_aton(str(info["translator_ip"]))
    reports = hs.Endpoints(dst_macs=[c1, rep.mac, b"\xff" * 6], src_macs=[h2], dst_ips=[ip_of(state, "c1")],
                           src_ips=[ip_of(state, "h2"), ip_of(state, "h1")])
    responses = hs.Endpoints(dst_macs=[t_mac, h2], src_macs=[c1], dst_ips=[t_ip, ip_of(state, "h2")],
                             src_ips=[ip_of(state, "c1")])
    mix = ["dta"] * 4 + ["dta-nack", "roce", "udp", "ethernet", "pfc", "linkguardian"]
    return [
        Injector("h2>sw2 reports", rep, hs.fuzz_gen(hs.frame_gen(mix, reports), corpus), weight=2),
        Injector("c1>sw2 responses", col, hs.fuzz_gen(hs.frame_gen(["roce"] * 4 + ["dta", "udp"], responses),
                                                      corpus)),
    ]


def _dta_phases(opts: Options, state: dict[str, Any], res: Result, injectors: list[Injector],
                info: dict[str, Any]) -> None:
    """Genuine reports from h1 flow while the frames arrive (forged Key-Writes may overwrite their
    slots, as any reporter's may: not checked); then, with the injection over, every one of a
    batch of genuine Key-Writes must be executed by the collector (its ``writes``) and read
    back with its value: nothing the fuzzing did (a forged NAK, a PSN resync, a garbage
    response) left the translator or the collector stuck."""
    from .dta import CollectorQuery
    from .dta import control as dta_control

    prefix = state["prefix"]
    c_ip = state["hosts"]["c1"].split("/")[0]
    rng = random.Random(opts.seed)
    during = Reports(state, "h1", c_ip, max(100.0, min(1000.0, opts.rate / 10)), 1_000_000)
    after = during  # (one socket: the reporter's port)
    q = CollectorQuery.open(info["memory_dir"])
    try:
        sender = Sender(injectors, rng, opts.rate, opts.out, opts.target, switch_only())
        during.start()
        sender.run(opts.frames, during, guard=False, total=opts.frames)
        sender.progress(opts.frames)
        _finish(res, injectors, sender)
        time.sleep(0.5)

        def writes() -> int:
            return int(dta_control.collector_status(prefix)["responder"]["qps"]["keywrite"]["writes"])

        after.rate = 1000.0
        t = dta_control.translator_status(prefix, "sw2", quiet=True)
        tc = (t.get("translator") or t).get("counters", {})
        left = int(tc.get("grace_reports_left") or 0) if tc.get("in_grace") else 0
        if left:
            # a resync the campaign caused (a forged response the translator had to believe: a
            # mutated copy of the collector's own) drops the next grace_reports reports by
            # design (DTA §5.3): send them first
            after.send(left + 10)
            time.sleep(0.2)
        res.notes.append(f"translator after the injection: resyncs {tc.get('resyncs')}, "
                         f"in grace {bool(tc.get('in_grace'))} ({left} reports left)")
        w0 = writes()
        keys = after.send(300)
        want = w0 + len(keys) * after.redundancy
        deadline = time.monotonic() + 10
        while writes() < want and time.monotonic() < deadline:
            time.sleep(0.05)
        got = writes()
        res.checks.append(_row("c1", "reports executed", f"{got - w0} WRITEs for {len(keys)} genuine Key-Writes "
                               f"x redundancy {after.redundancy} after the campaign (want {want - w0})",
                               got - w0 == want - w0))
        wrong = [k for k in keys if q.keywrite_get(k) != (Reports.value_of(k),)]
        res.checks.append(_row("c1", "reports in memory", f"{len(keys) - len(wrong)}/{len(keys)} keys read back "
                               f"their values" + (f" (first wrong: {wrong[:5]})" if wrong else ""), not wrong))
        res.stream = {"reports during the campaign (not checked)": during.sent - len(keys), "reports after": len(keys)}
        t = dta_control.translator_status(prefix, "sw2", quiet=True)
        tc = (t.get("translator") or t).get("counters", {})
        res.notes.append("translator: " + ", ".join(f"{k} {v}" for k, v in tc.items()
                                                    if isinstance(v, int) and v and not isinstance(v, bool)))
    finally:
        q.close()
        during.close()


# ============================================================================ entry point
RUNNERS: dict[str, Callable[[Options], Result]] = {"switch": run_switch, "linkguardian": run_linkguardian,
                                                   "dta": run_dta}


def run(opts: Options) -> Result:
    if opts.target not in RUNNERS:
        raise FuzzError(f"unknown target {opts.target!r}; targets: {', '.join(RUNNERS)}")
    if opts.frames < 1:
        raise FuzzError("--frames must be at least 1")
    if opts.rate <= 0:
        raise FuzzError("--rate must be positive")
    if os.geteuid() != 0:
        raise FuzzError("fuzzing a live topology needs root (namespaces, raw sockets)")
    return RUNNERS[opts.target](opts)


def table(res: Result) -> str:
    lines = [f"netstack fuzz {res.target}: {res.sent} frames in {res.duration_s:.1f} s "
             f"({res.sent / res.duration_s if res.duration_s else 0:,.0f}/s), seed {res.seed}, prefix {res.prefix}"]
    for name, i in res.injectors.items():
        fates = ", ".join(f"{k} {v}" for k, v in sorted(i["fates"].items()))
        lines.append(f"  {name}: {i['sent']} sent from {i['from']} to {i['port']} ({fates}); refused {i['refused']}")
    width = max((len(c["where"]) for c in res.checks), default=5)
    cw = max((len(c["check"]) for c in res.checks), default=5)
    for c in res.checks:
        lines.append(f"  {'ok  ' if c['ok'] else 'FAIL'} {c['where']:<{width}}  {c['check']:<{cw}}  {c['detail']}")
    lines += [f"  note: {n}" for n in res.notes]
    failed = [f"{c['where']} {c['check']}" for c in res.checks if not c["ok"]]
    lines.append(f"verdict: {'PASS' if res.ok else 'FAIL'}: " + (
        f"{len(res.checks)} checks passed, no daemon crashed" if res.ok else f"failed: {'; '.join(failed)}"))
    return "\n".join(lines)


def save(res: Result, path: Path) -> None:
    path.write_text(json.dumps(res.to_dict(), indent=2))


__all__ = ["DEFAULT_RATE", "TARGETS", "FuzzError", "Options", "Result", "run", "table"]

