"""A topology file that declares DTA's translator (``[links.features.<end>] dta``,
netstack/dta/topology.py) comes up with it on: ``netstack up`` returns with the translator enabled
on sw2's port facing c1, with the file's options, c1's queue pairs bound to it, and reports from a
host reach the collector's memory with nothing else done. A restarted switch daemon gets it back
(``control.after_restart``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

import netstack.topo
from netstack import cli, runtime
from netstack.dta import CollectorQuery, control
from netstack.topo.model import load_topology

from .conftest import running

pytestmark = pytest.mark.netns
DEFAULT = Path(netstack.topo.__file__).with_name("default.toml")


@pytest.fixture(scope="module")
def declared(tmp_path_factory):
    """The default topology with the translator declared on sw2's end of sw2-c1 (a file, so that
    the run state names it and a restart reads it again)."""
    doc = DEFAULT.read_text() + (  # sw2-c1 is the default topology's last link: this is its features table
        '\n[links.features.a]\ndta = { role = "translator", collector = "c1", window = 256, grace_reports = 50 }\n')
    assert tomllib.loads(doc)["links"][-1]["features"]["a"]["dta"]["window"] == 256
    path = tmp_path_factory.mktemp("topo") / "dta-declared.toml"
    path.write_text(doc)
    yield from running(load_topology(path), tmp_path_factory, letter="d")


def _enabled(prefix: str) -> dict:
    st = control.translator_status(prefix, "sw2")
    assert st["enabled"] and st["port"] == "p-c1" and st["collector"] == "c1"
    return st


def test_the_translator_is_on_when_up_returns_with_the_files_options(declared):
    prefix = declared.prefix
    st = _enabled(prefix)
    assert st["config"]["window"] == 256 and st["config"]["grace_reports"] == 50  # the file's, not the defaults
    assert st["translator_ip"] == "10.0.0.254"
    qps = control.collector_status(prefix)["responder"]["qps"]
    assert all(qp["peer"] == {"ip": "10.0.0.254", "mac": st["translator_mac"], "qpn": qp["peer"]["qpn"]}
               for qp in qps.values())  # bound to the translator before it was enabled


def test_reports_reach_the_collector_with_nothing_else_done(declared, capsys):
    prefix = declared.prefix
    # netstack dta report (control.plan_report + run_report): 50 Key-Writes 7000+i := 10+i from h1
    code = cli.main(["dta", "report", "keywrite", "7000", "10", "--count", "50", "--rate", "500", "--json",
                     "--prefix", prefix])
    out = capsys.readouterr().out
    assert code in (0, 3), out  # 3: a run the machine starved (the reports still went out)
    q = CollectorQuery.open(control.memory_dir(prefix))
    try:
        found = sum(q.keywrite_get(7000 + i) == (10 + i,) for i in range(50))
    finally:
        q.close()
    c = control.translator_status(prefix, "sw2")["counters"]
    assert c["keywrite"] >= 45 and found >= 45 and c["resyncs"] == 0, (found, c)


def test_a_restarted_switch_daemon_gets_the_declared_translator_back(declared):
    prefix = declared.prefix
    runtime.kill_daemon(prefix, "sw2")
    runtime.restart_daemon(prefix, "sw2")  # runs the protocols' after_restart
    st = _enabled(prefix)
    assert st["config"]["window"] == 256 and st["counters"]["reports"] == 0  # a fresh translator
