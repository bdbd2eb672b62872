"""Two small cases the T/C-SACK draft ("An Updated ACK mechanism based on RDMA",
draft-chen-tsvwg-updated-ack-00) states in words, run on the real engines in this process.

- :func:`sack_example`, §1: "if 2, 3, and 4 packets are lost in a row ... with the SACK option, the
  sender knows which packets are lost and can complete the process through one retransmission".
  The first copies of the draft's packets 2, 3 and 4 (ours 1, 2 and 3, counted from 0) are lost;
  how many ACKs made the sender resend them, and how many copies did it resend?
- :func:`probe_delay`, §2 item 6: "If the sender does not receive an ACK packet within 2T, it
  considers that the ACK packet is lost and resends the last packet". Every ACK after the sender's
  last new packet is lost; how long after the last ACK it got does the probe leave, in T?

The engines are joined by two one-way paths of a fixed delay in virtual time (a heap of events, no
network, no clock): a case takes a few milliseconds. ``netstack reproduce tcsack`` reports both
(netstack/tcsack/reproduce.py).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from headers.tcsack import TcsData, TcsDataFlag

from ..engine import Transmit
from .params import TcsParams
from .receiver import TcsReceiver
from .sender import TcsSender

#: a data copy's fate: (absolute seq, how many copies of it were sent before) -> lost?
DataLoss = Callable[[int, int], bool]
#: an ACK's fate: (the sender, now) -> lost?
AckLoss = Callable[[TcsSender, int], bool]


@dataclass
class Trace:
    """What a case's run did: every copy sent (time, seq, flags), every ACK the sender took (time,
    and its ``losses_detected`` just after), and whether the transfer completed."""

    sent: list[tuple[int, int, int]] = field(default_factory=list)
    acks: list[tuple[int, int]] = field(default_factory=list)
    complete: bool = False
    sender: dict[str, Any] = field(default_factory=dict)


def run_path(params: TcsParams, packets: int, one_way_ns: int, lose_data: DataLoss, lose_ack: AckLoss,
             max_ns: int = 10_000_000_000) -> Trace:
    """A ``packets``-packet transfer from a :class:`TcsSender` to a :class:`TcsReceiver` over a path
    of ``one_way_ns`` each way, each datagram's fate decided by ``lose_data`` / ``lose_ack``."""
    snd = TcsSender(params, bytes(packets * params.payload))
    rcv = TcsReceiver(params)
    trace = Trace()
    heap: list[tuple[int, int, str, bytes]] = []
    order = itertools.count()
    copies: dict[int, int] = {}

    def at(t: int, what: str, data: bytes = b"") -> None:
        heapq.heappush(heap, (t, next(order), what, data))

    # one pending wake-up per engine: an event for another time than the engine's latest deadline is stale
    wake = {"poll": 0, "rtimer": -1}
    at(0, "poll")
    while heap and not snd.done:
        now, _, what, data = heapq.heappop(heap)
        if now > max_ns:
            break
        if what in wake and now != wake[what]:
            continue
        if what == "poll":
            for d in snd.poll(now):
                hdr = TcsData.from_bytes(d)
                trace.sent.append((now, hdr.seq, int(hdr.flags)))
                n = copies.get(hdr.seq, 0)
                copies[hdr.seq] = n + 1
                if not lose_data(hdr.seq, n):
                    at(now + one_way_ns, "data", d)
        elif what == "data":
            rcv.receive(data, now)
        elif what == "rtimer":
            rcv.on_timer(now)
        elif what == "ack":
            snd.receive(data, now)
            trace.acks.append((now, snd.c.losses_detected))
        for a in rcv.actions.take(Transmit):
            if not lose_ack(snd, now):
                at(now + one_way_ns, "ack", a.data)
        for name, engine in (("rtimer", rcv), ("poll", snd)):
            t = engine.next_deadline()
            if t is not None and (wake[name] <= now or t < wake[name]):
                wake[name] = max(t, now + 1 if what == name else now)
                at(wake[name], name)
    trace.complete = snd.done and rcv.complete
    trace.sender = dict(snd.counters())
    return trace


def sack_example(params: TcsParams, one_way_ns: int, packets: int = 64) -> dict[str, Any]:
    """§1's example on the engines: the first copies of packets 1, 2 and 3 lost (the draft's 2, 3
    and 4), nothing else. ``loss_acks``: the ACKs after which the sender queued retransmissions
    (the draft's SACK recovers the three "through one retransmission"); ``resent``: copies of the
    three sent again (each once: 3)."""
    lost = {1, 2, 3}
    trace = run_path(params, packets, one_way_ns, lambda s, n: s in lost and n == 0, lambda _s, _t: False)
    revealing, before = 0, 0
    for _, detected in trace.acks:
        revealing += detected > before
        before = detected
    resent = sum(1 for _, s, f in trace.sent if s in lost and f & TcsDataFlag.RETX)
    return {"loss_acks": revealing, "resent": resent, "losses_detected": before, "complete": trace.complete,
            "packets": packets, "one_way_ns": one_way_ns}


def probe_delay(params: TcsParams, one_way_ns: int, packets: int = 256) -> dict[str, Any]:
    """§2 item 6 on the engines: every ACK the receiver sends once the sender's last new packet has
    left is lost. ``delay_t``: from the last ACK the sender took to its first probe, in T (None: no
    probe); ``probe_is_last``: the probe carried the last packet, as the draft says."""
    last = packets - 1

    def lose_ack(snd: TcsSender, _now: int) -> bool:
        return snd.c.sent_new >= packets

    trace = run_path(params, packets, one_way_ns, lambda _s, _n: False, lose_ack, max_ns=2_000_000_000)
    probes = [(t, s) for t, s, f in trace.sent if f & TcsDataFlag.PROBE]
    last_ack = trace.acks[-1][0] if trace.acks else None
    if not probes or last_ack is None:
        return {"delay_t": None, "probe_is_last": None, "probes": len(probes), "one_way_ns": one_way_ns}
    t, s = probes[0]
    return {"delay_t": (t - last_ack) / params.t_ns, "probe_is_last": s == last, "probes": len(probes),
            "one_way_ns": one_way_ns, "last_ack_ns": last_ack, "probe_ns": t,
            "last_new_ns": max(t0 for t0, s0, f in trace.sent if not f & (TcsDataFlag.RETX | TcsDataFlag.PROBE))}
