"""Reliable 1Pipe's failure handling at one process (1Pipe §8; design topic §8 in docs/papers.md,
docs/onepipe-reliable.md "Process" and "Controller"), sans-IO: what runs when the controller, or
the process itself, declares a failure.

:class:`Recovery` is the half of :class:`.reliable.ReliableEndpoint` that holds:

- **Incarnations.** The process registers with the controller (REGISTER, resent after ``rto_ns``
  until answered, backing off: :meth:`.params.OnePipeParams.register_wait_ns`) and sends and takes
  nothing before; another process that (re)joins gets fresh
  connections both ways; a connection from a process opens only at an incarnation's PSN base
  (:data:`.rstate.PSN_BASE_SHIFT`), never at its failed incarnation's.
- **Failure notices** ``(P, T_f)`` (§8 steps 4-6), once per failure id: *discard* P's buffered
  messages above T_f and close P's connections; *recall*: drop what waits for P's ACK and recall
  the rest of its scatterings from their other receivers; ``SendFail`` for both; then the callback
  ``ProcFail(P, T_f)`` and CALLBACK_DONE once every recall of this failure is ACKed.
- **Recalls** (§8 step 5), both sides. Ours: a RECALL to each co-receiver, resent every ``rto_ns``
  and through the controller after ``relay_after`` resends, backing off there (or at once when the receiver failed: the
  controller records it for the receiver's recovery and answers for it); the message holds the
  commit back until its RECALL_ACK. Theirs: drop the message they name by first PSN *and* ts (a
  connection opened after a recovery restarts at the same PSN base), or remember to drop it when it
  arrives, on a connection open or not yet open; answer RECALL_ACK.
- **Recovery** (§8 "Recovery"): told it was itself declared failed (maybe falsely: stopped past the
  failure timeout), the process is fail-stop (the paper's §5): it stops sending and delivering,
  asks (once a barrier shows its data path works) for the notices and undeliverable recalls it
  missed, applies them, fails what it sent above its own T_f, keeps the messages it ACKed and
  re-joins as a new incarnation, stamping one input timeout ahead of its clock.

It changes the endpoint's prepare/commit state (its send buffer and connections, its receive
connections, its barriers) only through :class:`RecoveryHost`, the endpoint's recovery port.
Inputs come from the endpoint (the datagrams it dispatches here, its timer); outputs are the
endpoint's actions (``SendTo``, ``SendFail``, ``ProcFail``). Bad input never raises: it is counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, cast

from headers.errors import HeaderError
from headers.onepipe import OnePipeHeader, OnePipeOpcode, ts_from_ns, ts_unwrap

from ..engine import SendTo
from . import ctlwire
from .actions import EndpointActionQueue, ProcFail, SendFail
from .ctlwire import Recall
from .endpoint import Addr, psn_unwrap
from .params import OnePipeParams
from .rstate import (
    PENDING,
    PSN_BASE_SHIFT,
    PSN_LOW,
    PSN_MASK,
    RECALLING,
    SETTLED,
    ReliableCounters,
    RMsg,
    RScat,
    RTxConn,
    RxConn,
    psn_base,
)

_OP = OnePipeOpcode
#: a recall, as its sender keys it: (receiver, first PSN, wire ts). A connection re-opened after its
#: receiver recovered restarts at the same PSN base, so a PSN alone may name a message of the old
#: connection or of the new one
RecallKey = tuple[Addr, int, int]


class RecoveryHost(Protocol):
    """What :class:`Recovery` asks of its endpoint: who it is, its time and barriers, and the few
    changes §8 makes to its prepare/commit state. :class:`.reliable.ReliableEndpoint` is one."""

    me: Addr
    controller: Addr
    nonce: int
    params: OnePipeParams
    c: ReliableCounters
    actions: EndpointActionQueue

    @property
    def now(self) -> int:
        """Host time."""

    @property
    def barrier(self) -> int | None:
        """The BE barrier received from the ToR (None: none since the process (re-)joined)."""

    def barriers_to(self, dst: Addr) -> tuple[int, int]:
        """The wire (BE, commit) barriers a packet to ``dst`` leaving now carries."""

    def arm_rto(self, at: int) -> None:
        """Run the retransmission timer at ``at`` at the latest."""

    def pump(self) -> None:
        """Send what the send buffer holds, if the windows and the registration allow."""

    def rejoin(self) -> None:
        """Forget the BE barrier received: nothing is stamped until the ToR sends one (§4)."""

    def raise_floor(self, ts: int) -> None:
        """Stamp nothing below ``ts`` from now on."""

    def take_tx(self, proc: Addr) -> RTxConn | None:
        """Remove the connection to ``proc`` and return it (what it holds in flight)."""

    def unqueue(self, proc: Addr) -> list[tuple[Addr, bytes]]:
        """Take the messages to ``proc`` out of the scatterings still in the send buffer; return
        them, in order."""

    def forget_acked(self, proc: Addr) -> None:
        """Stop tracking the messages ``proc`` ACKed (they no longer wait for a commit barrier)."""

    def stop_sending(self) -> list[RMsg]:
        """Forget every connection, retransmission and message sent; return the messages that
        were not settled or were ACKed and not yet passed by the commit barrier."""

    def rx_conn(self, src: Addr, psn_wire: int) -> RxConn | None:
        """The open connection from ``src``, or a new one if ``psn_wire`` may start one."""

    def rx_conns(self, src: Addr) -> list[RxConn]:
        """Every connection from ``src`` that may hold messages: the current one first, then
        those retired by a failure."""

    def involves(self, proc: Addr) -> bool:
        """We have sent to ``proc``, or hold complete messages from it."""

    def reopen(self, addr: Addr) -> None:
        """``addr`` re-joined: fresh connections both ways."""

    def start_afresh(self) -> None:
        """Retire every receive connection and send the commit anew (a recovered process)."""


@dataclass(slots=True, eq=False)
class PendingRecall:
    """A RECALL of ours waiting for its RECALL_ACK."""

    msg: RMsg
    frame: bytes
    sent_at: int
    resends: int = 0


@dataclass(slots=True, eq=False)
class Failure:
    """A failure notice this process handles (§8 steps 4-6)."""

    proc: Addr
    t_f: int | None  # absolute; None: no commit known, everything undelivered is discarded
    fid: int
    recalls: set[RecallKey]  # recalls this failure started
    done: bool = False


@dataclass(slots=True, eq=False)
class Batch:
    """What a process declared failed has fetched of its recovery batch so far (§8 "Recovery")."""

    own: int | None  # its own T_f (absolute; None: no commit known)
    inc: int  # the incarnation that failed
    notices: dict[int, tuple[Addr, int | None, int]] = field(default_factory=dict)  # fid -> (P, T_f, inc)
    recalls: list[tuple[Addr, int]] = field(default_factory=list)  # undeliverable recalls: (sender, psn)


class Recovery:
    """§8 at one process (module docstring), for the endpoint ``host``."""

    def __init__(self, host: RecoveryHost, now_ns: int) -> None:
        self.host = host
        self.incarnation: int | None = None  # None: not registered (or recovering)
        #: every incarnation admitted, in order, until the shell takes them (``take_joined``): one
        #: admitted and declared failed between two looks at ``incarnation`` is still seen (issue 31)
        self.joined: list[int] = []
        self._last_inc = 0  # the last incarnation we registered as (a reply for it or an older one is stale)
        self.revision = 0  # the controller's failure revision this process has seen
        self._reg_at = now_ns  # next REGISTER (re)send
        self._reg_sends = 0  # REGISTERs sent since the last admission (their backoff)
        self.recovering: Batch | None = None  # declared failed ourselves: the batch so far
        self.recalls: dict[RecallKey, PendingRecall] = {}
        self.failures: dict[int, Failure] = {}
        self.failed: dict[Addr, int] = {}  # process -> fid of its failure (until it re-joins)
        self._joined_rev = 0  # the failure revision when we (last) registered
        #: the PSN base of each process's failed incarnation: its strays start no connection
        self._stray_base: dict[Addr, int] = {}
        #: recalls for a connection from that process not open yet: first PSN -> wire ts
        self._early_recalls: dict[Addr, dict[int, int]] = {}

    # ------------------------------------------------------------------ registration
    def send_register(self, recover: bool = False) -> None:
        h = self.host
        h.actions.emit(SendTo(h.controller, ctlwire.register_request(h.nonce, self.revision, recover)))
        # unanswered, asked again after rto_ns, then twice as long each time (ours: every process
        # asks the one controller, which a flood of them would only slow down further)
        self._reg_sends += 1
        self._reg_at = h.now + h.params.register_wait_ns(self._reg_sends)

    def maybe_register(self) -> None:
        """(The timer.) Ask again while not registered; recovering, only once a barrier from the
        ToR shows the data path works."""
        h = self.host
        if self.incarnation is None and h.now >= self._reg_at and (self.recovering is None or h.barrier is not None):
            self.send_register(recover=self.recovering is not None)

    def register_deadline(self) -> int | None:
        if self.incarnation is not None or (self.recovering is not None and self.host.barrier is None):
            return None
        return self._reg_at

    def may_open(self, src: Addr, psn_wire: int) -> bool:
        """A packet at ``psn_wire`` may open a connection from ``src``: it is at an incarnation's
        PSN base, and not at the base of ``src``'s failed incarnation (a stray of it)."""
        return not (psn_wire & PSN_LOW or psn_wire == self._stray_base.get(src))

    def opened(self, conn: RxConn) -> None:
        """A connection from ``conn.src`` opened: the process is back, as a new incarnation; the
        recalls that came for it before it opened apply now."""
        self.failed.pop(conn.src, None)
        early = self._early_recalls.pop(conn.src, None)
        if early:
            base = conn.cum >> PSN_BASE_SHIFT
            conn.recalled.update((psn_unwrap(psn, conn.cum), ts) for psn, ts in early.items()
                                 if psn >> PSN_BASE_SHIFT == base)

    def on_controller(self, hdr: OnePipeHeader, payload: memoryview) -> None:
        op = hdr.opcode
        try:
            if op is _OP.REGISTER:
                self._on_register(ctlwire.parse_register_reply(hdr, payload))
            elif op is _OP.FAILURE_NOTICE:
                self._on_notice(ctlwire.parse_failure_notice(hdr, payload))
            elif op is _OP.PROBE:
                self._on_probe(*ctlwire.parse_probe(hdr, payload))
            else:
                self.host.c.foreign += 1
        except HeaderError:
            self.host.c.malformed += 1

    def _on_probe(self, probe_id: int, incarnation: int) -> None:
        """The controller suspects us (a switch found us silent, issue 31): answer at once if we
        are the incarnation it asks about. A restarted process (another incarnation, or none
        yet) does not answer for its predecessor, whose buffers are gone."""
        h = self.host
        if self.incarnation is not None and self.incarnation == incarnation:
            h.c.probes_answered += 1
            h.actions.emit(SendTo(h.controller, ctlwire.probe(probe_id, incarnation)))

    def _on_register(self, reply: ctlwire.RegisterReply) -> None:
        h = self.host
        if reply.addr != h.me:
            h.c.announcements += 1
            self.failed.pop(reply.addr, None)
            h.reopen(reply.addr)
            return
        if self.incarnation is not None or reply.nonce != h.nonce or reply.incarnation <= self._last_inc:
            return  # a repeat (or, recovering, the reply that admitted the incarnation that failed)
        rec = self.recovering
        if rec is not None and (len(rec.notices) < reply.notices or len(rec.recalls) < reply.recalls):
            self.send_register(recover=True)  # part of the batch was lost: ask again
            return
        if rec is not None:
            self._settle_recovery(rec)
            # join again (design topic §4): nothing is stamped before a barrier from the ToR says
            # our input is back in its minima; stamped blind, a message held up on the way (the
            # cut that made us fail) could reach receivers whose commit barrier passed it
            h.rejoin()
        if rec is not None or reply.incarnation > 1:
            # ... and nothing below the commit barriers given out while we were out (ours). Our
            # commit input re-joins every switch under the freeze (§4), whose outputs hold barriers
            # up to the other processes' clocks, ahead of ours by the skew: stamped below them, a
            # message would be delivered by receivers it reached in time and arrive late at others
            # (milliseconds of skew live). One input timeout ahead of our clock is above them
            h.raise_floor(h.now + h.params.input_timeout_ns)
        self.incarnation = self._last_inc = reply.incarnation
        self._reg_sends = 0
        self.joined.append(reply.incarnation)
        self.revision = max(self.revision, reply.revision)
        self._joined_rev = self.revision
        h.c.registrations += 1
        self.recovering = None
        h.pump()

    # ------------------------------------------------------------------ failure notices (§8 steps 4-6)
    def _on_notice(self, n: ctlwire.Notice) -> None:
        h = self.host
        t_f = None if n.t_f == 0 else ts_unwrap(n.t_f, h.now)
        if n.addr == h.me:
            self._on_own_failure(n, t_f)
            return
        if self.recovering is not None:
            if n.replay:
                self.recovering.notices[n.fid] = (n.addr, t_f, n.incarnation)
            return
        if self.incarnation is None and not n.replay:
            # not registered yet: the controller sent it to the process it still thinks lives at
            # our address (a previous run's, ended without leaving). Taken, it marked a peer
            # failed that may be back already as a new incarnation, whose announcement a fresh
            # process never gets (live: a reused address's messages failed at once or stuck).
            # What is still failed when we are admitted comes as REPLAY notices before the reply
            # (§8: a newcomer learns of every failed process), and an unanswered notice is resent.
            h.c.notices_before_joining += 1
            return
        old = self.failures.get(n.fid)
        if old is not None:
            if old.proc != n.addr or old.t_f != t_f:
                h.c.stale_notices += 1
                return
            h.c.duplicate_notices += 1
            if old.done and not n.replay:
                h.actions.emit(SendTo(h.controller, ctlwire.callback_done(n.fid)))
            return
        if n.fid <= self._joined_rev and not n.replay and not h.involves(n.addr):
            # before we joined, and nothing of ours involves it. (A REPLAY is taken: the controller
            # tells a newcomer of every process still failed, which may be alive, not knowing yet,
            # and scatter to us above its T_f; and a sender of ours, of a destination that failed
            # before it joined)
            h.actions.emit(SendTo(h.controller, ctlwire.callback_done(n.fid)))
            return
        h.c.notices += 1
        self.revision = max(self.revision, n.fid)
        f = self.failures[n.fid] = Failure(n.addr, t_f, n.fid, set())
        self.failed[n.addr] = n.fid
        self._discard(n.addr, t_f, n.incarnation)
        self._recall_for(n.addr, n.fid)
        if n.replay:
            f.done = True
            self._proc_fail(f)
        else:
            self._maybe_done(f)

    def _discard(self, proc: Addr, t_f: int | None, incarnation: int | None = None) -> None:
        """§8 step 4: drop what ``proc`` sent above T_f; take nothing more from it."""
        conns = self.host.rx_conns(proc)
        if incarnation is not None:
            self._stray_base[proc] = psn_base(incarnation)
        c = self.host.c
        for conn in conns:
            conn.close()
            for psn, m in list(conn.msgs.items()):
                if t_f is None or m.ts > t_f:
                    m.dropped = True
                    del conn.msgs[psn]
                    conn.buffered -= m.npkts
                    c.messages_discarded += 1

    def _recall_for(self, proc: Addr, fid: int) -> None:
        """§8 step 5: what waits for ``proc``'s ACK is dropped; the rest of its scatterings is
        recalled. ``SendFail`` for both."""
        h = self.host
        tx = h.take_tx(proc)
        hit: dict[int, RScat] = {}
        if tx is not None:
            for m, _sent in tx.inflight:
                msg = cast(RMsg, m)
                if msg.state == PENDING and msg.sc is not None:
                    hit[msg.seq] = msg.sc
        for sc in hit.values():
            sc.recalled = True
            for msg in sc.msgs:
                self._fail_msg(msg)  # recalled: no receiver delivers it
                # a failed receiver may hold it (its ACK lost) and recover: the controller
                # records the recall for it (§8 "Recovery" step 2)
                self._start_recall(msg, fid, via_ctl=msg.dst == proc or msg.dst in self.failed)
        # recalls of ours still waiting on the failed process go through the controller now
        for key, rec in self.recalls.items():
            if key[0] == proc and rec.resends < h.params.relay_after:
                rec.resends = h.params.relay_after
                rec.sent_at = h.now
                h.actions.emit(SendTo(h.controller, ctlwire.relay(proc, rec.frame)))
                h.c.relayed_out += 1
        # scatterings still in the send buffer lose their messages to it
        for d, data in h.unqueue(proc):
            h.c.send_failed += 1
            h.actions.emit(SendFail(0, d, data))
        h.forget_acked(proc)

    def _fail_msg(self, msg: RMsg) -> None:
        if msg.failed:
            return
        msg.failed = True
        self.host.c.send_failed += 1
        self.host.actions.emit(SendFail(msg.ts, msg.dst, msg.data))

    def _maybe_done(self, f: Failure) -> None:
        """§8 step 6: once its recalls are all ACKed, the callback, then tell the controller."""
        if f.done or f.recalls:
            return
        f.done = True
        self._proc_fail(f)
        self.host.actions.emit(SendTo(self.host.controller, ctlwire.callback_done(f.fid)))

    def _proc_fail(self, f: Failure) -> None:
        self.host.c.proc_fails += 1
        self.host.actions.emit(ProcFail(f.proc, f.t_f if f.t_f is not None else 0))

    # ------------------------------------------------------------------ recall (§8 step 5)
    def on_recall(self, r: Recall, src: Addr, relayed: bool) -> None:
        """A co-receiver's side: drop the message (or remember to drop it) and answer."""
        h = self.host
        if self.recovering is not None:
            if relayed:
                self._recovery_recall(src, r)  # part of the recovery batch
            return
        h.c.recalls_received += 1
        be, commit = h.barriers_to(src)
        ack = ctlwire.recall(_OP.RECALL_ACK, r, be, commit if self.incarnation is not None else 0)
        found = self._drop_recalled(src, r.psn, r.ts)
        conn = None if found else h.rx_conn(src, r.psn)
        if found:
            pass  # dropped here (or earlier: a duplicate)
        elif conn is None:
            stray = self._stray_base.get(src)
            if r.psn >> PSN_BASE_SHIFT != (-1 if stray is None else stray >> PSN_BASE_SHIFT):
                # a connection not open yet (its first packets lost or late): the message may still
                # come on it. Taken when it opens (ours); a failed incarnation's never opens
                early = self._early_recalls.setdefault(src, {})
                if len(early) < h.params.rwnd_packets:
                    early[r.psn] = r.ts
            else:
                h.c.duplicate_recalls += 1  # nothing of it here, and nothing of it can come
        else:
            psn = psn_unwrap(r.psn, conn.cum)
            if psn >= conn.cum or (conn.part and psn == conn.cum - len(conn.part)):
                if conn.recalled.get(psn) == r.ts:
                    h.c.duplicate_recalls += 1
                else:
                    conn.recalled[psn] = r.ts
            else:
                h.c.recall_too_late += 1  # delivered already: only a broken sender recalls so late
        if relayed or src == h.controller:
            h.actions.emit(SendTo(h.controller, ctlwire.relay(src, ack)))
        else:
            h.actions.emit(SendTo(src, ack))

    def _drop_recalled(self, src: Addr, psn_wire: int, ts_wire: int) -> bool:
        """Drop the complete message from ``src`` a RECALL names, on the connection from it or on
        one retired by a failure (its own or ours): the message at that first PSN with that ts
        (0: any). A connection opened after a recovery restarts at the same PSN base, so the PSN
        alone may name a message of either. True when found, or found dropped already."""
        c = self.host.c
        for conn in self.host.rx_conns(src):
            psn = psn_unwrap(psn_wire, conn.cum)
            m = conn.msgs.get(psn)
            if m is not None and (ts_wire == 0 or ts_from_ns(m.ts) == ts_wire):
                m.dropped = True
                del conn.msgs[psn]
                conn.buffered -= m.npkts
                conn.gone[psn] = ts_from_ns(m.ts)
                c.messages_recalled += 1
                return True
            if psn in conn.gone and (ts_wire == 0 or conn.gone[psn] == ts_wire):
                c.duplicate_recalls += 1
                return True
        return False

    def _start_recall(self, msg: RMsg, fid: int, via_ctl: bool = False) -> None:
        """Recall ``msg`` at its receiver; through the controller when the receiver failed (it
        records the recall for the receiver's recovery and answers for it, §8 "controller
        forwarding"). The message blocks our commit until the RECALL_ACK."""
        h = self.host
        key = (msg.dst, msg.psn & PSN_MASK, ts_from_ns(msg.ts))
        if key in self.recalls:
            self.failures[fid].recalls.add(key)
            return
        r = Recall(ts_from_ns(msg.ts), msg.psn & PSN_MASK, msg.npkts, msg.seq)
        frame = ctlwire.recall(_OP.RECALL, r, *h.barriers_to(msg.dst))
        rec = self.recalls[key] = PendingRecall(msg, frame, h.now)
        self.failures[fid].recalls.add(key)
        msg.recalls = 1
        msg.state = RECALLING
        h.c.recalls_sent += 1
        if via_ctl:
            rec.resends = h.params.relay_after
            h.actions.emit(SendTo(h.controller, ctlwire.relay(msg.dst, frame)))
            h.c.relayed_out += 1
        else:
            h.actions.emit(SendTo(msg.dst, frame))
        h.arm_rto(h.now + h.params.rto_ns)

    def on_recall_ack(self, r: Recall, src: Addr) -> None:
        self.host.c.recall_acks_received += 1
        key = (src, r.psn, r.ts)
        rec = self.recalls.pop(key, None)
        if rec is None:
            self.host.c.stale_acks += 1
            return
        rec.msg.recalls = 0
        rec.msg.state = SETTLED
        for f in self.failures.values():
            if key in f.recalls:
                f.recalls.discard(key)
                self._maybe_done(f)

    def check_recalls(self) -> None:
        """(The retransmission timer.) Resend every recall unanswered for ``rto_ns``; through the
        controller after ``relay_after`` resends, each such resend past the first waiting twice as
        long as the one before (:meth:`.params.OnePipeParams.resend_wait_ns`)."""
        h = self.host
        now, rto, wait = h.now, h.params.rto_ns, h.params.resend_wait_ns
        for (dst, _psn, _ts), rec in self.recalls.items():
            if now - rec.sent_at >= wait(rto, rec.resends):
                rec.sent_at = now
                rec.resends += 1
                h.c.recalls_sent += 1
                if rec.resends >= h.params.relay_after:
                    h.actions.emit(SendTo(h.controller, ctlwire.relay(dst, rec.frame)))
                    h.c.relayed_out += 1
                else:
                    h.actions.emit(SendTo(dst, rec.frame))
        if self.recalls:
            h.arm_rto(min(r.sent_at + wait(rto, r.resends) for r in self.recalls.values()))

    # ------------------------------------------------------------------ recovery (§8 "Recovery")
    def _on_own_failure(self, n: ctlwire.Notice, t_f: int | None) -> None:
        rec = self.recovering
        if rec is not None:
            if n.replay:
                rec.notices[n.fid] = (n.addr, t_f, n.incarnation)
                if n.incarnation == rec.inc:
                    rec.own = t_f
            return
        if self.incarnation is None:
            return  # not registered yet: nothing to recover
        if n.incarnation != self.incarnation:
            # the failure of an incarnation we already recovered from (a REPLAY of our last batch,
            # resent because a RECOVER request was repeated): this incarnation is not failed.
            # Taken, it would start a recovery that the controller, seeing us live, answers with
            # the same batch again, and so on
            self.host.c.stale_notices += 1
            return
        self.host.c.recoveries += 1
        self.incarnation = None
        self.recovering = Batch(t_f, n.incarnation)
        self._stop_sending(t_f)
        # ask to re-join once a barrier from the ToR shows our data path works (ours): admitted,
        # our commit input is back in the switches' minima at once, and cut off it would time out
        # and fail the new incarnation too, again and again
        self.host.rejoin()
        self._reg_at = self.host.now
        self._reg_sends = 0

    def _stop_sending(self, own: int | None) -> None:
        """Declared failed: every receiver discards what we sent above our T_f (§8 step 4), so it
        failed; nothing of this incarnation goes out any more (a resend arriving after we re-join
        could pass for the new incarnation's)."""
        for msg in self.host.stop_sending():
            if own is None or msg.ts > own:
                self._fail_msg(msg)
        self.recalls.clear()

    def _settle_recovery(self, rec: Batch) -> None:
        """Apply what was missed, fail what we sent above our own T_f, then start afresh: the
        messages we ACKed stay buffered and are delivered when the commit barrier passes them."""
        me = self.host.me
        for fid, (addr, t_f, inc) in sorted(rec.notices.items()):
            self.revision = max(self.revision, fid)
            if addr == me or fid in self.failures:
                continue
            f = self.failures[fid] = Failure(addr, t_f, fid, set(), done=True)
            # failed until the controller announces it again (it does, after the reply, for every
            # process that re-joined meanwhile): a message to it now fails at once. Sent, it would
            # go unanswered, then to the controller, which drops it: our commit would stick
            self.failed[addr] = fid
            self._discard(addr, t_f, inc)
            self._recall_for(addr, fid)  # (nothing in flight any more: scatterings queued meanwhile lose it)
            self._proc_fail(f)
        # our own messages to ourselves above T_f are discarded here as everywhere (§8 step 4)
        self._discard(me, rec.own, None)
        # fresh receive connections; complete messages stay in the heap. The failures we know of
        # stay known: those processes are failed until announced again
        self.host.start_afresh()

    def _recovery_recall(self, sender: Addr, r: Recall) -> None:
        assert self.recovering is not None
        self.recovering.recalls.append((sender, r.psn))
        # (a partial message, or one that never arrived, is dropped when we retire the connection;
        # the controller's book after a fail-over has no ts: 0 matches any)
        self._drop_recalled(sender, r.psn, r.ts)


__all__ = ["Batch", "Failure", "PendingRecall", "RecallKey", "Recovery", "RecoveryHost"]
