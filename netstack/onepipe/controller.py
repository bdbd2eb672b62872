"""The reliable 1Pipe controller, sans-IO: registration, failure records, notices, callbacks,
release, relay and recovery.

"1Pipe: Scalable Total Order Communication in Data Center Networks" (SIGCOMM 2021), in its
reliable mode (two-phase commit barriers) and its handling of failures, gives a highly available
controller the job of turning a silent process into a *failure*: one timestamp T_f after which
everything from it is discarded, known to every correct process before the barriers move past it.
The § numbers below are the 1Pipe design topics of docs/papers.md (§7 reliable 1Pipe, §8
failures, §12 the appendix's cases), not the paper's section numbers; docs/onepipe-reliable.md
("Controller") is the design this engine follows. Choices the paper leaves open are *ours*.

Inputs, all with ``now_ns`` passed in (no clock, socket, asyncio or store in here):
:meth:`Controller.receive` (a datagram from a process), :meth:`Controller.report` (the shell's
word that a switch, or a process, found an input silent), :meth:`Controller.recorded` (the store
made a failure record durable) and :meth:`Controller.on_timer`; :meth:`Controller.next_deadline`
says when the timer is due. Outputs, in :attr:`Controller.actions` (``SendTo`` from ``netstack.engine``,
the rest from ``netstack.onepipe.actions``), in decision order; the shell carries them out in that
order (a store write before what follows it):

- ``RegisterProcess(addr, inc)``, ``RecordFailure(addr, inc, T_f, reason)``,
  ``RecordRecall(sender, sender_inc, psn, receiver, receiver_inc)``: writes for the store;
- ``SendTo(addr, datagram)``: a REGISTER reply or announcement, a FAILURE_NOTICE, a RELAY;
- ``Fence(addr)``: freeze ``addr``'s commit input at every switch and report it (``report``);
- ``Release(addr_or_link)``: remove that input from every switch's commit minimum (RESUME),
  banned there until ``Admit(addr)``, which comes with every registration.

A registered process goes ``live`` -> ``suspected`` (reports are collected) -> ``recording``
(``RecordFailure`` is out) -> ``failed`` (the record is durable; notices are out) -> ``released``
(every correct process finished its callback) -> ``live`` again under incarnation + 1 when it
registers anew (§8 recovery step 4: a recovered process is a new process).

Registration (§8; wire: docs/onepipe-reliable.md "Wire"):

- A REGISTER request from an unknown address admits incarnation 1: ``RegisterProcess``, the reply
  (nonce echoed, current failure revision), then an announcement (nonce 0) to every other live
  process so they open connections to it, and (ours) one announcement per other live process to
  the newcomer, so a process that re-joins learns the incarnations that changed while it was out.
- The same nonce again while live: the same datagrams again (``register_repeats``). Another nonce
  while live: the process restarted before anyone noticed; its old incarnation is declared failed
  (``Fence``) and the request is not answered. It retries; once that failure is released it is
  admitted as incarnation + 1. A request while its failure is not released yet is not answered
  (``register_deferred``).
- A ``RECOVER`` request after the release gets a batch first: a ``REPLAY`` notice for every
  failure recorded after the revision it has seen (its own included) and its undeliverable
  recalls (a RELAY of RECALL from their sender), then the reply with their counts.
- Any other admission (a new or restarted process) gets, before its reply, a ``REPLAY`` notice
  for every process whose current incarnation is failed (ours): such a process may be alive and
  not know it yet (a stall, a lost notice), and its messages above T_f must not be taken by a
  newcomer that never heard of its failure.

Failures (§8 steps 1-7):

- ``report(P, last_commit)``: a link name or an unregistered address has nobody to coordinate: it
  is released at once (a best-effort process, a core link). A live process becomes ``suspected``;
  reports are collected for ``report_window_ns`` from the first, and T_f is the latest commit they
  gave (0: none, everything from P is discarded). Then ``RecordFailure``: T_f is final once
  written (records are write-once), so no notice leaves before ``recorded``.
- ``recorded``: a FAILURE_NOTICE to every other live process, resent every ``retry_ns`` until it
  answers CALLBACK_DONE, and once to P itself (alive but cut off, it learns it was declared
  failed); again (at most every ``retry_ns``) whenever P, failed, sends a RELAY, CALLBACK_DONE or
  FAILURE_REPORT: it never heard, and must recover. A process that has not answered
  ``answer_timeout_ns`` after the first notice is declared failed (``Fence``); when nobody is left
  to wait for, ``Release(P)``.
- A process that was declared failed in any way stops being waited for at once: its own input is
  frozen in the commit minimum, so barriers cannot pass it before its own release.
- ToRs (ours; Fig. 10's switch and link failures): when the shell has described the fabric
  (:meth:`Controller.know_tors`: each ToR's uplinks, as its neighbours' inputs, and the processes
  behind it), a report about an uplink waits ``report_window_ns`` for the ToR's other uplinks. If
  every uplink of the ToR has been reported, nobody hears it any more (the ToR failed, or every
  link to it did): each live process behind it is declared failed at once, with no probe (a probe
  could only travel through that ToR), T_f the highest commit the uplinks froze, and the uplinks
  stay held until every one of those failures is released (released first, the barriers would
  pass the processes' messages before the notices discard them). Otherwise it was a core link:
  the reported uplinks are released then, the ToR still heard through another. An uplink once
  reported counts as down until its ToR is cut off (we learn of no repair: a later silence of the
  last uplink then declares the processes, safe at worst). Without a description every link
  report is released at once, as before.

Relay (§8 "controller forwarding"): a RELAY from a live process to a live one is forwarded with
the sender's address in it. A relayed PREPARE or RECALL must be answered (a relayed ACK, NAK or
RECALL_ACK the other way) within ``answer_timeout_ns`` or the destination is declared failed. A
RECALL for a process that is down is recorded as an undeliverable recall (``RecordRecall``, once)
and answered at once with a RECALL_ACK on its behalf, so the sender's recall completes; a PREPARE
(or an answer) for it is dropped.

Timer slack (ours; docs/onepipe-reliable.md "Timers on a loaded host"): :meth:`Controller.set_timer_slack`
gives the engine how late its live daemon has recently been scheduled; the one timer here that
declares a process failed, ``answer_timeout_ns`` (a notice or a relayed request unanswered), waits
that much longer, so that a wait for a CPU (ours, or the process's, on the same loaded machine) is
not taken for a silent process; a failure's notices are resent that much later too (at most a
quarter of the answer timeout later, so that several resends still fit in it). In virtual time with
a controller core (``ctl_msg_ns``, :mod:`.ctlcore`) the slack is twice the longest an input waited
for that core.

Failover: :meth:`Controller.restore` rebuilds a new leader from the store and drives every
failure of a current incarnation again (notices, callbacks, ``Release``); processes and switches
take duplicates.

Bad input never raises: an undecodable datagram is ``malformed``; an unknown opcode or a source
that is not an address ``foreign``; a CALLBACK_DONE, RELAY or FAILURE_REPORT from an address that
is not a live process ``unregistered``; the rest is counted under its own name
(:class:`ControllerCounters`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from ipaddress import IPv4Address
from typing import Any

from headers.errors import HeaderError
from headers.onepipe import TS_MOD, OnePipeHeader, OnePipeOpcode, decode_packet, ts_gt, ts_max

from ..engine import SendTo
from ..errors import ConfigError
from .actions import Admit, ControllerActionQueue, Fence, RecordFailure, RecordRecall, RegisterProcess, Release
from .ctlwire import (
    ADDR,
    Addr,
    Notice,
    Recall,
    failure_notice,
    parse_failure_report,
    parse_probe,
    parse_recall,
    parse_register_request,
    parse_relay,
    probe,
    recall,
    register_reply,
    relay,
)

LIVE = "live"
SUSPECTED = "suspected"
RECORDING = "recording"
FAILED = "failed"
RELEASED = "released"

_REGISTER, _CALLBACK_DONE = OnePipeOpcode.REGISTER, OnePipeOpcode.CALLBACK_DONE
_RELAY, _FAILURE_REPORT = OnePipeOpcode.RELAY, OnePipeOpcode.FAILURE_REPORT
_RECALL, _RECALL_ACK = OnePipeOpcode.RECALL, OnePipeOpcode.RECALL_ACK
_PROBE = OnePipeOpcode.PROBE
#: relayed packets the destination must answer (§8: a prepare or a recall) ...
_REQUESTS = frozenset({OnePipeOpcode.PREPARE, _RECALL})
#: ... and the answers that show it did
_ANSWERS = frozenset({OnePipeOpcode.ACK, OnePipeOpcode.NAK, _RECALL_ACK})
#: a failure id travels in the 32-bit PSN field of FAILURE_NOTICE and CALLBACK_DONE
_FID_MAX = 0xFFFFFFFF
#: reporter names go into the failure record's reason (the store takes printable text)
_REPORTER_MAX = 64


@dataclass(frozen=True, slots=True)
class ControllerParams:
    """The controller's timers (ours: the paper fixes none)."""

    #: after the first report about P, wait this long for its other reporters (T_f = the max)
    report_window_ns: int
    #: resend unanswered notices (and Fences nobody has reported on) this often
    retry_ns: int
    #: a process that answers nothing for this long after it was asked is declared failed
    answer_timeout_ns: int
    #: the suspicion phase (ours, issue 31): a process a switch reports silent is PROBEd and
    #: declared failed only if it does not answer within ``answer_timeout_ns``; an answered probe
    #: clears the suspicion (its input is admitted back). After this many cleared suspicions in a
    #: row (each within ``strike_window_ns`` of the one before) the next report is taken at once:
    #: the process reaches the controller but not its ToR (a data-path cut). 0: no suspicion
    #: phase, a switch report declares the process failed at once (the paper's §8)
    max_strikes: int = 2
    #: 0: 4 answer timeouts
    strike_window_ns: int = 0
    #: how long an unanswered PROBE waits before the process is declared failed (ours, issue 31);
    #: 0: ``answer_timeout_ns``. Longer is safe where the shell reports a closed port at once
    #: (:meth:`Controller.unreachable`: a killed process is declared on that, not on this timer),
    #: so only a process that is alive but stalled, or a whole host that is gone, waits it out
    probe_timeout_ns: int = 0

    def __post_init__(self) -> None:
        def ok(v: object, low: int) -> bool:
            return type(v) is int and v >= low

        checks = [
            ("report_window_ns", ok(self.report_window_ns, 0)),
            ("retry_ns", ok(self.retry_ns, 1)),
            # at least one resend before a silent process is declared failed
            ("answer_timeout_ns", ok(self.answer_timeout_ns, 1) and ok(self.retry_ns, 1)
             and self.answer_timeout_ns > self.retry_ns),
            ("max_strikes", ok(self.max_strikes, 0)),
            ("strike_window_ns", ok(self.strike_window_ns, 0)),
            ("probe_timeout_ns", ok(self.probe_timeout_ns, 0)
             and (self.probe_timeout_ns == 0 or self.probe_timeout_ns > self.retry_ns)),
        ]
        bad = [name for name, good in checks if not good]
        if bad:
            raise ConfigError("onepipe.controller", f"invalid parameters: {', '.join(bad)} ({self})")

    @classmethod
    def for_beacon(cls, t_beacon_ns: int) -> ControllerParams:
        """Defaults scaled to the beacon interval: a report window of 1 T_beacon (the reporters
        are one hop from P and time out within a beacon of each other), resends every 4 and a
        40-T_beacon answer timeout (4 input timeouts of the default 10 beacons: a process that
        is merely slow, e.g. busy recalling, is not declared failed)."""
        if type(t_beacon_ns) is not int or t_beacon_ns < 1:
            raise ConfigError("onepipe.controller", f"t_beacon_ns must be a positive int, not {t_beacon_ns!r}")
        return cls(report_window_ns=t_beacon_ns, retry_ns=4 * t_beacon_ns, answer_timeout_ns=40 * t_beacon_ns)

    @property
    def strike_window(self) -> int:
        return self.strike_window_ns or 4 * self.answer_timeout_ns


@dataclass(slots=True, eq=False)
class ControllerCounters:
    """What the controller counts, in export order."""

    datagrams: int = 0  # everything receive() was given
    # registration
    registrations: int = 0  # incarnations admitted (new processes and re-joins)
    recoveries: int = 0  # ... of which with RECOVER (a batch was sent first)
    replays_sent: int = 0  # REPLAY notices in recovery batches
    recalls_replayed: int = 0  # undeliverable recalls in recovery batches
    register_repeats: int = 0  # the same nonce again: the same answer again
    register_deferred: int = 0  # a request while the process's failure is not released: not answered
    restarts: int = 0  # a new nonce from a live process: its old incarnation declared failed
    announcements: int = 0  # REGISTER announcements (nonce 0) sent
    # detection
    reports: int = 0  # reports about registered processes
    released_unregistered: int = 0  # reports about links and unregistered addresses: released at once
    late_reports: int = 0  # reports about a process whose T_f is already chosen
    stale_reports: int = 0  # ... with a commit above that T_f (T_f is final: nothing changes)
    bad_reports: int = 0  # reports about something that is no address or link, or with a bad commit
    probes: int = 0  # suspicion phases begun: a switch reported a live process, it was PROBEd (issue 31)
    probe_retries: int = 0  # PROBEs sent again
    probes_answered: int = 0  # ... answered in time: the suspicion cleared, its input admitted back
    probe_timeouts: int = 0  # ... unanswered within the probe timeout: declared failed
    probes_refused: int = 0  # ... whose process's port was closed (ICMP port unreachable): declared failed
    stray_unreachable: int = 0  # port-unreachable reports about an address that was not being probed
    struck_out: int = 0  # reports taken at once: max_strikes suspicions cleared in a row before
    stray_probes: int = 0  # PROBE answers for no probe, another incarnation, or too late
    fences: int = 0  # Fence emitted: a restart, silence, or a process (not a switch) accusing
    fence_retries: int = 0  # Fence again: no switch reported the fenced process yet
    records_requested: int = 0  # RecordFailure emitted
    stale_records: int = 0  # recorded() for nothing asked, another incarnation or T_f, a bad or used fid
    # notices and callbacks
    notices_sent: int = 0  # first FAILURE_NOTICEs (to the failed process itself included)
    notice_retries: int = 0
    callbacks: int = 0  # CALLBACK_DONEs that were waited for
    duplicate_callbacks: int = 0  # ... again from a process that had answered
    unexpected_callbacks: int = 0  # ... from a live process the failure did not wait for
    unknown_fid: int = 0
    answer_timeouts: int = 0  # processes declared failed for not answering a notice
    releases: int = 0  # failures released (Release of a registered process)
    # relay
    relayed: int = 0  # RELAYs forwarded to a live process
    relay_timeouts: int = 0  # destinations declared failed for not answering a relayed request
    to_failed: int = 0  # relayed PREPAREs and answers for a process that is down: dropped
    notices_to_strays: int = 0  # ... its failure notice (replayed) to a sender that did not know
    notices_to_newcomers: int = 0  # REPLAY notices of failed processes to a process joining afresh
    recalls_recorded: int = 0  # RecordRecall emitted
    duplicate_recalls: int = 0  # a recall already recorded: answered again, not recorded again
    recall_acks_sent: int = 0  # RECALL_ACKs on behalf of a process that is down
    unknown_destination: int = 0
    # bad input
    unregistered: int = 0  # CALLBACK_DONE, RELAY or FAILURE_REPORT from no live process
    notices_to_failed: int = 0  # ... from a failed incarnation that never heard: its own notice again
    malformed: int = 0  # undecodable datagrams and payloads
    foreign: int = 0  # opcodes the controller does not take, sources that are not addresses
    # the ToRs the shell described (know_tors; ours)
    uplink_reports: int = 0  # reports about a ToR's uplink
    uplinks_released: int = 0  # uplinks released: at the end of a window (a core link) or of a cut
    tors_cut_off: int = 0  # windows that found every uplink of a ToR silent
    cut_off: int = 0  # live processes declared failed behind such a ToR


@dataclass(slots=True, eq=False)
class _Proc:
    """The current incarnation of one process address."""

    addr: Addr
    inc: int
    state: str = LIVE
    nonce: int | None = None  # of the request that admitted it (None: restored, unknown)
    sent: tuple[bytes, ...] = ()  # the batch and reply that admitted it: resent on a repeat
    reason: str = ""  # why it was declared failed
    t_f: int = 0  # the max commit reported so far; the recorded T_f once recording
    reported: bool = False  # a report about it came in: the window runs
    window_end: int | None = None
    fence_at: int | None = None  # Fence again at this time while nobody has reported
    told_at: int | None = None  # when a datagram from it, failed, last got its own notice again
    probe: _Probe | None = None  # live, suspected by a switch: the probe in flight (issue 31)
    strikes: int = 0  # suspicions cleared in a row (each within the strike window of the last)
    cleared_at: int | None = None  # when the last one was cleared
    cleared_commit: int | None = None  # ... and the commit the switches had frozen then
    answer_strikes: int = 0  # probes answered while a callback or a relayed answer was overdue
    closed_at: int | None = None  # a datagram to it drew a port unreachable then, unprobed (issue 31)


@dataclass(slots=True, eq=False)
class _Probe:
    """A suspicion phase (ours, issue 31): a switch found P silent; P is asked whether it is
    alive before it is declared failed. The reports wait here: declared, they give T_f."""

    pid: int
    since: int
    retry_at: int
    reports: list[tuple[int | None, str]] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class _Failure:
    """A durable failure record and the callbacks it waits for (§8 steps 3-7)."""

    addr: Addr
    inc: int
    t_f: int
    fid: int
    waiting: dict[Addr, int] = field(default_factory=dict)  # live process -> its incarnation
    answered: set[Addr] = field(default_factory=set)
    asked_at: int = 0
    #: a waiter that answered a probe (alive, slow) is waited for anew from then (issue 31)
    since: dict[Addr, int] = field(default_factory=dict)
    retry_at: int = 0
    released: bool = False

    def notice(self, replay: bool) -> bytes:
        return failure_notice(Notice(self.addr, self.inc, self.t_f, self.fid, replay))


@dataclass(slots=True, eq=False)
class _Tor:
    """A ToR the shell described (:meth:`Controller.know_tors`, ours): the link inputs its
    neighbours hear it by, the processes behind it, and what was reported about its uplinks."""

    name: str
    links: frozenset[str]
    procs: tuple[Addr, ...]
    #: every uplink reported silent since the ToR was last cut off -> the highest commit it froze
    down: dict[str, int | None] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)  # ... of which not released yet
    window_end: int | None = None
    cut: bool = False  # every uplink silent: its processes declared failed
    held: set[Addr] = field(default_factory=set)  # ... whose release its uplinks wait for


def is_addr(x: object) -> bool:
    """``x`` is a process address in its one canonical form: ``(dotted IPv4 str, int port)``."""
    if not (type(x) is tuple and len(x) == 2 and type(x[0]) is str and type(x[1]) is int and 0 <= x[1] <= 0xFFFF):
        return False
    try:
        return str(IPv4Address(x[0])) == x[0]
    except ValueError:
        return False


def show(addr: Addr) -> str:
    """``"ip:port"``, the CLI's form (``ctlwire.parse_proc`` reads it back)."""
    return f"{addr[0]}:{addr[1]}"


#: what :func:`_commit` returns for a commit that is no wire timestamp
_BAD = -1


def _commit(value: object) -> int | None:
    """A reported commit as a wire timestamp, None for "none" (None or 0), ``_BAD`` when invalid."""
    if value is None:
        return None
    if type(value) is not int or not 0 <= value < TS_MOD:
        return _BAD
    return value or None


class Controller:
    """The reliable 1Pipe controller engine (module docstring: the rules)."""

    def __init__(self, params: ControllerParams, now_ns: int) -> None:
        self.params = params
        self.actions = ControllerActionQueue()
        self.c = ControllerCounters()
        self._now = now_ns
        self._procs: dict[Addr, _Proc] = {}
        self._failures: dict[int, _Failure] = {}  # by fid
        self._revision = 0  # the highest fid recorded: what REGISTER replies carry
        #: undeliverable recalls by (receiver, its incarnation): (sender, sender inc, psn) -> recall
        self._recalls: dict[tuple[Addr, int], dict[tuple[Addr, int, int], Recall]] = {}
        #: relayed requests not answered yet: (requester, destination) -> when the oldest left
        self._pending: dict[tuple[Addr, Addr], int] = {}
        #: how much longer the answer timeout waits on a loaded host (set_timer_slack)
        self.timer_slack_ns = 0
        self._probe_ids = 0
        #: the fabric's ToRs, when the shell described them (know_tors; ours)
        self._tors: dict[str, _Tor] = {}
        self._tor_of_link: dict[str, _Tor] = {}

    # ------------------------------------------------------------------ inputs

    def receive(self, datagram: bytes, src: Addr, now_ns: int) -> None:
        """A UDP payload from ``src``. Never raises: what cannot be used is counted and dropped."""
        self._now = now_ns
        self.c.datagrams += 1
        if not is_addr(src):
            self.c.foreign += 1
            return
        sender = self._procs.get(src)
        if sender is not None:
            sender.closed_at = None  # it sends: whatever closed port we heard of is not its socket now
        try:
            hdr, payload = decode_packet(datagram)
        except (HeaderError, TypeError, ValueError):
            self.c.malformed += 1
            return
        op = hdr.opcode
        if op is _REGISTER:
            self._on_register(src, hdr, payload)
        elif op is _CALLBACK_DONE:
            self._on_callback(src, hdr.psn)
        elif op is _RELAY:
            self._on_relay(src, payload)
        elif op is _FAILURE_REPORT:
            self._on_process_report(src, hdr, payload)
        elif op is _PROBE:
            self._on_probe_answer(src, hdr, payload)
        else:
            self.c.foreign += 1

    def report(self, inp: Addr | str, last_commit: int | None, now_ns: int, reporter: str = "switch") -> None:
        """``reporter`` found input ``inp`` silent (a switch's input timeout, §6 and §8 step 1);
        ``last_commit`` is the last commit barrier it had from it (None or 0: none)."""
        self._now = now_ns
        commit = _commit(last_commit)
        if commit == _BAD:
            self.c.bad_reports += 1
            return
        if isinstance(inp, str):
            tor = self._tor_of_link.get(inp)
            if tor is None:
                self._release_unregistered(inp)
            else:
                self._uplink_down(tor, inp, commit)
            return
        if not is_addr(inp):
            self.c.bad_reports += 1
            return
        p = self._procs.get(inp)
        if p is None:
            self._release_unregistered(inp)
            return
        self.c.reports += 1
        self._take_report(p, commit, _printable(reporter))

    def recorded(self, proc: Addr, incarnation: int, t_f: int, fid: int, now_ns: int) -> None:
        """The store made ``(proc, incarnation, T_f)`` durable as revision ``fid``: notices may
        leave now (§8 step 3, never before: a new leader must find the same T_f)."""
        self._now = now_ns
        p = self._procs.get(proc) if is_addr(proc) else None
        if (p is None or p.state != RECORDING or p.inc != incarnation or p.t_f != t_f
                or type(fid) is not int or not 0 < fid <= _FID_MAX or fid in self._failures):
            self.c.stale_records += 1
            return
        p.state = FAILED
        self._revision = max(self._revision, fid)
        f = _Failure(p.addr, p.inc, p.t_f, fid)
        self._failures[fid] = f
        self._drive(f)

    def on_timer(self, now_ns: int) -> None:
        """Close report windows, Fence again, declare silent processes failed, resend notices."""
        self._now = now_ns
        self._expire_probes()
        self._close_tor_windows()
        self._close_windows()
        self._refence()
        self._expire_callbacks()
        self._expire_relays()
        self._resend_notices()

    def next_deadline(self) -> int | None:
        """When ``on_timer`` is due; None when nothing waits."""
        return min(self._deadlines(), default=None)

    @property
    def answer_timeout_ns(self) -> int:
        """The answer timeout in force: ``params.answer_timeout_ns`` plus the timer slack."""
        return self.params.answer_timeout_ns + self.timer_slack_ns

    @property
    def retry_slack_ns(self) -> int:
        """How much later than ``retry_ns`` a notice is resent: the timer slack, at most a quarter of
        the answer timeout (a loaded controller still resends a few times before it declares a
        process failed)."""
        return min(self.timer_slack_ns, self.params.answer_timeout_ns // 4)

    @property
    def probe_timeout_ns(self) -> int:
        """How long an unanswered probe waits in force: ``params.probe_timeout_ns`` (0: the answer
        timeout) plus the timer slack."""
        return (self.params.probe_timeout_ns or self.params.answer_timeout_ns) + self.timer_slack_ns

    def unreachable(self, addr: Addr, now_ns: int) -> None:
        """The shell's socket learnt that nothing listens at ``addr`` (the kernel's ICMP port
        unreachable for a datagram we sent it; ours, issue 31). A process being PROBEd there is
        dead, not slow (a live process's socket holds the probe until it runs): it is declared
        failed now, as an unanswered probe would be at its timeout. For a live process not probed
        yet it is kept: a switch's report within the probe timeout declares it at once (its own
        probe's ICMP may be rate-limited away), unless it sends us something first. Anything else
        is counted and ignored.
        Forging one is no stronger than dropping the probes, which declares the process too."""
        self._now = now_ns
        p = self._procs.get(addr) if is_addr(addr) else None
        if p is None or p.probe is None:
            self.c.stray_unreachable += 1
            if p is not None and p.state == LIVE:
                p.closed_at = now_ns  # evidence for a probe that may follow (_closed_before)
            return
        self.c.probes_refused += 1
        self._probe_failed(p, "its port is closed (ICMP port unreachable)")

    def set_timer_slack(self, slack_ns: int) -> None:
        """Twice how late the live shell's process has recently been scheduled, or (virtual time,
        :mod:`.ctlcore`) twice the longest an input waited for its core: a process is declared
        failed for not answering only after :attr:`answer_timeout_ns` (module docstring), for
        requests already waiting too, and a failure's notices are resent ``retry_ns`` plus
        :attr:`retry_slack_ns` after the last sending (answers may be waiting unread behind our
        own backlog: resending then only adds to it). Negative values count as 0; the shell asks
        :meth:`next_deadline` again afterwards."""
        self.timer_slack_ns = max(0, int(slack_ns))

    def know_tors(self, tors: Mapping[str, tuple[Iterable[str], Iterable[Addr]]]) -> None:
        """The fabric around its ToRs, from the shell (ours: the paper's controller knows the
        topology, §8): ``{tor: (its uplinks, the processes behind it)}``, an uplink named as
        :meth:`report` gets it (the input at the neighbouring switch that hears the ToR). Replaces
        any earlier description; ConfigError on malformed input or an uplink of two ToRs."""
        new: dict[str, _Tor] = {}
        by_link: dict[str, _Tor] = {}
        for name, (links, procs) in tors.items():
            ls, ps = frozenset(links), tuple(procs)
            if (not isinstance(name, str) or not ls or not all(isinstance(x, str) and x for x in ls)
                    or not all(is_addr(a) for a in ps)):
                raise ConfigError("onepipe.controller.tors",
                                  f"{name!r}: uplinks {sorted(map(str, ls))}, processes {ps}")
            tor = new[name] = _Tor(name, ls, ps)
            for link in ls:
                if link in by_link:
                    raise ConfigError("onepipe.controller.tors",
                                      f"{link} is an uplink of {by_link[link].name} and {name}")
                by_link[link] = tor
        self._tors, self._tor_of_link = new, by_link

    # ------------------------------------------------------------------ registration

    def _on_register(self, src: Addr, hdr: OnePipeHeader, payload: memoryview) -> None:
        try:
            nonce, seen, recover = parse_register_request(hdr, payload)
        except HeaderError:
            self.c.malformed += 1  # a REGISTER reply, or garbage
            return
        p = self._procs.get(src)
        if p is None:
            self._admit(src, 1, nonce)
        elif p.state == LIVE and p.nonce is not None and p.nonce == nonce:
            # our reply (or part of the batch) was lost: the same datagrams again
            self.c.register_repeats += 1
            for data in p.sent:
                self.actions.emit(SendTo(src, data))
        elif p.state == LIVE:
            # a fresh start under an incarnation we think is live: its buffers are gone, so that
            # incarnation failed (§8 recovery); unknown nonce after a restore counts as fresh:
            # declaring a live process failed is safe, keeping a restarted one is not
            self.c.restarts += 1
            self._suspect(p, "registered again with a new nonce (restarted)", fence=True)
        elif p.state != RELEASED:
            self.c.register_deferred += 1  # it retries; admitted once its failure is released
        elif recover:
            batch = self._recovery_batch(p, seen)
            self.c.recoveries += 1
            self._admit(src, p.inc + 1, nonce, batch)
        else:
            self._admit(src, p.inc + 1, nonce)

    def _recovery_batch(self, p: _Proc, seen: int) -> tuple[list[bytes], int, int]:
        """What a recovering process missed (§8 recovery steps 2-3): REPLAY notices since the
        revision it has seen, then its undeliverable recalls, as their senders' RELAYs."""
        notices = [f.notice(replay=True) for f in sorted(self._failures.values(), key=lambda f: f.fid)
                   if f.fid > seen]
        # the recalls of every incarnation of it that failed since: one that never heard it was
        # admitted (its reply lost while it was stopped) recovers from an earlier one than ours
        incs = sorted({f.inc for f in self._failures.values() if f.addr == p.addr and f.fid > seen} | {p.inc})
        recalls = [relay(sender, recall(_RECALL, r))
                   for inc in incs for (sender, _, _), r in self._recalls.get((p.addr, inc), {}).items()]
        self.c.replays_sent += len(notices)
        self.c.recalls_replayed += len(recalls)
        return notices + recalls, len(notices), len(recalls)

    def _still_failed(self, newcomer: Addr) -> list[bytes]:
        """REPLAY notices of the failures of every current incarnation that is failed, for a
        process that joins afresh: it never heard of them, and a failed process may be alive,
        not knowing yet, and scatter to it above its T_f (§8 step 4: nobody takes those)."""
        out = []
        for f in sorted(self._failures.values(), key=lambda f: f.fid):
            p = self._procs.get(f.addr)
            if f.addr != newcomer and p is not None and p.inc == f.inc and p.state in (FAILED, RELEASED):
                out.append(f.notice(replay=True))
        self.c.notices_to_newcomers += len(out)
        return out

    def _admit(self, addr: Addr, inc: int, nonce: int, batch: tuple[list[bytes], int, int] | None = None) -> None:
        datagrams, n_notices, n_recalls = batch or (self._still_failed(addr), 0, 0)
        self.actions.emit(RegisterProcess(addr, inc))
        # a failed incarnation's input is released with a ban (a zombie's stuck commit must not
        # come back); the new one may take its place in the commit minimum
        self.actions.emit(Admit(addr))
        reply = register_reply(addr, inc, self._revision, nonce, n_notices, n_recalls)
        others = [q for q in self._procs.values() if q.state == LIVE and q.addr != addr]
        self._procs[addr] = _Proc(addr, inc, LIVE, nonce, (*datagrams, reply))
        self.c.registrations += 1
        for data in (*datagrams, reply):
            self.actions.emit(SendTo(addr, data))
        # announcements (ours) matter only where a connection was closed by a failure notice: a
        # first incarnation is news to nobody, and a fresh (not recovering) process has nothing
        # closed. Announcing everyone to everyone would cost O(N^2) datagrams as a fabric starts.
        if inc > 1:
            announce = register_reply(addr, inc, self._revision, 0)
            for q in others:
                self.actions.emit(SendTo(q.addr, announce))
            self.c.announcements += len(others)
        if batch is not None:
            # the recovering process learns every peer that changed while it was out (a REPLAY
            # notice closed that connection; only an announcement reopens it)
            changed = [q for q in others if q.inc > 1]
            for q in changed:
                self.actions.emit(SendTo(addr, register_reply(q.addr, q.inc, self._revision, 0)))
            self.c.announcements += len(changed)

    # ------------------------------------------------------------------ detection (§8 steps 1-2)

    def _release_unregistered(self, inp: Addr | str) -> None:
        # "a core link or switch -> no process; its input link is simply removed": nobody holds
        # state to discard or recall, so nothing to wait for
        self.c.released_unregistered += 1
        self.actions.emit(Release(inp))

    def _on_process_report(self, src: Addr, hdr: OnePipeHeader, payload: memoryview) -> None:
        try:
            about, commit = parse_failure_report(hdr, payload)
        except HeaderError:
            self.c.malformed += 1
            return
        if self._live(src) is None:
            self.c.unregistered += 1  # only processes we know may accuse one (switches: report())
            self._tell_failed(src)
            return
        if about not in self._procs:
            # a process has no input of anyone else's to release (a switch's report does that)
            self.c.bad_reports += 1
            return
        self.report(about, commit or None, self._now, reporter=f"process {show(src)}")

    def _take_report(self, p: _Proc, commit: int | None, reporter: str) -> None:
        if p.state == LIVE and reporter == "switch" and self._probing(p, commit):
            assert p.probe is not None
            p.probe.reports.append((commit, reporter))
            self._closed_before(p)
            return
        if p.state == LIVE:
            # a switch that reports has frozen P's input already; any other reporter has not, so
            # every switch is asked to (and to report what it froze: T_f must cover it)
            self._suspect(p, f"reported by {reporter}", fence=reporter != "switch")
        if p.state != SUSPECTED:
            self.c.late_reports += 1
            if commit is not None and (p.t_f == 0 or ts_gt(commit, p.t_f)):
                self.c.stale_reports += 1  # T_f is final once written (records are write-once)
            return
        if not p.reported:
            p.reported = True
            p.window_end = self._now + self.params.report_window_ns
            p.fence_at = None
        if commit is not None:
            p.t_f = commit if p.t_f == 0 else ts_max(p.t_f, commit)

    def _suspect(self, p: _Proc, reason: str, *, fence: bool) -> None:
        """``p``'s incarnation is failed from now on (there is no way back: §8 recovery makes a new
        process). Its T_f is still to be learnt; nobody waits for its answers any longer."""
        p.state, p.reason, p.t_f, p.reported, p.window_end = SUSPECTED, reason, 0, False, None
        probe, p.probe = p.probe, None
        if fence:
            self.c.fences += 1
            self.actions.emit(Fence(p.addr))
            p.fence_at = self._now + self.params.retry_ns
        for key in [k for k in self._pending if p.addr in k]:
            del self._pending[key]
        # its commit input stays frozen in every switch's minimum until its own release, so no
        # barrier passes it meanwhile: other failures need not wait for its callbacks (§12 item 9)
        for f in self._unreleased():
            if f.waiting.pop(p.addr, None) is not None and not f.waiting:
                self._release(f)
        # what the switches reported while it was probed: their frozen commits give T_f
        for commit, reporter in probe.reports if probe is not None else ():
            self._take_report(p, commit, reporter)

    # ------------------------------------------------------------------ ToRs and their uplinks (ours, Fig. 10)

    def _uplink_down(self, tor: _Tor, link: str, commit: int | None) -> None:
        """A neighbour of ``tor`` found ``link`` silent: wait a report window for its other uplinks."""
        self.c.uplink_reports += 1
        old = tor.down.get(link)
        tor.down[link] = commit if old is None else old if commit is None else ts_max(old, commit)
        tor.pending.add(link)
        if not tor.cut and tor.window_end is None:
            tor.window_end = self._now + self.params.report_window_ns

    def _close_tor_windows(self) -> None:
        for tor in self._tors.values():
            if tor.window_end is None or tor.window_end > self._now:
                continue
            tor.window_end = None
            if tor.links <= tor.down.keys():
                self._cut_off(tor)
            else:
                # a core link (or a spine): the processes behind the ToR are still heard through
                # another uplink, whose input keeps their commits in every minimum; nothing to wait for
                self._release_uplinks(tor)

    def _cut_off(self, tor: _Tor) -> None:
        """No neighbour hears ``tor``: every process behind it is failed for the others (a failed
        ToR switch, or every link to it), T_f the highest commit its uplinks froze (the ToR's up
        output carried the minimum of its processes' commits, so nothing above it was delivered
        anywhere, and each of them had settled everything up to it)."""
        tor.cut = True
        self.c.tors_cut_off += 1
        t_f: int | None = None
        for c in tor.down.values():
            if c is not None:
                t_f = c if t_f is None else ts_max(t_f, c)
        reason = f"behind {_printable(tor.name)}, which no neighbour hears"
        behind = [p for p in map(self._procs.get, tor.procs) if p is not None]
        for p in behind:
            if p.state == LIVE:
                self.c.cut_off += 1
                self._suspect(p, reason, fence=False)  # its only input is at the silent ToR
        # (only now: a suspicion above may release another failure behind the ToR, which must not
        # release the uplinks while the processes after it are still to be declared)
        for p in behind:
            if p.state == SUSPECTED:
                self._take_report(p, t_f, f"{_printable(tor.name)} cut off")
            if p.state != RELEASED:
                tor.held.add(p.addr)
        if not tor.held:
            self._end_cut(tor)

    def _end_cut(self, tor: _Tor) -> None:
        """Every failure behind ``tor`` is released: so are its uplinks (a ToR that comes back
        re-joins when heard, as any released link does, §4)."""
        self._release_uplinks(tor)
        tor.cut = False
        tor.down.clear()

    def _release_uplinks(self, tor: _Tor) -> None:
        for link in sorted(tor.pending):
            self.c.uplinks_released += 1
            self.actions.emit(Release(link))
        tor.pending.clear()

    # ------------------------------------------------------------------ suspicion phase (ours, issue 31)

    def _probing(self, p: _Proc, commit: int | None) -> bool:
        """``p`` (live, reported by a switch with ``commit``) is being probed, or starts to be now;
        False: declare it failed at once (no suspicion phase, or ``max_strikes`` suspicions cleared
        in a row without the switches hearing it in between: it answers us, not its ToR)."""
        if p.probe is not None:
            return True
        prm = self.params
        heard = commit is not None and p.cleared_commit is not None and ts_gt(commit, p.cleared_commit)
        if heard or (p.cleared_at is not None and self._now - p.cleared_at > prm.strike_window):
            # its commit rose at the switch since the last clearance (an idle process's commit
            # rises with its clock): its data path works, it was merely slow again; or that
            # clearance was long ago. A fresh start either way
            p.strikes = 0
        if prm.max_strikes == 0 or p.strikes >= prm.max_strikes:
            if prm.max_strikes:
                self.c.struck_out += 1
            return False
        self._start_probe(p)
        return True

    def _start_probe(self, p: _Proc) -> None:
        self._probe_ids = (self._probe_ids + 1) & _FID_MAX or 1
        p.probe = _Probe(self._probe_ids, self._now, self._now + self.params.retry_ns)
        self.c.probes += 1
        self.actions.emit(SendTo(p.addr, probe(p.probe.pid, p.inc)))

    def _closed_before(self, p: _Proc) -> None:
        """``p`` is probed: if a datagram to it drew a port unreachable within the probe timeout before
        (and nothing came from it since), its port is closed already and the probe's own ICMP may
        never come (the kernel allows a host about one a second after a burst of six, and the
        datagrams its peers and we sent it since it died spent them): declare it now."""
        if p.closed_at is not None and p.probe is not None and self._now - p.closed_at <= self.probe_timeout_ns:
            self.c.probes_refused += 1
            self._probe_failed(p, f"its port was closed (ICMP port unreachable "
                                  f"{(self._now - p.closed_at) / 1e6:.0f} ms before)")

    def _probing_for_answer(self, q: _Proc) -> bool:
        """``q`` (live) owes an answer (a CALLBACK_DONE, a relayed ACK) past the answer timeout:
        probe it first (issue 31). False: declare it failed now (no suspicion phase, or it
        answered ``max_strikes`` probes and still not the request: alive but stuck)."""
        if q.probe is not None:
            return True
        if self.params.max_strikes == 0 or q.answer_strikes >= self.params.max_strikes:
            return False
        self._start_probe(q)
        return True

    def _on_probe_answer(self, src: Addr, hdr: OnePipeHeader, payload: memoryview) -> None:
        try:
            pid, inc = parse_probe(hdr, payload)
        except HeaderError:
            self.c.malformed += 1
            return
        p = self._live(src)
        if p is None or p.probe is None or p.probe.pid != pid or p.inc != inc:
            self.c.stray_probes += 1
            return
        self.c.probes_answered += 1
        reports, p.probe = p.probe.reports, None
        # alive: merely slow (a loaded host). What it owes us is waited for anew from now
        for f in self._unreleased():
            if p.addr in f.waiting:
                f.since[p.addr] = self._now
        for key in self._pending:
            if key[1] == p.addr:
                self._pending[key] = self._now
        if not reports:
            p.answer_strikes += 1  # probed for a missing answer only: no switch holds it
            return
        # a switch found it silent: its input comes back into every switch's commit minimum at
        # its frozen commit, its timeout running again (Admit)
        p.cleared_commit = None
        for c, _ in reports:
            if c is not None:
                p.cleared_commit = c if p.cleared_commit is None else ts_max(p.cleared_commit, c)
        p.strikes += 1
        p.cleared_at = self._now
        self.actions.emit(Admit(p.addr))

    def _probe_failed(self, p: _Proc, why: str) -> None:
        """``p``'s probe proved it failed (``why``): declare it, with what the switches reported."""
        assert p.probe is not None
        reporters = sorted({r for _, r in p.probe.reports})
        if reporters:
            self._suspect(p, f"reported by {', '.join(reporters)}; {why}", fence=False)
        else:  # probed for a missing answer: no switch froze its input yet
            self.c.answer_timeouts += 1
            self._suspect(p, f"no answer to a request; {why}", fence=True)

    def _expire_probes(self) -> None:
        deadline = self._now - self.probe_timeout_ns
        for p in list(self._procs.values()):
            pr = p.probe
            if pr is None:
                continue
            if pr.since <= deadline:
                self.c.probe_timeouts += 1
                self._probe_failed(p, "no answer to a probe")
            elif pr.retry_at <= self._now:
                self.c.probe_retries += 1
                pr.retry_at = self._now + self.params.retry_ns
                self.actions.emit(SendTo(p.addr, probe(pr.pid, p.inc)))

    def _close_windows(self) -> None:
        for p in list(self._procs.values()):
            if p.state == SUSPECTED and p.window_end is not None and p.window_end <= self._now:
                p.state, p.window_end = RECORDING, None
                self.c.records_requested += 1
                self.actions.emit(RecordFailure(p.addr, p.inc, p.t_f, p.reason))

    def _refence(self) -> None:
        # a Fence travels through the shell to every switch and may be lost: ask again until a
        # switch has reported on the process (without a report T_f cannot be chosen safely)
        for p in self._procs.values():
            if p.state == SUSPECTED and p.fence_at is not None and p.fence_at <= self._now:
                self.c.fence_retries += 1
                self.actions.emit(Fence(p.addr))
                p.fence_at = self._now + self.params.retry_ns

    # ------------------------------------------------------------------ notices and callbacks (§8 steps 3-7)

    def _drive(self, f: _Failure) -> None:
        """Notify every live process of ``f`` and wait for their callbacks."""
        f.waiting = {q.addr: q.inc for q in self._procs.values() if q.state == LIVE and q.addr != f.addr}
        f.answered.clear()
        f.asked_at, f.retry_at, f.released = self._now, self._now + self.params.retry_ns, False
        f.since.clear()
        notice = f.notice(replay=False)
        for q in (*f.waiting, f.addr):  # P itself too: alive but cut off, it learns its fate
            self.c.notices_sent += 1
            self.actions.emit(SendTo(q, notice))
        if not f.waiting:
            self._release(f)

    def _on_callback(self, src: Addr, fid: int) -> None:
        p = self._live(src)
        if p is None:
            self.c.unregistered += 1
            self._tell_failed(src)
            return
        f = self._failures.get(fid)
        if f is None:
            self.c.unknown_fid += 1
        elif f.waiting.get(src) == p.inc:
            p.answer_strikes = 0
            del f.waiting[src]
            f.answered.add(src)
            self.c.callbacks += 1
            if not f.waiting and not f.released:
                self._release(f)
        elif src in f.answered:
            self.c.duplicate_callbacks += 1
        else:
            self.c.unexpected_callbacks += 1

    def _release(self, f: _Failure) -> None:
        # every correct process finished discard, recall and its callback: the barriers may pass
        # P's input now (§8 step 7, RESUME); only then may P re-join as a new process
        f.released = True
        p = self._procs.get(f.addr)
        if p is not None and p.inc == f.inc and p.state == FAILED:
            p.state = RELEASED
        self.c.releases += 1
        self.actions.emit(Release(f.addr))
        for tor in self._tors.values():
            if f.addr in tor.held:
                tor.held.discard(f.addr)
                if not tor.held:
                    self._end_cut(tor)

    def _expire_callbacks(self) -> None:
        deadline = self._now - self.answer_timeout_ns
        for f in self._unreleased():
            for addr, inc in list(f.waiting.items()):
                if f.since.get(addr, f.asked_at) > deadline or addr not in f.waiting:
                    continue
                q = self._procs.get(addr)
                if q is None or q.state != LIVE or q.inc != inc:
                    del f.waiting[addr]  # outlived its process (cannot happen): nothing to wait for
                elif not self._probing_for_answer(q):
                    self.c.answer_timeouts += 1
                    self._suspect(q, f"no CALLBACK_DONE for failure {f.fid}", fence=True)  # leaves every wait
            if not f.waiting and not f.released:
                self._release(f)

    def _resend_notices(self) -> None:
        for f in self._unreleased():
            if f.waiting and f.retry_at + self.retry_slack_ns <= self._now:
                notice = f.notice(replay=False)
                for addr in f.waiting:
                    self.c.notice_retries += 1
                    self.actions.emit(SendTo(addr, notice))
                f.retry_at = self._now + self.params.retry_ns

    # ------------------------------------------------------------------ relay (§8 "controller forwarding")

    def _on_relay(self, src: Addr, payload: memoryview) -> None:
        s = self._live(src)
        if s is None:
            self.c.unregistered += 1
            self._tell_failed(src)
            return
        try:
            dst, inner, body = parse_relay(payload)
            r = parse_recall(inner, body) if inner.opcode is _RECALL else None
        except HeaderError:
            self.c.malformed += 1
            return
        d = self._procs.get(dst)
        if d is None:
            self.c.unknown_destination += 1
        elif d.state == LIVE:
            self._forward(s, d, inner.opcode, bytes(payload[ADDR.size:]))
        elif r is not None:
            self._recall_for_failed(s, d, r)
        else:
            self.c.to_failed += 1
            # a sender that joined after D failed never heard of it (its notice predates it) and
            # would resend to D for ever, its commit stuck: tell it (ours), as a replay (no answer)
            rec = next((f for f in self._failures.values() if f.addr == d.addr and f.inc == d.inc), None)
            if rec is not None and inner.opcode is OnePipeOpcode.PREPARE:
                self.actions.emit(SendTo(s.addr, rec.notice(replay=True)))
                self.c.notices_to_strays += 1

    def _forward(self, s: _Proc, d: _Proc, op: object, inner: bytes) -> None:
        self.c.relayed += 1
        self.actions.emit(SendTo(d.addr, relay(s.addr, inner)))
        if op in _REQUESTS:
            self._pending.setdefault((s.addr, d.addr), self._now)
        elif op in _ANSWERS:
            self._pending.pop((d.addr, s.addr), None)  # s answers d's requests

    def _recall_for_failed(self, s: _Proc, d: _Proc, r: Recall) -> None:
        """A recall nobody can deliver now: written down for ``d``'s recovery (it must drop that
        message when it settles its buffer), and acknowledged on its behalf so ``s``'s recall,
        hence its callback and the barriers, do not wait for a dead process (§8 step 5)."""
        book = self._recalls.setdefault((d.addr, d.inc), {})
        key = (s.addr, s.inc, r.psn)
        if key in book:
            self.c.duplicate_recalls += 1  # our RECALL_ACK was lost: answer again, record once
        else:
            book[key] = r
            self.c.recalls_recorded += 1
            self.actions.emit(RecordRecall(s.addr, s.inc, r.psn, d.addr, d.inc))
        self.c.recall_acks_sent += 1
        self.actions.emit(SendTo(s.addr, relay(d.addr, recall(_RECALL_ACK, r))))

    def _expire_relays(self) -> None:
        deadline = self._now - self.answer_timeout_ns
        for key, since in list(self._pending.items()):
            if since > deadline or key not in self._pending:
                continue
            d = self._live(key[1])
            if d is not None and self._probing_for_answer(d):
                continue  # waited for anew if it answers the probe
            del self._pending[key]
            if d is not None:
                self.c.relay_timeouts += 1
                self._suspect(d, "no answer to a relayed request", fence=True)  # drops its other entries

    def _tell_failed(self, src: Addr) -> None:
        """``src`` speaks as a live process, but its incarnation was declared failed: it never heard
        (its own notice goes once and may be lost, e.g. to a full socket buffer while it was
        stopped). Alive, it is fenced (the switches hold what it is given, §8 step 7) and must
        recover as a new incarnation: tell it (ours), at most once per ``retry_ns``."""
        p = self._procs.get(src)
        if p is None or p.state not in (FAILED, RELEASED) or (p.told_at is not None
                                                             and self._now - p.told_at < self.params.retry_ns):
            return
        f = next((f for f in self._failures.values() if f.addr == p.addr and f.inc == p.inc), None)
        if f is None:
            return
        p.told_at = self._now
        self.c.notices_to_failed += 1
        self.actions.emit(SendTo(src, f.notice(replay=False)))

    # ------------------------------------------------------------------ helpers

    def _live(self, addr: Addr) -> _Proc | None:
        p = self._procs.get(addr)
        return p if p is not None and p.state == LIVE else None

    def _unreleased(self) -> list[_Failure]:
        return [f for f in self._failures.values() if not f.released]

    def _deadlines(self) -> Iterator[int]:
        for p in self._procs.values():
            if p.probe is not None:
                yield p.probe.retry_at
                yield p.probe.since + self.probe_timeout_ns
            if p.state == SUSPECTED:
                if p.window_end is not None:
                    yield p.window_end
                if p.fence_at is not None:
                    yield p.fence_at
        yield from (t.window_end for t in self._tors.values() if t.window_end is not None)
        probed = {p.addr for p in self._procs.values() if p.probe is not None}  # its probe decides
        for f in self._failures.values():
            if f.waiting and not f.released:
                yield f.retry_at + self.retry_slack_ns
                yield from (f.since.get(a, f.asked_at) + self.answer_timeout_ns for a in f.waiting if a not in probed)
        for (_, d), since in self._pending.items():
            if d not in probed:
                yield since + self.answer_timeout_ns

    # ------------------------------------------------------------------ export

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = asdict(self.c)
        states = [p.state for p in self._procs.values()]
        out.update(
            revision=self._revision, processes=len(states), processes_live=states.count(LIVE),
            failures=len(self._failures), failures_pending=len(self._unreleased()),
            pending_relays=len(self._pending), undeliverable_recalls=sum(len(b) for b in self._recalls.values()),
            timer_slack_ns=self.timer_slack_ns, answer_timeout_ns=self.answer_timeout_ns,
            probe_timeout_ns=self.probe_timeout_ns,
        )
        return out

    def view(self) -> dict[str, Any]:
        """The controller's state, JSON-able, for ``netstack onepipe status``."""
        return {
            "revision": self._revision,
            "processes": [{"addr": show(p.addr), "incarnation": p.inc, "state": p.state, "reason": p.reason}
                          for p in sorted(self._procs.values(), key=lambda p: _key(p.addr))],
            "failures": [{"proc": show(f.addr), "incarnation": f.inc, "t_f": f.t_f, "fid": f.fid,
                          "waiting": [show(a) for a in sorted(f.waiting, key=_key)], "released": f.released}
                         for f in sorted(self._failures.values(), key=lambda f: f.fid)],
            "recalls": [{"sender": show(s), "sender_incarnation": s_inc, "psn": psn, "receiver": show(d),
                         "receiver_incarnation": d_inc}
                        for (d, d_inc), book in sorted(self._recalls.items(), key=lambda kv: (_key(kv[0][0]), kv[0][1]))
                        for (s, s_inc, psn) in sorted(book, key=lambda k: (_key(k[0]), k[1], k[2]))],
            "pending_relays": [{"from": show(s), "to": show(d), "since_ns": t}
                               for (s, d), t in sorted(self._pending.items())],
        }

    # ------------------------------------------------------------------ failover

    @classmethod
    def restore(cls, params: ControllerParams, now_ns: int, *, processes: Iterable[tuple[Addr, int]],
                failures: Iterable[tuple[Addr, int, int, int]],
                recalls: Iterable[tuple[Addr, int, int, Addr, int]]) -> Controller:
        """A new leader's controller, from the store: ``processes`` as ``(addr, incarnation)``,
        ``failures`` as ``(addr, incarnation, T_f, fid)``, undeliverable ``recalls`` as ``(sender,
        sender_inc, psn, receiver, receiver_inc)``. Every failure of a current incarnation is
        driven again as if never released (notices to every live process, ``Release`` once all
        answered); a failure of an older incarnation was released (the process re-registered
        after it), and a second Release would remove the new incarnation's input. ConfigError
        on malformed input."""
        ctl = cls(params, now_ns)
        for addr, inc in processes:
            _check_restored(addr, inc)
            old = ctl._procs.get(addr)
            if old is None or old.inc < inc:
                ctl._procs[addr] = _Proc(addr, inc)
        again = list(ctl._restore_failures(failures))
        for s, s_inc, psn, d, d_inc in recalls:
            _check_restored(s, s_inc)
            _check_restored(d, d_inc)
            if type(psn) is not int or not 0 <= psn <= 0xFFFFFFFF:
                raise ConfigError("onepipe.controller.restore", f"recall psn {psn!r}")
            # the store keeps (sender, psn) only: a one-PSN recall is enough for the receiver to
            # find the message that starts there
            ctl._recalls.setdefault((d, d_inc), {})[(s, s_inc, psn)] = Recall(0, psn, 1, 0)
        for f in again:
            ctl._drive(f)
        return ctl

    def _restore_failures(self, failures: Iterable[tuple[Addr, int, int, int]]) -> Iterator[_Failure]:
        """Rebuild the failure entries; yield those to drive again."""
        for addr, inc, t_f, fid in sorted(failures, key=lambda f: f[3]):
            _check_restored(addr, inc)
            if type(t_f) is not int or not 0 <= t_f < TS_MOD or type(fid) is not int or not 0 < fid <= _FID_MAX \
                    or fid in self._failures:
                raise ConfigError("onepipe.controller.restore", f"failure record {(addr, inc, t_f, fid)!r}")
            f = _Failure(addr, inc, t_f, fid, released=True)
            self._failures[fid] = f
            self._revision = max(self._revision, fid)
            p = self._procs.get(addr)
            if p is None or p.inc < inc:
                p = self._procs[addr] = _Proc(addr, inc)
            if p.inc == inc:
                p.state, p.t_f, p.reason = FAILED, t_f, "restored"
                yield f


def _key(addr: Addr) -> tuple[int, int]:
    return int(IPv4Address(addr[0])), addr[1]


def _printable(text: object) -> str:
    return "".join(ch if ch.isprintable() else "?" for ch in str(text)[:_REPORTER_MAX])


def _check_restored(addr: object, inc: object) -> None:
    if not is_addr(addr) or type(inc) is not int or not 0 < inc <= 0xFFFFFFFF:
        raise ConfigError("onepipe.controller.restore", f"process {addr!r} incarnation {inc!r}")


__all__ = ["FAILED", "LIVE", "RECORDING", "RELEASED", "SUSPECTED", "Controller", "ControllerCounters",
           "ControllerParams", "is_addr", "show"]
