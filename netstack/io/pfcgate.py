"""A host NIC that honours PFC, sans-IO: the pause state of one priority class.

In a lossless (RoCE) network the hosts' NICs take part in PFC: a switch whose ingress from a
host passes XOFF pauses the host, which stops sending that class until a resume or until the
pause's quanta expire (IEEE 802.1Qbb). The Linux kernel on our veths ignores PFC frames, so the
paced senders that must behave as RoCE NICs (TCD's end hosts: "Congestion Detection in Lossless
Networks" §3.1 runs every host in the lossless class) read the MAC control frames themselves
and hold their engine while the gate is closed. :class:`PauseGate` is that state; the live shell
(:func:`netstack.io.paced.run_sender` with an AF_PACKET socket) and the virtual-time host app
(:class:`netstack.sim.transport.EngineSender`) feed it the frames.

A pause of ``q`` quanta lasts ``q`` x 512 bit times at the link's rate (:func:`headers.pfc.quanta_to_ns`);
a frame that names the class with 0 quanta resumes it; a new pause replaces the running one.
Frames that are not PFC, or that do not name the class, leave the gate alone (counted).
"""

from __future__ import annotations

from dataclasses import dataclass

from headers.errors import HeaderError
from headers.pfc import parse_pfc_frame, quanta_to_ns


@dataclass(slots=True)
class PauseGateCounters:
    """What a gate counts (``PauseGate.c``; ``counters()`` exports them with a ``pfc_`` prefix)."""

    pauses: int = 0  # PFC frames that paused the class
    resumes: int = 0  # ... that resumed it (0 quanta)
    ignored: int = 0  # PFC frames that do not name the class
    malformed: int = 0  # MAC control frames that are not PFC
    paused_ns: int = 0  # time spent paused, counted when a pause ends or is cut short


class PauseGate:
    """Is class ``cls`` paused at a time? ``rate_bps``: the link's rate (the quanta's unit)."""

    __slots__ = ("c", "cls", "rate_bps", "until")

    def __init__(self, rate_bps: int, cls: int = 0) -> None:
        if isinstance(rate_bps, bool) or not isinstance(rate_bps, int) or rate_bps <= 0:
            raise ValueError(f"a pause gate needs the link rate in bit/s (> 0), got {rate_bps!r}")
        if isinstance(cls, bool) or not isinstance(cls, int) or not 0 <= cls <= 7:
            raise ValueError(f"class {cls!r} is not a PFC priority (0-7)")
        self.rate_bps = rate_bps
        self.cls = cls
        #: the class is paused before this time (0: never paused)
        self.until = 0
        self.c = PauseGateCounters()

    def on_frame(self, frame: bytes | bytearray | memoryview, now_ns: int) -> bool:
        """A MAC control frame received at ``now_ns``; True if it changed this class's pause."""
        try:
            pfc = parse_pfc_frame(frame)
        except HeaderError:
            self.c.malformed += 1
            return False
        if not pfc.class_enable >> self.cls & 1:
            self.c.ignored += 1
            return False
        if self.until > now_ns:  # the running pause ends (is replaced) now
            self.c.paused_ns -= self.until - now_ns
        quanta = pfc.quanta[self.cls]
        if quanta == 0:
            self.c.resumes += 1
            self.until = min(self.until, now_ns)
            return True
        self.c.pauses += 1
        self.until = now_ns + quanta_to_ns(quanta, self.rate_bps)
        self.c.paused_ns += self.until - now_ns
        return True

    def paused(self, now_ns: int) -> bool:
        return now_ns < self.until

    def counters(self) -> dict[str, int]:
        c = self.c
        return {"pfc_pauses": c.pauses, "pfc_resumes": c.resumes, "pfc_ignored": c.ignored,
                "pfc_malformed": c.malformed, "pfc_paused_ns": c.paused_ns}


__all__ = ["PauseGate", "PauseGateCounters"]
