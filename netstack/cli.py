"""The ``netstack`` command line.

Each subcommand lives in ``netstack/commands/<name>.py`` with ``register(subparsers)``;
this module only assembles them, so later work adds a command without touching the rest.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from . import __version__
from .errors import CommandError

#: Subcommand modules, in the order ``--help`` lists them.
COMMAND_MODULES = ("demo", "testbed", "lg", "corruptd", "dta", "onepipe", "tcd", "tcsack", "sim", "bench", "dissect")

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

Run 'netstack COMMAND --help' for a command's options. Docs: docs/ in the source tree."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="netstack", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"netstack {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for name in COMMAND_MODULES:
        importlib.import_module(f"netstack.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except CommandError as exc:
        print(f"netstack {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
