"""netstack down leaves nothing behind: namespaces, veths, nft tables, processes — also after
a daemon was killed with SIGKILL, and `down --all` (limited to the test's own prefix) after a run
whose state was lost.

Every test here touches only the prefix it made: tests/integration/test_foreign_testbed.py runs
them next to another user's testbed and checks that it survives."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from netstack import runtime
from netstack.topo import impair, netns
from netstack.topo.model import load_topology

pytestmark = pytest.mark.netns


def _leftovers(prefix: str) -> dict:
    namespaces = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                  if n.startswith(prefix + "-")]
    procs = subprocess.run(["pgrep", "-f", f"/{prefix}/sw"], capture_output=True, text=True).stdout.split()
    tables = [t for t in impair.list_nft_tables(None) if prefix in t]
    return {"namespaces": namespaces, "processes": procs, "nft": tables}


@contextlib.contextmanager
def scratch_prefix(run_root: Path) -> Iterator[str]:
    """A fresh prefix whose run directories live under ``run_root``; whatever was made under it
    is removed on exit (also what test_foreign_testbed.py runs these tests with)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NETSTACK_RUN_DIR", str(run_root))
        p = "c" + uuid.uuid4().hex[:6]
        try:
            yield p
        finally:
            runtime.down(p)  # whatever the test did, leave nothing


@pytest.fixture
def prefix(tmp_path: Path) -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    with scratch_prefix(tmp_path) as p:
        yield p


def test_down_after_sigkill(prefix):
    state = runtime.up(load_topology(None), prefix)  # with the default topology's nft corruption
    assert state.impairments
    victim = state.daemons[0].pid
    os.kill(victim, signal.SIGKILL)
    time.sleep(0.2)
    st = runtime.status(prefix)
    assert "error" in st["daemons"][state.daemons[0].node]  # reported, not fatal
    runtime.down(prefix)
    assert _leftovers(prefix) == {"namespaces": [], "processes": [], "nft": []}
    assert not runtime.run_dir(prefix).exists()
    assert prefix not in netns.list_running()


def test_down_all_after_lost_state(prefix):
    state = runtime.up(load_topology(None), prefix, apply_impairments=False)
    shutil.rmtree(runtime.run_dir(prefix))  # a crashed run: pid files and state are gone
    # what `netstack down --all` runs, limited to this test's prefix: unlimited, it would also
    # remove every other user's testbed on the machine. The prefix is still found the way
    # --all finds it (by the namespaces' marker: its run directory is gone).
    removed = runtime.down_all(prefixes=[prefix])
    assert sorted(removed) == sorted(state.namespaces.values())
    assert _leftovers(prefix) == {"namespaces": [], "processes": [], "nft": []}


def test_second_up_on_same_prefix_is_refused(prefix):
    runtime.up(load_topology(None), prefix, apply_impairments=False)
    with pytest.raises(runtime.RuntimeErrorNS, match="already running"):
        runtime.up(load_topology(None), prefix)
