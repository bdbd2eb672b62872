"""``netstack onepipe``: 1Pipe on a running testbed (enable, disable, status), a live run of P
scattering processes, and the order checker for their logs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import CommandError

EPILOG = """\
examples:
  netstack up onepipe                                  2 ToRs, a spine, 4 hosts (docs/onepipe.md)
  netstack onepipe run --procs 8 --seconds 5 --out /tmp/op
  netstack onepipe check /tmp/op/*.jsonl               total order, FIFO, one ts per scattering, causality
  netstack onepipe run --procs 8 --seconds 5 --out /tmp/op --loss tor1-spine1:0.01
  netstack onepipe status                              barriers, inputs, beacons per switch

1Pipe ("1Pipe: Scalable Total Order Communication in Data Center Networks") gives every
scattering one timestamp; switches aggregate barriers with min, and a receiver delivers what
lies below the barrier, so every receiver sees one total order. docs/onepipe.md has the design
as built and the delivery-log format."""


def register(sub: argparse._SubParsersAction) -> None:
    from ..onepipe.params import OnePipeParams

    defaults = OnePipeParams()
    p = sub.add_parser("onepipe", help="1Pipe total-order scatterings: enable, status, run, check",
                       description="Best-effort 1Pipe on the running testbed: processes scatter messages that every "
                                   "receiver delivers in one total order, through barriers the switches aggregate.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    osub = p.add_subparsers(dest="onepipe_cmd", metavar="ACTION", required=True)
    e = osub.add_parser("enable", help="turn 1Pipe on in every switch (barrier aggregation, beacons)")
    e.add_argument("--t-beacon-ms", type=float, default=defaults.t_beacon_ns / 1e6,
                   help="beacon interval in ms (default %(default)g: the paper's 3 us, 1000x)")
    e.add_argument("--timeout-beacons", type=int, default=defaults.timeout_beacons,
                   help="an input silent for this many beacon intervals leaves the min (default %(default)s)")
    e.set_defaults(func=cmd_enable)
    d = osub.add_parser("disable", help="turn 1Pipe off in every switch")
    d.set_defaults(func=cmd_disable)
    s = osub.add_parser("status", help="every switch's 1Pipe inputs, barriers and beacons")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)
    r = osub.add_parser("run", help="P processes scatter concurrently for S seconds; each writes DIR/<process>.jsonl")
    r.add_argument("--procs", type=int, required=True, metavar="P", help="how many 1Pipe processes")
    r.add_argument("--seconds", type=float, required=True, metavar="S", help="how long they scatter")
    r.add_argument("--out", required=True, metavar="DIR", help="directory for the logs (created)")
    r.add_argument("--loss", action="append", default=[], metavar="LINK:RATE",
                   help="drop this share of the link's frames, both directions, during the run (repeatable)")
    r.add_argument("--rate", type=float, default=100.0, help="scatterings per second per process (default 100)")
    r.add_argument("--fanout", type=int, default=2, help="destinations per scattering (default 2)")
    r.add_argument("--size", type=int, default=64, help="bytes per message (default 64; >1400 fragments)")
    r.add_argument("--drain", type=float, default=1.0, help="seconds to keep receiving after the last send")
    r.add_argument("--seed", default="1", help="seed of the destinations drawn")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    from ..onepipe import check

    c = osub.add_parser("check", help=check.CHECK_HELP, description=check.CHECK_DESCRIPTION)
    check.add_check_arguments(c)
    c.set_defaults(func=cmd_check)
    for q in (e, d, s, r):
        q.add_argument("--prefix", default="op", help="the running testbed's prefix (default %(default)s)")
    r.set_defaults(func=cmd_run)


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    from ..io.control import ControlError
    from ..onepipe.control import OnePipeControlError
    from ..runtime import RuntimeErrorNS

    try:
        return fn(*args, **kwargs)
    except (RuntimeErrorNS, OnePipeControlError, ControlError, OSError) as exc:
        raise CommandError(str(exc)) from None


def _ack_ratio() -> int:
    """The default ACK timeout in beacon intervals (20)."""
    from ..onepipe.params import OnePipeParams

    d = OnePipeParams()
    return d.ack_timeout_ns // d.t_beacon_ns


def cmd_enable(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..onepipe.control import enable_all
    from ..onepipe.params import OnePipeParams

    try:
        t = round(args.t_beacon_ms * 1e6)
        # the ACK timeout follows T_beacon (its default ratio), or a T_beacon above it would fail
        ratio = _ack_ratio()
        params = OnePipeParams(t_beacon_ns=t, timeout_beacons=args.timeout_beacons, ack_timeout_ns=max(1, t * ratio))
    except ConfigError as exc:
        raise CommandError(str(exc)) from None
    done = _call(enable_all, args.prefix, params)
    for sw, r in done.items():
        dirs = r["directions"]
        print(f"1Pipe enabled on {sw}: up {', '.join(p for p in sorted(dirs) if dirs[p] == 'up') or '-'}; "
              f"down {', '.join(p for p in sorted(dirs) if dirs[p] == 'down') or '-'}")
    print(f"T_beacon {params.t_beacon_ns / 1e6:g} ms, input timeout {params.input_timeout_ns / 1e6:g} ms")
    return 0


def cmd_disable(args: argparse.Namespace) -> int:
    from ..onepipe.control import disable_all

    for sw, was in _call(disable_all, args.prefix).items():
        print(f"{sw}: {'1Pipe disabled' if was else '1Pipe was not enabled'}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ..bench.common import format_table
    from ..onepipe.control import status_all

    st = _call(status_all, args.prefix)
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    if all(v is None for v in st.values()):
        print("1Pipe is not enabled ('netstack onepipe enable')")
        return 0
    rows = []
    for sw, status in st.items():
        if status is None:
            rows.append([sw, "-", "off", *[""] * (len(STATUS_COLS) - 1)])
            continue
        for port, p in sorted(status.get("ports", {}).items()):
            rows.append([sw, port, *port_row(p)])
    print(format_table(["switch", "port", *STATUS_COLS], rows))
    print("(inputs/live: per process on an edge port, the port on a fabric port; barrier: the lowest any "
          "output of the port carried, in the switch's clock)")
    return 0


STATUS_COLS = ["direction", "inputs", "live", "barrier_ns", "rx", "beacons_rx", "stamped", "beacons_tx", "timeouts",
               "backwards", "late_fwd", "dropped"]


def port_row(p: dict[str, Any]) -> list[Any]:
    """One port of ``onepipe_status`` as a table row (``STATUS_COLS``)."""
    c = p.get("counters", {})
    ins = p.get("inputs", {}).values()
    barriers = [o["barrier"] for o in p.get("outputs", {}).values() if o.get("barrier") is not None]
    dropped = sum(c.get(k, 0) for k in ("malformed", "unroutable", "valley", "table_full", "beacon_drops"))
    return [p.get("direction", ""), len(ins), sum(1 for i in ins if i.get("live")), min(barriers) if barriers else "-",
            c.get("rx", 0), c.get("beacons_rx", 0), c.get("stamped", 0), c.get("beacons_tx", 0),
            sum(i.get("timeouts", 0) for i in ins), c.get("barrier_backwards", 0), c.get("late_forwarded", 0), dropped]


def cmd_run(args: argparse.Namespace) -> int:
    import sys

    from ..onepipe.runner import run

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.seconds <= 0 or args.rate <= 0 or args.fanout < 1 or args.size < 8 or args.drain < 0:
        raise CommandError("--seconds and --rate must be positive, --fanout at least 1, --size at least 8 bytes")
    out = _call(run, args.prefix, procs=args.procs, seconds=args.seconds, out=args.out, loss=args.loss,
                rate=args.rate, fanout=args.fanout, size=args.size, drain=args.drain, seed=args.seed, say=say)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    from ..bench.common import format_table

    procs = sorted(out["processes"].items(), key=lambda x: int(x[0][1:]))  # p1, p2, ..., p10
    rows = [[p, s["messages_sent"], s["delivered"], s["send_failed"], s["counters"].get("late_dropped", ""),
             s["counters"].get("beacons_sent", "")] for p, s in procs]
    print(format_table(["process", "sent", "delivered", "send_failed", "late_dropped", "beacons"], rows))
    print(f"{out['messages_sent']} messages sent, {out['delivered']} delivered, {out['send_failed']} reported lost "
          f"({out['unaccounted']} unaccounted); logs in {out['out']}\n"
          f"check the order: netstack onepipe check {out['out']}/*.jsonl")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ..onepipe.check import run_check

    return run_check(args)
