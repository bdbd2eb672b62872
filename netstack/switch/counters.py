"""Per-port counters, kept as plain attributes on the data path and exported as JSON.

The names follow what a switch ASIC or ``ethtool -S`` reports, plus the LinkGuardian
testbed's view (seed 000 Fig. 7: a port's tx count is counter *B*, the peer's rx count
*C*, so ``actual loss = 1 - C/B`` — frames lost to the impairment model are therefore
counted as transmitted).
"""

from __future__ import annotations

from typing import Any

from .config import NUM_CLASSES

#: Scalar counters, in export order.
SCALARS = (
    "rx_frames",         # every frame handed to receive(), good or bad
    "rx_bytes",
    "tx_frames",         # every frame put on the wire (including ones the impairment then lost)
    "tx_bytes",          # bytes handed to the shell (software FCS trailer included)
    "fcs_errors",        # software FCS check failed on ingress (DESIGN.md "Software FCS")
    "malformed",         # too short for Ethernet (or for its FCS), or a feature's HeaderError
    "filtered",          # destination learned on the ingress port: not sent back out
    "mac_control_rx",    # 01:80:C2:00:00:0x / EtherType 0x8808 frames consumed by the port
    "pfc_rx",            # valid 802.1Qbb (or 802.3x PAUSE) frames received
    "pauses_rx",         # per-class pause requests received (quanta > 0)
    "resumes_rx",        # per-class resumes received (quanta = 0)
    "pauses_tx",         # per-class XOFF transitions sent (state change, seed 000 Algorithm 2)
    "resumes_tx",        # per-class XON transitions sent
    "pause_refreshes_tx",  # pauses re-sent before their quanta expire while still above XON
    "queue_drops",       # tail drops at this port's egress buffer (all classes)
    "mtu_drops",         # frames longer than mtu + 18 refused at enqueue
    "ecn_marked",        # CE set at enqueue (queue above ecn_threshold_bytes)
    "impair_lost",       # frames the egress impairment model dropped
    "impair_corrupted",  # frames the egress impairment model corrupted (one byte overwritten)
    "feature_consumed",  # frames a feature's on_ingress consumed (returned None)
    "idle_tx",           # frames from a feature's idle source (dummies, ACK couriers)
    "kernel_drops",      # added by the shell from PACKET_STATISTICS (tp_drops)
)

#: Per-class counters (lists of NUM_CLASSES ints).
PER_CLASS = ("queue_drops_class", "tx_frames_class", "pauses_rx_class")


class PortCounters:
    """Counters of one port. Attributes are bumped directly by the engine (no dict lookups)."""

    __slots__ = SCALARS + PER_CLASS

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        for name in SCALARS:
            setattr(self, name, 0)
        for name in PER_CLASS:
            setattr(self, name, [0] * NUM_CLASSES)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in SCALARS}
        for name in PER_CLASS:
            out[name] = list(getattr(self, name))
        return out
