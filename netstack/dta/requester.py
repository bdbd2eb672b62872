"""The DTA translator's RoCEv2 requester ("Direct Telemetry Access" §5, §5.3, §7.2), sans-IO:
the requester side of the RC connections to the collector's regions.

The translator (:mod:`.translator`) decides *what* to write where (the primitives of §6); this
class decides *how* it goes on the wire and keeps the RDMA state the reporters never see: per
QP the collector's QPN and rkey, the next PSN, what is outstanding, the output window and its
time-out, and the fixed headers of the requests (:class:`~.rocewire.RoceTemplate`, ICRC
included). It judges the collector's ACKs and NAKs and says when a PSN-sequence NAK
resynchronised a QP; the grace period that follows is the translator's business (§5.3: it is
about which *reports* are dropped)::

    rq = RoceRequester(RequesterConfig(...), TranslatorCounters(), now_ns)
    qp = rq.add_qp(region)                       # one connect_info region
    if not cfg.window or rq.room(qp, n):         # the output window (below)
        rq.write(qp, va, payload, out)           # RoCEv2 frames appended to ``out``
    resynced = rq.on_response(frame)             # ACK / ATOMIC ACK / NAK from the collector

The clock is the translator's: it sets :attr:`RoceRequester.now` before every call. Counters go
into the translator's :class:`~.counters.TranslatorCounters` (one status, as before the split).

Output window (ours; docs/dta.md "Output window"). The paper's translator sends whatever
the reports ask for and relies on the grace period (§5.3) when the collector's NIC falls
behind; a software responder that falls behind loses requests in its socket, every loss is
a PSN gap, and with the grace period dropping the next reports after every NAK the ingest
rate collapses. With ``window`` > 0 each QP keeps at most ``window`` requests (PSNs)
outstanding: sent at or after ``una`` (below). A report whose requests would not fit is
dropped *before* it becomes a request (``window_dropped``; an Append entry only when it
would complete a batch, so it is dropped before the head pointer and the list has no hole;
idle flushes and Sketch-Merge WRITEs wait for room instead, the latter bounded by
``MAX_HELD``). The window moves with the collector's ACKs: with a window, AckReq is set on
every ``ack_every``-th request (one in ``window // 8`` if ``ack_every`` is 0) and on those
that nearly fill the window, and the collector coalesces ACKs (``--ack-every`` there).
**No deadlock**: when a full window has seen no progress (``una`` moving, a resync) for
``window_timeout_ns`` (default 50 ms; a request lost with its NAK, a lost ACK, a dead or
slow collector), the QP goes back to ``una`` and carries on from there with new reports
(:meth:`RoceRequester._window_timeout` explains why that keeps the collector in sequence),
with at most ``PROBE_WINDOW`` (16, or the AckReq spacing if larger) requests outstanding until
the collector answers; ``window_timeouts`` counts these, ``window_rewound`` the PSNs gone back
over. On a loaded host the live switch daemon passes its recent scheduling delay
(:meth:`RoceRequester.set_timer_slack`, twice the largest lag of the last seconds) and the
time-out waits that much longer: a collector or a switch daemon that merely waited for the CPU
has not lost anything (docs/dta.md "The window time-out on a loaded host").


Which responses are believed (docs/security.md#dta). The public code rewinds on any
opcode-0x11 packet; a forged NAK far behind then makes the collector drop every later
WRITE as a duplicate. A response is acted on only when it is

1. from our collector: its source MAC and IP from ``connect_info``, and UDP source port
   ``udp_sport`` (our collector answers from the port the request came from); else
   ``responses_rejected_source``;
2. for us: destination MAC/IP ``mac``/``ip`` and UDP port ``connect_info["udp_port"]``;
   else ``responses_rejected_dest``;
3. an ACKNOWLEDGE / ATOMIC ACKNOWLEDGE with an AETH (``response_unexpected``) for one of
   our QPs (``response_unknown_qp``);
4. inside the QP's **sequence window** of PSNs it actually sent and that are not known to
   be executed (else ``naks_rejected_window`` / ``acks_rejected_window``).

``high`` is one past the newest PSN ever sent on the QP (the next PSN, unless a resync
moved it back); ``una`` the oldest PSN not yet known to be executed: an ACK (or an access /
invalid-request NAK) for PSN p proves the responder executed or consumed everything up to
p, and an accepted PSN-sequence NAK for e that everything before e was executed.

- An ACK, ATOMIC ACK or any NAK other than a sequence error is believed for a PSN in
  ``[una, high)``; it only moves ``una`` forward (never the PSN).
- A PSN-sequence NAK for e is believed for ``una <= e <= high - 2``: the responder NAKs e
  only when a later PSN x > e reached it, so a NAK for ``high - 1`` (or for ``high``,
  "nothing is missing") cannot come from a genuine loss. While responses keep moving
  ``una`` (one did in the last ``nak_window_ns``, as with ``ack_every`` or Fetch&Adds,
  each of which is answered) that is the whole window: the requests in flight. Otherwise
  (ACKs off, the public translator's mode, where ``una`` only moves at a resync) e must
  also be among what was sent recently: no older than the oldest PSN sent within the last
  ``nak_window_ns`` (default 10 s), read from a short send history (one entry per
  ``nak_window_ns / 16``), minus ``nak_window_slack`` PSNs (default 1024).
- Never more than 2**23 behind ``high`` (the responder's own half-space of "behind";
  ``_age_out`` pulls the bounds along so their ages never wrap).

Why that is enough: a genuine sequence NAK names the first PSN e the responder misses,
which we sent (e < high), which nothing acknowledged (e >= una), and which precedes the
first later request x that reached the responder; x was sent at most one round trip plus
the backlogs on the way (the ToR's own queues included) before the NAK is handled, and the
run of requests lost between e and x is short, or was sent recently, or within the slack
(a request lost just before the QP went idle for long is covered without it: the history
keeps its newest entry older than the horizon). A forged NAK must name a PSN inside the
window (the requests in flight; without ACKs, at most ten seconds of sending, about 10**5
of the 2**24 PSNs at the testbed's rates; and a 24-bit QPN besides), and even then can
rewind the QP only by what the window holds, never by 2**23. The time bound is generous
because the emulated ToR can be slow to read responses: under overload on the live
testbed it handled the collector's ATOMIC ACKs more than a second after sending the
requests (docs/security.md#dta).

Anything rejected is counted and changes nothing: no PSN moves, no grace period starts.
A positive ACK never moves the PSN either; it only advances ``una``.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from zlib import crc32

from headers.registry import UdpPort
from headers.roce import AethKind, NakCode, Opcode, RoceFrame, decode_syndrome, parse_roce_frame
from headers.serial import W24

from .counters import TranslatorCounters
from .rocewire import ATOMIC_TAIL, HEAD, ICRC, LRH_CRC, WRITE_TAIL, RoceTemplate

#: RoCE PSNs are 24-bit serial numbers (headers/serial.py); the ages below are distances mod 2**24
PSN_MASK = W24.mask
PSN_HALF = W24.half
#: Send-history entries per ``nak_window_ns`` (the window's time resolution is 1/16 of it).
MARKS_PER_WINDOW = 16
NEVER = 1 << 62
#: Every 2**16 new PSNs the window's bounds are pulled to at most MAX_AGE behind (``_age_out``).
AGE_CHECK_MASK = 0xFFFF
MAX_AGE = PSN_HALF - 2 * (AGE_CHECK_MASK + 1)
#: Response header shapes whose verdict the fast path remembers (:meth:`RoceRequester._fast_response`).
RESPONSE_SHAPES = 1024
#: The output window (module docstring, "Output window"): what ``dta_enable`` uses when not told
#: (:mod:`netstack.dta.control`; the engine's own default is 0, no window), and the time a full
#: window may go without ACK progress before the QP goes back to its oldest un-acknowledged PSN.
DEFAULT_WINDOW = 1536
DEFAULT_WINDOW_TIMEOUT_NS = 50_000_000
#: After a time-out, at least this many requests (``window`` if smaller) go out before an answer.
PROBE_WINDOW = 16


@dataclass(frozen=True)
class RequesterConfig:
    """The requester's share of a :class:`~.translator.TranslatorConfig` (checked there), and the
    collector's addresses from its ``connect_info``: who the requests go to and who answers."""

    mac: bytes
    ip: bytes
    udp_sport: int
    collector_mac: bytes
    collector_ip: bytes
    collector_udp_port: int
    ack_every: int = 0
    nak_window_ns: int | None = 10_000_000_000
    nak_window_slack: int = 1024
    window: int = 0
    window_timeout_ns: int = DEFAULT_WINDOW_TIMEOUT_NS


@dataclass
class TxQp:
    """Requester side of one RC connection (one collector region)."""

    name: str
    qpn: int  # the collector's QPN: BTH destination of our requests
    local_qpn: int  # ours: BTH destination of the collector's responses
    psn: int
    rkey: int
    base_va: int
    size: int
    layout: dict[str, Any]
    frames: int = 0
    resyncs: int = 0
    # the sequence window (module docstring, "Which responses are believed"), set up by the requester
    high: int = 0  # one past the newest PSN ever sent: psn, unless a resync moved psn back
    una: int = 0  # the oldest PSN not known to be executed
    una_at: int | None = None  # when a response last moved una (None: never)
    marks: deque[tuple[int, int]] = field(default_factory=deque)  # (time, first PSN sent at or after it)
    mark_due: int = 0  # when the next send adds a history entry
    # the output window (module docstring, "Output window"): when the window last made progress
    # (una moved, a resync or a time-out, or a request went out on an empty window)
    progress_at: int = 0
    window_timeouts: int = 0
    probing: bool = False  # since a time-out and until progress: only ``probe_window`` outstanding
    tmpl: RoceTemplate | None = field(default=None, repr=False)  # the fixed headers of our requests


class RoceRequester:
    """The requester engine (module docstring). ``counters`` is the translator's: every counter
    here goes there; ``now_ns`` the start time, then :attr:`now` as the translator sets it."""

    def __init__(self, config: RequesterConfig, counters: TranslatorCounters, now_ns: int = 0) -> None:
        self.config = config
        self.c = counters
        #: the translator's clock (it sets this before every call: the latest ``now_ns`` given)
        self.now = int(now_ns)
        self.qps: dict[str, TxQp] = {}
        self._by_local_qpn: dict[int, TxQp] = {}
        self._resp_heads: dict[bytes, tuple[TxQp, int, int, int]] = {}  # RESPONSE_SHAPES
        window = config.nak_window_ns
        #: spacing of send-history entries (never, without a time bound)
        self._mark_every = max(1, window // MARKS_PER_WINDOW) if window is not None else None
        #: how late the live shell's process has recently been scheduled: the window time-out
        #: waits that much longer (:meth:`set_timer_slack`; 0 in virtual time)
        self.timer_slack_ns = 0
        #: AckReq on every n-th request of a QP (0: never): ``ack_every``, or with a window and no
        #: ``ack_every`` one in window/8, since the window moves only with the collector's ACKs
        self.ack_interval = config.ack_every or (max(1, config.window // 8) if config.window else 0)
        #: what a QP may have outstanding after a time-out until the collector answers (the old
        #: requests may still be queued there: a whole window again could overflow its buffer)
        self.probe_window = min(config.window, max(PROBE_WINDOW, self.ack_interval))

    def set_timer_slack(self, slack_ns: int) -> None:
        """The window time-out plus ``slack_ns`` from now on (0: ``window_timeout_ns`` as configured).

        The time-out (ours, module docstring "Output window"; DTA §5.3 has no requester timer)
        declares a window's requests lost when no ACK progress came for ``window_timeout_ns``, and
        rewinds the QP to ``una`` (the reports sent as duplicates after it are lost). An ACK needs
        the collector scheduled to answer and the switch daemon scheduled to read it; the live
        switch daemon passes how late it has recently been scheduled (``Switch.set_timer_slack``:
        twice the largest lag of the last seconds), so that a time-out means no answer came, not
        that a process waited for the CPU. Sans-IO: nothing is measured here."""
        self.timer_slack_ns = max(0, int(slack_ns))

    def window_timeout_ns(self) -> int:
        """The window time-out as it now stands: configured plus the scheduling slack."""
        return self.config.window_timeout_ns + self.timer_slack_ns

    # ------------------------------------------------------------------ setup
    def add_qp(self, e: dict[str, Any]) -> TxQp:
        """The QP of one ``connect_info`` region (ValueError naming the region if it is unusable):
        its PSNs start at the collector's ``initial_psn`` with an empty window (§7.2.1)."""
        try:
            qp = TxQp(str(e["name"]), int(e["qpn"]), int(e["peer_qpn"]), int(e["initial_psn"]) & PSN_MASK,
                      int(e["rkey"]), int(e["base_va"]), int(e["size"]), dict(e.get("layout") or {}))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"connect_info region {e!r}: {exc}") from None
        if qp.name in self.qps or qp.local_qpn in self._by_local_qpn:
            raise ValueError(f"connect_info: duplicate region or QPN in {e!r}")
        cfg = self.config
        qp.high = qp.una = qp.psn  # nothing sent yet: an empty window
        qp.tmpl = RoceTemplate(cfg.mac, cfg.collector_mac, cfg.ip, cfg.collector_ip, cfg.udp_sport, qp.qpn)
        qp.marks.append((self.now, qp.psn))
        qp.progress_at = self.now
        qp.mark_due = self.now + self._mark_every if self._mark_every is not None else NEVER
        self.qps[qp.name] = qp
        self._by_local_qpn[qp.local_qpn] = qp
        return qp

    # ------------------------------------------------------------------ RoCEv2 out
    def write(self, qp: TxQp, va: int, payload: bytes, out: list[bytes]) -> None:
        """One RDMA WRITE Only of ``payload`` at ``va`` (Key-Write copies, Append batches, sketch
        column groups: §7.2.2-§7.2.4), appended to ``out``."""
        self._request(qp, Opcode.RDMA_WRITE_ONLY, WRITE_TAIL, va, len(payload), payload, out)
        self.c.writes += 1

    def fetch_add(self, qp: TxQp, va: int, addend: int, out: list[bytes]) -> None:
        """One FETCH_ADD of ``addend`` at ``va`` (a Key-Increment counter, §6.4), appended to ``out``."""
        self._request(qp, Opcode.FETCH_ADD, ATOMIC_TAIL, va, addend, b"", out)
        self.c.fetch_adds += 1

    def _request(self, qp: TxQp, opcode: int, tail: struct.Struct, va: int, arg: int, payload: bytes,
                 out: list[bytes]) -> None:
        """One request on ``qp``: ``tail`` packs the BTH's PSN word and the extended header, RETH
        (``arg`` = DMA length) or AtomicETH (``arg`` = the addend; compare 0); the QP's template
        adds the fixed headers and the ICRC (:mod:`.rocewire`)."""
        cfg = self.config
        qp.frames += 1
        psn = qp.psn
        if self.now >= qp.mark_due:
            self._mark(qp, psn)
        ai = self.ack_interval
        if cfg.window:
            if psn == qp.una:  # the first request on an empty window: its time-out counts from now
                qp.progress_at = self.now
            # AckReq also near a full window, so the collector acknowledges what fills it
            ack = ai and (qp.frames % ai == 0 or qp.probing or (psn - qp.una) & PSN_MASK >= cfg.window - ai)
        else:
            ack = ai and qp.frames % ai == 0
        word = psn | 0x80000000 if ack else psn  # AckReq
        qp.psn = nxt = (psn + 1) & PSN_MASK
        if psn == qp.high:  # a new PSN (after a resync, psn catches up with high first)
            qp.high = nxt
            if not nxt & AGE_CHECK_MASK:
                self._age_out(qp)
        assert qp.tmpl is not None  # set with the QP
        if tail is WRITE_TAIL:
            out.append(qp.tmpl.packed(opcode, WRITE_TAIL.pack(word, va, qp.rkey, arg), payload))
        else:
            out.append(qp.tmpl.packed(opcode, tail.pack(word, va, qp.rkey, arg, 0)))
        self.c.roce_frames += 1

    # ------------------------------------------------------------------ responses and resync
    def on_response(self, frame: bytes | bytearray | memoryview) -> bool:
        """Judge an ACK / ATOMIC ACK / NAK from the collector (§5.3) and act on it if it is
        believable (module docstring, "Which responses are believed"): anything else is a counted
        drop that moves nothing. True when it was a PSN-sequence NAK that rewound a QP to the
        collector's expected PSN: the caller then starts the grace period. HeaderError (the
        caller counts ``response_malformed``) when the frame does not parse."""
        resyncs = self.c.resyncs
        if not self._fast_response(frame):
            resp = parse_roce_frame(frame)
            qp = self._responding_qp(resp)
            if qp is not None:
                assert resp.aeth is not None  # _responding_qp checked it
                kind, value = decode_syndrome(resp.aeth.syndrome)
                self._on_response(qp, kind, value, resp.bth.psn)
        return self.c.resyncs != resyncs

    def _responding_qp(self, resp: RoceFrame) -> TxQp | None:
        """The QP ``resp`` answers for, if it comes from our collector and is addressed to us."""
        c, cfg = self.c, self.config
        if not resp.icrc_ok:
            c.response_icrc_errors += 1
            return None
        if (resp.eth.src != cfg.collector_mac or resp.ip.src != cfg.collector_ip
                or resp.udp.sport != cfg.udp_sport):
            c.responses_rejected_source += 1
            return None
        if (resp.eth.dst != cfg.mac or resp.ip.dst != cfg.ip
                or resp.udp.dport != cfg.collector_udp_port):
            c.responses_rejected_dest += 1
            return None
        if resp.aeth is None or resp.bth.opcode not in (Opcode.ACKNOWLEDGE, Opcode.ATOMIC_ACKNOWLEDGE):
            c.response_unexpected += 1
            return None
        qp = self._by_local_qpn.get(resp.bth.dqpn)
        if qp is None:
            c.response_unknown_qp += 1
        return qp

    def _fast_response(self, frame: bytes | bytearray | memoryview) -> bool:
        """An ACKNOWLEDGE / ATOMIC ACKNOWLEDGE from our collector to us on one of our QPs, read at
        fixed offsets (IPv4 without options, ICRC right, a defined AETH syndrome): acted on, and
        True. False, with nothing touched, for anything else (the full checks then count it).
        The collector's responses of one kind repeat their headers up to the PSN byte for byte, so
        the verdict on bytes 0-49 and the ICRC's state after them are learnt once per shape."""
        head = self._resp_heads.get(bytes(frame[0:50]))  # bytes: a bytearray's slice is no dict key
        if head is None:
            head = self._learn_response(frame)
            if head is None:
                return False
        qp, ip_end, end, state = head
        if len(frame) < ip_end:
            return False
        syndrome = frame[54]
        if (syndrome & 0x80 or syndrome >> 5 == AethKind.RESERVED
                or ICRC.unpack_from(frame, end - 4)[0] != crc32(frame[50:end - 4], state)):
            return False
        self._on_response(qp, syndrome >> 5, syndrome & 0x1F, int.from_bytes(frame[51:54], "big"))
        return True

    def _learn_response(self, frame: bytes | bytearray | memoryview) -> tuple[TxQp, int, int, int] | None:
        """What bytes 0-49 of a response decide (all the full path checks but the frame's length,
        the AETH and the ICRC), remembered; None: not for the fast path."""
        n = len(frame)
        if n < 62:
            return None
        (src_mac, etype, vihl, tot, proto, ip_src, ip_dst, sport, dport, ulen, opcode, b1, _, w1, _) = \
            HEAD.unpack_from(frame)
        end = 34 + ulen
        need = 4 if opcode == Opcode.ACKNOWLEDGE else 12 if opcode == Opcode.ATOMIC_ACKNOWLEDGE else 0
        cfg = self.config
        if (not need or etype != 0x0800 or vihl != 0x45 or proto != 17 or dport != UdpPort.ROCEV2
                or end > 14 + tot or end - 58 - (b1 >> 4 & 3) < need or src_mac != cfg.collector_mac
                or ip_src != cfg.collector_ip or sport != cfg.udp_sport or ip_dst != cfg.ip
                or dport != cfg.collector_udp_port or frame[0:6] != cfg.mac):
            return None
        qp = self._by_local_qpn.get(w1 & 0xFFFFFF)
        if qp is None:
            return None
        masked = bytearray(frame[14:50])  # the ICRC's view: what routers may change, as ones
        masked[1] = masked[8] = masked[10] = masked[11] = masked[26] = masked[27] = masked[32] = 0xFF
        head = (qp, 14 + tot, end, crc32(masked, LRH_CRC))
        if len(self._resp_heads) >= RESPONSE_SHAPES:
            self._resp_heads.clear()  # bounded whatever arrives
        self._resp_heads[bytes(frame[0:50])] = head
        return head

    def _on_response(self, qp: TxQp, kind: int, value: int, psn: int) -> None:
        """Act on a believable response's AETH ``kind`` and ``value`` (:func:`decode_syndrome`) for ``psn``."""
        c = self.c
        age = (qp.high - psn) & PSN_MASK  # how far behind the next new PSN: 1 = the newest sent
        if kind == AethKind.NAK and value == NakCode.PSN_SEQUENCE_ERROR:
            if not 2 <= age <= self._nak_window(qp):
                c.naks_rejected_window += 1
                return
            qp.una = psn  # everything before psn was executed; psn is the first missing
            qp.una_at = qp.progress_at = self.now
            qp.probing = False
            self._rewind(qp, psn)
            qp.resyncs += 1
            c.resyncs += 1  # on_response reports it: the translator starts the grace period (§5.3)
            return
        # any other response only says the responder has everything up to psn: it may move una
        # forward (never the PSN), so the window for it is just what was sent and not yet covered
        if not 1 <= age <= (qp.high - qp.una) & PSN_MASK:
            if kind == AethKind.ACK:
                c.acks_rejected_window += 1
            else:
                c.naks_rejected_window += 1
            return
        if kind == AethKind.RNR_NAK:
            c.rnr_naks += 1
            return
        qp.una = una = (psn + 1) & PSN_MASK  # ACK / access / invalid NAK: executed or consumed up to psn
        qp.una_at = qp.progress_at = self.now
        qp.probing = False
        if self.config.window and W24.diff(una, qp.psn) > 0:  # una ahead (2**23 ahead is behind)
            qp.psn = una  # after a time-out went back: the collector has these, skip them
        if kind == AethKind.ACK:
            c.acks += 1
        elif value == NakCode.REMOTE_ACCESS_ERROR:
            c.naks_access += 1
        elif value == NakCode.INVALID_REQUEST:
            c.naks_invalid += 1
        else:
            c.naks_other += 1

    def _rewind(self, qp: TxQp, psn: int) -> None:
        """Send from ``psn`` (behind ``qp.psn``) again: the send history's entries newer than it
        now stand for ``psn``, as what is sent from now on starts there."""
        age = (qp.high - psn) & PSN_MASK
        qp.psn = psn
        for i, (t, p) in enumerate(qp.marks):
            if (qp.high - p) & PSN_MASK < age:
                qp.marks[i] = (t, psn)

    # ------------------------------------------------------------------ output window
    def room(self, qp: TxQp, n: int) -> bool:
        """Whether ``n`` more requests fit ``qp``'s window (module docstring, "Output window").
        A full window that saw no ACK progress for ``window_timeout_ns`` is re-opened first."""
        limit = self.probe_window if qp.probing else self.config.window
        if ((qp.psn - qp.una) & PSN_MASK) + n <= limit:
            return True
        if self.now - qp.progress_at >= self.window_timeout_ns() and qp.psn != qp.una:
            self._window_timeout(qp)
            return n <= self.probe_window
        return False

    def _window_timeout(self, qp: TxQp) -> None:
        """No ACK progress for ``window_timeout_ns`` on a full window: go back to ``una``, the
        oldest PSN not known to be executed, as an RC requester's transport timer retries from
        its oldest un-acknowledged PSN (IBTA vol. 1 ch. 9; DTA §5.3 has no requester timer), but
        resending nothing: the next requests carry new reports from ``una`` on. The collector's
        expected PSN e is in ``[una, psn]`` (it executed everything before ``una``, nothing past
        what we sent), so every later request is either a duplicate (PSN < e: never executed
        again; with AckReq its ACK moves ``una``, and with it our PSN, forward) or in sequence:
        no PSN gap, no NAK, no grace period, whatever was lost (a request and its NAK, which the
        collector sends once per gap, or an ACK) or if the collector is only slow. The cost: the
        reports sent as duplicates are lost. Until the collector answers, the QP keeps at most
        ``probe_window`` requests outstanding (and asks for an ACK on each): the old requests may
        still be queued at a collector that is only slow, and a whole new window on top of them
        could overflow its buffer; so a spurious time-out costs at most that many requests."""
        c = self.c
        c.window_timeouts += 1
        c.window_rewound += (qp.psn - qp.una) & PSN_MASK
        qp.window_timeouts += 1
        qp.progress_at = self.now
        qp.probing = True
        self._rewind(qp, qp.una)

    def window_full(self, qp: TxQp) -> bool:
        """Without side effects: whether ``qp`` has no room for one more request right now."""
        limit = self.probe_window if qp.probing else self.config.window
        return bool(limit) and (qp.psn - qp.una) & PSN_MASK >= limit

    def timeout_at(self, qp: TxQp) -> int:
        """When ``qp``'s full window times out unless an answer comes first (:meth:`room` re-opens it)."""
        return qp.progress_at + self.window_timeout_ns()

    def _nak_window(self, qp: TxQp) -> int:
        """How far behind ``qp.high`` a PSN-sequence NAK's PSN may be (its "age"): the PSNs sent
        and not known to be executed; unless responses moved ``una`` in the last
        ``nak_window_ns`` (then ``una`` is a live bound by itself), only those sent in the last
        ``nak_window_ns``, plus the slack."""
        high = qp.high
        limit = (high - qp.una) & PSN_MASK
        window_ns = self.config.nak_window_ns
        if window_ns is not None and (qp.una_at is None or qp.una_at < self.now - window_ns):
            horizon = self.now - window_ns
            anchor = qp.marks[0][1]
            for t, p in qp.marks:  # the newest entry at or before the horizon
                if t > horizon:
                    break
                anchor = p
            limit = min(limit, ((high - anchor) & PSN_MASK) + self.config.nak_window_slack)
        return min(limit, PSN_HALF - 1)

    def _age_out(self, qp: TxQp) -> None:
        """Keep the window's bounds (``una``, the send history) less than 2**23 behind ``high``:
        with ACKs off ``una`` would otherwise stay put while 2**24 PSNs go by, and its age,
        taken modulo 2**24, would shrink the window to nothing. Called every
        AGE_CHECK_MASK + 1 new PSNs, so ages stay below MAX_AGE + AGE_CHECK_MASK + 1."""
        floor = (qp.high - MAX_AGE) & PSN_MASK
        if (qp.high - qp.una) & PSN_MASK > MAX_AGE:
            qp.una = floor
        for i, (t, p) in enumerate(qp.marks):
            if (qp.high - p) & PSN_MASK > MAX_AGE:
                qp.marks[i] = (t, floor)

    def _mark(self, qp: TxQp, psn: int) -> None:
        """Add a send-history entry: ``psn`` is the first PSN sent at or after now. Entries older
        than the window are dropped but the newest of them, so the history stays bounded
        (at most MARKS_PER_WINDOW + 2 entries)."""
        assert self._mark_every is not None and self.config.nak_window_ns is not None
        now = self.now
        marks = qp.marks
        marks.append((now, psn))
        qp.mark_due = now + self._mark_every
        horizon = now - self.config.nak_window_ns
        while len(marks) > 2 and marks[1][0] <= horizon:
            marks.popleft()

    # ------------------------------------------------------------------ state
    def qp_status(self) -> dict[str, Any]:
        """Per QP what ``dta_status`` shows under ``qps``: PSN, frames, resyncs, outstanding, time-outs."""
        return {q.name: {"qpn": q.qpn, "psn": q.psn, "frames": q.frames, "resyncs": q.resyncs,
                         "outstanding": (q.psn - q.una) & PSN_MASK, "window_timeouts": q.window_timeouts}
                for q in self.qps.values()}


__all__ = ["DEFAULT_WINDOW", "DEFAULT_WINDOW_TIMEOUT_NS", "MARKS_PER_WINDOW", "PROBE_WINDOW", "PSN_HALF", "PSN_MASK",
           "RequesterConfig", "RoceRequester", "TxQp"]
