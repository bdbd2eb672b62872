"""``netstack reproduce``: run each paper's experiments through the benches and write one report,
the paper's numbers beside ours, a computed verdict per claim (netstack/reproduce/)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from .. import protocols
from ..argtypes import positive_int
from .common import add_json, print_json

DESCRIPTION = """\
Run the five papers' experiments through the existing benchmarks ('netstack bench ...') and write
one self-contained HTML report: DIR/index.html (the commit, the date, this machine as 'netstack
doctor' measures it, the total run time, each paper's verdicts), one page per paper (each figure:
our plot with the paper's series overlaid where its numbers are known; each claim: the paper's
value and ours, the ratio and the scale factor, the runtime, the run's validity checks, and a
verdict computed from a stated tolerance: reproduced, shape only, not reproduced, not attempted),
and DIR/reproduce.json. The report needs no network access to view.

--quick (the default) finishes in under 15 minutes on 2 cores; --full runs the benchmarks at the
papers' sizes and may take hours (--workers / --scheduler spread their virtual-time sweeps). Live
sections need root; without it they are skipped and their claims say so. Each benchmark runs as a
child process into DIR/<paper>/<experiment>/ (its JSON, tables, plots and bench.log), so one that
fails costs only its own rows. Progress goes to stderr."""

EPILOG = """\
examples:
  netstack reproduce                       every paper, --quick, report in results/reproduce/
  netstack reproduce onepipe --full        one paper at its full sizes
  netstack reproduce all --out /tmp/r --json > r.json
  netstack reproduce --report-only --out docs/results   rebuild the HTML from results already there
  netstack ui --reports results/reproduce  browse the report (and a live testbed)

Exit status: 0 the report was written (whatever the verdicts), 2 usage, 130 interrupted."""


def register(sub: argparse._SubParsersAction) -> None:
    papers = list(protocols.reproduce_modules())
    p = sub.add_parser("reproduce", help="run the papers' experiments and write one report with a verdict per claim",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("papers", nargs="*", default=[], metavar="PAPER",
                   help=f"which papers: {', '.join(papers)} or all (default: all)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="small sizes, under 15 minutes for all five papers on 2 cores (the default)")
    size.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="the papers' sizes (hours)")
    p.set_defaults(mode="quick")
    p.add_argument("--out", default="results/reproduce", metavar="DIR",
                   help="where the report and every benchmark's output go (default: results/reproduce)")
    p.add_argument("--workers", type=positive_int(), default=None, metavar="N",
                   help="parallel processes for the benchmarks' virtual-time sweeps (default: one per CPU)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the virtual-time sweeps on a Dask cluster (tcp://host:8786; netstack[dask])")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: rebuild the report from the results already in DIR")
    add_json(p, "the report's JSON document (progress stays on stderr)")
    p.set_defaults(func=run)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from ..reproduce import session
    from ..sim.sweep import SCHEDULER_ENV

    if args.scheduler:
        os.environ[SCHEDULER_ENV] = args.scheduler  # the benches' children inherit it (netstack.sim.sweep)
    command = "netstack reproduce " + " ".join(shlex.quote(a) for a in sys.argv[2:]) \
        if sys.argv[1:2] == ["reproduce"] else "netstack reproduce"
    doc = session.run(args.papers, args.mode, Path(args.out), args.workers, args.report_only, command, _say)
    if args.json:
        print_json(doc)
    else:
        for paper in doc["papers"]:
            c = paper["counts"]
            print(f"{paper['name']:13} " + ", ".join(f"{n} {v}" for v, n in c.items()))
        print(f"report: {Path(args.out) / 'index.html'}")
    return 0
