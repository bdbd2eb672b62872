"""Facts of Ethernet that the switch, the protocol engines and the simulator share: one home each.

- 802.1Q / 802.1Qbb: eight traffic classes (PFC's class-enable vector has eight bits).
- A frame occupies the wire for more than its bytes: 7 B preamble + 1 B start delimiter, the
  4 B FCS and a 12 B inter-frame gap (IEEE 802.3 clause 4), 24 B in all, and a frame is at
  least 60 B before its FCS (:data:`headers.registry.MIN_FRAME`).
- Its *line time* at a rate is those wire bytes' bits over the rate. Everything that paces or
  models a link (the switch's pacer, LinkGuardian's recirculation port, T/C-SACK's paced
  sender, the simulator's host NICs) computes it here, so they agree to the nanosecond.

Frame lengths here exclude the FCS (what a socket reads): :func:`wire_bytes` adds it back.
"""

from __future__ import annotations

from headers.registry import MIN_FRAME

#: 802.1Q priorities / 802.1Qbb PFC classes
NUM_CLASSES = 8
#: preamble and start delimiter (8), FCS (4), inter-frame gap (12): bytes a frame costs beyond its own
WIRE_OVERHEAD_BYTES = 24
#: Ethernet (14) + IPv4 (20) + UDP (8) headers in front of a UDP payload
UDP_HEADERS_BYTES = 42
_NS_PER_S = 1_000_000_000


def wire_bytes(frame_len: int, overhead: int = WIRE_OVERHEAD_BYTES) -> int:
    """Bytes of line time a frame of ``frame_len`` bytes (without FCS) takes: padded to the
    minimum frame, plus ``overhead`` (preamble, FCS, gap)."""
    return (frame_len if frame_len > MIN_FRAME else MIN_FRAME) + overhead


def serialisation_ns(nbytes: int, rate_bps: int) -> int:
    """Time ``nbytes`` of line (wire bytes, overhead included) take at ``rate_bps``, in whole ns
    rounded up (a frame never leaves early)."""
    return -(-nbytes * 8 * _NS_PER_S // rate_bps)


def line_time_ns(frame_len: int, rate_bps: int, overhead: int = WIRE_OVERHEAD_BYTES) -> int:
    """Line time of a frame of ``frame_len`` bytes (without FCS) at ``rate_bps``, rounded up."""
    return serialisation_ns(wire_bytes(frame_len, overhead), rate_bps)


def line_time_exact_ns(frame_len: int, rate_bps: float, overhead: int = WIRE_OVERHEAD_BYTES) -> float:
    """The same, unrounded: for spacing a stream by its mean gap without accumulating rounding."""
    return wire_bytes(frame_len, overhead) * 8e9 / rate_bps


__all__ = ["MIN_FRAME", "NUM_CLASSES", "UDP_HEADERS_BYTES", "WIRE_OVERHEAD_BYTES", "line_time_exact_ns",
           "line_time_ns", "serialisation_ns", "wire_bytes"]
