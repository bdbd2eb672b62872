"""``netstack link LINK down|up|flap``: take a link of the running testbed down, up, or flap it."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from ..argtypes import non_negative_float, positive_float, positive_int
from ..errors import CommandError
from .common import acts_on_testbed

EPILOG = """\
examples:
  netstack link sw1-sw2 down                    both ends down: no carrier, nothing crosses
  netstack link sw1-sw2 up
  netstack link sw1-sw2 flap --down-ms 200 --up-ms 800 --count 5
  netstack link h1-sw1 down --end B             only sw1's end (h1 loses carrier too)

A veth whose peer end is down has no carrier, so one end down stops the link both ways. The switch
daemons see the carrier go (their port counts link_down events and drops what it would send while
down) and resume when it returns; docs/faults.md says what each protocol does then."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("link", help="take a link down, up, or flap it (carrier loss on its veths)",
                       description="Set LINK's veth end(s) administratively down or up inside the nodes' "
                                   "namespaces, or flap it: down for --down-ms, up for --up-ms, --count times.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("link", metavar="LINK", help="a link of the topology (e.g. sw1-sw2)")
    p.add_argument("action", choices=["down", "up", "flap"], help="down, up, or flap")
    p.add_argument("--end", default="both", metavar="A|B|both",
                   help="which end: A (the link's a), B (its b), a node of the link, or both (default)")
    ms = positive_float("the time")
    p.add_argument("--down-ms", type=ms, default=None, metavar="D", help="flap: milliseconds down each time")
    p.add_argument("--up-ms", type=ms, default=None, metavar="U", help="flap: milliseconds up between downs")
    p.add_argument("--count", type=positive_int("the count"), default=1, metavar="N",
                   help="flap: how many times (default 1)")
    p.add_argument("--after-ms", type=non_negative_float("the time"), default=0.0, metavar="S",
                   help="flap: wait this long before the first down (default 0; a topology's [links.flap] start)")
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)
    acts_on_testbed(p)


def run(args: argparse.Namespace) -> int:
    from ..faults import link_ports, run_state, set_link

    if args.action != "flap" and (args.down_ms is not None or args.up_ms is not None or args.count != 1
                                  or args.after_ms):
        raise CommandError("--down-ms, --up-ms, --count and --after-ms go with 'flap'")
    if args.action == "flap" and (args.down_ms is None or args.up_ms is None):
        raise CommandError("flap needs --down-ms and --up-ms")
    link_ports(run_state(args.prefix), args.link, args.end)  # a bad link or end fails before any change
    if args.action != "flap":
        out = set_link(args.prefix, args.link, args.action == "up", args.end)
    else:
        out = _flap(args, set_link)
    if args.json:
        print(json.dumps(out, indent=2))
    elif args.action == "flap":
        print(f"{args.link}: flapped {out['flaps']} times ({args.down_ms:g} ms down, {args.up_ms:g} ms up), "
              f"now {_states(out['operstate'])}{switch_summary(out.get('switches', {}))}")
    else:
        print(f"{args.link}: {', '.join(out['ends'])} {args.action}; now {_states(out['operstate'])}"
              f"{switch_summary(out.get('switches', {}))}")
    return 0


def switch_summary(view: dict[str, dict[str, Any]]) -> str:
    """What the switch daemons at the link's ends counted (``faults.carrier_view``)."""
    said = []
    for end, c in view.items():
        if "error" in c:
            said.append(f"{end} {c['error']}")
        else:
            said.append(f"{end} carrier {'up' if c['carrier'] else 'down'}, link_down {c['link_down']}, "
                        f"carrier_drops {c['carrier_drops']}")
    return f"; switches: {'; '.join(said)}" if said else ""


def _flap(args: argparse.Namespace, set_link: Callable[..., dict[str, Any]]) -> dict[str, Any]:
    """Down, wait, up, wait, ``count`` times; the link is left up, also after Ctrl-C."""
    done = 0
    out: dict[str, Any] = {}
    if args.after_ms:
        time.sleep(args.after_ms / 1000)
    try:
        for i in range(args.count):
            set_link(args.prefix, args.link, False, args.end)
            time.sleep(args.down_ms / 1000)
            out = set_link(args.prefix, args.link, True, args.end)
            done = i + 1
            print(f"{args.link}: flap {done}/{args.count}", file=sys.stderr, flush=True)
            if done < args.count:
                time.sleep(args.up_ms / 1000)
    finally:
        if done < args.count:  # interrupted while down: never leave the link down
            out = set_link(args.prefix, args.link, True, args.end)
    return {**out, "flaps": done, "down_ms": args.down_ms, "up_ms": args.up_ms}


def _states(operstate: dict[str, str]) -> str:
    return ", ".join(f"{end} {state}" for end, state in operstate.items())
