"""Reliable 1Pipe's controller daemon (``daemons/onepipe_controller.py``) and its node kind
(``netstack/onepipe/ctlnode.py``): the config ``netstack up`` writes, clear errors for bad options
and configs, the daemon against fake switches and a real store (no namespaces), then real
bring-ups (``netns``): the SQLite store, and etcd with two replicas, one killed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from daemons import onepipe_controller as daemon
from headers.onepipe import OnePipeOpcode, decode_packet
from netstack import runtime
from netstack.cli import main
from netstack.errors import ConfigError
from netstack.io.control import ControlServer
from netstack.onepipe import ctlnode
from netstack.onepipe.control import controller_nodes, directions
from netstack.onepipe.controller import ControllerParams
from netstack.onepipe.ctlwire import (
    callback_done,
    parse_failure_notice,
    parse_probe,
    parse_register_reply,
    probe,
    register_request,
)
from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.store import SqliteStore
from netstack.onepipe.topology import validate
from netstack.topo import netns
from netstack.topo.model import load_topology, load_topology_spec, loads_topology
from tests.topologies import link, node

ROOT = Path(__file__).resolve().parents[2]
CTL_TOML = node("ctl", "onepipe-controller", "10.0.0.100/24") + link("ctl", "spine1", named=True)


def with_controller() -> Any:
    """The shipped ``onepipe`` topology with its controller node ``ctl`` under the spine."""
    t = load_topology_spec("onepipe")
    if controller_nodes(t):
        return t
    return loads_topology(Path(t.source).read_text() + CTL_TOML, "<onepipe + ctl>")


# --------------------------------------------------------------------------- the node kind


def test_node_daemon_writes_the_config_and_one_daemon_per_replica(tmp_path: Path) -> None:
    t = with_controller()
    specs = ctlnode.node_daemon(t, netns.plan(t, "opcu"), t.node("ctl"), tmp_path, "opcu", {"controller_replicas": 3})
    assert [s.suffix for s in specs] == ["", "r2", "r3"]
    assert [s.argv[s.argv.index("--replica") + 1] for s in specs] == ["ctl-r1", "ctl-r2", "ctl-r3"]
    assert specs[0].argv[:3] == [sys.executable, "-m", "daemons.onepipe_controller"]
    cfg = ctlnode.load_config(tmp_path / "ctl.json")
    assert (cfg.name, cfg.ip, cfg.port, cfg.prefix) == ("ctl", "10.0.0.100", 40100, "opcu")
    assert cfg.switches == {sw: str(tmp_path / f"{sw}.sock") for sw in ("tor1", "tor2", "spine1")}
    assert cfg.store == ctlnode.StoreConfig("sqlite", path=str(tmp_path / "onepipe-store.sqlite3"))
    assert cfg.params == OnePipeParams() and cfg.controller == ctlnode.live_timers(OnePipeParams())
    assert cfg.controller.answer_timeout_ns == 300_000_000  # 100 T_beacon: as long as a switch waits (live)
    assert cfg.hosts["10.0.0.1"] == "h1" and (cfg.election, cfg.lease_ttl_s) == ("controller", 2.0)


def test_replica_defaults_and_bad_options() -> None:
    assert ctlnode.replicas({}) == ("sqlite", 1)
    assert ctlnode.replicas({"store": "etcd"}) == ("etcd", 2)
    assert ctlnode.replicas({"store": "etcd", "controller_replicas": 1}) == ("etcd", 1)
    for bad, said in (({"store": "redis"}, "store must be one of sqlite, etcd"),
                      ({"controller_replicas": 0}, "integer 1-9"), ({"controller_replicas": True}, "integer 1-9")):
        with pytest.raises(ConfigError, match=said):
            ctlnode.replicas(bad)
    t = with_controller()
    with pytest.raises(runtime.RuntimeErrorNS, match="integer 1-9"):
        ctlnode.node_daemon(t, None, t.node("ctl"), Path("/nonexistent"), "opcu", {"controller_replicas": 10})


@pytest.mark.parametrize("mutate,said", [
    (lambda c: c.pop("controller"), "no 'controller' object"),
    (lambda c: c["controller"].update(ip="10.0.0"), "10.0.0"),
    (lambda c: c["controller"].update(port=0), "not a UDP port"),
    (lambda c: c["controller"]["store"].update(backend="redis"), "store.backend must be one of"),
    (lambda c: c["controller"]["store"].update(backend="etcd", endpoints=[]), "store.endpoints"),
    (lambda c: c["controller"]["params"].update(t_beacon_ns=0), "t_beacon_ns"),
    (lambda c: c["controller"].update(lease_ttl_s=-1), "lease_ttl_s"),
])
def test_bad_configs_are_clear_errors(tmp_path: Path, mutate: Any, said: str) -> None:
    t = with_controller()
    good = ctlnode.controller_config(t, t.node("ctl"), tmp_path, "opcu", ctlnode.StoreConfig("sqlite", path="x"))
    data = json.loads(json.dumps(good.to_json()))
    assert ctlnode.parse_config(data) == good
    mutate(data)
    with pytest.raises(ConfigError, match=said):
        ctlnode.parse_config(data)


def test_the_daemon_exits_with_one_line_on_a_bad_config(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"controller": {"name": "ctl"}}')
    r = subprocess.run([sys.executable, "-m", "daemons.onepipe_controller", "--config", str(tmp_path / "bad.json"),
                        "--control", str(tmp_path / "c.sock")], cwd=ROOT, capture_output=True, text=True,
                       timeout=30, check=False)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.strip().startswith("onepipe controller daemon: onepipe-controller: ip is missing"), r.stderr


def test_store_options_need_a_controller_node(capsys: pytest.CaptureFixture[str]) -> None:
    default = load_topology(None)
    with pytest.raises(runtime.RuntimeErrorNS, match=r"option --store needs a node of kind onepipe-controller"):
        runtime.check_options(default, {"store": "etcd"})
    with pytest.raises(runtime.RuntimeErrorNS, match="unknown option 'colour'"):
        runtime.check_options(default, {"colour": "blue"})
    runtime.check_options(with_controller(), {"store": "etcd", "controller_replicas": 3})
    assert main(["up", "--controller-replicas", "2"]) == 2
    err = capsys.readouterr().err
    assert "option --controller-replicas needs a node of kind onepipe-controller" in err and err.count("\n") == 1
    for argv in (["up", "--store", "redis"], ["up", "onepipe", "--controller-replicas", "0"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        assert "Traceback" not in capsys.readouterr().err


def test_a_node_daemon_that_returns_one_argv_still_runs_one_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    """The node-daemon contract before replicas: one argv, the node's own socket name."""
    module = SimpleNamespace(node_daemon=lambda *args: ["prog", "--config", "c.json"])
    monkeypatch.setattr(runtime.protocols, "load", lambda name: module)
    got = runtime._node_daemons("m", None, None, None, Path("."), "p", {})  # type: ignore[arg-type]
    assert got == [runtime.DaemonSpec(["prog", "--config", "c.json"])]
    module.node_daemon = lambda *args: [object()]
    with pytest.raises(runtime.RuntimeErrorNS, match="not an argv, DaemonSpec or Daemon"):
        runtime._node_daemons("m", None, None, None, Path("."), "p", {})  # type: ignore[arg-type]


def test_the_controller_gives_the_spine_no_tier() -> None:
    """Under the spine, ctl would make spine1 a ToR (tier 1) and turn its ports to the ToRs up: the
    controller's own port is an edge port, down, and the rest as without it."""
    dirs = directions(with_controller())
    assert dirs["spine1"] == {"p-tor1": "down", "p-tor2": "down", "p-ctl": "down"}
    plain = validate(load_topology_spec("onepipe"))
    assert {sw: d for sw, d in dirs.items() if sw != "spine1"} == {sw: d for sw, d in plain.items() if sw != "spine1"}


def test_store_ids_map_back_to_process_incarnations() -> None:
    assert daemon._parse_id("10.0.0.1-40101-3") == (("10.0.0.1", 40101), 3)
    assert daemon._parse_id("10.0.0.1-x-3") is None and daemon._parse_id("nonsense") is None


# --------------------------------------------------------------------------- the daemon, fake switches


class FakeSwitch:
    """A switch daemon's 1Pipe controller commands, recorded; ``reports`` is what it found silent."""

    def __init__(self, path: Path, last_commit: int | None) -> None:
        self.reports: list[dict[str, Any]] = []
        self.calls: list[tuple[str, Any, Any]] = []
        self.last_commit = last_commit
        self.server = ControlServer(str(path), {
            "onepipe_reports": self.page, "onepipe_fence": self.fence,
            "onepipe_release": lambda r: self.calls.append(("release", r["input"], r["ban"])) or True,
            "onepipe_admit": lambda r: self.calls.append(("admit", r["input"], None)) or True})

    def page(self, req: dict[str, Any]) -> dict[str, Any]:
        return {"reports": self.reports[req["since"]:], "next": len(self.reports), "dropped": 0}

    def fence(self, req: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("fence", req["input"], None))
        return {"input": req["input"], "known": self.last_commit is not None, "last_commit": self.last_commit}

    def report(self, inp: str, last_commit: int) -> None:
        self.reports.append({"seq": len(self.reports), "input": inp, "port": "p-x", "last_commit": last_commit,
                             "at_ns": time.monotonic_ns(), "cause": "timeout"})


def _udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _until(check: Any, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


class Process:
    """A UDP socket that registers with the controller and answers its failure notices, as a
    process would (a process that does not answer is declared failed itself)."""

    def __init__(self, port: int, answer_probes: bool = False) -> None:
        self.answer_probes = answer_probes
        self.probes = 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.ctl = ("127.0.0.1", port)
        self.name = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.replies: asyncio.Queue[tuple[int, int]] = asyncio.Queue()  # (nonce, incarnation)
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            hdr, payload = decode_packet(await loop.sock_recv(self.sock, 2048))
            if hdr.opcode is OnePipeOpcode.FAILURE_NOTICE and not parse_failure_notice(hdr, payload).replay:
                await loop.sock_sendto(self.sock, callback_done(hdr.psn), self.ctl)
            elif hdr.opcode is OnePipeOpcode.PROBE and self.answer_probes:
                self.probes += 1  # alive (issue 31): echo it
                await loop.sock_sendto(self.sock, probe(*parse_probe(hdr, payload)), self.ctl)
            elif hdr.opcode is OnePipeOpcode.REGISTER and hdr.psn:
                self.replies.put_nowait((hdr.psn, parse_register_reply(hdr, payload).incarnation))

    async def register(self, nonce: int, answer: bool = True) -> int | None:
        await asyncio.get_running_loop().sock_sendto(self.sock, register_request(nonce, 0), self.ctl)
        try:
            got, inc = await asyncio.wait_for(self.replies.get(), 2.0 if answer else 0.2)
        except TimeoutError:
            return None
        assert got == nonce
        return inc

    async def close(self) -> None:
        self.reader.cancel()
        await asyncio.gather(self.reader, return_exceptions=True)
        self.sock.close()


@pytest.mark.asyncio
async def test_the_daemon_registers_records_and_releases_through_the_switches(tmp_path: Path) -> None:
    """Processes register over UDP. One a switch reports silent: its T_f is the switch's last
    commit, recorded, then it is released (banned) at every switch. One that restarts (a new
    nonce): fenced at every switch, T_f the latest commit they froze. A fabric port's report is
    released only at the switch that reported it; a process that never registered, everywhere
    without a ban."""
    switches = {"tor1": FakeSwitch(tmp_path / "tor1.sock", 5_000), "tor2": FakeSwitch(tmp_path / "tor2.sock", None)}
    for sw in switches.values():
        await sw.server.start()
    cfg = ctlnode.ControllerConfig(
        name="ctl", ip="127.0.0.1", port=_udp_port(), params=OnePipeParams(),
        controller=ControllerParams.for_beacon(3_000_000),
        store=ctlnode.StoreConfig("sqlite", path=str(tmp_path / "store.sqlite3")),
        switches={n: str(tmp_path / f"{n}.sock") for n in switches}, prefix="opcu", hosts={"127.0.0.1": "h1"})
    store = SqliteStore(cfg.store.path, replica="ctl-r1")
    shell = daemon.ControllerShell(cfg, store, "ctl-r1")
    lead = asyncio.create_task(shell.lead())
    p, q = Process(cfg.port), Process(cfg.port)
    tor1, tor2 = switches["tor1"], switches["tor2"]
    try:
        await _until(lambda: shell.role == "leader")
        assert await p.register(7) == 1 and await q.register(7) == 1
        assert tor1.calls == tor2.calls == [("admit", p.name, None), ("admit", q.name, None)]
        tor1.report(q.name, 4_000)
        tor2.report("p-spine1", 0)
        tor2.report("127.0.0.1:9", 0)  # a best-effort process: released at once, and not banned
        await _until(lambda: ("release", q.name, True) in tor2.calls and ("release", "p-spine1", False) in tor2.calls
                     and ("release", "127.0.0.1:9", False) in tor1.calls)
        assert not [c for c in tor1.calls + tor2.calls if c[0] == "fence"]  # the reporting switch froze it
        assert not [c for c in tor1.calls if c[1] == "p-spine1"]
        assert await p.register(8, answer=False) is None  # a restart: its old incarnation failed
        await _until(lambda: ("release", p.name, True) in tor2.calls)
        assert ("fence", p.name, None) in tor1.calls and ("fence", p.name, None) in tor2.calls
        failures = {f["proc"]: (f["t_f"], f["released"]) for f in shell.ctl_status({})["view"]["failures"]}
        assert failures == {q.name: (4_000, True), p.name: (5_000, True)}
        stored = {f.proc_id: f.t_f for f in await store.list_failures()}
        assert stored == {f"{q.name.replace(':', '-')}-1": 4_000, f"{p.name.replace(':', '-')}-1": 5_000}
        assert await p.register(8) == 2  # released: it re-joins as a new incarnation
        assert shell.ctl_status({})["shell"]["reports_polled"] == 3
    finally:
        lead.cancel()
        await asyncio.gather(lead, return_exceptions=True)
        await shell.close()
        await store.close()
        for sw in switches.values():
            await sw.server.close()
        await p.close()
        await q.close()


@pytest.mark.asyncio
async def test_the_daemon_probes_a_reported_process_and_admits_it_back_when_it_answers(tmp_path: Path) -> None:
    """Issue 31: a switch reports a live process silent (a loaded host); the daemon PROBEs it over
    UDP, it answers, and the daemon admits it back at every switch: nothing is recorded."""
    switches = {"tor1": FakeSwitch(tmp_path / "tor1.sock", 5_000)}
    await switches["tor1"].server.start()
    cfg = ctlnode.ControllerConfig(
        name="ctl", ip="127.0.0.1", port=_udp_port(), params=OnePipeParams(),
        controller=ControllerParams.for_beacon(3_000_000),
        store=ctlnode.StoreConfig("sqlite", path=str(tmp_path / "store.sqlite3")),
        switches={"tor1": str(tmp_path / "tor1.sock")}, prefix="opcu", hosts={"127.0.0.1": "h1"})
    store = SqliteStore(cfg.store.path, replica="ctl-r1")
    shell = daemon.ControllerShell(cfg, store, "ctl-r1")
    lead = asyncio.create_task(shell.lead())
    p = Process(cfg.port, answer_probes=True)
    tor1 = switches["tor1"]
    try:
        await _until(lambda: shell.role == "leader")
        assert await p.register(7) == 1
        tor1.report(p.name, 4_000)
        await _until(lambda: tor1.calls.count(("admit", p.name, None)) == 2)
        counters = shell.ctl_status({})["counters"]
        assert p.probes == 1 and counters["probes_answered"] == 1 and counters["records_requested"] == 0
        assert shell.ctl_status({})["view"]["failures"] == [] and await store.list_failures() == []
    finally:
        lead.cancel()
        await asyncio.gather(lead, return_exceptions=True)
        await shell.close()
        await store.close()
        await tor1.server.close()
        await p.close()


# --------------------------------------------------------------------------- live (namespaces)

REGISTER = """
import socket, sys
from headers.onepipe import OnePipeOpcode, decode_packet
from netstack.onepipe.ctlwire import callback_done, parse_failure_notice, parse_register_reply, register_request
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(0.5)
for _ in range(20):
    s.sendto(register_request(7, 0), ("10.0.0.100", 40100))
    try:
        data = s.recv(2048)
    except socket.timeout:
        continue
    print(parse_register_reply(*decode_packet(data)).incarnation)
    break
"""


@pytest.fixture
def run_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path / "run"))
    return tmp_path


def _register(state: runtime.RunState, node: str) -> None:
    ip = state.host_ip(node)
    r = subprocess.run(["ip", "netns", "exec", state.namespaces[node], sys.executable, "-c", REGISTER, ip, "40101"],
                       cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    assert r.stdout.strip() == "1", r.stdout + r.stderr


def _processes(st: dict[str, Any]) -> list[str]:
    return [p["addr"] for p in (st.get("view") or {}).get("processes", [])]


def _gone(state: runtime.RunState) -> None:
    assert netns.running_namespaces(state.prefix) == {}
    assert not [d for d in runtime.daemons_of(state) if d.alive()]


@pytest.mark.netns
def test_up_with_the_default_store_runs_a_leader_that_registers_processes(run_root: Path) -> None:
    prefix = "opc" + uuid.uuid4().hex[:6]
    state = runtime.up(with_controller(), prefix, apply_impairments=False)
    try:
        ctl = [d for d in state.daemons if d.node == "ctl"]
        assert [(d.name, d.kind) for d in ctl] == [("ctl", "onepipe-controller")]
        st = runtime.control(prefix, "ctl", "status")
        assert (st["role"], st["replica"], st["store"], st["address"]) == ("leader", "ctl-r1", "sqlite",
                                                                           "10.0.0.100:40100")
        _register(state, "h1")
        assert _processes(runtime.status(prefix)["daemons"]["ctl"]) == ["10.0.0.1:40101"]
    finally:
        runtime.down(prefix)
    _gone(state)


@pytest.mark.netns
def test_etcd_replicas_fail_over_when_the_leader_is_killed(run_root: Path) -> None:
    prefix = "opc" + uuid.uuid4().hex[:6]
    state = runtime.up(with_controller(), prefix, apply_impairments=False, options={"store": "etcd"})
    try:
        kinds = [(d.name, d.kind) for d in state.daemons if d.node == "ctl"]
        assert kinds == [("ctl-etcd-m0", "etcd"), ("ctl-etcd-m1", "etcd"), ("ctl-etcd-m2", "etcd"),
                         ("ctl", "onepipe-controller"), ("ctl-r2", "onepipe-controller")]
        deadline = time.monotonic() + 10
        while True:  # the two replicas race for the lead at start: one wins
            roles = {n: runtime.control(prefix, n, "status")["role"] for n in ("ctl", "ctl-r2")}
            if sorted(roles.values()) == ["leader", "standby"] or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert sorted(roles.values()) == ["leader", "standby"], roles
        leader = next(n for n, r in roles.items() if r == "leader")
        other = next(n for n in roles if n != leader)
        _register(state, "h1")
        _register(state, "h2")
        os.kill(next(d.pid for d in state.daemons if d.name == leader), signal.SIGKILL)
        deadline = time.monotonic() + 8  # the lease (2 s) lapses, the standby wins and restores
        while (st := runtime.control(prefix, other, "status"))["role"] != "leader":
            assert time.monotonic() < deadline, st["role"]
            time.sleep(0.1)
        assert _processes(st) == ["10.0.0.1:40101", "10.0.0.2:40101"] and st["store"] == "etcd"
        assert runtime.status(prefix)["daemons"]["ctl-etcd-m1"]["alive"]
    finally:
        runtime.down(prefix)
    _gone(state)
