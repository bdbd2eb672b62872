"""Prometheus metrics on the live testbed: every daemon serves its ``status`` counters on
127.0.0.1 of the machine; a scrape parses with prometheus-client's own parser and agrees with
``netstack status``; ``netstack metrics`` merges them."""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys

import pytest

from netstack import runtime
from netstack.io.metrics import scrape
from netstack.topo.model import load_topology

from .conftest import running, sh

pytestmark = pytest.mark.netns
CLI = [sys.executable, "-m", "netstack.cli"]


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    base = random.randrange(20000, 60000, 10)
    topo = dataclasses.replace(load_topology(None), metrics_port=base)
    yield from running(topo, tmp_path_factory, "m")


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_a_switch_serves_its_status_counters_under_their_names(metered):
    daemons = {d.key: d for d in metered.daemons}
    assert daemons["sw1"].metrics and daemons["sw1"].metrics != daemons["sw2"].metrics
    assert sh(metered, "h1", "ping", "-c", "3", "-i", "0.1", "10.0.0.2").returncode == 0
    text = scrape(daemons["sw1"].metrics)
    st = runtime.control(metered.prefix, "sw1", "status")
    got = _samples(text)
    rx = got[("netstack_rx_frames", (("node", "sw1"), ("port", "p-h1")))]
    # the scrape came first: the counter can only have grown since
    assert 4 <= rx <= st["ports"]["p-h1"]["rx_frames"]  # ARP + 3 echo requests, at least
    assert ("netstack_fcs_errors", (("node", "sw1"), ("port", "p-sw2"))) in got


def test_netstack_metrics_merges_every_daemon(metered):
    r = subprocess.run([*CLI, "metrics", "--prefix", metered.prefix, "--match", "rx_frames"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    got = _samples(r.stdout)
    nodes = {dict(labels)["node"] for name, labels in got}
    assert {"sw1", "sw2"} <= nodes and all(name == "netstack_rx_frames" for name, _ in got)
    assert "samples in 1 metrics from" in r.stderr
    r = subprocess.run([*CLI, "metrics", "--prefix", metered.prefix, "--json", "--match", "tx_frames"],
                       capture_output=True, text=True, timeout=30)
    doc = json.loads(r.stdout)
    assert doc["netstack_tx_frames"] and all({"labels", "value"} <= set(row) for row in doc["netstack_tx_frames"])
    r = subprocess.run([*CLI, "metrics", "--prefix", metered.prefix, "--scrape-config"], capture_output=True,
                       text=True, timeout=30)
    assert r.stdout.startswith("scrape_configs:") and metered.daemons[0].metrics in r.stdout


def test_a_port_outside_the_range_is_refused():
    r = subprocess.run([*CLI, "up", "--metrics-port", "80", "--prefix", "zz"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "not a TCP port in 1024..65000" in r.stderr
