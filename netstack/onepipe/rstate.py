"""Reliable 1Pipe's per-message and per-connection records (design topics §7-§8 in docs/papers.md),
shared by the engine's two halves: :class:`.reliable.ReliableEndpoint` (prepare, commit and
delivery, §7) and :class:`.recovery.Recovery` (incarnations, failure notices, recalls, recovery,
§8). Plain data, sans-IO; the rules that change them are in those two modules.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .endpoint import Addr, EndpointCounters, TxConn

#: a connection's PSNs start at ``(incarnation & 0xFF) << 24`` (ours): a receiver whose peer
#: failed takes a new connection from it only at the base of another incarnation, so a stray
#: packet of the failed one (a resend still on the wire) never passes for the new one's
PSN_BASE_SHIFT = 24
#: the PSN bits below an incarnation's base: a packet with any of them set starts no connection
PSN_LOW = (1 << PSN_BASE_SHIFT) - 1
PSN_MASK = (1 << 32) - 1

# the states of a message we sent: waiting for its ACKs, ACKed, recalled (waiting for the
# RECALL_ACKs, §8 step 5), settled (no longer holds the commit back, §7.2)
PENDING, ACKED, RECALLING, SETTLED = range(4)


def psn_base(incarnation: int | None) -> int:
    """The first PSN of a connection this process opens as ``incarnation`` (None: not registered)."""
    return ((incarnation or 0) & 0xFF) << PSN_BASE_SHIFT


@dataclass(slots=True, eq=False)
class ReliableCounters(EndpointCounters):
    """The best-effort counters, plus reliable mode's."""

    retransmits: int = 0  # PREPAREs sent again (go-back-N)
    relayed_out: int = 0  # ... of them, and recalls, sent through the controller
    relayed_in: int = 0  # packets that came relayed by the controller
    commits_sent: int = 0  # prompt COMMITs to the ToR
    commit_updates: int = 0  # the received commit barrier moved up
    commit_backwards: int = 0  # a commit barrier below the current one: ignored
    out_of_order: int = 0  # PREPAREs beyond the next PSN: dropped (go-back-N), NAKed once
    recalls_sent: int = 0  # RECALLs (resends included)
    recall_acks_received: int = 0
    recalls_received: int = 0
    duplicate_recalls: int = 0  # a RECALL for a message already recalled here
    recall_too_late: int = 0  # a RECALL for a message already delivered (a protocol violation)
    messages_recalled: int = 0  # messages we dropped because their sender recalled them
    messages_discarded: int = 0  # messages from a failed process above its T_f, dropped
    from_failed: int = 0  # packets from a process whose failure we handled: dropped
    notices: int = 0  # FAILURE_NOTICEs handled (first time each)
    duplicate_notices: int = 0
    stale_notices: int = 0  # a notice contradicting one already handled (another T_f): ignored
    #: a notice (not a REPLAY) before this process registered: the previous process at its address's
    notices_before_joining: int = 0
    proc_fails: int = 0  # ProcFail callbacks
    registrations: int = 0  # times this endpoint was registered (1 + recoveries)
    announcements: int = 0  # another process (re)joined
    recoveries: int = 0  # times it was declared failed and recovered
    not_registered_sends: int = 0  # messages to a process known failed: SendFail at once
    probes_answered: int = 0  # the controller's PROBEs answered (it suspected us: issue 31)


@dataclass(slots=True, eq=False)
class RMsg:
    """One message of a reliable scattering we sent, until it is settled (§7.1, §8 step 5)."""

    ts: int
    dst: Addr
    data: bytes
    npkts: int
    seq: int  # the scattering's number
    psn: int = 0  # first PSN on its connection
    acked: int = 0
    state: int = PENDING
    sc: RScat | None = None
    recalls: int = 0  # RECALL_ACKs still awaited
    failed: bool = False  # SendFail fired


@dataclass(slots=True, eq=False)
class RScat:
    """A stamped reliable scattering: its messages are recalled together (§8 step 5)."""

    seq: int
    ts: int
    msgs: list[RMsg] = field(default_factory=list)
    recalled: bool = False


class RTxConn(TxConn):
    """A sender connection: the best-effort one's window state, plus the datagrams kept for
    resending and the go-back-N timer. Its ``inflight`` holds :class:`RMsg`."""

    __slots__ = ("frames", "progress_at", "resends", "resent_at")

    def __init__(self, dst: Addr, cwnd: int, now: int) -> None:
        super().__init__(dst, cwnd)
        self.frames: deque[bytes] = deque()  # the datagram of PSN una, una+1, ...
        self.progress_at = now  # last ACK progress (or the first send after idle)
        self.resends = 0  # resends since the last progress
        self.resent_at = -(1 << 62)


@dataclass(slots=True, eq=False)
class RxMsg:
    """A complete message received, waiting for the commit barrier (§7.3)."""

    ts: int
    src: Addr
    psn: int
    npkts: int
    data: bytes
    conn: RxConn
    dropped: bool = False


class RxConn:
    """A receiver connection from one process (one incarnation of it): go-back-N, the complete
    messages not delivered yet, and what recalls and failures took from it."""

    __slots__ = ("buffered", "cid", "closed", "cum", "gone", "key", "msgs", "nak_at", "part", "part_ts", "recalled",
                 "src", "via_ctl")

    def __init__(self, src: Addr, key: int, cid: int) -> None:
        self.src = src
        self.key = key
        self.cid = cid
        self.cum = 0  # the next PSN expected
        self.part: list[bytes] = []  # fragments of the message being received
        self.part_ts = 0
        self.buffered = 0  # packets held here (complete messages not delivered, and ``part``)
        self.msgs: dict[int, RxMsg] = {}  # complete, undelivered, by first PSN
        #: first PSN -> wire ts (0: any) of messages recalled before they completed here
        self.recalled: dict[int, int] = {}
        #: first PSN -> wire ts of messages dropped by a recall (duplicates tell)
        self.gone: dict[int, int] = {}
        self.closed = False  # its process failed: nothing more is taken from it
        self.nak_at = -1  # the cum last NAKed (one NAK per gap)
        self.via_ctl = False  # its last packet came relayed: answer through the controller

    def close(self) -> None:
        """Take nothing more from this connection; drop its partial message (complete ones stay)."""
        self.closed = True
        self.buffered -= len(self.part)
        self.part = []


__all__ = ["ACKED", "PENDING", "PSN_BASE_SHIFT", "PSN_LOW", "PSN_MASK", "RECALLING", "SETTLED", "RMsg", "RScat",
           "RTxConn", "ReliableCounters", "RxConn", "RxMsg", "psn_base"]
