"""``netstack onepipe``: help, and clear one-line errors for bad arguments (no testbed needed)."""

from __future__ import annotations

import json
import signal
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from netstack.cli import main


def test_help_lists_the_actions(capsys):
    with pytest.raises(SystemExit) as e:
        main(["onepipe", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for action in ("enable", "disable", "status", "run", "check"):
        assert action in out
    assert "netstack onepipe check" in out


@pytest.mark.parametrize("argv,said", [
    (["onepipe", "enable", "--t-beacon-ms", "0", "--prefix", "nosuchprefix"], "invalid parameters: t_beacon_ns"),
    (["onepipe", "enable", "--timeout-beacons", "1", "--prefix", "nosuchprefix"], "timeout_beacons"),
    (["onepipe", "run", "--procs", "4", "--seconds", "0", "--out", "/tmp/x", "--prefix", "nosuchprefix"],
     "--seconds and --rate must be positive"),
    (["onepipe", "run", "--procs", "4", "--seconds", "1", "--out", "/tmp/x", "--prefix", "nosuchprefix"],
     "no topology is running under prefix 'nosuchprefix'"),
    (["onepipe", "status", "--prefix", "nosuchprefix"], "no topology is running"),
])
def test_bad_arguments_are_one_line_errors(argv, said, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and err.count("\n") == 1, err


def test_check_of_a_missing_log_is_bad_input(tmp_path, capsys):
    assert main(["onepipe", "check", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_run_places_processes_and_refuses_bad_loss_specs():
    from netstack.onepipe.control import OnePipeControlError
    from netstack.onepipe.runner import parse_loss, place

    assert place(["h1", "h2"], 5) == {"h1": ["p1", "p3", "p5"], "h2": ["p2", "p4"]}
    with pytest.raises(OnePipeControlError, match="at least 1"):
        place(["h1"], 0)
    with pytest.raises(OnePipeControlError, match="more than 99 ports"):
        place(["h1"], 100)
    links = {"tor1-spine1": {}}
    assert parse_loss("tor1-spine1:0.01", links) == ("tor1-spine1", 0.01)
    for bad, msg in (("spine:0.1", "no link 'spine'"), ("tor1-spine1:lots", "not a probability"),
                     ("tor1-spine1:1.5", r"in \[0, 1\)"), ("0.1", "no link ''")):
        with pytest.raises(OnePipeControlError, match=msg):
            parse_loss(bad, links)


def test_enable_scales_the_ack_timeout_with_t_beacon(capsys):
    """A T_beacon above the default ACK timeout (60 ms) used to fail on a parameter the user never
    set; now only the testbed is missing."""
    assert main(["onepipe", "enable", "--t-beacon-ms", "100", "--prefix", "nosuchprefix"]) == 2
    err = capsys.readouterr().err
    assert "no topology is running" in err and "ack_timeout" not in err


# ---------------------------------------------------------------- reliable runs, kill, status (no namespaces)


class _FakeDaemons(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True


def _serve(path: Path, answers: dict[str, object]) -> _FakeDaemons:
    """A control socket (JSON lines) answering each command with ``answers[cmd]``."""

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            req = json.loads(self.rfile.readline())
            self.wfile.write(json.dumps({"ok": True, "result": answers.get(req["cmd"])}).encode() + b"\n")

    server = _FakeDaemons(str(path), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


VIEW = {"revision": 2,
        "processes": [{"addr": "10.0.0.1:40101", "incarnation": 1, "state": "live", "reason": ""},
                      {"addr": "10.0.0.3:40101", "incarnation": 1, "state": "failed", "reason": "report"}],
        "failures": [{"proc": "10.0.0.3:40101", "incarnation": 1, "t_f": 123456, "fid": 2,
                      "waiting": ["10.0.0.1:40101"], "released": False}],
        "recalls": [{"sender": "10.0.0.1:40101", "sender_incarnation": 1, "psn": 77, "receiver": "10.0.0.3:40101",
                     "receiver_incarnation": 1}],
        "pending_relays": []}
CTL_STATUS = {"role": "leader", "replica": "ctl-r1", "store": "sqlite", "address": "10.0.0.100:40100", "view": VIEW,
              "counters": {}}


@pytest.fixture
def fake_testbed(tmp_path, monkeypatch):
    """A run directory with a state.json under prefix 'fake' (switch tor1, hosts h1 h3; a
    controller daemon when asked), as ``netstack up`` leaves it, and no namespaces."""
    root = tmp_path / "run"
    (root / "fake").mkdir(parents=True)
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(root))
    servers: dict[Path, _FakeDaemons] = {}

    def serve(path: Path, answers: dict[str, object]) -> None:
        if path not in servers:
            servers[path] = _serve(path, answers)

    def make(controller: dict | None = None, answering: bool = True) -> Path:
        daemons = [{"node": "tor1", "kind": "switch", "pid": 1, "control": str(tmp_path / "tor1.sock"), "log": "",
                    "name": "tor1"}]
        serve(tmp_path / "tor1.sock", {"onepipe_status": None})
        hosts = {"h1": "10.0.0.1/24", "h3": "10.0.0.3/24"}
        if controller is not None:
            sock = tmp_path / ("ctl.sock" if answering else "ctl-silent.sock")
            daemons.append({"node": "ctl", "kind": "onepipe-controller", "pid": 2, "control": str(sock), "log": "",
                            "name": "ctl"})
            hosts["ctl"] = "10.0.0.100/24"
            if answering:
                serve(sock, {"status": controller})
        state = {"prefix": "fake", "topology": "onepipe", "source": "", "started": 1.0, "daemons": daemons,
                 "hosts": hosts, "links": {}, "ports": [], "namespaces": {}, "impairments": {}}
        (root / "fake" / "state.json").write_text(json.dumps(state))
        return root / "fake"

    yield make
    for server in servers.values():
        server.shutdown()
        server.server_close()


def test_help_lists_kill_and_run_reliable(capsys):
    with pytest.raises(SystemExit):
        main(["onepipe", "--help"])
    assert "kill" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["onepipe", "run", "--help"])
    assert "--reliable" in capsys.readouterr().out


def test_run_reliable_without_a_controller_names_the_node_kind(fake_testbed, tmp_path, capsys):
    fake_testbed()
    argv = ["onepipe", "run", "--reliable", "--procs", "4", "--seconds", "1", "--out", str(tmp_path / "o"),
            "--prefix", "fake"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "needs the 1Pipe controller" in err and "'onepipe-controller'" in err and "Traceback" not in err
    assert err.count("\n") == 1
    fake_testbed(CTL_STATUS, answering=False)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the 1Pipe controller ctl is not answering" in err and err.count("\n") == 1


def test_the_controller_is_found_in_the_run_state(fake_testbed):
    from netstack.onepipe.runner import controller_status, find_controller
    from netstack.runtime import load_state

    fake_testbed()
    assert controller_status("fake") is None
    fake_testbed(CTL_STATUS)
    st = controller_status("fake")
    assert st["node"] == "ctl" and st["addr"] == "10.0.0.100:40100" and st["view"] == VIEW
    assert find_controller("fake", load_state("fake")) == ("ctl", ("10.0.0.100", 40100))


def test_status_shows_the_controllers_view(fake_testbed, capsys):
    d = fake_testbed(CTL_STATUS)
    (d / "onepipe-procs.json").write_text(json.dumps({"processes": {
        "p1": {"pid": 1, "host": "h1", "addr": "10.0.0.1:40101"}, "p2": {"pid": 1, "host": "h3",
                                                                        "addr": "10.0.0.3:40101"}}}))
    assert main(["onepipe", "status", "--prefix", "fake"]) == 0
    out = capsys.readouterr().out
    assert "1Pipe is not enabled" in out and "controller ctl (10.0.0.100:40100): leader" in out
    assert "10.0.0.3:40101 (p2)" in out and "failed" in out and "123456" in out and "77" in out
    assert main(["onepipe", "status", "--json", "--prefix", "fake"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tor1"] is None and doc["controller"]["view"] == VIEW
    fake_testbed()  # no controller: no key
    assert main(["onepipe", "status", "--json", "--prefix", "fake"]) == 0
    assert json.loads(capsys.readouterr().out) == {"tor1": None}


def test_status_says_when_the_controller_does_not_answer(fake_testbed, capsys):
    fake_testbed(CTL_STATUS, answering=False)
    assert main(["onepipe", "status", "--prefix", "fake"]) == 0
    assert "controller ctl (10.0.0.100:40100): not answering" in capsys.readouterr().out


def _live_lookalike(procs: str) -> subprocess.Popen:
    """A process whose command line is a 1Pipe process's (``kill`` checks it before it kills)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "netstack.onepipe.live",
                             "--procs", procs])


def test_kill_a_process_of_the_run_in_progress_and_the_clear_errors(fake_testbed, capsys):
    from netstack.onepipe.runner import _write_procs_file, process_alive, read_procs_file

    fake_testbed()
    assert main(["onepipe", "kill", "p1", "--prefix", "fake"]) == 2
    assert "no 1Pipe run in progress under prefix 'fake'" in capsys.readouterr().err
    p1, p2 = _live_lookalike("p1"), _live_lookalike("p2")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # not a 1Pipe process
    try:
        _write_procs_file("fake", {"out": "/tmp/x", "processes": {
            "p1": {"pid": p1.pid, "host": "h1", "addr": "10.0.0.1:40101"},
            "p2": {"pid": p2.pid, "host": "h3", "addr": "10.0.0.3:40101"},
            "p3": {"pid": other.pid, "host": "h1", "addr": "10.0.0.1:40102"}}})
        assert read_procs_file("fake")["processes"]["p1"]["pid"] == p1.pid
        assert process_alive(p1.pid, "p1") and not process_alive(p1.pid, "p2") and not process_alive(other.pid, "p3")
        assert main(["onepipe", "kill", "p9", "--prefix", "fake"]) == 2
        assert "no process 'p9' in the run in progress: p1, p2, p3" in capsys.readouterr().err
        assert main(["onepipe", "kill", "p3", "--prefix", "fake"]) == 2  # its pid is another program now
        assert "p3 (10.0.0.1:40102 on h1" in capsys.readouterr().err and other.poll() is None
        assert main(["onepipe", "kill", "10.0.0.3:40101", "--prefix", "fake"]) == 0
        assert f"killed p2 (10.0.0.3:40101 on h3, pid {p2.pid}) with SIGKILL" in capsys.readouterr().out
        # SIGKILL lands asynchronously: dead (a zombie until reaped counts as dead) within moments
        deadline = time.monotonic() + 5
        while process_alive(p2.pid, "p2") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not process_alive(p2.pid, "p2")
        assert p2.wait(timeout=5) == -signal.SIGKILL
        assert main(["onepipe", "kill", "p2", "--prefix", "fake"]) == 2
        err = capsys.readouterr().err
        assert "p2 (10.0.0.3:40101 on h3" in err and "already dead" in err and err.count("\n") == 1
    finally:
        for p in (p1, p2, other):
            p.kill()
            p.wait()
    assert main(["onepipe", "kill", "p1", "--prefix", "fake"]) == 2  # every process is gone: no run
    assert "no 1Pipe run in progress" in capsys.readouterr().err


def test_a_second_run_is_refused_while_one_is_in_progress(fake_testbed):
    from netstack.onepipe.control import OnePipeControlError
    from netstack.onepipe.runner import _refuse_a_second_run, _write_procs_file

    fake_testbed()
    _refuse_a_second_run("fake")  # no file
    p1 = _live_lookalike("p1")
    try:
        _write_procs_file("fake", {"out": "/tmp/x", "processes": {"p1": {"pid": p1.pid, "host": "h1",
                                                                         "addr": "10.0.0.1:40101"}}})
        with pytest.raises(OnePipeControlError, match="already in progress under prefix 'fake'"):
            _refuse_a_second_run("fake")
    finally:
        p1.kill()
        p1.wait()
    _refuse_a_second_run("fake")  # the file of a run whose processes are gone does not count


def test_the_run_summary_lists_killed_processes(capsys):
    from netstack.commands.onepipe import print_run

    counters = {"late_dropped": 0, "beacons_sent": 9, "retransmits": 2, "incarnation": 1}
    out = {"out": "/tmp/r", "reliable": True, "killed": ["p2"], "messages_sent": 10, "delivered": 8,
           "send_failed": 1, "unaccounted": 1,
           "processes": {p: {"messages_sent": 5, "delivered": 4, "send_failed": 0, "proc_failed": 1,
                             "counters": counters} for p in ("p1", "p10")}}
    print_run(out)
    text = capsys.readouterr().out
    rows = [line.replace("|", " ").split() for line in text.splitlines()]
    rows = [r for r in rows if r and r[0] in ("p1", "p2", "p10")]
    assert [r[0] for r in rows] == ["p1", "p2", "p10"] and rows[1][1] == "killed"
    assert "killed: p2 (not in the totals)" in text
    assert "netstack onepipe check /tmp/r --allow-empty" in text and "atomicity" in text


def test_status_shows_the_failures_in_progress_and_only_the_latest_released(fake_testbed, capsys):
    old = [{"proc": "10.0.0.1:40101", "incarnation": i, "t_f": 1000 + i, "fid": i, "waiting": [], "released": True}
           for i in range(1, 16)]
    view = {**VIEW, "failures": [*old, *VIEW["failures"]], "recalls": VIEW["recalls"] * 25}
    fake_testbed({**CTL_STATUS, "view": view})
    assert main(["onepipe", "status", "--prefix", "fake"]) == 0
    out = capsys.readouterr().out
    assert "(5 older released failures not shown: --json has them all)" in out
    assert "1005" not in out and "1006" in out and "123456" in out  # t_f of fid 5 (not shown), 6, the pending one
    assert "(5 more undeliverable recalls: --json has them all)" in out
