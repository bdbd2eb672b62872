"""Dequeue-time marking policies for ``Switch.set_marking_policy``: TCD and the ECN baseline.

:class:`TcdMarker` runs a :class:`~.detector.Detector` per lossless class of the port and
writes the port's state into each ECN-capable IPv4 packet it sends, by the max-severity rule
(``headers.tcd``: undetermined raises ECT to UE, congestion raises anything ECN-capable to CE,
nothing is lowered, Not-ECT is never touched). Beside it, it counts what a classic ECN
threshold at the same K would have marked (``ecn_would_mark``), so both detectors are compared
on one run. :class:`EcnMarker` is that classic detector for real: CE at dequeue above a
threshold (the paper's CEE switches, TCD §3.1) or by DCQCN's RED-style probability.

**CE rule** (issue 30). By default a TCD marker marks CE in its congestion state (the detector's
K and queue trend). With ``ecn`` (``ce_rule = "ecn"`` in a topology's ``tcd`` options) it marks
CE exactly where the ECN baseline at this port would (:class:`EcnRule`, threshold or RED, the
same seeded coin drawn for the same packets) and changes only what an *undetermined* (paused)
port does: UE instead. A comparison of the two markers then differs in TCD's contribution alone,
not in two CE rules (docs/tcd.md "FCT on a leaf-spine fabric").

The data path is hot: no Scapy, no per-packet allocation but the rewritten frame and a marked
packet's flow key (8 bytes: counting marks per flow costs a marked packet about 250 ns, 13 %,
timeit), the ECN rewrite decided from precomputed tables. Like the switch's enqueue-time ECN, only
untagged IPv4 (EtherType 0x0800, header at offset 14) is marked; anything else passes untouched and is
counted. A marker never raises on frame content: a policy that raised would kill the daemon.

A TCD marker is also a switch feature with a timer (``next_deadline`` / ``on_timer``, the
:class:`~netstack.switch.feature.SwitchFeature` hooks): a port with nothing to send is
re-evaluated on a timer, not only at its next dequeue (issue 30; :mod:`.detector`). For that it
reads the class queue through ``queue_probe`` (``cls -> bytes queued now``), which whoever installs
it on a switch sets (``netstack.tcd.feature.install``); without a probe it has no timer and behaves
as a pure marking policy.

Both markers count their marks per flow (``flow_marks()``): a flow is an IPv4 source and
destination pair (the §3.1 scenarios' flows each have their own hosts), bounded by
:data:`FLOW_CAP` pairs (the rest counted in ``flows_dropped``). A mark is counted when the port
*decides* it (TCD: the packet left in the undetermined or congestion state; ECN: above K), even
when an earlier hop had already marked the packet as severely, so that "F1 is partly marked at
P2" can be read port by port (TCD §3.1).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from ipaddress import IPv4Address
from typing import Any

from headers.errors import HeaderError
from headers.tcd import PortState, ecn_mark_ipv4_frame_inplace, mark_ipv4_frame_inplace, mark_tos

from .detector import Detector
from .params import CE_RULES, STATE_NAMES, EcnParams, TcdParamError, TcdParams

_MIN_IPV4_FRAME = 14 + 20
NUM_CLASSES = 8
_NONCON = PortState.NON_CONGESTION
_UNDET = PortState.UNDETERMINED
_CONG = PortState.CONGESTION
#: the most (source, destination) pairs a marker counts marks for
FLOW_CAP = 4096
#: a class's queue in bytes now (the switch's, read by whoever installed the marker)
QueueProbe = Callable[[int], int]


@dataclass(slots=True)
class FlowMarksCounters:
    dropped: int = 0  # marks of pairs beyond FLOW_CAP (not counted per flow)


class FlowMarks:
    """Marks per flow (an IPv4 source and destination pair), as ``[ce, ue]`` per pair."""

    __slots__ = ("c", "pairs")

    def __init__(self) -> None:
        self.pairs: dict[bytes, list[int]] = {}
        self.c = FlowMarksCounters()

    def count(self, frame: bytes, index: int) -> None:
        """One mark (``index`` 0: CE, 1: UE) of an untagged IPv4 ``frame``."""
        key = frame[26:34]
        row = self.pairs.get(key)
        if row is None:
            if len(self.pairs) >= FLOW_CAP:
                self.c.dropped += 1
                return
            row = self.pairs[key] = [0, 0]
        row[index] += 1

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{"10.0.0.10>10.0.0.20": {"ce": n, "ue": n}, ...}``"""
        return {f"{IPv4Address(k[:4])}>{IPv4Address(k[4:])}": {"ce": ce, "ue": ue}
                for k, (ce, ue) in sorted(self.pairs.items())}


@dataclass(slots=True)
class TcdClassCounters:
    """Per class: packets by the state they left in, and what the marker did to them."""

    seen_noncon: int = 0
    seen_undet: int = 0
    seen_cong: int = 0
    #: ECN-capable packets rewritten to UE / to CE
    marked_ue: int = 0
    marked_ce: int = 0
    #: ECN-capable packets the classic ECN threshold (queue after dequeue > K) would have marked CE
    ecn_would_mark: int = 0
    not_ect: int = 0
    non_ip: int = 0
    malformed: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(slots=True)
class TcdMarkerCounters:
    """What a TCD marker counts (``TcdMarker.c``): per monitored class, and the rest."""

    unmonitored: int = 0  # packets of a class with no detector (not in ``classes``)
    classes: dict[int, TcdClassCounters] = field(default_factory=dict)


class EcnRule:
    """The classic ECN decision at dequeue, from :class:`~.params.EcnParams`: CE above ``k_bytes``
    (``threshold``), or with a probability rising from 0 at ``kmin_bytes`` to ``pmax`` at
    ``kmax_bytes`` and 1 above (``red``, DCQCN's), drawn from ``random.Random(seed)`` only for a
    queue between the two. The ECN marker's rule, and a TCD marker's CE rule under ``ecn``: the
    same parameters and seed give the same decisions for the same queue lengths."""

    __slots__ = ("_k", "_kmax", "_kmin", "_red", "_rng", "_slope", "params")

    def __init__(self, params: EcnParams) -> None:
        if not isinstance(params, EcnParams):
            raise TcdParamError("params", f"must be an EcnParams, got {type(params).__name__}")
        self.params = params
        self._red = params.mode == "red"
        self._k = params.k_bytes
        self._kmin = params.kmin_bytes
        self._kmax = params.kmax_bytes
        self._slope = params.pmax / (params.kmax_bytes - params.kmin_bytes)
        self._rng = random.Random(params.seed)

    def decide(self, qlen: int) -> bool:
        """Whether a packet leaving ``qlen`` bytes behind is marked CE."""
        if not self._red:
            return qlen > self._k
        if qlen <= self._kmin:
            return False
        if qlen > self._kmax:
            return True
        return self._rng.random() < (qlen - self._kmin) * self._slope


class TcdMarker:
    """TCD at one egress port: ``switch.set_marking_policy(port, TcdMarker(params))``.

    ``classes``: the lossless classes to detect on (others pass untouched); None: every class,
    each with its own detector created at its first event. ``queue_probe``: the class queue now
    (module docstring); with it the marker is also a switch feature with a timer
    (``switch.attach_feature(port, marker)``), which re-evaluates idle ports. ``ce_ecn``: the CE
    rule ``ecn`` (module docstring): CE where the ECN baseline with these parameters would mark,
    unless the port is undetermined (UE); None, the detector's congestion state decides.
    """

    kind = "tcd"

    def __init__(self, params: TcdParams, classes: tuple[int, ...] | None = None, now_ns: int = 0,
                 queue_probe: QueueProbe | None = None, ce_ecn: EcnParams | None = None) -> None:
        if not isinstance(params, TcdParams):
            raise TcdParamError("params", f"must be a TcdParams, got {type(params).__name__}")
        if classes is not None:
            classes = tuple(classes)
            if not classes or any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < NUM_CLASSES
                                  for c in classes) or len(set(classes)) != len(classes):
                raise TcdParamError("classes", f"must be distinct classes 0-{NUM_CLASSES - 1}, got {classes!r}")
        self.params = params
        self.classes = classes
        self.created = int(now_ns)
        self.detectors: dict[int, Detector] = {}
        self.c = TcdMarkerCounters()
        #: marks per flow (exported apart from ``c``: the status's ``flows``)
        self.flows = FlowMarks()
        self.queue_probe = queue_probe
        #: runs the port's link up to a time (set with the probe by whoever installs the marker):
        #: called before a timer re-evaluation, as the switch fires timers before its links run
        self.catch_up: Callable[[int], None] | None = None
        self._per_class: dict[int, tuple[Detector, TcdClassCounters]] = {}
        self._k = params.k_bytes
        #: the ECN rule that decides CE (``ce_rule`` "ecn"), None: the congestion state does
        self.ce_rule = "tcd" if ce_ecn is None else "ecn"
        self._ecn = None if ce_ecn is None else EcnRule(ce_ecn)
        cp = params.codepoints
        # _rows[state][ecn] -> the ECN after marking (the max-severity rule of headers.tcd)
        self._rows = tuple(tuple(mark_tos(e, s, cp) & 3 for e in range(4)) for s in PortState)
        self._ce = cp.ce
        for c in classes or ():
            self._add(c, self.created)

    def _add(self, cls: int, now_ns: int) -> tuple[Detector, TcdClassCounters]:
        det = Detector(self.params, max(now_ns, self.created))
        self.detectors[cls] = det
        self.c.classes[cls] = c = TcdClassCounters()
        self._per_class[cls] = (det, c)
        return det, c

    def _lazy(self, cls: int, now_ns: int) -> tuple[Detector, TcdClassCounters] | None:
        """A class's detector on its first event (every class when ``classes`` is None)."""
        if self.classes is None and type(cls) is int and 0 <= cls < NUM_CLASSES:
            return self._add(cls, now_ns)
        return None

    # ------------------------------------------------------------ MarkingPolicy
    def on_pause(self, cls: int, paused: bool, now_ns: int, pause_ns: int | None = None) -> None:
        entry = self._per_class.get(cls) or self._lazy(cls, now_ns)
        if entry is not None:
            probe = self.queue_probe
            # at a resume, the queue tells whether the port has anything to send (detector.py)
            entry[0].on_pause(bool(paused), now_ns, None if paused or probe is None else probe(cls), pause_ns)

    # ------------------------------------------------------- SwitchFeature timer
    def next_deadline(self) -> int | None:
        """The earliest time a detector leaves undetermined without a dequeue (None without a
        queue probe: then only dequeues move the state)."""
        if self.queue_probe is None:
            return None
        best: int | None = None
        for det in self.detectors.values():
            t = det.next_deadline()
            if t is not None and (best is None or t < best):
                best = t
        return best

    def on_timer(self, now_ns: int) -> None:
        """Re-evaluate every detector that is due with its class queue now (an idle port)."""
        probe = self.queue_probe
        if probe is None:
            return
        if self.catch_up is not None:
            # frames due before now_ns leave first (their dequeues carry earlier times): a
            # detector's events stay in time order, and the probe reads the queue of now_ns
            self.catch_up(now_ns)
        for cls, det in self.detectors.items():
            t = det.next_deadline()
            if t is not None and t <= now_ns:
                det.on_timer(probe(cls), now_ns)

    def on_dequeue(self, frame: bytes, cls: int, qlen_bytes: int, now_ns: int) -> bytes:
        entry = self._per_class.get(cls) or self._lazy(cls, now_ns)
        if entry is None:
            self.c.unmonitored += 1
            return frame
        det, c = entry
        state = det.on_dequeue(qlen_bytes, now_ns)
        if state is _NONCON:
            c.seen_noncon += 1
        elif state is _UNDET:
            c.seen_undet += 1
        else:
            c.seen_cong += 1
        # untagged IPv4 only, as the switch's own ECN at enqueue (no slicing: no allocation)
        if len(frame) < _MIN_IPV4_FRAME or frame[12] != 8 or frame[13] or frame[14] >> 4 != 4:
            c.non_ip += 1
            return frame
        ecn = frame[15] & 3
        if not ecn:
            c.not_ect += 1
            return frame
        rule = self._ecn
        if rule is not None:  # ce_rule "ecn": the baseline's coin for this packet, drawn as it would be
            ce = rule.decide(qlen_bytes)
            if ce:
                c.ecn_would_mark += 1
            if state is not _UNDET:
                state = _CONG if ce else _NONCON  # (the state this packet is marked with)
        elif qlen_bytes > self._k:
            c.ecn_would_mark += 1
        if state is not _NONCON:
            self.flows.count(frame, 1 if state is _UNDET else 0)
        new = self._rows[state][ecn]
        if new == ecn:
            return frame  # non-congestion, or already marked at least as severely
        buf = bytearray(frame)
        try:
            mark_ipv4_frame_inplace(buf, 14, state, self.params.codepoints)
        except HeaderError:
            c.malformed += 1
            return frame
        if new == self._ce:
            c.marked_ce += 1
        else:
            c.marked_ue += 1
        return bytes(buf)

    # ------------------------------------------------------------------ queries
    def state(self, cls: int) -> PortState | None:
        det = self.detectors.get(cls)
        return None if det is None else det.state

    def status(self, now_ns: int | None = None) -> dict[str, Any]:
        """JSON-able: the parameters and, per class, the state, time in each state, transitions
        and counters."""
        out: dict[str, Any] = {}
        for cls, det in sorted(self.detectors.items()):
            st = det.status(now_ns)
            st["counters"] = self.c.classes[cls].to_dict()
            out[str(cls)] = st
        rule = self._ecn
        return {"marker": self.kind, "params": self.params.to_dict(), "ce_rule": self.ce_rule,
                "ecn": None if rule is None else rule.params.to_dict(), "unmonitored": self.c.unmonitored,
                "classes": out, "flows": self.flow_marks(), "flows_dropped": self.flows.c.dropped}

    def flow_marks(self) -> dict[str, dict[str, int]]:
        """CE and UE marks this port decided, per flow (module docstring)."""
        return self.flows.to_dict()

    def timeline(self, cls: int) -> list[tuple[int, int]]:
        """``(t_ns, state)`` at creation and at each state change of class ``cls`` (the latest
        :data:`~.detector.TIMELINE_CAP`); empty for a class without a detector."""
        det = self.detectors.get(cls)
        return [] if det is None else list(det.timeline)


@dataclass(slots=True)
class EcnCounters:
    """What the ECN marker counts (``EcnMarker.c``)."""

    seen: int = 0
    marked: int = 0
    already_ce: int = 0
    not_ect: int = 0
    non_ip: int = 0
    malformed: int = 0
    pauses: int = 0
    resumes: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class EcnMarker:
    """The classic ECN detector at one egress port's dequeue (``EcnParams``: threshold or RED).
    It knows nothing of PFC: ``on_pause`` only counts."""

    kind = "ecn"

    def __init__(self, params: EcnParams) -> None:
        if not isinstance(params, EcnParams):
            raise TcdParamError("params", f"must be an EcnParams, got {type(params).__name__}")
        self.params = params
        self.c = EcnCounters()
        #: marks per flow (exported apart from ``c``: the status's ``flows``)
        self.flows = FlowMarks()
        self._decide = EcnRule(params).decide

    def on_pause(self, cls: int, paused: bool, now_ns: int, pause_ns: int | None = None) -> None:
        if paused:
            self.c.pauses += 1
        else:
            self.c.resumes += 1

    def on_dequeue(self, frame: bytes, cls: int, qlen_bytes: int, now_ns: int) -> bytes:
        c = self.c
        c.seen += 1
        if len(frame) < _MIN_IPV4_FRAME or frame[12] != 8 or frame[13] or frame[14] >> 4 != 4:
            c.non_ip += 1
            return frame
        ecn = frame[15] & 3
        if not ecn:
            c.not_ect += 1
            return frame
        if not self._decide(qlen_bytes):
            return frame
        self.flows.count(frame, 0)
        if ecn == 3:
            c.already_ce += 1
            return frame
        buf = bytearray(frame)
        try:
            ecn_mark_ipv4_frame_inplace(buf, 14)
        except HeaderError:
            c.malformed += 1
            return frame
        c.marked += 1
        return bytes(buf)

    def status(self, now_ns: int | None = None) -> dict[str, Any]:
        return {"marker": self.kind, "params": self.params.to_dict(), "counters": self.c.to_dict(),
                "flows": self.flow_marks(), "flows_dropped": self.flows.c.dropped}

    def flow_marks(self) -> dict[str, dict[str, int]]:
        """CE marks this port decided, per flow (module docstring; ``ue`` always 0)."""
        return self.flows.to_dict()


def state_name(state: PortState | int) -> str:
    return STATE_NAMES[int(state)]


def marker_from_options(options: dict[str, Any], now_ns: int = 0) -> TcdMarker | EcnMarker:
    """The marker :func:`~.params.marker_options` describes (a topology feature's checked
    options, a control request's), created at ``now_ns``."""
    if not isinstance(options, dict):
        raise TcdParamError("tcd", f"options must be a table, got {type(options).__name__}")
    kind = options.get("marker", "tcd")
    if kind == "ecn":
        return EcnMarker(EcnParams.from_dict(options.get("ecn") or {}))
    if kind != "tcd":
        raise TcdParamError("marker", f"{kind!r} is not a marker (one of tcd, ecn)")
    classes = options.get("classes")
    rule = options.get("ce_rule", "tcd")
    if rule not in CE_RULES:
        raise TcdParamError("ce_rule", f"{rule!r} is not a CE rule (one of {', '.join(CE_RULES)})")
    ce_ecn = EcnParams.from_dict(options.get("ecn") or {}) if rule == "ecn" else None
    return TcdMarker(TcdParams.from_dict(options.get("params") or {}),
                     None if classes is None else tuple(classes), now_ns, ce_ecn=ce_ecn)


__all__ = ["CE_RULES", "FLOW_CAP", "EcnCounters", "EcnMarker", "EcnRule", "FlowMarks", "QueueProbe",
           "TcdClassCounters", "TcdMarker", "TcdMarkerCounters", "marker_from_options", "state_name"]
