"""The receiver of TCD data flows and DCQCN's notification point (NP), with TCD's CNP-UE.

DCQCN's NP ("Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015, §3, the NP
algorithm): "if a marked packet arrives for a flow, and no CNP has been sent for the flow in
the last N microseconds, a CNP is sent immediately. Then the NIC generates at most one CNP
packet every N microseconds for the flow, if any packet that arrives within that time window
was marked." TCD ("Congestion Detection in Lossless Networks", SIGCOMM 2021) adds a second kind
of mark, UE (a port in the *undetermined* state: PFC switched it on and off), and its NP tells
the sender which it saw: a CNP-CE when any CE mark arrived since the flow's last CNP, else a
CNP-UE when only UE marks did (:class:`headers.tcd.CnpKind`). A plain DCQCN NP (``tcd=False``)
knows CE only: a UE-marked packet is an unmarked ECT packet to it, and it never sends a CNP-UE.

TIMELY's completion events (netstack/tcd/timely.py): a data packet with the ACK flag (the last of
a TIMELY segment) is answered at once with a :class:`headers.tcd.TcdAck` to the flow's source,
echoing its ``seq`` and ``send_ts_ns`` (the sender's RTT sample) and carrying the CE and UE marks
of the flow's packets since its previous ACK (UE only with ``tcd``, as for CNPs). The NP's CNPs
go to every flow alike: the receiver cannot tell a TIMELY flow, whose sender ignores them.

Which ECN value is which mark comes from the TCD codepoints (:class:`headers.tcd.TcdCodepoints`;
by default CE = 11, UE = 01, ECT = 10). The shell passes each datagram's ECN bits (live: the
TOS byte from ``IP_RECVTOS``; simulated: the frame's). A CNP goes to the flow's source, as the
shell gave it (an (ip, port) pair), in a :class:`~netstack.engine.SendTo` action.

Per flow (keyed by the 16-bit flow id; the first data packet binds the flow to its source,
later packets of that flow from another source are counted in ``foreign_src`` and ignored) the
receiver counts packets, bytes, marks and sequence numbers (distinct, duplicates, late arrivals
below the highest seen), and computes the flow completion time once the FIN packet and every
packet before it have arrived: ``fct_ns`` = arrival of the completing packet - ``send_ts_ns`` of
packet 0. ``send_ts_ns`` is the sender's clock: live, both hosts are namespaces of one kernel
and share CLOCK_MONOTONIC; simulated, both use the event loop's clock. Sequence numbers are
taken as they are (a flow of 2^32 packets or more is not tracked).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Final

from headers.tcd import DEFAULT_CODEPOINTS, CnpKind, PortState, TcdAck, TcdCnp, TcdCodepoints, TcdData

from ..engine import ActionQueue, SendTo
from .dcqcn import DcqcnParamError, DcqcnParams
from .timely import TimelyParams

if TYPE_CHECKING:
    from ..engine import Engine

#: sequence numbers tracked above the in-order point; beyond it a packet is counted, not tracked
SEQ_WINDOW: Final = 1 << 16
_U16 = 0xFFFF


@dataclass(slots=True)
class FlowState:
    """One flow as the receiver sees it (:meth:`TcdReceiver.flows` exports it)."""

    flow: int
    src: Hashable
    packets: int = 0  # data packets from the flow's source, duplicates included
    bytes: int = 0  # their UDP payload bytes
    ce: int = 0
    ue: int = 0  # counted by a plain DCQCN NP too, which sends no CNP for them
    ect: int = 0  # ECN-capable, unmarked
    not_ect: int = 0
    unique: int = 0
    duplicates: int = 0
    out_of_order: int = 0  # arrived below the highest sequence number seen
    beyond_window: int = 0  # too far above the in-order point to track
    fin_conflicts: int = 0  # a FIN that contradicts what arrived (ignored)
    expected: int = 0  # every seq below it has arrived
    highest: int = -1
    above: set[int] = field(default_factory=set)
    first_send_ts: int | None = None  # send_ts_ns of packet 0
    first_rx: int | None = None
    last_rx: int | None = None
    fin_seq: int | None = None
    complete_ns: int | None = None
    fct_ns: int | None = None
    cnps_ce: int = 0
    cnps_ue: int = 0
    # the NP: when the last CNP went, marked packets since (CE, and UE if TCD), the pending CNP
    last_cnp: int | None = None
    pend_ce: int = 0
    pend_ue: int = 0
    # TIMELY's ACKs: sent, and the marks since the last one (UE only with TCD)
    acks: int = 0
    seg_ce: int = 0
    seg_ue: int = 0


@dataclass(slots=True)
class ReceiverCounters:
    datagrams: int = 0  # data packets decoded
    foreign_src: int = 0  # a bound flow's id from another source: ignored
    cnps_sent: int = 0
    cnps_ce: int = 0
    cnps_ue: int = 0
    acks_sent: int = 0  # TIMELY's ACKs, one per data packet with the ACK flag


def show_src(src: Hashable) -> str:
    """A source as JSON can carry it: ``a.b.c.d:port`` for (ip, port) pairs (ip as text or 4 bytes)."""
    if isinstance(src, tuple) and len(src) == 2:
        ip, port = src
        if isinstance(ip, bytes | bytearray) and len(ip) == 4:
            ip = ".".join(str(b) for b in ip)
        return f"{ip}:{port}"
    return str(src)


class TcdReceiver:
    """Receives TCD data packets of any number of flows; DCQCN's NP, with TCD's CNP-UE if ``tcd``;
    TIMELY's ACKs to the packets that ask for one.

    ``params``: :class:`DcqcnParams` or :class:`~netstack.tcd.timely.TimelyParams` (its
    ``cnp_interval_ns``, N) or N itself in ns."""

    def __init__(self, params: DcqcnParams | TimelyParams | int, *, tcd: bool = True,
                 codepoints: TcdCodepoints = DEFAULT_CODEPOINTS) -> None:
        interval = params.cnp_interval_ns if isinstance(params, DcqcnParams | TimelyParams) else params
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise DcqcnParamError("cnp_interval_ns", f"must be a positive integer, got {interval!r}")
        self.cnp_interval_ns = interval
        self.tcd = tcd
        self.codepoints = codepoints
        self.actions = ActionQueue()
        self.c = ReceiverCounters()
        self._flows: dict[int, FlowState] = {}
        self._pending: dict[int, int] = {}  # flow -> when its held-back CNP is due

    # ------------------------------------------------------------------ data
    def receive(self, datagram: bytes, now_ns: int, src: Hashable, ecn: int) -> None:
        """A data packet (UDP payload) from ``src`` whose IP ECN bits were ``ecn``; HeaderError
        if it is not one. CNPs due by ``now_ns`` are sent first; the packet's ACK, if it asks for
        one, last."""
        hdr = TcdData.from_bytes(datagram)
        self.on_timer(now_ns)
        self.c.datagrams += 1
        f = self._flows.get(hdr.flow)
        if f is None:
            f = self._flows[hdr.flow] = FlowState(hdr.flow, src)
        elif f.src != src:
            self.c.foreign_src += 1
            return
        f.packets += 1
        f.bytes += len(datagram)
        if f.first_rx is None:
            f.first_rx = now_ns
        f.last_rx = now_ns
        self._mark(f, ecn & 3, now_ns)
        self._sequence(f, hdr, now_ns)
        if hdr.ack:
            self._send_ack(f, hdr)

    def _mark(self, f: FlowState, ecn: int, now: int) -> None:
        state = self.codepoints.state_of(ecn)
        if state is None:
            f.not_ect += 1
            return
        if state == PortState.CONGESTION:
            f.ce += 1
            f.pend_ce += 1
            f.seg_ce += 1
        elif state == PortState.UNDETERMINED:
            f.ue += 1
            if not self.tcd:
                return  # a plain DCQCN NP: ECT(1), not a mark
            f.pend_ue += 1
            f.seg_ue += 1
        else:
            f.ect += 1
            return
        if f.flow in self._pending:
            return  # a CNP is already due at the end of this interval
        if f.last_cnp is None or now - f.last_cnp >= self.cnp_interval_ns:
            self._send_cnp(f, now)  # the first mark after a quiet interval: at once
        else:
            self._pending[f.flow] = f.last_cnp + self.cnp_interval_ns

    def _sequence(self, f: FlowState, hdr: TcdData, now: int) -> None:
        seq = hdr.seq
        if hdr.fin:
            if f.fin_seq is None and seq >= f.highest:
                f.fin_seq = seq
            elif f.fin_seq != seq:
                f.fin_conflicts += 1
        if seq < f.expected or seq in f.above:
            f.duplicates += 1
            return
        if seq - f.expected >= SEQ_WINDOW:
            f.beyond_window += 1
            return
        f.unique += 1
        if seq == 0:
            f.first_send_ts = hdr.send_ts_ns
        if seq < f.highest:
            f.out_of_order += 1
        else:
            f.highest = seq
        if seq == f.expected:
            f.expected += 1
            while f.expected in f.above:
                f.above.discard(f.expected)
                f.expected += 1
        else:
            f.above.add(seq)
        if f.complete_ns is None and f.fin_seq is not None and f.expected > f.fin_seq:
            f.complete_ns = now
            if f.first_send_ts is not None:
                f.fct_ns = now - f.first_send_ts

    # ------------------------------------------------------------------ TIMELY's ACKs
    def _send_ack(self, f: FlowState, hdr: TcdData) -> None:
        ack = TcdAck(f.flow, hdr.seq, hdr.send_ts_ns, min(_U16, f.seg_ce), min(_U16, f.seg_ue))
        self.actions.emit(SendTo(f.src, ack.to_bytes()))
        f.seg_ce = f.seg_ue = 0
        f.acks += 1
        self.c.acks_sent += 1

    # ------------------------------------------------------------------ the NP's CNPs
    def _send_cnp(self, f: FlowState, now: int) -> None:
        kind = CnpKind.CE if f.pend_ce else CnpKind.UE
        marked = min(_U16, f.pend_ce + f.pend_ue)
        self.actions.emit(SendTo(f.src, TcdCnp(f.flow, kind, marked).to_bytes()))
        f.pend_ce = f.pend_ue = 0
        f.last_cnp = now
        c = self.c
        c.cnps_sent += 1
        if kind == CnpKind.CE:
            f.cnps_ce += 1
            c.cnps_ce += 1
        else:
            f.cnps_ue += 1
            c.cnps_ue += 1

    def on_timer(self, now_ns: int) -> None:
        """Send the CNPs held back to the end of their flow's interval, if that has come."""
        if not self._pending:
            return
        for flow, due in list(self._pending.items()):
            if due <= now_ns:
                del self._pending[flow]
                self._send_cnp(self._flows[flow], now_ns)

    def next_deadline(self) -> int | None:
        return min(self._pending.values()) if self._pending else None

    # ------------------------------------------------------------------ reports
    def flow(self, flow: int) -> FlowState | None:
        return self._flows.get(flow)

    def flows(self) -> dict[int, dict[str, Any]]:
        """Every flow's report, JSON-able."""
        out = {}
        for fid, f in sorted(self._flows.items()):
            missing = None
            if f.fin_seq is not None:
                got = min(f.expected, f.fin_seq + 1) + sum(1 for s in f.above if s <= f.fin_seq)
                missing = f.fin_seq + 1 - got
            span = (f.last_rx - f.first_rx) if f.first_rx is not None and f.last_rx is not None else 0
            out[fid] = {
                "src": show_src(f.src), "packets": f.packets, "bytes": f.bytes, "unique": f.unique,
                "duplicates": f.duplicates, "out_of_order": f.out_of_order, "beyond_window": f.beyond_window,
                "missing": missing, "ce": f.ce, "ue": f.ue, "ect": f.ect, "not_ect": f.not_ect,
                "first_send_ts_ns": f.first_send_ts, "first_rx_ns": f.first_rx, "last_rx_ns": f.last_rx,
                "fin_seen": f.fin_seq is not None, "fin_seq": f.fin_seq, "fin_conflicts": f.fin_conflicts,
                "complete": f.complete_ns is not None, "fct_ns": f.fct_ns, "cnps_ce": f.cnps_ce,
                "cnps_ue": f.cnps_ue, "acks": f.acks, "goodput_bps": f.bytes * 8e9 / span if span > 0 else None,
            }
        return out

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self.c)
        complete = sum(f.complete_ns is not None for f in self._flows.values())
        out.update(flows_seen=len(self._flows), complete_flows=complete, tcd=self.tcd,
                   cnp_interval_ns=self.cnp_interval_ns)
        return out


if TYPE_CHECKING:
    _receiver_is_an_engine: type[Engine] = TcdReceiver


__all__ = ["SEQ_WINDOW", "FlowState", "ReceiverCounters", "TcdReceiver", "show_src"]
