"""``netstack dask up|status|down``: a Dask cluster on stand-in machines, for ``netstack sim --scheduler``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import add_json, print_json

EPILOG = """\
examples:
  sudo netstack dask up                          a scheduler and 2 workers, each on a machine of its own
  sudo netstack dask up --workers 3 --prefix dk  another lab beside it (its own prefix, LAN and port space)
  sudo netstack dask status                      the machines, their processes, the workers connected
  netstack sim lg-testbed --scenario lg-stream --seeds 1-8 --scheduler tcp://10.250.0.2:8786
  sudo netstack dask down                        everything it made; nothing there is not an error

A machine is a network namespace with an address on the lab's LAN, a hostname and a directory of its
own (/var/lib/netstack-lab/PREFIX/MACHINE); this host is on the LAN too (interface nlPREFIX), so the
sweep runs here as the Dask client. Real machines: docs/sim.md "Across machines: a Dask cluster"."""


def register(sub: argparse._SubParsersAction) -> None:
    from ..sim.cluster import DEFAULT_PORT, DEFAULT_PREFIX, DEFAULT_TIMEOUT_S

    p = sub.add_parser("dask", help="a Dask cluster on stand-in machines (namespaces) for 'sim --scheduler'",
                       description="A Dask scheduler and workers, each on a stand-in machine of its own (a network "
                                   "namespace, hostname and working directory on a LAN this host is on): try "
                                   "'netstack sim --scheduler' across machines before you have several (root).",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    dsub = p.add_subparsers(dest="dask_command", metavar="SUBCOMMAND")
    u = dsub.add_parser("up", help="make the machines, start the scheduler and the workers, wait for them",
                        description="Make machines 'sched' and w1..wN, start 'dask scheduler' on sched and one "
                                    "'dask worker' (one process, one thread) on each worker machine, and wait until "
                                    "the scheduler has every worker. Prints the scheduler's address and a sweep to "
                                    "run on it. A cluster that does not come up is taken down, its logs' tails "
                                    "on stderr.",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    u.add_argument("--workers", type=int, default=2, help="worker machines (default: %(default)s)")
    u.add_argument("--prefix", default=DEFAULT_PREFIX,
                   help="the lab's name: namespaces PREFIX-sched, PREFIX-w1... (default: %(default)s)")
    u.add_argument("--subnet", default=None, metavar="CIDR",
                   help="the LAN (default: the first free /24 of 10.250.0.0/16)")
    u.add_argument("--port", type=int, default=DEFAULT_PORT, help="the scheduler's port (default: %(default)s)")
    u.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                   help="how long to wait for every worker (default: %(default)s)")
    add_json(u, "the cluster (scheduler address, machines, pids, logs)")
    u.set_defaults(func=cmd_up)
    s = dsub.add_parser("status", help="the machines, their processes and the workers the scheduler has",
                        description="The lab's machines and whether their processes run, and the workers the "
                                    "scheduler has (asked over the LAN). Exit 1 when the scheduler does not "
                                    "answer or has fewer workers than the lab started.")
    s.add_argument("--prefix", default=DEFAULT_PREFIX, help="the lab (default: %(default)s)")
    add_json(s, "the status")
    s.set_defaults(func=cmd_status)
    d = dsub.add_parser("down", help="stop every process of the lab and remove its machines (idempotent)",
                        description="Stop the lab's processes (SIGTERM, then SIGKILL), remove its namespaces, host "
                                    "interface and directories. With no such lab there is nothing to do: exit 0, "
                                    "so a script can always run it.")
    d.add_argument("--prefix", default=DEFAULT_PREFIX, help="the lab (default: %(default)s)")
    add_json(d, "what was removed")
    d.set_defaults(func=cmd_down)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def cmd_up(args: argparse.Namespace) -> int:
    from ..lab import terminate_as_interrupt
    from ..sim import cluster

    with terminate_as_interrupt():  # SIGTERM takes a half-made cluster down, as Ctrl-C does
        doc = cluster.up(args.prefix, args.workers, subnet=args.subnet, port=args.port, timeout_s=args.timeout,
                         say=_say)
    if args.json:
        print_json(doc)
        return 0
    workers = [m for m in doc["machines"] if m["role"] == "worker"]
    print(f"dask lab {doc['prefix']}: scheduler {doc['scheduler']} on {cluster.SCHEDULER}, "
          f"{len(workers)} worker(s): " + ", ".join(f"{m['name']} {m['address']} (pid {m['pid']})" for m in workers))
    print(f"run a sweep on it:\n  {doc['sweep']}")
    print(f"then: netstack dask status --prefix {doc['prefix']}; netstack dask down --prefix {doc['prefix']}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ..sim import cluster

    doc = cluster.status(args.prefix)
    if args.json:
        print_json(doc)
    else:
        _print_status(doc)
    if not doc["ok"]:
        print(f"dask lab {doc['prefix']}: " + (doc["error"] or f"{len(doc['workers'])} of "
                                                f"{doc['expected_workers']} worker(s) connected"), file=sys.stderr)
        return 1
    return 0


def _print_status(doc: dict[str, Any]) -> None:
    from ..bench.common import format_table

    print(f"dask lab {doc['prefix']}: scheduler {doc['scheduler']} "
          f"({'answering' if doc['answering'] else 'not answering'}), LAN {doc['subnet']}, this host "
          f"{doc['host_address']} on {doc['host_interface']}")
    by_host = {w["host"]: w for w in doc["workers"]}
    rows = []
    for m in doc["machines"]:
        w = by_host.get(m["address"])
        connected = "-" if m["role"] == "scheduler" else ("yes" if w else "no")
        rows.append([m["name"], m["role"], m["netns"], m["address"], m["pid"], "yes" if m["alive"] else "no",
                     connected, w["processing"] if w else "-", m["log"]])
    print(format_table(["machine", "role", "namespace", "address", "pid", "alive", "connected", "tasks", "log"], rows))


def cmd_down(args: argparse.Namespace) -> int:
    from ..sim import cluster

    removed = cluster.down(args.prefix)
    if args.json:
        print_json({"prefix": args.prefix, "removed": removed})
    elif removed:
        print(f"dask lab {args.prefix} down: removed " + ", ".join(removed))
    else:
        print(f"no dask lab {args.prefix}: nothing to take down")
    return 0
