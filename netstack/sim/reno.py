"""A loss-based TCP model for virtual time: NewReno congestion control on a full-duplex connection.

This is a *model* of TCP, written for the simulator's host models (``netstack.sim.tcp``), not a
TCP implementation to talk to a kernel. It is sans-IO like every engine in netstack:
``receive(segment, now_ns)`` and ``poll(now_ns) -> [Segment]``, ``next_deadline()``.

What it models, after the RFCs that define classic loss-based TCP:

- slow start and congestion avoidance (RFC 5681 §3.1), the initial window of 10 segments
  (RFC 6928), byte counting capped at one MSS per ACK in slow start (RFC 3465, L = 1);
- fast retransmit on the third duplicate ACK and NewReno fast recovery, partial ACKs
  retransmitting the next hole (RFC 5681 §3.2, RFC 6582);
- the retransmission timer (RFC 6298): SRTT/RTTVAR, a minimum RTO (Linux: 200 ms), exponential
  backoff, Karn's rule (no RTT sample from a retransmitted segment); on expiry the window
  falls to one segment and sending goes back to the first unacknowledged byte;
- a receiver that ACKs every segment at once (Linux's quick-ACK mode; no delayed ACKs),
  buffers out-of-order data within its window and hands on the byte stream in order.

What it leaves out, on purpose: the handshake and FIN (connections are set up out of band,
both ends knowing each other's initial sequence number), SACK, timestamps, window scaling
(the window is a parameter, not carried), Nagle (sockets are TCP_NODELAY, as the live
``rr-client`` sets), pacing and ECN. Sequence numbers are 32-bit on the wire from a chosen
initial number, so a transfer can cross the wrap; inside, every offset is absolute.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, NamedTuple

from ..engine import ActionQueue, Engine

_M32 = 0xFFFFFFFF

#: TCP flag bits (RFC 9293 §3.1)
ACK = 0x10
PSH = 0x08


@dataclass(frozen=True)
class RenoParams:
    """The model's knobs; the defaults are Linux's where Linux has one."""

    #: payload bytes per segment (1500 B MTU - 20 B IPv4 - 20 B TCP without options)
    mss: int = 1460
    #: initial congestion window, in segments (RFC 6928)
    init_cwnd: int = 10
    #: retransmission timer bounds and its value before the first RTT sample (RFC 6298 §2)
    min_rto_ns: int = 200_000_000
    max_rto_ns: int = 60_000_000_000
    init_rto_ns: int = 1_000_000_000
    #: the receive window each end offers (bytes); the send window is min(cwnd, this)
    rwnd: int = 4 * 1024 * 1024
    #: duplicate ACKs that trigger fast retransmit (RFC 5681 §3.2)
    dupack_threshold: int = 3

    def __post_init__(self) -> None:
        if not 1 <= self.mss <= 65_495:
            raise ValueError(f"mss must be 1..65495 bytes, got {self.mss}")
        if self.init_cwnd < 1 or self.dupack_threshold < 1:
            raise ValueError("init_cwnd and dupack_threshold must be >= 1")
        if not 0 < self.min_rto_ns <= self.init_rto_ns <= self.max_rto_ns:
            raise ValueError("need 0 < min_rto_ns <= init_rto_ns <= max_rto_ns")
        if self.rwnd < self.mss:
            raise ValueError(f"rwnd ({self.rwnd}) must hold at least one segment ({self.mss})")


class Segment(NamedTuple):
    """What one TCP segment carries that the model reads: 32-bit seq/ack, flags, payload."""

    seq: int
    ack: int
    flags: int
    payload: bytes


def _signed32(x: int) -> int:
    x &= _M32
    return x - (1 << 32) if x >= 1 << 31 else x


@dataclass
class RenoCounters:
    """What one end counted (``RenoConnection.counters()`` adds the window state)."""

    segments_sent: int = 0
    data_segments_sent: int = 0
    bytes_sent: int = 0
    retransmits: int = 0
    fast_retransmits: int = 0
    timeouts: int = 0
    recoveries: int = 0
    dupacks_rx: int = 0
    acks_rx: int = 0
    segments_rx: int = 0
    bytes_delivered: int = 0
    ooo_segments: int = 0
    duplicate_segments: int = 0
    outside_window: int = 0


class RenoConnection:
    """One end of an established TCP connection (module docstring).

    ``isn`` is this end's initial sequence number, ``peer_isn`` the other end's. The application
    writes bytes with :meth:`write`; what arrives in order is appended to :attr:`received` (the
    application consumes it with :meth:`read`).
    """

    def __init__(self, params: RenoParams | None = None, *, isn: int = 0, peer_isn: int = 0) -> None:
        p = params or RenoParams()
        self.params = p
        self.isn = isn & _M32
        self.peer_isn = peer_isn & _M32
        # --- sending half: absolute byte offsets of this end's stream
        self._buf = bytearray()      # unacknowledged and unsent bytes, from snd_una
        self.snd_una = 0
        self.snd_nxt = 0
        self.snd_max = 0             # highest offset ever sent (snd_nxt goes back after an RTO)
        self.cwnd = p.init_cwnd * p.mss
        self.ssthresh = 1 << 62
        self.dupacks = 0
        self.in_recovery = False
        self.recover = 0             # RFC 6582: snd_max when the last recovery began
        self.srtt: float | None = None
        self.rttvar = 0.0
        self.rto = p.init_rto_ns
        self._rto_deadline: int | None = None
        self._timed: tuple[int, int] | None = None  # (offset whose ACK gives an RTT sample, sent at)
        self._retx_now: list[int] = []               # offsets to retransmit at the next poll
        self.cwnd_peak = self.cwnd
        # --- receiving half
        self.rcv_nxt = 0
        self._ooo: dict[int, bytes] = {}             # out-of-order segments by absolute offset
        self._ooo_bytes = 0
        self.received = bytearray()
        self._ack_due = False
        self.c = RenoCounters()
        #: segments are poll()'s return value: nothing is queued (netstack.engine)
        self.actions = ActionQueue()

    # ------------------------------------------------------------------ application
    def write(self, data: bytes) -> None:
        """Queue ``data`` for sending (sent at the next :meth:`poll` the window allows)."""
        self._buf += data

    def read(self) -> bytes:
        """Everything received in order since the last read."""
        out = bytes(self.received)
        self.received.clear()
        return out

    @property
    def unacked(self) -> int:
        """Bytes written and not yet acknowledged (0: everything written has arrived)."""
        return len(self._buf)

    @property
    def flight(self) -> int:
        return self.snd_nxt - self.snd_una

    # ---------------------------------------------------------------------- input
    def receive(self, seg: Segment, now_ns: int) -> None:
        """One segment from the peer (its checksum already checked by the host)."""
        self.c.segments_rx += 1
        if seg.flags & ACK:
            self._on_ack(self.snd_una + _signed32(seg.ack - (self.isn + self.snd_una)), len(seg.payload), now_ns)
        if seg.payload:
            self._on_data(self.rcv_nxt + _signed32(seg.seq - (self.peer_isn + self.rcv_nxt)), seg.payload)

    def _on_data(self, off: int, data: bytes) -> None:
        self._ack_due = True  # every data segment is answered (quick ACK), in order or not
        end = off + len(data)
        if end <= self.rcv_nxt:
            self.c.duplicate_segments += 1
            return
        if off >= self.rcv_nxt + self.params.rwnd:
            self.c.outside_window += 1
            return
        if off > self.rcv_nxt:
            if off not in self._ooo or len(self._ooo[off]) < len(data):
                self._ooo_bytes += len(data) - len(self._ooo.get(off, b""))
                self._ooo[off] = data
            self.c.ooo_segments += 1
            return
        self._deliver(data[self.rcv_nxt - off:])
        ooo = self._ooo
        while ooo:
            d = ooo.pop(self.rcv_nxt, None)
            if d is not None:
                self._ooo_bytes -= len(d)
                self._deliver(d)
                continue
            # segments cut at other offsets (a resend after the writes changed): scan, rarely
            touching = [o for o in ooo if o < self.rcv_nxt]
            if not touching:
                break
            for o in touching:
                d = ooo.pop(o)
                self._ooo_bytes -= len(d)
                if o + len(d) > self.rcv_nxt:
                    self._deliver(d[self.rcv_nxt - o:])

    def _deliver(self, data: bytes) -> None:
        self.received += data
        self.rcv_nxt += len(data)
        self.c.bytes_delivered += len(data)

    def _on_ack(self, ack: int, payload_len: int, now: int) -> None:
        p = self.params
        self.c.acks_rx += 1
        if ack > self.snd_max or ack < self.snd_una:
            return  # acknowledges what was never sent, or old news
        if ack > self.snd_una:
            acked = ack - self.snd_una
            del self._buf[:acked]
            self.snd_una = ack
            if self.snd_nxt < ack:
                self.snd_nxt = ack  # an ACK after an RTO can cover bytes not yet re-sent
            self.rto_backoff_reset()
            if self._timed is not None and ack > self._timed[0]:
                self._rtt_sample(now - self._timed[1])
                self._timed = None
            if self.in_recovery:
                if ack >= self.recover:
                    # full ACK: leave recovery with the window halved (RFC 6582 §3.2 step 3, option 1)
                    self.in_recovery = False
                    self.cwnd = min(self.ssthresh, max(self.flight, p.mss) + p.mss)
                else:
                    # partial ACK: the next hole was lost too; resend it, deflate by what was acked
                    self._retx_now.append(self.snd_una)
                    self.cwnd = max(p.mss, self.cwnd - acked + p.mss)
            elif self.cwnd < self.ssthresh:
                self.cwnd += min(acked, p.mss)
            else:
                self.cwnd += max(1, p.mss * p.mss // self.cwnd)
            self.cwnd_peak = max(self.cwnd_peak, self.cwnd)
            self.dupacks = 0
            self._rto_deadline = now + self.rto if self.snd_una < self.snd_max else None
            return
        # ack == snd_una: a duplicate only if it carries no data and data is outstanding (RFC 5681 §2)
        if payload_len or self.snd_una == self.snd_max:
            return
        self.dupacks += 1
        self.c.dupacks_rx += 1
        if self.in_recovery:
            self.cwnd += p.mss  # each duplicate means a segment left the network
        elif self.dupacks == p.dupack_threshold and self.snd_una >= self.recover:
            self.ssthresh = max(self.flight // 2, 2 * p.mss)
            self.recover = self.snd_max
            self.in_recovery = True
            self.c.recoveries += 1
            self.c.fast_retransmits += 1
            self._retx_now.append(self.snd_una)
            self.cwnd = self.ssthresh + p.dupack_threshold * p.mss

    def rto_backoff_reset(self) -> None:
        """New data was acknowledged: the timer goes back to the estimate (RFC 6298 §5.7)."""
        if self.srtt is not None:
            self.rto = self._rto_from_estimate()

    def _rtt_sample(self, r: int) -> None:
        if self.srtt is None:
            self.srtt, self.rttvar = float(r), r / 2
        else:
            self.rttvar = 0.75 * self.rttvar + 0.25 * abs(self.srtt - r)
            self.srtt = 0.875 * self.srtt + 0.125 * r
        self.rto = self._rto_from_estimate()

    def _rto_from_estimate(self) -> int:
        assert self.srtt is not None
        p = self.params
        return int(min(p.max_rto_ns, max(p.min_rto_ns, self.srtt + 4 * self.rttvar)))

    # --------------------------------------------------------------------- timers
    def next_deadline(self) -> int | None:
        return self._rto_deadline

    def on_timer(self, now_ns: int) -> None:
        d = self._rto_deadline
        if d is None or now_ns < d:
            return
        p = self.params
        # RFC 5681 §3.1 eq. 4 and RFC 6298 §5.5-5.6: halve, one segment, back off, go back
        self.ssthresh = max(self.flight // 2, 2 * p.mss)
        self.cwnd = p.mss
        self.rto = min(p.max_rto_ns, self.rto * 2)
        self.recover = self.snd_max
        self.in_recovery = False
        self.dupacks = 0
        self.snd_nxt = self.snd_una
        self._timed = None
        self._retx_now.clear()
        self.c.timeouts += 1
        self._rto_deadline = now_ns + self.rto

    # --------------------------------------------------------------------- output
    def poll(self, now_ns: int) -> list[Segment]:
        """The segments to send now: due retransmissions, then new data the window allows,
        then a pure ACK if data arrived and nothing else carried the acknowledgement."""
        self.on_timer(now_ns)
        p = self.params
        out: list[Segment] = []
        for off in self._retx_now:
            if off >= self.snd_una and off < self.snd_max:
                out.append(self._segment(off, min(p.mss, self.snd_max - off), now_ns, resend=True))
        self._retx_now.clear()
        wnd = min(self.cwnd, p.rwnd)
        end = self.snd_una + len(self._buf)
        while self.snd_nxt < end:
            size = min(p.mss, end - self.snd_nxt)
            if self.snd_nxt - self.snd_una + size > wnd:
                break
            resend = self.snd_nxt < self.snd_max
            out.append(self._segment(self.snd_nxt, size, now_ns, resend=resend))
            self.snd_nxt += size
            self.snd_max = max(self.snd_max, self.snd_nxt)
        if self._ack_due and not out:
            out.append(Segment((self.isn + self.snd_nxt) & _M32, (self.peer_isn + self.rcv_nxt) & _M32, ACK, b""))
            self.c.segments_sent += 1
        self._ack_due = False
        if out and self._rto_deadline is None and self.snd_una < self.snd_max:
            self._rto_deadline = now_ns + self.rto
        return out

    def _segment(self, off: int, size: int, now: int, *, resend: bool) -> Segment:
        i = off - self.snd_una
        data = bytes(self._buf[i:i + size])
        if resend:
            self.c.retransmits += 1
            if self._timed is not None and self._timed[0] >= off:
                self._timed = None  # Karn: this offset's ACK may now answer either copy
        elif self._timed is None:
            self._timed = (off, now)
        self.c.segments_sent += 1
        self.c.data_segments_sent += 1
        self.c.bytes_sent += size
        return Segment((self.isn + off) & _M32, (self.peer_isn + self.rcv_nxt) & _M32, ACK | PSH, data)

    def counters(self) -> dict[str, int | float | None]:
        out: dict[str, int | float | None] = dict(asdict(self.c))
        out.update(cwnd=self.cwnd, cwnd_peak=self.cwnd_peak,
                   ssthresh=None if self.ssthresh >= 1 << 62 else self.ssthresh,
                   srtt_us=None if self.srtt is None else round(self.srtt / 1000, 1), rto_us=self.rto // 1000,
                   unacked=self.unacked, ooo_bytes=self._ooo_bytes)
        return out


if TYPE_CHECKING:  # mypy checks that the model keeps the engine contract
    _engine: type[Engine] = RenoConnection

__all__ = ["ACK", "PSH", "RenoConnection", "RenoCounters", "RenoParams", "Segment"]
