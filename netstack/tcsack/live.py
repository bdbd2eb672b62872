"""T/C-SACK, go-back-N and kernel TCP on real sockets: ``python -m netstack.tcsack``.

Run the receiver in one host's namespace and the sender in another's (``netstack exec``):

    python -m netstack.tcsack recv --proto tcsack
    python -m netstack.tcsack send --proto tcsack --dst 10.0.0.2 --bytes 4MB --rate 60Mbit

The engines are sans-IO; this shell owns the socket and the clock: it sends what ``poll``
returns and the receiver's ``Transmit`` actions (its ACKs), feeds every datagram it reads to
the engine, and sleeps until the engine's next deadline or the next datagram. The sender's
socket is connected to the receiver (the kernel drops datagrams from anyone else); the receiver
hands the engine each datagram's source, the engine binds to the first data packet's
(``ReceiverBase.peer``), and the ACKs go there only (docs/security.md#tc-sack). ``--proto tcp``
moves the same bytes over a kernel TCP connection for comparison. Each side prints one JSON
object on its last stdout line; the receiver's ``sha256`` must equal the sender's, and ``sched``
is the end's own scheduling delay (:mod:`netstack.looplag`; the receiver's from its first data
packet on), so that a transfer can tell a starved end from a slow path (docs/tcsack.md "Is a
transfer valid?").

**The failure timer on a loaded host.** The sender's 2T probe (go-back-N: its rto) waits an extra
:data:`SLACK_FACTOR` times the largest scheduling delay this process saw in the last seconds
(:class:`SlackFeed`, ``SenderBase.set_timer_slack``), as the switch daemon does for LinkGuardian's
ackNoTimeout: an ACK needs two processes scheduled, the receiver that sends it and this sender
that reads it (docs/tcsack.md "The 2T probe on a loaded host").
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from headers.errors import HeaderError
from headers.registry import UdpPort
from netstack.argtypes import rate_bps, size_bytes
from netstack.engine import Transmit
from netstack.io.paced import drain, open_udp_sender, run_sender, wait_readable
from netstack.looplag import LagHistogram, ThreadSampler
from netstack.topo.model import parse_size
from netstack.traffic import accept_one, resolve_neighbour

from . import ENGINES
from .common import ReceiverBase, SenderBase
from .params import TcsParamError, TcsParams

PORT = int(UdpPort.TCSACK)  # T/C-SACK's UDP port (headers.registry, docs/wire-formats.md)
PROTOS = ("tcsack", "gbn", "tcp")
#: the failure timer's slack is this many times the recent largest scheduling delay (two
#: processes must be scheduled for an ACK to count: the receiver sends it, the sender reads it;
#: the switch daemon's rule for ackNoTimeout, daemons/switch.py SLACK_FACTOR)
SLACK_FACTOR = 2
#: how often the slack follows the measured delay
SLACK_EVERY_S = 0.1


class SlackFeed:
    """``run_sender``'s periodic callback: passes the sender engine :data:`SLACK_FACTOR` times
    the largest scheduling delay ``hist`` recorded recently (``LagHistogram.recent_max_ns``),
    every :data:`SLACK_EVERY_S`, and calls ``progress`` (if any) about once a second."""

    def __init__(self, engine: SenderBase, hist: Callable[[], LagHistogram],
                 progress: Callable[[], None] | None = None) -> None:
        self.engine = engine
        self.hist = hist
        self.progress = progress
        self._calls = 0

    def __call__(self) -> None:
        slack = SLACK_FACTOR * self.hist().recent_max_ns(time.monotonic_ns())
        if slack != self.engine.timer_slack_ns:
            self.engine.set_timer_slack(slack)
        self._calls += 1
        if self.progress is not None and self._calls % round(1 / SLACK_EVERY_S) == 0:
            self.progress()


def _params(args: argparse.Namespace) -> TcsParams:
    return TcsParams(rate_bps=args.rate, t_ns=int(args.t_ms * 1_000_000), n=args.n, payload=args.payload,
                     rto_ns=int(args.rto_ms * 1_000_000) if args.rto_ms else None)


def data_for(n: int, seed: int) -> bytes:
    """The transfer's bytes: pseudo-random (seeded), so a corrupted or misplaced packet shows."""
    return random.Random(seed).randbytes(n)


# --------------------------------------------------------------------------- datagram protocols
def send_datagrams(args: argparse.Namespace, data: bytes) -> dict[str, Any]:
    s_cls, _ = ENGINES[args.proto]
    sock = open_udp_sender(args.dst, args.port)
    # the first packets must not queue behind ARP: the kernel would send them out of order
    # (netstack.traffic.resolve_neighbour), and go-back-N would pay a go-back for it
    resolved = resolve_neighbour(sock, args.dst, args.port, 1.0)
    t0 = time.monotonic_ns()
    eng: SenderBase = s_cls(_params(args), data, flow_id=args.flow, start_seq=args.start_seq, now_ns=t0)

    def progress() -> None:
        c = eng.counters()
        print(f"[{args.proto}] {c['cum_acked']}/{c['packets']} packets acknowledged, "
              f"{c['retx_sent']} resent", file=sys.stderr, flush=True)

    with sock, ThreadSampler() as lag:
        feed = SlackFeed(eng, lambda: lag.hist, progress if args.progress else None)
        run = run_sender(sock, eng, max_seconds=args.max_seconds, progress=feed, progress_every_s=SLACK_EVERY_S)
    end = eng.done_ns if eng.done_ns is not None else run["ended_ns"]
    secs = (end - t0) / 1e9
    return {"tool": "tcsack-send", "proto": args.proto, "done": eng.done, "bytes": len(data),
            "seconds": secs, "goodput_bps": len(data) * 8 / secs if eng.done and secs > 0 else 0.0,
            "sha256": hashlib.sha256(data).hexdigest(), "send_errors": run["send_errors"],
            "malformed": run["malformed"], "neighbour_resolved": resolved, "params": _params(args).to_dict(),
            "counters": eng.counters(), "checks": eng.check_counters(), "sched": lag.summary()}


def recv_datagrams(args: argparse.Namespace) -> dict[str, Any]:
    _, r_cls = ENGINES[args.proto]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    sock.bind(("0.0.0.0", args.port))
    sock.setblocking(False)
    with ThreadSampler() as lag:
        print("ready", file=sys.stderr, flush=True)
        eng: ReceiverBase = r_cls(_params(args), flow_id=args.flow, start_seq=args.start_seq)
        out = _receive(args, sock, eng, lag)
    out["sched"] = lag.summary()
    return out


def _receive(args: argparse.Namespace, sock: socket.socket, eng: ReceiverBase, lag: ThreadSampler) -> dict[str, Any]:
    """The receiver's loop on its bound socket, until the transfer is over (or never began)."""
    h = hashlib.sha256()
    first = complete_at = None
    last_rx = time.monotonic_ns()
    start = last_rx
    malformed = 0
    while True:
        now = time.monotonic_ns()
        if first is None and now - start > args.wait * 1e9:
            break
        if complete_at is not None and now - last_rx > args.linger * 1e9:
            break  # done, and the sender has stopped probing: it saw the final ACK
        for d, addr in drain(sock):
            if not d:
                continue  # the sender's neighbour probe (empty)
            now = time.monotonic_ns()
            data_rx = eng.c.data_rx
            try:
                # the engine binds to the first data packet's source and drops anyone else's
                for payload in eng.receive(d, now, addr):
                    h.update(payload)
            except HeaderError:
                malformed += 1
            # only the sender's data packets of this flow (probes included) start the clock and
            # keep it running: garbage or another flow's packets from its address must not keep
            # a finished receiver waiting for ever (found by netstack fuzz tcsack, docs/faults.md)
            if addr == eng.peer and eng.c.data_rx > data_rx:
                last_rx = now
                if first is None:
                    first = now
                    lag.hist = LagHistogram(now)  # the transfer starts here; the wait for it is not it
        eng.on_timer(time.monotonic_ns())
        # ACKs (the receivers' only action) go to the bound peer, whoever else sent datagrams;
        # before the first data packet there is no peer, and nothing to acknowledge
        peer = eng.peer
        for act in eng.actions.take_all():
            if isinstance(act, Transmit) and peer is not None:
                with contextlib.suppress(OSError):  # a lost ACK: the sender's 2T probe repairs it
                    sock.sendto(act.data, peer)
        if complete_at is None and eng.complete:
            complete_at = time.monotonic_ns()
        wait_readable(sock, eng.next_deadline(), 0.05)
    secs = ((complete_at or last_rx) - first) / 1e9 if first is not None else 0.0
    return {"tool": "tcsack-recv", "proto": args.proto, "complete": eng.complete,
            "bytes": eng.c.bytes_delivered, "sha256": h.hexdigest(), "seconds": secs, "malformed": malformed,
            "peer": eng.peer, "counters": eng.counters(), "checks": eng.check_counters()}


# ----------------------------------------------------------------------------- kernel TCP
def available_cc() -> list[str]:
    """The kernel's TCP congestion controls a socket may choose (``net.ipv4.tcp_available_congestion_control``;
    one list for every namespace); [] where it cannot be read."""
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            return f.read().split()
    except OSError:
        return []


def send_tcp(args: argparse.Namespace, data: bytes) -> dict[str, Any]:
    cc = getattr(args, "cc", None)
    t0 = time.monotonic_ns()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(args.max_seconds)
    if cc:
        # before connect: the handshake and slow start already run the chosen algorithm. An algorithm
        # the kernel does not have is an error (ENOENT), never a silent fall-back to the default
        try:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
        except OSError as e:
            s.close()
            raise OSError(e.errno, f"TCP congestion control {cc!r} not available on this kernel "
                                   f"(available: {' '.join(available_cc()) or 'unknown'})") from None
    s.connect((args.dst, args.port))
    used = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)  # the receiver closes once it has read everything: the transfer is complete
    end = time.monotonic_ns()
    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    s.close()
    secs = (end - t0) / 1e9
    return {"tool": "tcsack-send", "proto": "tcp", "cc": used, "done": True, "bytes": len(data), "seconds": secs,
            "goodput_bps": len(data) * 8 / secs, "sha256": hashlib.sha256(data).hexdigest(),
            "counters": tcp_info_counters(info)}


def tcp_info_counters(info: bytes) -> dict[str, int | None]:
    """What the benchmark reads of a ``struct tcp_info`` (linux/tcp.h): ``total_retrans`` (the u32
    at byte 100), ``data_segs_out`` (u32 at 156: data segments sent, retransmissions included) and
    ``bytes_sent`` (u64 at 200: payload bytes sent, retransmissions included; kernel 4.19+); None
    where the kernel's struct is shorter."""
    def field(at: int, size: int) -> int | None:
        return int.from_bytes(info[at:at + size], sys.byteorder) if len(info) >= at + size else None
    return {"total_retrans": field(100, 4), "data_segs_out": field(156, 4), "bytes_sent": field(200, 8)}


def recv_tcp(args: argparse.Namespace, lag: ThreadSampler | None = None) -> dict[str, Any]:
    conn = accept_one(args.port, args.wait)
    if lag is not None:
        lag.hist = LagHistogram(time.monotonic_ns())  # the transfer starts here; the wait for it is not it
    conn.settimeout(None)  # the accepted socket inherits the listener's timeout
    h = hashlib.sha256()
    n = 0
    t0 = time.monotonic_ns()
    while True:
        b = conn.recv(1 << 16)
        if not b:
            break
        h.update(b)
        n += len(b)
    secs = (time.monotonic_ns() - t0) / 1e9
    conn.close()
    return {"tool": "tcsack-recv", "proto": "tcp", "complete": True, "bytes": n, "sha256": h.hexdigest(),
            "seconds": secs}


# ---------------------------------------------------------------------------------- CLI
def add_end_arguments(p: argparse.ArgumentParser, name: str, progress_flag: bool = True) -> None:
    """The options of one end (``send`` or ``recv``): the module's and ``netstack tcsack``'s
    (which shows progress unless ``--quiet``, so it has no ``--progress``)."""
    p.add_argument("--proto", choices=PROTOS, default="tcsack",
                   help="tcsack (draft-chen-tsvwg-updated-ack), gbn (RoCE RC go-back-N) or tcp "
                        "(kernel TCP); default tcsack")
    p.add_argument("--port", type=int, default=PORT, help=f"UDP/TCP port (default {PORT})")
    p.add_argument("--rate", type=rate_bps, default=TcsParams.rate_bps,
                   help="preset sending rate, line rate incl. headers (default 50Mbit)")
    p.add_argument("--t-ms", type=float, default=TcsParams.t_ns / 1e6,
                   help="T: the receiver ACKs at most this long after a packet (default 2 ms)")
    p.add_argument("--n", type=int, default=TcsParams.n, help="N: ... or after this many packets (default 16)")
    p.add_argument("--payload", type=int, default=TcsParams.payload, help="bytes per packet (default 1200)")
    p.add_argument("--rto-ms", type=float, default=0.0, help="go-back-N timeout (default 4T)")
    p.add_argument("--flow", type=int, default=0, help="flow_id (default 0)")
    if name == "send":
        p.add_argument("--cc", default=None,
                       help="--proto tcp: the sender's congestion control, e.g. cubic or bbr (default: the "
                            "host's net.ipv4.tcp_congestion_control)")
    p.add_argument("--start-seq", type=int, default=0, help="first sequence number (default 0)")
    if name == "send":
        p.add_argument("--dst", required=True, help="the receiver's IPv4 address")
        p.add_argument("--bytes", type=size_bytes, default=parse_size("4MB"),
                       help="bytes to move (default 4MB)")
        p.add_argument("--seed", type=int, default=1, help="seed of the pseudo-random data (default 1)")
        p.add_argument("--max-seconds", type=float, default=120.0, help="give up after this long (default 120)")
        if progress_flag:
            p.add_argument("--progress", action="store_true", help="a progress line per second on stderr")
    else:
        p.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the sender (default 30)")
        p.add_argument("--linger", type=float, default=0.5,
                       help="after completion, stop once the sender was silent this long (default 0.5 s)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m netstack.tcsack", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("send", "recv"):
        p = sub.add_parser(name, help=f"the {'sending' if name == 'send' else 'receiving'} host's side")
        add_end_arguments(p, name)
    return ap


def check_end_arguments(args: argparse.Namespace) -> str | None:
    """What is wrong with the options of an end (None: nothing)."""
    try:
        _params(args)
    except TcsParamError as e:
        return str(e)
    if not 0 <= args.start_seq <= 0xFFFFFFFF or not 0 <= args.flow <= 0xFFFF:
        return "--start-seq must fit 32 bits and --flow 16 bits"
    if not 0 < args.port < 65536:
        return f"--port must be 1..65535, got {args.port}"
    return None


def run_end(args: argparse.Namespace) -> dict[str, Any]:
    """One end's transfer, in the namespace the caller is in: its JSON object (``done`` or
    ``complete`` says whether it finished). Raises OSError for socket errors."""
    if args.proto != "tcp":
        return send_datagrams(args, data_for(args.bytes, args.seed)) if args.cmd == "send" else recv_datagrams(args)
    with ThreadSampler() as lag:  # (the datagram ends measure theirs themselves)
        out = send_tcp(args, data_for(args.bytes, args.seed)) if args.cmd == "send" else recv_tcp(args, lag)
    out["sched"] = lag.summary()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    wrong = check_end_arguments(args)
    if wrong:
        ap.error(wrong)
    try:
        out = run_end(args)
    except OSError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(out), flush=True)
    return 0 if out.get("done", out.get("complete")) else 1


if __name__ == "__main__":
    sys.exit(main())
