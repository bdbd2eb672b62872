"""The reporter side of DTA ("Direct Telemetry Access", §6, §7.1): building reports, and
streaming sketches.

:class:`Reporter` numbers and encodes reports for each primitive. Its methods return the
**UDP payload** (what a host tool sends with a UDP socket to the collector's IP, port
40040); :meth:`Reporter.frame` wraps a payload into a whole Ethernet/IPv4/UDP frame for
code that speaks frames (a switch, the tests). Reports sent with ``retransmittable`` are
kept (the last :data:`HISTORY` of them) so that :meth:`Reporter.on_nack` can resend what
the translator's NACK says is missing.

:class:`SketchReporter` streams one sketch per epoch column by column, sequentially
(§6.3: unlike LightGuardian, the columns go in order so the translator can detect a gap),
restarts from the column a NACK asks for, and probes the tail: after its last column it
resends that column a few times at an interval, because a lost *last* column leaves no
later column to reveal the gap. Column numbers run on across epochs (column ``g`` is
column ``g % C`` of epoch ``g // C``, see :mod:`netstack.dta.translator`). Sans-IO: it
returns payloads and deadlines, the caller sends and sleeps.

With a :class:`~netstack.auth.frame.Sealer` (``Reporter(..., sealer=...)``) every payload a
:class:`Reporter` returns, resends included, ends in the authentication trailer
(:mod:`.reportauth`); the module-level ``*_payload`` functions never seal.

Both keep the :mod:`netstack.engine` contract: what they send is their return values, so
their ``actions`` queues stay empty; ``counters()`` reports their progress.

:class:`CountMinSketch` is a small Count-Min sketch using the shared column hash
(:func:`netstack.dta.keywrite.sketch_index`), so its columns can be merged by the
translator and point-queried at the collector (:meth:`CollectorQuery.sketch_point`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from headers.dta import (
    Append,
    DTABase,
    DTANack,
    KeyIncrement,
    KeyWrite,
    MergeFunction,
    Postcarder,
    Primitive,
    SketchMerge,
    encode_report,
    parse_nack_frame,
)
from headers.errors import HeaderError
from headers.inet import build_udp_frame
from headers.registry import UdpPort
from headers.serial import W8

from ..auth.frame import Sealer
from ..engine import ActionQueue, Engine
from .keywrite import sketch_index

#: Retransmittable reports kept for NACK-driven resends (less than half the 8-bit seqnum space,
#: so "after seqnum s" is unambiguous).
HISTORY = 127
U32_MAX = 0xFFFFFFFF


def key_write_payload(key: int, data: int | Sequence[int], redundancy: int = 2, seqnum: int = 0,
                      retransmittable: bool = False, immediate: bool = False) -> bytes:
    """A Key-Write report (``data``: one 32-bit word or a sequence of them)."""
    words = (data,) if isinstance(data, int) else tuple(data)
    return _payload(KeyWrite(redundancy, key, words), seqnum, retransmittable, immediate)


def append_payload(list_id: int, data: int, seqnum: int = 0, retransmittable: bool = False,
                   immediate: bool = False) -> bytes:
    return _payload(Append(list_id, data), seqnum, retransmittable, immediate)


def key_increment_payload(key: int, counter: int, redundancy: int = 2, seqnum: int = 0,
                          retransmittable: bool = False, immediate: bool = False) -> bytes:
    return _payload(KeyIncrement(redundancy, key, counter), seqnum, retransmittable, immediate)


def postcard_payload(key: int, hop: int, data: int, seqnum: int = 0, retransmittable: bool = False,
                     immediate: bool = False) -> bytes:
    """A Postcarder report (0x04): hop ``hop``'s 32-bit ``data`` for flow ``key`` (:mod:`.postcard`)."""
    return _payload(Postcarder(key, hop, data), seqnum, retransmittable, immediate)


def sketch_merge_payload(reporter_id: int, sketch_id: int, column: int, counters: Sequence[int],
                         merge: int = MergeFunction.SUM, seqnum: int = 0) -> bytes:
    return _payload(SketchMerge.for_column(reporter_id, sketch_id, column, tuple(counters), merge), seqnum)


def _payload(prim: Primitive, seqnum: int = 0, retransmittable: bool = False, immediate: bool = False) -> bytes:
    return encode_report(DTABase.of(prim, seqnum & 0xFF, int(immediate), int(retransmittable)), prim)


@dataclass(slots=True)
class ReporterCounters:
    """What a reporter counts (``Reporter.c``)."""

    sent: int = 0  # reports numbered and returned
    resent: int = 0  # reports returned again for a NACK


class Reporter:
    """Numbers and encodes reports from one reporter.

    The addresses are only needed for :meth:`frame` (and to build frames in
    :meth:`on_nack` when ``frames=True`` was asked). Every report takes the next 8-bit
    sequence number; with ``retransmittable`` the base header asks the translator to track
    it (public NACK tracking) and the report is kept for :meth:`on_nack`."""

    def __init__(self, src_mac: bytes = b"\x02\0\0\0\0\x01", dst_mac: bytes = b"\x02\0\0\0\0\x02",
                 src_ip: bytes = b"\x0a\0\0\x01", dst_ip: bytes = b"\x0a\0\0\x02", *,
                 sport: int = UdpPort.DTA_SOURCE, retransmittable: bool = False,
                 sealer: Sealer | None = None) -> None:
        self.src_mac, self.dst_mac, self.src_ip, self.dst_ip = src_mac, dst_mac, src_ip, dst_ip
        self.sport = sport
        self.retransmittable = retransmittable
        #: seals every payload returned (authenticated reports, :mod:`.reportauth`); None: plain
        self.sealer = sealer
        self.seqnum = 0  # the next report's number
        self.c = ReporterCounters()
        self.actions = ActionQueue()  # reports are return values: this stays empty
        self._history: OrderedDict[int, bytes] = OrderedDict()

    # ------------------------------------------------------------------ payloads
    def seal(self, payload: bytes) -> bytes:
        """``payload`` with its trailer (a fresh sequence number each call), or as it is
        without a sealer. A caller that resends a report seals it again: the translator refuses
        the same sealed bytes twice (``replayed``)."""
        return payload if self.sealer is None else self.sealer.seal(payload)

    def _next(self, prim: Primitive) -> bytes:
        seq = self.seqnum
        self.seqnum = (seq + 1) & 0xFF
        payload = _payload(prim, seq, self.retransmittable)
        self.c.sent += 1
        if self.retransmittable:
            hist = self._history
            hist.pop(seq, None)
            hist[seq] = payload  # unsealed: a resend gets a new trailer
            if len(hist) > HISTORY:
                hist.popitem(last=False)
        return self.seal(payload)

    def key_write(self, key: int, data: int | Sequence[int], redundancy: int = 2) -> bytes:
        words = (data,) if isinstance(data, int) else tuple(data)
        return self._next(KeyWrite(redundancy, key, words))

    def append(self, list_id: int, data: int) -> bytes:
        return self._next(Append(list_id, data))

    def key_increment(self, key: int, counter: int, redundancy: int = 2) -> bytes:
        return self._next(KeyIncrement(redundancy, key, counter))

    def postcard(self, key: int, hop: int, data: int) -> bytes:
        """One hop's postcard for flow ``key`` (what each switch on the flow's path sends)."""
        return self._next(Postcarder(key, hop, data))

    def sketch_merge(self, reporter_id: int, sketch_id: int, column: int, counters: Sequence[int],
                     merge: int = MergeFunction.SUM) -> bytes:
        """One Sketch-Merge column (its order is tracked by column number, not by seqnum)."""
        prim = SketchMerge.for_column(reporter_id, sketch_id, column & U32_MAX, tuple(counters), merge)
        seq = self.seqnum
        self.seqnum = (seq + 1) & 0xFF
        self.c.sent += 1
        return self.seal(_payload(prim, seq))

    def frame(self, payload: bytes) -> bytes:
        """Ethernet/IPv4/UDP(dport 40040) around a report payload."""
        return build_udp_frame(self.src_mac, self.dst_mac, self.src_ip, self.dst_ip, self.sport, UdpPort.DTA, payload)

    # ------------------------------------------------------------------ NACKs
    def on_nack(self, nack: DTANack | bytes) -> list[bytes]:
        """Payloads to resend after a (non-sketch) NACK: every kept report numbered after the
        NACK's ``seqnum`` (the last one the translator accepted in order), oldest first.
        ``nack`` may be a :class:`DTANack`, a NACK frame or a NACK UDP payload. Malformed
        input and sketch NACKs give []."""
        parsed = _as_nack(nack)
        if parsed is None or parsed.sketch or not parsed.nack:
            return []
        out = []
        for seq, payload in self._history.items():
            if W8.diff(seq, parsed.seqnum) > 0:  # after it (serial, 8 bits; half-way is before)
                out.append(self.seal(payload))
        self.c.resent += len(out)
        return out

    def next_deadline(self) -> int | None:
        """Always None: a reporter resends only when a NACK asks (no timer)."""
        return None

    def counters(self) -> dict[str, Any]:
        out: dict[str, Any] = {**asdict(self.c), "seqnum": self.seqnum,
                               "kept": len(self._history)}
        if self.sealer is not None:
            out["sealed"] = self.sealer.c.sealed
        return out


def _as_nack(nack: DTANack | bytes | bytearray | memoryview) -> DTANack | None:
    if isinstance(nack, DTANack):
        return nack
    try:
        data = bytes(nack)
        if len(data) >= 42 and data[12:14] == b"\x08\x00":
            return parse_nack_frame(data)[1]
        return DTANack.from_bytes(data)
    except HeaderError:
        return None


@dataclass(slots=True)
class SketchReporterCounters:
    """What a sketch reporter counts (``SketchReporter.c``)."""

    columns_sent: int = 0  # columns returned, probes and rewound ones included
    rewinds: int = 0  # NACKs that sent the stream back to an earlier column


class SketchReporter:
    """Streams a ``rows`` x ``columns`` sketch to a translator, one column per report (§6.3).

    ``start_epoch(matrix, now)`` loads the next epoch's sketch (a sequence of ``rows`` rows
    of ``columns`` counters); ``poll(now, budget)`` returns the next payloads to send (at
    most ``budget``, default all remaining); ``on_nack(nack, now)`` rewinds to the NACK's
    expected column (NACKs for another reporter/sketch, or for a column outside the
    current epoch's range, are ignored); ``next_deadline()`` / ``on_timer(now)`` drive the
    tail probes. ``done`` is True once the epoch has been sent and the probes used up."""

    def __init__(self, reporter: Reporter, reporter_id: int, sketch_id: int, rows: int, columns: int,
                 merge: int = MergeFunction.SUM, *, probe_interval_ns: int = 2_000_000, probes: int = 3) -> None:
        if rows < 1 or columns < 1:
            raise ValueError("rows and columns must be >= 1")
        self.reporter = reporter
        self.reporter_id = reporter_id
        self.sketch_id = sketch_id
        self.rows = rows
        self.columns = columns
        self.merge = merge
        self.probe_interval_ns = probe_interval_ns
        self.probes = probes
        self.epoch = -1
        self._matrix: list[list[int]] = []
        self._next = 0  # next global column to send
        self._end = 0  # one past the epoch's last global column
        self._probes_left = 0
        self._probe_at: int | None = None
        self.c = SketchReporterCounters()
        self.actions = ActionQueue()  # columns are return values: this stays empty

    @property
    def done(self) -> bool:
        return self._next >= self._end and self._probes_left == 0

    def start_epoch(self, matrix: Sequence[Sequence[int]], now_ns: int = 0) -> None:
        if len(matrix) != self.rows or any(len(r) != self.columns for r in matrix):
            raise ValueError(f"the sketch must be {self.rows} rows of {self.columns} counters")
        self._matrix = [[min(max(int(v), 0), U32_MAX) for v in row] for row in matrix]
        self.epoch += 1
        self._next = self.epoch * self.columns
        self._end = self._next + self.columns
        self._probes_left = 0
        self._probe_at = None

    def _column(self, g: int) -> bytes:
        c = g % self.columns
        self.c.columns_sent += 1
        return self.reporter.sketch_merge(self.reporter_id, self.sketch_id, g,
                                          [self._matrix[r][c] for r in range(self.rows)], self.merge)

    def poll(self, now_ns: int, budget: int | None = None) -> list[bytes]:
        out: list[bytes] = []
        while self._next < self._end and (budget is None or len(out) < budget):
            out.append(self._column(self._next))
            self._next += 1
            if self._next == self._end:
                self._probes_left = self.probes
                self._probe_at = now_ns + self.probe_interval_ns if self.probes else None
        return out

    def on_nack(self, nack: DTANack | bytes, now_ns: int = 0) -> None:
        parsed = _as_nack(nack)
        if (parsed is None or not parsed.sketch or parsed.reporter_id != self.reporter_id
                or parsed.sketch_id != self.sketch_id):
            return
        col = parsed.expected_column
        start = self.epoch * self.columns
        if col is None or not start <= col < self._end or col >= self._next:
            return  # not a column of this epoch we have already sent
        self._next = col
        self.c.rewinds += 1
        self._probes_left = 0
        self._probe_at = None

    def next_deadline(self) -> int | None:
        return self._probe_at if self._next >= self._end and self._probes_left else None

    def on_timer(self, now_ns: int) -> list[bytes]:
        if self._probe_at is None or now_ns < self._probe_at or self._next < self._end or not self._probes_left:
            return []
        self._probes_left -= 1
        self._probe_at = now_ns + self.probe_interval_ns if self._probes_left else None
        return [self._column(self._end - 1)]

    def counters(self) -> dict[str, Any]:
        return {"epoch": self.epoch, **asdict(self.c), "done": self.done}


class CountMinSketch:
    """A ``rows`` x ``columns`` Count-Min sketch of 32-bit counters (saturating), hashed with
    :func:`netstack.dta.keywrite.sketch_index` so the collector can point-query the merge."""

    def __init__(self, rows: int, columns: int) -> None:
        if rows < 1 or columns < 1:
            raise ValueError("rows and columns must be >= 1")
        self.rows = rows
        self.columns = columns
        self.matrix = [[0] * columns for _ in range(rows)]

    def add(self, key: int, count: int = 1) -> None:
        for r in range(self.rows):
            c = sketch_index(key, r, self.columns)
            self.matrix[r][c] = min(self.matrix[r][c] + count, U32_MAX)

    def estimate(self, key: int) -> int:
        return min(self.matrix[r][sketch_index(key, r, self.columns)] for r in range(self.rows))


if TYPE_CHECKING:  # mypy checks that the engines keep the contract of netstack.engine
    _reporter: type[Engine] = Reporter
    _sketchreporter: type[Engine] = SketchReporter
