"""Per-port strict-priority egress queues with one shared, finite buffer and tail drop.

Issue text: "per-port strict-priority egress queues (at least three classes)" and
"finite buffers with counted tail drops". Eight classes (802.1Q priorities), class 7
served first. Buffer model (a choice, documented in netstack/switch/__init__.py): the
port's ``buffer_bytes`` is *shared* by its eight classes, like a Tofino/Trident egress
port drawing from one pool; a frame that does not fit is tail-dropped and counted
against its class. Sharing matters for LinkGuardian: retransmissions on class 7 and the
normal class compete for the same bytes, as in the LinkGuardian paper's single-port egress buffer.
Occupancy counts frame bytes as queued (no cell rounding).

Each entry remembers its ingress port so that PFC's ingress accounting can be undone
when the frame leaves (see pfc.py).
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Any

from ..ethernet import NUM_CLASSES


class ClassQueues:
    __slots__ = ("capacity", "class_bytes", "nonempty", "peak", "q", "used")

    def __init__(self, capacity: int) -> None:
        self.q: list[deque[tuple[bytes, Any]]] = [deque() for _ in range(NUM_CLASSES)]
        self.class_bytes = [0] * NUM_CLASSES
        self.used = 0
        self.capacity = capacity
        self.peak = 0
        #: bit ``c`` set when class ``c`` holds a frame: one int test on the idle path
        self.nonempty = 0

    def fits(self, size: int) -> bool:
        return self.used + size <= self.capacity

    def push(self, cls: int, frame: bytes, ingress: Any) -> None:
        """Append (the caller checked :meth:`fits`: tail drop is counted where the port is known)."""
        n = len(frame)
        self.q[cls].append((frame, ingress))
        self.class_bytes[cls] += n
        self.used += n
        if self.used > self.peak:
            self.peak = self.used
        self.nonempty |= 1 << cls

    def push_run(self, cls: int, frames: list[bytes], ingress: Any, size: int) -> None:
        """:meth:`push` of each of ``frames`` (``size`` bytes in all) in one step (the caller
        checked that they all fit)."""
        self.q[cls].extend(zip(frames, repeat(ingress)))
        self.class_bytes[cls] += size
        self.used += size
        if self.used > self.peak:
            self.peak = self.used
        self.nonempty |= 1 << cls

    def pop(self, cls: int) -> tuple[bytes, Any]:
        q = self.q[cls]
        frame, ingress = q.popleft()
        n = len(frame)
        self.class_bytes[cls] -= n
        self.used -= n
        if not q:
            self.nonempty &= ~(1 << cls)
        return frame, ingress

    def took(self, cls: int, size: int) -> None:
        """``size`` bytes were popped from class ``cls`` directly (the port's fast path)."""
        self.class_bytes[cls] -= size
        self.used -= size
        if not self.q[cls]:
            self.nonempty &= ~(1 << cls)

    def frames(self, cls: int) -> int:
        return len(self.q[cls])
