"""Timers on a loaded host (docs/onepipe-reliable.md): every 1Pipe timer that declares something
lost or failed waits its configured time plus a *timer slack* the live shell passes in (twice the
largest recent scheduling delay of its process), so that a process or daemon that waited for a
CPU is not taken for a silent one. The engines stay sans-IO: the slack is an input
(``set_timer_slack``), and these tests drive it by hand:

- the best-effort ACK timeout (endpoint.py: a message unACKed for ``ack_timeout_ns`` + slack fails);
- the switch's failure timeout under a controller (barrier.py, feature.py: a process silent for
  ``failure_beacons`` x ``T_beacon`` + slack is held and reported, §8 step 1);
- the controller's answer timeout (controller.py: a process that does not answer a notice for
  ``answer_timeout_ns`` + slack is declared failed, §8 steps 3-6).

In each, a gap shorter than the timeout plus the slack is not a failure, and a longer one is:
so a process really gone is still declared failed, within the configured timeout plus the slack.
"""

from __future__ import annotations

import time

from hypothesis import example, given, settings
from hypothesis import strategies as st

from netstack.engine import SendTo
from netstack.looplag import LagHistogram
from netstack.onepipe import feature as op
from netstack.onepipe.actions import Fence, Release
from netstack.onepipe.api import SLACK_FACTOR, OnePipeEndpoint
from netstack.onepipe.barrier import DOWN, UP, BarrierAggregator
from netstack.onepipe.controller import SUSPECTED
from netstack.onepipe.endpoint import Endpoint
from netstack.onepipe.params import OnePipeParams
from netstack.switch import PortConfig, Switch, SwitchConfig

from .test_controller import T0 as CT0
from .test_controller import A, B, C, callback, declare, state, world
from .test_controller import P as CP
from .test_endpoint import T0, ack, ep, failed, sent
from .test_endpoint import P as EP
from .test_feature import PARAMS as FP
from .test_feature import host_beacon, mac

SLACKS = st.integers(min_value=0, max_value=10 * EP.ack_timeout_ns)

# ---------------------------------------------------------------------------- the ACK timeout


def _run_until(e: Endpoint, until: int) -> None:
    """Every timer the endpoint asks for, up to ``until`` (inclusive), as the live shell does."""
    while (due := e.next_deadline()) is not None and due <= until:
        e.on_timer(due)


def _ack_after(gap: int, slack: int) -> bool:
    """Send one message to 2, give the engine ``slack``, let 2's ACK come ``gap`` ns later:
    whether the message was reported lost."""
    e = ep()
    e.set_timer_slack(slack)
    e.send([(2, b"a")], T0)
    sent(e)
    _run_until(e, T0 + gap)
    lost = bool(failed(e))
    if not lost:
        e.receive(ack(1), 2, T0 + gap)
        assert not failed(e) and e.c.messages_acked == 1
    return lost


def test_an_ack_later_than_the_timeout_but_within_the_slack_is_no_loss():
    timeout = EP.ack_timeout_ns
    assert _ack_after(timeout + 5, 0)  # no slack: the configured timeout
    assert not _ack_after(timeout + 5, 10)  # the process waited for a CPU: the ACK still counts
    assert _ack_after(timeout + 10, 10)  # longer than the timeout and the slack: lost, as before


def test_the_slack_applies_to_packets_already_in_flight_both_ways():
    e = ep()
    e.send([(2, b"a")], T0)
    sent(e)
    e.set_timer_slack(EP.ack_timeout_ns)  # raised while the packet is out: it waits longer
    _run_until(e, T0 + 2 * EP.ack_timeout_ns - 1)
    assert failed(e) == [] and e.ack_timeout_ns == 2 * EP.ack_timeout_ns
    e.set_timer_slack(-5)  # lowered (negative counts as 0): due at once, at the next timer
    assert e.timer_slack_ns == 0 and e.next_deadline() <= T0 + 2 * EP.ack_timeout_ns - 1
    _run_until(e, T0 + 2 * EP.ack_timeout_ns - 1)
    assert failed(e) == [(T0, 2, b"a")] and e.c.send_timeouts == 1


@settings(max_examples=150, deadline=None)
@given(gap=st.integers(min_value=0, max_value=12 * EP.ack_timeout_ns), slack=SLACKS)
@example(gap=EP.ack_timeout_ns + 7, slack=7)
@example(gap=EP.ack_timeout_ns + 6, slack=7)
def test_a_message_is_lost_exactly_when_its_ack_is_later_than_timeout_plus_slack(gap, slack):
    assert _ack_after(gap, slack) == (gap >= EP.ack_timeout_ns + slack)


def test_the_api_endpoint_follows_its_loops_recent_lag():
    """The live shell's rule (api.py): the slack is SLACK_FACTOR x the largest lag of the last seconds."""
    lag = LagHistogram(0)
    e = OnePipeEndpoint(("10.0.0.1", 40101), params=EP, lag=lag)
    now = time.monotonic_ns()
    lag.record(40_000_000, now)
    e._follow_lag(now)
    assert e.engine.timer_slack_ns == SLACK_FACTOR * 40_000_000
    assert e.counters()["timer_slack_ns"] == e.counters()["timer_slack_max_ns"] == SLACK_FACTOR * 40_000_000
    e._follow_lag(now + 60 * 10**9)  # a minute later the stall is forgotten
    assert e.engine.timer_slack_ns == 0 and e.counters()["timer_slack_max_ns"] == SLACK_FACTOR * 40_000_000


# ---------------------------------------------------------------------------- the switch's failure timeout

T = 1_000
P = OnePipeParams(t_beacon_ns=T, timeout_beacons=10, ack_timeout_ns=100 * T, prompt_beacons=False)
TIMEOUT = P.input_timeout_ns


def _held_after(gap: int, slack: int, hold: bool = True) -> bool:
    """h1 and h2 heard at 0, h2 keeps talking, h1 falls silent: is h1 held (reported failed,
    ``hold``) or out of the minimum (best effort) ``gap`` ns later?"""
    a = BarrierAggregator(P, hold=hold)
    for name in ("h1", "h2"):
        a.add_input(name, down=True)
    a.add_output("up", UP, 0)
    a.add_output("down", DOWN, 0)
    a.set_timer_slack(slack)
    a.heard("h1", 100, 0)
    a.heard("h2", 100, 0)
    out: list[object] = []
    t = 0
    while True:
        due = a.next_deadline()
        t = min(gap, max(due if due is not None else gap, t + T))  # h2 talks every T_beacon
        a.heard("h2", 100 + t, t)
        out += a.on_timer(t)
        a.due_beacons(t)
        if t >= gap:
            return "h1" in out


def test_a_silence_shorter_than_the_failure_timeout_plus_the_slack_is_no_failure():
    assert _held_after(TIMEOUT, 0)
    assert not _held_after(TIMEOUT, 5 * T)
    assert _held_after(TIMEOUT + 5 * T, 5 * T)  # a process really gone: held within timeout + slack


def test_lowering_the_slack_times_out_at_the_next_timer_what_is_now_overdue():
    a = BarrierAggregator(P, hold=True)
    a.add_input("h1", down=True)
    a.add_output("down", DOWN, 0)
    a.set_timer_slack(10 * TIMEOUT)
    a.heard("h1", 100, 0)
    assert a.on_timer(2 * TIMEOUT) == [] and not a.held("h1")
    a.set_timer_slack(0)
    assert a.next_deadline() <= TIMEOUT and a.on_timer(2 * TIMEOUT) == ["h1"] and a.held("h1")
    assert a.counters()["timeout_ns"] == TIMEOUT and a.counters()["timer_slack_ns"] == 0


@settings(max_examples=150, deadline=None)
@given(gap=st.integers(min_value=0, max_value=8 * TIMEOUT), slack=st.integers(min_value=0, max_value=5 * TIMEOUT))
@example(gap=TIMEOUT + 3 * T + 1, slack=3 * T + 1)
@example(gap=TIMEOUT + 3 * T, slack=3 * T + 1)
def test_an_input_is_held_exactly_when_silent_for_timeout_plus_slack(gap, slack):
    assert _held_after(gap, slack) == (gap >= TIMEOUT + slack)


def _tor(controller: bool) -> Switch:
    ports = tuple(PortConfig(f"p-h{i}", role="edge") for i in (1, 2))
    sw = Switch(SwitchConfig("tor", ports, {mac(i): f"p-h{i}" for i in (1, 2)}))
    op.enable(sw, {"p-h1": "down", "p-h2": "down"}, FP.with_(failure_beacons=20), 0, controller=controller)
    return sw


def _give_slack(sw: Switch, slack: int) -> None:
    """What the live switch daemon does (``Switch.set_timer_slack``): every feature of every port
    with a ``set_timer_slack`` hook is given the slack."""
    for port in sw.ports:
        for f in port.features:
            hook = getattr(f, "set_timer_slack", None)
            if hook is not None:
                hook(slack)


def test_under_a_controller_the_switch_gives_the_slack_to_its_failure_timeout_only():
    sw = _tor(controller=True)
    _give_slack(sw, 7 * FP.t_beacon_ns)
    timers = op.status(sw)["timers"]
    assert timers == {"input_timeout_ns": FP.input_timeout_ns, "failure_timeout_ns": 27 * FP.t_beacon_ns,
                      "timer_slack_ns": 7 * FP.t_beacon_ns}
    # the best-effort input timeout keeps its 10 T_beacon (feature.py: it declares nothing for good)
    assert op.aggregator(sw).timeout_ns == FP.input_timeout_ns
    t = 10 * FP.t_beacon_ns
    sw.receive("p-h1", host_beacon(1, 40101, t, commit=t - 1), t)
    for k in range(1, 27):  # h1 silent for 26 T_beacon: past the configured 20, within 20 + 7
        sw.transmit(t + k * FP.t_beacon_ns)
    assert op.reports(sw) == [] and not op.commit_aggregator(sw).held(op.Proc("p-h1", bytes([10, 0, 0, 1]), 40101))
    sw.transmit(t + 28 * FP.t_beacon_ns)
    (rep,) = op.reports(sw)
    assert rep["input"] == "10.0.0.1:40101" and rep["last_commit"] == t - 1


def test_without_a_controller_no_timer_of_the_switch_takes_slack():
    sw = _tor(controller=False)
    _give_slack(sw, 7 * FP.t_beacon_ns)
    assert op.status(sw)["timers"]["failure_timeout_ns"] is None
    assert op.commit_aggregator(sw).timeout_ns == op.aggregator(sw).timeout_ns == FP.input_timeout_ns


# ---------------------------------------------------------------------------- the controller's answer timeout


def _declared_after(gap: int, slack: int) -> bool:
    """A fails; B answers its notice, C answers ``gap`` ns after the record (if not declared
    failed by then): is C declared failed for not answering?"""
    ctl = world(A, B, C)
    ctl.set_timer_slack(slack)
    declare(ctl, A, 500, fid=1)
    t_rec = CT0 + CP.report_window_ns
    callback(ctl, B, 1)
    while (due := ctl.next_deadline()) is not None and due <= t_rec + gap:
        ctl.on_timer(due)
        if Fence(C) in ctl.actions.take_all():
            return True
    acts = callback(ctl, C, 1, t_rec + gap)
    assert Release(A) in acts
    return False


def test_an_answer_later_than_the_timeout_but_within_the_slack_is_no_failure():
    timeout = CP.answer_timeout_ns
    assert _declared_after(timeout + 1, 0)
    assert not _declared_after(timeout + 1, CP.retry_ns)
    assert _declared_after(timeout + CP.retry_ns, CP.retry_ns)


def test_the_controller_shows_its_slack_and_lowering_it_applies_to_waits_already_running():
    ctl = world(A, B, C)
    ctl.set_timer_slack(10 * CP.answer_timeout_ns)
    declare(ctl, A, 500, fid=1)
    t_rec = CT0 + CP.report_window_ns
    ctl.on_timer(t_rec + 2 * CP.answer_timeout_ns)
    ctl.actions.take_all()
    assert state(ctl, B) != (1, SUSPECTED)
    c = ctl.counters()
    assert (c["timer_slack_ns"], c["answer_timeout_ns"]) == (10 * CP.answer_timeout_ns, 11 * CP.answer_timeout_ns)
    ctl.set_timer_slack(0)
    assert ctl.next_deadline() <= t_rec + 2 * CP.answer_timeout_ns
    ctl.on_timer(t_rec + 2 * CP.answer_timeout_ns)
    assert {Fence(B), Fence(C)} <= set(ctl.actions.take_all()) and state(ctl, B) == (1, SUSPECTED)


@settings(max_examples=100, deadline=None)
@given(gap=st.integers(min_value=0, max_value=4 * CP.answer_timeout_ns),
       slack=st.integers(min_value=0, max_value=2 * CP.answer_timeout_ns))
@example(gap=CP.answer_timeout_ns + 11, slack=11)
@example(gap=CP.answer_timeout_ns + 10, slack=11)
def test_a_process_is_declared_failed_exactly_when_silent_for_answer_timeout_plus_slack(gap, slack):
    assert _declared_after(gap, slack) == (gap >= CP.answer_timeout_ns + slack)


def _resent_at(slack: int) -> int:
    """When the controller resends a notice nobody answered, given ``slack``."""
    ctl = world(A, B, C)
    ctl.set_timer_slack(slack)
    declare(ctl, A, 500, fid=1)
    t = CT0 + CP.report_window_ns
    while True:
        t = ctl.next_deadline()
        ctl.on_timer(t)
        if any(isinstance(a, SendTo) for a in ctl.actions.take_all()):
            return t


def test_the_controller_resends_a_notice_retry_ns_plus_the_slack_after_the_first_at_most_a_quarter_timeout():
    # a controller whose own queue holds the answers (slow, or a loaded live daemon) does not add
    # resends to it: each waits the slack longer (docs/onepipe-reliable.md "The controller's core")
    base = _resent_at(0)
    assert base == CT0 + CP.report_window_ns + CP.retry_ns
    assert _resent_at(CP.retry_ns) == base + CP.retry_ns
    # at most a quarter of the answer timeout later: a few resends still fit before it expires
    assert _resent_at(10 * CP.answer_timeout_ns) == base + CP.answer_timeout_ns // 4
