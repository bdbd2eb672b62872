"""T/C-SACK settings (seed 004 §2: "the packet sending rate of the sender is preset, the
cumulative acknowledgement time T of the receiver and the cumulative number of received
packets N"), shared by the go-back-N baseline so both run under the same knobs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from headers.tcsack import MAX_BLOCKS

#: IPv4 + UDP + Ethernet (header, FCS, preamble, inter-frame gap) around a datagram: what
#: the pacer counts so that ``rate_bps`` is a line rate, as a NIC's rate limiter does.
WIRE_OVERHEAD = 20 + 8 + 14 + 4 + 8 + 12


class TcsParamError(ValueError):
    """A setting out of range: the message names it."""


@dataclass(frozen=True)
class TcsParams:
    """``rate_bps``: the preset sending rate (line rate, retransmissions included).
    ``t_ns`` / ``n``: the receiver ACKs when T has passed since the first packet after its
    last ACK, or when N packets have arrived since it. The sender probes after 2T without an
    ACK. ``payload``: bytes per packet. ``buffer_packets``: how far above the cumulative point
    the receiver keeps packets (a memory bound, not a window: the sender never sees it).
    ``rto_ns`` (go-back-N only): no progress for this long means go back to the cumulative
    point (RoCE RC's retransmission timeout); default 4T."""

    rate_bps: int = 50_000_000
    t_ns: int = 2_000_000
    n: int = 16
    payload: int = 1200
    buffer_packets: int = 1 << 16
    max_blocks: int = MAX_BLOCKS
    rto_ns: int | None = None

    def __post_init__(self) -> None:
        checks = (
            ("rate_bps", self.rate_bps, 1_000, 100_000_000_000),
            ("t_ns", self.t_ns, 1_000, 60_000_000_000),
            ("n", self.n, 1, 1 << 20),
            ("payload", self.payload, 1, 65_000),
            ("buffer_packets", self.buffer_packets, 1, 1 << 30),
            ("max_blocks", self.max_blocks, 1, MAX_BLOCKS),
        )
        for name, v, lo, hi in checks:
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise TcsParamError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
        if self.rto_ns is not None and (not isinstance(self.rto_ns, int) or self.rto_ns < 1_000):
            raise TcsParamError(f"rto_ns must be an integer >= 1000 (or None = 4T), got {self.rto_ns!r}")

    @property
    def rto(self) -> int:
        return self.rto_ns if self.rto_ns is not None else 4 * self.t_ns

    def packet_ns(self, datagram_bytes: int) -> int:
        """Time one datagram of ``datagram_bytes`` (TcsData header + payload) takes at ``rate_bps``."""
        return -(-(datagram_bytes + WIRE_OVERHEAD) * 8_000_000_000 // self.rate_bps)

    def with_changes(self, **changes: Any) -> TcsParams:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
