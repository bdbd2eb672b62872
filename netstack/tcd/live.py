"""TCD's end hosts on real sockets: ``python -m netstack.tcd send|recv``.

Run the receiver in one host's namespace and the senders in others' (``netstack exec``):

    python -m netstack.tcd recv --tcd
    python -m netstack.tcd send --dst 10.0.0.3 --flow 1 --mode tcd --bytes 1MB
    python -m netstack.tcd send --dst 10.0.0.3 --flow 2 --mode fixed --rate 20Mbit --seconds 3
    python -m netstack.tcd send --dst 10.0.0.3 --flow 3 --cc timely --mode tcd --bytes 1MB

The engines are sans-IO (``netstack.tcd.dcqcn.RateSender`` or, with ``--cc timely``,
``netstack.tcd.timely.TimelySender``, picked by ``netstack.tcd.cc``;
``netstack.tcd.np.TcdReceiver``, which answers TIMELY's ACK requests by itself); this shell owns
the sockets and the clock. The sender's socket is connected to the receiver's UDP port 40300 and
sends with IP ECN = ECT(0) (TOS 0x02 plus ``--dscp``) so that switches can mark;
``netstack.io.paced.run_sender`` paces it and feeds it the CNPs and ACKs that come back. The
receiver reads each datagram with its TOS byte (``IP_RECVTOS``), hands the engine the ECN bits
and the source, and sends the engine's CNPs and ACKs from port 40300 to each flow's source
address and port. Rates and times follow docs/architecture.md "Time and scale": ``--line-rate
40Mbit --time-scale 1000`` runs DCQCN's 40 Gbit/s parameters at 40 Mbit/s with its 50-55 us
timers at 50-55 ms (TIMELY's: its 10 Mbit/s step per 10 Gbit/s in proportion, T_low 50 ms,
T_high 500 ms). Each side prints progress on stderr and one JSON object on its last stdout line,
which carries ``sched``: the tool's own scheduling delay (:mod:`netstack.looplag`) while it sent
(from its start time) or received (from its first packet), so that a run can tell a starved end
host from a congested network (docs/tcd.md "Is a run valid?").
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import sys
import time
from typing import Any

from headers.errors import HeaderError
from headers.registry import UdpPort
from headers.tcd import Ecn
from netstack.argtypes import delay_ns, name_value, rate_bps, size_bytes
from netstack.engine import SendTo
from netstack.errors import ConfigError
from netstack.io.paced import (
    drain_with_tos,
    enable_recv_tos,
    open_pfc_listener,
    open_udp_sender,
    run_sender,
    wait_readable,
)
from netstack.io.pfcgate import PauseGate
from netstack.looplag import LagHistogram, ThreadSampler
from netstack.topo.model import parse_rate
from netstack.traffic import resolve_neighbour

from .cc import CCS, CcParams, CcSender, cc_mode, cc_params, make_sender
from .dcqcn import DcqcnParamError, DcqcnParams
from .np import TcdReceiver

PORT = int(UdpPort.TCD)
#: the sender starts measuring its scheduling delay this long before its first packet (the
#: scenario starts its 20 processes before a common zero: their start-up is not the run)
SCHED_LEAD_NS = 20_000_000
#: the CLI's modes: with TCD, without (``plain``, or the cc's own name), or a fixed rate
MODES = ("tcd", "plain", "dcqcn", "timely", "fixed")
DEFAULT_LINE_RATE = "40Mbit"
DEFAULT_TIME_SCALE = 1000.0


def params_of(args: argparse.Namespace) -> CcParams:
    """``--cc``'s parameters (DCQCN's for the receiver) scaled to ``--line-rate`` and
    ``--time-scale``, then ``--param`` overrides (DcqcnParamError / TimelyParamError for a bad one)."""
    return cc_params(getattr(args, "cc", "dcqcn"), args.line_rate, args.time_scale, **dict(args.param or ()))


def engine_mode(cc: str, mode: str) -> str:
    """The engine's mode for the CLI's ``--mode`` under ``--cc`` (DcqcnParamError if they do not go together)."""
    if mode in CCS and mode != cc:
        raise DcqcnParamError("mode", f"{mode} is not --cc {cc}'s: use --mode plain (or tcd, fixed)")
    if mode == "fixed":
        return "fixed"
    return cc_mode(cc, mode == "tcd")


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=PORT, help=f"the receiver's UDP port (default {PORT})")
    p.add_argument("--line-rate", type=rate_bps, default=parse_rate(DEFAULT_LINE_RATE),
                   help=f"the NIC's line rate the paper's 40 Gbit/s maps to (default {DEFAULT_LINE_RATE})")
    p.add_argument("--time-scale", type=float, default=DEFAULT_TIME_SCALE,
                   help="the paper's microsecond timers times this (default 1000: 55 us -> 55 ms)")
    p.add_argument("--param", type=name_value("a parameter field"), action="append", metavar="NAME=VALUE",
                   help="override a DcqcnParams field (TimelyParams with --cc timely) after scaling (e.g. "
                        "cnp_interval_ns=20000000); repeatable")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def add_send_arguments(p: argparse.ArgumentParser) -> None:
    """The sender's options (``python -m netstack.tcd send``, ``netstack tcd send``)."""
    _add_common(p)
    p.add_argument("--dst", required=True, help="the receiver's IPv4 address")
    p.add_argument("--flow", type=int, default=0, help="the flow id, 0-65535 (default 0)")
    p.add_argument("--cc", choices=CCS, default="dcqcn",
                   help="the congestion control: dcqcn (DCQCN's reaction point, CNPs) or timely (TIMELY, RTT "
                        "gradient from per-segment ACKs); default dcqcn")
    p.add_argument("--mode", choices=MODES, default="tcd",
                   help="tcd (the cc + TCD: hold on UE marks), plain (the cc alone: DCQCN cuts on every CNP, "
                        "TIMELY ignores the marks; 'dcqcn' and 'timely' say the same) or fixed (default tcd)")
    p.add_argument("--rate", type=rate_bps, default=None,
                   help="fixed mode's rate, or DCQCN's initial rate (default: the line rate)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--bytes", type=size_bytes, help="send this many bytes (UDP payload), e.g. 1MB")
    what.add_argument("--seconds", type=float, help="send for this long")
    p.add_argument("--burst", type=size_bytes, default=None, help="burst mode: this many bytes every --burst-period")
    p.add_argument("--burst-period", type=delay_ns, default=None, help="burst mode: e.g. 20ms")
    p.add_argument("--start-delay", type=float, default=0.0, help="seconds to wait before the first packet")
    p.add_argument("--start-at", type=float, default=None, metavar="SECONDS",
                   help="start at this CLOCK_MONOTONIC time instead (seconds; the namespaces share the clock, "
                        "so several senders started one by one begin together); overrides --start-delay")
    p.add_argument("--payload", type=int, default=1000, help="UDP payload bytes per packet, >= 16 (default 1000)")
    p.add_argument("--dscp", type=int, default=0, help="DSCP of the data packets (ECN is ECT(0)); default 0")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="give up after this long (default: start delay + --seconds + 10, or 300 with --bytes)")
    p.add_argument("--honour-pfc", action=argparse.BooleanOptionalAction, default=True,
                   help="act as a RoCE NIC: hold while the switch pauses this host (PFC class of --dscp, read "
                        "from --iface with an AF_PACKET socket; the kernel ignores PFC). Default on")
    p.add_argument("--iface", default="eth0", help="the host's interface, for --honour-pfc (default eth0)")


def add_recv_arguments(p: argparse.ArgumentParser) -> None:
    """The receiver's options (``python -m netstack.tcd recv``, ``netstack tcd recv``)."""
    _add_common(p)
    p.add_argument("--tcd", action=argparse.BooleanOptionalAction, default=True,
                   help="send CNP-UE for undetermined marks (TCD); --no-tcd: a plain DCQCN NP (CE only)")
    p.add_argument("--seconds", type=float, default=None, help="stop after this long")
    p.add_argument("--idle", type=float, default=2.0,
                   help="stop once no data arrived for this long, after the first packet (default 2 s)")
    p.add_argument("--wait", type=float, default=30.0, help="give up if no data arrives within this long (default 30)")
    p.add_argument("--expect", type=int, default=0, help="stop once this many flows are complete (default: off)")
    p.add_argument("--cnp-dscp", type=int, default=0, help="DSCP of the CNPs (default 0)")


def _check_send(args: argparse.Namespace) -> None:
    if not 0 <= args.flow <= 0xFFFF:
        raise DcqcnParamError("flow", f"must be in [0, 65535], got {args.flow}")
    if not 0 <= args.dscp <= 63:
        raise DcqcnParamError("dscp", f"must be in [0, 63], got {args.dscp}")
    if (args.burst is None) != (args.burst_period is None):
        raise DcqcnParamError("burst", "--burst and --burst-period go together")
    if args.seconds is not None and not args.seconds > 0:
        raise DcqcnParamError("seconds", f"must be above 0, got {args.seconds}")
    if args.start_delay < 0:
        raise DcqcnParamError("start_delay", f"must be >= 0, got {args.start_delay}")


def _sender(args: argparse.Namespace, params: CcParams, now: int) -> CcSender:
    cc = getattr(args, "cc", "dcqcn")
    return make_sender(cc, engine_mode(cc, args.mode), params, flow=args.flow, payload=args.payload,
                       size_bytes=args.bytes, duration_ns=None if args.seconds is None else int(args.seconds * 1e9),
                       rate_bps=args.rate, burst_bytes=args.burst, burst_period_ns=args.burst_period,
                       start_ns=_start_ns(args, now), now_ns=now)


def _start_ns(args: argparse.Namespace, now: int) -> int:
    if getattr(args, "start_at", None) is not None:
        return max(now, int(args.start_at * 1e9))
    return now + int(args.start_delay * 1e9)


def run_send(args: argparse.Namespace) -> dict[str, Any]:
    """One paced flow to ``--dst``; the report (DcqcnParamError for bad settings, OSError for the socket)."""
    _check_send(args)
    params = params_of(args)
    _sender(args, params, 0)  # the settings, checked before any socket is opened
    max_s = args.max_seconds
    if max_s is None:
        wait = args.start_delay if args.start_at is None else max(0.0, args.start_at - time.monotonic())
        max_s = wait + (args.seconds + 10.0 if args.seconds is not None else 300.0)
    sock = open_udp_sender(args.dst, args.port, tos=args.dscp << 2 | Ecn.ECT_0)
    with sock:
        # the first packets must not queue behind ARP (netstack.traffic.resolve_neighbour)
        resolved = resolve_neighbour(sock, args.dst, args.port, 1.0)
        eng = _sender(args, params, time.monotonic_ns())

        def progress() -> None:
            c = eng.counters()
            rtt = f", RTT {c['last_rtt_ns'] / 1e6:.3f} ms" if c.get("last_rtt_ns") is not None else ""
            print(f"[tcd-send flow {args.flow}] {c['packets_sent']} packets, Rc {c['rc_bps'] / 1e6:.3f} Mbit/s{rtt}, "
                  f"CNPs {c['cnps_ce']} CE / {c['cnps_ue']} UE", file=sys.stderr, flush=True)

        _sleep_until(eng.start_ns - SCHED_LEAD_NS)
        gate = None
        if args.honour_pfc:
            # the class the switch puts our packets in: IP precedence (DSCP >> 3), its default map
            gate = PauseGate(params.line_rate_bps, cls=args.dscp >> 3)
            raw = open_pfc_listener(args.iface)
        with raw if gate is not None else contextlib.nullcontext(), ThreadSampler() as lag:
            run = run_sender(sock, eng, max_seconds=max_s, progress=None if args.quiet else progress,
                             pfc=(raw, gate) if gate is not None else None)
    c = eng.counters()
    if gate is not None:
        c.update(gate.counters())
    end = eng.done_ns if eng.done_ns is not None else run["ended_ns"]
    secs = max(0, end - eng.start_ns) / 1e9
    return {"tool": "tcd-send", "cc": getattr(args, "cc", "dcqcn"), "mode": args.mode, "flow": args.flow,
            "dst": args.dst, "done": eng.done, "start_ns": eng.start_ns, "done_ns": eng.done_ns, "seconds": secs,
            "bytes": c["bytes_sent"], "rate_bps_avg": c["bytes_sent"] * 8 / secs if secs > 0 else 0.0,
            "send_errors": run["send_errors"], "malformed": run["malformed"], "timed_out": run["timed_out"],
            "neighbour_resolved": resolved, "params": params.to_dict(), "counters": c,
            "rate_log": [list(s) for s in eng.rate_log], "sched": lag.summary()}


def _sleep_until(t_ns: int) -> None:
    """Sleep until monotonic ``t_ns`` (nothing if it has passed). Before the PFC listener opens:
    a pause read after a sleep would be timed when it was read, not when it came."""
    wait = (t_ns - time.monotonic_ns()) / 1e9
    if wait > 0:
        time.sleep(wait)


def _recv_socket(args: argparse.Namespace) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
        if args.cnp_dscp:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, args.cnp_dscp << 2)  # CNPs are Not-ECT
        enable_recv_tos(sock)
        sock.bind(("0.0.0.0", args.port))
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def _stop(args: argparse.Namespace, eng: TcdReceiver, now: int, start: int, first: int | None,
          last_rx: int) -> bool:
    if args.seconds is not None and now - start > args.seconds * 1e9:
        return True
    if first is None:
        return bool(now - start > args.wait * 1e9)
    if args.expect and eng.counters()["complete_flows"] >= args.expect:
        return True
    return bool(args.idle and now - last_rx > args.idle * 1e9)


def run_recv(args: argparse.Namespace) -> dict[str, Any]:
    """Receive on ``--port`` until a stop condition; the per-flow report."""
    if not 0 <= args.cnp_dscp <= 63:
        raise DcqcnParamError("cnp_dscp", f"must be in [0, 63], got {args.cnp_dscp}")
    params = DcqcnParams.scaled(args.line_rate, args.time_scale, **dict(args.param or ()))
    eng = TcdReceiver(params, tcd=args.tcd)
    malformed = send_errors = 0
    with _recv_socket(args) as sock, ThreadSampler() as lag:
        print("ready", file=sys.stderr, flush=True)
        start = last_rx = time.monotonic_ns()
        first: int | None = None
        next_progress = start + 1_000_000_000
        while True:
            now = time.monotonic_ns()
            if _stop(args, eng, now, start, first, last_rx):
                break
            for d, addr, tos in drain_with_tos(sock):
                if not d:
                    continue  # a sender's neighbour probe (empty)
                now = time.monotonic_ns()
                try:
                    eng.receive(d, now, addr, tos & 3)
                except HeaderError:
                    malformed += 1
                    continue
                last_rx = now
                if first is None:
                    first = now
                    lag.hist = LagHistogram(now)  # the run starts here; the wait for it is not the run
            eng.on_timer(time.monotonic_ns())
            for act in eng.actions.take_all():
                if isinstance(act, SendTo):  # CNPs, to each flow's source
                    try:
                        sock.sendto(act.data, act.dst)
                    except OSError:
                        send_errors += 1
            if not args.quiet and now >= next_progress:
                c = eng.counters()
                print(f"[tcd-recv] {c['datagrams']} packets, {c['flows_seen']} flows ({c['complete_flows']} complete), "
                      f"CNPs {c['cnps_ce']} CE / {c['cnps_ue']} UE", file=sys.stderr, flush=True)
                next_progress += 1_000_000_000
            wait_readable(sock, eng.next_deadline(), 0.05)
    c = eng.counters()
    return {"tool": "tcd-recv", "tcd": args.tcd, "flows": {str(k): v for k, v in eng.flows().items()},
            "cnps_sent": c["cnps_sent"], "malformed": malformed, "send_errors": send_errors,
            "seconds": (time.monotonic_ns() - start) / 1e9, "params": params.to_dict(), "counters": c,
            "sched": lag.summary()}


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m netstack.tcd", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_send_arguments(sub.add_parser("send", help="a paced flow: DCQCN or TIMELY, with or without TCD, or a "
                                                   "fixed rate"))
    add_recv_arguments(sub.add_parser("recv", help="the receiver and notification point (CNPs; TIMELY's ACKs)"))
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        out = run_send(args) if args.cmd == "send" else run_recv(args)
    except ConfigError as e:  # DcqcnParamError, TimelyParamError, a --cc / --mode mismatch
        ap.error(str(e))
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out), flush=True)
    if args.cmd == "send":
        return 0 if out["done"] else 1
    flows = out["flows"].values()
    return 0 if flows and all(f["complete"] for f in flows) else 1


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
