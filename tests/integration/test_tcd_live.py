"""TCD §3.1's single congestion point scenario on the live testbed ("Congestion Detection in
Lossless Networks"): 4 switch daemons with real PFC on veths, 20 host namespaces, the end hosts
as real processes on kernel UDP sockets (``netstack tcd run``'s path). ECN marks the victim flow
F0 CE at P2; TCD marks it undetermined and never CE; the contributor F1 is CE under both."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from netstack.sim.scenario import RunSpec, run
from netstack.tcd.scenarios import load_doc

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    os.environ.setdefault("NETSTACK_RUN_DIR", str(tmp_path_factory.mktemp("run")))
    out = {}
    for marker in ("ecn", "tcd"):
        res = run(RunSpec("tcd", topology=load_doc("tcd-single", marker),  # type: ignore[arg-type]
                          params={"kind": "single"}, runtime="live"))
        out[marker] = res["result"]
    return out


def test_ecn_marks_the_victim_f0_ce_at_p2(results):
    ecn = results["ecn"]
    assert ecn["flows"]["F0"]["ce"] > 0
    assert ecn["ports"]["P2"]["marked_ce"] > 0
    assert ecn["ports"]["P2"]["pauses"] > 0  # P2 really was paused by PFC


def test_tcd_marks_f0_undetermined_and_never_ce(results):
    tcd = results["tcd"]
    assert tcd["flows"]["F0"]["ce"] == 0
    assert tcd["flows"]["F0"]["undetermined"] > 0
    p2 = tcd["ports"]["P2"]
    assert p2["pauses"] > 0 and p2["time_in_state_ns"]["undetermined"] > 0
    assert p2["time_in_state_ns"]["congestion"] == 0


def test_the_contributor_f1_is_ce_under_both(results):
    for marker in ("ecn", "tcd"):
        assert results[marker]["flows"]["F1"]["ce"] > 0, marker
        assert results[marker]["ports"]["P3"]["marked_ce"] > 0, marker


def test_nothing_is_lost_in_the_lossless_class(results):
    for marker in ("ecn", "tcd"):
        for name, f in results[marker]["flows"].items():
            assert f["packets"] == f["sent"] > 0, (marker, name)


def test_the_cli_prints_the_documented_json(tmp_path):
    """``netstack tcd run single --marker tcd --json``: the stable object of docs/tcd.md; bad
    arguments are refused with a clear error before anything is brought up."""
    bad = subprocess.run([sys.executable, "-m", "netstack.cli", "tcd", "run", "single", "--marker", "red"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "invalid choice" in bad.stderr
    r = subprocess.run([sys.executable, "-m", "netstack.cli", "tcd", "run", "single", "--runtime", "sim", "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-500:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(doc["flows"]) >= {"F0", "F1", "F2"}
    for f in doc["flows"].values():
        assert {"ce", "undetermined", "packets"} <= set(f)
    assert set(doc["ports"]) == {"P0", "P1", "P2", "P3"}
