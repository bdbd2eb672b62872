"""``netstack bench``: benchmarks that write JSON and print a table with an in-run baseline."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Callable

from .. import protocols
from ..argtypes import positive_float, positive_int
from ..errors import CommandError
from .common import add_json, add_mode, finish, print_json, stdout_to_stderr

#: benchmark name -> (module, one-line description), in ``--help``'s order: the generic ones and each
#: protocol's, from the registry (netstack.protocols.benches; it imports nothing)
BENCHMARKS: dict[str, tuple[str, str]] = protocols.benches()


def register(sub: argparse._SubParsersAction) -> None:
    lines = "\n".join(f"  {name:<12} {desc}" for name, (_, desc) in BENCHMARKS.items())
    p = sub.add_parser(
        "bench", help="run a benchmark (writes JSON, prints a table)",
        description="Run a benchmark. Results go to RESULTS_DIR as JSON (and a table on stdout)."
                    f"\n\nbenchmarks:\n{lines}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("benchmark", nargs="?", choices=sorted(BENCHMARKS), help="which benchmark to run")
    p.add_argument("--compare", nargs=2, metavar=("OLD.json", "NEW.json"),
                   help="run nothing: print NEW/OLD for every number two result files of one benchmark share, "
                        "marking changes beyond --threshold in the wrong direction as WORSE")
    p.add_argument("--threshold", type=positive_float(), default=0.10,
                   help="with --compare: the relative change that counts (default: %(default)s, i.e. 10%%)")
    p.add_argument("--results-dir", default="results", help="where JSON results are written (default: %(default)s)")
    p.add_argument("--min-time", type=positive_float(), default=0.25,
                   help="seconds each rate is measured for (default: %(default)s)")
    p.add_argument("--only", action="append", metavar="NAME",
                   help="restrict to entries whose name contains NAME (repeatable)")
    p.add_argument("--duration", type=positive_float(), default=None, metavar="SECONDS",
                   help="seconds of offered load per measurement, for load benchmarks (default: the benchmark's)")
    p.add_argument("--sizes", default=None, metavar="N,N,...",
                   help="frame sizes in bytes, comma separated, for load benchmarks (default: the benchmark's)")
    p.add_argument("--rounds", type=positive_int(), default=None, metavar="N",
                   help="measure every path N times, alternating, and report medians, for load benchmarks "
                        "(default: the benchmark's)")
    add_mode(p, None, "only the virtual-time (sim) or only the live sections, for benchmarks that have both "
                      "(linkguardian, tcsack, onepipe, sim; default: both)")
    p.add_argument("--workers", type=positive_int(), default=None, metavar="N",
                   help="parallel processes for the virtual-time runs (default: one per CPU)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the virtual-time sweeps on a Dask cluster instead (e.g. tcp://host:8786; needs "
                        "pip install 'netstack[dask]'; also NETSTACK_SIM_SCHEDULER)")
    p.add_argument("--frames", type=positive_int(), default=None, metavar="N",
                   help="frames per point, for frame-count benchmarks (sim: fig8-paper; default: the benchmark's)")
    p.add_argument("--quick", action="store_true",
                   help="the smallest sizes that still run every section (smoke tests; tcd)")
    p.add_argument("--live", action="store_true",
                   help="also run the live-testbed section, off by default (tcd; needs root)")
    add_json(p, "the result document (the table goes to stderr)")
    p.set_defaults(func=run)


def module_args(args: argparse.Namespace) -> argparse.Namespace:
    """The arguments a benchmark module reads: its live/sim choice is ``runtime`` there (the
    modules predate ``--mode``), never the global ``--runtime auto|netns|compose``."""
    return argparse.Namespace(**{**vars(args), "runtime": args.mode})


def run(args: argparse.Namespace) -> int:
    from ..bench.summary import result_of

    if args.compare:
        if args.benchmark:
            raise CommandError("give a benchmark to run or --compare OLD.json NEW.json, not both")
        from ..bench.compare import main as compare

        started = time.time()
        with stdout_to_stderr(args.json):
            status = compare(args.compare[0], args.compare[1], args.threshold, args.results_dir)
        if args.json:
            print_json(result_of(args.results_dir, "compare", started)[1])
        return status
    if not args.benchmark:
        raise CommandError(f"which benchmark? one of {', '.join(sorted(BENCHMARKS))} "
                           "(or --compare OLD.json NEW.json)")
    module_name, _ = BENCHMARKS[args.benchmark]
    module = importlib.import_module(module_name)
    main: Callable[[argparse.Namespace], int] = module.main
    from ..progress import Reporter

    rep = Reporter("bench")
    started = time.time()
    from ..sim.sweep import SCHEDULER_ENV

    before = os.environ.get(SCHEDULER_ENV)
    if args.scheduler:
        os.environ[SCHEDULER_ENV] = args.scheduler  # every sweep the benchmark runs (netstack.sim.sweep)
    try:
        with stdout_to_stderr(args.json):
            status = main(module_args(args))
    except CommandError:
        raise
    except OSError as exc:
        print(f"netstack bench {args.benchmark}: {exc}", file=sys.stderr)
        status = 1
    finally:  # main() called in-process (tests) leaves the environment as it was
        if args.scheduler and before is None:
            os.environ.pop(SCHEDULER_ENV, None)
        elif args.scheduler:
            os.environ[SCHEDULER_ENV] = before
    if status == 2:  # the benchmark refused its arguments, before measuring anything
        return status
    from ..bench.summary import cross_check_failures, summary_line

    path, payload = result_of(args.results_dir, args.benchmark, started)
    if args.json:
        print_json(payload)
    rep.summary(summary_line(args.benchmark, status, rep.took(), path, payload))
    if payload is None:
        return status
    code = finish(payload, status)
    if code in (0, 3) and (failed := cross_check_failures(payload)):
        # a correctness cross-check failed (not a missed goal): a protocol bug whatever else the run
        # says (a benchmark judges its cross-checks on the rows that count), so the last line says
        # which, exit 1
        print("CROSS-CHECK FAILED: " + "; ".join(failed), file=sys.stderr, flush=True)
        return 1
    return code
