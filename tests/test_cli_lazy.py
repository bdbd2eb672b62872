"""``netstack`` imports only the module of the command it runs (netstack/cli.py ``build_parser``):
the parser it builds for a command must be the whole CLI's for that command, option for option,
and ``REGISTERS`` must name every word a command module registers under another name."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from netstack import cli, protocols


def _registered(module: str) -> list[str]:
    parser = cli.Parser(prog="netstack")
    sub = parser.add_subparsers(dest="command", parser_class=cli.Parser)
    importlib.import_module(protocols.command_module(module)).register(sub)
    return list(sub.choices)


def _choices(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))


WORDS = [(m, w) for m in cli.COMMAND_MODULES for w in _registered(m)]


def test_registers_names_every_word_a_module_registers_under_another_name():
    for module in cli.COMMAND_MODULES:
        words = _registered(module)
        if "." in module:  # a protocol's own command module: its word needs the whole parser
            assert cli._modules(words[:1]) == cli.COMMAND_MODULES
        else:
            assert tuple(words) == cli.REGISTERS.get(module, (module,)), module


@pytest.mark.parametrize(("module", "word"), WORDS, ids=[w for _, w in WORDS])
def test_a_commands_parser_is_the_whole_clis(module, word):
    full, lazy = _choices(cli.build_parser()), _choices(cli.build_parser([word, "--help"]))
    assert lazy[word].format_help() == full[word].format_help()
    # only the module's own commands (a protocol's own command module: all, as for help)
    assert set(lazy) == (set(full) if "." in module else set(_registered(module)))


@pytest.mark.parametrize(("argv", "word"), [
    (["status"], "status"),
    (["--prefix", "p", "status", "--json"], "status"),
    (["--prefix=p", "--runtime", "netns", "up", "x"], "up"),
    (["--runtime=compose", "exec", "h1", "--", "ls"], "exec"),
    (["--pre", "p", "status"], None),  # an abbreviation argparse takes: the whole parser
    (["-h"], None), (["--version"], None), ([], None), (["--prefix"], None),
])
def test_the_command_word_past_the_global_options(argv, word):
    assert cli.command_word(argv) == word


@pytest.mark.parametrize("argv", [["--help"], ["no-such-command"], ["--pre", "p", "status"],
                                  [next(m for m in cli.COMMAND_MODULES if "." in m)]])
def test_help_and_unknown_words_get_every_command(argv):
    assert cli._modules(argv) == cli.COMMAND_MODULES
    assert set(_choices(cli.build_parser(argv))) == {w for _, w in WORDS}


def test_a_call_imports_only_its_commands_module():
    code = ("import json, sys; from netstack import cli; cli.build_parser(['sim', '--help']); "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('netstack.commands.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    commands = {m.split(".")[2] for m in json.loads(out.stdout)} & set(cli.COMMAND_MODULES)
    assert commands == {"sim"}


def test_an_unknown_command_is_refused_with_every_choice(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-command"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'no-such-command'" in err and "'up'" in err and "'sim'" in err
