"""Per-port counters, kept as plain attributes on the data path and exported as JSON.

The names follow what a switch ASIC or ``ethtool -S`` reports, plus the LinkGuardian
testbed's view (LinkGuardian Fig. 7: a port's tx count is counter *B*, the peer's rx count
*C*, so ``actual loss = 1 - C/B`` — frames lost to the impairment model are therefore
counted as transmitted).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..ethernet import NUM_CLASSES


@dataclass(slots=True)
class PortCounters:
    """Counters of one port (``Port.c``), bumped directly on the data path (no dict lookups)."""

    rx_frames: int = 0  # every frame handed to receive(), good or bad
    rx_bytes: int = 0
    tx_frames: int = 0  # every frame put on the wire (including ones the impairment then lost)
    tx_bytes: int = 0  # bytes handed to the shell (software FCS trailer included)
    fcs_errors: int = 0  # software FCS check failed on ingress (docs/architecture.md "The live runtime": software FCS)
    malformed: int = 0  # too short for Ethernet (or for its FCS), or a feature's HeaderError
    filtered: int = 0  # destination learned on the ingress port: not sent back out
    mac_control_rx: int = 0  # 01:80:C2:00:00:0x / EtherType 0x8808 frames consumed by the port
    pfc_rx: int = 0  # valid 802.1Qbb (or 802.3x PAUSE) frames received
    pauses_rx: int = 0  # per-class pause requests received (quanta > 0)
    resumes_rx: int = 0  # per-class resumes received (quanta = 0)
    pauses_tx: int = 0  # per-class XOFF transitions sent (state change, LinkGuardian Algorithm 2)
    resumes_tx: int = 0  # per-class XON transitions sent
    pause_refreshes_tx: int = 0  # pauses re-sent before their quanta expire while still above XON
    queue_drops: int = 0  # tail drops at this port's egress buffer (all classes)
    mtu_drops: int = 0  # frames longer than mtu + 18 refused at enqueue
    ecn_marked: int = 0  # CE set at enqueue (queue above ecn_threshold_bytes)
    impair_lost: int = 0  # frames the egress impairment model dropped
    impair_corrupted: int = 0  # frames the egress impairment model corrupted (one byte overwritten)
    impair_reordered: int = 0  # frames the impairment's delay/jitter/reorder let overtake held ones
    impair_duplicated: int = 0  # frames the impairment sent twice
    link_down: int = 0  # carrier losses (the link went down: netstack link ... down / flap)
    carrier_drops: int = 0  # frames dropped because the link had no carrier (queued, held or arriving)
    feature_consumed: int = 0  # frames a feature's on_ingress consumed (returned None)
    idle_tx: int = 0  # frames from a feature's idle source (dummies, ACK couriers)
    kernel_drops: int = 0  # added by the shell from PACKET_STATISTICS (tp_drops)
    edge_drops_switch_only: int = 0  # edge port: frames only a switch may send (a host's forged LinkGuardian tag...)
    edge_drops_pfc: int = 0  # edge port: PFC/PAUSE from a host that may not send them (pfc_from_host)
    edge_drops_spoofed: int = 0  # edge port: IPv4/ARP whose source is not its host's (BCP 38, source_ips)
    mac_control_dropped: int = 0  # MAC control a feature returned or released: never forwarded
    pfc_watchdog_events: int = 0  # classes released by the PFC watchdog (paused too long)
    pfc_watchdog_ignored: int = 0  # pauses ignored while a class recovers from a watchdog event
    pauses_refused: int = 0  # per-class pauses for a class PFC is not enabled for (pfc_enable)
    # per class (NUM_CLASSES ints each)
    queue_drops_class: list[int] = field(default_factory=lambda: [0] * NUM_CLASSES)
    tx_frames_class: list[int] = field(default_factory=lambda: [0] * NUM_CLASSES)
    pauses_rx_class: list[int] = field(default_factory=lambda: [0] * NUM_CLASSES)

    def clear(self) -> None:
        PortCounters.__init__(self)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in SCALARS}
        for name in PER_CLASS:
            out[name] = list(getattr(self, name))
        return out


#: Scalar counters, in export order.
SCALARS = tuple(f.name for f in fields(PortCounters) if f.type in ("int", int))
#: Per-class counters (lists of NUM_CLASSES ints).
PER_CLASS = ("queue_drops_class", "tx_frames_class", "pauses_rx_class")
