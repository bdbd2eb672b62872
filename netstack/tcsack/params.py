"""T/C-SACK settings ("An Updated ACK mechanism based on RDMA", §2: "the packet sending rate of
the sender is preset, the cumulative acknowledgement time T of the receiver and the cumulative
number of received packets N"), shared by the go-back-N baseline so both run under the same
knobs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from headers.tcsack import MAX_BLOCKS

from ..ethernet import UDP_HEADERS_BYTES, WIRE_OVERHEAD_BYTES, serialisation_ns


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
        """Time one datagram of ``datagram_bytes`` (TcsData header + payload) takes at ``rate_bps``.

        Ethernet, IPv4 and UDP headers, FCS, preamble and inter-frame gap count too, so that
        ``rate_bps`` is a line rate, as a NIC's rate limiter counts it. (The minimum-frame padding
        is not counted: a datagram of under 18 bytes, which only a payload of under 6 bytes
        makes, is paced as its own bytes, as this sender always has.)"""
        return serialisation_ns(datagram_bytes + UDP_HEADERS_BYTES + WIRE_OVERHEAD_BYTES, self.rate_bps)

    def with_changes(self, **changes: Any) -> TcsParams:
        # Any: mypy cannot match a ``**kwargs`` forwarder to replace()'s per-field types (int
        # here, int | None for rto_ns); __post_init__ checks every value at run time instead
        return replace(self, **changes)

    def to_dict(self) -> dict[str, int | None]:
        return asdict(self)
