"""Fixtures for namespace integration tests: a real testbed, torn down even on failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

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


def traffic(state: dict, node: str, *args: str, background: bool = False) -> Any:
    """``python -m netstack.traffic ARGS`` in ``node``: its last JSON line, or (``background``) the
    process once it said ``ready``."""
    argv = ["ip", "netns", "exec", state["namespaces"][node], sys.executable, "-m", "netstack.traffic", *args]
    if background:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None and proc.stderr.readline().strip() == "ready"
        return proc
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def udp_stream(state: dict, n: int, rate: int, size: int = 400) -> dict:
    """A sequenced UDP stream h1 -> h2 (10.0.0.2): what h2's sink counted (lost, reordered, duplicates)."""
    sink = traffic(state, "h2", "udp-sink", "--quiet", "1.5", "--expect", str(n), background=True)
    traffic(state, "h1", "udp-send", "--dst", "10.0.0.2", "--count", str(n), "--rate", str(rate), "--size", str(size))
    out, _ = sink.communicate(timeout=120)
    return json.loads(out.strip().splitlines()[-1])
