"""TCD's ternary state machine for one egress port and lossless class, sans-IO.

TCD §3.2.1 labels a port *non-congestion* (ON, short or draining queue), *congestion* (ON at
full rate, queue building not caused by OFF) or *undetermined* (PFC switches it between ON and
OFF, so its queue says nothing about its own load). The detector runs at every dequeue of its
class (the queue measured after the packet left), as the ns-3 port does:

    cont_on = never paused, or now - t_resume > T_on^max
    long    = qlen > K
    NONCON: !cont_on -> UNDET;   long and the standing queue rose over the last window -> CONG
    CONG:   !cont_on -> UNDET;   !long -> NONCON
    UNDET:  cont_on  -> CONG if long and the standing queue rose over the last whole window
            since the resume, else NONCON (which becomes CONG one window later if it keeps rising)

``t_resume`` is the first successful dequeue after the port was blocked (a received PAUSE), so
a port counts as continuously ON only ``T_on^max`` after it really started sending again.
Leaving undetermined asks whether the queue is draining: a backlog built while paused can exceed
K after the resume although the port drains it (TCD §3.2.1 "State Transitions from the
Undetermined State": such a leaf becomes non-congestion).

Where we depart from the ns-3 port (our choices):

- the queue trend compares the *standing* queue of consecutive windows W: ``q_dec`` says the
  smallest queue seen at a dequeue during the last window is below that of the window before
  (the ns-3 port compares two single samples and overwrites its sample per packet, which defeats
  the window). A port whose input is itself ON-OFF (its upstream is paused and resumed) sees its
  queue swing within a window; its minimum still falls while it drains a backlog and still rises
  while it is overloaded (the standing queue, as CoDel judges a queue by its minimum over an
  interval). The first dequeue after a block starts a new window whose reference is the queue
  it found, so the trend seen on leaving undetermined covers the ON period since the resume;
- a PAUSE makes the port undetermined at once, not only at its next dequeue (a blocked port
  dequeues nothing, and its label would otherwise be stale for as long as it is paused);
- non-congestion becomes congestion only while the queue is not draining, as undetermined does
  (the ns-3 port takes any long queue): after an undetermined spell the backlog built while
  paused drains through non-congestion for longer than T_on^max, and a draining backlog is not
  an overloaded port (TCD §3.2.1: congestion is "queue buildup not caused by OFF"; in the
  single-congestion-point scenario P2 must never be labelled congestion);
- the initial state is a parameter (:class:`~.params.TcdParams`, non-congestion by default).

A port with nothing to send is re-evaluated on a timer, not only at its next dequeue (issue 30):
a resume that finds the class queue empty ends the OFF period at once (the port is ON, it only
has nothing to send: ``t_resume`` is the resume, not the first packet that happens to arrive
later), and :meth:`Detector.next_deadline` asks to be called T_on^max after ``t_resume``, when
the port is continuously ON again (TCD §3.2.1: "the port recovers to a continuous ON pattern and
leaves the undetermined state"). :meth:`Detector.on_timer` then evaluates the port as a dequeue
at that time would, with the queue its caller reads from the switch (the marker's queue probe).
Without that, an idle port stayed undetermined until the next packet came, milliseconds to
forever after the traffic stopped. A pause that expires without a resume frame is still seen at
the first dequeue after it (the detector is not told when quanta run out).

Times never go backwards: a ``now_ns`` below the latest seen is taken as the latest (counted in
``clock_regressions``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from headers.tcd import PortState

from .params import STATE_NAMES, TcdParams

#: how many state changes a detector keeps for plots (the oldest are dropped, and counted)
TIMELINE_CAP = 20_000

_NONCON = PortState.NON_CONGESTION
_UNDET = PortState.UNDETERMINED
_CONG = PortState.CONGESTION


@dataclass(slots=True)
class DetectorCounters:
    """What one detector counts (``Detector.c``)."""

    transitions: int = 0  # state changes
    pauses: int = 0  # PFC pauses of its class received
    resumes: int = 0  # ... and resumes
    clock_regressions: int = 0  # events whose time was before the latest seen (taken as the latest)
    idle_resumes: int = 0  # resumes that found the class queue empty (the OFF period ended at the resume)
    timer_evaluations: int = 0  # re-evaluations on the timer, without a dequeue (an idle port)
    timeline_dropped: int = 0  # timeline entries the cap pushed out
    short_pauses: int = 0  # pauses shorter than min_off_ns: honoured by the switch, no OFF period here


class Detector:
    """One egress port's (and class's) TCD state. Feed it :meth:`on_pause` and :meth:`on_dequeue`."""

    __slots__ = (
        "_acc",
        "_entered",
        "_k",
        "_next_sample",
        "_t_on_max",
        "_window",
        "_wmin",
        "blocked",
        "c",
        "created",
        "ever_paused",
        "last_now",
        "params",
        "paused",
        "q_dec",
        "q_inc",
        "q_prev",
        "state",
        "t_resume",
        "timeline",
    )

    def __init__(self, params: TcdParams, now_ns: int = 0, timeline_cap: int = TIMELINE_CAP) -> None:
        self.params = params
        self._t_on_max = params.t_on_max_ns
        self._k = params.k_bytes
        self._window = params.window_ns
        self.created = int(now_ns)
        self.last_now = self.created
        self.state: PortState = params.initial
        #: a PAUSE arrived and no packet has left since (the port is OFF)
        self.blocked = False
        #: the latest pause/resume said paused (for status; ``blocked`` drives the detection)
        self.paused = False
        self.ever_paused = False
        #: the first dequeue after the last block (None: never paused, continuously ON)
        self.t_resume: int | None = None
        #: the queue trend: the smallest queue of the last finished window, whether it fell below
        #: the window before, and the smallest queue of the window running now
        self.q_prev = 0
        self.q_dec = False
        self.q_inc = False
        self._wmin = 0
        self._next_sample = self.created
        self.c = DetectorCounters()
        self._acc = [0, 0, 0]
        self._entered = self.created
        self.timeline: deque[tuple[int, int]] = deque([(self.created, int(self.state))], maxlen=timeline_cap)

    # ------------------------------------------------------------------ events
    def _clock(self, now_ns: int) -> int:
        if now_ns < self.last_now:
            self.c.clock_regressions += 1
            return self.last_now
        self.last_now = now_ns
        return now_ns

    def _set(self, state: PortState, t: int) -> None:
        self._acc[self.state] += t - self._entered
        self._entered = t
        self.state = state
        self.c.transitions += 1
        tl = self.timeline
        if len(tl) == tl.maxlen:
            self.c.timeline_dropped += 1
        tl.append((t, int(state)))

    def on_pause(self, paused: bool, now_ns: int, queue_bytes: int | None = None,
                 pause_ns: int | None = None) -> None:
        """A PFC pause (``paused``) or resume of this class received at ``now_ns``; ``queue_bytes``:
        the class queue at a resume, when the caller knows it (0: the OFF period ends now);
        ``pause_ns``: how long the pause holds the class (its quanta at the port's rate), when the
        caller knows it. A pause shorter than ``params.min_off_ns`` is no OFF period (TcdParams):
        counted in ``short_pauses``, nothing else changes."""
        t = self._clock(now_ns)
        if paused and pause_ns is not None and pause_ns < self.params.min_off_ns:
            self.c.short_pauses += 1
            return
        if paused:
            self.c.pauses += 1
            self.paused = self.blocked = self.ever_paused = True
            if self.state is not _UNDET:
                self._set(_UNDET, t)  # at once (our choice), not at the next dequeue
        else:
            self.c.resumes += 1
            self.paused = False  # t_resume waits for the first packet actually sent...
            if queue_bytes == 0 and self.blocked:
                # ... unless there is none to send: the port is ON from now on, only idle
                self.c.idle_resumes += 1
                self._unblock(0, t)

    def on_dequeue(self, qlen_bytes: int, now_ns: int) -> PortState:
        """A packet left the class queue at ``now_ns``, leaving ``qlen_bytes`` behind: the state
        the packet is marked with."""
        t = self._clock(now_ns)
        if self.blocked:
            # the first successful dequeue after a block: the OFF period is over
            self.paused = False
            self._unblock(qlen_bytes, t)
        elif t >= self._next_sample:
            wmin = min(self._wmin, qlen_bytes)
            self.q_dec = wmin < self.q_prev
            self.q_inc = wmin > self.q_prev
            self.q_prev = wmin
            self._wmin = qlen_bytes  # the next window starts with this dequeue
            self._next_sample = t + self._window
        elif qlen_bytes < self._wmin:
            self._wmin = qlen_bytes
        tr = self.t_resume
        cont_on = tr is None or t - tr > self._t_on_max
        state = self.state
        if state is _UNDET:
            if cont_on:
                self._set(_CONG if qlen_bytes > self._k and self.q_inc else _NONCON, t)
        elif not cont_on:
            self._set(_UNDET, t)
        elif state is _NONCON:
            # a long queue that is draining is a backlog, not an overload (TCD §3.2.1: congestion is
            # "queue buildup not caused by OFF"): the same trend test as on leaving undetermined
            if qlen_bytes > self._k and self.q_inc:
                self._set(_CONG, t)
        elif qlen_bytes <= self._k:
            self._set(_NONCON, t)
        return self.state

    def on_timer(self, qlen_bytes: int, now_ns: int) -> PortState:
        """Re-evaluate without a dequeue (an idle port), ``qlen_bytes`` being the class queue at
        ``now_ns``: as a dequeue at that time would (the queue sampled into the trend window, the
        state table), except that a blocked port stays blocked (only a packet sent, or a resume
        that finds nothing to send, ends an OFF period). Called at :meth:`next_deadline`; at any
        other time it changes nothing the rules would not."""
        if self.blocked:
            self._clock(now_ns)
            return self.state
        self.c.timer_evaluations += 1
        return self.on_dequeue(qlen_bytes, now_ns)

    def next_deadline(self) -> int | None:
        """When the port leaves undetermined without a dequeue (None: no such time): T_on^max after
        the OFF period ended, if it is undetermined and not blocked."""
        tr = self.t_resume
        if self.state is not _UNDET or self.blocked or tr is None:
            return None
        return tr + self._t_on_max + 1  # cont_on is now - t_resume > T_on^max

    def _unblock(self, qlen_bytes: int, t: int) -> None:
        """The OFF period ended at ``t``, leaving ``qlen_bytes`` queued."""
        self.blocked = False
        self.t_resume = t
        # a new window from the resume: the backlog left by the OFF period is its reference,
        # and nothing is known of the trend until a whole ON window has passed
        self.q_dec = self.q_inc = False
        self.q_prev = self._wmin = qlen_bytes
        self._next_sample = t + self._window

    # ----------------------------------------------------------------- queries
    def time_in_state(self, now_ns: int | None = None) -> dict[str, int]:
        """ns spent in each state from creation to ``now_ns`` (or the latest time seen); the three
        sum to the elapsed time."""
        t = self.last_now if now_ns is None or now_ns < self.last_now else int(now_ns)
        acc = list(self._acc)
        acc[self.state] += t - self._entered
        return dict(zip(STATE_NAMES, acc, strict=True))

    def status(self, now_ns: int | None = None) -> dict[str, object]:
        """JSON-able state, time accounting and counts."""
        c = self.c
        return {"state": STATE_NAMES[self.state], "time_in_state_ns": self.time_in_state(now_ns),
                "transitions": c.transitions, "paused": self.paused, "blocked": self.blocked,
                "t_resume_ns": self.t_resume, "pauses": c.pauses, "resumes": c.resumes,
                "q_prev_bytes": self.q_prev, "q_dec": self.q_dec, "q_inc": self.q_inc,
                "clock_regressions": c.clock_regressions, "idle_resumes": c.idle_resumes,
                "short_pauses": c.short_pauses,
                "timer_evaluations": c.timer_evaluations, "next_deadline_ns": self.next_deadline(),
                "timeline_len": len(self.timeline), "timeline_dropped": c.timeline_dropped}


__all__ = ["TIMELINE_CAP", "Detector", "DetectorCounters"]
