"""A T/C-SACK (or go-back-N) sender and receiver joined by two one-way paths in virtual time, with
room for an attacker on the path: the engines are driven directly (no simulated network), so a
transfer of a few dozen packets runs in about a millisecond and hypothesis can try hundreds.

The data path and the ACK path each give every genuine datagram a fate (lost, duplicated,
extra delay: a larger extra delay than the next datagram's reorders them). The attacker injects
datagrams at any time: to the sender (as if from the receiver: the ACK checks must stand on their
own), or to the receiver from any source address (``SND`` is the genuine sender's, ``EVIL`` the
attacker's own). The receiver is handed the source of every datagram, as the shells
(``netstack.tcsack.live``, ``netstack.tcsack.simhosts``) hand it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

from headers.errors import HeaderError
from headers.tcsack import TcsAck
from netstack.tcsack import ENGINES, TcsParams

#: the clock at the start: far from 0, so that a tsecr of 0 (what a careless forger writes) or
#: any other blind guess is not one of the sender's stamps by accident
T0 = 1_234_567_890_123_000
SND = ("10.0.0.1", 40001)
EVIL = ("10.0.0.66", 40001)

#: one datagram's fate on a path: (lost, duplicated, extra delay in ns)
Fate = Callable[[int], tuple[bool, bool, int]]


def clean(_i: int) -> tuple[bool, bool, int]:
    return False, False, 0


class Path:
    """``data`` from a sender to a receiver engine of ``kind`` (``tcsack`` or ``gbn``)."""

    def __init__(self, kind: str, params: TcsParams, data: bytes, *, start_seq: int = 0, flow_id: int = 0,
                 delay_ns: int = 300_000, fwd: Fate = clean, rev: Fate = clean) -> None:
        s_cls, r_cls = ENGINES[kind]
        self.params = params
        self.data = data
        self.now = T0
        self.snd: Any = s_cls(params, data, flow_id, start_seq, now_ns=T0)
        self.rcv: Any = r_cls(params, flow_id, start_seq)
        self.delay_ns = delay_ns
        self.fwd, self.rev = fwd, rev
        self.n_fwd = self.n_rev = 0
        self.delivered: list[bytes] = []
        self.data_seen: list[bytes] = []  # genuine data datagrams, as sent (for replays)
        self.acks_seen: list[bytes] = []  # genuine ACKs, as sent
        self.malformed = 0
        #: did the receiver have everything when the sender first said done? (None: not done yet)
        self.complete_when_done: bool | None = None
        self._heap: list[tuple[int, int, Callable[..., None], tuple[Any, ...]]] = []
        self._n = itertools.count()
        self._snd_at: int | None = None
        self._rcv_at: int | None = None
        self.at(T0, self._poll_sender, None)

    # ------------------------------------------------------------------ the event loop
    def at(self, t: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._heap, (max(t, self.now), next(self._n), fn, args))

    def run(self, max_ns: int = 60_000_000_000, after: Callable[[], None] | None = None) -> Path:
        """Until nothing is left to do, or ``max_ns`` of virtual time; ``after`` runs after every event."""
        limit = T0 + max_ns
        heap = self._heap
        while heap and heap[0][0] <= limit:
            t, _, fn, args = heapq.heappop(heap)
            self.now = t
            fn(*args)
            if after is not None:
                after()
        return self

    # ---------------------------------------------------------------------- the sender
    def _poll_sender(self, token: int | None) -> None:
        if token is not None:
            if token != self._snd_at:
                return  # replaced by an earlier wake-up
            self._snd_at = None
        snd = self.snd
        for d in snd.poll(self.now):
            self.data_seen.append(d)
            self._send(d, self.fwd, self.n_fwd, self.to_receiver, SND)
            self.n_fwd += 1
        if snd.done:
            return
        d = snd.next_deadline()
        if d is not None:
            d = max(d, self.now + 1)
            if self._snd_at is None or d < self._snd_at:
                self._snd_at = d
                self.at(d, self._poll_sender, d)

    def to_sender(self, datagram: bytes) -> None:
        snd = self.snd
        was_done = snd.done
        try:
            snd.receive(datagram, self.now)
        except HeaderError:
            self.malformed += 1
        if snd.done and not was_done:
            self.complete_when_done = self.rcv.complete
        self._poll_sender(None)

    # -------------------------------------------------------------------- the receiver
    def to_receiver(self, datagram: bytes, src: tuple[str, int]) -> None:
        try:
            self.delivered += self.rcv.receive(datagram, self.now, src)
        except HeaderError:
            self.malformed += 1
        self._flush()

    def _rcv_timer(self, token: int) -> None:
        if token != self._rcv_at:
            return
        self._rcv_at = None
        self.rcv.on_timer(self.now)
        self._flush()

    def _flush(self) -> None:
        rcv = self.rcv
        for act in rcv.actions.take_all():
            self.acks_seen.append(act.data)
            self._send(act.data, self.rev, self.n_rev, self.to_sender)
            self.n_rev += 1
        d = rcv.next_deadline()
        if d is not None and (self._rcv_at is None or d < self._rcv_at):
            self._rcv_at = d
            self.at(d, self._rcv_timer, d)

    def _send(self, datagram: bytes, fate: Fate, i: int, deliver: Callable[..., None], *args: Any) -> None:
        lost, dup, extra = fate(i)
        if lost:
            return
        self.at(self.now + self.delay_ns + extra, deliver, datagram, *args)
        if dup:
            self.at(self.now + self.delay_ns + extra + 1, deliver, datagram, *args)

    # ------------------------------------------------------------------- what happened
    @property
    def delivered_ok(self) -> bool:
        return b"".join(self.delivered) == self.data and len(self.delivered) == self.snd.packets

    def latest_ack(self) -> TcsAck | None:
        return TcsAck.from_bytes(self.acks_seen[-1]) if self.acks_seen else None


__all__ = ["EVIL", "SND", "T0", "Fate", "Path", "clean"]
