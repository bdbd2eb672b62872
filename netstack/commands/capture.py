"""``netstack capture``: capture one end of a link, to pcapng or as one line per frame."""

from __future__ import annotations

import argparse
import sys
import time

from ..argtypes import positive_float, positive_int
from .common import acts_on_testbed, add_json, print_json

EPILOG = """\
examples:
  netstack capture sw1-sw2                                 one line per frame on sw1's end, until Ctrl-C
  netstack capture sw1-sw2 --end B -w sw2.pcapng --count 1000
  netstack capture h1-sw1 --filter "udp port 40040" -w reports.pcapng --seconds 10
  tshark -r sw2.pcapng                                     (netstack wireshark --install: our headers decoded)

Both directions of that end are captured (what the node receives and what it sends). On a
switch-to-switch link the 4-byte software FCS stays at the end of each frame and a pcapng comment
marks it (ok or BAD). --filter is a tcpdump/BPF expression, compiled by tcpdump and run in the
kernel."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("capture", help="capture a link's frames (pcapng, or a live line per frame)",
                       description="Capture the frames on one end of LINK of the running testbed, from the "
                                   "kernel's capture path (AF_PACKET with an in-kernel BPF filter) in the node's "
                                   "namespace. With -w, frames go to a pcapng file and progress to stderr; "
                                   "without, one line per frame decoded with netstack's codecs.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("link", metavar="LINK", help="a link of the topology (e.g. sw1-sw2)")
    p.add_argument("--end", default=None, metavar="A|B",
                   help="which end: A (the link's a), B (its b) or a node of the link (default: A)")
    p.add_argument("-w", "--write", default=None, metavar="FILE.pcapng", help="write the frames to this pcapng file")
    p.add_argument("--count", type=positive_int("the count"), default=None, metavar="N", help="stop after N frames")
    p.add_argument("--seconds", type=positive_float("the time"), default=None, metavar="S", help="stop after S seconds")
    p.add_argument("--filter", default=None, metavar="BPF", help='a tcpdump filter expression, e.g. "udp port 40040"')
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    add_json(p, "what was captured (without -w, with each frame's decoded line) when it ends")
    p.set_defaults(func=run)
    acts_on_testbed(p)


def run(args: argparse.Namespace) -> int:
    from ..capture import PcapngOut, compile_filter, frames, open_socket, resolve, summary, writable
    from ..runtime import load_state

    state = load_state(args.prefix)
    tap = resolve(state, args.link, args.end)
    if args.write:
        writable(args.write)
    program = compile_filter(args.filter) if args.filter else None
    sock = open_socket(tap, program)
    out = None
    n = 0
    lines: list[str] = []  # --json without -w: the frames' lines go into the document
    t0 = last = time.monotonic()
    print(f"capturing on {tap.label} ({tap.link}, toward {tap.peer})"
          + (f", filter {args.filter!r}" if args.filter else "") + (" — Ctrl-C stops" if not args.count else ""),
          file=sys.stderr, flush=True)
    try:
        out = PcapngOut(args.write, tap) if args.write else None
        for cap in frames(sock, args.count, args.seconds):
            n += 1
            if out is None:
                if args.json:
                    lines.append(summary(tap, cap))
                else:
                    print(summary(tap, cap), flush=True)
                continue
            out.write(cap)
            if time.monotonic() - last >= 1.0:
                last = time.monotonic()
                print(f"captured {n} frames", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
        if out is not None:
            out.close()
    where = f" into {args.write}" if args.write else ""
    took = time.monotonic() - t0
    print(f"captured {n} frames on {tap.label} ({tap.link}) in {took:.1f} s{where}",
          file=sys.stderr if out is None or args.json else sys.stdout, flush=True)
    if args.json:
        doc = {"link": tap.link, "where": tap.label, "toward": tap.peer, "filter": args.filter, "frames": n,
               "seconds": round(took, 3), "file": args.write}
        print_json({**doc, "lines": lines} if out is None else doc)
    return 0
