"""The T/C-SACK and go-back-N engines (``netstack.tcsack``), unchanged, as simulated host apps.

The engines are sans-IO: the live shell (``netstack.tcsack.live``) owns a UDP socket and the
clock; here :class:`EngineSender` and :class:`EngineReceiver` own a simulated host's UDP port
and the virtual clock, and do the same thing: send what ``poll`` returns and the receiver's
``Transmit`` actions (its ACKs), feed every datagram to the engine, wake at its next deadline.
:func:`transfer` moves bytes from one host to another and reports what the live tool and the
old virtual-time path reported.

Whom they listen to is the live tool's too (docs/security.md#tc-sack): the sender takes ACKs only
from the receiver's address and port (the live sender's socket is connected: the kernel drops
the rest), and the receiver hands the engine each datagram's source: the engine binds to the
first data packet's, drops anyone else's, and the ACKs go to that peer only.
"""

from __future__ import annotations

from typing import Any

from headers.errors import HeaderError
from headers.registry import UdpPort

from ..engine import Transmit
from ..tcsack import ENGINES
from ..tcsack.common import ReceiverBase, SenderBase
from ..tcsack.params import TcsParams
from .hosts import Host
from .packets import UDP_HEADERS, ip_payload_end

#: T/C-SACK's UDP port (headers.registry, docs/wire-formats.md)
PORT = int(UdpPort.TCSACK)


class EngineSender:
    """A sender engine on ``host``, sending to ``dst``'s UDP ``dport`` from an ephemeral port."""

    def __init__(self, host: Host, dst: str, engine: SenderBase, dport: int = PORT) -> None:
        self.host = host
        self.engine = engine
        self.flow = host.flow(dst)
        self.sport = host.ephemeral_port()
        self.dport = dport
        self.malformed = 0
        self.foreign_src = 0  # datagrams from anyone but the receiver's address and port: dropped
        self._peer_ip = self.flow.dst_ip
        self._timer: int | None = None
        host.bind_udp(self.sport, self.on_frame)
        host.add(self)
        host.loop.call_at(host.loop.now, self._poll)

    def _poll(self, token: int | None = None) -> None:
        if token is not None:
            if token != self._timer:
                return  # a later wake-up replaced this one
            self._timer = None
        eng, host = self.engine, self.host
        now = host.loop.now
        for d in eng.poll(now):
            host.send(self.flow.udp(self.sport, self.dport, d))
        self._arm()

    def _arm(self) -> None:
        if self.engine.done:
            return
        d = self.engine.next_deadline()
        if d is None:
            return
        now = self.host.loop.now
        if d <= now:
            d = now + 1  # the engine had nothing due at now: look again just after
        if self._timer is None or d < self._timer:
            self._timer = d
            self.host.loop.call_at(d, self._poll, d)

    def on_frame(self, frame: bytes) -> None:
        if frame[26:30] != self._peer_ip or (frame[34] << 8 | frame[35]) != self.dport:
            self.foreign_src += 1  # what a connected socket's kernel would drop
            return
        try:
            self.engine.receive(frame[UDP_HEADERS:ip_payload_end(frame)], self.host.loop.now)
        except HeaderError:
            self.malformed += 1
            return
        self._poll()  # an ACK may have made retransmissions due


class EngineReceiver:
    """A receiver engine on ``host``'s UDP ``port``; ACKs go back to the engine's peer, the source
    of the first data packet of its flow (``ReceiverBase.peer``)."""

    def __init__(self, host: Host, engine: ReceiverBase, port: int = PORT) -> None:
        self.host = host
        self.engine = engine
        self.port = port
        self.delivered: list[bytes] = []
        self.malformed = 0
        self._timer: int | None = None
        host.bind_udp(port, self.on_frame)
        host.add(self)

    def on_frame(self, frame: bytes) -> None:
        now = self.host.loop.now
        src = (frame[26:30], frame[34] << 8 | frame[35])
        try:
            out = self.engine.receive(frame[UDP_HEADERS:ip_payload_end(frame)], now, src)
        except HeaderError:
            self.malformed += 1
            return
        self.delivered.extend(out)
        self._flush()

    def _tick(self, token: int) -> None:
        if token != self._timer:
            return
        self._timer = None
        self.engine.on_timer(self.host.loop.now)
        self._flush()

    def _flush(self) -> None:
        eng = self.engine
        # checked first: most data packets produce no ACK, and take_all() would allocate a list
        if eng.actions:
            acts = eng.actions.take_all()
            peer = eng.peer
            if isinstance(peer, tuple):  # bound (always, once there is an ACK): (ip bytes, port)
                ip, sport = peer
                flow = self.host.flow(ip)
                for act in acts:
                    if isinstance(act, Transmit):  # ACKs: the receivers' only action
                        self.host.send(flow.udp(self.port, sport, act.data))
        d = eng.next_deadline()
        if d is not None and (self._timer is None or d < self._timer):
            d = max(d, self.host.loop.now)
            self._timer = d
            self.host.loop.call_at(d, self._tick, d)


def transfer(net: Any, kind: str, params: TcsParams, data: bytes, *, src: str = "h1", dst: str = "h2",
             start_seq: int = 0, max_ns: int = 60_000_000_000, port: int = PORT) -> dict[str, Any]:
    """Move ``data`` from ``src`` to ``dst`` with ``kind`` (``tcsack`` or ``gbn``) over ``net``.

    ``delivered_ok``: the receiver handed on exactly ``data``, in order, once. ``done_ns``: when the
    sender saw everything acknowledged, from the start of the transfer (None if ``max_ns`` passed).
    """
    try:
        s_cls, r_cls = ENGINES[kind]
    except KeyError:
        raise ValueError(f"unknown protocol {kind!r} (one of: {', '.join(ENGINES)})") from None
    t0 = net.now
    snd = s_cls(params, data, start_seq=start_seq, now_ns=t0)
    rcv = r_cls(params, start_seq=start_seq)
    receiver = EngineReceiver(net.host(dst), rcv, port)
    sender = EngineSender(net.host(src), dst, snd, port)
    loop = net.loop
    while not snd.done and loop.next_time() is not None and loop.now <= t0 + max_ns:
        loop.run(t0 + max_ns, max_events=10_000)
    got = b"".join(receiver.delivered)
    done = None if snd.done_ns is None else snd.done_ns - t0
    return {
        "kind": kind,
        "done_ns": done,
        "delivered_ok": got == data and len(receiver.delivered) == snd.packets,
        "delivered_packets": len(receiver.delivered),
        "receiver_complete": rcv.complete,
        "sender": snd.counters(),
        "receiver": rcv.counters(),
        "malformed": sender.malformed + receiver.malformed,
        "sender_checks": {**snd.check_counters(), "foreign_src": sender.foreign_src},
        "receiver_checks": rcv.check_counters(),
        "goodput_bps": (len(data) * 8e9 / done) if done else None,
    }


__all__ = ["PORT", "EngineReceiver", "EngineSender", "transfer"]
