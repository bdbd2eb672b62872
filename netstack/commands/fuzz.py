"""``netstack fuzz TARGET``: a fuzzing campaign against a live daemon (the campaigns: the
``netstack.fuzz`` package, one module per target)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import protocols
from ..errors import CommandError
from .common import acts_on_testbed, finish

#: the targets netstack.fuzz implements, from the registry (which imports nothing: ``--help`` imports neither
#: netstack.fuzz nor hypothesis)
TARGETS = tuple(protocols.fuzz_targets())
MISSING_HYPOTHESIS = ("netstack fuzz draws its frames from headers.strategies, which needs the hypothesis "
                      "package: pip install hypothesis (or ./install.sh, which installs the test extras)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "fuzz", help="send random and mutated frames into a live daemon's port and check it survived",
        description="A fuzzing campaign: random frames, valid frames of the target's protocols and mutations "
                    "of captured ones (headers.strategies, reproducible from --seed) into a live daemon's "
                    "port, interleaved with a sequenced UDP stream; then checks that every daemon is alive, "
                    "that the port's counters account for every frame, and the protocol's invariant. Brings "
                    "up its own topology under a unique prefix unless --prefix names a running one. "
                    "Exit status 0 only when every check passed.",
        epilog="targets: switch (edge port of sw1), linkguardian (both ends of sw1-sw2), dta (sw2's translator), "
               "onepipe (tor1's host and spine ports while 1Pipe processes scatter), tcsack (toward both ends of "
               "a T/C-SACK transfer), tcd (sw3's marked port toward r0 during a DCQCN flow). "
               "docs/faults.md "
               "('Fuzzing campaign') defines the accounting and records the campaigns run.",
    )
    p.add_argument("target", choices=TARGETS, metavar="TARGET", help=f"one of: {', '.join(TARGETS)}")
    p.add_argument("--frames", type=int, default=10_000, help="frames to inject (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0, help="seed of the frame generators (default: %(default)s)")
    p.add_argument("--rate", type=float, default=None,
                   help="injected frames per second (default: 5000, which the daemons of this 2-core VM sustain)")
    p.add_argument("--prefix", default=None,
                   help="fuzz the topology running under this prefix (it is left running) instead of bringing "
                        "one up")
    p.add_argument("--attack", default=None, metavar="NAME",
                   help="a targeted campaign instead of random frames, with its own oracle (netstack/fuzz/attacks.py): "
                        "linkguardian --attack hidden-tags; dta --attack flood; onepipe --attack cross-port-replay, "
                        "forged-controller; tcd --attack short-pauses")
    p.add_argument("--json", action="store_true", help="print the result object as JSON")
    p.add_argument("--keep", action="store_true", help="leave the topology it brought up running")
    p.set_defaults(func=run)
    acts_on_testbed(p)  # (with --prefix: without, it brings up a fresh one)


def run(args: argparse.Namespace) -> int:
    try:
        import hypothesis  # noqa: F401  (headers.strategies builds on it)
    except ImportError:
        raise CommandError(MISSING_HYPOTHESIS) from None
    from .. import fuzz
    from ..progress import Reporter

    rep = Reporter("fuzz")
    opts = fuzz.Options(args.target, args.frames, args.seed, prefix=args.prefix, keep=args.keep,
                        rate=args.rate or fuzz.DEFAULT_RATE, out=sys.stderr, attack=args.attack)
    res = fuzz.run(opts)
    if args.json:
        print(json.dumps(res.to_dict(), indent=2))
    else:
        print(fuzz.table(res))
    rep.summary(summary_line(res, rep.took()))
    return finish(res.to_dict(), 0 if res.ok else 1)


def summary_line(res: Any, took: str) -> str:
    """``netstack fuzz``'s closing line: the target, the frames, how long, the verdict."""
    failed = [f"{c['where']} {c['check']}" for c in res.checks if not c["ok"]]
    verdict = (f"PASS ({len(res.checks)} checks)" if res.ok
               else f"FAIL ({len(failed)} of {len(res.checks)} checks: {'; '.join(failed)[:200]})")
    return (f"{res.target}: {res.sent} frames injected ({res.duration_s:.1f} s), {took} in all, seed {res.seed}, "
            f"prefix {res.prefix}: {verdict}")
