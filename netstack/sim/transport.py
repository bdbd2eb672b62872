"""Paced sender engines and timer-driven receiver engines, unchanged, as simulated host apps: the
skeleton every protocol's simulated transport hosts share (T/C-SACK's and go-back-N's in
``netstack.tcsack.simhosts``, TCD's in ``netstack.tcd.simhosts``).

The engines are sans-IO: a live shell (``netstack.io.paced``) owns a UDP socket and the clock;
here :class:`EngineSender` owns a simulated host's UDP port and the virtual clock and does the
same thing: send what ``poll`` returns, feed every datagram from its peer to the engine, wake
at its next deadline, and, as a RoCE NIC, hold while its host is paused (:func:`pause_gate`).
:class:`EngineTimer` is the receiver apps' half: wake the engine at its deadline, then flush
what it emitted.

Whom a sender listens to is the live tool's rule too (docs/security.md#tc-sack): it takes
datagrams only from the receiver's address and port (the live sender's socket is connected:
the kernel drops the rest).
"""

from __future__ import annotations

from typing import Any, Protocol

from headers.errors import HeaderError
from headers.registry import EtherType

from ..io.pfcgate import PauseGate
from .hosts import Host
from .packets import UDP_HEADERS, ip_payload_end


class SenderEngine(Protocol):
    """What :class:`EngineSender` needs of a paced sender engine (T/C-SACK's and go-back-N's
    ``SenderBase``, TCD's ``RateSender``): the live shell's contract (``netstack.io.paced``)."""

    @property
    def done(self) -> bool: ...

    def poll(self, now_ns: int) -> list[bytes]: ...

    def receive(self, datagram: bytes, now_ns: int) -> None: ...

    def next_deadline(self) -> int | None: ...


class EngineSender:
    """A sender engine on ``host``, sending to ``dst``'s UDP ``dport`` (the protocol's port) from an
    ephemeral port, with IP TOS ``tos`` (a TCD sender's ECT(0), 0x02, so that switches can mark its
    packets)."""

    def __init__(self, host: Host, dst: str, engine: SenderEngine, dport: int, tos: int = 0,
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


class EngineTimer:
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


__all__ = ["EngineSender", "EngineTimer", "SenderEngine", "pause_gate"]
