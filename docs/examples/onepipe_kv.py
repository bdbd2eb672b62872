"""A transactional key-value store on reliable 1Pipe's asyncio API, or on lock-based two-phase
commit over plain UDP (``--mode 2pc``), with the same workload (docs/onepipe-kv.md; 1Pipe §7.3).

Every process of a run gets the same description: the shards (``--shard``, once per shard, its
replicas' IP:PORT comma-separated) and the clients (``--client``), and its own address first. A
shard replica applies the transactions 1Pipe delivers, in 1Pipe's total order; a client runs
YCSB+T transactions back to back for ``--seconds``, each one scattering to every replica of
every shard it touches. Results come back on a plain UDP socket at the 1Pipe port + 1000. Each
process writes what it saw to ``--out/<ip>_<port>.json`` at the end; ``--check DIR`` then checks
the clients' histories for strict serializability (exit 0 ok, 1 violation) and prints
throughput and latency.

    netstack up onepipe --prefix kvx && netstack onepipe enable --prefix kvx
    for h in "h1 10.0.0.1:40101" "h2 10.0.0.2:40101" "h3 10.0.0.3:40101" "h4 10.0.0.4:40101"; do
      set -- $h
      netstack exec --prefix kvx $1 -- .venv/bin/python docs/examples/onepipe_kv.py $2 \\
          --shard 10.0.0.1:40101 --shard 10.0.0.2:40101 --client 10.0.0.3:40101 --client 10.0.0.4:40101 \\
          --out /tmp/kv &
    done; wait
    .venv/bin/python docs/examples/onepipe_kv.py --check /tmp/kv
    netstack down --prefix kvx

``--mode 2pc`` runs the baseline the same way (no controller, no 1Pipe needed); ``kill -9`` a
shard replica (with two replicas a shard) or a client mid-run and the others go on: the check
still passes (the killed client's last transaction ran everywhere or nowhere). A run may reuse
the addresses of an earlier one: the controller declares that run's processes failed and tells
the new ones, which register as new incarnations (docs/onepipe-kv.md, "Live").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from netstack.engine import SendTo
from netstack.onepipe.api import OnePipeEndpoint
from netstack.onepipe.endpoint import sender_key
from netstack.onepipe.kv import wire
from netstack.onepipe.kv.checker import Txn, check
from netstack.onepipe.kv.client import KvClient
from netstack.onepipe.kv.shard import KvShard
from netstack.onepipe.kv.twopc import TwoPCClient, TwoPCShard
from netstack.onepipe.kv.workload import Workload, txn_class

Addr = tuple[str, int]


def addr(text: str) -> Addr:
    ip, _, port = text.rpartition(":")
    return ip, int(port)


def addrs(text: str) -> list[Addr]:
    return [addr(x) for x in text.split(",") if x]


class Side(asyncio.DatagramProtocol):
    """The plain UDP socket beside the 1Pipe endpoint: results, queries, and all of 2PC."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, src: Addr) -> None:
        self.handler(data, src)

    def drain(self, eng: Any) -> None:
        for act in eng.actions.take_all():
            if isinstance(act, SendTo) and self.transport is not None:
                self.transport.sendto(act.data, act.dst)


async def run_shard(a: argparse.Namespace, shard: int, replica: int) -> dict[str, Any]:
    side = Side(None)
    if a.mode == "2pc":
        eng2 = TwoPCShard(shard)

        def on_2pc(data: bytes, src: Addr) -> None:
            eng2.receive(src, data, time.monotonic_ns())
            side.drain(eng2)

        side.handler = on_2pc
        await asyncio.get_running_loop().create_datagram_endpoint(lambda: side, local_addr=wire.side_addr(a.me))
        await asyncio.sleep(a.start + a.seconds + a.drain)
        return {"role": "shard", "shard": shard, "log": eng2.log, "counters": eng2.counters()}
    eng = KvShard(shard, replica)

    def on_query(data: bytes, src: Addr) -> None:
        eng.query(src, data, time.monotonic_ns())
        side.drain(eng)

    side.handler = on_query
    await asyncio.get_running_loop().create_datagram_endpoint(lambda: side, local_addr=wire.side_addr(a.me))
    async with OnePipeEndpoint(a.me, reliable=True, controller=a.controller) as ep:
        async def serve() -> None:
            async for ts, src, msg in ep:  # 1Pipe's total order: the serial order, no locks
                eng.deliver(ts, src, msg, time.monotonic_ns())
                side.drain(eng)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(serve(), a.start + a.seconds + a.drain)
        counters = eng.counters()
    return {"role": "shard", "shard": shard, "replica": replica, "counters": counters,
            "log": [[ts, f"{s[0]}:{s[1]}", uid] for ts, s, uid in eng.log]}


class ClientLoop:
    """One client: transactions back to back, its history in ``self.history``."""

    def __init__(self, a: argparse.Namespace, index: int) -> None:
        self.a = a
        self.wl = Workload(keys=a.keys, shards=len(a.shard), ops=2, contention=a.contention, hot=a.hot, mix=a.mix)
        self.rng = random.Random(f"{a.seed}/{a.me}")
        self.history: list[dict[str, Any]] = []
        self.current: tuple[int, Any, int] | None = None  # (uid, ops, invoke) of the running transaction
        self.done = asyncio.Event()
        self.index = index

    def record(self, uid: int, ops: Any, reads: Any, invoke: int, stamp: Any) -> None:
        now = time.monotonic_ns()
        self.history.append({"uid": uid, "ops": [list(o) for o in ops], "reads": [list(r) for r in reads],
                             "invoke": invoke, "respond": now, "stamp": stamp, "class": txn_class(ops)})
        self.current = None
        self.done.set()

    def pending(self) -> list[dict[str, Any]]:
        if self.current is None:
            return []
        uid, ops, invoke = self.current
        return [{"uid": uid, "ops": [list(o) for o in ops], "reads": [], "invoke": invoke, "respond": None}]


async def run_client_onepipe(a: argparse.Namespace, index: int) -> dict[str, Any]:
    loop = ClientLoop(a, index)
    eng = KvClient(index, a.shard, query_timeout_ns=int(a.query_timeout * 1e9))
    held: list[OnePipeEndpoint] = []  # the endpoint, once open
    side = Side(None)

    def on_result(data: bytes, src: Addr) -> None:
        done = eng.on_result(data, time.monotonic_ns())
        if done is not None and loop.current is not None and loop.current[0] == done.uid:
            loop.record(done.uid, done.ops, done.reads, loop.current[2], [done.ts, sender_key(a.me)])

    def on_send_fail(ts: int, dst: Addr, msg: bytes) -> None:
        redo = eng.send_failed(ts, dst, msg)  # recalled: the transaction ran nowhere, run it again
        if redo is not None and loop.current is not None and loop.current[0] == redo[0]:
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(send(redo[1], loop.current)))

    async def send(ops: Any, cur: Any) -> None:
        uid, scatter = eng.begin(ops, time.monotonic_ns())
        loop.current = (uid, ops, cur[2] if cur else time.monotonic_ns())
        await held[0].send(scatter)

    joined: list[int] = []  # this process's clock when it registered

    def on_proc_fail(proc: Addr, t_f: int) -> None:
        # a notice about an earlier process on that address (it failed before we joined) is not
        # about the replica running there now: only a failure after we joined marks it dead. The
        # controller tells a newcomer of every process still failed *before* its registration
        # reply (1Pipe §8: a zombie's messages above T_f must not be taken), so a notice that
        # comes before we joined is such a one; the endpoint still refuses that zombie's messages
        # and takes the address back when a new process registers there
        if joined and (t_f == 0 or t_f >= joined[0]):
            eng.proc_failed(proc)

    side.handler = on_result
    await asyncio.get_running_loop().create_datagram_endpoint(lambda: side, local_addr=wire.side_addr(a.me))
    # (made before it starts: start() waits for the registration, so on_register fires inside it,
    # and an endpoint taken from ``async with`` came too late: every notice, an earlier run's
    # process's at a reused address included, then marked its replica dead for good)
    ep = OnePipeEndpoint(a.me, reliable=True, controller=a.controller, on_send_fail=on_send_fail,
                         on_proc_fail=on_proc_fail, on_register=lambda inc: joined.append(ep.now()))
    async with ep:
        held.append(ep)
        await asyncio.sleep(a.start)
        stop = time.monotonic() + a.seconds
        n = 0
        while time.monotonic() < stop:
            n += 1
            loop.done.clear()
            await send(loop.wl.txn(loop.rng, index * 10_000_000 + n), None)
            while not loop.done.is_set():  # ask again for lost results while waiting
                try:
                    await asyncio.wait_for(loop.done.wait(), a.query_timeout)
                except TimeoutError:
                    eng.on_timer(time.monotonic_ns())
                    side.drain(eng)
                    if time.monotonic() > stop + a.drain:
                        break
        counters = {**eng.counters(), "endpoint": ep.counters()}
    return {"role": "client", "history": loop.history + loop.pending(), "counters": counters}


async def run_client_2pc(a: argparse.Namespace, index: int) -> dict[str, Any]:
    loop = ClientLoop(a, index)
    eng = TwoPCClient(index, [wire.side_addr(r[0]) for r in a.shard], rto_ns=int(a.query_timeout * 1e9),
                      backoff_ns=int(a.backoff * 1e9), rng=random.Random(f"{a.seed}/2pc/{a.me}"))
    side = Side(None)

    def on_data(data: bytes, src: Addr) -> None:
        done = eng.receive(data, time.monotonic_ns())
        side.drain(eng)
        if done is not None and loop.current is not None:
            loop.record(done.uid, done.ops, done.reads, loop.current[2], done.ts)

    side.handler = on_data
    await asyncio.get_running_loop().create_datagram_endpoint(lambda: side, local_addr=wire.side_addr(a.me))
    await asyncio.sleep(a.start)
    stop = time.monotonic() + a.seconds
    n = 0
    while time.monotonic() < stop:
        n += 1
        loop.done.clear()
        ops = loop.wl.txn(loop.rng, index * 10_000_000 + n)
        loop.current = (0, ops, time.monotonic_ns())
        eng.begin(ops, time.monotonic_ns())
        side.drain(eng)
        while not loop.done.is_set() and time.monotonic() < stop + a.drain:
            d = eng.next_deadline()
            wait = 0.01 if d is None else max(0.0, (d - time.monotonic_ns()) / 1e9)
            try:
                await asyncio.wait_for(loop.done.wait(), wait)
            except TimeoutError:
                eng.on_timer(time.monotonic_ns())
                side.drain(eng)
    return {"role": "client", "history": loop.history + loop.pending(), "counters": eng.counters()}


async def main(a: argparse.Namespace) -> None:
    role: Any
    for s, reps in enumerate(a.shard):
        if a.me in reps:
            role = run_shard(a, s, reps.index(a.me))
            break
    else:
        if a.me not in a.client:
            sys.exit(f"{a.me} is neither a shard replica nor a client of this run")
        index = a.client.index(a.me) + 1
        role = (run_client_2pc if a.mode == "2pc" else run_client_onepipe)(a, index)
    out = await role
    out.update(me=f"{a.me[0]}:{a.me[1]}", mode=a.mode)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / f"{a.me[0]}_{a.me[1]}.json").write_text(json.dumps(out))
    print(json.dumps({"me": out["me"], "role": out["role"], "counters": out["counters"]}), flush=True)


def check_dir(path: str) -> int:
    """Check every client's history in ``path`` (pending transactions placed by the shards' logs)."""
    docs = [json.loads(p.read_text()) for p in sorted(Path(path).glob("*.json"))]
    ran: dict[int, Any] = {}
    for d in docs:
        for ts, src, uid in d.get("log", []) if d["mode"] == "onepipe" else []:
            ran[uid] = (ts, sender_key(addr(src)))
    history, lat = [], []
    for d in (d for d in docs if d["role"] == "client"):
        for t in d["history"]:
            stamp = t.get("stamp")
            stamp = tuple(stamp) if isinstance(stamp, list) else stamp
            if t["respond"] is None:
                stamp = ran.get(t["uid"])
            else:
                lat.append((t["class"], t["respond"] - t["invoke"]))
            history.append(Txn(t["uid"], tuple(wire.Op(wire.OpKind(k), key, arg) for k, key, arg in t["ops"]),
                               tuple((k, v) for k, v in t["reads"]), t["invoke"], t["respond"], stamp))
    verdict = check(history)
    by_class = {c: [x for k, x in lat if k == c] for c in ("RO", "WO", "WR")}
    print(json.dumps({"txns": len(history), "strictly_serializable": verdict.ok, "reason": verdict.reason,
                      "mean_latency_ms": {c: round(sum(v) / len(v) / 1e6, 3) if v else None
                                          for c, v in by_class.items()}}), flush=True)
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("me", type=addr, nargs="?", help="this process's IP:PORT (a port in 40101-40199)")
    p.add_argument("--shard", type=addrs, action="append", default=[], help="one shard's replicas, IP:PORT,...")
    p.add_argument("--client", type=addr, action="append", default=[], help="a client, IP:PORT")
    p.add_argument("--mode", choices=("onepipe", "2pc"), default="onepipe")
    p.add_argument("--controller", type=addr, default=("10.0.0.100", 40100),
                   help="reliable 1Pipe's controller (default: the shipped topology's, 10.0.0.100:40100)")
    p.add_argument("--seconds", type=float, default=5.0, help="how long clients run transactions (default 5)")
    p.add_argument("--start", type=float, default=2.0, help="seconds to let every process join first (default 2)")
    p.add_argument("--drain", type=float, default=3.0, help="seconds to finish what is in flight (default 3)")
    p.add_argument("--contention", type=float, default=0.0, help="fraction of transactions on the hot keys")
    p.add_argument("--hot", type=int, default=4, help="hot keys (default 4)")
    p.add_argument("--keys", type=int, default=10_000, help="keys (default 10000)")
    p.add_argument("--mix", choices=("ro", "wo", "rmw", "mixed"), default="mixed")
    p.add_argument("--query-timeout", type=float, default=0.3,
                   help="ask again for a result (2PC: retransmit) after this many seconds (default 0.3)")
    p.add_argument("--backoff", type=float, default=0.003, help="2PC's retry backoff unit, seconds (default 0.003)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", default="/tmp/kv", help="where to write this process's record (default /tmp/kv)")
    p.add_argument("--check", metavar="DIR", help="check the records in DIR instead of running a process")
    args = p.parse_args()
    if args.check:
        sys.exit(check_dir(args.check))
    if args.me is None or not args.shard or not args.client:
        p.error("give this process's address, --shard (at least one) and --client (at least one)")
    asyncio.run(main(args))
