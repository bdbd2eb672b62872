"""Per-host clocks: a true time (the kernel's monotonic clock live, the virtual clock in
``netstack/sim``) seen through an offset and a drift.

1Pipe assumes hosts whose clocks are synchronised, not equal (§2 of the paper: PTP every
125 ms, 0.3 us skew on average). Clock skew costs latency and never correctness (design topic
§2 in docs/papers.md): a receiver waits for the slowest sender's barrier, and a message is
delivered only once the receiver's own clock has passed it. The topology gives each host an
offset and a drift (docs/topology.md), so that skew can be measured rather than assumed away.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    from ..topo.model import Node, Topology

#: a drift beyond this (1 %) is no synchronised clock at all
MAX_DRIFT_PPM = 10_000.0


@dataclass(frozen=True, slots=True)
class HostClock:
    """``host = true + offset + (true - epoch) * drift``: linear, so strictly increasing, and
    invertible. The drift counts from ``epoch_ns`` (the start of a run: every host of a run gets
    the same epoch), so that the skew is the offset at the start and grows from there, whatever
    the true clock read then (the kernel's monotonic clock counts from boot)."""

    offset_ns: int = 0
    drift_ppm: float = 0.0
    epoch_ns: int = 0

    def __post_init__(self) -> None:
        if not -MAX_DRIFT_PPM <= self.drift_ppm <= MAX_DRIFT_PPM:
            raise ConfigError("clock", f"drift {self.drift_ppm} ppm is beyond +-{MAX_DRIFT_PPM:g} ppm")

    def now(self, true_ns: int) -> int:
        """The host's time at true time ``true_ns``."""
        if not self.drift_ppm:
            return true_ns + self.offset_ns
        return true_ns + self.offset_ns + round((true_ns - self.epoch_ns) * self.drift_ppm / 1e6)

    def to_true(self, host_ns: int) -> int:
        """The earliest true time at which the host's clock reads ``host_ns`` or more (the
        shell's timer for a deadline the engine gave in host time)."""
        if not self.drift_ppm:
            return host_ns - self.offset_ns
        e = self.epoch_ns
        t = e + int((host_ns - self.offset_ns - e) / (1 + self.drift_ppm / 1e6))
        while self.now(t) < host_ns:  # rounding: step to the first true time that reaches it
            t += 1
        while self.now(t - 1) >= host_ns:
            t -= 1
        return t

    def from_epoch(self, epoch_ns: int) -> HostClock:
        """This clock with its drift counted from ``epoch_ns``."""
        return HostClock(self.offset_ns, self.drift_ppm, epoch_ns)


def host_clock(topology: Topology, node: str | Node) -> HostClock:
    """The clock a topology gives host ``node`` (its ``clock_offset`` and ``clock_drift_ppm``;
    docs/topology.md "Per-host clocks"). A node that sets neither runs on the true time."""
    n = topology.node(node) if isinstance(node, str) else node
    return HostClock(n.clock_offset_ns, n.clock_drift_ppm)


__all__ = ["MAX_DRIFT_PPM", "HostClock", "host_clock"]
