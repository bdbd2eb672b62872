"""Failure detection that a slow host does not fool (issue 31), in virtual time.

The paper's controller declares a process failed when it misses its beacons (§8 step 1: its ToR's
input timeout). Ours keeps that as the trigger and adds a suspicion phase: the controller PROBEs
the process and declares it failed only if the probe goes unanswered for the answer timeout (plus
the timer slack). docs/onepipe-reliable.md "Failure detection" has the rules and the bounds:

- a process stalled for less than the answer timeout is never declared failed (it answers the
  probe as soon as it runs again; the switches take its input back, ``Admit``);
- a killed (or stopped for good) process is declared failed within failure timeout + answer
  timeout + report window + the path delays;
- a process that answers probes but stays silent at its ToR (a data-path cut) is declared after
  ``max_strikes`` cleared suspicions without its commit rising in between.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.onepipe import OnePipeOpcode, decode_packet
from netstack.engine import SendTo
from netstack.onepipe.actions import Admit, RecordFailure
from netstack.onepipe.controller import LIVE, SUSPECTED, Controller, ControllerParams
from netstack.onepipe.ctlwire import callback_done, failure_report, parse_probe, probe, register_request

from .rfabric import PARAMS, STALL, T_BEACON, P, RFabric

T = 1000
CP = ControllerParams.for_beacon(T)  # window 1 T, retry 4 T, answer 40 T, 2 strikes
T0 = 1_000_000
A, B = ("10.0.0.1", 40101), ("10.0.0.2", 40101)


def _world(params: ControllerParams = CP) -> Controller:
    ctl = Controller(params, T0)
    for a in (A, B):
        ctl.receive(register_request(1, 0), a, T0)
    ctl.actions.take_all()
    return ctl


def _probes(actions: list) -> list[tuple[tuple[str, int], int, int]]:
    out = []
    for a in actions:
        if isinstance(a, SendTo):
            hdr, payload = decode_packet(a.data)
            if hdr.opcode is OnePipeOpcode.PROBE:
                out.append((a.dst, *parse_probe(hdr, payload)))
    return out


def _suspected(ctl: Controller, now: int, commit: int = 500) -> int:
    """A switch reports A silent: the controller probes it. The probe's id."""
    ctl.report(A, commit, now)
    acts = ctl.actions.take_all()
    ((dst, pid, inc),) = _probes(acts)
    assert dst == A and inc == 1
    assert not any(isinstance(a, RecordFailure) for a in acts)
    return pid


# ---------------------------------------------------------------------------------- the engine

def test_a_probed_process_that_answers_is_not_declared_failed_and_its_input_is_admitted():
    ctl = _world()
    pid = _suspected(ctl, T0 + T)
    ctl.receive(probe(pid, 1), A, T0 + 30 * T)  # late, but within the answer timeout
    assert ctl.actions.take_all() == [Admit(A)]
    ctl.on_timer(T0 + 200 * T)
    assert not any(isinstance(a, RecordFailure) for a in ctl.actions.take_all())
    assert ctl.view()["processes"][0]["state"] == LIVE
    assert ctl.c.probes_answered == 1 and ctl.c.probe_timeouts == 0


def test_an_unanswered_probe_declares_the_process_failed_with_the_reported_commit_as_t_f():
    ctl = _world()
    pid = _suspected(ctl, T0 + T, commit=777)
    ctl.on_timer(T0 + T + 4 * T)  # a resend, not yet a failure
    assert _probes(ctl.actions.take_all()) == [(A, pid, 1)]
    ctl.on_timer(T0 + T + CP.answer_timeout_ns)
    assert ctl.actions.take_all() == []  # suspected now: the report window runs
    assert ctl.view()["processes"][0]["state"] == SUSPECTED
    ctl.on_timer(T0 + T + CP.answer_timeout_ns + CP.report_window_ns)
    (rec,) = ctl.actions.take_all()
    assert isinstance(rec, RecordFailure) and rec.proc == A and rec.t_f == 777
    assert "no answer to a probe" in rec.reason
    assert ctl.c.probe_timeouts == 1


def test_a_closed_port_declares_a_probed_process_at_once_and_a_live_one_waits_the_long_probe_timeout():
    """The live shell hears the kernel's ICMP port unreachable for a probe (netstack.io.udperr): a
    killed process's socket is gone, so it is declared then; a process alive but stalled holds the
    probe in its socket, and with a probe timeout ten answer timeouts long is not declared."""
    params = replace(CP, probe_timeout_ns=10 * CP.answer_timeout_ns)
    ctl = _world(params)
    pid = _suspected(ctl, T0 + T, commit=321)
    ctl.on_timer(T0 + T + 5 * CP.answer_timeout_ns)  # long past the answer timeout: still only probed
    assert _probes(ctl.actions.take_all()) and ctl.c.probe_timeouts == 0
    assert ctl.view()["processes"][0]["state"] == LIVE
    ctl.receive(probe(pid, 1), A, T0 + T + 9 * CP.answer_timeout_ns)  # it ran again: cleared
    assert ctl.actions.take_all() == [Admit(A)]
    ctl.unreachable(B, T0 + 500 * T)  # B is not being probed: proves nothing
    assert ctl.c.stray_unreachable == 1 and ctl.actions.take_all() == []
    _ = _suspected(ctl, T0 + 600 * T, commit=654)
    now = T0 + 600 * T + T
    ctl.unreachable(A, now)  # its port is closed: dead
    ctl.on_timer(now + CP.report_window_ns)
    (rec,) = [a for a in ctl.actions.take_all() if isinstance(a, RecordFailure)]
    assert rec.proc == A and rec.t_f == 654 and "ICMP port unreachable" in rec.reason
    assert ctl.c.probes_refused == 1 and ctl.c.probe_timeouts == 0
    ctl.unreachable(A, now + 2 * T)  # another one, for a process no longer probed
    assert ctl.c.stray_unreachable == 2
    assert ctl.counters()["probe_timeout_ns"] == 10 * CP.answer_timeout_ns


def test_a_closed_port_heard_before_the_report_declares_the_process_when_the_report_comes():
    """The kernel rate-limits ICMP errors: the one for the probe may never come when datagrams sent
    to the dead process since it died used up its host's burst. A port unreachable heard while the
    process was not yet probed is kept, and the switch's report declares it at once; a datagram from
    the process in between shows its socket is open again, and the report is probed as usual."""
    params = replace(CP, probe_timeout_ns=10 * CP.answer_timeout_ns)
    ctl = _world(params)
    ctl.unreachable(A, T0 + 10 * T)
    assert ctl.c.stray_unreachable == 1
    ctl.report(A, 900, T0 + 40 * T)
    ctl.on_timer(T0 + 40 * T + CP.report_window_ns)
    (rec,) = [a for a in ctl.actions.take_all() if isinstance(a, RecordFailure)]
    assert rec.proc == A and rec.t_f == 900 and "its port was closed (ICMP port unreachable 0 ms before)" in rec.reason
    ctl.unreachable(B, T0 + 50 * T)
    ctl.receive(probe(99, 1), B, T0 + 60 * T)  # B speaks (a stray answer): its socket is open
    _ = ctl.actions.take_all()
    ctl.report(B, 901, T0 + 70 * T)
    assert _probes(ctl.actions.take_all())  # probed, not declared
    assert ctl.view()["processes"][1]["state"] == LIVE


def test_the_probe_timeout_must_outlast_a_resend():
    import pytest

    from netstack.errors import ConfigError

    with pytest.raises(ConfigError, match="probe_timeout_ns"):
        replace(CP, probe_timeout_ns=CP.retry_ns)
    with pytest.raises(ConfigError, match="probe_timeout_ns"):
        replace(CP, probe_timeout_ns=-1)


def test_the_probe_waits_the_timer_slack_too():
    ctl = _world()
    ctl.set_timer_slack(50 * T)
    pid = _suspected(ctl, T0 + T)
    ctl.on_timer(T0 + T + CP.answer_timeout_ns + 10 * T)
    ctl.actions.take_all()
    ctl.receive(probe(pid, 1), A, T0 + T + CP.answer_timeout_ns + 40 * T)
    assert Admit(A) in ctl.actions.take_all()


def test_answers_for_another_probe_or_incarnation_clear_nothing():
    ctl = _world()
    pid = _suspected(ctl, T0 + T)
    ctl.receive(probe(pid + 1, 1), A, T0 + 2 * T)
    ctl.receive(probe(pid, 2), A, T0 + 2 * T)
    ctl.receive(probe(pid, 1), B, T0 + 2 * T)
    assert ctl.actions.take_all() == [] and ctl.c.stray_probes == 3


def test_a_process_that_answers_but_stays_silent_at_its_switch_is_declared_after_its_strikes():
    ctl = _world()
    now = T0
    for _ in range(CP.max_strikes):
        now += 10 * T
        pid = _suspected(ctl, now, commit=500)  # the same frozen commit: never heard in between
        ctl.receive(probe(pid, 1), A, now + T)
        ctl.actions.take_all()
    now += 10 * T
    ctl.report(A, 500, now)
    ctl.on_timer(now + CP.report_window_ns)
    assert any(isinstance(a, RecordFailure) for a in ctl.actions.take_all())
    assert ctl.c.struck_out == 1


def test_a_process_heard_again_between_its_stalls_starts_afresh_every_time():
    ctl = _world()
    now = T0
    for i in range(10):
        now += 10 * T
        pid = _suspected(ctl, now, commit=500 + i)  # its commit rose at the switch: it was heard
        ctl.receive(probe(pid, 1), A, now + T)
        assert ctl.actions.take_all() == [Admit(A)]
    assert ctl.c.struck_out == 0 and ctl.c.probes_answered == 10


def test_without_strikes_a_switch_report_is_a_failure_at_once_as_in_the_paper():
    ctl = _world(replace(CP, max_strikes=0))
    ctl.report(A, 500, T0 + T)
    ctl.on_timer(T0 + T + CP.report_window_ns)
    acts = ctl.actions.take_all()
    assert not _probes(acts) and any(isinstance(a, RecordFailure) for a in acts)


def test_a_restart_while_probed_keeps_the_switches_commit_for_t_f():
    ctl = _world()
    _suspected(ctl, T0 + T, commit=900)
    ctl.receive(register_request(2, 0), A, T0 + 2 * T)  # a new nonce: restarted
    ctl.actions.take_all()
    ctl.on_timer(T0 + 2 * T + CP.report_window_ns)
    recs = [a for a in ctl.actions.take_all() if isinstance(a, RecordFailure)]
    assert [r.t_f for r in recs] == [900]


def _failure_of_b(ctl: Controller) -> tuple[int, int]:
    """B is declared failed (paper path: reported by a process); A must call back. (fid, now)."""
    ctl.receive(register_request(1, 0), ("10.0.0.3", 40101), T0)
    ctl.actions.take_all()
    ctl.receive(failure_report(B, 300), ("10.0.0.3", 40101), T0 + T)  # B fenced, its window runs
    ctl.report(B, 300, T0 + T, reporter="fence")
    now = T0 + 2 * T + CP.report_window_ns
    ctl.on_timer(now)
    (rec,) = [a for a in ctl.actions.take_all() if isinstance(a, RecordFailure)]
    ctl.recorded(rec.proc, rec.incarnation, rec.t_f, 1, now)
    ctl.actions.take_all()
    ctl.receive(callback_done(1), ("10.0.0.3", 40101), now)
    ctl.actions.take_all()
    return 1, now


def test_a_slow_callback_is_probed_and_waited_for_anew_when_the_probe_is_answered():
    ctl = _world()
    fid, asked = _failure_of_b(ctl)
    ctl.on_timer(asked + CP.answer_timeout_ns)
    ((dst, pid, inc),) = _probes(ctl.actions.take_all())
    assert dst == A
    ctl.receive(probe(pid, inc), A, asked + CP.answer_timeout_ns + 5 * T)
    assert ctl.actions.take_all() == []  # no Admit: no switch froze it
    ctl.on_timer(asked + 2 * CP.answer_timeout_ns)  # its wait restarted at the answer
    assert not _probes(ctl.actions.take_all())
    ctl.receive(callback_done(fid), A, asked + 2 * CP.answer_timeout_ns)
    assert any(type(a).__name__ == "Release" for a in ctl.actions.take_all())
    assert ctl.c.answer_timeouts == 0 and ctl.c.callbacks == 2


def test_a_silent_callback_is_declared_failed_after_its_probe_and_a_stuck_one_after_its_strikes():
    ctl = _world()
    _, asked = _failure_of_b(ctl)
    ctl.on_timer(asked + CP.answer_timeout_ns)
    assert _probes(ctl.actions.take_all())
    ctl.on_timer(asked + 2 * CP.answer_timeout_ns)  # the probe unanswered
    assert ctl.c.answer_timeouts == 1 and ctl.view()["processes"][0]["state"] == SUSPECTED
    ctl = _world()
    _, now = _failure_of_b(ctl)
    for _ in range(CP.max_strikes):  # alive, answers every probe, never calls back
        now += CP.answer_timeout_ns
        ctl.on_timer(now)
        ((_, pid, inc),) = _probes(ctl.actions.take_all())
        ctl.receive(probe(pid, inc), A, now)
    ctl.on_timer(now + CP.answer_timeout_ns)
    assert ctl.c.answer_timeouts == 1 and ctl.view()["processes"][0]["state"] == SUSPECTED


# ---------------------------------------------------------------------------------- the fabric

#: the documented bound in virtual time (no timer slack): the ToR's failure timeout, the probe's
#: answer timeout, the report window, and the path delays (report, probe, beacon)
BOUND = PARAMS.failure_timeout_ns + CP.for_beacon(T_BEACON).answer_timeout_ns + T_BEACON + 4 * 2_000


def _fabric() -> RFabric:
    fab = RFabric(4, tors=2)
    fab.run_for(150_000)
    assert all(ep.registered for ep in fab.eps.values())
    return fab


def test_a_process_stalled_below_the_answer_timeout_is_never_declared_failed_and_delivers_all():
    fab = _fabric()
    answer = fab.ctl.params.answer_timeout_ns
    fab.send(1, [2, 3])
    fab.freeze(3)
    fab.send(2, [3, 4])
    fab.run_for(answer - 5_000)  # well past the 30 us failure timeout
    fab.thaw(3)
    fab.run_for(1_000_000)
    assert fab.records == []
    assert fab.ctl.c.probes >= 1 and fab.ctl.c.probes_answered == fab.ctl.c.probes
    assert fab.eps[3].incarnation == 1
    fab.check()
    fab.atomic({1, 2, 3, 4})
    assert {(d.src, d.seq) for d in fab.deliveries if d.receiver == 3} == {(1, 0), (2, 0)}


def test_a_killed_process_is_declared_failed_within_the_documented_bound():
    fab = _fabric()
    killed_at = fab.now
    fab.kill(3)
    fab.run_for(2 * BOUND)
    (rec,) = fab.records
    assert rec.proc == P(3)
    assert fab.recorded_at[0] - killed_at <= BOUND + fab.store_delay_ns


@settings(max_examples=25, deadline=None)
@given(stalls=st.lists(st.tuples(st.integers(1_000, 110_000), st.integers(20_000, 200_000)), min_size=1,
                       max_size=6),
       victim=st.integers(1, 4))
def test_stalls_below_the_bound_are_no_failure_and_a_kill_is_always_detected(stalls, victim):
    """Hypothesis: any sequence of stalls shorter than the answer timeout (120 us; the failure
    timeout is 30 us), each followed by a while running, declares nobody failed; a kill after them
    is declared within the bound, and only the killed process."""
    fab = _fabric()
    for stall, run in stalls:
        fab.send(victim % 4 + 1, [victim])
        fab.freeze(victim)
        fab.run_for(stall)
        fab.thaw(victim)
        fab.run_for(run)
    assert fab.records == [], fab.ctl.counters()
    killed_at = fab.now
    fab.kill(victim)
    fab.run_for(2 * BOUND)
    assert [r.proc for r in fab.records] == [P(victim)]
    assert fab.recorded_at[0] - killed_at <= BOUND + fab.store_delay_ns
    fab.check()


def test_every_incarnation_admitted_is_handed_to_the_shell_once_in_order():
    """``take_joined`` (the shell's ``on_register``): an incarnation admitted and declared failed
    between two looks at ``incarnation`` is not skipped."""
    fab = _fabric()
    fab.freeze(3)  # past the bound: declared failed; its notice waits in its socket
    fab.run_for(STALL)
    fab.thaw(3)
    fab.run_for(1_500_000)
    assert fab.eps[3].incarnation == 2
    assert fab.eps[3].take_joined() == [1, 2] and fab.eps[3].take_joined() == []
