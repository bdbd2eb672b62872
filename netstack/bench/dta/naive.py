"""The naive CPU collector, a helper process of ``netstack bench dta`` (``python -m
netstack.bench.dta --role naive``): the baseline DTA is compared with, run in c1 on the same
reports with the translator off."""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from typing import Any

from .params import SO_RXQ_OVFL


def role_naive(p: dict[str, Any]) -> int:
    """A CPU collector: UDP socket, decode every report, insert into Python containers."""
    import socket
    import struct

    from headers.dta import Append, KeyIncrement, KeyWrite, decode_report
    from headers.errors import HeaderError

    if p.get("cpus"):
        os.sched_setaffinity(0, p["cpus"])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_RXQ_OVFL, 1)  # the kernel reports its drop count with each datagram
    s.bind(("0.0.0.0", 40040))
    s.settimeout(0.1)
    stop = False

    def _term(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _term)
    store: dict[int, tuple[int, ...]] = {}
    lists: dict[int, list[int]] = {}
    counters: dict[int, int] = {}
    count = errors = socket_drops = 0
    samples: list[tuple[float, int]] = []
    clock = time.monotonic
    next_sample = clock()
    recvmsg = s.recvmsg
    space = socket.CMSG_SPACE(4)
    print("ready", flush=True)
    while not stop:
        try:
            data, anc, _, _ = recvmsg(2048, space)
        except TimeoutError:
            data = None
        except InterruptedError:
            continue
        if data is not None:
            for _level, _type, cdata in anc:
                if len(cdata) >= 4:
                    socket_drops = struct.unpack("I", cdata[:4])[0]
            try:
                _, prim = decode_report(data)
            except HeaderError:
                errors += 1
                continue
            t = type(prim)
            if t is KeyWrite:
                store[prim.key] = prim.data
            elif t is Append:
                lst = lists.get(prim.list_id)
                if lst is None:
                    lists[prim.list_id] = lst = []
                lst.append(prim.data)
            elif t is KeyIncrement:
                counters[prim.key] = counters.get(prim.key, 0) + prim.counter
            count += 1
        now = clock()
        if now >= next_sample:
            samples.append((now, count))
            next_sample = now + 0.1
    samples.append((clock(), count))
    print(json.dumps({"count": count, "errors": errors, "socket_drops": socket_drops, "keys": len(store),
                      "list_entries": sum(map(len, lists.values())), "counters": len(counters),
                      "samples": samples}), flush=True)
    return 0


def helper_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netstack.bench.dta",
                                     description="helper process of 'netstack bench dta'")
    parser.add_argument("--role", choices=["naive", "query"], required=True)
    parser.add_argument("--params", required=True, help="JSON parameters")
    args = parser.parse_args(argv)
    if args.role == "query":
        from .queryrate import role_query

        return role_query(json.loads(args.params))
    return role_naive(json.loads(args.params))
