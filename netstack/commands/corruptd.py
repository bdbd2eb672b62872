"""``netstack corruptd``: enable LinkGuardian on links found corrupting (LinkGuardian §3, App. C)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import CommandError
from .common import acts_on_testbed, add_json, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("corruptd", help="watch link corruption and enable LinkGuardian where needed",
                       description="Poll every switch-to-switch link's FCS-error rate (drops at the receiver over "
                                   "frames the sender put on the link, sliding window) and enable LinkGuardian, "
                                   "with N copies from Eq. 2, on a link that corrupts above the threshold. "
                                   "Runs until interrupted (or --duration).")
    p.add_argument("--threshold", type=float, default=1e-4, help="corruption rate that triggers protection")
    p.add_argument("--target", type=float, default=1e-8, help="target effective loss for Eq. 2")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    p.add_argument("--window", type=float, default=10.0, help="seconds of history the rate is measured over")
    p.add_argument("--min-frames", type=int, default=2000, help="frames needed before deciding")
    p.add_argument("--mode", choices=["blocking", "nb"], default="blocking")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    add_json(p, "the link directions it protected, when it stops")
    p.set_defaults(func=run)
    acts_on_testbed(p)


#: seconds between the "still watching" lines (corruptd may run for hours)
HEARTBEAT_S = 10.0


def run(args: argparse.Namespace) -> int:
    from ..linkguardian.control import enable_link
    from ..linkguardian.corruptd import CorruptionMonitor, run_corruptd
    from ..progress import Reporter

    rep = Reporter("corruptd")
    protected: list[str] = []

    def enable(prefix: str, link: str, **kwargs: Any) -> Any:
        out = enable_link(prefix, link, **kwargs)
        protected.append(f"{link} {kwargs.get('direction', '')}".strip())
        return out

    status = 0
    try:
        monitor = CorruptionMonitor(args.threshold, args.target, int(args.window * 1e9), args.min_frames)
        with rep.heartbeat(lambda: f"watching, {len(protected)} link direction(s) protected", every_s=HEARTBEAT_S):
            run_corruptd(args.prefix, monitor, interval_s=args.interval, mode=args.mode, duration_s=args.duration,
                         say=lambda m: print(m, file=sys.stderr, flush=True), enable=enable)
    except ValueError as exc:  # the monitor's or Eq. 2's own checks (a bad --threshold or --target)
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:  # the usual way to stop it: still say what it did
        status = 130
    if getattr(args, "json", False):
        print_json({"protected": protected, "interrupted": bool(status)})
    else:
        print(f"corruptd: protected {len(protected)} link direction(s)")
    rep.summary(f"watched for {rep.took()}{' (interrupted)' if status else ''}: protected "
                f"{len(protected)} link direction(s){': ' + ', '.join(protected) if protected else ''}")
    return status
