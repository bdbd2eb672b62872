"""Run validity of ``netstack onepipe run`` on the shipped ``onepipe`` topology (issue 28;
docs/onepipe.md "Run validity"): a short run on a machine that gives it the CPU is judged valid,
and its result carries every check, the scheduling delay of every process and daemon, the
accounting from the logs and the timer slack its timers took.

A run whose own scheduling-delay check failed was starved by whatever else ran on the machine:
as the other live tests do (conftest.validated), it is run again, at most three times, and the
test is skipped with the reasons if every run was starved. Any other failed check fails the test.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from netstack.cli import main
from netstack.onepipe.ctlnode import live_timers
from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.runner import run
from netstack.topo.model import load_topology_spec

from .conftest import STARVED_RUNS, StarvedRun, running

pytestmark = pytest.mark.netns

DAEMONS = {"tor1", "tor2", "spine1", "ctl"}


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    yield from running(load_topology_spec("onepipe"), tmp_path_factory, "v")


def _failed(doc: dict) -> list[str]:
    return [f"{c['name']}: expected {c['expected']}, measured {c['measured']}" for c in doc["checks"] if not c["ok"]]


def _not_starved(go: Callable[[int], dict[str, Any]], attempts: int = 3) -> dict[str, Any]:
    """``go(attempt)``'s run document, once its scheduling-delay check held (module docstring)."""
    reasons: list[str] = []
    for i in range(attempts):
        doc = go(i)
        if all(c["ok"] for c in doc["checks"] if c["name"] == "scheduling delay"):
            if reasons:
                note = f"valid on run {i + 1} after {len(reasons)} starved: {' | '.join(reasons)}"
                STARVED_RUNS.append(note)
                warnings.warn(StarvedRun(note), stacklevel=2)
            return doc
        reasons.append(f"run {i + 1}: " + "; ".join(_failed(doc)))
    STARVED_RUNS.append("skipped: " + " | ".join(reasons))
    pytest.skip(f"the machine starved this live test {attempts} times: " + " | ".join(reasons))


def test_a_short_best_effort_run_is_valid_and_says_why(fabric, tmp_path, capsys):
    out = tmp_path / "be"
    rcs: list[int] = []

    def go(i: int) -> dict[str, Any]:
        capsys.readouterr()
        rcs.append(main(["onepipe", "run", "--prefix", fabric.prefix, "--procs", "4", "--seconds", "2",
                         "--rate", "50", "--out", str(out), "--json"]))
        return json.loads(capsys.readouterr().out)

    doc = _not_starved(go)
    rc = rcs[-1]
    assert [c["name"] for c in doc["checks"]] == ["processes", "messages sent", "on schedule", "accounting",
                                                  "false loss reports", "input timeouts", "scheduling delay"]
    assert doc["valid"] is True and rc == 0, _failed(doc)
    assert set(doc["sched"]) == {"p1", "p2", "p3", "p4"} | DAEMONS
    assert all(s["samples"] > 0 for s in doc["sched"].values())
    assert doc["accounting"]["sent"] == doc["messages_sent"] == 4 * 100 * 2
    assert doc["accounting"]["lost_unreported"] == 0 and doc["input_rejoins"] == {}
    assert set(doc["timer_slack"]["switches"]) == {"tor1", "tor2", "spine1"}
    assert json.loads((out / "run.json").read_text())["valid"] is True


def test_a_short_reliable_run_is_valid_and_no_process_was_declared_failed(fabric, tmp_path):
    said: list[str] = []
    doc = _not_starved(lambda i: run(fabric.prefix, procs=4, seconds=2.0, rate=50, fanout=2,
                                     out=tmp_path / "rel", reliable=True, say=said.append))
    assert [c["name"] for c in doc["checks"]] == ["processes", "messages sent", "on schedule", "accounting",
                                                  "process failures", "scheduling delay"]
    assert doc["valid"] is True, _failed(doc)
    assert said[-1].startswith("VALID (6 checks")
    assert doc["failures"] == [] and doc["delivered"] == doc["messages_sent"]
    # the controller's answer timeout, as in force: configured + its slack (never below configured)
    ctl = doc["timer_slack"]["controller"]
    configured = live_timers(OnePipeParams(**doc["params"])).answer_timeout_ns
    assert ctl["answer_timeout_ns"] == configured + ctl["timer_slack_ns"]
    for timers in doc["timer_slack"]["switches"].values():
        assert timers["failure_timeout_ns"] == 100 * doc["params"]["t_beacon_ns"] + timers["timer_slack_ns"]
