"""The ``netstack`` command line.

Each subcommand lives in ``netstack/commands/<name>.py`` with ``register(subparsers)``;
this module only assembles them, so later work adds a command without touching the rest.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from . import __version__
from .errors import CommandError

#: the environment variable ``--runtime`` sets (netstack.runtime.RUNTIME_ENV; not imported from
#: there so that ``--help`` stays light)
RUNTIME_ENV = "NETSTACK_RUNTIME"

#: Subcommand modules, in the order ``--help`` lists them.
COMMAND_MODULES = ("demo", "testbed", "lg", "corruptd", "dta", "onepipe", "tcd", "tcsack", "sim", "bench", "dissect",
                   "compose", "node", "keys", "fault", "fuzz", "capture", "link", "metrics", "wireshark", "doctor")

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="netstack", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"netstack {__version__}")
    parser.add_argument("--runtime", choices=["auto", "netns", "compose"], default=None,
                        help="which deployments commands look at: netns ('netstack up'), compose (containers of "
                             "docker-compose or Swarm, found by their labels), auto (default: a namespace run "
                             "of the prefix, else containers); also NETSTACK_RUNTIME")
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
    before = os.environ.get(RUNTIME_ENV)
    if args.runtime:
        os.environ[RUNTIME_ENV] = args.runtime  # read by netstack.runtime.load_state
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except CommandError as exc:
        print(f"netstack {args.command}: error: {exc}", file=sys.stderr)
        return 2
    finally:  # main() called in-process (tests, scripts) leaves the environment as it was
        if args.runtime:
            if before is None:
                os.environ.pop(RUNTIME_ENV, None)
            else:
                os.environ[RUNTIME_ENV] = before


if __name__ == "__main__":
    sys.exit(main())
