"""Reliable 1Pipe in memory, in virtual time: the real engines (``ReliableEndpoint``, two
``BarrierAggregator`` per switch, ``Controller``) joined by one-way FIFO links, with loss, cuts,
crashes and restarts decided by the test.

Shape: processes ``P(i) = ("10.0.0.i", 40100)`` dealt to ``tors`` ToRs under one spine (one ToR:
no spine). Every switch keeps ``R_be`` and ``R_commit`` per input (design topics §4, §7.2 in
docs/papers.md) with the commit aggregator in *hold* mode: a timed-out input stays in the commit
minimum until the controller releases it (§8 step 7). The controller hangs off a management
network: one link to every process and to every switch, separate from the data path, so a test
can cut a data path while both ends still reach the controller (design topic §12 item 7, "path
down") or cut a process off the controller ("process can't reach controller"). The store is a
list with a write delay.

What happened is recorded: ``deliveries``, ``failures`` (SendFail), ``proc_fails``, the
controller's ``records``/``releases``; :meth:`RFabric.check` asserts the invariants every test
wants (total order, nothing twice, commit semantics, atomicity, release after callbacks).
"""

from __future__ import annotations

import heapq
import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from headers.errors import HeaderError
from headers.onepipe import (
    BARRIER_OPCODES,
    HOP_BY_HOP_OPCODES,
    OnePipeHeader,
    OnePipeOpcode,
    ts_from_ns,
    ts_unwrap,
    write_barriers,
)
from netstack.engine import SendTo
from netstack.onepipe.actions import (
    Admit,
    Deliver,
    Fence,
    ProcFail,
    RecordFailure,
    RecordRecall,
    RegisterProcess,
    Release,
    SendFail,
)
from netstack.onepipe.barrier import DOWN, UP, BarrierAggregator
from netstack.onepipe.controller import Controller, ControllerParams
from netstack.onepipe.endpoint import SOM, UPLINK
from netstack.onepipe.feature import CommitAggregator
from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.reliable import ReliableEndpoint
from netstack.onepipe.rstate import SETTLED

from .fabric import assert_total_order

T_BEACON = 3_000
PARAMS = OnePipeParams(t_beacon_ns=T_BEACON, ack_timeout_ns=200 * T_BEACON, mtu_payload=64, rwnd_packets=64,
                       init_cwnd=16)
CTL = ("10.0.9.9", 40100)
#: a stall that outlasts the detection bound (issue 31): the failure timeout (10 T_beacon = 30 us),
#: then the controller's probe unanswered for its answer timeout (40 T_beacon = 120 us), then the
#: report window; a shorter stall is cleared by the probe and no failure at all
STALL = 250_000
SPINE = "spine"
#: a message's bytes: sender index, scattering number, receiver index
MSG = struct.Struct("!III")
Addr = tuple[str, int]


def P(i: int) -> Addr:
    return (f"10.0.0.{i}", 40100)


def idx(a: Addr) -> int:
    return int(a[0].rsplit(".", 1)[1])


@dataclass
class Delivery:
    receiver: int
    ts: int
    src: int
    seq: int
    at: int  # true time


@dataclass
class RFabric:
    n: int
    tors: int = 1
    params: OnePipeParams = PARAMS
    delay_ns: int = 2_000
    store_delay_ns: int = 1_000
    #: per data packet: True drops it (the test's loss model; cuts are separate)
    lose: Callable[[Any, Any, bytes], bool] = lambda frm, to, data: False
    now: int = 10**12
    ctl_params: ControllerParams = field(default_factory=lambda: ControllerParams.for_beacon(T_BEACON))

    def __post_init__(self) -> None:
        self.heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._tie = itertools.count()
        self.tor_of = {i: f"tor{i % self.tors}" for i in range(1, self.n + 1)}
        names = [f"tor{t}" for t in range(self.tors)] + ([SPINE] if self.tors > 1 else [])
        self.be = {s: BarrierAggregator(self.params) for s in names}
        self.cm = {s: CommitAggregator(self.params, hold=True) for s in names}
        self._wire()
        self.ctl = Controller(self.ctl_params, self.now)
        self.eps: dict[int, ReliableEndpoint] = {}
        self.nonces = itertools.count(1)
        self.dead: set[int] = set()
        self.cut_data: set[int] = set()  # process <-> ToR links down
        self.cut_ctl: set[int] = set()  # process <-> controller links down
        self.cut_paths: set[frozenset[int]] = set()  # data between two processes dropped at their ToR(s)
        #: stalled processes (SIGSTOP): what arrives for them waits in their socket, their timers and
        #: the test's sends wait, and all of it runs, in order, when they go on (:meth:`thaw`)
        self.frozen: dict[int, list[tuple[Callable[..., None], tuple[Any, ...]]]] = {}
        self.overflow: set[int] = set()  # ... whose socket buffer is full: what the controller sends is lost
        self.last_arrival: dict[tuple[Any, Any], int] = {}
        self.deliveries: list[Delivery] = []
        self.failures: list[tuple[int, int, int, int]] = []  # (sender, ts, dst, seq)
        self.proc_fails: list[tuple[int, int, int, int]] = []  # (process, failed, t_f, at)
        self.sent: dict[tuple[int, int], tuple[int, list[int]]] = {}  # (sender, seq) -> (ts or 0, dsts)
        self.records: list[RecordFailure] = []
        self.recorded_at: list[int] = []
        self.fids: dict[tuple[Addr, int], int] = {}
        self.recalls: list[RecordRecall] = []
        self.releases: dict[Addr, list[int]] = {}  # process -> true times Release was acted on
        self.next_seq: dict[int, int] = {}
        self.sent_inc: dict[tuple[int, int], int | None] = {}
        self._timers: dict[Any, int | None] = {}
        for i in range(1, self.n + 1):
            self.start(i)
        for sw in self.be:
            self._arm(sw)
        self._arm("ctl")

    # ------------------------------------------------------------------ shape
    def _wire(self) -> None:
        for i, tor in self.tor_of.items():
            for agg in (self.be[tor], self.cm[tor]):
                agg.add_input(P(i), down=True)
                agg.add_output(P(i), DOWN, self.now, peer_input=P(i))
        if self.tors > 1:
            for t in range(self.tors):
                tor = f"tor{t}"
                for aggs in (self.be, self.cm):
                    aggs[tor].add_input(SPINE, down=False)
                    aggs[tor].add_output(SPINE, UP, self.now)
                    aggs[SPINE].add_input(tor, down=True)
                    aggs[SPINE].add_output(tor, DOWN, self.now)

    def route(self, sw: str, dst: Addr) -> Any:
        tor = self.tor_of[idx(dst)]
        if sw == SPINE:
            return tor
        return dst if tor == sw else SPINE

    # ------------------------------------------------------------------ events
    def at(self, t: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self.heap, (t, next(self._tie), fn, args))

    def run(self, until: int) -> None:
        while self.heap and self.heap[0][0] <= until:
            t, _, fn, args = heapq.heappop(self.heap)
            self.now = max(self.now, t)
            fn(*args)
        self.now = max(self.now, until)

    def run_for(self, ns: int) -> None:
        self.run(self.now + ns)

    def link(self, frm: Any, to: Any, src: Any, dst: Any, data: bytes) -> None:
        """A datagram on the link ``frm -> to`` (FIFO; nodes: a process index, a switch name,
        ``"ctl"``): from process ``src`` (None: a switch) for ``dst`` (a process, ``UPLINK``, CTL)."""
        if frm != "ctl" and to != "ctl" and self.lose(frm, to, data):
            return
        # a cut takes what is sent from then on; what is on the wire arrives
        if "ctl" in (frm, to) and (frm in self.cut_ctl or to in self.cut_ctl):
            return
        if "ctl" not in (frm, to) and (frm in self.cut_data or to in self.cut_data):
            return
        t = max(self.now + self.delay_ns, self.last_arrival.get((frm, to), 0))
        self.last_arrival[(frm, to)] = t
        self.at(t, self._arrive, frm, to, src, dst, data)

    def _arrive(self, frm: Any, to: Any, src: Any, dst: Any, data: bytes) -> None:
        if to == "ctl":
            self.ctl.receive(data, src, self.now)
            self._ctl_flush()
        elif isinstance(to, str):
            self._switch_rx(to, frm, src, dst, data)
        elif to in self.frozen:
            if frm != "ctl" or to not in self.overflow:
                self.frozen[to].append((self._arrive, (frm, to, src, dst, data)))
        elif to not in self.dead:
            self.eps[to].receive(data, src, self.now)
            self._flush(to)

    # ------------------------------------------------------------------ processes
    def start(self, i: int) -> None:
        """Start (or restart, as a new process with a new nonce) process ``i``."""
        self.dead.discard(i)
        self.eps[i] = ReliableEndpoint(self.params, P(i), self.now, controller=CTL, nonce=next(self.nonces))
        self._flush(i)

    def kill(self, i: int) -> None:
        """Process ``i`` crashes: it sends, receives and times nothing any more."""
        self.dead.add(i)

    def freeze(self, i: int, overflow: bool = False) -> None:
        """Process ``i`` stalls (SIGSTOP, a long GC pause, a descheduled VM): it is alive but
        runs nothing; what is sent to it queues up (:meth:`thaw` runs it all). ``overflow``: its
        socket buffer fills up, and what the controller sends it meanwhile is lost (its own
        failure notice, say; the data path's losses are the test's ``lose``)."""
        self.frozen.setdefault(i, [])
        if overflow:
            self.overflow.add(i)

    def thaw(self, i: int) -> None:
        """Process ``i`` goes on (SIGCONT): its clock has moved on; it first takes what queued
        up for it, in order, then its timer fires."""
        self.overflow.discard(i)
        for fn, args in self.frozen.pop(i, []):
            fn(*args)
        if i not in self.dead:
            self._timers[i] = None
            self.eps[i].on_timer(self.now)
            self._flush(i)

    def send(self, a: int, dsts: list[int]) -> int | None:
        if a in self.frozen:
            self.frozen[a].append((self.send, (a, dsts)))
            return None
        if a in self.dead:
            return None
        seq = self.next_seq.get(a, 0)
        got = self.eps[a].send([(P(d), MSG.pack(a, seq, d)) for d in dsts], self.now)
        if got is not None:
            self.next_seq[a] = seq + 1
            self.sent[(a, seq)] = (0, list(dsts))
        self._flush(a)
        return got

    def _flush(self, i: int) -> None:
        ep = self.eps[i]
        for act in ep.actions.take_all():
            if isinstance(act, SendTo):
                if (act.dst != CTL and len(act.data) >= 24 + MSG.size and act.data[22] == OnePipeOpcode.PREPARE
                        and act.data[23] & SOM):
                    # stamped now (a scattering handed over may wait in the send buffer, even
                    # across a recovery): its incarnation is the one that stamps it
                    src, seq, _dst = MSG.unpack_from(act.data, 24)
                    self.sent_inc.setdefault((src, seq), ep.incarnation)
                if act.dst == CTL:
                    self.link(i, "ctl", P(i), CTL, act.data)
                else:
                    self.link(i, self.tor_of[i], P(i), act.dst, act.data)
            elif isinstance(act, Deliver):
                src, seq, dst = MSG.unpack(act.msg)
                assert src == idx(act.src) and dst == i, (src, act.src, dst, i)
                self.deliveries.append(Delivery(i, act.ts, src, seq, self.now))
                key = (src, seq)
                if key in self.sent:
                    self.sent[key] = (act.ts, self.sent[key][1])
            elif isinstance(act, SendFail):
                _, seq, dst = MSG.unpack(act.msg)
                self.failures.append((i, act.ts, dst, seq))
            elif isinstance(act, ProcFail):
                self.proc_fails.append((i, idx(act.proc), act.ts, self.now))
        self._check_commit(i)
        self._arm(i)

    def _check_commit(self, i: int) -> None:
        """Design topic §12 item 6: a commit T means every message with ts <= T was ACKed."""
        ep = self.eps[i]
        for m in ep._unsettled:
            if m.state != SETTLED:
                assert m.ts > ep.commit, f"process {i} committed {ep.commit} over unsettled ts {m.ts}"
        for r in ep.recovery.recalls.values():
            assert r.msg.ts > ep.commit, f"process {i} committed over a pending recall"

    def _arm(self, node: Any) -> None:
        if node == "ctl":
            d = self.ctl.next_deadline()
        elif isinstance(node, str):
            ds = [x for x in (self.be[node].next_deadline(), self.cm[node].next_deadline()) if x is not None]
            d = min(ds) if ds else None
        else:
            d = self.eps[node].next_deadline()
        if d is not None and self._timers.get(node) != d:
            self._timers[node] = d
            self.at(max(d, self.now), self._fire, node, d)

    def _fire(self, node: Any, d: int) -> None:
        if self._timers.get(node) != d or node in self.dead or node in self.frozen:
            return  # (a frozen process's timer fires when it thaws)
        self._timers[node] = None
        if node == "ctl":
            self.ctl.on_timer(self.now)
            self._ctl_flush()
        elif isinstance(node, str):
            self._switch_timer(node)
        else:
            self.eps[node].on_timer(self.now)
            self._flush(node)

    # ------------------------------------------------------------------ switches
    def _switch_rx(self, sw: str, frm: Any, src: Any, dst: Any, data: bytes) -> None:
        try:
            hdr = OnePipeHeader.from_bytes(data)
        except HeaderError:
            return
        inp = P(frm) if isinstance(frm, int) else frm
        op = hdr.opcode
        if op in BARRIER_OPCODES:
            if op != OnePipeOpcode.COMMIT:
                self.be[sw].heard(inp, ts_unwrap(hdr.be_barrier, self.now), self.now)
            if hdr.commit_barrier:
                self.cm[sw].heard(inp, ts_unwrap(hdr.commit_barrier, self.now), self.now)
        self._arm(sw)
        if op in HOP_BY_HOP_OPCODES or dst == UPLINK:
            return
        if src is not None and frozenset((idx(src), idx(dst))) in self.cut_paths and sw == self.tor_of[idx(src)]:
            return  # the path between them is down (their ToR drops it)
        out = self.route(sw, dst)
        if op in BARRIER_OPCODES:
            b = self.be[sw].barrier_for(out, self.now)
            if b is None:
                return
            c = self.cm[sw].barrier_for(out, self.now)
            buf = bytearray(data)
            write_barriers(buf, 0, ts_from_ns(b), ts_from_ns(c) if c is not None else 0)
            self.be[sw].note_sent(out, self.now)
            self.cm[sw].note_sent(out, self.now)
            data = bytes(buf)
        nxt = idx(out) if isinstance(out, tuple) else out
        self.link(sw, nxt, src, dst, data)

    def _switch_timer(self, sw: str) -> None:
        be, cm = self.be[sw], self.cm[sw]
        # as netstack/onepipe/feature.py under a controller: an input with a commit is reported by
        # its commit side, whose timeout holds it at its last commit (a link keeps carrying a held
        # process's commit: it is not silent); one never heard there is reported by its BE side
        for inp in be.on_timer(self.now):
            if cm.r(inp) is None:
                self.ctl.report(inp, None, self.now)
        for inp in cm.on_timer(self.now):
            self.ctl.report(inp, cm.r(inp), self.now)
        self._ctl_flush()
        # (in the aggregators' order, not a set's: a run is a function of the test's choices alone,
        # whatever PYTHONHASHSEED, so that test_reliable_golden.py can pin it)
        due = dict.fromkeys([o for o, _ in be.due_beacons(self.now)] + [o for o, _ in cm.due_beacons(self.now)])
        for out in due:
            b = be.barrier_for(out, self.now)
            c = cm.barrier_for(out, self.now)
            be.note_sent(out, self.now)
            cm.note_sent(out, self.now)
            if b is not None:
                frame = OnePipeHeader(ts_from_ns(b), ts_from_ns(b), ts_from_ns(c) if c is not None else 0, 0,
                                      OnePipeOpcode.BEACON).to_bytes()
            elif c is not None:
                frame = OnePipeHeader(0, 0, ts_from_ns(c), 0, OnePipeOpcode.COMMIT).to_bytes()
            else:
                continue
            nxt = idx(out) if isinstance(out, tuple) else out
            self.link(sw, nxt, None, out, frame)
        self._arm(sw)

    # ------------------------------------------------------------------ controller
    def _ctl_flush(self) -> None:
        for act in self.ctl.actions.take_all():
            if isinstance(act, SendTo):
                i = idx(act.dst)
                self.link("ctl", i, CTL, act.dst, act.data)
            elif isinstance(act, RecordFailure):
                self.records.append(act)
                self.recorded_at.append(self.now)
                self.at(self.now + self.store_delay_ns, self._recorded, act)
            elif isinstance(act, RecordRecall):
                self.recalls.append(act)
            elif isinstance(act, RegisterProcess):
                pass
            elif isinstance(act, Fence):
                self.at(self.now + self.delay_ns, self._fence, act.proc)
            elif isinstance(act, Release):
                self.at(self.now + self.delay_ns, self._release, act.proc)
            elif isinstance(act, Admit):
                self.at(self.now + self.delay_ns, self._admit, act.proc)
        self._arm("ctl")

    def _recorded(self, act: RecordFailure) -> None:
        key = (act.proc, act.incarnation)
        fid = self.fids.setdefault(key, len(self.fids) + 1)
        self.ctl.recorded(act.proc, act.incarnation, act.t_f, fid, self.now)
        self._ctl_flush()

    def _fence(self, proc: Any) -> None:
        last: int | None = None
        known = False
        for sw, cm in self.cm.items():
            if cm.has_input(proc):
                known = True
                r = cm.fence(proc)
                if r is not None and (last is None or r > last):
                    last = r
                self._arm(sw)
        self.ctl.report(proc, last if known else None, self.now, "fence")
        self._ctl_flush()

    def _release(self, proc: Any) -> None:
        self.releases.setdefault(proc, []).append(self.now)
        for sw, cm in self.cm.items():
            if cm.has_input(proc):
                cm.release(proc, self.now, ban=isinstance(proc, tuple))  # a process, not a link
                self._arm(sw)

    def _admit(self, proc: Any) -> None:
        for cm in self.cm.values():
            cm.admit(proc, self.now)

    # ------------------------------------------------------------------ checks
    def t_f(self, i: int) -> int | None:
        got = [r.t_f for r in self.records if r.proc == P(i)]
        return got[-1] if got else None

    def per_receiver(self) -> dict[int, list[Delivery]]:
        per: dict[int, list[Delivery]] = {}
        for d in self.deliveries:
            per.setdefault(d.receiver, []).append(d)
        return per

    def check(self) -> None:
        """Invariants of every run: nothing twice and one total order per receiver (design topic
        §12 item 2), one ts per scattering (4); nothing from a failed incarnation above its T_f is
        delivered anywhere (§8); after a failure is recorded, nothing above its T_f is delivered
        before its release (9: barriers do not pass the failed input until every callback ran).
        Item 6 is asserted after every step (``_check_commit``). A PREPARE that arrives below a
        commit barrier its receiver already delivered (``late_dropped``) gets its sender declared
        failed.
        A message its sender reported failed after it left is delivered nowhere."""
        for i, ep in self.eps.items():
            # a PREPARE below what its receiver delivered (a re-joined sender stamped under the
            # freeze) is not taken: its sender is reported, declared failed, and it is discarded
            assert ep.c.late_dropped == 0 or any(r.reason.startswith("reported by process") for r in self.records), \
                f"process {i} got a PREPARE below what it delivered, and nobody was declared failed"
        # a message its sender failed after it left (recalled, or above the sender's own T_f) is
        # delivered nowhere: not by a correct receiver, and not by one declared failed while it
        # was alive (fail-stop, the paper's §5), before or after it recovered
        failed = {(src, seq, dst) for src, ts, dst, seq in self.failures if ts != 0}
        for d in self.deliveries:
            assert (d.src, d.seq, d.receiver) not in failed, f"{d}: its sender reported it failed"
        assert_total_order(self.per_receiver())
        for rec, at in zip(self.records, self.recorded_at, strict=True):
            for d in self.deliveries:
                mine = d.src == idx(rec.proc) and self.sent_inc.get((d.src, d.seq)) == rec.incarnation
                assert not (mine and d.ts > rec.t_f), f"{d} above T_f={rec.t_f} of its failed sender"
            released = [t for t in self.releases.get(rec.proc, []) if t >= at]
            cleared = min(released) if released else None
            for d in self.deliveries:
                if rec.t_f and d.at >= at and d.ts > rec.t_f and (cleared is None or d.at < cleared):
                    raise AssertionError(f"{d} above T_f={rec.t_f} of {rec.proc} before its release")

    def atomic(self, correct: set[int]) -> None:
        """Design topic §12 item 8: every scattering reaches all of its correct receivers or none.
        A message its sender failed at once (``SendFail`` with ts 0: it knew the receiver failed,
        so it never left) leaves that receiver out, as ``netstack onepipe check`` does: a receiver
        that recovered is a new process, and was no receiver of it."""
        got: dict[tuple[int, int], set[int]] = {}
        for d in self.deliveries:
            got.setdefault((d.src, d.seq), set()).add(d.receiver)
        never = {(src, seq, dst) for src, ts, dst, seq in self.failures if ts == 0}
        for key, (_ts, dsts) in self.sent.items():
            want = {d for d in dsts if d in correct and (*key, d) not in never}
            have = got.get(key, set()) & want
            assert have in (set(), want), f"scattering {key}: delivered at {sorted(have)} of {sorted(want)}"
