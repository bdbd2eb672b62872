"""netstack.validity: checks, the verdict, and how a finished run's exit code follows it."""

from __future__ import annotations

from netstack.validity import EXIT_INVALID, EXIT_OK, Validity, finish, verdict_line


def test_checks_make_the_verdict_and_name_the_reasons():
    v = Validity()
    assert v.planned("datagrams sent", 95, 100) and not v.at_least("rate", 80.0, 90.0, " (90 %)")
    v.not_starved({"sw1": {"samples": 10, "p99_ms": 2.0, "max_ms": 30.0}, "h1": None}, p99_ms=20, max_ms=100)
    assert not v.valid and v.reasons == ["rate: expected >= 90 (90 %), measured 80"]
    doc = v.annotate({"x": 1})
    assert doc["valid"] is False and [c["name"] for c in doc["checks"]] == ["datagrams sent", "rate",
                                                                            "scheduling delay"]
    assert doc["checks"][2]["measured"]["unmeasured"] == ["h1"]  # named, not counted as starved
    assert Validity.of(doc).reasons == v.reasons


def test_a_starved_process_fails_the_scheduling_delay_check():
    v = Validity()
    assert not v.not_starved({"sw2": {"samples": 50, "p99_ms": 50.0, "max_ms": 180.0}}, p99_ms=20, max_ms=100)
    assert v.checks[0].measured["worst_p99_at"] == "sw2"


def test_finish_and_the_verdict_line(capsys):
    assert finish({"valid": True, "checks": []}) == EXIT_OK
    bad = Validity()
    bad.at_most("lag", 90.0, 20.0)
    assert finish(bad.annotate({})) == EXIT_INVALID
    assert capsys.readouterr().err.strip() == "INVALID RUN: lag: expected <= 20, measured 90"
    assert verdict_line({}) == "validity: not checked"
    assert verdict_line(bad.annotate({})).startswith("INVALID: lag")
    assert verdict_line({"valid": True, "checks": []}, names=True) == "VALID (0 checks: )"


def test_a_tools_own_checks_counters_are_not_checks():
    """T/C-SACK's receiver reports refused ACKs under ``checks``: no verdict is read from it."""
    assert Validity.of({"valid": True, "checks": {"not_peer": 3}}).checks == []
