"""The two LinkGuardian engines on a scripted, slotted link: the property tests' harness.

No switch and no event loop: each slot the sender puts at most one frame on the forward link,
by strict priority (retransmissions, then normal data unless paused, then a dummy, LinkGuardian
§3.2), and a ``fate`` function scripted by hypothesis decides what the link does with it
(lose, duplicate, delay = reorder). Everything else (switches, links, features, benchmarks)
runs on ``netstack.sim``; this stays because hypothesis needs a link it can script frame by
frame, in slots, to explore loss, duplication, reordering and wrap-around in milliseconds.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from headers.linkguardian import DATA_DUMMY as DUMMY_BIT
from netstack.engine import Backpressure, Transmit
from netstack.linkguardian import LGParams, LGReceiver, LGSender

H1_MAC = bytes.fromhex("020000000101")
H2_MAC = bytes.fromhex("020000000202")
#: IEEE 802 local experimental EtherType: stream frames are not IP
STREAM_ETHERTYPE = 0x88B5


#: what a fate callback is told about a frame
DATA, RETX, DUMMY = "data", "retx", "dummy"

Fate = Callable[[int, str], tuple[int, ...]]


def bernoulli_fate(loss: float, seed: int = 0) -> Fate:
    """Each frame independently lost with probability ``loss`` (delivered once otherwise)."""
    rng = random.Random(seed)
    rnd = rng.random

    def fate(k: int, kind: str) -> tuple[int, ...]:
        return () if rnd() < loss else (0,)

    return fate


@dataclass
class EngineRun:
    """Outcome of :meth:`EnginePair.run`."""

    count: int
    delivered: list[int]
    arrivals: list[int]
    slots: int
    sender: dict[str, Any]
    receiver: dict[str, Any]
    forward_frames: int
    forward_lost: int

    @property
    def missing(self) -> set[int]:
        got = set(self.delivered)
        return {i for i in range(self.count) if i not in got}

    @property
    def never_arrived(self) -> set[int]:
        return {i for i, n in enumerate(self.arrivals) if n == 0}


class EnginePair:
    """An :class:`LGSender` and an :class:`LGReceiver` on a slotted link, no switch.

    Each slot the sender puts at most one frame on the forward link, by strict priority:
    retransmissions, then normal data (unless paused), then a dummy (§3.2). ``fate(k, kind)``
    decides what the link does with the k-th frame: a tuple of extra delays in slots, one
    per copy delivered (``()`` lost, ``(0,)`` on time, ``(0, 0)`` duplicated, ``(3,)`` three
    slots late, i.e. reordered). The reverse link is lossless: loss notifications and
    pause/resume arrive after fixed delays, and one explicit ACK courier per slot carries
    the leading ACK (§3.1). ``observer(pair, slot)`` runs after each slot (invariant checks).
    """

    def __init__(self, params: LGParams, *, fate: Fate | None = None, delay_slots: int = 3,
                 reverse_delay_slots: int = 3, pause_delay_slots: int = 2, slot_ns: int = 1_000,
                 frame_size: int | Callable[[int], int] = 100,
                 observer: Callable[[EnginePair, int], None] | None = None, max_slots: int | None = None) -> None:
        if delay_slots < 1 or reverse_delay_slots < 1 or pause_delay_slots < 1:
            raise ValueError("link delays are at least one slot")
        self.params = params
        self.sender = LGSender(params)
        self.receiver = LGReceiver(params)
        self.fate = fate or (lambda k, kind: (0,))
        self.delay = delay_slots
        self.reverse_delay = reverse_delay_slots
        self.pause_delay = pause_delay_slots
        self.slot_ns = slot_ns
        self.frame_size = frame_size
        self.observer = observer
        self.max_slots = max_slots
        self.paused = False
        self.slot = 0
        self.max_extra_delay = 0

    def _frames(self, count: int) -> Iterator[bytes]:
        size = self.frame_size
        head = H2_MAC + H1_MAC + STREAM_ETHERTYPE.to_bytes(2, "big")
        for i in range(count):
            n = size(i) if callable(size) else size
            yield head + i.to_bytes(4, "big") + bytes(max(0, n - 18))

    def run(self, count: int) -> EngineRun:
        snd, rcv = self.sender, self.receiver
        fate = self.fate
        d, rd, slot_ns = self.delay, self.reverse_delay, self.slot_ns
        fwd: dict[int, list[bytes]] = {}
        rev: dict[int, list[bytes]] = {}
        pauses: dict[int, list[bool]] = {}
        retx_q: deque[bytes] = deque()
        arrivals = [0] * count
        delivered: list[int] = []
        frames = self._frames(count)
        nxt = 0
        k = 0
        lost = 0
        t = 0
        observer = self.observer
        while True:
            now = t * slot_ns
            # (1) the reverse link: notifications / ACKs reach the sender, pauses take effect
            got = rev.pop(t, None)
            if got:
                for f in got:
                    retx_q.extend(snd.receive(f, now)[1])
            ps = pauses.pop(t, None)
            if ps:
                self.paused = ps[-1]
            # (2) the sender's egress: strict priority retx > normal > dummy
            if retx_q:
                f = retx_q.popleft()
                kind = RETX
            elif not self.paused and nxt < count:
                f = snd.stamp(next(frames), now)
                nxt += 1
                kind = DATA
            else:
                f = snd.dummy(now)
                kind = DUMMY
            if f is not None:
                extras = fate(k, kind)
                k += 1
                if not extras:
                    lost += 1
                for x in extras:
                    if x > self.max_extra_delay:
                        self.max_extra_delay = x
                    fwd.setdefault(t + d + x, []).append(f)
            # (3) the forward link delivers to the receiver
            got = fwd.pop(t, None)
            if got:
                for f in got:
                    if not f[14] & DUMMY_BIT:
                        arrivals[int.from_bytes(f[19:23], "big")] += 1
                    for g in rcv.receive(f, now):
                        delivered.append(int.from_bytes(g[14:18], "big"))
                    self._drain_receiver(t, rev, pauses)
            # (4) ackNoTimeout
            dl = rcv.next_deadline()
            if dl is not None and dl <= now:
                for g in rcv.on_timer(now):
                    delivered.append(int.from_bytes(g[14:18], "big"))
                self._drain_receiver(t, rev, pauses)
            # (5) one explicit ACK courier per slot on the reverse link (§3.1)
            c = rcv.courier()
            if c is not None:
                rev.setdefault(t + rd, []).append(c)
            self.slot = t
            if observer is not None:
                observer(self, t)
            if self.max_slots is not None and t >= self.max_slots:
                break
            # idle: jump to the next event
            if not retx_q and (self.paused or nxt >= count) and snd.dummy_budget == 0 and rcv.lack_left == 0:
                cands = [min(fwd)] if fwd else []
                if rev:
                    cands.append(min(rev))
                if pauses:
                    cands.append(min(pauses))
                dl = rcv.next_deadline()
                if dl is not None:
                    cands.append(-(-dl // slot_ns))
                if not cands:
                    if nxt >= count:
                        break
                    raise RuntimeError("sender paused with nothing that could resume it")
                t = max(t + 1, min(cands))
            else:
                t += 1
        return EngineRun(count, delivered, arrivals, t, snd.counters(), rcv.counters(), k, lost)

    def _drain_receiver(self, t: int, rev: dict[int, list[bytes]], pauses: dict[int, list[bool]]) -> None:
        rcv = self.receiver
        control = [a.data for a in rcv.actions.take(Transmit)]
        if control:
            rev.setdefault(t + self.reverse_delay, []).extend(control)
        states = [a.paused for a in rcv.actions.take(Backpressure)]
        if states:
            pauses.setdefault(t + self.pause_delay, []).extend(states)
