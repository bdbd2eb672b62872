"""Reliable 1Pipe (1Pipe §5: two-phase commit barriers; design topics §7-§8 in docs/papers.md),
sans-IO: one process that sends and receives reliable scatterings.

docs/onepipe-reliable.md is the design; this module follows it. It reuses the best-effort
engine's sender (send buffer, credits, stamping rule, DCTCP windows, beacon ticks, the received
BE barrier as a floor for new timestamps: :class:`.endpoint.Endpoint`, through its subclass
interface) and replaces what the two phases change:

- **Prepare** (§7.1): a scattering leaves as PREPAREs, which switches forward untouched (no
  barrier aggregation: a resent PREPARE carries an old ts). The receiver takes the next PSN of a
  connection only (go-back-N), ACKs cumulatively and NAKs a gap once; the sender keeps every
  packet until it is ACKed and resends from the oldest after ``rto_ns`` without progress or on a
  NAK. After ``relay_after`` resends without progress, resends go through the controller in
  RELAY (§8 "controller forwarding"), each past the first waiting twice as long as the one
  before (ours: :meth:`.params.OnePipeParams.resend_wait_ns`).
- **Commit** (§7.2): the commit barrier ``min(L - 1, oldest unsettled ts - 1)``, ``L`` the floor
  of every later ts, never decreasing (§12 item 6), goes to the ToR in every host beacon and,
  when it rises, at once in a COMMIT (at most one per ``T_beacon / 4``, ours). The switches
  aggregate it as they aggregate the BE barrier.
- **Delivery** (§7.3): the receiver's commit barrier is the ``commit_barrier`` of the latest
  barrier packet from the ToR; complete messages with ``ts <= commit barrier`` and ``ts < now``
  (causality) are delivered in ``(ts, sender key)`` order. A PREPARE below the commit barrier
  already delivered is not ACKed: its sender is reported to the controller.
- **Failures, recalls, registration and recovery** (§8) are :class:`.recovery.Recovery`'s, which
  this endpoint composes (``recovery``): the endpoint sends and takes nothing before it is
  registered, sends nothing to a process whose failure it handled, counts a message recalled
  until its RECALL_ACK as unsettled, and delivers nothing while it recovers from its own failure
  (fail-stop, the paper's §5). What recovery changes here it changes through the methods of the
  section "recovery port" below (:class:`.recovery.RecoveryHost`).

Every input is in host time; outputs are :mod:`netstack.engine` actions: ``SendTo``,
``Deliver``, ``SendFail``, ``ProcFail``. Bad input never raises: it is counted.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, cast

from headers.errors import HeaderError
from headers.onepipe import (
    OnePipeFlag,
    OnePipeHeader,
    OnePipeOpcode,
    decode_packet,
    ts_from_ns,
    ts_unwrap,
)

from ..engine import SendTo
from . import ctlwire
from .actions import Deliver, SendFail
from .endpoint import SOM, UPLINK, Addr, Endpoint, Scattering, TxConn, psn_unwrap, sender_key
from .params import OnePipeParams
from .recovery import Recovery
from .rstate import (
    ACKED,
    PENDING,
    PSN_BASE_SHIFT,
    PSN_MASK,
    SETTLED,
    ReliableCounters,
    RMsg,
    RScat,
    RTxConn,
    RxConn,
    RxMsg,
    psn_base,
)

_EOM = int(OnePipeFlag.EOM)
_ECE = int(OnePipeFlag.ECE)
_OP = OnePipeOpcode
#: at most one prompt COMMIT per T_beacon / this (ours, as the switches' prompt beacons)
COMMIT_DIVISOR = 4


class ReliableEndpoint(Endpoint):
    """One reliable 1Pipe process (module docstring). ``controller``: the controller's address;
    ``nonce``: this process's start (a restart must use another one)."""

    c: ReliableCounters

    def __init__(self, params: OnePipeParams, me: Addr, now_ns: int, *, controller: Addr, nonce: int = 0,
                 key: Callable[[Addr], int] = sender_key) -> None:
        super().__init__(params, me, now_ns, key=key)
        self.c = ReliableCounters()
        self.controller = controller
        self.nonce = nonce & PSN_MASK
        #: §8: incarnations, failure notices, recalls, recovery
        self.recovery = Recovery(self, now_ns)
        self._commit: int = now_ns - 1
        self._commit_sent: int | None = None  # the value the ToR last got from us
        self._commit_prompt_at = -(1 << 62)
        self._commit_due: int | None = None
        self._blocked = False  # the commit is held below the clock by an unsettled message
        self._settled_up = False  # it rose since the last COMMIT because messages settled
        self._cbarrier: int | None = None  # the commit barrier received
        self._unsettled: deque[RMsg] = deque()  # sent messages in stamp order, until settled
        self._acked: deque[RMsg] = deque()  # ACKed ones whose ts the commit barrier has not passed
        self._rrx: dict[Addr, RxConn] = {}
        #: retired connections (their process failed or re-joined, or we recovered) whose complete
        #: messages still wait for the commit barrier
        self._old: dict[Addr, list[RxConn]] = {}
        self._cid = 0  # connection tie-break numbers
        self._late_reported: dict[Addr, int] = {}  # senders reported for a late PREPARE: when
        # the receiver's (the best-effort one's are not used)
        self._rheap: list[tuple[int, int, int, int, RxMsg]] = []
        self._rtie = 0
        self._rdelivered: int | None = None  # every message with ts at or below this was delivered
        self._rlast_order: tuple[int, int] | None = None  # (ts, key) last delivered
        self._rwake_at: int | None = None  # a message waits for our clock to pass its ts
        self._rack_due: dict[RxConn, None] = {}
        self._rnak_due: dict[RxConn, None] = {}
        self._rto_next: int | None = None
        self.recovery.send_register()

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
    def delivered_barrier(self) -> int | None:
        """Every message with ts at or below this has been delivered or dropped."""
        return self._rdelivered

    @property
    def incarnation(self) -> int | None:
        """The incarnation this process is registered as (None: not registered, or recovering)."""
        return self.recovery.incarnation

    def take_joined(self) -> list[int]:
        """Every incarnation this process was admitted as since the last call, in order. A shell
        that compares :attr:`incarnation` after each batch misses one that was admitted and
        declared failed in the same batch (its ``on_register`` would skip it)."""
        out, self.recovery.joined = self.recovery.joined, []
        return out

    @property
    def revision(self) -> int:
        """The controller's failure revision this process has seen."""
        return self.recovery.revision

    @property
    def registered(self) -> bool:
        return self.recovery.incarnation is not None

    def send(self, scattering: Sequence[tuple[Addr, bytes]], now_ns: int) -> int | None:
        """Queue a reliable scattering; as :meth:`Endpoint.send`. A message to a process whose
        failure this endpoint handled (and which has not re-joined) fails at once (``SendFail``
        with ts 0): it is not a correct receiver any more."""
        self._clock(now_ns)
        failed = self.recovery.failed
        dead = [(d, m) for d, m in scattering if d in failed]
        if dead:
            for d, m in dead:
                self.c.not_registered_sends += 1
                self.c.send_failed += 1
                self.actions.emit(SendFail(0, d, bytes(m)))
            scattering = [(d, m) for d, m in scattering if d not in failed]
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
        if not relayed and hdr.opcode in self._barrier_ops and not self._same_host(src):
            had = self.barrier is not None
            self._take_barrier(hdr.be_barrier)
            self._take_commit(hdr.commit_barrier)
            if not had and self._queue:
                self._pump()
        self._after()

    @property
    def rto_in_force_ns(self) -> int:
        """The retransmission timeout in force (issue 31): ``params.rto_ns`` plus the timer slack the
        shell measured (:meth:`set_timer_slack`, twice its recent loop lag; 0 in virtual time). An
        ACK that comes late because a process waited for the CPU is no loss: resent early, it costs
        a datagram, and three early resends send the connection through the controller (RELAY)."""
        return self.params.rto_ns + self.timer_slack_ns

    def on_timer(self, now_ns: int) -> None:
        self._clock(now_ns)
        if self._beacon_tick():
            self._send_beacon()  # always: the commit barrier rides on it (packets to processes do not set it)
        self.recovery.maybe_register()
        self._check_rto()
        self.recovery.check_recalls()
        self._pump()
        self._after()

    def next_deadline(self) -> int | None:
        due = self._next_tick
        for t in (self._rwake_at, self._rto_next, self._commit_due, self.recovery.register_deadline()):
            if t is not None and t < due:
                due = t
        return due

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self.c)
        rec = self.recovery
        out.update(
            barrier=self.barrier, commit=self._commit, commit_barrier=self._cbarrier,
            advertised_barrier=self.advertised_barrier, queued=self.queued,
            inflight_packets=sum(len(t.inflight) for t in self._tx.values()),
            buffered_packets=sum(r.buffered for r in self._rrx.values()),
            unsettled=len(self._unsettled), recalls_pending=len(rec.recalls),
            failures_pending=sum(1 for f in rec.failures.values() if not f.done),
            tx_connections=len(self._tx), rx_connections=len(self._rrx),
            incarnation=rec.incarnation, revision=rec.revision,
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
                self.recovery.on_recall(r, src, relayed)
            else:
                self.recovery.on_recall_ack(r, src)
        elif src == self.controller and not relayed:
            self.recovery.on_controller(hdr, payload)
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

    def _update_commit(self) -> None:
        """Design topic §7.2: every message with ts at or below the commit is settled, and every
        later ts is above it. Sends a prompt COMMIT when it rose because messages settled (ours:
        an idle process's commit rises with its clock, and its beacons carry that)."""
        q = self._unsettled
        while q and q[0].state == SETTLED:
            q.popleft()
        free = c = self._floor() - 1
        if q and q[0].ts - 1 < c:
            c = q[0].ts - 1
        for rec in self.recovery.recalls.values():  # a recalled message blocks until its RECALL_ACK (§8 step 5)
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
        if (self.recovery.incarnation is None or not self._settled_up or not self.params.prompt_commit
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
        w = self._wire_commit() if self.recovery.incarnation is not None else 0
        self.actions.emit(SendTo(UPLINK, OnePipeHeader(b, b, w, 0, _OP.BEACON).to_bytes()))
        self.c.beacons_sent += 1
        if w:
            self._commit_sent = self._commit

    def _hdr(self, op: OnePipeOpcode, dst: Addr, ts: int, psn: int, flags: int = 0) -> bytes:
        """A header for a packet to ``dst`` carrying our barriers (both never decrease)."""
        b = ts_from_ns(self._advertise(dst))
        w = self._wire_commit() if self.recovery.incarnation is not None else 0
        return OnePipeHeader(ts, b, w, psn & PSN_MASK, op, flags).to_bytes()

    # ------------------------------------------------------------------ sender
    def _new_tx_conn(self, dst: Addr) -> TxConn:
        tx = RTxConn(dst, min(self.params.init_cwnd, self.params.rwnd_packets), self._now)
        tx.una = tx.win_end = tx.cwr_end = psn_base(self.recovery.incarnation)
        tx.cwr_end -= 1
        return tx

    def _pump(self) -> None:
        if self.recovery.incarnation is None:
            if self._queue and not self._queue[0].waited:
                self._queue[0].waited = True
                self.c.join_waits += 1
            return
        super()._pump()

    def _stamp(self, sc: Scattering) -> None:
        """Design topic §7.1: one ts for the scattering; its PREPAREs are kept until ACKed."""
        now = self._now
        ts = self._stamp_ts()
        wire = ts_from_ns(ts)
        mtu = self.params.mtu_payload
        rsc = RScat(sc.seq, ts)
        for dst, data, n in sc.msgs:
            tx = self._tx_conn(dst)
            assert isinstance(tx, RTxConn)
            if not tx.inflight:
                tx.progress_at = now
                self.arm_rto(now + self.rto_in_force_ns)
            msg = RMsg(ts, dst, data, n, sc.seq, tx.next_psn, sc=rsc)
            rsc.msgs.append(msg)
            for i in range(n):
                flags = (SOM if i == 0 else 0) | (_EOM if i == n - 1 else 0)
                frame = self._hdr(_OP.PREPARE, dst, wire, tx.next_psn, flags) + data[i * mtu:(i + 1) * mtu]
                tx.inflight.append((msg, now))  # type: ignore[arg-type]  # (RMsg in the reliable engine)
                tx.frames.append(frame)
                self._out(dst, frame, tx)
                self.c.packets_sent += 1
                self.c.bytes_sent += len(frame)
            self._unsettled.append(msg)
            self.c.messages_sent += 1
        self.c.scatterings_sent += 1
        sc.held.clear()

    def _out(self, dst: Addr, frame: bytes, tx: RTxConn | None) -> None:
        """Send to ``dst``, through the controller once the connection gave up on the direct path."""
        if tx is not None and tx.resends >= self.params.relay_after:
            self.actions.emit(SendTo(self.controller, ctlwire.relay(dst, frame)))
            self.c.relayed_out += 1
        else:
            self.actions.emit(SendTo(dst, frame))

    def _on_answer(self, hdr: OnePipeHeader, src: Addr, nak: bool) -> None:
        """An ACK (cumulative: everything below ``psn`` arrived) or a NAK (the same, and a gap at
        ``psn``: resend from it, at most four times per ``rto_ns``)."""
        tx = self._tx.get(src)
        if not isinstance(tx, RTxConn):
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

    def _ack_to(self, tx: RTxConn, cum: int, ece: bool) -> None:
        n = cum - tx.una
        for _ in range(n):
            m, _sent = tx.inflight.popleft()
            tx.frames.popleft()
            msg = cast(RMsg, m)
            msg.acked += 1
            if msg.acked == msg.npkts and msg.state == PENDING:
                msg.state = ACKED
                self.c.messages_acked += 1
                self._settle(msg)
        tx.una = cum
        tx.progress_at = self._now
        tx.resends = 0
        if tx.inflight:
            self.arm_rto(self._now + self.rto_in_force_ns)
        self._dctcp(tx, n, ece)
        self._pump()

    def _settle(self, msg: RMsg) -> None:
        if msg.state == ACKED:
            self._acked.append(msg)
        msg.state = SETTLED

    def _resend(self, tx: RTxConn) -> None:
        tx.resent_at = self._now
        for frame in tx.frames:
            self._out(tx.dst, frame, tx)
            self.c.retransmits += 1

    def _check_rto(self) -> None:
        if self._rto_next is None or self._now < self._rto_next:
            return
        rto = self.rto_in_force_ns
        nxt: int | None = None
        for tx in self._tx.values():
            if not tx.inflight or not isinstance(tx, RTxConn):
                continue
            due = max(tx.progress_at, tx.resent_at) + self.params.resend_wait_ns(rto, tx.resends)
            if due <= self._now:
                tx.resends += 1
                self._loss(tx)
                self._resend(tx)
                due = self._now + self.params.resend_wait_ns(rto, tx.resends)
            nxt = due if nxt is None else min(nxt, due)
        self._rto_next = nxt

    # ------------------------------------------------------------------ receiver
    def _on_prepare(self, hdr: OnePipeHeader, payload: memoryview, src: Addr, ce: bool, relayed: bool) -> None:
        if self.recovery.incarnation is None:
            # not (yet, or any more) registered: we are out of the system until we (re-)join. A
            # restarted process first hears what was sent to the incarnation before it, which
            # failed: its senders recall that through the controller, and never to us
            self.c.from_failed += 1
            return
        conn = self.rx_conn(src, hdr.psn)
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
            self._complete(conn, psn, ts, hdr.msg_ts)

    def _complete(self, conn: RxConn, psn: int, ts: int, ts_wire: int) -> None:
        """The fragment at ``psn`` ended a message: buffer it for delivery, or drop it if its
        sender recalled it before it arrived (§8 step 5)."""
        n = len(conn.part)
        first = psn + 1 - n
        data = b"".join(conn.part)
        conn.part = []
        if first in conn.recalled:
            want = conn.recalled.pop(first)
            if want == 0 or want == ts_wire:
                conn.gone[first] = ts_wire
                conn.buffered -= n
                self.c.messages_recalled += 1
                return
        m = RxMsg(ts, conn.src, first, n, data, conn)
        conn.msgs[first] = m
        self._rtie += 1
        heapq.heappush(self._rheap, (ts, conn.key, conn.cid, self._rtie, m))

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
        d = self._rdelivered
        return d if d is not None else -(1 << 62)

    def _deliver(self) -> None:
        """Design topic §7.3: complete messages at or below the commit barrier and below our
        clock, in (ts, sender) order."""
        cb = self._cbarrier
        if cb is None or self.recovery.recovering is not None:
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
            if self._rlast_order is not None and order < self._rlast_order:
                self.c.inconsistent += 1
                continue
            self._rlast_order = order
            self.c.messages_delivered += 1
            self.c.bytes_delivered += len(m.data)
            self.actions.emit(Deliver(ts, m.src, m.data))
        if self._rdelivered is None or limit > self._rdelivered:
            self._rdelivered = limit
        self._rwake_at = heap[0][0] + 1 if heap and heap[0][0] <= cb and heap[0][0] >= self._now else None

    def _send_answers(self) -> None:
        for conn in self._rnak_due:
            self._answer(conn, self._hdr(_OP.NAK, conn.src, 0, conn.cum))
            self.c.naks_sent += 1
        self._rnak_due.clear()
        for conn in self._rack_due:
            self._answer(conn, self._hdr(_OP.ACK, conn.src, 0, conn.cum))
            self.c.acks_sent += 1
        self._rack_due.clear()

    def _answer(self, conn: RxConn, frame: bytes) -> None:
        if conn.via_ctl:
            self.actions.emit(SendTo(self.controller, ctlwire.relay(conn.src, frame)))
            self.c.relayed_out += 1
        else:
            self.actions.emit(SendTo(conn.src, frame))

    def _retire(self, conn: RxConn) -> None:
        """Forget ``conn`` as a connection; its complete messages stay in the delivery heap."""
        if self._rrx.get(conn.src) is conn:
            del self._rrx[conn.src]
        conn.close()
        if conn.msgs:
            self._old.setdefault(conn.src, []).append(conn)

    # ------------------------------------------------------------------ recovery port
    # What recovery.Recovery changes here (recovery.RecoveryHost): the §8 steps act on the sender's
    # and the receiver's state only through these.

    def barriers_to(self, dst: Addr) -> tuple[int, int]:
        """The wire (BE, commit) barriers of a packet to ``dst`` leaving now (the commit even when
        not registered: the caller decides)."""
        return ts_from_ns(self._advertise(dst)), self._wire_commit()

    def arm_rto(self, at: int) -> None:
        """Run the retransmission timer (PREPAREs and RECALLs) at ``at`` at the latest."""
        if self._rto_next is None or at < self._rto_next:
            self._rto_next = at

    def pump(self) -> None:
        """Send what the send buffer holds, as far as the windows and the registration allow."""
        self._pump()

    def rejoin(self) -> None:
        """Forget the BE barrier received (§4 join: nothing is stamped before the ToR sends one)."""
        self._rejoin()

    def raise_floor(self, ts: int) -> None:
        """Stamp nothing below ``ts`` from now on."""
        self._raise_floor(ts)

    def take_tx(self, proc: Addr) -> RTxConn | None:
        """Remove the connection to ``proc``: its messages in flight are the caller's now."""
        tx = self._tx.pop(proc, None)
        return cast("RTxConn | None", tx)

    def unqueue(self, proc: Addr) -> list[tuple[Addr, bytes]]:
        """Take the messages to ``proc`` out of the scatterings still in the send buffer (a
        scattering left with none goes); they are returned in order."""
        out: list[tuple[Addr, bytes]] = []
        for queued in self._queue:
            gone = [(d, data, n) for d, data, n in queued.msgs if d == proc]
            if gone:
                queued.msgs = [x for x in queued.msgs if x[0] != proc]
                queued.need.pop(proc, None)
                queued.held.pop(proc, None)
                out += [(d, data) for d, data, _n in gone]
        kept = [sc for sc in self._queue if sc.msgs]
        self._queue.clear()
        self._queue.extend(kept)
        return out

    def forget_acked(self, proc: Addr) -> None:
        """``proc`` failed: the messages it ACKed no longer wait for a commit barrier here."""
        self._acked = deque(m for m in self._acked if m.dst != proc)

    def stop_sending(self) -> list[RMsg]:
        """Forget every connection, retransmission and credit; return what was sent and not
        settled, then what was ACKed and not yet passed by the commit barrier."""
        sent = list(self._unsettled) + list(self._acked)
        self._unsettled.clear()
        self._acked.clear()
        self._tx.clear()
        self._rto_next = None
        for queued in self._queue:
            queued.held.clear()
        return sent

    def rx_conn(self, src: Addr, psn_wire: int) -> RxConn | None:
        """The open connection from ``src``; a new one only when ``psn_wire`` starts one (the base
        of an incarnation other than a failed one's). None: the packet is stray."""
        conn = self._rrx.get(src)
        if conn is not None and not conn.closed:
            return conn
        if not self.recovery.may_open(src, psn_wire):
            return None
        if len(self._rrx) >= 1 << 16:
            return None
        try:
            key = self.key(src)
        except (TypeError, ValueError):
            return None
        if conn is not None:
            self._retire(conn)
        new = self._rrx[src] = RxConn(src, key, self._cid)
        self._cid += 1
        new.cum = psn_wire
        self.recovery.opened(new)  # (its process is back, as a new incarnation)
        return new

    def rx_conns(self, src: Addr) -> list[RxConn]:
        """Every connection from ``src`` whose messages wait here: the current one first, then
        those retired by a failure (its own or ours)."""
        cur = self._rrx.get(src)
        return ([cur] if cur is not None else []) + self._old.get(src, [])

    def involves(self, proc: Addr) -> bool:
        """We have sent to ``proc`` (the controller tells a sender that joined after ``proc``
        failed, when it relays a PREPARE there) or hold messages from it."""
        conn = self._rrx.get(proc)
        return proc in self._tx or (conn is not None and bool(conn.msgs))

    def reopen(self, addr: Addr) -> None:
        """``addr`` (re)joined as a new incarnation: fresh connections both ways (a connection it
        had is closed by its failure notice, which the controller sends first)."""
        conn = self._rrx.get(addr)
        if conn is not None and conn.closed:
            self._retire(conn)
        tx = self._tx.get(addr)
        if tx is not None and not tx.inflight:
            del self._tx[addr]

    def start_afresh(self) -> None:
        """Recovered: fresh receive connections (complete messages stay in the heap), and the
        commit goes to the ToR again."""
        for conn in list(self._rrx.values()):
            self._retire(conn)
        self._commit_sent = None


__all__ = ["COMMIT_DIVISOR", "PSN_BASE_SHIFT", "ReliableCounters", "ReliableEndpoint"]
