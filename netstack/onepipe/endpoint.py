"""The 1Pipe endpoint (lib1pipe, 1Pipe §6.1), sans-IO: one process's sender and receiver.

Design topics §1, §2, §5, §6 and §9 (docs/papers.md, "1Pipe design topics") are the rules it
follows; every choice the paper leaves open is marked *ours* below and in the comments.

Inputs, all in **host time** (the shell passes ``clock.now(true_ns)``): :meth:`Endpoint.send`
(a scattering), :meth:`Endpoint.receive` (a UDP payload from ``src``, with the IP ECN CE mark)
and :meth:`Endpoint.on_timer`; :meth:`Endpoint.next_deadline` says when the timer is due.
Outputs, in :attr:`Endpoint.actions` (``netstack.engine``), in decision order:

- ``SendTo(dst, datagram)``: a DATA fragment, an ACK or a NAK for process ``dst``;
  ``SendTo(UPLINK, beacon)`` for the ToR (hop by hop, consumed there);
- ``Deliver(ts, src, msg)``: a whole message, in the total order (``onepipe_unreliable_recv``);
- ``SendFail(ts, dst, msg)``: a message of ours that will not be delivered (a NAK, or the
  receiver's ACK bitmap says it gave it up: ``known``), or whose fate could not be learned in
  time (the ACK timeout: ``known=False``, counted ``send_unknown``, issue 31: it may have been
  delivered, its ACKs late or lost) (``onepipe_send_fail_callback``). Best effort never
  retransmits.

Sender (design topics §2, §9):

- ``send`` queues a scattering in the send buffer (``send_buffer`` scatterings; full: ``None``,
  "send fails immediately", design topic §1). The head of the queue takes credits from each of
  its destinations' windows, ``min(rwnd_packets, cwnd)`` packets of PSN span from the oldest
  unsettled packet; it keeps what it holds while it waits for the rest (no live-lock) and the
  scatterings behind it wait (per-sender FIFO). When it holds every credit it needs it is
  stamped ``ts = max(now, last ts, last barrier advertised, barrier received)`` and all its
  fragments leave at once with that ``ts``; ``be_barrier = ts`` on data (design topic §4).
  Nothing leaves before the first barrier from the ToR (``join_waits``): until then the
  process has not joined, and a ts stamped blind may lie below what receivers delivered.
- Messages are cut into ``mtu_payload`` fragments with consecutive PSNs per connection
  (source process -> destination process, from 0, 32-bit on the wire). The first fragment
  carries :data:`SOM` (ours), the last ``EOM``.
- Beacons (design topic §5): at each multiple of ``T_beacon`` in host time, one beacon to
  ``UPLINK`` with the barrier ``max(now, last ts, last advertised)``, unless a packet to
  another process (which carries our barrier through the ToR) already took that value up.
  Beacons bypass the windows. With :attr:`Endpoint.beacon_barriers` (below) the beacon goes at
  every tick.
- cwnd is DCTCP's (RFC 8257): ``alpha`` is an EWMA (gain ``dctcp_g``) of the fraction of ACKed
  packets that were CE-marked, per window of ACKed packets; an ECE ACK cuts
  ``cwnd * (1 - alpha/2)`` at most once per window, a loss (NAK or timeout) halves it (RFC 8257
  §3.5), a window without a cut adds one packet; ``min_cwnd <= cwnd <= rwnd_packets``. A
  message larger than the congestion window goes out alone, once its connection is idle
  (ours: otherwise it could never fit).
- An ACK settles every PSN below its cumulative point; a NAK fails the message it names; a
  packet still unsettled ``ack_timeout_ns`` (plus the timer slack, below) after it left fails its
  message (tail loss). ``SendFail`` fires once per message. Everything held per packet is freed
  when it settles.
- Timer slack (ours; docs/onepipe-reliable.md "Timers on a loaded host"): :meth:`Endpoint.set_timer_slack`
  tells the engine how late its live process has recently been scheduled. The ACK timeout, the
  one timer here that declares something lost, waits that much longer, so that scheduling delay
  alone (the ACK sat in the socket while the process waited for a CPU) never fails a message.
  Virtual time never sets it (0).

Receiver (design topics §1, §6):

- The barrier is ``be_barrier`` of the latest packet the ToR forwarded or sent to us (DATA,
  ACK, NAK, BEACON...: :data:`headers.onepipe.BARRIER_OPCODES`); a lower one is counted
  (``barrier_backwards``) and ignored. Packets from this host (``me``, or another process on
  the same IP: the kernel hands them over without the ToR) never move the barrier.
- Switches whose data plane does not rewrite barriers (the switch-CPU and host-delegate
  variants, :mod:`.variant`; *1Pipe: Scalable Total Order Communication in Data Center Networks*,
  §6.2.2: "buffered data packets are delivered to the application according to barriers in
  beacon packets"): with :attr:`Endpoint.beacon_barriers` set, the barrier comes from BEACON
  (and COMMIT) frames only, since a DATA, ACK or NAK then carries its sender's own barrier,
  aggregated by no switch; and the process beacons at every tick, since its data no longer
  carries its barrier to the ToR.
- The buffer is ordered by ``(ts, key(src), PSN)``. On every packet and timer, with
  ``limit = min(barrier, now)`` (``ts < now``: causality, design topic §1; a timer wakes the
  endpoint when its clock passes a waiting message), every complete message with
  ``ts < limit`` is delivered in that order; ``delivered_barrier`` becomes ``limit``.
- Loss (ours, from the barrier property, design topic §4: nothing below a barrier can still
  come): PSNs still missing below a packet with ``ts < limit`` are lost, and so is the rest
  of a message whose first fragment has ``ts < limit``. They are given up: dropped, NAKed (one
  NAK per range, ``psn`` = the first, the payload a 4-byte count when it is more than one) and
  counted. A DATA packet with ``ts < delivered_barrier`` is dropped, NAKed with every missing
  PSN below it, and counted (``late_dropped``).
- ACKs are cumulative: ``psn`` = the first PSN not yet settled (delivered or given up); one per
  connection per call when that point moved, repeated on the next :data:`ACK_REPEATS` beacon
  ticks, so a lost ACK rarely becomes a false send-fail. ``ECE`` when CE-marked data arrived
  since the previous ACK. The payload (ours) is a bitmap of the given-up PSNs among the
  ``rwnd_packets`` below the cumulative point (bit ``i`` = PSN ``cum - 1 - i``, LSB first,
  trailing zero bytes trimmed): a sender that lost the NAK still learns which PSNs below the
  point failed, so an ACK never passes off a lost message as delivered. Both ends must run the
  same ``rwnd_packets``.
- A connection buffers at most ``rwnd_packets`` packets; one more is dropped, NAKed and
  remembered as given up (``rx_buffer_full``).

What holds (tests/onepipe/test_endpoint_properties.py checks it on a min-barrier relay):
every receiver delivers in ``(ts, sender key)`` order with per-sender FIFO, nothing twice,
nothing at or above its barrier or its clock; all messages of a scattering share one ts.
Every message is eventually delivered or send-failed. A NAKed message is never delivered, so a
known send-fail is never a delivered message; a delivered one is reported only by the timeout
(``known=False``, ``send_unknown``), when every ACK that covered it was lost (or delivery took
longer than ``ack_timeout_ns``). :meth:`Endpoint.outstanding` lists what has no fate yet.

Bad input never raises: an undecodable datagram is ``malformed``, an ACK/NAK for nothing we
sent ``bogus_acks`` or ``foreign``, an unknown opcode ``foreign``.
"""

from __future__ import annotations

import heapq
import struct
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import asdict, dataclass
from ipaddress import ip_address
from typing import Any

from headers.errors import HeaderError
from headers.onepipe import (
    BARRIER_OPCODES,
    OnePipeFlag,
    OnePipeHeader,
    OnePipeOpcode,
    beacon,
    decode_packet,
    ts_from_ns,
    ts_unwrap,
)
from headers.serial import W32

from ..engine import SendTo
from .actions import Deliver, EndpointActionQueue, SendFail
from .params import OnePipeParams

#: ``SendTo`` destination of a host beacon: the ToR the process hangs off (hop by hop, design
#: topic §5); the shell sends it to the subnet's broadcast address on the 1Pipe port
UPLINK = "uplink"

#: a process address: ``(ip, udp_port)`` live and in netstack/sim, any hashable in tests
Addr = Hashable

#: flags bit 2 (ours): first fragment of a message. With EOM alone a receiver that lost a
#: message's last fragment could not tell where the next message starts.
SOM = int(OnePipeFlag.SOM)
#: an ACK is sent again on this many beacon ticks after it first went out (0: never). Ours, for
#: robustness (a lost ACK rarely becomes a false send-fail); the paper's lib1pipe ACKs from its
#: polling thread and describes no repeats (1Pipe §6.1), so this is CPU its best effort does not
#: spend: up to about two repeats per message once peers stop sharing a tick (docs/onepipe-cpu.md)
ACK_REPEATS = 2
#: sources a receiver keeps connection state for; packets from more are dropped (``foreign``)
MAX_RX_CONNECTIONS = 1 << 16

PSN_MOD = W32.space
_PSN_MASK = W32.mask
_EOM = int(OnePipeFlag.EOM)
_ECE = int(OnePipeFlag.ECE)
_DATA, _ACK, _NAK, _BEACON = OnePipeOpcode.DATA, OnePipeOpcode.ACK, OnePipeOpcode.NAK, OnePipeOpcode.BEACON
_COUNT = struct.Struct("!I")
#: the barrier packets a switch's CPU or representative sends (Endpoint.beacon_barriers)
_BEACON_OPS = frozenset({OnePipeOpcode.BEACON, OnePipeOpcode.COMMIT})


def sender_key(addr: Addr) -> int:
    """The total-order tie-break of a process (equal ts: lower key first, design topic §1):
    ``int(ip) << 16 | port`` for ``(ip, port)``; an int is its own key."""
    if isinstance(addr, int):
        return addr
    if isinstance(addr, tuple) and len(addr) == 2 and isinstance(addr[1], int) and 0 <= addr[1] <= 0xFFFF:
        return int(ip_address(addr[0])) << 16 | addr[1]
    raise ValueError(f"not a process address: {addr!r}")


#: ``psn_unwrap(wire, ref)``: the absolute PSN nearest ``ref`` whose low 32 bits are ``wire``
#: (RFC 1982 window, headers/serial.py: exactly 2^31 away reads as below)
psn_unwrap = W32.unwrap


@dataclass(slots=True, eq=False)
class EndpointCounters:
    """What an endpoint counts, in export order."""

    # sender
    scatterings_sent: int = 0  # stamped and sent
    messages_sent: int = 0
    packets_sent: int = 0  # DATA fragments
    bytes_sent: int = 0  # DATA datagram bytes (header included)
    beacons_sent: int = 0
    send_buffer_full: int = 0  # send() refused: the send buffer was full
    window_waits: int = 0  # scatterings that could not leave at once (credits short)
    join_waits: int = 0  # scatterings sent before the first barrier arrived: held until it does
    acks_received: int = 0
    naks_received: int = 0
    stale_acks: int = 0  # ACKs with nothing new (repeats, reordered)
    bogus_acks: int = 0  # ACK/NAK beyond what was sent: ignored
    messages_acked: int = 0  # every packet ACKed and none given up
    send_failed: int = 0  # SendFail fired, known not delivered (a NAK, the ACK bitmap)
    send_timeouts: int = 0  # ... of which by ack_timeout_ns
    packets_timed_out: int = 0
    cwnd_cuts: int = 0  # ECE or loss reductions
    # receiver
    packets_received: int = 0  # DATA from any source
    bytes_delivered: int = 0
    messages_delivered: int = 0
    duplicates: int = 0  # DATA already buffered or settled
    late_dropped: int = 0  # DATA below the delivered barrier: dropped and NAKed
    messages_lost: int = 0  # runs of consecutive given-up PSNs (each at least one message), one NAK each
    psns_given_up: int = 0  # PSNs in those runs
    rx_buffer_full: int = 0  # DATA beyond rwnd_packets buffered: dropped and NAKed
    inconsistent: int = 0  # a message whose ts contradicts its sender's earlier ones: given up
    ce_received: int = 0  # CE-marked DATA
    acks_sent: int = 0  # ACK repeats included
    ack_repeats: int = 0
    naks_sent: int = 0
    beacons_received: int = 0
    barrier_updates: int = 0  # the barrier moved up
    barrier_backwards: int = 0  # a barrier below the current one: ignored
    barrier_ahead: int = 0  # a barrier further ahead of our clock than max_ahead_ns: ignored
    clock_waits: int = 0  # passes that left a message below the barrier for the clock to pass
    # bad input
    malformed: int = 0  # undecodable datagrams, bad ACK/NAK payloads
    foreign: int = 0  # unknown opcode, ACK/NAK for a connection we never opened, unkeyable source


@dataclass(slots=True, eq=False)
class _TxMsg:
    """One message of a stamped scattering, until it is ACKed, NAKed or timed out."""

    ts: int
    dst: Addr
    data: bytes
    npkts: int
    acked: int = 0
    done: bool = False  # fate known: ACKed whole, or SendFail fired


class TxConn:
    """Sender side of a connection: the in-flight packets from ``una`` on, and DCTCP. (Part of
    :class:`Endpoint`'s subclass interface: the reliable endpoint's connections extend it.)"""

    __slots__ = ("acked_in_win", "alpha", "cut", "cwnd", "cwr_end", "dst", "inflight", "marked_in_win", "una",
                 "win_end")

    def __init__(self, dst: Addr, cwnd: int) -> None:
        self.dst = dst
        self.una = 0  # the oldest unsettled PSN (absolute)
        #: (message, sent_ns) of PSN una, una+1, ...: every packet sent and not yet settled
        self.inflight: deque[tuple[_TxMsg, int]] = deque()
        self.cwnd = float(cwnd)
        self.alpha = 1.0  # RFC 8257 §3.3: start conservatively
        self.win_end = 0  # alpha is updated when una passes it (RFC 8257 §3.3)
        self.acked_in_win = 0
        self.marked_in_win = 0
        self.cut = False  # cwnd was reduced in this alpha window: no increase at its end
        self.cwr_end = -1  # no further reduction until una passes it (once per window of data)

    @property
    def next_psn(self) -> int:
        return self.una + len(self.inflight)


@dataclass(slots=True, eq=False)
class Scattering:
    """A scattering in the send buffer, until it is stamped (part of the subclass interface)."""

    seq: int
    msgs: list[tuple[Addr, bytes, int]]  # (dst, data, fragments)
    need: dict[Addr, int]  # packets per destination
    held: dict[Addr, int]  # credits held while waiting (design topic §9)
    waited: bool = False


@dataclass(slots=True, eq=False)
class _RxPkt:
    ts: int
    flags: int
    payload: bytes
    refused: bool  # dropped for lack of buffer and NAKed: a placeholder, never delivered


class _RxConn:
    """Receiver side of a connection: the buffered packets from ``cum`` on."""

    __slots__ = ("buf", "ce", "cid", "cum", "key", "last_ece", "lost", "naks", "npkts", "nrefused", "order", "src")

    def __init__(self, src: Addr, key: int, cid: int) -> None:
        self.src = src
        self.key = key
        self.cid = cid  # tie-break among colliding keys (a custom key function)
        self.cum = 0  # first PSN not settled (delivered or given up)
        self.buf: dict[int, _RxPkt] = {}
        self.order: list[int] = []  # the PSNs in buf, ascending
        self.npkts = 0
        self.nrefused = 0
        self.lost: deque[list[int]] = deque()  # given-up ranges [a, b) below cum, ascending
        self.naks: list[list[int]] = []  # ranges [a, b) to NAK at the end of this call
        self.ce = False  # CE-marked data since the last ACK
        self.last_ece = False  # what the last ACK said (its repeats say it again)


#: a receive-buffer head in the delivery heap: (ts, key, cid, psn, tie, connection)
_Head = tuple[int, int, int, int, int, _RxConn]


class Endpoint:
    """One 1Pipe process (best effort). See the module docstring for the rules.

    **Subclass interface.** The reliable endpoint (reliable.py) builds on this one's sender (the
    send buffer, credits, DCTCP windows, the stamping rule), its BE barrier and its beacon ticks,
    and replaces the receiver. Of the members that are not public it uses these, and no others
    (tests/onepipe/test_reliable_interfaces.py checks):

    - state, read: ``_now`` (host time), ``_next_tick`` (the next beacon tick), ``_queue`` (the
      send buffer, of :class:`Scattering`: a subclass may take messages out of it) and ``_tx``
      (destination -> :class:`TxConn`: it may remove connections);
    - helpers: ``_clock``, ``_same_host``, ``_take_barrier``, ``_floor``, ``_advertise``,
      ``_stamp_ts``, ``_raise_floor``, ``_rejoin``, ``_beacon_tick``, ``_tx_conn``, ``_dctcp``,
      ``_loss``, ``_barrier_ops`` (the opcodes whose barriers are taken: :attr:`beacon_barriers`);
    - hooks it overrides: ``_new_tx_conn`` (its connections), ``_pump`` (a gate of its own, then
      this one's), ``_stamp`` (what a stamped scattering sends) and ``_send_beacon`` (what a beacon
      carries).
    """

    #: the opcodes whose barrier fields move ours (:attr:`beacon_barriers`)
    _barrier_ops: frozenset[OnePipeOpcode] = BARRIER_OPCODES

    def __init__(self, params: OnePipeParams, me: Addr, now_ns: int, *,
                 key: Callable[[Addr], int] = sender_key, beacon_barriers: bool = False) -> None:
        self.params = params
        if beacon_barriers:
            self._barrier_ops = _BEACON_OPS
        self.me = me
        self.key = key
        self.actions = EndpointActionQueue()
        self.c = EndpointCounters()
        self._now = now_ns
        # sender
        self._seq = 0
        self._queue: deque[Scattering] = deque()
        self._tx: dict[Addr, TxConn] = {}
        self._last_ts: int | None = None
        self._adv: int | None = None  # the barrier last advertised (never decreases)
        self._timeout_at: int | None = None
        #: how much longer the ACK timeout waits on a loaded host (set_timer_slack)
        self.timer_slack_ns = 0
        #: SendFail(known=False) fired: the ACK timeout, fate unknown (issue 31; ``counters()``
        #: has it, kept out of ``c`` so that the reliable engine's counters stay as they were)
        self.send_unknown = 0
        # receiver
        self._rx: dict[Addr, _RxConn] = {}
        self._heap: list[_Head] = []
        self._tie = 0
        self._barrier: int | None = None
        self._delivered: int | None = None
        self._last_order: tuple[int, int] | None = None  # (ts, key) last delivered
        self._wake_at: int | None = None
        self._ack_due: dict[_RxConn, None] = {}  # insertion-ordered sets
        self._nak_due: dict[_RxConn, None] = {}
        self._repeat: dict[_RxConn, int] = {}
        # beacons at multiples of T_beacon in host time (design topic §5)
        t = params.t_beacon_ns
        self._next_tick = (now_ns // t + 1) * t
        self._uplink_adv: int | None = None  # the highest barrier that went up through the ToR

    # ------------------------------------------------------------------ public surface

    @property
    def now(self) -> int:
        """Host time: the latest any input said (it never goes back)."""
        return self._now

    @property
    def barrier(self) -> int | None:
        """The barrier last received (absolute host-time ns)."""
        return self._barrier

    @property
    def delivered_barrier(self) -> int | None:
        """Every message with ts below this has been delivered or given up."""
        return self._delivered

    @property
    def advertised_barrier(self) -> int | None:
        """The highest barrier this process has sent (data ts, ACK/NAK, beacon)."""
        return self._adv

    @property
    def queued(self) -> int:
        """Scatterings waiting in the send buffer."""
        return len(self._queue)

    @property
    def beacon_barriers(self) -> bool:
        """Barriers come in beacons only (the module docstring): the switches are the switch-CPU or
        host-delegate variant (:mod:`.variant`), whose data planes forward DATA, ACK and NAK with
        their senders' barriers untouched, so that only a beacon (BEACON, COMMIT) carries a barrier
        some switch aggregated; this process then beacons at every tick. False (the programmable
        chip's): every barrier packet from the ToR moves the barrier. Set it before the first
        packet (a shell may, for an engine its subclass constructs)."""
        return self._barrier_ops is _BEACON_OPS

    @beacon_barriers.setter
    def beacon_barriers(self, on: bool) -> None:
        self._barrier_ops = _BEACON_OPS if on else BARRIER_OPCODES

    @property
    def ack_timeout_ns(self) -> int:
        """The ACK timeout in force: ``params.ack_timeout_ns`` plus the timer slack."""
        return self.params.ack_timeout_ns + self.timer_slack_ns

    def set_timer_slack(self, slack_ns: int) -> None:
        """How late the live shell's process has recently been scheduled (the shell's measure,
        e.g. twice the largest event-loop lag of the last seconds): the ACK timeout waits that much
        longer from now on, for packets already in flight too. A timer that declares a message
        lost must not fire because its process, or its peer, waited for a CPU (docs/onepipe-reliable.md
        "Timers on a loaded host"). Negative values count as 0."""
        slack = max(0, int(slack_ns))
        if slack < self.timer_slack_ns and self._timeout_at is not None:
            self._timeout_at = min(self._timeout_at, self._now)  # due earlier now: rescan at the next timer
        self.timer_slack_ns = slack

    def send(self, scattering: Sequence[tuple[Addr, bytes]], now_ns: int) -> int | None:
        """Queue a scattering ``[(dst, msg), ...]``; its sequence number (0, 1, 2... per
        endpoint), or ``None`` when the send buffer is full. It is stamped and sent at once if
        the windows allow. ``dst`` may be ``me`` (the message comes back through the network
        and is delivered in order like any other), a destination may appear twice, a message
        may be empty. ValueError: an empty scattering, ``UPLINK`` as a destination, or more
        fragments for one destination than ``rwnd_packets`` (it could never be buffered)."""
        if not scattering:
            raise ValueError("an empty scattering has nothing to order")
        mtu = self.params.mtu_payload
        msgs: list[tuple[Addr, bytes, int]] = []
        need: dict[Addr, int] = {}
        for dst, msg in scattering:
            if dst == UPLINK:
                raise ValueError("UPLINK is the ToR, not a process")
            data = bytes(msg)
            n = max(1, -(-len(data) // mtu))
            msgs.append((dst, data, n))
            need[dst] = need.get(dst, 0) + n
        too_big = [d for d, n in need.items() if n > self.params.rwnd_packets]
        if too_big:
            raise ValueError(f"more than rwnd_packets={self.params.rwnd_packets} fragments for {too_big[0]!r}")
        self._clock(now_ns)
        if len(self._queue) >= self.params.send_buffer:
            self.c.send_buffer_full += 1
            return None
        seq = self._seq
        self._seq += 1
        self._queue.append(Scattering(seq, msgs, need, {}))
        self._pump()
        return seq

    def receive(self, datagram: bytes, src: Addr, now_ns: int, ce: bool = False) -> None:
        """A UDP payload (1Pipe header + payload) from process or switch ``src``; ``ce``: the
        IP ECN field said CE. Never raises: what cannot be used is counted and dropped."""
        self._clock(now_ns)
        try:
            hdr, payload = decode_packet(datagram)
        except HeaderError:
            self.c.malformed += 1
            return
        op = hdr.opcode
        if op is _DATA:
            self._on_data(hdr, payload, src, ce)
        elif op is _ACK:
            self._on_ack(hdr, payload, src)
        elif op is _NAK:
            self._on_nak(hdr, payload, src)
        elif op is _BEACON:
            self.c.beacons_received += 1
        else:
            self.c.foreign += 1
        if op in self._barrier_ops and not self._same_host(src):
            had = self._barrier is not None
            self._take_barrier(hdr.be_barrier)
            if not had and self._queue:
                self._pump()  # joined: what waited for the first barrier may leave
        self._deliver_pass()
        self._send_acks()

    def on_timer(self, now_ns: int) -> None:
        """Beacon ticks (ACK repeats, then a beacon unless a packet already took the tick's
        barrier to the ToR), send timeouts, deliveries waiting for the clock.

        The beacon goes whenever the ToR has not yet heard this tick's value, even if packets
        left during the interval: they carried older barriers, and a receiver waits for the
        slowest process's barrier, so skipping the tick would hold every receiver back by up to
        another interval (measured: the latency overhead doubled). Hosts beaconing at the same
        instants is what makes the wait T_beacon / 2 on average (design topic §5)."""
        self._clock(now_ns)
        if self._beacon_tick():
            self._repeat_acks()
            # (beacon_barriers: our data no longer takes our barrier to the ToR, so always)
            if self._uplink_adv is None or self._uplink_adv < self._now or self._barrier_ops is _BEACON_OPS:
                self._send_beacon()
        self._expire()
        self._pump()
        self._deliver_pass()
        self._send_acks()

    def next_deadline(self) -> int | None:
        """When ``on_timer`` is due (host time). Never None: beacons never stop."""
        due = self._next_tick
        for t in (self._wake_at, self._timeout_at):
            if t is not None and t < due:
                due = t
        return due

    def outstanding(self) -> list[tuple[Addr, bytes]]:
        """``(dst, msg)`` of every message with no fate yet (no ACK, no SendFail): in the send
        buffer, or in flight and unsettled. What a process stopping now leaves in flight."""
        out = [(dst, data) for sc in self._queue for dst, data, _n in sc.msgs]
        for tx in self._tx.values():
            seen: set[int] = set()
            for msg, _sent in tx.inflight:
                # (the reliable engine's messages say ``failed`` and count ``acked`` instead)
                done = getattr(msg, "done", None)
                if done is None:
                    done = msg.failed or msg.acked >= msg.npkts  # type: ignore[attr-defined]
                if not done and id(msg) not in seen:
                    seen.add(id(msg))
                    out.append((msg.dst, msg.data))
        return out

    def held(self) -> list[tuple[Addr, bytes]]:
        """``(src, payload of its first packet)`` of every message received and buffered but not
        delivered yet (its ts not below the barrier): its sender had its ACK and reports no fate,
        so a process stopping now leaves it in flight on the receiving side (issue 31: the run's
        count lists it, netstack/onepipe/accounting.py)."""
        return [(c.src, c.buf[p].payload) for c in self._rx.values() for p in c.order
                if c.buf[p].flags & SOM and not c.buf[p].refused]

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self.c)
        out.update(
            send_unknown=self.send_unknown,
            barrier=self._barrier, delivered_barrier=self._delivered, advertised_barrier=self._adv,
            queued=len(self._queue), inflight_packets=sum(len(t.inflight) for t in self._tx.values()),
            buffered_packets=sum(r.npkts for r in self._rx.values()),
            tx_connections=len(self._tx), rx_connections=len(self._rx),
        )
        return out

    # ------------------------------------------------------------------ time and barriers

    def _clock(self, now_ns: int) -> None:
        # a host clock never goes back (design topic §1); a shell that says otherwise is ignored
        if now_ns > self._now:
            self._now = now_ns

    def _advertise(self, dst: Addr = UPLINK) -> int:
        """The barrier for a packet leaving now for ``dst``: never below a ts stamped or a
        barrier already advertised (design topic §2), so every later ts is at least it. A packet
        to another process reaches the ToR, so it stands in for this interval's beacon; one to
        ourselves may never leave the host (the shell loops it back), so it does not.

        Nor below the barrier received (ours): receivers may already have delivered up to it,
        so a ts below it would arrive late and be dropped. A process whose clock lags (skew)
        would lose messages; stamping at the barrier costs it nothing but that lag. (A process
        that has just joined can still lose its first ones: other outputs may have carried
        more than it received, design topic §4.)"""
        b = self._floor()
        self._adv = b
        if not self._same_host(dst):
            self._uplink_adv = b
        return b

    def _floor(self) -> int:
        """The lowest ts a scattering stamped from now on can get: the clock, and never below a ts
        stamped or a barrier advertised or received (:meth:`_advertise` says why)."""
        b = self._now
        for v in (self._last_ts, self._adv, self._barrier):
            if v is not None and v > b:
                b = v
        return b

    def _raise_floor(self, ts: int) -> None:
        """Stamp and advertise nothing below ``ts`` from now on (a re-joining reliable process,
        design topic §4: the barriers given out while it was away may be ahead of its clock)."""
        self._adv = max(self._adv or self._now, ts)

    def _rejoin(self) -> None:
        """Forget the barrier received: the process joins again, and nothing is stamped before its
        ToR sends a barrier (design topic §4; see :meth:`_pump`)."""
        self._barrier = None

    def _beacon_tick(self) -> bool:
        """True when a beacon tick (a multiple of T_beacon in host time, design topic §5) has come
        since the last call that said so; the next tick is then the next multiple."""
        now = self._now
        if now < self._next_tick:
            return False
        t = self.params.t_beacon_ns
        self._next_tick = (now // t + 1) * t
        return True

    def _same_host(self, src: Addr) -> bool:
        """A datagram from this host: ourselves, or another process on the same IP. The kernel
        hands it over without the ToR, so its barrier is its sender's own, aggregated by no
        switch: only what came through the ToR may move ours (design topic §4)."""
        me = self.me
        return src == me or (isinstance(src, tuple) and isinstance(me, tuple) and src[:1] == me[:1])

    def _take_barrier(self, wire: int) -> None:
        b = ts_unwrap(wire, self._now)
        if b - self._now > self.params.max_ahead_ns:
            self.c.barrier_ahead += 1  # corrupt or buggy: the barrier never goes back down
            return
        if self._barrier is None or b > self._barrier:
            self._barrier = b
            self.c.barrier_updates += 1
        elif b < self._barrier:
            self.c.barrier_backwards += 1

    def _send_beacon(self) -> None:
        b = ts_from_ns(self._advertise())
        self.actions.emit(SendTo(UPLINK, beacon(b, 0).to_bytes()))
        self.c.beacons_sent += 1

    # ------------------------------------------------------------------ sender

    def _tx_conn(self, dst: Addr) -> TxConn:
        tx = self._tx.get(dst)
        if tx is None:
            tx = self._tx[dst] = self._new_tx_conn(dst)
        return tx

    def _new_tx_conn(self, dst: Addr) -> TxConn:
        """A new connection to ``dst`` (a subclass's connections may carry more)."""
        return TxConn(dst, min(self.params.init_cwnd, self.params.rwnd_packets))

    def _window(self, tx: TxConn) -> int:
        return min(self.params.rwnd_packets, int(tx.cwnd))

    def _pump(self) -> None:
        """Stamp and send scatterings from the head of the send buffer while they fit.

        Nothing leaves before the first barrier from the ToR: until then the process does not
        know where the order stands (its first beacons are how it joins, design topic §4), and
        a ts stamped blind may already lie below what receivers delivered."""
        if self._barrier is None:
            if self._queue and not self._queue[0].waited:
                self._queue[0].waited = True
                self.c.join_waits += 1
            return
        while self._queue:
            sc = self._queue[0]
            if not self._take_credits(sc):
                if not sc.waited:
                    sc.waited = True
                    self.c.window_waits += 1
                return
            self._queue.popleft()
            self._stamp(sc)

    def _take_credits(self, sc: Scattering) -> bool:
        """Credits for the head scattering from each destination's window; what it already
        holds it keeps (design topic §9: no live-lock for a large scattering)."""
        ready = True
        for dst, need in sc.need.items():
            held = sc.held.get(dst, 0)
            if held >= need:
                continue
            tx = self._tx_conn(dst)
            win, span = self._window(tx), len(tx.inflight)
            if need > win:  # larger than the congestion window: alone on an idle connection
                got = need - held if span == 0 else 0
            else:
                got = max(0, min(need - held, win - span - held))
            sc.held[dst] = held = held + got
            ready = ready and held >= need
        return ready

    def _stamp(self, sc: Scattering) -> None:
        """One ts for every fragment of every message (design topic §1, §12 inv. 4), taken as
        the scattering leaves the send buffer (design topic §2)."""
        now = self._now
        ts = self._stamp_ts()
        if any(not self._same_host(dst) for dst in sc.need):
            self._uplink_adv = ts  # (a same-host peer's packet never reaches the ToR)
        wire = ts_from_ns(ts)
        mtu = self.params.mtu_payload
        for dst, data, n in sc.msgs:
            tx = self._tx_conn(dst)
            msg = _TxMsg(ts, dst, data, n)
            for i in range(n):
                flags = (SOM if i == 0 else 0) | (_EOM if i == n - 1 else 0)
                hdr = OnePipeHeader(wire, wire, 0, tx.next_psn & _PSN_MASK, _DATA, flags).to_bytes()
                datagram = hdr + data[i * mtu:(i + 1) * mtu]
                tx.inflight.append((msg, now))
                self.actions.emit(SendTo(dst, datagram))
                self.c.packets_sent += 1
                self.c.bytes_sent += len(datagram)
            self.c.messages_sent += 1
        self.c.scatterings_sent += 1
        sc.held.clear()
        if self._timeout_at is None:
            self._timeout_at = now + self.ack_timeout_ns

    def _stamp_ts(self) -> int:
        """The ts of a scattering leaving the send buffer now (design topic §2): every later one
        is at least it."""
        ts = self._last_ts = self._advertise(self.me)
        return ts

    def _fail(self, msg: _TxMsg, known: bool = True) -> None:
        if not msg.done:
            msg.done = True
            if known:
                self.c.send_failed += 1
            else:
                self.send_unknown += 1
            self.actions.emit(SendFail(msg.ts, msg.dst, msg.data, known))

    def _on_ack(self, hdr: OnePipeHeader, bitmap: memoryview, src: Addr) -> None:
        tx = self._tx.get(src)
        if tx is None:
            self.c.foreign += 1
            return
        self.c.acks_received += 1
        cum = psn_unwrap(hdr.psn, tx.una)
        if cum > tx.next_psn:
            self.c.bogus_acks += 1
            return
        if cum <= tx.una:
            self.c.stale_acks += 1
            return
        n = cum - tx.una
        nbits = len(bitmap) * 8
        for psn in range(tx.una, cum):
            msg, _sent = tx.inflight.popleft()
            bit = cum - 1 - psn
            if bit < nbits and bitmap[bit >> 3] >> (bit & 7) & 1:
                self._fail(msg)  # given up by the receiver: the NAK may have been lost
            else:
                msg.acked += 1
                if msg.acked == msg.npkts and not msg.done:
                    msg.done = True
                    self.c.messages_acked += 1
        tx.una = cum
        self._dctcp(tx, n, bool(hdr.flags & _ECE))
        self._pump()

    def _dctcp(self, tx: TxConn, n: int, ece: bool) -> None:
        """RFC 8257 §3.3-3.4 per window of ACKed packets, +1 packet per window without a cut."""
        p = self.params
        tx.acked_in_win += n
        if ece:
            tx.marked_in_win += n
            self._reduce(tx, 1 - tx.alpha / 2)
        if tx.una > tx.win_end:
            f = tx.marked_in_win / tx.acked_in_win if tx.acked_in_win else 0.0
            tx.alpha = (1 - p.dctcp_g) * tx.alpha + p.dctcp_g * f
            if not tx.cut:
                tx.cwnd = min(float(p.rwnd_packets), tx.cwnd + 1)
            tx.acked_in_win = tx.marked_in_win = 0
            tx.cut = False
            tx.win_end = tx.next_psn

    def _reduce(self, tx: TxConn, factor: float) -> None:
        """Multiply cwnd by ``factor``, at most once per window of data: not again until every
        packet outstanding now has been settled (as TCP's CWR state does)."""
        if tx.una > tx.cwr_end:
            tx.cwnd = max(float(self.params.min_cwnd), tx.cwnd * factor)
            tx.cut = True
            tx.cwr_end = tx.next_psn - 1
            self.c.cwnd_cuts += 1

    def _loss(self, tx: TxConn) -> None:
        """A lost packet halves cwnd (RFC 8257 §3.5: DCTCP reacts to loss as standard TCP)."""
        self._reduce(tx, 0.5)

    def _on_nak(self, hdr: OnePipeHeader, payload: memoryview, src: Addr) -> None:
        if len(payload) not in (0, _COUNT.size):
            self.c.malformed += 1
            return
        tx = self._tx.get(src)
        if tx is None:
            self.c.foreign += 1
            return
        self.c.naks_received += 1
        count = _COUNT.unpack(payload)[0] if payload else 1
        start = psn_unwrap(hdr.psn, tx.una)
        if start >= tx.next_psn or count == 0:
            self.c.bogus_acks += 1
            return
        failed = False
        for psn in range(max(start, tx.una), min(start + count, tx.next_psn)):
            msg = tx.inflight[psn - tx.una][0]
            if not msg.done:
                self._fail(msg)
                failed = True
        if failed:
            self._loss(tx)

    def _expire(self) -> None:
        """Fail what stayed unsettled for the ACK timeout (best effort's tail loss: nothing
        after it would have revealed it). Scans every connection, but only when the oldest
        deadline is due."""
        if self._timeout_at is None or self._now < self._timeout_at:
            return
        timeout = self.ack_timeout_ns
        limit = self._now - timeout
        nxt: int | None = None
        for tx in self._tx.values():
            lost = False
            while tx.inflight and tx.inflight[0][1] <= limit:
                msg, _sent = tx.inflight.popleft()
                tx.una += 1
                self.c.packets_timed_out += 1
                if not msg.done:
                    self.c.send_timeouts += 1
                    self._fail(msg, known=False)  # no ACK, no NAK: it may have been delivered
                    lost = True
            if lost:
                self._loss(tx)
            if tx.inflight:
                due = tx.inflight[0][1] + timeout
                nxt = due if nxt is None else min(nxt, due)
        self._timeout_at = nxt

    # ------------------------------------------------------------------ receiver

    def _rx_conn(self, src: Addr) -> _RxConn | None:
        conn = self._rx.get(src)
        if conn is None:
            if len(self._rx) >= MAX_RX_CONNECTIONS:
                return None
            try:
                key = self.key(src)
            except (TypeError, ValueError):
                return None
            conn = self._rx[src] = _RxConn(src, key, len(self._rx))
        return conn

    def _on_data(self, hdr: OnePipeHeader, payload: memoryview, src: Addr, ce: bool) -> None:
        conn = self._rx_conn(src)
        if conn is None:
            self.c.foreign += 1
            return
        self.c.packets_received += 1
        if ce:
            conn.ce = True
            self.c.ce_received += 1
        psn = psn_unwrap(hdr.psn, conn.cum)
        if psn < conn.cum or psn in conn.buf:
            self.c.duplicates += 1
            return
        ts = ts_unwrap(hdr.msg_ts, self._now)
        if self._delivered is not None and ts < self._delivered:
            # below what was already delivered (design topic §6): so is every missing PSN
            # before it (ts never decreases along a connection's PSNs)
            self.c.late_dropped += 1
            if self._give_up(conn, psn + 1) and conn.order:
                self._push_head(conn)  # the head it dropped (a misbehaving sender's) had the heap entry
            return
        refused = conn.npkts >= self.params.rwnd_packets
        if refused:
            self.c.rx_buffer_full += 1
            self._queue_nak(conn, psn, psn + 1)
            if conn.nrefused >= self.params.rwnd_packets:
                return  # not even a placeholder: only a sender far outside its window gets here
            conn.nrefused += 1
        else:
            conn.npkts += 1
        conn.buf[psn] = _RxPkt(ts, hdr.flags, b"" if refused else bytes(payload), refused)
        insort(conn.order, psn)
        if conn.order[0] == psn:
            self._push_head(conn)

    def _push_head(self, conn: _RxConn) -> None:
        """Put ``conn``'s lowest buffered packet in the delivery heap. Entries that stopped
        being a head stay until they surface (lazy deletion); should they pile up (a sender
        whose far-future packet keeps being overtaken), the heap is rebuilt from the heads."""
        heap = self._heap
        if len(heap) > 2 * len(self._rx) + 64:  # at most one live entry per connection
            heap[:] = [(c.buf[c.order[0]].ts, c.key, c.cid, c.order[0], 0, c) for c in self._rx.values()
                       if c.order and c is not conn]
            heapq.heapify(heap)
        psn = conn.order[0]
        self._tie += 1
        heapq.heappush(heap, (conn.buf[psn].ts, conn.key, conn.cid, psn, self._tie, conn))

    def _deliver_pass(self) -> None:
        """Deliver, in (ts, sender, PSN) order, every complete message with ts below the
        barrier and below our clock (design topics §1, §6); give up what cannot complete."""
        if self._barrier is None:
            return
        limit = min(self._barrier, self._now)
        heap = self._heap
        while heap:
            ts, _key, _cid, psn, _tie, conn = heap[0]
            if not conn.order or conn.order[0] != psn:
                heapq.heappop(heap)  # stale: that head was settled since
                continue
            if ts >= limit:
                break
            heapq.heappop(heap)
            self._resolve_head(conn)
            if conn.order:
                self._push_head(conn)
        if self._delivered is None or limit > self._delivered:
            self._delivered = limit
        wake = heap[0][0] + 1 if heap and heap[0][0] < self._barrier else None
        if wake is not None and wake != self._wake_at:
            self.c.clock_waits += 1
        self._wake_at = wake

    def _resolve_head(self, conn: _RxConn) -> None:
        """The lowest buffered packet of ``conn`` has ts below the limit: deliver its message
        or give it up. Whatever is missing below it had ts <= its ts and cannot come any more."""
        p0 = conn.order[0]
        head = conn.buf[p0]
        if p0 > conn.cum:
            self._give_up(conn, p0)
        if head.refused:
            self._give_up(conn, p0 + 1, nak=False)  # NAKed when it was refused
            return
        end, complete = self._scan(conn, p0, head)
        if not complete:
            self._give_up(conn, end)
            return
        order = (head.ts, conn.key)
        if self._last_order is not None and order < self._last_order:
            self.c.inconsistent += 1  # its sender's ts went backwards along its PSNs
            self._give_up(conn, end)
            return
        self._last_order = order
        parts = [conn.buf.pop(p).payload for p in range(p0, end)]
        del conn.order[:end - p0]
        conn.npkts -= end - p0
        conn.cum = end
        self._ack_due[conn] = None
        msg = b"".join(parts)
        self.c.messages_delivered += 1
        self.c.bytes_delivered += len(msg)
        self.actions.emit(Deliver(head.ts, conn.src, msg))

    @staticmethod
    def _scan(conn: _RxConn, p0: int, head: _RxPkt) -> tuple[int, bool]:
        """``(end, complete)``: the message starting at ``p0`` is ``[p0, end)`` if complete;
        else ``[p0, end)`` is what is buffered of a broken one (up to a gap, a new message
        or, for a message whose start was lost, its end)."""
        buf = conn.buf
        p = p0
        if not head.flags & SOM:
            while True:
                pkt = buf.get(p)
                if pkt is None or pkt.refused or (p != p0 and pkt.flags & SOM):
                    return p, False
                p += 1
                if pkt.flags & _EOM:
                    return p, False
        while True:
            pkt = buf.get(p)
            if pkt is None or pkt.refused or pkt.ts != head.ts or (p != p0 and pkt.flags & SOM):
                return p, False
            p += 1
            if pkt.flags & _EOM:
                return p, True

    def _give_up(self, conn: _RxConn, end: int, nak: bool = True) -> int:
        """Settle ``[cum, end)`` without delivering it: drop what is buffered there, remember
        the range for the ACK bitmap, NAK it. Returns how many buffered entries it dropped."""
        start = conn.cum
        if end <= start:
            return 0
        n = bisect_left(conn.order, end)
        for p in conn.order[:n]:
            if conn.buf.pop(p).refused:
                conn.nrefused -= 1
            else:
                conn.npkts -= 1
        del conn.order[:n]
        if conn.lost and conn.lost[-1][1] == start:
            conn.lost[-1][1] = end
        else:
            conn.lost.append([start, end])
        floor = end - self.params.rwnd_packets
        while conn.lost and conn.lost[0][1] <= floor:
            conn.lost.popleft()
        conn.cum = end
        self._ack_due[conn] = None
        if nak:
            self._queue_nak(conn, start, end)
        return n

    def _queue_nak(self, conn: _RxConn, start: int, end: int) -> None:
        """NAK ``[start, end)`` at the end of this call, merged with the range before it."""
        if conn.naks and conn.naks[-1][1] == start:
            conn.naks[-1][1] = end
        else:
            conn.naks.append([start, end])
        self._nak_due[conn] = None

    def _send_naks(self) -> None:
        """One NAK per run of given-up PSNs: ``psn`` = its first, payload its length if > 1."""
        for conn in self._nak_due:
            for start, end in conn.naks:
                count = min(end - start, _PSN_MASK)
                b = ts_from_ns(self._advertise(conn.src))
                hdr = OnePipeHeader(b, b, 0, start & _PSN_MASK, _NAK, 0).to_bytes()
                self.actions.emit(SendTo(conn.src, hdr + (_COUNT.pack(count) if count > 1 else b"")))
                self.c.naks_sent += 1
                self.c.messages_lost += 1
                self.c.psns_given_up += end - start
            conn.naks.clear()
        self._nak_due.clear()

    def _bitmap(self, conn: _RxConn) -> bytes:
        """The given-up PSNs among the rwnd_packets below cum: bit i = PSN cum-1-i."""
        if not conn.lost:
            return b""
        cum, floor = conn.cum, conn.cum - self.params.rwnd_packets
        bits = bytearray((self.params.rwnd_packets + 7) // 8)
        for a, b in conn.lost:
            for p in range(max(a, floor), b):
                i = cum - 1 - p
                bits[i >> 3] |= 1 << (i & 7)
        return bytes(bits).rstrip(b"\x00")

    def _send_ack(self, conn: _RxConn, ece: bool) -> None:
        b = ts_from_ns(self._advertise(conn.src))
        hdr = OnePipeHeader(b, b, 0, conn.cum & _PSN_MASK, _ACK, _ECE if ece else 0).to_bytes()
        self.actions.emit(SendTo(conn.src, hdr + self._bitmap(conn)))
        self.c.acks_sent += 1

    def _send_acks(self) -> None:
        """The NAKs, then one cumulative ACK per connection whose point moved in this call."""
        if self._nak_due:
            self._send_naks()
        if not self._ack_due:
            return
        for conn in self._ack_due:
            conn.last_ece, conn.ce = conn.ce, False
            self._send_ack(conn, conn.last_ece)
            # only with a repeat owed: _repeat_acks sends an entry before counting it down, so
            # storing 0 would send one repeat (ACK_REPEATS = 0 means none)
            if ACK_REPEATS > 0:
                self._repeat[conn] = ACK_REPEATS
        self._ack_due.clear()

    def _repeat_acks(self) -> None:
        """One repeat of each pending connection's current ACK; ``left`` (>= 1) repeats were owed."""
        for conn, left in list(self._repeat.items()):
            self._send_ack(conn, conn.last_ece)
            self.c.ack_repeats += 1
            if left > 1:
                self._repeat[conn] = left - 1
            else:
                del self._repeat[conn]


__all__ = ["ACK_REPEATS", "MAX_RX_CONNECTIONS", "SOM", "UPLINK", "Addr", "Endpoint", "EndpointCounters", "Scattering",
           "TxConn", "psn_unwrap", "sender_key"]
