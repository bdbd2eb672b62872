"""The live shell of a paced, sans-IO sender engine over a connected UDP socket, and the UDP
helpers the traffic tools share.

A paced sender engine (T/C-SACK's and go-back-N's ``SenderBase``, TCD's ``RateSender``) keeps
the contract of :class:`PacedEngine`: ``poll(now_ns)`` returns the datagrams due by now,
``receive(datagram, now_ns)`` takes what the receiver sent back (an ACK, a CNP) and raises
:class:`~headers.errors.HeaderError` for anything else, ``next_deadline()`` says when to poll
next, ``done`` says it has finished. :func:`run_sender` owns the socket and the monotonic clock:
it sends what ``poll`` returns, drains and feeds every datagram that came back, and sleeps until
the engine's next deadline or the next datagram (docs/architecture.md "Timers have about 1 ms
granularity": a late wake-up releases a batch, which the engine bounds).

The socket is connected to the receiver, so the kernel drops datagrams from anyone else.
:func:`open_udp_sender` sets the IP TOS byte (DSCP and ECN: a TCD sender's ECT(0) so switches
can mark); :func:`drain_with_tos` reads datagrams together with the TOS byte they arrived with
(``IP_RECVTOS``), which is how a receiver sees the switches' ECN marks.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

from headers.errors import HeaderError
from headers.registry import EtherType

from .pfcgate import PauseGate

#: datagrams a drain reads at most before the shell looks at its engine again
DRAIN_LIMIT = 1024


class PacedEngine(Protocol):
    """What :func:`run_sender` needs of a sender engine."""

    @property
    def done(self) -> bool: ...

    def poll(self, now_ns: int) -> list[bytes]: ...

    def receive(self, datagram: bytes, now_ns: int) -> None: ...

    def next_deadline(self) -> int | None: ...


def open_udp_sender(dst: str, port: int, tos: int = 0, sndbuf: int = 1 << 22) -> socket.socket:
    """A UDP socket connected to ``(dst, port)`` with IP TOS ``tos`` and a ``sndbuf``-byte send
    buffer; blocking (:func:`run_sender` makes it non-blocking)."""
    if not 0 <= tos <= 255:
        raise ValueError(f"tos must be a byte (0-255), got {tos}")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        if tos:
            sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
        sock.connect((dst, port))
    except OSError:
        sock.close()
        raise
    return sock


def enable_recv_tos(sock: socket.socket) -> None:
    """Ask the kernel for each datagram's TOS byte (``IP_RECVTOS``: an ``IP_TOS`` control message)."""
    sock.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)


#: room for the IP_TOS control message (one byte, padded to a cmsg)
_ANC_SIZE = socket.CMSG_SPACE(4)


def recv_with_tos(sock: socket.socket, bufsize: int = 65536) -> tuple[bytes, Any, int]:
    """One datagram: ``(data, source address, TOS byte)``; the TOS is 0 when the kernel gave no
    ``IP_TOS`` control message (:func:`enable_recv_tos` not called). Raises ``BlockingIOError``
    on an empty non-blocking socket, as ``recvfrom`` does."""
    data, anc, _flags, addr = sock.recvmsg(bufsize, _ANC_SIZE)
    tos = 0
    for level, kind, value in anc:
        if level == socket.IPPROTO_IP and kind == socket.IP_TOS and value:
            tos = value[0]
    return data, addr, tos


def drain_with_tos(sock: socket.socket, limit: int = DRAIN_LIMIT) -> list[tuple[bytes, Any, int]]:
    """Every datagram waiting on a non-blocking socket (at most ``limit``), with its TOS byte.

    An ICMP error the kernel queued on the socket (``ECONNREFUSED``: the peer's port was closed
    when an earlier datagram arrived) is taken and skipped, as a lost datagram."""
    out = []
    for _ in range(limit):
        try:
            out.append(recv_with_tos(sock))
        except (BlockingIOError, InterruptedError):
            break
        except ConnectionRefusedError:
            continue
    return out


def drain(sock: socket.socket, limit: int = DRAIN_LIMIT) -> list[tuple[bytes, Any]]:
    """Every datagram waiting on a non-blocking socket (at most ``limit``): ``(data, source)``;
    a queued ICMP error is skipped as in :func:`drain_with_tos`."""
    out = []
    for _ in range(limit):
        try:
            out.append(sock.recvfrom(65536))
        except (BlockingIOError, InterruptedError):
            break
        except ConnectionRefusedError:
            continue
    return out


def wait_readable(sock: socket.socket, deadline_ns: int | None, cap_s: float) -> None:
    """Sleep until ``deadline_ns`` (monotonic), a datagram, or ``cap_s`` at most."""
    timeout = cap_s
    if deadline_ns is not None:
        timeout = min(cap_s, max(0.0, (deadline_ns - time.monotonic_ns()) / 1e9))
    if timeout > 0:
        select.select([sock], [], [], timeout)


def open_pfc_listener(ifname: str) -> socket.socket:
    """An AF_PACKET socket on ``ifname`` that reads its MAC control frames (PFC): the Linux kernel
    ignores them, so a sender that must act as a RoCE NIC reads them itself (netstack.io.pfcgate)."""
    ethertype = int(EtherType.MAC_CONTROL)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ethertype))
    try:
        s.bind((ifname, ethertype))
    except OSError:
        s.close()
        raise
    s.setblocking(False)
    return s


def _drain_pfc(raw: socket.socket, gate: PauseGate) -> None:
    for _ in range(DRAIN_LIMIT):
        try:
            frame = raw.recv(2048)
        except (BlockingIOError, InterruptedError):
            return
        gate.on_frame(frame, time.monotonic_ns())


def _feed(sock: socket.socket, engine: PacedEngine) -> int:
    """Feed every datagram waiting on ``sock`` to ``engine``, each at its own read time; how many it refused."""
    malformed = 0
    for d, _ in drain(sock):
        try:
            engine.receive(d, time.monotonic_ns())
        except HeaderError:
            malformed += 1
    return malformed


def run_sender(sock: socket.socket, engine: PacedEngine, *, max_seconds: float,
               progress: Callable[[], None] | None = None, progress_every_s: float = 1.0,
               wait_cap_s: float = 0.05, pfc: tuple[socket.socket, PauseGate] | None = None) -> dict[str, Any]:
    """Run ``engine`` over the connected ``sock`` until it is done or ``max_seconds`` passed.

    Each round: send what ``poll`` releases (a full socket buffer loses the datagram, as a wire
    would: counted in ``send_errors``), feed every datagram that came back to ``receive`` (one
    it refuses with HeaderError is counted in ``malformed``), call ``progress`` every
    ``progress_every_s``, and sleep until the engine's next deadline or a datagram (at most
    ``wait_cap_s``). With ``pfc`` (:func:`open_pfc_listener`'s socket and a
    :class:`~netstack.io.pfcgate.PauseGate`) the engine is not polled while the gate is closed: the
    host honours PFC as a RoCE NIC does. Returns ``{"send_errors", "malformed", "timed_out", "started_ns",
    "ended_ns"}`` (monotonic ns)."""
    sock.setblocking(False)
    t0 = time.monotonic_ns()
    limit = t0 + int(max_seconds * 1e9)
    every = int(progress_every_s * 1e9)
    next_progress = t0 + every
    send_errors = malformed = 0
    timed_out = False
    raw, gate = pfc if pfc is not None else (None, None)
    while not engine.done:
        now = time.monotonic_ns()
        if now > limit:
            timed_out = True
            break
        if raw is not None and gate is not None:
            _drain_pfc(raw, gate)
            if gate.paused(now):
                # held by a PAUSE: wake on its expiry or on any frame (a resume); what came back is
                # taken meanwhile (a paused NIC still receives: an ACK's arrival time is an RTT sample)
                timeout = min(wait_cap_s, max(0.0, (gate.until - now) / 1e9))
                select.select([raw, sock], [], [], timeout)
                malformed += _feed(sock, engine)
                continue
        for d in engine.poll(now):
            try:
                sock.send(d)
            except OSError:
                send_errors += 1  # a full socket buffer: the packet is lost, as on a wire
        malformed += _feed(sock, engine)
        if progress is not None and now >= next_progress:
            progress()
            next_progress += every
        if not engine.done:
            if raw is not None:
                deadline = engine.next_deadline()
                timeout = wait_cap_s if deadline is None else min(wait_cap_s, max(0.0, (deadline - now) / 1e9))
                if timeout > 0:
                    select.select([sock, raw], [], [], timeout)
            else:
                wait_readable(sock, engine.next_deadline(), wait_cap_s)
    return {"send_errors": send_errors, "malformed": malformed, "timed_out": timed_out, "started_ns": t0,
            "ended_ns": time.monotonic_ns()}


__all__ = ["DRAIN_LIMIT", "PacedEngine", "drain", "drain_with_tos", "enable_recv_tos", "open_pfc_listener",
           "open_udp_sender", "recv_with_tos", "run_sender", "wait_readable"]
