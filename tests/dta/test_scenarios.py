"""DTA in the common protocol shape: the ``dta-keywrite`` scenario in virtual time, a translator
declared in a topology file (``[links.features.<end>] dta``, netstack/dta/topology.py) and what
``netstack up`` does with it (the collector daemon's config, the switch's restart)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from netstack import runtime
from netstack.dta import control
from netstack.dta import topology as dtopo
from netstack.dta.simhosts import SERVICE, connect_declared
from netstack.sim.network import Network
from netstack.sim.scenario import RunSpec, canonical_json, run
from netstack.switch import plugins
from netstack.topo import netns
from netstack.topo.model import TopologyError, load_topology, topology_from_dict

DEFAULT = Path(netns.__file__).with_name("default.toml")


def declared_doc(**dta) -> dict:
    """The default topology (h1 - sw1 = sw2 - h2, c1 off sw2) with ``dta`` on sw2's end of sw2-c1."""
    doc = tomllib.loads(DEFAULT.read_text())
    link = next(lk for lk in doc["links"] if lk["name"] == "sw2-c1")
    link["features"] = {"a": {"dta": {"role": "translator", "collector": "c1", **dta}}}
    return doc


def _run(topology=None, seed: int = 3, **params) -> dict:
    return run(RunSpec("dta-keywrite", topology, seed, None, {"count": 1500, "rate": 30_000.0, **params}))


# =========================================================================== the scenario


def test_keywrites_are_written_and_acknowledged_in_virtual_time():
    res = _run()["result"]
    assert res["ok"] and res["translator_from"] == "scenario" and (res["switch"], res["port"]) == ("sw2", "p-c1")
    reports, written, rdma = res["reports"], res["written"], res["rdma"]
    assert reports["sent"] == 1500 and reports["nacks"] == 0
    # the default topology corrupts 1e-3 of sw1's frames to sw2: a lost report is never translated
    n = reports["reached_translator"]
    assert 1490 <= n <= 1500 and reports["translated"] == n
    assert rdma["writes"] == rdma["executed"] == rdma["requests"] == 2 * n  # N = 2 WRITEs per report (§6.1)
    assert rdma["acks_sent"] == rdma["acks_taken"] > 0 and rdma["resyncs"] == rdma["naks"] == 0
    assert rdma["outstanding"] < 192  # only the requests after the last AckReq (one in window/8)
    # every translated key reads back its value, but for what later keys overwrote (Fig. 7)
    assert written["keys"] == 1500 and written["wrong"] == 0
    assert written["right"] + written["not_found"] == 1500 and written["right"] >= n - 5
    assert written["expected_success"] > 0.99


def test_a_run_is_a_function_of_its_seed():
    a, b = _run(seed=5), _run(seed=5)
    assert canonical_json(a) == canonical_json(b)
    assert a["engine"]["events"] == b["engine"]["events"] > 0


def test_the_declared_translator_is_the_one_that_runs():
    doc = declared_doc(window=64, window_timeout_ms=20, grace_reports=10)
    res = _run(doc, redundancy=4, rate=10_000.0)["result"]  # 40 k WRITEs/s: c1's 100 Mbit/s link keeps up
    assert res["ok"] and res["translator_from"] == "topology" and res["window"] == 64 and res["redundancy"] == 4
    # at 30 k reports/s it does not: the window (64 requests) fills and sheds reports before translation
    over = _run(doc, redundancy=4)["result"]["rdma"]
    assert over["window_dropped"] > 0 and over["writes"] == over["executed"] and over["resyncs"] == 0
    assert res["rdma"]["writes"] == 4 * res["reports"]["translated"] and res["rdma"]["outstanding"] < 8
    net = Network(topology_from_dict(doc, "declared"), seed=1)
    tr = connect_declared(net)["c1"]
    cfg = tr.translator.config
    assert (cfg.window, cfg.window_timeout_ns, cfg.grace_reports) == (64, 20_000_000, 10)
    assert net.host("c1").services[SERVICE] is tr.collector  # the collector node's simulated daemon
    # its QPs are bound to the translator's addresses, as enable_translator binds them live
    qp = tr.collector.nic.qp("keywrite")
    assert (qp.peer_mac, qp.peer_ip) == (cfg.mac, cfg.ip) and cfg.ip == bytes([10, 0, 0, 254])


def test_bad_parameters_are_a_scenario_error():
    from netstack.sim.scenario import ScenarioError

    for params, words in (({"src": "c1"}, "src 'c1' is not a host"), ({"collector": "h2"}, "'h2' is not a collector"),
                          ({"redundancy": 0}, "redundancy")):
        with pytest.raises(ScenarioError, match=words):
            _run(**params)


# =========================================================================== the topology file


def test_a_declaration_validates_into_the_switch_daemons_config():
    topo = topology_from_dict(declared_doc(window=512, append_flush_ms=False, track_seqnum=False, cls=3,
                                           ip="10.0.0.200"), "declared")
    got = plugins.port_features(topo)
    assert got == {("sw2", "p-c1"): {"dta": {"role": "translator", "collector": "c1", "options": {
        "window": 512, "append_flush_ms": None, "track_seqnum": False, "cls": 3, "ip": "10.0.0.200"}}}}
    assert json.loads(json.dumps(got[("sw2", "p-c1")])) == got[("sw2", "p-c1")]  # JSON-able: it goes in a file
    [d] = dtopo.declared(topo)
    assert (d.switch, d.port, d.collector, d.link) == ("sw2", "p-c1", "c1", "sw2-c1")
    assert dtopo.declared_for(topo, "c1") == d and dtopo.declared_for(topo, "h1") is None
    assert dtopo.declared(load_topology(None)) == []  # the shipped default declares none
    assert dtopo.attach(object(), "p-c1", got[("sw2", "p-c1")]["dta"]) is None  # the collector's side connects it


WHERE = "links[sw2-c1].features.a.dta"


@pytest.mark.parametrize("dta, path, words", [
    ({"role": "receiver"}, f"{WHERE}.role", "'receiver' is not a role"),
    ({"windw": 5}, f"{WHERE}.windw", "unknown option"),
    ({"collector": "h2"}, f"{WHERE}.collector", "'h2' is not at the other end of sw2-c1 (c1 is)"),
    ({"window": -1}, f"{WHERE}.window", "whole number >= 0"),
    ({"window": 2.5}, f"{WHERE}.window", "whole number >= 0"),
    ({"grace_ms": "1ms"}, f"{WHERE}.grace_ms", "milliseconds"),
    ({"grace_ms": False}, f"{WHERE}.grace_ms", "milliseconds >= 0, got False"),
    ({"nak_window_ms": True}, f"{WHERE}.nak_window_ms", "or false (off)"),
    ({"udp_sport": 70000}, f"{WHERE}.udp_sport", "UDP port"),
    ({"cls": 8}, f"{WHERE}.cls", "traffic class 0..7"),
    ({"track_seqnum": 1}, f"{WHERE}.track_seqnum", "true or false"),
    ({"ip": "10.0.0.300"}, f"{WHERE}.ip", "IPv4 address"),
    ({"ip": "10.0.0.2"}, f"{WHERE}.ip", "a node's address"),
    ({"mac": "zz"}, f"{WHERE}.mac", "MAC address"),
    # what only the options together get wrong: the translator's own checks
    ({"grace_reports": 5, "grace_ms": 1}, WHERE, "grace_reports or grace_ns, not both"),
    ({"window": 64, "window_timeout_ms": 0}, WHERE, "window_timeout_ns > 0"),
    ({"window": 1 << 22}, WHERE, "below 2**22"),
])
def test_a_bad_declaration_is_a_topology_error_naming_the_field(dta, path, words):
    doc = declared_doc(**dta)
    if "role" in dta:
        doc["links"][-1]["features"]["a"]["dta"]["role"] = dta["role"]
    with pytest.raises(TopologyError) as exc:
        plugins.port_features(topology_from_dict(doc, "declared"))
    assert any(p == path and words in problem for p, problem in exc.value.errors), exc.value.errors


def test_the_translator_goes_on_the_switch_end_facing_a_collector():
    doc = declared_doc()
    doc["links"][-1]["features"] = {"b": {"dta": {"role": "translator"}}}  # on c1's end
    with pytest.raises(TopologyError, match=r"features\.b\.dta: c1 is a collector: the translator runs in the "
                                            r"collector's ToR switch"):
        plugins.port_features(topology_from_dict(doc, "declared"))
    doc = tomllib.loads(DEFAULT.read_text())
    doc["links"][1]["features"] = {"a": {"dta": {"role": "translator"}}}  # sw1 = sw2: no collector there
    with pytest.raises(TopologyError, match=r"links\[sw1-sw2\]\.features\.a\.dta: sw2, at the other end of "
                                            r"sw1-sw2, is a switch"):
        plugins.port_features(topology_from_dict(doc, "declared"))
    doc["links"][1]["features"] = {"a": {"dta": "on"}}
    with pytest.raises(TopologyError, match="must be a table, not str"):
        plugins.port_features(topology_from_dict(doc, "declared"))


# =========================================================================== what netstack up does with it


def test_the_collector_daemon_gets_the_declared_translator_in_its_config(tmp_path):
    topo = topology_from_dict(declared_doc(window=256), "declared")
    built = netns.plan(topo, "zz")
    node = topo.node("c1")
    argv = control.node_daemon(topo, built, node, tmp_path, "zz")
    assert argv is not None and argv[-2:] == ["--config", str(tmp_path / "c1.json")]
    cfg = json.loads((tmp_path / "c1.json").read_text())["collector"]
    tr = cfg["translator"]
    assert (tr["switch"], tr["port"], tr["control"]) == ("sw2", "p-c1", str(tmp_path / "sw2.sock"))
    # the options enable_translator would send: the file's, the translator's addresses, the reporters
    assert tr["options"] == {"window": 256, "ip": "10.0.0.254", "reporters": ["10.0.0.1", "10.0.0.2"],
                             "mac": built.mac("sw2", "sw2-c1")}
    control.node_daemon(load_topology(None), netns.plan(load_topology(None), "zz"), node, tmp_path, "zz")
    assert "translator" not in json.loads((tmp_path / "c1.json").read_text())["collector"]  # nothing declared


def test_enable_declared_retries_until_the_switch_answers_then_says_why(tmp_path, monkeypatch):
    from netstack.io import control as ioc

    decl = {"switch": "sw2", "port": "p-c1", "control": str(tmp_path / "sw2.sock"), "options": {"window": 8}}
    calls = []

    def request(path, cmd, timeout=5.0, **args):
        calls.append((path, cmd, args))
        if len(calls) < 3:
            raise FileNotFoundError(path)  # the switch daemon not up yet
        return {"port": args["port"], "replaced": False}

    monkeypatch.setattr(ioc, "request", request)
    assert control.enable_declared(decl, {"regions": []}, timeout_s=5.0) == {"port": "p-c1", "replaced": False}
    assert [c[1] for c in calls] == ["dta_enable"] * 3
    assert calls[-1][2] == {"port": "p-c1", "connect_info": {"regions": []}, "window": 8}

    def refuse(path, cmd, timeout=5.0, **args):
        raise ioc.ControlError("window=8: bad")

    monkeypatch.setattr(ioc, "request", refuse)
    with pytest.raises(control.DTAError, match="sw2 refused the translator the topology declares: window=8: bad"):
        control.enable_declared(decl, {})
    monkeypatch.undo()
    with pytest.raises(control.DTAError, match=r"did not answer .* within 0\.2 s"):
        control.enable_declared(decl, {}, timeout_s=0.2)


def test_a_restarted_switch_gets_its_declared_translator_back(monkeypatch):
    topo = topology_from_dict(declared_doc(window=128), "declared")
    state = runtime.RunState("zz", daemons=[runtime.Daemon(n, k, 0, "", "") for n, k in
                                            (("sw1", "switch"), ("sw2", "switch"), ("c1", "collector"))])
    enabled = []
    monkeypatch.setattr(control, "run_state", lambda prefix: state)
    monkeypatch.setattr(runtime, "topology_of", lambda st: topo)
    monkeypatch.setattr(control, "enable_translator",
                        lambda prefix, switch, collector, **opts: enabled.append((prefix, switch, collector, opts)))
    assert control.after_restart("zz", "sw2") == ["sw2/p-c1:translator"]
    assert enabled == [("zz", "sw2", "c1", {"window": 128})]
    assert control.after_restart("zz", "sw1") == [] and control.after_restart("zz", "c1") == []

    def down(*args, **kw):
        raise control.DTAError("the daemon of c1 does not answer")

    monkeypatch.setattr(control, "enable_translator", down)
    assert control.after_restart("zz", "sw2") == []  # skipped, as LinkGuardian skips a silent peer
