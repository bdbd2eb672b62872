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

from . import protocols, runtime, toolproc
from .errors import NetstackError
from .io.control import ControlError, request
from .switch.forwarding import is_link_local
from .topo.model import load_topology
from .topo.nsenter import in_netns, iproute

#: what each target fuzzes and its invariant, in ``netstack fuzz --help``'s order: the generic ``switch``
#: and each protocol's, from the registry (netstack.protocols.fuzz_targets); target NAME runs ``run_NAME``
TARGETS: dict[str, str] = protocols.fuzz_targets()
DEFAULT_RATE = 5000
BATCH = 50
PROGRESS_S = 1.0
STREAM_PORT = 47001
CORPUS_PORT = 47999
SETTLE_MAX_S = 8.0
#: draws of a frame the checked phase may not send before it is made inert (:attr:`Injector.forbidden`)
FORBIDDEN_TRIES = 20


class FuzzError(NetstackError, RuntimeError):
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
    #: frames the campaign never sends in a checked phase, FCS or not (drawn again instead): forgeries
    #: the protocol does not claim to withstand without keys (see the 1Pipe and T/C-SACK targets)
    forbidden: Callable[[bytes], bool] | None = None
    weight: int = 1
    sock: socket.socket | None = None
    max_len: int = 1514
    sent: int = 0
    refused: int = 0  #: send() failed (the kernel refused the frame, e.g. longer than the MTU)
    fate: Counter[str] = field(default_factory=Counter)
    example: dict[str, str] = field(default_factory=dict)  #: one frame (hex) per fate

    def frame(self, rng: random.Random, d: hs.RandomDraw, guard: bool) -> bytes:
        frame = self.gen(d)[:self.max_len]
        if guard and self.forbidden is not None:
            for _ in range(FORBIDDEN_TRIES):
                if not self.forbidden(frame):
                    break
                frame = self.gen(d)[:self.max_len]
            else:
                frame = frame[:12] + b"\x88\xb5" + frame[14:]  # (local experimental EtherType: inert)
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


def udp_source(frame: bytes) -> tuple[bytes, int | None, bool] | None:
    """``(source IP, UDP source port, fragment)`` of an IPv4/UDP frame as the receiving host's
    kernel reads it (through up to two VLAN tags, which it takes off); the port is None when the
    frame is too short to say, and a fragment's (it may reassemble with another). None: not a
    UDP datagram over IPv4 a kernel would take."""
    off = 12
    for _ in range(2):
        if len(frame) >= off + 6 and (frame[off] << 8 | frame[off + 1]) in VLAN_TYPES:
            off += 4
    ip = off + 2
    if len(frame) < ip + 20 or frame[off:ip] != b"\x08\x00" or frame[ip] >> 4 != 4 or frame[ip + 9] != 17:
        return None
    ihl = (frame[ip] & 15) * 4
    if ihl < 20:
        return None
    frag = bool((frame[ip + 6] << 8 | frame[ip + 7]) & 0x3FFF)
    sport = frame[ip + ihl] << 8 | frame[ip + ihl + 1] if len(frame) >= ip + ihl + 2 and not frag else None
    return bytes(frame[ip + 12:ip + 16]), sport, frag


def udp_payload(frame: bytes) -> bytes | None:
    """The UDP payload of an IPv4/UDP frame that is no fragment (through VLAN tags), as far as the
    frame has it; None otherwise."""
    got = udp_source(frame)
    if got is None or got[2]:
        return None
    off = 12
    for _ in range(2):
        if (frame[off] << 8 | frame[off + 1]) in VLAN_TYPES:
            off += 4
    return bytes(frame[off + 2 + (frame[off + 2] & 15) * 4 + 8:])


def spoofs(addrs: set[tuple[bytes, int]]) -> Callable[[bytes], bool]:
    """A predicate: the frame is a UDP datagram from one of ``addrs`` (IP, port), or may become
    one (a fragment from one of their IPs, or too short to tell): a forgery of a protocol
    endpoint's own traffic, which no protocol here withstands without keys."""
    ips = {ip for ip, _ in addrs}

    def check(frame: bytes) -> bool:
        got = udp_source(frame)
        if got is None or got[0] not in ips:
            return False
        src, sport, frag = got
        return frag or sport is None or (src, sport) in addrs

    return check


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
        elif dmn.kind == "onepipe-controller" and dmn.control and ok:
            shell = request(dmn.control, "status", timeout=2.0).get("shell") or {}
            errors = shell.get("internal_errors")
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


# ============================================================================ 1Pipe
#: the 1Pipe run during the campaign: one process per host, scattering to 2 of the others
OP_PROCS = 4
OP_RATE = 100.0
OP_FANOUT = 2
#: the processes join 1 s + 50 ms a process after they are spawned, and scatter half a second
#: later (netstack/onepipe/runner.py): the injection starts then
OP_LEAD_S = 1.0 + 0.05 * OP_PROCS + 0.6


def run_onepipe(opts: Options) -> Result:
    from .onepipe.control import disable_all, enable_all, status_all

    with topology(opts, "onepipe") as state:
        prefix = state["prefix"]
        res = Result("onepipe", prefix, opts.seed, opts.frames)
        edge = find_link(state, "tor1", "h1")  # a ToR's host-facing port, sent from h1
        fabric = find_link(state, "tor1", "spine1")  # the ToR's spine-facing port, sent on spine1's p-tor1
        links = [edge, fabric]
        disable_all(prefix)  # (beacons every T_beacon: the counters settle only with 1Pipe off)
        before, quiet = settled(state, links)
        injectors: list[Injector] = []
        out = runtime.run_dir(prefix) / f"fuzz-onepipe-{uuid.uuid4().hex[:6]}"
        try:
            enable_all(prefix)
            corpus = capture([edge], corpus_traffic(state, [("h1", "h3"), ("h2", "h1")], 20))
            corpus += capture([fabric], corpus_traffic(state, [("h3", "h1"), ("h2", "h4")], 20))
            res.notes.append(f"corpus: {len(corpus)} frames captured at tor1's p-h1 and p-spine1 (1Pipe beacons "
                             "of the switches, UDP)")
            injectors = _op_injectors(state, edge, fabric, corpus)
            _open(injectors)
            _op_phase(opts, state, res, injectors, out)
            op = status_all(prefix).get("tor1") or {}
            res.notes.append("tor1 1Pipe counters: " + _op_counters(op))
        finally:
            disable_all(prefix)
            for i in injectors:
                if i.sock is not None:
                    i.sock.close()
        after, quiet2 = settled(state, links)
        res.checks += liveness(state)
        res.checks += account(injectors, before, after, lambda node, port: False)
        if not (quiet and quiet2):
            res.notes.append("counters were still moving when read: accounting may be off by frames in flight")
        return res


def _op_counters(status: dict[str, Any]) -> str:
    out = []
    for port, st in (status.get("ports") or {}).items():
        if port in ("p-h1", "p-spine1"):
            c = st.get("counters", {}) if isinstance(st, dict) else {}
            out.append(f"{port}: " + ", ".join(f"{k} {v}" for k, v in c.items()
                                                if isinstance(v, int) and v and not isinstance(v, bool)))
    return "; ".join(out) or "none"


def op_addresses(state: dict[str, Any], procs: int = OP_PROCS) -> dict[str, tuple[bytes, int]]:
    """``{process: (IP, port)}`` of the 1Pipe run's processes, as netstack/onepipe/runner.py places them."""
    from .onepipe.params import PORT
    from .onepipe.runner import end_hosts, place

    placed = place(end_hosts(state), procs)
    return {p: (ip_of(state, h), PORT + 1 + i) for h, ps in placed.items() for i, p in enumerate(ps)}


def _op_injectors(state: dict[str, Any], edge: Link, fabric: Link, corpus: list[bytes]) -> list[Injector]:
    from .onepipe.params import PORT

    addrs = op_addresses(state)
    forged = spoofs(set(addrs.values()))
    stranger = socket.inet_aton("10.0.0.77")  # no node's: a process nobody runs
    sports = [PORT, PORT + 2, PORT + 50, PORT + 99]  # the processes' are PORT + 1 (forbidden below)
    dports = [PORT, PORT + 1, PORT + 1, PORT + 2]
    others = [mac_of(state, n) for n in ("h2", "h3", "h4", "ctl")]
    into_edge = hs.Endpoints(src_macs=[mac_of(state, "h1")], dst_macs=[*others, b"\xff" * 6, edge.mac],
                             src_ips=[ip_of(state, "h1"), stranger],
                             dst_ips=[ip_of(state, n) for n in ("h2", "h3", "h4", "ctl")], sports=sports, dports=dports)
    spine_mac = next(bytes.fromhex(p["mac"].replace(":", "")) for p in state["ports"]
                     if p["node"] == fabric.far_node and p["ifname"] == fabric.far_ifname)
    into_fabric = hs.Endpoints(src_macs=[spine_mac, *others[1:]], dst_macs=[mac_of(state, n) for n in ("h1", "h2")]
                               + [b"\xff" * 6, fabric.mac], src_ips=[ip_of(state, n) for n in ("h3", "h4", "ctl")]
                               + [stranger], dst_ips=[ip_of(state, n) for n in ("h1", "h2")], sports=sports,
                               dports=dports)
    mix = ["onepipe"] * 6 + ["udp", "ethernet", "pfc", "pause", "linkguardian", "tcsack"]
    return [
        Injector("h1>tor1", edge, hs.fuzz_gen(hs.frame_gen(mix, into_edge), corpus), forbidden=forged),
        Injector("spine1>tor1", fabric, hs.fuzz_gen(hs.frame_gen(mix, into_fabric), corpus), forbidden=forged),
    ]


def _op_phase(opts: Options, state: dict[str, Any], res: Result, injectors: list[Injector], out: Path) -> None:
    """The 1Pipe processes scatter while the frames arrive (none of them from a process's own
    address: 1Pipe without keys does not claim to withstand a forged process, docs/security.md
    "1Pipe on the edge"); then ``netstack onepipe check`` must pass on what they delivered of
    each other's, and every message sent must be delivered or reported failed, not both."""
    import threading

    from .onepipe.runner import run as op_run

    seconds = round(opts.frames / opts.rate * 1.3 + 1.0, 1)
    box: dict[str, Any] = {}

    def scatter() -> None:
        try:
            box["summary"] = op_run(state["prefix"], procs=OP_PROCS, seconds=seconds, out=out, rate=OP_RATE,
                                    fanout=OP_FANOUT)
        except Exception as exc:  # (a process that crashed: the check below fails)
            box["error"] = f"{type(exc).__name__}: {exc}"

    runner = threading.Thread(target=scatter, name="onepipe-run", daemon=True)
    runner.start()
    time.sleep(OP_LEAD_S)
    sender = Sender(injectors, random.Random(opts.seed), opts.rate, opts.out, opts.target, switch_only())
    sender.run(opts.frames, None, guard=True, total=opts.frames)
    sender.progress(opts.frames)
    _finish(res, injectors, sender)
    runner.join(timeout=seconds + 120)
    res.checks += op_checks(box, out, set(op_addresses(state)))


def op_checks(box: dict[str, Any], out: Path, names: set[str]) -> list[dict[str, Any]]:
    """The run finished with every process; ``onepipe check`` on the messages between processes
    (the others, from the campaign's own addresses, are counted, not judged); every message
    delivered or reported failed."""
    from .onepipe.check import CheckError, check_logs

    if "summary" not in box:
        return [_row("1pipe", "processes", box.get("error", "the run did not finish"), False)]
    summary = box["summary"]
    genuine = out / "genuine"
    genuine.mkdir(exist_ok=True)
    delivered: list[str] = []
    foreign = 0
    for log in sorted(out.glob("*.jsonl")):
        keep = []
        for line in log.read_text().splitlines():
            if json.loads(line).get("src") in names:
                keep.append(line)
                delivered.append(json.loads(line)["id"])
            else:
                foreign += 1
        (genuine / log.name).write_text("".join(k + "\n" for k in keep))
    failed = [json.loads(line)["id"] for f in sorted((out / "send-fail").glob("*.jsonl"))
              for line in f.read_text().splitlines()]
    sent = summary["messages_sent"]
    rows = [_row("1pipe", "processes", f"{len(summary['processes'])}/{len(names)} processes ran to the end, killed "
                 f"{summary['killed']}", len(summary["processes"]) == len(names) and not summary["killed"])]
    try:
        verdict = check_logs(sorted(genuine.glob("*.jsonl")))
        rows.append(_row("1pipe", "onepipe check", verdict.summary().splitlines()[0], verdict.ok
                         and verdict.counts["senders"] == len(names) and verdict.counts["receivers"] == len(names)))
    except CheckError as exc:
        rows.append(_row("1pipe", "onepipe check", f"unreadable logs: {exc}", False))
    both = set(delivered) & set(failed)
    # a message both delivered and reported failed is best effort's documented false alarm: no ACK
    # covering it came back within the sender's timeout (docs/onepipe.md, the loss table)
    ok = len(set(delivered) | set(failed)) == sent and len(delivered) == len(set(delivered))
    rows.append(_row("1pipe", "every message", f"{sent} sent = {len(delivered) - len(both)} delivered + "
                     f"{len(failed) - len(both)} reported failed + {len(both)} both (delivered, then timed out "
                     f"unACKed); {foreign} messages from the campaign's addresses delivered (not judged)", ok))
    return rows


# ============================================================================ T/C-SACK
#: the campaign's T/C-SACK transfers h1 -> h2: flow, rate, and h1's ephemeral ports (the
#: sender's socket is connected, from a port of h1's ip_local_port_range, set to these)
TCS_FLOW = 0x5A17
TCS_RATE_BPS = 20_000_000
TCS_BYTES = 3_000_000
TCS_SENDER_PORTS = (41000, 41001)


def tcs_forgery(flow: int) -> Callable[[bytes], bool]:
    """A predicate: the frame may pass for the sender's data of ``flow`` at the receiver: a
    T/C-SACK data packet of the flow from any source, or a UDP fragment or a frame too short to
    tell. Between two transfers the receiver is bound to nobody and takes the first data packet
    of its flow from whoever sent it (finding 7 of the long campaign, docs/faults.md); T/C-SACK
    carries no key, so such a packet is a hijack, not a fault the engines could refuse
    (docs/security.md: "The hosts' own traffic (TCP/UDP, T/C-SACK) is not protected")."""
    def check(frame: bytes) -> bool:
        got = udp_source(frame)
        if got is None:
            return False
        _src, sport, frag = got
        if frag or sport is None:
            return True
        payload = udp_payload(frame)
        return payload is None or len(payload) < 4 or (payload[0] == 1 and payload[2:4] == flow.to_bytes(2, "big"))

    return check


#: the engines' counters of what they ignored, reported with the refusals
TCS_COUNTED = ("foreign", "malformed", "bogus_acks", "duplicates", "resyncs")


def _pick(counters: Any, keys: tuple[str, ...]) -> dict[str, int]:
    return {k: v for k, v in (counters or {}).items() if k in keys and isinstance(v, int)}


class Transfers:
    """T/C-SACK transfers h1 -> h2 back to back (``python -m netstack.tcsack``) in a thread, until stopped."""

    def __init__(self, state: dict[str, Any]) -> None:
        import threading

        self.state = state
        self.done: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="tcsack", daemon=True)

    def _loop(self) -> None:
        from .tcsack.control import live_transfer

        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                send, recv = live_transfer(self.state, "tcsack", TCS_BYTES, "--flow", str(TCS_FLOW),
                                           rate=TCS_RATE_BPS, timeout=60.0, seed=n)
            except Exception as exc:  # (TransferError, a timeout, no JSON: the check fails; the next one starts)
                self.errors.append(f"transfer {n}: {type(exc).__name__}: {str(exc)[-2000:]}")
                continue
            self.done.append({"n": n, "ok": recv.get("sha256") == send.get("sha256") and bool(send.get("done", True)),
                              "seconds": send.get("seconds"), "sender_checks": send.get("checks", {}),
                              "receiver_checks": recv.get("checks", {}), "peer": recv.get("peer"),
                              "sender_counters": _pick(send.get("counters"), TCS_COUNTED),
                              "receiver_counters": _pick(recv.get("counters"), TCS_COUNTED)})

    def finish(self, timeout: float) -> None:
        self.stop.set()
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.errors.append(f"the last transfer did not end within {timeout:g} s")


@contextlib.contextmanager
def port_range(ns: str, ports: tuple[int, int]) -> Iterator[None]:
    """The namespace's ephemeral ports (``ip_local_port_range``) set to ``ports`` for the body."""
    path = "/proc/sys/net/ipv4/ip_local_port_range"
    with in_netns(ns):
        with open(path) as f:
            old = f.read().split()
        with open(path, "w") as f:
            f.write(f"{ports[0]} {ports[1]}")
    try:
        yield
    finally:
        with in_netns(ns), open(path, "w") as f:
            f.write(" ".join(old))


def run_tcsack(opts: Options) -> Result:
    with topology(opts, None) as state:
        res = Result("tcsack", state["prefix"], opts.seed, opts.frames)
        to_rcv = find_link(state, "sw1", "h1")  # from h1's namespace, toward the receiver on h2
        to_snd = find_link(state, "sw2", "h2")  # from h2's namespace, toward the sender on h1
        links = [to_rcv, to_snd]
        before, quiet = settled(state, links)
        injectors: list[Injector] = []
        with port_range(state["namespaces"]["h1"], TCS_SENDER_PORTS):
            warm = Transfers(state)
            try:
                warm.thread.start()
                time.sleep(1.0)  # the first transfer under way: its data and ACKs are the corpus
                corpus = [f for link in links for f in capture([link], lambda: time.sleep(0.15))]
            finally:
                warm.finish(60)
            res.notes.append(f"corpus: {len(corpus)} frames captured at sw1's p-h1 and sw2's p-h2 (T/C-SACK data "
                             "and ACKs of a transfer)")
            try:
                injectors = _tcs_injectors(state, to_rcv, to_snd, corpus)
                _open(injectors)
                _tcs_phase(opts, state, res, injectors, warm)
            finally:
                for i in injectors:
                    if i.sock is not None:
                        i.sock.close()
        after, quiet2 = settled(state, links)
        res.checks += liveness(state)
        res.checks += account(injectors, before, after, lambda node, port: node == "sw1")
        if not (quiet and quiet2):
            res.notes.append("counters were still moving when read: accounting may be off by frames in flight")
        return res


def _tcs_injectors(state: dict[str, Any], to_rcv: Link, to_snd: Link, corpus: list[bytes]) -> list[Injector]:
    from .tcsack.live import PORT

    h1, h2 = ip_of(state, "h1"), ip_of(state, "h2")
    toward_receiver = hs.Endpoints(src_macs=[mac_of(state, "h1")], dst_macs=[mac_of(state, "h2"), b"\xff" * 6,
                                                                             to_rcv.mac],
                                   src_ips=[h1], dst_ips=[h2], sports=[*TCS_SENDER_PORTS, PORT], dports=[PORT])
    toward_sender = hs.Endpoints(src_macs=[mac_of(state, "h2")], dst_macs=[mac_of(state, "h1"), b"\xff" * 6,
                                                                           to_snd.mac],
                                 src_ips=[h2], dst_ips=[h1], sports=[PORT], dports=list(TCS_SENDER_PORTS))
    forged = tcs_forgery(TCS_FLOW)
    mix = ["tcsack"] * 6 + ["udp", "ethernet", "pfc", "pause", "linkguardian"]
    return [
        Injector("h1>sw1 toward the receiver", to_rcv, hs.fuzz_gen(hs.frame_gen(mix, toward_receiver), corpus),
                 forbidden=forged),
        Injector("h2>sw2 toward the sender", to_snd, hs.fuzz_gen(hs.frame_gen(mix, toward_sender), corpus)),
    ]


def _tcs_phase(opts: Options, state: dict[str, Any], res: Result, injectors: list[Injector],
               warm: Transfers) -> None:
    """Transfers run back to back while the frames arrive (toward the receiver none that could
    pass for the sender's data of the flow: :func:`tcs_forgery`; toward the sender everything,
    forged ACKs of the flow included, which the sender checks, docs/security.md "T/C-SACK");
    every transfer must complete with the receiver's SHA-256 equal to the sender's."""
    transfers = Transfers(state)
    sender = Sender(injectors, random.Random(opts.seed), opts.rate, opts.out, opts.target, switch_only())
    transfers.thread.start()
    time.sleep(0.8)  # (the receiver starts, the sender resolves h2)
    sender.run(opts.frames, None, guard=True, total=opts.frames)
    sender.progress(opts.frames)
    _finish(res, injectors, sender)
    transfers.finish(90)
    runs = warm.done + transfers.done
    errors = warm.errors + transfers.errors
    bad = [t["n"] for t in transfers.done if not t["ok"]]
    res.checks.append(_row("h1>h2", "transfers", f"{len(transfers.done) + len(transfers.errors)} transfers of "
                           f"{TCS_BYTES:,} B during the injection, {len(transfers.done) - len(bad)} complete with "
                           "matching SHA-256"
                           + (f"; mismatched: {bad}" if bad else "") + (f"; {'; '.join(errors)}" if errors else ""),
                           bool(transfers.done) and not bad and not errors and all(t["ok"] for t in warm.done)))
    h1 = state["hosts"]["h1"].split("/")[0]
    peers = {f"{t['peer'][0]}:{t['peer'][1]}" if isinstance(t["peer"], list) else str(t["peer"]) for t in runs}
    res.checks.append(_row("h2", "receiver's peer", f"bound to {', '.join(sorted(peers))} (the spoofed sender "
                           f"ports: {h1}:{TCS_SENDER_PORTS})", bool(runs) and peers <= {f"{h1}:{p}"
                                                                                         for p in TCS_SENDER_PORTS}))
    totals: Counter[str] = Counter()
    for t in transfers.done:
        for side in ("sender_checks", "receiver_checks", "sender_counters", "receiver_counters"):
            who = side.split("_")[0]
            totals.update({f"{who} {k}": v for k, v in (t[side] or {}).items() if isinstance(v, int)})
    res.notes.append("refusals: " + (", ".join(f"{k} {v}" for k, v in sorted(totals.items()) if v) or "none"))
    res.stream = {"transfers": [{k: t[k] for k in ("n", "ok", "seconds")} for t in runs]}


# ============================================================================ TCD
class DcqcnFlow:
    """One DCQCN flow (``python -m netstack.tcd send|recv``, TCD's mode) between two hosts for
    ``seconds``; ``finish`` waits for both ends and returns their reports and exit statuses."""

    def __init__(self, state: dict[str, Any], src: str, dst: str, seconds: float) -> None:
        def argv(node: str, *args: str) -> list[str]:
            return runtime.node_exec_argv(state, node, [sys.executable, "-m", "netstack.tcd", *args])

        self.recv = toolproc.start(argv(dst, "recv", "--quiet", "--idle", "3", "--wait", "30"),
                                   "the TCD receiver", ready_on="stderr", error=FuzzError)
        self.send = toolproc.popen(argv(src, "send", "--quiet", "--dst", state["hosts"][dst].split("/")[0],
                                        "--seconds", f"{seconds:g}", "--mode", "tcd", "--max-seconds",
                                        f"{seconds + 60:g}"))
        self.timeout = seconds + 90

    def finish(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, proc in (("sender", self.send), ("receiver", self.recv)):
            done = toolproc.finish(proc, self.timeout)
            out[name] = {"rc": done.returncode, "report": done.json() or {}, "stderr": done.err.strip()[-300:]}
        return out

    def kill(self) -> None:
        for proc in (self.send, self.recv):
            toolproc.kill(proc)


def run_tcd(opts: Options) -> Result:
    from .tcd import control as tcd_control

    with topology(opts, "tcd-single") as state:
        prefix = state["prefix"]
        res = Result("tcd", prefix, opts.seed, opts.frames)
        link = find_link(state, "sw3", "r0")  # the receiver's edge port: its egress carries TCD's marker
        before, quiet = settled(state, [link])
        enabled_ns = time.monotonic_ns()
        tcd_control.enable(prefix, "sw3", link.ifname, "tcd")
        injectors: list[Injector] = []
        flow = DcqcnFlow(state, "s0", "r0", round(opts.frames / opts.rate * 1.2 + 2.0, 1))
        try:
            time.sleep(1.0)  # (the flow under way: its data and CNPs are the corpus)
            corpus = capture([link], lambda: time.sleep(0.2))
            res.notes.append(f"corpus: {len(corpus)} frames captured at sw3's {link.ifname} (TCD data, CNPs)")
            injectors = [_tcd_injector(state, link, corpus)]
            _open(injectors)
            sender = Sender(injectors, random.Random(opts.seed), opts.rate, opts.out, opts.target, switch_only())
            sender.run(opts.frames, None, guard=False, total=opts.frames)
            sender.progress(opts.frames)
            _finish(res, injectors, sender)
            ends = flow.finish()
            st = runtime.control(prefix, "sw3", "tcd_status", port=link.ifname, timeline=True)
            res.checks += tcd_checks(st, link.ifname, enabled_ns) + _flow_rows(ends)
        finally:
            flow.kill()
            for i in injectors:
                if i.sock is not None:
                    i.sock.close()
        after, quiet2 = settled(state, [link])
        res.checks += liveness(state)
        res.checks += account(injectors, before, after, lambda node, port: False)
        if not (quiet and quiet2):
            res.notes.append("counters were still moving when read: accounting may be off by frames in flight")
        return res


def _tcd_injector(state: dict[str, Any], link: Link, corpus: list[bytes]) -> Injector:
    senders = ("s0", "s1", "s2")
    ends = hs.Endpoints(src_macs=[mac_of(state, "r0")], dst_macs=[mac_of(state, n) for n in senders]
                        + [b"\xff" * 6, link.mac], src_ips=[ip_of(state, "r0"), ip_of(state, "r1")],
                        dst_ips=[ip_of(state, n) for n in senders])
    mix = ["tcd"] * 5 + ["pfc", "pfc", "pause", "udp", "ethernet", "roce"]
    return Injector("r0>sw3", link, hs.fuzz_gen(hs.frame_gen(mix, ends), corpus))


def tcd_checks(st: dict[str, Any], port: str, enabled_ns: int) -> list[dict[str, Any]]:
    """The marker's detectors after the campaign (``tcd_status`` with timelines): per class, the
    time in the three states adds up to the time from the detector's creation (its timeline's
    first entry, no earlier than the enable) to the status's ``now_ns``; no counter negative."""
    now = int(st["now_ns"])
    p = st["ports"][port]
    rows = []
    classes = p.get("classes", {})
    for cls, det in sorted(classes.items()):
        times = det["time_in_state_ns"]
        total = sum(times.values())
        timeline = p.get("timeline", {}).get(cls) or []
        created = int(timeline[0][0]) if timeline and not det["timeline_dropped"] else None
        ints = {k: v for k, v in {**det, **det["counters"], **times}.items() if isinstance(v, int)}
        negative = sorted(k for k, v in ints.items() if v < 0)
        if created is not None:
            ok = total == now - created and created >= enabled_ns
            what = f"{total} ns = now {now} - created {created}"
        else:  # (the creation entry dropped from the timeline: bounded by the enable)
            ok = 0 <= total <= now - enabled_ns
            what = f"{total} ns <= now - enable {now - enabled_ns}"
        ok = ok and not negative and det.get("clock_regressions") == 0
        rows.append(_row(f"sw3/{port} class {cls}", "tcd states", f"{what}; " + ", ".join(
            f"{k} {v}" for k, v in times.items()) + f"; transitions {det['transitions']}, pauses {det['pauses']}, "
            f"resumes {det['resumes']}, clock regressions {det.get('clock_regressions')}"
            + (f"; negative: {negative}" if negative else ""), ok))
    if not classes:
        rows.append(_row(f"sw3/{port}", "tcd states", "no class detector: the marker saw nothing", False))
    return rows


def _flow_rows(ends: dict[str, Any]) -> list[dict[str, Any]]:
    """Both ends ran to the end and reported (exit status 1 with a report: a flow the receiver saw
    is incomplete, e.g. a forged one, or ours cut short by its idle timeout under forged pauses;
    no report: a crash). The flows the receiver saw are listed."""
    s, r = ends["sender"], ends["receiver"]
    rep, rr = s["report"], r["report"]
    flows = rr.get("flows") or {}
    seen = ", ".join(f"flow {k}: {v.get('bytes', v.get('bytes_rx', '?'))} B, complete {v.get('complete')}"
                     for k, v in list(flows.items())[:4]) + (f" and {len(flows) - 4} more" if len(flows) > 4 else "")
    detail = (f"sender rc {s['rc']} ({rep.get('bytes', 0):,} B, done {rep.get('done')}, CNPs "
              f"{rep.get('counters', {}).get('cnps_ce')} CE / {rep.get('counters', {}).get('cnps_ue')} UE, malformed "
              f"{rep.get('malformed')}); receiver rc {r['rc']} (malformed {rr.get('malformed')}, CNPs sent "
              f"{rr.get('cnps_sent')}; {seen or 'no flow'})")
    if s["rc"] or r["rc"]:
        detail += f"; stderr: {s['stderr'][-200:]} {r['stderr'][-200:]}"
    ok = bool(rep) and bool(rr) and s["rc"] in (0, 1) and r["rc"] in (0, 1) and bool(rep.get("bytes"))
    return [_row("s0>r0", "dcqcn flow", detail, ok)]


# ============================================================================ entry point
#: each target's runner, by name (a target the registry lists without its ``run_<name>`` here fails at import)
RUNNERS: dict[str, Callable[[Options], Result]] = {name: globals()[f"run_{name}"] for name in TARGETS}


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

