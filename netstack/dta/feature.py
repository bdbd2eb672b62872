"""DTA's switch feature: the translator inside the collector's ToR (a :class:`netstack.switch.Switch`).

The translator engine (:mod:`.translator`) is sans-IO; this module is the glue that hooks it into
the software switch through the switch's feature interface (``netstack.switch.feature``), for
the live daemon and the virtual-time runtime alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from headers.registry import UdpPort

from ..engine import Transmit
from ..switch.feature import FeatureBase, SwitchFeature
from .hopreport import HopReporter
from .translator import DTATranslator


class _NamedPort(Protocol):
    @property
    def name(self) -> str: ...


class FeatureHost(Protocol):
    """What :class:`TranslatorFeature` uses of :class:`netstack.switch.Switch`."""

    @property
    def ports(self) -> Sequence[_NamedPort]: ...

    def attach_feature(self, port: str, feature: SwitchFeature) -> None: ...

    def detach_feature(self, port: str, feature: SwitchFeature) -> None: ...

    def enqueue(self, port: str, frame: bytes, cls: int, now_ns: int | None = None) -> bool: ...

    def forward(self, port: str, frame: bytes, now_ns: int | None = None, *, after_feature: object = None) -> bool: ...


class _ReportTap(FeatureBase):
    """Ingress hook on a non-collector port: DTA reports for the collector never reach the FDB."""

    def __init__(self, feature: TranslatorFeature, port: str) -> None:
        self.feature = feature
        self.port = port

    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        return self.feature._intercept(self.port, frame, now_ns)


@dataclass(slots=True)
class TranslatorFeatureCounters:
    """What the feature counts beside its translator (``TranslatorFeature.c``)."""

    enqueue_drops: int = 0  # RoCEv2 frames and NACKs the switch did not queue


class TranslatorFeature(FeatureBase):
    """Runs a :class:`DTATranslator` inside a :class:`netstack.switch.Switch` (the collector's ToR).

    Where it hooks — with the switch's existing per-port feature interface only:

    - ``port`` (the collector-facing port) gets this object: ``on_ingress`` consumes the
      collector's RoCEv2 responses addressed to the translator (UDP 4791 to the translator
      IP) and feeds them to :meth:`DTATranslator.on_roce_response`; ``next_deadline`` /
      ``on_timer`` drive the idle-flush / grace timers.
    - **every other port** gets a small ingress tap. A report (IPv4/UDP dport 40040 to the
      collector's IP) is consumed there, before learning and forwarding, and translated:
      the RoCEv2 frames :meth:`DTATranslator.on_report` returns are ``switch.enqueue``'d on
      ``port`` (class ``cls``), the NACKs it leaves in its ``actions`` on the port the report
      came in on (back towards the reporter, like the P4 code bouncing the packet).
      Everything else passes untouched.

    Why not egress: the switch forwards a report toward the collector port, but
    ``on_egress`` must return exactly one frame, while a report becomes 0..N frames (and a
    NACK goes the other way). Intercepting at ingress is also where the Tofino pipeline
    parses it (§7.2, Fig. 4). Reports that arrive on ``port`` itself are translated too.

    Construction attaches everything (``switch.attach_feature`` ignores repeats, so also
    attaching this object yourself is harmless); :meth:`detach` removes it."""

    def __init__(self, switch: FeatureHost, port: str, translator: DTATranslator, *, cls: int = 0) -> None:
        self.switch = switch
        self.port = port
        self.translator = translator
        self.cls = cls
        self.c = TranslatorFeatureCounters()
        self._collector_ip = translator.collector_ip
        self._own_ip = translator.config.ip
        self._taps: list[tuple[str, _ReportTap]] = []
        switch.attach_feature(port, self)
        for p in switch.ports:
            if p.name != port:
                tap = _ReportTap(self, p.name)
                switch.attach_feature(p.name, tap)
                self._taps.append((p.name, tap))

    def detach(self) -> None:
        self.switch.detach_feature(self.port, self)
        for name, tap in self._taps:
            self.switch.detach_feature(name, tap)
        self._taps.clear()

    # -- feature interface (collector port)
    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        kind = self._classify(frame)
        if kind == "roce":
            self._send(self.translator.on_roce_response(frame, now_ns), self.port, now_ns)
            return None
        if kind == "report":
            return self._intercept(self.port, frame, now_ns)
        return frame

    def next_deadline(self) -> int | None:
        return self.translator.next_deadline()

    def set_timer_slack(self, slack_ns: int) -> None:
        """The live switch daemon's recent scheduling delay (``Switch.set_timer_slack``, twice the
        largest lag of the last seconds): the translator's window time-out waits that much longer
        (:meth:`DTATranslator.set_timer_slack`; docs/dta.md "The window time-out on a loaded host")."""
        self.translator.set_timer_slack(slack_ns)

    def on_timer(self, now_ns: int) -> None:
        self._send(self.translator.on_timer(now_ns), self.port, now_ns)

    # -- internals
    def _classify(self, frame: bytes) -> str | None:
        if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
            return None
        ihl = (frame[14] & 15) * 4
        u = 14 + ihl
        if ihl < 20 or len(frame) < u + 8:
            return None
        dport = frame[u + 2] << 8 | frame[u + 3]
        if dport == UdpPort.DTA and frame[30:34] == self._collector_ip:
            return "report"
        if dport == UdpPort.ROCEV2 and frame[30:34] == self._own_ip and frame[26:30] == self._collector_ip:
            return "roce"
        return None

    def _intercept(self, port: str, frame: bytes, now_ns: int) -> bytes | None:
        if self._classify(frame) != "report":
            return frame
        tr = self.translator
        self._send(tr.on_report(frame, now_ns), self.port, now_ns)
        if tr.actions:  # NACKs; the translator decides them after its RoCEv2 frames, so order holds
            self._send([a.data for a in tr.actions.take_all() if isinstance(a, Transmit)], port, now_ns)
        return None

    def _send(self, frames: list[bytes], port: str, now_ns: int) -> None:
        for f in frames:
            if not self.switch.enqueue(port, f, self.cls, now_ns):
                self.c.enqueue_drops += 1


class _HopTap(FeatureBase):
    """Ingress hook of one port for :class:`HopReporterFeature`."""

    def __init__(self, feature: HopReporterFeature, port: str) -> None:
        self.feature = feature
        self.port = port

    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        return self.feature._tap(self.port, frame, now_ns)


class HopReporterFeature:
    """Runs a :class:`~netstack.dta.hopreport.HopReporter` in a switch (Postcarding, issue 33):
    every port gets an ingress tap; a frame that draws a postcard passes on untouched, before its
    postcard leaves. Where the postcard goes:

    - ``uplink`` (the port toward the collector's ToR) given: queued there (class ``cls``), as a
      switch sends a report it generates. Not switched like the frame: a frame that came *from*
      the collector's side would have its postcard sent back out of the port it came in on, which a
      switch never does.
    - ``uplink`` None (the collector's ToR itself): forwarded *as if it had arrived on the frame's
      port* (``switch.forward`` through every ingress hook of that port), where the translator's
      report tap takes it like any report, whichever was attached first."""

    def __init__(self, switch: FeatureHost, reporter: HopReporter, *, uplink: str | None = None,
                 cls: int = 0) -> None:
        self.switch = switch
        self.reporter = reporter
        self.uplink = uplink
        self.cls = cls
        self._taps: list[tuple[str, _HopTap]] = []
        for p in switch.ports:
            tap = _HopTap(self, p.name)
            switch.attach_feature(p.name, tap)
            self._taps.append((p.name, tap))

    def detach(self) -> None:
        for name, tap in self._taps:
            self.switch.detach_feature(name, tap)
        self._taps.clear()

    def _tap(self, port: str, frame: bytes, now_ns: int) -> bytes:
        postcard = self.reporter.on_frame(frame, now_ns)
        if postcard is not None:
            if self.uplink is not None:
                self.switch.enqueue(self.uplink, postcard, self.cls, now_ns)
            else:  # (False when the translator's tap took it: what it is for)
                self.switch.forward(port, postcard, now_ns)
        return frame

    def counters(self) -> dict[str, object]:
        return self.reporter.counters()


__all__ = ["FeatureHost", "HopReporterFeature", "TranslatorFeature", "TranslatorFeatureCounters"]
