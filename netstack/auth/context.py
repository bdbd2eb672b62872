"""The keys one daemon's protocol features draw from (docs/security.md "Keys and authenticated
frames").

A daemon that runs with a key file (``[topology] keys``) loads it once (``keys.load``: file I/O
stays in the daemon) and hands the :class:`KeyRing` to an :class:`AuthContext`, which the
protocol code in the engine asks for sealers and openers by purpose and name (a LinkGuardian
link, a DTA reporter, a 1Pipe domain). The context remembers what it handed out, so that a
rotated key file (``netstack keys rotate``) or an old key's expiry reaches every one of them
(:meth:`AuthContext.reload`, :meth:`AuthContext.refresh`); no I/O and no clock inside: the
daemon passes the wall time in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .frame import DEFAULT_WINDOW, Opener, Sealer, era_now
from .keys import DerivedKeys, KeyRing

#: At most this many sealers/openers are remembered (oldest forgotten first): one per protected
#: port, reporter and domain; a bound, so that re-enabling a feature forever cannot grow it.
MAX_CONSUMERS = 4096


@dataclass
class AuthContext:
    ring: KeyRing
    #: this daemon's era (its start time in whole seconds): every sealer it makes starts there
    era: int
    #: the wall time the derived keys were last computed for (validity of rotated keys)
    now: float
    #: port name -> the topology link it is an end of (LinkGuardian's per-link keys)
    links: dict[str, str] = field(default_factory=dict)
    _consumers: dict[tuple[str, str, str, str], Sealer | Opener] = field(default_factory=dict, repr=False)
    reloads: int = 0

    @classmethod
    def start(cls, ring: KeyRing, wall_time_s: float, links: dict[str, str] | None = None) -> AuthContext:
        return cls(ring=ring, era=era_now(wall_time_s), now=wall_time_s, links=dict(links or {}))

    def derive(self, purpose: str, name: str) -> DerivedKeys:
        return self.ring.derive(purpose, name, self.now)

    def sealer(self, purpose: str, name: str, tag: str = "") -> Sealer:
        """A sealer for ``(purpose, name)``; ``tag`` tells several apart (a port), and asking
        again with the same tag replaces the old one (a feature enabled anew)."""
        s = Sealer(self.derive(purpose, name), self.era)
        self._remember((purpose, name, "seal", tag), s)
        return s

    def opener(self, purpose: str, name: str, tag: str = "", window: int = DEFAULT_WINDOW) -> Opener:
        o = Opener(self.derive(purpose, name), window)
        self._remember((purpose, name, "open", tag), o)
        return o

    def link_of(self, port: str) -> str | None:
        return self.links.get(port)

    def _remember(self, key: tuple[str, str, str, str], consumer: Sealer | Opener) -> None:
        self._consumers.pop(key, None)
        self._consumers[key] = consumer
        while len(self._consumers) > MAX_CONSUMERS:
            del self._consumers[next(iter(self._consumers))]

    def refresh(self, wall_time_s: float) -> None:
        """Re-derive every consumer's keys for ``wall_time_s`` (a rotated-out key expires)."""
        self.now = wall_time_s
        for (purpose, name, _kind, _tag), consumer in self._consumers.items():
            consumer.update_keys(self.derive(purpose, name))

    def reload(self, ring: KeyRing, wall_time_s: float) -> None:
        """A new version of the key file (rotation): every consumer takes its keys from it."""
        self.ring = ring
        self.reloads += 1
        self.refresh(wall_time_s)

    def status(self) -> dict[str, Any]:
        """What ``auth_status`` reports: never a secret."""
        return {"keys": self.ring.source, "current": self.ring.current,
                "valid": self.ring.valid_ids(self.now), "era": self.era, "reloads": self.reloads,
                "consumers": len(self._consumers)}
