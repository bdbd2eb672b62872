"""1Pipe endpoints and switches in memory, in virtual time: the real engines (``Endpoint``,
``BarrierAggregator``) joined by one-way links that keep FIFO order, with loss, duplication and
per-link delay decided by the test.

Shape: ``tors`` ToR switches under one spine (``tors == 1``: no spine), endpoints dealt to the
ToRs in turn. Endpoint addresses are ints (their own total-order key). A switch forwards what
the endpoints send as the switch feature does (design topic §4 in docs/papers.md): the packet's
barrier sets ``R_be`` of the input it came from, a beacon is consumed, anything else leaves
with the barrier of the output it takes; outputs idle for ``T_beacon`` send beacons. Each
endpoint has its own clock (offset, drift). The test reads what happened from the recorded
``deliveries``, ``failures`` and ``sent``.
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
    OnePipeHeader,
    OnePipeOpcode,
    beacon,
    ts_from_ns,
    ts_unwrap,
    write_be_barrier,
)
from netstack.engine import SendTo
from netstack.onepipe.actions import Deliver, SendFail
from netstack.onepipe.barrier import DOWN, UP, BarrierAggregator
from netstack.onepipe.clock import HostClock
from netstack.onepipe.endpoint import UPLINK, Endpoint
from netstack.onepipe.params import OnePipeParams

#: one datagram's fate on a link: (lost, duplicated, extra delay in ns)
Fate = Callable[[], tuple[bool, bool, int]]
#: what a link carries: (source endpoint (0: a switch), destination endpoint or UPLINK, datagram)
Packet = tuple[int, Any, bytes]
#: a message's bytes: sender, scattering, receiver (what the test checks the order against)
MSG = struct.Struct("!III")
SPINE = "spine"


def assert_total_order(per_receiver: dict[Any, list[Any]]) -> None:
    """Design topic §12 items 2 and 4 over what each receiver delivered (objects with ``src``,
    ``seq``, ``ts``): nothing twice, non-decreasing ``(ts, sender)`` at every receiver (so common
    scatterings come in one relative order everywhere), one ts per scattering."""
    first_ts: dict[tuple[Any, Any], int] = {}
    for r, ds in per_receiver.items():
        seen: set[tuple[Any, Any]] = set()
        last: tuple[int, Any] | None = None
        for d in ds:
            key = (d.src, d.seq)
            assert key not in seen, f"{key} delivered twice at {r}"
            seen.add(key)
            assert first_ts.setdefault(key, d.ts) == d.ts, f"scattering {key} with two timestamps"
            order = (d.ts, d.src)
            assert last is None or order >= last, f"receiver {r} went back: {last} then {order}"
            last = order


def never() -> tuple[bool, bool, int]:
    return False, False, 0


@dataclass
class Delivery:
    receiver: int
    ts: int
    src: int
    seq: int
    at_true: int
    host_now: int
    barrier: int | None


@dataclass
class Fabric:
    params: OnePipeParams
    n: int
    tors: int = 2
    delay_ns: int = 2_000
    fate: Fate = never
    clocks: dict[int, HostClock] = field(default_factory=dict)
    now: int = 10**12  # far from 0: negative skews stay positive

    def __post_init__(self) -> None:
        self.heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._tie = itertools.count()
        self.tor_of = {a: f"tor{a % self.tors}" for a in range(1, self.n + 1)}
        self.switches = {f"tor{i}": BarrierAggregator(self.params) for i in range(self.tors)}
        if self.tors > 1:
            self.switches[SPINE] = BarrierAggregator(self.params)
        self._wire()
        self.eps = {a: Endpoint(self.params, a, self.clock(a).now(self.now)) for a in self.tor_of}
        self.last_arrival: dict[tuple[Any, Any], int] = {}
        self.deliveries: list[Delivery] = []
        self.failures: list[tuple[int, int, int, int]] = []  # (sender, ts, dst, seq)
        self.sent: dict[tuple[int, int], tuple[int, list[int]]] = {}  # (sender, seq) -> (send time, dsts)
        self.next_seq: dict[int, int] = {}
        self.dropped = 0
        self.dead: set[int] = set()  # endpoints killed: they send, receive and time nothing
        self.link_barrier: dict[tuple[Any, Any], int] = {}  # the last barrier each switch link carried
        self.late_on_link = 0
        self._timers: dict[Any, int | None] = {}
        for a in self.eps:
            self._arm(a)
        for sw in self.switches:
            self._arm(sw)

    # ------------------------------------------------------------------ shape
    def _wire(self) -> None:
        for a, tor in self.tor_of.items():
            self.switches[tor].add_input(a, down=True)
            self.switches[tor].add_output(a, DOWN, self.now)
        if self.tors > 1:
            spine = self.switches[SPINE]
            for i in range(self.tors):
                tor = f"tor{i}"
                self.switches[tor].add_input(SPINE, down=False)
                self.switches[tor].add_output(SPINE, UP, self.now)
                spine.add_input(tor, down=True)
                spine.add_output(tor, DOWN, self.now)

    def clock(self, a: int) -> HostClock:
        return self.clocks.get(a, HostClock())

    def route(self, sw: str, dst: int) -> Any:
        """The output of switch ``sw`` toward endpoint ``dst`` (an endpoint, a ToR or the spine)."""
        tor = self.tor_of[dst]
        if sw == SPINE:
            return tor
        return dst if tor == sw else SPINE

    # ------------------------------------------------------------------ events
    def at(self, t: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self.heap, (t, next(self._tie), fn, args))

    def run(self, until: int, after: Callable[[], None] | None = None) -> None:
        while self.heap and self.heap[0][0] <= until:
            t, _, fn, args = heapq.heappop(self.heap)
            self.now = max(self.now, t)
            fn(*args)
            if after is not None:
                after()
        self.now = max(self.now, until)

    def link(self, frm: Any, to: Any, pkt: Packet) -> None:
        """``pkt`` from node ``frm`` to node ``to`` (FIFO per direction, with the test's fate).

        On every link out of a switch it checks design topic §12 item 1: the barrier never
        decreases, and counts (``late_on_link``) data below a barrier the link already carried
        (allowed only for a joining input's packets: they are lost, never misordered)."""
        if isinstance(frm, str):
            hdr = OnePipeHeader.from_bytes(pkt[2])
            b = ts_unwrap(hdr.be_barrier, self.now)
            last = self.link_barrier.get((frm, to))
            assert last is None or b >= last, f"barrier went back on {frm}->{to}: {last} then {b}"
            if hdr.opcode == OnePipeOpcode.DATA and last is not None and ts_unwrap(hdr.msg_ts, self.now) < last:
                self.late_on_link += 1
            self.link_barrier[(frm, to)] = b
        lost, dup, extra = self.fate()
        if lost:
            return
        t = max(self.now + self.delay_ns + extra, self.last_arrival.get((frm, to), 0))
        self.last_arrival[(frm, to)] = t
        for _ in range(2 if dup else 1):
            self.at(t, self._arrive, frm, to, pkt)

    def _arrive(self, frm: Any, to: Any, pkt: Packet) -> None:
        if isinstance(to, str):
            self._switch_rx(to, frm, pkt)
        elif to not in self.dead:
            self.eps[to].receive(pkt[2], pkt[0], self.clock(to).now(self.now))
            self._flush(to)

    # ------------------------------------------------------------------ endpoints
    def kill(self, a: int) -> None:
        """Endpoint ``a`` stops for good: nothing more from it, nothing more to it."""
        self.dead.add(a)

    def send(self, a: int, dsts: list[int]) -> int | None:
        """Endpoint ``a`` scatters one message to each of ``dsts``; its sequence number, or None
        (send buffer full)."""
        if a in self.dead:
            return None
        seq = self.next_seq.get(a, 0)
        got = self.eps[a].send([(d, MSG.pack(a, seq, d)) for d in dsts], self.clock(a).now(self.now))
        if got is not None:
            assert got == seq, (got, seq)
            self.next_seq[a] = seq + 1
            self.sent[(a, got)] = (self.now, dsts)
        self._flush(a)
        return got

    def _flush(self, a: int) -> None:
        ep = self.eps[a]
        h = self.clock(a).now(self.now)
        for act in ep.actions.take_all():
            if isinstance(act, SendTo):
                assert act.dst == UPLINK or act.dst in self.eps, act.dst
                self.link(a, self.tor_of[a], (a, act.dst, act.data))  # beacons (UPLINK) and data alike go up
            elif isinstance(act, Deliver):
                src, seq, dst = MSG.unpack(act.msg)
                assert src == act.src and dst == a, (src, act.src, dst, a)
                self.deliveries.append(Delivery(a, act.ts, act.src, seq, self.now, h, ep.barrier))
            elif isinstance(act, SendFail):
                _, seq, dst = MSG.unpack(act.msg)
                self.failures.append((a, act.ts, act.dst, seq))
        self._arm(a)

    def _arm(self, node: Any) -> None:
        if isinstance(node, str):
            d = self.switches[node].next_deadline()
        else:
            hd = self.eps[node].next_deadline()
            d = None if hd is None else self.clock(node).to_true(hd)
        if d is not None and self._timers.get(node) != d:
            self._timers[node] = d
            self.at(max(d, self.now), self._fire, node, d)

    def _fire(self, node: Any, d: int) -> None:
        if self._timers.get(node) != d or node in self.dead:
            return  # superseded, or a dead endpoint
        self._timers[node] = None
        if isinstance(node, str):
            self._switch_timer(node)
        else:
            self.eps[node].on_timer(self.clock(node).now(self.now))
            self._flush(node)

    # ------------------------------------------------------------------ switches
    def _switch_rx(self, sw: str, frm: Any, pkt: Packet) -> None:
        agg = self.switches[sw]
        src, dst, data = pkt
        try:
            hdr = OnePipeHeader.from_bytes(data)
        except HeaderError:
            self.dropped += 1
            return
        if hdr.opcode in BARRIER_OPCODES:
            agg.heard(frm, ts_unwrap(hdr.be_barrier, self.now), self.now)
        if hdr.opcode == OnePipeOpcode.BEACON or dst == UPLINK:
            self._arm(sw)
            return  # hop by hop: consumed, never forwarded
        out = self.route(sw, dst)
        b = agg.barrier_for(out, self.now)
        if b is None:
            self.dropped += 1
            return
        agg.note_sent(out, self.now)
        buf = bytearray(data)
        write_be_barrier(buf, 0, ts_from_ns(b))
        self.link(sw, out, (src, dst, bytes(buf)))
        self._arm(sw)

    def _switch_timer(self, sw: str) -> None:
        agg = self.switches[sw]
        agg.on_timer(self.now)
        for out, b in agg.due_beacons(self.now):
            agg.note_sent(out, self.now)
            self.link(sw, out, (0, out, beacon(ts_from_ns(b), 0).to_bytes()))
        self._arm(sw)

