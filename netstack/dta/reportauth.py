"""Authenticated DTA reports (docs/dta.md "Authenticated reports"), sans-IO.

When the topology names a key file, every reporter seals the UDP payload of each report with
the optional trailer of :mod:`headers.auth` (``report || key_id:8 era:32 seq:32 mac:64``; the
IPv4 and UDP lengths and the UDP checksum cover it), under its own key: purpose
:data:`~netstack.auth.keys.PURPOSE_DTA_REPORTER`, name = the reporter's IPv4 source address in
dotted-quad text ("10.0.0.1"). The translator opens each report with the
:class:`~netstack.auth.frame.Opener` of the report's IPv4 source address before it decodes it
(:class:`ReportAuth`); a report refused is counted per reason and dropped, never translated.

Who may report is fixed when the translator is enabled: the topology's hosts (``dta_enable``'s
``reporters``), at most :data:`MAX_REPORTERS`. Each gets its opener then, so an attacker who
sends from random source addresses makes the translator do one dictionary lookup per frame
(``unknown_reporter``) and allocate nothing: no key derivation, no MAC, no state per address.
From the address of a legitimate reporter, a frame costs one AES-CMAC of its length
(``forged``) and changes nothing: the MAC is checked before the replay window is touched.

The keys are per reporter: one reporter's frames never open under another's key, so spoofing
another reporter's source address gets ``forged``, and replaying its own frames ``replayed``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

from ..auth import keys
from ..auth.frame import DEFAULT_WINDOW, REASONS, U32, AuthFailure, Opener, Sealer, era_now
from ..auth.keys import PURPOSE_DTA_REPORTER

#: a report from an IPv4 source that is not among the translator's reporters
UNKNOWN_REPORTER = "unknown_reporter"
#: every reason a report is refused, in the order they are checked
REFUSALS = (UNKNOWN_REPORTER, *REASONS)
#: reporters one translator authenticates (one opener each, made at enable time)
MAX_REPORTERS = 1024
#: the replay window per reporter, in reports: how far out of order one may arrive and still count
REPORT_WINDOW = DEFAULT_WINDOW
#: the AuthContext tag of the translator's openers (one per reporter; enabling again reuses them)
OPENER_TAG = "dta-translator"


class OpenerSource(Protocol):
    """What :func:`report_openers` uses of :class:`netstack.auth.context.AuthContext`."""

    def opener(self, purpose: str, name: str, tag: str = "", window: int = DEFAULT_WINDOW) -> Opener: ...


def reporter_name(ip: str | bytes) -> str:
    """The key-derivation name of a reporter: its IPv4 address as dotted-quad text."""
    return str(ipaddress.IPv4Address(ip))


def next_era(wall_time_s: float, highest: Sequence[int] | None = None) -> int:
    """The era a reporter starting now should seal with: its start time (:func:`era_now`), or one
    past the newest era the translator accepted from it (``highest`` = (era, seq), as its status
    shows it) when that is not older, so that a reporter run twice within a second is not refused
    as a replay of the first run."""
    era = era_now(wall_time_s)
    if highest:
        last = highest[0]
        if isinstance(last, int) and era <= last < U32:
            era = last + 1
    return era


def report_openers(source: OpenerSource, reporters: Iterable[str], *, keep: Mapping[str, Opener] | None = None,
                   window: int = REPORT_WINDOW) -> dict[str, Opener]:
    """One opener per reporter address (dotted-quad text, :func:`reporter_name`). An opener in
    ``keep`` (the previous translator's) is reused, so enabling the translator again keeps every
    reporter's replay window. ValueError for a bad address or more than :data:`MAX_REPORTERS`."""
    names = list(dict.fromkeys(reporter_name(r) for r in reporters))
    if len(names) > MAX_REPORTERS:
        raise ValueError(f"{len(names)} reporters; a translator authenticates at most {MAX_REPORTERS}")
    keep = keep or {}
    return {n: keep[n] if n in keep else source.opener(PURPOSE_DTA_REPORTER, n, OPENER_TAG, window)
            for n in names}


@dataclass(slots=True)
class ReportAuthCounters:
    """What :class:`ReportAuth` counts (its ``c``): every report offered is ``ok`` or refused for
    exactly one of :data:`REFUSALS` (the fields after ``ok``, in that order)."""

    ok: int = 0
    unknown_reporter: int = 0
    truncated: int = 0
    unknown_key: int = 0
    forged: int = 0
    stale_era: int = 0
    replayed: int = 0


assert tuple(f.name for f in fields(ReportAuthCounters))[1:] == REFUSALS


class ReportAuth:
    """Checks and strips the trailers of reports: :meth:`open` returns the report without its
    trailer, or None (counted in ``c`` under one of :data:`REFUSALS`).

    ``openers`` maps each reporter's IPv4 address (4 bytes or text) to its opener; nothing is
    ever added later. Every call counts exactly once: ``c.ok`` or one reason of :data:`REFUSALS`.
    """

    def __init__(self, openers: Mapping[str | bytes, Opener]) -> None:
        if len(openers) > MAX_REPORTERS:
            raise ValueError(f"{len(openers)} reporters; a translator authenticates at most {MAX_REPORTERS}")
        self._openers: dict[bytes, Opener] = {ipaddress.IPv4Address(ip).packed: o for ip, o in openers.items()}
        self.c = ReportAuthCounters()

    def __len__(self) -> int:
        return len(self._openers)

    def open(self, src_ip: bytes, sealed: bytes) -> bytes | None:
        opener = self._openers.get(src_ip)
        if opener is None:
            self.c.unknown_reporter += 1
            return None
        try:
            data = opener.open(sealed)
        except AuthFailure as exc:
            setattr(self.c, exc.reason, getattr(self.c, exc.reason) + 1)
            return None
        self.c.ok += 1
        return data

    def status(self) -> dict[str, Any]:
        """JSON-able: totals, and per reporter that sent anything its opener's counters and
        ``highest`` (era, seq) accepted (the openers' counters run on across re-enables)."""
        per = {}
        for ip, o in self._openers.items():
            if o.c.ok or o.refused:
                hi = o.highest
                per[reporter_name(ip)] = {"ok": o.c.ok,
                                          "refused": {r: n for r, n in asdict(o.c).items() if r != "ok" and n},
                                          "highest": list(hi) if hi is not None else None}
        return {"reporters": len(self._openers), "window": min((o.window for o in self._openers.values()),
                                                                 default=REPORT_WINDOW),
                "ok": self.c.ok, "refused": {r: getattr(self.c, r) for r in REFUSALS}, "per_reporter": per}


def reporter_sealer(key_file: str, ip: str | bytes, era: int, now_s: float) -> Sealer:
    """The sealer of the reporter at ``ip`` (its key derived from ``key_file``'s for its address,
    as the translator derives it) starting at ``era``: what ``netstack dta report --key-file`` and
    ``netstack fuzz dta`` on a keyed topology seal with. KeyFileError for a bad key file."""
    ring = keys.load(key_file)
    return Sealer(ring.derive(PURPOSE_DTA_REPORTER, reporter_name(ip), now_s), era)


__all__ = ["MAX_REPORTERS", "OPENER_TAG", "REFUSALS", "REPORT_WINDOW", "UNKNOWN_REPORTER", "OpenerSource",
           "ReportAuth", "ReportAuthCounters", "next_era", "report_openers", "reporter_name", "reporter_sealer"]
