"""Virtual time: a sender and a receiver engine on a simulated path, for the property tests and
the simulated sweep of ``netstack bench tcsack``.

Each direction is a :class:`Path`: serialisation at ``rate_bps`` (None: none), then
``delay_ns``, with each datagram's fate (lost / duplicated / extra delay, which reorders) drawn
from a seeded RNG or dictated by a function of its index (hypothesis schedules). Nothing here
sleeps: a transfer of thousands of packets runs in milliseconds.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .common import ReceiverBase, SenderBase
from .gbn import GbnReceiver, GbnSender
from .params import WIRE_OVERHEAD, TcsParams
from .receiver import TcsReceiver
from .sender import TcsSender

#: (lost, duplicated, extra delay in ns) for the i-th datagram put on a path
Fate = Callable[[int], tuple[bool, bool, int]]

ENGINES: dict[str, tuple[type[SenderBase], type[ReceiverBase]]] = {
    "tcsack": (TcsSender, TcsReceiver),
    "gbn": (GbnSender, GbnReceiver),
}


@dataclass
class Path:
    """One direction of the simulated path."""

    rate_bps: int | None = 100_000_000
    delay_ns: int = 1_000_000
    loss: float = 0.0
    dup: float = 0.0
    reorder: float = 0.0  # probability of an extra delay of up to reorder_ns
    reorder_ns: int = 0
    seed: int = 1
    fate: Fate | None = None
    sent: int = 0
    lost: int = 0
    _busy: int = 0
    _rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def arrivals(self, datagram: bytes, now_ns: int) -> list[int]:
        """Times at which ``datagram`` put on the path at ``now_ns`` arrives (0, 1 or 2 copies)."""
        i = self.sent
        self.sent += 1
        if self.rate_bps:
            start = max(now_ns, self._busy)
            self._busy = start + (len(datagram) + WIRE_OVERHEAD) * 8_000_000_000 // self.rate_bps
            t = self._busy + self.delay_ns
        else:
            t = now_ns + self.delay_ns
        if self.fate is not None:
            lost, dup, extra = self.fate(i)
        else:
            r = self._rng
            lost = r.random() < self.loss
            dup = r.random() < self.dup
            extra = int(r.random() * self.reorder_ns) if r.random() < self.reorder else 0
        if lost:
            self.lost += 1
            return []
        return [t + extra, t + extra + 1] if dup else [t + extra]


def run_transfer(kind: str, params: TcsParams, data: bytes, fwd: Path, rev: Path, *,
                 start_seq: int = 0, max_ns: int = 60_000_000_000, check_order: bool = True) -> dict[str, Any]:
    """Move ``data`` from a ``kind`` sender to its receiver; returns the outcome and counters.

    ``delivered_ok``: the receiver handed on exactly ``data``, in order, once. ``done_ns``: when
    the sender saw everything acknowledged (None if ``max_ns`` passed first).
    """
    s_cls, r_cls = ENGINES[kind]
    snd = s_cls(params, data, start_seq=start_seq)
    rcv = r_cls(params, start_seq=start_seq)
    events: list[tuple[int, int, int, bytes]] = []  # (time, order, 0 = to receiver / 1 = to sender, bytes)
    order = 0
    delivered: list[bytes] = []
    now = 0
    while not snd.done and now <= max_ns:
        for d in snd.poll(now):
            for t in fwd.arrivals(d, now):
                heapq.heappush(events, (t, order, 0, d))
                order += 1
        cands = [t for t in (snd.next_deadline(), rcv.next_deadline()) if t is not None]
        if events:
            cands.append(events[0][0])
        if not cands:
            break  # nothing can happen any more: stuck (a bug; the tests catch it)
        now = max(now, min(cands))
        while events and events[0][0] <= now:
            _, _, to, d = heapq.heappop(events)
            if to == 0:
                delivered.extend(rcv.receive(d, now))
            else:
                snd.receive(d, now)
        rcv.on_timer(now)
        for a in rcv.ack_out:
            for t in rev.arrivals(a, now):
                heapq.heappush(events, (t, order, 1, a))
                order += 1
        rcv.ack_out.clear()
    got = b"".join(delivered)
    return {
        "kind": kind,
        "done_ns": snd.done_ns,
        "delivered_ok": got == data and len(delivered) == snd.packets,
        "delivered_packets": len(delivered),
        "receiver_complete": rcv.complete,
        "sender": snd.counters(),
        "receiver": rcv.counters(),
        "fwd_lost": fwd.lost,
        "rev_lost": rev.lost,
        "goodput_bps": (len(data) * 8e9 / snd.done_ns) if snd.done_ns else None,
    }
