"""Fixtures for namespace integration tests: a real testbed, torn down even on failure."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from netstack import runtime
from netstack.topo.model import load_topology


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.netns)


requires_root = pytest.mark.skipif(os.geteuid() != 0, reason="namespace tests need root")


def running(topology, tmp_path_factory, letter: str = "t"):
    """A generator fixture's body: ``topology`` up (no impairment) under a unique prefix starting
    with ``letter``, with its daemons; yields the run state, tears it down even on failure."""
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    prefix = letter + uuid.uuid4().hex[:6]
    os.environ.setdefault("NETSTACK_RUN_DIR", str(tmp_path_factory.mktemp("run")))
    state = runtime.up(topology, prefix, apply_impairments=False)
    try:
        yield state
    finally:
        runtime.down(prefix)


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    """The default topology (no impairment) under a unique prefix, with its switch daemons."""
    yield from running(load_topology(None), tmp_path_factory)


def in_node(state: dict, node: str, code: str, *args: str, timeout: float = 60.0,
            background: bool = False) -> subprocess.CompletedProcess | subprocess.Popen:
    """Run a Python snippet inside ``node``'s namespace."""
    argv = ["ip", "netns", "exec", state["namespaces"][node], sys.executable, "-c", code, *args]
    if background:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)


def sh(state: dict, node: str, *argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", "netns", "exec", state["namespaces"][node], *argv],
                          capture_output=True, text=True, timeout=timeout, check=False)
