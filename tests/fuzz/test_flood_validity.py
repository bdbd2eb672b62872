"""``netstack fuzz dta --attack flood``'s validity row (netstack/fuzz/dta.py ``starved_row``): a
run that lost genuine reports while a daemon was held up past the window time-out is the
machine's, not a verdict; a run that lost none, or lost some with every daemon on time, is judged."""

from __future__ import annotations

from typing import Any

from netstack.experiment import LagWindow
from netstack.fuzz.dta import starved_row

CONFIG = {"config": {"window_timeout_ns": 50_000_000}}


def _lags(max_ms: float) -> LagWindow:
    w = LagWindow("fzunit")
    w.lags = {"sw1": {"samples": 100, "p99_ms": min(max_ms, 20.0), "max_ms": max_ms},
              "c1": {"samples": 100, "p99_ms": 1.0, "max_ms": 2.0}}
    return w


def _row(max_ms: float, lost: bool, t: dict[str, Any] = CONFIG) -> dict[str, Any]:
    return starved_row(_lags(max_ms), t, lost)


def test_every_daemon_on_time_is_a_valid_run_lost_or_not():
    for lost in (False, True):
        r = _row(30.0, lost)
        assert r["ok"] and (r["where"], r["check"]) == ("machine", "scheduling delay")
        assert "every daemon on time" in r["detail"]


def test_a_daemon_held_up_in_a_run_that_lost_nothing_is_still_judged():
    r = _row(120.0, False)
    assert r["ok"] and "did not decide the run" in r["detail"] and "sw1" in r["detail"]


def test_genuine_reports_lost_while_a_daemon_was_held_up_is_a_starved_run():
    r = _row(120.0, True)
    assert not r["ok"] and "not a verdict" in r["detail"]


def test_the_limit_is_the_translators_own_window_time_out():
    assert _row(120.0, True, {"config": {"window_timeout_ns": 200_000_000}})["ok"]
    assert not _row(60.0, True)["ok"] and _row(60.0, True, {"config": {"window_timeout_ns": 80_000_000}})["ok"]
