"""The ``netstack`` command line.

Each subcommand lives in ``netstack/commands/<name>.py`` with ``register(subparsers)``;
this module only assembles them, so later work adds a command without touching the rest.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__, protocols
from .errors import NetstackError

#: the environment variable ``--runtime`` sets (netstack.runtime.RUNTIME_ENV; not imported from
#: there so that ``--help`` stays light)
RUNTIME_ENV = "NETSTACK_RUNTIME"

#: Subcommand modules, in the order ``--help`` lists them: the generic ones and each protocol's, from
#: the registry (netstack.protocols.commands; it imports nothing)
COMMAND_MODULES = protocols.commands()

DESCRIPTION = """\
netstack runs five datacenter-networking research systems as real software on one Linux
box: LinkGuardian (link-local retransmission that masks corruption loss), 1Pipe (total-order
communication via switch-aggregated barriers), TCD (ternary congestion detection under PFC),
DTA (telemetry reports turned into RDMA writes at the collector's ToR) and T/C-SACK
(window-less, time/count-triggered SACK transport). Userspace switches, hosts and a collector
exchange real frames over veth pairs between network namespaces."""

EPILOG = """\
examples:
  netstack bench headers               fast codecs vs Scapy, every header (JSON in results/)
  netstack dissect 0180c2000001...     dissect a frame given as hex
  netstack dissect --pcap capture.pcap dissect every frame of a capture
  netstack wireshark --install         install the Wireshark/tshark dissector plugin

Run 'netstack COMMAND --help' for a command's options. Docs: docs/ in the source tree."""


class _GivenStore(argparse._StoreAction):
    """argparse's plain ``store``, which also records that the option was given: a subcommand's
    ``--prefix`` must win over the global one only when given, not with its default."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        super().__call__(parser, namespace, values, option_string)
        namespace.given_options = {*getattr(namespace, "given_options", ()), self.dest}


class Parser(argparse.ArgumentParser):
    """Every parser of the CLI: argparse makes the subparsers (and theirs) of the top parser's
    class, so each command module's plain ``add_argument`` records what was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _GivenStore)
        self.register("action", "store", _GivenStore)


#: command modules that register words other than their own name (a test keeps this equal to what
#: each module registers): :func:`build_parser` imports only the module of the word it is given
REGISTERS = {"testbed": ("up", "down", "status", "exec", "impair")}
#: the global options that take a value, as ``--help`` spells them
_GLOBAL_VALUED = ("--runtime", "--prefix")


def command_word(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names, past the global options with their values; None when it names
    none, asks for help or the version, or spells a global option any other way (an abbreviation
    argparse would take): those need the whole parser."""
    it = iter(argv)
    for token in it:
        if token in _GLOBAL_VALUED:
            next(it, None)
        elif token.startswith(tuple(f"{o}=" for o in _GLOBAL_VALUED)):
            continue
        elif token.startswith("-"):
            return None
        else:
            return token
    return None


def _modules(argv: Sequence[str] | None) -> tuple[str, ...]:
    """Which command modules a parser for ``argv`` needs: the one whose command it names, else all
    (its help lists every command; an unknown word gets argparse's choices)."""
    word = None if argv is None else command_word(argv)
    # a protocol's own command module (a dotted name) registers words only its import tells
    mine = [m for m in COMMAND_MODULES if word in REGISTERS.get(m, () if "." in m else (m,))]
    return tuple(mine) if mine else COMMAND_MODULES


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line's parser. Given the arguments it is to parse, it imports only the module of
    the command they name: every command module together cost 0.35 s of CPU (439 modules) on each
    call of ``netstack``, whatever the command; without them (help, an unknown command), all."""
    parser = Parser(
        prog="netstack", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"netstack {__version__}")
    parser.add_argument("--runtime", choices=["auto", "netns", "compose"], default=None,
                        help="which deployments commands look at: netns ('netstack up'), compose (containers of "
                             "docker-compose or Swarm, found by their labels), auto (default: a namespace run "
                             "of the prefix, else containers); also NETSTACK_RUNTIME")
    parser.add_argument("--prefix", dest="global_prefix", default=None, metavar="PREFIX",
                        help="the testbed every command works on (also after the command; the command's own "
                             "--prefix wins)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands", parser_class=Parser)
    for name in _modules(argv):
        importlib.import_module(protocols.command_module(name)).register(sub)
    return parser


def resolve(args: argparse.Namespace) -> None:
    """After parsing: options a command takes after a REMAINDER positional (``exec NODE
    --prefix P -- CMD``), the deprecated ``--runtime live|sim`` of a subcommand as its ``--mode``,
    then the global ``--prefix`` where the command's own was not given."""
    late = getattr(args, "late_options", None)
    if late is not None:
        late(args)
    if getattr(args, "mode_alias", None) is not None:
        from .commands.common import apply_mode_alias

        apply_mode_alias(args)
    if args.global_prefix is not None and hasattr(args, "prefix") \
            and "prefix" not in getattr(args, "given_options", ()):
        args.prefix = args.global_prefix


def main(argv: list[str] | None = None) -> int:
    """The exit codes (docs/testbed.md "The command-line contract"): 0 ok, 1 not found or a
    failed check, 2 usage / configuration / no such testbed, 3 invalid run, 130 interrupted,
    141 the reader of stdout went away."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        # the standard recipe (Python docs, "Note on SIGPIPE"): no traceback, and point stdout at
        # /dev/null so that the interpreter's own flush at exit does not complain again
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass  # stdout is no file (main() called in-process): nothing flushes it at exit
        return 141


def _main(argv: list[str] | None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    before = os.environ.get(RUNTIME_ENV)
    if args.runtime:
        os.environ[RUNTIME_ENV] = args.runtime  # read by netstack.runtime.load_state
    try:
        resolve(args)
        if getattr(args, "acts_on_testbed", False):
            from .commands.common import refuse_stale

            refuse_stale(getattr(args, "prefix", None))
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except NetstackError as exc:
        # every error netstack explains (a protocol's, the runtime's, a daemon's refusal, a
        # command's own): one line and the class's exit code, here and not in each command
        print(f"netstack {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    finally:  # main() called in-process (tests, scripts) leaves the environment as it was
        if args.runtime:
            if before is None:
                os.environ.pop(RUNTIME_ENV, None)
            else:
                os.environ[RUNTIME_ENV] = before


if __name__ == "__main__":
    sys.exit(main())
