"""The command-line contract (docs/testbed.md "The command-line contract"), checked on the parser
itself and on commands that need no root: --prefix anywhere, --json where state changes or is
reported, --mode for live/sim, exit codes, a closed pipe, stale run state, ``netstack ls``."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from netstack import cli, protocols
from netstack.commands import common

# ----------------------------------------------------------------------------- walking the parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    out: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out.update(action.choices)
    return out


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[str, argparse.ArgumentParser]:
    """Every command as ``"lg enable"`` -> its parser: the leaves (and groups that run on their own)."""
    found: dict[str, argparse.ArgumentParser] = {}
    subs = _subparsers(parser)
    if path and (not subs or parser.get_default("func") is not None):
        found[" ".join(path)] = parser
    for name, sub in subs.items():
        found.update(walk(sub, (*path, name)))
    return found


PARSER = cli.build_parser()
COMMANDS = walk(PARSER)


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {s: a for a in parser._actions for s in a.option_strings}


def commands_of(module: str) -> set[str]:
    """The commands a command module registers, as :func:`walk` names them: its ``register`` run
    on a top-level parser of its own."""
    parser = cli.Parser()
    protocols.load(module).register(parser.add_subparsers(parser_class=cli.Parser))
    return set(walk(parser))


#: the registry's examples' commands (a command module under netstack/examples/, docs/extending.md),
#: which no list below names by hand: an example adds itself by its registry entry, and each of its
#: commands keeps the whole contract, as the worked example's do: it works on a running testbed
#: (--prefix, stale-checked) and changes or reports state (--json); the lists below hold them by
#: that rule. A paper protocol's new command still joins the lists by hand, classified.
EXAMPLE_MODULES = [m for m in map(protocols.command_module, protocols.commands())
                   if m.startswith("netstack.examples.")]
EXAMPLE_COMMANDS = {c for m in EXAMPLE_MODULES for c in commands_of(m)}

#: every command that works on a testbed (a running one, or the one it brings up): --prefix
TESTBED_COMMANDS = EXAMPLE_COMMANDS | {
    "up", "down", "status", "exec", "impair", "demo", "corruptd", "capture", "link", "metrics", "fuzz",
    "lg enable", "lg disable", "lg status",
    "dta enable", "dta disable", "dta status",
    "dta report keywrite", "dta report append", "dta report increment", "dta report sketch", "dta report postcard",
    "dta query keywrite", "dta query append", "dta query counter", "dta query sketch", "dta query postcard",
    "onepipe enable", "onepipe disable", "onepipe status", "onepipe run", "onepipe kill",
    "tcd enable", "tcd disable", "tcd status", "tcd run",
    "tcsack transfer", "tcsack send", "tcsack recv",
    "fault kill", "fault start", "fault link", "fault pause-storm", "fault clock-jump",
    "compose generate",  # (the deployment's prefix)
    "compose lab up", "compose lab status", "compose lab down",  # (the lab's prefix: its own, no run state)
    "ui",  # (the testbed it shows; it serves a page, no --json)
    "dask up", "dask status", "dask down",  # (the lab's prefix: netstack.lab, no testbed run state)
}
#: those refused before they start when their run state outlived its namespaces (the others make
#: or remove a testbed, or take a prefix for a new one; tcsack send/recv check it with --host)
STALE_CHECKED = TESTBED_COMMANDS - {"up", "down", "demo", "tcd run", "compose generate", "tcsack send",
                                    "tcsack recv", "compose lab up", "compose lab status", "compose lab down",
                                    "dask up", "dask status", "dask down"}

#: every command that changes or reports state: --json, stdout then exactly one JSON document
JSON_COMMANDS = EXAMPLE_COMMANDS | {
    "up", "down", "status", "exec", "impair", "ls", "demo", "bench", "sim", "corruptd", "capture", "link",
    "metrics", "fuzz", "doctor", "reproduce",
    "lg enable", "lg disable", "lg status",
    "dta enable", "dta disable", "dta status",
    "dta report keywrite", "dta report append", "dta report increment", "dta report sketch", "dta report postcard",
    "dta query keywrite", "dta query append", "dta query counter", "dta query sketch", "dta query postcard",
    "onepipe enable", "onepipe disable", "onepipe status", "onepipe run", "onepipe kill", "onepipe check",
    "tcd enable", "tcd disable", "tcd status", "tcd run",
    "tcd fct",  # (virtual time: no testbed, no --prefix)
    "tcsack transfer", "tcsack send", "tcsack recv",
    "keys generate", "keys rotate", "keys show",
    "fault kill", "fault start", "fault link", "fault pause-storm", "fault clock-jump",
    "compose lab up", "compose lab status", "compose lab down",
    "dask up", "dask status", "dask down",
}
#: what prints JSON always (tcd send/recv: the last stdout line) or nothing stateful
NO_JSON = {"dissect", "wireshark", "compose generate", "compose lab", "node run", "node health", "compose", "node",
           "tcd send", "tcd recv", "dask"}
#: the commands that choose live or virtual time
MODE_COMMANDS = {"tcd run", "sim", "bench"}


def test_the_walk_sees_every_command():
    assert {"status", "exec", "ls", "lg enable", "dta report sketch", "fault clock-jump", "tcd run"} <= set(COMMANDS)
    assert set(COMMANDS) == TESTBED_COMMANDS | JSON_COMMANDS | NO_JSON  # a new command joins a list here


def test_the_examples_commands_are_found_in_the_registry():
    """The rule above has something to hold: the registry has an example with commands, and they
    are among the CLI's."""
    assert EXAMPLE_MODULES and all(commands_of(m) for m in EXAMPLE_MODULES)
    assert set(COMMANDS) >= EXAMPLE_COMMANDS


@pytest.mark.parametrize("name", sorted(TESTBED_COMMANDS))
def test_testbed_commands_take_prefix(name):
    assert "--prefix" in _options(COMMANDS[name])


def test_no_other_command_takes_a_prefix():
    """The global --prefix goes to the commands that have one; a new command with its own --prefix
    belongs in TESTBED_COMMANDS (and, if it works on a running testbed, STALE_CHECKED)."""
    assert {n for n, p in COMMANDS.items() if "--prefix" in _options(p)} == TESTBED_COMMANDS


def test_stale_state_is_checked_where_a_running_testbed_is_used():
    assert {n for n, p in COMMANDS.items() if p.get_default("acts_on_testbed")} == STALE_CHECKED


@pytest.mark.parametrize("name", sorted(JSON_COMMANDS))
def test_state_commands_take_json(name):
    assert "--json" in _options(COMMANDS[name])


def test_no_subcommand_option_shares_the_global_runtime_dest():
    global_dest = _options(PARSER)["--runtime"].dest
    assert global_dest == "runtime"
    clash = [f"{n} {a.option_strings}" for n, p in COMMANDS.items() for a in p._actions
             if a.dest == global_dest]
    assert clash == []


def test_live_or_sim_is_chosen_with_mode():
    chooses = {}
    for name, p in COMMANDS.items():
        for a in p._actions:
            if a.choices is not None and not isinstance(a.choices, dict) and set(a.choices) == {"live", "sim"}:
                chooses.setdefault(name, set()).update(a.option_strings)
                assert a.dest in ("mode", "mode_alias"), (name, a.option_strings)
    assert chooses == {n: {"--mode", "--runtime"} for n in MODE_COMMANDS}
    for n in MODE_COMMANDS:
        assert _options(COMMANDS[n])["--mode"].dest == "mode"


# ----------------------------------------------------------------------------- behaviour


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """A run directory of our own (never another user's testbeds), namespaces runs only (no
    docker), and no netstack namespace of anyone else seen."""
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(run))
    monkeypatch.setenv("NETSTACK_RUNTIME", "netns")
    from netstack.topo import netns

    monkeypatch.setattr(netns, "running_namespaces", lambda prefix=None: {})
    return run


def _recorder(monkeypatch, module, name):
    seen = []
    monkeypatch.setattr(module, name, lambda args: seen.append(args) or 0)
    return seen


@pytest.mark.parametrize("argv", [
    ["exec", "h1", "--prefix", "x", "--", "ping", "-c1"],
    ["--prefix", "x", "exec", "h1", "--", "ping", "-c1"],
    ["exec", "--prefix", "x", "h1", "--", "ping", "-c1"],
    ["exec", "h1", "--prefix=x", "--", "ping", "-c1"],
    ["exec", "h1", "--prefix", "x", "ping", "-c1"],
    ["--prefix", "y", "exec", "h1", "--prefix", "x", "--", "ping", "-c1"],  # the command's own wins
])
def test_exec_takes_prefix_before_or_after_node(fresh, monkeypatch, argv):
    from netstack.commands import testbed

    seen = _recorder(monkeypatch, testbed, "cmd_exec")
    assert cli.main(argv) == 0
    assert seen[0].prefix == "x" and seen[0].node == "h1"
    assert [a for a in seen[0].argv if a != "--"] == ["ping", "-c1"]


def test_exec_options_after_node_and_a_commands_own_prefix(fresh, monkeypatch):
    from netstack.commands import testbed

    seen = _recorder(monkeypatch, testbed, "cmd_exec")
    assert cli.main(["exec", "h1", "-d", "--log", "/tmp/l", "--json", "--", "sh", "--prefix", "z"]) == 0
    a = seen[0]
    assert (a.prefix, a.detach, a.log, a.json, a.argv) == ("ns", True, "/tmp/l", True, ["sh", "--prefix", "z"])
    assert cli.main(["exec", "h1", "--prefix"]) == 2  # no value


@pytest.mark.parametrize(("module", "func", "before", "after", "default"), [
    ("testbed", "cmd_status", ["status"], [], "ns"),
    ("lg", "cmd_enable", ["lg", "enable", "sw1-sw2"], [], "ns"),
    ("onepipe", "cmd_status", ["onepipe", "status"], [], "op"),
    ("fault", "cmd_link", ["fault", "link", "sw1-sw2", "down"], [], "ns"),
    ("dta", "cmd_query", ["dta", "query", "counter", "7"], [], "ns"),
])
def test_prefix_placements_agree(fresh, monkeypatch, module, func, before, after, default):
    import importlib

    mod = importlib.import_module(f"netstack.commands.{module}")
    seen = _recorder(monkeypatch, mod, func)
    for argv in ([*before, "--prefix", "x", *after], ["--prefix", "x", *before, *after]):
        assert cli.main(argv) == 0
    assert cli.main([*before, *after]) == 0
    assert [a.prefix for a in seen] == ["x", "x", default]


def test_usage_errors_exit_2(fresh, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["status", "--no-such-option"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        cli.main(["sim", "--mode", "moon"])
    assert exc.value.code == 2
    assert cli.main([]) == 2


def test_an_absent_testbed_exits_2(fresh, capsys):
    for argv in (["status", "--prefix", "nosuch"], ["exec", "h1", "--prefix", "nosuch", "--", "true"],
                 ["--prefix", "nosuch", "metrics"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert "no topology is running under prefix 'nosuch'" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [["lg", "status"], ["lg", "disable", "sw1-sw2"], ["dta", "status"],
                                  ["onepipe", "status"], ["tcd", "status"], ["capture", "sw1-sw2"],
                                  ["fault", "link", "sw1-sw2", "down"], ["link", "sw1-sw2", "down"],
                                  ["tcsack", "transfer"], ["corruptd"], ["metrics"], ["ls"]])
def test_a_protocols_error_reaches_the_cli_as_one_line_and_exit_2(fresh, monkeypatch, capsys, argv):
    """No command translates a NetstackError (netstack/errors.py): cli.main prints it, whichever
    protocol or layer raised it (here the runtime's, or ls's for a runtime that does not exist)."""
    if argv == ["ls"]:
        monkeypatch.setenv("NETSTACK_RUNTIME", "nosuch")
    code = cli.main([*argv, "--prefix", "nosuch"] if argv != ["ls"] else argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"netstack {argv[0]}: error: ") and err.count("\n") == 1, err


def test_a_not_found_error_exits_1_and_any_netstack_error_is_one_line(fresh, monkeypatch, capsys):
    from netstack.errors import NetstackError, NotFound
    from netstack.linkguardian import control

    for exc, code in ((NotFound("no such thing"), 1), (control.LGControlError("no link 'x'"), 2),
                      (NetstackError("generic"), 2)):
        def fail(prefix: str, exc: Exception = exc) -> None:
            raise exc

        monkeypatch.setattr(control, "status_all", fail)
        assert cli.main(["lg", "status", "--prefix", "nosuch"]) == code
        assert capsys.readouterr().err == f"netstack lg: error: {exc}\n"


def _stale_state(run: Path, prefix: str = "zzstale") -> None:
    (run / prefix).mkdir()
    (run / prefix / "state.json").write_text(json.dumps({
        "prefix": prefix, "topology": "linkguardian-testbed", "source": "", "started": 1.0,
        "namespaces": {"sw1": f"{prefix}-sw1", "sw2": f"{prefix}-sw2"},
        "ports": [{"node": "sw1", "link": "sw1-sw2", "netns": f"{prefix}-sw1", "ifname": "p-sw2", "mac": "",
                   "peer": "sw2", "fcs": True}],
        "hosts": {}, "links": {"sw1-sw2": {"a": "sw1", "b": "sw2", "rate_bps": 10**8, "delay_ns": 0, "mtu": 1500,
                                           "fcs": True}}, "impairments": {},
        "daemons": [{"node": "sw1", "kind": "switch", "pid": 2 ** 22 + 1, "control": str(run / "sw1.sock"),
                     "log": "", "name": "sw1"}]}))


@pytest.mark.parametrize("argv", [["link", "sw1-sw2", "down"], ["fault", "link", "sw1-sw2", "down"], ["status"],
                                  ["exec", "sw1", "--", "true"], ["lg", "status"], ["impair", "sw1-sw2"]])
def test_stale_state_is_one_clear_line(fresh, capsys, argv):
    _stale_state(fresh)
    assert cli.main([*argv, "--prefix", "zzstale"] if argv[0] != "exec" else
                    ["exec", "--prefix", "zzstale", *argv[1:]]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("testbed zzstale: its namespaces are gone (stale state from a crash?); run "
                        "'netstack down --prefix zzstale'")
    assert len(err.splitlines()) == 1


def test_status_exits_1_when_no_daemon_answers(fresh, monkeypatch, capsys):
    import netstack.runtime as runtime

    doc = {"prefix": "p", "topology": "t", "impairments": {}, "daemons": {
        "sw1": {"error": "not answering (Permission denied); log x", "alive": True},
        "flap-sw1-sw2": {"kind": "linkflap", "node": "sw1-sw2", "pid": 1, "alive": True}}}
    monkeypatch.setattr(runtime, "status", lambda prefix: doc)
    assert cli.main(["status", "--prefix", "p", "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == doc
    assert "no daemon of testbed p answers" in err.strip().splitlines()[-1]
    doc["daemons"]["sw2"] = {"ports": {}}  # one answers: the table says who does not
    assert cli.main(["status", "--prefix", "p"]) == 0


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_closed_pipe_ends_quietly_in_process(fresh, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert cli.main(["sim", "--list"]) == 141


def test_a_closed_pipe_prints_no_traceback(fresh):
    proc = subprocess.Popen([sys.executable, "-m", "netstack.cli", "sim", "--list"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    proc.stdout.close()  # before the interpreter is up: its first write meets a closed pipe
    _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err and "Exception ignored" not in err
    assert proc.returncode in (0, 141)


def test_ls_with_no_testbed(fresh, capsys):
    assert cli.main(["ls", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert cli.main(["ls"]) == 0
    assert "no netstack testbed is running" in capsys.readouterr().out


def test_ls_lists_a_stale_run_read_only(fresh, capsys):
    _stale_state(fresh)
    before = (fresh / "zzstale" / "state.json").read_text()
    assert cli.main(["ls", "--json"]) == 0
    [t] = json.loads(capsys.readouterr().out)
    assert (t["prefix"], t["runtime"], t["state"], t["topology"]) == ("zzstale", "netns", "stale",
                                                                       "linkguardian-testbed")
    assert t["daemons"] == {"alive": 0, "total": 1} and t["namespaces"] == {"present": 0, "total": 2}
    assert t["owner"]["uid"] == (fresh / "zzstale").stat().st_uid and t["age_s"] > 0
    assert (fresh / "zzstale" / "state.json").read_text() == before
    assert cli.main(["ls"]) == 0
    assert "zzstale" in capsys.readouterr().out


def test_deprecated_runtime_alias_sets_mode_not_the_global_runtime(capsys):
    args = PARSER.parse_args(["tcd", "run", "single", "--runtime", "sim"])
    cli.resolve(args)
    assert (args.mode, args.runtime) == ("sim", None)
    assert "use '--mode sim'" in capsys.readouterr().err
    args = PARSER.parse_args(["--runtime", "netns", "sim", "x", "--mode", "live"])
    cli.resolve(args)
    assert (args.mode, args.runtime) == ("live", "netns")
    assert PARSER.parse_args(["bench", "tcd"]).mode is None


def test_mode_and_its_alias_must_agree(capsys):
    assert cli.main(["tcd", "run", "single", "--mode", "sim", "--runtime", "live"]) == 2
    assert "disagree" in capsys.readouterr().err


def _fake_benchmark(monkeypatch, valid: bool, cross_ok: bool = True) -> list[argparse.Namespace]:
    """``bench headers`` replaced by a module that records its arguments and writes a result."""
    from netstack.bench.output import write_results
    from netstack.commands import bench

    seen: list[argparse.Namespace] = []

    def main(args: argparse.Namespace) -> int:
        seen.append(args)
        print("| a table |")  # benchmarks print their table on stdout
        checks = [{"name": "sent", "expected": ">= 95% of 10 planned", "measured": 3, "ok": valid}]
        cross = [{"what": "live agrees with virtual time", "ok": cross_ok}, {"what": "loss vs theory", "ok": True}]
        write_results(args.results_dir, "bench-headers", {"valid": valid, "checks": checks, "cross_checks": cross})
        return 0

    monkeypatch.setitem(sys.modules, "netstack_fake_bench", types.SimpleNamespace(main=main))
    monkeypatch.setitem(bench.BENCHMARKS, "headers", ("netstack_fake_bench", "fake"))
    return seen


def test_bench_json_is_one_document_and_invalid_exits_3(tmp_path, monkeypatch, capsys):
    seen = _fake_benchmark(monkeypatch, valid=False)
    assert cli.main(["--runtime", "netns", "bench", "headers", "--results-dir", str(tmp_path), "--json",
                     "--mode", "sim"]) == 3
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["benchmark"] == "bench-headers" and doc["valid"] is False
    assert "| a table |" in err and err.strip().splitlines()[-1].startswith("INVALID RUN: sent: expected")
    assert seen[0].runtime == "sim"  # the modules read their live/sim choice as 'runtime'


def test_bench_whose_cross_check_fails_says_so_last_and_exits_1(tmp_path, monkeypatch, capsys):
    _fake_benchmark(monkeypatch, valid=True, cross_ok=False)
    assert cli.main(["bench", "headers", "--results-dir", str(tmp_path)]) == 1
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == "CROSS-CHECK FAILED: live agrees with virtual time"


def test_a_failed_cross_check_is_said_last_even_when_rows_were_invalid(tmp_path, monkeypatch, capsys):
    """A benchmark judges its cross-checks on the rows that count: one that failed is a protocol
    bug, said after the INVALID RUN line, exit 1."""
    _fake_benchmark(monkeypatch, valid=False, cross_ok=False)
    assert cli.main(["bench", "headers", "--results-dir", str(tmp_path)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-2].startswith("INVALID RUN: ") and lines[-1].startswith("CROSS-CHECK FAILED: ")


def test_an_invalid_run_whose_cross_checks_hold_exits_3(tmp_path, monkeypatch, capsys):
    _fake_benchmark(monkeypatch, valid=False, cross_ok=True)
    assert cli.main(["bench", "headers", "--results-dir", str(tmp_path)]) == 3
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("INVALID RUN: ")


def test_bench_valid_run_exits_0(tmp_path, monkeypatch, capsys):
    _fake_benchmark(monkeypatch, valid=True)
    assert cli.main(["bench", "headers", "--results-dir", str(tmp_path)]) == 0
    assert "| a table |" in capsys.readouterr().out


def test_finish_follows_validity(capsys):
    assert common.finish({"result": 1}) == 0
    assert common.finish({"ok": False}, 1) == 1
    bad = {"valid": False, "checks": [{"name": "lag", "expected": "<= 20", "measured": 90, "ok": False}]}
    assert common.finish({"result": bad}, 0, bad) == 3
    assert "INVALID RUN: lag: expected <= 20, measured 90" in capsys.readouterr().err
    assert common.finish({"valid": True}, 0, bad) == 0  # the outer document decides when it says


def test_keys_json_is_one_document(tmp_path, capsys):
    path = tmp_path / "keys.json"
    assert cli.main(["keys", "generate", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["file"] == str(path)
    assert cli.main(["keys", "rotate", str(path), "--overlap", "5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["overlap_s"] == 5


def test_lg_enable_prints_the_n_in_use():
    from netstack.commands.lg import copies_text

    assert copies_text({"copies": None, "n_copies": 2, "target_loss": 1e-8, "actual_loss": None}) == \
        "copies N=2 (Eq. 2: target 1e-08)"
    assert copies_text({"copies": None, "n_copies": 3, "target_loss": 1e-8, "actual_loss": 0.01}) == \
        "copies N=3 (Eq. 2: target 1e-08, actual loss 0.01)"
    assert copies_text({"copies": 4, "n_copies": 4, "target_loss": 1e-8, "actual_loss": None}) == "copies N=4 (given)"
