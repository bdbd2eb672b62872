"""The live-vs-sim cross-check (issue: one virtual-time runtime): the same topology file and seed,
LinkGuardian at 1e-2 corruption with N = 1, the same scenario (``lg-stream``) run on the real
testbed and in virtual time. Effective loss and reorder-free delivery agree within their 95 %
intervals; both runtimes see the link's actual loss and a repaired stream.

Also: a topology file alone turns LinkGuardian on in the live daemons (no ``netstack lg enable``)."""

from __future__ import annotations

import os
import uuid

import pytest

from netstack import runtime
from netstack.sim.scenario import RunSpec, examples, resolve_topology, run
from netstack.stats import intervals_overlap
from netstack.topo import netns

from .conftest import valid_run

pytestmark = pytest.mark.netns

TOPOLOGY = "lg-testbed"  # netstack/topo/examples/lg-testbed.toml: nft 1e-2 on sw1 -> sw2, LG N = 1
SEED = 7
PARAMS = {"count": 20_000, "size": 400, "rate_pps": 5000.0}


@pytest.fixture
def prefix(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path / "run"))
    p = "xc" + uuid.uuid4().hex[:6]
    try:
        yield p
    finally:
        runtime.down(p)  # whatever a failure left behind
        assert netns.running_namespaces(p) == {}


def test_lg_stream_agrees_live_and_in_virtual_time(prefix):
    # (a live run the machine starved is run again: netstack.validity)
    live = valid_run(lambda: run(RunSpec("lg-stream", TOPOLOGY, SEED, None, PARAMS, "live", prefix)))
    assert {c["name"] for c in live["checks"]} >= {"datagrams sent", "send rate (datagrams/s)", "scheduling delay"}
    sim = run(RunSpec("lg-stream", TOPOLOGY, SEED, None, PARAMS, "sim"))
    # one schema, one file, one scale
    for doc, name in ((live, "live"), (sim, "sim")):
        assert doc["schema"] == "netstack.run/1" and doc["runtime"] == name and doc["seed"] == SEED
        assert doc["topology"]["source"] == str(examples()[TOPOLOGY]) and doc["time_scale"] == 1000.0
    assert set(live["result"]) == set(sim["result"])
    lv, sv = live["result"], sim["result"]
    for r in (lv, sv):
        # the link really corrupted about 1 % of what it carried, and LinkGuardian repaired it
        assert 0.005 < r["link"]["actual_loss"] < 0.02, r["link"]
        assert r["linkguardian"]["receiver"]["holes_detected"] > 50
        assert r["effective_loss"]["rate"] < r["link"]["actual_loss"] / 10
        assert r["duplicates"] == 0 and r["send"]["sent"] == PARAMS["count"]
    # the cross-check: effective loss and reorder-free delivery within each other's 95 % intervals
    assert intervals_overlap(lv["effective_loss"]["ci95"], sv["effective_loss"]["ci95"]), (lv, sv)
    assert intervals_overlap(lv["reordered"]["ci95"], sv["reordered"]["ci95"]), (lv, sv)
    assert intervals_overlap(_actual_ci(lv), _actual_ci(sv))
    assert netns.running_namespaces(prefix) == {}  # the live run tore its testbed down


def _actual_ci(r):
    from netstack.stats import clopper_pearson

    link = r["link"]
    return clopper_pearson(link["sent_B"] - link["received_C"], link["sent_B"])


def test_a_topology_file_turns_linkguardian_on_in_the_daemons(prefix):
    state = runtime.up(resolve_topology(TOPOLOGY), prefix, apply_impairments=False)
    try:
        st1 = runtime.control(prefix, "sw1", "lg_status")["p-sw2"]["sender"]
        st2 = runtime.control(prefix, "sw2", "lg_status")["p-sw1"]["receiver"]
    finally:
        runtime.down(prefix)
    assert state.prefix == prefix
    assert st1["enabled"] and st2["enabled"]
    # the paper's 100G settings scaled to the 100 Mbit/s link, N = 1 from the file
    assert st1["params"]["n_copies"] == 1 and st1["params"]["ack_no_timeout_ns"] == 7_000_000
    assert st1["params"]["time_scale"] == 1000.0 and st2["params"] == st1["params"]
