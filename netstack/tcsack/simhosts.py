"""T/C-SACK's and go-back-N's engines (:mod:`netstack.tcsack`), unchanged, as simulated host apps
on the skeleton of ``netstack.sim.transport``: :class:`EngineReceiver` owns a simulated host's
UDP port and hands every datagram to a receiver engine, :func:`transfer` moves bytes from one
host to another and reports what the live tool reports.

Whom they listen to is the live tool's too (docs/security.md#tc-sack): the sender takes ACKs only
from the receiver's address and port, and the receiver hands the engine each datagram's source:
the engine binds to the first data packet's, drops anyone else's, and the ACKs go to that peer
only.
"""

from __future__ import annotations

from typing import Any

from headers.errors import HeaderError
from headers.registry import UdpPort

from ..engine import Transmit
from ..sim.hosts import Host
from ..sim.packets import UDP_HEADERS, ip_payload_end
from ..sim.transport import EngineSender, EngineTimer
from . import ENGINES
from .common import ReceiverBase
from .params import TcsParams

#: T/C-SACK's UDP port (headers.registry, docs/wire-formats.md)
PORT = int(UdpPort.TCSACK)


class EngineReceiver(EngineTimer):
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
        self._arm_timer()


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


__all__ = ["PORT", "EngineReceiver", "transfer"]
