"""Hypothesis settings for the whole suite: the README's test command runs the same suite for
everyone -- CI, a newcomer, a developer -- whatever the environment says; heavier property runs
are an explicit opt-in (``NETSTACK_THOROUGH=1``)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

#: ``NETSTACK_THOROUGH=1`` (README "Tests"): every property test runs its own ``max_examples``,
#: with random seeds -- a deliberate, longer run, never what the plain command does.
THOROUGH = os.environ.get("NETSTACK_THOROUGH", "") not in ("", "0")

#: Unless THOROUGH, a test's own ``@settings(max_examples=N)`` (or a state machine's
#: ``TestCase.settings``) is capped at this many examples: the suite must stay under 15 minutes
#: on 2 cores.
MAX_EXAMPLES_CAP = 100

# Every profile derives from hypothesis' own "default" on purpose: a profile registered without a
# parent inherits the active one, and hypothesis itself activates its "ci" profile (derandomised,
# no example database) when CI is set -- which would make the suite differ by CI again. A failure
# prints its @reproduce_failure blob everywhere (what CI printed before).
_BASE = settings(settings.get_profile("default"), print_blob=True)
# The suite everyone runs: no per-example deadlines (tests assert behaviour, never timings, on a
# shared machine), and a fixed derandomised set of 50 examples per test unless it asks for more,
# so that every run tests the same examples (derandomize also turns off the example database,
# which would make one machine's run differ from another's by what earlier runs found).
settings.register_profile("suite", _BASE, deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow], max_examples=50)
settings.register_profile("ci", settings.get_profile("suite"))  # its name before it was everyone's
# HYPOTHESIS_PROFILE=dev: the same suite with random seeds (and the local example database).
settings.register_profile("dev", _BASE, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                          max_examples=50)
# NETSTACK_THOROUGH=1: random seeds and hypothesis' own default of 100 examples, uncapped.
settings.register_profile("thorough", _BASE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Always loaded explicitly, never left to hypothesis (see _BASE); HYPOTHESIS_PROFILE still picks
# another one on purpose.
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("thorough" if THOROUGH else "suite"))


def pytest_report_header(config: pytest.Config) -> str:
    if THOROUGH:
        return "netstack: NETSTACK_THOROUGH=1, each property test runs its own max_examples"
    return f"netstack: property tests capped at {MAX_EXAMPLES_CAP} examples (NETSTACK_THOROUGH=1 lifts the cap)"


def _capped(own: settings) -> settings | None:
    """``own`` with at most MAX_EXAMPLES_CAP examples; None when it asks for no more than that."""
    if own.max_examples <= MAX_EXAMPLES_CAP:
        return None
    return settings(own, max_examples=MAX_EXAMPLES_CAP)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if THOROUGH:
        return
    for item in items:
        test = getattr(item, "obj", None)
        # @given keeps its settings on the wrapped test and reads them at each call
        # (hypothesis.core: wrapped_test._hypothesis_internal_use_settings)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None:
            capped = _capped(own)
            if capped is not None:
                test._hypothesis_internal_use_settings = capped  # type: ignore[union-attr]
            continue
        # a RuleBasedStateMachine's TestCase reads its class attribute ``settings`` in runTest
        # (hypothesis.stateful: run_state_machine_as_test(cls, settings=self.settings))
        cls = getattr(item, "cls", None)
        if getattr(test, "_hypothesis_state_machine_class", None) is not None and cls is not None:
            capped = _capped(cls.settings)
            if capped is not None:
                cls.settings = capped


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """Live runs the machine starved (tests/integration/conftest.py ``validated``): re-run, or skipped."""
    import sys

    mod = sys.modules.get("tests.integration.conftest") or sys.modules.get("integration.conftest")
    runs = getattr(mod, "STARVED_RUNS", None) if mod is not None else None
    if runs:
        terminalreporter.section("live runs the machine starved (not counted, run again)")
        for line in runs:
            terminalreporter.write_line(line)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: object) -> None:
    """A pytest-xdist worker that died says only "crashed": add how its process ended (its exit
    status, or the signal that killed it) to the test's report, which is what CI prints of it.
    (A SIGTERM there was once a teardown beside the unit tests taking the worker for one of its
    namespace's processes: netstack.topo.nsenter.call_in_netns.)"""
    import signal
    import subprocess

    try:  # (a diagnostic: whatever goes wrong here must not end the whole run)
        popen = getattr(getattr(getattr(getattr(report, "node", None), "gateway", None), "_io", None), "popen", None)
        if not isinstance(popen, subprocess.Popen):
            return
        try:
            code = popen.wait(timeout=5)
        except subprocess.TimeoutExpired:
            how = f"its process (pid {popen.pid}) had not ended 5 s later"
        else:
            try:
                name = signal.Signals(-code).name
            except ValueError:  # (a real-time signal has no name there)
                name = f"signal {-code}"
            how = f"its process (pid {popen.pid}) " + (f"was killed by {name}" if code < 0 else
                                                      f"exited with status {code}")
        report.longrepr = f"{report.longrepr}: {how}"
    except Exception:
        return
