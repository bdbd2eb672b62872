"""``netstack tcsack``: T/C-SACK, go-back-N or kernel TCP between two hosts of a running testbed."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from typing import Any

from ..errors import CommandError
from .common import acts_on_testbed, finish, refuse_stale

EPILOG = """\
examples:
  netstack tcsack transfer                                   4 MB h1 -> h2 with T/C-SACK (T 2 ms, N 16)
  netstack tcsack transfer --proto gbn --bytes 1MB           the go-back-N baseline (RoCE RC's recovery)
  netstack tcsack transfer --proto tcp                       the kernel's TCP, for reference
  netstack impair sw1-sw2 --loss 2e-2 --direction both       then again: what loss does to each

  netstack tcsack recv --host h2 &                             one end at a time, every option
  netstack tcsack send --host h1 --dst 10.0.0.2 --bytes 8MB --rate 80Mbit

'transfer' runs both ends ('netstack tcsack send|recv' in the hosts' namespaces) and checks the
receiver's SHA-256 of what arrived against the sender's. 'send' and 'recv' run one end, in the
namespace of --host (or where the command runs: inside a host, with 'netstack exec'), show
progress on stderr and end with a one-line summary (--json: the end's JSON object).
'python -m netstack.tcsack send|recv' is the same, JSON only. docs/tcsack.md explains the
protocol and the ACK format."""


def register(sub: argparse._SubParsersAction) -> None:
    from ..argtypes import rate_bps, size_bytes
    from ..tcsack.live import add_end_arguments
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
    t.add_argument("--bytes", type=size_bytes, default=4_000_000, help="bytes to move (default 4MB)")
    # (None: the testbed's [tcsack] table, else the engines' default; netstack/tcsack/section.py)
    t.add_argument("--rate", type=rate_bps, default=None,
                   help=f"preset sending rate, e.g. 80Mbit (default: the topology's [tcsack] rate, else "
                        f"{TcsParams.rate_bps / 1e6:g}Mbit)")
    t.add_argument("--t-ms", type=float, default=None,
                   help=f"T: ACK at least this often, in ms (default: [tcsack] t, else {TcsParams.t_ns / 1e6:g})")
    t.add_argument("--n", type=int, default=None,
                   help=f"N: ... or after this many packets (default: [tcsack] n, else {TcsParams.n})")
    t.add_argument("--payload", type=int, default=None,
                   help=f"bytes per packet (default: [tcsack] payload, else {TcsParams.payload})")
    t.add_argument("--seed", type=int, default=1, help="seed of the pseudo-random data")
    t.add_argument("--timeout", type=float, default=120.0, help="give up after this many seconds")
    t.add_argument("--prefix", default="ns")
    t.add_argument("--json", action="store_true", help="print both ends' JSON")
    t.set_defaults(func=cmd_transfer)
    acts_on_testbed(t)
    for name, what in (("send", "the sending end of one transfer, in a host's namespace"),
                       ("recv", "the receiving end of one transfer, in a host's namespace")):
        e = tsub.add_parser(name, help=what, description=what.capitalize() + ". Progress goes to stderr; "
                            "the last stdout line is a one-line summary (--json: the end's JSON object). "
                            "Exit status 0 when the transfer finished.")
        add_end_arguments(e, name, progress_flag=False)
        e.add_argument("--host", default=None,
                       help="run in this host's namespace of the running testbed (default: where the command runs)")
        e.add_argument("--prefix", default="ns", help="the testbed's prefix, with --host (default %(default)s)")
        e.add_argument("--json", action="store_true", help="print the end's JSON object instead of the summary")
        if name == "send":
            e.add_argument("--quiet", action="store_true", help="no progress lines")
        e.set_defaults(func=cmd_end, cmd=name)


def cmd_transfer(args: argparse.Namespace) -> int:
    from ..runtime import load_state
    from ..tcsack.control import transfer

    if args.bytes < 1:
        raise CommandError("--bytes must be at least 1")
    from ..progress import Reporter

    rep = Reporter("tcsack transfer")
    state = load_state(args.prefix)
    given = {"rate_bps": args.rate, "t_ns": None if args.t_ms is None else round(args.t_ms * 1e6), "n": args.n,
             "payload": args.payload}
    params, source = transfer_params(state, given)
    with rep.heartbeat(f"{args.proto} {args.src} -> {args.dst}, {args.bytes:,} B"):
        out = transfer(state, args.proto, args.bytes, src=args.src, dst=args.dst, rate_bps=params.rate_bps,
                       t_ms=params.t_ns / 1e6, n=params.n, payload=params.payload, seed=args.seed,
                       timeout=args.timeout)
    out["params"] = {"rate_bps": params.rate_bps, "t_ns": params.t_ns, "n": params.n, "payload": params.payload,
                     "from": source}
    c = out["sender"].get("counters", {})
    resent = c.get("retx_sent", c.get("retransmits", "-"))
    line = (f"{out['proto']} {out['src']} -> {out['dst']}: {out['bytes']:,} B in {out['seconds']:.3f} s, "
            f"{(out['goodput_bps'] or 0) / 1e6:.1f} Mbit/s, resent {resent}, "
            f"{'intact' if out['ok'] else 'NOT intact (SHA-256 differs)'}")
    from ..tcsack.control import verdict_line

    if args.json:
        print(json.dumps(out, indent=2))
        rep.summary(line)  # (stdout stays pure JSON)
    else:
        print(line)
        print(verdict_line(out))
    if not out["ok"] and out["sender"].get("done"):
        # the transport says it delivered everything and the bytes differ: a protocol failure,
        # whatever the run's validity says
        print("FAILED: the receiver's bytes differ from the sender's (SHA-256)", file=sys.stderr, flush=True)
        return 1
    return finish(out, 0 if out["ok"] else 1)


def transfer_params(state: Any, given: dict[str, int | None]) -> tuple[Any, dict[str, str]]:
    """The transfer's TcsParams: each field from its flag (``given``, None where not given), else the
    testbed's ``[tcsack]`` table (its run state), else the engines' default; and where each came
    from (``"flag"``, ``"topology"``, ``"default"``). A bad flag value is a CommandError."""
    from ..tcsack.params import TcsParamError, TcsParams

    declared = state.sections.get("tcsack", {})
    values: dict[str, Any] = {}
    source = {}
    for name, value in given.items():
        if value is not None:
            values[name], source[name] = value, "flag"
        elif name in declared:
            values[name], source[name] = declared[name], "topology"
        else:
            source[name] = "default"
    try:
        return TcsParams(**values), source
    except TcsParamError as exc:
        raise CommandError(str(exc)) from None


def cmd_end(args: argparse.Namespace) -> int:
    from ..tcsack.live import check_end_arguments

    wrong = check_end_arguments(args)
    if wrong:
        raise CommandError(wrong)
    if args.cmd == "send":
        args.progress = not args.quiet
        if args.progress:
            print(f"{args.proto} send: {args.bytes:,} B to {args.dst}:{args.port} at {args.rate / 1e6:g} Mbit/s"
                  + (f" from {args.host}" if args.host else ""), file=sys.stderr, flush=True)
    try:
        if args.host is None:
            out = _run_end(args)
        else:
            with _host_netns(args.host, args.prefix):
                out = _run_end(args)
    except OSError as exc:
        raise CommandError(f"tcsack {args.cmd}: {exc.strerror or exc}") from None
    print(json.dumps(out) if args.json else _summary(out), flush=True)
    return finish(out, 0 if out.get("done", out.get("complete")) else 1)


def _run_end(args: argparse.Namespace) -> dict[str, Any]:
    from ..tcsack.live import run_end

    return run_end(args)


def _host_netns(host: str, prefix: str) -> contextlib.AbstractContextManager[None]:
    from ..runtime import load_state
    from ..topo.nsenter import in_netns

    refuse_stale(prefix)  # (--host is what makes this end act on the testbed)
    state = load_state(prefix)
    if host not in state.hosts or host not in state.namespaces:
        raise CommandError(f"{host!r} is not a host of the testbed {prefix!r} "
                           f"(hosts: {', '.join(state.hosts) or 'none'})")
    return in_netns(state.namespaces[host])


def _summary(out: dict[str, Any]) -> str:
    """One line: what moved, how fast, whether it finished (the JSON has the counters)."""
    proto, secs, sha = out.get("proto"), out.get("seconds") or 0.0, str(out.get("sha256", ""))[:16]
    if out.get("tool") == "tcsack-send":
        c = out.get("counters", {})
        resent = c.get("retx_sent", c.get("total_retrans", "-"))
        return (f"{proto} send: {out['bytes']:,} B in {secs:.3f} s, {(out.get('goodput_bps') or 0) / 1e6:.1f} "
                f"Mbit/s, resent {resent}, {'done' if out.get('done') else 'NOT done'}, sha256 {sha}...")
    peer = out.get("peer")
    src = f" from {peer[0]}:{peer[1]}" if isinstance(peer, list | tuple) and len(peer) == 2 else ""
    return (f"{proto} recv{src}: {out['bytes']:,} B in {secs:.3f} s, "
            f"{'complete' if out.get('complete') else 'INCOMPLETE'}, sha256 {sha}...")
