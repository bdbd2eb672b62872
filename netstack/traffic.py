"""Traffic tools run inside host namespaces: real kernel UDP and TCP, results as JSON.

    python -m netstack.traffic udp-sink  --port 5002 --quiet 2
    python -m netstack.traffic udp-send  --dst 10.0.0.2 --port 5002 --count 100000 --rate 5000 --size 200
    python -m netstack.traffic tcp-sink  --port 5001
    python -m netstack.traffic tcp-send  --dst 10.0.0.2 --port 5001 --seconds 10 [--interval 0.5]
    python -m netstack.traffic rr-server --port 5003
    python -m netstack.traffic rr-client --dst 10.0.0.2 --port 5003 --flows 10000 --size 143

Every tool prints one JSON object on its last line (progress lines go to stderr), so the
experiment drivers (``netstack demo``, ``netstack bench linkguardian``) and users alike can
collect them; it carries ``sched``, the tool's own scheduling delay (netstack.looplag), so a
run can tell a starved tool from a lossy network. Sequenced UDP carries a 4-byte sequence
number so the sink measures loss, duplicates and reordering exactly; the request/response
client measures the flow completion time of single-packet exchanges (LinkGuardian §4.3,
143 B is the most frequent RPC size).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import struct
import sys
import time

from . import looplag

_SEQ = struct.Struct("!I")
#: udp-sink reports this many out-of-order arrivals individually (where in the stream they were)
MAX_LATE_REPORTED = 10


def next_hop(dst: str, routes: str) -> tuple[str, str] | None:
    """(device, IPv4 address) whose link-layer address reaching ``dst`` needs, from the text of
    ``/proc/net/route`` (longest prefix wins; on-link: ``dst`` itself); None without a route."""
    want = struct.unpack("=I", socket.inet_aton(dst))[0]  # the file's words are host-order
    best: tuple[int, str, int] | None = None
    for line in routes.splitlines()[1:]:
        f = line.split()
        if len(f) < 8:
            continue
        try:
            net, gw, flags, mask = int(f[1], 16), int(f[2], 16), int(f[3], 16), int(f[7], 16)
        except ValueError:
            continue
        if not flags & 1 or want & mask != net:  # RTF_UP, and the prefix must match
            continue
        plen = bin(mask).count("1")
        if best is None or plen > best[0]:
            best = (plen, f[0], gw if flags & 2 else want)  # RTF_GATEWAY
    if best is None:
        return None
    return best[1], socket.inet_ntoa(struct.pack("=I", best[2]))


def neighbour_complete(dev: str, addr: str, arp: str) -> bool:
    """Is ``addr`` on ``dev`` resolved (ATF_COM) in the text of ``/proc/net/arp``?"""
    for line in arp.splitlines()[1:]:
        f = line.split()
        if len(f) >= 6 and f[0] == addr and f[5] == dev:
            try:
                return bool(int(f[2], 16) & 2)
            except ValueError:
                return False
    return False


def resolve_neighbour(s: socket.socket, dst: str, port: int, timeout: float) -> bool:
    """Resolve the next hop toward ``dst`` before a measured stream starts.

    While ARP is unresolved the kernel queues the first datagrams, and when the reply comes it
    sends them with the neighbour lock dropped between each: a datagram sent meanwhile on the
    other CPU overtakes the whole queue (tens of reordered datagrams at the sink, nothing to do
    with the network under test). A zero-length datagram (udp-sink ignores those) starts the
    resolution; wait until /proc/net/arp says complete. False: no route, broadcast/multicast
    or not resolved within ``timeout`` (the stream goes ahead anyway)."""
    try:
        with open("/proc/net/route") as f:
            hop = next_hop(dst, f.read())
    except (OSError, ValueError):
        return False
    if hop is None or socket.inet_aton(hop[1])[0] >= 224:
        return False
    deadline = time.monotonic() + timeout
    probe_at = 0.0
    while True:
        now = time.monotonic()
        try:
            with open("/proc/net/arp") as f:
                if neighbour_complete(hop[0], hop[1], f.read()):
                    return True
        except OSError:
            return False
        if now >= deadline:
            return False
        if now >= probe_at:  # again every 100 ms, in case a probe or its ARP request was lost
            with contextlib.suppress(OSError):
                s.sendto(b"", (dst, port))
            probe_at = now + 0.1
        time.sleep(0.002)


def udp_send(args: argparse.Namespace) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    pad = b"\x00" * max(0, args.size - 4)
    resolved = resolve_neighbour(s, args.dst, args.port, args.resolve_timeout) if args.resolve_timeout > 0 else None
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
            "send_retries": blocked, "neighbour_resolved": resolved}


def udp_sink(args: argparse.Namespace) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
    s.bind(("0.0.0.0", args.port))
    print("ready", file=sys.stderr, flush=True)
    seen: set[int] = set()
    received = duplicates = reordered = 0
    late: list[list[int]] = []  # the first out-of-order arrivals: [seq, highest seen before it]
    highest = -1
    first = last = None
    s.settimeout(args.wait)
    while True:
        try:
            data = s.recv(65536)
        except TimeoutError:
            break
        if len(data) < 4:
            continue  # not a sequenced datagram (udp-send's neighbour probe is empty)
        now = time.monotonic()
        if first is None:
            first = now
            s.settimeout(args.quiet)
        last = now
        seq = _SEQ.unpack_from(data)[0]
        received += 1
        if seq in seen:
            duplicates += 1
            continue
        seen.add(seq)
        if seq < highest:
            reordered += 1  # arrived after a higher sequence number: out of order
            if len(late) < MAX_LATE_REPORTED:
                late.append([seq, highest])
        else:
            highest = seq
    expected = args.expect if args.expect else highest + 1
    unique = len(seen)
    return {"tool": "udp-sink", "received": received, "unique": unique, "duplicates": duplicates,
            "reordered": reordered, "late": late, "expected": expected, "lost": max(0, expected - unique),
            "loss": (max(0, expected - unique) / expected) if expected > 0 else 0.0,
            "seconds": (last - first) if first is not None and last is not None else 0.0}


def accept_one(port: int, timeout: float | None = None) -> socket.socket:
    """Listen on ``port``, tell the harness we are ready (stderr), and take one connection
    (``timeout``: seconds to wait for it, TimeoutError after; None: forever)."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(timeout)
    print("ready", file=sys.stderr, flush=True)
    conn, _ = srv.accept()
    srv.close()
    return conn


def tcp_sink(args: argparse.Namespace) -> dict:
    conn = accept_one(args.port)
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
    conn = accept_one(args.port)
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
    p.add_argument("--resolve-timeout", type=float, default=1.0, metavar="S",
                   help="first resolve the next hop's MAC (ARP), waiting up to S seconds: datagrams "
                        "queued during resolution leave out of order; 0 = do not wait")
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
    # every tool measures its own scheduling delay: a run whose tools the machine starved is
    # not evidence (netstack.validity)
    with looplag.ThreadSampler() as lag:
        result = args.func(args)
    result["sched"] = lag.summary()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
