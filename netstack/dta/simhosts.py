"""DTA in virtual time (``netstack.sim``): the collector daemon, the reporter tool and
``netstack dta enable`` as simulated pieces around the same engines.

- :class:`SimCollector`: the collector node's RoCEv2 responder (:class:`~.collector.RoceResponder`)
  over anonymous memory in the default layout (:mod:`.layout`), on the node's UDP port 4791, as
  ``daemons/collector.py`` runs it live ("Direct Telemetry Access" §7.3);
- :class:`SimReporter`: a host sending Key-Write reports (§6.1) at a rate, as
  ``python -m netstack.dta.live report keywrite`` does, and counting the NACKs it gets back;
- :func:`connect`: the translator (:class:`~.translator.DTATranslator` in a
  :class:`~.feature.TranslatorFeature`) on the collector's ToR, connected as
  ``netstack dta enable`` connects it: the collector's connect_info, its QPs bound to the
  translator, then the translator on the port facing the collector; :func:`connect_declared`
  does it for every translator the topology file declares (``[links.features.<end>] dta``,
  :mod:`.topology`), as ``netstack up`` does live.

``netstack/sim`` is generic and imports no protocol: these use its :class:`~netstack.sim.hosts.Host`
and the network's public API only. Everything random is drawn from the run's seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from headers.inet import ip_bytes, mac_bytes
from headers.registry import UdpPort

from ..engine import Transmit
from ..sim.hosts import Host
from ..switch.config import derived_mac
from .collector import RoceResponder
from .control import translator_ip
from .feature import TranslatorFeature
from .layout import build_memory, resolve_layout
from .memory import CollectorMemory
from .options import translator_kwargs
from .query import CollectorQuery
from .reporter import Reporter
from .topology import declared
from .translator import DTATranslator, TranslatorConfig

#: ``Host.services`` key of a collector node's :class:`SimCollector`
SERVICE = "dta-collector"


class SimCollector:
    """The collector daemon on ``host``: responder, memory (anonymous, ``layout`` over the
    default one) and the same ACK coalescing (``ack_every``); QPNs, PSNs, rkeys and addresses
    drawn from ``seed``."""

    def __init__(self, host: Host, *, seed: int, layout: dict[str, Any] | None = None, ack_every: int = 16) -> None:
        self.host = host
        self.memory = CollectorMemory(host.name, directory=None, rng=random.Random(f"{seed}:{host.name}:memory"))
        build_memory(self.memory, resolve_layout(layout))
        self.nic = RoceResponder(self.memory, host.mac, host.ip, rng=random.Random(f"{seed}:{host.name}:qps"),
                                 ack_every=ack_every)
        self.responses = 0
        host.bind_udp(int(UdpPort.ROCEV2), self.on_frame)
        host.add(self)
        host.services[SERVICE] = self

    def on_frame(self, frame: bytes) -> None:
        out = self.nic.receive(frame, self.host.loop.now)
        if self.nic.actions:  # the engine contract (the responder answers with return values only)
            out += [a.data for a in self.nic.actions.take_all() if isinstance(a, Transmit)]
        for r in out:
            self.host.send(r)
        self.responses += len(out)

    def connect_info(self) -> dict[str, Any]:
        """As the daemon's ``connect_info``: each QP's current expected PSN as ``initial_psn``."""
        info = self.nic.connect_info()
        for entry in info["regions"]:
            entry["initial_psn"] = self.nic.qp(entry["name"]).epsn
        return info

    def result(self) -> dict[str, Any]:
        c = self.nic.counters()
        qps = c.pop("qps")
        return {**c, "responses": self.responses,
                "qps": {n: {k: q[k] for k in ("requests", "writes", "acks", "atomic_acks", "naks_psn",
                                              "out_of_sequence_dropped", "duplicates")} for n, q in qps.items()}}


class SimReporter:
    """``count`` Key-Writes from ``host`` to ``collector`` (a host name), report i writing
    ``key + i := value + i`` with ``redundancy`` copies (§6.1), ``rate`` reports/s from
    ``start_ns`` (0: as fast as the NIC sends). NACKs from the translator are counted."""

    def __init__(self, host: Host, collector: str, *, count: int, key: int = 1, value: int = 1000,
                 redundancy: int = 2, rate: float = 0.0, start_ns: int = 0) -> None:
        peer = host.net.host(collector)
        self.host = host
        self.reporter = Reporter(host.mac, host.net.mac_of(peer.ip), host.ip, peer.ip)
        self.count, self.key, self.value, self.redundancy = count, key, value, redundancy
        self.gap_ns = 1e9 / rate if rate > 0 else 0.0
        self.start_ns = start_ns
        self.sent = 0
        self.nacks = 0
        self.last_sent_ns: int | None = None
        host.bind_udp(int(UdpPort.DTA_SOURCE), self._on_nack)
        host.add(self)
        host.loop.call_at(max(start_ns, host.loop.now), self._tick)

    def expected(self) -> dict[int, int]:
        """What the reports wrote: key -> value (32-bit, as the tool wraps them)."""
        return {(self.key + i) & 0xFFFFFFFF: (self.value + i) & 0xFFFFFFFF for i in range(self.count)}

    def _tick(self) -> None:
        rep, host = self.reporter, self.host
        while self.sent < self.count:
            i = self.sent
            host.send(rep.frame(rep.key_write((self.key + i) & 0xFFFFFFFF, (self.value + i) & 0xFFFFFFFF,
                                              self.redundancy)))
            self.sent += 1
            self.last_sent_ns = host.loop.now
            if self.gap_ns:
                if self.sent < self.count:
                    host.loop.call_at(self.start_ns + round(self.sent * self.gap_ns), self._tick)
                return

    def _on_nack(self, frame: bytes) -> None:
        self.nacks += 1

    def result(self) -> dict[str, Any]:
        return {"sent": self.sent, "nacks": self.nacks, "last_sent_ns": self.last_sent_ns}


@dataclass
class SimTranslator:
    """A translator :func:`connect` turned on: where, for which collector, and its engine."""

    switch: str
    port: str
    collector: SimCollector
    feature: TranslatorFeature

    @property
    def translator(self) -> DTATranslator:
        return self.feature.translator


def _tor(net: Any, collector: str) -> tuple[str, str]:
    """The collector's ToR switch and its port facing the collector (DTA §5: where the translator goes)."""
    link = net.topology.links_of(collector)[0]
    end = link.b if link.a.node == collector else link.a
    if end.node not in net.switches:
        raise ValueError(f"{collector} hangs off {end.node}, not a switch: no translator can serve it")
    return end.node, end.ifname


def connect(net: Any, collector: str, *, options: dict[str, Any] | None = None) -> SimTranslator:
    """Turn on the translator for ``collector`` (a collector node) on its ToR, as ``netstack dta
    enable`` does live: the node's :class:`SimCollector` (made here if it has none), its
    connect_info, its QPs bound to the translator's addresses, then the translator on the port
    facing it. ``options``: ``dta_enable``'s (``window``, ``grace_reports``, ``ip``, ``mac``,
    ``cls``...; the declared ones of :mod:`.topology`)."""
    opts = dict(options or {})
    host = net.host(collector)
    col = host.services.get(SERVICE) or SimCollector(host, seed=net.seed)
    switch_name, port = _tor(net, collector)
    switch = net.switch(switch_name)
    hosts = {n.name: str(n.ip) for n in net.topology.nodes if n.ip is not None}  # as in the run state
    ip = str(opts.pop("ip", None) or translator_ip(hosts, collector))
    mac = opts.pop("mac", None)
    mac_b = mac_bytes(mac) if mac else (switch.config.port(port).mac or derived_mac(switch_name, port))
    cls = int(opts.pop("cls", 0))
    for key in ("reporters", "role", "collector"):
        opts.pop(key, None)  # (no keys in virtual time: reports are not authenticated)
    info = col.connect_info()
    col.nic.bind(mac_b, ip_bytes(ip), {r["name"]: r["peer_qpn"] for r in info["regions"]})
    config = TranslatorConfig(info, mac_b, ip_bytes(ip), **translator_kwargs(opts))
    feature = TranslatorFeature(switch, port, DTATranslator(config, net.now), cls=cls)
    net.service(switch_name)
    return SimTranslator(switch_name, port, col, feature)


def connect_declared(net: Any) -> dict[str, SimTranslator]:
    """Every translator the topology declares (:func:`.topology.declared`), connected: by collector."""
    return {d.collector: connect(net, d.collector, options=d.options) for d in declared(net.topology)}


def read_back(collector: SimCollector, expected: dict[int, int], redundancy: int | None = None) -> dict[str, int]:
    """Query the collector's Key-Write store as its CPU would (§6.1.2): how many of ``expected``'s
    keys read back their value, read back another one, or are not found."""
    q = CollectorQuery(collector.memory)
    right = wrong = missing = 0
    for key, value in expected.items():
        got = q.keywrite_get(key, redundancy)
        if got is None:
            missing += 1
        elif got == (value,):
            right += 1
        else:
            wrong += 1
    return {"keys": len(expected), "right": right, "wrong": wrong, "not_found": missing}


__all__ = ["SERVICE", "SimCollector", "SimReporter", "SimTranslator", "connect", "connect_declared", "read_back"]
