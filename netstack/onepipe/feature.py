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
  ``be_barrier`` and ``commit_barrier`` are rewritten in place with the barriers of the output
  it will take, computed now, at ingress: FIFO per (ingress, egress, class) keeps them valid
  however long the packet then queues, which a rewrite at dequeue would not (§4). ``msg_ts`` is
  never touched. The UDP checksum is updated incrementally (RFC 1624), so end hosts still
  verify it.
- PREPARE and controller traffic: forwarded untouched (switches do not aggregate them, §7).
- Dropped and counted, never forwarded with a barrier the switch did not vouch for: a
  malformed 1Pipe frame (truncated, lengths that disagree, an unknown opcode, a beacon with a
  payload, an IP fragment), one with no single known egress port (group or unknown
  destination: the barrier must fit the one output it takes), one that would go up after
  coming from above (a valley: routing is not a DAG there, §3), one from a process the table
  has no room for.

**Two barriers** (reliable 1Pipe, design topic §7.2; the paper, *1Pipe: Scalable Total Order
Communication in Data Center Networks*, §5.1: the commit barrier is aggregated as the best-effort
one is). Each switch runs two aggregators over the same inputs and outputs:
``agg`` for ``R_be`` and ``commit`` for ``R_commit``. Every barrier packet sets ``R_be`` from
``be_barrier`` except a COMMIT, and ``R_commit`` from ``commit_barrier`` when that is nonzero (0:
"no commit barrier", docs/onepipe-reliable.md "Wire"); a forwarded one gets both minima written
in (commit 0 while the output has none).

**Failures** (design topic §8 step 7). An input the BE aggregator times out is recorded as a
*report* ``{"seq", "input", "port", "last_commit", "at_ns", "cause"}`` (:func:`reports`, and the
``on_report`` callback of :func:`enable`). With ``controller=True`` the commit aggregator holds
(:meth:`.barrier.BarrierAggregator.fence`) the input at that moment, so its last commit is the
reported one and no commit barrier passes it until the controller calls :func:`release`;
without a controller it leaves the commit minimum on its own timeout, as best effort does.

**Keys** (docs/onepipe.md "Authenticated beacons and barriers", :mod:`.auth`). When the switch
has keys (``switch.auth``) and :func:`enable` a domain, every barrier-carrying frame must carry a
trailer sealed by its sender on this hop: it is opened (with the replay window of its process, or
of its fabric port) before anything is learned or set, and refused ones are dropped and counted
per reason (``PortCounters`` aside, each port's ``auth``); what is forwarded, and every beacon, is
sealed anew by the port it leaves. Other 1Pipe frames (PREPARE, controller traffic) are sealed end
to end and pass untouched.

The egress port is the switch's own forwarding decision, read from its forwarding table before
the switch makes it (:func:`egress_index`). The class is the one the switch will give the frame
(the ingress port's ``class_map``).

**Beacons** (§5). The timer asks both aggregators for the outputs that carried no 1Pipe packet for
``T_beacon`` and puts one beacon on each (a BEACON with both barriers; a COMMIT when the output has
a commit barrier and no BE one), *queued* (``switch.enqueue``) on the class the last
1Pipe packet for that output took: a beacon never overtakes 1Pipe data waiting in that queue,
even a paused one (the idle source, ``idle_frame``, runs when every class is empty *or paused*,
so it could). Toward a switch: UDP 40100 to 255.255.255.255 from the port's MAC, consumed by the
neighbour's feature. Toward a process: UDP from port 40100 to the process's ip:port and MAC
(learned from its frames), from ``beacon_ip`` (a switch has no address; ``topology.beacon_ip``
picks a free one), TTL 1; only while the process is live.

**Variants** (:mod:`.variant`; *1Pipe: Scalable Total Order Communication in Data Center
Networks*, §6.2). All of the above is the programmable chip's (``variant="chip"``, the default).
With ``variant="cpu"`` (the switch CPU, §6.2.2) or ``"host"`` (an end-host representative,
§6.2.3) the data plane forwards DATA, ACK, NAK... untouched (counted ``passed``: no ``R`` update,
no rewrite, no drop for a valley or a full table: a commodity chip knows nothing of 1Pipe), and
the registers live ``variant_delay_ns`` away (:class:`_Delegate`): a BEACON or COMMIT sets its
input's ``R`` that much after it reached the switch, and every beacon the CPU or representative
sends, every ``T_beacon`` on every output whether it carried data or not (and promptly when a
minimum rises, as the chip's: ``prompt_beacons``), is queued on its output that much after its
barriers were computed. Both are timers of the feature, so the delay is virtual time passing,
and a beacon still enters its output queue after every packet that came in before the beacons
its barrier was made of: FIFO per link and per queue keeps the barrier property (§6.2.2).
Inputs stay live on their beacons, so the input timeouts work as they do on the chip.
"""

from __future__ import annotations

import itertools
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from ipaddress import IPv4Address
from typing import Any, NamedTuple

from headers.auth import TRAILER_LEN
from headers.inet import build_udp_frame
from headers.onepipe import (
    BARRIER_OPCODES,
    BE_BARRIER_OFFSET,
    COMMIT_BARRIER_OFFSET,
    HOP_BY_HOP_OPCODES,
    NO_PAYLOAD_OPCODES,
    TS_HALF,
    TS_MASK,
    OnePipeOpcode,
    beacon,
)
from headers.registry import BROADCAST_MAC, UdpPort

from ..auth.frame import Opener, Sealer
from ..errors import ConfigError
from ..switch import Switch
from ..switch.feature import FeatureBase
from ..switch.port import Port
from .auth import (
    K_EDGE,
    K_FABRIC,
    K_HOST,
    WINDOW,
    AuthCounters,
    check,
    domain_keys,
    fabric_hop,
    frame_context,
    same_keys,
)
from .barrier import DIRECTIONS, DOWN, UP, BarrierAggregator, InputId, OutputId
from .params import PORT, OnePipeParams, is_onepipe_port
from .variant import CHIP, VARIANTS

_OTHERS = frozenset(int(p) for p in UdpPort if p != PORT)
#: 1 at every UDP port whose datagrams are 1Pipe's: its range, less other protocols' ports
_IS_ONEPIPE = bytes(1 if is_onepipe_port(p) and p not in _OTHERS else 0 for p in range(65536))
_OPCODES = frozenset(int(op) for op in OnePipeOpcode)
_BARRIER = frozenset(int(op) for op in BARRIER_OPCODES)
_HOP = frozenset(int(op) for op in HOP_BY_HOP_OPCODES)
_NO_PAYLOAD = frozenset(int(op) for op in NO_PAYLOAD_OPCODES)
_DATA = int(OnePipeOpcode.DATA)
_COMMIT = int(OnePipeOpcode.COMMIT)
_BEACON = int(OnePipeOpcode.BEACON)
_MASK = TS_MASK
_HALF = TS_HALF
_HDR = 24  # the 1Pipe header
#: processes a switch keeps state for (inputs and outputs of its edge ports), by default
MAX_PROCESSES = 4096
#: failure reports a switch keeps for :func:`reports` (the newest; older ones are counted dropped)
MAX_REPORTS = 4096

#: a failure report (see :func:`reports`)
Report = dict[str, Any]


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
    commit_backwards: int = 0  # ... whose nonzero commit barrier was refused (below R_commit, or far ahead)
    commit_held: int = 0  # ... whose commit barrier was ignored: its input is held (§8 step 7)
    late_forwarded: int = 0  # DATA forwarded with msg_ts below the barrier written in (a joining input's)
    tx_stamped: int = 0  # 1Pipe frames stamped for this port as their egress
    beacons_tx: int = 0  # beacons queued on this port
    commits_tx: int = 0  # COMMIT frames queued on this port (a commit barrier and no BE one, §7.2)
    beacon_drops: int = 0  # beacons and COMMITs the port's queue refused (tail drop)
    beacons_no_mac: int = 0  # beacons due to a process whose MAC is unknown (never sent)


class _ProcInfo:
    __slots__ = ("mac", "opener", "seen")

    def __init__(self, now: int) -> None:
        self.mac: bytes | None = None
        self.seen = now
        #: with keys: the replay window of this process's frames (its first genuine one made it)
        self.opener: Opener | None = None


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
    """A beacon frame with zero barriers, patched per beacon (``msg_ts`` = ``be_barrier``, §5;
    ``commit_barrier``), or turned into a COMMIT (§7.2). The template's IP header is 20 bytes: the
    1Pipe header is at 42, its fields at 42 (``msg_ts``), 48 (BE), 54 (commit), 64 (opcode)."""

    __slots__ = ("frame",)

    def __init__(self, src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, dport: int,
                 trailer: bool = False) -> None:
        # with keys, room for the trailer (zeros: _SwitchAuth.reseal fills it in, checksum and all)
        body = beacon(0, 0).to_bytes() + (bytes(TRAILER_LEN) if trailer else b"")
        self.frame = build_udp_frame(src_mac, dst_mac, src_ip, dst_ip, PORT, dport, body, ttl=1)

    def make(self, w: int, c: int = 0) -> bytes:
        """The BEACON for wire barriers ``w`` (BE) and ``c`` (commit, 0: none): ``w`` twice, ``c``,
        and the UDP checksum moved by their words (RFC 1624; the template had zeros there)."""
        f = self.frame
        ts = w.to_bytes(6, "big")
        csum = _moved_checksum(f[40] << 8 | f[41], 0, 2 * w + c)  # (one's complement sums add up)
        return b"".join((f[:40], csum.to_bytes(2, "big"), ts, ts, c.to_bytes(6, "big"), f[60:]))

    def make_commit(self, c: int) -> bytes:
        """The COMMIT for wire commit barrier ``c``: ``msg_ts`` = ``be_barrier`` = 0 (it sets
        ``R_commit`` only), the opcode byte (the high half of a 16-bit word) moved from BEACON."""
        f = self.frame
        csum = _moved_checksum(f[40] << 8 | f[41], _BEACON << 8, (_COMMIT << 8) + c)
        return b"".join((f[:40], csum.to_bytes(2, "big"), f[42:54], c.to_bytes(6, "big"), f[60:64],
                         bytes((_COMMIT,)), f[65:]))


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
        #: with keys: frames sealed for this port, and frames from it opened or refused (per reason)
        self.a = AuthCounters()

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
    """The switch's one timer for 1Pipe: input timeouts and beacons, of both aggregators."""

    def __init__(self, state: _SwitchState) -> None:
        self.state = state

    def next_deadline(self) -> int | None:
        a = self.state.agg.next_deadline()
        b = self.state.commit.next_deadline()
        if a is None or (b is not None and b < a):
            a = b
        d = self.state.delegate
        c = None if d is None else d.next_deadline()
        return a if c is None or (a is not None and a <= c) else c

    def on_timer(self, now_ns: int) -> None:
        self.state.tick(now_ns)

    def set_timer_slack(self, slack_ns: int) -> None:
        """The live switch daemon's recent scheduling delay (``Switch.set_timer_slack``; once per
        switch: this feature is the one hook of 1Pipe's state). Under a controller the commit
        aggregator's timeout declares a process failed (§8 step 1): it waits that much longer.
        The best-effort input timeout (§6) keeps its 10 T_beacon: it declares nothing for good
        (the input re-joins under the freeze, §4, and what reaches receivers late is reported
        lost), and a longer one would stall every receiver longer when a process does die.
        docs/onepipe-reliable.md "Timers on a loaded host"."""
        if self.state.controller:
            self.state.commit.set_timer_slack(slack_ns)


_EDGE = bytes((K_EDGE,))
_FABRIC = bytes((K_FABRIC,))
#: each switch's sealers, by (domain, port): they outlive a re-enable, so that the sequence a
#: neighbour's opener follows goes on (a fresh sealer in the same era would be refused as replays)
_SEALERS: weakref.WeakKeyDictionary[Switch, dict[tuple[str, str], Sealer]] = weakref.WeakKeyDictionary()


class _SwitchAuth:
    """1Pipe's authenticated frames in one switch (docs/onepipe.md "Authenticated beacons and
    barriers", :mod:`.auth`): a sealer per port, an opener per fabric port (the processes' are in
    their ``_ProcInfo``), the ``hop`` of each fabric link's two directions."""

    def __init__(self, switch: Switch, ctx: Any, domain: str, peers: dict[str, str],
                 features: dict[str, OnePipeFeature]) -> None:
        self.ctx = ctx
        self.domain = domain
        self._ring, self._now = ctx.ring, ctx.now
        self.keys = domain_keys(ctx.ring, domain, ctx.now)
        saved = _SEALERS.setdefault(switch, {})
        self.sealers: dict[str, Sealer] = {}
        self.fabric: dict[str, Opener] = {}
        #: each process's opener by (its IP, its UDP port), whatever edge port it speaks on: one
        #: replay window per sender, so a sealed frame replayed on another edge port is refused as
        #: replayed (issue 34, finding 2: a per-port entry had a fresh window for the replay)
        self.edge: dict[bytes, Opener] = {}
        self.hop_out: dict[str, bytes] = {}
        self.hop_in: dict[str, bytes] = {}
        for name, f in features.items():
            s = saved.get((domain, name))
            if s is None:
                s = saved[(domain, name)] = Sealer(self.keys, ctx.era)
            else:
                s.update_keys(self.keys)
            self.sealers[name] = s
            if f.edge:
                continue
            peer = peers.get(name)
            node, sep, port = (peer or "").rpartition(":")
            if not (isinstance(peer, str) and sep and node and port):
                raise ConfigError(f"onepipe.peers.{name}", "with keys, every fabric port needs its peer as "
                                                           f"'switch:port' (the link's other end), got {peer!r}")
            self.fabric[name] = Opener(self.keys, WINDOW)
            self.hop_out[name] = fabric_hop(switch.name, name, node, port)
            self.hop_in[name] = fabric_hop(node, port, switch.name, name)

    def open_edge(self, f: OnePipeFeature, info: _ProcInfo | None, frame: bytes, u: int, end: int) -> Opener | None:
        """The opener that took this process's frame (a fresh one for its first), None: refused.
        The opener is the sender's (its IP and UDP port), shared by every edge port it may come
        in on, and kept only once a frame of it was genuine (forged sources fill no table)."""
        who = frame[26:30] + frame[u:u + 2]
        o = self.edge.get(who)
        fresh = o is None
        if o is None:
            o = Opener(self.keys, WINDOW)
        if not check(o, frame_context(K_HOST, frame, u) + frame[u + 8:end], f.a):
            return None
        if fresh:
            if len(self.edge) >= 2 * MAX_PROCESSES:
                # bounded: the oldest sender's window goes (a sender that silent for that long
                # had its input timed out, and a replay of its frames would be no news)
                del self.edge[next(iter(self.edge))]
            self.edge[who] = o
        return o

    def open_fabric(self, f: OnePipeFeature, frame: bytes, u: int, end: int) -> bool:
        return check(self.fabric[f.name], frame_context(K_FABRIC, frame, u, self.hop_in[f.name]) + frame[u + 8:end],
                     f.a)

    def reseal(self, e: OnePipeFeature, frame: bytes, u: int) -> bytes:
        """``frame`` (its UDP header at ``u``, its last 17 UDP bytes a trailer) sealed anew by ``e``'s
        port: for the process it goes to, or for the neighbour switch; UDP checksum moved
        (RFC 1624: a byte string's one's complement sum is its value mod 0xFFFF, shifted by a
        byte when it ends on an even offset)."""
        end = u + (frame[u + 4] << 8 | frame[u + 5])
        t = end - TRAILER_LEN
        # the MAC's input in one join: the context (frame_context's layout) and the datagram
        head, hop = (_EDGE, b"") if e.edge else (_FABRIC, self.hop_out[e.name])
        trailer = self.sealers[e.name].seal(b"".join((head, frame[26:34], frame[u:u + 4], hop,
                                                      frame[u + 8:t])))[-TRAILER_LEN:]
        e.a.sealed += 1
        csum = frame[u + 6] << 8 | frame[u + 7]
        if csum:
            d = int.from_bytes(frame[t:end], "big") - int.from_bytes(trailer, "big")
            csum = (csum + (d << 8 if (t - u) % 2 == 0 else d)) % 0xFFFF or 0xFFFF  # (_moved_checksum)
        return b"".join((frame[:u + 6], csum.to_bytes(2, "big"), frame[u + 8:t], trailer, frame[end:]))

    def refresh(self, procs: dict[ProcKey, _ProcInfo]) -> None:
        """Follow the daemon's key context (a rotation, an old key's end): cheap when nothing changed."""
        ctx = self.ctx
        if ctx.ring is self._ring and ctx.now == self._now:
            return
        self._ring, self._now = ctx.ring, ctx.now
        keys = domain_keys(ctx.ring, self.domain, ctx.now)
        if same_keys(keys, self.keys):
            return
        self.keys = keys
        for s in self.sealers.values():
            s.update_keys(keys)
        for o in self.fabric.values():
            o.update_keys(keys)
        for o in self.edge.values():
            o.update_keys(keys)

    def status(self) -> dict[str, Any]:
        return {"domain": self.domain, "window": WINDOW, "key_ids": sorted(self.keys.keys),
                "current": self.keys.current, "era": self.ctx.era,
                "next_seq": {name: s.next_seq for name, s in self.sealers.items()}}


class CommitAggregator(BarrierAggregator):
    """The commit side (R_commit, §7.2). Under a controller, :meth:`admit` also ends the hold of
    an input still in the minima: a process a switch found silent, probed by the controller,
    answered (ours, issue 31: merely slow, not failed). It stays in the minima at the commit it
    was frozen at (its own commit is not lower: commits never decrease), its updates are taken
    again and its timeout runs from ``now_ns``; the barrier to it moves again. Nothing was recalled
    because of it (no notice left the controller), so the fail-stop fence has nothing to guard."""

    def admit(self, input_id: InputId, now_ns: int | None = None) -> bool:
        inp = self._inputs.get(input_id)
        if inp is None or not (inp.held and inp.live) or now_ns is None:
            return super().admit(input_id, now_ns)
        inp.held = False
        inp.heard_at = now_ns
        inp.c.joins += 1
        self._file_timeout(inp, force=True)
        for out in self._peers.get(input_id, ()):
            self._file_beacon(out)
        return True


@dataclass(eq=False, slots=True)
class DelegateCounters:
    """What the switch CPU or representative of a cpu or host variant counts (``status()["variant"]``)."""

    beacons_in: int = 0  # BEACON / COMMIT frames that reached it (R updated on arrival)
    beacons_out: int = 0  # beacons it sent, handed to the switch's outputs
    data_forwarded: int = 0  # barrier-carrying packets the data plane forwarded untouched


class _Delegate:
    """Where a cpu or host variant's registers live (module docstring, "Variants"; :mod:`.variant`):
    ``delay`` ns away from the switch, each way. Two queues in flight, both in the order their
    frames were handed over: a constant delay and a switch clock that never goes back keep them
    sorted by due time, so the timer needs only their heads."""

    __slots__ = ("c", "delay", "rx", "tx", "variant")

    def __init__(self, variant: str, delay: int) -> None:
        self.variant = variant
        self.delay = delay
        #: beacons on their way in: (due, port feature, input, opcode, BE barrier, commit barrier or
        #: None), the barriers unwrapped when the beacon reached the switch
        self.rx: deque[tuple[int, OnePipeFeature, InputId, int, int, int | None]] = deque()
        #: beacons on their way out: (due, output, BE barrier, commit barrier), computed at due - delay
        self.tx: deque[tuple[int, OutputId, int | None, int | None]] = deque()
        self.c = DelegateCounters()

    def next_deadline(self) -> int | None:
        a = self.rx[0][0] if self.rx else None
        b = self.tx[0][0] if self.tx else None
        if a is None:
            return b
        return a if b is None or a <= b else b

    def status(self) -> dict[str, Any]:
        return {"name": self.variant, "delay_ns": self.delay, "in_flight_in": len(self.rx),
                "in_flight_out": len(self.tx), **asdict(self.c)}


class _SwitchState:
    """1Pipe in one switch: the two aggregators, the port features, the processes it knows, the
    failure reports."""

    def __init__(self, switch: Switch, directions: dict[str, str], params: OnePipeParams, now: int,
                 beacon_ip: bytes | None, max_processes: int, controller: bool = False,
                 on_report: Callable[[Report], Any] | None = None, domain: str | None = None,
                 peers: dict[str, str] | None = None, variant: str = CHIP, variant_delay_ns: int = 0) -> None:
        self.switch = switch
        self.params = params
        #: the cpu and host variants' registers (None: the programmable chip, module docstring)
        self.delegate = None if variant == CHIP else _Delegate(variant, variant_delay_ns)
        self.directions = dict(directions)
        self.beacon_ip = beacon_ip
        self.max_processes = max_processes
        self.controller = controller
        self.on_report = on_report
        #: R_be (best effort, §4-§6)
        self.agg = BarrierAggregator(params)
        #: R_commit, aggregated exactly as R_be (§7.2); under a controller a timed-out input is
        #: held until released (§8 step 7)
        # under a controller the commit side times a process out (a failure) after its own,
        # possibly longer, timeout (OnePipeParams.failure_beacons)
        self.commit = CommitAggregator(params.with_(timeout_beacons=params.failure_beacons or params.timeout_beacons)
                                       if controller else params, hold=controller)
        self.reports: deque[Report] = deque(maxlen=MAX_REPORTS)
        self.report_seq = 0  # the seq of the next report
        self.reports_dropped = 0  # the oldest reports pushed out of the deque
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
                for a in (self.agg, self.commit):
                    a.add_input(port.name, down=f.down)
                    a.add_output(port.name, f.direction, now)
        self.timer = _Timer(self)
        #: authenticated frames (the switch has keys, ``switch.auth``, and 1Pipe a domain)
        self.auth = (_SwitchAuth(switch, switch.auth, domain, peers or {}, self.features)
                     if switch.auth is not None and domain is not None else None)

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
        if ip_end > n or udp_len < 8 + _HDR or u + udp_len > ip_end or op not in _OPCODES:
            c.malformed += 1
            return None
        if op not in _BARRIER:
            c.passed += 1  # (with keys, sealed end to end: PREPARE by its sender, controller traffic)
            return frame
        if self.delegate is not None and op not in _HOP:
            return self._untouched(f, frame, u)
        a = self.auth
        if a is not None and udp_len < 8 + _HDR + TRAILER_LEN:
            f.a.truncated += 1  # no room for a trailer: an unsealed frame
            return None
        if op in _NO_PAYLOAD and udp_len != 8 + _HDR + (0 if a is None else TRAILER_LEN):
            c.malformed += 1
            return None
        iid: InputId
        if f.edge:
            proc = (f.name, frame[26:30], frame[u] << 8 | frame[u + 1])
            info = self.procs.get(proc)
            # authenticated before any state is made for it: forged sources fill no table
            opener = None if a is None else a.open_edge(f, info, frame, u, u + udp_len)
            if a is not None and opener is None:
                return None
            info = info or self._proc(proc, now)
            iid = proc
            if info is None:
                c.table_full += 1
                return None
            info.opener = opener
            info.mac = frame[6:12]
            info.seen = now
        else:
            if a is not None and not a.open_fabric(f, frame, u, u + udp_len):
                return None
            iid = f.name
        at = p + BE_BARRIER_OFFSET
        w = int.from_bytes(frame[at:at + 6], "big")
        if self.delegate is not None:  # (a beacon: data took _untouched above)
            cat = p + COMMIT_BARRIER_OFFSET
            self._to_delegate(f, iid, op, w, int.from_bytes(frame[cat:cat + 6], "big"), now)
            return None
        # a COMMIT sets R_commit only (§7.2; its be_barrier is 0)
        if op != _COMMIT and not self.agg.heard(iid, now + ((w - now + _HALF) & _MASK) - _HALF, now):
            c.barrier_backwards += 1  # (the heard() call unwraps w near now: ts_unwrap, inlined)
        cw = int.from_bytes(frame[p + COMMIT_BARRIER_OFFSET:p + COMMIT_BARRIER_OFFSET + 6], "big")
        if cw:  # 0: no commit barrier (a best-effort process, a hop with no commit minimum yet)
            commit = self.commit
            if not commit.heard(iid, now + ((cw - now + _HALF) & _MASK) - _HALF, now):
                if commit.held(iid):
                    c.commit_held += 1
                else:
                    c.commit_backwards += 1
        if op in _HOP:
            c.beacons_rx += 1
            return None  # hop by hop: never forwarded (§5)
        return self._stamp(f, frame, u, op, w, cw, now)

    def _untouched(self, f: OnePipeFeature, frame: bytes, u: int) -> bytes:
        """A barrier-carrying packet in a cpu or host variant: the chip forwards it as it is (its
        barriers are its sender's, which no receiver takes: ``Endpoint.beacon_barriers``). Only
        the class it will take is noted, for its output's beacons (a beacon queued behind it
        keeps FIFO with it, §6.2.2: "data and beacon packets are FIFO in switch queues")."""
        f.c.passed += 1
        assert self.delegate is not None
        self.delegate.c.data_forwarded += 1
        dst = frame[:6]
        if not dst[0] & 1:
            fdb = self.switch.fdb
            idx = fdb.static.get(dst)
            if idx is None:
                idx = fdb.learned.get(dst)
            if idx is not None and idx < len(self.by_index):
                e = self.by_index[idx]
                oid: OutputId = (e.name, frame[30:34], frame[u + 2] << 8 | frame[u + 3]) if e.edge else e.name
                if not e.edge or oid in self.procs:
                    self.cls[oid] = f.port.cfg.class_map[frame[15] >> 5]
        return frame

    def _to_delegate(self, f: OnePipeFeature, iid: InputId, op: int, w: int, cw: int, now: int) -> None:
        """A BEACON or COMMIT from ``iid`` (wire barriers ``w``, ``cw``) leaves for the CPU or the
        representative: its registers take it ``delay`` from now (:meth:`_delegate_in`)."""
        d = self.delegate
        assert d is not None
        f.c.beacons_rx += 1
        b = now + ((w - now + _HALF) & _MASK) - _HALF  # (ts_unwrap near now, as ingress does)
        cb = now + ((cw - now + _HALF) & _MASK) - _HALF if cw else None
        d.rx.append((now + d.delay, f, iid, op, b, cb))

    def _delegate_in(self, now: int) -> None:
        """The beacons that have reached the CPU or representative by ``now`` set their inputs'
        registers, in the order they came (§4: ``R[i] = beacon.barrier``)."""
        d = self.delegate
        assert d is not None
        rx = d.rx
        agg, commit = self.agg, self.commit
        while rx and rx[0][0] <= now:
            _, f, iid, op, b, cb = rx.popleft()
            d.c.beacons_in += 1
            if not agg.has_input(iid):
                continue  # (a process forgotten meanwhile: its table entry went to another)
            c = f.c
            if op != _COMMIT and not agg.heard(iid, b, now):
                c.barrier_backwards += 1
            if cb is not None and not commit.heard(iid, cb, now):
                if commit.held(iid):
                    c.commit_held += 1
                else:
                    c.commit_backwards += 1

    def _delegate_out(self, now: int) -> None:
        """The beacons the CPU or representative sent that are back at the switch by ``now``:
        queued on their outputs (:meth:`_send_beacon`)."""
        d = self.delegate
        assert d is not None
        tx = d.tx
        while tx and tx[0][0] <= now:
            _, oid, b, cb = tx.popleft()
            d.c.beacons_out += 1
            self._send_beacon(oid, b, cb, now)

    def _stamp(self, f: OnePipeFeature, frame: bytes, u: int, op: int, old: int, old_c: int,
               now: int) -> bytes | None:
        """Rewrite ``be_barrier`` and ``commit_barrier`` (``old``, ``old_c`` on the wire) with the
        barriers of the output the frame takes (§4, §7.2)."""
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
        commit = self.commit
        if commit.in_min:  # (none: a best-effort fabric, no commit barrier anywhere; skip the work)
            cb = commit.barrier_for(oid, now)
            commit.note_sent(oid, now)
            # 0: none. A commit minimum that is 0 mod 2^48 (1 ns every 78 hours) goes out as
            # none too: a reader skips it, which is safe, where writing 1 would overstate it
            cw = 0 if cb is None else cb & _MASK
        else:
            cw = 0
        self.cls[oid] = f.port.cfg.class_map[frame[15] >> 5]  # the switch's own classification
        c.stamped += 1
        e.c.tx_stamped += 1
        w = b & _MASK
        at = u + 8 + BE_BARRIER_OFFSET
        if op == _DATA and ((int.from_bytes(frame[u + 8:u + 14], "big") - w) & _MASK) >= _HALF:
            c.late_forwarded += 1  # msg_ts below the barrier (ts_lt): its receiver drops and NAKs it
        csum = frame[u + 6] << 8 | frame[u + 7]
        if cw == old_c:  # (best effort: 0 in, 0 out) the commit field stays as it is
            if csum:  # 0: no checksum (RFC 768)
                csum = _moved_checksum(csum, old, w)
            out = b"".join((frame[:u + 6], csum.to_bytes(2, "big"), frame[u + 8:at], w.to_bytes(6, "big"),
                            frame[at + 6:]))
        else:
            if csum:
                csum = _moved_checksum(csum, old + old_c, w + cw)  # both fields at once (sums add up)
            # be_barrier and commit_barrier are adjacent (offsets 6 and 12): one slice for both
            out = b"".join((frame[:u + 6], csum.to_bytes(2, "big"), frame[u + 8:at], w.to_bytes(6, "big"),
                            cw.to_bytes(6, "big"), frame[at + 12:]))
        # with keys: sealed anew for the output it takes (the barriers in it are this switch's now)
        return out if self.auth is None else self.auth.reseal(e, out, u)

    def _proc(self, proc: ProcKey, now: int) -> _ProcInfo | None:
        """The state of ``proc``, made on first sight (its input and output), or None when the
        table is full of live processes."""
        info = self.procs.get(proc)
        if info is not None:
            return info
        agg, commit = self.agg, self.commit
        if len(self.procs) >= self.max_processes:
            # a held process is never evicted: forgetting it would release its commit input
            # behind the controller's back (§8 step 7)
            silent = [(i.seen, k) for k, i in self.procs.items() if not agg.is_live(k) and not commit.held(k)]
            if not silent:
                return None
            _, old = min(silent, key=lambda x: x[0])
            self._forget(old)
        info = self.procs[proc] = _ProcInfo(now)
        for a in (agg, commit):
            a.add_input(proc, down=True)
            a.add_output(proc, DOWN, now, peer_input=proc)
        return info

    def _forget(self, proc: ProcKey) -> None:
        del self.procs[proc]
        for a in (self.agg, self.commit):
            a.remove_input(proc)
            a.remove_output(proc)
        self.cls.pop(proc, None)
        self.templates.pop(proc, None)

    # ------------------------------------------------------------------ timer
    def tick(self, now: int) -> None:
        agg, commit = self.agg, self.commit
        if self.auth is not None:
            self.auth.refresh(self.procs)
        d = self.delegate
        if d is not None:
            self._delegate_in(now)  # (before the timeouts: a beacon that arrived keeps its input live)
        for iid in agg.on_timer(now):
            # under a controller a process with a commit is reported by the commit side (below),
            # whose timeout holds its last commit: final for the report. (A best-effort process,
            # never heard on the commit side, is reported here: nothing to freeze)
            if not (self.controller and commit.r(iid) is not None):
                self._report(iid, now, "timeout")
        for iid in commit.on_timer(now):
            # held (controller): the controller must hear of it, or nothing would release it.
            # "commit_timeout": its BE side is still heard (a process stuck on its commit)
            if self.controller:
                self._report(iid, now, "commit_timeout" if agg.is_live(iid) else "timeout")
        be_due = agg.due_beacons(now)
        commit_due = commit.due_beacons(now)
        if not be_due and not commit_due:
            if d is not None:
                self._delegate_out(now)
            return
        # the chip queues its beacons now; a CPU or representative sends them back to the switch
        out = self._send_beacon if d is None else self._beacon_to_switch
        # one frame per output due in either: a beacon carries both barriers (§7.2)
        cdue: dict[OutputId, int | None] = dict(commit_due)
        for oid, b in be_due:
            if oid in cdue:
                cb = cdue.pop(oid)
            else:
                cb = commit.barrier_for(oid, now)
                commit.note_sent(oid, now)
            out(oid, b, cb, now)
        for oid, cb in cdue.items():
            if isinstance(oid, tuple) and not agg.is_live(oid):
                continue  # a process gets beacons only while it is live (its BE input)
            b2 = agg.barrier_for(oid, now)
            agg.note_sent(oid, now)
            out(oid, b2, cb, now)
        if d is not None:
            self._delegate_out(now)  # (those due now: a delay of 0)

    def _beacon_to_switch(self, oid: OutputId, barrier: int | None, commit: int | None, now: int) -> None:
        """A beacon the CPU or representative computed ``now``: it reaches the switch, and its
        output's queue, ``delay`` later (IP-in-IP across the real link for a representative,
        §6.2.3; the barriers stay those of ``now``)."""
        d = self.delegate
        assert d is not None
        d.tx.append((now + d.delay, oid, barrier, commit))

    def _report(self, iid: InputId, now: int, cause: str) -> None:
        """Record a failure report for the controller (§8 step 1: a neighbour reports a silent
        link or process with the last commit it heard from it)."""
        port, name = _label(iid)
        rep: Report = {"seq": self.report_seq, "input": name, "port": port, "last_commit": self.commit.r(iid),
                       "at_ns": now, "cause": cause}
        self.report_seq += 1
        if len(self.reports) == self.reports.maxlen:
            self.reports_dropped += 1
        self.reports.append(rep)
        if self.on_report is not None:
            self.on_report(dict(rep))

    def _send_beacon(self, oid: OutputId, barrier: int | None, commit: int | None, now: int) -> None:
        """A BEACON with both barriers, or a COMMIT when there is a commit barrier only (§7.2)."""
        if barrier is None and commit is None:
            return
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
                cached = (mac, _BeaconTemplate(e.port.mac, mac, src_ip, dst_ip, dport, self.auth is not None))
                self.templates[oid] = cached
        else:
            e = self.features[str(oid)]
            cached = self.templates.get(oid)
            if cached is None or cached[1].frame[6:12] != e.port.mac:
                src_ip = self.beacon_ip if self.beacon_ip is not None else b"\0\0\0\0"
                cached = (None, _BeaconTemplate(e.port.mac, BROADCAST_MAC, src_ip, b"\xff\xff\xff\xff", PORT,
                                                self.auth is not None))
                self.templates[oid] = cached
        cw = 0 if commit is None else commit & _MASK
        if barrier is not None:
            frame = cached[1].make(barrier & _MASK, cw)
        elif cw:
            frame = cached[1].make_commit(cw)
        else:
            return  # a commit minimum of 0 mod 2^48 alone: nothing to say (0 is "none")
        if self.auth is not None:
            frame = self.auth.reseal(e, frame, 34)  # (the template's IP header is 20 bytes)
        if self.switch.enqueue(e.name, frame, self.cls.get(oid, 0), now):
            if barrier is not None:
                e.c.beacons_tx += 1
            else:
                e.c.commits_tx += 1
        else:
            e.c.beacon_drops += 1

    # ------------------------------------------------------------------ status
    def status(self, now: int) -> dict[str, Any]:
        agg, commit = self.agg, self.commit
        ports: dict[str, Any] = {}
        for name, f in self.features.items():
            ports[name] = {"direction": f.direction, "role": "edge" if f.edge else "fabric",
                           "counters": asdict(f.c), "inputs": {}, "outputs": {}}
            if self.auth is not None:
                ports[name]["auth"] = f.a.to_dict()
        for iid in agg.input_ids():
            port, key = _label(iid)
            state = agg.input_state(iid, now)
            # "held" is the commit side's: the BE aggregator never holds (decentralised, §6)
            cs = commit.input_state(iid, now) if commit.has_input(iid) else {}
            state.update(commit_r=cs.get("r"), held=cs.get("held", False), commit_live=cs.get("live", False),
                         commit_held_updates=cs.get("held_updates", 0), commit_timeouts=cs.get("timeouts", 0))
            ports[port]["inputs"][key] = state
        for oid in agg.output_ids():
            port, key = _label(oid)
            state = agg.output_state(oid, now)
            state["joining"] = [_label(i)[1] for i in agg.joining(oid)]
            state["class"] = self.cls.get(oid)
            state["commit_barrier"] = commit.output_state(oid, now)["barrier"] if commit.has_output(oid) else None
            ports[port]["outputs"][key] = state
        return {"enabled": True, "params": self.params.to_dict(), "directions": dict(self.directions),
                "processes": len(self.procs), "max_processes": self.max_processes,
                "beacon_ip": None if self.beacon_ip is None else ".".join(map(str, self.beacon_ip)),
                "controller": self.controller, "reports": self.report_seq, "reports_dropped": self.reports_dropped,
                # the timers that time inputs out, as in force now (docs/onepipe-reliable.md "Timers
                # on a loaded host"): the failure timeout is the commit side's under a controller
                "timers": {"input_timeout_ns": agg.timeout_ns, "failure_timeout_ns": commit.timeout_ns
                           if self.controller else None, "timer_slack_ns": commit.timer_slack_ns},
                "auth": None if self.auth is None else self.auth.status(),
                **({} if self.delegate is None else {"variant": self.delegate.status()}),
                "aggregator": agg.counters(), "commit_aggregator": commit.counters(), "ports": ports}

    # ------------------------------------------------------------------ controller hooks (§8)
    def resolve(self, text: Any) -> list[InputId]:
        """The inputs named by ``text``, a report's form: a fabric port's name, or ``ip:port`` for a
        process (every edge port it is known behind; none when unknown). ConfigError for
        anything else."""
        if not isinstance(text, str) or not text:
            raise ConfigError("onepipe.input", f"must be a fabric port name or a process as ip:port, got {text!r}")
        f = self.features.get(text)
        if f is not None:
            if f.edge:
                raise ConfigError("onepipe.input", f"{text} is an edge port: its inputs are processes, "
                                                   "name one as ip:port")
            return [text]
        host, sep, port = text.rpartition(":")
        try:
            if not sep or not port.isdigit() or not 0 < int(port) <= 0xFFFF:
                raise ValueError(port)
            ip = IPv4Address(host).packed
        except ValueError:
            raise ConfigError("onepipe.input", f"{text!r} is neither a fabric port of {self.switch.name} "
                                               f"({', '.join(n for n, x in self.features.items() if not x.edge)})"
                                               " nor a process as ip:port") from None
        udp = int(port)
        return [k for k in self.procs if k[1] == ip and k[2] == udp]

    def fence(self, text: str) -> dict[str, Any]:
        ids = self.resolve(text)
        values = [v for v in (self.commit.fence(i) for i in ids) if v is not None]
        # behind two edge ports at once (it moved): the later commit, as T_f takes the max (§8)
        return {"input": text, "known": bool(ids), "last_commit": max(values) if values else None}

    def release(self, text: str, now: int, ban: bool = False) -> bool:
        ids = self.resolve(text)
        return any([self.commit.release(i, now, ban=ban) for i in ids])

    def admit(self, text: str, now: int | None = None) -> bool:
        ids = self.resolve(text)
        return any([self.commit.admit(i, now) for i in ids])

    def reports_since(self, since: int) -> list[Report]:
        first = self.report_seq - len(self.reports)  # seqs in the deque are consecutive
        return [dict(r) for r in itertools.islice(self.reports, max(0, since - first), None)]


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
           max_processes: int = MAX_PROCESSES, controller: bool = False,
           on_report: Callable[[Report], Any] | None = None, domain: str | None = None,
           peers: dict[str, str] | None = None, variant: str = CHIP, variant_delay_ns: int = 0) -> OnePipeFeature:
    """Run 1Pipe's barrier aggregation in ``switch``: ``directions`` gives every port's direction
    (``topology.port_directions``). Enabling it again starts afresh (barriers may then go back
    on a link once, which receivers ignore; the reports start again at seq 0). Returns the first
    port's feature. ConfigError on bad settings.

    ``controller``: reliable 1Pipe has a controller that releases failed inputs (§8 step 7): a
    timed-out input is held in the commit minimum until :func:`release`. ``on_report``: called
    with every failure report as it is recorded (see :func:`reports`).

    ``domain``, ``peers``: authenticated frames (docs/onepipe.md "Authenticated beacons and
    barriers"), when the switch has keys (``switch.auth``, from the topology's key file): the
    deployment's 1Pipe domain (its prefix: the domain key is ``onepipe-domain/<domain>``) and, for
    every fabric port, the other end of its link as ``"switch:port"``. A switch with keys and no
    domain is refused (it would take and send unsealed frames where its neighbours expect sealed
    ones); without keys both are ignored and nothing changes on the wire.

    ``variant``: where the switch's 1Pipe processing runs (:mod:`.variant`; the module docstring's
    "Variants"): ``"chip"`` (the default, the data plane), ``"cpu"`` or ``"host"``, whose registers
    are ``variant_delay_ns`` (>= 0) away each way. Its processes must then beacon every
    ``T_beacon`` and take barriers from beacons only (``Endpoint.beacon_barriers``). The cpu and
    host variants do not authenticate: they forward data untouched, and a sealed frame is sealed
    for one hop (refused on a switch with keys)."""
    if isinstance(params, dict):
        params = OnePipeParams(**params)
    if params is None:
        params = OnePipeParams()
    if not isinstance(params, OnePipeParams):
        raise ConfigError("onepipe.params", f"expected OnePipeParams, got {type(params).__name__}")
    _check_directions(switch, directions)
    if not isinstance(max_processes, int) or max_processes < 1:
        raise ConfigError("onepipe.max_processes", f"must be a positive integer, got {max_processes!r}")
    if not isinstance(controller, bool):
        raise ConfigError("onepipe.controller", f"must be true or false, got {controller!r}")
    if on_report is not None and not callable(on_report):
        raise ConfigError("onepipe.on_report", f"must be callable, got {type(on_report).__name__}")
    ip = _ip(beacon_ip)
    if switch.auth is not None and (not isinstance(domain, str) or not domain):
        raise ConfigError("onepipe.domain", f"switch {switch.name} has keys: 1Pipe needs its domain (the deployment's "
                                            f"prefix) to authenticate beacons and barriers, got {domain!r}")
    if peers is not None and not isinstance(peers, dict):
        raise ConfigError("onepipe.peers", f"must be a mapping port -> 'switch:port', got {type(peers).__name__}")
    if variant not in VARIANTS:
        raise ConfigError("onepipe.variant", f"must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if isinstance(variant_delay_ns, bool) or not isinstance(variant_delay_ns, int) or variant_delay_ns < 0:
        raise ConfigError("onepipe.variant_delay_ns", f"must be a whole number of ns >= 0, got {variant_delay_ns!r}")
    if variant != CHIP and switch.auth is not None:
        raise ConfigError("onepipe.variant", f"switch {switch.name} has keys: the {variant} variant forwards data "
                                             "untouched, which hop-by-hop sealing cannot (use the chip variant)")
    disable(switch)
    now = switch.now if now_ns is None else max(now_ns, switch.now)
    state = _SwitchState(switch, directions, params, now, ip, max_processes, controller, on_report, domain, peers,
                         variant, variant_delay_ns)
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


def authenticated(switch: Switch) -> bool:
    """1Pipe is on in ``switch`` and seals and opens its frames (it has keys and a domain)."""
    state = _STATE.get(switch)
    return state is not None and state.auth is not None


def aggregator(switch: Switch) -> BarrierAggregator | None:
    """The switch's aggregator (None when 1Pipe is off): for tests and the virtual-time runtime."""
    state = _STATE.get(switch)
    return None if state is None else state.agg


def commit_aggregator(switch: Switch) -> BarrierAggregator | None:
    """The switch's commit aggregator, ``R_commit`` (§7.2; None when 1Pipe is off)."""
    state = _STATE.get(switch)
    return None if state is None else state.commit


def _state(switch: Switch) -> _SwitchState:
    state = _STATE.get(switch)
    if state is None:
        raise ConfigError("onepipe", f"1Pipe is not enabled in switch {switch.name}")
    return state


def reports(switch: Switch, since: int = 0) -> list[Report]:
    """The failure reports kept (the newest :data:`MAX_REPORTS`) with ``seq >= since``, oldest
    first; [] when 1Pipe is off. A report: ``seq`` (0, 1, ... since :func:`enable`), ``input``
    (a process as ``ip:port``, a fabric link by its port name), ``port``, ``last_commit`` (its
    ``R_commit``, absolute ns in the switch's clock, None if never heard), ``at_ns``, ``cause``
    (``"timeout"``: its BE input timed out; ``"commit_timeout"``, with a controller only: its
    commit went silent while its BE barrier did not)."""
    state = _STATE.get(switch)
    return [] if state is None else state.reports_since(since)


def reports_page(switch: Switch, since: int = 0) -> dict[str, Any]:
    """``{"reports": reports(switch, since), "next": the seq of the next report, "dropped": how
    many old ones fell out}``: what a poller keeps (ask again with ``since=next``). ConfigError
    when 1Pipe is off."""
    state = _state(switch)
    return {"reports": state.reports_since(since), "next": state.report_seq, "dropped": state.reports_dropped}


def fence(switch: Switch, input: str) -> dict[str, Any]:
    """Hold ``input`` (a report's form: ``ip:port`` or a fabric port name) in the commit
    aggregator now (§8: the controller freezes a failed process's last commit):
    ``{"input", "known", "last_commit"}``. ConfigError for a malformed name or when 1Pipe is off."""
    return _state(switch).fence(input)


def release(switch: Switch, input: str, now_ns: int | None = None, *, ban: bool = False) -> bool:
    """Take ``input`` out of the commit minimum and end its hold (the controller's RESUME, §8
    step 7): commit barriers move past it. ``ban``: it stays out until :func:`admit` (a failed
    process, ``BarrierAggregator.release``). False when this switch does not know it.
    ConfigError for a malformed name or when 1Pipe is off."""
    state = _state(switch)
    return state.release(input, switch.now if now_ns is None else max(now_ns, switch.now), ban=bool(ban))


def admit(switch: Switch, input: str, now_ns: int | None = None) -> bool:
    """Let a banned ``input`` re-join the commit minimum (the controller registered it again,
    §8 "Recovery"), at once, at the highest commit barrier the switch gave
    (``BarrierAggregator.admit``). False when this switch does not know it."""
    return _state(switch).admit(input, switch.now if now_ns is None else max(now_ns, switch.now))


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


__all__ = ["MAX_PROCESSES", "MAX_REPORTS", "CommitAggregator", "DelegateCounters", "OnePipeFeature", "PortCounters",
           "Proc", "Report",
           "admit", "aggregator", "authenticated", "commit_aggregator", "default_beacon_ip", "disable", "egress_index",
           "enable", "enabled", "features", "fence", "release", "reports", "reports_page", "status"]
