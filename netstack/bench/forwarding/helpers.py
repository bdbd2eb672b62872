"""The helper processes of ``netstack bench forwarding``, started in the namespaces with
``python -m netstack.bench.forwarding --role gen|bare``: the generator, and the bare Python
forwarder that is the baseline of the switch daemon."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import sys
import time
from typing import Any

from .frames import PrebuiltBatch, make_frame
from .params import ETH_P_ALL, GEN_BATCH, PACKET_IGNORE_OUTGOING, PACKET_STATISTICS, SOL_PACKET


def helper_argv(role: str, **params: Any) -> list[str]:
    return [sys.executable, "-m", "netstack.bench.forwarding", "--role", role, "--params", json.dumps(params)]


def _role_gen(p: dict[str, Any]) -> int:
    """Send pre-built frames as fast as one core can for p['duration'] seconds."""
    from ...io.packet import PacketPort

    if p.get("cpus"):
        os.sched_setaffinity(0, p["cpus"])
    port = PacketPort(p["ifname"], rcvbuf=4096)
    frames = [make_frame(p["size"], p["src_mac"], p["dst_mac"], ident=i % 256) for i in range(GEN_BATCH)]
    batch = PrebuiltBatch(port.fd, frames)
    print("ready", flush=True)
    sent = 0
    short = 0  # calls where the kernel took fewer than the whole batch (socket buffer full)
    clock = time.perf_counter
    send = batch.send
    full = batch.count
    start = clock()
    deadline = start + p["duration"]
    while clock() < deadline:
        n = send()
        sent += n
        if n < full:
            short += 1
    elapsed = clock() - start
    print(json.dumps({"sent": sent, "elapsed_s": elapsed, "short_batches": short}), flush=True)
    port.close()
    return 0


class _Stop(Exception):
    """SIGTERM in a helper: leave the loop and report (not an OSError, so no send error)."""


def _role_bare(p: dict[str, Any]) -> int:
    """The baseline: recv_into one AF_PACKET socket, send on the other, nothing else."""
    if p.get("cpus"):
        os.sched_setaffinity(0, p["cpus"])
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    rx.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind((p["rx"], ETH_P_ALL))
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: receives nothing
    tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    tx.bind((p["tx"], 0))
    def _term(signum: int, frame: Any) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, _term)
    buf = bytearray(9216)
    view = memoryview(buf)
    recv_into = rx.recv_into
    send = tx.send
    forwarded = 0
    send_errors = 0
    print("ready", flush=True)
    try:
        while True:
            n = recv_into(view)
            try:
                send(view[:n])
                forwarded += 1
            except OSError:
                send_errors += 1
    except _Stop:
        pass
    packets, drops = struct.unpack("II", rx.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    print(json.dumps({"forwarded": forwarded, "send_errors": send_errors, "kernel_packets": packets,
                      "kernel_drops": drops}), flush=True)
    return 0


def helper_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netstack.bench.forwarding",
                                     description="helper processes of 'netstack bench forwarding'")
    parser.add_argument("--role", choices=["gen", "bare"], required=True)
    parser.add_argument("--params", required=True, help="JSON parameters")
    args = parser.parse_args(argv)
    params = json.loads(args.params)
    return _role_gen(params) if args.role == "gen" else _role_bare(params)
