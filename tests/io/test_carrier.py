"""CarrierWatch: the carrier of a namespace's interfaces from rtnetlink, on a real veth pair."""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest

from netstack.io.carrier import CarrierWatch
from netstack.topo.nsenter import in_netns

pytestmark = [pytest.mark.netns,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace)")]


def _ip(ns: str, *argv: str) -> None:
    subprocess.run(["ip", "-n", ns, *argv], check=True, capture_output=True)


def _read_until(watch: CarrierWatch, n: int, wait_s: float = 2.0) -> list[tuple[str, bool]]:
    got: list[tuple[str, bool]] = []
    deadline = time.monotonic() + wait_s
    while len(got) < n and time.monotonic() < deadline:
        got += watch.read()
        time.sleep(0.01)
    return got


@pytest.fixture
def netns():
    name = f"carrier-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        _ip(name, "link", "add", "ca", "type", "veth", "peer", "name", "cb")
        _ip(name, "link", "set", "ca", "up")
        _ip(name, "link", "set", "cb", "up")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_the_starting_state_then_each_change_of_the_watched_interfaces(netns):
    with in_netns(netns):
        watch = CarrierWatch(["ca"])  # cb is not watched: its changes are not reported
    try:
        assert _read_until(watch, 1) == [("ca", True)]
        _ip(netns, "link", "set", "cb", "down")  # the peer down: ca loses its carrier
        assert _read_until(watch, 1) == [("ca", False)]
        _ip(netns, "link", "set", "cb", "up")
        assert _read_until(watch, 1) == [("ca", True)]
        _ip(netns, "link", "set", "ca", "down")  # its own end down
        assert _read_until(watch, 1) == [("ca", False)]
        _ip(netns, "link", "set", "lo", "up")  # another interface: nothing
        assert _read_until(watch, 1, wait_s=0.3) == []
        assert watch.carrier == {"ca": False}
    finally:
        watch.close()
