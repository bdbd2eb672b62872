"""A central sequencer: the stamping engine of the host-sequencer baseline (1Pipe §7.1, Fig. 8
"HostSeq": a sequencer at a host NIC, after Kaminsky et al., "Design Guidelines for High Performance
RDMA Systems", ATC '16), also run by the switch sequencer (:mod:`.switchseq`) with a switch's
capacity instead of a host's.

The model is ``netstack.onepipe.sequencer``'s (that module runs it for ``mode = "sequencer"`` with no
CPU model and keeps its exact results), as a sans-IO engine:

- a sender hands its whole scattering (sender, scattering counter, destinations) to the sequencer;
- the sequencer is one server with one counter: scatterings in arrival order, each stamped with the
  next global number ``g`` and each of its messages with the next number of its destination ``pd``;
  the messages leave one after another, ``service_ns`` each (a float: a switch pipeline is faster
  than a nanosecond a message);
- it holds ``queue`` messages; a scattering that does not fit is dropped whole and counted: no sender
  learns of it (a sequencer has no send-fail callback: best effort, as ``netstack.onepipe.sequencer``);
- it remembers each sender's last scattering counter: a scattering the network duplicated (or one
  that arrives after a later one of its sender) is not stamped again, so no receiver can deliver one
  message twice (``stale``; a switch keeps this in one register per sender).

:meth:`StampingSequencer.on_scattering` takes ``now_ns`` and returns the stamped messages with the
time each leaves the server: no clock or socket inside.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .stamped import Stamped

#: a scattering to the sequencer: sender, scattering counter, number of destinations; then each (u32)
_TO_SEQ = struct.Struct("!IQH")
_DST = struct.Struct("!I")


def pack_scattering(src: int, sseq: int, dsts: Sequence[int], payload: bytes = b"") -> bytes:
    return _TO_SEQ.pack(src, sseq, len(dsts)) + b"".join(_DST.pack(d) for d in dsts) + payload


def unpack_scattering(data: bytes) -> tuple[int, int, list[int], bytes]:
    """``(sender, scattering counter, destinations, payload)``; ValueError when it is cut short."""
    if len(data) < _TO_SEQ.size:
        raise ValueError("short scattering")
    src, sseq, n = _TO_SEQ.unpack_from(data)
    at = _TO_SEQ.size
    if len(data) < at + 4 * n:
        raise ValueError("short scattering")
    return src, sseq, [_DST.unpack_from(data, at + 4 * i)[0] for i in range(n)], data[at + 4 * n:]


@dataclass(eq=False, slots=True)
class SequencerCounters:
    scatterings: int = 0  # stamped
    forwarded: int = 0  # messages stamped and sent
    dropped: int = 0  # messages of scatterings that did not fit in the queue
    stale: int = 0  # scatterings not above their sender's last (duplicated or overtaken): not stamped
    max_backlog: int = 0  # messages queued or in service, at most


class StampingSequencer:
    """One counter behind a FIFO server of ``service_ns`` a message and ``queue`` messages."""

    __slots__ = ("_last", "busy", "c", "next_global", "per_dst", "queue", "service")

    def __init__(self, nprocs: int, service_ns: float, queue: int) -> None:
        if service_ns <= 0 or queue < 1:
            raise ValueError("service_ns must be > 0 and queue >= 1")
        self.service = float(service_ns)
        self.queue = int(queue)
        self.per_dst = [0] * nprocs
        self.next_global = 0
        self.busy = 0.0  # when the server finishes what it has accepted
        self.c = SequencerCounters()
        self._last: dict[int, int] = {}  # each sender's last scattering counter taken

    @property
    def capacity_msgs_per_s(self) -> float:
        return 1e9 / self.service

    def backlog(self, now_ns: int) -> int:
        """Messages queued or in service at ``now_ns``."""
        return math.ceil(max(0.0, self.busy - now_ns) / self.service - 1e-9)

    def on_scattering(self, now_ns: int, src: int, sseq: int, dsts: Sequence[int]) -> list[tuple[int, int, Stamped]]:
        """``[(leave_ns, dst, message)]`` in the order they leave; ``[]`` if the scattering was dropped."""
        n = len(dsts)
        backlog = self.backlog(now_ns)
        if n == 0:
            return []
        if sseq <= self._last.get(src, -1):
            self.c.stale += 1
            return []
        if backlog + n > self.queue:
            self.c.dropped += n
            return []
        self.c.max_backlog = max(self.c.max_backlog, backlog + n)
        self._last[src] = sseq
        t = max(self.busy, float(now_ns))
        g = self.next_global
        self.next_global += 1
        self.c.scatterings += 1
        out = []
        for d in dsts:
            t += self.service
            pd = self.per_dst[d]
            self.per_dst[d] = pd + 1
            out.append((math.ceil(t), d, Stamped(src, sseq, g, pd)))
        self.c.forwarded += n
        self.busy = t
        return out

    def counters(self) -> dict[str, float | int]:
        return {"service_ns": self.service, "queue": self.queue, "capacity_msgs_per_s": self.capacity_msgs_per_s,
                **asdict(self.c)}


__all__ = ["SequencerCounters", "StampingSequencer", "pack_scattering", "unpack_scattering"]
