"""The asyncio API of a 1Pipe process: a thin shell around the sans-IO :class:`Endpoint`.

1Pipe §3 gives the application a scattering send, an ordered receive and a send-fail callback
(``onepipe_unreliable_send``, ``onepipe_unreliable_recv``, ``onepipe_send_fail_callback``).
Here they are ``await ep.send([(dst, bytes), ...])``, ``async for ts, src, msg in ep`` and the
``on_send_fail`` callback, which fires only for a message known not delivered (a NAK, the
receiver gave it up, its destination known failed). A message whose fate the sender could not
learn (best effort's ACK timeout: no ACK, no NAK) goes to ``on_send_unknown`` instead: it may
have been delivered (its ACK late or lost), so an application must not simply send it again
(issue 31)::

    import asyncio
    from netstack.onepipe.api import OnePipeEndpoint

    async def main() -> None:
        async with OnePipeEndpoint(("10.0.0.1", 40101)) as ep:
            await ep.send([(("10.0.0.3", 40101), b"hello"), (("10.0.0.4", 40101), b"hi")])
            async for ts, src, msg in ep:
                print(ts, src, msg)

    asyncio.run(main())

The shell owns the socket and the clock. It hands the engine every datagram with its source
and the IP ECN mark (for DCTCP, 1Pipe §4.3), sends what the engine asks for, and wakes at the
engine's deadline. Time is the host's: ``CLOCK_MONOTONIC`` seen through the host's
:class:`HostClock`. Beacons go to the subnet broadcast address, where the ToR consumes them.

``reliable=True`` runs reliable 1Pipe (design topics §7-§8 in docs/papers.md;
docs/onepipe-reliable.md) instead: the engine is a
:class:`~netstack.onepipe.reliable.ReliableEndpoint` that registers with the controller at
``controller`` (its UDP address) and sends nothing before it is registered and has a barrier
from its ToR. Its extra callbacks: ``on_proc_fail(proc, t_f)`` (1Pipe's process-fail callback:
``proc`` failed at ``t_f``; 0: no commit of it was known, everything it sent was discarded)
and ``on_register(incarnation)`` (the process joined, or re-joined after it was declared
failed, as that incarnation). A ``SendFail`` with ts 0 is a message that never left: its
destination had failed.

``auth``: a :class:`~netstack.onepipe.auth.HostAuth` when the deployment has keys (docs/onepipe.md
"Authenticated beacons and barriers"): every datagram is sealed as it leaves and opened as it
arrives, before the engine sees it; refused ones never reach the engine and are counted
(``counters()["auth"]``).

The clock never goes back: :meth:`OnePipeEndpoint.now` holds at the highest value it returned
(design topic §1; a clock stepped back, :meth:`OnePipeEndpoint.set_clock`, stands still until it
catches up, docs/onepipe.md "Clock jumps").

**Scheduling delay.** The endpoint measures how late its event loop runs (``lag``, a
:class:`netstack.looplag.LagHistogram` sampled by :func:`netstack.looplag.monitor`; its own unless
one is passed in, to share between the endpoints of one loop) and, every :data:`LAG_FOLLOW_NS`,
gives the engine :data:`SLACK_FACTOR` times the largest lag of the last seconds as its timer slack
(``Endpoint.set_timer_slack``): best effort's ACK timeout waits that much longer
(docs/onepipe-reliable.md "Timers on a loaded host").
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import Any

from headers.errors import HeaderError
from headers.onepipe import OnePipeOpcode, decode_packet

from .. import looplag
from ..engine import SendTo
from .actions import Deliver, ProcFail, SendFail
from .auth import HostAuth
from .clock import HostClock
from .ctlwire import parse_failure_notice
from .endpoint import UPLINK, Endpoint
from .params import PORT, OnePipeParams
from .reliable import ReliableEndpoint

Addr = tuple[str, int]
#: the IP ECN field's CE codepoint (RFC 3168)
_CE = 0b11
#: the timer slack is this many times the largest recent loop lag: an ACK that comes late needs
#: two processes scheduled (the receiver that sends it, this one that reads it), as the switch
#: daemon's LinkGuardian slack does (daemons/switch.py ``SLACK_FACTOR``)
SLACK_FACTOR = 2
#: how often the slack follows the measured lag (it looks back ``looplag.RECENT_NS``)
LAG_FOLLOW_NS = 100_000_000


class SendBufferFull(Exception):
    """``send(..., wait=False)`` with the send buffer full (1Pipe §3: the send fails at once)."""


class OnePipeEndpoint:
    """One 1Pipe process on a UDP socket bound to ``bind`` (``(ip, port)``; ``port`` in 1Pipe's
    range, ``netstack.onepipe.params.PORT_RANGE``). ``reliable``: reliable 1Pipe, registered
    with the controller at ``controller`` (required then; module docstring)."""

    def __init__(self, bind: Addr, *, params: OnePipeParams | None = None, clock: HostClock | None = None,
                 broadcast: str | None = None,
                 on_send_fail: Callable[[int, Addr, bytes], None] | None = None,
                 on_send_unknown: Callable[[int, Addr, bytes], None] | None = None,
                 reliable: bool = False, controller: Addr | None = None,
                 on_proc_fail: Callable[[Addr, int], None] | None = None,
                 on_register: Callable[[int], None] | None = None, auth: HostAuth | None = None,
                 lag: looplag.LagHistogram | None = None) -> None:
        if reliable and controller is None:
            raise ValueError("a reliable 1Pipe endpoint needs the controller's address: controller=(ip, port)")
        if not reliable and (controller is not None or on_proc_fail is not None or on_register is not None):
            raise ValueError("controller, on_proc_fail and on_register are for reliable=True only")
        self.bind = bind
        self.params = params or OnePipeParams()
        self.clock = clock or HostClock()
        self.auth = auth
        self._last_now = -(1 << 62)  # the highest time now() returned (the clock never goes back)
        #: where beacons go: the subnet's broadcast address (default: the /24 of ``bind``)
        self.broadcast = broadcast or str(ipaddress.ip_network(f"{bind[0]}/24", strict=False).broadcast_address)
        self.on_send_fail = on_send_fail
        #: best effort's ACK timeout: the message may or may not have been delivered
        self.on_send_unknown = on_send_unknown
        self.on_proc_fail = on_proc_fail
        self.on_register = on_register
        self.reliable = reliable
        self.controller = controller
        self.engine: Endpoint
        self._reng: ReliableEndpoint | None = None  # the engine, when it is the reliable one
        if controller is not None:
            # a fresh nonce per start: the controller tells a restarted process from a repeat by it
            self.engine = self._reng = ReliableEndpoint(self.params, bind, self.now(), controller=controller,
                                                        nonce=int.from_bytes(os.urandom(4), "big"))
        else:
            self.engine = Endpoint(self.params, bind, self.now())
        self._incarnation: int | None = None  # the engine's, as last seen (on_register fires on a change)
        #: the incarnation of each process the controller's notices named, last one wins
        #: (``ProcFail`` does not carry it; :meth:`failed_incarnation`)
        self._noticed: dict[Addr, int] = {}
        self.send_errors = 0
        self.callback_errors = 0  # exceptions the callbacks raised (counted, then ignored)
        self._delivered: deque[tuple[int, Addr, bytes]] = deque()
        self._readable = asyncio.Event()
        self._room = asyncio.Event()
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False
        #: this event loop's scheduling delay: sampled by our own monitor task unless given
        self.lag = lag if lag is not None else looplag.LagHistogram(time.monotonic_ns())
        self._own_lag = lag is None
        self._lag_task: asyncio.Task[None] | None = None
        self._follow_at = 0
        #: the largest timer slack the engine was given (counters)
        self.timer_slack_max_ns = 0

    # ------------------------------------------------------------------ lifecycle
    def now(self) -> int:
        """The host's clock (ns); never below a value it returned before."""
        t = self.clock.now(time.monotonic_ns())
        if t < self._last_now:
            return self._last_now
        self._last_now = t
        return t

    def set_clock(self, clock: HostClock) -> None:
        """Step the host's clock (a clock jump, docs/onepipe.md "Clock jumps"): from now on time is
        ``clock``'s. Ahead: timestamps and barriers jump with it. Back: :meth:`now` stands still
        until the new clock passes what it returned."""
        self.clock = clock
        if not self._closed and self._sock is not None:
            self._flush()  # the engine's next deadline is at another true time now
    async def __aenter__(self) -> OnePipeEndpoint:
        await self.start()
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.close()

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
            # ECT(0): the switches may mark instead of drop (DCTCP, 1Pipe §4.3)
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0b10)
            sock.bind(self.bind)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        if self._own_lag and self._lag_task is None:
            self._lag_task = self._loop.create_task(looplag.monitor(self.lag))
        # (best effort keeps its loop as it was: the reliable one looks at the controller's datagrams)
        self._loop.add_reader(sock.fileno(), self._on_readable_reliable if self.reliable else self._on_readable)
        self._flush()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._room.set()  # a send() waiting for room raises instead of waiting for ever
        if self._timer is not None:
            self._timer.cancel()
        if self._lag_task is not None:
            self._lag_task.cancel()
        if self._sock is not None and self._loop is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
        self._readable.set()

    # ------------------------------------------------------------------ the application's side
    async def send(self, scattering: Sequence[tuple[Addr, bytes]], *, wait: bool = True) -> int | None:
        """Send one scattering: every message in it gets the same timestamp (1Pipe §3). Its
        sequence number (per endpoint) comes back. With the send buffer full this waits for room,
        or raises :class:`SendBufferFull` with ``wait=False``. Reliable mode: a message to a
        process whose failure this endpoint handled fails at once (``on_send_fail`` with ts 0);
        when every message does, nothing is sent and None comes back."""
        while True:
            if self._closed:
                raise RuntimeError("the endpoint is closed")
            eng = self.engine
            # reliable: only with room, or the messages to failed processes would fail again on
            # every try (the engine fails them before it looks at the buffer)
            if self._reng is None or eng.queued < self.params.send_buffer:
                seq = eng.send(scattering, self.now())
                if seq is not None or self._reng is not None:
                    self._flush()
                    return seq
            if not wait:
                raise SendBufferFull(f"{self.params.send_buffer} scatterings already wait to be sent")
            self._room.clear()
            await self._room.wait()

    def __aiter__(self) -> AsyncIterator[tuple[int, Addr, bytes]]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[tuple[int, Addr, bytes]]:
        while True:
            while self._delivered:
                yield self._delivered.popleft()
            if self._closed:
                return
            self._readable.clear()
            await self._readable.wait()

    async def recv(self) -> tuple[int, Addr, bytes]:
        """The next message in the total order: (timestamp, sender, bytes)."""
        while not self._delivered:
            if self._closed:
                raise EOFError("the endpoint is closed")
            self._readable.clear()
            await self._readable.wait()
        return self._delivered.popleft()

    def outstanding(self) -> list[tuple[Any, bytes]]:
        """``(dst, msg)`` of every message sent with no fate yet (no ACK, no callback): what is
        still in flight if the process stops now."""
        return self.engine.outstanding()

    def held(self) -> list[tuple[Any, bytes]]:
        """``(src, msg)`` of every message received but not handed to the application yet: waiting
        for the barrier in the engine (its first packet's payload: :meth:`Endpoint.held`), or
        delivered by it and not read. ACKed to their senders: what is in flight on this side if the
        process stops now."""
        return [*self.engine.held(), *((src, msg) for _ts, src, msg in self._delivered)]

    def counters(self) -> dict[str, Any]:
        out = {**self.engine.counters(), "send_errors": self.send_errors, "callback_errors": self.callback_errors,
               "undelivered_queue": len(self._delivered), "timer_slack_ns": self.engine.timer_slack_ns,
               "timer_slack_max_ns": self.timer_slack_max_ns}
        if self.auth is not None:
            out["auth"] = self.auth.counters()
        return out

    @property
    def incarnation(self) -> int | None:
        """Reliable mode: this process's incarnation at the controller (None: not registered,
        or recovering); best effort: None."""
        return self._incarnation

    def failed_incarnation(self, proc: Addr) -> int | None:
        """The incarnation of ``proc`` named by the last failure notice about it (reliable mode;
        None: no notice named it). With ``on_proc_fail``: which incarnation of ``proc`` failed
        (a process re-registered on its address is a new incarnation, design topic §8)."""
        return self._noticed.get(proc)

    # ------------------------------------------------------------------ the shell
    def _on_readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        for _ in range(256):  # a batch, then let the loop breathe
            try:
                data, anc, _flags, src = sock.recvmsg(65536, 64)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                continue  # an ICMP error queued on the socket: nothing to read
            if self.auth is not None:
                opened = self.auth.open(src, data)
                if opened is None:
                    continue  # refused (forged, replayed, unsealed...): counted, never seen by the engine
                data = opened
            ce = any(level == socket.IPPROTO_IP and kind == socket.IP_TOS and d and d[0] & 3 == _CE
                     for level, kind, d in anc)
            self.engine.receive(data, src, self.now(), ce)
        self._flush()

    def _on_readable_reliable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        ctl = self.controller
        for _ in range(256):
            try:
                data, anc, _flags, src = sock.recvmsg(65536, 64)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:
                continue
            if self.auth is not None:
                opened = self.auth.open(src, data)
                if opened is None:
                    continue
                data = opened
            ce = any(level == socket.IPPROTO_IP and kind == socket.IP_TOS and d and d[0] & 3 == _CE
                     for level, kind, d in anc)
            if src == ctl:
                self._peek_notice(data)
            self.engine.receive(data, src, self.now(), ce)
        self._flush()

    def _peek_notice(self, data: bytes) -> None:
        """Note the incarnation a FAILURE_NOTICE names: the engine's ``ProcFail`` does not carry
        it, and an application must tell a failed earlier incarnation of an address (a process
        that ran there before) from the one it talks to now. The engine judges the datagram."""
        try:
            hdr, payload = decode_packet(data)
            if hdr.opcode is OnePipeOpcode.FAILURE_NOTICE:
                n = parse_failure_notice(hdr, payload)
                self._noticed[n.addr] = n.incarnation
        except HeaderError:
            pass

    def _on_timer(self) -> None:
        self._timer = None
        true_now = time.monotonic_ns()
        if true_now >= self._follow_at:
            self._follow_at = true_now + LAG_FOLLOW_NS
            self._follow_lag(true_now)
        self.engine.on_timer(self.now())
        self._flush()

    def _follow_lag(self, true_now: int) -> None:
        """Give the engine the slack the recent scheduling delay calls for (module docstring)."""
        slack = SLACK_FACTOR * self.lag.recent_max_ns(true_now)
        if slack != self.engine.timer_slack_ns:
            self.engine.set_timer_slack(slack)
            self.timer_slack_max_ns = max(self.timer_slack_max_ns, slack)

    def _flush(self) -> None:
        """Carry out the engine's actions and re-arm its timer."""
        eng = self.engine
        if eng.actions:
            for act in eng.actions.take_all():
                if isinstance(act, SendTo):
                    self._sendto(act.data, (self.broadcast, PORT) if act.dst == UPLINK else act.dst)
                elif isinstance(act, Deliver):
                    self._delivered.append((act.ts, act.src, act.msg))
                    self._readable.set()
                elif isinstance(act, SendFail):
                    cb = self.on_send_fail if act.known else self.on_send_unknown
                    if cb is not None:
                        try:
                            cb(act.ts, act.dst, act.msg)
                        except Exception:  # the application's bug must not lose the rest of the batch
                            self.callback_errors += 1
                elif isinstance(act, ProcFail):
                    self._proc_fail(act.proc, act.ts)
            self._room.set()
        reng = self._reng
        if reng is not None:
            # every incarnation admitted, in order: one admitted and declared failed within this
            # batch is no longer ``reng.incarnation`` but still joined (on_register fires for it)
            for inc in reng.take_joined():
                self._registered(inc)
            self._incarnation = reng.incarnation
        if self._closed or self._loop is None:
            return
        d = eng.next_deadline()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if d is not None:
            delay = max(0.0, (self.clock.to_true(d) - time.monotonic_ns()) / 1e9)
            self._timer = self._loop.call_later(delay, self._on_timer)

    def _proc_fail(self, proc: Addr, t_f: int) -> None:
        # the engine's order holds: the callback runs before what follows it in the batch is sent
        if self.on_proc_fail is not None:
            try:
                self.on_proc_fail(proc, t_f)
            except Exception:
                self.callback_errors += 1

    def _registered(self, incarnation: int | None) -> None:
        self._incarnation = incarnation
        if incarnation is not None and self.on_register is not None:
            try:
                self.on_register(incarnation)
            except Exception:
                self.callback_errors += 1

    def _sendto(self, data: bytes, dst: Any) -> None:
        assert self._sock is not None
        if self.auth is not None:
            data = self.auth.seal(dst, data)
        try:
            self._sock.sendto(data, dst)
        except OSError:
            self.send_errors += 1  # a full socket buffer or no route: lost, as on a wire


__all__ = ["LAG_FOLLOW_NS", "SLACK_FACTOR", "OnePipeEndpoint", "SendBufferFull"]
