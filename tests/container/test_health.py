"""The containers' health check (netstack/container/health.py, ``netstack node health``) on a
node state file of our own: every port up (SIOCGIFFLAGS, in this namespace) and every daemon
answering ``ping``; a missing port, a silent daemon, a node still joining; and that the check
imports neither the command line's modules nor pyroute2 (its start-up was its cost)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from netstack.container.health import main
from netstack.container.node import _link_flags
from netstack.container.plan import JOINING, NODE_STATE, READY


@pytest.fixture
def rdir(tmp_path, monkeypatch):
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("NETSTACK_PREFIX", "hc")
    d = tmp_path / "hc"
    d.mkdir()
    return d


def _state(rdir, ports, daemons=(), phase=READY):
    (rdir / NODE_STATE.format(node="n1")).write_text(json.dumps(
        {"phase": phase, "node": "n1", "ports": [{"ifname": p} for p in ports], "daemons": list(daemons)}))


def test_link_flags_reads_this_namespaces_interfaces():
    assert _link_flags("lo") & 1  # IFF_UP
    assert _link_flags("nosuchif0") is None


def test_every_port_up_and_no_daemon_is_healthy(rdir, capsys):
    _state(rdir, ["lo"])
    assert main(["n1"]) == 0 and "1 port(s) up" in capsys.readouterr().out


def test_a_missing_port_a_silent_daemon_and_no_state_are_not(rdir, capsys):
    assert main(["n1"]) == 1 and "no node state" in capsys.readouterr().err
    _state(rdir, ["lo", "nosuchif0"])
    assert main(["n1"]) == 1 and "port nosuchif0 is missing" in capsys.readouterr().err
    _state(rdir, ["lo"], [{"name": "sw", "control": str(rdir / "none.sock")}])
    assert main(["n1"]) == 1 and "daemon sw does not answer" in capsys.readouterr().err


def test_a_joining_node_passes_only_with_joining_ok(rdir):
    _state(rdir, ["lo"], phase=JOINING)
    assert main(["n1"]) == 1 and main(["n1", "--joining-ok"]) == 0


def test_bad_usage_exits_2(capsys):
    assert main(["a", "b"]) == 2 and main(["--nope"]) == 2


def test_the_check_imports_neither_the_command_line_nor_pyroute2(rdir):
    _state(rdir, ["lo"])
    code = ("import sys, runpy; sys.argv = ['health', 'n1']\n"
            "try:\n    runpy.run_module('netstack.container.health', run_name='__main__')\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "bad = [m for m in sys.modules if m.startswith(('netstack.commands', 'netstack.cli', 'pyroute2'))]\n"
            "assert not bad, bad\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
