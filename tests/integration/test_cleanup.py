"""netstack down leaves nothing behind: namespaces, veths, nft tables, processes — also after
a daemon was killed with SIGKILL, and `down --all` after a run whose state was lost."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid

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


@pytest.fixture
def prefix(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path))
    p = "c" + uuid.uuid4().hex[:6]
    yield p
    runtime.down(p)  # whatever the test did, leave nothing


def test_down_after_sigkill(prefix):
    state = runtime.up(load_topology(None), prefix)  # with the default topology's nft corruption
    assert state["impairments"]
    victim = state["daemons"][0]["pid"]
    os.kill(victim, signal.SIGKILL)
    time.sleep(0.2)
    st = runtime.status(prefix)
    assert "error" in st["daemons"][state["daemons"][0]["node"]]  # reported, not fatal
    runtime.down(prefix)
    assert _leftovers(prefix) == {"namespaces": [], "processes": [], "nft": []}
    assert not runtime.run_dir(prefix).exists()
    assert prefix not in netns.list_running()


def test_down_all_after_lost_state(prefix):
    runtime.up(load_topology(None), prefix, apply_impairments=False)
    shutil.rmtree(runtime.run_dir(prefix))  # a crashed run: pid files and state are gone
    removed = runtime.down_all()
    assert any(n.startswith(prefix) for n in removed)
    assert _leftovers(prefix) == {"namespaces": [], "processes": [], "nft": []}


def test_second_up_on_same_prefix_is_refused(prefix):
    runtime.up(load_topology(None), prefix, apply_impairments=False)
    with pytest.raises(runtime.RuntimeErrorNS, match="already running"):
        runtime.up(load_topology(None), prefix)
