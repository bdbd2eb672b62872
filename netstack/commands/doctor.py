"""``netstack doctor``: measure this machine and say which live experiments will be trustworthy here
(netstack/doctor.py measures and judges; this module parses and prints)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

DESCRIPTION = """\
Measure this machine and say which live experiments will be trustworthy on it: the scheduling delay
of a uvloop loop (the daemons), a plain asyncio loop and a blocking thread (the traffic tools);
how late asyncio.sleep of 0.1, 1 and 5 ms fires; the share of one core a busy loop gets; idle CPUs,
load and other netstack testbeds; and the capabilities live runs need (root, a throwaway network
namespace with a veth, an nftables netdev table and a netem qdisc, deleted again; docker, etcd,
tcpdump). Each experiment is held to the limits its own protocol timers set (docs/testbed.md
"netstack doctor"). Takes ~7 s (--quick: ~2 s). Exit 0: every live experiment is trustworthy here;
1: some is not; 2: usage."""

EPILOG = """\
examples:
  netstack doctor                 measure (~7 s), print the checks and the verdict per experiment
  netstack doctor --quick --json  ~2 s, one JSON document with every measurement and verdict"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="measure this machine: which live experiments will be trustworthy here",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="shorter measurements (~2 s instead of ~7 s), noisier")
    p.add_argument("--json", action="store_true", help="print one JSON document with every measurement and verdict")
    p.add_argument("--quiet", action="store_true", help="no progress lines (the summary line stays)")
    p.set_defaults(func=run)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, left-aligned (its cells are words, not numbers)."""
    cells = [list(headers), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def render(doc: Mapping[str, Any]) -> str:
    """The checks table and the verdict table, as printed on stdout."""
    cpu = doc["cpu"]
    head = (f"this machine: {cpu['usable_cpus']} CPUs, Linux {doc['caps']['python']['kernel']}; "
            f"{doc['mode']} measurement, {doc['seconds']:g} s")
    checks = _table(["check", "measured", "limit", "status"],
                    [[c["name"], c["measured"], c["limit"], c["status"]] for c in doc["checks"]])
    verdicts = _table(["experiment", "needs", "verdict", "why"],
                      [[e["title"], e["needs"], e["verdict"], "; ".join(e["reasons"])] for e in doc["experiments"]])
    return f"{head}\n\n{checks}\n\n{verdicts}"


def run(args: argparse.Namespace) -> int:
    from ..doctor import assess, measure, summary_line
    from ..progress import Reporter

    rep = Reporter("doctor", quiet=args.quiet)
    doc = assess(measure(quick=args.quick, say=rep))
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(render(doc))
    rep.summary(f"measured in {rep.took()}: {summary_line(doc)}")
    return int(doc["exit_code"])
