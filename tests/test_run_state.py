"""The run state (netstack/runtime/state.py): one typed record written and read by one function
pair, its JSON shape the same as when it was a plain dict, every part checked on load, and a
file an older netstack wrote either read (format 1) or refused with one line that names the file
and says to run ``netstack down`` (which still stops what the file names). No namespace is made."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from netstack import cli, procstat, runtime
from netstack.runtime import Daemon, RunLink, RunPort, RunState, RuntimeErrorNS, StateFormatError
from netstack.topo import netns
from netstack.topo.model import load_topology

PREFIX = "zzrs"


@pytest.fixture
def run(tmp_path, monkeypatch) -> Path:
    """A run directory of our own, namespace runs only, and no namespace of anyone seen."""
    root = tmp_path / "run"
    root.mkdir()
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(root))
    monkeypatch.setenv("NETSTACK_RUNTIME", "netns")
    monkeypatch.setattr(netns, "running_namespaces", lambda prefix=None: {})
    return root


def _daemons() -> list[Daemon]:
    return [Daemon("sw1", "switch", 4242, "/run/x/sw1.sock", "/run/x/sw1.log", "sw1", "127.0.0.1:9100"),
            Daemon("sw1-sw2", "linkflap", 4243, "", "/run/x/flap.log", "flap-sw1-sw2")]


def _state() -> RunState:
    """The default topology's state as ``up`` makes it, without building anything."""
    topology = load_topology(None)
    return runtime.run_state(topology, netns.plan(topology, PREFIX), PREFIX, _daemons())


def _old_shape(state: RunState) -> dict[str, Any]:
    """The dict ``up`` built and printed before the state was a record (the oracle of to_dict)."""
    topology = load_topology(None)
    built = netns.plan(topology, PREFIX)
    return {
        "prefix": PREFIX, "topology": topology.name, "source": topology.source, "started": state.started,
        "namespaces": built.namespaces,
        "ports": [{"node": p.node, "link": p.link, "netns": p.netns, "ifname": p.ifname, "mac": p.mac,
                   "peer": p.peer_node, "fcs": p.fcs} for p in built.ports.values()],
        "hosts": {n.name: str(n.ip) for n in topology.nodes if n.ip is not None},
        "links": {link.name: {"a": link.a.node, "b": link.b.node, "rate_bps": link.rate_bps,
                              "delay_ns": link.delay_ns, "mtu": link.mtu, "fcs": link.fcs}
                  for link in topology.links},
        "impairments": {f"{n}/{link}": b for (n, link), b in built.impairments.items()},
        "daemons": [{"node": d.node, "kind": d.kind, "pid": d.pid, "control": d.control, "log": d.log, "name": d.name,
                     "metrics": d.metrics, "start_ticks": d.start_ticks} for d in _daemons()],
    }


def _write(run: Path, doc: Any, prefix: str = PREFIX) -> Path:
    (run / prefix).mkdir(exist_ok=True)
    path = run / prefix / "state.json"
    path.write_text(json.dumps(doc, indent=2))
    return path


# --------------------------------------------------------------------------- shape and round trip
def test_to_dict_is_the_old_json_byte_for_byte():
    state = _state()
    assert json.dumps(state.to_dict(), indent=2) == json.dumps(_old_shape(state), indent=2)
    assert isinstance(state.ports[0], RunPort) and isinstance(state.links["sw1-sw2"], RunLink)


def test_round_trip_through_the_file(run):
    state = _state()
    path = runtime.state_path(PREFIX)
    path.parent.mkdir()
    runtime.write_state(path, state)
    doc = json.loads(path.read_text())
    assert next(iter(doc)) == "format" and doc.pop("format") == runtime.STATE_FORMAT
    assert doc == state.to_dict()
    assert runtime.read_state(path) == state == runtime.load_state(PREFIX)
    assert not list(path.parent.glob("*.tmp"))  # written whole, by rename
    again = dataclasses.replace(state, started=state.started + 1)
    runtime.write_state(path, again)
    assert runtime.read_state(path) == again


def test_the_record_is_no_dict_its_dict_is_a_copy():
    """The dict view is gone (issue 29): code reads the attributes; to_dict() is the JSON shape,
    and changing it changes nothing of the record."""
    state = _state()
    assert not isinstance(state, Mapping)
    with pytest.raises(TypeError):
        state["hosts"]  # type: ignore[index]
    with pytest.raises(TypeError):
        iter(state)  # type: ignore[call-overload]
    doc = state.to_dict()
    assert "runtime" not in doc  # (a namespace run's dict never had it)
    doc["ports"][0]["node"] = "changed"
    doc["hosts"]["h1"] = "changed"
    assert state.ports[0].node != "changed" and state.hosts["h1"] != "changed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.prefix = "x"  # type: ignore[misc]


def test_helpers():
    state = _state()
    assert state.host_ip("h1") == "10.0.0.1"
    assert {p.node for p in state.ends_of("sw1-sw2")} == {"sw1", "sw2"} and state.ends_of("nope") == []
    assert {p.ifname for p in state.ports_of("sw1")} == {"p-h1", "p-sw2"}
    assert state.nodes_running("switch") == {"sw1"} and runtime.daemons_of(state) == state.daemons


def test_a_container_deployment_keeps_its_parts_and_its_order():
    doc = {"prefix": "c", "runtime": "compose", "topology": "t", "source": "", "started": 0.0,
           "namespaces": {"h1": "/proc/7/ns/net"}, "containers": {"h1": "c-h1"}, "roots": {"h1": "/proc/7/root"},
           "ports": [], "hosts": {"h1": "10.0.0.1/24"}, "links": {}, "impairments": {},
           "daemons": [{"node": "h1", "kind": "x", "name": "h1", "pid": 7, "control": "", "log": "docker logs c-h1"}],
           "tunnels": {"h1": [{"link": "l", "vni": 1}]}, "starting": ["h2"]}
    state = RunState.from_dict(doc)
    assert (state.runtime, state.containers, state.starting, state.daemons[0].metrics) == ("compose", {"h1": "c-h1"},
                                                                                           ["h2"], "")
    assert list(state.to_dict()) == list(doc)
    assert runtime.host_path(state, "h1", "/x") == "/proc/7/root/x" and runtime.host_path(_state(), "h1", "/x") == "/x"
    with pytest.raises(StateFormatError, match="no 'containers'"):
        RunState.from_dict({k: v for k, v in doc.items() if k != "containers"})


# --------------------------------------------------------------------------- old and bad files
def test_a_format_1_file_is_read_its_daemons_given_the_fields_added_since(run):
    doc = _old_shape(_state())
    doc["daemons"] = [{"node": "sw1", "kind": "switch", "pid": 4242, "control": "/s", "log": "/l"}]
    _write(run, doc)
    state = runtime.load_state(PREFIX)
    assert state.daemons == [Daemon("sw1", "switch", 4242, "/s", "/l")]
    assert state.daemons[0].key == "sw1" and state.daemons[0].metrics == ""


def _without(key: str) -> Any:
    return lambda doc: {k: v for k, v in doc.items() if k != key}


def _set(where: str, value: Any) -> Any:
    def change(doc: dict[str, Any]) -> dict[str, Any]:
        part: Any = doc
        *path, last = where.split(".")
        for step in path:
            part = part[int(step)] if isinstance(part, list) else part[step]
        part[int(last) if isinstance(part, list) else last] = value
        return doc
    return change


@pytest.mark.parametrize(("change", "words"), [
    (_without("links"), "no 'links'"),  # what the first versions wrote
    (_without("prefix"), "no 'prefix'"),
    (_set("ports.0.fcs", "yes"), 'ports[0].fcs: "yes" is not true/false'),
    (_set("daemons.1.pid", "4243"), 'daemons[1].pid: "4243" is not an integer'),
    (_set("daemons.1.pid", True), "daemons[1].pid: true is not an integer"),
    (_set("links.sw1-sw2.rate_bps", None), "links.sw1-sw2.rate_bps: null is not an integer"),
    (_set("started", "now"), 'started: "now" is not a number'),
    (_set("namespaces.h1", 5), "namespaces.h1: 5 is not a string"),
    (_set("ports", {}), "ports: {} is not a list"),
    (_set("format", 3), "format 3, written by another netstack version"),
    (_set("format", "2"), 'format "2"'),
    (lambda doc: [doc], "not an object but list"),
])
def test_a_file_that_is_not_a_state_of_this_version_is_one_clear_error(run, change, words):
    doc = json.loads(json.dumps({"format": runtime.STATE_FORMAT, **_state().to_dict()}))
    path = _write(run, change(doc))
    with pytest.raises(RuntimeErrorNS) as err:
        runtime.load_state(PREFIX)
    message = str(err.value)
    assert message.startswith(f"run state {path}: ") and words in message, message
    assert f"run 'netstack down --prefix {PREFIX}'" in message and "\n" not in message


def test_not_json_and_no_file(run):
    (run / PREFIX).mkdir()
    (run / PREFIX / "state.json").write_text("{")
    with pytest.raises(RuntimeErrorNS, match=r"state\.json: not JSON .*'netstack down --prefix zzrs'"):
        runtime.load_state(PREFIX)
    with pytest.raises(RuntimeErrorNS, match="no topology is running under prefix 'nosuch'"):
        runtime.load_state("nosuch")
    with pytest.raises(FileNotFoundError):
        runtime.read_state(run / "nosuch" / "state.json")


def test_a_command_refuses_an_old_file_in_one_line_ls_lists_it_and_down_stops_its_daemons(run, capsys):
    """The first versions wrote no ``links``: every command that acts on the testbed refuses it
    before it starts, ``ls`` still lists it (read as JSON), and ``down`` stops the daemons it
    names and removes it."""
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        doc = _old_shape(_state())
        del doc["links"]
        doc["daemons"] = [{"node": "sw1", "kind": "switch", "pid": sleeper.pid, "control": "", "log": ""}]
        path = _write(run, doc)
        assert cli.main(["status", "--prefix", PREFIX]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and str(path) in err and "no 'links'" in err
        assert err.endswith(f"run 'netstack down --prefix {PREFIX}' (it stops what the file names) and "
                            "'netstack up' again")
        assert cli.main(["ls", "--json"]) == 0
        [listed] = json.loads(capsys.readouterr().out)
        assert (listed["prefix"], listed["state"], listed["daemons"]) == (PREFIX, "stale", {"alive": 1, "total": 1})
        runtime.down(PREFIX)
        assert not _alive(sleeper) and not (run / PREFIX).exists()
    finally:
        if sleeper.poll() is None:
            os.killpg(sleeper.pid, signal.SIGKILL)
            sleeper.wait()


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    """(down reaps its own children: Popen.wait would not see the signal then)"""
    return Daemon("sw1", "switch", proc.pid, "", "").alive()


def test_down_stops_what_it_can_read_of_a_file_of_any_shape(run):
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        _write(run, {"daemons": [{"node": "sw1", "kind": "switch", "pid": sleeper.pid, "control": "", "log": "",
                                  "colour": "a key of a newer version"}, {"node": "broken"}, "nonsense"]})
        assert [d.pid for d in runtime.state.daemons_in_file(runtime.state_path(PREFIX))] == [sleeper.pid]
        runtime.down(PREFIX)
        assert not _alive(sleeper)
    finally:
        if sleeper.poll() is None:
            os.killpg(sleeper.pid, signal.SIGKILL)
            sleeper.wait()


def test_a_daemons_pid_is_its_process_only_while_the_start_time_agrees(run):
    """A daemon that died long ago left its pid in state.json, and the pid went to another
    process since (pid_max is 32768 here): ``down`` must send that process nothing, ``status``
    must call the daemon dead. The recorded start time tells them apart."""
    from netstack.procstat import process_start
    from netstack.runtime.state import stamped

    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        mine = stamped(Daemon("sw1", "switch", sleeper.pid, "", ""))
        assert mine.start_ticks == process_start(sleeper.pid) > 0 and mine.alive()
        assert stamped(mine) is mine  # a recorded start is kept
        reused = dataclasses.replace(mine, start_ticks=mine.start_ticks - 1)  # the pid's process started later
        assert not reused.alive() and not reused.ours()
        assert Daemon("sw1", "switch", sleeper.pid, "", "").alive()  # unrecorded: the pid at its word
        assert process_start(2 ** 22 + 7) == 0  # above pid_max's default: no such process
        gone = Daemon("sw1", "switch", 2 ** 22 + 7, "", "", start_ticks=mine.start_ticks)
        assert not gone.alive() and gone.ours()  # no other process has it: its group is still its own

        _write(run, {**_old_shape(_state()), "daemons": [dataclasses.asdict(reused)]})
        assert runtime.load_state(PREFIX).daemons == [reused]
        runtime.down(PREFIX)
        assert _alive(sleeper), "down signalled a process that only has a dead daemon's pid"
        _write(run, {**_old_shape(_state()), "daemons": [dataclasses.asdict(mine)]})
        runtime.down(PREFIX)
        assert not _alive(sleeper)  # its own daemon's record: stopped
    finally:
        if sleeper.poll() is None:
            os.killpg(sleeper.pid, signal.SIGKILL)
        sleeper.wait()


def test_down_still_stops_what_a_dead_daemon_left_in_its_process_group(run):
    """A daemon that died and is not reaped yet (a zombie: its pid cannot be anyone else's) is
    not alive, but it is still ours: its process group, where a child of it may live on, gets
    down's signal."""
    from netstack.procstat import process_start

    parent = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!"], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    child = int(parent.stdout.readline())
    child_start = process_start(child)
    try:
        deadline = time.monotonic() + 5
        while procstat.state(parent.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        dead = Daemon("sw1", "switch", parent.pid, "", "", start_ticks=process_start(parent.pid))
        assert dead.ours() and not dead.alive()
        _write(run, {**_old_shape(_state()), "daemons": [dataclasses.asdict(dead)]})
        runtime.down(PREFIX)
        deadline = time.monotonic() + 5
        while procstat.state(child) not in ("", "Z") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert procstat.state(child) in ("", "Z"), "the dead daemon's child outlived down"
    finally:
        if process_start(child) == child_start:  # (still that sleep, not a process that got its pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        parent.wait()
        parent.stdout.close()
