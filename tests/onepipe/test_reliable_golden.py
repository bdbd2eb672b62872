"""Reliable 1Pipe's engines give the outputs they gave when ``reliable_golden.json`` was written,
byte for byte: every action every :class:`ReliableEndpoint` and the :class:`Controller` emitted
(``SendTo`` with its datagram, ``Deliver``, ``SendFail``, ``ProcFail``, the controller's store and
switch actions), in order, with the virtual time and the node, and every endpoint's counters at
the end. A restructuring of the engines (reliable.py, recovery.py, endpoint.py, controller.py)
must not change a single datagram.

The scenarios are seeded and hypothesis-free: the failure cases of design topic §12 item 7 (a
recall, a sender's crash, a cut and a recovery, a relay, a process cut off the controller, a stall
past the failure timeout with the notice lost, a restart) and random runs like
test_reliable_properties.py's (loss, crashes, restarts, cuts, stalls) on tests/onepipe/rfabric.py,
and the ``onepipe`` scenario's reliable mode in virtual time (with and without a crash).

A deliberate change of behaviour rewrites the fingerprints:
``NETSTACK_GOLDEN=update .venv/bin/python -m pytest tests/onepipe/test_reliable_golden.py`` (then
say why in the commit)."""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from headers.onepipe import OnePipeFlag, OnePipeHeader, OnePipeOpcode, ts_from_ns
from netstack.onepipe import ctlwire
from netstack.onepipe.clock import HostClock
from netstack.onepipe.ctlwire import Notice, Recall
from netstack.onepipe.endpoint import SOM
from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.reliable import ReliableEndpoint
from netstack.onepipe.scenarios import fabric_topology
from netstack.sim.scenario import RunSpec, canonical_json, run

from .fabric import Fabric
from .rfabric import CTL, MSG, PARAMS, STALL, P, RFabric

GOLDEN = Path(__file__).with_name("reliable_golden.json")
US = 1_000
WARM = 150 * US
SETTLE = 1_500 * US
EOM = int(OnePipeFlag.EOM)
BE_PARAMS = OnePipeParams(t_beacon_ns=3_000, ack_timeout_ns=60_000, mtu_payload=64, rwnd_packets=64, init_cwnd=8)


class TracingFabric(RFabric):
    """An :class:`RFabric` that writes down every action of every engine before its shell takes it."""

    def __post_init__(self) -> None:
        self.trace: list[str] = []
        super().__post_init__()

    def _flush(self, i: int) -> None:
        self.trace += [f"{self.now} p{i} {a!r}" for a in self.eps[i].actions]
        super()._flush(i)

    def _ctl_flush(self) -> None:
        self.trace += [f"{self.now} ctl {a!r}" for a in self.ctl.actions]
        super()._ctl_flush()


def _up(n: int = 3, **kw: Any) -> TracingFabric:
    fab = TracingFabric(n, **kw)
    fab.run_for(WARM)
    return fab


# ---------------------------------------------------------------------------- the scenarios

def fair_loss() -> TracingFabric:
    gone: list[bytes] = []

    def lose(frm: Any, to: Any, data: bytes) -> bool:
        if len(gone) < 3 and frm == 1 and data[22] == OnePipeOpcode.PREPARE:
            gone.append(data)
            return True
        return False

    fab = _up(lose=lose)
    for _ in range(4):
        fab.send(1, [2, 3])
        fab.run_for(40 * US)
    fab.run_for(300 * US)
    return fab


def receiver_crash() -> TracingFabric:
    fab = _up()
    fab.send(1, [2, 3])
    fab.kill(3)
    fab.run_for(SETTLE)
    fab.send(1, [2])
    fab.send(2, [1, 3])
    fab.run_for(200 * US)
    return fab


def sender_crash() -> TracingFabric:
    fab = _up(tors=2)
    for k in range(40):
        fab.at(fab.now + k * 2 * US, fab.send, 1, [2, 3])
    fab.at(fab.now + 50 * US, fab.kill, 1)
    fab.run_for(SETTLE)
    return fab


def cut_and_recover() -> TracingFabric:
    fab = _up()
    fab.send(1, [2, 3])
    fab.run_for(5 * US)
    fab.cut_data.add(3)
    fab.send(2, [1, 3])
    fab.run_for(SETTLE)
    fab.cut_data.discard(3)
    fab.run_for(SETTLE)
    fab.send(3, [1, 2])
    fab.run_for(200 * US)
    return fab


def path_down_relayed() -> TracingFabric:
    fab = _up(n=3)
    fab.cut_paths.add(frozenset((1, 3)))
    for _ in range(3):
        fab.send(1, [2, 3])
        fab.send(3, [1])
        fab.run_for(30 * US)
    fab.run_for(SETTLE)
    return fab


def off_the_controller() -> TracingFabric:
    fab = _up(n=3)
    fab.cut_ctl.add(3)
    fab.cut_paths.add(frozenset((1, 3)))
    fab.send(1, [2, 3])
    fab.run_for(SETTLE)
    return fab


def _stalled(stall_ns: int, overflow: bool) -> TracingFabric:
    fab = _up(n=4, tors=2)
    fab.send(1, [2, 3])
    fab.run_for(5 * US)
    fab.freeze(3, overflow=overflow)
    fab.send(2, [3, 4])
    fab.send(4, [1, 3])
    fab.run_for(stall_ns)
    fab.thaw(3)
    fab.run_for(SETTLE)
    fab.send(3, [1, 4])
    fab.run_for(SETTLE)
    return fab


def stall_notice_lost() -> TracingFabric:
    return _stalled(STALL, overflow=True)


def stall_cleared() -> TracingFabric:
    """A stall shorter than the detection bound (issue 31): P3's ToR reports it, the controller
    probes it, it answers once it runs again: nobody is declared failed, P3 delivers everything."""
    return _stalled(80 * US, overflow=False)


def recall_after_recovery() -> TracingFabric:
    fab = _up(n=4)
    fab.cut_paths.add(frozenset((1, 4)))
    fab.cut_ctl.add(4)
    fab.send(1, [3, 4])
    fab.run_for(10 * US)
    fab.freeze(3)
    fab.run_for(STALL)
    fab.thaw(3)
    fab.run_for(400 * US)
    fab.send(1, [3, 2])
    fab.run_for(SETTLE)
    return fab


def restart() -> TracingFabric:
    fab = _up(n=3)
    fab.send(2, [1, 3])
    fab.run_for(20 * US)
    fab.kill(1)
    fab.run_for(100 * US)
    fab.start(1)
    fab.send(3, [1, 2])
    fab.run_for(SETTLE)
    fab.send(1, [2, 3])
    fab.run_for(300 * US)
    return fab


def _drop_prepares(frm: int, to: int, seqs: set[int], count: int) -> Callable[[Any, Any, bytes], bool]:
    """Lose the first ``count`` PREPAREs of scatterings ``seqs`` that process ``frm`` sends ``to``."""
    left = [count]

    def lose(a: Any, b: Any, data: bytes) -> bool:
        if left[0] and a == frm and data[22] == OnePipeOpcode.PREPARE:
            _src, seq, dst = MSG.unpack_from(data, 24)
            if dst == to and seq in seqs:
                left[0] -= 1
                return True
        return False
    return lose


def early_recall() -> TracingFabric:
    """A co-receiver hears the RECALL before the connection it names is open (its first PREPAREs
    lost): kept, and applied when the connection opens."""
    fab = _up(n=3, lose=_drop_prepares(1, 2, {0}, 2))
    fab.kill(3)
    fab.run_for(25 * US)  # P3's ToR times it out a few microseconds from now
    fab.send(1, [2])
    fab.send(1, [2, 3])
    fab.run_for(SETTLE)
    fab.send(1, [2])
    fab.run_for(300 * US)
    return fab


def recall_before_the_message() -> TracingFabric:
    """A co-receiver hears the RECALL before the message, on an open connection (a message before
    it lost): the message is dropped when it arrives."""
    fab = _up(n=3, lose=_drop_prepares(1, 2, {1}, 3))
    fab.send(1, [2])
    fab.kill(3)
    fab.run_for(22 * US)
    fab.send(1, [2])
    fab.send(1, [2, 3])
    fab.run_for(SETTLE)
    return fab


def queued_behind_the_window() -> TracingFabric:
    """Scatterings wait in the send buffer behind a full window when their receiver fails: their
    messages to it fail at once (ts 0), the rest leave."""
    fab = _up(n=3)
    for _ in range(40):
        fab.send(1, [2, 3])
    fab.kill(3)
    fab.run_for(SETTLE)
    return fab


def two_failures_during_a_stall() -> TracingFabric:
    """A process stalled past the failure timeout misses two failures (its notice lost): its
    recovery batch replays them, with an undeliverable recall."""
    fab = _up(n=5, tors=2)
    fab.send(4, [3, 5])
    fab.run_for(3 * US)
    fab.freeze(3, overflow=True)
    fab.send(1, [3, 2])
    fab.kill(5)
    fab.run_for(40 * US)
    fab.kill(4)
    fab.send(2, [1, 3])
    fab.run_for(STALL)
    fab.thaw(3)
    fab.run_for(SETTLE)
    fab.send(3, [1, 2])
    fab.run_for(SETTLE)
    return fab


def randomised(seed: int, heavy: bool = False) -> Callable[[], TracingFabric]:
    """test_reliable_properties.py's run, its choices drawn from ``random.Random(seed)``; ``heavy``:
    more processes, scatterings, loss and faults."""
    def scenario() -> TracingFabric:
        rng = random.Random(seed)
        n, tors = rng.randint(3, 6) if heavy else rng.randint(2, 5), rng.randint(1, 2)
        loss = rng.choice([0.02, 0.1, 0.2] if heavy else [0.0, 0.02, 0.1])
        lossy = [True]
        fab = _up(n, tors=min(tors, n), lose=lambda frm, to, data: lossy[0] and rng.random() < loss)
        t0 = fab.now
        for _ in range(rng.randint(20, 60) if heavy else rng.randint(5, 30)):
            dsts = rng.sample(range(1, n + 1), rng.randint(1, min(3, n)))
            fab.at(t0 + rng.randint(0, 300 * US), fab.send, rng.randint(1, n), dsts)
        for _ in range(rng.randint(2, 6) if heavy else rng.randint(0, 3)):
            at, kind, i = rng.randint(0, 300 * US), rng.choice(["kill", "restart", "cut", "freeze"]), rng.randint(1, n)
            if kind == "kill":
                fab.at(t0 + at, fab.kill, i)
            elif kind == "restart":
                fab.at(t0 + at, fab.kill, i)
                fab.at(t0 + at + 100 * US, fab.start, i)
            elif kind == "cut":
                fab.at(t0 + at, fab.cut_data.add, i)
                fab.at(t0 + at + 100 * US, fab.cut_data.discard, i)
            else:
                fab.at(t0 + at, fab.freeze, i, rng.random() < 0.5)
                fab.at(t0 + at + rng.randint(10 * US, 150 * US), fab.thaw, i)
        fab.run(t0 + 400 * US)
        lossy[0] = False
        fab.run_for(2_500 * US)
        return fab
    return scenario


class DirectRun:
    """One :class:`ReliableEndpoint` fed datagrams directly (no fabric): what a real network rarely
    makes, the engine must still answer the same way (bad and odd input, repeats, stale notices)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.now = 10**12
        self.trace: list[str] = []
        self.deliveries: list[Any] = []
        self.records: list[Any] = []
        self.ep = ReliableEndpoint(PARAMS, P(1), self.now, controller=CTL, nonce=1)
        self.eps = {1: self.ep}

    def feed(self, data: bytes, src: Any, ce: bool = False) -> None:
        self.now += self.rng.randint(0, 4 * US)
        self.ep.receive(data, src, self.now, ce)
        self.ep.on_timer(self.now)
        if self.rng.random() < 0.3:
            self.ep.send([(P(self.rng.randint(2, 4)), bytes(self.rng.randint(0, 200)))], self.now)
        self.trace += [f"{self.now} p1 {a!r}" for a in self.ep.actions.take_all()]

    def hdr(self, op: OnePipeOpcode, ts: int = 0, psn: int = 0, flags: int = 0, commit: int | None = None) -> bytes:
        b = ts_from_ns(self.now + self.rng.randint(-20 * US, 20 * US))
        c = b if commit is None else commit
        return OnePipeHeader(ts, b, c, psn & 0xFFFFFFFF, op, flags).to_bytes()

    def datagram(self) -> tuple[bytes, Any, bool]:
        """One of: a barrier, a PREPARE (in order or not, fragments, late), an ACK/NAK, a RECALL, a
        controller message (register reply, notice, relay), or garbage."""
        r, now = self.rng, self.now
        peer = P(r.randint(2, 4))
        ts = ts_from_ns(now + r.randint(-60 * US, 20 * US))
        kind = r.randrange(12)
        if kind == 0:
            return r.randbytes(r.randint(0, 40)), r.choice([CTL, peer, "junk"]), False
        if kind == 1:
            ahead = ts_from_ns(now + r.choice([0, 10**12]))
            return self.hdr(OnePipeOpcode.BEACON, commit=r.choice([0, ahead, ts_from_ns(now - 10**6)])), \
                ("10.0.0.254", 40100), False
        if kind in (2, 3):
            flags = r.choice([SOM | EOM, SOM, EOM, 0])
            return self.hdr(OnePipeOpcode.PREPARE, ts, r.randint(0, 3), flags) + b"m", peer, r.random() < 0.3
        if kind == 4:
            op = r.choice([OnePipeOpcode.ACK, OnePipeOpcode.NAK])
            return self.hdr(op, 0, r.randint(0, 40), r.choice([0, int(OnePipeFlag.ECE)])), peer, False
        if kind == 5:
            rc = Recall(ts, r.randint(0, 3), 1, r.randint(0, 9))
            op = r.choice([OnePipeOpcode.RECALL, OnePipeOpcode.RECALL_ACK])
            return ctlwire.recall(op, rc, ts, ts), peer, False
        if kind == 6:
            reply = ctlwire.register_reply(r.choice([P(1), peer]), r.randint(0, 3), r.randint(0, 5),
                                           r.choice([1, 2]), r.randint(0, 2), r.randint(0, 1))
            return reply, CTL, False
        if kind in (7, 8):
            n = Notice(r.choice([P(1), peer]), r.randint(1, 2), r.choice([0, ts]), r.randint(1, 6), r.random() < 0.4)
            return ctlwire.failure_notice(n), CTL, False
        if kind == 9:
            inner = self.hdr(OnePipeOpcode.PREPARE, ts, r.randint(0, 3), SOM | EOM) + b"r"
            if r.random() < 0.3:
                inner = ctlwire.recall(OnePipeOpcode.RECALL, Recall(ts, r.randint(0, 3), 1, 0), ts, ts)
            return ctlwire.relay(peer, inner if r.random() < 0.9 else inner[:10]), CTL, False
        if kind == 10:
            return self.hdr(r.choice(list(OnePipeOpcode))) + r.randbytes(r.randint(0, 12)), r.choice([CTL, peer]), \
                False
        return ctlwire.callback_done(r.randint(0, 5)), CTL, False


def direct(seed: int) -> Callable[[], DirectRun]:
    def scenario() -> DirectRun:
        run_ = DirectRun(seed)
        run_.feed(ctlwire.register_reply(P(1), 1, 0, 1), CTL)
        for _ in range(400):
            run_.feed(*run_.datagram())
        return run_
    return scenario


class TracingBEFabric(Fabric):
    """tests/onepipe/fabric.py's best-effort fabric, every endpoint action written down: the best-effort
    :class:`Endpoint`, whose sender and receiver the reliable one builds on, is pinned too."""

    def __post_init__(self) -> None:
        self.trace: list[str] = []
        super().__post_init__()

    def _flush(self, a: int) -> None:
        self.trace += [f"{self.now} p{a} {act!r}" for act in self.eps[a].actions]
        super()._flush(a)


def best_effort(seed: int) -> Callable[[], TracingBEFabric]:
    """Best effort with loss, duplication, extra delay, clock skew and a crash, from ``random.Random(seed)``."""
    def scenario() -> TracingBEFabric:
        rng = random.Random(seed)
        loss, dup = rng.choice([0.0, 0.02, 0.1]), rng.choice([0.0, 0.05])

        def fate() -> tuple[bool, bool, int]:
            return rng.random() < loss, rng.random() < dup, rng.choice([0, 0, 0, 5 * US])

        n = rng.randint(2, 5)
        clocks = {a: HostClock(offset_ns=rng.randint(-3 * US, 3 * US)) for a in range(1, n + 1)}
        fab = TracingBEFabric(BE_PARAMS, n, tors=rng.randint(1, 2), fate=fate, clocks=clocks)
        fab.run(fab.now + WARM)
        t0 = fab.now
        for _ in range(rng.randint(10, 60)):
            dsts = rng.sample(range(1, n + 1), rng.randint(1, min(3, n)))
            fab.at(t0 + rng.randint(0, 300 * US), fab.send, rng.randint(1, n), dsts)
        if rng.random() < 0.5:
            fab.at(t0 + rng.randint(0, 300 * US), fab.kill, rng.randint(1, n))
        fab.run(t0 + 2_000 * US)
        return fab
    return scenario


FABRICS: dict[str, Callable[[], TracingFabric | TracingBEFabric | DirectRun]] = {
    "fair-loss": fair_loss, "receiver-crash": receiver_crash, "sender-crash": sender_crash,
    "cut-and-recover": cut_and_recover, "path-down-relayed": path_down_relayed,
    "off-the-controller": off_the_controller, "stall-notice-lost": stall_notice_lost, "stall-cleared": stall_cleared,
    "recall-after-recovery": recall_after_recovery, "restart": restart, "early-recall": early_recall,
    "recall-before-the-message": recall_before_the_message, "queued-behind-the-window": queued_behind_the_window,
    "two-failures-during-a-stall": two_failures_during_a_stall,
    **{f"random-{s}": randomised(s) for s in range(16)},
    **{f"heavy-{s}": randomised(s, heavy=True) for s in range(12)},
    **{f"direct-{s}": direct(s) for s in range(6)},
    **{f"best-effort-{s}": best_effort(s) for s in range(6)},
}

#: the onepipe scenario's reliable mode in virtual time (netstack.onepipe.rscenario): (seed, duration, params)
SIMS: dict[str, tuple[int, int, dict[str, Any]]] = {
    "sim-reliable": (1, 40_000, {"mode": "reliable"}),
    "sim-reliable-kill": (1, 200_000, {"mode": "reliable", "kill": 1, "rate": 20_000.0, "drain_ns": 200_000}),
    "sim-reliable-loss": (2, 60_000, {"mode": "reliable", "loss": 0.02}),
}


def _sha(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def fingerprint(name: str) -> dict[str, Any]:
    if name in SIMS:
        seed, duration, params = SIMS[name]
        result = run(RunSpec("onepipe", fabric_topology(tors=2, hosts_per_tor=2), seed, duration,
                             {"procs": 6, "rate": 100_000.0, **params}))
        return {"sha256": _sha([canonical_json(result)]), "events": result["engine"]["events"]}
    fab = FABRICS[name]()
    kinds = Counter(line.split(" ", 2)[2].split("(", 1)[0] for line in fab.trace)
    counters = [json.dumps({i: ep.counters() for i, ep in sorted(fab.eps.items())}, sort_keys=True)]
    return {"actions": len(fab.trace), "kinds": dict(sorted(kinds.items())), "sha256": _sha(fab.trace),
            "counters_sha256": _sha(counters), "deliveries": len(fab.deliveries)}


CASES = [*FABRICS, *SIMS]


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    if os.environ.get("NETSTACK_GOLDEN") == "update":
        GOLDEN.write_text(json.dumps({c: fingerprint(c) for c in CASES}, indent=1, sort_keys=True) + "\n")
    return dict(json.loads(GOLDEN.read_text()))


@pytest.mark.parametrize("case", CASES)
def test_the_engines_emit_what_they_emitted_before(case: str, golden: dict[str, Any]) -> None:
    assert fingerprint(case) == golden[case]


def test_the_scenarios_exercise_the_recovery_paths(golden: dict[str, Any]) -> None:
    """The traces are worth pinning: between them, recalls, relays, failures and recoveries happen."""
    kinds: Counter[str] = Counter()
    for case in FABRICS:
        kinds.update(golden[case]["kinds"])
    assert {"SendTo", "Deliver", "SendFail", "ProcFail", "RecordFailure", "RecordRecall", "Fence", "Release",
            "Admit", "RegisterProcess"} <= set(kinds)
