"""``netstack doctor``: the verdicts on hand-made measurements (fast), and one real quick run that
creates and deletes its throwaway namespace (root). Behaviour only: no timing is asserted."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from netstack import cli, doctor
from netstack.commands.doctor import render
from netstack.validity import DEFAULT_MAX_MS, DEFAULT_P99_MS, EXIT_FAILED, EXIT_OK, EXIT_USAGE

LIVE_ROWS = ("linkguardian", "onepipe", "tcd", "dta", "tcsack")


def _lag(p99: float = 0.5, mx: float = 1.0) -> dict[str, Any]:
    return {"samples": 400, "p50_ms": 0.5, "p99_ms": p99, "max_ms": mx, "late_frac": 0.02}


def _cap(ok: bool, detail: str = "fine") -> dict[str, Any]:
    return {"ok": ok, "detail": detail}


def _timers() -> list[dict[str, Any]]:
    return [{"asked_ms": a * 1e3, "p50_ms": a * 1e3 + 0.1, "p99_ms": a * 1e3 + 0.2, "max_ms": a * 1e3 + 0.3,
             "samples": 40} for a in doctor.TIMER_ASKS_S]


def good() -> dict[str, Any]:
    """What :func:`doctor.measure` returns on a quiet, capable 2-core machine."""
    return {
        "mode": "full", "seconds": 6.5,
        "lag": {"uvloop": _lag(), "asyncio": _lag(), "thread": _lag(), "seconds": 4.2,
                "machine_cpu": {"busy_frac": 0.05, "steal_frac": 0.0, "free_cores": 1.9}},
        "timers": {"uvloop": _timers(), "asyncio": _timers()},
        "cpu": {"core_share": 0.99, "spin_s": 1.0, "cpus": 2, "usable_cpus": 2},
        "load": {"loadavg": [0.2, 0.3, 0.3], "runnable": "1/120", "testbeds": [], "namespaces": 0, "looked": True},
        "caps": {"root": _cap(True), "netns": {**_cap(True), "namespace": "nsdoctor0123abcd", "removed": True},
                 "nft": _cap(True), "netem": _cap(True), "docker": _cap(True), "etcd": _cap(True),
                 "tcpdump": _cap(True),
                 "python": {**_cap(True), "python": "3.11.7", "uvloop": "0.23.0", "pyroute2": "0.9.7",
                            "kernel": "6.1.0"}},
    }


def _verdicts(doc: dict[str, Any]) -> dict[str, str]:
    return {e["key"]: e["verdict"] for e in doc["experiments"]}


def _with(**changes: Any) -> dict[str, Any]:
    """:func:`good` with ``section__key=value`` replaced (``lag__thread=_lag(5)``)."""
    m = copy.deepcopy(good())
    for path, value in changes.items():
        section, key = path.split("__")
        m[section][key] = value
    return m


# ----------------------------------------------------------------------------- verdicts


def test_a_quiet_capable_machine_trusts_every_experiment():
    doc = doctor.assess(good())
    assert set(_verdicts(doc).values()) == {doctor.OK}
    assert doc["untrustworthy"] == [] and doc["extras_missing"] == []
    assert doc["exit_code"] == EXIT_OK and doc["ok"] and doc["verdict"] == doctor.OK
    assert {c["status"] for c in doc["checks"]} == {doctor.OK}
    assert set(doc["trustworthy"]) == {"generic", *LIVE_ROWS}


def test_the_blocking_threads_lag_fails_the_rows_whose_timers_it_would_miss():
    doc = doctor.assess(_with(lag__thread=_lag(p99=10.0)))
    v = _verdicts(doc)
    # T/C-SACK's p99 limit is 5 ms (T = 2 ms, no tighter than the live timers); 1Pipe runs on uvloop only
    assert v["tcsack"] == doctor.FAIL
    assert v["onepipe"] == v["tcd"] == v["dta"] == v["linkguardian"] == v["generic"] == doctor.OK
    assert doc["exit_code"] == EXIT_FAILED
    row = next(e for e in doc["experiments"] if e["key"] == "tcsack")
    assert row["reasons"] == ["lag p99 10 ms (thread) > 5 ms"]


def test_the_doctor_holds_each_experiment_to_the_limits_its_runs_apply():
    """The doctor's verdict and a run's own (netstack.validity) never disagree on the limits."""
    from netstack.dta.verdict import lag_limits as dta_limits
    from netstack.onepipe.params import OnePipeParams
    from netstack.onepipe.verdict import limits as onepipe_limits
    from netstack.sim.scenarios import STREAM_LAG_LIMITS
    from netstack.tcsack.params import TcsParams
    from netstack.tcsack.verdict import lag_limits as tcsack_limits

    def lim(key):
        return {"p99_ms": doctor.NEEDS[key].p99_ms, "max_ms": doctor.NEEDS[key].max_ms}

    assert lim("linkguardian") == STREAM_LAG_LIMITS
    assert lim("onepipe") == onepipe_limits(OnePipeParams(), reliable=False)
    assert lim("dta") == dta_limits()
    assert lim("tcsack") == tcsack_limits(TcsParams().t_ns)
    assert doctor.NEEDS["tcd"].max_ms == 72.6


def test_a_limit_holds_at_equality():
    v = _verdicts(doctor.assess(_with(lag__thread=_lag(p99=5.0))))
    assert v["tcsack"] == doctor.OK  # p99 <= the limit, not <


@pytest.mark.parametrize(("mx", "failing"), [
    (40.0, {"onepipe"}),                 # above 1Pipe's 30 ms input timeout
    (60.0, {"onepipe", "dta"}),          # and DTA's 50 ms window time-out
    (100.0, {"onepipe", "dta", "tcd"}),  # and TCD's 72 ms T_on^max
    (300.0, {"generic", *LIVE_ROWS}),    # and the generic 250 ms
])
def test_one_long_stall_fails_the_rows_whose_timeouts_it_exceeds(mx, failing):
    v = _verdicts(doctor.assess(_with(lag__uvloop=_lag(mx=mx))))
    assert {k for k, s in v.items() if s == doctor.FAIL} == failing


def test_a_starved_core_fails_every_protocol_row_and_the_summary_says_it_once():
    doc = doctor.assess(_with(cpu__core_share=0.5))
    v = _verdicts(doc)
    assert {k for k, s in v.items() if s == doctor.FAIL} == set(LIVE_ROWS)
    assert v["generic"] == doctor.OK  # validity.py's generic limits concern lag only
    line = doctor.summary_line(doc)
    assert line.count("core share 0.50 < 0.9") == 1 and "linkguardian" in line and "tcsack" in line
    assert doc["exit_code"] == EXIT_FAILED


def test_one_cpu_fails_the_multi_process_rows():
    v = _verdicts(doctor.assess(_with(cpu__usable_cpus=1)))
    assert {k for k, s in v.items() if s == doctor.FAIL} == set(LIVE_ROWS)


def test_without_root_nothing_live_can_run():
    m = good()
    m["caps"]["root"] = _cap(False, "uid 1000")
    for key in ("netns", "nft", "netem"):
        m["caps"][key] = {**_cap(False, "not tried: needs root"), **({"namespace": None, "removed": None}
                                                                      if key == "netns" else {})}
    doc = doctor.assess(m)
    v = _verdicts(doc)
    assert all(v[k] == doctor.FAIL for k in ("generic", *LIVE_ROWS))
    assert v["containers"] == v["netem"] == doctor.WARN  # extras: missing, not untrustworthy
    assert doc["exit_code"] == EXIT_FAILED


def test_missing_extras_warn_but_do_not_fail_the_machine():
    m = good()
    for key in ("docker", "netem", "etcd", "tcpdump"):
        m["caps"][key] = _cap(False, "absent")
    doc = doctor.assess(m)
    assert doc["exit_code"] == EXIT_OK and doc["verdict"] == doctor.WARN
    assert set(doc["extras_missing"]) == {"containers", "netem", "onepipe-etcd", "capture-filter"}
    assert all(_verdicts(doc)[k] == doctor.OK for k in LIVE_ROWS)  # loss injection still has nft


@pytest.mark.parametrize(("nft", "netem", "lg"), [(True, False, doctor.OK), (False, True, doctor.OK),
                                                  (False, False, doctor.FAIL)])
def test_linkguardian_needs_nft_or_netem_to_corrupt(nft, netem, lg):
    m = good()
    m["caps"]["nft"], m["caps"]["netem"] = _cap(nft, "nft said so"), _cap(netem, "netem said so")
    doc = doctor.assess(m)
    assert _verdicts(doc)["linkguardian"] == lg
    if lg == doctor.FAIL:
        reasons = next(e for e in doc["experiments"] if e["key"] == "linkguardian")["reasons"]
        assert reasons == ["no nft or netem (loss, corruption) (nft: nft said so; netem: netem said so)"]


def test_load_and_other_testbeds_only_warn():
    m = _with(load__loadavg=[3.5, 2.0, 1.0], load__testbeds=["t1"])
    m["lag"]["machine_cpu"]["free_cores"] = 0.2
    doc = doctor.assess(m)
    status = {c["name"]: c["status"] for c in doc["checks"]}
    assert status["load average (1, 5, 15 min)"] == status["other netstack testbeds"] == doctor.WARN
    assert status["idle CPUs while measuring (/proc/stat)"] == doctor.WARN
    assert doc["exit_code"] == EXIT_OK


def test_a_throwaway_namespace_left_behind_fails_the_run():
    m = good()
    m["caps"]["netns"]["removed"] = False
    doc = doctor.assess(m)
    assert any(c["name"] == "throwaway namespace removed" and c["status"] == doctor.FAIL for c in doc["checks"])
    assert doc["exit_code"] == EXIT_FAILED


def test_the_requirements_table_is_complete_and_within_the_generic_limits():
    assert doctor.NEEDS["generic"].p99_ms == DEFAULT_P99_MS and doctor.NEEDS["generic"].max_ms == DEFAULT_MAX_MS
    for key, need in doctor.NEEDS.items():
        assert need.source, key
        assert set(need.caps) <= set(doctor.CAP_TITLES), key
        assert set(need.loops) <= {"uvloop", "thread"} and need.loops, key
        if need.p99_ms is not None:  # (each experiment's own limits: the test above)
            assert need.max_ms is not None and need.max_ms <= DEFAULT_MAX_MS, key


def test_cpu_use_counts_idle_and_iowait_as_free():
    before = [100, 0, 50, 800, 50, 0, 0, 0, 0]
    after = [200, 0, 100, 900, 100, 0, 0, 100, 0]  # +100 user, +50 sys, +100 idle, +50 iowait, +100 steal
    use = doctor.cpu_use(before, after, cpus=2)
    assert use == {"busy_frac": 0.625, "steal_frac": 0.25, "free_cores": 0.75}
    assert doctor.cpu_use(None, after, 2)["free_cores"] is None


def test_the_table_shows_every_check_and_verdict():
    doc = doctor.assess(_with(cpu__core_share=0.5))
    text = render(doc)
    for row in (*doc["checks"], *doc["experiments"]):
        assert (row.get("name") or row["title"]) in text
    assert "core share 0.50 < 0.9" in text and "FAIL" in text


def test_usage_errors_exit_2():
    with pytest.raises(SystemExit) as exc:
        cli.main(["doctor", "--no-such-option"])
    assert exc.value.code == EXIT_USAGE


def test_a_busy_loop_gets_at_most_one_core():
    got = doctor.core_share(0.05)
    assert 0 < got["core_share"] <= 1 and got["usable_cpus"] >= 1


# ----------------------------------------------------------------------------- a real run


@pytest.mark.netns
@pytest.mark.skipif(os.geteuid() != 0, reason="the throwaway namespace needs root")
def test_a_real_quick_run_prints_one_document_and_leaves_no_namespace():
    proc = subprocess.run([sys.executable, "-m", "netstack.cli", "doctor", "--quick", "--json"],
                          capture_output=True, text=True, timeout=120, check=False)
    doc = json.loads(proc.stdout)
    assert proc.returncode == doc["exit_code"] in (EXIT_OK, EXIT_FAILED)
    assert proc.stderr.strip().splitlines()[-1].startswith("netstack doctor: measured in ")
    assert doc["mode"] == "quick"
    for loop in ("uvloop", "asyncio", "thread"):
        assert doc["lag"][loop]["samples"] > 0 and doc["lag"][loop]["max_ms"] >= doc["lag"][loop]["p50_ms"] >= 0
    assert [t["asked_ms"] for t in doc["timers"]["uvloop"]] == [a * 1e3 for a in doctor.TIMER_ASKS_S]
    assert 0 < doc["cpu"]["core_share"] <= 1 and len(doc["load"]["loadavg"]) == 3
    assert {e["key"] for e in doc["experiments"]} == set(doctor.NEEDS)
    assert {c["status"] for c in doc["checks"]} <= {doctor.OK, doctor.WARN, doctor.FAIL}
    netns = doc["caps"]["netns"]
    assert netns["ok"] and netns["namespace"].startswith(doctor.PROBE_PREFIX)
    assert netns["removed"] is True and netns["namespace"] not in os.listdir("/run/netns")
    assert doc["caps"]["root"]["ok"] and isinstance(doc["caps"]["netem"]["ok"], bool)
