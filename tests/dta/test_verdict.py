"""Whether a ``dta report`` run is a result (netstack/dta/verdict.py): hand-made reporter results
judged valid or invalid, each for the right reason; the reporter tool's own JSON carries its plan,
its scheduling delay and its part of the verdict."""

from __future__ import annotations

import json
from typing import Any

import pytest

from netstack.dta import live
from netstack.dta.control import verdict_line
from netstack.dta.verdict import lag_limits, planned, report_validity
from netstack.validity import Validity

CALM = {"samples": 400, "p50_ms": 0.5, "p99_ms": 2.0, "max_ms": 9.0, "late_frac": 0.0}
LAGS = {"sw1": CALM, "sw2": CALM, "c1": CALM, "reporter h1": CALM}


def _res(kind: str = "keywrite", sent: int = 1000, seconds: float = 0.999, **plan: Any) -> dict[str, Any]:
    p = {"count": 1000, "rate": 1000.0, "duration": None, **plan}
    return {"kind": kind, "sent": sent, "seconds": seconds, "planned": planned(kind, p["count"], p["rate"],
                                                                               p["duration"], p.get("columns", 0))}


def _failed(v: Validity) -> list[str]:
    return [c.name for c in v.checks if not c.ok]


def test_a_run_as_planned_is_valid():
    v = report_validity(_res(), LAGS)
    assert v.valid, v.reasons
    assert [c.name for c in v.checks] == ["reports sent", "report rate (/s)", "scheduling delay"]


def test_fewer_reports_than_planned_is_invalid():
    v = report_validity(_res(sent=600, seconds=0.6), LAGS)
    assert _failed(v) == ["reports sent"]
    assert v.reasons[0] == "reports sent: expected >= 95% of 1000 planned, measured 600"


def test_a_reporter_behind_its_rate_was_starved():
    v = report_validity(_res(seconds=1.6), LAGS)  # 1000 reports planned at 1000/s took 1.6 s
    assert _failed(v) == ["report rate (/s)"]


def test_flat_out_and_short_runs_have_no_rate_to_check():
    assert [c.name for c in report_validity(_res(rate=0.0, seconds=0.01), LAGS).checks] == \
        ["reports sent", "scheduling delay"]
    short = _res(count=1, sent=1, seconds=0.0)
    assert report_validity(short, LAGS).valid


def test_a_timed_flat_out_run_is_held_to_its_time():
    res = _res(sent=120_000, seconds=1.49, rate=0.0, duration=1.5)
    assert res["planned"] == {"reports": None, "rate": None, "seconds": 1.5}
    assert report_validity(res, LAGS).valid
    res["seconds"] = 0.9
    assert _failed(report_validity(res, LAGS)) == ["reporting time (s)"]
    paced = _res(sent=3000, seconds=1.5, rate=2000.0, duration=1.5)
    assert paced["planned"]["reports"] == 3000 and report_validity(paced, LAGS).valid


def test_a_sketch_must_send_its_whole_epoch():
    res = {"kind": "sketch", "columns_sent": 256, "sent": 259, "seconds": 0.05,
           "planned": planned("sketch", 1, 0.0, None, 256)}
    assert report_validity(res, LAGS).valid
    res["columns_sent"] = 100
    assert _failed(report_validity(res, LAGS)) == ["sketch columns sent"]


@pytest.mark.parametrize(("who", "lag"), [("c1", {"max_ms": 80.0}), ("sw2", {"p99_ms": 50.0}),
                                          ("reporter h1", {"max_ms": 60.0})])
def test_a_starved_collector_translator_or_reporter_makes_the_run_invalid(who, lag):
    lags = dict(LAGS)
    lags[who] = {**CALM, **lag}
    v = report_validity(_res(), lags)
    assert _failed(v) == ["scheduling delay"]
    assert who in (v.checks[-1].measured["worst_p99_at"], v.checks[-1].measured["worst_max_at"])


def test_the_max_limit_is_the_translators_window_time_out():
    assert lag_limits() == {"p99_ms": 20.0, "max_ms": 50.0}
    assert lag_limits(100_000_000)["max_ms"] == 100.0
    lags = {**LAGS, "c1": {**CALM, "max_ms": 80.0}}
    assert report_validity(_res(), lags, window_timeout_ns=100_000_000).valid


def test_the_verdict_line():
    res = _res(sent=10)
    report_validity(res, LAGS).annotate(res)
    assert verdict_line(res).startswith("INVALID: reports sent: expected >= 95% of 1000 planned")
    ok = _res()
    report_validity(ok, LAGS).annotate(ok)
    assert verdict_line(ok) == "VALID (3 checks passed)"


def test_the_reporter_tool_reports_its_plan_delay_and_verdict(capsys):
    """The tool alone (reports to this host's loopback, where nothing listens: UDP does not care)."""
    assert live.main(["report", "keywrite", "--dst", "127.0.0.1", "--count", "200", "--rate", "20000",
                      "--quiet", "--sport", "0"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["sent"] == 200 and out["planned"] == {"reports": 200, "rate": 20000.0, "seconds": None}
    assert out["sched"]["samples"] >= 0 and "p99_ms" in out["sched"]
    names = [c["name"] for c in out["checks"]]
    assert names[0] == "reports sent" and names[-1] == "scheduling delay"
    assert isinstance(out["valid"], bool)
