"""The go-back-N baseline: RoCE RC's loss recovery, which T/C-SACK is measured against ("An
Updated ACK mechanism based on RDMA", §1, names "the sensitivity of the go-back-N packet loss
retransmission algorithm used by RDMA to packet loss" as what it fixes; docs/tcsack.md), sans-IO.

As an RC responder and requester do it (IBTA, "NAK sequence error"):

- The receiver accepts only the expected packet (``epsn``, here the cumulative point);
  anything above it is discarded. The first out-of-order packet of a gap draws one NAK
  (``NAK`` flag, ``cum_ack`` = the expected packet) at once; no further NAK until ``epsn``
  moves. In-order packets are acknowledged with the same T/N coalescing as T/C-SACK, so the
  two differ only in recovery; a duplicate counts toward the next ACK.
- The sender paces at the same preset rate and never waits for ACKs; a NAK makes it go back
  and resend *everything* from the NAK'd packet; with no ACK progress for ``rto`` (default
  4T) it goes back to the cumulative point. A go-back whose first packet is lost again can
  only be recovered by the timeout: the receiver NAKs a gap once.

Same wire format as T/C-SACK (``TcsData``/``TcsAck`` without blocks), so the same tools and
captures serve both.
"""

from __future__ import annotations

from dataclasses import dataclass

from headers.tcsack import TcsAck, TcsAckFlag, TcsDataFlag

from .common import ReceiverBase, ReceiverCounters, SenderBase, SenderCounters
from .params import TcsParams


@dataclass(slots=True)
class GbnReceiverCounters(ReceiverCounters):
    out_of_order_drops: int = 0  # above the expected packet: discarded
    naks_sent: int = 0  # one per gap


@dataclass(slots=True)
class GbnSenderCounters(SenderCounters):
    go_backs: int = 0  # NAKs and timeouts that moved the next packet back
    timeouts: int = 0  # rto without progress


class GbnReceiver(ReceiverBase):
    c: GbnReceiverCounters

    def __init__(self, params: TcsParams, flow_id: int = 0, start_seq: int = 0) -> None:
        super().__init__(params, flow_id, start_seq, counters=GbnReceiverCounters())
        self._nak_for: int | None = None

    def _accept(self, s: int, payload: bytes, now_ns: int) -> list[bytes]:
        if s == self.cum:
            self.cum = s + 1
            return [payload]
        c = self.c
        if s < self.cum:
            c.duplicates += 1
            return []
        c.out_of_order_drops += 1
        if self._nak_for != self.cum:
            self._nak_for = self.cum
            c.naks_sent += 1
            self._send_ack(now_ns, count=False, extra_flags=TcsAckFlag.NAK)
        return []


class GbnSender(SenderBase):
    c: GbnSenderCounters
    #: a packet above the expected one draws a NAK at once and still counts toward the next ACK
    ACKS_PER_ARRIVAL = 2

    def __init__(self, params: TcsParams, data: bytes, flow_id: int = 0, start_seq: int = 0,
                 now_ns: int = 0) -> None:
        super().__init__(params, data, flow_id, start_seq, now_ns, counters=GbnSenderCounters())
        self._next = self.base  # next packet to send (moves back on a NAK or a timeout)
        self._high = self.base  # one past the highest packet ever sent
        self._progress_ns = now_ns  # the RTO clock: last ACK that moved the cumulative point

    def _has_packet(self) -> bool:
        return self._next < self.end

    def timeout_ns(self) -> int:
        """RC's retransmission timeout (``rto``), plus the measured ACK jitter or the live shell's
        scheduling slack, and the first ACK's round trip until it came (SenderBase.allowance_ns):
        a go-back of everything in flight must mean no progress, not a process that waited for the CPU."""
        return self.params.rto + self.allowance_ns()

    def _timer_deadline(self) -> int | None:
        if self._high == self.base:
            return None
        return self._progress_ns + self.timeout_ns()

    def _on_time(self, now_ns: int) -> None:
        if self.done or self._high == self.base:
            return
        if now_ns >= self._progress_ns + self.timeout_ns():
            self.c.timeouts += 1
            self._go_back(self.cum)
            self._progress_ns = now_ns
            self._timer_fired = True

    def _next_packet(self, stamp_ns: int) -> tuple[int, int] | None:
        s = self._next
        if s >= self.end:
            return None
        self._next = s + 1
        if s < self._high:
            self.c.retx_sent += 1
            return s, TcsDataFlag.RETX
        self._high = s + 1
        self.c.sent_new += 1
        return s, 0

    def _sent_limit(self) -> int:
        return self._high

    def _on_ack(self, ack: TcsAck, cum: int, now_ns: int) -> None:
        if cum > self.cum:
            self.cum = cum
            self._progress_ns = now_ns
            if self._next < cum:
                self._next = cum  # no need to resend what arrived
        if ack.flags & TcsAckFlag.NAK:
            # from the cumulative point at the lowest: what an ACK acknowledged is never resent
            # (a genuine NAK never reports less than an earlier ACK; a replayed one may)
            self._go_back(self.cum)

    def _go_back(self, to: int) -> None:
        if to < self._next:
            self.c.go_backs += 1
            self._next = to
