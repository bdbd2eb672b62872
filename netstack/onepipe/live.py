"""``python -m netstack.onepipe.live``: 1Pipe processes scattering for a while.

``netstack onepipe run`` starts one of these per 1Pipe process, in its host's namespace, so that
one process can be killed on its own (``netstack onepipe kill``); ``--procs p1,p5`` runs several
in one event loop (one :class:`~netstack.onepipe.api.OnePipeEndpoint` and UDP port each, "each
process is its own endpoint at the ToR", design topic §3 in docs/papers.md). Every process sends
a scattering to ``fanout`` random other processes at ``rate`` scatterings per second for
``seconds``, then keeps receiving for ``drain`` seconds so that the last messages are delivered
or reported lost. ``--reliable --controller IP:PORT``: reliable 1Pipe (design topics §7-§8). It
writes, per process ``p``:

- ``OUT/p.jsonl``: one JSON object per delivered message, in delivery order (the format
  :mod:`netstack.onepipe.check` reads: ``receiver``, ``src``, ``ts``, ``seq``, ``id``, ``at``);
- ``OUT/send-fail/p.jsonl``: one object per message its send-fail callback reported, known not
  delivered (``id``, ``dst``, ``ts``, ``seq``; ``ts`` 0: the message never left, its destination
  had failed);
- ``OUT/send-unknown/p.jsonl``: the same per message whose fate the sender could not learn (the
  ACK timeout, ``on_send_unknown``: maybe delivered, issue 31);
- ``OUT/in-flight/p.jsonl``: written when the process ends normally (a killed one writes none),
  the same per message still without a fate then (``ts`` null), and, with ``"held": true`` and
  ``src`` instead of ``dst``, per message it received and ACKed but had not delivered yet;
- ``OUT/sent/p.jsonl``: one object per scattering, written just before it is handed to the
  endpoint: ``seq``, ``ts`` (null: the endpoint stamps it when it leaves the send buffer and
  does not say when; the receivers' logs carry it), ``dsts`` (process names), ``at``;
- ``OUT/proc-fail/p.jsonl`` (empty in best effort): ``{"proc": "ip:port", "name", "incarnation",
  "t_f", "at"}`` per process-fail callback (``incarnation``: the failed one, from the notice;
  ``t_f`` 0: no commit of it was known), and ``{"proc": its own "ip:port", "name",
  "registered": incarnation, "at"}`` each time the process registers: when it joins, and when
  it re-joins after it was declared failed (a recovery); and ``{"proc": its own, "name",
  "stopped": incarnation or null, "at"}`` when it ends normally (a killed process writes none);

and prints one JSON summary on its last stdout line. Besides each process's counters it carries
what the run's validity is judged by (:mod:`.verdict`): ``sched``, the event loop's scheduling
delay from the join to the end (:func:`netstack.looplag.summary`; the processes of one host
process share a loop and so a measure), and per process ``scatter``: how late it started
scattering, how long it took, and how far behind its schedule it fell. Logs are written in whole lines (a process
killed with SIGKILL loses its last unwritten lines, never leaves half a line); the auxiliary logs
line by line, the delivery log in batches. A message's payload carries its sender's scattering
counter (8 bytes) and is padded to ``size`` bytes.

``--keys FILE --domain PREFIX``: the deployment has keys (docs/onepipe.md "Authenticated beacons
and barriers"): the process reads the key file itself (no key material on a command line), seals
and opens every datagram (:class:`~netstack.onepipe.auth.HostAuth`) and follows a rotation of the
file. ``--clock-file FILE``: a clock-jump hook (docs/onepipe.md "Clock jumps"): the file is read at
most every :data:`CLOCK_POLL_S` and, while it holds ``{"offset_ns": N}``, the host clock is the
topology's stepped by N ns (absent or unreadable: no step).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import struct
import sys
import time
from pathlib import Path
from typing import Any

from .. import looplag
from ..auth.frame import era_now
from ..auth.sign import load_verify_key
from ..auth.watch import KEY_POLL_S, KeyFileWatch
from .api import OnePipeEndpoint
from .auth import HostAuth
from .clock import HostClock
from .params import OnePipeParams

_SEQ = struct.Struct("!Q")
Addr = tuple[str, int]
#: how often the batched logs are written out (a killed process loses at most this much)
FLUSH_S = 0.1
#: the log directories under OUT, one file per process in each
AUX_DIRS = ("send-fail", "send-unknown", "in-flight", "sent", "proc-fail")
#: how often the clock-jump file is read (the hook's resolution)
CLOCK_POLL_S = 0.1


def message_id(src: str, seq: int, dst: str) -> str:
    """A message's id in the run: sender, scattering, receiver (unique per message)."""
    return f"{src}.{seq}.{dst}"


def show(addr: Addr) -> str:
    return f"{addr[0]}:{addr[1]}"


class LineLog:
    """A JSON Lines file written in whole lines only: lines are kept and written out with one
    ``write(2)`` per batch (``limit`` bytes; 0: every line at once), so that a process killed
    with SIGKILL leaves complete lines (a buffered file object may write half of one)."""

    def __init__(self, path: Path, limit: int = 1 << 16) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        self.limit = limit
        self._lines: list[str] = []
        self._size = 0

    def write(self, obj: dict[str, Any]) -> None:
        line = json.dumps(obj, separators=(",", ":")) + "\n"
        self._lines.append(line)
        self._size += len(line)
        if self._size >= self.limit:
            self.flush()

    def flush(self) -> None:
        if not self._lines:
            return
        data = memoryview("".join(self._lines).encode())
        self._lines.clear()
        self._size = 0
        while data:
            data = data[os.write(self.fd, data):]

    def close(self) -> None:
        if self.fd >= 0:
            self.flush()
            os.close(self.fd)
            self.fd = -1


class Process:
    """One 1Pipe process of the run: its endpoint, its log files and what it counted."""

    def __init__(self, name: str, addr: Addr, names: dict[Addr, str], out: Path, params: OnePipeParams,
                 clock: HostClock, broadcast: str | None = None, controller: Addr | None = None,
                 auth: HostAuth | None = None, lag: looplag.LagHistogram | None = None) -> None:
        self.name = name
        self.addr = addr
        self.names = names
        self.log = LineLog(out / f"{name}.jsonl")
        self.fail_log = LineLog(out / "send-fail" / f"{name}.jsonl", limit=0)
        self.unknown_log = LineLog(out / "send-unknown" / f"{name}.jsonl", limit=0)
        self.out = out
        self.sent_log = LineLog(out / "sent" / f"{name}.jsonl", limit=0)
        self.pf_log = LineLog(out / "proc-fail" / f"{name}.jsonl", limit=0)
        rel = controller is not None
        self.ep = OnePipeEndpoint(addr, params=params, clock=clock, on_send_fail=self._failed,
                                  on_send_unknown=self._unknown, broadcast=broadcast,
                                  reliable=rel, controller=controller, on_proc_fail=self._proc_failed if rel else None,
                                  on_register=self._registered if rel else None, auth=auth, lag=lag)
        self.sent = self.delivered = self.failed = self.unknown = self.proc_failed = 0
        #: the clock jumps applied: ``{"offset_ns": the step, "at": the host clock just after}``
        self.clock_steps: list[dict[str, int]] = []
        self.incarnations: list[int] = []
        self.last_delivery_ns = 0
        #: how the scattering went against its schedule (``scatter`` in the summary)
        self.scatter_info: dict[str, float] = {}

    def _name(self, addr: Addr) -> str:
        return self.names.get(addr, show(addr))

    def _fate(self, ts: int | None, dst: Addr, msg: bytes) -> dict[str, Any]:
        seq = _SEQ.unpack_from(msg)[0] if len(msg) >= 8 else -1
        dname = self._name(dst)
        return {"id": message_id(self.name, seq, dname), "dst": dname, "ts": ts, "seq": seq}

    def _failed(self, ts: int, dst: Addr, msg: bytes) -> None:
        self.failed += 1
        self.fail_log.write(self._fate(ts, dst, msg))

    def _unknown(self, ts: int, dst: Addr, msg: bytes) -> None:
        self.unknown += 1
        self.unknown_log.write(self._fate(ts, dst, msg))

    def _proc_failed(self, proc: Addr, t_f: int) -> None:
        self.proc_failed += 1
        self.pf_log.write({"proc": show(proc), "name": self._name(proc),
                           "incarnation": self.ep.failed_incarnation(proc), "t_f": t_f, "at": self.ep.now()})

    def _registered(self, incarnation: int) -> None:
        self.incarnations.append(incarnation)
        self.pf_log.write({"proc": show(self.addr), "name": self.name, "registered": incarnation, "at": self.ep.now()})

    async def scatter(self, peers: list[Addr], rate: float, seconds: float, fanout: int, size: int,
                      rng: random.Random) -> None:
        """Send one scattering every 1/rate s (on a fixed schedule: late ones are sent at once).
        ``scatter_info``: ``span_s`` (from the first scattering to one period after the last: the
        planned ``seconds`` when every one left on time), ``max_behind_s`` (the latest one left
        this long after its due time), ``scatterings``."""
        info = self.scatter_info
        info.update(span_s=0.0, max_behind_s=0.0, scatterings=0)
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
            elif -delay > info["max_behind_s"]:  # the host did not run us in time (or the buffer was full)
                info["max_behind_s"] = round(-delay, 4)
            dsts = rng.sample(peers, min(fanout, len(peers)))
            # our counter, not the endpoint's: a reliable endpoint numbers nothing when every
            # destination had failed. Listed before it is handed over: a process killed in
            # between lists a scattering nobody delivers, never delivers one it did not list
            self.sent_log.write({"seq": n, "ts": None, "dsts": [self._name(d) for d in dsts], "at": self.ep.now()})
            msg = _SEQ.pack(n) + pad
            await self.ep.send([(d, msg) for d in dsts])
            self.sent += len(dsts)
            n += 1
            info.update(span_s=round(time.monotonic() - start + period, 4), scatterings=n)

    async def receive(self) -> None:
        async for ts, src, msg in self.ep:
            seq = _SEQ.unpack_from(msg)[0] if len(msg) >= 8 else -1
            sname = self._name(src)
            self.delivered += 1
            self.last_delivery_ns = time.monotonic_ns()
            self.log.write({"receiver": self.name, "src": sname, "ts": ts, "seq": seq,
                            "id": message_id(sname, seq, self.name), "at": self.ep.now()})

    def flush(self) -> None:
        self.log.flush()

    def close(self) -> dict[str, Any]:
        if self.ep.reliable:
            # the switches will time this process out and the controller declare it failed: that
            # failure is its end, not a crash (netstack.onepipe.check reads it so)
            self.pf_log.write({"proc": show(self.addr), "name": self.name, "stopped": self.ep.incarnation,
                               "at": self.ep.now()})
        left = self.ep.outstanding()  # no fate yet: in flight at the end (accounting.py)
        # and what reached us, ACKed, that we have not delivered (the barrier had not passed it):
        # its sender learnt no fate either, and lists nothing
        held = self.ep.held()
        self.ep.close()
        flight = LineLog(self.out / "in-flight" / f"{self.name}.jsonl")
        for dst, msg in left:
            flight.write(self._fate(None, dst, msg))
        for src, msg in held:
            seq = _SEQ.unpack_from(msg)[0] if len(msg) >= 8 else -1
            sname = self._name(src)
            flight.write({"id": message_id(sname, seq, self.name), "src": sname, "ts": None, "seq": seq,
                          "held": True})
        for log in (self.log, self.fail_log, self.unknown_log, self.sent_log, self.pf_log, flight):
            log.close()
        # the process's own view; the run's summary counts from every log (accounting.tally)
        out = {"messages_sent": self.sent, "received": self.delivered, "send_failed": self.failed,
               "send_unknown": self.unknown, "in_flight_at_end": len(left),
               "counters": self.ep.counters(), "scatter": dict(self.scatter_info)}
        if self.clock_steps:
            out["clock_steps"] = self.clock_steps
        if self.ep.reliable:
            out.update(proc_failed=self.proc_failed, incarnations=self.incarnations)
        return out


async def _flush_every(procs: list[Process], period: float) -> None:
    while True:
        await asyncio.sleep(period)
        for p in procs:
            p.flush()


def read_clock_step(path: Path, previous: int) -> int:
    """The step ``{"offset_ns": N}`` in the clock-jump file: 0 when there is no file, ``previous``
    when it cannot be read or is not such an object (a writer caught half way: the next poll
    reads it whole)."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        return 0
    except (OSError, ValueError):
        return previous
    n = doc.get("offset_ns") if isinstance(doc, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else previous


async def _follow(procs: list[Process], base: HostClock, clock_file: Path | None, keys: KeyFileWatch | None,
                  domain: str) -> None:
    """The clock-jump hook and the key file: a step read from ``clock_file`` becomes every
    process's clock (the topology's, ``base``, stepped); a rotated key file reaches every sealer
    and opener."""
    step = 0
    next_keys = time.monotonic() + KEY_POLL_S
    while True:
        await asyncio.sleep(CLOCK_POLL_S)
        if clock_file is not None:
            n = read_clock_step(clock_file, step)
            if n != step:
                step = n
                clock = HostClock(base.offset_ns + n, base.drift_ppm, base.epoch_ns)
                for p in procs:
                    p.ep.set_clock(clock)
                    p.clock_steps.append({"offset_ns": n, "at": p.ep.now()})
        if keys is not None and time.monotonic() >= next_keys:
            next_keys = time.monotonic() + KEY_POLL_S
            ring = keys.poll()
            for p in procs:
                if p.ep.auth is not None:
                    p.ep.auth.refresh(ring, domain, time.time())


#: how long a process waits for the runner's go (netstack.onepipe.runner._go) before it gives up
GO_TIMEOUT_S = 600.0


async def _wait_for_go(go: Path, mine: list[str]) -> tuple[float, float]:
    """``netstack onepipe run``'s start-up handshake: say that this interpreter runs (a file in
    ``<go>.ready/``), then wait for the runner's ``{"join_at", "start_at"}`` in ``go``, which it
    writes once every process of the run is ready (runner._go)."""
    ready = go.with_name(go.name + ".ready")
    ready.mkdir(parents=True, exist_ok=True)
    (ready / ",".join(mine)).touch()
    deadline = time.monotonic() + GO_TIMEOUT_S
    while True:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            d = json.loads(go.read_text())
            return float(d["join_at"]), float(d["start_at"])
        if time.monotonic() > deadline:
            raise SystemExit(f"onepipe live: no go from the runner in {go} within {GO_TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.02)


async def run_host(args: argparse.Namespace) -> dict[str, Any]:
    procs: dict[str, Addr] = {name: (ip, int(port)) for name, ip, port in
                              (p.split(":") for p in args.all_procs.split(","))}
    mine = [p for p in args.procs.split(",") if p]
    unknown = [p for p in mine if p not in procs]
    if unknown:
        raise SystemExit(f"onepipe live: processes {unknown} are not in --all-procs")
    names = {addr: name for name, addr in procs.items()}
    out = Path(args.out)
    for d in AUX_DIRS:
        (out / d).mkdir(parents=True, exist_ok=True)
    params = OnePipeParams(**json.loads(args.params)) if args.params else OnePipeParams()
    clock = HostClock(args.clock_offset_ns, args.clock_drift_ppm, args.clock_epoch_ns)
    controller = _addr(args.controller) if args.reliable else None
    keys = KeyFileWatch(args.keys) if args.keys else None  # the file's path only: we read it ourselves
    # the controller's public key only (beside the key file): its messages are signed (netstack/auth/sign.py)
    verify = load_verify_key(args.keys) if keys is not None and controller is not None else None
    era = era_now(time.time())
    if args.go_file:
        args.join_at, args.start_at = await _wait_for_go(Path(args.go_file), mine)
    if args.join_at:
        # every process of the run joins at once, once every interpreter has started: one that
        # joined early would starve while the others start, its input would time out at its ToR
        # and, under a controller, it would be declared failed before the run began
        await asyncio.sleep(max(0.0, args.join_at - time.time()))
    # this loop's scheduling delay from the join on: the run's validity, and the endpoints' timer
    # slack (api.OnePipeEndpoint), share one measure
    lag = looplag.LagHistogram(time.monotonic_ns())
    tasks: list[asyncio.Task[None]] = [asyncio.create_task(looplag.monitor(lag))]
    run: list[Process] = [
        Process(p, procs[p], names, out, params, clock, args.broadcast or None, controller,
                None if keys is None else HostAuth.from_ring(keys.ring, args.domain, procs[p], era, time.time(),
                                                             controller, verify), lag)
        for p in mine]
    if args.clock_file or keys is not None:
        tasks.append(asyncio.create_task(_follow(run, clock, Path(args.clock_file) if args.clock_file else None,
                                                 keys, args.domain)))
    late = 0.0
    try:
        for p in run:
            await p.ep.start()
        print("ready", file=sys.stderr, flush=True)
        if args.start_at:  # every process starts its scatterings at the same moment
            await asyncio.sleep(max(0.0, args.start_at - time.time()))
            late = max(0.0, time.time() - args.start_at)
        tasks += [asyncio.create_task(p.receive()) for p in run]
        tasks.append(asyncio.create_task(_flush_every(run, FLUSH_S)))
        await asyncio.gather(*(p.scatter([a for n, a in procs.items() if n != p.name], args.rate, args.seconds,
                                         args.fanout, args.size, random.Random(f"{args.seed}/{p.name}"))
                               for p in run))
        await asyncio.sleep(args.drain)
    finally:
        for t in tasks:
            t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await t
        summary = {p.name: p.close() for p in run}
    sched = looplag.summary(lag.snapshot())
    for s in summary.values():
        s["sched"] = sched
        s["scatter"]["started_late_s"] = round(late, 4)
    return {"tool": "onepipe-live", "host_procs": mine, "reliable": args.reliable, "sched": sched,
            "processes": summary}


def _addr(text: str) -> Addr:
    ip, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"onepipe live: --controller {text!r} is not IP:PORT")
    return ip, int(port)


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
    p.add_argument("--join-at", type=float, default=0.0,
                   help="wall-clock time (time.time()) to open the sockets and join (register, beacon) at")
    p.add_argument("--go-file", default="", metavar="PATH",
                   help="netstack onepipe run's start-up handshake: touch PATH.ready/<procs>, then take "
                        "--join-at and --start-at from PATH ({\"join_at\", \"start_at\"}) once it exists")
    p.add_argument("--start-at", type=float, default=0.0,
                   help="wall-clock time (time.time()) to start scattering at")
    p.add_argument("--clock-offset-ns", type=int, default=0)
    p.add_argument("--clock-drift-ppm", type=float, default=0.0)
    p.add_argument("--clock-epoch-ns", type=int, default=0,
                   help="CLOCK_MONOTONIC at the run's start: the drift counts from there")
    p.add_argument("--params", default="", help="OnePipeParams fields as JSON")
    p.add_argument("--broadcast", default="", help="where beacons go (default: the /24 of the address)")
    p.add_argument("--reliable", action="store_true", help="reliable 1Pipe (needs --controller)")
    p.add_argument("--controller", default="", metavar="IP:PORT", help="the 1Pipe controller (--reliable)")
    p.add_argument("--keys", default="", metavar="FILE",
                   help="the deployment's key file: seal and open every datagram (needs --domain)")
    p.add_argument("--domain", default="", help="the deployment's 1Pipe domain (its prefix) for --keys")
    p.add_argument("--clock-file", default="", metavar="FILE",
                   help="a clock-jump hook: {\"offset_ns\": N} in FILE steps the host clock by N ns")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.reliable and not args.controller:
        parser().error("--reliable needs --controller IP:PORT")
    if bool(args.keys) != bool(args.domain):
        parser().error("--keys and --domain come together")
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
