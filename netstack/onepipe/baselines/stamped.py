"""The receiving end shared by the baselines that number messages before they travel (a sequencer
on a host or in a switch, a token ring): every message carries its scattering's global number
``g`` and its destination's own number ``pd`` (0, 1, 2... per destination, in ``g`` order), so a
receiver delivers in ``pd`` order and all receivers agree with the one order of ``g``.

Sans-IO: :meth:`StampedReceiver.on_message` takes one message and returns what it may deliver now,
in order. Two policies for a gap in ``pd`` (a message not here yet):

- ``hold=False`` (best effort, as a sequencer's receivers are: the sequencer has no
  retransmission): every path is FIFO, so a gap is a lost message; it is skipped
  and counted (``lost``), and a message that turns up behind it is late and dropped;
- ``hold=True`` (a token ring: consecutive numbers come from different senders over different paths,
  so they may arrive out of order): messages after a gap wait until it fills; :meth:`close` counts
  what never came.

Either way a message is delivered at most once and never before a smaller ``pd`` that is delivered.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

#: on the wire: sender, scattering counter, global number, destination's number
_WIRE = struct.Struct("!IQQQ")


@dataclass(frozen=True, slots=True)
class Stamped:
    """One message as the ordering stage numbered it: its sender and the sender's scattering
    counter (for latency), the scattering's global number and the destination's number."""

    src: int
    sseq: int
    g: int
    pd: int

    def pack(self) -> bytes:
        return _WIRE.pack(self.src, self.sseq, self.g, self.pd)

    @classmethod
    def unpack(cls, data: bytes, at: int = 0) -> Stamped:
        return cls(*_WIRE.unpack_from(data, at))


@dataclass(eq=False, slots=True)
class ReceiverCounters:
    delivered: int = 0
    lost: int = 0  # skipped gaps (hold=False), or what close() found missing (hold=True)
    duplicates: int = 0  # a pd already delivered or held (or, hold=False, late behind a skipped gap)
    violations: int = 0  # delivered with a g not above the last one's: the check that it cannot happen


class StampedReceiver:
    """Delivers :class:`Stamped` messages in ``pd`` order (see the module docstring)."""

    __slots__ = ("_held", "_last_g", "c", "expect", "hold")

    def __init__(self, hold: bool) -> None:
        self.hold = hold
        self.expect = 0  # the next pd to deliver
        self._held: dict[int, Stamped] = {}
        self._last_g = -1
        self.c = ReceiverCounters()

    def on_message(self, m: Stamped) -> list[Stamped]:
        """Take ``m``; the messages deliverable now, in order."""
        if m.pd < self.expect or m.pd in self._held:
            self.c.duplicates += 1
            return []
        if m.pd > self.expect:
            if self.hold:
                self._held[m.pd] = m
                return []
            self.c.lost += m.pd - self.expect  # FIFO paths: what is missing below m never comes
            self.expect = m.pd
        out = [m]
        self.expect += 1
        held = self._held
        while held:
            nxt = held.pop(self.expect, None)
            if nxt is None:
                break
            out.append(nxt)
            self.expect += 1
        for d in out:
            if d.g <= self._last_g:
                self.c.violations += 1
            self._last_g = d.g
        self.c.delivered += len(out)
        return out

    def close(self) -> int:
        """The run is over: messages held behind a gap, and the gaps below them, are lost (counted
        and returned)."""
        if not self._held:
            return 0
        top = max(self._held)
        missing = top + 1 - self.expect
        self.c.lost += missing
        self.expect = top + 1
        self._held.clear()
        return missing

    @property
    def held(self) -> int:
        return len(self._held)


WIRE_SIZE = _WIRE.size

__all__ = ["WIRE_SIZE", "ReceiverCounters", "Stamped", "StampedReceiver"]
