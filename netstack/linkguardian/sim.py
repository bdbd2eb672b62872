"""Virtual-time harnesses for LinkGuardian: tests and benchmarks, no sockets, no clock.

:class:`BackToBack` is the seed's Fig. 7 testbed in software: two real
:class:`netstack.switch.Switch` instances joined by a protected link (software FCS on,
seeded corruption/loss on the sw1 -> sw2 direction), a host port on each, and the
LinkGuardian features on the link's two ends. It reports the paper's counters
(§4 "Testbed Setup"): A (frames the sender host offered), B (frames sent on the protected
egress), C (frames received intact at the protected ingress), D (frames the receiver
switch delivered to the receiving host); actual loss ``1 - C/B``, effective loss
``1 - D/A`` and the effective link speed (delivered goodput over the line rate).

:class:`EnginePair` drops the switches: the two engines joined by a slotted link whose
fate per frame a test scripts (loss, duplication, extra delay = reordering). It is the
fast path for property tests and quick loss-rate estimates.

Time and scale (DESIGN.md): both take rates and times as given; to reproduce a paper
setting at ``scale``, divide the rate and use ``LGParams.scaled(scale)``. Reports carry
``time_scale`` so every result says how it was scaled.
"""

from __future__ import annotations

import heapq
import random
import struct
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from netstack.switch import ImpairmentConfig, PortConfig, Switch, SwitchConfig
from netstack.switch.config import DEFAULT_OVERHEAD_BYTES

from .feature import LGReceiverFeature, LGSenderFeature, enable_receiver, enable_sender
from .params import LGParams
from .receiver import LGReceiver
from .sender import DUMMY_BIT, LGSender

#: The paper's link rate whose settings LGParams' defaults are (§4 "Parameters", 100G).
PAPER_RATE_BPS = 100_000_000_000
H1_MAC = bytes.fromhex("020000000101")
H2_MAC = bytes.fromhex("020000000202")
#: IEEE 802 local experimental EtherType: stream frames are not IP, so they classify to
#: the ingress port's default class (0, a protected class by default)
STREAM_ETHERTYPE = 0x88B5
_MAGIC = b"LGS"
_INDEX = struct.Struct("!Q")
_LG = b"\xab\xcd"


def stream_frame(index: int, size: int = 1500, stream: int = 0, src: bytes = H1_MAC, dst: bytes = H2_MAC) -> bytes:
    """A frame of ``size`` bytes (>= 26) carrying ``(stream, index)`` after the Ethernet header."""
    head = dst + src + STREAM_ETHERTYPE.to_bytes(2, "big") + _MAGIC + bytes((stream,)) + _INDEX.pack(index)
    return head + bytes(max(0, size - len(head)))


def stream_index(frame: bytes) -> tuple[int, int] | None:
    """``(stream, index)`` of a frame built by :func:`stream_frame`, else None."""
    if len(frame) >= 26 and frame[12] == 0x88 and frame[13] == 0xB5 and frame[14:17] == _MAGIC:
        return frame[17], _INDEX.unpack_from(frame, 18)[0]
    return None


@dataclass
class StreamStats:
    """What one host saw of one stream."""

    offered: int = 0
    offered_bytes: int = 0
    delivered: int = 0
    delivered_wire_bytes: int = 0
    duplicates: int = 0
    out_of_order: int = 0
    max_index: int = -1
    first_offer_ns: int | None = None
    last_delivery_ns: int | None = None
    first_delivery_ns: int | None = None
    seen: bytearray = field(default_factory=bytearray)
    order: list[int] | None = None
    delivery_times: dict[int, int] | None = None


class _Dequeues:
    """A probe feature: counts frames leaving the protected classes (closed-loop offering)."""

    def __init__(self, classes: tuple[int, ...]) -> None:
        self.mask = sum(1 << c for c in classes)
        self.count = 0

    def on_egress(self, frame: bytes, cls: int, now_ns: int) -> bytes:
        if self.mask >> cls & 1:
            self.count += 1
        return frame


class BackToBack:
    """sw1 [h1, p-sw2] <== protected link ==> sw2 [p-sw1, h2], in virtual time.

    ``lg`` gives the LinkGuardian settings; when None, the paper's 100G settings scaled to
    ``rate_bps`` (``LGParams().scaled(100 Gb/s / rate_bps)``, DESIGN.md "Time and scale").
    ``unprotected=True`` runs the bare link (the baseline); ``protect=False`` builds the
    features but leaves them disabled (enable later with :meth:`enable`). The impairment
    applies to every frame sw1 puts on the link (data, retransmissions, dummies), so
    ``actual_loss`` is measured over all of them, as B and C count in the paper.
    ``record`` keeps the delivery order per stream (memory grows with the stream).
    ``forward_filter(frame, t)``, when given, sees every frame sw1 releases toward sw2
    (with its FCS trailer) and drops it by returning False: a scripted loss on top of
    the seeded impairment (e.g. "lose exactly this frame").
    """

    def __init__(self, *, rate_bps: int | None = 1_000_000_000, delay_ns: int = 1_000, corrupt: float = 0.0,
                 loss: float = 0.0, seed: int = 1, impairment: ImpairmentConfig | None = None,
                 reverse_impairment: ImpairmentConfig | None = None, lg: LGParams | None = None,
                 unprotected: bool = False, protect: bool = True, buffer_bytes: int = 4 << 20,
                 host_rate_bps: int | None = None, mtu: int = 1500, record: bool = True,
                 sw1_port: dict[str, Any] | None = None, sw2_port: dict[str, Any] | None = None,
                 forward_filter: Callable[[bytes, int], bool] | None = None) -> None:
        if impairment is None and (corrupt or loss):
            impairment = ImpairmentConfig(loss=loss, corrupt=corrupt, seed=seed)
        self.rate_bps = rate_bps
        self.delay_ns = delay_ns
        self.record = record
        if lg is None and not unprotected:
            lg = LGParams().scaled(PAPER_RATE_BPS / rate_bps) if rate_bps else LGParams()
        self.params = None if unprotected else lg
        link = {"rate_bps": rate_bps, "delay_ns": delay_ns, "fcs": True, "buffer_bytes": buffer_bytes,
                "mtu": mtu}
        self.sw1 = Switch(SwitchConfig("sw1", (
            PortConfig("h1", rate_bps=host_rate_bps, buffer_bytes=buffer_bytes, mtu=mtu, static_macs=(H1_MAC,)),
            PortConfig("p-sw2", impairment=impairment, static_macs=(H2_MAC,), **{**link, **(sw1_port or {})}),
        )))
        self.sw2 = Switch(SwitchConfig("sw2", (
            PortConfig("p-sw1", impairment=reverse_impairment, static_macs=(H1_MAC,), **{**link, **(sw2_port or {})}),
            PortConfig("h2", rate_bps=host_rate_bps, buffer_bytes=buffer_bytes, mtu=mtu, static_macs=(H2_MAC,)),
        )))
        classes = self.params.data_classes if self.params is not None else (0,)
        self._probe = _Dequeues(classes)
        self.sw1.attach_feature("p-sw2", self._probe)
        self.sender: LGSenderFeature | None = None
        self.receiver: LGReceiverFeature | None = None
        if self.params is not None:
            # through the daemon's entry points, so that feature.status() sees them too
            self.receiver = enable_receiver(self.sw2, "p-sw1", self.params, 0)
            self.sender = enable_sender(self.sw1, "p-sw2", self.params, 0)
            if not protect:
                self.disable(0)
        self.now = 0
        self._offers: list[tuple[int, int, str, bytes]] = []
        self._offer_seq = 0
        self._backlog: list[_Backlog] = []
        self.stats: dict[tuple[str, int], StreamStats] = {}
        self.host_rx: dict[str, int] = {"h1": 0, "h2": 0}
        self.leaked_lg_frames = 0
        self.other_host_frames = 0
        self.events = 0
        self.forward_filter = forward_filter
        self.filtered = 0

    # ------------------------------------------------------------------ protection
    def enable(self, now_ns: int | None = None) -> None:
        """Turn LinkGuardian on (receiver first, then sender) at ``now_ns``."""
        if self.params is None:
            raise RuntimeError("this harness was built unprotected (unprotected=True)")
        self.receiver.enable(now_ns)
        self.sender.enable(now_ns)

    def disable(self, now_ns: int | None = None) -> None:
        """Turn LinkGuardian off (sender first, then receiver) at ``now_ns``."""
        if self.sender is not None:
            self.sender.disable(now_ns)
        if self.receiver is not None:
            self.receiver.disable(now_ns)

    # ----------------------------------------------------------------------- traffic
    def send(self, frame: bytes, at_ns: int, host: str = "h1") -> None:
        """Offer one frame from ``host`` ("h1" or "h2") to its switch at ``at_ns``."""
        if host not in ("h1", "h2"):
            raise ValueError(f"host must be h1 or h2, not {host!r}")
        self._note_offer(frame, host, at_ns)
        heapq.heappush(self._offers, (at_ns, self._offer_seq, host, frame))
        self._offer_seq += 1

    def offer_stream(self, count: int, *, size: int = 1500, start_ns: int | None = None,
                     rate_bps: int | None = None, backlog: int | None = None, stream: int = 0,
                     host: str = "h1") -> None:
        """A sequenced stream of ``count`` frames from ``host`` to the other host.

        Either open loop at ``rate_bps`` (line time of ``size + 24`` bytes per frame), or
        ``backlog`` frames kept queued at sw1's protected egress (closed loop, h1 only:
        the sender is never idle and never overflows: Fig. 8's stress test at line rate).
        """
        start = self.now if start_ns is None else start_ns
        src, dst = (H1_MAC, H2_MAC) if host == "h1" else (H2_MAC, H1_MAC)
        if backlog is not None:
            if host != "h1":
                raise ValueError("backlog offering is for h1 (the protected direction)")
            self._backlog.append(_Backlog(self, count, size, stream, start, backlog))
            return
        if rate_bps is None:
            rate_bps = self.rate_bps
        gap = 0 if not rate_bps else -(-(max(size, 60) + DEFAULT_OVERHEAD_BYTES) * 8 * 1_000_000_000 // rate_bps)
        for i in range(count):
            self.send(stream_frame(i, size, stream, src, dst), start + i * gap, host)

    def _note_offer(self, frame: bytes, host: str, at_ns: int) -> None:
        key = stream_index(frame)
        if key is None:
            return
        st = self._stream(host, key[0])
        st.offered += 1
        st.offered_bytes += len(frame)
        if st.first_offer_ns is None or at_ns < st.first_offer_ns:
            st.first_offer_ns = at_ns

    def _stream(self, host: str, stream: int) -> StreamStats:
        st = self.stats.get((host, stream))
        if st is None:
            st = self.stats[(host, stream)] = StreamStats(order=[] if self.record else None,
                                                         delivery_times={} if self.record else None)
        return st

    # -------------------------------------------------------------------------- run
    def run(self, until_ns: int | None = None, max_events: int | None = None) -> int:
        """Advance virtual time event by event until ``until_ns`` or until nothing is pending.

        Returns the time reached. Every frame a switch releases at ``t`` reaches the peer
        (or the host) at exactly ``t`` (the switch already added serialisation and
        propagation delay).
        """
        sw1, sw2 = self.sw1, self.sw2
        offers = self._offers
        r1, r2 = sw1.receive, sw2.receive
        last_t = -1
        same = 0
        events = 0
        backlog = self._backlog
        while True:
            d1 = sw1.next_deadline()
            d2 = sw2.next_deadline()
            t = d1
            if d2 is not None and (t is None or d2 < t):
                t = d2
            if offers and (t is None or offers[0][0] < t):
                t = offers[0][0]
            for b in backlog:
                if not b.offered and b.count and (t is None or b.start < t):
                    t = max(b.start, self.now)  # a closed-loop stream that has not started yet
            if t is None or (until_ns is not None and t > until_ns):
                break
            if t < self.now:
                t = self.now
            if t == last_t:
                same += 1
                if same > 100_000:
                    raise RuntimeError(f"virtual time stuck at {t} ns")
            else:
                same = 0
                last_t = t
            self.now = t
            fed1 = fed2 = False
            for b in backlog:
                fed1 |= b.top_up(t)
            while offers and offers[0][0] <= t:
                _, _, host, frame = heapq.heappop(offers)
                if host == "h1":
                    r1("h1", frame, t)
                    fed1 = True
                else:
                    r2("h2", frame, t)
                    fed2 = True
            # a switch whose next deadline is later releases nothing now (it is a lower
            # bound on its releases and timers), unless it was just fed
            if fed1 or (d1 is not None and d1 <= t):
                for port, frame in sw1.transmit(t):
                    if port == "p-sw2":
                        if self.forward_filter is not None and not self.forward_filter(frame, t):
                            self.filtered += 1
                            continue
                        r2("p-sw1", frame, t)
                    else:
                        self._host_rx("h1", frame, t)
            if fed2 or (d2 is not None and d2 <= t):
                for port, frame in sw2.transmit(t):
                    if port == "p-sw1":
                        r1("p-sw2", frame, t)
                    else:
                        self._host_rx("h2", frame, t)
            events += 1
            if max_events is not None and events >= max_events:
                break
        self.events += events
        if until_ns is not None and until_ns > self.now:
            self.now = until_ns
        return self.now

    def _host_rx(self, host: str, frame: bytes, t: int) -> None:
        self.host_rx[host] += 1
        if frame[12:14] == _LG:
            self.leaked_lg_frames += 1
            return
        key = stream_index(frame)
        if key is None:
            self.other_host_frames += 1
            return
        src = "h1" if host == "h2" else "h2"
        st = self._stream(src, key[0])
        i = key[1]
        seen = st.seen
        if i >= len(seen):
            seen.extend(bytes(i + 1 - len(seen) + 1024))
        if seen[i]:
            st.duplicates += 1
            return
        seen[i] = 1
        st.delivered += 1
        st.delivered_wire_bytes += max(len(frame), 60) + DEFAULT_OVERHEAD_BYTES
        if i < st.max_index:
            st.out_of_order += 1
        else:
            st.max_index = i
        if st.first_delivery_ns is None:
            st.first_delivery_ns = t
        st.last_delivery_ns = t
        if st.order is not None:
            st.order.append(i)
        if st.delivery_times is not None:
            st.delivery_times[i] = t

    # ----------------------------------------------------------------------- report
    def delivered(self, stream: int = 0, host: str = "h1") -> list[int]:
        """Indices of ``host``'s stream as delivered, in delivery order (needs ``record``)."""
        st = self.stats.get((host, stream))
        if st is None:
            return []
        if st.order is None:
            raise RuntimeError("built with record=False")
        return list(st.order)

    def report(self, stream: int = 0, host: str = "h1") -> dict[str, Any]:
        """Fig. 7/8 counters and derived rates for ``host``'s stream (JSON-able)."""
        st = self.stats.get((host, stream), StreamStats())
        c1 = self.sw1.counters()
        c2 = self.sw2.counters()
        egress = c1["p-sw2"] if host == "h1" else c2["p-sw1"]
        ingress = c2["p-sw1"] if host == "h1" else c1["p-sw2"]
        a = st.offered
        b = egress["tx_frames"]
        c = ingress["rx_frames"] - ingress["fcs_errors"] - ingress["malformed"]
        d = st.delivered
        duration = None
        if st.first_offer_ns is not None and st.last_delivery_ns is not None:
            duration = max(1, st.last_delivery_ns - st.first_offer_ns)
        goodput = st.delivered_wire_bytes * 8e9 / duration if duration else 0.0
        out: dict[str, Any] = {
            "offered_A": a,
            "protected_egress_B": b,
            "protected_ingress_C": c,
            "delivered_D": d,
            "actual_loss": 1 - c / b if b else 0.0,
            "effective_loss": 1 - d / a if a else 0.0,
            "duplicates": st.duplicates,
            "out_of_order": st.out_of_order,
            "duration_ns": duration,
            "goodput_bps": goodput,
            "effective_link_speed": goodput / self.rate_bps if self.rate_bps and duration else None,
            "rate_bps": self.rate_bps,
            "delay_ns": self.delay_ns,
            "fcs_errors": ingress["fcs_errors"],
            "impair_lost": egress["impair_lost"] + (self.filtered if host == "h1" else 0),
            "impair_corrupted": egress["impair_corrupted"],
            "egress_queue_drops": egress["queue_drops"],
            "egress_queue_peak_bytes": egress["buffer_peak"],
            "pfc_pauses_honoured": sum(egress["pauses_rx_class"]),
            "leaked_lg_frames": self.leaked_lg_frames,
            "events": self.events,
            "protected": self.params is not None,
            "time_scale": self.params.time_scale if self.params is not None else 1.0,
        }
        if self.params is not None and host == "h1":
            s = self.sender.engine
            r = self.receiver.engine
            n = s.copies
            actual = out["actual_loss"]
            out.update(
                mode=self.params.mode,
                copies=n,
                expected_effective_loss=actual ** (n + 1),
                retransmissions=s.retransmissions,
                retx_frames=s.retx_frames,
                retx_dropped=s.retx_dropped,
                holes_not_buffered=s.holes_not_buffered,
                dummies_sent=s.dummies_sent,
                tx_buffer_max_bytes=s.tx_buffer_max_bytes,
                tx_buffer_max_frames=s.tx_buffer_max_frames,
                tx_evictions=s.tx_evictions,
                timeouts=r.timeouts,
                holes_detected=r.holes_detected,
                lost_detected=r.lost_detected,
                loss_notifications=r.loss_notifications_sent,
                reorder_buffer_max_bytes=r.reorder_buffer_max_bytes,
                reorder_drops=r.reorder_drops,
                pauses_sent=r.pauses_sent,
                resumes_sent=r.resumes_sent,
                lacks_explicit=r.lacks_explicit,
                lacks_piggybacked=r.lacks_piggybacked,
                receiver_duplicates=r.duplicates,
            )
        return out


class _Backlog:
    """Closed-loop offering: keep ``depth`` stream frames queued at sw1's protected egress."""

    def __init__(self, b2b: BackToBack, count: int, size: int, stream: int, start: int, depth: int) -> None:
        self.b2b = b2b
        self.count = count
        self.size = size
        self.stream = stream
        self.start = start
        self.depth = depth
        self.offered = 0
        self.base = b2b._probe.count  # dequeues before this stream started

    def top_up(self, now: int) -> bool:
        """Offer frames until ``depth`` are queued; True if any was offered."""
        if self.offered >= self.count or now < self.start:
            return False
        queued = self.offered - (self.b2b._probe.count - self.base)
        if queued >= self.depth:
            return False
        b2b = self.b2b
        while queued < self.depth and self.offered < self.count:
            frame = stream_frame(self.offered, self.size, self.stream)
            b2b._note_offer(frame, "h1", now)
            b2b.sw1.receive("h1", frame, now)
            self.offered += 1
            queued += 1
        return True


# ============================================================ engines on a scripted link
#: what a fate callback is told about a frame
DATA, RETX, DUMMY = "data", "retx", "dummy"

Fate = Callable[[int, str], tuple[int, ...]]


def bernoulli_fate(loss: float, seed: int = 0) -> Fate:
    """Each frame independently lost with probability ``loss`` (delivered once otherwise)."""
    rng = random.Random(seed)
    rnd = rng.random

    def fate(k: int, kind: str) -> tuple[int, ...]:
        return () if rnd() < loss else (0,)

    return fate


@dataclass
class EngineRun:
    """Outcome of :meth:`EnginePair.run`."""

    count: int
    delivered: list[int]
    arrivals: list[int]
    slots: int
    sender: dict[str, Any]
    receiver: dict[str, Any]
    forward_frames: int
    forward_lost: int

    @property
    def missing(self) -> set[int]:
        got = set(self.delivered)
        return {i for i in range(self.count) if i not in got}

    @property
    def never_arrived(self) -> set[int]:
        return {i for i, n in enumerate(self.arrivals) if n == 0}


class EnginePair:
    """An :class:`LGSender` and an :class:`LGReceiver` on a slotted link, no switch.

    Each slot the sender puts at most one frame on the forward link, by strict priority:
    retransmissions, then normal data (unless paused), then a dummy (§3.2). ``fate(k, kind)``
    decides what the link does with the k-th frame: a tuple of extra delays in slots, one
    per copy delivered (``()`` lost, ``(0,)`` on time, ``(0, 0)`` duplicated, ``(3,)`` three
    slots late, i.e. reordered). The reverse link is lossless: loss notifications and
    pause/resume arrive after fixed delays, and one explicit ACK courier per slot carries
    the leading ACK (§3.1). ``observer(pair, slot)`` runs after each slot (invariant checks).
    """

    def __init__(self, params: LGParams, *, fate: Fate | None = None, delay_slots: int = 3,
                 reverse_delay_slots: int = 3, pause_delay_slots: int = 2, slot_ns: int = 1_000,
                 frame_size: int | Callable[[int], int] = 100,
                 observer: Callable[[EnginePair, int], None] | None = None, max_slots: int | None = None) -> None:
        if delay_slots < 1 or reverse_delay_slots < 1 or pause_delay_slots < 1:
            raise ValueError("link delays are at least one slot")
        self.params = params
        self.sender = LGSender(params)
        self.receiver = LGReceiver(params)
        self.fate = fate or (lambda k, kind: (0,))
        self.delay = delay_slots
        self.reverse_delay = reverse_delay_slots
        self.pause_delay = pause_delay_slots
        self.slot_ns = slot_ns
        self.frame_size = frame_size
        self.observer = observer
        self.max_slots = max_slots
        self.paused = False
        self.slot = 0
        self.max_extra_delay = 0

    def _frames(self, count: int) -> Iterator[bytes]:
        size = self.frame_size
        head = H2_MAC + H1_MAC + STREAM_ETHERTYPE.to_bytes(2, "big")
        for i in range(count):
            n = size(i) if callable(size) else size
            yield head + i.to_bytes(4, "big") + bytes(max(0, n - 18))

    def run(self, count: int) -> EngineRun:
        snd, rcv = self.sender, self.receiver
        fate = self.fate
        d, rd, slot_ns = self.delay, self.reverse_delay, self.slot_ns
        fwd: dict[int, list[bytes]] = {}
        rev: dict[int, list[bytes]] = {}
        pauses: dict[int, list[bool]] = {}
        retx_q: deque[bytes] = deque()
        arrivals = [0] * count
        delivered: list[int] = []
        frames = self._frames(count)
        nxt = 0
        k = 0
        lost = 0
        t = 0
        observer = self.observer
        while True:
            now = t * slot_ns
            # (1) the reverse link: notifications / ACKs reach the sender, pauses take effect
            got = rev.pop(t, None)
            if got:
                for f in got:
                    retx_q.extend(snd.receive(f, now)[1])
            ps = pauses.pop(t, None)
            if ps:
                self.paused = ps[-1]
            # (2) the sender's egress: strict priority retx > normal > dummy
            if retx_q:
                f = retx_q.popleft()
                kind = RETX
            elif not self.paused and nxt < count:
                f = snd.stamp(next(frames), now)
                nxt += 1
                kind = DATA
            else:
                f = snd.dummy(now)
                kind = DUMMY
            if f is not None:
                extras = fate(k, kind)
                k += 1
                if not extras:
                    lost += 1
                for x in extras:
                    if x > self.max_extra_delay:
                        self.max_extra_delay = x
                    fwd.setdefault(t + d + x, []).append(f)
            # (3) the forward link delivers to the receiver
            got = fwd.pop(t, None)
            if got:
                for f in got:
                    if not f[14] & DUMMY_BIT:
                        arrivals[int.from_bytes(f[19:23], "big")] += 1
                    for g in rcv.receive(f, now):
                        delivered.append(int.from_bytes(g[14:18], "big"))
                    self._drain_receiver(t, rev, pauses)
            # (4) ackNoTimeout
            dl = rcv.next_deadline()
            if dl is not None and dl <= now:
                for g in rcv.on_timer(now):
                    delivered.append(int.from_bytes(g[14:18], "big"))
                self._drain_receiver(t, rev, pauses)
            # (5) one explicit ACK courier per slot on the reverse link (§3.1)
            c = rcv.courier()
            if c is not None:
                rev.setdefault(t + rd, []).append(c)
            self.slot = t
            if observer is not None:
                observer(self, t)
            if self.max_slots is not None and t >= self.max_slots:
                break
            # idle: jump to the next event
            if not retx_q and (self.paused or nxt >= count) and snd.dummy_budget == 0 and rcv.lack_left == 0:
                cands = [min(fwd)] if fwd else []
                if rev:
                    cands.append(min(rev))
                if pauses:
                    cands.append(min(pauses))
                dl = rcv.next_deadline()
                if dl is not None:
                    cands.append(-(-dl // slot_ns))
                if not cands:
                    if nxt >= count:
                        break
                    raise RuntimeError("sender paused with nothing that could resume it")
                t = max(t + 1, min(cands))
            else:
                t += 1
        return EngineRun(count, delivered, arrivals, t, snd.counters(), rcv.counters(), k, lost)

    def _drain_receiver(self, t: int, rev: dict[int, list[bytes]], pauses: dict[int, list[bool]]) -> None:
        rcv = self.receiver
        if rcv.control_out:
            rev.setdefault(t + self.reverse_delay, []).extend(rcv.control_out)
            rcv.control_out = []
        if rcv.pause_out:
            pauses.setdefault(t + self.pause_delay, []).extend(rcv.pause_out)
            rcv.pause_out = []


__all__ = [
    "DATA",
    "DUMMY",
    "H1_MAC",
    "H2_MAC",
    "PAPER_RATE_BPS",
    "RETX",
    "STREAM_ETHERTYPE",
    "BackToBack",
    "EnginePair",
    "EngineRun",
    "StreamStats",
    "bernoulli_fate",
    "stream_frame",
    "stream_index",
]
