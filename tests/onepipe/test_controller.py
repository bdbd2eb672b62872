"""The reliable 1Pipe controller engine (netstack/onepipe/controller.py; design topic §8 in
docs/papers.md, docs/onepipe-reliable.md "Controller"), driven directly: datagrams built with
netstack.onepipe.ctlwire go in, actions come out. No network, no store: the tests play the
shell, calling ``recorded`` for the store and ``report`` for the switches."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers.onepipe import TS_MOD, OnePipeHeader, OnePipeOpcode, decode_packet
from netstack.engine import SendTo
from netstack.errors import ConfigError
from netstack.onepipe.actions import Admit, Fence, RecordFailure, RecordRecall, RegisterProcess, Release
from netstack.onepipe.actions import ControllerAction as Action
from netstack.onepipe.controller import (
    FAILED,
    LIVE,
    RECORDING,
    RELEASED,
    SUSPECTED,
    Controller,
    ControllerCounters,
    ControllerParams,
    is_addr,
)
from netstack.onepipe.ctlwire import (
    Addr,
    Notice,
    Recall,
    RegisterReply,
    callback_done,
    failure_report,
    parse_failure_notice,
    parse_proc,
    parse_recall,
    parse_register_reply,
    parse_relay,
    recall,
    register_request,
    relay,
)

T = 1000  # T_beacon
#: the paper's declaration (a switch report is a failure at once): these tests drive what follows it;
#: the suspicion phase (issue 31) has its own tests in test_failure_detector.py
P = replace(ControllerParams.for_beacon(T), max_strikes=0)  # window 1 T, retry 4 T, answer 40 T
T0 = 1_000_000
A, B, C, D = ("10.0.0.1", 40101), ("10.0.0.2", 40101), ("10.0.0.3", 40102), ("10.0.0.4", 40101)
STRANGER = ("10.9.9.9", 40150)
PREPARE, ACK, RECALL, RECALL_ACK = (OnePipeOpcode.PREPARE, OnePipeOpcode.ACK, OnePipeOpcode.RECALL,
                                    OnePipeOpcode.RECALL_ACK)


# ---------------------------------------------------------------------------------- helpers

def op_of(data: bytes) -> OnePipeOpcode:
    hdr, _ = decode_packet(data)
    assert isinstance(hdr.opcode, OnePipeOpcode)
    return hdr.opcode


def reply_of(data: bytes) -> RegisterReply:
    hdr, payload = decode_packet(data)
    assert hdr.opcode is OnePipeOpcode.REGISTER
    return parse_register_reply(hdr, payload)


def notice_of(data: bytes) -> Notice:
    hdr, payload = decode_packet(data)
    assert hdr.opcode is OnePipeOpcode.FAILURE_NOTICE
    return parse_failure_notice(hdr, payload)


def relay_of(data: bytes) -> tuple[Addr, OnePipeHeader, bytes]:
    hdr, payload = decode_packet(data)
    assert hdr.opcode is OnePipeOpcode.RELAY
    addr, inner, body = parse_relay(payload)
    return addr, inner, bytes(body)


def sends(actions: list[Action], op: OnePipeOpcode | None = None) -> list[SendTo]:
    return [a for a in actions if isinstance(a, SendTo) and (op is None or op_of(a.data) is op)]


def notices(actions: list[Action]) -> list[tuple[Addr, Notice]]:
    return [(s.dst, notice_of(s.data)) for s in sends(actions, OnePipeOpcode.FAILURE_NOTICE)]


def kinds(actions: list[Action]) -> list[str]:
    return [type(a).__name__ for a in actions]


def register(ctl: Controller, addr: Addr, nonce: int = 1, seen: int = 0, recover: bool = False,
             now: int = T0) -> list[Action]:
    ctl.receive(register_request(nonce, seen, recover), addr, now)
    return ctl.actions.take_all()


def world(*addrs: Addr, now: int = T0) -> Controller:
    ctl = Controller(P, now)
    for a in addrs:
        register(ctl, a, now=now)
    return ctl


def state(ctl: Controller, addr: Addr) -> tuple[int, str]:
    for p in ctl.view()["processes"]:
        if p["addr"] == f"{addr[0]}:{addr[1]}":
            return p["incarnation"], p["state"]
    raise KeyError(addr)


def declare(ctl: Controller, addr: Addr, commit: int | None = 500, now: int = T0, fid: int = 1) -> list[Action]:
    """``addr`` reported, its window closed and its record durable as ``fid``: the actions of
    ``recorded`` (the notices)."""
    ctl.report(addr, commit, now)
    ctl.on_timer(now + P.report_window_ns)
    (rec,) = ctl.actions.take_all()
    assert isinstance(rec, RecordFailure)
    ctl.recorded(rec.proc, rec.incarnation, rec.t_f, fid, now + P.report_window_ns)
    return ctl.actions.take_all()


def callback(ctl: Controller, src: Addr, fid: int, now: int = T0) -> list[Action]:
    ctl.receive(callback_done(fid), src, now)
    return ctl.actions.take_all()


def prepare(psn: int = 0, ts: int = 5000) -> bytes:
    return OnePipeHeader(ts, ts, 0, psn, PREPARE, 0x05).to_bytes() + b"payload"


def ack(psn: int = 1) -> bytes:
    return OnePipeHeader(0, 0, 0, psn, ACK).to_bytes()


def send_relay(ctl: Controller, src: Addr, dst: Addr, inner: bytes, now: int = T0) -> list[Action]:
    ctl.receive(relay(dst, inner), src, now)
    return ctl.actions.take_all()


def released(ctl: Controller) -> dict[int, bool]:
    return {f["fid"]: f["released"] for f in ctl.view()["failures"]}


# ---------------------------------------------------------------------------------- parameters

def test_params_for_beacon_and_validation():
    assert ControllerParams.for_beacon(3) == ControllerParams(3, 12, 120, max_strikes=2, strike_window_ns=0)
    for bad in (dict(report_window_ns=-1, retry_ns=1, answer_timeout_ns=2),
                dict(report_window_ns=0, retry_ns=0, answer_timeout_ns=2),
                dict(report_window_ns=0, retry_ns=5, answer_timeout_ns=5),
                dict(report_window_ns=0, retry_ns=True, answer_timeout_ns=5),
                dict(report_window_ns=0, retry_ns=1.5, answer_timeout_ns=5)):
        with pytest.raises(ConfigError):
            ControllerParams(**bad)
    for t in (0, -1, 1.0, None):
        with pytest.raises(ConfigError):
            ControllerParams.for_beacon(t)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------- registration

def test_a_new_process_gets_incarnation_1_and_a_first_incarnation_is_announced_to_nobody():
    ctl = Controller(P, T0)
    acts = register(ctl, A, nonce=7)
    assert kinds(acts) == ["RegisterProcess", "Admit", "SendTo"]
    assert acts[0] == RegisterProcess(A, 1) and acts[1] == Admit(A)  # (a ban of an old incarnation ends)
    assert acts[2].dst == A and reply_of(acts[2].data) == RegisterReply(A, 1, 0, 7, 0, 0)
    acts = register(ctl, B, nonce=9)
    assert acts[0] == RegisterProcess(B, 1)
    # no connection to it was ever closed: nobody needs telling (O(N) datagrams as a fabric starts)
    assert [(s.dst, reply_of(s.data)) for s in sends(acts)] == [(B, RegisterReply(B, 1, 0, 9, 0, 0))]
    assert state(ctl, A) == (1, LIVE) and state(ctl, B) == (1, LIVE)
    assert ctl.counters()["registrations"] == 2 and ctl.counters()["announcements"] == 0


def test_a_repeated_request_gets_the_same_reply_and_nothing_else():
    ctl = world(A, B)
    first = register(Controller(P, T0), A, nonce=1)
    again = register(ctl, A, nonce=1)
    assert again == [SendTo(A, first[2].data)]
    assert ctl.counters()["register_repeats"] == 1 and ctl.counters()["registrations"] == 2


def test_a_restart_is_a_failure_then_a_new_incarnation_once_released():
    ctl = world(A, B)
    acts = register(ctl, A, nonce=2)  # A restarted before anyone noticed
    assert acts == [Fence(A)] and state(ctl, A) == (1, SUSPECTED)
    assert register(ctl, A, nonce=2) == []  # not before its failure is released
    assert ctl.counters()["restarts"] == 1 and ctl.counters()["register_deferred"] == 1
    acts = declare(ctl, A, 800)
    assert {dst for dst, _ in notices(acts)} == {A, B}
    assert state(ctl, A) == (1, FAILED)
    assert register(ctl, A, nonce=2) == []
    assert callback(ctl, B, 1) == [Release(A)]
    assert state(ctl, A) == (1, RELEASED)
    acts = register(ctl, A, nonce=2)
    assert acts[0] == RegisterProcess(A, 2)
    # B closed its connection to A's first incarnation: it hears of the second; a restarted A has
    # nothing closed, so it is told of nobody
    assert [(s.dst, reply_of(s.data)) for s in sends(acts)] == [
        (A, RegisterReply(A, 2, 1, 2, 0, 0)), (B, RegisterReply(A, 2, 1, 0, 0, 0))]
    assert state(ctl, A) == (2, LIVE)


def test_a_process_joining_afresh_is_told_of_every_process_still_failed():
    """A failed process may be alive and not know it yet (a stall, a lost notice), and scatter to
    a newcomer, which never heard of its failure, above its T_f: the newcomer gets the failure of
    every current incarnation that is failed (REPLAY notices, before its reply). A process that
    re-joined since is not failed any more, and the newcomer's own old failure is not news."""
    ctl = world(A, B, C)
    declare(ctl, A, 500, fid=1)
    declare(ctl, B, 600, now=T0 + 10, fid=2)
    callback(ctl, C, 1)
    callback(ctl, C, 2)
    register(ctl, B, nonce=5, seen=2, recover=True)  # B recovers as incarnation 2
    acts = register(ctl, D, nonce=3)
    assert [(s.dst, op_of(s.data)) for s in sends(acts)][:2] == [(D, OnePipeOpcode.FAILURE_NOTICE),
                                                                 (D, OnePipeOpcode.REGISTER)]
    assert notices(acts) == [(D, Notice(A, 1, 500, 1, True))]
    assert ctl.counters()["notices_to_newcomers"] == 1
    assert register(ctl, D, nonce=3) == [SendTo(D, sends(acts)[0].data), SendTo(D, sends(acts)[1].data)]


def test_fence_is_repeated_until_a_switch_reports():
    ctl = world(A, B)
    register(ctl, A, nonce=2)
    assert ctl.next_deadline() == T0 + P.retry_ns
    ctl.on_timer(T0 + P.retry_ns)
    assert ctl.actions.take_all() == [Fence(A)]
    ctl.report(A, 42, T0 + P.retry_ns + 1)
    assert ctl.next_deadline() == T0 + P.retry_ns + 1 + P.report_window_ns  # only the window now
    assert ctl.counters()["fence_retries"] == 1


def test_recovery_batch_replays_failures_since_the_revision_seen_and_undeliverable_recalls():
    ctl = world(A, B, C)
    declare(ctl, C, 300, fid=1)
    callback(ctl, A, 1)
    assert callback(ctl, B, 1) == [Release(C)]
    declare(ctl, A, 700, fid=2)
    r = Recall(ts=4321, psn=7, npkts=2, seq=3)
    acts = send_relay(ctl, B, A, recall(RECALL, r))
    assert acts[0] == RecordRecall(B, 1, 7, A, 1)
    assert callback(ctl, B, 2) == [Release(A)]

    acts = register(ctl, A, nonce=5, seen=0, recover=True)
    assert acts[0] == RegisterProcess(A, 2)
    to_a = [s.data for s in sends(acts) if s.dst == A]
    assert [notice_of(d) for d in to_a[:2]] == [Notice(C, 1, 300, 1, True), Notice(A, 1, 700, 2, True)]
    sender, inner, body = relay_of(to_a[2])
    assert sender == B and inner.opcode is RECALL and parse_recall(inner, body) == r
    assert reply_of(to_a[3]) == RegisterReply(A, 2, 2, 5, 2, 1)
    assert len(to_a) == 4  # B never changed incarnation: no announcement of it (C is not live)
    c = ctl.counters()
    assert (c["recoveries"], c["replays_sent"], c["recalls_replayed"]) == (1, 2, 1)
    # the batch was lost: the same request gets the whole of it again
    assert [s.data for s in register(ctl, A, nonce=5, seen=0, recover=True)] == to_a[:4]


def test_recovery_skips_failures_already_seen():
    ctl = world(A, B, C)
    declare(ctl, C, 300, fid=1)
    callback(ctl, A, 1)
    callback(ctl, B, 1)
    declare(ctl, A, 700, fid=2)
    callback(ctl, B, 2)
    acts = register(ctl, A, nonce=5, seen=1, recover=True)
    to_a = [s.data for s in sends(acts) if s.dst == A]
    assert notice_of(to_a[0]) == Notice(A, 1, 700, 2, True)
    assert reply_of(to_a[1]) == RegisterReply(A, 2, 2, 5, 1, 0)


# ---------------------------------------------------------------------------------- detection

def test_t_f_is_the_max_of_the_reports_in_the_window_and_nothing_leaves_before_recorded():
    ctl = world(A, B, C)
    ctl.report(A, 500, T0)
    ctl.report(A, 900, T0 + 10, reporter="process")
    ctl.report(A, None, T0 + 20)
    ctl.report(A, 700, T0 + 30)
    assert ctl.actions.take_all() == []  # the first reporter is a switch: A's input is frozen there
    assert state(ctl, A) == (1, SUSPECTED)
    assert ctl.next_deadline() == T0 + P.report_window_ns
    ctl.on_timer(T0 + P.report_window_ns - 1)
    assert ctl.actions.take_all() == []
    ctl.on_timer(T0 + P.report_window_ns)
    acts = ctl.actions.take_all()
    assert len(acts) == 1 and acts[0][:3] == (A, 1, 900) and isinstance(acts[0], RecordFailure)
    assert state(ctl, A) == (1, RECORDING)
    ctl.on_timer(T0 + 100 * T)  # however long the store takes: no notice before it is durable
    assert ctl.actions.take_all() == [] and ctl.next_deadline() is None
    ctl.recorded(A, 1, 900, 1, T0 + 100 * T)
    assert sorted(dst for dst, _ in notices(ctl.actions.take_all())) == [A, B, C]


def test_t_f_max_is_wrap_aware_and_none_everywhere_means_zero():
    ctl = world(A, B)
    ctl.report(A, TS_MOD - 10, T0)
    ctl.report(A, 5, T0)  # 15 ns later, across the 48-bit wrap
    ctl.on_timer(T0 + P.report_window_ns)
    assert ctl.actions.take_all()[0][:3] == (A, 1, 5)
    ctl.report(B, None, T0)
    ctl.report(B, 0, T0)
    ctl.on_timer(T0 + P.report_window_ns)
    assert ctl.actions.take_all()[0][:3] == (B, 1, 0)


def test_a_process_report_fences_the_accused():
    ctl = world(A, B)
    ctl.report(A, 100, T0, reporter="process")
    assert ctl.actions.take_all() == [Fence(A)]
    ctl.receive(failure_report(A, 200), B, T0)  # late (already suspected): part of the same window
    assert ctl.actions.take_all() == []
    ctl.on_timer(T0 + P.report_window_ns)
    assert ctl.actions.take_all()[0][:3] == (A, 1, 200)


def test_a_failure_report_datagram_from_a_live_process_accuses():
    ctl = world(A, B)
    ctl.receive(failure_report(A, 300), B, T0)
    assert ctl.actions.take_all() == [Fence(A)] and state(ctl, A) == (1, SUSPECTED)
    ctl.receive(failure_report(B, 300), STRANGER, T0)
    ctl.receive(failure_report(STRANGER, 300), B, T0)  # no Release on a process's word
    ctl.receive(failure_report(B, 300)[:-1], B, T0)
    assert ctl.actions.take_all() == [] and state(ctl, B) == (1, LIVE)
    c = ctl.counters()
    assert (c["unregistered"], c["bad_reports"], c["malformed"]) == (1, 1, 1)


def test_links_and_unregistered_addresses_are_released_at_once():
    ctl = world(A)
    ctl.report("s1:p3", 100, T0)
    ctl.report(STRANGER, None, T0)
    assert ctl.actions.take_all() == [Release("s1:p3"), Release(STRANGER)]
    assert ctl.counters()["released_unregistered"] == 2
    before = ctl.view()
    for inp, commit in ((("10.0.0.1", 99999), 1), ((1, 2), 1), (["x"], 1), (None, 1), (A, -1), (A, TS_MOD),
                        (A, 1.5), (A, "7")):
        ctl.report(inp, commit, T0)  # type: ignore[arg-type]
    assert ctl.actions.take_all() == [] and ctl.view() == before
    assert ctl.counters()["bad_reports"] == 8


def test_late_and_stale_reports_change_nothing():
    ctl = world(A, B)
    ctl.report(A, 500, T0)
    ctl.on_timer(T0 + P.report_window_ns)
    ctl.actions.take_all()
    ctl.report(A, 400, T0 + 2 * T)  # late, below T_f
    ctl.report(A, 600, T0 + 2 * T)  # late and above: T_f is final once written
    ctl.recorded(A, 1, 500, 1, T0 + 3 * T)
    ctl.actions.take_all()
    before = ctl.view()
    ctl.report(A, 900, T0 + 4 * T)
    assert ctl.actions.take_all() == [] and ctl.view() == before
    c = ctl.counters()
    assert (c["late_reports"], c["stale_reports"], c["records_requested"]) == (3, 2, 1)


# ---------------------------------------------------------------------------------- notices, callbacks, release

def test_notices_go_to_every_live_process_and_the_failed_one_and_are_resent_to_the_silent():
    ctl = world(A, B, C)
    acts = declare(ctl, A, 500, fid=1)
    assert notices(acts) == [(B, Notice(A, 1, 500, 1, False)), (C, Notice(A, 1, 500, 1, False)),
                             (A, Notice(A, 1, 500, 1, False))]
    t_rec = T0 + P.report_window_ns
    assert callback(ctl, B, 1, t_rec + 10) == []
    ctl.on_timer(t_rec + P.retry_ns)
    assert [dst for dst, _ in notices(ctl.actions.take_all())] == [C]  # not B (answered), not A
    assert callback(ctl, C, 1, t_rec + P.retry_ns + 5) == [Release(A)]
    assert released(ctl) == {1: True} and state(ctl, A) == (1, RELEASED)
    assert ctl.view()["revision"] == 1
    c = ctl.counters()
    assert (c["notices_sent"], c["notice_retries"], c["callbacks"], c["releases"]) == (3, 1, 2, 1)


def test_nobody_to_wait_for_releases_at_once():
    ctl = world(A)
    acts = declare(ctl, A, 500, fid=1)
    assert [type(a) for a in acts] == [SendTo, Release] and acts[1] == Release(A)


def test_a_process_silent_for_the_answer_timeout_is_declared_failed_and_release_follows():
    ctl = world(A, B, C)
    declare(ctl, A, 500, fid=1)
    t_rec = T0 + P.report_window_ns
    callback(ctl, B, 1)
    ctl.on_timer(t_rec + P.answer_timeout_ns - 1)
    assert Fence(C) not in ctl.actions.take_all()
    ctl.on_timer(t_rec + P.answer_timeout_ns)
    assert ctl.actions.take_all() == [Fence(C), Release(A)]
    assert state(ctl, C) == (1, SUSPECTED) and ctl.counters()["answer_timeouts"] == 1
    # C goes through the same pipeline; B is the only one left to answer for it
    acts = declare(ctl, C, 50, now=t_rec + P.answer_timeout_ns, fid=2)
    assert sorted(dst for dst, _ in notices(acts)) == [B, C]


def test_a_declared_process_stops_being_waited_for_everywhere():
    ctl = world(A, B, C, D)
    declare(ctl, A, 500, fid=1)
    declare(ctl, B, 600, fid=2)  # A is not live: not asked about B
    callback(ctl, D, 1)
    callback(ctl, D, 2)
    assert released(ctl) == {1: False, 2: False}
    ctl.report(C, 10, T0 + 5 * T)
    assert ctl.actions.take_all() == [Release(A), Release(B)]


def test_callbacks_from_strangers_unknown_fids_and_duplicates_are_refused():
    ctl = world(A, B, C)
    declare(ctl, A, 500, fid=1)
    before = ctl.view()
    assert callback(ctl, STRANGER, 1) == []
    # the failed process itself is not live: it is told again that it failed (it never heard)
    assert notices(callback(ctl, A, 1)) == [(A, Notice(A, 1, 500, 1, False))]
    assert callback(ctl, B, 77) == []
    assert ctl.view() == before
    callback(ctl, B, 1)
    after = ctl.view()
    assert callback(ctl, B, 1) == [] and ctl.view() == after
    register(ctl, D)
    assert callback(ctl, D, 1) == []  # registered after the notice: never asked
    c = ctl.counters()
    assert (c["unregistered"], c["unknown_fid"], c["duplicate_callbacks"], c["unexpected_callbacks"]) == (2, 1, 1, 1)
    assert released(ctl) == {1: False}


def test_stale_and_foreign_records_are_refused():
    ctl = world(A, B)
    ctl.report(A, 500, T0)
    ctl.on_timer(T0 + P.report_window_ns)
    ctl.actions.take_all()
    before = ctl.view()
    for args in ((A, 1, 499, 1), (A, 2, 500, 1), (B, 1, 0, 1), (STRANGER, 1, 500, 1), (A, 1, 500, 0),
                 (A, 1, 500, 1 << 32), ((1, 2), 1, 500, 1)):
        ctl.recorded(*args, now_ns=T0 + 2 * T)  # type: ignore[arg-type]
    assert ctl.actions.take_all() == [] and ctl.view() == before
    ctl.recorded(A, 1, 500, 4, T0 + 2 * T)
    assert len(notices(ctl.actions.take_all())) == 2
    ctl.recorded(A, 1, 500, 4, T0 + 2 * T)  # twice
    assert ctl.actions.take_all() == []
    assert ctl.counters()["stale_records"] == 8


# ---------------------------------------------------------------------------------- relay

def test_a_relay_between_live_processes_is_forwarded_and_its_answer_clears_the_wait():
    ctl = world(A, B)
    inner = prepare(3)
    acts = send_relay(ctl, A, B, inner)
    assert acts == [SendTo(B, relay(A, inner))]
    assert ctl.next_deadline() == T0 + P.answer_timeout_ns
    acts = send_relay(ctl, B, A, ack(4), T0 + 10)
    assert acts == [SendTo(A, relay(B, ack(4)))]
    assert ctl.next_deadline() is None
    ctl.on_timer(T0 + 2 * P.answer_timeout_ns)
    assert ctl.actions.take_all() == [] and ctl.counters()["relayed"] == 2


def test_an_unanswered_relayed_request_declares_the_destination_failed():
    ctl = world(A, B)
    send_relay(ctl, A, B, prepare(0))
    send_relay(ctl, A, B, prepare(1), T0 + T)  # the oldest unanswered one counts
    ctl.on_timer(T0 + P.answer_timeout_ns)
    assert ctl.actions.take_all() == [Fence(B)]
    assert state(ctl, B) == (1, SUSPECTED) and ctl.counters()["relay_timeouts"] == 1
    assert ctl.view()["pending_relays"] == []


def test_a_recall_to_a_failed_process_is_recorded_once_and_acked_on_its_behalf():
    ctl = world(A, B, C)
    declare(ctl, C, 500, fid=1)
    r = Recall(ts=1234, psn=9, npkts=3, seq=11)
    acts = send_relay(ctl, A, C, recall(RECALL, r, be=77))
    assert acts[0] == RecordRecall(A, 1, 9, C, 1)
    (ack_back,) = sends(acts)
    sender, inner, body = relay_of(ack_back.data)
    assert ack_back.dst == A and sender == C and inner.opcode is RECALL_ACK and parse_recall(inner, body) == r
    again = send_relay(ctl, A, C, recall(RECALL, r))  # our RECALL_ACK was lost
    assert again == [ack_back]
    c = ctl.counters()
    assert (c["recalls_recorded"], c["duplicate_recalls"], c["recall_acks_sent"]) == (1, 1, 2)
    assert ctl.view()["recalls"] == [{"sender": "10.0.0.1:40101", "sender_incarnation": 1, "psn": 9,
                                      "receiver": "10.0.0.3:40102", "receiver_incarnation": 1}]


def test_a_recall_to_a_suspected_process_is_taken_too():
    ctl = world(A, B)
    ctl.report(B, 5, T0)
    acts = send_relay(ctl, A, B, recall(RECALL, Recall(1, 2, 1, 0)))
    assert kinds(acts) == ["RecordRecall", "SendTo"]


def test_relays_to_failed_unknown_and_from_strangers_are_dropped():
    ctl = world(A, B, C)
    declare(ctl, C, 500, fid=1)
    before = ctl.view()
    # a PREPARE to a failed process: dropped, and its sender told of the failure (it may have
    # joined after it, so it never heard: it would resend for ever), as a replay: no answer wanted
    (told,) = send_relay(ctl, A, C, prepare())
    assert told.dst == A and notice_of(told.data) == Notice(C, 1, 500, 1, True)
    assert send_relay(ctl, A, C, ack()) == []
    assert send_relay(ctl, A, STRANGER, prepare()) == []
    assert send_relay(ctl, STRANGER, B, prepare()) == []
    # a failed process is no longer a source; alive, it never heard it failed: told again, at most
    # once per retry_ns (then it recovers as a new incarnation)
    assert notices(send_relay(ctl, C, B, prepare())) == [(C, Notice(C, 1, 500, 1, False))]
    assert send_relay(ctl, C, B, prepare(), now=T0 + P.retry_ns - 1) == []
    assert notices(send_relay(ctl, C, B, prepare(), now=T0 + P.retry_ns)) == [(C, Notice(C, 1, 500, 1, False))]
    ctl.receive(relay(B, b"\x00" * 10), A, T0)  # inner packet truncated
    ctl.receive(relay(B, recall(RECALL, Recall(1, 2, 1, 0))[:-1]), A, T0)  # RECALL body short
    ctl.receive(relay(B, relay(A, prepare())), A, T0)  # a relay inside a relay
    assert ctl.actions.take_all() == [] and ctl.view() == before
    c = ctl.counters()
    assert (c["to_failed"], c["unknown_destination"], c["unregistered"], c["malformed"]) == (2, 1, 4, 3)
    assert (c["notices_to_strays"], c["notices_to_failed"]) == (1, 2)


# ---------------------------------------------------------------------------------- bad input

def test_bad_datagrams_are_counted_and_change_nothing():
    ctl = world(A, B)
    declare(ctl, A, 500, fid=1)
    before = ctl.view()
    bad_src: list[Any] = [None, 7, "10.0.0.2:40101", ("10.0.0.2",), ("10.0.0.2", "40101"), ("010.0.0.2", 40101),
                          (167772162, 40101), ("10.0.0.2", True), ("10.0.0.2", 70000), ["10.0.0.2", 40101]]
    for src in bad_src:
        ctl.receive(register_request(1, 0), src, T0)
    for data in (b"", b"\x00" * 23, b"\x00" * 22 + b"\xff\x00", OnePipeHeader(0, 0, 0, 0, OnePipeOpcode.BEACON)
                 .to_bytes() + b"x", register_request(1, 0) + b"x", callback_done(1)[:-1]):
        ctl.receive(data, B, T0)
    ctl.receive(OnePipeHeader(0, 0, 0, 0, OnePipeOpcode.BEACON).to_bytes(), B, T0)
    ctl.receive(OnePipeHeader(0, 0, 0, 0, OnePipeOpcode.RESUME).to_bytes(), B, T0)
    ctl.receive(prepare(), B, T0)
    assert ctl.actions.take_all() == [] and ctl.view() == before
    c = ctl.counters()
    assert (c["foreign"], c["malformed"]) == (len(bad_src) + 3, 6)


def test_counters_and_view_export():
    ctl = world(A, B)
    declare(ctl, A, 500, fid=1)
    send_relay(ctl, B, A, recall(RECALL, Recall(1, 2, 1, 0)))
    c = ctl.counters()
    assert set(ControllerCounters.__dataclass_fields__) <= set(c)
    assert (c["revision"], c["processes_live"], c["failures_pending"], c["undeliverable_recalls"]) == (1, 1, 1, 1)
    view = ctl.view()
    assert json.loads(json.dumps(view)) == view
    assert view["failures"] == [{"proc": "10.0.0.1:40101", "incarnation": 1, "t_f": 500, "fid": 1,
                                 "waiting": ["10.0.0.2:40101"], "released": False}]
    assert [(p["addr"], p["state"]) for p in view["processes"]] == [("10.0.0.1:40101", FAILED),
                                                                     ("10.0.0.2:40101", LIVE)]


def test_is_addr():
    assert is_addr(A) and not is_addr(("1.2.3", 1)) and not is_addr(("1.2.3.4", -1)) and not is_addr("1.2.3.4")


# ---------------------------------------------------------------------------------- failover

def test_restore_drives_current_failures_again_and_remembers_recalls():
    ctl = Controller.restore(P, T0, processes=[(A, 1), (B, 1), (C, 1), (C, 2)],
                             failures=[(A, 1, 700, 4), (C, 1, 50, 3)], recalls=[(B, 1, 7, A, 1)])
    acts = ctl.actions.take_all()
    # C's incarnation 1 failure was released (C re-registered after it): not driven again
    assert notices(acts) == [(B, Notice(A, 1, 700, 4, False)), (C, Notice(A, 1, 700, 4, False)),
                             (A, Notice(A, 1, 700, 4, False))]
    assert state(ctl, A) == (1, FAILED) and state(ctl, C) == (2, LIVE)
    assert released(ctl) == {3: True, 4: False}
    assert ctl.view()["revision"] == 4
    callback(ctl, B, 4)
    assert callback(ctl, C, 4) == [Release(A)]
    acts = register(ctl, A, nonce=1, seen=3, recover=True)
    to_a = [s.data for s in sends(acts) if s.dst == A]
    assert notice_of(to_a[0]) == Notice(A, 1, 700, 4, True)
    sender, inner, body = relay_of(to_a[1])
    assert sender == B and parse_recall(inner, body) == Recall(0, 7, 1, 0)
    assert reply_of(to_a[2]) == RegisterReply(A, 2, 4, 1, 1, 1)


def test_restore_treats_a_live_process_of_unknown_nonce_as_restarted():
    ctl = Controller.restore(P, T0, processes=[(A, 1), (B, 1)], failures=[], recalls=[])
    assert ctl.actions.take_all() == []
    assert register(ctl, A, nonce=1) == [Fence(A)]


@pytest.mark.parametrize("kw", [
    dict(processes=[(("1.2.3", 1), 1)], failures=[], recalls=[]),
    dict(processes=[(A, 0)], failures=[], recalls=[]),
    dict(processes=[], failures=[(A, 1, -1, 1)], recalls=[]),
    dict(processes=[], failures=[(A, 1, 5, 0)], recalls=[]),
    dict(processes=[], failures=[(A, 1, 5, 1), (B, 1, 5, 1)], recalls=[]),
    dict(processes=[(A, 1)], failures=[], recalls=[(A, 1, -3, B, 1)]),
])
def test_restore_refuses_malformed_records(kw):
    with pytest.raises(ConfigError):
        Controller.restore(P, T0, **kw)


# ---------------------------------------------------------------------------------- hypothesis

ADDRS = [A, B, C, D]
_opcodes = st.sampled_from(list(OnePipeOpcode))
_headers = st.builds(OnePipeHeader, st.integers(0, TS_MOD - 1), st.integers(0, TS_MOD - 1),
                     st.integers(0, TS_MOD - 1), st.integers(0, 2**32 - 1), _opcodes, st.integers(0, 255))
_inner = st.one_of(st.binary(max_size=40), st.tuples(_headers, st.binary(max_size=16)).map(
    lambda hp: hp[0].to_bytes() + hp[1]))
_datagrams = st.one_of(
    st.binary(max_size=80),
    st.tuples(_headers, st.binary(max_size=40)).map(lambda hp: hp[0].to_bytes() + hp[1]),
    st.tuples(st.sampled_from([*ADDRS, STRANGER]), _inner).map(lambda ai: relay(ai[0], ai[1])),
    st.integers(0, 2**32 - 1).map(callback_done),
)
_sources = st.one_of(st.sampled_from([*ADDRS, STRANGER]),
                     st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 0xFFFF)),
                     st.tuples(st.text(max_size=8), st.integers(-5, 70000)), st.integers(), st.text(max_size=12),
                     st.none())


@settings(max_examples=300)
@given(st.lists(st.tuples(_datagrams, _sources), max_size=30))
def test_arbitrary_datagrams_never_raise_and_strangers_change_only_counters(inputs):
    ctl = world(A, B, C, D)
    declare(ctl, A, 500, fid=1)
    send_relay(ctl, B, A, recall(RECALL, Recall(1, 2, 1, 0)))
    ctl.actions.take_all()
    base = ctl.counters()["datagrams"]
    now = T0
    for data, src in inputs:
        now += 7
        live = {parse_proc(p["addr"]) for p in ctl.view()["processes"] if p["state"] == LIVE}
        before = ctl.view()
        ctl.receive(data, src, now)
        if src not in live and not (len(data) >= 24 and data[22] == OnePipeOpcode.REGISTER):
            # a stranger changes nothing; a failed process (A) may only be told it failed
            told = ctl.actions.take_all()
            assert ctl.view() == before
            assert all(src == A and n == Notice(A, 1, 500, 1, False) for _, n in notices(told))
            assert len(notices(told)) == len(told)
        ctl.actions.take_all()
        ctl.on_timer(now)
        ctl.actions.take_all()
    assert ctl.counters()["datagrams"] == base + len(inputs)


_ops = st.one_of(
    st.tuples(st.just("register"), st.integers(0, 3), st.integers(1, 2), st.booleans()),
    st.tuples(st.just("report"), st.integers(0, 4), st.one_of(st.none(), st.integers(0, 2000)), st.booleans()),
    st.tuples(st.just("record"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("callback"), st.integers(0, 3), st.integers(0, 6)),
    st.tuples(st.just("tick"), st.integers(0, 15 * T)),
    st.tuples(st.just("relay"), st.integers(0, 3), st.integers(0, 3), st.sampled_from(["prepare", "ack", "recall"])),
)


class Model:
    """Plays the shell and the store around one controller, and checks the invariants on every
    action: at most one RecordFailure per incarnation; no notice about an incarnation before its
    record is durable; Release(P) only once every process live at recording time answered or was
    itself declared failed."""

    def __init__(self) -> None:
        self.ctl = Controller(P, T0)
        self.now = T0
        self.asked: set[tuple[Addr, int]] = set()  # RecordFailure seen
        self.to_record: list[RecordFailure] = []
        self.durable: dict[tuple[Addr, int], int] = {}  # -> fid
        self.live_at_record: dict[int, dict[Addr, int]] = {}
        self.answered: dict[int, set[Addr]] = {}
        self.fid = 0
        self.releases = 0

    def procs(self) -> dict[Addr, tuple[int, str]]:
        return {parse_proc(p["addr"]): (p["incarnation"], p["state"]) for p in self.ctl.view()["processes"]}

    def drain(self) -> None:
        procs = self.procs()
        for a in self.ctl.actions.take_all():
            if isinstance(a, RecordFailure):
                assert (a.proc, a.incarnation) not in self.asked
                self.asked.add((a.proc, a.incarnation))
                self.to_record.append(a)
            elif isinstance(a, SendTo) and op_of(a.data) is OnePipeOpcode.FAILURE_NOTICE:
                n = notice_of(a.data)
                assert self.durable.get((n.addr, n.incarnation)) == n.fid
            elif isinstance(a, Release) and isinstance(a.proc, tuple) and a.proc in procs:
                self.check_release(a.proc, procs)

    def check_release(self, addr: Addr, procs: dict[Addr, tuple[int, str]]) -> None:
        inc = max(i for (p, i) in self.durable if p == addr)
        fid = self.durable[(addr, inc)]
        for q, q_inc in self.live_at_record[fid].items():
            answered = q in self.answered[fid]
            declared = procs[q][0] != q_inc or procs[q][1] != LIVE
            assert answered or declared, f"Release({addr}) before {q} answered fid {fid}"
        self.releases += 1

    def step(self, op: tuple[Any, ...]) -> None:
        ctl, kind = self.ctl, op[0]
        if kind == "register":
            ctl.receive(register_request(op[2], 0, op[3]), ADDRS[op[1]], self.now)
        elif kind == "report":
            inp: Addr | str = ADDRS[op[1]] if op[1] < 4 else "s1:p1"
            ctl.report(inp, op[2], self.now, reporter="switch" if op[3] else "process")
        elif kind == "record" and self.to_record:
            self.record(self.to_record[op[1] % len(self.to_record)], wrong=op[2])
        elif kind == "callback":
            self.callback(ADDRS[op[1]], op[2])
        elif kind == "tick":
            self.now += op[1]
            ctl.on_timer(self.now)
        elif kind == "relay":
            inner = {"prepare": prepare(), "ack": ack(), "recall": recall(RECALL, Recall(1, 2, 1, 0))}[op[3]]
            ctl.receive(relay(ADDRS[op[2]], inner), ADDRS[op[1]], self.now)
        self.drain()
        self.check_view()

    def record(self, rec: RecordFailure, wrong: bool) -> None:
        if wrong:
            stale = self.ctl.counters()["stale_records"]
            self.ctl.recorded(rec.proc, rec.incarnation, (rec.t_f + 1) % TS_MOD, self.fid + 1, self.now)
            assert self.ctl.counters()["stale_records"] == stale + 1
            return
        self.to_record.remove(rec)
        self.fid += 1
        self.live_at_record[self.fid] = {a: i for a, (i, s) in self.procs().items() if s == LIVE and a != rec.proc}
        self.answered[self.fid] = set()
        self.durable[(rec.proc, rec.incarnation)] = self.fid
        self.ctl.recorded(rec.proc, rec.incarnation, rec.t_f, self.fid, self.now)

    def callback(self, src: Addr, fid: int) -> None:
        procs = self.procs()
        if src in procs and procs[src][1] == LIVE and fid in self.answered \
                and self.live_at_record[fid].get(src) == procs[src][0]:
            self.answered[fid].add(src)
        self.ctl.receive(callback_done(fid), src, self.now)

    def settle(self) -> None:
        while self.to_record:
            self.record(self.to_record[0], wrong=False)
            self.drain()
        for fid in self.answered:
            for q in ADDRS:
                self.callback(q, fid)
        self.drain()
        for q, (_, st_) in self.procs().items():
            if st_ == SUSPECTED:
                self.ctl.report(q, None, self.now)
        self.now += P.answer_timeout_ns
        self.ctl.on_timer(self.now)
        self.drain()
        self.check_view()

    def check_view(self) -> None:
        view = self.ctl.view()
        live = {p["addr"] for p in view["processes"] if p["state"] == LIVE}
        for f in view["failures"]:
            assert set(f["waiting"]) <= live
            assert not (f["released"] and f["waiting"])
        for p in view["processes"]:
            if p["state"] in (FAILED, RELEASED):
                assert any(f["proc"] == p["addr"] and f["incarnation"] == p["incarnation"] for f in view["failures"])


@settings(max_examples=300)
@given(st.lists(_ops, max_size=60))
def test_random_interleavings_keep_the_invariants(ops):
    m = Model()
    for op in ops:
        m.step(op)
    # then let everything settle: records made durable, everyone answers, fenced processes get
    # their switch report, time passes; in the end every failure is released
    for _ in range(20):
        m.settle()
        if not m.to_record and all(p[1] in (LIVE, RELEASED) for p in m.procs().values()):
            break
    view = m.ctl.view()
    assert all(f["released"] for f in view["failures"]), view
    assert all(p["state"] in (LIVE, RELEASED) for p in view["processes"]), view
    assert m.releases == sum(f["released"] for f in view["failures"])
