"""TCD's control plug-in against a real switch behind a fake daemon shell, ``netstack status``'s
report, the ``tcd`` topology feature (derivation from the peer's PFC thresholds, errors naming
the field), and the CLI's status table."""

from __future__ import annotations

import json
import logging

import pytest

from headers.pfc import pause_frame, resume_frame
from headers.tcd import Ecn, PortState
from netstack import protocols
from netstack.commands.tcd import status_rows
from netstack.io.control import ControlError
from netstack.switch import plugins
from netstack.tcd import control
from netstack.tcd.marker import EcnMarker, TcdMarker
from netstack.topo.model import TopologyError, topology_from_dict
from tests.switch import GBPS, class_tos, mac, make_switch, udp_frame


class FakeShell:
    """What a switch daemon's ``SwitchShell`` gives the control plug-ins."""

    log = logging.getLogger("test-tcd")

    def __init__(self, switch) -> None:
        self.switch = switch
        self.flushes = 0

    def port_of(self, req):
        name = req.get("port")
        if name not in {p.name for p in self.switch.ports}:
            raise ControlError(f"no port {name!r}")
        return name

    def flush(self, now=None):
        self.flushes += 1


@pytest.fixture
def clock(monkeypatch):
    now = [0]
    monkeypatch.setattr(control, "_clock", lambda: now[0])
    return now


@pytest.fixture
def shell():
    sw = make_switch(2, p1={"rate_bps": GBPS, "delay_ns": 4_000, "lossless": True, "xoff_bytes": 20_000,
                            "xon_bytes": 10_000})
    return FakeShell(sw)


def test_registered_as_a_protocol():
    assert "netstack.tcd.control" in protocols.control_modules()
    assert protocols.features()["tcd"] == "netstack.tcd.topology"
    assert "netstack.tcd.scenarios" in protocols.scenario_modules()


def test_enable_status_disable(shell, clock):
    h = control.switch_handlers(shell)
    assert control.switch_status(shell) is None
    out = h["tcd_enable"]({"cmd": "tcd_enable", "port": "p1", "classes": [0]})
    p = out["params"]
    # symmetric PFC: the port's own 20000/10000; 10000 B*8/(1G-0.9G) = 800 us; MTU at 1G = 12 us
    assert p["t_on_max_ns"] == 800_000 + 2 * (4_000 + 12_000)
    assert p["k_bytes"] == 1_000 + 10_000  # BDP 1G x 8 us = 1000 B, + the band
    assert isinstance(shell.switch.ports[1].marker, TcdMarker) and shell.flushes == 1
    sw = shell.switch
    sw.receive("p1", pause_frame(mac(0x99), [0]), 10)
    sw.receive("p0", udp_frame(size=500, tos=class_tos(0, Ecn.ECT_0)), 20)
    clock[0] = 5_000_000
    rep = control.switch_status(shell)
    port = rep["ports"]["p1"]
    assert port["marker"] == "tcd" and port["state"] == "undetermined"
    c = port["counters"]
    assert c["state"] == int(PortState.UNDETERMINED) and c["t_undet_ms"] == 4 and c["t_noncon_ms"] == 0
    assert all(isinstance(v, int) for v in c.values())
    json.dumps(rep)
    st = h["tcd_status"]({"port": "p1", "timeline": True})
    assert st["ports"]["p1"]["timeline"]["0"] == [(0, 0), (10, 1)]
    assert h["tcd_status"]({})["ports"].keys() == {"p1"}
    with pytest.raises(ControlError, match="no TCD"):
        h["tcd_status"]({"port": "p0"})
    assert st["ports"]["p1"]["flows"] == {}  # (marks per flow: none yet, the frame is still paused)
    # the daemon installs the marker's idle timer too (issue 30): resumed, the port sends its one
    # frame (UE) and then has nothing to send; the switch is asked to wake it T_on^max later
    sw.receive("p1", resume_frame(mac(0x99), [0]), 6_000_000)
    sw.transmit(7_000_000)
    assert h["tcd_status"]({"port": "p1"})["ports"]["p1"]["flows"] == {"10.0.0.1>10.0.0.2": {"ce": 0, "ue": 1}}
    assert sw.next_deadline() == 6_000_000 + p["t_on_max_ns"] + 1
    gone = h["tcd_disable"]({"port": "p1"})
    assert gone["marker"] == "tcd" and shell.switch.ports[1].marker is None
    assert sw.next_deadline() is None  # the timer went with the marker
    assert h["tcd_disable"]({"port": "p1"}) == {"port": "p1", "marker": None}
    assert control.switch_status(shell) is None


def test_enable_ecn_and_overrides(shell, clock):
    h = control.switch_handlers(shell)
    out = h["tcd_enable"]({"port": "p1", "marker": "ecn", "ecn_k_bytes": 30_000})
    assert out["marker"] == "ecn" and out["params"]["k_bytes"] == 30_000
    assert isinstance(shell.switch.ports[1].marker, EcnMarker)
    assert control.switch_status(shell)["ports"]["p1"]["marker"] == "ecn"
    out = h["tcd_enable"]({"port": "p1", "t_on_max_ns": 50_000_000, "k_bytes": 40_000, "xoff_bytes": 30_000,
                           "xon_bytes": 29_000})
    assert (out["params"]["t_on_max_ns"], out["params"]["k_bytes"]) == (50_000_000, 40_000)
    assert out["params"]["derived"]["inputs"]["xoff_bytes"] == 30_000


@pytest.mark.parametrize(("req", "words"), [
    ({"port": "p9"}, "no port"),
    ({"port": "p1", "marker": "red"}, "marker"),
    ({"port": "p1", "xon_bytes": 30_000, "xoff_bytes": 20_000}, "xon_bytes"),
    ({"port": "p1", "k_bytes": 0}, "k_bytes"),
    ({"port": "p1", "r_min_fraction": 1.5}, "r_min_fraction"),
    ({"port": "p1", "t_on_max_ns": "50ms"}, "t_on_max_ns"),
    ({"port": "p1", "bogus": 1}, "bogus"),
    ({"port": "p0"}, "rate_bps"),  # unpaced: no T_on^max
])
def test_bad_requests_are_refused_clearly(shell, clock, req, words):
    with pytest.raises(ControlError, match=words):
        control.switch_handlers(shell)["tcd_enable"](req)
    assert shell.switch.ports[1].marker is None


# ------------------------------------------------------------------------------ topology feature
def topo(a_tcd=None, b_tcd=None, a_switch=None, b_switch=None, host_tcd=None):
    nodes = [{"name": "h1", "kind": "host", "ip": "10.0.0.1/24"}, {"name": "h2", "kind": "host", "ip": "10.0.0.2/24"},
             {"name": "sw1", "kind": "switch"}, {"name": "sw2", "kind": "switch"}]
    mid = {"name": "sw1-sw2", "a": "sw1", "b": "sw2", "rate": "40Gbit", "delay": "4us", "features": {"a": {}, "b": {}}}
    for side, sw_, tcd in (("a", a_switch, a_tcd), ("b", b_switch, b_tcd)):
        if sw_ is not None:
            mid["features"][side]["switch"] = sw_
        if tcd is not None:
            mid["features"][side]["tcd"] = tcd
    edge = {"name": "h1-sw1", "a": "h1", "b": "sw1"}
    if host_tcd is not None:
        edge["features"] = {"a": {"tcd": host_tcd}}
    links = [edge, mid, {"name": "sw2-h2", "a": "sw2", "b": "h2"}]
    return topology_from_dict({"topology": {"name": "t", "prefix": "t"}, "nodes": nodes, "links": links})


LOSSLESS = {"lossless": True, "xoff": "320KB", "xon": "300KB"}


def test_feature_derives_from_the_peers_thresholds():
    t = topo(a_tcd={"classes": [0]}, a_switch={"lossless": True, "xoff": "100KB", "xon": "50KB"}, b_switch=LOSSLESS)
    feats = plugins.port_features(t)
    a = t.link("sw1-sw2").a
    opts = feats[(a.node, a.ifname)]["tcd"]
    assert opts["pfc"] == {"source": "peer", "xoff_bytes": 320_000, "xon_bytes": 300_000}
    assert opts["params"]["t_on_max_ns"] == 48_600 and opts["params"]["k_bytes"] == 60_000
    json.dumps(opts)
    sw = make_switch(1, p0={"rate_bps": 40 * GBPS})
    marker = plugins.attach(sw, {"p0": {"tcd": opts}}, 7)
    assert marker == ["p0:tcd"] and isinstance(sw.ports[0].marker, TcdMarker)
    assert sw.ports[0].marker.detectors[0].created == 7


def test_feature_falls_back_to_own_thresholds_then_to_none():
    t = topo(a_tcd={}, a_switch=LOSSLESS)
    a = t.link("sw1-sw2").a
    assert plugins.port_features(t)[(a.node, a.ifname)]["tcd"]["pfc"]["source"] == "own"
    t = topo(b_tcd={"marker": "ecn", "ecn_k": "200KB"})
    b = t.link("sw1-sw2").b
    opts = plugins.port_features(t)[(b.node, b.ifname)]["tcd"]
    assert opts["pfc"]["source"] == "none" and opts["ecn"]["k_bytes"] == 200_000
    assert opts["params"]["t_on_max_ns"] == 2 * 4_000 + 300
    assert "never paused" in opts["params"]["derived"]["t_on_max_ns"]


@pytest.mark.parametrize(("kw", "path", "words"), [
    ({"a_tcd": {}, "b_switch": {"lossless": True, "xoff": "300KB", "xon": "320KB"}},
     "links[sw1-sw2].features.b.switch.xon", "below xoff"),
    ({"a_tcd": {"k": "0"}}, "links[sw1-sw2].features.a.tcd.k", "size"),
    ({"a_tcd": {"k": 0}}, "links[sw1-sw2].features.a.tcd.k", "> 0"),
    ({"a_tcd": {"t_on_max": "soon"}}, "links[sw1-sw2].features.a.tcd.t_on_max", "delay"),
    ({"a_tcd": {"r_min": 2}}, "links[sw1-sw2].features.a.tcd.r_min", "(0, 1)"),
    ({"a_tcd": {"marker": "dctcp"}}, "links[sw1-sw2].features.a.tcd.marker", "marker"),
    ({"a_tcd": {"colour": 1}}, "links[sw1-sw2].features.a.tcd.colour", "unknown"),
    ({"a_tcd": {"classes": [9]}}, "links[sw1-sw2].features.a.tcd.classes", "0-7"),
    ({"a_tcd": {"marker": "ecn", "ecn_pmax": 0}}, "links[sw1-sw2].features.a.tcd.ecn_pmax", "(0, 1]"),
    ({"a_tcd": "on"}, "links[sw1-sw2].features.a.tcd", "table"),
    ({"host_tcd": {}}, "links[h1-sw1].features.a.tcd", "host"),
])
def test_feature_errors_name_the_field(kw, path, words):
    with pytest.raises(TopologyError) as exc:
        plugins.port_features(topo(**kw))
    assert [p for p, _ in exc.value.errors] == [path]
    assert words in exc.value.errors[0][1]


# ------------------------------------------------------------------------------------- the CLI
def test_status_rows():
    out = {"sw1": {"ports": {"p1": {"summary": {"marker": "tcd", "state": "congestion",
                                                "counters": {"t_noncon_ms": 1, "t_undet_ms": 2, "t_cong_ms": 3,
                                                             "marked_ue": 4, "marked_ce": 5, "ecn_would_mark": 6}}}}},
           "sw2": {"error": "gone"}}
    assert status_rows(out) == [["sw1", "p1", "tcd", "congestion", 1, 2, 3, 4, 5, 6],
                                ["sw2", "-", "error", "gone", "", "", "", "", "", ""]]


def test_cli_enable_and_status_over_a_run_state(tmp_path, monkeypatch, capsys):
    """``netstack tcd`` end to end but for the socket: the run state names the switches, the
    topology gives the peer's thresholds, the daemon's answers are canned."""
    from netstack import runtime
    from netstack.cli import main

    t = topo(b_switch=LOSSLESS)
    a = t.link("sw1-sw2").a
    state = runtime.RunState("p", topology="t", daemons=[runtime.Daemon("sw1", "switch", 1, "x", "")],
                             ports=[runtime.RunPort("sw1", "sw1-sw2", "p-sw1", a.ifname, "", "sw2", False)])
    monkeypatch.setattr(runtime, "load_state", lambda prefix: state)
    monkeypatch.setattr(runtime, "topology_of", lambda st: t)
    calls = []

    def fake_control(prefix, node, cmd, **args):
        calls.append((node, cmd, args))
        if cmd == "tcd_status":
            return {"ports": {a.ifname: {"summary": {"marker": "tcd", "state": "undetermined",
                                                     "counters": {"t_undet_ms": 5, "marked_ue": 9}}}}}
        return {"port": args["port"], "marker": "tcd", "params": {"t_on_max_ns": 1, "k_bytes": 40_000,
                                                                  "window_ns": 1, "derived": {}}}

    monkeypatch.setattr(runtime, "control", fake_control)
    assert main(["tcd", "enable", "sw1", a.ifname, "--k", "40KB", "--prefix", "p"]) == 0
    assert calls[-1] == ("sw1", "tcd_enable", {"port": a.ifname, "marker": "tcd", "k_bytes": 40_000,
                                               "xoff_bytes": 320_000, "xon_bytes": 300_000})
    assert "K 40000 B" in capsys.readouterr().out
    assert main(["tcd", "status", "--prefix", "p"]) == 0
    out = capsys.readouterr().out
    assert "undetermined" in out and "marked_ue" in out
    assert main(["tcd", "enable", "h1", "eth0", "--prefix", "p"]) == 2
    assert "not a switch" in capsys.readouterr().err
    assert main(["tcd", "enable", "sw1", "nope", "--prefix", "p"]) == 2
    assert "no port" in capsys.readouterr().err
