"""The collector's RDMA NIC, in software: a sans-IO RoCEv2 Reliable-Connection responder.

"Direct Telemetry Access", §7.3: after connection setup the collector's CPU does nothing per
report; the NIC executes the translator's WRITEs and Fetch&Adds on registered memory and
answers with ACKs/NAKs that the translator uses to resynchronise (§5.3). :class:`RoceResponder`
is that NIC: ``receive(frame, now_ns)`` executes one RoCEv2 request on a
:class:`~netstack.dta.memory.CollectorMemory` and returns the response frames. It never
raises on frame content; every drop is counted. Its responses are its return values, so it
keeps the :mod:`netstack.engine` contract with an ``actions`` queue that stays empty, and it
has no timer.

Behaviour (IBTA vol. 1 ch. 9, RC responder), and where we simplify:

- One RC queue pair per region (the public collector has one per store); a QP may touch
  any region of the collector (one protection domain), selected by rkey.
- **A QP is connected to one peer** (:meth:`RoceResponder.bind`): the translator's MAC, IP
  and QPN, as a real RC QP is bound to one remote GID and QPN when it moves to RTR (the
  RDMA_CM exchange, DTA §7.2.1; here the ``bind`` control command that
  :func:`netstack.dta.control.enable_translator` sends before ``dta_enable``). Until then
  it accepts nothing (``requests_unbound``), as a QP in INIT drops every packet.
- Checks, in order: IPv4/UDP to port 4791 (else ``not_roce``), parses (else
  ``malformed``), addressed to our IP (``not_for_us``), ICRC (``icrc_errors``, silent
  drop, as a NIC does), BTH version 0 and P_Key in the
  default partition (``bad_header``), known destination QP (``unknown_qp``), **from the
  QP's peer** (source IP and MAC; else ``requests_rejected_source``, or
  ``requests_unbound``), request opcode (responses arriving here: ``not_request``). Every
  one of these is a silent drop: no response, so nothing tells a stranger a QP's expected
  PSN (docs/security.md#dta).
- PSN: with ``d = (psn - ePSN) mod 2**24``: ``d == 0`` executes; ``0 < d < 2**23`` is a
  **PSN sequence error**: NAK code 0 whose BTH PSN is the expected PSN (what the translator
  resets to, §5.3). ``nak_policy="once"`` (default, IBTA) sends one NAK per sequence
  error and silently drops further out-of-sequence requests until the expected PSN
  arrives; ``"every"`` NAKs each one (some NICs; it is the behaviour that makes stale
  in-flight frames re-trigger NAKs, §8.5). ``d >= 2**23`` is a **duplicate**: never
  re-executed (a stale WRITE must not overwrite newer data); a duplicate WRITE with AckReq
  gets an ACK, a duplicate atomic gets its saved result replayed from a small per-QP
  cache (IBTA atomic replay), else it is dropped. Counted in ``duplicates``.
- RDMA WRITE Only + RETH: ``dma_len`` must equal the payload (else NAK invalid request,
  code 1); bad rkey, out-of-bounds or no ``write`` right: NAK **remote access error**
  (code 2) with **no memory touched**. A zero-length WRITE touches nothing and is not
  checked (IBTA). ACK only when the request has AckReq (an ACK covers every earlier PSN,
  so the requester choosing AckReq is the coalescing; the public translator never sets it).
- FETCH_ADD / CMP_SWAP + AtomicETH: 8-byte aligned (else NAK invalid request), rkey /
  bounds / ``atomic`` right (else NAK remote access error); executed on the little-endian
  u64 (memory.py) and always answered with ATOMIC ACKNOWLEDGE + AETH + AtomicAckETH (the
  original value).
- Any other request opcode (SEND, READ, multi-packet WRITE): NAK invalid request.
- A NAK'd request (invalid / access) still consumes its PSN here. In IBTA those NAKs put
  the QP in the Error state; we keep it usable so a single forged or buggy request does
  not stop collection for good (the emulation's only deviation in this path; counted).
- MSN counts completed messages (24 bits); every AETH carries it.
- Responses: from our MAC/IP to the QP's peer (the request's source, which the peer check
  made equal to it), same UDP source port, destination QP = the peer's QPN (proposed in
  :meth:`connect_info`, confirmed by :meth:`bind`).

**Restart** (docs/dta.md, "Collector restart"). :meth:`RoceResponder.qp_state` exports each
QP's connection state as data (QPN, peer QPN and address, initial and expected PSN, MSN), and
``RoceResponder(..., qps=that)`` rebuilds a responder with exactly those QPs instead of drawing
new ones: the same QPNs and peer binding, expecting the same PSN. Over the same memory (its
region files re-opened with their rkeys and base addresses) the translator's QPs keep working:
a request ahead of the restored expected PSN is an ordinary PSN sequence error, NAK'd to the
bound peer only, and the translator resynchronises (§5.3). Persisting that state is the
daemon's business (``daemons/collector.py``): this module does no I/O. Not part of the state:
the counters, the atomic replay cache (a duplicate atomic after a restart is dropped, not
replayed) and an outstanding NAK (the first out-of-sequence request after a restart is NAK'd).

:class:`BufferedResponder` puts a finite receive buffer and a service time in front of the
responder: the NIC whose buffer fills with stale frames during a desynchronisation is what
makes the translator's grace period necessary (§5.3, §8.5, Fig. 11).
"""

from __future__ import annotations

import json
import mmap
import random
import struct
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any
from zlib import crc32

from headers.errors import HeaderError
from headers.inet import ip_bytes, ip_str, mac_bytes, mac_str
from headers.registry import UdpPort
from headers.roce import (
    BTH,
    CREDITS_INVALID,
    AethKind,
    AtomicAckETH,
    ExtHeader,
    NakCode,
    Opcode,
    RoceFrame,
    aeth_ack,
    aeth_nak,
    build_roce_frame,
    parse_roce_frame,
)
from headers.serial import W24

from ..engine import ActionQueue, Engine
from .memory import TRAILER, CollectorMemory, MemoryAccessError
from .rocewire import ACK_TAIL, ATOMIC_ACK_TAIL, ATOMIC_ETH, HEAD, ICRC, LRH_CRC, RETH, RoceTemplate

#: RoCE PSNs are 24-bit serial numbers (headers/serial.py)
PSN_MASK = W24.mask
PSN_HALF = W24.half
CONNECT_INFO_VERSION = 1
#: Saved atomic results per QP, for replaying duplicate atomics (IBTA requires the responder
#: to remember at least its advertised number of outstanding atomics).
ATOMIC_REPLAY = 16

_ROCE_PORT = UdpPort.ROCEV2.to_bytes(2, "big")
_U64LE = struct.Struct("<Q")
_U32 = struct.Struct("!I")
#: Request header shapes whose verdict the fast path remembers (:meth:`RoceResponder._learn`).
HEAD_CACHE = 4096
#: A learnt shape: the QP, where the IP datagram and the UDP datagram end, where the data ends,
#: the opcode, the UDP source port and the ICRC's state after byte 49.
_Head = tuple["QueuePair", int, int, int, int, int, int]
#: A region's mapping, base address and size, as the fast path writes it.
_Mapped = tuple[mmap.mmap, int, int]
_U64_MASK = 0xFFFFFFFFFFFFFFFF
#: AETH syndrome of a positive ACK: kind ACK, credits "invalid" (no flow control; IBTA vol. 1 ch. 9)
_ACK_SYNDROME = AethKind.ACK << 5 | CREDITS_INVALID
#: ACKs coalesced per QP by default: one for up to this many AckReq requests of one receive batch
DEFAULT_ACK_EVERY = 1


def is_roce_frame(frame: bytes | bytearray | memoryview) -> bool:
    """Cheap test: an Ethernet/IPv4/UDP frame to port 4791 (RoCEv2), without parsing it."""
    if len(frame) < 42 or frame[12] != 0x08 or frame[13] != 0x00 or frame[23] != 17:
        return False
    u = 14 + (frame[14] & 15) * 4
    return len(frame) >= u + 4 and frame[u + 2:u + 4] == _ROCE_PORT


_REQUESTS = frozenset({
    Opcode.SEND_FIRST, Opcode.SEND_MIDDLE, Opcode.SEND_LAST, Opcode.SEND_ONLY, Opcode.RDMA_WRITE_FIRST,
    Opcode.RDMA_WRITE_MIDDLE, Opcode.RDMA_WRITE_LAST, Opcode.RDMA_WRITE_ONLY, Opcode.RDMA_READ_REQUEST,
    Opcode.COMPARE_SWAP, Opcode.FETCH_ADD,
    0x03, 0x05, 0x09, 0x0B, 0x16, 0x17,  # RC *_WITH_IMMEDIATE / *_WITH_INVALIDATE variants
})


@dataclass
class QpCounters:
    """Per-QP responder counters (JSON-able through :meth:`RoceResponder.counters`)."""

    requests: int = 0
    writes: int = 0
    write_bytes: int = 0
    fetch_adds: int = 0
    cmp_swaps: int = 0
    acks: int = 0
    atomic_acks: int = 0
    naks_psn: int = 0
    naks_access: int = 0
    naks_invalid: int = 0
    out_of_sequence_dropped: int = 0
    duplicates: int = 0


@dataclass
class QueuePair:
    """Responder side of one RC connection."""

    name: str
    qpn: int
    peer_qpn: int
    initial_psn: int
    epsn: int
    msn: int = 0
    nak_outstanding: bool = False
    c: QpCounters = field(default_factory=QpCounters)
    replay: OrderedDict[int, int] = field(default_factory=OrderedDict)
    peer_mac: bytes | None = None  # the connected peer (None: not bound yet, nothing is accepted)
    peer_ip: bytes | None = None
    #: response headers toward the peer, per UDP port it sends from (:mod:`.rocewire`); reset by bind
    templates: dict[int, RoceTemplate] = field(default_factory=dict, repr=False)
    #: a coalesced ACK not sent yet: AckReq requests it covers, and the newest one's PSN, MSN, UDP port
    ack_owed: int = 0
    ack_psn: int = 0
    ack_msn: int = 0
    ack_sport: int = 0


@dataclass
class ResponderCounters:
    frames: int = 0
    not_roce: int = 0
    malformed: int = 0
    not_for_us: int = 0
    icrc_errors: int = 0
    bad_header: int = 0
    unknown_qp: int = 0
    requests_unbound: int = 0
    requests_rejected_source: int = 0
    not_request: int = 0
    internal_errors: int = 0


class RoceResponder:
    """A RoCEv2 RC responder over a collector's registered memory (see the module docstring).

    ``mac``/``ip``: the collector NIC's addresses (6 and 4 bytes). One QP is created per
    region present at construction; :meth:`add_qp` adds more. ``rng`` draws QPNs and
    initial PSNs (seed it for reproducible tests)."""

    def __init__(self, memory: CollectorMemory, mac: bytes, ip: bytes, *, nak_policy: str = "once",
                 rng: random.Random | None = None, udp_port: int = UdpPort.ROCEV2,
                 qps: Sequence[Mapping[str, Any]] | None = None, ack_every: int = DEFAULT_ACK_EVERY) -> None:
        if nak_policy not in ("once", "every"):
            raise ValueError(f"nak_policy={nak_policy!r} must be 'once' or 'every'")
        if not isinstance(ack_every, int) or isinstance(ack_every, bool) or ack_every < 1:
            raise ValueError(f"ack_every={ack_every!r} must be an int >= 1")
        #: AckReq requests of one QP answered by one ACK (IBTA: an ACK covers every earlier PSN)
        self.ack_every = ack_every
        self._owing: list[QueuePair] = []  # QPs with a coalesced ACK not sent yet
        self._writable: dict[int, _Mapped] = {}  # rkey -> a region with the right (fast path)
        self._atomic_ok: dict[int, _Mapped] = {}
        self._heads: dict[bytes, _Head] = {}  # HEAD_CACHE
        if len(mac) != 6 or len(ip) != 4:
            raise ValueError("mac must be 6 bytes and ip 4 bytes")
        self.memory = memory
        self.mac = bytes(mac)
        self.ip = bytes(ip)
        self.nak_policy = nak_policy
        self.udp_port = udp_port
        self.actions = ActionQueue()  # every response is a return value: this stays empty
        self._rng = rng or random.Random()
        self.c = ResponderCounters()
        self.qps: dict[int, QueuePair] = {}
        self._by_name: dict[str, QueuePair] = {}
        if qps is not None:
            self._restore(qps)
            return
        for name in memory.regions:
            self.add_qp(name)

    # ------------------------------------------------------------------ setup
    def _fresh_qpn(self) -> int:
        while True:
            qpn = self._rng.randrange(2, 1 << 24)  # QP0/QP1 are the IB management QPs
            if qpn not in self.qps and all(q.peer_qpn != qpn for q in self.qps.values()):
                return qpn

    def add_qp(self, name: str) -> QueuePair:
        """A new RC QP named after (and serving) region ``name``, with a random initial PSN."""
        if name in self._by_name:
            raise ValueError(f"QP {name!r} exists")
        qpn = self._fresh_qpn()
        self.qps[qpn] = qp = QueuePair(name, qpn, 0, 0, 0)
        qp.peer_qpn = self._fresh_qpn()
        qp.initial_psn = qp.epsn = self._rng.randrange(0, 1 << 24)
        self._by_name[name] = qp
        return qp

    def qp(self, name: str) -> QueuePair:
        return self._by_name[name]

    def connect_info(self) -> dict[str, Any]:
        """The stand-in for the RDMA_CM exchange (§7.2.1): what a translator needs per region/QP.

        ``{"version", "collector", "mac", "ip", "udp_port", "regions": [{"name", "qpn", "peer_qpn",
        "initial_psn", "rkey", "base_va", "size", "access", "layout"}]}``. ``qpn`` is the
        collector's QP (the BTH destination of requests), ``peer_qpn`` the translator-side
        QPN this collector puts in its responses (in our exchange the collector assigns
        both ends), ``initial_psn`` the PSN the first request must carry. JSON-able."""
        regions = []
        for name, region in self.memory.regions.items():
            qp = self._by_name.get(name)
            if qp is None:
                continue
            d = region.describe()
            d.pop("file", None)
            d.update(qpn=qp.qpn, peer_qpn=qp.peer_qpn, initial_psn=qp.initial_psn)
            regions.append(d)
        return {"version": CONNECT_INFO_VERSION, "collector": self.memory.name, "mac": mac_str(self.mac),
                "ip": ip_str(self.ip), "udp_port": self.udp_port, "regions": regions}

    def connect_info_json(self) -> str:
        return json.dumps(self.connect_info())

    def bind(self, mac: bytes | str, ip: bytes | str, qpns: Mapping[str, int] | None = None) -> list[str]:
        """Connect QPs to their peer: requests are then accepted only from ``mac``/``ip`` and
        answered to the peer QPN (the RTR transition of an RC QP, which fixes the remote GID
        and QPN; DTA §7.2.1). ``qpns``: {QP name: the peer's QPN} for the QPs to bind (None:
        every QP, keeping the peer QPN :meth:`connect_info` proposed). Binding again
        replaces the peer (a translator replaced by another). Returns the names bound;
        ValueError (nothing changed) for an unknown name or a QPN outside 24 bits."""
        peer_mac = mac_bytes(mac) if isinstance(mac, str) else bytes(mac)
        peer_ip = ip_bytes(ip) if isinstance(ip, str) else bytes(ip)
        if len(peer_mac) != 6 or len(peer_ip) != 4:
            raise ValueError("the peer's mac must be 6 bytes and its ip 4 bytes")
        if qpns is None:
            qpns = {qp.name: qp.peer_qpn for qp in self.qps.values()}
        for name, qpn in qpns.items():
            if name not in self._by_name:
                raise ValueError(f"no QP {name!r}; QPs: {sorted(self._by_name)}")
            if not isinstance(qpn, int) or isinstance(qpn, bool) or not 0 <= qpn <= PSN_MASK:
                raise ValueError(f"peer QPN {qpn!r} of {name!r} is not a 24-bit number")
        for name, qpn in qpns.items():
            qp = self._by_name[name]
            qp.peer_mac, qp.peer_ip, qp.peer_qpn = peer_mac, peer_ip, qpn
            qp.templates.clear()  # a new peer: new response headers
        self._heads.clear()  # and what was learnt about the old peer's requests
        return list(qpns)

    # ------------------------------------------------------------------ restart
    def qp_state(self) -> list[dict[str, Any]]:
        """Every QP's connection state, JSON-able, in creation order: ``[{"name", "qpn",
        "peer_qpn", "initial_psn", "epsn", "msn", "peer": {"mac", "ip"} or None}]``. What a
        collector that survives a restart saves (with its memory) and gives back as
        ``RoceResponder(..., qps=...)``."""
        return [{"name": qp.name, "qpn": qp.qpn, "peer_qpn": qp.peer_qpn, "initial_psn": qp.initial_psn,
                 "epsn": qp.epsn, "msn": qp.msn,
                 "peer": None if qp.peer_ip is None or qp.peer_mac is None else {
                     "mac": mac_str(qp.peer_mac), "ip": ip_str(qp.peer_ip)}}
                for qp in self._by_name.values()]

    def _restore(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """Rebuild the QPs :meth:`qp_state` exported: one per region of the memory, each exactly
        as saved. ValueError (no QP created) if anything is missing, duplicated or out of range."""
        if isinstance(entries, str | bytes) or not isinstance(entries, Sequence):
            raise ValueError("the saved QPs must be a list")
        restored = [_restored_qp(entry) for entry in entries]
        names = [qp.name for qp in restored]
        if sorted(names) != sorted(self.memory.regions) or len(set(names)) != len(names):
            raise ValueError(f"the saved QPs {names} are not one per region {list(self.memory.regions)}")
        qpns = [qp.qpn for qp in restored]
        if len(set(qpns)) != len(qpns):
            raise ValueError(f"the saved QPs repeat a QPN: {qpns}")
        for qp in restored:
            self.qps[qp.qpn] = qp
            self._by_name[qp.name] = qp

    # ------------------------------------------------------------------ data path
    def receive(self, frame: bytes | bytearray | memoryview, now_ns: int = 0) -> list[bytes]:
        """Execute one RoCEv2 request; return the response frames (possibly none). Never raises
        on frame content."""
        return self.receive_batch((frame,), now_ns)

    def receive_batch(self, frames: Sequence[bytes | bytearray | memoryview], now_ns: int = 0) -> list[bytes]:
        """Execute the requests in ``frames`` in order; return every response, in order. Never
        raises on frame content. ACKs of AckReq WRITEs are coalesced per QP, one per
        :attr:`ack_every` of them and at the end of the batch (IBTA vol. 1 ch. 9: an ACK
        acknowledges every earlier PSN); any other response of that QP (a NAK, an ATOMIC
        ACKNOWLEDGE) sends the owed ACK first, so responses stay in PSN order."""
        c = self.c
        out: list[bytes] = []
        fast = self._fast
        for frame in frames:
            c.frames += 1
            try:
                if fast(frame, out):
                    continue
            except Exception:  # a bug must not kill the data path (docs/testbed.md); tests assert this stays 0
                c.internal_errors += 1
                continue
            if self._owing:
                self._flush_acks(out)
            out += self._receive_full(frame)
        if self._owing:
            self._flush_acks(out)
        return out

    def _fast(self, frame: bytes | bytearray | memoryview, out: list[bytes]) -> bool:
        """The common request, read at fixed offsets (:mod:`.rocewire`): IPv4 without options, to
        us, ICRC right, from the QP's peer, in sequence, a WRITE Only or an atomic the memory
        allows. Executed as :meth:`_receive_full` would, and True; False, with nothing touched,
        for anything else (the full checks then answer and count it exactly as before).

        A peer's requests of one shape repeat their headers byte for byte up to the PSN (a
        translator's template, ``headers`` builds alike), so the verdict on bytes 6-49 (source
        MAC, EtherType, IPv4, UDP, BTH to the QPN) and the ICRC's state after them are learnt
        once (:meth:`_learn`); a frame then costs a lookup, its PSN, its own checks and the CRC
        of its last bytes."""
        head = self._heads.get(bytes(frame[6:50]))  # bytes: a bytearray's slice is no dict key
        if head is None:
            head = self._learn(frame)
            if head is None:
                return False
        qp, ip_end, end, data_end, opcode, sport, state = head
        if len(frame) < ip_end:
            return False
        (w2,) = _U32.unpack_from(frame, 50)
        if w2 & PSN_MASK != qp.epsn or ICRC.unpack_from(frame, end - 4)[0] != crc32(frame[50:end - 4], state):
            return False  # out of sequence / a duplicate, or a bad ICRC: the full path's business
        if opcode == Opcode.RDMA_WRITE_ONLY:
            return self._fast_write(frame, qp, data_end, sport, w2, out)
        return self._fast_atomic(frame, qp, opcode, sport, w2, out)

    def _learn(self, frame: bytes | bytearray | memoryview) -> _Head | None:
        """Check what bytes 6-49 of a request decide (everything the full path checks before the
        PSN, but the frame's length and ICRC) and remember the verdict; None: not for the fast path."""
        n = len(frame)
        if n < 62:
            return None
        (src_mac, etype, vihl, tot, proto, ip_src, ip_dst, sport, dport, ulen, opcode, b1, pkey, w1, _) = \
            HEAD.unpack_from(frame)
        end = 34 + ulen
        if (etype != 0x0800 or vihl != 0x45 or proto != 17 or dport != UdpPort.ROCEV2 or end > 14 + tot
                or ip_dst != self.ip or b1 & 15 or pkey & 0x7FFF != 0x7FFF):
            return None
        qp = self.qps.get(w1 & 0xFFFFFF)
        if qp is None or ip_src != qp.peer_ip or src_mac != qp.peer_mac:
            return None  # a stranger: the full path drops it unanswered and counts it
        data_end = end - 4 - (b1 >> 4 & 3)
        if not ((opcode == Opcode.RDMA_WRITE_ONLY and data_end >= 70)
                or ((opcode == Opcode.FETCH_ADD or opcode == Opcode.COMPARE_SWAP) and data_end >= 82)):
            return None
        masked = bytearray(frame[14:50])  # the ICRC's view: what routers may change, as ones
        masked[1] = masked[8] = masked[10] = masked[11] = masked[26] = masked[27] = masked[32] = 0xFF
        head = (qp, 14 + tot, end, data_end, opcode, sport, crc32(masked, LRH_CRC))
        if len(self._heads) >= HEAD_CACHE:
            self._heads.clear()  # bounded whatever the senders vary
        self._heads[bytes(frame[6:50])] = head
        return head

    def _fast_write(self, frame: bytes | bytearray | memoryview, qp: QueuePair, data_end: int, sport: int, w2: int,
                    out: list[bytes]) -> bool:
        va, rkey, dma_len = RETH.unpack_from(frame, 54)
        length = data_end - 70
        reg = self._writable.get(rkey) or self._region(rkey, "write", self._writable)
        if reg is None:
            return False
        mm, base, size = reg
        off = va - base
        if dma_len != length or not length or off < 0 or off + length > size or mm.closed:
            return False
        # executed: the bytes straight into the shared mapping, then the NIC's bookkeeping
        mm[off:off + length] = frame[70:data_end]
        writes, atomics, _, max_end = TRAILER.unpack_from(mm, size)
        stop = off + length
        TRAILER.pack_into(mm, size, writes + 1, atomics, stop, max_end if max_end > stop else stop)
        qc = qp.c
        qc.requests += 1
        qc.writes += 1
        qc.write_bytes += length
        qp.nak_outstanding = False
        qp.epsn = (qp.epsn + 1) & PSN_MASK
        qp.msn = msn = (qp.msn + 1) & PSN_MASK
        if w2 & 0x80000000:  # AckReq
            qp.ack_psn, qp.ack_msn, qp.ack_sport = w2 & PSN_MASK, msn, sport
            if not qp.ack_owed:
                self._owing.append(qp)
            qp.ack_owed += 1
            if qp.ack_owed >= self.ack_every:
                self._flush_ack(qp, out)
        return True

    def _fast_atomic(self, frame: bytes | bytearray | memoryview, qp: QueuePair, opcode: int, sport: int, w2: int,
                     out: list[bytes]) -> bool:
        va, rkey, swap_add, compare = ATOMIC_ETH.unpack_from(frame, 54)
        reg = self._atomic_ok.get(rkey) or self._region(rkey, "atomic", self._atomic_ok)
        if reg is None or va & 7:
            return False
        mm, base, size = reg
        off = va - base
        if off < 0 or off + 8 > size or mm.closed:
            return False
        orig: int = _U64LE.unpack_from(mm, off)[0]  # little-endian u64, as an x86 NIC (memory.py)
        if opcode == Opcode.FETCH_ADD:
            _U64LE.pack_into(mm, off, (orig + swap_add) & _U64_MASK)
            qp.c.fetch_adds += 1
        else:
            if orig == compare:
                _U64LE.pack_into(mm, off, swap_add)
            qp.c.cmp_swaps += 1
        writes, atomics, last, max_end = TRAILER.unpack_from(mm, size)
        TRAILER.pack_into(mm, size, writes, atomics + 1, last, max_end)
        qp.c.requests += 1
        qp.nak_outstanding = False
        psn = w2 & PSN_MASK
        qp.epsn = (psn + 1) & PSN_MASK
        qp.msn = msn = (qp.msn + 1) & PSN_MASK
        replay = qp.replay
        replay[psn] = orig
        if len(replay) > ATOMIC_REPLAY:
            replay.popitem(last=False)
        if qp.ack_owed:
            self._flush_ack(qp, out)
        qp.c.atomic_acks += 1
        out.append(self._template(qp, sport).packed(Opcode.ATOMIC_ACKNOWLEDGE,
                                                    ATOMIC_ACK_TAIL.pack(psn, _ACK_SYNDROME << 24 | msn, orig)))
        return True

    def _region(self, rkey: int, right: str, cache: dict[int, _Mapped]) -> _Mapped | None:
        """The mapping, base address and size of the region ``rkey`` names if it grants ``right``
        (kept in ``cache``; a region closed later shows as a closed mapping), else None."""
        region = self.memory.by_rkey(rkey)
        mm = None if region is None or not region.allows(right) else region.mapping
        if region is None or mm is None or mm.closed:
            return None
        cache[rkey] = entry = (mm, region.base_va, region.size)
        return entry

    def _template(self, qp: QueuePair, sport: int) -> RoceTemplate:
        """Response headers toward ``qp``'s peer, answering a request sent from UDP port ``sport``."""
        tmpl = qp.templates.get(sport)
        if tmpl is None:
            assert qp.peer_mac is not None and qp.peer_ip is not None  # only a bound QP executes
            tmpl = qp.templates[sport] = RoceTemplate(self.mac, qp.peer_mac, self.ip, qp.peer_ip, sport,
                                                      qp.peer_qpn)
        return tmpl

    def _flush_ack(self, qp: QueuePair, out: list[bytes]) -> None:
        """Send ``qp``'s coalesced ACK: the newest AckReq PSN it covers, with the MSN then."""
        qp.ack_owed = 0
        qp.c.acks += 1
        out.append(self._template(qp, qp.ack_sport).packed(Opcode.ACKNOWLEDGE,
                                                           ACK_TAIL.pack(qp.ack_psn, _ACK_SYNDROME << 24 | qp.ack_msn)))

    def _flush_acks(self, out: list[bytes]) -> None:
        for qp in self._owing:
            if qp.ack_owed:
                self._flush_ack(qp, out)
        self._owing.clear()

    def _receive_full(self, frame: bytes | bytearray | memoryview) -> list[bytes]:
        """One request through every check with the ``headers`` decoders (anything the fast path
        does not take: malformed, foreign, out of sequence, refused)."""
        c = self.c
        if not is_roce_frame(frame):
            c.not_roce += 1  # ARP, IPv6 ND, ...: what a raw socket also sees; not an error
            return []
        try:
            req = parse_roce_frame(frame)
        except HeaderError:
            c.malformed += 1
            return []
        try:
            return self._receive(req)
        except HeaderError:
            c.malformed += 1
        except Exception:  # a bug must not kill the data path (docs/testbed.md); tests assert this stays 0
            c.internal_errors += 1
        return []

    def _receive(self, req: RoceFrame) -> list[bytes]:
        c = self.c
        if req.ip.dst != self.ip:
            c.not_for_us += 1
            return []
        if not req.icrc_ok:
            c.icrc_errors += 1
            return []
        bth = req.bth
        if bth.version != 0 or bth.pkey & 0x7FFF != 0x7FFF:
            c.bad_header += 1
            return []
        qp = self.qps.get(bth.dqpn)
        if qp is None:
            c.unknown_qp += 1
            return []
        if req.ip.src != qp.peer_ip or req.eth.src != qp.peer_mac:
            # not the connected peer: dropped before the PSN is looked at, and never answered
            if qp.peer_ip is None:
                c.requests_unbound += 1
            else:
                c.requests_rejected_source += 1
            return []
        if bth.opcode not in _REQUESTS:
            c.not_request += 1
            return []
        qc = qp.c
        qc.requests += 1
        d = W24.diff(bth.psn, qp.epsn)  # 2**23 ahead counts as behind: a duplicate (headers/serial.py)
        if d:
            if d > 0:
                return self._sequence_error(req, qp)
            return self._duplicate(req, qp)
        qp.nak_outstanding = False
        op = bth.opcode
        if op == Opcode.RDMA_WRITE_ONLY:
            return self._write(req, qp)
        if op in (Opcode.FETCH_ADD, Opcode.COMPARE_SWAP):
            return self._atomic(req, qp)
        return self._nak(req, qp, NakCode.INVALID_REQUEST)

    def _advance(self, qp: QueuePair, completed: bool) -> None:
        qp.epsn = (qp.epsn + 1) & PSN_MASK
        if completed:
            qp.msn = (qp.msn + 1) & PSN_MASK

    def _write(self, req: RoceFrame, qp: QueuePair) -> list[bytes]:
        reth = req.reth
        assert reth is not None  # parse_roce_frame guarantees it for WRITE Only
        payload = req.payload
        n = len(payload)
        if reth.dma_len != n:
            return self._nak(req, qp, NakCode.INVALID_REQUEST)
        if n:
            region = self.memory.by_rkey(reth.rkey)
            if region is None:
                return self._nak(req, qp, NakCode.REMOTE_ACCESS_ERROR)
            try:
                region.write(reth.va, payload)
            except MemoryAccessError:
                return self._nak(req, qp, NakCode.REMOTE_ACCESS_ERROR)
        qc = qp.c
        qc.writes += 1
        qc.write_bytes += n
        self._advance(qp, True)
        if req.bth.ackreq:
            return [self._ack(req, qp, req.bth.psn)]
        return []

    def _atomic(self, req: RoceFrame, qp: QueuePair) -> list[bytes]:
        ae = req.atomic_eth
        assert ae is not None
        if ae.va % 8:
            return self._nak(req, qp, NakCode.INVALID_REQUEST)
        region = self.memory.by_rkey(ae.rkey)
        if region is None:
            return self._nak(req, qp, NakCode.REMOTE_ACCESS_ERROR)
        try:
            if req.bth.opcode == Opcode.FETCH_ADD:
                orig = region.fetch_add(ae.va, ae.swap_add)
                qp.c.fetch_adds += 1
            else:
                orig = region.cmp_swap(ae.va, ae.compare, ae.swap_add)
                qp.c.cmp_swaps += 1
        except MemoryAccessError:
            return self._nak(req, qp, NakCode.REMOTE_ACCESS_ERROR)
        self._advance(qp, True)
        replay = qp.replay
        replay[req.bth.psn] = orig
        if len(replay) > ATOMIC_REPLAY:
            replay.popitem(last=False)
        return [self._atomic_ack(req, qp, req.bth.psn, orig)]

    def _sequence_error(self, req: RoceFrame, qp: QueuePair) -> list[bytes]:
        qc = qp.c
        if qp.nak_outstanding and self.nak_policy == "once":
            qc.out_of_sequence_dropped += 1
            return []
        qp.nak_outstanding = True
        qc.naks_psn += 1
        return [self._response(req, qp, Opcode.ACKNOWLEDGE, qp.epsn, [aeth_nak(NakCode.PSN_SEQUENCE_ERROR, qp.msn)])]

    def _duplicate(self, req: RoceFrame, qp: QueuePair) -> list[bytes]:
        qp.c.duplicates += 1
        op = req.bth.opcode
        if op in (Opcode.FETCH_ADD, Opcode.COMPARE_SWAP):
            orig = qp.replay.get(req.bth.psn)
            if orig is None:
                return []
            return [self._atomic_ack(req, qp, req.bth.psn, orig)]
        if req.bth.ackreq:
            return [self._ack(req, qp, req.bth.psn)]
        return []

    def _nak(self, req: RoceFrame, qp: QueuePair, code: NakCode) -> list[bytes]:
        qc = qp.c
        if code == NakCode.REMOTE_ACCESS_ERROR:
            qc.naks_access += 1
        else:
            qc.naks_invalid += 1
        psn = req.bth.psn
        self._advance(qp, False)
        return [self._response(req, qp, Opcode.ACKNOWLEDGE, psn, [aeth_nak(code, qp.msn)])]

    def _ack(self, req: RoceFrame, qp: QueuePair, psn: int) -> bytes:
        qp.c.acks += 1
        return self._response(req, qp, Opcode.ACKNOWLEDGE, psn, [aeth_ack(qp.msn)])

    def _atomic_ack(self, req: RoceFrame, qp: QueuePair, psn: int, orig: int) -> bytes:
        qp.c.atomic_acks += 1
        return self._response(req, qp, Opcode.ATOMIC_ACKNOWLEDGE, psn, [aeth_ack(qp.msn), AtomicAckETH(orig)])

    def _response(self, req: RoceFrame, qp: QueuePair, opcode: int, psn: int, ext: Sequence[ExtHeader]) -> bytes:
        bth = BTH(opcode=opcode, migreq=1, pkey=0xFFFF, dqpn=qp.peer_qpn, psn=psn)
        return build_roce_frame(self.mac, req.eth.src, self.ip, req.ip.src, req.udp.sport, bth, ext)

    def next_deadline(self) -> int | None:
        """Always None: the responder has no timer; it answers each request as it executes it."""
        return None

    # ------------------------------------------------------------------ state
    def counters(self) -> dict[str, Any]:
        """JSON-able counters: responder-wide, and per QP (with its ePSN and MSN)."""
        out: dict[str, Any] = asdict(self.c)
        out["qps"] = {qp.name: {"qpn": qp.qpn, "epsn": qp.epsn, "msn": qp.msn, **asdict(qp.c),
                                "peer": None if qp.peer_ip is None else {
                                    "mac": mac_str(qp.peer_mac or b""), "ip": ip_str(qp.peer_ip),
                                    "qpn": qp.peer_qpn}}
                      for qp in self.qps.values()}
        return out


def _u24(entry: Mapping[str, Any], key: str, low: int = 0) -> int:
    value = entry.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= PSN_MASK:
        raise ValueError(f"saved QP {entry.get('name')!r}: {key}={value!r} is not a number in {low}..{PSN_MASK}")
    return value


def _restored_qp(entry: Any) -> QueuePair:
    """A :class:`QueuePair` from one :meth:`RoceResponder.qp_state` entry (ValueError if malformed)."""
    if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
        raise ValueError(f"saved QP {entry!r}: not an object with a name")
    epsn = _u24(entry, "epsn")
    qp = QueuePair(entry["name"], _u24(entry, "qpn", 2), _u24(entry, "peer_qpn"), _u24(entry, "initial_psn"),
                   epsn, _u24(entry, "msn"))
    peer = entry.get("peer")
    if peer is not None:
        try:
            if not isinstance(peer, Mapping):
                raise TypeError("not an object")
            qp.peer_mac, qp.peer_ip = mac_bytes(peer["mac"]), ip_bytes(peer["ip"])
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"saved QP {qp.name!r}: bad peer {peer!r} ({exc})") from None
        if len(qp.peer_mac) != 6 or len(qp.peer_ip) != 4:
            raise ValueError(f"saved QP {qp.name!r}: bad peer {peer!r}")
    return qp


@dataclass(slots=True)
class BufferedResponderCounters:
    """What the buffer counts (``BufferedResponder.c``; the responder behind it has its own)."""

    served: int = 0  # frames handed to the responder
    overflow_drops: int = 0  # frames refused: the buffer was full


class BufferedResponder:
    """A NIC receive buffer of ``capacity`` frames in front of a :class:`RoceResponder`, served
    one frame per ``service_ns`` (sans-IO, for emulating collector-side congestion).

    ``offer(frame, now)`` enqueues (False and counted in ``overflow_drops`` when full: the
    congestion loss that desynchronises a QP, §5.3); ``poll(now)`` executes every frame
    whose service has completed by ``now`` and returns ``(time, response)`` pairs. Frames
    are executed in arrival order, so stale frames queued before a resynchronisation are
    processed (and NAK'd or dropped) before the translator's new ones — the "buffers filled
    with invalid RDMA traffic" that the grace period waits out (§5.3)."""

    def __init__(self, responder: RoceResponder, capacity: int, service_ns: int) -> None:
        if capacity < 1 or service_ns < 0:
            raise ValueError("capacity must be >= 1 and service_ns >= 0")
        self.responder = responder
        self.capacity = capacity
        self.service_ns = service_ns
        self.queue: deque[bytes] = deque()
        self.busy_until = 0
        self.c = BufferedResponderCounters()
        self.actions = ActionQueue()  # output is poll()'s return value: this stays empty
        self._pending: list[tuple[int, bytes]] = []

    def offer(self, frame: bytes, now_ns: int) -> bool:
        self._serve(now_ns, None)
        if len(self.queue) >= self.capacity:
            self.c.overflow_drops += 1
            return False
        if not self.queue:
            self.busy_until = max(self.busy_until, now_ns)
        self.queue.append(frame)
        return True

    def poll(self, now_ns: int) -> list[tuple[int, bytes]]:
        out: list[tuple[int, bytes]] = []
        self._serve(now_ns, out)
        return out

    def _serve(self, now_ns: int, out: list[tuple[int, bytes]] | None) -> None:
        pending = self._pending  # responses produced while only offering wait for the next poll
        while self.queue and self.busy_until + self.service_ns <= now_ns:
            self.busy_until += self.service_ns
            frame = self.queue.popleft()
            self.c.served += 1
            for resp in self.responder.receive(frame, self.busy_until):
                pending.append((self.busy_until, resp))
        if out is not None:
            out.extend(pending)
            pending.clear()

    def next_deadline(self) -> int | None:
        return self.busy_until + self.service_ns if self.queue else None

    def counters(self) -> dict[str, Any]:
        """The buffer's own counters (the responder behind it has its own)."""
        return {"queued": len(self.queue), **asdict(self.c)}


if TYPE_CHECKING:  # mypy checks that the engines keep the contract of netstack.engine
    _roceresponder: type[Engine] = RoceResponder
    _bufferedresponder: type[Engine] = BufferedResponder
