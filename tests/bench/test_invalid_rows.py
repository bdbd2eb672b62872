"""Benchmarks keep what did not happen as planned out of their numbers (netstack.validity; issue
28): hand-made records through the row logic of ``bench tcd``, ``tcsack``, ``dta`` and ``auth``.
An invalid row is listed with its reasons, carries no ratio, and counts in no median or target."""

from __future__ import annotations

from typing import Any

import pytest

from netstack.bench import auth, tcd, tcdfct, tcsack
from netstack.bench import dta as dta_bench
from netstack.bench.dta import search
from netstack.bench.dta.tables import tables as dta_tables
from netstack.bench.summary import cross_check_failures

STARVED = [{"name": "scheduling delay", "expected": "p99 <= 20 ms", "measured": {"worst_p99_ms": 50.0}, "ok": False}]


# ------------------------------------------------------------------------------------------ tcd
def _tcd_doc(kind: str, marker: str, *, runtime: str = "live", valid: bool = True, f0_ce: int = 0,
             p2_congestion: int = 0) -> dict[str, Any]:
    tis = None if marker == "ecn" else {"non_congestion": 5, "undetermined": 7, "congestion": p2_congestion}
    flows = {"F0": {"packets": 10, "ce": f0_ce if marker == "tcd" else 5, "undetermined": 3 if marker == "tcd" else 0},
             "F1": {"packets": 10, "ce": 4, "undetermined": 0}, "F2": {"packets": 10, "ce": 0, "undetermined": 0}}
    ports = {"P2": {"time_in_state_ns": tis, "marked_ce": 1, "marked_ue": 1, "pauses": 3},
             "P3": {"time_in_state_ns": tis and {**tis, "congestion": 9}, "marked_ce": 1, "marked_ue": 0}}
    return {"runtime": runtime, "time_scale": 1.0, "valid": valid, "checks": [] if valid else STARVED,
            "result": {"scenario": kind, "marker": marker, "flows": flows, "ports": ports}}


def test_tcd_an_invalid_run_is_listed_and_judges_no_target() -> None:
    docs = [_tcd_doc("single", "ecn"), _tcd_doc("single", "tcd", valid=False),
            _tcd_doc("multi", "ecn"), _tcd_doc("multi", "tcd", p2_congestion=4)]
    out: dict[str, Any] = {"invalid_rows": [], "targets": tcd.scenario_targets(docs, "live")}
    counted = tcd.counted(docs, "live", out)
    assert [(d["result"]["scenario"], d["result"]["marker"]) for d in counted] == [
        ("single", "ecn"), ("multi", "ecn"), ("multi", "tcd")]
    assert out["invalid_rows"] == [{"row": "live single tcd", "reasons": [
        "scheduling delay: expected p99 <= 20 ms, measured {'worst_p99_ms': 50.0}"]}]
    single, multi = out["targets"]
    assert single["kind"] == multi["kind"] == "check"
    assert single["met"] is None and single["value"] == "-"  # its TCD run was starved: not judged
    assert multi["met"] is True and all(multi["claims"].values())
    v = tcd.verdicts(out)
    assert v["valid"] is False and [c["name"] for c in v["checks"]] == ["live single tcd"]
    assert v["cross_checks"] == [{"what": multi["what"], "ok": True}]  # the unjudged one is no cross-check
    assert "live single tcd" in "\n".join(tcd.invalid_lines(out["invalid_rows"]))


def test_tcd_a_failed_live_run_is_an_invalid_row_and_the_good_runs_stand(monkeypatch) -> None:
    """``bench tcd --live`` (issue 30): a run that raised is listed with its error as the reason,
    judges nothing, and the other runs are tabulated and judged as usual."""
    good = {("single", "ecn"): _tcd_doc("single", "ecn"), ("multi", "ecn"): _tcd_doc("multi", "ecn"),
            ("multi", "tcd"): _tcd_doc("multi", "tcd", p2_congestion=4)}

    def fake_sweep(specs, *, workers=None, progress=None):
        out = []
        for spec in specs:
            key = (spec.params["kind"], tcd.marker_of(tcd.resolve_topology(spec.topology)))
            out.append(good.get(key) or {"runtime": "live", "seed": 1, "params": dict(spec.params),
                                         "error": "ScenarioError: the receiver on r1 did not start"})
        return out

    monkeypatch.setattr(tcd, "sweep", fake_sweep)
    out: dict[str, Any] = {"runs": [], "targets": [], "invalid_rows": [], "plots": {}}
    md = "\n".join(tcd.section_live(lambda msg: None, out))
    assert out["invalid_rows"] == [{"row": "live single tcd",
                                    "reasons": ["the run failed: ScenarioError: the receiver on r1 did not start"]}]
    assert out["live"]["runs"] == 4 and out["live"]["runs_valid"] == 3 and out["live"]["runs_failed"] == 1
    assert {(r["scenario"], r["marker"]) for r in out["live"]["flows"]} == set(good)
    single, multi = out["targets"]
    assert single["met"] is None and multi["met"] is True  # the failed run judges nothing
    assert "3 of 4 runs valid" in md and len(out["runs"]) == 4
    assert tcd.verdicts(out)["valid"] is False


def test_tcd_a_broken_claim_fails_the_cross_check_and_a_missed_goal_does_not() -> None:
    docs = [_tcd_doc("single", "ecn", runtime="sim"), _tcd_doc("single", "tcd", runtime="sim", f0_ce=2)]
    targets = tcd.scenario_targets(docs, "sim")
    assert targets[0]["met"] is False and "TCD: F0 never CE" in targets[0]["value"]
    ratio = {"all": {"median": 1.0, "p99": None}, "victim": {"median": 2.5, "p99": 1.0}}
    goals = tcdfct.fct_targets([{"workload": "websearch", "cc": "dcqcn", "compare": {"ratio": ratio}}])
    assert [(g["kind"], g["met"]) for g in goals] == [("goal", False), ("goal", None), ("goal", True),
                                                      ("goal", False)]
    out = {"invalid_rows": [], "targets": targets + goals}
    payload = tcd.verdicts(out)
    assert payload["valid"] is True
    assert cross_check_failures(payload) == [targets[0]["what"]]  # the goals are no cross-checks


# --------------------------------------------------------------------------------------- tcsack
def _transfer(proto: str, loss: float, goodput_bps: float, *, valid: bool = True, rnd: int = 1,
              runtime: str = "live", checks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    sender = {} if proto == "tcp" else {"retx_sent": 2, "probes_sent": 1, "timeouts": 0, "sent": 110,
                                        "packets": 100, "acks_rx": 50}
    return {"runtime": runtime, "loss": loss, "round": rnd, "params": {"proto": proto, "t_ms": 2.0},
            "valid": valid, "checks": checks if checks is not None else ([] if valid else STARVED),
            "result": {"ok": True, "seconds": 1.0, "goodput_bps": goodput_bps, "sender": sender}}


def test_tcsack_live_rows_take_medians_of_valid_transfers_only() -> None:
    runs = [_transfer("tcsack", 0.01, 60e6), _transfer("tcsack", 0.01, 1e6, valid=False, rnd=2),
            _transfer("tcsack", 0.01, 70e6, rnd=3)]
    row = tcsack.live_row(runs)
    assert row["valid"] is True and (row["rounds"], row["rounds_valid"]) == (3, 2)
    assert row["goodput_mbps"] == pytest.approx(65.0)  # median of 60 and 70; the starved 1 is not one of them
    none = tcsack.live_row([_transfer("gbn", 0.01, 5e6, valid=False)])
    assert none["valid"] is False and none["goodput_mbps"] is None and none["retx"] is None
    assert tcsack.invalid_rows(runs) == [{"row": "live loss 0.01, tcsack round 2", "reasons": [
        "scheduling delay: expected p99 <= 20 ms, measured {'worst_p99_ms': 50.0}"]}]


def test_tcsack_an_invalid_row_carries_no_ratio_nor_gives_one() -> None:
    rows = [tcsack.live_row([_transfer("tcsack", 0.0, 80e6)]), tcsack.live_row([_transfer("gbn", 0.0, 80e6)]),
            tcsack.live_row([_transfer("tcsack", 0.01, 60e6)]),
            tcsack.live_row([_transfer("gbn", 0.01, 20e6, valid=False)]),
            tcsack.live_row([_transfer("gbn", 0.03, 10e6)]), tcsack.live_row([_transfer("tcsack", 0.03, 40e6)])]
    rows[1]["goodput_mbps"] = None  # gbn's lossless baseline did not count either
    rows[1]["valid"] = False
    tcsack.ratios(rows)
    assert rows[0]["of_lossless"] == pytest.approx(1.0) and rows[0]["vs_gbn"] is None  # gbn's baseline is out
    assert rows[2]["of_lossless"] == pytest.approx(0.75) and rows[2]["vs_gbn"] is None
    assert rows[3]["of_lossless"] is None and "vs_gbn" not in rows[3]
    assert rows[4]["of_lossless"] is None  # a valid row, but its own lossless baseline is invalid
    assert rows[5]["vs_gbn"] == pytest.approx(4.0)


def test_tcsack_a_completed_transfer_with_other_bytes_fails_the_cross_check() -> None:
    done = {"name": "transfer completed", "expected": "", "measured": {}, "ok": True}
    differ = {"name": "bytes delivered intact", "expected": "", "measured": {}, "ok": False}
    stuck = {**done, "ok": False}
    starved = _transfer("gbn", 0.03, 1e6, valid=False, checks=[stuck, differ])
    assert tcsack.integrity_check([starved])["ok"] is True  # incomplete: an invalid run, no more
    bug = _transfer("tcsack", 0.01, 50e6, valid=False, rnd=2, checks=[done, differ])
    check = tcsack.integrity_check([starved, bug])
    assert check == {"what": tcsack.INTEGRITY, "ok": False, "failed": ["live loss 0.01, tcsack round 2"]}
    payload = tcsack.verdicts([starved, bug])
    assert payload["valid"] is False and len(payload["invalid_rows"]) == len(payload["checks"]) == 2
    assert cross_check_failures(payload) == [tcsack.INTEGRITY]


# ------------------------------------------------------------------------------------------ dta
def _meas(rate: float, offered: float, ingested: float, loss: float, valid: bool = True) -> dict[str, Any]:
    return {"rate": rate, "offered_per_s": offered, "ingested_per_s": ingested, "loss": loss, "valid": valid,
            "checks": [] if valid else [{"name": "CPU time taken by other work (share of all CPUs)",
                                         "expected": "<= 0.15", "measured": 0.4, "ok": False}],
            "rdma_ops_per_report": 1.0, "switch_cpu_us_per_report": 9.0, "collector_cpu_us_per_report": 5.0,
            "resyncs": 0, "collector_socket_drops": 0}


def test_dta_an_invalid_measurement_ends_the_search_and_the_case_shows_no_rate() -> None:
    script = iter([_meas(0, 50e3, 20e3, 0.6), _meas(19e3, 19e3, 19e3, 0.0), _meas(23.75e3, 23e3, 10e3, 0.5, False)])
    found = search.find_rate(lambda rate: next(script), 1.0)
    assert found["valid"] is False and found["sustained"] is None and len(found["runs"]) == 2
    case = {"path": "dta", "kind": "keywrite", "param": 2, "label": "Key-Write N=2", **found}
    assert search.sustained(case) is None
    naive = {"path": "naive", "kind": "keywrite", "param": 2, "label": "Key-Write N=2",
             **search.find_rate(lambda rate: _meas(0, 30e3, 30e3, 0.0), 1.0)}
    assert naive["valid"] is True and search.sustained(naive) == 30e3
    search.vs_naive([case, naive])
    assert case["vs_naive"] is None  # an invalid case carries no ratio
    rows = search.invalid_runs([case, naive])
    assert rows == [{"row": "dta Key-Write N=2 paced 23.8 k/s",
                     "reasons": ["CPU time taken by other work (share of all CPUs): expected <= 0.15, measured 0.4"]}]
    text = dta_tables([case, naive], [], [])
    assert "Invalid measurements (not counted" in text and "dta Key-Write N=2 paced 23.8 k/s" in text
    assert "| Key-Write N=2 |" not in text.split("Naive CPU collector")[0]  # no row of the invalid case
    payload = dta_bench.verdicts(rows)
    assert payload["valid"] is False and payload["checks"][0]["name"] == rows[0]["row"]
    assert payload["cross_checks"] == []


def test_dta_an_invalid_overload_run_ends_the_search_at_once() -> None:
    calls = []

    def measure(rate: float) -> dict[str, Any]:
        calls.append(rate)
        return _meas(rate, 50e3, 20e3, 0.6, valid=False)

    found = search.find_rate(measure, 1.0)
    assert calls == [0] and found["valid"] is False and found["runs"] == []
    case = {"path": "naive", "kind": "append", "param": 4, "label": "Append B=4", **found}
    assert [r["row"] for r in search.invalid_runs([case])] == ["naive Append B=4 overload"]


def test_dta_valid_cases_keep_their_ratio() -> None:
    dta = {"path": "dta", "kind": "keywrite", "param": 1, "label": "Key-Write N=1", "valid": True,
           "reporter_bound": False, "sustained": _meas(40e3, 40e3, 40e3, 0.0), "overload": _meas(0, 1, 1, 0.5),
           "runs": []}
    naive = {"path": "naive", "kind": "keywrite", "param": 2, "label": "Key-Write N=2", "valid": True,
             "reporter_bound": False, "sustained": _meas(20e3, 20e3, 20e3, 0.0), "overload": _meas(0, 1, 1, 0.5),
             "runs": []}
    search.vs_naive([dta, naive])
    assert dta["vs_naive"] == pytest.approx(2.0)
    assert "2.00" in dta_tables([dta, naive], [], [])


def test_dta_measurement_validity_from_its_cpu_share_and_duration() -> None:
    from netstack.bench.dta.measure import validity_of

    assert validity_of({"foreign_share": 0.05}, 2.0, 2.0).valid
    assert not validity_of({"foreign_share": 0.30}, 2.0, 2.0).valid
    short = validity_of({"foreign_share": 0.0}, 1.0, 2.0)
    assert not short.valid and short.reasons[0].startswith("reporter seconds")
    assert validity_of({}, 2.0, 2.0).valid  # no /proc/stat: only the duration is judged


# ----------------------------------------------------------------------------------------- auth
def _lg(rnd: int, keyed: bool, speed: float, valid: bool = True) -> dict[str, Any]:
    return {"round": rnd, "auth": keyed, "mbps": speed * 100, "effective_link_speed": speed,
            "cpu": {"sw1": 0.3, "sw2": 0.2}, "auth_sealed": 10 if keyed else 0, "auth_ok": 10 if keyed else 0,
            "auth_refused": 0, "valid": valid, "checks": [] if valid else STARVED}


def test_auth_an_invalid_run_leaves_the_medians_and_its_rounds_ratio(capsys) -> None:
    runs = [_lg(1, False, 0.90), _lg(1, True, 0.85), _lg(2, False, 0.20, valid=False), _lg(2, True, 0.80),
            _lg(3, False, 0.80), _lg(3, True, 0.40, valid=False)]
    summary = auth.lg_summary(runs)
    assert [r["vs_keys_off"] for r in runs] == [None, pytest.approx(0.85 / 0.90), None, None, None, None]
    assert summary["on_vs_off"] == pytest.approx(0.85 / 0.90) and summary["rounds_counted"] == 1
    assert summary["off"]["effective_link_speed"] == pytest.approx(0.85)  # median of 0.90 and 0.80
    assert summary["on"]["effective_link_speed"] == pytest.approx(0.825)  # median of 0.85 and 0.80
    assert (summary["off"]["runs_valid"], summary["on"]["runs_valid"]) == (2, 2)
    invalid = auth.invalid_rows(runs)
    assert [r["row"] for r in invalid] == ["linkguardian round 2, keys off", "linkguardian round 3, keys on"]
    payload = auth.verdicts(invalid)
    assert payload["valid"] is False and len(payload["checks"]) == 2 and payload["cross_checks"] == []
    auth.print_lg(summary, runs, invalid, 3)
    out = capsys.readouterr().out
    assert "Invalid runs (not counted" in out and "linkguardian round 3, keys on" in out


def test_auth_no_counted_round_gives_no_ratio() -> None:
    summary = auth.lg_summary([_lg(1, False, 0.9, valid=False), _lg(1, True, 0.8)])
    assert summary["on_vs_off"] is None and summary["on_vs_off_range"] is None
    assert summary["off"]["effective_link_speed"] is None and summary["off"]["cpu"]["sw1"] is None
