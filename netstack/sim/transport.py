"""The T/C-SACK and go-back-N engines (``netstack.tcsack``) and TCD's end hosts (``netstack.tcd``),
unchanged, as simulated host apps.

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

from typing import Any, Protocol

from headers.errors import HeaderError
from headers.registry import EtherType, UdpPort

from ..engine import SendTo, Transmit
from ..io.pfcgate import PauseGate
from ..tcd.np import TcdReceiver
from ..tcsack import ENGINES
from ..tcsack.common import ReceiverBase
from ..tcsack.params import TcsParams
from .hosts import Host
from .packets import UDP_HEADERS, ip_payload_end

#: T/C-SACK's UDP port (headers.registry, docs/wire-formats.md)
PORT = int(UdpPort.TCSACK)


class SenderEngine(Protocol):
    """What :class:`EngineSender` needs of a paced sender engine (T/C-SACK's and go-back-N's
    ``SenderBase``, TCD's ``RateSender``): the live shell's contract (``netstack.io.paced``)."""

    @property
    def done(self) -> bool: ...

    def poll(self, now_ns: int) -> list[bytes]: ...

    def receive(self, datagram: bytes, now_ns: int) -> None: ...

    def next_deadline(self) -> int | None: ...


class EngineSender:
    """A sender engine on ``host``, sending to ``dst``'s UDP ``dport`` from an ephemeral port, with
    IP TOS ``tos`` (a TCD sender's ECT(0), 0x02, so that switches can mark its packets)."""

    def __init__(self, host: Host, dst: str, engine: SenderEngine, dport: int = PORT, tos: int = 0,
                 honour_pfc: bool = False) -> None:
        self.host = host
        self.engine = engine
        #: with ``honour_pfc`` the sender is a RoCE NIC: it holds while its host is paused (PFC class 0)
        self.gate = pause_gate(host, self) if honour_pfc else None
        self.flow = host.flow(dst, tos=tos)
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
        gate = self.gate
        if gate is not None and gate.paused(now):
            self._arm(gate.until)  # held: the gate wakes us early on a resume (pause_gate)
            return
        for d in eng.poll(now):
            host.send(self.flow.udp(self.sport, self.dport, d))
        self._arm()

    def _arm(self, at: int | None = None) -> None:
        if self.engine.done:
            return
        d = self.engine.next_deadline()
        if at is not None:
            d = at if d is None else max(d, at)
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


def pause_gate(host: Host, sender: EngineSender) -> PauseGate:
    """The PFC gate of ``host``'s NIC (one per host, created with its first sender; class 0 at the
    host link's rate): MAC control frames reaching the host update it, and a resume wakes every
    sender on the host at once (netstack.io.pfcgate)."""
    entry = host.services.get("pfc-gate")
    if entry is None:
        pacer = getattr(host.nic, "nic", None)
        gate = PauseGate(int(getattr(pacer, "rate", 0)) or 1_000_000_000)  # an unpaced link: quanta at 1G
        senders: list[EngineSender] = []

        def on_pfc(frame: bytes) -> None:
            now = host.loop.now
            if gate.on_frame(frame, now) and not gate.paused(now):
                for s in senders:
                    s._timer = None
                    s._poll()

        host.bind_ether(int(EtherType.MAC_CONTROL), on_pfc)
        entry = host.services["pfc-gate"] = (gate, senders)
    entry[1].append(sender)
    return entry[0]


class _EngineTimer:
    """The receiver apps' timer: wake the engine at its next deadline (one pending wake-up, the
    earliest; a superseded one is ignored), then flush what it emitted."""

    host: Host
    engine: Any
    _timer: int | None

    def _flush(self) -> None:
        raise NotImplementedError

    def _tick(self, token: int) -> None:
        if token != self._timer:
            return
        self._timer = None
        self.engine.on_timer(self.host.loop.now)
        self._flush()

    def _arm_timer(self) -> None:
        d = self.engine.next_deadline()
        if d is not None and (self._timer is None or d < self._timer):
            d = max(d, self.host.loop.now)
            self._timer = d
            self.host.loop.call_at(d, self._tick, d)


class EngineReceiver(_EngineTimer):
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


class TcdReceiverApp(_EngineTimer):
    """TCD's receiver and NP (``netstack.tcd.np.TcdReceiver``) on ``host``'s UDP ``port``: each data
    packet goes to the engine with its source (ip bytes, port) and its IP ECN bits; the CNPs (its
    ``SendTo`` actions) go from ``port`` to the flow's source address and port, with IP TOS
    ``cnp_tos``, as the live receiver sends them."""

    def __init__(self, host: Host, receiver: TcdReceiver, port: int = int(UdpPort.TCD), cnp_tos: int = 0) -> None:
        self.host = host
        self.engine = receiver
        self.port = port
        self.cnp_tos = cnp_tos
        self.malformed = 0
        self._timer: int | None = None
        host.bind_udp(port, self.on_frame)
        host.add(self)

    def on_frame(self, frame: bytes) -> None:
        src = (frame[26:30], frame[34] << 8 | frame[35])
        try:
            self.engine.receive(frame[UDP_HEADERS:ip_payload_end(frame)], self.host.loop.now, src, frame[15] & 3)
        except HeaderError:
            self.malformed += 1
            return
        self._flush()


    def _flush(self) -> None:
        eng, host = self.engine, self.host
        if eng.actions:
            for act in eng.actions.take_all():
                if isinstance(act, SendTo):  # CNPs: the NP's only action
                    ip, sport = act.dst
                    host.send(host.flow(ip, tos=self.cnp_tos).udp(self.port, sport, act.data))
        self._arm_timer()

    def result(self) -> dict[str, Any]:
        return {"flows": {str(k): v for k, v in self.engine.flows().items()}, **self.engine.counters(),
                "malformed": self.malformed}


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


__all__ = ["PORT", "EngineReceiver", "EngineSender", "SenderEngine", "TcdReceiverApp", "transfer"]
