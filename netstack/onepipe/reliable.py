"""Reliable 1Pipe (1Pipe §5: two-phase commit barriers; design topics §7-§8 in docs/papers.md),
sans-IO: one process that sends and receives reliable scatterings.

docs/onepipe-reliable.md is the design; this module follows it. It reuses the best-effort
engine's sender (send buffer, credits, stamping rule, DCTCP windows, beacon ticks, the received
BE barrier as a floor for new timestamps: :class:`.endpoint.Endpoint`) and replaces what the
two phases change:

- **Prepare** (§7.1): a scattering leaves as PREPAREs, which switches forward untouched (no
  barrier aggregation: a resent PREPARE carries an old ts). The receiver takes the next PSN of a
  connection only (go-back-N), ACKs cumulatively and NAKs a gap once; the sender keeps every
  packet until it is ACKed and resends from the oldest after ``rto_ns`` without progress or on a
  NAK. After ``relay_after`` resends without progress, resends go through the controller in
  RELAY (§8 "controller forwarding").
- **Commit** (§7.2): the commit barrier ``min(L - 1, oldest unsettled ts - 1)``, ``L`` the floor
  of every later ts, never decreasing (§12 item 6), goes to the ToR in every host beacon and,
  when it rises, at once in a COMMIT (at most one per ``T_beacon / 4``, ours). The switches
  aggregate it as they aggregate the BE barrier.
- **Delivery** (§7.3): the receiver's commit barrier is the ``commit_barrier`` of the latest
  barrier packet from the ToR; complete messages with ``ts <= commit barrier`` and ``ts < now``
  (causality) are delivered in ``(ts, sender key)`` order.
- **Failures** (§8): the controller's FAILURE_NOTICE ``(P, T_f)``: discard P's buffered messages
  above T_f and close P's connections; drop what still waits for P's ACK and recall the rest of
  its scatterings (RECALL, answered by RECALL_ACK; such a message stops blocking the commit once
  every RECALL_ACK is in); ``SendFail`` for them; then ``ProcFail(P, T_f)`` and CALLBACK_DONE.
- **Registration and recovery**: the endpoint registers with the controller and sends and takes
  nothing before it is registered. Told it was itself declared failed (maybe falsely: stopped
  past the failure timeout), it is fail-stop (the paper's §5): it stops sending and delivering,
  fetches the notices and the undeliverable recalls it missed, applies them, fails everything it
  sent above its own T_f, keeps the messages it ACKed (they are delivered when the commit barrier
  passes them, as at the other receivers) and re-joins as a new incarnation with fresh
  connections, stamping one input timeout ahead of its clock (its commit input re-joins the
  switches under the freeze, design topic §4). (Before it learns, its ToR holds the commit barrier
  it gives it: barrier.py.) A PREPARE below the commit barrier already delivered is not ACKed:
  its sender is reported to the controller.
- **Recalls** name a message by first PSN and ts: a connection opened after a recovery restarts
  at the same PSN base as the retired one, whose messages may still wait for the commit barrier.

Every input is in host time; outputs are :mod:`netstack.engine` actions: ``SendTo``,
``Deliver``, ``SendFail``, ``ProcFail``. Bad input never raises: it is counted.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, cast

from headers.errors import HeaderError
from headers.onepipe import (
    BARRIER_OPCODES,
    OnePipeFlag,
    OnePipeHeader,
    OnePipeOpcode,
    decode_packet,
    ts_from_ns,
    ts_unwrap,
)

from ..engine import Deliver, ProcFail, SendFail, SendTo
from . import ctlwire
from .ctlwire import Recall
from .endpoint import SOM, UPLINK, Addr, Endpoint, EndpointCounters, _Scattering, _TxConn, psn_unwrap, sender_key
from .params import OnePipeParams

_PSN_MASK = (1 << 32) - 1
_EOM = int(OnePipeFlag.EOM)
_ECE = int(OnePipeFlag.ECE)
_OP = OnePipeOpcode
#: at most one prompt COMMIT per T_beacon / this (ours, as the switches' prompt beacons)
COMMIT_DIVISOR = 4

#: a connection's PSNs start at ``(incarnation & 0xFF) << 24`` (ours): a receiver whose peer
#: failed takes a new connection from it only at the base of another incarnation, so a stray
#: packet of the failed one (a resend still on the wire) never passes for the new one's
PSN_BASE_SHIFT = 24
_LOW = (1 << PSN_BASE_SHIFT) - 1

# message states (sender side)
_PENDING, _ACKED, _RECALLING, _SETTLED = range(4)


@dataclass(slots=True, eq=False)
class ReliableCounters(EndpointCounters):
    """The best-effort counters, plus reliable mode's."""

    retransmits: int = 0  # PREPAREs sent again (go-back-N)
    relayed_out: int = 0  # ... of them, and recalls, sent through the controller
    relayed_in: int = 0  # packets that came relayed by the controller
    commits_sent: int = 0  # prompt COMMITs to the ToR
    commit_updates: int = 0  # the received commit barrier moved up
    commit_backwards: int = 0  # a commit barrier below the current one: ignored
    out_of_order: int = 0  # PREPAREs beyond the next PSN: dropped (go-back-N), NAKed once
    recalls_sent: int = 0  # RECALLs (resends included)
    recall_acks_received: int = 0
    recalls_received: int = 0
    duplicate_recalls: int = 0  # a RECALL for a message already recalled here
    recall_too_late: int = 0  # a RECALL for a message already delivered (a protocol violation)
    messages_recalled: int = 0  # messages we dropped because their sender recalled them
    messages_discarded: int = 0  # messages from a failed process above its T_f, dropped
    from_failed: int = 0  # packets from a process whose failure we handled: dropped
    notices: int = 0  # FAILURE_NOTICEs handled (first time each)
    duplicate_notices: int = 0
    stale_notices: int = 0  # a notice contradicting one already handled (another T_f): ignored
    proc_fails: int = 0  # ProcFail callbacks
    registrations: int = 0  # times this endpoint was registered (1 + recoveries)
    announcements: int = 0  # another process (re)joined
    recoveries: int = 0  # times it was declared failed and recovered
    not_registered_sends: int = 0  # messages to a process known failed: SendFail at once


@dataclass(slots=True, eq=False)
class _RMsg:
    ts: int
    dst: Addr
    data: bytes
    npkts: int
    seq: int  # the scattering's number
    psn: int = 0  # first PSN on its connection
    acked: int = 0
    state: int = _PENDING
    sc: _RScat | None = None
    recalls: int = 0  # RECALL_ACKs still awaited
    failed: bool = False  # SendFail fired


@dataclass(slots=True, eq=False)
class _RScat:
    seq: int
    ts: int
    msgs: list[_RMsg] = field(default_factory=list)
    recalled: bool = False


class _RTxConn(_TxConn):
    """A sender connection: the best-effort one's window state, plus the datagrams kept for
    resending and the go-back-N timer."""

    __slots__ = ("frames", "progress_at", "resends", "resent_at")

    def __init__(self, dst: Addr, cwnd: int, now: int) -> None:
        super().__init__(dst, cwnd)
        self.frames: deque[bytes] = deque()  # the datagram of PSN una, una+1, ...
        self.progress_at = now  # last ACK progress (or the first send after idle)
        self.resends = 0  # resends since the last progress
        self.resent_at = -(1 << 62)


@dataclass(slots=True, eq=False)
class _RxMsg:
    ts: int
    src: Addr
    psn: int
    npkts: int
    data: bytes
    conn: _RRxConn
    dropped: bool = False


class _RRxConn:
    __slots__ = ("buffered", "cid", "closed", "cum", "gone", "key", "msgs", "nak_at", "part", "part_ts", "recalled",
                 "src", "via_ctl")

    def __init__(self, src: Addr, key: int, cid: int) -> None:
        self.src = src
        self.key = key
        self.cid = cid
        self.cum = 0  # the next PSN expected
        self.part: list[bytes] = []  # fragments of the message being received
        self.part_ts = 0
        self.buffered = 0  # packets held here (complete messages not delivered, and ``part``)
        self.msgs: dict[int, _RxMsg] = {}  # complete, undelivered, by first PSN
        #: first PSN -> wire ts (0: any) of messages recalled before they completed here
        self.recalled: dict[int, int] = {}
        #: first PSN -> wire ts of messages dropped by a recall (duplicates tell)
        self.gone: dict[int, int] = {}
        self.closed = False  # its process failed: nothing more is taken from it
        self.nak_at = -1  # the cum last NAKed (one NAK per gap)
        self.via_ctl = False  # its last packet came relayed: answer through the controller


@dataclass(slots=True, eq=False)
class _Recall:
    msg: _RMsg
    frame: bytes
    sent_at: int
    resends: int = 0


@dataclass(slots=True, eq=False)
class _Failure:
    proc: Addr
    t_f: int | None  # absolute; None: no commit known, everything undelivered is discarded
    fid: int
    recalls: set[tuple[Addr, int, int]]  # (dst, first psn, wire ts) of recalls this failure started
    done: bool = False


class ReliableEndpoint(Endpoint):
    """One reliable 1Pipe process (module docstring). ``controller``: the controller's address;
    ``nonce``: this process's start (a restart must use another one)."""

    c: ReliableCounters

    def __init__(self, params: OnePipeParams, me: Addr, now_ns: int, *, controller: Addr, nonce: int = 0,
                 key: Callable[[Addr], int] = sender_key) -> None:
        super().__init__(params, me, now_ns, key=key)
        self.c = ReliableCounters()
        self.controller = controller
        self.nonce = nonce & _PSN_MASK
        self.incarnation: int | None = None  # None: not registered (or recovering)
        self._last_inc = 0  # the last incarnation we registered as (a reply for it or an older one is stale)
        self.revision = 0  # the controller's failure revision this process has seen
        self._reg_at = now_ns  # next REGISTER (re)send
        self._recovering: dict[str, Any] | None = None
        self._commit: int = now_ns - 1
        self._commit_sent: int | None = None  # the value the ToR last got from us
        self._commit_prompt_at = -(1 << 62)
        self._commit_due: int | None = None
        self._blocked = False  # the commit is held below the clock by an unsettled message
        self._settled_up = False  # it rose since the last COMMIT because messages settled
        self._cbarrier: int | None = None  # the commit barrier received
        self._unsettled: deque[_RMsg] = deque()  # sent messages in stamp order, until settled
        self._acked: deque[_RMsg] = deque()  # ACKed ones whose ts the commit barrier has not passed
        self._scat_by_seq: dict[int, _RScat] = {}
        #: (dst, first PSN, wire ts): a connection re-opened after its receiver recovered restarts
        #: at the same PSN base, so a PSN alone may name a message of the old connection or the new
        self._recalls: dict[tuple[Addr, int, int], _Recall] = {}
        self._failures: dict[int, _Failure] = {}
        self._failed_procs: dict[Addr, int] = {}  # process -> fid of its failure (until it re-joins)
        self._rrx: dict[Addr, _RRxConn] = {}
        #: retired connections (their process failed or re-joined, or we recovered) whose complete
        #: messages still wait for the commit barrier
        self._old: dict[Addr, list[_RRxConn]] = {}
        self._joined_rev = 0  # the failure revision when we (last) registered
        self._cid = 0  # connection tie-break numbers
        #: the PSN base of each process's failed incarnation: its strays start no connection
        self._stray_base: dict[Addr, int] = {}
        #: recalls for a connection from that process not open yet: first PSN -> wire ts
        self._early_recalls: dict[Addr, dict[int, int]] = {}
        self._late_reported: dict[Addr, int] = {}  # senders reported for a late PREPARE: when
        self._rheap: list[tuple[int, int, int, int, _RxMsg]] = []
        self._rack_due: dict[_RRxConn, None] = {}
        self._rnak_due: dict[_RRxConn, None] = {}
        self._rto_next: int | None = None
        self._send_register()

    # ------------------------------------------------------------------ public surface
    @property
    def commit(self) -> int:
        """This process's commit barrier: every message it sent with ts at or below it is ACKed."""
        return self._commit

    @property
    def commit_barrier(self) -> int | None:
        """The commit barrier received from the ToR (absolute host ns)."""
        return self._cbarrier

    @property
    def registered(self) -> bool:
        return self.incarnation is not None

    def send(self, scattering: Sequence[tuple[Addr, bytes]], now_ns: int) -> int | None:
        """Queue a reliable scattering; as :meth:`Endpoint.send`. A message to a process whose
        failure this endpoint handled (and which has not re-joined) fails at once (``SendFail``
        with ts 0): it is not a correct receiver any more."""
        self._clock(now_ns)
        dead = [(d, m) for d, m in scattering if d in self._failed_procs]
        if dead:
            for d, m in dead:
                self.c.not_registered_sends += 1
                self.c.send_failed += 1
                self.actions.emit(SendFail(0, d, bytes(m)))
            scattering = [(d, m) for d, m in scattering if d not in self._failed_procs]
            if not scattering:
                return None
        return super().send(scattering, now_ns)

    def receive(self, datagram: bytes, src: Addr, now_ns: int, ce: bool = False) -> None:
        self._clock(now_ns)
        try:
            hdr, payload = decode_packet(datagram)
        except HeaderError:
            self.c.malformed += 1
            return
        relayed = False
        if hdr.opcode is _OP.RELAY and src == self.controller:
            try:
                src, hdr, payload = ctlwire.parse_relay(payload)
            except HeaderError:
                self.c.malformed += 1
                return
            relayed = True
            self.c.relayed_in += 1
        self._dispatch(hdr, payload, src, ce, relayed)
        if not relayed and hdr.opcode in BARRIER_OPCODES and not self._same_host(src):
            had = self._barrier is not None
            self._take_barrier(hdr.be_barrier)
            self._take_commit(hdr.commit_barrier)
            if not had and self._queue:
                self._pump()
        self._after()

    def on_timer(self, now_ns: int) -> None:
        self._clock(now_ns)
        now = self._now
        if now >= self._next_tick:
            t = self.params.t_beacon_ns
            self._send_beacon()  # always: the commit barrier rides on it (packets to processes do not set it)
            self._next_tick = (now // t + 1) * t
        if self.incarnation is None and now >= self._reg_at and (self._recovering is None or self._barrier is not None):
            self._send_register(recover=self._recovering is not None)
        self._check_rto()
        self._check_recalls()
        self._pump()
        self._after()

    def next_deadline(self) -> int | None:
        due = self._next_tick
        reg = None if self.registered or (self._recovering is not None and self._barrier is None) else self._reg_at
        for t in (self._wake_at, self._rto_next, self._commit_due, reg):
            if t is not None and t < due:
                due = t
        return due

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self.c)
        out.update(
            barrier=self._barrier, commit=self._commit, commit_barrier=self._cbarrier,
            advertised_barrier=self._adv, queued=len(self._queue),
            inflight_packets=sum(len(t.inflight) for t in self._tx.values()),
            buffered_packets=sum(r.buffered for r in self._rrx.values()),
            unsettled=len(self._unsettled), recalls_pending=len(self._recalls),
            failures_pending=sum(1 for f in self._failures.values() if not f.done),
            tx_connections=len(self._tx), rx_connections=len(self._rrx),
            incarnation=self.incarnation, revision=self.revision,
        )
        return out

    # ------------------------------------------------------------------ dispatch
    def _dispatch(self, hdr: OnePipeHeader, payload: memoryview, src: Addr, ce: bool, relayed: bool) -> None:
        op = hdr.opcode
        if op is _OP.PREPARE:
            self._on_prepare(hdr, payload, src, ce, relayed)
        elif op is _OP.ACK or op is _OP.NAK:
            self._on_answer(hdr, src, op is _OP.NAK)
        elif op is _OP.BEACON or op is _OP.COMMIT:
            self.c.beacons_received += 1
        elif op is _OP.RECALL or op is _OP.RECALL_ACK:
            try:
                r = ctlwire.parse_recall(hdr, payload)
            except HeaderError:
                self.c.malformed += 1
                return
            if op is _OP.RECALL:
                self._on_recall(r, src, relayed)
            else:
                self._on_recall_ack(r, src)
        elif src == self.controller and not relayed:
            self._on_controller(hdr, payload)
        else:
            self.c.foreign += 1

    def _after(self) -> None:
        self._update_commit()
        self._deliver()
        self._send_answers()

    # ------------------------------------------------------------------ barriers
    def _take_commit(self, wire: int) -> None:
        if wire == 0:
            return  # "no commit barrier" (docs/onepipe-reliable.md "Wire")
        b = ts_unwrap(wire, self._now)
        if b - self._now > self.params.max_ahead_ns:
            self.c.barrier_ahead += 1
            return
        if self._cbarrier is None or b > self._cbarrier:
            self._cbarrier = b
            self.c.commit_updates += 1
        elif b < self._cbarrier:
            self.c.commit_backwards += 1

    def _floor(self) -> int:
        """The lowest ts a scattering stamped from now on can get (the stamping rule)."""
        b = self._now
        for v in (self._last_ts, self._adv, self._barrier):
            if v is not None and v > b:
                b = v
        return b

    def _update_commit(self) -> None:
        """Design topic §7.2: every message with ts at or below the commit is settled, and every
        later ts is above it. Sends a prompt COMMIT when it rose because messages settled (ours:
        an idle process's commit rises with its clock, and its beacons carry that)."""
        q = self._unsettled
        while q and q[0].state == _SETTLED:
            q.popleft()
        free = c = self._floor() - 1
        if q and q[0].ts - 1 < c:
            c = q[0].ts - 1
        for rec in self._recalls.values():  # a recalled message blocks until its RECALL_ACK (§8 step 5)
            if rec.msg.ts - 1 < c:
                c = rec.msg.ts - 1
        was_blocked, self._blocked = self._blocked, c < free
        if c > self._commit:
            self._commit = c
            if was_blocked:
                self._settled_up = True
        # messages whose ts the commit barrier passed are delivered everywhere: forget them
        cb = self._cbarrier
        while self._acked and cb is not None and self._acked[0].ts <= cb:
            self._acked.popleft()
        if (self.incarnation is None or not self._settled_up
                or (self._commit_sent is not None and self._commit <= self._commit_sent)):
            self._commit_due = None
            return
        at = self._commit_prompt_at + max(1, self.params.t_beacon_ns // COMMIT_DIVISOR)
        if self._now >= at:
            self._send_commit()
        else:
            self._commit_due = at

    def _wire_commit(self) -> int:
        return ts_from_ns(self._commit)

    def _send_commit(self) -> None:
        w = self._wire_commit()
        if w == 0:
            return
        self.actions.emit(SendTo(UPLINK, OnePipeHeader(0, 0, w, 0, _OP.COMMIT).to_bytes()))
        self.c.commits_sent += 1
        self._commit_sent = self._commit
        self._settled_up = False
        self._commit_prompt_at = self._now
        self._commit_due = None

    def _send_beacon(self) -> None:
        b = ts_from_ns(self._advertise())
        w = self._wire_commit() if self.incarnation is not None else 0
        self.actions.emit(SendTo(UPLINK, OnePipeHeader(b, b, w, 0, _OP.BEACON).to_bytes()))
        self.c.beacons_sent += 1
        if w:
            self._commit_sent = self._commit

    def _hdr(self, op: OnePipeOpcode, dst: Addr, ts: int, psn: int, flags: int = 0) -> bytes:
        """A header for a packet to ``dst`` carrying our barriers (both never decrease)."""
        b = ts_from_ns(self._advertise(dst))
        w = self._wire_commit() if self.incarnation is not None else 0
        return OnePipeHeader(ts, b, w, psn & _PSN_MASK, op, flags).to_bytes()

    # ------------------------------------------------------------------ sender
    def _tx_conn(self, dst: Addr) -> _TxConn:
        tx = self._tx.get(dst)
        if tx is None:
            tx = self._tx[dst] = _RTxConn(dst, min(self.params.init_cwnd, self.params.rwnd_packets), self._now)
            tx.una = tx.win_end = tx.cwr_end = ((self.incarnation or 0) & 0xFF) << PSN_BASE_SHIFT
            tx.cwr_end -= 1
        return tx

    def _pump(self) -> None:
        if self.incarnation is None:
            if self._queue and not self._queue[0].waited:
                self._queue[0].waited = True
                self.c.join_waits += 1
            return
        super()._pump()

    def _stamp(self, sc: _Scattering) -> None:
        """Design topic §7.1: one ts for the scattering; its PREPAREs are kept until ACKed."""
        now = self._now
        ts = self._advertise(self.me)
        self._last_ts = ts
        wire = ts_from_ns(ts)
        mtu = self.params.mtu_payload
        rsc = _RScat(sc.seq, ts)
        self._scat_by_seq[sc.seq] = rsc
        for dst, data, n in sc.msgs:
            tx = self._tx_conn(dst)
            assert isinstance(tx, _RTxConn)
            if not tx.inflight:
                tx.progress_at = now
                self._arm_rto(now + self.params.rto_ns)
            msg = _RMsg(ts, dst, data, n, sc.seq, tx.next_psn, sc=rsc)
            rsc.msgs.append(msg)
            for i in range(n):
                flags = (SOM if i == 0 else 0) | (_EOM if i == n - 1 else 0)
                frame = self._hdr(_OP.PREPARE, dst, wire, tx.next_psn, flags) + data[i * mtu:(i + 1) * mtu]
                tx.inflight.append((msg, now))  # type: ignore[arg-type]  # (_RMsg in the reliable engine)
                tx.frames.append(frame)
                self._out(dst, frame, tx)
                self.c.packets_sent += 1
                self.c.bytes_sent += len(frame)
            self._unsettled.append(msg)
            self.c.messages_sent += 1
        self.c.scatterings_sent += 1
        sc.held.clear()

    def _out(self, dst: Addr, frame: bytes, tx: _RTxConn | None) -> None:
        """Send to ``dst``, through the controller once the connection gave up on the direct path."""
        if tx is not None and tx.resends >= self.params.relay_after:
            self.actions.emit(SendTo(self.controller, ctlwire.relay(dst, frame)))
            self.c.relayed_out += 1
        else:
            self.actions.emit(SendTo(dst, frame))

    def _arm_rto(self, at: int) -> None:
        if self._rto_next is None or at < self._rto_next:
            self._rto_next = at

    def _on_answer(self, hdr: OnePipeHeader, src: Addr, nak: bool) -> None:
        """An ACK (cumulative: everything below ``psn`` arrived) or a NAK (the same, and a gap at
        ``psn``: resend from it, at most four times per ``rto_ns``)."""
        tx = self._tx.get(src)
        if not isinstance(tx, _RTxConn):
            self.c.foreign += 1
            return
        if nak:
            self.c.naks_received += 1
        else:
            self.c.acks_received += 1
        cum = psn_unwrap(hdr.psn, tx.una)
        if cum > tx.next_psn or cum < tx.una:
            self.c.bogus_acks += 1
            return
        if cum > tx.una:
            self._ack_to(tx, cum, bool(hdr.flags & _ECE))
        elif not nak:
            self.c.stale_acks += 1
        if nak and tx.inflight and self._now - tx.resent_at >= self.params.rto_ns // 4:
            self._loss(tx)
            self._resend(tx)

    def _ack_to(self, tx: _RTxConn, cum: int, ece: bool) -> None:
        n = cum - tx.una
        for _ in range(n):
            m, _sent = tx.inflight.popleft()
            tx.frames.popleft()
            msg: _RMsg = m  # type: ignore[assignment]
            msg.acked += 1
            if msg.acked == msg.npkts and msg.state == _PENDING:
                msg.state = _ACKED
                self.c.messages_acked += 1
                self._settle(msg)
        tx.una = cum
        tx.progress_at = self._now
        tx.resends = 0
        if tx.inflight:
            self._arm_rto(self._now + self.params.rto_ns)
        self._dctcp(tx, n, ece)
        self._pump()

    def _settle(self, msg: _RMsg) -> None:
        if msg.state == _ACKED:
            self._acked.append(msg)
        msg.state = _SETTLED

    def _resend(self, tx: _RTxConn) -> None:
        tx.resent_at = self._now
        for frame in tx.frames:
            self._out(tx.dst, frame, tx)
            self.c.retransmits += 1

    def _check_rto(self) -> None:
        if self._rto_next is None or self._now < self._rto_next:
            return
        rto = self.params.rto_ns
        nxt: int | None = None
        for tx in self._tx.values():
            if not tx.inflight or not isinstance(tx, _RTxConn):
                continue
            due = max(tx.progress_at, tx.resent_at) + rto
            if due <= self._now:
                tx.resends += 1
                self._loss(tx)
                self._resend(tx)
                due = self._now + rto
            nxt = due if nxt is None else min(nxt, due)
        self._rto_next = nxt

    # ------------------------------------------------------------------ receiver
    def _rconn(self, src: Addr, psn_wire: int) -> _RRxConn | None:
        """The open connection from ``src``; a new one only when ``psn_wire`` starts one (the base
        of an incarnation other than a failed one's). None: the packet is stray."""
        conn = self._rrx.get(src)
        if conn is not None and not conn.closed:
            return conn
        if psn_wire & _LOW or psn_wire == self._stray_base.get(src):
            return None
        if len(self._rrx) >= 1 << 16:
            return None
        try:
            key = self.key(src)
        except (TypeError, ValueError):
            return None
        if conn is not None:
            self._retire(conn)
        self._failed_procs.pop(src, None)  # it is back, as a new incarnation
        new = self._rrx[src] = _RRxConn(src, key, self._cid)
        self._cid += 1
        new.cum = psn_wire
        early = self._early_recalls.pop(src, None)
        if early:
            base = psn_wire >> PSN_BASE_SHIFT
            new.recalled.update((psn_unwrap(psn, new.cum), ts) for psn, ts in early.items()
                                if psn >> PSN_BASE_SHIFT == base)
        return new

    def _on_prepare(self, hdr: OnePipeHeader, payload: memoryview, src: Addr, ce: bool, relayed: bool) -> None:
        if self.incarnation is None:
            # not (yet, or any more) registered: we are out of the system until we (re-)join. A
            # restarted process first hears what was sent to the incarnation before it, which
            # failed: its senders recall that through the controller, and never to us
            self.c.from_failed += 1
            return
        conn = self._rconn(src, hdr.psn)
        if conn is None:
            self.c.from_failed += 1
            return
        conn.via_ctl = relayed
        self.c.packets_received += 1
        if ce:
            self.c.ce_received += 1
        psn = psn_unwrap(hdr.psn, conn.cum)
        if psn < conn.cum:
            self.c.duplicates += 1
            self._rack_due[conn] = None  # our ACK was lost: say it again
            return
        if psn > conn.cum:
            self.c.out_of_order += 1
            if conn.nak_at != conn.cum:
                conn.nak_at = conn.cum
                self._rnak_due[conn] = None
            return
        if conn.buffered >= self.params.rwnd_packets:
            self.c.rx_buffer_full += 1  # not ACKed: the sender resends it later
            return
        ts = ts_unwrap(hdr.msg_ts, self._now)
        if self._cbarrier is not None and ts <= self._delivered_commit() and (hdr.flags & SOM or conn.part) \
                and (psn if hdr.flags & SOM else psn - len(conn.part)) not in conn.recalled:
            self._late(src)
            return
        if hdr.flags & SOM:
            conn.part = []
            conn.part_ts = ts
        elif not conn.part or ts != conn.part_ts:
            self.c.inconsistent += 1  # a fragment that does not continue a message: its sender is broken
            conn.buffered -= len(conn.part)
            conn.part = []
            conn.cum = psn + 1
            self._rack_due[conn] = None
            return
        conn.part.append(bytes(payload))
        conn.buffered += 1
        conn.cum = psn + 1
        self._rack_due[conn] = None
        if hdr.flags & _EOM:
            n = len(conn.part)
            first = psn + 1 - n
            data = b"".join(conn.part)
            conn.part = []
            if first in conn.recalled:
                want = conn.recalled.pop(first)
                if want == 0 or want == hdr.msg_ts:
                    conn.gone[first] = hdr.msg_ts
                    conn.buffered -= n
                    self.c.messages_recalled += 1
                    return
            m = _RxMsg(ts, src, first, n, data, conn)
            conn.msgs[first] = m
            self._tie += 1
            heapq.heappush(self._rheap, (ts, conn.key, conn.cid, self._tie, m))

    def _late(self, src: Addr) -> None:
        """A PREPARE at or below the commit barrier we delivered (``late_dropped``). Its sender's
        commit was not in that barrier: it re-joined (design topic §4) and its commit input is
        joining under the freeze at a switch that gave out a barrier above the clock it stamps by
        (a ToR whose only process it is: its uplink fell silent and was released at the spine).
        ACKed, the message would be delivered by its other receivers and not here; so it is not
        ACKed, and its sender is reported to the controller (ours; at most once per ``rto_ns``):
        declared failed, with a T_f below the message (its commit never passed it), it is
        discarded everywhere, and the sender recovers as a new incarnation."""
        self.c.late_dropped += 1
        at = self._late_reported.get(src)
        if at is None or self._now - at >= self.params.rto_ns:
            self._late_reported[src] = self._now
            self.actions.emit(SendTo(self.controller, ctlwire.failure_report(cast("tuple[str, int]", src), 0)))

    def _delivered_commit(self) -> int:
        d = self._delivered
        return d if d is not None else -(1 << 62)

    def _deliver(self) -> None:
        """Design topic §7.3: complete messages at or below the commit barrier and below our
        clock, in (ts, sender) order."""
        cb = self._cbarrier
        if cb is None or self._recovering is not None:
            # declared failed (§8; the paper's §5: fail-stop): nothing is delivered until the
            # recovery batch is applied, or a message recalled because of our failure, which the
            # batch drops, would be delivered here and nowhere else
            return
        limit = min(cb, self._now - 1)
        heap = self._rheap
        while heap:
            ts, key, _cid, _tie, m = heap[0]
            if m.dropped:
                heapq.heappop(heap)
                continue
            if ts > limit:
                break
            heapq.heappop(heap)
            m.conn.msgs.pop(m.psn, None)
            m.conn.buffered -= m.npkts
            order = (ts, key)
            if self._last_order is not None and order < self._last_order:
                self.c.inconsistent += 1
                continue
            self._last_order = order
            self.c.messages_delivered += 1
            self.c.bytes_delivered += len(m.data)
            self.actions.emit(Deliver(ts, m.src, m.data))
        if self._delivered is None or limit > self._delivered:
            self._delivered = limit
        self._wake_at = heap[0][0] + 1 if heap and heap[0][0] <= cb and heap[0][0] >= self._now else None

    def _send_answers(self) -> None:
        for conn in self._rnak_due:
            self._answer(conn, self._hdr(_OP.NAK, conn.src, 0, conn.cum))
            self.c.naks_sent += 1
        self._rnak_due.clear()
        for conn in self._rack_due:
            self._answer(conn, self._hdr(_OP.ACK, conn.src, 0, conn.cum))
            self.c.acks_sent += 1
        self._rack_due.clear()

    def _answer(self, conn: _RRxConn, frame: bytes) -> None:
        if conn.via_ctl:
            self.actions.emit(SendTo(self.controller, ctlwire.relay(conn.src, frame)))
            self.c.relayed_out += 1
        else:
            self.actions.emit(SendTo(conn.src, frame))

    # ------------------------------------------------------------------ recall (§8 step 5)
    def _on_recall(self, r: Recall, src: Addr, relayed: bool) -> None:
        """A co-receiver's side: drop the message (or remember to drop it) and answer."""
        if self._recovering is not None:
            if relayed:
                self._recovery_recall(src, r)  # part of the recovery batch
            return
        self.c.recalls_received += 1
        ack = ctlwire.recall(_OP.RECALL_ACK, r, ts_from_ns(self._advertise(src)),
                             self._wire_commit() if self.incarnation is not None else 0)
        found = self._drop_recalled(src, r.psn, r.ts)
        conn = None if found else self._rconn(src, r.psn)
        if found:
            pass  # dropped here (or earlier: a duplicate)
        elif conn is None:
            stray = self._stray_base.get(src)
            if r.psn >> PSN_BASE_SHIFT != (-1 if stray is None else stray >> PSN_BASE_SHIFT):
                # a connection not open yet (its first packets lost or late): the message may still
                # come on it. Taken when it opens (ours); a failed incarnation's never opens
                early = self._early_recalls.setdefault(src, {})
                if len(early) < self.params.rwnd_packets:
                    early[r.psn] = r.ts
            else:
                self.c.duplicate_recalls += 1  # nothing of it here, and nothing of it can come
        else:
            psn = psn_unwrap(r.psn, conn.cum)
            if psn >= conn.cum or (conn.part and psn == conn.cum - len(conn.part)):
                if conn.recalled.get(psn) == r.ts:
                    self.c.duplicate_recalls += 1
                else:
                    conn.recalled[psn] = r.ts
            else:
                self.c.recall_too_late += 1  # delivered already: only a broken sender recalls so late
        if relayed or src == self.controller:
            self.actions.emit(SendTo(self.controller, ctlwire.relay(src, ack)))
        else:
            self.actions.emit(SendTo(src, ack))

    def _drop_recalled(self, src: Addr, psn_wire: int, ts_wire: int) -> bool:
        """Drop the complete message from ``src`` a RECALL names, on the connection from it or on
        one retired by a failure (its own or ours): the message at that first PSN with that ts
        (0: any). A connection opened after a recovery restarts at the same PSN base, so the PSN
        alone may name a message of either. True when found, or found dropped already."""
        cur = self._rrx.get(src)
        for conn in ([cur] if cur is not None else []) + self._old.get(src, []):
            psn = psn_unwrap(psn_wire, conn.cum)
            m = conn.msgs.get(psn)
            if m is not None and (ts_wire == 0 or ts_from_ns(m.ts) == ts_wire):
                m.dropped = True
                del conn.msgs[psn]
                conn.buffered -= m.npkts
                conn.gone[psn] = ts_from_ns(m.ts)
                self.c.messages_recalled += 1
                return True
            if psn in conn.gone and (ts_wire == 0 or conn.gone[psn] == ts_wire):
                self.c.duplicate_recalls += 1
                return True
        return False

    def _start_recall(self, msg: _RMsg, fid: int, via_ctl: bool = False) -> None:
        """Recall ``msg`` at its receiver; through the controller when the receiver failed (it
        records the recall for the receiver's recovery and answers for it, §8 "controller
        forwarding"). The message blocks our commit until the RECALL_ACK."""
        key = (msg.dst, msg.psn & _PSN_MASK, ts_from_ns(msg.ts))
        if key in self._recalls:
            self._failures[fid].recalls.add(key)
            return
        r = Recall(ts_from_ns(msg.ts), msg.psn & _PSN_MASK, msg.npkts, msg.seq)
        frame = ctlwire.recall(_OP.RECALL, r, ts_from_ns(self._advertise(msg.dst)), self._wire_commit())
        rec = self._recalls[key] = _Recall(msg, frame, self._now)
        self._failures[fid].recalls.add(key)
        msg.recalls = 1
        msg.state = _RECALLING
        self.c.recalls_sent += 1
        if via_ctl:
            rec.resends = self.params.relay_after
            self.actions.emit(SendTo(self.controller, ctlwire.relay(msg.dst, frame)))
            self.c.relayed_out += 1
        else:
            self.actions.emit(SendTo(msg.dst, frame))
        self._arm_rto(self._now + self.params.rto_ns)

    def _on_recall_ack(self, r: Recall, src: Addr) -> None:
        self.c.recall_acks_received += 1
        key = (src, r.psn, r.ts)
        rec = self._recalls.pop(key, None)
        if rec is None:
            self.c.stale_acks += 1
            return
        rec.msg.recalls = 0
        rec.msg.state = _SETTLED
        for f in self._failures.values():
            if key in f.recalls:
                f.recalls.discard(key)
                self._maybe_done(f)

    def _check_recalls(self) -> None:
        rto = self.params.rto_ns
        for (dst, _psn, _ts), rec in self._recalls.items():
            if self._now - rec.sent_at >= rto:
                rec.sent_at = self._now
                rec.resends += 1
                self.c.recalls_sent += 1
                if rec.resends >= self.params.relay_after:
                    self.actions.emit(SendTo(self.controller, ctlwire.relay(dst, rec.frame)))
                    self.c.relayed_out += 1
                else:
                    self.actions.emit(SendTo(dst, rec.frame))
        if self._recalls:
            self._arm_rto(min(r.sent_at for r in self._recalls.values()) + rto)

    # ------------------------------------------------------------------ controller
    def _send_register(self, recover: bool = False) -> None:
        self.actions.emit(SendTo(self.controller, ctlwire.register_request(self.nonce, self.revision, recover)))
        self._reg_at = self._now + self.params.rto_ns

    def _on_controller(self, hdr: OnePipeHeader, payload: memoryview) -> None:
        op = hdr.opcode
        try:
            if op is _OP.REGISTER:
                self._on_register(ctlwire.parse_register_reply(hdr, payload))
            elif op is _OP.FAILURE_NOTICE:
                self._on_notice(ctlwire.parse_failure_notice(hdr, payload))
            else:
                self.c.foreign += 1
        except HeaderError:
            self.c.malformed += 1

    def _on_register(self, reply: ctlwire.RegisterReply) -> None:
        if reply.addr != self.me:
            self.c.announcements += 1
            self._reopen(reply.addr)
            return
        if self.incarnation is not None or reply.nonce != self.nonce or reply.incarnation <= self._last_inc:
            return  # a repeat (or, recovering, the reply that admitted the incarnation that failed)
        rec = self._recovering
        if rec is not None and (len(rec["notices"]) < reply.notices or len(rec["recalls"]) < reply.recalls):
            self._send_register(recover=True)  # part of the batch was lost: ask again
            return
        if rec is not None:
            self._settle_recovery(rec)
            # join again (design topic §4): nothing is stamped before a barrier from the ToR says
            # our input is back in its minima; stamped blind, a message held up on the way (the
            # cut that made us fail) could reach receivers whose commit barrier passed it
            self._barrier = None
        if rec is not None or reply.incarnation > 1:
            # ... and nothing below the commit barriers given out while we were out (ours). Our
            # commit input re-joins every switch under the freeze (§4), whose outputs hold barriers
            # up to the other processes' clocks, ahead of ours by the skew: stamped below them, a
            # message would be delivered by receivers it reached in time and arrive late at others
            # (milliseconds of skew live). One input timeout ahead of our clock is above them
            self._adv = max(self._adv or self._now, self._now + self.params.input_timeout_ns)
        self.incarnation = self._last_inc = reply.incarnation
        self.revision = max(self.revision, reply.revision)
        self._joined_rev = self.revision
        self.c.registrations += 1
        self._recovering = None
        self._pump()

    def _reopen(self, addr: Addr) -> None:
        """``addr`` (re)joined as a new incarnation: fresh connections both ways (a connection it
        had is closed by its failure notice, which the controller sends first)."""
        self._failed_procs.pop(addr, None)
        conn = self._rrx.get(addr)
        if conn is not None and conn.closed:
            self._retire(conn)
        tx = self._tx.get(addr)
        if tx is not None and not tx.inflight:
            del self._tx[addr]

    def _retire(self, conn: _RRxConn) -> None:
        """Forget ``conn`` as a connection; its complete messages stay in the delivery heap."""
        if self._rrx.get(conn.src) is conn:
            del self._rrx[conn.src]
        conn.closed = True
        conn.buffered -= len(conn.part)
        conn.part = []
        if conn.msgs:
            self._old.setdefault(conn.src, []).append(conn)

    def _on_notice(self, n: ctlwire.Notice) -> None:
        t_f = None if n.t_f == 0 else ts_unwrap(n.t_f, self._now)
        if n.addr == self.me:
            self._on_own_failure(n, t_f)
            return
        if self._recovering is not None:
            if n.replay:
                self._recovering["notices"][n.fid] = (n.addr, t_f, n.incarnation)
            return
        old = self._failures.get(n.fid)
        if old is not None:
            if old.proc != n.addr or old.t_f != t_f:
                self.c.stale_notices += 1
                return
            self.c.duplicate_notices += 1
            if old.done and not n.replay:
                self.actions.emit(SendTo(self.controller, ctlwire.callback_done(n.fid)))
            return
        if n.fid <= self._joined_rev and not n.replay and not self._involves(n.addr):
            # before we joined, and nothing of ours involves it. (A REPLAY is taken: the controller
            # tells a newcomer of every process still failed, which may be alive, not knowing yet,
            # and scatter to us above its T_f; and a sender of ours, of a destination that failed
            # before it joined)
            self.actions.emit(SendTo(self.controller, ctlwire.callback_done(n.fid)))
            return
        self.c.notices += 1
        self.revision = max(self.revision, n.fid)
        f = self._failures[n.fid] = _Failure(n.addr, t_f, n.fid, set())
        self._failed_procs[n.addr] = n.fid
        self._discard(n.addr, t_f, n.incarnation)
        self._recall_for(n.addr, n.fid)
        if n.replay:
            f.done = True
            self._proc_fail(f)
        else:
            self._maybe_done(f)

    def _involves(self, proc: Addr) -> bool:
        """We have sent to ``proc`` (the controller tells a sender that joined after ``proc``
        failed, when it relays a PREPARE there) or hold messages from it."""
        conn = self._rrx.get(proc)
        return proc in self._tx or (conn is not None and bool(conn.msgs))

    def _discard(self, proc: Addr, t_f: int | None, incarnation: int | None = None) -> None:
        """§8 step 4: drop what ``proc`` sent above T_f; take nothing more from it."""
        conn = self._rrx.get(proc)
        conns = [conn] if conn is not None else []
        if incarnation is not None:
            self._stray_base[proc] = (incarnation & 0xFF) << PSN_BASE_SHIFT
        for c in conns + self._old.get(proc, []):
            c.closed = True
            c.buffered -= len(c.part)
            c.part = []
            for psn, m in list(c.msgs.items()):
                if t_f is None or m.ts > t_f:
                    m.dropped = True
                    del c.msgs[psn]
                    c.buffered -= m.npkts
                    self.c.messages_discarded += 1

    def _recall_for(self, proc: Addr, fid: int) -> None:
        """§8 step 5: what waits for ``proc``'s ACK is dropped; the rest of its scatterings is
        recalled. ``SendFail`` for both."""
        tx = self._tx.pop(proc, None)
        hit: dict[int, _RScat] = {}
        if tx is not None:
            for m, _sent in tx.inflight:
                msg: _RMsg = m  # type: ignore[assignment]
                if msg.state == _PENDING and msg.sc is not None:
                    hit[msg.seq] = msg.sc
        for sc in hit.values():
            sc.recalled = True
            for msg in sc.msgs:
                self._fail_msg(msg)  # recalled: no receiver delivers it
                # a failed receiver may hold it (its ACK lost) and recover: the controller
                # records the recall for it (§8 "Recovery" step 2)
                self._start_recall(msg, fid, via_ctl=msg.dst == proc or msg.dst in self._failed_procs)
        # recalls of ours still waiting on the failed process go through the controller now
        for key, rec in self._recalls.items():
            if key[0] == proc and rec.resends < self.params.relay_after:
                rec.resends = self.params.relay_after
                rec.sent_at = self._now
                self.actions.emit(SendTo(self.controller, ctlwire.relay(proc, rec.frame)))
                self.c.relayed_out += 1
        # scatterings still in the send buffer lose their messages to it
        for queued in self._queue:
            gone = [(d, data, n) for d, data, n in queued.msgs if d == proc]
            if gone:
                queued.msgs = [x for x in queued.msgs if x[0] != proc]
                queued.need.pop(proc, None)
                queued.held.pop(proc, None)
                for d, data, _n in gone:
                    self.c.send_failed += 1
                    self.actions.emit(SendFail(0, d, data))
        self._queue = deque(sc for sc in self._queue if sc.msgs)
        self._acked = deque(m for m in self._acked if m.dst != proc)

    def _fail_msg(self, msg: _RMsg) -> None:
        if msg.failed:
            return
        msg.failed = True
        self.c.send_failed += 1
        self.actions.emit(SendFail(msg.ts, msg.dst, msg.data))

    def _maybe_done(self, f: _Failure) -> None:
        """§8 step 6: once its recalls are all ACKed, the callback, then tell the controller."""
        if f.done or f.recalls:
            return
        f.done = True
        self._proc_fail(f)
        self.actions.emit(SendTo(self.controller, ctlwire.callback_done(f.fid)))

    def _proc_fail(self, f: _Failure) -> None:
        self.c.proc_fails += 1
        self.actions.emit(ProcFail(f.proc, f.t_f if f.t_f is not None else 0))

    # ------------------------------------------------------------------ recovery (§8 "Recovery")
    def _on_own_failure(self, n: ctlwire.Notice, t_f: int | None) -> None:
        rec = self._recovering
        if rec is not None:
            if n.replay:
                rec["notices"][n.fid] = (n.addr, t_f, n.incarnation)
                if n.incarnation == rec["inc"]:
                    rec["own"] = t_f
            return
        if self.incarnation is None:
            return  # not registered yet: nothing to recover
        if n.incarnation != self.incarnation:
            # the failure of an incarnation we already recovered from (a REPLAY of our last batch,
            # resent because a RECOVER request was repeated): this incarnation is not failed.
            # Taken, it would start a recovery that the controller, seeing us live, answers with
            # the same batch again, and so on
            self.c.stale_notices += 1
            return
        self.c.recoveries += 1
        self.incarnation = None
        self._recovering = {"notices": {}, "recalls": [], "own": t_f, "inc": n.incarnation}
        self._stop_sending(t_f)
        # ask to re-join once a barrier from the ToR shows our data path works (ours): admitted,
        # our commit input is back in the switches' minima at once, and cut off it would time out
        # and fail the new incarnation too, again and again
        self._barrier = None
        self._reg_at = self._now

    def _stop_sending(self, own: int | None) -> None:
        """Declared failed: every receiver discards what we sent above our T_f (§8 step 4), so it
        failed; nothing of this incarnation goes out any more (a resend arriving after we re-join
        could pass for the new incarnation's)."""
        for msg in list(self._unsettled) + list(self._acked):
            if own is None or msg.ts > own:
                self._fail_msg(msg)
        self._unsettled.clear()
        self._acked.clear()
        self._tx.clear()
        self._recalls.clear()
        self._rto_next = None
        for queued in self._queue:
            queued.held.clear()

    def _settle_recovery(self, rec: dict[str, Any]) -> None:
        """Apply what was missed, fail what we sent above our own T_f, then start afresh: the
        messages we ACKed stay buffered and are delivered when the commit barrier passes them."""
        own: int | None = rec["own"]
        for fid, (addr, t_f, inc) in sorted(rec["notices"].items()):
            self.revision = max(self.revision, fid)
            if addr == self.me or fid in self._failures:
                continue
            f = self._failures[fid] = _Failure(addr, t_f, fid, set(), done=True)
            # failed until the controller announces it again (it does, after the reply, for every
            # process that re-joined meanwhile): a message to it now fails at once. Sent, it would
            # go unanswered, then to the controller, which drops it: our commit would stick
            self._failed_procs[addr] = fid
            self._discard(addr, t_f, inc)
            self._recall_for(addr, fid)  # (nothing in flight any more: scatterings queued meanwhile lose it)
            self._proc_fail(f)
        # our own messages to ourselves above T_f are discarded here as everywhere (§8 step 4)
        self._discard(self.me, own, None)
        # fresh receive connections; complete messages stay in the heap. The failures we know of
        # stay known: those processes are failed until announced again
        for conn in list(self._rrx.values()):
            self._retire(conn)
        self._commit_sent = None

    def _recovery_recall(self, sender: Addr, r: Recall) -> None:
        rec = self._recovering
        assert rec is not None
        rec["recalls"].append((sender, r.psn))
        # (a partial message, or one that never arrived, is dropped when we retire the connection;
        # the controller's book after a fail-over has no ts: 0 matches any)
        self._drop_recalled(sender, r.psn, r.ts)


__all__ = ["COMMIT_DIVISOR", "ReliableCounters", "ReliableEndpoint"]
