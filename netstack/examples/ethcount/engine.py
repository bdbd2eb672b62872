"""ethcount's engine: counts one switch port's frames of one EtherType, sans-IO.

An engine never touches a socket, a clock or asyncio (docs/architecture.md "Engines are sans-IO"):
the frame and the time come in as arguments, the answer goes out as the return value, and
:meth:`EthCounter.counters` says what it has seen. That is what lets the same class run in a live
switch daemon, in virtual time (``netstack sim``) and in a unit test, unchanged.

One :class:`EthCounter` serves one port; the switch feature (:mod:`.feature`) calls
:meth:`EthCounter.count` for each frame the port receives and, if asked to, each it sends.
A frame's EtherType is its bytes 12-13 (after the two MAC addresses): an 802.1Q-tagged frame counts
as 0x8100, whatever it carries (this example reads no further into the frame).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from netstack.engine import ActionQueue
from netstack.errors import ConfigError

from .header import DEFAULT_ETHERTYPE

#: below 0x0600 the two bytes are an 802.3 length, not an EtherType (IEEE 802.3 clause 3.2.6)
MIN_ETHERTYPE = 0x0600
#: destination MAC, source MAC: the EtherType follows them
ETHERTYPE_OFFSET = 12


def check_ethertype(value: object, field: str = "ethertype") -> int:
    """``value`` if it is an EtherType (an int in 0x0600..0xFFFF); ConfigError naming ``field`` otherwise."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(field, f"must be an integer such as 0x88b5, not {value!r}")
    if not MIN_ETHERTYPE <= value <= 0xFFFF:
        raise ConfigError(field, f"{value:#06x} is not an EtherType (0x0600..0xffff; below is an 802.3 length)")
    return value


@dataclass
class Counts:
    """What one direction of a port has seen of the EtherType."""

    frames: int = 0
    bytes: int = 0
    #: ``now_ns`` of the last frame counted (None: none yet)
    last_ns: int | None = None


@dataclass
class EthCountCounters:
    """Every engine keeps its counters in one dataclass held as ``c`` (docs/architecture.md
    "Engines are sans-IO"): here, what each direction of the port has seen."""

    ingress: Counts = field(default_factory=Counts)
    egress: Counts = field(default_factory=Counts)


class EthCounter:
    """Counts the frames of ``ethertype`` one port receives (``ingress``) and sends (``egress``).

    The engine contract (:class:`netstack.engine.Engine`): ``actions``, ``next_deadline()`` and
    ``counters()``. A counter never asks its shell to do anything and has no timer, so its action
    queue stays empty and its deadline is None; they are here because every engine has them.
    """

    def __init__(self, ethertype: int = DEFAULT_ETHERTYPE) -> None:
        self.ethertype = check_ethertype(ethertype)
        # compared with the frame's two bytes as they are: no int conversion per frame
        self._wanted = ethertype.to_bytes(2, "big")
        self.c = EthCountCounters()
        self.actions = ActionQueue()

    def count(self, frame: bytes, now_ns: int, *, egress: bool = False) -> bool:
        """Count ``frame`` if it is of the EtherType; whether it was. Any bytes are fine: a frame
        too short to hold an EtherType is simply not of it."""
        if frame[ETHERTYPE_OFFSET:ETHERTYPE_OFFSET + 2] != self._wanted:
            return False
        counts = self.c.egress if egress else self.c.ingress
        counts.frames += 1
        counts.bytes += len(frame)
        counts.last_ns = now_ns
        return True

    def reset(self) -> None:
        """Start counting from zero again (the EtherType stays)."""
        self.c = EthCountCounters()

    def next_deadline(self) -> int | None:
        return None

    def counters(self) -> dict[str, Any]:
        """``{"ethertype": "0x88b5", "ingress": {frames, bytes, last_ns}, "egress": {...}}``, JSON-able."""
        return {"ethertype": f"{self.ethertype:#06x}", "ingress": asdict(self.c.ingress),
                "egress": asdict(self.c.egress)}


__all__ = ["DEFAULT_ETHERTYPE", "MIN_ETHERTYPE", "Counts", "EthCountCounters", "EthCounter", "check_ethertype"]
