"""The T/C-SACK receiver ("An Updated ACK mechanism based on RDMA", §2), sans-IO.

"The receiver continues to receive packet packets and arranges them according to packet
sequence number in the receive buffer. When the preset time T or the accumulated number of
received packets N is reached, the receiver triggers the acknowledgement mechanism and sends
the received packet sequence number to the sender through an ACK packet."

- Packets at the cumulative point are delivered at once, with every buffered packet that
  follows them; packets above it wait in the receive buffer (an ordered set of runs) and are
  reported as SACK blocks, the lowest ``max_blocks`` runs per ACK (the format's cap).
- The ACK clock (:class:`~.common.ReceiverBase`): an ACK once N packets have arrived since
  the last one (``TRIGGER_COUNT``), or T after the first of them; each leaves as a
  :class:`~netstack.engine.Transmit` action. Nothing arrived, no ACK: a
  lost ACK is repaired by the sender's 2T probe, which arrives and restarts the clock.
- ``buffer_packets`` bounds memory: a packet that far above the cumulative point is dropped
  (counted) and, not being reported, is resent later. The sender never learns the bound: it
  is not a window (§2 removes the window).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .common import ReceiverBase, ReceiverCounters
from .params import TcsParams
from .rangeset import RangeSet


@dataclass(slots=True)
class TcsReceiverCounters(ReceiverCounters):
    buffered_max: int = 0  # most packets ever held above the cumulative point
    buffer_drops: int = 0  # beyond buffer_packets: dropped, resent later


class TcsReceiver(ReceiverBase):
    c: TcsReceiverCounters

    def __init__(self, params: TcsParams, flow_id: int = 0, start_seq: int = 0) -> None:
        super().__init__(params, flow_id, start_seq, counters=TcsReceiverCounters())
        self._buf: dict[int, bytes] = {}
        self._runs = RangeSet()

    def _accept(self, s: int, payload: bytes, now_ns: int) -> list[bytes]:
        cum = self.cum
        if s < cum or s in self._buf:
            self.c.duplicates += 1
            return []
        if s == cum:
            out = [payload]
            cum += 1
            buf = self._buf
            if buf:
                first = self._runs.first()
                if first is not None and first[0] == cum:
                    # the run that now continues the cumulative point leaves the buffer
                    for c in range(first[0], first[1]):
                        out.append(buf.pop(c))
                    cum = first[1]
                    self._runs.drop_below(cum)
            self.cum = cum
            return out
        counts = self.c
        if s - cum > self.params.buffer_packets:
            counts.buffer_drops += 1
            return []
        self._buf[s] = payload
        self._runs.add(s)
        if len(self._buf) > counts.buffered_max:
            counts.buffered_max = len(self._buf)
        return []

    def _holds_above(self, s: int) -> bool:
        end = self._runs.last_end()
        return end is not None and end > s + 1

    def _blocks(self) -> Sequence[tuple[int, int]]:
        return self._runs.runs(self.params.max_blocks)

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def missing(self) -> list[tuple[int, int]]:
        """Absolute runs ``[start, end)`` still awaited below the highest buffered packet."""
        out: list[tuple[int, int]] = []
        nxt = self.cum
        for s, e in self._runs:
            out.append((nxt, s))
            nxt = e
        return out
