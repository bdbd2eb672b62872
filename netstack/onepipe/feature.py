"""1Pipe's barrier aggregation as a feature of netstack's software switch (1Pipe §3-§6, design
topics in docs/papers.md): the glue between the switch's ports and :class:`.barrier.BarrierAggregator`.

:func:`enable` attaches a :class:`OnePipeFeature` to every port of a :class:`netstack.switch.Switch`,
all sharing one aggregator per switch, plus one timer (beacons and input timeouts);
:func:`disable` removes them and :func:`status` reports per-port counters (``netstack status``).

**Inputs and outputs.** On a fabric port (to a switch) the link is one input and one output. On an
edge port (to hosts) every process is its own input and its own output (§3: "each process is its
own endpoint at the ToR"), ``(port, ip, udp port)``: a process reads barriers only from the
datagrams that reach its own socket, so each gets its own barrier stream and beacons.

**Ingress** (``on_ingress``, before learning and forwarding). A frame is 1Pipe's when it is
IPv4/UDP to a port in 1Pipe's range (``params.is_onepipe_port``, less the ports other protocols
registered in ``headers.registry``); anything else passes untouched, unparsed beyond that.

- BEACON / COMMIT (hop by hop, §5): ``R`` of its input is set, the frame is consumed.
- Other barrier opcodes (DATA, ACK, NAK, RECALL...): ``R`` is set, then the packet's
  ``be_barrier`` is rewritten in place with the barrier of the output it will take, computed
  now, at ingress: FIFO per (ingress, egress, class) keeps it valid however long the packet
  then queues, which a rewrite at dequeue would not (§4). ``msg_ts`` is never touched. The
  UDP checksum is updated incrementally (RFC 1624), so end hosts still verify it.
- PREPARE and controller traffic: forwarded untouched (switches do not aggregate them, §7).
- Dropped and counted, never forwarded with a barrier the switch did not vouch for: a
  malformed 1Pipe frame (truncated, lengths that disagree, an unknown opcode, a beacon with a
  payload, an IP fragment), one with no single known egress port (group or unknown
  destination: the barrier must fit the one output it takes), one that would go up after
  coming from above (a valley: routing is not a DAG there, §3), one from a process the table
  has no room for.

The egress port is the switch's own forwarding decision, read from its forwarding table before
the switch makes it (:func:`egress_index`). The class is the one the switch will give the frame
(the ingress port's ``class_map``).

**Beacons** (§5). The timer asks the aggregator for the outputs that carried no 1Pipe packet for
``T_beacon`` and puts one beacon on each, *queued* (``switch.enqueue``) on the class the last
1Pipe packet for that output took: a beacon never overtakes 1Pipe data waiting in that queue,
even a paused one (the idle source, ``idle_frame``, runs when every class is empty *or paused*,
so it could). Toward a switch: UDP 40100 to 255.255.255.255 from the port's MAC, consumed by the
neighbour's feature. Toward a process: UDP from port 40100 to the process's ip:port and MAC
(learned from its frames), from ``beacon_ip`` (a switch has no address; ``topology.beacon_ip``
picks a free one), TTL 1; only while the process is live.
"""

from __future__ import annotations

import weakref
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from headers.inet import build_udp_frame
from headers.onepipe import (
    BARRIER_OPCODES,
    BE_BARRIER_OFFSET,
    HOP_BY_HOP_OPCODES,
    NO_PAYLOAD_OPCODES,
    TS_HALF,
    TS_MASK,
    OnePipeOpcode,
    beacon,
)
from headers.registry import BROADCAST_MAC, UdpPort

from ..errors import ConfigError
from ..switch import Switch
from ..switch.feature import FeatureBase
from ..switch.port import Port
from .barrier import DIRECTIONS, DOWN, UP, BarrierAggregator, InputId, OutputId
from .params import PORT, OnePipeParams, is_onepipe_port

_OTHERS = frozenset(int(p) for p in UdpPort if p != PORT)
#: 1 at every UDP port whose datagrams are 1Pipe's: its range, less other protocols' ports
_IS_ONEPIPE = bytes(1 if is_onepipe_port(p) and p not in _OTHERS else 0 for p in range(65536))
_OPCODES = frozenset(int(op) for op in OnePipeOpcode)
_BARRIER = frozenset(int(op) for op in BARRIER_OPCODES)
_HOP = frozenset(int(op) for op in HOP_BY_HOP_OPCODES)
_NO_PAYLOAD = frozenset(int(op) for op in NO_PAYLOAD_OPCODES)
_DATA = int(OnePipeOpcode.DATA)
_MASK = TS_MASK
_HALF = TS_HALF
_HDR = 24  # the 1Pipe header
#: processes a switch keeps state for (inputs and outputs of its edge ports), by default
MAX_PROCESSES = 4096


#: a process behind an edge port, ``(port, ip, udp port)``: the id of its input and of its output
ProcKey = tuple[str, bytes, int]


class Proc(NamedTuple):
    """A :data:`ProcKey` with names (equal to the plain tuple, which the data path builds)."""

    port: str
    ip: bytes
    udp: int

    def __str__(self) -> str:
        return f"{'.'.join(map(str, self.ip))}:{self.udp}"


@dataclass(eq=False, slots=True)
class PortCounters:
    rx: int = 0  # 1Pipe frames received on the port
    beacons_rx: int = 0  # ... BEACON / COMMIT, consumed
    stamped: int = 0  # ... forwarded with the switch's barrier written in
    passed: int = 0  # ... of other opcodes (PREPARE, controller), forwarded untouched
    malformed: int = 0  # ... dropped: not a well-formed 1Pipe packet
    unroutable: int = 0  # ... dropped: no single known egress port
    valley: int = 0  # ... dropped: from above and going up again (§3)
    table_full: int = 0  # ... dropped: no room for a new process
    barrier_backwards: int = 0  # ... whose barrier was below their input's R (the update was refused)
    late_forwarded: int = 0  # DATA forwarded with msg_ts below the barrier written in (a joining input's)
    tx_stamped: int = 0  # 1Pipe frames stamped for this port as their egress
    beacons_tx: int = 0  # beacons queued on this port
    beacon_drops: int = 0  # beacons the port's queue refused (tail drop)
    beacons_no_mac: int = 0  # beacons due to a process whose MAC is unknown (never sent)


class _ProcInfo:
    __slots__ = ("mac", "seen")

    def __init__(self, now: int) -> None:
        self.mac: bytes | None = None
        self.seen = now


def egress_index(switch: Switch, frame: bytes) -> int | None:
    """The index of the one port ``switch`` will forward ``frame`` by, or None when it will
    flood it (a group or unknown destination).

    Reads the switch's forwarding table (``Switch.fdb``, ``Fdb.lookup``: static entries, then
    learned ones), the lookup ``Switch._forward`` makes. A switch API for it
    (``Switch.egress_port(frame)``) would keep this in step with the switch by construction."""
    if frame[0] & 1:
        return None
    return switch.fdb.lookup(frame[:6])


def _moved_checksum(csum: int, old: int, new: int) -> int:
    """A UDP checksum after a 48-bit field at an even offset changed from ``old`` to ``new``
    (RFC 1624 eqn. 3). In one's complement arithmetic (mod 0xFFFF) a 48-bit value is the sum of
    its three 16-bit words, and the checksum is minus the sum; 0 goes out as 0xFFFF (RFC 768)."""
    return (csum + old - new) % 0xFFFF or 0xFFFF


class _BeaconTemplate:
    """A beacon frame with a zero barrier, patched per beacon (``msg_ts`` = ``be_barrier``, §5)."""

    __slots__ = ("frame",)

    def __init__(self, src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, dport: int) -> None:
        self.frame = build_udp_frame(src_mac, dst_mac, src_ip, dst_ip, PORT, dport, beacon(0, 0).to_bytes(), ttl=1)

    def make(self, w: int) -> bytes:
        """The beacon for wire barrier ``w``: both timestamps, and the UDP checksum moved by
        twice their three words (RFC 1624; the template had zeros there)."""
        f = self.frame
        ts = w.to_bytes(6, "big")
        csum = _moved_checksum(_moved_checksum(f[40] << 8 | f[41], 0, w), 0, w)
        return b"".join((f[:40], csum.to_bytes(2, "big"), ts, ts, f[54:]))


class OnePipeFeature(FeatureBase):
    """The 1Pipe hook of one switch port (see the module docstring); made by :func:`enable`."""

    def __init__(self, state: _SwitchState, port: Port, direction: str) -> None:
        self.state = state
        self.port = port
        self.name = port.name
        self.direction = direction
        self.edge = port.cfg.edge
        #: frames from this port come from below (processes, a lower-tier switch)
        self.down = direction == DOWN
        self.c = PortCounters()

    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        n = len(frame)
        if n < 38 or frame[12] != 0x08 or frame[13] != 0x00 or frame[23] != 17:
            return frame
        b = frame[14]
        ihl = (b & 15) << 2
        u = 14 + ihl
        if b >> 4 != 4 or ihl < 20 or n < u + 4 or frame[20] & 0x1F or frame[21]:
            return frame  # not IPv4 with a UDP header here (a later fragment has none)
        if not _IS_ONEPIPE[frame[u + 2] << 8 | frame[u + 3]]:
            return frame
        return self.state.ingress(self, frame, u, now_ns)


class _Timer(FeatureBase):
    """The switch's one timer for 1Pipe: input timeouts and beacons."""

    def __init__(self, state: _SwitchState) -> None:
        self.state = state

    def next_deadline(self) -> int | None:
        return self.state.agg.next_deadline()

    def on_timer(self, now_ns: int) -> None:
        self.state.tick(now_ns)


class _SwitchState:
    """1Pipe in one switch: the aggregator, the port features, the processes it knows."""

    def __init__(self, switch: Switch, directions: dict[str, str], params: OnePipeParams, now: int,
                 beacon_ip: bytes | None, max_processes: int) -> None:
        self.switch = switch
        self.params = params
        self.directions = dict(directions)
        self.beacon_ip = beacon_ip
        self.max_processes = max_processes
        self.agg = BarrierAggregator(params)
        self.features: dict[str, OnePipeFeature] = {}
        self.by_index: list[OnePipeFeature] = []
        self.procs: dict[ProcKey, _ProcInfo] = {}
        #: the class the last 1Pipe packet for an output took: its beacons go there too
        self.cls: dict[OutputId, int] = {}
        self.templates: dict[OutputId, tuple[bytes | None, _BeaconTemplate]] = {}
        for port in switch.ports:
            f = OnePipeFeature(self, port, directions[port.name])
            self.features[port.name] = f
            self.by_index.append(f)
            if not f.edge:
                self.agg.add_input(port.name, down=f.down)
                self.agg.add_output(port.name, f.direction, now)
        self.timer = _Timer(self)

    # ------------------------------------------------------------------ ingress
    def ingress(self, f: OnePipeFeature, frame: bytes, u: int, now: int) -> bytes | None:
        """A frame to a 1Pipe port arrived on ``f``'s port (``u``: its UDP header)."""
        c = f.c
        c.rx += 1
        p = u + 8
        n = len(frame)
        if n < p + _HDR or frame[20] & 0x20:  # truncated, or an IP fragment (1Pipe fragments itself, §9)
            c.malformed += 1
            return None
        ip_end = 14 + (frame[16] << 8 | frame[17])
        udp_len = frame[u + 4] << 8 | frame[u + 5]
        op = frame[p + 22]
        if (ip_end > n or udp_len < 8 + _HDR or u + udp_len > ip_end or op not in _OPCODES
                or (op in _NO_PAYLOAD and udp_len != 8 + _HDR)):
            c.malformed += 1
            return None
        if op not in _BARRIER:
            c.passed += 1
            return frame
        iid: InputId
        if f.edge:
            proc = (f.name, frame[26:30], frame[u] << 8 | frame[u + 1])
            info = self.procs.get(proc) or self._proc(proc, now)
            iid = proc
            if info is None:
                c.table_full += 1
                return None
            info.mac = frame[6:12]
            info.seen = now
        else:
            iid = f.name
        at = p + BE_BARRIER_OFFSET
        w = int.from_bytes(frame[at:at + 6], "big")
        if not self.agg.heard(iid, now + ((w - now + _HALF) & _MASK) - _HALF, now):  # ts_unwrap, inlined
            c.barrier_backwards += 1
        if op in _HOP:
            c.beacons_rx += 1
            return None  # hop by hop: never forwarded (§5)
        return self._stamp(f, frame, u, op, w, now)

    def _stamp(self, f: OnePipeFeature, frame: bytes, u: int, op: int, old: int, now: int) -> bytes | None:
        """Rewrite ``be_barrier`` (``old`` on the wire) with the barrier of the output the frame
        takes (§4)."""
        c = f.c
        dst = frame[:6]
        if dst[0] & 1:
            c.unroutable += 1
            return None
        fdb = self.switch.fdb  # egress_index(), inlined: the data path
        idx = fdb.static.get(dst)
        if idx is None:
            idx = fdb.learned.get(dst)
        if idx is None or idx >= len(self.by_index):
            c.unroutable += 1
            return None
        e = self.by_index[idx]
        if e is f:
            return frame  # the switch filters it (its destination is behind this port)
        if not f.down and e.direction == UP:
            c.valley += 1
            return None
        oid: OutputId
        if e.edge:
            dproc = (e.name, frame[30:34], frame[u + 2] << 8 | frame[u + 3])
            if dproc not in self.procs and self._proc(dproc, now) is None:
                c.table_full += 1
                return None
            oid = dproc
        else:
            oid = e.name
        agg = self.agg
        b = agg.barrier_for(oid, now)
        if b is None:  # (the frame's own input is live and counts for this output unless a valley)
            c.unroutable += 1
            return None
        agg.note_sent(oid, now)
        self.cls[oid] = f.port.cfg.class_map[frame[15] >> 5]  # the switch's own classification
        c.stamped += 1
        e.c.tx_stamped += 1
        w = b & _MASK
        at = u + 8 + BE_BARRIER_OFFSET
        if op == _DATA and ((int.from_bytes(frame[u + 8:u + 14], "big") - w) & _MASK) >= _HALF:
            c.late_forwarded += 1  # msg_ts below the barrier (ts_lt): its receiver drops and NAKs it
        csum = frame[u + 6] << 8 | frame[u + 7]
        if csum:  # 0: no checksum (RFC 768)
            csum = _moved_checksum(csum, old, w)
        return b"".join((frame[:u + 6], csum.to_bytes(2, "big"), frame[u + 8:at], w.to_bytes(6, "big"),
                         frame[at + 6:]))

    def _proc(self, proc: ProcKey, now: int) -> _ProcInfo | None:
        """The state of ``proc``, made on first sight (its input and output), or None when the
        table is full of live processes."""
        info = self.procs.get(proc)
        if info is not None:
            return info
        agg = self.agg
        if len(self.procs) >= self.max_processes:
            silent = [(i.seen, k) for k, i in self.procs.items() if not agg.is_live(k)]
            if not silent:
                return None
            _, old = min(silent, key=lambda x: x[0])
            self._forget(old)
        info = self.procs[proc] = _ProcInfo(now)
        agg.add_input(proc, down=True)
        agg.add_output(proc, DOWN, now, peer_input=proc)
        return info

    def _forget(self, proc: ProcKey) -> None:
        del self.procs[proc]
        self.agg.remove_input(proc)
        self.agg.remove_output(proc)
        self.cls.pop(proc, None)
        self.templates.pop(proc, None)

    # ------------------------------------------------------------------ timer
    def tick(self, now: int) -> None:
        agg = self.agg
        agg.on_timer(now)
        for oid, b in agg.due_beacons(now):
            self._send_beacon(oid, b, now)

    def _send_beacon(self, oid: OutputId, barrier: int, now: int) -> None:
        if isinstance(oid, tuple):
            port, dst_ip, dport = oid
            e = self.features[port]
            info = self.procs.get(oid)
            mac = info.mac if info is not None else None
            if mac is None:
                e.c.beacons_no_mac += 1
                return
            cached = self.templates.get(oid)
            if cached is None or cached[0] != mac:
                src_ip = self.beacon_ip if self.beacon_ip is not None else default_beacon_ip(dst_ip)
                cached = (mac, _BeaconTemplate(e.port.mac, mac, src_ip, dst_ip, dport))
                self.templates[oid] = cached
        else:
            e = self.features[str(oid)]
            cached = self.templates.get(oid)
            if cached is None or cached[1].frame[6:12] != e.port.mac:
                src_ip = self.beacon_ip if self.beacon_ip is not None else b"\0\0\0\0"
                cached = (None, _BeaconTemplate(e.port.mac, BROADCAST_MAC, src_ip, b"\xff\xff\xff\xff", PORT))
                self.templates[oid] = cached
        frame = cached[1].make(barrier & _MASK)
        if self.switch.enqueue(e.name, frame, self.cls.get(oid, 0), now):
            e.c.beacons_tx += 1
        else:
            e.c.beacon_drops += 1

    # ------------------------------------------------------------------ status
    def status(self, now: int) -> dict[str, Any]:
        agg = self.agg
        ports: dict[str, Any] = {}
        for name, f in self.features.items():
            ports[name] = {"direction": f.direction, "role": "edge" if f.edge else "fabric",
                           "counters": asdict(f.c), "inputs": {}, "outputs": {}}
        for iid in agg.input_ids():
            port, key = _label(iid)
            ports[port]["inputs"][key] = agg.input_state(iid, now)
        for oid in agg.output_ids():
            port, key = _label(oid)
            state = agg.output_state(oid, now)
            state["joining"] = [_label(i)[1] for i in agg.joining(oid)]
            state["class"] = self.cls.get(oid)
            ports[port]["outputs"][key] = state
        return {"enabled": True, "params": self.params.to_dict(), "directions": dict(self.directions),
                "processes": len(self.procs), "max_processes": self.max_processes,
                "beacon_ip": None if self.beacon_ip is None else ".".join(map(str, self.beacon_ip)),
                "aggregator": agg.counters(), "ports": ports}


def _label(key: InputId | OutputId) -> tuple[str, str]:
    """``(port, name)`` of an input or output: a fabric port by its name, a process as ``ip:port``."""
    if isinstance(key, tuple):
        return str(key[0]), str(Proc(*key))
    return str(key), str(key)


def default_beacon_ip(dst_ip: bytes) -> bytes:
    """The source of a beacon to a process when :func:`enable` was given no ``beacon_ip``: .254 of
    the process's /24 (.253 for .254 itself): unicast, in its subnet, not its own address."""
    last = 253 if dst_ip[3] == 254 else 254
    return dst_ip[:3] + bytes([last])


# ------------------------------------------------------------------ enable / disable / status
_STATE: weakref.WeakKeyDictionary[Switch, _SwitchState] = weakref.WeakKeyDictionary()


def _ip(value: str | bytes | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bytes) and len(value) == 4:
        return value
    if isinstance(value, str):
        parts = value.split(".")
        if len(parts) == 4 and all(p.isdigit() and int(p) < 256 for p in parts):
            return bytes(int(p) for p in parts)
    raise ConfigError("onepipe.beacon_ip", f"must be an IPv4 address, got {value!r}")


def _check_directions(switch: Switch, directions: dict[str, str]) -> None:
    if not isinstance(directions, dict):
        raise ConfigError("onepipe.directions", f"must be a mapping port -> up/down, got {type(directions).__name__}")
    names = [p.name for p in switch.ports]
    missing = [n for n in names if n not in directions]
    unknown = [n for n in directions if n not in names]
    if missing or unknown:
        raise ConfigError("onepipe.directions", f"must give every port of {switch.name} and no other "
                                                f"(missing: {missing}, unknown: {unknown})")
    for p in switch.ports:
        d = directions[p.name]
        if d not in DIRECTIONS:
            raise ConfigError(f"onepipe.directions.{p.name}", f"must be one of {', '.join(DIRECTIONS)}, got {d!r}")
        if p.cfg.edge and d != DOWN:
            raise ConfigError(f"onepipe.directions.{p.name}", "an edge port faces hosts: it must be down")


def enable(switch: Switch, directions: dict[str, str], params: OnePipeParams | dict[str, Any] | None = None,
           now_ns: int | None = None, *, beacon_ip: str | bytes | None = None,
           max_processes: int = MAX_PROCESSES) -> OnePipeFeature:
    """Run 1Pipe's barrier aggregation in ``switch``: ``directions`` gives every port's direction
    (``topology.port_directions``). Enabling it again starts afresh (barriers may then go back
    on a link once, which receivers ignore). Returns the first port's feature. ConfigError on
    bad settings."""
    if isinstance(params, dict):
        params = OnePipeParams(**params)
    if params is None:
        params = OnePipeParams()
    if not isinstance(params, OnePipeParams):
        raise ConfigError("onepipe.params", f"expected OnePipeParams, got {type(params).__name__}")
    _check_directions(switch, directions)
    if not isinstance(max_processes, int) or max_processes < 1:
        raise ConfigError("onepipe.max_processes", f"must be a positive integer, got {max_processes!r}")
    ip = _ip(beacon_ip)
    disable(switch)
    now = switch.now if now_ns is None else max(now_ns, switch.now)
    state = _SwitchState(switch, directions, params, now, ip, max_processes)
    for name, f in state.features.items():
        switch.attach_feature(name, f)
    switch.attach_feature(switch.ports[0].name, state.timer)
    _STATE[switch] = state
    return state.features[switch.ports[0].name]


def disable(switch: Switch, now_ns: int | None = None) -> bool:
    """Remove 1Pipe from ``switch``; False if it was not enabled."""
    state = _STATE.pop(switch, None)
    if state is None:
        return False
    for name, f in state.features.items():
        switch.detach_feature(name, f)
    switch.detach_feature(switch.ports[0].name, state.timer)
    return True


def enabled(switch: Switch) -> bool:
    return switch in _STATE


def aggregator(switch: Switch) -> BarrierAggregator | None:
    """The switch's aggregator (None when 1Pipe is off): for tests and the virtual-time runtime."""
    state = _STATE.get(switch)
    return None if state is None else state.agg


def features(switch: Switch) -> dict[str, OnePipeFeature]:
    state = _STATE.get(switch)
    return {} if state is None else dict(state.features)


def status(switch: Switch, now_ns: int | None = None) -> dict[str, Any] | None:
    """Per-port counters, inputs (``R``, liveness, timeouts...) and outputs (barrier, freeze,
    beacons...) for ``netstack status``, JSON-able; None when 1Pipe is off in ``switch``."""
    state = _STATE.get(switch)
    if state is None:
        return None
    return state.status(switch.now if now_ns is None else max(now_ns, switch.now))


__all__ = ["MAX_PROCESSES", "OnePipeFeature", "PortCounters", "Proc", "aggregator", "default_beacon_ip",
           "disable", "egress_index", "enable", "enabled", "features", "status"]
