"""Pure tests of the live DTA glue: collector layouts, the switch control handlers, the
orchestration helpers, the reporter tool's argument handling, the CLI and the benchmark's
rate search. No namespaces (tests/integration/test_dta_live.py has the real thing)."""

from __future__ import annotations

import argparse
import dataclasses
import random
import re

import pytest

from daemons import collector as cd
from netstack.cli import build_parser
from netstack.dta import CollectorMemory, Reporter, RoceResponder, control, live
from netstack.dta import layout as dl
from netstack.dta import persist as dp
from netstack.io.control import ControlError
from netstack.runtime import Daemon, RunPort, RunState
from netstack.switch import PortConfig, Switch, SwitchConfig

from . import COLLECTOR_IP, COLLECTOR_MAC, REPORTER_IP, REPORTER_MAC

# ------------------------------------------------------------------ collector layout


def test_default_layout_builds_every_store():
    mem = CollectorMemory("c", directory=None, rng=random.Random(1))
    dl.build_memory(mem, dl.resolve_layout(None))
    assert list(mem.regions) == ["keywrite", "append-1", "append-2", "append-4", "append-8", "append-16",
                                 "keyincrement", "sketch-1", "postcard"]
    assert mem.region("keywrite").size == 512 * 1024 and mem.region("keyincrement").size == 512 * 1024
    assert mem.region("postcard").size == 128 * 1024 and mem.region("postcard").layout["hops"] == 5
    assert all(mem.region(f"append-{b}").size == 256 * 1024 for b in (1, 2, 4, 8, 16))
    assert mem.region("append-8").layout["batch"] == 8  # list id = batch size
    assert mem.region("sketch-1").size == 16 * 1024 and mem.region("sketch-1").layout["reporters"] == [1, 2]


def test_layout_overrides_merge_replace_and_remove():
    lay = dl.resolve_layout({"keywrite": {"slots": 1024}, "append": [{"list_id": 9, "entries": 64, "batch": 4}],
                             "sketches": None})
    assert lay["keywrite"]["slots"] == 1024 and lay["keywrite"]["max_redundancy"] == 4
    mem = CollectorMemory("c", directory=None)
    dl.build_memory(mem, lay)
    assert set(mem.regions) == {"keywrite", "append-9", "keyincrement", "postcard"}


@pytest.mark.parametrize("bad, words", [
    ({"nope": 1}, "unknown layout keys"),
    ({"keywrite": 5}, "must be an object"),
    ({"append": {"list_id": 1}}, "list of objects"),
    ([], "JSON object"),
])
def test_bad_layouts_are_refused_with_a_clear_error(bad, words):
    with pytest.raises(dl.LayoutError, match=words):
        dl.resolve_layout(bad)


def test_a_bad_store_names_itself():
    mem = CollectorMemory("c", directory=None)
    with pytest.raises(dl.LayoutError, match="keywrite"):
        dl.build_memory(mem, dl.resolve_layout({"keywrite": {"slots": 1000}}))  # not a power of two


def test_layout_file(tmp_path):
    path = tmp_path / "layout.json"
    path.write_text('{"keyincrement": null}')
    assert dl.load_layout(str(path))["keyincrement"] is None
    path.write_text("{nope")
    with pytest.raises(dl.LayoutError, match="cannot read"):
        dl.load_layout(str(path))


def test_clean_memory_dir_removes_only_region_files(tmp_path):
    (tmp_path / "keywrite.mem").write_bytes(b"x")
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "keep.txt").write_text("mine")
    dp.clean_memory_dir(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


# ------------------------------------------------------------------ switch control handlers


class FakeShell:
    def __init__(self) -> None:
        self.switch = Switch(SwitchConfig("sw2", (PortConfig("p-c1", mac=bytes.fromhex("02000000aa01")),
                                                  PortConfig("p-h1")), {}))
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1


def _info():
    mem = CollectorMemory("c1", directory=None, rng=random.Random(2))
    dl.build_memory(mem, dl.resolve_layout(None))
    nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(3))
    return mem, nic, nic.connect_info()


def test_enable_status_disable_on_a_switch():
    shell = FakeShell()
    h = control.switch_handlers(shell)
    assert set(h) == {"dta_enable", "dta_disable", "dta_status", "dta_postcards"}
    with pytest.raises(ControlError, match="not enabled"):
        h["dta_status"]({})
    assert h["dta_status"]({"quiet": True}) == {"enabled": False}
    _, nic, info = _info()
    out = h["dta_enable"]({"port": "p-c1", "connect_info": info, "append_flush_ms": 2, "grace_ms": 5})
    assert out["translator_mac"] == "02:00:00:00:aa:01" and out["translator_ip"] == "10.0.9.254"
    assert out["config"]["append_flush_ns"] == 2_000_000 and out["config"]["grace_ns"] == 5_000_000
    assert out["config"]["grace_reports"] is None and not out["replaced"] and shell.flushes == 1
    # a report entering p-h1 becomes a RoCEv2 WRITE on p-c1 that the collector executes
    rep = Reporter(REPORTER_MAC, COLLECTOR_MAC, REPORTER_IP, COLLECTOR_IP)
    shell.switch.receive("p-h1", rep.frame(rep.key_write(5, 55, 2)), 1)
    frames = shell.switch.transmit(10**9)
    assert [p for p, _ in frames] == ["p-c1", "p-c1"]
    nic.bind(out["translator_mac"], out["translator_ip"])  # what enable_translator does before dta_enable
    for _, f in frames:
        assert nic.receive(f, 0) == []
    assert nic.counters()["qps"]["keywrite"]["writes"] == 2
    st = h["dta_status"]({})
    assert st["enabled"] and st["counters"]["keywrite"] == 1 and st["port"] == "p-c1"
    again = h["dta_enable"]({"port": "p-c1", "connect_info": info, "mac": "02:00:00:00:bb:02", "nak_window_ms": None,
                             "nak_window_slack": 7})
    assert again["replaced"] and again["translator_mac"] == "02:00:00:00:bb:02"
    assert again["config"]["nak_window_ns"] is None and again["config"]["nak_window_slack"] == 7
    off = h["dta_disable"]({})
    assert off["was_enabled"] and off["counters"]["reports"] == 0
    assert h["dta_disable"]({}) == {"enabled": False, "was_enabled": False}


@pytest.mark.parametrize("req, words", [
    ({"port": "p-x"}, "no port"),
    ({"port": "p-c1"}, "connect_info"),
    ({"port": "p-c1", "grace_ms": -1}, "non-negative"),
    ({"port": "p-c1", "cls": 9}, "traffic class"),
    ({"port": "p-c1", "ip": "not-an-ip"}, "cannot enable"),
    ({"port": "p-c1", "max_redundancy": 0}, "cannot enable"),
    ({"port": "p-c1", "mac": 5}, "MAC address string"),
    ({"port": "p-c1", "mac": "zz"}, "cannot enable"),
    ({"port": "p-c1", "nak_window_ms": -1}, "non-negative"),
    ({"port": "p-c1", "nak_window_ms": 0}, "cannot enable"),
    ({"port": "p-c1", "nak_window_slack": -1}, "cannot enable"),
])
def test_bad_enable_requests_get_a_clear_error(req, words):
    h = control.switch_handlers(FakeShell())
    if "connect_info" not in req and req.get("port") == "p-c1" and words != "connect_info":
        req = {**req, "connect_info": _info()[2]}
    with pytest.raises(ControlError, match=words):
        h["dta_enable"](req)


# ------------------------------------------------------------------ orchestration helpers

def _port(node: str, peer: str, ifname: str) -> RunPort:
    return RunPort(node, "-".join(sorted((node, peer))), f"ns-{node}", ifname, "", peer, False)


STATE = RunState(
    "ns", hosts={"h1": "10.0.0.1/24", "h2": "10.0.0.2/24", "c1": "10.0.0.100/24"},
    daemons=[Daemon("sw1", "switch", 0, "", ""), Daemon("sw2", "switch", 0, "", ""),
             Daemon("c1", "collector", 0, "", "")],
    ports=[_port("sw2", "c1", "p-c1"), _port("c1", "sw2", "eth0"), _port("sw1", "h1", "p-h1"),
           _port("h1", "sw1", "eth0")],
)


def test_topology_helpers():
    assert control.collector_tor(STATE, "c1") == "sw2"
    assert control.collector_port(STATE, "sw2", "c1") == "p-c1"
    with pytest.raises(control.DTAError, match="--switch sw2"):
        control.collector_port(STATE, "sw1", "c1")
    assert control.collector_ip(STATE, "c1") == "10.0.0.100"
    assert control.translator_ip(STATE.hosts, "c1") == "10.0.0.254"
    assert control.translator_ip({**STATE.hosts, "x": "10.0.0.254/24"}, "c1") == "10.0.0.253"
    assert control.default_translator_ip("10.1.2.254") == "10.1.2.253"
    with pytest.raises(control.DTAError, match="no collector daemon"):
        control.check_collector(STATE, "h1")
    with pytest.raises(control.DTAError, match="not a switch"):
        control.check_switch(STATE, "c1")


def test_enable_translator_binds_the_collector_before_enabling(monkeypatch):
    """The control exchange (the stand-in for RDMA_CM): connect_info, then bind (the collector's
    QPs learn their peer: the translator's IP, MAC and QPNs), then dta_enable with the same
    addresses."""
    state = dataclasses.replace(STATE, ports=[dataclasses.replace(p, mac="02:00:00:00:aa:01")
                                              if (p.node, p.ifname) == ("sw2", "p-c1") else p for p in STATE.ports])
    info = _info()[2]
    calls = []

    def fake_control(prefix, node, cmd, **args):
        calls.append((node, cmd, args))
        return {"connect_info": info, "bind": {"bound": ["keywrite"]}}.get(cmd, {"port": args.get("port")})

    monkeypatch.setattr(control, "run_state", lambda prefix: state)
    monkeypatch.setattr(control, "_control", fake_control)
    out = control.enable_translator("ns", "sw2", "c1")
    assert [(n, c) for n, c, _ in calls] == [("c1", "connect_info"), ("c1", "bind"), ("sw2", "dta_enable")]
    bind, enable = calls[1][2], calls[2][2]
    assert bind == {"ip": "10.0.0.254", "mac": "02:00:00:00:aa:01",
                    "qps": {r["name"]: r["peer_qpn"] for r in info["regions"]}}
    assert (enable["ip"], enable["mac"], enable["port"]) == ("10.0.0.254", "02:00:00:00:aa:01", "p-c1")
    assert out["bound"] == ["keywrite"]
    no_mac = dataclasses.replace(state, ports=[dataclasses.replace(p, mac="") for p in state.ports])
    from headers.inet import mac_str
    from netstack.switch.config import derived_mac

    assert control.port_mac(no_mac, "sw2", "p-c1") == mac_str(derived_mac("sw2", "p-c1"))


class _FakePort:
    ifname = "eth0"


def test_collector_bind_command():
    mem, nic, info = _info()
    shell = cd.CollectorShell({"mac": "", "ip": ""}, mem, nic, _FakePort(), {}, cd.PortGuard())
    bind = shell.handlers()["bind"]
    out = bind({"ip": "10.0.9.254", "mac": "02:00:00:00:aa:01", "qps": {"keywrite": 77}})
    assert out == {"bound": ["keywrite"], "ip": "10.0.9.254", "mac": "02:00:00:00:aa:01"}
    peers = {name: q["peer"] for name, q in nic.counters()["qps"].items()}
    assert peers["keywrite"] == {"mac": "02:00:00:00:aa:01", "ip": "10.0.9.254", "qpn": 77}
    assert peers["append-4"] is None  # not named: still unbound
    assert len(bind({"ip": "10.0.9.254", "mac": "02:00:00:00:aa:01"})["bound"]) == len(info["regions"])
    for bad, words in (({"mac": "02:00:00:00:aa:01"}, "ip and mac"),
                       ({"ip": "10.0.9.254", "mac": "02:00:00:00:aa:01", "qps": []}, "qps must be"),
                       ({"ip": "10.0.9.254", "mac": "02:00:00:00:aa:01", "qps": {"nope": 1}}, "no QP"),
                       ({"ip": "10.0.9.254", "mac": "02:00:00:00:aa:01", "qps": {"keywrite": 1 << 24}}, "24-bit"),
                       ({"ip": "10.0.9", "mac": "02:00:00:00:aa:01"}, "cannot bind"),
                       ({"ip": "10.0.9.254", "mac": "zz"}, "cannot bind")):
        with pytest.raises(ControlError, match=words):
            bind(bad)
    kw = nic.qp("keywrite")  # a refused bind changes nothing
    assert (kw.peer_qpn, kw.peer_ip, kw.peer_mac) == (77, bytes([10, 0, 9, 254]), bytes.fromhex("02000000aa01"))


def test_region_layout_lookup():
    info = _info()[2]
    assert control.region_layout(info, "append", list_id=16)["batch"] == 16
    assert control.region_layout(info, "append", list_id=3) is None
    assert control.region_layout(info, "sketch", sketch_id=1)["columns"] == 256


def _fake_testbed(monkeypatch, tr_counters=None, collector_ip="10.0.0.100"):
    """A running testbed as ``netstack dta report`` sees it: run state, the translator's
    ``dta_status`` and the collector's ``connect_info`` (no namespace, no daemon)."""
    state = dataclasses.replace(STATE, namespaces={"h1": "ns-h1", "h2": "ns-h2", "c1": "ns-c1"})
    st = {"enabled": True, "collector_ip": collector_ip, "counters": tr_counters or {}}
    replies = {"dta_status": st, "connect_info": _info()[2]}
    monkeypatch.setattr(control, "run_state", lambda prefix: state)
    monkeypatch.setattr(control, "_control", lambda prefix, node, cmd, **args: replies[cmd])


def _cli_options(*argv: str) -> dict:
    """``netstack dta report ...``'s parsed options, as the command hands them to plan_report."""
    return vars(build_parser().parse_args(["dta", "report", *argv]))


def test_plan_report_builds_the_tool_argv_from_the_parsed_options(monkeypatch):
    _fake_testbed(monkeypatch)
    plan = control.plan_report("ns", "keywrite", _cli_options("keywrite", "42", "7", "--count", "10",
                                                              "--rate", "100"))
    assert (plan.src, plan.switch, plan.collector, plan.dst, plan.expect_s) == ("h1", "sw2", "c1", "10.0.0.100", 0.1)
    assert plan.argv[:4] == ["ip", "netns", "exec", "ns-h1"]  # in the reporter's namespace
    assert plan.argv[5:] == ["-m", "netstack.dta.live", "report", "keywrite", "--dst", "10.0.0.100", "--rate",
                             "100.0", "--key", "42", "--value", "7", "--redundancy", "2", "--count", "10"]
    inc = control.plan_report("ns", "increment", _cli_options("increment", "7", "--from", "h2"))
    assert inc.src == "h2" and inc.expect_s is None and inc.argv[-8:] == [
        "--by", "1", "--keys", "1", "--redundancy", "4", "--count", "1"]  # N: the store's maximum


def test_plan_report_takes_the_next_sketch_epoch_from_the_translator(monkeypatch):
    # reporter 1 is expected at column 300 of a 256-column sketch: mid-epoch 1, so it sends epoch 2
    _fake_testbed(monkeypatch, {"sketches": {"1": {"expected": {"1": 300, "2": 256}}}})
    argv = control.plan_report("ns", "sketch", _cli_options("sketch", "--random", "10")).argv
    assert argv[argv.index("--epoch") + 1] == "2"
    argv = control.plan_report("ns", "sketch", _cli_options("sketch", "--random", "10", "--reporter-id", "2")).argv
    assert argv[argv.index("--epoch") + 1] == "1"
    assert control.next_sketch_epoch({"counters": {}}, 1, 1, 256) == 0  # nothing sent yet
    argv = control.plan_report("ns", "sketch", _cli_options("sketch", "--items", "1:3", "--epoch", "5")).argv
    assert argv[argv.index("--epoch") + 1] == "5" and argv[-2:] == ["--items", "1:3"]


@pytest.mark.parametrize("argv, words", [
    (["keywrite", "1", "2", "--from", "c1"], "--from 'c1': not a host of this topology (hosts: h1, h2)"),
    (["keywrite", "1", "2", "--from", "h9"], "not a host"),
    (["append", "3", "1"], "collector c1 has no Append list 3 (lists: [1, 2, 4, 8, 16])"),
    (["sketch", "--sketch-id", "9", "--random", "1"], "collector c1 has no sketch 9"),
    (["sketch", "--reporter-id", "3", "--random", "1"], "sketch 1 merges reporters [1, 2], not 3 (--reporter-id)"),
    (["sketch"], "give the sketch's content"),
])
def test_plan_report_refuses_what_the_testbed_cannot_take(monkeypatch, argv, words):
    _fake_testbed(monkeypatch)
    with pytest.raises(control.DTAError, match=re.escape(words)):
        control.plan_report("ns", argv[0], _cli_options(*argv))


def test_plan_report_refuses_a_translator_serving_another_collector(monkeypatch):
    _fake_testbed(monkeypatch, collector_ip="10.0.0.99")
    with pytest.raises(control.DTAError, match=r"serves 10\.0\.0\.99, not c1 .* netstack dta enable --collector c1"):
        control.plan_report("ns", "keywrite", _cli_options("keywrite", "1", "2"))


# ------------------------------------------------------------------ reporter tool


def _report_args(*argv: str) -> argparse.Namespace:
    return live.report_parser().parse_args(["--dst", "10.0.0.100", *argv])


def test_report_arguments():
    assert live.check_report_args(_report_args("keywrite", "--count", "3")) is None
    assert "count" in live.check_report_args(_report_args("append", "--count", "0"))
    assert "redundancy" in live.check_report_args(_report_args("increment", "--redundancy", "0"))
    assert "content" in live.check_report_args(_report_args("sketch"))
    assert live.check_report_args(_report_args("sketch", "--items", "1:3,2")) is None


def test_payloads_and_sketch_content():
    from headers.dta import KeyIncrement, KeyWrite, decode_report

    ps = live._payloads(_report_args("keywrite", "--key", "10", "--value", "7", "--count", "3"), Reporter())
    prims = [decode_report(p)[1] for p in ps]
    assert [(p.key, p.data) for p in prims] == [(10, (7,)), (11, (8,)), (12, (9,))]
    assert all(isinstance(p, KeyWrite) and p.redundancy == 2 for p in prims)
    ps = live._payloads(_report_args("increment", "--key", "5", "--keys", "2", "--count", "4", "--by", "3"),
                        Reporter())
    prims = [decode_report(p)[1] for p in ps]
    assert [p.key for p in prims] == [5, 6, 5, 6] and all(isinstance(p, KeyIncrement) and p.counter == 3
                                                          for p in prims)
    assert live.parse_items("1:3, 2,1") == {1: 4, 2: 1}
    with pytest.raises(ValueError, match="KEY"):
        live.parse_items("x")
    cms = live.build_sketch(_report_args("sketch", "--rows", "2", "--columns", "8", "--items", "5:4"))
    assert cms.estimate(5) == 4 and sum(cms.matrix[0]) == 4
    assert live.sketch_items(1, 5, 10) == live.sketch_items(1, 5, 10)


# ------------------------------------------------------------------ CLI


def test_cli_parses_the_dta_commands():
    p = build_parser()
    a = p.parse_args(["dta", "report", "keywrite", "42", "7", "--from", "h2", "--rate", "100", "--count", "5"])
    assert (a.kind, a.key, a.value, a.src, a.rate, a.count) == ("keywrite", 42, 7, "h2", 100.0, 5)
    a = p.parse_args(["dta", "query", "keywrite", "0x10", "--consensus", "2"])
    assert (a.what, a.key, a.consensus) == ("keywrite", 16, 2)
    a = p.parse_args(["dta", "query", "sketch", "1", "17", "--epoch", "3"])
    assert (a.sketch_id, a.key, a.epoch) == (1, 17, 3)
    a = p.parse_args(["dta", "enable", "--no-append-flush", "--grace", "50"])
    assert a.no_append_flush and a.grace == 50
    with pytest.raises(SystemExit):
        p.parse_args(["dta", "report", "keywrite", "-1", "7"])
    with pytest.raises(SystemExit):
        p.parse_args(["dta", "enable", "--grace", "5", "--grace-ms", "1"])


# ------------------------------------------------------------------ benchmark rate search


def _fake_path(capacity: float, reporter_max: float):
    calls: list[float] = []

    def measure(rate: float) -> dict:
        offered = reporter_max if rate == 0 else rate
        ingested = min(offered, capacity)
        calls.append(rate)
        return {"offered_per_s": offered, "ingested_per_s": ingested, "loss": 1 - ingested / offered}

    return measure, calls


def test_rate_search_goes_up_from_a_pessimistic_overload_run():
    from netstack.bench.dta import find_rate

    measure, _ = _fake_path(10_000, 100_000)
    first = measure(0)
    first["ingested_per_s"] = 5_000  # overload run came out low (receive livelock)
    out = find_rate(lambda r: first if r == 0 else measure(r), 1.0)
    best = out["sustained"]
    assert best is not None and 8_000 < best["offered_per_s"] <= 10_000 and not out["reporter_bound"]


def test_rate_search_steps_down_and_detects_reporter_bound_paths():
    from netstack.bench.dta import find_rate, keeps_up

    measure, _ = _fake_path(10_000, 100_000)
    over = {"offered_per_s": 100_000, "ingested_per_s": 20_000, "loss": 0.9}
    out = find_rate(lambda r: over if r == 0 else measure(r), 1.0)
    assert out["sustained"]["offered_per_s"] <= 10_000 and keeps_up(out["sustained"])
    measure, _ = _fake_path(10**9, 50_000)
    out = find_rate(measure, 1.0)
    assert out["reporter_bound"] and out["sustained"]["ingested_per_s"] == 50_000
    assert not keeps_up({"offered_per_s": 100, "ingested_per_s": 80, "loss": 0.0})  # a backlog, not keeping up


def test_port_guard_falls_back_to_a_drained_udp_socket(monkeypatch):
    import asyncio
    import socket

    def no_nft(*args, **kwargs):
        raise FileNotFoundError("nft")

    monkeypatch.setattr(cd.subprocess, "run", no_nft)
    loop = asyncio.new_event_loop()
    guard = cd.PortGuard()
    try:
        try:
            assert guard.install(loop, "127.0.0.1") == "socket"
        except OSError as exc:  # UDP 4791 taken on this machine's loopback
            pytest.skip(f"cannot bind 127.0.0.1:4791: {exc}")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"roce?", ("127.0.0.1", cd.ROCE_PORT))
        loop.run_until_complete(asyncio.sleep(0.05))
        assert guard.drained == 1
    finally:
        guard.remove(loop)
        loop.close()
    assert guard.kind == "none"


def test_rate_search_stops_when_the_reporter_cannot_deliver():
    from netstack.bench.dta import find_rate

    def measure(rate: float) -> dict:
        offered = 50_000 if rate == 0 else min(rate, 50_000)
        ingested = offered * 0.99 if rate else offered * 0.97
        return {"offered_per_s": offered, "ingested_per_s": ingested, "loss": 0.0 if rate else 0.03}

    out = find_rate(measure, 1.0)
    assert out["reporter_bound"] and out["sustained"]["offered_per_s"] == 50_000
    assert len(out["runs"]) <= 3
