"""The LinkGuardian receiver engine (LinkGuardian §3.1, §3.3, §3.5; Algorithms 1 and 2), sans-IO.

One instance per protected ingress port. Inputs: the data tag of each protected frame
(or dummy) with the untagged inner frame, and ``on_timer(now)``; outputs: the frames to
deliver (returned, in delivery order), and in :attr:`LGReceiver.actions` (``netstack.engine``)
loss notifications for the highest-priority class (``Transmit``) and backpressure transitions
(``Backpressure``), which the switch feature takes after every call, plus leading ACKs on
demand (:meth:`piggyback`, :meth:`courier`).

State, all in *absolute* counters (16-bit seq_no + era resolved with :func:`unwrap`
against ``expected``, §3.5):

- ``expected``: one past the highest seq_no seen. A data frame or a dummy (§3.2: it
  carries the *next* seq_no) ahead of it reveals a hole ``expected .. seq - 1``: one loss
  notification per 255 frames (``hole_size`` is 8 bits) goes back at once. Open holes are
  kept as *runs* (first, end, time detected), not one record per missing frame, so what a
  single frame costs does not grow with the width of the gap it reveals (below, "The work one
  frame can cause").
- ``ack_no`` (blocking mode, Algorithm 1): the next frame to deliver. ``seq == ack_no``:
  deliver and advance (then drain the reordering buffer); ``seq > ack_no``: hold it in the
  reordering buffer; ``seq < ack_no`` (or already held): drop, a duplicate. ackNoTimeout
  (§3.5) gives up on a hole that was not repaired in time and lets ``ack_no`` pass it.
- The reordering buffer *is* a recirculation port's queue, as on Tofino (§3.3, Fig. 6,
  Algorithm 1 line 6: "recirculate(); will be subjected to the algo again"). With
  ``recirc_rate_bps`` > 0 every held frame keeps cycling: the port serves its queue at
  that rate, and at the end of each pass the frame at the head is checked against
  ``ack_no`` again: forwarded if it is next, else sent round to the tail. Frames arriving
  out of order join the queue in sequence order among the held ones (``recirc_order`` "seq",
  the default; "fifo": at the tail, wherever the rotation stands, which scrambles the queue at
  steady rates below the port's, see LGParams); only the frame ``seq == ack_no`` coming off
  the link (the repair) is forwarded directly. So the buffer drains only at the recirculation
  rate minus the arrival rate, and after a repair it may first have to come round once more
  (the queue is in whatever rotation the cycling left it). With the port as fast as the link
  (the paper's 100G case) and traffic at line rate it never drains: every loss adds its
  hole's worth and the rotation, until backpressure pauses the sender or, without it, the
  buffer overflows (§4.2, Fig. 9b). Rate 0: a software shortcut, held frames leave the
  instant they are next in line and cost nothing while they wait.
- Backpressure (Algorithm 2, §3.3): pause the sender's normal queue when the reordering
  buffer reaches ``pauseThreshold``, resume at ``resumeThreshold``; only state changes are
  emitted (``curr_state``).
- LinkGuardianNB (tag bit ``blocking = 0``): deliver at once, no buffer, no pauses; a
  frame is still delivered at most once (it must be new or fill an open hole). Open holes
  are forgotten after ackNoTimeout too, which bounds the record.
- Leading ACK (§3.1): the *in-order point*, the highest counter below which nothing is
  still awaited (blocking: ``ack_no - 1``; NB: just below the lowest open hole). Each new
  value is sent ``lack_repeats`` times, piggybacked on reverse frames when there are some,
  else by explicit couriers from the lowest-priority idle source.

Why the in-order point and not the highest seq seen (which the public P4 carries in its
notifications): the sender frees every copy at or below a leading ACK. A value that
never passes an open hole cannot free a frame whose retransmission is still needed, even
if the notification is overtaken or lost, and even though the software switch simulates
its egress link in slightly delayed steps (a piggybacked value computed "later" than the
frame's dequeue time is still safe). The price is a Tx buffer that also holds the frames
behind a hole until it is repaired, about one retransmission delay's worth.

The work one frame can cause. A data tag is unsealed: anyone who can put a frame on the
protected link can choose its seq_no (docs/security.md). The seq_no may lie up to
``_resync_ahead`` (the sender's Tx buffer in minimum-size frames, at most N/4) ahead of
``expected`` and still be taken as a hole, so nothing the receiver does per frame may
walk the counters of a gap:

- open holes are runs ``[first, end, detected_ns]`` in ``_holes`` (ascending, disjoint;
  ``_open`` counts the frames in them). Detecting a gap appends one run; a retransmission
  finds its run by bisection and trims or splits it; ackNoTimeout and abandonment (more
  holes open than the sender can buffer) take whole runs, or trim the oldest, from the
  front. Every run stands for one frame that revealed a gap or filled one, so the work
  spent on runs is O(log runs) per frame plus O(1) amortised per run ever made;
- ``ack_no`` steps over what is neither held nor awaited (given-up holes, frames dropped on
  overflow or delivered in NB mode) in one jump, to the first open hole or the smallest
  held counter (``_held``, a heap of the reordering buffer's counters: every one is at or
  past ``ack_no``, so the one leaving is always the smallest);
- loss notifications: ceil(gap / 255), so at most ceil(_resync_ahead / 255) for one frame
  (14 with the 200 KB default, never more than 65): the window already bounds them, and
  lower would leave part of a genuine burst the sender still buffers unreported (see
  MAX_HOLE_PER_NOTIFICATION).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, fields
from heapq import heappop, heappush
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from headers.errors import HeaderError
from headers.linkguardian import (
    DATA_BLOCKING,
    DATA_DUMMY,
    DATA_RETX,
    ETHERTYPE,
    LACK_EXPLICIT,
    LACK_PIGGYBACKED,
    LOSS_HEAD,
    LOSS_NOTIFICATION,
    SEQ_SPACE,
    TAG_HEAD,
    LGType,
    era_flag,
    unwrap,
)
from headers.registry import MIN_FRAME

from ..engine import ActionQueue, Backpressure, Engine, Transmit
from ..ethernet import line_time_ns
from .params import LGParams
from .sender import LG_CONTROL_MAC

#: A seq_no further than this ahead of ``expected`` is not a hole but a new stream (the
#: sender was restarted, or the receiver attached mid-stream): the receiver resynchronises
#: (counted) instead of reporting tens of thousands of losses. Well inside N/2, so unwrap
#: is exact for everything closer.
RESYNC_DISTANCE = SEQ_SPACE // 4
#: Behind ``expected``, only open holes are legitimately far back (a retransmission behind
#: a full reordering buffer: 200 KB of 64-byte frames is ~3,100 frames). Anything else this
#: far behind means the sender started again from a lower counter.
RESYNC_BEHIND = 4096
#: An *original* (neither a retransmission nor a copy: a first transmission or a dummy) this far
#: behind ``expected`` can only come from a sender that started again at a lower counter (a
#: restarted switch): first transmissions leave in counter order over a FIFO link (§3.5), so
#: anything but a duplicate on the wire arrives at or above ``expected``. Resync at once
#: rather than dropping up to RESYNC_BEHIND of its frames as duplicates.
RESTART_BEHIND = 64
#: A receiver that has seen nothing yet assumes the sender starts at counter 0 with it, so that
#: losing the very first frames is a hole like any other. A first counter beyond this says the
#: sender was already running (this receiver restarted): start from that frame instead of
#: reporting everything before it lost, which would make the sender retransmit frames that
#: were delivered before the restart (duplicates).
FRESH_SLACK = 256
#: hole_size is an 8-bit field: a longer gap is reported in several notifications.
#:
#: How many one frame can cause: a gap is at most ``_resync_ahead`` frames (the sender's Tx buffer
#: in minimum-size frames, never more than RESYNC_DISTANCE; anything wider is a new stream), so
#: at most ceil(_resync_ahead / 255) notifications: 14 with the 200 KB default,
#: MAX_NOTIFICATIONS_PER_FRAME (65) whatever the parameters. The window already bounds them and
#: no lower bound is added on purpose: LinkGuardian §3 reports a loss at once so that the sender
#: retransmits it from its Tx buffer, and a genuine burst (a link flap loses all that is on the
#: wire) can be as wide as that buffer. The Tofino prototype only handled 5 consecutive losses
#: (§3.5, docs/wire-formats.md); a software sender has no such register limit, and a shorter
#: report would leave frames it still buffers to ackNoTimeout.
MAX_HOLE_PER_NOTIFICATION = 255
MAX_NOTIFICATIONS_PER_FRAME = -(-RESYNC_DISTANCE // MAX_HOLE_PER_NOTIFICATION)
#: the first counter of a hole run (bisection key)
_FIRST = itemgetter(0)
#: a loss notification's padding to a minimum frame (after the addresses and LOSS_HEAD)
_LOSS_PAD = bytes(MIN_FRAME - 12 - LOSS_HEAD.size)


@dataclass(slots=True)
class ReceiverCounters:
    """What the receiver counts (``LGReceiver.c``)."""

    data_rx: int = 0  # protected data frames received (originals and copies)
    retx_rx: int = 0  # ... of which retransmitted copies (reTx = 1)
    dummies_rx: int = 0  # dummy frames received (§3.2); never delivered
    delivered: int = 0  # frames handed on (in order in blocking mode)
    duplicates: int = 0  # frames dropped as already delivered / held / given up
    holes_detected: int = 0  # gaps seen (one per revealing frame)
    lost_detected: int = 0  # frames in those gaps
    max_hole: int = 0  # the longest gap (consecutive losses)
    holes_filled: int = 0  # gap frames that arrived later (retransmissions)
    loss_notifications_sent: int = 0  # notifications queued for the sender
    timeouts: int = 0  # frames given up by ackNoTimeout (never repaired)
    reorder_drops: int = 0  # frames dropped because the reordering buffer was full
    recirculations: int = 0  # passes after which a held frame went round the port again
    reorder_buffer_frames: int = 0
    reorder_buffer_bytes: int = 0
    reorder_buffer_max_frames: int = 0
    reorder_buffer_max_bytes: int = 0
    pauses_sent: int = 0  # Algorithm 2 pause transitions
    resumes_sent: int = 0  # Algorithm 2 resume transitions
    lacks_explicit: int = 0  # leading ACKs sent on couriers (§3.1)
    lacks_piggybacked: int = 0  # leading ACKs piggybacked on reverse frames
    resyncs: int = 0  # new streams detected (far jump of seq_no)
    mode_switches: int = 0  # blocking <-> NB transitions followed from the tags
    released_on_disable: int = 0  # frames released in order when protection was disabled
    holes_abandoned: int = 0  # holes given up because more were open than the sender can buffer


COUNTER_KEYS = tuple(f.name for f in fields(ReceiverCounters))


class LGReceiver:
    """Receiver side of one protected link (see the module docstring)."""

    # Slots, and the counters in ``c``: CPython 3.11 keeps an instance's attributes in a fast
    # shared-key layout only up to 29 of them (this class had 54 with the counters inherited).
    # Per in-order frame (timeit, 5000 frames, min of 40, three runs): 1178 ns inherited, 1188 ns
    # with ``c`` but no slots, 1071 ns with both (blocking; NB 1126, 1150, 1014 ns).
    __slots__ = (
        "_addr", "_bp", "_fifo", "_held", "_holes", "_now", "_open", "_pass_end", "_pause_at", "_recirc_bps",
        "_repeats", "_resume_at", "_resync_ahead", "_ring", "_ring_ns", "_rob", "_rob_limit", "_timeout", "_window",
        "ack_no",
        "actions", "blocking", "c", "expected", "fresh", "lack_left", "leading_ack", "params", "paused", "synced",
        "timer_slack_ns",
    )

    def __init__(self, params: LGParams, *, src_mac: bytes = b"\x02\0\0\0\0\x02",
                 dst_mac: bytes = LG_CONTROL_MAC, start: int = 0) -> None:
        if len(src_mac) != 6 or len(dst_mac) != 6:
            raise ValueError("MAC addresses must be 6 bytes")
        self.c = ReceiverCounters()
        self._addr = dst_mac + src_mac
        #: loss notifications to send back (``Transmit``, highest
        #: class) and Algorithm 2's pause/resume transitions (``Backpressure``), in order
        self.actions = ActionQueue()
        #: the recirculation port's queue (absolute counters of held frames, head = on the
        #: port now) and when the head's current pass ends; _ring_ns: one full rotation
        self._ring: deque[int] = deque()
        self._pass_end = 0
        self._ring_ns = 0
        self._recirc_bps = 0
        self._now = 0
        #: the reordering buffer (§3.3): absolute counter -> inner frame; _held: its counters as a
        #: heap (all at or past ack_no, so the one delivered is always the smallest, heap[0])
        self._rob: dict[int, bytes] = {}
        self._held: list[int] = []
        self.params = params
        self.timer_slack_ns = 0
        self.set_params(params)
        self.blocking = params.blocking
        #: both ends start at counter 0, so a fresh receiver is in step (and a loss of the
        #: very first frames is a hole like any other); after a disable it is not, and the
        #: first tagged frame sets the counters again
        self.synced = True
        #: nothing received yet (FRESH_SLACK)
        self.fresh = True
        self.expected = start
        self.ack_no = start
        #: the leading ACK: the in-order point (absolute), and how many more times to send it
        self.leading_ack = start - 1
        self.lack_left = 0
        #: open holes as runs [first, end, time detected] (end exclusive), ascending and disjoint
        #: (holes are found in increasing seq order, so it is also detection-time order; a run
        #: split by a retransmission keeps its time in both parts); _open: frames in them
        self._holes: list[list[int]] = []
        self._open = 0
        #: Algorithm 2's curr_state (True = the sender's normal queue is paused)
        self.paused = False

    def set_params(self, params: LGParams, now_ns: int | None = None) -> None:
        """New thresholds, timeout and repeats apply from the next event. A new recirculation
        rate restarts the port at ``now_ns`` (default: the last event's time) with the held
        frames in order (how far the old queue had turned is not kept)."""
        if now_ns is not None and now_ns > self._now:
            self._now = now_ns
        self.params = params
        self._timeout = params.ack_no_timeout_ns + self.timer_slack_ns
        self._pause_at = params.pause_threshold_bytes
        self._resume_at = params.resume_bytes
        self._bp = params.backpressure
        fifo = params.recirc_order == "fifo"
        reorder = getattr(self, "_fifo", fifo) != fifo
        self._fifo = fifo
        self._rob_limit = params.reorder_buffer_limit_bytes
        self._repeats = params.lack_repeats
        # The most frames the sender's Tx buffer can hold (of minimum size): a gap wider than
        # this is not a hole the sender could repair but a new stream (or a forged seq_no), and
        # no more holes than this can be open at once (LinkGuardian §3: only buffered frames
        # are retransmitted). This bounds what one frame with a far-ahead seq_no can cost.
        self._window = max(1, params.tx_buffer_limit_bytes // MIN_FRAME)
        self._resync_ahead = min(RESYNC_DISTANCE, self._window)
        bps = params.recirc_rate_bps or 0
        if bps != self._recirc_bps or (reorder and self._ring):  # a new order also restarts the port
            self._recirc_bps = bps
            self._ring.clear()
            if bps and self._rob:  # held frames go onto the port in order, from now
                self._ring.extend(sorted(self._rob))
                self._pass_end = self._now + self._recirc_ns(self._rob[self._ring[0]])
            self._ring_ns = sum(self._recirc_ns(self._rob[c]) for c in self._ring)
        if not self._bp and getattr(self, "paused", False):
            self.paused = False
            self.actions.emit(Backpressure(False))
            self.c.resumes_sent += 1

    def set_timer_slack(self, slack_ns: int) -> None:
        """ackNoTimeout plus ``slack_ns`` from now on (0: the configured value).

        §4 "Parameters" sets ackNoTimeout just above the largest retransmission delay measured
        on the link (5.5 us -> 7 us at 100G). A live daemon on a loaded host adds its own
        scheduling delay to every repair: the sender must be scheduled to retransmit and this
        receiver to read the copy. The live shell passes how late its process has recently been
        scheduled (Switch.set_timer_slack), so that a hole is given up only when its copies are
        lost, not because a process waited for the CPU. Holes already open keep their detection
        time; the new value applies to them from the next event."""
        self.timer_slack_ns = max(0, int(slack_ns))
        self._timeout = self.params.ack_no_timeout_ns + self.timer_slack_ns

    # ----------------------------------------------------------------------- data path
    def receive(self, frame: bytes, now_ns: int) -> list[bytes]:
        """A frame whose outer tag is a data tag: the frames now deliverable, in order."""
        if len(frame) < 19 or frame[12] << 8 | frame[13] != ETHERTYPE:
            raise HeaderError("LGData", "not a LinkGuardian-tagged frame", 12)
        first = frame[14]
        if first >> 6 != LGType.DATA:
            raise HeaderError("LGData", f"outer tag type {first >> 6:02b} is not DATA", 14)
        inner = None if first & DATA_DUMMY else frame[:12] + frame[17:]
        return self.on_data(first, frame[15] << 8 | frame[16], inner, now_ns)

    def on_data(self, first: int, seq: int, inner: bytes | None, now_ns: int) -> list[bytes]:
        """Algorithm 1 for one tag: ``first`` = the tag's type/flags byte, ``seq`` = seq_no.

        ``inner`` is the frame with the tag removed (ignored for a dummy). Returns the
        frames to deliver now, in order.
        """
        out: list[bytes] = []
        self._now = now_ns
        if self._ring:
            self._catch_up(now_ns, out)  # passes (and timeouts) due before this frame arrived
        s = unwrap(first >> 4 & 1, seq, self.expected)
        if self.fresh:
            self.fresh = False
            if self.synced and s - self.expected > FRESH_SLACK:
                self.c.resyncs += 1
                self.synced = False  # a sender already under way (this receiver restarted)
        if not self.synced:
            self._sync(s)
        else:
            d = s - self.expected
            if (d > self._resync_ahead or (d < -RESYNC_BEHIND and not self._is_hole(s))
                    or (d < -RESTART_BEHIND and not first & DATA_RETX and not self._is_hole(s))):
                self.c.resyncs += 1
                self._release(out, forget_holes=True)
                self._sync(s)
        if bool(first & DATA_BLOCKING) != self.blocking:
            self._switch_mode(out)
        exp = self.expected
        if s > exp:
            # a gap (Algorithm 1's hole; §3.2: a dummy reveals a tail loss the same way)
            self._new_holes(exp, s, now_ns)
            self.expected = exp = s
            if self._open > self._window:
                self._abandon_holes(out)
        if first & DATA_DUMMY:
            self.c.dummies_rx += 1
            if out:
                self.c.delivered += len(out)
            return out
        self.c.data_rx += 1
        if first & DATA_RETX:
            self.c.retx_rx += 1
        if s == exp:
            self.expected = s + 1
        elif s < exp and self._fill(s):
            self.c.holes_filled += 1
        else:
            self.c.duplicates += 1  # already delivered, held, or given up (de-duplication)
            if out:
                self.c.delivered += len(out)
            return out
        if inner is None:
            inner = b""
        if self.blocking:
            # Algorithm 1
            if s == self.ack_no:
                out.append(inner)  # line 1: next in line, forwarded straight from the link
                self.ack_no = s + 1
                if self.ack_no < self.expected:
                    self._advance(out)
            elif self._take(len(inner)):
                self._rob[s] = inner  # line 6: held, recirculating until its turn
                heappush(self._held, s)
                if self._recirc_bps:
                    ns = self._recirc_ns(inner)
                    if not self._ring:
                        self._pass_end = now_ns + ns  # the port was idle
                    self._enqueue(s)
                    self._ring_ns += ns
            self._set_leading_ack(self.ack_no - 1)
            if self._bp:
                self._backpressure()
        else:
            out.append(inner)
            self._nb_lack()
        self.c.delivered += len(out)
        return out

    # -------------------------------------------------------------------------- timers
    def next_deadline(self) -> int | None:
        """When the oldest open hole's ackNoTimeout expires or, if the frame next in line is
        recirculating, when the current pass ends (None: neither). While nothing held is next
        in line, passes only rotate the queue and are accounted lazily."""
        best = None
        if self.ack_no in self._rob:
            # on the port: when its pass ends; drained at once (the rate was just set to 0
            # while it waited on the port): now
            best = self._pass_end if self._ring else self._now
        if self._holes:
            t = self._holes[0][2] + self._timeout
            return t if best is None or t < best else best
        return best

    def on_timer(self, now_ns: int) -> list[bytes]:
        """ackNoTimeout (§3.5): give up on every hole older than the timeout; deliver what follows."""
        out: list[bytes] = []
        self._now = now_ns
        if self._ring:
            self._catch_up(now_ns, out)
        self._expire(now_ns, out)
        if self.blocking:
            if self._bp:
                self._backpressure()
        else:
            self._nb_lack()
        self.c.delivered += len(out)
        return out

    def _expire(self, now_ns: int, out: list[bytes]) -> None:
        """Give up every hole detected ackNoTimeout or longer before ``now_ns`` (counted): whole
        runs from the front (detection-time order)."""
        holes = self._holes
        limit = now_ns - self._timeout
        k = n = 0
        for run in holes:
            if run[2] > limit:
                break
            k += 1
            n += run[1] - run[0]
        if k:
            del holes[:k]
            self._open -= n
            self.c.timeouts += n
        if self.blocking:
            self._release_in_order(out)

    def _catch_up(self, now_ns: int, out: list[bytes]) -> None:
        """Run the recirculation port up to ``now_ns``, applying each ackNoTimeout that fell due
        meanwhile at its own time: a call made late must not spend the passes in which the
        frame after a given-up hole could already have left on going round again."""
        holes = self._holes
        while self._ring and holes:
            t = holes[0][2] + self._timeout
            if t > now_ns:
                break
            self._pump(t, out)
            self._expire(t, out)
        if self._ring:
            self._pump(now_ns, out)

    # --------------------------------------------------------------- leading ACKs (§3.1)
    def piggyback(self, frame: bytes) -> bytes:
        """``frame`` (reverse direction) with the pending leading ACK added, if one is pending."""
        if self.lack_left <= 0:
            return frame
        if frame[12] << 8 | frame[13] == ETHERTYPE and len(frame) > 14 and frame[14] >> 6 == LGType.LOSS_NOTIFICATION:
            return frame  # our own notification already carries the leading ACK
        self.lack_left -= 1
        self.c.lacks_piggybacked += 1
        v = self.leading_ack
        return frame[:12] + TAG_HEAD.pack(ETHERTYPE, LACK_PIGGYBACKED | era_flag(v), v & 0xFFFF) + frame[12:]

    def courier(self) -> bytes | None:
        """An explicit ACK frame if a leading-ACK value still needs sending, else None."""
        if self.lack_left <= 0:
            return None
        self.lack_left -= 1
        self.c.lacks_explicit += 1
        v = self.leading_ack
        head = self._addr + TAG_HEAD.pack(ETHERTYPE, LACK_EXPLICIT | era_flag(v), v & 0xFFFF) + b"\0\0"
        return head + bytes(MIN_FRAME - len(head))

    # ------------------------------------------------------------------------ control
    def release_all(self) -> list[bytes]:
        """Protection disabled: every held frame in order, holes forgotten, backpressure off.

        The next tagged frame resynchronises the receiver (the sender may have moved on).
        """
        out: list[bytes] = []
        self._release(out, forget_holes=True)
        self.c.released_on_disable += len(out)
        self.c.delivered += len(out)
        self.synced = False
        if self.paused:
            self.paused = False
            self.actions.emit(Backpressure(False))
            self.c.resumes_sent += 1
        return out

    def holes(self) -> list[int]:
        """Absolute counters still awaited, ascending (for tests and status: one entry per frame)."""
        return [c for first, end, _ in self._holes for c in range(first, end)]

    def hole_runs(self) -> list[tuple[int, int]]:
        """The open holes as runs ``(first, end)``, end exclusive, ascending."""
        return [(first, end) for first, end, _ in self._holes]

    @property
    def recirculating(self) -> int:
        """Frames cycling through the recirculation port (0 when it drains at once)."""
        return len(self._ring)

    def held(self) -> list[int]:
        """Absolute counters in the reordering buffer, ascending."""
        return sorted(self._rob)

    @property
    def control_out(self) -> list[bytes]:
        """The control frames decided and not yet taken (a view of :attr:`actions`)."""
        return [a.data for a in self.actions.pending(Transmit)]

    @property
    def pause_out(self) -> list[bool]:
        """The pause (True) / resume (False) transitions not yet taken (a view of :attr:`actions`)."""
        return [a.paused for a in self.actions.pending(Backpressure)]

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {key: getattr(self.c, key) for key in COUNTER_KEYS}
        out.update(mode="blocking" if self.blocking else "nb", paused=self.paused, expected=self.expected,
                   ack_no=self.ack_no, leading_ack=self.leading_ack, open_holes=self._open,
                   recirculating_frames=self.recirculating, recirc_rate_bps=self._recirc_bps,
                   synced=self.synced, ack_no_timeout_ns=self._timeout, timer_slack_ns=self.timer_slack_ns)
        return out

    # ---------------------------------------------------------------------- internals
    def _sync(self, s: int) -> None:
        self.synced = True
        self.expected = s
        self.ack_no = s
        self._set_leading_ack(s - 1)

    def _new_holes(self, first: int, end: int, now_ns: int) -> None:
        """Frames ``first .. end - 1`` are missing: record them (one run), notify the sender at
        once (``end - first`` is at most ``_resync_ahead``: at most
        ceil(_resync_ahead / MAX_HOLE_PER_NOTIFICATION) notifications, see MAX_HOLE_PER_NOTIFICATION)."""
        n = end - first
        self.c.holes_detected += 1
        self.c.lost_detected += n
        if n > self.c.max_hole:
            self.c.max_hole = n
        self._holes.append([first, end, now_ns])  # above every open run: first == expected
        self._open += n
        v = self.leading_ack  # unchanged by a new hole: it is the in-order point
        first_byte = LOSS_NOTIFICATION | era_flag(v)
        v &= 0xFFFF
        addr = self._addr
        emit = self.actions.emit
        for c in range(first, end, MAX_HOLE_PER_NOTIFICATION):
            k = end - c if end - c < MAX_HOLE_PER_NOTIFICATION else MAX_HOLE_PER_NOTIFICATION
            emit(Transmit(addr + LOSS_HEAD.pack(ETHERTYPE, first_byte, v, k, c & 0xFFFF, 0) + _LOSS_PAD))
        self.c.loss_notifications_sent += -(-n // MAX_HOLE_PER_NOTIFICATION)

    def _abandon_holes(self, out: list[bytes]) -> None:
        """More holes open than the sender could ever repair (its Tx buffer holds at most
        ``_window`` frames): give up the oldest, as an ackNoTimeout would (counted). Whole runs
        from the front, and the first counters of the last one touched."""
        holes = self._holes
        excess = self._open - self._window
        self._open -= excess
        self.c.holes_abandoned += excess
        k = 0
        for run in holes:
            w = run[1] - run[0]
            if w > excess:
                run[0] += excess
                break
            k += 1
            excess -= w
            if not excess:
                break
        del holes[:k]
        if self.blocking:
            self._release_in_order(out)

    def _release_in_order(self, out: list[bytes]) -> None:
        """Blocking mode: release what the given-up holes no longer hold back, and move the
        leading ACK to the new in-order point."""
        if self.ack_no < self.expected:
            self._advance(out)
        self._set_leading_ack(self.ack_no - 1)

    def _set_leading_ack(self, a: int) -> None:
        """A new leading ACK is repeated on the next ``_repeats`` frames (LinkGuardian §3.2)."""
        if a != self.leading_ack:
            self.leading_ack = a
            self.lack_left = self._repeats

    def _take(self, n: int) -> bool:
        """Room for ``n`` more bytes in the reordering buffer? Account them, or count the drop."""
        c = self.c
        b = c.reorder_buffer_bytes + n
        if b > self._rob_limit:
            c.reorder_drops += 1  # overflow (Fig. 9b); ack_no will step over the frame
            return False
        c.reorder_buffer_bytes = b
        k = c.reorder_buffer_frames + 1
        c.reorder_buffer_frames = k
        if b > c.reorder_buffer_max_bytes:
            c.reorder_buffer_max_bytes = b
        if k > c.reorder_buffer_max_frames:
            c.reorder_buffer_max_frames = k
        return True

    def _advance(self, out: list[bytes]) -> None:
        """``ack_no`` moves on: over frames neither held nor awaited (given up, dropped on
        overflow, or delivered before a mode switch), in one jump to the next held frame or open
        hole, and, when the buffer drains at once, over held frames, which are delivered. On the
        recirculation port a held frame waits for its pass to end (:meth:`_pump`).

        In blocking mode every open hole and every held counter is at or past ``ack_no``: the
        first open run's start is where ``ack_no`` must stop, ``_held[0]`` the next held frame."""
        a = self.ack_no
        rob = self._rob
        held = self._held
        stop = self.expected
        if self._holes and self._holes[0][0] < stop:
            stop = self._holes[0][0]
        cycling = self._recirc_bps
        n = nbytes = 0
        while a < stop:
            if held and held[0] == a:
                if cycling:
                    break
                heappop(held)
                f = rob.pop(a)
                out.append(f)
                n += 1
                nbytes += len(f)
                a += 1
            else:
                a = held[0] if held and held[0] < stop else stop
        self.ack_no = a
        if n:
            self.c.reorder_buffer_frames -= n
            self.c.reorder_buffer_bytes -= nbytes

    def _enqueue(self, s: int) -> None:
        """``s`` starts waiting on the recirculation port (``recirc_order``, LGParams).

        ``fifo``: at the queue's tail. ``seq``: in sequence order among the held frames. The
        queue then stays in *circular* order (only its head leaves, and a pass sends the head
        round to the tail), so it has at most one descent, where the largest counter is
        followed by the smallest; ``s`` goes just before the first held counter above it in
        that order. Never before the head, which is on the port now: the same place in the
        circle is the tail. Both places are found by bisection (a held frame costs O(log n)
        look-ups, not a walk over the queue): from the head, the counters are at or above it up
        to the descent and below it after."""
        ring = self._ring
        if self._fifo or not ring:
            ring.append(s)
            return
        n = len(ring)
        head = ring[0]
        lo, hi = 1, n  # the descent: the first counter below the head (none: n)
        while lo < hi:
            mid = (lo + hi) // 2
            if ring[mid] < head:
                hi = mid
            else:
                lo = mid + 1
        j = lo % n  # where the circular order starts (the smallest counter)
        lo, hi = 0, n  # bisect over the sorted view ring[j:] + ring[:j]
        while lo < hi:
            mid = (lo + hi) // 2
            if ring[(j + mid) % n] < s:
                lo = mid + 1
            else:
                hi = mid
        at = (j + lo) % n if lo < n else (j - 1) % n + 1
        if at == 0:
            ring.append(s)
        else:
            ring.insert(at, s)

    def _recirc_ns(self, frame: bytes) -> int:
        """Time ``frame`` takes on the recirculation port (line time, as the switch's pacer counts it)."""
        return line_time_ns(len(frame), self._recirc_bps)

    def _pump(self, now_ns: int, out: list[bytes]) -> None:
        """Run the recirculation port up to ``now_ns``: every pass that has ended applies
        Algorithm 1 to its frame again (forward if next in line, else round to the tail)."""
        ring = self._ring
        rob = self._rob
        t = self._pass_end
        n = nbytes = 0
        while ring and t <= now_ns:
            if self.ack_no not in rob:
                # nothing held is next in line: passes only rotate the queue; whole turns
                # change nothing, so skip them
                turns = (now_ns - t) // self._ring_ns
                if turns:
                    t += turns * self._ring_ns
                    self.c.recirculations += turns * len(ring)
            c = ring.popleft()
            f = rob[c]
            ns = self._recirc_ns(f)
            if c == self.ack_no:
                del rob[c]
                heappop(self._held)  # c: the smallest held counter
                out.append(f)
                n += 1
                nbytes += len(f)
                self._ring_ns -= ns
                self.ack_no = c + 1
                if self.ack_no < self.expected:
                    self._advance(out)
            else:
                ring.append(c)  # not its turn: once more round the port
                self.c.recirculations += 1
            if ring:
                t += self._recirc_ns(rob[ring[0]])
        self._pass_end = t
        if n:
            self.c.reorder_buffer_frames -= n
            self.c.reorder_buffer_bytes -= nbytes
            self._set_leading_ack(self.ack_no - 1)
            if self._bp and self.blocking:
                self._backpressure()  # the buffer shrank: it may be time to resume (Algorithm 2)

    def _backpressure(self) -> None:
        """Algorithm 2 on the reordering buffer's occupancy (state changes only)."""
        b = self.c.reorder_buffer_bytes
        if not self.paused:
            if b >= self._pause_at:
                self.paused = True
                self.actions.emit(Backpressure(True))
                self.c.pauses_sent += 1
        elif b <= self._resume_at:
            self.paused = False
            self.actions.emit(Backpressure(False))
            self.c.resumes_sent += 1

    def _nb_lack(self) -> None:
        self._set_leading_ack((self._holes[0][0] if self._holes else self.expected) - 1)

    def _run_of(self, s: int) -> int:
        """Index in ``_holes`` of the run holding counter ``s``, or -1 (bisection)."""
        holes = self._holes
        if not holes or s < holes[0][0] or s >= holes[-1][1]:
            return -1
        if s < holes[0][1]:
            return 0
        i = bisect_right(holes, s, key=_FIRST) - 1
        return i if s < holes[i][1] else -1

    def _is_hole(self, s: int) -> bool:
        return self._run_of(s) >= 0

    def _fill(self, s: int) -> bool:
        """``s`` arrived: if it is an open hole, take it out of its run (trimmed or split) and
        say so."""
        i = self._run_of(s)
        if i < 0:
            return False
        holes = self._holes
        run = holes[i]
        first, end = run[0], run[1]
        if end - first == 1:
            del holes[i]
        elif s == first:
            run[0] = s + 1
        elif s == end - 1:
            run[1] = s
        else:
            run[1] = s
            holes.insert(i + 1, [s + 1, end, run[2]])
        self._open -= 1
        return True

    def _release(self, out: list[bytes], forget_holes: bool) -> None:
        self._ring.clear()
        self._ring_ns = 0
        rob = self._rob
        for c in sorted(rob):
            out.append(rob[c])
        rob.clear()
        self._held.clear()
        self.c.reorder_buffer_frames = 0
        self.c.reorder_buffer_bytes = 0
        if forget_holes:
            self._holes.clear()
            self._open = 0
        self.ack_no = self.expected

    def _switch_mode(self, out: list[bytes]) -> None:
        """Follow the sender's ``blocking`` bit (§3.5: LinkGuardianNB is a run-time option)."""
        self.c.mode_switches += 1
        if self.blocking:
            self._release(out, forget_holes=False)  # NB from now on: nothing is held
            self.blocking = False
            if self.paused:
                self.paused = False
                self.actions.emit(Backpressure(False))
                self.c.resumes_sent += 1
        else:
            self.ack_no = self._holes[0][0] if self._holes else self.expected
            self.blocking = True


if TYPE_CHECKING:  # mypy checks that the engine keeps the contract of netstack.engine
    _engine: type[Engine] = LGReceiver

__all__ = ["COUNTER_KEYS", "FRESH_SLACK", "MAX_HOLE_PER_NOTIFICATION", "MAX_NOTIFICATIONS_PER_FRAME", "RESTART_BEHIND",
           "RESYNC_BEHIND", "RESYNC_DISTANCE", "LGReceiver", "ReceiverCounters"]
