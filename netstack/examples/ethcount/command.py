"""``netstack ethcount enable|disable|status``: the example's command line.

A command module has one entry point, :func:`register`, which ``netstack.cli`` calls with the
top-level subparsers. The registry names this module (``commands=`` in netstack/protocols.py: a
dotted name is a module anywhere; a plain one is ``netstack/commands/<name>.py``). A command parses
its arguments, calls the control plug-in (:mod:`.control`) and prints: the logic stays there.

The command-line contract (docs/testbed.md "The command-line contract"): a command that works on a
running testbed takes ``--prefix`` and is marked ``acts_on_testbed`` (the CLI then refuses a
prefix whose namespaces are gone); one that changes or reports state takes ``--json`` and then
prints exactly one JSON document. Errors are raised, not printed: every ``NetstackError`` (the
control module's :class:`.control.EthCountError`, a daemon's refusal) reaches the user as one line
and exit status 2 (docs/architecture.md "Errors and control verbs").
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from netstack.errors import CommandError, ConfigError

from .engine import check_ethertype
from .header import DEFAULT_ETHERTYPE

#: the prefix of the example's own topology (netstack/examples/ethcount/ethcount.toml)
DEFAULT_PREFIX = "ec"

EPILOG = """\
examples:
  netstack up netstack/examples/ethcount/ethcount.toml        its ports count 0x88b5 from the start
  netstack ethcount status                                     every counted port of every switch
  netstack ethcount enable sw1 p-h2 --ethertype 0x0806 --egress   count ARP both ways on p-h2, from zero
  netstack ethcount disable sw1 p-h2"""


def ethertype(text: str) -> int:
    """``--ethertype``: an EtherType in hex (0x88b5) or decimal."""
    try:
        return check_ethertype(int(text, 0))
    except (ValueError, ConfigError) as exc:  # argparse prints this one as a usage error, exit 2
        problem = exc.problem if isinstance(exc, ConfigError) else "not an integer such as 0x88b5"
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}") from None


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``, with a daemon's socket gone (OSError) as a CommandError: one line, exit 2."""
    try:
        return fn(*args)
    except OSError as exc:
        raise CommandError(str(exc)) from None


def _testbed_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help="the running testbed's prefix (default %(default)s)")
    p.add_argument("--json", action="store_true", help=f"print {what} as one JSON document")
    # what netstack.commands.common.acts_on_testbed sets; a command module outside netstack/commands
    # does not import that package (only the CLI's own commands do: tests/test_architecture.py)
    p.set_defaults(acts_on_testbed=True)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ethcount", help="the worked example: count one EtherType's frames per switch port",
                       description="Count the frames of one EtherType a switch port receives (and, with --egress, "
                                   "sends), on a running testbed. The worked example of docs/extending.md.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="ethcount_cmd", metavar="ACTION", required=True)
    e = actions.add_parser("enable", help="count an EtherType on a switch port, from zero")
    e.add_argument("node", help="switch node, e.g. sw1")
    e.add_argument("port", help="its port (interface name), e.g. p-h1")
    e.add_argument("--ethertype", type=ethertype, default=DEFAULT_ETHERTYPE,
                   help=f"what to count (default {DEFAULT_ETHERTYPE:#06x})")
    e.add_argument("--egress", action="store_true", help="count what the port sends too")
    _testbed_options(e, "the counter's first status")
    e.set_defaults(func=cmd_enable)
    d = actions.add_parser("disable", help="stop counting on a switch port")
    d.add_argument("node")
    d.add_argument("port")
    _testbed_options(d, "the counter's last status")
    d.set_defaults(func=cmd_disable)
    s = actions.add_parser("status", help="every counted port of every switch")
    _testbed_options(s, "every switch's ethcount_status")
    s.set_defaults(func=cmd_status)


def cmd_enable(args: argparse.Namespace) -> int:
    from .control import enable

    out = _call(enable, args.prefix, args.node, args.port, args.ethertype, args.egress)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{args.node}/{out['port']} counts {out['ethertype']}" + (" both ways" if out["egress_counted"] else ""))
    return 0


def cmd_disable(args: argparse.Namespace) -> int:
    from .control import disable

    out = _call(disable, args.prefix, args.node, args.port)
    if args.json:
        print(json.dumps(out, indent=2))
    elif out.get("ethertype") is None:
        print(f"{args.node}/{args.port} counted nothing")
    else:
        print(f"{args.node}/{args.port} no longer counts {out['ethertype']} "
              f"({out['ingress']['frames']} frames in, {out['egress']['frames']} out)")
    return 0


def status_rows(out: dict[str, Any]) -> list[list[Any]]:
    """The status table's rows from :func:`.control.status`'s answer."""
    rows: list[list[Any]] = []
    for node, st in sorted(out.items()):
        if "error" in st:
            rows.append([node, "-", "error", st["error"], "", "", ""])
            continue
        for port, c in sorted(st["ports"].items()):
            egress = c["egress"] if c["egress_counted"] else {"frames": "-", "bytes": "-"}
            rows.append([node, port, c["ethertype"], c["ingress"]["frames"], c["ingress"]["bytes"],
                         egress["frames"], egress["bytes"]])
    return rows


def cmd_status(args: argparse.Namespace) -> int:
    from netstack.bench.output import format_table

    from .control import status

    out = _call(status, args.prefix)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    rows = status_rows(out)
    if not rows:
        print("no port counts anything ('netstack ethcount enable NODE PORT', or declare it in the topology)")
        return 0
    print(format_table(["node", "port", "ethertype", "rx frames", "rx bytes", "tx frames", "tx bytes"], rows))
    return 0


__all__ = ["cmd_disable", "cmd_enable", "cmd_status", "ethertype", "register", "status_rows"]
