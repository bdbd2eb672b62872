"""ethcount as a switch feature: the engine on one port's traffic.

A feature is what the switch calls for a port's frames (netstack/switch/feature.py): subclass
``FeatureBase`` and override only the hooks you need, because the port calls only the hooks a
feature overrides, and an unused one then costs nothing per frame. Hence two classes: one that
counts what the port receives (``on_ingress``), and one that also counts what it sends
(``on_egress``), chosen by :func:`make_feature`.

Both hand every frame back unchanged: counting never alters, delays or drops traffic.
"""

from __future__ import annotations

from typing import Any

from netstack.switch.feature import FeatureBase

from .engine import EthCounter


class EthCountFeature(FeatureBase):
    """Counts the EtherType's frames this port receives."""

    def __init__(self, counter: EthCounter) -> None:
        self.counter = counter

    @property
    def egress(self) -> bool:
        return False

    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        self.counter.count(frame, now_ns)
        return frame

    def status(self) -> dict[str, Any]:
        """The counter's counts and whether egress is counted (the control plug-in's answers)."""
        return {**self.counter.counters(), "egress_counted": self.egress}


class EthCountBothWays(EthCountFeature):
    """Counts the EtherType's frames this port receives and those it sends."""

    @property
    def egress(self) -> bool:
        return True

    def on_egress(self, frame: bytes, cls: int, now_ns: int) -> bytes:
        self.counter.count(frame, now_ns, egress=True)
        return frame


def make_feature(ethertype: int, egress: bool = False) -> EthCountFeature:
    """A fresh counter of ``ethertype`` (ConfigError if it is none), egress counted or not."""
    counter = EthCounter(ethertype)
    return EthCountBothWays(counter) if egress else EthCountFeature(counter)


def counters_on(switch: Any) -> dict[str, EthCountFeature]:
    """The ports of ``switch`` that have an ethcount feature attached -> that feature."""
    return {p.name: f for p in switch.ports for f in p.features if isinstance(f, EthCountFeature)}


__all__ = ["EthCountBothWays", "EthCountFeature", "counters_on", "make_feature"]
