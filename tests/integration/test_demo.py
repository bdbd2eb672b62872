"""`netstack demo` end to end with small sizes: three phases, a table, nothing left behind."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from netstack.demo import run_demo

pytestmark = pytest.mark.netns


def test_demo_small(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path / "run"))
    out = run_demo(corrupt=0.05, datagrams=600, flows=60, tcp_seconds=1.0, copies=2, results_dir=str(tmp_path),
                   prefix="dm" + os.urandom(2).hex(), say=lambda m: None)
    phases = {p["phase"]: p for p in out["phases"]}
    assert set(phases) == {"off", "LG", "LG_NB"}
    assert phases["off"]["link"]["fcs_drops"] > 0  # the link really corrupts
    assert phases["off"]["udp"]["lost"] > 0
    assert phases["LG"]["udp"]["lost"] < phases["off"]["udp"]["lost"]
    assert phases["LG"]["udp"]["reordered"] == 0
    # every phase says whether it ran as planned (netstack.validity), and the demo sums them up
    for p in out["phases"]:
        names = {c["name"] for c in p["checks"]}
        assert {"datagrams sent", "scheduling delay", "request/response flows"} <= names
        assert p["valid"] == all(c["ok"] for c in p["checks"])
    assert out["valid"] == all(p["valid"] for p in out["phases"])
    assert "valid run" in out["table"]
    data = json.loads((tmp_path / "demo-latest.json").read_text())
    assert data["valid"] == out["valid"]
    assert len(data["phases"]) == 3 and "| LinkGuardian" in data["table"]
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "dm" not in " ".join(n for n in left.split() if n.startswith("dm"))
