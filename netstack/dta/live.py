"""DTA's reporter tool, run inside host namespaces (what ``netstack dta report`` executes)::

    ip netns exec ns-h1 python -m netstack.dta.live report keywrite --dst 10.0.0.100 --key 1 --value 7
    ... report append --list 4 --value 100 --count 10 --rate 1000
    ... report increment --key 7 --by 1 --count 100
    ... report sketch --sketch-id 1 --reporter-id 1 --rows 4 --columns 256 --random 1000 --seed 1

Real UDP datagrams to the collector's IP, port 40040 (source port 40041), paced at
``--rate`` reports/s (0 = as fast as the socket takes them), or for ``--duration`` seconds
cycling through ``--count`` distinct reports. Sketch-Merge streams one column per report and
listens on UDP 40044 for the translator's NACKs, rewinding to the column a NACK asks for
(:class:`~netstack.dta.reporter.SketchReporter`). The last line of stdout is one JSON object.

The JSON carries ``planned`` (reports, rate, seconds), ``sched`` (the tool's own scheduling delay
while it sent, :mod:`netstack.looplag`) and ``valid`` / ``checks`` as far as the tool can judge
them (sent and rate as planned, its own delay; :mod:`netstack.dta.verdict`);
:func:`netstack.dta.control.run_report` adds the daemons' delay over the run.

``--key-file FILE`` (``netstack dta report`` passes the topology's key file) seals every report
with the authentication trailer, under the key derived for this reporter's source address, era
``--era`` (default: the start time); a report sent again (``--duration`` cycles) is sealed anew.

The switch side (the translator in a switch daemon) and the orchestration are in
:mod:`netstack.dta.control`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from headers.registry import UdpPort

from ..auth import keys
from ..auth.frame import Sealer, era_now
from ..looplag import ThreadSampler
from .reportauth import reporter_name, reporter_sealer
from .reporter import CountMinSketch, Reporter, SketchReporter
from .verdict import planned, report_validity

_MS = 1_000_000

# =========================================================================== reporter tool


def sketch_items(seed: int, count: int, keys: int) -> list[int]:
    """``count`` keys drawn from ``1..keys`` (a reproducible flow trace for a Count-Min sketch)."""
    rng = random.Random(seed)
    return [rng.randint(1, keys) for _ in range(count)]


def parse_items(text: str) -> dict[int, int]:
    """``"KEY[:COUNT],..."`` -> {key: count}."""
    out: dict[int, int] = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        key, _, count = part.partition(":")
        try:
            k, c = int(key, 0), int(count or "1", 0)
        except ValueError:
            raise ValueError(f"--items: {part!r} is not KEY or KEY:COUNT") from None
        if not 0 <= k <= 0xFFFFFFFF or c < 0:
            raise ValueError(f"--items: {part!r}: keys are 32-bit, counts >= 0")
        out[k] = out.get(k, 0) + c
    return out


def build_sketch(args: argparse.Namespace) -> CountMinSketch:
    cms = CountMinSketch(args.rows, args.columns)
    if args.items:
        for key, count in parse_items(args.items).items():
            cms.add(key, count)
    if args.random:
        for key in sketch_items(args.seed, args.random, args.keys):
            cms.add(key)
    return cms


def _wait_neighbour(dst: str, timeout: float = 1.0) -> bool:
    """Resolve the collector's MAC before the timed part (an unresolved neighbour queues only a
    few datagrams and drops the rest): poke it with a datagram to the discard port and watch
    /proc/net/arp of this namespace."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                probe.sendto(b"", (dst, 9))
            with contextlib.suppress(OSError), open("/proc/net/arp") as f:
                for line in f.readlines()[1:]:
                    cols = line.split()
                    if len(cols) >= 3 and cols[0] == dst and int(cols[2], 16) & 0x2:
                        return True
            time.sleep(0.01)
        return False
    finally:
        probe.close()


def _socket(sport: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    try:
        s.bind(("0.0.0.0", sport))
    except OSError:
        s.bind(("0.0.0.0", 0))  # another reporter holds the public source port: any port works
    return s


def _payloads(args: argparse.Namespace, reporter: Reporter) -> list[bytes]:
    n = args.count
    if args.kind == "keywrite":
        return [reporter.key_write((args.key + i) & 0xFFFFFFFF, (args.value + i) & 0xFFFFFFFF, args.redundancy)
                for i in range(n)]
    if args.kind == "append":
        return [reporter.append(args.list, (args.value + i) & 0xFFFFFFFF) for i in range(n)]
    if args.kind == "postcard":  # report i: flow KEY+i, hop --hop, value VALUE+i
        return [reporter.postcard((args.key + i) & 0xFFFFFFFF, args.hop, (args.value + i) & 0xFFFFFFFF)
                for i in range(n)]
    keys = max(1, args.keys)
    return [reporter.key_increment((args.key + i % keys) & 0xFFFFFFFF, args.by, args.redundancy) for i in range(n)]


def _send_paced(sock: socket.socket, dst: tuple[str, int], payloads: list[bytes], rate: float,
                duration: float | None, seal: Callable[[bytes], bytes] | None = None) -> dict[str, Any]:
    """Send ``payloads`` in order at ``rate``/s (0: as fast as possible); with ``duration``,
    cycle through them for that many seconds instead of sending each once. ``seal`` (authenticated
    reports) is applied as each one is sent, so a report sent again in the next cycle is a new
    report, not a replay the translator would refuse."""
    raw_sendto = sock.sendto

    def sealed_sendto(data: bytes, addr: tuple[str, int]) -> int:
        assert seal is not None
        return raw_sendto(seal(data), addr)

    sendto = raw_sendto if seal is None else sealed_sendto
    n = len(payloads)
    total = None if duration else n
    sent = retries = 0
    clock = time.perf_counter
    started = time.monotonic()
    t0 = clock()
    end = t0 + duration if duration else None
    while True:
        now = clock()
        if end is not None and now >= end:
            break
        if total is not None and sent >= total:
            break
        if rate:
            due = int((now - t0) * rate) + 1 - sent
            if due <= 0:
                time.sleep(min(0.001, (sent - (now - t0) * rate) / rate))
                continue
            burst = min(due, 256)
        else:
            burst = 256
        if total is not None:
            burst = min(burst, total - sent)
        for _ in range(burst):
            try:
                sendto(payloads[sent % n], dst)
            except OSError:  # ENOBUFS and friends: back off a little, resend the same report
                retries += 1
                time.sleep(0.0002)
                break
            sent += 1
    elapsed = clock() - t0
    return {"sent": sent, "seconds": elapsed, "offered_rate": sent / elapsed if elapsed > 0 else 0.0,
            "send_retries": retries, "started_monotonic": started, "ended_monotonic": time.monotonic()}


def _report_sketch(args: argparse.Namespace, sock: socket.socket, dst: tuple[str, int],
                   sealer: Sealer | None = None) -> dict[str, Any]:
    cms = build_sketch(args)
    nack_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        nack_sock.bind(("0.0.0.0", UdpPort.DTA_NACK))
    except OSError as exc:
        raise SystemExit(f"dta report sketch: cannot listen for NACKs on UDP {UdpPort.DTA_NACK} ({exc}); "
                         "is another sketch reporter running in this namespace?") from None
    nack_sock.setblocking(False)
    reporter = Reporter(sealer=sealer)
    sr = SketchReporter(reporter, args.reporter_id, args.sketch_id, args.rows, args.columns,
                        probe_interval_ns=int(args.probe_ms * _MS), probes=args.probes)
    sr.epoch = args.epoch - 1  # start_epoch() moves on to the next one
    clock = time.monotonic_ns
    sr.start_epoch(cms.matrix, clock())
    nacks = 0
    sent = 0
    t0 = clock()
    deadline = t0 + int(args.timeout * 1e9)
    linger_until: int | None = None
    try:
        while True:
            now = clock()
            if now > deadline:
                raise SystemExit(f"dta report sketch: not done after {args.timeout:g} s "
                                 f"({sr.c.columns_sent} columns sent, {nacks} NACKs)")
            while True:
                try:
                    data = nack_sock.recv(64)
                except (BlockingIOError, InterruptedError):
                    break
                nacks += 1
                sr.on_nack(data, now)
                linger_until = None
            if args.rate:
                budget = int((now - t0) / 1e9 * args.rate) + 1 - sent
            else:
                budget = 64
            out = sr.poll(now, max(0, budget)) if budget > 0 else []
            out += sr.on_timer(now)
            for p in out:
                with contextlib.suppress(OSError):
                    sock.sendto(p, dst)
                sent += 1
            if sr.done:
                if linger_until is None:
                    linger_until = now + int(args.linger_ms * _MS)
                elif now >= linger_until:
                    break
            if not out:
                time.sleep(0.0005)
    finally:
        nack_sock.close()
    elapsed = (clock() - t0) / 1e9
    return {"sent": sent, "columns_sent": sr.c.columns_sent, "rewinds": sr.c.rewinds, "nacks": nacks,
            "epoch": sr.epoch, "seconds": elapsed, "matrix": cms.matrix,
            "total": sum(cms.matrix[0])}


def source_ip(dst: str) -> str:
    """The IPv4 address this namespace sends to ``dst`` from (the route's source; no packet sent)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((dst, UdpPort.DTA))
        return str(s.getsockname()[0])
    except OSError as exc:
        raise SystemExit(f"dta report: no route to {dst} ({exc})") from None
    finally:
        s.close()


def _sealer(args: argparse.Namespace) -> tuple[Sealer | None, dict[str, Any] | None]:
    """With ``--key-file``: the sealer of this reporter (key derived for its source address,
    era ``--era`` or now) and what the JSON summary says about it (never a key)."""
    if not args.key_file:
        return None, None
    name = reporter_name(args.reporter_ip or source_ip(args.dst))
    now = time.time()
    era = args.era if args.era is not None else era_now(now)
    try:
        sealer = reporter_sealer(args.key_file, name, era, now)
    except keys.KeyFileError as exc:
        raise SystemExit(f"dta report: {exc}") from None
    return sealer, {"reporter": name, "key_id": sealer.key_id, "era": era}


def _report_main(args: argparse.Namespace) -> int:
    if args.cpu is not None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {args.cpu})
    dst = (args.dst, UdpPort.DTA)
    sealer, auth = _sealer(args)
    resolved = _wait_neighbour(args.dst)
    sock = _socket(args.sport)
    result: dict[str, Any] = {"tool": "dta-report", "kind": args.kind, "dst": args.dst,
                              "sport": sock.getsockname()[1], "neighbour_resolved": resolved, "auth": auth}
    try:
        if args.kind == "sketch":
            with ThreadSampler() as lag:
                result.update(_report_sketch(args, sock, dst, sealer))
        else:
            payloads = _payloads(args, Reporter())
            if not args.quiet:
                what = f"for {args.duration:g} s" if args.duration else str(len(payloads))
                print(f"sending {what} {args.kind} reports to {args.dst}:{UdpPort.DTA}", file=sys.stderr, flush=True)
            with ThreadSampler() as lag:
                result.update(_send_paced(sock, dst, payloads, args.rate, args.duration,
                                          sealer.seal if sealer is not None else None))
    finally:
        sock.close()
    if sealer is not None and auth is not None:
        auth["sealed"] = sealer.c.sealed
    result["planned"] = planned(args.kind, args.count, args.rate, args.duration, args.columns)
    result["sched"] = lag.summary()
    # what the tool can judge alone; run_report (netstack.dta.control) adds the daemons' delay
    report_validity(result, {"reporter": result["sched"]}).annotate(result)
    print(json.dumps(result), flush=True)
    return 0


def report_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Arguments of the reporter tool (shared with ``netstack dta report``'s help)."""
    p = parser or argparse.ArgumentParser(prog="python -m netstack.dta.live report")
    p.add_argument("kind", choices=["keywrite", "append", "increment", "sketch", "postcard"])
    p.add_argument("--dst", required=True, help="the collector's IP")
    p.add_argument("--key", type=lambda s: int(s, 0), default=1, help="(first) key")
    p.add_argument("--value", type=lambda s: int(s, 0), default=1, help="(first) 32-bit data value")
    p.add_argument("--list", type=int, default=4, help="Append list id")
    p.add_argument("--by", type=int, default=1, help="Key-Increment amount")
    p.add_argument("--hop", type=int, default=1, help="Postcarding: the hop number (1..the store's hops)")
    p.add_argument("--keys", type=int, default=1, help="increment: spread over KEY..KEY+keys-1; sketch: key space")
    p.add_argument("--redundancy", type=int, default=2, help="N copies (Key-Write / Key-Increment)")
    p.add_argument("--count", type=int, default=1, help="reports (distinct reports with --duration)")
    p.add_argument("--rate", type=float, default=0.0, help="reports/s; 0 = as fast as possible")
    p.add_argument("--duration", type=float, default=None, help="send for this many seconds, cycling")
    p.add_argument("--sport", type=int, default=UdpPort.DTA_SOURCE)
    p.add_argument("--cpu", type=int, default=None, help="pin the reporter to this CPU")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--sketch-id", type=int, default=1)
    p.add_argument("--reporter-id", type=int, default=1)
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--columns", type=int, default=256)
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--items", default="", help="sketch content: KEY[:COUNT],...")
    p.add_argument("--random", type=int, default=0, help="sketch content: this many random keys")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--probe-ms", type=float, default=2.0, help="tail-probe interval")
    p.add_argument("--probes", type=int, default=3)
    p.add_argument("--linger-ms", type=float, default=30.0, help="wait for late NACKs after the last column")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--key-file", default=None, metavar="FILE",
                   help="seal every report with the authentication trailer, under this reporter's key derived "
                        "from the key file (the topology's [topology] keys; docs/dta.md, Authenticated reports)")
    p.add_argument("--era", type=int, default=None,
                   help="with --key-file: the era to seal with (default: now, in unix seconds)")
    p.add_argument("--reporter-ip", default=None,
                   help="with --key-file: the address the key is derived for (default: this host's source "
                        "address towards --dst)")
    return p


def check_report_args(args: argparse.Namespace) -> str | None:
    """A message for arguments the tool cannot use, else None."""
    if args.count < 1:
        return "--count must be >= 1"
    if args.rate < 0:
        return "--rate must be >= 0"
    if args.duration is not None and args.duration <= 0:
        return "--duration must be > 0"
    if args.kind in ("keywrite", "increment") and not 1 <= args.redundancy <= 255:
        return "--redundancy must be 1..255"
    if args.kind == "postcard" and not 0 <= args.hop <= 255:
        return "--hop must be 0..255"
    if args.era is not None and not 0 <= args.era <= 0xFFFFFFFF:
        return "--era must be 0..2^32-1"
    if args.reporter_ip is not None:
        try:
            reporter_name(args.reporter_ip)
        except ValueError:
            return f"--reporter-ip {args.reporter_ip!r} is not an IPv4 address"
    if (args.era is not None or args.reporter_ip is not None) and not args.key_file:
        return "--era and --reporter-ip only go with --key-file"
    if args.kind == "sketch":
        if not (1 <= args.rows <= 255 and args.columns >= 1):
            return "--rows must be 1..255 and --columns >= 1"
        if args.epoch < 0:
            return "--epoch must be >= 0"
        if not args.items and not args.random:
            return "give the sketch's content: --items KEY[:COUNT],... and/or --random N"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netstack.dta.live",
                                     description="DTA reporter tool (run inside a host namespace)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    report_parser(sub.add_parser("report", help="send DTA reports to a collector"))
    args = parser.parse_args(argv)
    err = check_report_args(args)
    if err:
        parser.error(err)
    return _report_main(args)


if __name__ == "__main__":
    sys.exit(main())
