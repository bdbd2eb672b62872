"""What the T/C-SACK engines and the go-back-N baseline share: the receiver's ACK clock
("An Updated ACK mechanism based on RDMA", §2: an ACK when T has passed or N packets have
arrived), a paced sender that numbers and stamps packets, and wrap-aware unwrapping of 32-bit
sequence numbers.

All sans-IO, under the contract of :mod:`netstack.engine`: ``now_ns`` comes in; a sender's
datagrams (UDP payloads) come out as the return value of ``poll``, a receiver's in-order
payloads as the return value of ``receive``, and a receiver's ACKs as
:class:`~netstack.engine.Transmit` actions in its ``actions`` queue.

Counters are dataclasses (:class:`ReceiverCounters`, :class:`SenderCounters` and one subclass
per engine) held in the engine's ``c``: the data path bumps ``self.c.<name>``, ``counters()``
exports them as JSON, and :class:`CounterAttr` lets callers read one as ``engine.<name>``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Never, Protocol, Self, overload

from headers.errors import HeaderError
from headers.tcsack import SEQ_MASK, TcsAck, TcsAckFlag, TcsData, TcsDataFlag, seq_diff

from ..engine import ActionQueue, Transmit
from .params import TcsParams

if TYPE_CHECKING:
    from ..engine import Engine

#: what ``counters()`` exports: counts, ``cum``-like positions, flags, RTTs (None: no sample yet)
CounterValue = int | float | None

_U32 = 0xFFFFFFFF


def unwrap(wire: int, ref: int) -> int:
    """The absolute number nearest ``ref`` whose low 32 bits are ``wire`` (RFC 1982 window)."""
    return ref + seq_diff(wire, ref & SEQ_MASK)


def us32(now_ns: int) -> int:
    """A clock reading as carried in ``tsval``/``tsecr``: microseconds mod 2^32."""
    return (now_ns // 1000) & _U32


def us_before(a: int, b: int) -> bool:
    """Serial ``a < b`` on 32-bit microsecond stamps."""
    return a != b and ((a - b) & _U32) >= 1 << 31


class _Counted(Protocol):
    """An engine: something whose counters are in ``c``."""

    @property
    def c(self) -> object: ...


class CounterAttr:
    """One counter of ``engine.c``, readable as ``engine.<name>`` (``rcv.duplicates``), as it was
    before counters became dataclasses. Read-only, so a stray ``engine.<name> += 1`` fails (at
    type-check time and at run time) instead of shadowing the counter that ``counters()``
    exports; the data path bumps ``self.c.<name>``."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name = ""

    def __set_name__(self, owner: type[object], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type[object]) -> Self: ...
    @overload
    def __get__(self, obj: _Counted, owner: type[object]) -> int: ...

    def __get__(self, obj: _Counted | None, owner: type[object]) -> Self | int:
        if obj is None:
            return self
        value: int = getattr(obj.c, self.name)
        return value

    def __set__(self, obj: _Counted, value: Never) -> None:
        raise AttributeError(f"counter {self.name!r} is read-only here: bump engine.c.{self.name}")


@dataclass(slots=True)
class ReceiverCounters:
    """What every receiver counts, in export order (``counters()`` adds ``cum`` and ``complete``)."""

    data_rx: int = 0  # data packets of this flow, copies and probes included
    retx_rx: int = 0  # ... flagged RETX
    probes_rx: int = 0  # ... flagged PROBE
    delivered: int = 0  # payloads handed on in order
    bytes_delivered: int = 0
    duplicates: int = 0  # below the cumulative point, or already buffered
    foreign: int = 0  # another flow's packets, ignored
    acks_sent: int = 0  # every ACK, NAKs included
    acks_count_triggered: int = 0  # N packets arrived
    acks_time_triggered: int = 0  # T passed


@dataclass(slots=True)
class SenderCounters:
    """What every sender counts, in export order (``counters()`` adds progress and RTT)."""

    sent: int = 0  # datagrams, copies included
    sent_new: int = 0  # first copies
    retx_sent: int = 0
    probes_sent: int = 0
    bytes_sent: int = 0  # datagram bytes (T/C-SACK header + payload)
    acks_rx: int = 0  # ACKs used
    stale_acks: int = 0  # overtaken by a newer ACK: ignored
    bogus_acks: int = 0  # acknowledging what was never sent: ignored
    foreign: int = 0  # another flow's ACKs, ignored


class ReceiverBase:
    """The ACK clock and the ACK itself; subclasses decide what a data packet does.

    ACKs leave as :class:`~netstack.engine.Transmit` actions in ``actions`` (the shell sends
    each to the sender, in order), so a receiver keeps the :class:`~netstack.engine.Engine`
    contract. A subclass with counters of its own passes them in ``counters`` and narrows ``c``.
    """

    c: ReceiverCounters
    data_rx = CounterAttr()
    retx_rx = CounterAttr()
    probes_rx = CounterAttr()
    delivered = CounterAttr()
    bytes_delivered = CounterAttr()
    duplicates = CounterAttr()
    foreign = CounterAttr()
    acks_sent = CounterAttr()
    acks_count_triggered = CounterAttr()
    acks_time_triggered = CounterAttr()

    def __init__(self, params: TcsParams, flow_id: int = 0, start_seq: int = 0, *,
                 counters: ReceiverCounters | None = None) -> None:
        if not 0 <= start_seq <= SEQ_MASK:
            raise ValueError(f"start_seq must be a 32-bit value, got {start_seq}")
        self.params = params
        self.flow_id = flow_id
        #: the cumulative point, absolute: every packet before it has been delivered
        self.cum = start_seq
        self.ack_seq = 0
        self.last_seq: int | None = None  # absolute number of the packet flagged LAST
        #: the ACKs to send (Transmit), taken by the shell after each call
        self.actions = ActionQueue()
        self.c = ReceiverCounters() if counters is None else counters
        self._since_ack = 0
        self._first_unacked_ns: int | None = None
        self._tsecr = 0
        self._tsecr_arrival_ns = 0

    # ------------------------------------------------------------------ data path
    def receive(self, datagram: bytes, now_ns: int) -> list[bytes]:
        """A UDP payload from the sender: the payloads now delivered in order (HeaderError if
        it is not a T/C-SACK data packet; another flow's packet is counted and ignored)."""
        hdr = TcsData.from_bytes(datagram)
        if hdr.flow_id != self.flow_id:
            self.c.foreign += 1
            return []
        return self.on_data(hdr, bytes(datagram[TcsData.SIZE:]), now_ns)

    def on_data(self, hdr: TcsData, payload: bytes, now_ns: int) -> list[bytes]:
        c = self.c
        c.data_rx += 1
        if hdr.flags & TcsDataFlag.RETX:
            c.retx_rx += 1
        if hdr.flags & TcsDataFlag.PROBE:
            c.probes_rx += 1
        s = unwrap(hdr.seq, self.cum)
        if hdr.flags & TcsDataFlag.LAST:
            self.last_seq = s
        self._tsecr = hdr.tsval
        self._tsecr_arrival_ns = now_ns
        out = self._accept(s, payload, now_ns)
        if out:
            c.delivered += len(out)
            c.bytes_delivered += sum(map(len, out))
        # §2: "when the preset time T or the accumulated number of received packets N is
        # reached, the receiver triggers the acknowledgement"
        self._since_ack += 1
        if self._first_unacked_ns is None:
            self._first_unacked_ns = now_ns
        if self._since_ack >= self.params.n:
            self._send_ack(now_ns, count=True)
        return out

    def _accept(self, s: int, payload: bytes, now_ns: int) -> list[bytes]:
        raise NotImplementedError

    # --------------------------------------------------------------------- timers
    def next_deadline(self) -> int | None:
        """T after the first packet since the last ACK (None while nothing arrived since)."""
        t = self._first_unacked_ns
        return None if t is None else t + self.params.t_ns

    def on_timer(self, now_ns: int) -> None:
        t = self.next_deadline()
        if t is not None and now_ns >= t:
            self._send_ack(now_ns, count=False)

    # ----------------------------------------------------------------------- ACKs
    @property
    def complete(self) -> bool:
        """The packet flagged LAST and everything before it have been delivered."""
        return self.last_seq is not None and self.cum > self.last_seq

    def _blocks(self) -> Sequence[tuple[int, int]]:
        return ()

    def _flags(self) -> int:
        return TcsAckFlag.FIN_SEEN if self.last_seq is not None else 0

    def _send_ack(self, now_ns: int, count: bool, extra_flags: int = 0) -> None:
        flags = self._flags() | extra_flags | (TcsAckFlag.TRIGGER_COUNT if count else 0)
        delay = (now_ns - self._tsecr_arrival_ns) // 1000
        ack = TcsAck(self.flow_id, self.ack_seq, self.cum & SEQ_MASK, self._tsecr,
                     tuple((s & SEQ_MASK, e & SEQ_MASK) for s, e in self._blocks()), flags,
                     min(0xFFFF, max(0, delay)))
        self.actions.emit(Transmit(ack.to_bytes()))
        self.ack_seq = (self.ack_seq + 1) & SEQ_MASK
        c = self.c
        c.acks_sent += 1
        if count:
            c.acks_count_triggered += 1
        elif not extra_flags:
            c.acks_time_triggered += 1  # (a go-back-N NAK is neither)
        self._since_ack = 0
        self._first_unacked_ns = None

    def counters(self) -> dict[str, CounterValue]:
        out: dict[str, CounterValue] = asdict(self.c)
        out.update(cum=self.cum, complete=self.complete)
        return out


class SenderBase:
    """A window-less sender paced at the preset rate ("An Updated ACK mechanism based on RDMA",
    §2: "the sender only needs to keep sending packets at the preset sending rate"). Subclasses
    choose the next packet.

    What it sends is the return value of ``poll``; its ``actions`` queue (the
    :class:`~netstack.engine.Engine` contract) stays empty: a sender has nothing else to ask
    of its shell. A subclass with counters of its own passes them in ``counters`` and
    narrows ``c``.
    """

    c: SenderCounters
    sent = CounterAttr()
    sent_new = CounterAttr()
    retx_sent = CounterAttr()
    probes_sent = CounterAttr()
    bytes_sent = CounterAttr()
    acks_rx = CounterAttr()
    stale_acks = CounterAttr()
    bogus_acks = CounterAttr()
    foreign = CounterAttr()
    #: after a stall (a late daemon timer) the pacer may catch up by this many packets at once
    BURST = 4

    def __init__(self, params: TcsParams, data: bytes, flow_id: int = 0, start_seq: int = 0,
                 now_ns: int = 0, *, counters: SenderCounters | None = None) -> None:
        if not 0 <= start_seq <= SEQ_MASK:
            raise ValueError(f"start_seq must be a 32-bit value, got {start_seq}")
        self.params = params
        self.flow_id = flow_id
        self.data = data
        self.packets = max(1, math.ceil(len(data) / params.payload))
        self.base = start_seq
        self.end = start_seq + self.packets  # absolute, one past the LAST packet
        #: the cumulative point the ACKs have reached (absolute)
        self.cum = start_seq
        self._newest_ack: int | None = None
        self._next_slot = now_ns
        self._last_stamp = now_ns - 1000
        self.started_ns = now_ns
        self.done_ns: int | None = None
        self.rtt_min_us: int | None = None
        self.rtt_latest_us: int | None = None
        self.srtt_us: float | None = None
        self.actions = ActionQueue()
        self.c = SenderCounters() if counters is None else counters

    @property
    def done(self) -> bool:
        return self.cum >= self.end

    def payload(self, s: int) -> bytes:
        i = s - self.base
        p = self.params.payload
        return self.data[i * p:(i + 1) * p]

    def _datagram(self, s: int, flags: int, now_ns: int) -> bytes:
        if s == self.end - 1:
            flags |= TcsDataFlag.LAST
        body = self.payload(s)
        c = self.c
        c.sent += 1
        c.bytes_sent += len(body) + TcsData.SIZE
        return TcsData(self.flow_id, s & SEQ_MASK, us32(now_ns), flags).to_bytes() + body

    def _slot_ns(self, s: int) -> int:
        return self.params.packet_ns(TcsData.SIZE + len(self.payload(s)))

    # ------------------------------------------------------------------ pacing
    def poll(self, now_ns: int) -> list[bytes]:
        """The datagrams due by ``now_ns`` at the preset rate (send them now, in order)."""
        self._on_time(now_ns)
        out: list[bytes] = []
        if self.done:
            return out
        floor = now_ns - self.BURST * self.params.packet_ns(TcsData.SIZE + self.params.payload)
        if self._next_slot < floor:
            self._next_slot = floor  # idle or late: no credit beyond a small burst
        while self._next_slot <= now_ns:
            # each copy is stamped with its slot (its place in the paced schedule), at least
            # 1 us after the previous copy: copies sent in one batch must still be ordered by
            # tsval, which the loss rule of a T/C-SACK sender compares (1 us: the stamp's unit)
            stamp = max(self._next_slot, self._last_stamp + 1000)
            picked = self._next_packet(stamp)
            if picked is None:
                self._next_slot = max(self._next_slot, now_ns)
                break
            self._last_stamp = stamp
            s, flags = picked
            out.append(self._datagram(s, flags, stamp))
            self._next_slot += self._slot_ns(s)
        return out

    def next_deadline(self) -> int | None:
        if self.done:
            return None
        t = self._timer_deadline()
        if self._has_packet():
            t = self._next_slot if t is None else min(t, self._next_slot)
        return t

    def _on_time(self, now_ns: int) -> None:
        """Timers (probe / retransmission timeout) due by ``now_ns``."""

    def _timer_deadline(self) -> int | None:
        return None

    def _has_packet(self) -> bool:
        raise NotImplementedError

    def _next_packet(self, stamp_ns: int) -> tuple[int, int] | None:
        """The packet for the slot stamped ``stamp_ns``: (absolute seq, flags), or None."""
        raise NotImplementedError

    # -------------------------------------------------------------------- ACKs
    def receive(self, datagram: bytes, now_ns: int) -> None:
        """A UDP payload from the receiver (HeaderError if it is not a T/C-SACK ACK)."""
        self.on_ack(TcsAck.from_bytes(datagram), now_ns)

    def on_ack(self, ack: TcsAck, now_ns: int) -> None:
        c = self.c
        if ack.flow_id != self.flow_id:
            c.foreign += 1
            return
        if self._newest_ack is not None and seq_diff(ack.ack_seq, self._newest_ack) <= 0:
            c.stale_acks += 1  # overtaken by a newer ACK: its view of the buffer is older
            return
        cum = unwrap(ack.cum_ack, self.cum)
        if cum > self._sent_limit() or cum < self.base:
            c.bogus_acks += 1  # acknowledges what was never sent: not our receiver
            return
        self._newest_ack = ack.ack_seq
        c.acks_rx += 1
        rtt = ((now_ns // 1000) - ack.tsecr - ack.ack_delay) & 0xFFFFFFFF
        if rtt < 1 << 31:
            # the receiver held the ACK ack_delay on purpose; tsval is the send time of the copy
            # that arrived, so retransmissions give unambiguous samples (no Karn rule)
            self.rtt_latest_us = rtt
            self.rtt_min_us = rtt if self.rtt_min_us is None else min(self.rtt_min_us, rtt)
            self.srtt_us = rtt if self.srtt_us is None else 0.875 * self.srtt_us + 0.125 * rtt
        self._on_ack(ack, cum, now_ns)
        if self.done and self.done_ns is None:
            self.done_ns = now_ns

    def _sent_limit(self) -> int:
        """One past the highest packet sent so far (absolute)."""
        raise NotImplementedError

    def _on_ack(self, ack: TcsAck, cum: int, now_ns: int) -> None:
        raise NotImplementedError

    def counters(self) -> dict[str, CounterValue]:
        out: dict[str, CounterValue] = asdict(self.c)
        out.update(packets=self.packets, cum_acked=self.cum - self.base, done=self.done,
                   rtt_min_us=self.rtt_min_us, srtt_us=None if self.srtt_us is None else round(self.srtt_us, 1))
        return out


if TYPE_CHECKING:
    # mypy checks here that both bases, and so every engine, keep netstack.engine's contract
    _receiver_is_an_engine: type[Engine] = ReceiverBase
    _sender_is_an_engine: type[Engine] = SenderBase


__all__ = ["CounterAttr", "CounterValue", "HeaderError", "ReceiverBase", "ReceiverCounters", "SenderBase",
           "SenderCounters", "unwrap", "us32", "us_before"]
