"""The switch engine: ingress pipeline, forwarding, PFC, features and the shell-facing API.

Sans-IO (docs/architecture.md "Engines are sans-IO"): no sockets, clocks, threads or asyncio.
Time only enters as ``now_ns``; frames only leave through :meth:`Switch.transmit`.
Times passed in are clamped to be non-decreasing (a stale ``now_ns`` is treated as the
latest one seen), so a shell with a jittery clock cannot make the link run backwards.

Ingress pipeline of :meth:`Switch.receive`:

1. count; on an ``fcs`` port check and strip the CRC32 trailer (drop + ``fcs_errors``);
2. shorter than an Ethernet header: drop + ``malformed``;
3. MAC control (EtherType 0x8808) or a 01:80:C2:00:00:0x destination: consumed by the
   port, never forwarded; PFC (opcode 0x0101) and 802.3x PAUSE (0x0001) are honoured;
4. features' ``on_ingress`` in attach order (None = consumed);
5. learn the source MAC, look up the destination (a static entry, an ECMP group: the port
   the hash of the frame's flow picks, :mod:`netstack.switch.ecmp`; a learned entry; else
   flood on the flood ports), classify (at ingress, per the ingress port's ``class_map``),
   and enqueue on every egress port (tail drop, ECN marking, PFC ingress accounting).

Flooding follows ``SwitchConfig.flood_ports`` when the config gives them (a spanning tree of
the switch graph, where the switches form a cycle: ``netstack.runtime.switch_config``); a port
outside them carries unicast only and learns nothing, as a port blocked by a spanning tree
would, but it still forwards by the static and ECMP entries.

The plain-port fast path: on a port without feature hooks or FCS, a run of frames that share
their first 16 bytes (one flow's frames, as they come off a ring) shares every decision above,
so after its first frame it is queued in one step when its egress port has no features
(:meth:`Switch._receive_plain`), and a paced egress port without FCS puts a class's frames on
the wire in whole-list steps (``Port._drain_run``). Both give exactly what the frame-by-frame
path gives (tests/switch/test_plain_path.py, test_fast_path.py); anything they do not settle
(MAC control, tags at the edge, floods, lossless classes, ECN thresholds, features) goes
frame by frame.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import replace
from itertools import groupby
from operator import itemgetter
from typing import Any

from headers.errors import HeaderError
from headers.fcs import fcs_ok
from headers.pfc import MAX_QUANTA, build_pfc_frame, parse_pfc_frame
from headers.registry import FCS_LEN
from headers.tcd import ecn_mark_ipv4_frame_inplace

from ..errors import ConfigError
from ..ethernet import NUM_CLASSES
from .config import ImpairmentConfig, PortConfig, SwitchConfig
from .ecmp import EcmpGroup, multiplier
from .feature import MarkingPolicy, SwitchFeature, has_timer, implements
from .forwarding import Fdb, classify, is_link_local
from .pfc import pause_ns
from .port import DepartureHook, Port
from .sourceguard import l3, spoofed

_MAC_CONTROL = b"\x88\x08"
_IPV4 = b"\x08\x00"


def _is_mac_control(frame: bytes) -> bool:
    """MAC control (EtherType 0x8808: PFC, PAUSE) or a link-local group destination
    (01:80:C2:00:00:0x: STP, LLDP...): consumed by the port, never forwarded (802.1Q)."""
    return frame[12:14] == _MAC_CONTROL or (frame[0] == 0x01 and is_link_local(frame))
_PFC_OPCODE = b"\x01\x01"
_PAUSE_OPCODE = b"\x00\x01"  # 802.3x PAUSE (Annex 31B): one quanta value for the whole link



#: 802.1Q and 802.1ad tag protocol identifiers
_VLAN_TPIDS = frozenset((0x8100, 0x88A8))
_VLAN_TAGS = frozenset((b"\x81\x00", b"\x88\xa8"))
#: The bytes every step of the ingress pipeline decides on for an untagged frame: addresses,
#: EtherType, and an IPv4 header's version and ToS (the class). Frames of one flow share them.
_HEAD = itemgetter(slice(0, 16))
_FIRST = itemgetter(0)
_SECOND = itemgetter(1)
#: Shortest run of same-header frames worth queueing at once (shorter ones go frame by frame)
_RUN_MIN = 4
_BYTES_ONLY = frozenset((bytes,))


def _sources_ok(run: list[bytes], guard: frozenset[bytes]) -> bool:
    """Whether an edge port with ``guard`` lets every frame of a fast-path run pass (they share
    their first 16 bytes: one EtherType, untagged); else the run takes the general path, frame by
    frame, where the spoofed ones are counted."""
    if run[0][12:14] == _IPV4:
        return all(f[26:30] in guard for f in run)
    return not any(spoofed(f, guard) for f in run)


def inner_ethertype(frame: bytes) -> int:
    """The EtherType behind up to two VLAN tags (802.1ad then 802.1Q); a frame too short to hold
    the tags it announces gives the last tag's TPID."""
    return l3(frame)[0]

class Switch:
    """A software L2 switch. See :mod:`netstack.switch` for the API contract."""

    def __init__(self, config: SwitchConfig) -> None:
        if not isinstance(config, SwitchConfig):
            raise ConfigError("switch", f"expected a SwitchConfig, got {type(config).__name__}")
        self.config = config
        self.name = config.name
        #: latest time seen (ns); every time argument is clamped to be >= this
        self.now = 0
        self.ports: list[Port] = []
        self._by_name: dict[str, Port] = {}
        for i, pc in enumerate(config.ports):
            p = Port(config.name, i, pc, self._pfc_update)
            self.ports.append(p)
            self._by_name[pc.name] = p
        self.fdb = Fdb(max_learned=config.fdb_max_entries)
        self._load_static()
        #: destination MAC -> its ECMP group (None: the switch has none, the common case)
        self.ecmp: dict[bytes, EcmpGroup] | None = self._ecmp_groups(config)
        flood = config.flood_ports
        #: the ports broadcasts and unknown unicast go out on (a spanning tree's: SwitchConfig)
        self._flood: list[Port] = self.ports if flood is None else [self._by_name[n] for n in flood]
        #: ports outside the flood ports: they learn nothing (every frame a bridge floods stays on the tree)
        self._blocked = frozenset(p.index for p in self.ports if p not in self._flood)
        #: MAC control frames generated while a port's link was being simulated, placed after
        #: the simulation step that produced them (never re-entering a running port)
        self._pending: deque[tuple[Port, bytes, int]] = deque()
        self._flushing = False
        self._idle_ports: list[Port] = []
        self._timer_features: list[SwitchFeature] = []
        #: recent scheduling delay of the live process (set_timer_slack); 0 in virtual time
        self.timer_slack_ns = 0
        #: ports asserting a PFC pause on some class (their refreshes are the only PFC timers)
        self._asserting: set[Port] = set()
        #: EtherTypes an edge port drops (only switches originate them)
        self._switch_only = frozenset(config.switch_only_ethertypes)
        #: ports whose PFC watchdog watches a paused class (the only watchdog timers)
        self._watching: set[Port] = set()
        self.unknown_port = 0
        #: frames of the last receive_batch fully processed (see receive_batch)
        self.batch_done = 0
        self._departure_hook: DepartureHook | None = None
        #: take the plain-port fast path (:meth:`_receive_plain`, ``Port._drain_run``) where it
        #: applies; False sends every frame through the general path (tests compare the two)
        self.plain_path = True
        #: the keys of authenticated frames (netstack.auth.context.AuthContext), set by the
        #: daemon when the topology names a key file; None: protocols send and accept
        #: frames without the trailer
        self.auth: Any = None

    @property
    def departure_hook(self) -> DepartureHook | None:
        """Optional tracing hook ``(port, cls, frame, start_ns, end_ns, release_ns | None)``,
        called for every frame put on a wire (cls -1: MAC control, -2: idle source;
        release None: lost by the impairment model). For pcap writers and tests."""
        return self._departure_hook

    @departure_hook.setter
    def departure_hook(self, hook: DepartureHook | None) -> None:
        self._departure_hook = hook
        for p in self.ports:
            p.departure = hook

    # ================================================================== shell API
    def receive(self, port: str, frame: bytes, now_ns: int) -> None:
        """A frame arrived on ``port`` at ``now_ns``. Never raises on any frame content."""
        self.receive_batch(port, [frame], now_ns)

    def receive_batch(self, port: str, frames: list[bytes], now_ns: int) -> None:
        """Frames read from ``port`` in one drain, all arriving at ``now_ns`` (the shell's data
        path): the ingress pipeline for each, with the per-event bookkeeping done once.

        Never raises on frame content. Should a feature hook raise anything but a HeaderError
        (a bug), the exception propagates and :attr:`batch_done` says how many frames were
        fully processed, so a shell can go on with the rest without repeating any.
        """
        t = self._event(now_ns)
        self.batch_done = 0
        p = self._by_name.get(port)
        if p is None:
            self.unknown_port += len(frames)
            self.batch_done = len(frames)
            return
        c = p.c
        c.rx_frames += len(frames)
        c.rx_bytes += sum(map(len, frames))
        if self.plain_path and len(frames) >= _RUN_MIN and not (p.ingress_hooks or p.fcs):
            self._receive_plain(p, frames, t)
        else:
            self._receive(p, frames, t, 0)
        self._flush(None)

    def forward(self, port: str, frame: bytes, now_ns: int | None = None, *, after_feature: Any = None) -> bool:
        """Forward ``frame`` as if it had just been received on ``port`` and passed
        ``after_feature``'s ingress hook: for frames a feature releases later than their
        arrival (LinkGuardian's reordering buffer, LinkGuardian Algorithm 1). Later features'
        hooks, learning, lookup, classification and enqueue run; FCS, MAC control and rx
        counters do not (the frame passed them on arrival). False if consumed or filtered."""
        p = self._port(port)
        t = self._event(now_ns)
        hooks = p.ingress_hooks
        start = 0
        if after_feature is not None:
            for i, hook in enumerate(hooks):
                if getattr(hook, "__self__", None) is after_feature:
                    start = i + 1
        if start < len(hooks):
            out = self._features_ingress(p, hooks[start:], frame, t)
            if out is None:
                return False
            frame = out
        elif len(frame) < 14:
            p.c.malformed += 1
            return False
        elif _is_mac_control(frame):
            p.c.mac_control_dropped += 1  # (a released frame is checked as an arriving one is)
            return False
        ok = self._forward(p, frame, t)
        self._flush(None)
        return ok

    def transmit(self, now_ns: int) -> list[tuple[str, bytes]]:
        """Frames whose release time is <= ``now_ns``, as (port, frame), in release order.

        Fires due timers (feature ``on_timer``, PFC pause refreshes) first, then simulates
        every link up to ``now_ns``; frames of one port always come out in wire order.
        """
        t = self._clock(now_ns)
        self._fire_timers(t)
        self._flush(None)
        for p in self.ports:
            p.run(t)
        self._flush(t)
        ready: list[list[tuple[int, int, str, bytes]]] = []
        for p in self.ports:
            out = p.out
            if out and out[0][0] <= t:
                mine = []
                name = p.name
                while out and out[0][0] <= t:
                    rel, frame = out.popleft()
                    mine.append((rel, p.index, name, frame))
                ready.append(mine)
        if not ready:
            return []
        if len(ready) == 1:
            return [(name, frame) for _, _, name, frame in ready[0]]
        return [(name, frame) for _, _, name, frame in heapq.merge(*ready)]

    def transmit_by_port(self, now_ns: int) -> list[tuple[str, list[bytes]]]:
        """:meth:`transmit` grouped per port (wire order within each): what a shell sending one
        batch per socket needs, without building and regrouping a tuple per frame."""
        t = self._clock(now_ns)
        self._fire_timers(t)
        self._flush(None)
        for p in self.ports:
            p.run(t)
        self._flush(t)
        out: list[tuple[str, list[bytes]]] = []
        for p in self.ports:
            q = p.out
            if q and q[0][0] <= t:
                if q[len(q) >> 1][0] <= t:
                    # most are due (the shell's case: the frames the last batch put on the wire
                    # are still on it): set the rest aside and take these in one step
                    later = []
                    while q[-1][0] > t:
                        later.append(q.pop())
                    frames = list(map(_SECOND, q))
                    q.clear()
                    later.reverse()
                    q.extend(later)
                else:
                    frames = []
                    append = frames.append
                    pop = q.popleft
                    while q and q[0][0] <= t:
                        append(pop()[1])
                out.append((p.name, frames))
        return out

    def transmit_ahead(self, now_ns: int) -> list[tuple[int, int, bytes]]:
        """Every frame whose transmission has *started* by ``now_ns``, as ``(port index,
        release time, frame)``, even when its release time is later than ``now_ns``.

        For a virtual-time runtime (:mod:`netstack.sim`), which can hold a frame until exactly
        its release time instead of waking up for it: once a frame has started, nothing can
        change when or how it leaves (the link is simulated serially, port.py), so handing it
        over early changes no decision. Fires due timers and simulates every link up to
        ``now_ns``, like :meth:`transmit`. Wire order within a port.
        """
        t = self._clock(now_ns)
        self._fire_timers(t)
        self._flush(None)
        for p in self.ports:
            if p.control or p.queues.nonempty or (p.idle_wake is not None and p.idle_hooks):
                p.run(t)  # (a port with nothing to start would only move its clock)
        self._flush(t)
        out: list[tuple[int, int, bytes]] = []
        for p in self.ports:
            q = p.out
            if q:
                i = p.index
                out.extend([(i, rel, frame) for rel, frame in q])
                q.clear()
        return out

    def next_deadline(self) -> int | None:
        """When to call :meth:`transmit` next (ns), or None when nothing is pending.

        A lower bound: waking at it may release nothing yet (the exact release time of a
        frame is known only once the simulation starts it), in which case a later deadline
        follows. Includes feature deadlines and PFC pause refreshes.
        """
        best: int | None = None
        refreshing = bool(self._asserting)
        for p in self.ports:
            t = p.next_time()
            if t is not None and (best is None or t < best):
                best = t
            if refreshing:
                r = p.gen.next_refresh()
                if r is not None and (best is None or r < best):
                    best = r
        for p in self._watching:
            wd = p.cfg.pfc_watchdog_ns
            t = p.pause.watchdog_deadline(wd) if wd is not None else None
            if t is not None and (best is None or t < best):
                best = t
        for f in self._timer_features:
            t = f.next_deadline()
            if t is not None and (best is None or t < best):
                best = t
        return best

    def counters(self) -> dict[str, dict[str, Any]]:
        """A JSON-able dict per port: counters, queue occupancy per class, pause and PFC state."""
        return {p.name: p.state(self.now) for p in self.ports}

    def switch_counters(self) -> dict[str, Any]:
        """Switch-wide counters (forwarding table, frames for unknown ports)."""
        return {
            "name": self.name,
            "now_ns": self.now,
            "fdb_static": len(self.fdb.static),
            "fdb_learned": len(self.fdb.learned),
            "fdb_full_events": self.fdb.full_events,
            "fdb_moves": self.fdb.moves,
            "unknown_port": self.unknown_port,
        }

    def ecmp_counters(self) -> dict[str, dict[str, int]]:
        """``{destination: {next-hop port: frames}}`` for every ECMP group (the destination's name
        from ``SwitchConfig.ecmp_names``, else its MAC); empty without ECMP."""
        names = self.config.ecmp_names
        return {names.get(mac) or mac.hex(":"): g.counters() for mac, g in (self.ecmp or {}).items()}

    def add_kernel_drops(self, port: str, drops: int) -> None:
        """Add drops the kernel reported for ``port``'s socket (PACKET_STATISTICS tp_drops)."""
        self._port(port).c.kernel_drops += int(drops)

    def clear_counters(self, port: str | None = None) -> None:
        """Zero the counters (and paused-time totals, peak occupancy) of one port or all."""
        for p in [self._port(port)] if port is not None else self.ports:
            p.c.clear()
            p.pause.clear_stats(self.now)
            p.queues.peak = p.queues.used
        if port is None:
            self.unknown_port = 0
            self.fdb.full_events = 0
            self.fdb.moves = 0
            for g in (self.ecmp or {}).values():
                g.clear()

    def fdb_entries(self) -> list[dict[str, Any]]:
        """The forwarding table, for the control socket."""
        ecmp = self.ecmp or {}
        rows = [{"mac": m.hex(":"), "port": self.ports[i].name, "static": True}
                | ({"ecmp": list(ecmp[m].names)} if m in ecmp else {}) for m, i in self.fdb.static.items()]
        rows += [{"mac": m.hex(":"), "port": self.ports[i].name, "static": False}
                 for m, i in self.fdb.learned.items()]
        return rows

    # ============================================================= run-time control
    def update_port(self, port: str, now_ns: int | None = None, **changes: Any) -> PortConfig:
        """Change any :class:`PortConfig` fields at run time (validated; ConfigError names the field).

        The link is simulated up to ``now_ns`` under the old settings first, so a new rate
        or delay applies to frames that start after ``now_ns``. A smaller buffer drops
        nothing already queued; it only refuses new frames until occupancy falls.
        """
        p = self._port(port)
        t = self._event(now_ns)
        new = p.cfg.with_changes(**changes)
        p.run(t)
        old = p.cfg
        self.config = replace(self.config, ports=tuple(new if c.name == new.name else c for c in self.config.ports))
        for cls in p.apply_config(new):
            self._pfc_update(p, cls, t)
        if old.static_macs != new.static_macs:
            self._load_static()
        self._flush(None)
        return new

    def set_rate(self, port: str, rate_bps: int | None, now_ns: int | None = None) -> None:
        self.update_port(port, now_ns, rate_bps=rate_bps)

    def set_delay(self, port: str, delay_ns: int, now_ns: int | None = None) -> None:
        self.update_port(port, now_ns, delay_ns=delay_ns)

    def set_buffer(self, port: str, buffer_bytes: int, now_ns: int | None = None) -> None:
        self.update_port(port, now_ns, buffer_bytes=buffer_bytes)

    def set_ecn_threshold(self, port: str, threshold_bytes: int | None, now_ns: int | None = None) -> None:
        self.update_port(port, now_ns, ecn_threshold_bytes=threshold_bytes)

    def set_impairment(self, port: str, impairment: ImpairmentConfig | dict[str, Any] | None,
                       now_ns: int | None = None) -> None:
        """Install (or with None remove) the seeded egress impairment; its generator restarts from the seed."""
        if isinstance(impairment, dict):
            impairment = ImpairmentConfig.from_dict(impairment)
        p = self._port(port)
        if impairment == p.cfg.impairment:
            p.cfg = replace(p.cfg, impairment=None)  # force a fresh generator from the seed
        self.update_port(port, now_ns, impairment=impairment)

    def set_carrier(self, port: str, up: bool, now_ns: int | None = None) -> bool:
        """The shell saw ``port``'s link lose (``up`` False) or regain its carrier; returns whether
        that changed anything.

        Down, the port drops every frame it holds (queued, waiting to start or on the wire) and
        every frame forwarded to it, counted in ``carrier_drops`` (``link_down`` counts the
        losses). Features keep their state: a LinkGuardian sender keeps its sequence numbers
        and retransmission buffer, so the protected frames lost with the link are recovered
        once it is back, like any other loss (docs/linkguardian.md "Link down").
        """
        p = self._port(port)
        t = self._event(now_ns)
        if p.carrier == bool(up):
            return False
        if up:
            p.regain_carrier(t)
        else:
            p.run(t)  # frames that started before the loss are on the wire: lost with it below
            p.lose_carrier(t)
        self._flush(None)
        return True

    # ================================================================ features
    def attach_feature(self, port: str, feature: SwitchFeature) -> None:
        """Attach a per-port feature (:class:`~netstack.switch.feature.SwitchFeature`)."""
        p = self._port(port)
        if feature in p.features:
            return
        if not any(implements(feature, h) for h in ("on_ingress", "on_egress", "idle_frame")) \
                and not has_timer(feature):
            # hooks are looked up on the class (FeatureBase's no-ops do not count): an object that
            # defines none there would silently do nothing
            raise ConfigError("feature", f"{type(feature).__name__} implements no hook of SwitchFeature "
                                         "(on_ingress, on_egress, idle_frame, next_deadline + on_timer)")
        p.features.append(feature)
        p.refresh_hooks()
        if has_timer(feature):
            self._timer_features.append(feature)
        hook = getattr(feature, "set_timer_slack", None)
        if hook is not None and self.timer_slack_ns:
            hook(self.timer_slack_ns)
        self._refresh_idle_ports()
        p.idle_wake = self.now

    def set_timer_slack(self, slack_ns: int) -> None:
        """How late the live shell's process has recently been scheduled: every feature with a
        ``set_timer_slack`` hook (switch/feature.py) extends its failure timers by it. Virtual
        time never calls this (slack 0)."""
        self.timer_slack_ns = max(0, int(slack_ns))
        for p in self.ports:
            for f in p.features:
                hook = getattr(f, "set_timer_slack", None)
                if hook is not None:
                    hook(self.timer_slack_ns)

    def detach_feature(self, port: str, feature: SwitchFeature) -> None:
        p = self._port(port)
        if feature in p.features:
            p.features.remove(feature)
            p.refresh_hooks()
            if feature in self._timer_features:
                self._timer_features.remove(feature)
            self._refresh_idle_ports()

    def set_marking_policy(self, port: str, policy: MarkingPolicy | None) -> None:
        """Install the dequeue-time marking hook of ``port`` (a TCD detector later); None removes it.

        ``policy.on_dequeue(frame, cls, qlen_bytes, now_ns) -> bytes`` is called for every data
        frame leaving a class queue (``qlen_bytes``: that class's queue after the frame left)
        and may rewrite the ECN field; ``policy.on_pause(cls, paused, now_ns, pause_ns)``, if present,
        is told of every PFC pause/resume received on the port.
        """
        self._port(port).marker = policy

    def enqueue(self, port: str, frame: bytes, cls: int, now_ns: int | None = None) -> bool:
        """A feature's own frame onto ``port``'s class ``cls`` (e.g. retransmissions on 7).

        The frame takes buffer space like any other (tail drop returns False and is
        counted) but no PFC ingress accounting. ``on_egress`` sees it at dequeue.
        """
        p = self._port(port)
        if not isinstance(cls, int) or not 0 <= cls < NUM_CLASSES:
            raise ValueError(f"class {cls!r} outside 0..{NUM_CLASSES - 1}")
        t = self._event(now_ns)
        ok = self._enqueue(p, bytes(frame), cls, None, t)
        self._flush(None)
        return ok

    def pause_class(self, port: str, cls: int, paused: bool, now_ns: int | None = None) -> None:
        """Ask ``port``'s peer to pause (or resume) class ``cls`` with real 802.1Qbb frames.

        LinkGuardian's receiver pauses the sender's normal queue this way (LinkGuardian §3.5):
        the pause goes out ahead of data, is refreshed before its quanta expire while held,
        and combines with the port's lossless threshold (the class is paused while either
        asks for it). Only state changes produce frames (LinkGuardian Algorithm 2).
        """
        p = self._port(port)
        if not isinstance(cls, int) or not 0 <= cls < NUM_CLASSES:
            raise ValueError(f"class {cls!r} outside 0..{NUM_CLASSES - 1}")
        t = self._event(now_ns)
        p.gen.want_feature[cls] = bool(paused)
        self._pfc_update(p, cls, t)
        self._flush(None)

    # ================================================================= internals
    def _port(self, name: str) -> Port:
        p = self._by_name.get(name)
        if p is None:
            raise ConfigError("port", f"no port named {name!r} (ports: {', '.join(self._by_name)})")
        return p

    def _clock(self, now_ns: int | None) -> int:
        if now_ns is not None and now_ns > self.now:
            self.now = int(now_ns)
        return self.now

    def _event(self, now_ns: int | None) -> int:
        """Advance the clock for an event that may change a feature's state: idle sources are re-polled."""
        t = self._clock(now_ns)
        for p in self._idle_ports:
            if p.idle_wake is None:
                p.idle_wake = t
                p.idle_streak = 0
        return t

    def _refresh_idle_ports(self) -> None:
        self._idle_ports = [p for p in self.ports if p.idle_hooks]

    def _ecmp_groups(self, config: SwitchConfig) -> dict[bytes, EcmpGroup] | None:
        """The config's ECMP groups with the multiplier of its seed (None: it has none)."""
        if not config.ecmp_groups:
            return None
        a = multiplier(config.ecmp_seed)
        return {mac: EcmpGroup(tuple(self._by_name[n].index for n in names), names, a)
                for mac, names in config.ecmp_groups.items()}

    def _load_static(self) -> None:
        index = {p.name: p.index for p in self.ports}
        self.fdb.static = {mac: index[name] for mac, name in self.config.all_static().items()}
        for mac in self.fdb.static:
            self.fdb.learned.pop(mac, None)

    def _receive(self, p: Port, frames: list[bytes], t: int, offset: int) -> None:
        """Ingress steps 1-5 (module docstring) for frames that arrived on ``p`` at ``t``, frame
        by frame (``offset``: frames of the batch before these, for :attr:`batch_done`)."""
        c = p.c
        fcs = p.fcs
        hooks = p.ingress_hooks
        forward = self._forward
        edge = p.cfg.edge
        accepts_pfc = p.cfg.accepts_pfc
        guard = p.cfg.source_guard
        switch_only = self._switch_only
        done = 0
        try:
            for frame in frames:
                done += 1
                if type(frame) is not bytes:
                    frame = bytes(frame)
                if fcs:
                    if len(frame) < 14 + FCS_LEN:
                        c.malformed += 1
                        continue
                    if not fcs_ok(frame):
                        c.fcs_errors += 1
                        continue
                    frame = frame[:-FCS_LEN]
                elif len(frame) < 14:
                    c.malformed += 1
                    continue
                if frame[12:14] == _MAC_CONTROL or (frame[0] == 0x01 and is_link_local(frame)):
                    if edge and not accepts_pfc and frame[12:14] == _MAC_CONTROL:
                        c.edge_drops_pfc += 1  # a host may not pause this port's classes
                        continue
                    self._mac_control(p, frame, t)
                    continue
                if edge:
                    etype = frame[12] << 8 | frame[13]
                    if etype in _VLAN_TPIDS:
                        # look through (at most two) VLAN tags: a tag must not smuggle past the edge
                        # what the edge refuses untagged (docs/security.md "Edge filtering")
                        etype = inner_ethertype(frame)
                        if etype == 0x8808 and not accepts_pfc:
                            c.edge_drops_pfc += 1
                            continue
                    if etype in switch_only:
                        c.edge_drops_switch_only += 1  # only a switch may originate this (docs/security.md)
                        continue
                    if guard is not None and spoofed(frame, guard):
                        c.edge_drops_spoofed += 1  # not its host's source address (BCP 38: sourceguard.py)
                        continue
                if hooks:
                    kept = self._features_ingress(p, hooks, frame, t)
                    if kept is None:
                        continue
                    frame = kept
                forward(p, frame, t)
        finally:
            self.batch_done = offset + done  # a frame whose processing raised counts as done (lost)

    def _receive_plain(self, p: Port, frames: list[bytes], t: int) -> None:
        """Ingress steps 1-5 on a port without feature hooks or FCS: the plain-port fast path.

        Frames of one flow arrive in runs that share their first 16 bytes (:data:`_HEAD`), and
        with them every decision of the pipeline: not MAC control, not refused at the edge,
        the same learning, class and destination. The first frame of a run takes the general
        path, which also learns its source; when that leaves the run's decisions settled (the
        source known on this port, a unicast destination known behind a port without
        features), the rest of the run is queued in one step (:meth:`_enqueue_run`; to an ECMP
        group, a step per stretch of frames the hash sends to one port: :meth:`_enqueue_group_run`).
        Every other frame (MAC control, tagged, flooded, short runs...) goes through
        :meth:`_receive` in arrival order, so the outcome is the general path's, frame for frame.
        """
        if set(map(type, frames)) != _BYTES_ONLY:
            frames = [f if type(f) is bytes else bytes(f) for f in frames]  # as _receive takes them
        forward = self._forward
        fdb = self.fdb
        learned = fdb.learned
        static = fdb.static
        ecmp = self.ecmp
        ports = self.ports
        idx = p.index
        cfg = p.cfg
        edge = cfg.edge
        guard = cfg.source_guard
        switch_only = self._switch_only
        done = 0
        pending: list[bytes] = []  # frames for the general path, in order
        for key, group in groupby(frames, _HEAD):
            run = list(group)
            etype = key[12:14]
            if (len(run) < _RUN_MIN or len(key) < 16 or key[0] & 1 or etype == _MAC_CONTROL
                    or (edge and (etype in _VLAN_TAGS or (key[12] << 8 | key[13]) in switch_only))
                    or (guard is not None and not _sources_ok(run, guard))):
                pending += run
                continue
            if pending:
                self._receive(p, pending, t, done)
                done += len(pending)
                pending = []
            done += 1
            self.batch_done = done
            forward(p, run[0], t)
            out = static.get(key[:6])
            if out is None:
                out = learned.get(key[:6])
            hops = ecmp.get(key[:6]) if ecmp is not None else None
            e = ports[out] if out is not None and out != idx and hops is None else None
            src = key[6:12]
            plain = e.plain_egress() if e is not None else hops is not None and self._plain_group(hops, idx)
            if not plain or not (src[0] & 1 or src in static or learned.get(src) == idx):
                self._receive(p, run[1:], t, done)  # (settles nothing here: frame by frame)
                done += len(run) - 1
                continue
            done += len(run) - 1
            self.batch_done = done
            if e is not None:
                self._enqueue_run(e, run, 1, self._class_of(cfg, key), p, t)
            elif hops is not None:
                self._enqueue_group_run(hops, run[1:], self._class_of(cfg, key), p, t)
        if pending:
            self._receive(p, pending, t, done)
            done += len(pending)
        self.batch_done = done

    @staticmethod
    def _class_of(cfg: PortConfig, head: bytes) -> int:
        """The class :meth:`_forward` gives a frame starting with ``head`` (16 bytes or more)."""
        if head[12:14] == _IPV4 and head[14] >> 4 == 4:
            return cfg.class_map[head[15] >> 5]
        return classify(head, cfg.class_map, cfg.default_class)

    def _plain_group(self, group: EcmpGroup, ingress: int) -> bool:
        """Every next hop of ``group`` is a plain egress port (:meth:`Port.plain_egress`) and none
        is the ingress port: a run to it can be queued in whole-list steps."""
        ports = self.ports
        return ingress not in group.ports and all(ports[i].plain_egress() for i in group.ports)

    def _enqueue_group_run(self, group: EcmpGroup, frames: list[bytes], cls: int, ingress: Port, t: int) -> None:
        """:meth:`_enqueue` of each of ``frames`` to the port the hash picks in ``group`` (whose
        ports are plain), with the same outcome, in whole-list steps (:meth:`_enqueue_run`).

        Enqueues on two plain ports touch nothing of each other but the PFC generators (a
        frame queued counts toward its ingress port's XOFF threshold; a dequeue while a link
        runs up to ``t`` may release another port's pause), so without a lossless port in the
        switch the frames are queued a port at a time, and with one, a stretch of consecutive
        frames to one port at a time, in arrival order."""
        ports = self.ports
        picks = list(map(group.pick, frames))
        first = picks[0]
        if picks.count(first) == len(picks):
            self._enqueue_run(ports[first], frames, 0, cls, ingress, t)
            return
        if any(p.gen.mask for p in ports):
            runs = [(out, [f for _, f in stretch]) for out, stretch in groupby(zip(picks, frames, strict=True), _FIRST)]
        else:
            by_port: dict[int, list[bytes]] = {}
            for out, frame in zip(picks, frames, strict=True):
                by_port.setdefault(out, []).append(frame)
            runs = list(by_port.items())
        for out, run in runs:
            self._enqueue_run(ports[out], run, 0, cls, ingress, t)

    def _enqueue_run(self, e: Port, frames: list[bytes], start: int, cls: int, ingress: Port, t: int) -> None:
        """:meth:`_enqueue` of each of ``frames[start:]`` in turn, with the same outcome, on an
        egress port without features (nothing but the switch's own code runs meanwhile).

        Frame by frame while the egress link may start a frame by ``t`` (an enqueue first runs
        the link up to ``t``: a paced link is busy past ``t`` after one or two). From then on
        each enqueue would only append, so the rest is appended at once, provided that none is
        too long, all fit in the buffer (a tail drop must hit the frame it hits), no ECN
        threshold can mark one, and the ingress class is not lossless (its XOFF threshold
        must be crossed by the frame that crosses it); otherwise frame by frame."""
        enqueue = self._enqueue
        n = len(frames)
        i = start
        if not e.carrier:
            e.c.carrier_drops += n - i
            return
        pacer = e.pacer
        while i < n:
            busy = pacer.busy_until
            if (busy if busy > e.clock else e.clock) > t:
                break
            enqueue(e, frames[i], cls, ingress, t)
            i += 1
        if i == n:
            return
        rest = frames[i:]
        lens = list(map(len, rest))
        total = sum(lens)
        q = e.queues
        if (max(lens) > e.max_frame or q.used + total > q.capacity or e.ecn_k is not None
                or ingress.gen.mask >> cls & 1):
            for frame in rest:
                enqueue(e, frame, cls, ingress, t)
            return
        q.push_run(cls, rest, ingress, total)
        ingress.gen.ingress_bytes[cls] += total

    @staticmethod
    def _features_ingress(p: Port, hooks: list[Any], frame: bytes, t: int) -> bytes | None:
        """Ingress step 4: ``hooks`` in order; None when a hook consumed or broke the frame (counted)."""
        c = p.c
        try:
            for hook in hooks:
                frame = hook(frame, t)
                if frame is None:
                    c.feature_consumed += 1
                    return None
                if len(frame) < 14:
                    c.malformed += 1
                    return None
        except HeaderError:
            c.malformed += 1  # a feature could not parse its header: a counted drop
            return None
        if _is_mac_control(frame):
            # a feature unwrapped MAC control (a PFC frame inside a tag): MAC control is consumed
            # by the port it arrives on and never forwarded, whatever a feature returns
            c.mac_control_dropped += 1
            return None
        return frame

    def _forward(self, p: Port, frame: bytes, t: int) -> bool:
        """Ingress step 5: learn, look up, classify, enqueue (or flood). False if filtered."""
        fdb = self.fdb
        src = frame[6:12]
        if not src[0] & 1 and fdb.learned.get(src) != p.index and src not in fdb.static \
                and p.index not in self._blocked:
            fdb.learn(src, p.index)  # (the two lookups skip the call for known stations)
        cfg = p.cfg
        if frame[12:14] == _IPV4 and len(frame) > 15 and frame[14] >> 4 == 4:
            cls = cfg.class_map[frame[15] >> 5]  # classify()'s common case, without the call
        else:
            cls = classify(frame, cfg.class_map, cfg.default_class)
        if frame[0] & 1:
            targets = self._flood  # broadcast / multicast: flood
        else:
            dst = frame[:6]
            out = fdb.static.get(dst)
            if out is None:
                out = fdb.learned.get(dst)
            elif self.ecmp is not None:
                group = self.ecmp.get(dst)
                if group is not None:
                    out = group.pick(frame)  # the next hop of the frame's flow
            if out is None:
                targets = self._flood  # unknown unicast: flood
            elif out == p.index:
                p.c.filtered += 1  # the destination is behind the port it came from
                return False
            else:
                self._enqueue(self.ports[out], frame, cls, p, t)
                return True
        for e in targets:
            if e is not p:
                self._enqueue(e, frame, cls, p, t)
        return True

    def _enqueue(self, e: Port, frame: bytes, cls: int, ingress: Port | None, t: int) -> bool:
        if not e.carrier:
            e.c.carrier_drops += 1  # the link is down: nothing to queue for
            return False
        n = len(frame)
        if n > e.max_frame and ingress is not None:
            # forwarded frames only: a feature's own frames (e.g. a LinkGuardian retransmission
            # that already carries its 5-byte tag) are trusted to fit the link
            e.c.mtu_drops += 1
            return False
        # decide every frame boundary before t without this frame (strict priority "as if
        # the pacer ran continuously": it cannot overtake a frame that had already started).
        # When the link is busy past t the simulation has nothing to decide yet: skip the call
        # (the data path's most frequent case under load).
        busy = e.pacer.busy_until
        if (busy if busy > e.clock else e.clock) <= t:
            e.run(t)
        q = e.queues
        if q.used + n > q.capacity:
            ec = e.c
            ec.queue_drops += 1
            ec.queue_drops_class[cls] += 1
            return False
        k = e.ecn_k
        if (k is not None and q.class_bytes[cls] > k and frame[12:14] == _IPV4 and n >= 34
                and (frame[15] & 3) in (1, 2)):
            # RFC 3168 marking at a queue threshold (DCTCP/DCQCN style): ECT -> CE with an
            # incremental checksum update (headers.tcd, RFC 1624); Not-ECT is never marked
            buf = bytearray(frame)
            try:
                if ecn_mark_ipv4_frame_inplace(buf, 14):
                    frame = bytes(buf)
                    e.c.ecn_marked += 1
            except HeaderError:
                pass  # not a well-formed IPv4 header: forward unmarked
        q.push(cls, frame, ingress)
        if ingress is not None and ingress.gen.add(cls, n):
            self._pfc_update(ingress, cls, t)
        return True

    def _mac_control(self, p: Port, frame: bytes, t: int) -> None:
        c = p.c
        c.mac_control_rx += 1
        if frame[12:14] != _MAC_CONTROL or len(frame) < 18:
            return  # STP/LLDP/LACP...: link-local, consumed, nothing to do
        opcode = frame[14:16]
        if opcode == _PFC_OPCODE:
            try:
                pfc = parse_pfc_frame(frame)
            except HeaderError:
                # counted once: as malformed, not also as a MAC-control frame (the counters of
                # a port add up to its rx_frames; netstack fuzz checks that)
                c.mac_control_rx -= 1
                c.malformed += 1
                return
            updates = [(cls, pfc.quanta[cls]) for cls in range(NUM_CLASSES) if pfc.class_enable >> cls & 1]
        elif opcode == _PAUSE_OPCODE:
            quanta = frame[16] << 8 | frame[17]
            updates = [(cls, quanta) for cls in range(NUM_CLASSES)]
        else:
            return
        c.pfc_rx += 1
        # a frame already on the wire finishes: decide every boundary up to t first
        p.run(t)
        rate = p.cfg.rate_bps
        marker = p.marker
        on_pause = getattr(marker, "on_pause", None) if marker is not None else None
        wd = p.cfg.pfc_watchdog_ns
        enabled = p.cfg.pfc_enable_mask
        for cls, quanta in updates:
            if not enabled >> cls & 1:
                if quanta:
                    c.pauses_refused += 1  # PFC is not enabled for this class here (802.1Qbb)
                continue
            if wd is not None and quanta and p.pause.ignored(cls, t, wd):
                c.pfc_watchdog_ignored += 1  # the class is recovering from a pause storm
                continue
            p.pause.apply(cls, t, pause_ns(quanta, rate))
            if wd is not None and quanta:
                self._watching.add(p)
            if quanta:
                c.pauses_rx += 1
                c.pauses_rx_class[cls] += 1
            else:
                c.resumes_rx += 1
            if on_pause is not None:
                on_pause(cls, bool(quanta), t, pause_ns(quanta, rate) if quanta else None)

    def _pfc_update(self, p: Port, cls: int, t: int) -> None:
        """Send a pause/resume for (p, cls) if its effective state changed (Algorithm 2's curr_state)."""
        gen = p.gen
        want = gen.want_thresh[cls] or gen.want_feature[cls]
        if want == gen.asserted[cls]:
            return
        gen.asserted[cls] = want
        if want:
            self._asserting.add(p)
        elif not any(gen.asserted):
            self._asserting.discard(p)
        if want:
            p.c.pauses_tx += 1
            gen.refresh_at[cls] = t + self._refresh_interval(p)
        else:
            p.c.resumes_tx += 1
            gen.refresh_at[cls] = 0
        self._send_pfc(p, cls, MAX_QUANTA if want else 0, t)

    @staticmethod
    def _refresh_interval(p: Port) -> int:
        # half the pause lifetime: the refresh reaches the peer well before the pause expires
        return max(1, pause_ns(MAX_QUANTA, p.cfg.rate_bps) // 2)

    def _send_pfc(self, p: Port, cls: int, quanta: int, t: int) -> None:
        q = [0] * NUM_CLASSES
        q[cls] = quanta
        self._pending.append((p, build_pfc_frame(p.mac, 1 << cls, q, p.cfg.pfc_dst), t))

    def _fire_timers(self, t: int) -> None:
        if self._watching:
            self._fire_watchdogs(t)
        for p in self.ports if self._asserting else ():  # (nothing to refresh: the common case)
            gen = p.gen
            if not any(gen.asserted):
                continue
            for cls in range(NUM_CLASSES):
                r = gen.refresh_at[cls]
                while gen.asserted[cls] and r and r <= t:
                    p.c.pause_refreshes_tx += 1
                    self._send_pfc(p, cls, MAX_QUANTA, r)
                    r += self._refresh_interval(p)
                    gen.refresh_at[cls] = r
        for f in list(self._timer_features):
            deadline = f.next_deadline()
            if deadline is not None and deadline <= t:
                self._event(t)
                f.on_timer(t)

    def _fire_watchdogs(self, t: int) -> None:
        """The PFC watchdog (as production switches have it): a class its peer has kept paused
        for ``pfc_watchdog_ns`` without a break is released, counted, and its pauses are ignored
        until the storm has been quiet as long (docs/security.md "PFC watchdog")."""
        for p in list(self._watching):
            wd = p.cfg.pfc_watchdog_ns
            if wd is None:
                self._watching.discard(p)
                continue
            p.run(t)  # every frame boundary up to t is decided under the pause, as at a resume
            released = p.pause.watchdog(t, wd)
            if released:
                p.c.pfc_watchdog_events += len(released)
                on_pause = getattr(p.marker, "on_pause", None) if p.marker is not None else None
                for cls in released:
                    if on_pause is not None:
                        on_pause(cls, False, t)
            if not p.pause.watching():
                self._watching.discard(p)

    def _flush(self, run_to: int | None) -> None:
        """Place pending MAC control frames on their ports (and, in transmit, simulate on to ``run_to``)."""
        if self._flushing:
            return
        self._flushing = True
        try:
            pending = self._pending
            while pending:
                port, frame, s = pending.popleft()
                port.add_control(frame, s)
                if run_to is not None:
                    port.run(run_to)
        finally:
            self._flushing = False
