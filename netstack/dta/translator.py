"""The DTA translator ("Direct Telemetry Access", §5, §7.2), sans-IO: DTA reports in, RoCEv2
requests out.

The collector's ToR switch turns each report into RDMA operations on the collector's
registered memory and keeps the RDMA state (QPN, rkey, per-QP PSN) the reporters never see.

    t = DTATranslator(TranslatorConfig(connect_info, mac=..., ip=...), now_ns=start)
    frames = t.on_report(report_frame, now_ns)      # RoCEv2 requests for the collector
    t.actions.take_all()                            # Transmit(NACK) back toward the reporter
    t.on_roce_response(ack_or_nak_frame, now_ns)    # from the collector (resync, §5.3)
    t.next_deadline() / t.on_timer(now_ns)          # idle Append flushes, time-based grace

The translator is the report side: it parses reports and turns each primitive into writes
and atomics at the right addresses. The RoCEv2 requester it composes,
:class:`~netstack.dta.requester.RoceRequester` (:attr:`DTATranslator.requester`), owns the
queue pairs: PSNs, the output window and its time-out, the requests' wire format, and which
of the collector's responses are believed (its module docstring has the details).

Every output is a whole Ethernet frame. What the calls return is RoCEv2 (UDP 4791) for
the collector; DTA NACKs (UDP 40044), which go the other way (back to the reporter), are
:class:`netstack.engine.Transmit` actions in :attr:`DTATranslator.actions`, the contract
every engine keeps (:mod:`netstack.engine`), so a shell routes by kind of output instead of
classifying each frame. Nothing raises on frame content: every refusal is a counted drop
(:meth:`DTATranslator.counters`). The clock is only ever what the caller passes in:
``now_ns`` at construction, then the latest ``now_ns`` of any call.

Primitives (layouts in :mod:`netstack.dta.memory`, hashes in :mod:`netstack.dta.keywrite`)
------------------------------------------------------------------------------------------
- **Key-Write** (§6.1, §7.2.2): N = the report's redundancy, capped at the store's
  ``max_redundancy`` (and ``TranslatorConfig.max_redundancy``); copy n is an RDMA WRITE Only
  of ``checksum(key) || data`` to slot ``slot_hash(key, n) & (slots - 1)`` (CRC32 of
  key || n, finished with a mixer unless the store asks for the public pure-CRC form:
  :mod:`netstack.dta.keywrite` explains why). A report whose data
  word count differs from the store's is dropped (``bad_data_size``).
- **Append** (§6.2, §7.2.3): one ring buffer per list at the collector; the head pointer
  and the batch being built live here. When B entries (B ∈ {1,2,4,8,16}, per list) are
  buffered they go out in one WRITE at the head, and the head advances by B (wrapping: a
  ring holds a multiple of B entries, so a batch never straddles the end). **Idle flush**
  (the gap §7.2.3 footnote 5 points out): once the oldest not-yet-written entry has waited
  ``append_flush_ns``, the entries not yet written are written *in place* (at
  head + already-written) but stay in the batch; the head still advances only when the
  batch is full, and the completing WRITE carries only the remaining entries. So a flush
  never misaligns the ring and no entry is written twice. ``append_flush_ns=None``
  disables flushing (the public behaviour).
- **Key-Increment** (§6.4): N FETCH_ADDs of the report's 64-bit counter at slot
  ``slot_hash(key, n) & (slots - 1)`` of the counter store (8-byte slots).
- **Sketch-Merge** (§6.3, §7.2.4): each reporter sends its columns *sequentially*. The
  column number is a running 32-bit counter: column ``g`` is column ``g % C`` of epoch
  ``g // C`` (C = the sketch's column count), so consecutive epochs continue the sequence
  and "sequential" needs no separate epoch field. Per (sketch, reporter) we expect the next
  column; a report beyond it gets a NACK (UDP 40044, sketch extension) with the expected
  column and is dropped (repeated NACKs for the same column are held off for
  ``sketch_nack_holdoff_ns``, so the columns in flight behind a loss do not each restart
  the reporter); an older column is a duplicate and silently dropped. A reporter's first
  column must start an epoch (``g % C == 0``), else it is NACK'd to that epoch's start.
  Accepted columns merge into the aggregate (``sum``, saturating at 2**32-1, or ``max``);
  a column is complete when every configured reporter contributed; completed columns go
  to the collector in aligned groups of ``batch_columns`` columns, one WRITE per group, in
  the rotated layout (Fig. 5d): the group's columns are contiguous in memory, each column
  ``rows`` big-endian u32. Epoch ``e`` is stored in slot ``e % epochs`` of the region.
- **Retransmittable reports** (any other primitive with the base header's
  ``retransmittable`` bit): per reporter source IP we keep the last sequence number
  accepted in order; a report that is not the next one is dropped and answered with a
  NACK carrying that last number (the public translator's NACK tracking, per reporter
  instead of one register). A reporter's first report is accepted whatever its number.
- **Postcarding** (0x04, the public artifact's Postcarder; issue 33, :mod:`netstack.dta.postcard`):
  a postcard is one hop's 32-bit value for a flow key, hop numbers 1..H (H = the store's
  ``hops``, default 5; any other hop is ``postcard_bad_hop``). A direct-mapped cache of
  ``postcard_cache`` lines (a line = a flow: its key and its latest value per hop) gathers them;
  the flow's slot is written in one WRITE (checksum, present-hops mask, every hop) when a whole
  path, all H hops, has reported since the last WRITE, or once the oldest postcard not yet
  written has waited ``postcard_flush_ns`` (a path shorter than H, a lost postcard). The line
  stays cached after a WRITE, so a postcard arriving later rewrites the whole slot with every hop
  known, never a slot with the straggler alone (Append's in-place idle flush, the same idea). A
  postcard for another flow on an occupied line evicts it, first writing what it had not written
  (to the evicted flow's own slot; the public P4 computes the address from the new flow's key).

Queue-pair resynchronisation (§5.3, §8.5)
----------------------------------------
PSNs are tracked per QP, starting at the collector's initial PSN (``connect_info``). On a
NAK "PSN sequence error" from the collector the QP's PSN is reset to the NAK's PSN (the
collector's expected PSN) and a **grace period** starts, during which no RDMA is
generated: Key-Write, Key-Increment and Append reports are dropped (``grace_dropped``;
Append entries are dropped *before* the head pointer, so the list has no hole, the
alternative §7.2.3 footnote 6 mentions), Sketch-Merge columns are still merged and their
WRITEs are held until the grace period ends. The grace period is either a number of
reports (``grace_reports``, default 1000, counting every report that reaches the
translator, as the public code's per-port drop counter does — the public default is
100,000 at Tofino rates) or a time (``grace_ns``). Each further NAK restarts it (as in the
public code, where every NAK re-arms the drop counter). A count-based grace period only
ends when reports arrive; held writes and due flushes are emitted with the report that
ends it. The grace period is per collector NIC (shared by all QPs), like the public
per-egress-port register.

Output window and responses (ours; docs/dta.md "Output window", docs/security.md#dta): the
requester's (:mod:`netstack.dta.requester`). What the translator does with it: with ``window``
> 0 a Key-Write or Key-Increment report whose requests would not fit its QP's window is
dropped *before* it becomes a request (``window_dropped``), an Append entry only when it
would complete a batch (so it is dropped before the head pointer and the list has no hole),
and idle flushes and Sketch-Merge WRITEs wait for room instead, the latter bounded by
``MAX_HELD``. A PSN-sequence NAK the requester believed starts the grace period above.

Authenticated reports (docs/dta.md "Authenticated reports"). With ``auth`` (a
:class:`~netstack.dta.reportauth.ReportAuth`: one replay-windowed opener per reporter source
address, fixed at construction) every report must end in the optional trailer of
:mod:`headers.auth` under its reporter's key. The trailer is checked after the Ethernet, IPv4
and UDP headers parse and before the report is decoded; a report refused (``unknown_reporter``,
``truncated``, ``unknown_key``, ``forged``, ``stale_era``, ``replayed``) is counted in
``auth_refused`` and dropped, so it reaches no state at all (no NACK, no sequence tracking, no
grace-period count). Every report counts once: ``reports`` = ``auth_ok`` + ``auth_refused`` +
the reports whose headers did not parse (``malformed``; an authentic report that does not
decode counts in ``auth_ok`` and ``malformed``). NACKs and the RoCEv2 side are unchanged.

Switch integration: :class:`TranslatorFeature` (see its docstring for where it hooks).
"""

from __future__ import annotations

import json
import struct
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from headers.dta import (
    MAX_KEYWRITE_WORDS,
    Append,
    DTABase,
    DTANack,
    KeyIncrement,
    KeyWrite,
    MergeFunction,
    Postcarder,
    Primitive,
    SketchMerge,
    build_nack_frame,
    decode_report,
    parse_report_frame,
)
from headers.errors import HeaderError
from headers.inet import UdpFrame, ip_bytes, mac_bytes, parse_udp_frame
from headers.registry import UdpPort
from headers.serial import W32

from ..engine import ActionQueue, Engine, Transmit
from .counters import TranslatorCounters
from .fairshare import FairShare
from .keywrite import DEFAULT_SLOT_HASH, KeyWriteLayout, check_slot_hash, is_power_of_two, key_checksum, slot_index
from .memory import APPEND_BATCHES
from .postcard import PostcardLayout
from .reportauth import ReportAuth
from .requester import DEFAULT_WINDOW_TIMEOUT_NS, PSN_HALF, RequesterConfig, RoceRequester, TxQp

COLUMN_MASK = 0xFFFFFFFF
U32_MAX = 0xFFFFFFFF
#: Reporters whose sequence numbers we track (the public register has 65,536 entries).
MAX_TRACKED_REPORTERS = 65536
#: Incomplete sketch columns kept per sketch before the oldest are given up (a reporter
#: that went silent must not make the aggregate grow without bound).
MAX_OPEN_COLUMNS_FACTOR = 4
#: The fast path's view of a report (DTA §6.6): Ethernet source, EtherType, IPv4 version|IHL, total
#: length, protocol, source and destination address, UDP source port, destination port, length,
#: then the base header (opcode, seqnum, flags) at byte 42. Anything but IPv4 without options takes
#: the ``headers`` decoders instead (same verdicts, same counters).
_REPORT = struct.Struct("!6x6sHBxH4xxB2x4s4sHHH2xBBB")
_KEYVAL = struct.Struct("!BI")  # redundancy, key (Key-Write and Key-Increment, §6.1, §6.4)
_KEYINC = struct.Struct("!BIQ")
_APPEND = struct.Struct("!II")
#: (key, N) -> slot addresses (and checksum) kept for the keys seen last; the hashes are pure, so
#: this only saves recomputing CRC32 + mix32 per copy (§7.2.2) for recurring keys. Bounded.
SLOT_CACHE = 1 << 16
#: Sketch WRITEs held while their QP's window is full are at most this many (the oldest go first).
MAX_HELD = 4096
#: Lines of the Postcarding cache by default (flows gathered at once; the public P4 has 32,768).
POSTCARD_CACHE = 4096


@dataclass
class _Flow:
    """One line of the Postcarding cache: a flow and its latest value per hop."""

    key: int
    hops: dict[int, int] = field(default_factory=dict)
    fresh: set[int] = field(default_factory=set)  # hops reported since the flow's last WRITE
    oldest_ns: int | None = None  # arrival of the oldest postcard not written yet


@dataclass
class _Postcards:
    qp: TxQp
    layout: PostcardLayout
    lines: dict[int, _Flow] = field(default_factory=dict)  # cache line -> flow
    pending: dict[int, None] = field(default_factory=dict)  # lines with unwritten postcards, oldest first


@dataclass(frozen=True)
class TranslatorConfig:
    """How a translator is set up.

    ``connect_info``: the collector's :meth:`~netstack.dta.collector.RoceResponder.connect_info`
    (dict or JSON text). ``mac``/``ip``: the translator's own addresses (source of its RoCEv2
    frames and destination of the collector's responses; the IP need not be routable).
    ``udp_sport``: UDP source port of the RoCEv2 frames. ``max_redundancy``: cap on N
    (None: each store's own ``max_redundancy``). ``grace_reports`` / ``grace_ns``: the
    grace period as a report count or a time (at most one; both None = no grace period).
    ``append_flush_ns``: idle-batch flush timeout (None = never). ``track_seqnum``: NACK
    gaps of retransmittable reports. ``sketch_nack_holdoff_ns``: minimum spacing of NACKs
    asking one reporter for the same column. ``ack_every``: set AckReq on every n-th
    request of a QP (0 = never, as the public translator). ``nak_window_ns`` /
    ``nak_window_slack``: how far back a response's PSN may be when ACKs do not bound it
    (:mod:`netstack.dta.requester`, "Which responses are believed"; None = no time bound).
    ``window``: at most this many un-acknowledged requests (PSNs) per QP, 0 = no window (the
    public behaviour); ``window_timeout_ns``: how long a full window may see no ACK progress
    before the QP goes back to its oldest un-acknowledged PSN (:mod:`netstack.dta.requester`,
    "Output window").
    """

    connect_info: dict[str, Any] | str
    mac: bytes
    ip: bytes
    udp_sport: int = 49152
    max_redundancy: int | None = None
    grace_reports: int | None = 1000
    grace_ns: int | None = None
    append_flush_ns: int | None = 1_000_000
    track_seqnum: bool = True
    sketch_nack_holdoff_ns: int = 1_000_000
    ack_every: int = 0
    nak_window_ns: int | None = 10_000_000_000
    nak_window_slack: int = 1024
    window: int = 0
    window_timeout_ns: int = DEFAULT_WINDOW_TIMEOUT_NS
    postcard_flush_ns: int | None = 5_000_000
    postcard_cache: int = POSTCARD_CACHE

    def __post_init__(self) -> None:
        if isinstance(self.mac, str):
            object.__setattr__(self, "mac", mac_bytes(self.mac))
        if isinstance(self.ip, str):
            object.__setattr__(self, "ip", ip_bytes(self.ip))
        if len(self.mac) != 6 or len(self.ip) != 4:
            raise ValueError("mac must be 6 bytes and ip 4 bytes")
        if not 0 <= self.udp_sport <= 0xFFFF:
            raise ValueError(f"udp_sport={self.udp_sport} outside 0..65535")
        if self.grace_reports is not None and self.grace_ns is not None:
            raise ValueError("give the grace period as grace_reports or grace_ns, not both")
        for name in ("grace_reports", "grace_ns", "append_flush_ns", "max_redundancy", "nak_window_ns",
                     "postcard_flush_ns"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v < 0):
                raise ValueError(f"{name}={v!r} must be a non-negative int or None")
        if self.max_redundancy == 0:
            raise ValueError("max_redundancy must be >= 1")
        if self.ack_every < 0 or self.sketch_nack_holdoff_ns < 0:
            raise ValueError("ack_every and sketch_nack_holdoff_ns must be >= 0")
        if not isinstance(self.nak_window_slack, int) or not 0 <= self.nak_window_slack < PSN_HALF:
            raise ValueError(f"nak_window_slack={self.nak_window_slack!r} must be in 0..2**23-1")
        if self.nak_window_ns == 0:
            raise ValueError("nak_window_ns must be > 0 (None: no time bound)")
        for name in ("window", "window_timeout_ns"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name}={v!r} must be a non-negative int")
        if self.window >= PSN_HALF // 2:
            raise ValueError(f"window={self.window} must be below 2**22 (0: no window)")
        if self.window and not self.window_timeout_ns:
            raise ValueError("a window needs window_timeout_ns > 0 (else a lost ACK stalls it for ever)")
        if not isinstance(self.postcard_cache, int) or not is_power_of_two(self.postcard_cache):
            raise ValueError(f"postcard_cache={self.postcard_cache!r} must be a power of two")


@dataclass
class _AppendList:
    qp: TxQp
    list_id: int
    entries: int
    batch: int
    head: int = 0  # ring slot where the current batch starts
    buf: list[int] = field(default_factory=list)  # the batch being built
    written: int = 0  # how many of buf an idle flush already wrote
    oldest_ns: int | None = None  # arrival of buf[written], the oldest unwritten entry


@dataclass
class _Sketch:
    qp: TxQp
    sketch_id: int
    rows: int
    columns: int
    merge: int
    reporters: frozenset[int]
    batch_columns: int
    epochs: int
    expected: dict[int, int] = field(default_factory=dict)
    last_nack: dict[int, tuple[int, int]] = field(default_factory=dict)
    agg: dict[int, list[int]] = field(default_factory=dict)  # global column -> merged counters
    contributors: dict[int, set[int]] = field(default_factory=dict)
    ready: dict[int, dict[int, list[int]]] = field(default_factory=dict)  # group start -> completed columns


def _parse_connect_info(info: dict[str, Any] | str) -> dict[str, Any]:
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError as exc:
            raise ValueError(f"connect_info is not JSON: {exc}") from None
    if not isinstance(info, dict) or not isinstance(info.get("regions"), list):
        raise ValueError("connect_info must be a dict with a 'regions' list")
    for key in ("mac", "ip"):
        if not isinstance(info.get(key), str):
            raise ValueError(f"connect_info needs the collector's {key!r}")
    return info


class DTATranslator:
    """The translator engine. See the module docstring for what it does with each report.

    ``now_ns`` is the translator's start time (the first ``now`` its timers count from);
    afterwards only the ``now_ns`` of its calls move the clock (:attr:`now`, read-only).
    :meth:`on_report` puts NACKs in :attr:`actions` (as :class:`~netstack.engine.Transmit`,
    toward the reporter whose report it answers); the other calls never add actions."""

    def __init__(self, config: TranslatorConfig, now_ns: int = 0, *, auth: ReportAuth | None = None) -> None:
        self.config = config
        #: the reporters' openers when reports are authenticated (:mod:`.reportauth`), else None
        self.auth = auth
        self.actions = ActionQueue()
        info = _parse_connect_info(config.connect_info)
        self.collector = str(info.get("collector", "collector"))
        self.collector_mac = mac_bytes(info["mac"])
        self.collector_ip = ip_bytes(info["ip"])
        try:
            self.collector_udp_port = int(info.get("udp_port", UdpPort.ROCEV2))
        except (TypeError, ValueError):
            raise ValueError(f"connect_info udp_port {info.get('udp_port')!r} is not a port") from None
        self.c = TranslatorCounters()
        #: the RoCEv2 side: queue pairs, PSNs, the output window, the collector's answers
        self.requester = RoceRequester(RequesterConfig(
            config.mac, config.ip, config.udp_sport, self.collector_mac, self.collector_ip, self.collector_udp_port,
            config.ack_every, config.nak_window_ns, config.nak_window_slack, config.window, config.window_timeout_ns),
            self.c, now_ns)
        self._keywrite: tuple[TxQp, KeyWriteLayout] | None = None
        self._keyinc: tuple[TxQp, int, int, str] | None = None
        self._lists: dict[int, _AppendList] = {}
        self._sketches: dict[int, _Sketch] = {}
        self._postcards: _Postcards | None = None
        self._seq: OrderedDict[bytes, int] = OrderedDict()
        self._grace = False
        self._grace_left = 0
        self._grace_until: int | None = None
        self._held: list[tuple[TxQp, int, bytes]] = []  # sketch WRITEs waiting for the grace period to end
        self._slots: dict[tuple[int, int], tuple[bytes, tuple[int, ...]]] = {}  # SLOT_CACHE
        self._now = int(now_ns)
        #: with a window, each reporter's share of it (netstack/dta/fairshare.py, issue 34 finding 5)
        self._fair = FairShare(config.window, config.window_timeout_ns) if config.window else None
        #: the source address of the report being translated (the reporter the fair share charges)
        self._src = b""
        for entry in info["regions"]:
            self._add_region(entry)

    @property
    def now(self) -> int:
        """The latest ``now_ns`` this translator was given (its start time until the first call)."""
        return self._now

    @property
    def qps(self) -> dict[str, TxQp]:
        """The queue pairs by region name (the requester's)."""
        return self.requester.qps

    @property
    def timer_slack_ns(self) -> int:
        """The scheduling slack the window time-out currently waits on top (the requester's)."""
        return self.requester.timer_slack_ns

    def set_timer_slack(self, slack_ns: int) -> None:
        """The window time-out plus ``slack_ns`` from now on: :meth:`.RoceRequester.set_timer_slack`
        (docs/dta.md "The window time-out on a loaded host"; the live switch daemon calls it)."""
        self.requester.set_timer_slack(slack_ns)
        if self._fair is not None:
            # the fair share's horizon is the window's time scale too: a switch late by its slack
            # reads a reporter's reports that much later, and a reporter that seemed quiet for
            # the bare time-out dropped out of the active set, its share taken by a flooder
            # (netstack fuzz dta --attack flood: 14-44 genuine reports window_dropped in 4 of 11 runs)
            self._fair.horizon_ns = self.requester.window_timeout_ns()

    def window_timeout_ns(self) -> int:
        """The window time-out as it now stands: configured plus the scheduling slack."""
        return self.requester.window_timeout_ns()

    # ------------------------------------------------------------------ setup
    def _add_region(self, e: dict[str, Any]) -> None:
        if not isinstance(e, dict):
            raise ValueError(f"connect_info region {e!r} is not an object")
        qp = self.requester.add_qp(e)
        lay = qp.layout
        kind = lay.get("kind")
        try:
            if kind == "keywrite":
                kw = KeyWriteLayout.from_dict(lay)
                if kw.size > qp.size:
                    raise ValueError("layout larger than the region")
                if self._keywrite is not None:
                    raise ValueError("a second Key-Write store")
                self._keywrite = (qp, kw)
            elif kind == "keyincrement":
                slots = int(lay["slots"])
                if not is_power_of_two(slots) or slots * 8 > qp.size:
                    raise ValueError("slots must be a power of two that fits the region")
                if self._keyinc is not None:
                    raise ValueError("a second Key-Increment store")
                mode = check_slot_hash(str(lay.get("slot_hash", DEFAULT_SLOT_HASH)))
                self._keyinc = (qp, slots, int(lay.get("max_redundancy", 4)), mode)
            elif kind == "append":
                lid, entries, batch = int(lay["list_id"]), int(lay["entries"]), int(lay.get("batch", 4))
                if batch not in APPEND_BATCHES or entries < batch or entries % batch or entries * 4 > qp.size:
                    raise ValueError("entries must be a multiple of a batch size in (1, 2, 4, 8, 16)")
                if lid in self._lists:
                    raise ValueError(f"list {lid} twice")
                self._lists[lid] = _AppendList(qp, lid, entries, batch)
            elif kind == "postcard":
                pc = PostcardLayout.from_dict(lay)
                if pc.size > qp.size:
                    raise ValueError("layout larger than the region")
                if self._postcards is not None:
                    raise ValueError("a second Postcarding store")
                self._postcards = _Postcards(qp, pc)
            elif kind == "sketch":
                sid, rows, cols = int(lay["sketch_id"]), int(lay["rows"]), int(lay["columns"])
                merge = {"sum": MergeFunction.SUM, "max": MergeFunction.MAX}[lay.get("merge", "sum")]
                reporters = frozenset(int(r) for r in lay["reporters"])
                bc, epochs = int(lay.get("batch_columns", 4)), int(lay.get("epochs", 1))
                if not reporters or rows < 1 or cols < 1 or bc < 1 or epochs < 1 or epochs * cols * rows * 4 > qp.size:
                    raise ValueError("inconsistent sketch layout")
                if sid in self._sketches:
                    raise ValueError(f"sketch {sid} twice")
                self._sketches[sid] = _Sketch(qp, sid, rows, cols, merge, reporters, bc, epochs)
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"connect_info region {qp.name!r} ({kind}): {exc}") from None

    # ------------------------------------------------------------------ reports
    def on_report(self, frame: bytes | bytearray | memoryview, now_ns: int) -> list[bytes]:
        """Translate one DTA report frame; return the RoCEv2 frames for the collector. A NACK
        for the reporter goes to :attr:`actions` (after every frame returned here). With
        :attr:`auth`, a report whose trailer does not open is counted and dropped here."""
        out: list[bytes] = []
        self._clock(now_ns)
        self.c.reports += 1
        try:
            if self.auth is None and self._fast_report(frame, out):
                return out
            parsed = parse_report_frame(frame) if self.auth is None else self._open_report(frame, self.auth)
            if parsed is not None:
                self._report(*parsed, out)
        except HeaderError:
            self.c.malformed += 1
        except Exception:  # a bug must not kill the data path (docs/testbed.md); tests assert this stays 0
            self.c.internal_errors += 1
        return out

    @staticmethod
    def _open_report(frame: bytes | bytearray | memoryview,
                     auth: ReportAuth) -> tuple[UdpFrame, DTABase, Primitive] | None:
        """Eth/IPv4/UDP(40040), then the trailer (None: refused, counted by ``auth``), then the
        report it protected (HeaderError: malformed, as without authentication)."""
        udp = parse_udp_frame(frame)
        if udp.udp.dport != UdpPort.DTA:
            raise HeaderError("DTA", f"UDP destination port {udp.udp.dport} is not {int(UdpPort.DTA)}",
                              udp.payload_offset - 6)
        start = udp.payload_offset
        report = auth.open(udp.ip.src, bytes(frame[start:start + udp.payload_length]))
        if report is None:
            return None
        base, prim = decode_report(report, 0, len(report))
        return udp, base, prim

    def _report(self, udp: UdpFrame, base: DTABase, prim: Primitive, out: list[bytes]) -> None:
        c = self.c
        if udp.ip.dst != self.collector_ip:
            c.not_for_collector += 1
            return
        self._src = bytes(udp.ip.src)
        self._check_grace_end(out)
        if isinstance(prim, SketchMerge):
            self._sketch(udp, prim, out)
            return
        if base.retransmittable and self.config.track_seqnum and not self._track(udp, base):
            return
        if self._grace:
            c.grace_dropped += 1
            self._grace_tick(out)
            return
        if isinstance(prim, KeyWrite):
            self._key_write(prim.redundancy, prim.key, struct.pack(f"!{len(prim.data)}I", *prim.data), out)
        elif isinstance(prim, Append):
            self._append(prim.list_id, prim.data, out)
        elif isinstance(prim, KeyIncrement):
            self._key_increment(prim.redundancy, prim.key, prim.counter, out)
        elif isinstance(prim, Postcarder):
            self._postcard(prim.key, prim.hop, prim.data, out)
        else:
            c.unsupported += 1

    def _fast_report(self, frame: bytes | bytearray | memoryview, out: list[bytes]) -> bool:
        """The common report, read at fixed offsets (IPv4 without options; a Key-Write, Append or
        Key-Increment that is not tracked for retransmission): translated as :meth:`_report` would,
        and True. False, with nothing touched, for anything else: the ``headers`` decoders then
        judge it, so every refusal keeps its counter."""
        n = len(frame)
        if n < 45:
            return False
        (_, etype, vihl, tot, proto, _, ip_dst, _, dport, ulen, opcode, _, flags) = _REPORT.unpack_from(frame)
        end = 34 + ulen
        if (etype != 0x0800 or vihl != 0x45 or proto != 17 or dport != UdpPort.DTA or 14 + tot > n or ulen < 8
                or end > 14 + tot or (flags & 0x40 and self.config.track_seqnum)):
            return False
        body = end - 45
        if opcode == 1:  # Key-Write: redundancy, key, k >= 1 words (§6.1)
            if body < 9 or (body - 5) & 3 or (body - 5) >> 2 > MAX_KEYWRITE_WORDS or frame[45] < 1:
                return False
        elif opcode == 2:  # Append: list id, one word (§6.2)
            if body != 8:
                return False
        elif opcode != 3 or body != 13 or frame[45] < 1:  # Key-Increment: redundancy, key, counter (§6.4)
            return False
        c = self.c
        if ip_dst != self.collector_ip:
            c.not_for_collector += 1
            return True
        self._src = bytes(frame[26:30])
        self._check_grace_end(out)
        if self._grace:
            c.grace_dropped += 1
            self._grace_tick(out)
            return True
        if opcode == 1:
            redundancy, key = _KEYVAL.unpack_from(frame, 45)
            self._key_write(redundancy, key, bytes(frame[50:end]), out)
        elif opcode == 2:
            list_id, data = _APPEND.unpack_from(frame, 45)
            self._append(list_id, data, out)
        else:
            redundancy, key, counter = _KEYINC.unpack_from(frame, 45)
            self._key_increment(redundancy, key, counter, out)
        return True

    def _track(self, udp: UdpFrame, base: DTABase) -> bool:
        """Public-style NACK tracking; False (and a NACK action) when the report is out of order."""
        src = udp.ip.src
        seq = self._seq
        last = seq.get(src)
        if last is None or base.seqnum == (last + 1) & 0xFF:
            seq[src] = base.seqnum
            seq.move_to_end(src)
            if len(seq) > MAX_TRACKED_REPORTERS:
                seq.popitem(last=False)
            return True
        self.c.seq_nacks += 1
        self._nack(udp, DTANack(last))
        return False

    def _nack(self, udp: UdpFrame, nack: DTANack) -> None:
        # as the public translator: back to the reporter, from the address it reported to,
        # keeping its source port; only the destination port (40044) marks a NACK. An action,
        # not a returned frame: it travels the other way from the RoCEv2 output.
        frame = build_nack_frame(self.config.mac, udp.eth.src, udp.ip.dst, udp.ip.src, nack, sport=udp.udp.sport)
        self.actions.emit(Transmit(frame))

    def _cap(self, redundancy: int, store_max: int) -> int:
        cap = store_max if self.config.max_redundancy is None else min(store_max, self.config.max_redundancy)
        if redundancy > cap:
            self.c.redundancy_capped += 1
            return cap
        return redundancy

    def _key_write(self, redundancy: int, key: int, data: bytes, out: list[bytes]) -> None:
        """``data``: the report's words as they came, big-endian (what the slot stores, §7.2.2)."""
        c = self.c
        if self._keywrite is None:
            c.no_store += 1
            return
        qp, lay = self._keywrite
        if len(data) != 4 * lay.data_words:
            c.bad_data_size += 1
            return
        n = self._cap(redundancy, lay.max_redundancy)
        rq = self.requester
        if self.config.window and not self._admit(qp, n):
            return
        c.keywrite += 1
        slots = self._slots.get((key, n))
        if slots is None:
            slots = self._cache_slots(key, n, (key_checksum(key, lay.checksum_bits).to_bytes(4, "big"),
                                               tuple(qp.base_va + lay.slot_offset(key, i) for i in range(n))))
        payload = slots[0] + data  # checksum(key) || data (§6.1.1)
        for va in slots[1]:
            rq.write(qp, va, payload, out)
        if self._fair is not None:
            self._fair.charge(qp, self._src, n)

    def _cache_slots(self, key: int, n: int, entry: tuple[bytes, tuple[int, ...]]) -> tuple[bytes, tuple[int, ...]]:
        if len(self._slots) >= SLOT_CACHE:
            self._slots.clear()  # bounded: a key stream wider than the cache just recomputes
        self._slots[(key, n)] = entry
        return entry

    def _key_increment(self, redundancy: int, key: int, counter: int, out: list[bytes]) -> None:
        c = self.c
        if self._keyinc is None:
            c.no_store += 1
            return
        qp, slots, store_max, mode = self._keyinc
        n = self._cap(redundancy, store_max)
        rq = self.requester
        if self.config.window and not self._admit(qp, n):
            return
        c.keyincrement += 1
        cached = self._slots.get((key, -n))  # -n: the counter store's entries, apart from Key-Write's
        if cached is None:
            cached = self._cache_slots(key, -n, (b"", tuple(qp.base_va + slot_index(key, i, slots, mode) * 8
                                                            for i in range(n))))
        for va in cached[1]:
            rq.fetch_add(qp, va, counter, out)
        if self._fair is not None:
            self._fair.charge(qp, self._src, n)

    def _admit(self, qp: TxQp, n: int) -> bool:
        """Whether a report's ``n`` requests may go out on ``qp`` (with a window): within the
        window (``window_dropped`` when not), then within the reporter's fair share
        (``share_dropped``). A reporter alone has the whole window as its share."""
        fair = self._fair
        if fair is not None:
            fair.saw(self._src, self._now)
        if not self.requester.room(qp, n):
            self.c.window_dropped += 1
            return False
        if fair is not None and not fair.admit(qp, self._src, n, self._now):
            self.c.share_dropped += 1
            return False
        return True

    def _append(self, list_id: int, data: int, out: list[bytes]) -> None:
        c = self.c
        lst = self._lists.get(list_id)
        if lst is None:
            c.unknown_list += 1
            return
        if self.config.window and len(lst.buf) + 1 == lst.batch and not self.requester.room(lst.qp, 1):
            c.window_dropped += 1  # the entry that would need the WRITE; dropped before the head: no hole
            return
        c.append += 1
        lst.buf.append(data)
        if lst.oldest_ns is None:
            lst.oldest_ns = self._now
        if len(lst.buf) == lst.batch:
            self._append_write(lst, out)
            c.append_batches += 1
            lst.head = (lst.head + lst.batch) % lst.entries
            lst.buf = []
            lst.written = 0
            lst.oldest_ns = None

    def _append_write(self, lst: _AppendList, out: list[bytes]) -> None:
        """WRITE the entries of the current batch not written yet, where they belong."""
        todo = lst.buf[lst.written:]
        if not todo:
            return
        qp = lst.qp
        va = qp.base_va + (lst.head + lst.written) * 4
        self.requester.write(qp, va, b"".join(x.to_bytes(4, "big") for x in todo), out)
        lst.written = len(lst.buf)

    def _flush_due(self, out: list[bytes]) -> None:
        if self._grace:
            return
        self._postcard_flush_due(out)
        timeout = self.config.append_flush_ns
        if timeout is None:
            return
        for lst in self._lists.values():
            if lst.oldest_ns is not None and lst.oldest_ns + timeout <= self._now:
                if self.config.window and not self.requester.room(lst.qp, 1):
                    continue  # again when the window opens (an ACK, or its time-out: next_deadline)
                self._append_write(lst, out)
                lst.oldest_ns = None
                self.c.append_flushes += 1

    # ------------------------------------------------------------------ Postcarding
    def _postcard(self, key: int, hop: int, data: int, out: list[bytes]) -> None:
        """One hop's postcard into its flow's cache line (module docstring, "Postcarding")."""
        c = self.c
        pc = self._postcards
        if pc is None:
            c.no_store += 1
            return
        lay = pc.layout
        if not 1 <= hop <= lay.hops:
            c.postcard_bad_hop += 1
            return
        c.postcards += 1
        line = slot_index(key, 1, self.config.postcard_cache)  # copy 1: apart from the memory slot's hash
        flow = pc.lines.get(line)
        if flow is None or flow.key != key:
            if flow is not None:
                self._postcard_evict(pc, line, flow, out)
            flow = pc.lines[line] = _Flow(key)
        if hop in flow.fresh:
            c.postcard_replaced += 1  # the same hop again before a WRITE: its newest value is kept
        flow.hops[hop] = data
        flow.fresh.add(hop)
        if flow.oldest_ns is None:
            flow.oldest_ns = self._now
            pc.pending[line] = None
        if len(flow.fresh) == lay.hops and (not self.config.window or self.requester.room(pc.qp, 1)):
            c.postcard_complete += 1  # a whole path since the last WRITE (else the flush, when the window opens)
            self._postcard_write(pc, line, flow, out)

    def _postcard_write(self, pc: _Postcards, line: int, flow: _Flow, out: list[bytes]) -> None:
        """The flow's whole slot in one WRITE: checksum, present hops, every hop's latest value."""
        qp = pc.qp
        self.requester.write(qp, qp.base_va + pc.layout.slot_offset(flow.key),
                             pc.layout.encode(flow.key, flow.hops), out)
        self.c.postcard_writes += 1
        flow.fresh.clear()
        flow.oldest_ns = None
        pc.pending.pop(line, None)

    def _postcard_evict(self, pc: _Postcards, line: int, flow: _Flow, out: list[bytes]) -> None:
        """Another flow takes the line: what this one has not written goes first (if it fits the
        window; else it is lost, counted in ``window_dropped``)."""
        self.c.postcard_evictions += 1
        if flow.oldest_ns is None:
            return
        if self.config.window and not self.requester.room(pc.qp, 1):
            self.c.window_dropped += 1
            self.c.postcard_evicted_unwritten += 1
            pc.pending.pop(line, None)
            return
        self._postcard_write(pc, line, flow, out)

    def _postcard_flush_due(self, out: list[bytes]) -> None:
        timeout = self.config.postcard_flush_ns
        pc = self._postcards
        if timeout is None or pc is None:
            return
        rq = self.requester
        for line in list(pc.pending):
            flow = pc.lines[line]
            if flow.oldest_ns is None or flow.oldest_ns + timeout > self._now:
                break  # pending is in arrival order: the rest are younger
            if self.config.window and not rq.room(pc.qp, 1):
                break  # again when the window opens (an ACK, or its time-out: next_deadline)
            self.c.postcard_flushes += 1
            self._postcard_write(pc, line, flow, out)

    def _postcard_deadline(self) -> int | None:
        timeout = self.config.postcard_flush_ns
        pc = self._postcards
        if timeout is None or pc is None or not pc.pending:
            return None
        oldest = pc.lines[next(iter(pc.pending))].oldest_ns
        if oldest is None:
            return None
        t = oldest + timeout
        if self.requester.window_full(pc.qp):
            t = max(t, self.requester.timeout_at(pc.qp))
        return t

    # ------------------------------------------------------------------ Sketch-Merge
    def _sketch(self, udp: UdpFrame, rep: SketchMerge, out: list[bytes]) -> None:
        c = self.c
        sk = self._sketches.get(rep.sketch_id)
        if sk is None:
            c.unknown_sketch += 1
            return
        rid = rep.reporter_id
        if rid not in sk.reporters:
            c.sketch_unknown_reporter += 1
            return
        if rep.rows != sk.rows or rep.merge != sk.merge:
            c.sketch_bad_shape += 1
            return
        col = rep.column
        exp = sk.expected.get(rid)
        if exp is None:
            exp = col - col % sk.columns  # a reporter's first column must start an epoch
        if col != exp:
            if W32.diff(col, exp) > 0:  # ahead (serial, 32 bits; 2**31 ahead is behind): a gap, ask for exp
                last = sk.last_nack.get(rid)
                if last is not None and last[0] == exp and self._now - last[1] < self.config.sketch_nack_holdoff_ns:
                    c.sketch_nacks_held += 1
                    return
                sk.last_nack[rid] = (exp, self._now)
                c.sketch_nacks += 1
                self._nack(udp, DTANack.for_sketch((exp - 1) & 0xFF, rid, sk.sketch_id, exp))
            else:
                c.sketch_duplicates += 1
            return
        c.sketch += 1
        sk.expected[rid] = (col + 1) & COLUMN_MASK
        sk.last_nack.pop(rid, None)
        agg = sk.agg.get(col)
        if agg is None:
            sk.agg[col] = list(rep.counters)
            sk.contributors[col] = {rid}
            if len(sk.agg) > MAX_OPEN_COLUMNS_FACTOR * sk.columns:
                self._abandon_oldest(sk, col)
        else:
            if sk.merge == MergeFunction.SUM:
                sk.agg[col] = [min(a + b, U32_MAX) for a, b in zip(agg, rep.counters, strict=True)]
            else:
                sk.agg[col] = [max(a, b) for a, b in zip(agg, rep.counters, strict=True)]
            sk.contributors[col].add(rid)
        if len(sk.contributors[col]) == len(sk.reporters):
            self._column_complete(sk, col, out)
        if self._grace:
            self._grace_tick(out)

    def _abandon_oldest(self, sk: _Sketch, newest: int) -> None:
        """Give up the oldest incomplete column (and the group it would have completed)."""
        oldest = max(sk.agg, key=lambda g: (newest - g) & COLUMN_MASK)
        del sk.agg[oldest]
        del sk.contributors[oldest]
        start = oldest - (oldest % sk.columns) % sk.batch_columns
        sk.ready.pop(start, None)
        self.c.sketch_columns_abandoned += 1

    def _column_complete(self, sk: _Sketch, col: int, out: list[bytes]) -> None:
        self.c.sketch_columns_completed += 1
        counters = sk.agg.pop(col)
        del sk.contributors[col]
        epoch_col = col % sk.columns
        start = col - epoch_col % sk.batch_columns  # global column where this column's group starts
        group_len = min(sk.batch_columns, sk.columns - (start % sk.columns))
        ready = sk.ready.setdefault(start, {})
        ready[col] = counters
        if len(ready) < group_len:
            if len(sk.ready) > MAX_OPEN_COLUMNS_FACTOR * sk.columns:  # groups a silent reporter left open
                del sk.ready[max(sk.ready, key=lambda g: (start - g) & COLUMN_MASK)]
            return
        del sk.ready[start]
        payload = b"".join(v.to_bytes(4, "big") for g in range(start, start + group_len) for v in ready[g])
        slot = (start // sk.columns) % sk.epochs
        qp = sk.qp
        va = qp.base_va + (slot * sk.columns + start % sk.columns) * sk.rows * 4
        self.c.sketch_writes += 1
        if self._grace:
            self._held.append((qp, va, payload))
        elif self.config.window and (self._held or not self.requester.room(qp, 1)):
            self._hold(qp, va, payload)
        else:
            self.requester.write(qp, va, payload, out)

    # ------------------------------------------------------------------ responses and resync
    def on_roce_response(self, frame: bytes | bytearray | memoryview, now_ns: int) -> list[bytes]:
        """Handle an ACK / ATOMIC ACK / NAK from the collector (§5.3): the requester judges it
        (:meth:`.RoceRequester.on_response`: only a response from our collector, for us, on one
        of our QPs and inside the QP's sequence window is acted on; anything else is a counted
        drop that never moves a PSN nor starts a grace period) and a PSN-sequence NAK it believed
        starts the grace period here. Returns frames only when the clock ending a time-based
        grace period, or a window the response opened, releases held writes."""
        out: list[bytes] = []
        self._clock(now_ns)
        c = self.c
        c.responses += 1
        try:
            self._check_grace_end(out)
            if self.requester.on_response(frame):
                self._start_grace()
            if self.config.window and (self._held or self._flush_pending()):
                self._release(out)  # the window may have opened
        except HeaderError:
            c.response_malformed += 1
        except Exception:  # a bug must not kill the data path (docs/testbed.md); tests assert this stays 0
            c.internal_errors += 1
        return out

    # ------------------------------------------------------------------ output window
    def _hold(self, qp: TxQp, va: int, payload: bytes) -> None:
        """Keep a sketch WRITE until its QP's window has room (bounded: the oldest goes first)."""
        self.c.window_held += 1
        self._held.append((qp, va, payload))
        if len(self._held) > MAX_HELD:
            del self._held[0]
            self.c.window_dropped += 1

    def _release(self, out: list[bytes]) -> None:
        """Held sketch WRITEs, in order, as far as the windows allow; then due Append flushes."""
        if self._grace:
            return
        held = self._held
        sent = 0
        rq = self.requester
        for qp, va, payload in held:
            if self.config.window and not rq.room(qp, 1):
                break
            rq.write(qp, va, payload, out)
            sent += 1
        if sent:
            del held[:sent]
        self._flush_due(out)

    def _start_grace(self) -> None:
        cfg = self.config
        if cfg.grace_reports:
            self._grace_left = cfg.grace_reports
        elif cfg.grace_ns:
            self._grace_until = self._now + cfg.grace_ns
        else:
            return
        if not self._grace:
            self.c.grace_periods += 1
        self._grace = True

    def _grace_tick(self, out: list[bytes]) -> None:
        if self._grace_left > 0:
            self._grace_left -= 1
            if self._grace_left == 0:
                self._check_grace_end(out)

    def _check_grace_end(self, out: list[bytes]) -> None:
        if not self._grace or self._grace_left > 0:
            return
        if self._grace_until is not None:
            if self._now < self._grace_until:
                return
            self._grace_until = None
        self._grace = False
        self._release(out)

    @property
    def in_grace(self) -> bool:
        return self._grace

    # ------------------------------------------------------------------ timers
    def next_deadline(self) -> int | None:
        """When :meth:`on_timer` has work (an idle Append batch to flush, held writes to release
        at the end of a time-based grace period), or None."""
        if self._grace:
            # a count-based grace period ends with a report, never with time
            if self._grace_until is not None and (self._held or self._flush_pending()):
                return self._grace_until
            return None
        best: int | None = None
        rq = self.requester
        if self._held:  # sketch WRITEs waiting for a full window: its time-out re-opens it
            qp = self._held[0][0]
            best = rq.timeout_at(qp) if rq.window_full(qp) else self._now
        pt = self._postcard_deadline()
        if pt is not None and (best is None or pt < best):
            best = pt
        timeout = self.config.append_flush_ns
        if timeout is None:
            return best
        for lst in self._lists.values():
            if lst.oldest_ns is not None:
                t = lst.oldest_ns + timeout
                if rq.window_full(lst.qp):  # the flush waits for the window (an ACK, or its time-out)
                    t = max(t, rq.timeout_at(lst.qp))
                if best is None or t < best:
                    best = t
        return best

    def _flush_pending(self) -> bool:
        if self._postcards is not None and self._postcards.pending and self.config.postcard_flush_ns is not None:
            return True
        return self.config.append_flush_ns is not None and any(x.oldest_ns is not None for x in self._lists.values())

    def on_timer(self, now_ns: int) -> list[bytes]:
        """Flush idle Append batches and end a time-based grace period; returns RoCEv2 frames."""
        out: list[bytes] = []
        self._clock(now_ns)
        try:
            self._check_grace_end(out)
            self._release(out)
        except Exception:
            self.c.internal_errors += 1
        return out

    def _clock(self, now_ns: int) -> None:
        if now_ns > self._now:
            self._now = self.requester.now = int(now_ns)  # one clock for both halves

    # ------------------------------------------------------------------ state
    def counters(self) -> dict[str, Any]:
        """JSON-able counters and state: per QP (PSN, frames, resyncs), lists (head, buffered)."""
        out: dict[str, Any] = asdict(self.c)
        if self.auth is not None:
            st = self.auth.status()
            out["auth_ok"] = st.pop("ok")
            out["auth_refused"] = st.pop("refused")
            out["auth"] = st
        out["in_grace"] = self._grace
        out["grace_reports_left"] = self._grace_left
        # the scheduling slack, and the window time-out it makes (None: no window, no time-out)
        out["timer_slack_ns"] = self.requester.timer_slack_ns
        out["window_timeout_ns"] = self.requester.window_timeout_ns() if self.config.window else None
        out["qps"] = self.requester.qp_status()
        if self._fair is not None:
            out["fair_share"] = self._fair.status()
        out["lists"] = {str(x.list_id): {"head": x.head, "buffered": len(x.buf), "written": x.written}
                        for x in self._lists.values()}
        if self._postcards is not None:
            out["postcard"] = {"cached_flows": len(self._postcards.lines), "pending": len(self._postcards.pending),
                               "hops": self._postcards.layout.hops}
        out["sketches"] = {str(s.sketch_id): {"open_columns": len(s.agg),
                                              "expected": {str(r): c for r, c in s.expected.items()}}
                           for s in self._sketches.values()}
        return out

    def append_head(self, list_id: int) -> int:
        """Ring slot where list ``list_id``'s current batch starts (the head pointer, §7.2.3)."""
        return self._lists[list_id].head


if TYPE_CHECKING:  # mypy checks that the engines keep the contract of netstack.engine
    _dtatranslator: type[Engine] = DTATranslator
