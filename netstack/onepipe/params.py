"""1Pipe's parameters, at the paper's scale and at the live testbed's.

The paper's testbed runs ``T_beacon`` = 3 us, an input timeout of 10 beacon intervals (30 us)
and 100 Gbit/s links (§6 of the paper; design topic §11 in docs/papers.md). The live testbed
runs every time 1000x longer (docs/architecture.md "Time and scale"): ``T_beacon`` = 3 ms.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from headers.onepipe import PORTS, is_onepipe_port
from headers.registry import UdpPort

from ..errors import ConfigError

#: the live testbed's time scale against the paper's
LIVE_SCALE = 1000
#: 1Pipe's UDP port (headers.registry): host beacons go to it (broadcast), and each process
#: binds one of the ``PORT_RANGE`` ports from it: a datagram to a port in
#: ``[PORT, PORT + PORT_RANGE)`` is 1Pipe's (several processes share a host, design topic §3)
PORT = int(UdpPort.ONEPIPE)
PORT_RANGE = len(PORTS)  # 40100-40199: T/C-SACK has 40200 (headers.registry)
#: resends through the controller double their wait at most this many times (64 rto_ns:
#: OnePipeParams.resend_wait_ns)
RELAY_BACKOFF_MAX = 6


@dataclass(frozen=True, slots=True)
class OnePipeParams:
    #: an uplink (host) or output (switch) that carried nothing for this long sends a beacon;
    #: hosts send theirs at multiples of it in host time (§5)
    t_beacon_ns: int = 3_000 * LIVE_SCALE
    #: an input silent for this many beacon intervals leaves the min (§6: 10, i.e. 30 us)
    timeout_beacons: int = 10
    #: payload bytes per packet: a longer message is fragmented (PSN per destination, §9)
    mtu_payload: int = 1400
    #: the receiver's buffer per connection, in packets (rwnd, §9)
    rwnd_packets: int = 256
    #: DCTCP (§9): the initial and the smallest congestion window, in packets, and the gain g
    init_cwnd: int = 32
    min_cwnd: int = 2
    dctcp_g: float = 1 / 16
    #: scatterings waiting in the send buffer before ``send`` fails (§1: "fails immediately")
    send_buffer: int = 1024
    #: a packet still unacknowledged this long after it was sent is lost: its message's
    #: send-fail callback fires (best effort never retransmits, §6). Ours: two input timeouts.
    #: An ACK leaves once the message is delivered (a round trip plus the barrier wait, a few
    #: beacon intervals), and until the timeout a dead destination's window holds the sender's
    #: later scatterings (per-sender FIFO), so it must not be much longer than that.
    ack_timeout_ns: int = 20 * 3_000 * LIVE_SCALE
    #: switches beacon an idle output as soon as its barrier rises (at most 4 per T_beacon)
    #: instead of only every T_beacon (ours: netstack.onepipe.barrier.PROMPT_DIVISOR)
    prompt_beacons: bool = True
    #: a reliable sender sends its commit barrier to the ToR in a COMMIT as soon as it rises (at
    #: most 4 per T_beacon: netstack.onepipe.reliable.COMMIT_DIVISOR) besides its beacons (ours);
    #: False: in its beacons only, every T_beacon (the reading in which 1Pipe's commit phase pays
    #: the beacon interval again: the onepipe scenario's ``prompt_commit``, issue 32)
    prompt_commit: bool = True
    #: a barrier more than this far ahead of the receiving clock is refused (counted): clocks
    #: are synchronised to microseconds (design topic §2), so it is a corrupted or buggy packet,
    #: and taken it would pin its input (R never decreases) for up to 39 hours; the bound caps
    #: that at 10 s, above any skew the testbeds set (the simulator's hosts run 1 s ahead)
    max_ahead_ns: int = 10_000_000_000
    #: reliable 1Pipe (design topic §7.1, "the sender retransmits on loss"): a connection with
    #: unACKed PREPAREs and no progress for this many beacon intervals resends them (go-back-N)
    rto_beacons: int = 4
    #: ... and after this many resends without progress it asks the controller to relay them
    #: (design topic §8, "controller forwarding")
    relay_after: int = 3
    #: under a controller, a switch reports a process failed (and freezes its commit input) after
    #: this many beacon intervals of silence; 0: ``timeout_beacons``, the paper's (its BE input
    #: leaves the BE minimum after ``timeout_beacons`` either way). Ours: live Python processes on
    #: a shared machine can stall for tens of ms, and a failure is final for the process
    failure_beacons: int = 0

    def __post_init__(self) -> None:
        checks = [
            ("t_beacon_ns", self.t_beacon_ns >= 1),
            ("timeout_beacons", self.timeout_beacons >= 2),
            ("mtu_payload", 1 <= self.mtu_payload <= 9000),
            ("rwnd_packets", self.rwnd_packets >= 1),
            ("init_cwnd", self.init_cwnd >= 1),
            ("min_cwnd", 1 <= self.min_cwnd <= self.init_cwnd),
            ("dctcp_g", 0 < self.dctcp_g <= 1),
            ("send_buffer", self.send_buffer >= 1),
            ("ack_timeout_ns", self.ack_timeout_ns >= self.t_beacon_ns),
            ("max_ahead_ns", self.max_ahead_ns >= 2 * self.t_beacon_ns * self.timeout_beacons),
            ("rto_beacons", self.rto_beacons >= 1),
            ("relay_after", self.relay_after >= 1),
            ("failure_beacons", self.failure_beacons == 0 or self.failure_beacons >= self.timeout_beacons),
        ]
        bad = [name for name, ok in checks if not ok]
        if bad:
            raise ConfigError("onepipe", f"invalid parameters: {', '.join(bad)} ({self.to_dict()})")

    @property
    def input_timeout_ns(self) -> int:
        return self.t_beacon_ns * self.timeout_beacons

    @property
    def failure_timeout_ns(self) -> int:
        return self.t_beacon_ns * (self.failure_beacons or self.timeout_beacons)

    @property
    def rto_ns(self) -> int:
        return self.t_beacon_ns * self.rto_beacons

    def register_wait_ns(self, sends: int) -> int:
        """How long a process waits for the answer to its ``sends``-th REGISTER in a row before it
        asks again: ``rto_ns``, doubled for each REGISTER past the first, at most
        :data:`RELAY_BACKOFF_MAX` times (ours, as for the relayed resends below: one controller
        serves every process, and a controller slow to answer, starting up or handing over its
        lead, is only slowed further by every process asking every ``rto_ns``)."""
        return self.rto_ns << min(max(0, sends - 1), RELAY_BACKOFF_MAX)

    def resend_wait_ns(self, rto_ns: int, resends: int) -> int:
        """How long a PREPARE or a RECALL waits for its answer after ``resends`` resends: ``rto_ns``,
        doubled for each resend through the controller past the first, at most
        :data:`RELAY_BACKOFF_MAX` times (ours: one controller serves every process, so resends
        through it back off as TCP's retransmission timer does, RFC 6298 §5.5; without it a
        controller slower than the resends falls further behind with each, 1Pipe's Fig. 10 with
        a controller core, docs/onepipe-reliable.md)."""
        return rto_ns << min(max(0, resends - self.relay_after), RELAY_BACKOFF_MAX)

    @classmethod
    def paper(cls, **changes: Any) -> OnePipeParams:
        """The paper's own scale: T_beacon = 3 us (for the virtual-time runtime)."""
        return cls(**{"t_beacon_ns": 3_000, "ack_timeout_ns": 60_000, **changes})

    @classmethod
    def beaconing(cls, t_beacon_ns: int, timeout_beacons: int | None = None) -> OnePipeParams:
        """The switches' parameters for a beacon interval ``t_beacon_ns``: the ACK timeout keeps
        its default ratio to it (20 intervals), or a T_beacon above the default ACK timeout would
        fail every message (``netstack onepipe enable``, a topology's ``[onepipe]``)."""
        d = cls()
        ratio = d.ack_timeout_ns // d.t_beacon_ns
        return cls(t_beacon_ns=t_beacon_ns, ack_timeout_ns=max(1, t_beacon_ns * ratio),
                   timeout_beacons=d.timeout_beacons if timeout_beacons is None else timeout_beacons)

    def with_(self, **changes: Any) -> OnePipeParams:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


__all__ = ["LIVE_SCALE", "PORT", "PORT_RANGE", "OnePipeParams", "is_onepipe_port"]
