"""``netstack demo``: the main job — LinkGuardian masking corruption loss on real traffic."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import CommandError
from .common import add_json, finish, print_json, stdout_to_stderr


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo", help="LinkGuardian off vs on over a corrupting link, real traffic, one table (~1 min)",
        description="Bring up the default topology, corrupt the sw1-sw2 link, run the same real kernel traffic "
                    "(sequenced UDP, TCP bulk, 143 B request/response flows) with LinkGuardian off, on, and in NB "
                    "mode, print a table (actual loss, effective loss, goodput, reordering, FCT percentiles), "
                    "write JSON to the results directory and tear everything down.",
    )
    p.add_argument("--corrupt", type=float, default=1e-2, help="corruption rate on sw1>sw2 (default: %(default)g)")
    p.add_argument("--datagrams", type=int, default=5000, help="sequenced UDP datagrams per phase")
    p.add_argument("--flows", type=int, default=1500, help="request/response flows per phase")
    p.add_argument("--tcp-seconds", type=float, default=4.0, help="TCP bulk transfer length per phase")
    p.add_argument("--copies", type=int, help="retransmitted copies N (default: Eq. 2 for target 1e-8)")
    p.add_argument("--results-dir", default="results")
    p.add_argument("--prefix", default=None,
                   help="the prefix of the testbed it brings up and tears down (default: a fresh one)")
    add_json(p, "the result document (phases, table, where the JSON went)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..demo import run_demo

    if os.geteuid() != 0:
        raise CommandError("needs root (namespaces, veths, nft): run with sudo")
    if not 0 < args.corrupt < 1:
        raise CommandError("--corrupt must be between 0 and 1")
    from ..progress import Reporter

    rep = Reporter("demo")
    json_out = getattr(args, "json", False)
    with stdout_to_stderr(json_out):
        out = run_demo(corrupt=args.corrupt, datagrams=args.datagrams, flows=args.flows,
                       tcp_seconds=args.tcp_seconds, copies=args.copies, results_dir=args.results_dir,
                       prefix=getattr(args, "prefix", None), say=lambda m: print(m, file=sys.stderr, flush=True))
    if json_out:
        print_json(out)
    else:
        print(out["table"])
        print(f"\nwrote {out['path']}")
    rep.summary(summary_line(out, args.corrupt, rep.took()))
    return finish(out)


def summary_line(out: dict[str, Any], corrupt: float, took: str) -> str:
    """``netstack demo``'s closing line: each phase's effective loss and goodput, where the JSON is."""
    phases = ", ".join(f"{p['phase']} {p['udp']['loss']:.1e} loss / {p['tcp']['mbps']:.1f} Mbit/s"
                       for p in out.get("phases", []))
    return f"{len(out.get('phases', []))} phases over {corrupt:g} corruption in {took}: {phases}; JSON in {out['path']}"
