"""``netstack tcsack``: T/C-SACK, go-back-N or kernel TCP between two hosts of a running testbed."""

from __future__ import annotations

import argparse
import json

from ..errors import CommandError

EPILOG = """\
examples:
  netstack tcsack transfer                                   4 MB h1 -> h2 with T/C-SACK (T 2 ms, N 16)
  netstack tcsack transfer --proto gbn --bytes 1MB           the go-back-N baseline (RoCE RC's recovery)
  netstack tcsack transfer --proto tcp                       the kernel's TCP, for reference
  netstack impair sw1-sw2 --loss 2e-2 --direction both       then again: what loss does to each

Both ends run 'python -m netstack.tcsack send|recv' in the hosts' namespaces (run those yourself
with 'netstack exec' for other options); the receiver's SHA-256 of what arrived is checked
against the sender's. docs/tcsack.md explains the protocol and the ACK format."""


def register(sub: argparse._SubParsersAction) -> None:
    from ..tcsack.live import parse_rate_arg, parse_size_arg
    from ..tcsack.params import TcsParams

    p = sub.add_parser("tcsack", help="T/C-SACK transfers between two hosts of the running testbed",
                       description="Window-less reliable transport over UDP (An Updated ACK mechanism based on "
                                   "RDMA, §2): the sender paces at a preset rate, the receiver ACKs when T has passed "
                                   "or N packets arrived, the sender resends what an ACK shows missing.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    tsub = p.add_subparsers(dest="tcsack_cmd", metavar="ACTION", required=True)
    t = tsub.add_parser("transfer", help="move bytes from one host to another and report goodput and resends")
    t.add_argument("--proto", choices=["tcsack", "gbn", "tcp"], default="tcsack",
                   help="tcsack (default), gbn (go-back-N, RoCE RC) or tcp (the kernel's)")
    t.add_argument("--src", default="h1", help="sending host (default %(default)s)")
    t.add_argument("--dst", default="h2", help="receiving host (default %(default)s)")
    t.add_argument("--bytes", type=parse_size_arg, default=4_000_000, help="bytes to move (default 4MB)")
    t.add_argument("--rate", type=parse_rate_arg, default=TcsParams.rate_bps,
                   help="preset sending rate, e.g. 80Mbit (default: the engines' default)")
    t.add_argument("--t-ms", type=float, default=TcsParams.t_ns / 1e6, help="T: ACK at least this often (ms)")
    t.add_argument("--n", type=int, default=TcsParams.n, help="N: ... or after this many packets")
    t.add_argument("--payload", type=int, default=TcsParams.payload, help="bytes per packet")
    t.add_argument("--seed", type=int, default=1, help="seed of the pseudo-random data")
    t.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")
    t.add_argument("--prefix", default="ns")
    t.add_argument("--json", action="store_true", help="print both ends' JSON")
    t.set_defaults(func=cmd_transfer)


def cmd_transfer(args: argparse.Namespace) -> int:
    from ..runtime import RuntimeErrorNS, load_state
    from ..tcsack.control import TransferError, transfer

    if args.bytes < 1:
        raise CommandError("--bytes must be at least 1")
    try:
        state = load_state(args.prefix)
        out = transfer(state, args.proto, args.bytes, src=args.src, dst=args.dst, rate_bps=args.rate,
                       t_ms=args.t_ms, n=args.n, payload=args.payload, seed=args.seed, timeout=args.timeout)
    except (RuntimeErrorNS, TransferError) as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        c = out["sender"].get("counters", {})
        resent = c.get("retx_sent", c.get("retransmits", "-"))
        print(f"{out['proto']} {out['src']} -> {out['dst']}: {out['bytes']:,} B in {out['seconds']:.3f} s, "
              f"{(out['goodput_bps'] or 0) / 1e6:.1f} Mbit/s, resent {resent}, "
              f"{'intact' if out['ok'] else 'NOT intact (SHA-256 differs)'}")
    return 0 if out["ok"] else 1
