"""The T/C-SACK sender ("An Updated ACK mechanism based on RDMA", §2), sans-IO.

"The sender continuously sends packets according to the preset transmission rate without
being limited by the sliding window size ... After receiving the ACK packet, the sender
checks whether any packet is lost according to the rules. If any packet is lost, the sender
resends the lost packet ... If the sender does not receive an ACK packet within 2T, it
considers that the ACK packet is lost and resends the last packet."

The draft leaves "the rules" open. Ours needs no RTT estimate and no timer per packet (the
draft's aim: "gets rid of the limitation of sliding window size setting and RTT
measurement"): a packet the ACK reports missing is lost if the copy the ACK echoes
(``tsecr``, the most recently arrived packet) was sent *after* the packet's own latest copy.
On a FIFO path a later copy cannot arrive before an earlier one, so this never resends a
packet that is merely still in flight, and a lost retransmission is resent as soon as any
later packet gets through. Only gaps below the ACK's last SACK block count (nothing is said
above it: a truncated block list must not look like loss).

Each slot of the pacer carries, in this order: the 2T probe (the highest packet sent so far,
``PROBE``), a retransmission (``RETX``; skipped if an ACK covered it meanwhile), a new packet.
Retransmissions share the preset rate: the rate is a line rate, not a goodput target.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from headers.tcsack import TcsAck, TcsDataFlag

from .common import SenderBase, SenderCounters, unwrap, us32, us_before
from .params import TcsParams
from .rangeset import RangeSet


@dataclass(slots=True)
class TcsSenderCounters(SenderCounters):
    losses_detected: int = 0  # packets the loss rule queued for a retransmission
    retx_skipped: int = 0  # ... that an ACK covered before their slot came


class TcsSender(SenderBase):
    c: TcsSenderCounters

    def __init__(self, params: TcsParams, data: bytes, flow_id: int = 0, start_seq: int = 0,
                 now_ns: int = 0) -> None:
        super().__init__(params, data, flow_id, start_seq, now_ns, counters=TcsSenderCounters())
        self._next_new = self.base
        #: what ACKs reported above the cumulative point
        self._sacked = RangeSet()
        #: send time (us32) of each unacknowledged packet's latest copy
        self._sent_us: dict[int, int] = {}
        self._retx: deque[int] = deque()
        self._queued: set[int] = set()
        self._probe = False
        #: the 2T clock: restarted by every ACK (and by each probe)
        self._ack_clock = now_ns

    # ------------------------------------------------------------------ pacing
    def _has_packet(self) -> bool:
        return self._probe or bool(self._retx) or self._next_new < self.end

    def timeout_ns(self) -> int:
        """§2's 2T, plus the measured ACK jitter or the live shell's scheduling slack, and the first
        ACK's round trip until it came (SenderBase.allowance_ns)."""
        return 2 * self.params.t_ns + self.allowance_ns()

    def _timer_deadline(self) -> int | None:
        if self._next_new == self.base:
            return None  # nothing sent yet: nothing to probe
        return self._probe_at()

    def _probe_at(self) -> int:
        """When the 2T probe fires: 2T (plus the allowance) after the last ACK, as §2 item 4 says,
        but never before the newest packet's ACK can be back. The draft's 2T is T for the receiver's
        ACK clock and T for the path; on a path whose round trip is longer than T, the first ACK, and
        the ACK of a packet sent after the sender had nothing to send (a retransmission at the end
        of a transfer), come a round trip plus T after the packet, so the probe waits for the
        measured RTT (srtt) plus T after the newest copy sent, plus the same allowance. While new
        packets go out, their ACKs will come: this moves the probe on, and only a silent sender,
        whose last packets may have been lost with nothing after them to show it, probes. The RTT
        counts at most ``FIRST_ACK_WAIT_NS`` (the round trip assumed before any sample): an ACK that
        passed the checks but echoes an old stamp (docs/security.md#tc-sack) cannot hold the probe off
        for longer."""
        at = self._ack_clock + self.timeout_ns()
        if self.srtt_us is not None:
            rtt = min(int(self.srtt_us * 1000), self.FIRST_ACK_WAIT_NS)
            at = max(at, self._last_stamp + rtt + self.params.t_ns + self.allowance_ns())
        return at

    def _on_time(self, now_ns: int) -> None:
        if self.done or self._next_new == self.base:
            return
        if now_ns >= self._probe_at():
            self._probe = True  # §2: no ACK within 2T (+ allowance): resend the last packet
            self._ack_clock = now_ns
            self._timer_fired = True

    def _next_packet(self, stamp_ns: int) -> tuple[int, int] | None:
        t = us32(stamp_ns)
        if self._probe:
            self._probe = False
            s = self._next_new - 1
            self._sent_us[s] = t
            self.c.probes_sent += 1
            return s, TcsDataFlag.PROBE
        retx = self._retx
        while retx:
            s = retx.popleft()
            self._queued.discard(s)
            if s < self.cum or s in self._sacked:
                self.c.retx_skipped += 1  # an ACK said it arrived after all
                continue
            self._sent_us[s] = t
            self.c.retx_sent += 1
            return s, TcsDataFlag.RETX
        s = self._next_new
        if s >= self.end:
            return None
        self._next_new = s + 1
        self._sent_us[s] = t
        self.c.sent_new += 1
        return s, 0

    # -------------------------------------------------------------------- ACKs
    def _sent_limit(self) -> int:
        return self._next_new

    def _on_ack(self, ack: TcsAck, cum: int, now_ns: int) -> None:
        self._ack_clock = now_ns
        if cum > self.cum:
            sent = self._sent_us
            for c in range(self.cum, cum):
                sent.pop(c, None)
            self.cum = cum
            self._sacked.drop_below(cum)
        hole_start = cum
        sacked = self._sacked
        # every run lies within what was sent (SenderBase._consistent refused the ACK otherwise)
        for ws, we in ack.blocks:
            s = unwrap(ws, cum)
            e = s + ((we - ws) & 0xFFFFFFFF)
            sacked.add(s, e)
            self._check_hole(hole_start, s, ack.tsecr)
            hole_start = e
            for c in range(s, e):
                self._sent_us.pop(c, None)

    def _check_hole(self, start: int, end: int, tsecr: int) -> None:
        """Packets in ``[start, end)`` not yet covered and sent before the echoed copy: lost."""
        sent = self._sent_us
        queued = self._queued
        sacked = self._sacked
        for c in range(start, end):
            if c in queued or c in sacked:
                continue
            t = sent.get(c)
            if t is not None and us_before(t, tsecr):
                queued.add(c)
                self._retx.append(c)
                self.c.losses_detected += 1
