"""A host NIC with two send queues that honours PFC (IEEE 802.1Qbb), in front of a host's link.

The simulator's host NIC is its link's :class:`~netstack.sim.network.Channel`: one line-rate FIFO
that never pauses (only paced UDP engines read pauses, :mod:`netstack.sim.transport`). A host that
sends RDMA traffic beside kernel TCP (1Pipe's hosts: "1Pipe: Scalable Total Order Communication in
Data Center Networks", §7.1, RoCEv2 with background TCP flows, Fig. 12) has two send queues the
NIC serves in turn, so a message of one waits for at most a frame of the other, not for its
backlog; and on a lossless fabric the NIC obeys its switch's pauses. :func:`install_nics` puts a
:class:`HostNic` on every host linked to a switch (``host.nic``), honouring PFC where that switch
port is lossless.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ..io.pfcgate import PauseGate

_MAC_CONTROL = b"\x88\x08"
_PROTO_TCP = 6


class HostNic:
    """A host's NIC in front of its link (``channel``, the simulator's: its pacer serialises at
    the link rate): two send queues served a frame at a time in turn, the kernel's (TCP) and the
    rest (1Pipe's, the controller's), and with ``honour_pfc`` a pause of class 0 from the switch
    (read off ``down``, the link's other direction, as the NIC's MAC reads it: before the host
    stack's ``stack_ns``). A frame starts only when the link is free and the class is not paused,
    so a pause holds the next frame boundary, as 802.1Qbb has it; both queues share the class
    (the paper runs 1Pipe and the flows in one)."""

    def __init__(self, host: Any, channel: Any, down: Any, honour_pfc: bool) -> None:
        self.host = host
        self.channel = channel
        self.nic = channel.nic  # (the pacer: what readers of ``host.nic.nic`` want, its rate)
        self.loop = host.loop
        self.queues: tuple[deque[tuple[bytes, int]], deque[tuple[bytes, int]]] = (deque(), deque())
        self.turn = 0
        self.gate = PauseGate(int(channel.nic.rate)) if honour_pfc else None
        self._wake: object | None = None
        self.queued_bytes = self.peak_bytes = 0
        #: what 1Pipe's side (queue 0) waited in the NIC: frames, total ns
        self.waited_frames = self.waited_ns = 0
        if self.gate is not None:  # the NIC's MAC reads what its link delivers first
            self._deliver = down.tap(self._receive)

    def _receive(self, port: str, frame: bytes) -> None:
        gate = self.gate
        assert gate is not None
        if frame[12:14] == _MAC_CONTROL:  # PFC stops at the NIC's MAC: the host never sees it
            now = self.loop.now
            if gate.on_frame(frame, now) and not gate.paused(now):
                self._pump()  # a resume: send at once
            return
        self._deliver(port, frame)

    def send(self, frame: bytes, at_ns: int | None = None) -> None:
        now = self.loop.now
        if at_ns is not None and at_ns > now:
            self.loop.call_at(at_ns, self.send, frame)
            return
        k = 1 if frame[12:14] == b"\x08\x00" and frame[23] == _PROTO_TCP else 0
        self.queues[k].append((frame, now))
        self.queued_bytes += len(frame)
        if self.queued_bytes > self.peak_bytes:
            self.peak_bytes = self.queued_bytes
        if self._wake is None:
            self._pump()

    def _tick(self, token: object) -> None:
        if token is self._wake:
            self._wake = None
            self._pump()

    def _pump(self) -> None:
        now = self.loop.now
        qs, gate, pacer = self.queues, self.gate, self.channel.nic
        while qs[0] or qs[1]:
            if gate is not None and gate.paused(now):
                self._arm(gate.until)
                return
            if pacer.busy_until > now:
                self._arm(pacer.busy_until)
                return
            k = self.turn if qs[self.turn] else self.turn ^ 1
            self.turn = k ^ 1
            frame, at = qs[k].popleft()
            self.queued_bytes -= len(frame)
            if k == 0:
                self.waited_frames += 1
                self.waited_ns += now - at
            self.channel.send(frame)
        self._wake = None

    def _arm(self, t: int) -> None:
        token = self._wake = object()  # (a later arm replaces this one: a resume comes before the pause ends)
        self.loop.call_at(t, self._tick, token)


def install_nics(net: Any) -> list[HostNic]:
    """A :class:`HostNic` on every host linked to a switch, honouring PFC where its switch port is
    lossless (the host takes part in the lossless class, as ``pfc_from_host`` has it)."""
    nics = []
    for host in net.hosts.values():
        up = host.nic
        if isinstance(up, HostNic) or up.dst not in net.switches:
            continue
        port = next(p for p in net.switch(up.dst).ports if p.name == up.dst_port)
        nic = HostNic(host, up, net.channel(up.link, up.dst), bool(port.cfg.lossless))
        host.nic = nic
        nics.append(nic)
    return nics


__all__ = ["HostNic", "install_nics"]
