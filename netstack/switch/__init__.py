"""The software switch, sans-IO: ports, strict-priority queues, line-rate pacer, PFC, ECN.

No sockets, clocks, threads or asyncio (docs/architecture.md "Engines are sans-IO"): ``now_ns``
comes in, frames come out. The asyncio shell (``daemons/switch.py``) does the I/O.

Shell API (all times in ns, monotonic; a smaller time than one already seen is clamped)
-------------------------------------------------------------------------------------
``Switch(SwitchConfig(name, ports=(PortConfig(...), ...), static_fdb={mac: port}))``; with ECMP,
``ecmp_groups={mac: (port, port, ...)}`` and ``ecmp_seed``: a frame to such a MAC leaves by the
port a seeded hash of its flow's 5-tuple picks (:mod:`netstack.switch.ecmp`); ``flood_ports``:
the ports broadcasts and unknown unicast are flooded on (a spanning tree's; default every port)

``switch.receive(port: str, frame: bytes, now_ns: int) -> None``
    A frame read from ``port``'s socket. Never raises on frame content: bad frames are
    counted drops (``malformed``, ``fcs_errors``); an unknown port name is counted in
    ``switch_counters()["unknown_port"]``.
``switch.transmit(now_ns: int) -> list[tuple[str, bytes]]``
    Every frame whose release time (end of serialisation + propagation delay) is
    ``<= now_ns``, as ``(port, frame)`` in release order (wire order within a port). Also
    fires due timers. Call it after each batch of receives and at ``next_deadline()``.
``switch.next_deadline() -> int | None``
    When to call ``transmit`` next (a lower bound; None = nothing pending).
``switch.counters() -> dict[str, dict]`` / ``switch.switch_counters() -> dict``
    JSON-able counters and state per port / for the switch.
``switch.ecmp_counters() -> {destination: {port: frames}}``
    The frames the hash sent to each next hop of every ECMP group (empty without ECMP).
``switch.add_kernel_drops(port, n)``: add PACKET_STATISTICS drops to ``kernel_drops``.
Run-time control: ``update_port(port, now_ns=None, **PortConfig fields)``, ``set_rate``,
``set_delay``, ``set_buffer``, ``set_ecn_threshold``, ``set_impairment``,
``clear_counters(port=None)``, ``fdb_entries()``. Invalid values raise ``ConfigError``.

Feature interface (``switch.attach_feature(port, feature)``: :mod:`netstack.switch.feature`;
subclass ``FeatureBase`` and override the hooks the feature needs, the port calls only those)
------------------------------------------------------------------------------------
``feature.on_ingress(frame: bytes, now_ns: int) -> bytes | None``
    Called for each data frame received on the port, after the FCS check and MAC control
    handling, before learning/forwarding. Return the frame to forward (possibly
    rewritten, e.g. a LinkGuardian tag stripped) or None if the feature consumed it.
    Raising ``headers.HeaderError`` counts the frame as malformed and drops it.
``feature.on_egress(frame: bytes, cls: int, now_ns: int) -> bytes``
    Called when a data frame leaves a class queue of the port (dequeue time, i.e. the
    start of transmission); returns the frame to send (add a tag, piggyback an ACK).
    Not called for idle-source or PFC frames.
``feature.idle_frame(now_ns: int) -> bytes | None``
    The self-replenishing idle source (LinkGuardian's dummy / ACK-courier queues,
    LinkGuardian §3.1-§3.2: strictly lower priority than normal traffic). Consulted only when the
    port's link is free and every class queue is empty or paused; a frame returned is
    sent at once (it is not queued and uses no buffer). After it returns None it is asked
    again only after the next switch event (a receive, enqueue, pause, timer or control
    call), so it must not depend on time alone — use a timer for that.
``feature.next_deadline() -> int | None`` and ``feature.on_timer(now_ns)``
    ``on_timer(now)`` is called from ``transmit(now)`` when ``next_deadline() <= now``.
A feature calls back into the switch with:
``switch.enqueue(port, frame, cls, now_ns=None) -> bool``
    Put its own frame on a class (retransmissions on class 7 overtake queued normal
    frames that have not started yet). Uses buffer space; False if tail-dropped.
``switch.pause_class(port, cls, paused: bool, now_ns=None)``
    Make ``port`` send real 802.1Qbb pause (0xFFFF quanta, refreshed) / resume (0) frames
    for ``cls`` to its peer, whose switch honours them on its egress: LinkGuardian's
    receiver-side backpressure (LinkGuardian §3.3 Algorithm 2, §3.5).
``switch.set_marking_policy(port, policy)``: ``policy.on_dequeue(frame, cls, qlen_bytes,
now_ns) -> bytes`` at each data dequeue (the TCD detector's hook; ``qlen_bytes`` is the
class queue after the frame left) and optional ``policy.on_pause(cls, paused, now_ns, pause_ns)``.

Modelling choices
-----------------
- Line time of a frame: ``(max(len, 60) + overhead_bytes) * 8 / rate_bps``; the default
  overhead 24 B = preamble 7 + SFD 1 + IFG 12 + FCS 4 (the kernel hands us frames without
  FCS, and a 64-byte frame then takes the usual 84 B of line time). The software FCS
  trailer, when present, is that FCS and is not counted again. ``rate_bps`` None =
  unpaced. Frames are handed to the shell at ``end of serialisation + delay_ns``.
- The link is simulated serially between calls (port.py): strict-priority decisions are
  made at each frame boundary's time, as if the pacer ran continuously, although the
  shell wakes only every ~1 ms (docs/architecture.md "The live runtime").
- Buffer: ``buffer_bytes`` per egress port, shared by its 8 classes; a frame that does
  not fit is tail-dropped, counted per port and class. MAC control (PFC) and idle-source
  frames use no buffer.
- Classification at ingress with the ingress port's ``class_map``: IPv4 precedence
  (DSCP >> 3), 802.1Q PCP, else ``default_class``.
- Forwarding: static entries (never moved by learning), learned entries, else flood on the
  flood ports. ECMP is hash-threshold per flow (RFC 2992): a flow keeps one next hop, so its
  frames are never reordered by the choice; the seed picks the switch's hash function, so two
  switches do not choose alike (polarization). A port outside ``flood_ports`` forwards unicast
  but neither floods nor learns, as if a spanning tree had blocked it for everything but the
  static and ECMP entries.
- PFC: received pauses act at the next frame boundary and expire after quanta x 512 bit
  times at the port's rate (1 Gb/s on unpaced ports); generated pauses are per ingress
  port and class (bytes still queued anywhere), XOFF/XON hysteresis, 0xFFFF quanta
  refreshed at half-life; sent to 01:80:C2:00:00:01, or to ``peer_mac`` when set.
- ECN: at enqueue, CE on ECT IPv4 frames when the class queue (before this frame) holds
  more than ``ecn_threshold_bytes``.
- Impairment: seeded Bernoulli / Gilbert-Elliott per port egress, applied to every frame
  on the wire after the FCS is added; lost frames still used their line time.
"""

from .config import (
    DEFAULT_OVERHEAD_BYTES,
    NUM_CLASSES,
    ConfigError,
    ImpairmentConfig,
    PortConfig,
    SwitchConfig,
)
from .core import Switch
from .impair import Impairment, Verdict
from .port import CONTROL_CLASS, IDLE_CLASS

__all__ = [
    "CONTROL_CLASS",
    "DEFAULT_OVERHEAD_BYTES",
    "IDLE_CLASS",
    "NUM_CLASSES",
    "ConfigError",
    "Impairment",
    "ImpairmentConfig",
    "PortConfig",
    "Switch",
    "SwitchConfig",
    "Verdict",
]
