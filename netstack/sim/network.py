"""A topology in virtual time: the same ``Switch`` engines, host models, and links as delay lines.

:class:`Network` reads the same :class:`~netstack.topo.model.Topology` as ``netstack up`` and
builds what the live runtime would start, without a namespace or a socket:

- every switch node is a :class:`netstack.switch.Switch` with exactly the config its daemon
  would get (``runtime.switch_config``: ports, rates, delays, buffers, static forwarding, ECMP
  groups and seed, flood ports, the switch-backend impairment) and the features the file
  names (``netstack.switch.plugins``: LinkGuardian, ...), attached through the same entry points;
- every host or collector is a :class:`~netstack.sim.hosts.Host`: a NIC and the host models
  (apps) a scenario puts on it;
- every link is two :class:`Channel` objects, one per direction.

Links as delay lines. A switch port already serialises each frame at its line rate and adds
the propagation delay (``netstack.switch.port``): the switch hands the frame over with its
*release time*, and the channel delivers it to the peer at exactly that time. A host has no
such engine, so a channel leaving a host serialises at the link's rate and adds the link's
delay itself (the host's NIC). Live, a host's veth has neither: the sim models the NIC the
papers' hosts have.

Impairments are the live ones, per direction, seeded from the run's seed:

- ``nft``/``netem``/``auto`` links: independent per-frame loss and corruption drawn by the
  switch's model (``netstack.switch.impair``); corruption overwrites byte 22 as the nft backend
  does (0x55, or 0xaa where it already was 0x55), so on a link with the software FCS the
  receiving switch drops the frame as an FCS error, and a host drops a corrupted IPv4 header
  on its checksum, as the kernel does;
- ``switch`` backend: the switch port's own model (Bernoulli or Gilbert-Elliott), configured
  on the sending switch exactly as live.

Every frame is accounted for: a channel counts what it was given, lost, corrupted and
delivered, and what is still on its way (``pending``); switches and hosts count the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from heapq import heappush
from typing import Any

from ..ethernet import wire_bytes
from ..switch import ImpairmentConfig, Switch, SwitchConfig
from ..switch.impair import Impairment, Verdict
from ..switch.pacer import Pacer
from ..topo import netns
from ..topo.model import Backend, Link, LinkEnd, NodeKind, Topology
from .hosts import Host
from .loop import EventLoop, SimError

#: The byte the nft backend overwrites (netstack.topo.impair.DEFAULT_CORRUPT_OFFSET: inside the
#: software FCS's coverage and, in IPv4 frames, the TTL, which the header checksum covers).
CORRUPT_OFFSET = 22


class Channel:
    """One direction of a link: what ``src`` sends reaches ``dst`` at its release time.

    ``put(frame, release_ns)`` is for a switch port (release time known); ``send(frame)`` is for
    a host (the channel serialises at ``rate_bps`` and adds ``delay_ns``).
    """

    __slots__ = (
        "_deliver",
        "carrier",
        "carrier_lost",
        "corrupted",
        "delay",
        "delivered",
        "dst",
        "dst_port",
        "duplicated",
        "fate",
        "impair",
        "late",
        "link",
        "loop",
        "lost",
        "nic",
        "nic_peak",
        "pending",
        "sent",
        "src",
        "src_port",
        "to_switch_fcs",
    )

    def __init__(self, loop: EventLoop, link: Link, src: LinkEnd, dst: LinkEnd, dst_node: Any,
                 impair: Impairment | None, host_nic: bool) -> None:
        self.loop = loop
        self.link = link.name
        self.src = src.node
        self.src_port = src.ifname
        self.dst = dst.node
        self.dst_port = dst.ifname
        self._deliver = dst_node.on_frame
        self.impair = impair
        #: the receiver checks a software FCS: a corrupted frame is dropped there (an FCS error)
        self.to_switch_fcs = link.fcs
        self.nic = Pacer(link.rate_bps) if host_nic else None
        self.delay = link.delay_ns
        self.sent = self.lost = self.corrupted = self.delivered = self.pending = 0
        #: frames a switch handed over after their release time (modelling slack, see put)
        self.late = 0
        #: the host NIC's backlog peak (ns of queued transmission)
        self.nic_peak = 0
        #: a scripted fate per frame, for tests: ``fate(i, frame) -> (lost, duplicated, extra_ns)`` for
        #: the i-th frame put on the channel (an extra delay lets later frames overtake it)
        self.fate: Callable[[int, bytes], tuple[bool, bool, int]] | None = None
        self.duplicated = 0
        #: the link has carrier (Network.set_link); without it every frame put is lost, counted
        self.carrier = True
        self.carrier_lost = 0

    @property
    def name(self) -> str:
        return f"{self.link}:{self.src}>{self.dst}"

    def send(self, frame: bytes, at_ns: int | None = None) -> None:
        """A host puts ``frame`` on its NIC now (or at ``at_ns``, for a paced batch): it starts when
        the NIC is free, takes its line time at the link rate, then the link's delay."""
        nic = self.nic
        if nic is None:
            raise SimError(f"{self.name}: send() is for a host's NIC; a switch hands frames over with put()")
        now = self.loop.now
        if at_ns is not None and at_ns > now:
            now = at_ns
        start = nic.busy_until if nic.busy_until > now else now
        if start - now > self.nic_peak:
            self.nic_peak = start - now
        end = nic.start(start, wire_bytes(len(frame)))
        self.put(frame, end + self.delay)

    def put(self, frame: bytes, release_ns: int) -> None:
        """``frame`` leaves the sender's end at ``release_ns`` (serialisation and delay included)."""
        i = self.sent
        self.sent += 1
        if not self.carrier:
            self.carrier_lost += 1
            return
        imp = self.impair
        if imp is not None:
            verdict = imp.decide()
            if verdict is Verdict.LOSE:
                self.lost += 1
                return
            if verdict is Verdict.CORRUPT:
                self.corrupted += 1
                frame = _corrupt(frame)
        loop = self.loop
        if release_ns < loop.now:
            # A switch can hand over a MAC control frame generated for a port whose simulation was
            # already past that instant (netstack.switch.port.Port.add_control: an error of at most
            # one frame time). Live, it would leave at the next wake-up; here, at once. Counted.
            self.late += 1
            release_ns = loop.now
        if imp is not None and imp.shapes:  # netem's delay, jitter and reorder (switch/impair.py), its duplicate
            release_ns += imp.hold_ns()
            if imp.duplicates():
                self.duplicated += 1
                self.pending += 1
                loop.call_at(release_ns, self._arrive, frame)
        if self.fate is not None:
            lost, dup, extra = self.fate(i, frame)
            if lost:
                self.lost += 1
                return
            release_ns += extra
            if dup:
                self.duplicated += 1
                self.pending += 1
                loop.call_at(release_ns + 1, self._arrive, frame)
        self.pending += 1
        # (loop.call_at inlined: one frame, one heap entry, on the hottest path)
        loop._seq += 1
        heappush(loop._heap, (release_ns, loop._seq, self._arrive, (frame,)))

    def _arrive(self, frame: bytes) -> None:
        self.pending -= 1
        self.delivered += 1
        self._deliver(self.dst_port, frame)


    def tap(self, handler: Callable[[str, bytes], None]) -> Callable[[str, bytes], None]:
        """Frames this channel delivers go to ``handler(port, frame)`` from now on; the handler it
        had is returned, for the tap to pass on what is not its own (a NIC's MAC in front of its
        host reads PFC frames first: :mod:`netstack.sim.nic`)."""
        previous, self._deliver = self._deliver, handler
        return previous
    def counters(self) -> dict[str, Any]:
        imp = self.impair
        out = {"link": self.link, "from": self.src, "to": self.dst, "sent": self.sent, "lost": self.lost,
               "corrupted": self.corrupted, "delivered": self.delivered, "in_flight": self.pending,
               "late_releases": self.late, "carrier_lost": self.carrier_lost}
        if self.fate is not None or (imp is not None and imp.shapes):
            out["duplicated"] = self.duplicated
        if self.nic is not None:
            out["nic_backlog_peak_ns"] = self.nic_peak
        if imp is not None:
            out["impairment"] = {"loss": imp.cfg.loss, "corrupt": imp.cfg.corrupt, "seed": imp.cfg.seed}
            if imp.shapes:
                out["impairment"].update(delay_ns=imp.cfg.delay_ns, jitter_ns=imp.cfg.jitter_ns,
                                         duplicate=imp.cfg.duplicate, reorder=imp.cfg.reorder)
        return out


def _corrupt(frame: bytes) -> bytes:
    """The nft backend's corruption (docs/topology.md): byte 22 becomes 0x55, or 0xaa if it was 0x55."""
    if len(frame) <= CORRUPT_OFFSET:
        return frame  # nft cannot write past the end either: the frame passes untouched
    b = bytearray(frame)
    b[CORRUPT_OFFSET] = 0xAA if b[CORRUPT_OFFSET] == 0x55 else 0x55
    return bytes(b)


class SwitchNode:
    """A :class:`Switch` driven by the event loop: frames in at their arrival time, frames out
    to the channels as soon as they start (with their release time), woken at its deadline."""

    __slots__ = ("_wake_at", "loop", "name", "out", "switch", "wakes")

    def __init__(self, loop: EventLoop, name: str, switch: Switch) -> None:
        self.loop = loop
        self.name = name
        self.switch = switch
        #: channel per port index (filled by the network)
        self.out: list[Channel] = []
        self._wake_at: int | None = None
        self.wakes = 0

    def on_frame(self, port: str, frame: bytes) -> None:
        now = self.loop.now
        self.switch.receive(port, frame, now)
        self.service(now)

    def _wake(self, at: int) -> None:
        if at != self._wake_at:
            return  # superseded by an earlier wake-up
        self._wake_at = None
        self.wakes += 1
        self.service(at)

    def service(self, now: int) -> None:
        """Timers, links up to ``now``, every started frame to its channel, the next wake-up."""
        sw = self.switch
        out = self.out
        for idx, release, frame in sw.transmit_ahead(now):
            out[idx].put(frame, release)
        d = sw.next_deadline()
        if d is not None:
            if d < now:
                d = now
            w = self._wake_at
            if w is None or d < w:
                self._wake_at = d
                self.loop.call_at(d, self._wake, d)


class Network:
    """``topology`` in virtual time (see the module docstring).

    ``seed`` seeds every impairment (channels and switch ports alike), so the same topology,
    scenario and seed give the same frame fates, and another seed other fates.
    """

    def __init__(self, topology: Topology, *, seed: int = 1, prefix: str | None = None,
                 loop: EventLoop | None = None) -> None:
        from ..runtime import switch_config  # (the live runtime's config builder, pure)
        from ..switch import plugins
        from ..topo import sections

        self.topology = topology
        self.seed = int(seed)
        self.loop = loop or EventLoop()
        built = netns.plan(topology, prefix)
        self.built = built
        self.switches: dict[str, SwitchNode] = {}
        self.hosts: dict[str, Host] = {}
        self.channels: list[Channel] = []
        features = plugins.port_features(topology)
        for node in topology.nodes:
            if node.kind is NodeKind.SWITCH:
                data = switch_config(topology, built, node.name)
                cfg = SwitchConfig.from_json(data["switch"])
                cfg = replace(cfg, ports=tuple(
                    p if p.impairment is None else replace(p, impairment=replace(p.impairment, seed=self.seed))
                    for p in cfg.ports))
                self.switches[node.name] = SwitchNode(self.loop, node.name, Switch(cfg))
            else:
                link = topology.links_of(node.name)[0]
                end = link.end(node.name)
                assert node.ip is not None
                self.hosts[node.name] = Host(self, node.name, node.kind, bytes.fromhex(end.mac.replace(":", "")),
                                             node.ip.ip.packed, end.ifname)
        self.arp = {h.ip: h.mac for h in self.hosts.values()}
        for link in topology.links:
            impaired = {e.node for e in link.impaired_ends()}
            for src, dst in ((link.a, link.b), (link.b, link.a)):
                imp = None
                kernel = link.impairment is not None and link.impairment.backend is not Backend.SWITCH
                if src.node in impaired and kernel:
                    li = link.impairment
                    assert li is not None
                    cfg = ImpairmentConfig(loss=li.loss, corrupt=li.corrupt, seed=self.seed, delay_ns=li.delay_ns,
                                           jitter_ns=li.jitter_ns, duplicate=li.duplicate, reorder=li.reorder)
                    imp = Impairment(cfg, f"{link.name}:{src.node}>{dst.node}")
                dst_node = self.switches.get(dst.node) or self.hosts[dst.node]
                ch = Channel(self.loop, link, src, dst, dst_node, imp, host_nic=src.node in self.hosts)
                self.channels.append(ch)
                if src.node in self.switches:
                    sn = self.switches[src.node]
                    idx = next(p.index for p in sn.switch.ports if p.name == src.ifname)
                    while len(sn.out) <= idx:
                        sn.out.append(None)  # type: ignore[arg-type]
                    sn.out[idx] = ch
                else:
                    self.hosts[src.node].nic = ch
        self.features: dict[str, list[str]] = {}
        for name, sn in self.switches.items():
            mine = {ifname: f for (node, ifname), f in features.items() if node == name}
            self.features[name] = plugins.attach(sn.switch, mine, 0)
            sn.service(0)
        #: the protocols' ``[section]`` tables of the file applied here, as ``netstack up`` applies them
        self.sections = sections.attach_sim(self, sections.checked(topology))
        self._link_faults(topology)

    def _link_faults(self, topology: Topology) -> None:
        """The links the topology declares down, and the flaps it declares (``[links.flap]``),
        as ``netstack up`` runs them live: a flap starts ``start`` after time 0."""
        for link in topology.links:
            if link.state == "down":
                self.set_link(link.name, False)
            flap = link.flap
            if flap is None:
                continue
            period = flap.down_ns + flap.up_ns
            for k in range(flap.count):
                at = flap.start_ns + k * period
                self.loop.call_at(at, self.set_link, link.name, False)
                self.loop.call_at(at + flap.down_ns, self.set_link, link.name, True)

    def set_link(self, link: str, up: bool) -> None:
        """``link`` loses (or regains) its carrier now, both ways, as ``netstack link`` does live:
        a channel without carrier loses what is put on it; a switch port drops and counts what
        it holds and what is forwarded to it (``Switch.set_carrier``)."""
        t = self.loop.now
        chans = [ch for ch in self.channels if ch.link == link]
        if not chans:
            raise KeyError(f"no link {link!r}")
        for ch in chans:
            ch.carrier = up
            sn = self.switches.get(ch.src)
            if sn is not None:
                sn.switch.set_carrier(ch.src_port, up, t)
                sn.service(t)

    # ------------------------------------------------------------------------ access
    @property
    def now(self) -> int:
        return self.loop.now

    def host(self, name: str) -> Host:
        try:
            return self.hosts[name]
        except KeyError:
            raise KeyError(f"no host {name!r} (hosts: {', '.join(self.hosts)})") from None

    def switch(self, name: str) -> Switch:
        try:
            return self.switches[name].switch
        except KeyError:
            raise KeyError(f"no switch {name!r} (switches: {', '.join(self.switches)})") from None

    def channel(self, link: str, src: str) -> Channel:
        """The direction of ``link`` that ``src`` sends on."""
        for ch in self.channels:
            if ch.link == link and ch.src == src:
                return ch
        raise KeyError(f"no link {link!r} with an end at {src!r}")

    def mac_of(self, ip: bytes) -> bytes:
        """The MAC of the host with IPv4 address ``ip`` (the neighbour table every host shares)."""
        try:
            return self.arp[ip]
        except KeyError:
            raise KeyError(f"no host has address {'.'.join(map(str, ip))}") from None

    def service(self, switch: str) -> None:
        """After acting on a switch from outside the loop (enabling a feature, changing a port),
        hand over what it started and re-arm its wake-up, as the daemon's control handler does."""
        self.switches[switch].service(self.loop.now)

    # --------------------------------------------------------------------------- run
    def run(self, until_ns: int | None = None, max_events: int | None = None) -> int:
        return self.loop.run(until_ns, max_events)

    def in_flight(self) -> int:
        """Frames still on a channel, in a switch queue or awaiting release: 0 when all is done."""
        n = sum(ch.pending for ch in self.channels)
        for sn in self.switches.values():
            for p in sn.switch.ports:
                n += sum(len(q) for q in p.queues.q) + len(p.out)
        return n

    def counters(self) -> dict[str, Any]:
        """Everything counted, JSON-able: switches (as ``netstack status``), channels, hosts."""
        return {
            "switches": {n: {"ports": sn.switch.counters(), "switch": sn.switch.switch_counters(), "wakes": sn.wakes,
                             # a switch with ECMP groups: frames per next hop, as the daemon's status has them
                             **({"ecmp": sn.switch.ecmp_counters()} if sn.switch.ecmp else {})}
                         for n, sn in self.switches.items()},
            "channels": [ch.counters() for ch in self.channels],
            "hosts": {n: h.counters() for n, h in self.hosts.items()},
            "events": self.loop.events,
            "now_ns": self.loop.now,
        }


__all__ = ["CORRUPT_OFFSET", "Channel", "Network", "SwitchNode"]
