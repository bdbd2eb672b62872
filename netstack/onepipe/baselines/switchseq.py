"""A sequencer in a switch: the switch-sequencer baseline (1Pipe §7.1, Fig. 8 "SwitchSeq": a
centralized sequencer in a programmable switch, as Eris (Li et al., SOSP '17) and NOPaxos's ordered
unreliable multicast (Li et al., OSDI '16) stamp messages in the network; 1Pipe §9).

Where the stamp happens: a **switch feature** (:class:`~netstack.switch.feature.FeatureBase`) on
every port of one switch, the fabric's spine, sharing one :class:`~.hostseq.StampingSequencer`
(one counter, as the switch's pipeline keeps it in one register array). A sender sends its whole
scattering as one datagram (to :data:`SWSEQ_PORT`) toward a host on another ToR, so that it crosses
the spine; the spine's ingress consumes it, stamps it and replicates it (multicast, as OUM does)
into one message per destination, queued on the spine's port toward that destination's ToR and
sent when the port is free (``idle_frame``), at its line rate; a replica that does not fit in the
port's egress buffer (its configured ``buffer_bytes``) is dropped, as the switch's queues
tail-drop. Why a feature and not a stage beside the network: the replicas then leave on the
spine's real ports, with their real line rates and buffers, so "bounded by one switch" is
measured, not assumed; and the detour is the real one (every scattering climbs to the spine,
even between hosts of one ToR).

The stage's own capacity: ``ns_per_msg`` of pipeline time per replica (a float). Our default, 1.5 ns
(about 650 M messages/s), is what 1Pipe's Fig. 8 shows the authors' switch sequencer sustaining once
saturated (SwitchSeq x processes: 2.56 x 256 = 654 and 1.28 x 512 = 653 M msg/s); the paper gives no
switch detail, so this is read off its figure, not derived. On a small fabric the spine's ports bind
first (a 100 Gbit/s port carries about 99 M messages/s of 64 bytes).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from ...sim.packets import UDP_HEADERS, Ipv4Flow, ip_payload_end
from ...switch import Switch
from ...switch.feature import FeatureBase
from .hostseq import StampingSequencer, unpack_scattering

#: the UDP port a scattering for the switch sequencer is sent to (outside 1Pipe's 40100-40199)
SWSEQ_PORT = 42999
#: the stage's time per replica: 1Pipe Fig. 8's saturated SwitchSeq (see the module docstring)
PAPER_NS_PER_MSG = 1.5
#: the replicas' source: a locally administered MAC and an address no host has
STAGE_MAC = bytes.fromhex("020000005e01")
STAGE_IP = bytes([10, 0, 0, 254])
#: a port's egress buffer when its config does not say (the switch's own default, 1 MiB)
DEFAULT_BUFFER = 1 << 20


class Route:
    """Where a replica to one process goes: the switch port, the headers, the process's UDP port."""

    __slots__ = ("dport", "flow", "port")

    def __init__(self, port: str, dst_mac: bytes, dst_ip: bytes, dport: int) -> None:
        self.port = port
        self.flow = Ipv4Flow(STAGE_MAC, dst_mac, STAGE_IP, dst_ip)
        self.dport = dport


@dataclass(eq=False, slots=True)
class StageCounters:
    malformed: int = 0  # datagrams to SWSEQ_PORT that are no scattering (or name no process)
    port_drops: int = 0  # replicas that did not fit in their port's egress buffer


class SwitchSequencer:
    """The stamping stage of one switch: takes scatterings at ingress, queues stamped replicas per port."""

    def __init__(self, switch: Switch, routes: Sequence[Route], ns_per_msg: float, queue: int) -> None:
        self.switch = switch
        self.routes = list(routes)
        self.engine = StampingSequencer(len(routes), ns_per_msg, queue)
        self.out: dict[str, deque[tuple[int, bytes]]] = {p.name: deque() for p in switch.ports}
        #: each port's egress buffer (its config's, as the switch's own queues have it), bytes
        self.buffer = {p.name: int(getattr(getattr(p, "cfg", None), "buffer_bytes", DEFAULT_BUFFER))
                       for p in switch.ports}
        self._queued = dict.fromkeys(self.out, 0)
        self.c = StageCounters()
        for p in switch.ports:
            switch.attach_feature(p.name, SequencerPort(self, p.name))

    def take(self, frame: bytes, now_ns: int) -> None:
        try:
            src, sseq, dsts, payload = unpack_scattering(frame[UDP_HEADERS:ip_payload_end(frame)])
        except (ValueError, IndexError):
            self.c.malformed += 1
            return
        if any(not 0 <= d < len(self.routes) for d in dsts):
            self.c.malformed += 1
            return
        for leave, d, m in self.engine.on_scattering(now_ns, src, sseq, dsts):
            r = self.routes[d]
            frame = r.flow.udp(SWSEQ_PORT, r.dport, m.pack() + payload)
            if self._queued[r.port] + len(frame) > self.buffer[r.port]:
                # the port's buffer is full (its link, not the pipeline, is the bottleneck): tail drop,
                # as the switch's own queues do; the receiver counts the gap as lost
                self.c.port_drops += 1
                continue
            self._queued[r.port] += len(frame)
            self.out[r.port].append((leave, frame))

    def sent(self, port: str, frame: bytes) -> None:
        self._queued[port] -= len(frame)

    def counters(self) -> dict[str, float | int | str]:
        return {"switch": self.switch.name, **self.engine.counters(), **asdict(self.c),
                "queued_at_end": sum(len(q) for q in self.out.values())}


class SequencerPort(FeatureBase):
    """The stage on one port: ingress takes the scatterings, the idle link sends the replicas."""

    __slots__ = ("_fired", "name", "queue", "stage")

    def __init__(self, stage: SwitchSequencer, name: str) -> None:
        self.stage = stage
        self.name = name
        self.queue = stage.out[name]
        self._fired = -1

    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        if len(frame) >= UDP_HEADERS and frame[23] == 17 and (frame[36] << 8 | frame[37]) == SWSEQ_PORT:
            self.stage.take(frame, now_ns)
            return None
        return frame

    def idle_frame(self, now_ns: int) -> bytes | None:
        q = self.queue
        if q and q[0][0] <= now_ns:
            frame = q.popleft()[1]
            self.stage.sent(self.name, frame)
            return frame
        return None

    def next_deadline(self) -> int | None:
        # wake the switch when the next replica leaves the pipeline; once that time has come, the
        # port's idle polling sends it as soon as the link is free
        q = self.queue
        if q and q[0][0] > self._fired:
            return q[0][0]
        return None

    def on_timer(self, now_ns: int) -> None:
        self._fired = now_ns


__all__ = ["PAPER_NS_PER_MSG", "SWSEQ_PORT", "Route", "SequencerPort", "StageCounters", "SwitchSequencer"]
