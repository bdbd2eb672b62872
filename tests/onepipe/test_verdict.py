"""The validity of a live ``netstack onepipe run`` (netstack/onepipe/verdict.py, issue 28): hand-made
run summaries, each judged valid or invalid with the right reason, and the two inputs that come
from the run's logs (the accounting, the failures declared while processes ran)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.runner import input_rejoins
from netstack.onepipe.verdict import account, false_failures, judge, limits, planned_messages, verdict_line
from netstack.validity import Validity

LIVE = OnePipeParams().with_(failure_beacons=100)  # what runner.run gives the live processes
QUIET = {"samples": 1000, "p50_ms": 0.5, "p99_ms": 5.0, "max_ms": 9.0, "late_frac": 0.05}


def summary(procs: int = 8, reliable: bool = False, **changes: Any) -> dict[str, Any]:
    """A clean 5 s run of ``procs`` processes, 100 scatterings/s to 2 others, as runner.run writes it."""
    names = [f"p{i}" for i in range(1, procs + 1)]
    per = 1000
    doc: dict[str, Any] = {
        "procs": procs, "seconds": 5.0, "rate": 100.0, "fanout": 2, "reliable": reliable, "loss": [], "killed": [],
        "params": LIVE.to_dict(), "messages_sent": per * procs, "delivered": per * procs, "send_failed": 0,
        "processes": {n: {"messages_sent": per, "delivered": per, "send_failed": 0,
                          "scatter": {"span_s": 5.004, "max_behind_s": 0.003, "scatterings": 500,
                                      "started_late_s": 0.001},
                          "sched": QUIET, **({"incarnations": [1]} if reliable else {})} for n in names},
        "sched": {**dict.fromkeys(names, QUIET), "tor1": QUIET, "tor2": QUIET, "spine1": QUIET, "ctl": QUIET},
        "accounting": {"sent": per * procs, "delivered": per * procs, "reported_lost": 0, "lost_unreported": 0,
                       "delivered_and_reported": 0, "examples": []},
        "input_rejoins": {},
    }
    if reliable:
        doc["failures"] = []
    doc.update(changes)
    return doc


def failing(v: Validity) -> list[str]:
    return [c.name for c in v.checks if not c.ok]


def test_a_clean_run_is_valid_with_every_check_present():
    v = judge(summary())
    assert v.valid and [c.name for c in v.checks] == ["processes", "messages sent", "on schedule", "accounting",
                                                      "false loss reports", "input timeouts", "scheduling delay"]
    r = judge(summary(reliable=True))
    assert r.valid and [c.name for c in r.checks] == ["processes", "messages sent", "on schedule", "accounting",
                                                      "process failures", "scheduling delay"]
    doc = r.annotate(summary(reliable=True))
    assert doc["valid"] is True and json.loads(json.dumps(doc["checks"])) == doc["checks"]
    assert verdict_line(doc).startswith("VALID (6 checks: processes, messages sent")


def test_messages_neither_delivered_nor_reported_make_the_run_invalid():
    doc = summary(accounting={"sent": 8000, "delivered": 3655, "reported_lost": 2488, "lost_unreported": 1857,
                              "delivered_and_reported": 0, "examples": ["p1.499.p3"]})
    v = judge(doc)
    assert failing(v) == ["accounting"]
    assert v.reasons[0].startswith("accounting: expected every message sent delivered, reported by its sender")
    assert "'lost_unreported': 1857" in v.reasons[0]
    assert verdict_line(v.annotate(doc)).startswith("INVALID: accounting: ")


def test_a_delivered_message_reported_lost_is_invalid_unless_loss_was_injected():
    acc = {"sent": 8000, "delivered": 8000, "reported_lost": 12, "lost_unreported": 0, "delivered_and_reported": 12,
           "examples": []}
    assert failing(judge(summary(accounting=acc))) == ["false loss reports"]
    # with loss on a link an ACK may be lost too: best effort then reports a delivered message (§3)
    lossy = judge(summary(accounting=acc, loss=["tor1-spine1:0.01"]))
    assert lossy.valid and "false loss reports" not in [c.name for c in lossy.checks]


def test_a_process_declared_failed_with_no_fault_injected_is_invalid_and_named():
    fails = [{"name": "p3", "how": "declared failed while it ran: recovered 1 time(s), ended as incarnation 2"}]
    v = judge(summary(reliable=True, failures=fails))
    assert failing(v) == ["process failures"]
    assert "p3: declared failed while it ran" in v.reasons[0]


def test_killing_a_process_is_a_fault_the_run_injected_and_its_share_is_not_planned():
    doc = summary(reliable=True, failures=[{"name": "p8", "how": "incarnation 1 declared failed before it ended"}])
    del doc["processes"]["p3"]
    doc.update(killed=["p3"], messages_sent=7000,
               accounting={**doc["accounting"], "lost_unreported": 40})  # p3's last messages died with it
    v = judge(doc)
    assert v.valid and [c.name for c in v.checks] == ["processes", "messages sent", "on schedule",
                                                      "scheduling delay"]
    assert v.checks[0].measured == {"reported": 7, "killed": ["p3"]}


def test_a_process_that_did_not_report_is_invalid():
    doc = summary()
    del doc["processes"]["p2"]
    doc["messages_sent"] = 7000
    assert failing(judge(doc)) == ["processes"]


def test_fewer_messages_than_planned_are_invalid():
    doc = summary()
    doc["processes"]["p1"]["messages_sent"] = 999  # what the processes that reported sent
    assert failing(judge(doc)) == ["messages sent"]


def test_a_process_that_fell_behind_its_schedule_is_invalid():
    doc = summary()
    doc["processes"]["p4"]["scatter"].update(span_s=5.6, max_behind_s=0.61)
    v = judge(doc)
    assert failing(v) == ["on schedule"]
    assert v.checks[2].measured["worst_at"] == "p4" and v.checks[2].measured["max_behind_at"] == "p4"
    late = summary()
    late["processes"]["p1"]["scatter"]["started_late_s"] = 0.4  # joined the order late, then on time
    assert failing(judge(late)) == ["on schedule"]


def test_an_input_timed_out_while_it_ran_is_invalid_in_best_effort_only():
    back = {"tor1/p-h1/10.0.0.1:40101": 2}
    v = judge(summary(input_rejoins=back))
    assert failing(v) == ["input timeouts"] and "tor1/p-h1/10.0.0.1:40101" in v.reasons[0]
    assert judge(summary(reliable=True, input_rejoins=back)).valid  # reliable delivers by the commit barrier
    assert "input timeouts" not in [c.name for c in judge(summary(input_rejoins=None)).checks]


def test_scheduling_delay_limits_come_from_the_protocol_timers():
    assert limits(LIVE, reliable=False) == {"p99_ms": 30.0, "max_ms": 30.0}  # the input timeout
    assert limits(LIVE, reliable=True) == {"p99_ms": 30.0, "max_ms": 150.0}  # ... and half the failure timeout
    paper = OnePipeParams.paper(failure_beacons=10)
    assert limits(paper, reliable=True) == {"p99_ms": 0.03, "max_ms": 0.015}
    slow = {**QUIET, "p99_ms": 20.0, "max_ms": 60.0}
    be = judge(summary(sched={**summary()["sched"], "p6": slow}))
    assert failing(be) == ["scheduling delay"] and be.checks[-1].measured["worst_max_at"] == "p6"
    assert "p99 <= 30 ms and max <= 30 ms" in be.reasons[0]
    # a 60 ms stall is within what reliable 1Pipe's failure detection tolerates; p99 50 ms is not
    assert judge(summary(reliable=True, sched={**summary()["sched"], "tor2": slow})).valid
    busy = {**slow, "p99_ms": 50.0}
    assert failing(judge(summary(reliable=True, sched={**summary()["sched"], "ctl": busy}))) == ["scheduling delay"]
    assert failing(judge(summary(reliable=True, sched={**summary()["sched"], "p2": {**slow, "max_ms": 151.0}}))) \
        == ["scheduling delay"]


def test_a_clock_step_is_a_fault_the_run_injected():
    doc = summary(reliable=True, failures=[{"name": "p2", "how": "declared failed while it ran: recovered 1 time(s)"}])
    doc["processes"]["p2"]["clock_steps"] = [{"offset_ns": -60_000_000, "at": 123}]
    assert judge(doc).valid  # a step back past the input timeout may get p2 declared failed: documented
    be = summary(accounting={**summary()["accounting"], "delivered_and_reported": 3})
    be["processes"]["p2"]["clock_steps"] = [{"offset_ns": 60_000_000, "at": 123}]
    assert judge(be).valid


@pytest.mark.parametrize(("procs", "seconds", "rate", "fanout", "want"), [
    (8, 5.0, 100.0, 2, 1000), (8, 2.0, 80.0, 3, 480), (2, 1.0, 10.0, 3, 10), (1, 5.0, 100.0, 2, 0),
    (4, 0.25, 3.0, 1, 1), (3, 1.0, 3.0, 2, 6),
])
def test_planned_messages_per_process_follow_the_scattering_schedule(procs, seconds, rate, fanout, want):
    assert planned_messages(procs, seconds, rate, fanout) == want


# ---------------------------------------------------------------------------- from the logs


def _write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_account_sorts_every_message_by_its_fate(tmp_path):
    _write(tmp_path / "sent" / "p1.jsonl", [{"seq": 0, "ts": None, "dsts": ["p2", "p3"], "at": 1},
                                            {"seq": 1, "ts": None, "dsts": ["p2", "p3"], "at": 2}])
    _write(tmp_path / "sent" / "p2.jsonl", [{"seq": 0, "ts": None, "dsts": ["p1"], "at": 1}])
    _write(tmp_path / "p2.jsonl", [{"id": "p1.0.p2"}, {"id": "p1.1.p2"}])
    _write(tmp_path / "p3.jsonl", [{"id": "p1.0.p3"}])
    _write(tmp_path / "send-fail" / "p1.jsonl", [{"id": "p1.1.p3"}, {"id": "p1.1.p2"}])
    (tmp_path / "p1.jsonl").write_text("not json\n")
    # p1.1.p2: reported failed yet delivered (a contradiction, counted delivered); p2.0.p1: no fate
    assert account(tmp_path) == {"sent": 5, "delivered": 3, "reported_lost": 1, "send_unknown": 0,
                                 "in_flight_at_end": 1, "lost_unreported": 1, "delivered_and_reported": 1,
                                 "unknown_delivered": 0, "failed_and_delivered": 1, "examples": ["p2.0.p1"]}
    _write(tmp_path / "send-unknown" / "p2.jsonl", [{"id": "p2.0.p1"}])  # its ACK timeout fired
    _write(tmp_path / "send-unknown" / "p1.jsonl", [{"id": "p1.0.p2"}])  # ... and a late ACK's
    acc = account(tmp_path)
    got = (acc["send_unknown"], acc["in_flight_at_end"], acc["lost_unreported"], acc["unknown_delivered"])
    assert got == (1, 0, 0, 1)


def test_false_failures_are_failures_of_this_runs_incarnations_before_they_ended(tmp_path):
    pf = tmp_path / "proc-fail"
    _write(pf / "p1.jsonl", [
        {"proc": "10.0.0.1:40101", "name": "p1", "registered": 1, "at": 10},
        {"proc": "10.0.0.3:40101", "name": "p3", "incarnation": 3, "t_f": 0, "at": 20},  # p3 before this run
        {"proc": "10.0.0.2:40101", "name": "p2", "incarnation": 4, "t_f": 90, "at": 500},  # p2 while it ran
        {"proc": "10.0.0.1:40101", "name": "p1", "stopped": 1, "at": 1000}])
    _write(pf / "p2.jsonl", [{"proc": "10.0.0.2:40101", "name": "p2", "registered": 4, "at": 10},
                             {"proc": "10.0.0.2:40101", "name": "p2", "stopped": 4, "at": 990}])
    _write(pf / "p3.jsonl", [{"proc": "10.0.0.3:40101", "name": "p3", "registered": 4, "at": 10},
                             {"proc": "10.0.0.3:40101", "name": "p3", "stopped": 4, "at": 700}])
    _write(pf / "p4.jsonl", [{"proc": "10.0.0.1:40101", "name": "p1", "incarnation": 1, "t_f": 5, "at": 1400},
                             {"proc": "10.0.0.3:40101", "name": "p3", "incarnation": 4, "t_f": 5, "at": 1200}])
    procs = {"p1": {"incarnations": [1]}, "p2": {"incarnations": [4]}, "p3": {"incarnations": [4]},
             "p4": {"incarnations": [1, 2], "counters": {"recoveries": 1}},
             # told it failed in the batch that registered it: only its recovery count says so
             "p5": {"incarnations": [2], "counters": {"recoveries": 1}}}
    got = false_failures(tmp_path, procs)
    assert got == [{"name": "p2", "how": "incarnation 4 declared failed before it ended (1 processes heard)"},
                   {"name": "p4", "how": "declared failed while it ran: recovered 1 time(s), ended as incarnation 2"},
                   {"name": "p5", "how": "declared failed while it ran: recovered 1 time(s), ended as incarnation 2"}]


def test_input_rejoins_are_read_from_the_switches_status():
    switches = {"tor1": {"ports": {"p-h1": {"inputs": {"10.0.0.1:40101": {"rejoins": 2, "timeouts": 3},
                                                      "10.0.0.1:40102": {"rejoins": 0, "timeouts": 1}}},
                                   "p-spine1": {"inputs": {"p-spine1": {"rejoins": 1}}}}},
                "spine1": None}
    assert input_rejoins(copy.deepcopy(switches)) == {"tor1/p-h1/10.0.0.1:40101": 2, "tor1/p-spine1/p-spine1": 1}
