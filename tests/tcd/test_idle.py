"""An idle port leaves the undetermined state on a timer, not at its next dequeue (issue 30).

"Congestion Detection in Lossless Networks" §3.2.1: a paused port is undetermined, and "finally
the port recovers to a continuous ON pattern and leaves the undetermined state". A port with
nothing to send is ON all the same: the TCD marker, installed on a real sans-IO switch as its
marking policy and as a feature with a timer (netstack/tcd/feature.py), asks the switch to wake it
T_on^max after the OFF period ended and re-evaluates the port with its queue then. Before, such a
port stayed undetermined until the next packet came (forever, if none did)."""

from __future__ import annotations

from headers.pfc import pause_frame, resume_frame
from headers.tcd import Ecn, PortState
from netstack.tcd.feature import install, installed, remove
from netstack.tcd.marker import TcdMarker
from netstack.tcd.params import TcdParams
from tests.switch import GBPS, class_tos, mac, make_switch, udp_frame

PEER = mac(0x99)
T_ON = 50_000  # T_on^max, ns
FRAME_NS = 8192  # a 1000-byte frame at 1 Gbit/s
NON, UND = PortState.NON_CONGESTION, PortState.UNDETERMINED


def marked_switch(probe: bool = True):
    sw = make_switch(2, p1={"rate_bps": GBPS})
    m = TcdMarker(TcdParams(T_ON, 100_000, T_ON), classes=(0,))
    if probe:
        install(sw, "p1", m)
    else:
        sw.set_marking_policy("p1", m)  # a marking policy only: no timer
    return sw, m


def feed(sw, n: int, t: int) -> None:
    for _ in range(n):
        sw.receive("p0", udp_frame(size=1000, tos=class_tos(0, Ecn.ECT_0)), t)


def run_to(sw, t: int) -> None:
    """What a shell does: transmit at every deadline up to ``t``, then at ``t``."""
    while (d := sw.next_deadline()) is not None and d <= t:
        sw.transmit(d)
    sw.transmit(t)


def test_an_idle_port_resumed_leaves_undetermined_t_on_max_after_the_resume():
    sw, m = marked_switch()
    det = m.detectors[0]
    sw.receive("p1", pause_frame(PEER, [0]), 10_000)
    assert m.state(0) is UND and sw.next_deadline() is None  # paused: no time says more
    sw.receive("p1", resume_frame(PEER, [0]), 30_000)  # nothing queued: ON (and idle) from here
    assert det.t_resume == 30_000 and not det.blocked and det.c.idle_resumes == 1
    due = 30_000 + T_ON + 1
    assert sw.next_deadline() == due
    run_to(sw, due - 1)
    assert m.state(0) is UND  # T_on^max not yet over (cont_on is "longer than T_on^max")
    run_to(sw, due)
    assert m.state(0) is NON  # at exactly that virtual time, without a single dequeue
    assert list(det.timeline)[-2:] == [(10_000, int(UND)), (due, int(NON))]
    assert m.c.classes[0].seen_undet == 0 and det.c.timer_evaluations == 1
    assert sw.next_deadline() is None
    assert det.time_in_state(due + 5) == {"non_congestion": 10_000 + 5, "undetermined": due - 10_000,
                                          "congestion": 0}


def test_a_port_whose_traffic_stops_leaves_undetermined_without_a_dequeue():
    """Paused with a backlog of three frames: they leave from the resume on (t_resume is the first
    dequeue), then the port has nothing to send; it is non-congestion T_on^max after that first
    dequeue, not at the next packet, which here never comes."""
    sw, m = marked_switch()
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    feed(sw, 3, 1_000)
    sw.receive("p1", resume_frame(PEER, [0]), 100_000)  # a backlog: the OFF period ends at a dequeue
    det = m.detectors[0]
    assert det.blocked and det.c.idle_resumes == 0
    run_to(sw, 100_000 + 3 * FRAME_NS)  # the three frames leave undetermined (UE)
    assert det.t_resume == 100_000 and m.c.classes[0].seen_undet == 3
    due = 100_000 + T_ON + 1
    assert sw.next_deadline() == due
    run_to(sw, 10**9)
    assert m.state(0) is NON and list(det.timeline)[-1] == (due, int(NON))
    assert sum(det.time_in_state(10**9).values()) == 10**9


def test_without_the_timer_an_idle_port_stays_undetermined():
    """The marking policy alone (no queue probe, no feature): what issue 30 reported."""
    sw, m = marked_switch(probe=False)
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    sw.receive("p1", resume_frame(PEER, [0]), 30_000)
    run_to(sw, 10**9)
    assert m.state(0) is UND and m.detectors[0].blocked and sw.next_deadline() is None


def test_a_port_still_paused_stays_undetermined():
    sw, m = marked_switch()
    sw.receive("p1", pause_frame(PEER, [0]), 0)  # 0xFFFF quanta: refreshed by a real peer
    run_to(sw, 10 * T_ON)
    assert m.state(0) is UND and m.detectors[0].blocked


def test_the_timer_leaves_a_port_that_is_sending_as_a_dequeue_would():
    """A steady stream after the resume: the timer and the dequeues agree (non-congestion at the
    first time past T_on^max, the queue short)."""
    sw, m = marked_switch()
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    sw.receive("p1", resume_frame(PEER, [0]), 1_000)  # idle resume: ON from 1000
    for i in range(20):
        run_to(sw, 2_000 + i * FRAME_NS)  # (a shell serves the deadlines before later arrivals)
        feed(sw, 1, 2_000 + i * FRAME_NS)
    run_to(sw, 10**9)
    det = m.detectors[0]
    assert m.state(0) is NON and list(det.timeline)[-1] == (1_000 + T_ON + 1, int(NON))


def test_remove_takes_the_timer_off_and_install_replaces():
    sw, m = marked_switch()
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    sw.receive("p1", resume_frame(PEER, [0]), 10)
    assert sw.next_deadline() is not None
    assert remove(sw, "p1") is m and installed(sw, "p1") is None
    assert sw.next_deadline() is None and m.queue_probe is None
    assert remove(sw, "p1") is None
    other = TcdMarker(TcdParams(T_ON, 100_000, T_ON))
    install(sw, "p1", m)
    install(sw, "p1", other)  # replaces: one marker, one timer
    assert installed(sw, "p1") is other and m.queue_probe is None


def test_a_late_timer_lets_the_frames_due_before_it_leave_first():
    """A shell woken late transmits at a time past both the marker's deadline and frames still
    queued for earlier departures. The switch fires feature timers before it simulates its links,
    so the marker first has its port send what was due (``catch_up``): the detector's events stay in
    time order (no clock regression, found by a live ``netstack fuzz tcd`` on a loaded host), and the
    frames that left within T_on^max of the resume are marked undetermined."""
    sw, m = marked_switch()
    sw.receive("p1", pause_frame(PEER, [0]), 0)
    feed(sw, 12, 1_000)  # 12 frames: 98 us of wire time, longer than T_on^max
    sw.receive("p1", resume_frame(PEER, [0]), 100_000)
    sw.transmit(100_000)  # the first frame leaves: the OFF period is over, the timer set
    det = m.detectors[0]
    assert not det.blocked and m.next_deadline() == 100_000 + T_ON + 1
    late = 100_000 + 12 * FRAME_NS + 20_000  # past the deadline and past every departure
    sw.transmit(late)
    assert det.c.clock_regressions == 0
    assert m.c.classes[0].seen_undet == 7  # departures at 100 us + k * 8.192 us, k = 0..6, are within T_on^max
    assert m.state(0) is NON
    times = det.time_in_state(late)
    assert sum(times.values()) == late - det.created
