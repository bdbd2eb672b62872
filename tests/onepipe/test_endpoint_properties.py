"""Hypothesis drives a few 1Pipe endpoints through a fake in-memory ToR under random
scatterings, per-link delay (FIFO per link), loss, duplication, CE marks, clock offsets and
drift, DATA that overtakes the FIFO (so it arrives below the barrier), and across the 48-bit
timestamp wrap, and timer slack raised and lowered at any time (``Endpoint.set_timer_slack``, the
live shell's scheduling delay: docs/onepipe-reliable.md "Timers on a loaded host"); it checks
design topic §12 (docs/papers.md) invariants 2-5 and what best effort promises about loss.

The ToR is a min-barrier relay, not the real switch engine: each endpoint's latest advertised
barrier (from DATA, ACK, NAK and BEACON) is kept per input; every packet it forwards leaves
with ``be_barrier`` = the minimum over all inputs (taken at ingress, design topic §4); beacons
are consumed, and the relay sends its own to every endpoint each ``T_beacon``.

What the run checks, at the end of a run that went quiet (no sends for several
``ack_timeout_ns``, so every fate is known):

- every receiver delivers in strictly increasing ``(ts, sender key, seq, index)`` order: total
  order across receivers, per-sender FIFO, nothing twice; a sender's seq order agrees with
  its ts order; all messages of a scattering carry one ts (delivered or send-failed);
- every delivery has ts below the receiver's barrier, below the delivered barrier the call
  left, at or above the delivered barrier before the call (nothing below a barrier already
  passed), and below the receiver's clock (causality);
- each delivered message is byte-identical to what was sent, from the right sender;
- every message is delivered or send-failed (at least one), send-failed at most once; with
  lossless ACKs/NAKs a message is both only when its sender's ``ack_timeout_ns`` fired before
  the ACK's way back from a (slow: barrier stalled by lost beacons) delivery ended;
- memory: in-flight, buffered and refused packets per connection never exceed
  ``rwnd_packets``, the send buffer never ``send_buffer``; at the end nothing is held;
- each endpoint's advertised barriers never decrease and its data ts equal its barrier.
"""

from __future__ import annotations

import heapq
import random
import struct
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers.onepipe import (
    BARRIER_OPCODES,
    OnePipeHeader,
    OnePipeOpcode,
    beacon,
    decode_packet,
    ts_from_ns,
    ts_unwrap,
    write_be_barrier,
)
from netstack.engine import SendTo
from netstack.onepipe.actions import Deliver, SendFail
from netstack.onepipe.clock import HostClock
from netstack.onepipe.endpoint import SOM, UPLINK, Endpoint
from netstack.onepipe.params import OnePipeParams

T = 1000  # T_beacon, ns
MTU = 16
RWND = 8
PARAMS = OnePipeParams(t_beacon_ns=T, ack_timeout_ns=15 * T, mtu_payload=MTU, rwnd_packets=RWND,
                       init_cwnd=4, min_cwnd=1, send_buffer=8)
ID = struct.Struct("!HIH")  # sender, seq, index: the first bytes of every test message
TOR = "tor"


def _msg(sender: int, seq: int, idx: int, size: int) -> bytes:
    head = ID.pack(sender, seq, idx)
    return head + bytes((seq * 31 + idx * 7 + k) & 0xFF for k in range(max(0, size - len(head))))


@dataclass
class Run:
    """One simulated run: endpoints 0..n-1 (addresses are ints, keys the ints themselves)."""

    n: int
    clocks: list[HostClock]
    rng: random.Random
    loss: float
    dup: float
    ctl_loss: bool
    ce: float
    delay_max: int
    reorder: float  # DATA overtaken on the ToR's output (not FIFO: it arrives with an old barrier)
    t: int
    eps: list[Endpoint] = field(default_factory=list)
    events: list[tuple[int, int, str, tuple[object, ...]]] = field(default_factory=list)
    seq: int = 0
    link_last: dict[tuple[str, int], int] = field(default_factory=dict)
    tor_r: list[int] = field(default_factory=list)
    tor_out: int = 0
    timer_at: list[int | None] = field(default_factory=list)
    last_adv: list[int | None] = field(default_factory=list)
    sent: dict[tuple[int, int, int], tuple[int, bytes]] = field(default_factory=dict)
    delivered: dict[int, list[tuple[int, int, int, int]]] = field(default_factory=dict)
    delivered_ids: set[tuple[int, int, int]] = field(default_factory=set)
    failed_ids: set[tuple[int, int, int]] = field(default_factory=set)
    scattering_ts: dict[tuple[int, int], int] = field(default_factory=dict)
    sent_at: dict[tuple[int, int, int], int] = field(default_factory=dict)  # first fragment left (true time)
    delivered_at: dict[tuple[int, int, int], int] = field(default_factory=dict)
    failed_at: dict[tuple[int, int, int], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.eps = [Endpoint(PARAMS, i, self.clocks[i].now(self.t), key=lambda a: a) for i in range(self.n)]
        self.tor_r = [self.t - 10**9] * self.n
        self.tor_out = self.t - 10**9
        self.timer_at = [None] * self.n
        self.last_adv = [None] * self.n
        self.delivered = {i: [] for i in range(self.n)}
        for i in range(self.n):
            self._arm(i)
        self._push(self.t + T, "tor_beacon", ())

    # -------------------------------------------------------------- event machinery

    def _push(self, t: int, kind: str, args: tuple[object, ...]) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, args))

    def host(self, i: int) -> int:
        return self.clocks[i].now(self.t)

    def _arm(self, i: int) -> None:
        due = self.eps[i].next_deadline()
        assert due is not None  # beacons never stop
        at = max(self.t, self.clocks[i].to_true(due))
        if self.timer_at[i] is None or at < self.timer_at[i]:  # type: ignore[operator]
            self.timer_at[i] = at
            self._push(at, "timer", (i, at))

    def _link(self, link: tuple[str, int], kind: str, args: tuple[object, ...], control: bool) -> None:
        lossy = not control or self.ctl_loss
        copies = 0 if lossy and self.rng.random() < self.loss else 1
        if copies and self.rng.random() < self.dup:
            copies = 2
        for _ in range(copies):
            at = max(self.link_last.get(link, 0), self.t + self.rng.randint(0, self.delay_max))
            self.link_last[link] = at
            self._push(at, kind, args)

    def step(self) -> None:
        t, _, kind, args = heapq.heappop(self.events)
        self.t = t
        if kind == "timer":
            i, at = args
            assert isinstance(i, int)
            if self.timer_at[i] != at:
                return
            self.timer_at[i] = None
            self._call(i, lambda ep, now: ep.on_timer(now))
        elif kind == "tor_in":
            self._tor_in(*args)  # type: ignore[arg-type]
        elif kind == "rx":
            i, src, data, ce = args
            assert isinstance(i, int) and isinstance(data, bytes)
            self._call(i, lambda ep, now: ep.receive(data, src, now, bool(ce)))
        elif kind == "tor_beacon":
            for j in range(self.n):
                b = beacon(ts_from_ns(self.tor_out), 0).to_bytes()
                self._link(("down", j), "rx", (j, TOR, b, False), control=False)
            self._push(self.t + T, "tor_beacon", ())
        elif kind == "send":
            i, msgs = args
            assert isinstance(i, int) and isinstance(msgs, list)
            self._send(i, msgs)
        elif kind == "slack":
            i, slack = args
            assert isinstance(i, int) and isinstance(slack, int)
            self._call(i, lambda ep, now: ep.set_timer_slack(slack))

    # -------------------------------------------------------------- the ToR (min-barrier relay)

    def _tor_in(self, i: int, dst: object, data: bytes) -> None:
        hdr, _ = decode_packet(data)
        if hdr.opcode in BARRIER_OPCODES:
            self.tor_r[i] = max(self.tor_r[i], ts_unwrap(hdr.be_barrier, self.t))
        out = min(self.tor_r)
        assert out >= self.tor_out  # invariant 1: the output barrier never decreases
        self.tor_out = out
        if hdr.opcode is OnePipeOpcode.BEACON:
            return  # hop by hop: consumed
        assert isinstance(dst, int)
        buf = bytearray(data)
        write_be_barrier(buf, 0, ts_from_ns(out))
        ce = hdr.opcode is OnePipeOpcode.DATA and self.rng.random() < self.ce
        if hdr.opcode is OnePipeOpcode.DATA and self.rng.random() < self.reorder:
            self._push(self.t + self.rng.randint(T, 6 * T), "rx", (dst, i, bytes(buf), ce))
            return
        self._link(("down", dst), "rx", (dst, i, bytes(buf), ce), control=hdr.opcode is not OnePipeOpcode.DATA)

    # -------------------------------------------------------------- endpoints

    def _send(self, i: int, msgs: list[tuple[int, int]]) -> None:
        ep = self.eps[i]
        seq = ep._seq  # the number send() will return
        scattering = [(dst, _msg(i, seq, k, size)) for k, (dst, size) in enumerate(msgs)]

        need: dict[int, int] = {}
        for dst, m in scattering:
            need[dst] = need.get(dst, 0) + max(1, -(-len(m) // MTU))

        def go(ep: Endpoint, now: int) -> None:
            if max(need.values()) > RWND:  # could never be buffered: refused at once
                with pytest.raises(ValueError):
                    ep.send(scattering, now)
                return
            got = ep.send(scattering, now)
            if got is not None:
                assert got == seq
                for k, (dst, m) in enumerate(scattering):
                    self.sent[(i, seq, k)] = (dst, m)
        self._call(i, go)

    def _call(self, i: int, fn: object) -> None:
        ep = self.eps[i]
        now = self.host(i)
        before = ep.delivered_barrier
        fn(ep, now)  # type: ignore[operator]
        for a in ep.actions.take_all():
            if isinstance(a, SendTo):
                self._out(i, a.dst, a.data, now)
            elif isinstance(a, Deliver):
                self._delivered(i, a, now, before)
            elif isinstance(a, SendFail):
                self._failed(i, a)
        self._check_memory(ep)
        self._arm(i)

    def _out(self, i: int, dst: object, data: bytes, now: int) -> None:
        hdr = OnePipeHeader.from_bytes(data)
        b = ts_unwrap(hdr.be_barrier, now)
        last = self.last_adv[i]
        assert last is None or b >= last, "advertised barrier went backwards"
        self.last_adv[i] = b
        if hdr.opcode is OnePipeOpcode.DATA:
            assert hdr.msg_ts == hdr.be_barrier
            if hdr.flags & SOM:
                self.sent_at[ID.unpack_from(data, OnePipeHeader.SIZE)] = self.t
        if dst == UPLINK:
            assert hdr.opcode is OnePipeOpcode.BEACON
            dst = None
        self._link(("up", i), "tor_in", (i, dst, data), control=hdr.opcode in (OnePipeOpcode.ACK, OnePipeOpcode.NAK))

    def _scattering_ts(self, sender: int, seq: int, ts: int) -> None:
        assert self.scattering_ts.setdefault((sender, seq), ts) == ts, "one ts per scattering"

    def _delivered(self, j: int, a: Deliver, now: int, before: int | None) -> None:
        ep = self.eps[j]
        sender, seq, idx = ID.unpack_from(a.msg)
        mid = (sender, seq, idx)
        assert a.src == sender
        assert self.sent[mid] == (j, a.msg), "delivered bytes or receiver differ from what was sent"
        assert mid not in self.delivered_ids, "delivered twice"
        self.delivered_ids.add(mid)
        self.delivered_at[mid] = self.t
        assert ep.barrier is not None and a.ts < ep.barrier
        assert ep.delivered_barrier is not None and a.ts < ep.delivered_barrier
        assert before is None or a.ts >= before, "delivered below a barrier already passed"
        assert a.ts < now, "causality: the receiver's clock must be past ts"
        self._scattering_ts(sender, seq, a.ts)
        self.delivered[j].append((a.ts, sender, seq, idx))

    def _failed(self, i: int, a: SendFail) -> None:
        sender, seq, idx = ID.unpack_from(a.msg)
        mid = (sender, seq, idx)
        assert sender == i and self.sent[mid] == (a.dst, a.msg)
        assert mid not in self.failed_ids, "SendFail twice"
        self.failed_ids.add(mid)
        self.failed_at[mid] = self.t
        self._scattering_ts(sender, seq, a.ts)

    @staticmethod
    def _check_memory(ep: Endpoint) -> None:
        assert ep.queued <= PARAMS.send_buffer
        for tx in ep._tx.values():
            assert len(tx.inflight) <= RWND
        for rx in ep._rx.values():
            assert rx.npkts <= RWND and rx.nrefused <= RWND and len(rx.lost) <= RWND + 1
            assert len(rx.buf) == len(rx.order) == rx.npkts + rx.nrefused

    def quiet(self) -> bool:
        return all(ep.queued == 0 and not any(tx.inflight for tx in ep._tx.values()) for ep in self.eps)

    def run_until(self, t_end: int) -> None:
        while self.events and self.events[0][0] <= t_end:
            self.step()


def _check(run: Run) -> None:
    for j, seq in run.delivered.items():
        assert seq == sorted(seq) and len(set(seq)) == len(seq), f"receiver {j} out of order"
    per_sender: dict[int, list[tuple[int, int]]] = {}
    for (sender, seq), ts in run.scattering_ts.items():
        per_sender.setdefault(sender, []).append((seq, ts))
    for pairs in per_sender.values():
        pairs.sort()
        assert [ts for _, ts in pairs] == sorted(ts for _, ts in pairs), "seq order and ts order disagree"
    sent = set(run.sent)
    assert run.delivered_ids | run.failed_ids == sent, "a message neither delivered nor send-failed"
    if not run.ctl_loss:
        # ACKs and NAKs all arrive: a message is send-failed *and* delivered only when the
        # timeout fired before the ACK could come back, i.e. delivery itself was that slow
        for mid in run.delivered_ids & run.failed_ids:
            sent, failed, delivered = run.sent_at[mid], run.failed_at[mid], run.delivered_at[mid]
            assert failed - sent >= PARAMS.ack_timeout_ns * 0.99, "NAKed yet delivered"
            assert delivered > failed - 2 * run.delay_max - 1, "the ACK had time to come back"
    for ep in run.eps:
        assert all(rx.npkts == 0 and rx.nrefused == 0 for rx in ep._rx.values())
        assert ep.c.malformed == 0 and ep.c.inconsistent == 0


SCATTERING = st.lists(st.tuples(st.integers(0, 3), st.integers(ID.size, 3 * MTU + 3)), min_size=1, max_size=4)
OPS = st.lists(st.tuples(st.integers(0, 3 * T), st.integers(0, 3), SCATTERING), min_size=1, max_size=25)
#: (when, endpoint, slack): the ACK timeout waits up to twice longer, and the slack may fall back
SLACKS = st.lists(st.tuples(st.integers(0, 40 * T), st.integers(0, 3), st.integers(0, 2 * PARAMS.ack_timeout_ns)),
                  max_size=4)


def schedule(run: Run, n: int, start: int, ops: list, slacks: list) -> int:
    """Queue the drawn slack changes and scatterings (endpoints and destinations modulo ``n``);
    the time of the last scattering."""
    for at, who, slack in slacks:
        run._push(start + at, "slack", (who % n, slack))
    t = start
    for gap, sender, msgs in ops:
        t += gap
        run._push(t, "send", (sender % n, [(dst % n, size) for dst, size in msgs]))
    return t


@settings(max_examples=100)
@given(
    n=st.integers(2, 4), ops=OPS, seed=st.integers(0, 2**32),
    loss=st.sampled_from([0.0, 0.0, 0.05, 0.2]), dup=st.sampled_from([0.0, 0.1]), ctl_loss=st.booleans(),
    ce=st.sampled_from([0.0, 0.3]), delay_max=st.integers(0, 3 * T), reorder=st.sampled_from([0.0, 0.0, 0.1]),
    offsets=st.lists(st.integers(-2 * T, 2 * T), min_size=4, max_size=4),
    drifts=st.lists(st.sampled_from([0.0, -200.0, 300.0]), min_size=4, max_size=4),
    start=st.sampled_from([10**7, (1 << 48) - 40 * T]), slacks=SLACKS,
)
def test_endpoints_behind_a_min_barrier_relay_keep_every_invariant(
        n, ops, seed, loss, dup, ctl_loss, ce, delay_max, reorder, offsets, drifts, start, slacks):
    # drift counted from the start of the run (a clock synchronised then, drifting since)
    clocks = [HostClock(offsets[i] - round(start * drifts[i] / 1e6), drifts[i]) for i in range(n)]
    run = Run(n, clocks, random.Random(seed), loss, dup, ctl_loss, ce, delay_max, reorder, start)
    t = schedule(run, n, start, ops, slacks)
    run.run_until(t)
    end = t + 200 * PARAMS.ack_timeout_ns
    while not (run.quiet() and run.t >= t + 2 * PARAMS.ack_timeout_ns):
        assert run.t < end, "the run never went quiet"
        run.run_until(run.t + T)
    run.run_until(run.t + 10 * T)  # the last barriers pass whatever a timed-out sender left
    _check(run)


@settings(max_examples=200)
@given(data=st.binary(max_size=80), ce=st.booleans())
def test_arbitrary_bytes_never_raise(data, ce):
    ep = Endpoint(PARAMS, 1, 10**6, key=lambda a: a)
    ep.send([(2, b"x" * 40)], 10**6)
    ep.receive(data, 2, 10**6 + 5, ce)
    ep.on_timer(10**6 + PARAMS.ack_timeout_ns + 1)
    assert ep.next_deadline() is not None


HEADERS = st.builds(
    OnePipeHeader, msg_ts=st.integers(0, (1 << 48) - 1), be_barrier=st.integers(0, (1 << 48) - 1),
    commit_barrier=st.just(0), psn=st.one_of(st.integers(0, 12), st.integers(0, (1 << 32) - 1)),
    opcode=st.sampled_from(list(OnePipeOpcode)), flags=st.integers(0, 255))


@settings(max_examples=200)
@given(pkts=st.lists(st.tuples(HEADERS, st.binary(max_size=40), st.sampled_from([2, 3, "tor", ("10.0.0.1", 5)])),
                     max_size=25))
def test_well_formed_headers_with_any_fields_never_raise_nor_break_order(pkts):
    """Packets a confused or hostile peer could send: decodable headers, any field values."""
    ep = Endpoint(PARAMS, 1, 10**6, key=lambda a: a if isinstance(a, int) else 7)
    ep.send([(2, b"x" * 40), (3, b"y")], 10**6)
    now = 10**6
    delivered: list[int] = []
    for k, (hdr, payload, src) in enumerate(pkts):
        now += 100
        body = b"" if hdr.opcode in (OnePipeOpcode.BEACON, OnePipeOpcode.COMMIT) else payload
        ep.receive(hdr.to_bytes() + body, src, now, k % 3 == 0)
        if k % 5 == 4:
            ep.on_timer(now)
        delivered += [a.ts for a in ep.actions.take(Deliver)]
        assert all(rx.npkts <= RWND and rx.nrefused <= RWND for rx in ep._rx.values())
    assert delivered == sorted(delivered)
