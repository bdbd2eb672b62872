"""Traffic tools run inside host namespaces: real kernel UDP and TCP, results as JSON.

    python -m netstack.traffic udp-sink  --port 5002 --quiet 2
    python -m netstack.traffic udp-send  --dst 10.0.0.2 --port 5002 --count 100000 --rate 5000 --size 200
    python -m netstack.traffic tcp-sink  --port 5001
    python -m netstack.traffic tcp-send  --dst 10.0.0.2 --port 5001 --seconds 10 [--interval 0.5]
    python -m netstack.traffic rr-server --port 5003
    python -m netstack.traffic rr-client --dst 10.0.0.2 --port 5003 --flows 10000 --size 143

Every tool prints one JSON object on its last line (progress lines go to stderr), so the
experiment drivers (``netstack demo``, ``netstack bench linkguardian``) and users alike can
collect them. Sequenced UDP carries a 4-byte sequence number so the sink measures loss,
duplicates and reordering exactly; the request/response client measures the flow completion
time of single-packet exchanges (seed 000 §4.3, 143 B is the most frequent RPC size).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import sys
import time

_SEQ = struct.Struct("!I")


def udp_send(args: argparse.Namespace) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    pad = b"\x00" * max(0, args.size - 4)
    t0 = time.monotonic()
    sent = 0
    blocked = 0
    for i in range(args.count):
        if args.rate:
            ahead = t0 + i / args.rate - time.monotonic()
            if ahead > 0.0005:
                time.sleep(ahead)
        while True:
            try:
                s.sendto(_SEQ.pack(i) + pad, (args.dst, args.port))
                break
            except (BlockingIOError, OSError):
                blocked += 1
                time.sleep(0.0005)
        sent += 1
    return {"tool": "udp-send", "sent": sent, "seconds": time.monotonic() - t0, "size": args.size,
            "send_retries": blocked}


def udp_sink(args: argparse.Namespace) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    s.bind(("0.0.0.0", args.port))
    print("ready", file=sys.stderr, flush=True)
    seen: set[int] = set()
    received = duplicates = reordered = 0
    highest = -1
    first = last = None
    s.settimeout(args.wait)
    while True:
        try:
            data = s.recv(65536)
        except TimeoutError:
            break
        now = time.monotonic()
        if first is None:
            first = now
            s.settimeout(args.quiet)
        last = now
        if len(data) < 4:
            continue
        seq = _SEQ.unpack_from(data)[0]
        received += 1
        if seq in seen:
            duplicates += 1
            continue
        seen.add(seq)
        if seq < highest:
            reordered += 1  # arrived after a higher sequence number: out of order
        else:
            highest = seq
    expected = args.expect if args.expect else highest + 1
    unique = len(seen)
    return {"tool": "udp-sink", "received": received, "unique": unique, "duplicates": duplicates,
            "reordered": reordered, "expected": expected, "lost": max(0, expected - unique),
            "loss": (max(0, expected - unique) / expected) if expected > 0 else 0.0,
            "seconds": (last - first) if first is not None and last is not None else 0.0}


def _accept_one(port: int) -> socket.socket:
    """Listen on ``port``, tell the harness we are ready (stderr), and take one connection."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    print("ready", file=sys.stderr, flush=True)
    conn, _ = srv.accept()
    srv.close()
    return conn


def tcp_sink(args: argparse.Namespace) -> dict:
    conn = _accept_one(args.port)
    total = 0
    t0 = time.monotonic()
    while True:
        data = conn.recv(1 << 16)
        if not data:
            break
        total += len(data)
    return {"tool": "tcp-sink", "bytes": total, "seconds": time.monotonic() - t0}


def tcp_send(args: argparse.Namespace) -> dict:
    s = socket.create_connection((args.dst, args.port), timeout=30)
    chunk = b"\x00" * 65536
    t0 = time.monotonic()
    end = t0 + args.seconds
    total = 0
    samples = []
    next_sample = t0 + args.interval
    last_total = 0
    while True:
        now = time.monotonic()
        if now >= end:
            break
        total += s.send(chunk)
        if now >= next_sample:
            samples.append({"t": round(now - t0, 3),
                            "mbps": (total - last_total) * 8 / args.interval / 1e6})
            print(f"  t={now - t0:5.1f}s {samples[-1]['mbps']:7.2f} Mbit/s", file=sys.stderr, flush=True)
            last_total = total
            next_sample += args.interval
    s.close()
    seconds = time.monotonic() - t0
    return {"tool": "tcp-send", "bytes": total, "seconds": seconds, "mbps": total * 8 / seconds / 1e6,
            "samples": samples}


def rr_server(args: argparse.Namespace) -> dict:
    conn = _accept_one(args.port)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    answered = 0
    buf = b""
    while True:
        data = conn.recv(65536)
        if not data:
            break
        buf += data
        while len(buf) >= args.size:
            conn.sendall(buf[:args.size])
            buf = buf[args.size:]
            answered += 1
    return {"tool": "rr-server", "answered": answered}


def rr_client(args: argparse.Namespace) -> dict:
    s = socket.create_connection((args.dst, args.port), timeout=30)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    msg = b"r" * args.size
    fcts = []
    t_end = time.monotonic() + args.max_seconds
    for i in range(args.flows):
        t0 = time.monotonic_ns()
        s.sendall(msg)
        got = 0
        while got < args.size:
            data = s.recv(args.size - got)
            if not data:
                raise SystemExit("rr-client: server closed the connection")
            got += len(data)
        fcts.append((time.monotonic_ns() - t0) / 1e3)
        if args.progress and (i + 1) % args.progress == 0:
            print(f"  {i + 1}/{args.flows} flows", file=sys.stderr, flush=True)
        if time.monotonic() > t_end:
            break
    s.close()
    return {"tool": "rr-client", "flows": len(fcts), "size": args.size, "fct_us": percentiles(fcts)}


def percentiles(values: list[float], points: tuple[float, ...] = (50, 90, 99, 99.9, 100)) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    out = {}
    for p in points:
        k = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
        out[f"p{p:g}"] = ordered[k]
    out["mean"] = sum(ordered) / len(ordered)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netstack.traffic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="tool", required=True)
    p = sub.add_parser("udp-send")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, default=5002)
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--rate", type=float, default=0.0, help="datagrams/s (0 = as fast as possible)")
    p.add_argument("--size", type=int, default=200, help="UDP payload bytes (>= 4)")
    p.set_defaults(func=udp_send)
    p = sub.add_parser("udp-sink")
    p.add_argument("--port", type=int, default=5002)
    p.add_argument("--wait", type=float, default=30.0, help="seconds to wait for the first datagram")
    p.add_argument("--quiet", type=float, default=2.0, help="stop after this many silent seconds")
    p.add_argument("--expect", type=int, default=0, help="datagrams sent (default: highest seq + 1)")
    p.set_defaults(func=udp_sink)
    p = sub.add_parser("tcp-sink")
    p.add_argument("--port", type=int, default=5001)
    p.set_defaults(func=tcp_sink)
    p = sub.add_parser("tcp-send")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, default=5001)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--interval", type=float, default=0.5)
    p.set_defaults(func=tcp_send)
    p = sub.add_parser("rr-server")
    p.add_argument("--port", type=int, default=5003)
    p.add_argument("--size", type=int, default=143)
    p.set_defaults(func=rr_server)
    p = sub.add_parser("rr-client")
    p.add_argument("--dst", required=True)
    p.add_argument("--port", type=int, default=5003)
    p.add_argument("--flows", type=int, default=1000)
    p.add_argument("--size", type=int, default=143)
    p.add_argument("--max-seconds", type=float, default=600.0)
    p.add_argument("--progress", type=int, default=0, help="print progress every N flows")
    p.set_defaults(func=rr_client)
    args = parser.parse_args(argv)
    if getattr(args, "size", 4) < 4:
        parser.error("--size must be >= 4")
    print(json.dumps(args.func(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
