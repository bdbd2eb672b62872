"""Fixtures of tests/reproduce: the browser (tests/browser.py: one headless Chromium per test module),
and one run of TCD's virtual-time experiment through ``netstack reproduce`` for the whole session."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium  # noqa: F401


def _reproduce_tcd_sim(out: Path) -> None:
    """``netstack reproduce tcd --quick`` into ``out``, its virtual-time experiment only (the live
    one needs root and a testbed)."""
    from netstack.reproduce import session
    from netstack.tcd import reproduce as tcd

    sim_only = dataclasses.replace(tcd.PAPER, experiments=tuple(e for e in tcd.PAPER.experiments if not e.needs_root))
    assert sim_only.experiments
    saved = session.papers
    session.papers = lambda names: [sim_only]
    try:
        session.run(["tcd"], "quick", out, 1, False, "netstack reproduce tcd (test)", lambda m: None)
    finally:
        session.papers = saved


@pytest.fixture(scope="session")
def tcd_sim_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """TCD's virtual-time experiment through ``netstack reproduce``: ``netstack bench tcd --quick
    --only scenarios --workers 1`` (§3.1's scenarios, ~10 s of CPU) and the report on it; the
    report's directory and its document (``reproduce.json``).

    One run for the session, as the experiment is the same for both users: test_report_browser.py
    loads the report in Chromium, test_tcd.py judges the bench's JSON in it. Under pytest-xdist the
    workers share it too (pytest-xdist's recipe for a session fixture run once): the first worker
    to ask runs it under a lock in the session's temporary root, the other then reads it."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    root = tmp_path_factory.getbasetemp() if worker is None else tmp_path_factory.getbasetemp().parent
    out = root / "reproduce-tcd-sim"
    with open(root / "reproduce-tcd-sim.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (released when the file closes, even on a failed run)
        if not (out / "reproduce.json").exists():  # (written last: a failed run leaves none, and runs again)
            _reproduce_tcd_sim(out)
    return out, json.loads((out / "reproduce.json").read_text())
