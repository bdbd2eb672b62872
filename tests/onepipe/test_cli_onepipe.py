"""``netstack onepipe``: help, and clear one-line errors for bad arguments (no testbed needed)."""

from __future__ import annotations

import json
import os
import re
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
    fake_testbed()  # no controller: no key; the last run (its file, no runner any more): finished
    assert main(["onepipe", "status", "--json", "--prefix", "fake"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tor1"] is None and "controller" not in doc and doc["run"]["state"] == "finished"
    assert doc["run"]["counts"] is None  # (no logs there)


def test_status_says_when_the_controller_does_not_answer(fake_testbed, capsys):
    fake_testbed(CTL_STATUS, answering=False)
    assert main(["onepipe", "status", "--prefix", "fake"]) == 0
    assert "controller ctl (10.0.0.100:40100): not answering" in capsys.readouterr().out


def _live_lookalike(procs: str) -> subprocess.Popen:
    """A process whose command line is a 1Pipe process's (``kill`` checks it before it kills)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "-m", "netstack.onepipe.live",
                             "--procs", procs])


def test_kill_a_process_of_the_run_in_progress_and_the_clear_errors(fake_testbed, capsys):
    """Exit 1 (NotFound, docs/testbed.md) with one line naming the run's state; exit 0 and what
    it did when it killed."""
    from netstack.onepipe.runner import _write_procs_file, process_alive, read_procs_file

    fake_testbed()
    assert main(["onepipe", "kill", "p1", "--prefix", "fake"]) == 1
    assert "no 1Pipe run under prefix 'fake'" in capsys.readouterr().err
    p1, p2 = _live_lookalike("p1"), _live_lookalike("p2")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # not a 1Pipe process
    try:
        _write_procs_file("fake", {"state": "running", "out": "/tmp/x", "runner": os.getpid(),
                                   "start_at": time.time() - 1, "seconds": 60, "processes": {
                                       "p1": {"pid": p1.pid, "host": "h1", "addr": "10.0.0.1:40101"},
                                       "p2": {"pid": p2.pid, "host": "h3", "addr": "10.0.0.3:40101"},
                                       "p3": {"pid": other.pid, "host": "h1", "addr": "10.0.0.1:40102"}}})
        assert read_procs_file("fake")["processes"]["p1"]["pid"] == p1.pid
        assert process_alive(p1.pid, "p1") and not process_alive(p1.pid, "p2") and not process_alive(other.pid, "p3")
        assert main(["onepipe", "kill", "p9", "--prefix", "fake"]) == 1
        assert "no process 'p9' in the 1Pipe run under prefix 'fake' (running): p1, p2, p3" in capsys.readouterr().err
        assert main(["onepipe", "kill", "p3", "--prefix", "fake"]) == 1  # its pid is another program now
        err = capsys.readouterr().err
        assert f"p3 (pid {other.pid}, 10.0.0.1:40102 on h1) is already dead" in err and other.poll() is None
        assert main(["onepipe", "kill", "10.0.0.3:40101", "--prefix", "fake"]) == 0
        said = capsys.readouterr().out
        assert f"killed pid {p2.pid} of p2 on h3 (10.0.0.3:40101) with SIGKILL; the run is running" in said
        # SIGKILL lands asynchronously: dead (a zombie until reaped counts as dead) within moments
        deadline = time.monotonic() + 5
        while process_alive(p2.pid, "p2") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not process_alive(p2.pid, "p2")
        assert p2.wait(timeout=5) == -signal.SIGKILL
        assert main(["onepipe", "kill", "p2", "--prefix", "fake"]) == 1
        err = capsys.readouterr().err
        assert "p2 (pid" in err and "already dead" in err and err.count("\n") == 1
        _write_procs_file("fake", {**read_procs_file("fake"), "state": "finished"})
        assert main(["onepipe", "kill", "p1", "--prefix", "fake"]) == 1
        assert "the 1Pipe run under prefix 'fake' has finished" in capsys.readouterr().err
    finally:
        for p in (p1, p2, other):
            p.kill()
            p.wait()


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
    # a run still starting (no process yet) whose runner lives is a run in progress
    _write_procs_file("fake", {"state": "starting", "out": "/tmp/x", "runner": os.getpid(), "processes": {}})
    with pytest.raises(OnePipeControlError, match="already in progress under prefix 'fake' \\(starting"):
        _refuse_a_second_run("fake")
    _write_procs_file("fake", {"state": "finished", "out": "/tmp/x", "runner": os.getpid(), "processes": {}})
    _refuse_a_second_run("fake")


def test_the_run_summary_lists_killed_processes(capsys):
    from netstack.commands.onepipe import print_run

    counters = {"late_dropped": 0, "beacons_sent": 9, "retransmits": 2}
    fates = {"messages_sent": 5, "delivered": 4, "send_failed": 0, "send_unknown": 1, "in_flight_at_end": 0,
             "unaccounted": 0, "received": 4, "incarnation": 1}
    out = {"out": "/tmp/r", "reliable": True, "killed": ["p2"], "messages_sent": 12, "delivered": 9,
           "send_failed": 0, "send_unknown": 2, "in_flight_at_end": 1, "unaccounted": 1,
           "processes": {**{p: {**fates, "proc_failed": 1, "counters": counters} for p in ("p1", "p10")},
                         "p2": {**fates, "killed": True, "in_flight_at_end": 1, "unaccounted": 1, "delivered": 3}}}
    print_run(out)
    text = capsys.readouterr().out
    rows = [line.replace("|", " ").split() for line in text.splitlines()]
    rows = [r for r in rows if r and r[0] in ("p1", "p2", "p10")]
    assert [r[0] for r in rows] == ["p1", "p2", "p10"] and rows[1][1] == "(killed)"
    assert rows[1][2:8] == ["5", "3", "0", "1", "1", "4"]  # its counts from the logs
    assert ("12 messages sent = 9 delivered + 0 send-failed + 2 send-unknown + 1 in flight at the end "
            "(1 unaccounted); killed: p2") in text
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


# --------------------------------------------------------------------------- issue 31


def test_run_phase_is_the_runs_state_machine():
    from netstack.onepipe.runner import run_phase

    def alive(_pid):
        return True

    base = {"runner": 1, "start_at": 100.0, "seconds": 5.0, "processes": {}}
    assert run_phase(None, 0) == "no run"
    assert run_phase({**base, "state": "starting"}, 200, alive) == "starting"
    assert run_phase({**base, "state": "running"}, 99, alive) == "starting"  # joining, not scattering yet
    assert run_phase({**base, "state": "running"}, 101, alive) == "running"
    assert run_phase({**base, "state": "running"}, 106, alive) == "draining"
    assert run_phase({**base, "state": "finished"}, 101, alive) == "finished"
    assert run_phase({**base, "state": "aborted"}, 101, alive) == "aborted"
    assert run_phase({**base, "state": "running"}, 101, lambda _pid: False) == "finished"  # the runner is gone


def test_choose_victim_names_the_runs_state_in_every_refusal():
    from netstack.errors import NotFound
    from netstack.onepipe.runner import choose_victim

    procs = {"p1": {"pid": 11, "host": "h1", "addr": "10.0.0.1:40101"},
             "p3": {"pid": 13, "host": "h3", "addr": "10.0.0.3:40101"}}
    info = {"out": "/tmp/o", "processes": procs}
    up = {11}

    def alive(pid, _name):
        return pid in up

    assert choose_victim("op", info, "running", "p1", alive) == ("p1", procs["p1"])
    assert choose_victim("op", info, "starting", "10.0.0.1:40101", alive)[0] == "p1"  # up already: killable
    for phase, proc, said in [
            ("no run", "p1", "no 1Pipe run under prefix 'op'"),
            ("finished", "p1", "has finished (logs in /tmp/o)"),
            ("aborted", "p1", "has aborted"),
            ("starting", "p5", "is starting: 'p5' is not up yet (2 processes so far)"),
            ("running", "p5", "no process 'p5' in the 1Pipe run under prefix 'op' (running): p1, p3"),
            ("draining", "p3", "p3 (pid 13, 10.0.0.3:40101 on h3) has ended: the run under prefix 'op' is draining"),
            ("running", "p3",
             "p3 (pid 13, 10.0.0.3:40101 on h3) is already dead: the run under prefix 'op' is running")]:
        with pytest.raises(NotFound, match=re.escape(said)):
            choose_victim("op", None if phase == "no run" else info, phase, proc, alive)


def test_kill_waits_for_a_run_that_is_still_starting(fake_testbed):
    """The race of issue 31: kill while the runner enables the switches and spawns its processes
    (the file says starting, no pid yet): kill waits for the process to be up, then kills it."""
    from netstack.onepipe.runner import _write_procs_file, kill

    fake_testbed()
    base = {"out": "/tmp/x", "runner": os.getpid(), "start_at": time.time() + 60, "seconds": 5}
    _write_procs_file("fake", {**base, "state": "starting", "processes": {}})
    p1 = _live_lookalike("p1")

    def spawned() -> None:
        time.sleep(0.3)
        _write_procs_file("fake", {**base, "state": "running", "processes": {
            "p1": {"pid": p1.pid, "host": "h1", "addr": "10.0.0.1:40101"}}})

    t = threading.Thread(target=spawned)
    t.start()
    try:
        got = kill("fake", "p1", wait_s=10)
        assert got["pid"] == p1.pid and got["state"] == "starting"
        assert p1.wait(timeout=5) == -signal.SIGKILL
    finally:
        t.join()
        p1.kill()
        p1.wait()


@pytest.mark.parametrize("exc, reason", [
    (lambda: __import__("netstack.onepipe.control", fromlist=["x"]).OnePipeControlError(
        "1Pipe processes failed: p3: did not finish in time"), "1Pipe processes failed: p3: did not finish in time"),
    (KeyboardInterrupt, "interrupted (Ctrl-C)"),
    (lambda: RuntimeError("boom\nmore"), "boom"),
])
def test_an_aborted_run_still_writes_run_json(fake_testbed, tmp_path, monkeypatch, exc, reason):
    """Issue 31: an exception, a timeout or Ctrl-C after the run took its directory: run.json
    says the mode and why, with what the logs hold; the run's file says aborted."""
    from netstack.onepipe import runner

    fake_testbed()
    out = tmp_path / "o"

    def aborts(*_a, **_k):
        (out / "sent").mkdir()
        (out / "sent" / "p1.jsonl").write_text(json.dumps({"seq": 0, "ts": None, "dsts": ["p2"], "at": 1}) + "\n")
        (out / "p2.jsonl").write_text(json.dumps({"id": "p1.0.p2"}) + "\n")
        raise exc()

    monkeypatch.setattr(runner, "_run", aborts)
    with pytest.raises(BaseException) as got:
        runner.run("fake", procs=2, seconds=1, out=out, reliable=False)
    assert not isinstance(got.value, AssertionError)
    doc = json.loads((out / "run.json").read_text())
    assert doc["mode"] == "best_effort" and doc["aborted"] == reason and doc["valid"] is False
    assert (doc["messages_sent"], doc["delivered"], doc["in_flight_at_end"]) == (1, 1, 0)
    assert doc["processes"]["p1"]["incarnation"] == 1
    assert runner.read_procs_file("fake")["state"] == "aborted"
    assert runner.run_phase(runner.read_procs_file("fake"), time.time()) == "aborted"


def test_the_run_file_stays_on_namespaces_and_goes_on_containers(tmp_path, monkeypatch):
    """On namespaces the run's file stays after the run (``kill`` names its state; ``down`` removes
    it with the run directory). A container deployment has no run directory here but the one the
    run made for it, which docker-compose down does not know of: the run removes both."""
    from netstack.onepipe.runner import _end_procs_file, _write_procs_file, procs_file, read_procs_file

    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path / "run"))
    start = {"state": "running", "out": "/tmp/x", "runner": os.getpid(), "processes": {}}
    _write_procs_file("ns", start)
    _end_procs_file("ns", "finished")
    assert read_procs_file("ns")["state"] == "finished"
    _write_procs_file("cont", start)
    _end_procs_file("cont", "aborted", keep=False)
    assert not procs_file("cont").parent.exists()
    _write_procs_file("cont", start)
    (procs_file("cont").parent / "someone-elses").write_text("")
    _end_procs_file("cont", "finished", keep=False)
    assert not procs_file("cont").exists() and procs_file("cont").parent.exists()  # not emptied: kept
    _write_procs_file("other", {**start, "runner": os.getpid() + 1})  # another runner's run
    _end_procs_file("other", "finished", keep=False)
    assert read_procs_file("other")["state"] == "running"
