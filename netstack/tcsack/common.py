"""What the T/C-SACK engines and the go-back-N baseline share: the receiver's ACK clock
("An Updated ACK mechanism based on RDMA", §2: an ACK when T has passed or N packets have
arrived), a paced sender that numbers and stamps packets, and wrap-aware unwrapping of 32-bit
sequence numbers.

All sans-IO, under the contract of :mod:`netstack.engine`: ``now_ns`` comes in; a sender's
datagrams (UDP payloads) come out as the return value of ``poll``, a receiver's in-order
payloads as the return value of ``receive``, and a receiver's ACKs as
:class:`~netstack.engine.Transmit` actions in its ``actions`` queue.

Counters are dataclasses (:class:`ReceiverCounters`, :class:`SenderCounters` and one subclass
per engine) held in the engine's ``c``: the data path bumps ``self.c.<name>``, callers read
``engine.c.<name>``, and ``counters()`` exports them as JSON.

Nothing an engine receives is trusted for being well formed (docs/security.md#tc-sack): a
receiver binds to its peer (the first data packet of its flow fixes the source; datagrams from
anyone else are dropped) and takes the end of the stream (``LAST``) once and consistently; a
sender takes an ACK only for its flow and only if it is consistent with what it sent (the ACK
number within what its receiver could have used, ``tsecr`` one of its stamps, ``cum_ack`` and
every SACK run within what it sent, ``FIN_SEEN`` agreeing with them). What fails a check is
counted by reason in the engine's ``checks`` (:class:`ReceiverChecks`, :class:`SenderChecks`,
exported by ``check_counters()``) and changes nothing else.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from headers.errors import HeaderError
from headers.serial import W32
from headers.tcsack import SEQ_MASK, TcsAck, TcsAckFlag, TcsData, TcsDataFlag

from ..engine import ActionQueue, Transmit
from .params import TcsParams

if TYPE_CHECKING:
    from ..engine import Engine

#: what ``counters()`` exports: counts, ``cum``-like positions, flags, RTTs (None: no sample yet)
CounterValue = int | float | None

_U32 = W32.mask
_U32_HALF = W32.half
# the flags as plain ints: the data path tests them on every packet, and an IntFlag operation
# builds a flag object each time
_RETX, _LAST, _PROBE = int(TcsDataFlag.RETX), int(TcsDataFlag.LAST), int(TcsDataFlag.PROBE)
_FIN_SEEN = int(TcsAckFlag.FIN_SEEN)


#: ``unwrap(wire, ref)``: the absolute number nearest ``ref`` whose low 32 bits are ``wire``
#: (RFC 1982 window, headers/serial.py: exactly 2^31 away reads as below)
unwrap = W32.unwrap
#: the signed distance from ``b`` to ``a`` in [-2^31, 2^31) (headers.tcsack.seq_diff)
_diff32 = W32.diff


def us32(now_ns: int) -> int:
    """A clock reading as carried in ``tsval``/``tsecr``: microseconds mod 2^32."""
    return (now_ns // 1000) & _U32


#: ``us_before(a, b)``: serial ``a < b`` on 32-bit microsecond stamps
us_before = W32.lt


@dataclass(slots=True)
class ReceiverCounters:
    """What every receiver counts, in export order (``counters()`` adds ``cum`` and ``complete``)."""

    data_rx: int = 0  # data packets of this flow, copies and probes included
    retx_rx: int = 0  # ... flagged RETX
    probes_rx: int = 0  # ... flagged PROBE
    delivered: int = 0  # payloads handed on in order
    bytes_delivered: int = 0
    duplicates: int = 0  # below the cumulative point, or already buffered
    foreign: int = 0  # another flow's packets, ignored
    acks_sent: int = 0  # every ACK, NAKs included
    acks_count_triggered: int = 0  # N packets arrived
    acks_time_triggered: int = 0  # T passed


@dataclass(slots=True)
class ReceiverChecks:
    """Data packets a receiver refused (each changed nothing), by reason. Kept apart from the
    counters so that ``counters()`` keeps the keys its readers know (``foreign``, another flow's
    packets, stays there); ``check_counters()`` exports these."""

    not_peer: int = 0  # from another source than the bound peer (or, unbound, no plausible first packet)
    last_conflict: int = 0  # LAST at another seq than the first LAST, or below data already received
    beyond_last: int = 0  # at or above the packet flagged LAST (no copy of the last packet lacks the flag)


@dataclass(slots=True)
class SenderCounters:
    """What every sender counts, in export order (``counters()`` adds progress and RTT)."""

    sent: int = 0  # datagrams, copies included
    sent_new: int = 0  # first copies
    retx_sent: int = 0
    probes_sent: int = 0
    bytes_sent: int = 0  # datagram bytes (T/C-SACK header + payload)
    acks_rx: int = 0  # ACKs used
    stale_acks: int = 0  # overtaken by a newer ACK: ignored
    bogus_acks: int = 0  # acknowledging what was never sent: ignored (SenderChecks says why)
    foreign: int = 0  # another flow's ACKs, ignored
    # what the sender measured of its timers (issue 33)
    pacer_late_max_ns: int = 0  # the latest wake-up after a due slot (the shell's timer lateness)
    pacer_dropped_ns: int = 0  # lateness beyond the bucket's cap: preset-rate time given up
    ack_gap_max_ns: int = 0  # the longest gap between consecutive ACKs (the probe's jitter sample)


@dataclass(slots=True)
class SenderChecks:
    """ACKs a sender refused (each changed nothing), by reason; ``stale_acks`` and ``foreign``
    stay in the counters, and ``bogus_acks`` there is the sum of the four ``*_unsent`` /
    ``fin_mismatch`` reasons. ``check_counters()`` exports these."""

    ack_seq_ahead: int = 0  # numbered beyond what our receiver could have used by now
    tsecr_unsent: int = 0  # echoes no stamp we used
    cum_unsent: int = 0  # cum_ack beyond what was sent (or below the first packet)
    sack_unsent: int = 0  # a SACK run beyond what was sent
    fin_mismatch: int = 0  # everything acknowledged without FIN_SEEN, or FIN_SEEN before LAST was sent
    resyncs: int = 0  # not a drop: numbered as stale but reporting more (see SenderBase._reports_more)


class ReceiverBase:
    """The ACK clock and the ACK itself; subclasses decide what a data packet does.

    ACKs leave as :class:`~netstack.engine.Transmit` actions in ``actions`` (the shell sends
    each to the sender, in order), so a receiver keeps the :class:`~netstack.engine.Engine`
    contract. A subclass with counters of its own passes them in ``counters`` and narrows ``c``.
    """

    c: ReceiverCounters

    def __init__(self, params: TcsParams, flow_id: int = 0, start_seq: int = 0, *,
                 counters: ReceiverCounters | None = None) -> None:
        if not 0 <= start_seq <= SEQ_MASK:
            raise ValueError(f"start_seq must be a 32-bit value, got {start_seq}")
        self.params = params
        self.flow_id = flow_id
        #: the cumulative point, absolute: every packet before it has been delivered
        self.cum = start_seq
        self.ack_seq = 0
        self.last_seq: int | None = None  # absolute number of the packet flagged LAST
        #: where the data comes from (an address as the shell gives it), fixed by the first data
        #: packet of this flow; the shell sends the ACKs there (None: not bound yet)
        self.peer: Hashable | None = None
        #: the ACKs to send (Transmit), taken by the shell after each call
        self.actions = ActionQueue()
        self.c = ReceiverCounters() if counters is None else counters
        self.checks = ReceiverChecks()
        self._since_ack = 0
        self._first_unacked_ns: int | None = None
        self._tsecr = 0
        self._tsecr_arrival_ns = 0

    # ------------------------------------------------------------------ data path
    def receive(self, datagram: bytes, now_ns: int, src: Hashable | None = None) -> list[bytes]:
        """A UDP payload from the sender: the payloads now delivered in order (HeaderError if
        it is not a T/C-SACK data packet; another flow's packet is counted and ignored).

        ``src`` is where it came from (the shell's address: any hashable). The first data packet
        of this flow near the cumulative point fixes :attr:`peer`; from then on a datagram from
        any other source is counted (``checks.not_peer``) and dropped without being decoded.
        ``src=None`` (a caller that knows of no addresses) binds nothing and checks nothing."""
        if src is not None and src != self.peer:
            if self.peer is not None:
                self.checks.not_peer += 1
                return []
            return self._first(datagram, now_ns, src)
        hdr = TcsData.from_bytes(datagram)
        if hdr.flow_id != self.flow_id:
            self.c.foreign += 1
            return []
        return self.on_data(hdr, bytes(datagram[TcsData.SIZE:]), now_ns)

    def _first(self, datagram: bytes, now_ns: int, src: Hashable) -> list[bytes]:
        """No peer yet: a data packet of this flow within the receive buffer's reach of the
        cumulative point binds ``src`` (a blind guess must hit the flow and the sequence space)."""
        hdr = TcsData.from_bytes(datagram)
        if hdr.flow_id != self.flow_id:
            self.c.foreign += 1
            return []
        if not 0 <= _diff32(hdr.seq, self.cum) <= self.params.buffer_packets:
            self.checks.not_peer += 1
            return []
        self.peer = src
        return self.on_data(hdr, bytes(datagram[TcsData.SIZE:]), now_ns)

    def on_data(self, hdr: TcsData, payload: bytes, now_ns: int) -> list[bytes]:
        s = unwrap(hdr.seq, self.cum)
        flags = hdr.flags
        last = self.last_seq
        # the end of the stream is taken once, and only where it can be: at or above the
        # cumulative point and above nothing received; the sender flags every copy of its last
        # packet LAST and sends nothing after it, so anything else is not our sender's
        if flags & _LAST:
            if last is None:
                if s < self.cum or self._holds_above(s):
                    self.checks.last_conflict += 1
                    return []
                self.last_seq = s
            elif s != last:
                self.checks.last_conflict += 1
                return []
        elif last is not None and s >= last:
            self.checks.beyond_last += 1
            return []
        c = self.c
        c.data_rx += 1
        if flags & _RETX:
            c.retx_rx += 1
        if flags & _PROBE:
            c.probes_rx += 1
        self._tsecr = hdr.tsval
        self._tsecr_arrival_ns = now_ns
        out = self._accept(s, payload, now_ns)
        if out:
            c.delivered += len(out)
            c.bytes_delivered += sum(map(len, out))
        # §2: "when the preset time T or the accumulated number of received packets N is
        # reached, the receiver triggers the acknowledgement"
        self._since_ack += 1
        if self._first_unacked_ns is None:
            self._first_unacked_ns = now_ns
        if self._since_ack >= self.params.n:
            self._send_ack(now_ns, count=True)
        return out

    def _accept(self, s: int, payload: bytes, now_ns: int) -> list[bytes]:
        raise NotImplementedError

    def _holds_above(self, s: int) -> bool:
        """Whether a packet above ``s`` has been received and is still held (a buffering receiver)."""
        return False

    # --------------------------------------------------------------------- timers
    def next_deadline(self) -> int | None:
        """T after the first packet since the last ACK (None while nothing arrived since)."""
        t = self._first_unacked_ns
        return None if t is None else t + self.params.t_ns

    def on_timer(self, now_ns: int) -> None:
        t = self.next_deadline()
        if t is not None and now_ns >= t:
            self._send_ack(now_ns, count=False)

    # ----------------------------------------------------------------------- ACKs
    @property
    def complete(self) -> bool:
        """The packet flagged LAST and everything before it have been delivered."""
        return self.last_seq is not None and self.cum > self.last_seq

    def _blocks(self) -> Sequence[tuple[int, int]]:
        return ()

    def _flags(self) -> int:
        return TcsAckFlag.FIN_SEEN if self.last_seq is not None else 0

    def _send_ack(self, now_ns: int, count: bool, extra_flags: int = 0) -> None:
        flags = self._flags() | extra_flags | (TcsAckFlag.TRIGGER_COUNT if count else 0)
        delay = (now_ns - self._tsecr_arrival_ns) // 1000
        ack = TcsAck(self.flow_id, self.ack_seq, self.cum & SEQ_MASK, self._tsecr,
                     tuple((s & SEQ_MASK, e & SEQ_MASK) for s, e in self._blocks()), flags,
                     min(0xFFFF, max(0, delay)))
        self.actions.emit(Transmit(ack.to_bytes()))
        self.ack_seq = (self.ack_seq + 1) & SEQ_MASK
        c = self.c
        c.acks_sent += 1
        if count:
            c.acks_count_triggered += 1
        elif not extra_flags:
            c.acks_time_triggered += 1  # (a go-back-N NAK is neither)
        self._since_ack = 0
        self._first_unacked_ns = None

    def counters(self) -> dict[str, CounterValue]:
        out: dict[str, CounterValue] = asdict(self.c)
        out.update(cum=self.cum, complete=self.complete)
        return out

    def check_counters(self) -> dict[str, int]:
        """What :class:`ReceiverChecks` counted, as JSON."""
        return asdict(self.checks)


class SenderBase:
    """A window-less sender paced at the preset rate ("An Updated ACK mechanism based on RDMA",
    §2: "the sender only needs to keep sending packets at the preset sending rate"). Subclasses
    choose the next packet.

    What it sends is the return value of ``poll``; its ``actions`` queue (the
    :class:`~netstack.engine.Engine` contract) stays empty: a sender has nothing else to ask
    of its shell. A subclass with counters of its own passes them in ``counters`` and
    narrows ``c``.
    """

    c: SenderCounters
    #: the pacer's token bucket (:meth:`poll`): a wake-up late by L sends every slot of L at once,
    #: never fewer than this many packets' worth ...
    BURST = 4
    #: ... and at most this long at the preset rate. 10 ms: twice the scheduling delay p99 a valid
    #: live run may have (netstack/tcsack/verdict.py MIN_P99_MS), and at the benchmark's 80 Mbit/s
    #: 100 KB, half a testbed port's 200 KB buffer (docs/topology.md), so a burst is queued, not dropped
    BURST_CAP_NS = 10_000_000
    #: the failure timer's allowance for ACK-interval jitter (:meth:`ack_jitter_ns`): this many
    #: times how much the longest recent gap between consecutive ACKs exceeded T ...
    ACK_JITTER_FACTOR = 2
    #: ... over the last this many gaps ...
    ACK_GAP_WINDOW = 64
    #: ... and never more than this (a lost ACK at the end of a transfer costs at most this much more)
    ACK_JITTER_CAP_NS = 100_000_000
    #: before the first ACK the timer waits this much more: the first ACK crosses the path, whose
    #: round trip the sender has no sample of yet, after the receiver's T (every later ACK follows
    #: the previous one by about T while data flows); a round trip on the WAN the draft targets
    FIRST_ACK_WAIT_NS = 100_000_000
    #: ACKs the receiver may send per data packet that reaches it (go-back-N: a NAK, then the
    #: packet still counts toward the next ACK); the ACK-number budget rests on it
    ACKS_PER_ARRIVAL = 1

    def __init__(self, params: TcsParams, data: bytes, flow_id: int = 0, start_seq: int = 0,
                 now_ns: int = 0, *, counters: SenderCounters | None = None) -> None:
        if not 0 <= start_seq <= SEQ_MASK:
            raise ValueError(f"start_seq must be a 32-bit value, got {start_seq}")
        self.params = params
        self.flow_id = flow_id
        self.data = data
        self.packets = max(1, math.ceil(len(data) / params.payload))
        self.base = start_seq
        self.end = start_seq + self.packets  # absolute, one past the LAST packet
        #: the cumulative point the ACKs have reached (absolute)
        self.cum = start_seq
        #: the newest accepted ACK: its number (absolute; the receiver numbers its ACKs from 0),
        #: the ACK itself and its cumulative point (absolute), for the resync rule
        self._newest_ack = -1
        self._newest_rep: TcsAck | None = None
        self._newest_cum = start_seq
        #: the first stamp any copy can carry, in us (every stamp is at or after the start)
        self._first_us = now_ns // 1000
        self._next_slot = now_ns
        #: the pacer has had nothing to send since its last poll: the time until something is due
        #: earns no credit (:meth:`_wake`)
        self._idle = False
        self._last_stamp = now_ns - 1000
        self.started_ns = now_ns
        self.done_ns: int | None = None
        #: how late the live shell's process has recently been scheduled: the failure timer
        #: (T/C-SACK's 2T probe, go-back-N's rto) waits that much longer (:meth:`set_timer_slack`)
        self.timer_slack_ns = 0
        #: ACK-interval jitter (:meth:`ack_jitter_ns`): when the newest ACK came, whether the
        #: failure timer fired since (a gap that spans a probe or a timeout is no jitter sample),
        #: and the recent gaps as a monotonic deque (index, gap) whose head is their maximum
        self._last_ack_ns: int | None = None
        self._timer_fired = False
        self._gaps: deque[tuple[int, int]] = deque()
        self._gap_i = 0
        #: when the first copy of the last packet went out (its slot) and the datagrams (and their
        #: bytes) sent by then: until then the sender always had a packet for every slot, so they
        #: give the rate it paced at (the live verdict's "sending rate")
        self.paced_ns: int | None = None
        self.paced_datagrams = 0
        self.paced_bytes = 0
        self.rtt_min_us: int | None = None
        self.rtt_latest_us: int | None = None
        self.srtt_us: float | None = None
        self.actions = ActionQueue()
        self.c = SenderCounters() if counters is None else counters
        self.checks = SenderChecks()

    @property
    def done(self) -> bool:
        return self.cum >= self.end

    def set_timer_slack(self, slack_ns: int) -> None:
        """The failure timer plus ``slack_ns`` from now on (0: the configured value).

        The draft (§2) probes when no ACK came for 2T, a time that covers the receiver's ACK
        clock (T) and the path. A live end on a loaded host adds its scheduling delay: the
        receiver must be scheduled to send its ACK and this sender to read it. The live shell
        passes twice how late its process has recently been scheduled (as the switch daemon does
        for LinkGuardian's ackNoTimeout, docs/testbed.md "Timers on a loaded host"), so that a
        probe means an ACK was lost, not that a process waited for the CPU. Sans-IO: the engine
        never measures anything itself; virtual time never calls this."""
        self.timer_slack_ns = max(0, int(slack_ns))

    def timeout_ns(self) -> int | None:
        """The failure timer as it now stands (its configured value plus :meth:`allowance_ns`), or None."""
        return None

    def ack_jitter_ns(self) -> int:
        """How much the failure timer allows for ACK-interval jitter, measured: while data flows the
        receiver sends an ACK at least every T (draft §2 item 2), so a gap between two consecutive
        ACKs (numbers n and n + 1: none lost between them) beyond T is jitter, of the receiver's
        timer, the path and this sender's reads. :data:`ACK_JITTER_FACTOR` times the largest such
        excess over the last :data:`ACK_GAP_WINDOW` gaps, at most :data:`ACK_JITTER_CAP_NS`; 0
        before two ACKs came. Sans-IO: the gaps are the ``now_ns`` of the ACKs handed in."""
        if not self._gaps:
            return 0
        return min(self.ACK_JITTER_CAP_NS, self.ACK_JITTER_FACTOR * max(0, self._gaps[0][1] - self.params.t_ns))

    def allowance_ns(self) -> int:
        """What the failure timer (§2 item 4's 2T; go-back-N's rto) waits beyond its configured
        value: the larger of the shell's scheduling slack (:meth:`set_timer_slack`) and the measured
        ACK jitter (:meth:`ack_jitter_ns`), plus :data:`FIRST_ACK_WAIT_NS` until the first ACK."""
        a = max(self.timer_slack_ns, self.ack_jitter_ns())
        return a if self._last_ack_ns is not None else a + self.FIRST_ACK_WAIT_NS

    def _note_ack(self, n: int, newest: int, now_ns: int) -> None:
        """An accepted ACK numbered ``n`` (the previous newest ``newest``) at ``now_ns``: a jitter
        sample if it follows the previous ACK directly and no timer fired in between."""
        last = self._last_ack_ns
        if last is not None and n == newest + 1 and not self._timer_fired:
            gap = now_ns - last
            i = self._gap_i
            self._gap_i = i + 1
            q = self._gaps
            while q and q[-1][1] <= gap:
                q.pop()
            q.append((i, gap))
            if q[0][0] <= i - self.ACK_GAP_WINDOW:
                q.popleft()
            if gap > self.c.ack_gap_max_ns:
                self.c.ack_gap_max_ns = gap
        self._last_ack_ns = now_ns
        self._timer_fired = False

    def payload(self, s: int) -> bytes:
        i = s - self.base
        p = self.params.payload
        return self.data[i * p:(i + 1) * p]

    def _datagram(self, s: int, flags: int, now_ns: int) -> bytes:
        if s == self.end - 1:
            flags |= TcsDataFlag.LAST
        body = self.payload(s)
        c = self.c
        c.sent += 1
        c.bytes_sent += len(body) + TcsData.SIZE
        if self.paced_ns is None and s == self.end - 1:
            self.paced_ns = now_ns - self.started_ns
            self.paced_datagrams, self.paced_bytes = c.sent, c.bytes_sent
        return TcsData(self.flow_id, s & SEQ_MASK, us32(now_ns), flags).to_bytes() + body

    def _slot_ns(self, s: int) -> int:
        return self.params.packet_ns(TcsData.SIZE + len(self.payload(s)))

    # ------------------------------------------------------------------ pacing
    def poll(self, now_ns: int) -> list[bytes]:
        """The datagrams due by ``now_ns`` at the preset rate (send them now, in order).

        A token bucket keeps the long-run rate at the preset one (draft §2 item 1: "keep sending
        packets at the preset sending rate"): the shell's timer wakes the sender late now and then
        (about 1 ms on the live testbed, more on a loaded host), and a wake-up late by L sends
        every slot of L at once, measured at each wake-up as ``now_ns`` minus the slot it asked to
        be woken for (``next_deadline``). The bucket's depth is that lateness, at least
        :data:`BURST` packets and at most :data:`BURST_CAP_NS`; lateness beyond the cap is given
        up (``pacer_dropped_ns``). A sender that had nothing to send earns no credit meanwhile."""
        self._on_time(now_ns)
        self._wake(now_ns)
        out: list[bytes] = []
        if self.done:
            return out
        late = now_ns - self._next_slot
        if late > 0 and self._has_packet():
            c = self.c
            if late > c.pacer_late_max_ns:
                c.pacer_late_max_ns = late
            cap = max(self.BURST_CAP_NS, self.BURST * self.params.packet_ns(TcsData.SIZE + self.params.payload))
            if late > cap:
                c.pacer_dropped_ns += late - cap
                self._next_slot = now_ns - cap
        while self._next_slot <= now_ns:
            # each copy is stamped with its slot (its place in the paced schedule), at least
            # 1 us after the previous copy: copies sent in one batch must still be ordered by
            # tsval, which the loss rule of a T/C-SACK sender compares (1 us: the stamp's unit)
            stamp = max(self._next_slot, self._last_stamp + 1000)
            picked = self._next_packet(stamp)
            if picked is None:
                self._next_slot = max(self._next_slot, now_ns)
                self._idle = True
                break
            self._last_stamp = stamp
            s, flags = picked
            out.append(self._datagram(s, flags, stamp))
            self._next_slot += self._slot_ns(s)
        if not self._idle and not self._has_packet():
            self._idle = True  # nothing left to send: the time until something is due earns nothing
        return out

    def next_deadline(self) -> int | None:
        if self.done:
            return None
        t = self._timer_deadline()
        if self._has_packet():
            t = self._next_slot if t is None else min(t, self._next_slot)
        return t

    def _wake(self, now_ns: int) -> None:
        """An idle pacer that has a packet again starts from ``now_ns``: idle time is no lateness."""
        if self._idle and self._has_packet():
            self._idle = False
            if self._next_slot < now_ns:
                self._next_slot = now_ns

    def _on_time(self, now_ns: int) -> None:
        """Timers (probe / retransmission timeout) due by ``now_ns``."""

    def _timer_deadline(self) -> int | None:
        return None

    def _has_packet(self) -> bool:
        raise NotImplementedError

    def _next_packet(self, stamp_ns: int) -> tuple[int, int] | None:
        """The packet for the slot stamped ``stamp_ns``: (absolute seq, flags), or None."""
        raise NotImplementedError

    # -------------------------------------------------------------------- ACKs
    def receive(self, datagram: bytes, now_ns: int) -> None:
        """A UDP payload from the receiver (HeaderError if it is not a T/C-SACK ACK)."""
        self.on_ack(TcsAck.from_bytes(datagram), now_ns)

    def on_ack(self, ack: TcsAck, now_ns: int) -> None:
        """An ACK, taken only if it is our flow's and consistent with what was sent; anything
        else is counted by reason and changes nothing."""
        c = self.c
        if ack.flow_id != self.flow_id:
            c.foreign += 1
            return
        newest = self._newest_ack
        n = unwrap(ack.ack_seq, newest)  # its number, absolute
        cum = unwrap(ack.cum_ack, self.cum)
        stale = n <= newest
        if stale and not self._reports_more(ack, cum):
            c.stale_acks += 1  # overtaken by a newer ACK: its view of the buffer is older
            return
        if not stale and n >= self._ack_budget(now_ns):
            self.checks.ack_seq_ahead += 1  # more ACKs than our receiver can have sent
            return
        if not self._consistent(ack, cum):
            return
        if stale:
            self.checks.resyncs += 1
        self._note_ack(n, newest, now_ns)
        self._newest_ack = n
        self._newest_rep = ack
        self._newest_cum = cum
        c.acks_rx += 1
        # W32.diff(now_us, tsecr + ack_delay) >= 0, written out: the call cost ~60 ns an ACK
        rtt = ((now_ns // 1000) - ack.tsecr - ack.ack_delay) & _U32
        if rtt < _U32_HALF:
            # the receiver held the ACK ack_delay on purpose; tsval is the send time of the copy
            # that arrived, so retransmissions give unambiguous samples (no Karn rule)
            self.rtt_latest_us = rtt
            self.rtt_min_us = rtt if self.rtt_min_us is None else min(self.rtt_min_us, rtt)
            self.srtt_us = rtt if self.srtt_us is None else 0.875 * self.srtt_us + 0.125 * rtt
        self._on_ack(ack, cum, now_ns)
        self._wake(now_ns)
        if self.done and self.done_ns is None:
            self.done_ns = now_ns

    def _ack_budget(self, now_ns: int) -> int:
        """One past the highest ACK number our receiver can have used by ``now_ns``.

        Every ACK it sends follows at least one data packet that arrived since the previous ACK
        (the N trigger needs N >= 1 of them; the T trigger is armed by one), at most
        ``ACKS_PER_ARRIVAL`` per packet; a path may deliver a copy twice, so arrivals are at most
        twice the copies sent; and one ACK per T elapsed is slack for what a path duplicates
        beyond that (T/C-SACK draft §2: the ACK clock runs on N packets or T time). Numbers
        beyond it are forged: taking one would make the receiver's own ACKs look stale."""
        return 2 * self.ACKS_PER_ARRIVAL * self.c.sent + (now_ns - self.started_ns) // self.params.t_ns + 1

    def _reports_more(self, ack: TcsAck, cum: int) -> bool:
        """Whether ``ack``, numbered at or below the newest accepted ACK, still reports more than
        it: more packets arrived, or as many and a copy sent later echoed. A receiver's view only
        grows, so the newest accepted ACK cannot then be newer than ``ack``: it was forged (a
        number within the budget, content copied), and the sender follows its receiver's
        numbering again instead of dropping its ACKs as stale until the count catches up."""
        newest = self._newest_rep
        if newest is None:
            return False
        mine, theirs = _reported(ack, cum, self.base), _reported(newest, self._newest_cum, self.base)
        return mine > theirs or (mine == theirs and us_before(newest.tsecr, ack.tsecr))

    def _consistent(self, ack: TcsAck, cum: int) -> bool:
        """Whether ``ack`` agrees with what was sent; if not, counted by reason (and as bogus)."""
        checks = self.checks
        limit = self._sent_limit()
        span = self._last_stamp // 1000 - self._first_us  # -1: nothing sent yet
        fin = ack.flags & _FIN_SEEN
        if span < _U32 and ((ack.tsecr - self._first_us) & _U32) > span:
            checks.tsecr_unsent += 1  # tsecr echoes the tsval of a copy we sent
        elif cum > limit or cum < self.base:
            checks.cum_unsent += 1
        elif ack.blocks and cum + ((ack.blocks[-1][1] - ack.cum_ack) & SEQ_MASK) > limit:
            checks.sack_unsent += 1  # (the decoder checked the runs ascend: the last ends highest)
        elif (cum >= self.end and not fin) or (fin and limit < self.end):
            checks.fin_mismatch += 1  # a receiver with everything has seen LAST; LAST is ours to send
        else:
            return True
        self.c.bogus_acks += 1
        return False

    def _sent_limit(self) -> int:
        """One past the highest packet sent so far (absolute)."""
        raise NotImplementedError

    def _on_ack(self, ack: TcsAck, cum: int, now_ns: int) -> None:
        raise NotImplementedError

    def counters(self) -> dict[str, CounterValue]:
        out: dict[str, CounterValue] = asdict(self.c)
        out.update(packets=self.packets, cum_acked=self.cum - self.base, done=self.done,
                   rtt_min_us=self.rtt_min_us, srtt_us=None if self.srtt_us is None else round(self.srtt_us, 1),
                   timer_slack_ns=self.timer_slack_ns, timeout_ns=self.timeout_ns(), paced_ns=self.paced_ns,
                   paced_datagrams=self.paced_datagrams, paced_bytes=self.paced_bytes,
                   ack_jitter_ns=self.ack_jitter_ns())
        return out

    def check_counters(self) -> dict[str, int]:
        """What :class:`SenderChecks` counted, as JSON."""
        return asdict(self.checks)


def _reported(ack: TcsAck, cum: int, base: int) -> int:
    """How many packets ``ack`` (cumulative point ``cum``, absolute) says have arrived."""
    return cum - base + sum((e - s) & SEQ_MASK for s, e in ack.blocks)


if TYPE_CHECKING:
    # mypy checks here that both bases, and so every engine, keep netstack.engine's contract
    _receiver_is_an_engine: type[Engine] = ReceiverBase
    _sender_is_an_engine: type[Engine] = SenderBase


__all__ = ["CounterValue", "HeaderError", "ReceiverBase", "ReceiverChecks", "ReceiverCounters",
           "SenderBase", "SenderChecks", "SenderCounters", "unwrap", "us32", "us_before"]
