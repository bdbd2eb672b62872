"""``netstack ls``: every testbed of this machine, whoever started it (like containerlab's
``inspect --all``). It only reads: another user's testbed is never changed."""

from __future__ import annotations

import argparse
from typing import Any

from .common import add_json, print_json

EPILOG = """\
states:
  running   every namespace there, every daemon alive
  degraded  a daemon is not alive ('netstack status --prefix P' says which)
  broken    some of its namespaces are gone
  stale     all of its namespaces are gone: 'netstack down --prefix P' removes what is left
  no-state  a run directory without state: 'netstack up' is building it, or a crash left it
  orphan    netstack namespaces whose run state is not under this run directory (another
            NETSTACK_RUN_DIR, or lost: 'netstack down --prefix P' as whoever started it)
  starting  (containers) some nodes are still joining"""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("ls", help="list the running testbeds: prefix, topology, age, owner, daemons alive",
                       description="List every testbed of this machine: namespace runs ('netstack up', under "
                                   "NETSTACK_RUN_DIR or /run/netstack), netstack namespaces without a run state "
                                   "there, and container deployments (--runtime picks which). Only reads.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_json(p, "the list (one object per testbed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..runtime import testbeds

    found = testbeds()  # (a NETSTACK_RUNTIME that names no runtime: RuntimeErrorNS, exit 2)
    if args.json:
        print_json(found)
        return 0
    if not found:
        print("no netstack testbed is running ('netstack up')")
        return 0
    from ..bench.common import format_table

    print(format_table(["prefix", "runtime", "topology", "age", "owner", "daemons alive", "state"],
                       [_row(t) for t in found]))
    return 0


def _row(t: dict[str, Any]) -> list[Any]:
    d = t.get("daemons") or {}
    alive = "-" if not d else f"{'?' if d.get('alive') is None else d['alive']}/{d.get('total')}"
    return [t["prefix"], t["runtime"], t.get("topology") or "-", age_text(t.get("age_s")), owner_text(t.get("owner")),
            alive, t["state"]]


def age_text(seconds: float | None) -> str:
    """``42s``, ``5m12s``, ``3h04m``, ``2d05h``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def owner_text(owner: dict[str, Any] | None) -> str:
    if not owner:
        return "-"
    sudo = owner.get("sudo_user")
    return f"{owner['user']} (sudo: {sudo})" if sudo and sudo != owner["user"] else str(owner["user"])
