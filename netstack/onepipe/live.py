"""``python -m netstack.onepipe.live``: the 1Pipe processes of one host, scattering for a while.

``netstack onepipe run`` starts one of these in each host's namespace. Each runs several 1Pipe
processes (one :class:`~netstack.onepipe.api.OnePipeEndpoint` and UDP port each, "each process is
its own endpoint at the ToR", design topic §3 in docs/papers.md) in one event loop. Every
process sends a scattering to ``fanout`` random other processes at ``rate`` scatterings per
second for ``seconds``, then keeps receiving for ``drain`` seconds so that the last messages are
delivered or reported lost. It writes:

- ``OUT/<process>.jsonl``: one JSON object per delivered message, in delivery order
  (the format :mod:`netstack.onepipe.check` reads: ``receiver``, ``src``, ``ts``, ``seq``, ``id``,
  ``at``);
- ``OUT/send-fail/<process>.jsonl``: one object per message its send-fail callback reported
  (``id``, ``dst``, ``ts``, ``seq``), apart so that ``OUT/*.jsonl`` is the delivery logs;

and prints one JSON summary per host on its last stdout line. A message's payload carries its
sender's scattering counter (8 bytes) and is padded to ``size`` bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import struct
import sys
import time
from pathlib import Path
from typing import IO, Any

from .api import OnePipeEndpoint
from .clock import HostClock
from .params import OnePipeParams

_SEQ = struct.Struct("!Q")
Addr = tuple[str, int]


def message_id(src: str, seq: int, dst: str) -> str:
    """A message's id in the run: sender, scattering, receiver (unique per message)."""
    return f"{src}.{seq}.{dst}"


class Process:
    """One 1Pipe process of the run: its endpoint, its log files and what it counted."""

    def __init__(self, name: str, addr: Addr, names: dict[Addr, str], out: Path, params: OnePipeParams,
                 clock: HostClock, broadcast: str | None = None) -> None:
        self.name = name
        self.addr = addr
        self.names = names
        self.log: IO[str] = open(out / f"{name}.jsonl", "w", buffering=1 << 16)  # noqa: SIM115 (closed in close())
        self.fail_log: IO[str] = open(out / "send-fail" / f"{name}.jsonl", "w")  # noqa: SIM115
        self.ep = OnePipeEndpoint(addr, params=params, clock=clock, on_send_fail=self._failed, broadcast=broadcast)
        self.sent = self.delivered = self.failed = self.waits = 0
        self.last_delivery_ns = 0

    def _failed(self, ts: int, dst: Addr, msg: bytes) -> None:
        seq = _SEQ.unpack_from(msg)[0] if len(msg) >= 8 else -1
        dname = self.names.get(dst, f"{dst[0]}:{dst[1]}")
        self.failed += 1
        self.fail_log.write(json.dumps({"id": message_id(self.name, seq, dname), "dst": dname, "ts": ts,
                                        "seq": seq}) + "\n")

    async def scatter(self, peers: list[Addr], rate: float, seconds: float, fanout: int, size: int,
                      rng: random.Random) -> None:
        """Send one scattering every 1/rate s (on a fixed schedule: late ones are sent at once)."""
        if not peers or rate <= 0:
            return
        period = 1 / rate
        start = time.monotonic()
        n = 0
        pad = b"\0" * max(0, size - 8)
        while True:
            due = start + n * period
            if due - start >= seconds:
                return
            delay = due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            dsts = rng.sample(peers, min(fanout, len(peers)))
            seq = n  # the endpoint numbers its scatterings 0, 1, 2... as we send them
            msg = _SEQ.pack(seq) + pad
            got = await self.ep.send([(d, msg) for d in dsts])
            if got != seq:
                raise RuntimeError(f"{self.name}: the endpoint numbered scattering {seq} as {got}")
            self.sent += len(dsts)
            n += 1

    async def receive(self) -> None:
        async for ts, src, msg in self.ep:
            seq = _SEQ.unpack_from(msg)[0] if len(msg) >= 8 else -1
            sname = self.names.get(src, f"{src[0]}:{src[1]}")
            self.delivered += 1
            self.last_delivery_ns = time.monotonic_ns()
            self.log.write(json.dumps({"receiver": self.name, "src": sname, "ts": ts, "seq": seq,
                                       "id": message_id(sname, seq, self.name), "at": self.ep.now()}) + "\n")

    def close(self) -> dict[str, Any]:
        self.ep.close()
        self.log.close()
        self.fail_log.close()
        return {"messages_sent": self.sent, "delivered": self.delivered, "send_failed": self.failed,
                "counters": self.ep.counters()}


async def run_host(args: argparse.Namespace) -> dict[str, Any]:
    procs: dict[str, Addr] = {name: (ip, int(port)) for name, ip, port in
                              (p.split(":") for p in args.all_procs.split(","))}
    mine = [p for p in args.procs.split(",") if p]
    unknown = [p for p in mine if p not in procs]
    if unknown:
        raise SystemExit(f"onepipe live: processes {unknown} are not in --all-procs")
    names = {addr: name for name, addr in procs.items()}
    out = Path(args.out)
    (out / "send-fail").mkdir(parents=True, exist_ok=True)
    params = OnePipeParams(**json.loads(args.params)) if args.params else OnePipeParams()
    clock = HostClock(args.clock_offset_ns, args.clock_drift_ppm, args.clock_epoch_ns)
    run: list[Process] = [Process(p, procs[p], names, out, params, clock, args.broadcast or None) for p in mine]
    try:
        for p in run:
            await p.ep.start()
        print("ready", file=sys.stderr, flush=True)
        if args.start_at:  # every host starts its scatterings at the same moment
            await asyncio.sleep(max(0.0, args.start_at - time.time()))
        readers = [asyncio.create_task(p.receive()) for p in run]
        await asyncio.gather(*(p.scatter([a for n, a in procs.items() if n != p.name], args.rate, args.seconds,
                                         args.fanout, args.size, random.Random(f"{args.seed}/{p.name}"))
                               for p in run))
        await asyncio.sleep(args.drain)
        for t in readers:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
    finally:
        summary = {p.name: p.close() for p in run}
    return {"tool": "onepipe-live", "host_procs": mine, "processes": summary}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m netstack.onepipe.live", description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", required=True, help="this host's processes, comma separated")
    p.add_argument("--all-procs", required=True, help="every process of the run: name:ip:port,...")
    p.add_argument("--out", required=True, help="directory for the logs")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rate", type=float, default=100.0, help="scatterings per second per process")
    p.add_argument("--fanout", type=int, default=2, help="destinations per scattering")
    p.add_argument("--size", type=int, default=64, help="bytes per message")
    p.add_argument("--drain", type=float, default=1.0, help="seconds to keep receiving after the last send")
    p.add_argument("--seed", default="1")
    p.add_argument("--start-at", type=float, default=0.0, help="wall-clock time (time.time()) to start at")
    p.add_argument("--clock-offset-ns", type=int, default=0)
    p.add_argument("--clock-drift-ppm", type=float, default=0.0)
    p.add_argument("--clock-epoch-ns", type=int, default=0,
                   help="CLOCK_MONOTONIC at the run's start: the drift counts from there")
    p.add_argument("--params", default="", help="OnePipeParams fields as JSON")
    p.add_argument("--broadcast", default="", help="where beacons go (default: the /24 of the address)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    result = runner(run_host(args))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
