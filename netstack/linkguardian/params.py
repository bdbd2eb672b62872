"""LinkGuardian parameters: Eq. 2 (number of retransmitted copies) and the per-link settings.

LinkGuardian §3.4 derives how many copies ``N`` of a lost frame the sender retransmits so
that the *effective* loss rate ``actual^(N+1)`` meets an operator's target (Eq. 1); Eq. 2
solves it: ``N = ceil(log(target) / log(actual)) - 1``. §4 "Parameters" gives the three
knobs of the receiver (``ackNoTimeout``, ``pauseThreshold``, ``resumeThreshold``); the
public implementation (NUS-SNL/linkguardian, docs/papers.md) adds the dummy budget (3), the number of
times each leading-ACK value is sent (2) and a fixed copy count (2) in its artifact.

Time and scale (docs/architecture.md "Time and scale"): paper rates (10-100 Gb/s, microsecond timers) do not fit a
Python process. An emulation runs the link ``scale`` times slower and stretches every
*time* by the same factor so that every *byte* quantity (thresholds, buffers, BDP) stays
as in the paper. :meth:`LGParams.scaled` does the time half; the switch port's
``rate_bps`` is the rate half. Example: the paper's 100G link at scale 1000 is a 100 Mb/s
port with ``ackNoTimeout`` 7 us x 1000 = 7 ms (above the live runtime's 1 ms timer
granularity), and the 40 KB pause threshold is still 40 KB.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ..errors import ConfigError
from ..ethernet import NUM_CLASSES

#: The paper's target effective loss rate (§4: "We set LinkGuardian's target loss rate to 10^-8").
DEFAULT_TARGET_LOSS = 1e-8
#: Copies retransmitted when neither ``copies`` nor a measured ``actual_loss`` is known:
#: the public artifact's fixed choice (docs/linkguardian.md "Eq. 2: how many copies").
ARTIFACT_COPIES = 2
#: Upper bound on ``copies``: 16 copies already reach 10^-8 at a 33 % loss rate.
MAX_COPIES = 16
#: The hysteresis unit of §3.3 (DCQCN's recommendation: leave 2 MTU between pause and resume).
DEFAULT_MTU = 1500
#: Normal data: every class but the highest, which carries retransmissions and loss
#: notifications (§3, Fig. 5: strict priority retx/LN > normal > dummies/ACK couriers).
DEFAULT_DATA_CLASSES = tuple(range(NUM_CLASSES - 1))
DEFAULT_RETX_CLASS = NUM_CLASSES - 1

#: Per link speed (Gb/s): ackNoTimeout (ns), pauseThreshold and resumeThreshold (bytes).
#: Timeouts from LinkGuardian §4 "Parameters" and the public artifact (100G 7 us, 25G 7.5 us, 10G 13.5 us); thresholds
#: from the public artifact in 80-byte cells (500/460, 537/497, 662/622), which is the
#: paper's "resume 37 KB (100G) / 40 KB (25G), pause = resume + 2 MTU" to within a cell.
PAPER_SETTINGS: dict[int, tuple[int, int, int]] = {
    100: (7_000, 500 * 80, 460 * 80),
    25: (7_500, 537 * 80, 497 * 80),
    10: (13_500, 662 * 80, 622 * 80),
}

MODES = ("blocking", "nb")
#: where a newly held frame joins the recirculating reordering buffer (LGParams.recirc_order)
RECIRC_ORDERS = ("seq", "fifo")


def copies_for(target_loss: float, actual_loss: float) -> int:
    """Eq. 2 (§3.4): copies ``N`` to retransmit so that ``actual^(N+1) <= target``.

    ``N = ceil(log(target) / log(actual)) - 1``, at least 1 (a detected loss is always
    retransmitted once). §4.1: target 1e-8 gives N = 1 at 1e-5 and 1e-4, N = 2 at 1e-3.

    Raises :class:`ValueError` when ``target_loss`` is not in (0, 1), or ``actual_loss``
    is 0 (nothing to protect against: choose ``copies`` explicitly) or 1 or more (no number
    of copies gets through a link that loses everything), or either is not a number.
    """
    for name, value in (("target_loss", target_loss), ("actual_loss", actual_loss)):
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ValueError(f"{name} must be a number, got {value!r}")
    if not 0.0 < target_loss < 1.0:
        raise ValueError(f"target_loss must be in (0, 1), got {target_loss!r}")
    if actual_loss <= 0.0:
        raise ValueError(f"actual_loss must be > 0 for Eq. 2 (got {actual_loss!r}); "
                         "a link that loses nothing needs no copies - set copies explicitly")
    if actual_loss >= 1.0:
        raise ValueError(f"actual_loss must be < 1 (got {actual_loss!r}): no number of copies crosses "
                         "a link that loses every frame")
    ratio = math.log(target_loss) / math.log(actual_loss)
    # log(1e-8)/log(1e-4) must be exactly 2, not 2.0000000000000004: forgive float noise
    n = math.ceil(ratio - 1e-9) - 1
    return max(1, n)


def _int(value: Any, name: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"linkguardian.{name}", f"must be an integer, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        hi = f"..{maximum}" if maximum is not None else " or more"
        raise ConfigError(f"linkguardian.{name}", f"must be {minimum}{hi}, got {value}")
    return value


def _prob(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ConfigError(f"linkguardian.{name}", f"must be a number, got {value!r}")
    if not 0.0 < value < 1.0:
        raise ConfigError(f"linkguardian.{name}", f"must be in (0, 1), got {value!r}")
    return float(value)


def _classes(value: Any) -> tuple[int, ...]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise ConfigError("linkguardian.data_class", f"must be a class or a list of classes, got {value!r}")
    out = set()
    for c in value:
        if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < NUM_CLASSES:
            raise ConfigError("linkguardian.data_class", f"class {c!r} outside 0..{NUM_CLASSES - 1}")
        out.add(c)
    if not out:
        raise ConfigError("linkguardian.data_class", "needs at least one class")
    return tuple(sorted(out))


@dataclass(frozen=True)
class LGParams:
    """Settings of one protected link, shared by its sender and receiver (validated).

    - ``mode``: ``"blocking"`` (LinkGuardian, order preserved, §3.3) or ``"nb"``
      (LinkGuardianNB, out-of-order delivery). The sender stamps it in every data tag
      (``blocking`` bit) and the receiver follows the tag (§3.5: a run-time option).
    - ``target_loss`` / ``copies`` / ``actual_loss``: ``copies`` fixes N; when None, N
      comes from Eq. 2 with the measured ``actual_loss``; when that is unknown too, the
      artifact's 2 (:data:`ARTIFACT_COPIES`). See :attr:`n_copies`.
    - ``ack_no_timeout_ns``: §3.5 ackNoTimeout, the receiver gives up on an unrepaired hole.
    - ``pause_threshold_bytes`` / ``resume_threshold_bytes``: Algorithm 2 on the
      reordering buffer; resume defaults to pause - 2 MTU (§3.3). See :attr:`resume_bytes`.
    - ``max_dummies``: dummies after each burst (§3.2; 3 in the artifact).
    - ``lack_repeats``: times each new leading-ACK value is sent (§3.1; 2 in the artifact).
    - ``tx_buffer_limit_bytes`` / ``reorder_buffer_limit_bytes``: the recirculation buffers
      (§4 testbed: 200 KB each). A full Tx buffer evicts its oldest copy; a full reordering
      buffer drops the arriving frame (both counted).
    - ``backpressure``: Algorithm 2 on/off (Fig. 9b runs with it off).
    - ``recirc_rate_bps``: the recirculation port the reordering buffer is (§3.3, Fig. 6):
      held frames cycle through it and are checked against ack_no after every pass, later
      arrivals join its tail, so the buffer drains at this rate minus the arrival rate and,
      where that is not positive (the port as fast as the link, the paper's 100G case), grows
      loss after loss until backpressure pauses the sender or, without it, it overflows
      (§4.2, Fig. 9b). None (default): the protected link's own rate (the switch feature fills
      it in; an engine on its own drains at once); 0: at once, a software shortcut in which
      waiting costs nothing; else a rate in bit/s.
    - ``recirc_order``: where a frame that starts waiting joins the recirculating queue.
      ``"seq"`` (default): in sequence order among the frames already held, so the frames behind
      a repaired hole leave back to back, and the buffer "drains at 100G" as §4 "Parameters"
      assumes when it derives resumeThreshold from the port's drain rate. ``"fifo"``: at the
      queue's tail, wherever the rotation stands; at a steady rate below the port's, each newcomer
      lands at an arbitrary place in the rotation, the held frames end up scrambled and a pass
      releases only about one in-order run, so a backlog (one ackNoTimeout's worth) stays until
      traffic pauses (docs/linkguardian.md "The recirculation queue's order").
    - ``data_class``: the protected, pausable normal classes (an int or a list).
    - ``retx_class``: the highest-priority class for retransmissions and loss notifications.
    - ``mtu_bytes``: the hysteresis unit of §3.3.
    - ``time_scale``: the factor :meth:`scaled` applied (1 = paper time); reported so that
      every result says how it was scaled (docs/architecture.md "Time and scale").
    """

    mode: str = "blocking"
    target_loss: float = DEFAULT_TARGET_LOSS
    copies: int | None = None
    actual_loss: float | None = None
    ack_no_timeout_ns: int = PAPER_SETTINGS[100][0]
    pause_threshold_bytes: int = PAPER_SETTINGS[100][1]
    resume_threshold_bytes: int | None = None
    max_dummies: int = 3
    lack_repeats: int = 2
    tx_buffer_limit_bytes: int = 200_000
    reorder_buffer_limit_bytes: int = 200_000
    backpressure: bool = True
    recirc_rate_bps: int | None = None
    recirc_order: str = "seq"
    data_class: int | tuple[int, ...] = DEFAULT_DATA_CLASSES
    retx_class: int = DEFAULT_RETX_CLASS
    mtu_bytes: int = DEFAULT_MTU
    time_scale: float = 1.0

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.mode not in MODES:
            raise ConfigError("linkguardian.mode", f"must be one of {', '.join(MODES)}, got {self.mode!r}")
        set_(self, "target_loss", _prob(self.target_loss, "target_loss"))
        if self.copies is not None:
            set_(self, "copies", _int(self.copies, "copies", 1, MAX_COPIES))
        if self.actual_loss is not None:
            set_(self, "actual_loss", _prob(self.actual_loss, "actual_loss"))
        set_(self, "ack_no_timeout_ns", _int(self.ack_no_timeout_ns, "ack_no_timeout_ns", 1))
        set_(self, "mtu_bytes", _int(self.mtu_bytes, "mtu_bytes", 46))
        pause = _int(self.pause_threshold_bytes, "pause_threshold_bytes", 1)
        set_(self, "pause_threshold_bytes", pause)
        if self.resume_threshold_bytes is not None:
            resume = _int(self.resume_threshold_bytes, "resume_threshold_bytes", 0)
            if resume >= pause:
                raise ConfigError("linkguardian.resume_threshold_bytes",
                                  f"must be below pause_threshold_bytes ({resume} >= {pause})")
            set_(self, "resume_threshold_bytes", resume)
        set_(self, "max_dummies", _int(self.max_dummies, "max_dummies", 0, 255))
        set_(self, "lack_repeats", _int(self.lack_repeats, "lack_repeats", 1, 255))
        set_(self, "tx_buffer_limit_bytes", _int(self.tx_buffer_limit_bytes, "tx_buffer_limit_bytes", 1))
        limit = _int(self.reorder_buffer_limit_bytes, "reorder_buffer_limit_bytes", 1)
        set_(self, "reorder_buffer_limit_bytes", limit)
        if not isinstance(self.backpressure, bool):
            raise ConfigError("linkguardian.backpressure", f"must be true or false, got {self.backpressure!r}")
        if self.backpressure and limit < pause:
            raise ConfigError("linkguardian.reorder_buffer_limit_bytes",
                              f"must be >= pause_threshold_bytes ({limit} < {pause}) when backpressure is on")
        if self.recirc_rate_bps is not None:
            set_(self, "recirc_rate_bps", _int(self.recirc_rate_bps, "recirc_rate_bps", 0))
        if self.recirc_order not in RECIRC_ORDERS:
            raise ConfigError("linkguardian.recirc_order",
                              f"must be one of {', '.join(RECIRC_ORDERS)}, got {self.recirc_order!r}")
        set_(self, "data_class", _classes(self.data_class))
        set_(self, "retx_class", _int(self.retx_class, "retx_class", 0, NUM_CLASSES - 1))
        if self.retx_class in self.data_classes:
            raise ConfigError("linkguardian.retx_class",
                              f"class {self.retx_class} is also a protected data class; it must be above them")
        if self.retx_class < max(self.data_classes):
            raise ConfigError("linkguardian.retx_class",
                              f"must be above every data class (strict priority, §3): {self.retx_class} < "
                              f"{max(self.data_classes)}")
        ts = self.time_scale
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not ts > 0 or ts != ts or ts == math.inf:
            raise ConfigError("linkguardian.time_scale", f"must be a positive number, got {ts!r}")
        set_(self, "time_scale", float(ts))

    # ------------------------------------------------------------------ derived values
    @property
    def blocking(self) -> bool:
        return self.mode == "blocking"

    @property
    def data_classes(self) -> tuple[int, ...]:
        """The protected classes as a tuple (``data_class`` normalised)."""
        dc = self.data_class
        return dc if isinstance(dc, tuple) else (dc,)

    @property
    def n_copies(self) -> int:
        """N: explicit ``copies``, else Eq. 2 from ``actual_loss``, else the artifact's 2."""
        if self.copies is not None:
            return self.copies
        if self.actual_loss is not None:
            return min(MAX_COPIES, copies_for(self.target_loss, self.actual_loss))
        return ARTIFACT_COPIES

    @property
    def resume_bytes(self) -> int:
        """resumeThreshold: explicit, else pauseThreshold - 2 MTU (§3.3), at least 0."""
        if self.resume_threshold_bytes is not None:
            return self.resume_threshold_bytes
        return max(0, self.pause_threshold_bytes - 2 * self.mtu_bytes)

    # ------------------------------------------------------------------------ builders
    @classmethod
    def paper(cls, link_gbps: int = 100, **changes: Any) -> LGParams:
        """The paper's settings for a 100, 25 or 10 Gb/s link (unscaled), plus ``changes``."""
        if link_gbps not in PAPER_SETTINGS:
            raise ConfigError("linkguardian.link_gbps",
                              f"the paper gives settings for {sorted(PAPER_SETTINGS)} Gb/s, not {link_gbps!r}")
        timeout, pause, resume = PAPER_SETTINGS[link_gbps]
        base: dict[str, Any] = {"ack_no_timeout_ns": timeout, "pause_threshold_bytes": pause,
                                "resume_threshold_bytes": resume}
        base.update(changes)
        return cls(**base)

    def scaled(self, scale: float) -> LGParams:
        """The same link ``scale`` times slower: times x ``scale``, bytes unchanged (docs/architecture.md
        "Time and scale").

        Run the switch port at ``paper_rate / scale`` alongside. Paper 100G, scale 1000:
        100 Mb/s and ackNoTimeout 7 us -> 7 ms; thresholds and buffers stay in bytes, since
        a slower link fills them with the same frames in proportionally more time.
        """
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not scale > 0 or scale == math.inf:
            raise ConfigError("linkguardian.scale", f"must be a positive number, got {scale!r}")
        return replace(self, ack_no_timeout_ns=max(1, round(self.ack_no_timeout_ns * scale)),
                       time_scale=self.time_scale * scale)

    def with_changes(self, **changes: Any) -> LGParams:
        """A validated copy with ``changes`` (unknown names are a :class:`ConfigError`)."""
        names = {f.name for f in fields(self)}
        for key in changes:
            if key not in names:
                raise ConfigError(f"linkguardian.{key}", f"unknown field (known: {', '.join(sorted(names))})")
        return replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LGParams:
        """From a parsed config / control request; lists become tuples, unknown keys are errors."""
        if not isinstance(data, Mapping):
            raise ConfigError("linkguardian", f"must be a mapping, got {type(data).__name__}")
        return cls().with_changes(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able, including the derived N and resumeThreshold actually in use."""
        out = asdict(self)
        out["data_class"] = list(self.data_classes)
        out["n_copies"] = self.n_copies
        out["resume_bytes"] = self.resume_bytes
        return out


def recirc_rate_bps(value: Any) -> int | None:
    """The recirculation port's rate as a topology file or ``netstack lg enable --recirc-rate`` gives
    it: ``"link"`` (or nothing) -> None (as fast as the protected link), ``"instant"`` -> 0 (held
    frames leave the moment they are next), else a rate (``"400Mbit"``, bits/s). ValueError if not."""
    from ..topo.model import parse_rate

    if value is None or value == "link":
        return None
    if value == "instant":
        return 0
    return parse_rate(value)


def link_params(link_rate_bps: int, mode: str = "blocking", target: float = DEFAULT_TARGET_LOSS,
                copies: int | None = None, actual: float | None = None, backpressure: bool = True,
                recirc_rate_bps: int | None = None, paper_gbps: int = 100) -> dict[str, Any]:
    """The paper's settings for a ``paper_gbps`` link (LinkGuardian §4 "Parameters") scaled to a
    link of ``link_rate_bps``: times up and rates down by the same factor, bytes unchanged
    (docs/architecture.md "Time and scale"), as a validated :class:`LGParams` dict. A link at the paper's own rate
    gets the paper's settings unscaled (``time_scale`` 1)."""
    if isinstance(link_rate_bps, bool) or not isinstance(link_rate_bps, int | float) or not link_rate_bps > 0:
        raise ConfigError("linkguardian.link_rate_bps", f"must be a positive rate, got {link_rate_bps!r}")
    base = LGParams.paper(paper_gbps).scaled(paper_gbps * 1e9 / link_rate_bps)
    known = {f.name for f in fields(LGParams)}
    d = {k: v for k, v in base.to_dict().items() if k in known}
    d.update(mode=mode, target_loss=target, copies=copies, actual_loss=actual, backpressure=backpressure,
             recirc_rate_bps=recirc_rate_bps)
    LGParams.from_dict(d)  # validate here, with a clear error, before any switch sees it
    return d


__all__ = [
    "ARTIFACT_COPIES",
    "DEFAULT_DATA_CLASSES",
    "DEFAULT_RETX_CLASS",
    "DEFAULT_TARGET_LOSS",
    "MAX_COPIES",
    "MODES",
    "RECIRC_ORDERS",
    "PAPER_SETTINGS",
    "LGParams",
    "copies_for",
    "link_params",
]
