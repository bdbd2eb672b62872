"""TCD's detector parameters, derived from a port's link and PFC settings, and the plain-ECN
baseline's.

TCD ("Congestion Detection in Lossless Networks", SIGCOMM 2021) labels an egress port
*undetermined* while PFC switches it between ON and OFF (TCD §3.2.1), and otherwise tells
*congestion* from *non-congestion* by its queue. Three numbers drive that:

- ``T_on^max``: the longest ON period that can still occur between two PAUSEs; a port that has
  been sending for longer since its last OFF period has left the ON-OFF pattern;
- ``K``: the queue length above which a continuously-ON port is congested;
- ``W``: the window of the queue-trend sample (is the queue draining?) used on leaving
  undetermined.

The paper derives ``T_on^max`` from PFC's XOFF/XON hysteresis, the link rate and the control
loop delay; the formula here is our choice of a usable bound from the PFC loop:
the peer's ingress drains its hysteresis band (XOFF - XON) at no more than C - r_min while this
port is throttled, plus a pause's round trip. ``K`` and ``W`` defaults are our choices
(documented on :meth:`TcdParams.derive`).

Units are fixed: rates in bit/s, times in ns, sizes in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headers.tcd import DEFAULT_CODEPOINTS, PortState, TcdCodepoints

from ..errors import ConfigError

#: The default maximum transmission unit (bytes) when a caller gives none.
DEFAULT_MTU = 1500
#: r_min as a fraction of C (our choice: a drain rate within 10% of line rate still counts as
#: "throttled"); without a floor below C the T_on^max bound goes to infinity.
DEFAULT_R_MIN_FRACTION = 0.9
#: The paper's CEE baseline: "If the current egress queue length exceeds a threshold K_max
#: (i.e., 200KB), the packet is marked with ECN" (TCD §3.1).
PAPER_ECN_K_BYTES = 200_000
#: DCQCN's recommended RED-style marking (Kmin 5 KB, Kmax 200 KB, Pmax 1%): the ``red`` baseline's defaults.
DCQCN_KMIN_BYTES = 5_000
DCQCN_KMAX_BYTES = 200_000
DCQCN_PMAX = 0.01
ECN_MODES = ("threshold", "red")
#: a TCD marker's CE rule: its congestion state (TCD's own), or the ECN baseline's rule at the same
#: port, which leaves TCD only the undetermined state to change (netstack/tcd/marker.py, issue 30)
CE_RULES = ("tcd", "ecn")

#: state names, by PortState value (status, timelines)
STATE_NAMES = ("non_congestion", "undetermined", "congestion")


class TcdParamError(ConfigError):
    """A TCD or ECN parameter is missing, malformed or inconsistent; ``field`` names it."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive(name: str, value: Any) -> int:
    if not _is_int(value):
        raise TcdParamError(name, f"must be an integer, got {value!r}")
    if value <= 0:
        raise TcdParamError(name, f"must be > 0, got {value}")
    return int(value)


def _non_negative(name: str, value: Any) -> int:
    if not _is_int(value):
        raise TcdParamError(name, f"must be an integer, got {value!r}")
    if value < 0:
        raise TcdParamError(name, f"must be >= 0, got {value}")
    return int(value)


def _fraction(name: str, value: Any, *, closed_top: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise TcdParamError(name, f"must be a number, got {value!r}")
    ok = 0.0 < value <= 1.0 if closed_top else 0.0 < value < 1.0
    if not ok:
        raise TcdParamError(name, f"must be in (0, {'1]' if closed_top else '1)'}, got {value!r}")
    return float(value)


def serialisation_ns(size_bytes: int, rate_bps: int) -> int:
    """Time to put ``size_bytes`` on a link of ``rate_bps`` (ns, rounded up)."""
    return -(-size_bytes * 8 * 10**9 // rate_bps)


def _state(value: Any) -> PortState:
    if isinstance(value, PortState):
        return value
    if isinstance(value, str) and value in STATE_NAMES:
        return PortState(STATE_NAMES.index(value))
    if _is_int(value) and 0 <= value <= 2:
        return PortState(value)
    raise TcdParamError("initial", f"{value!r} is not a port state (one of {', '.join(STATE_NAMES)})")


@dataclass(frozen=True)
class TcdParams:
    """One TCD detector's settings (per egress port and lossless class).

    ``initial``: the state before the first event. The ns-3 port starts undetermined; we start
    non-congestion (our choice: a port nobody has paused is not yet ON-OFF, TCD §3.2.1 "assume a
    port outputs freely at the maximum rate initially"). ``derived`` records how each value was
    obtained (JSON-able, for status and docs).

    ``min_off_ns``: a pause shorter than this is honoured by the switch but is not an OFF period
    for the detector (counted, ``short_pauses``). Derived as one MTU's serialisation time at C: a
    pause that ends before the port could have sent one full frame holds back at most part of one
    frame, which no queue can tell from line-rate jitter; without it, a host on a lossless edge
    port kept a congested port undetermined 60 % of a run with 1-quantum pauses every T_on^max/2
    (issue 34, finding 4; docs/tcd.md "Pauses too short to matter"). 0: every pause counts.
    """

    t_on_max_ns: int
    k_bytes: int
    window_ns: int
    codepoints: TcdCodepoints = DEFAULT_CODEPOINTS
    initial: PortState = PortState.NON_CONGESTION
    min_off_ns: int = 0
    derived: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        _positive("t_on_max_ns", self.t_on_max_ns)
        _positive("k_bytes", self.k_bytes)
        _positive("window_ns", self.window_ns)
        _non_negative("min_off_ns", self.min_off_ns)
        if not isinstance(self.codepoints, TcdCodepoints):
            raise TcdParamError("codepoints", f"must be a TcdCodepoints, got {type(self.codepoints).__name__}")
        object.__setattr__(self, "initial", _state(self.initial))
        if not isinstance(self.derived, dict):
            raise TcdParamError("derived", f"must be a dict, got {type(self.derived).__name__}")

    def to_dict(self) -> dict[str, Any]:
        cp = self.codepoints
        return {"t_on_max_ns": self.t_on_max_ns, "k_bytes": self.k_bytes, "window_ns": self.window_ns,
                "codepoints": {"ect": int(cp.ect), "ue": int(cp.ue), "ce": int(cp.ce)},
                "initial": STATE_NAMES[self.initial], "min_off_ns": self.min_off_ns, "derived": dict(self.derived)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TcdParams:
        """The inverse of :meth:`to_dict` (a topology feature's checked options, a control request)."""
        if not isinstance(data, dict):
            raise TcdParamError("params", f"must be a table, got {type(data).__name__}")
        known = {"t_on_max_ns", "k_bytes", "window_ns", "codepoints", "initial", "min_off_ns", "derived"}
        for key in data:
            if key not in known:
                raise TcdParamError(key, f"unknown field (known: {', '.join(sorted(known))})")
        cp = data.get("codepoints")
        try:
            codepoints = DEFAULT_CODEPOINTS if cp is None else TcdCodepoints(**cp)
        except (TypeError, ValueError) as exc:
            raise TcdParamError("codepoints", str(exc)) from None
        return cls(data.get("t_on_max_ns"), data.get("k_bytes"), data.get("window_ns"),  # type: ignore[arg-type]
                   codepoints, data.get("initial", PortState.NON_CONGESTION), data.get("min_off_ns", 0),
                   dict(data.get("derived") or {}))

    @classmethod
    def derive(cls, *, rate_bps: int | None, xoff_bytes: int | None, xon_bytes: int | None, delay_ns: int,
               r_min_fraction: float = DEFAULT_R_MIN_FRACTION, pfc_processing_ns: int | None = None,
               mtu: int = DEFAULT_MTU, t_on_max_ns: int | None = None, k_bytes: int | None = None,
               window_ns: int | None = None, codepoints: TcdCodepoints = DEFAULT_CODEPOINTS,
               initial: PortState = PortState.NON_CONGESTION, min_off_ns: int | None = None) -> TcdParams:
        """The settings of a port of rate C = ``rate_bps`` whose peer pauses it at ``xoff_bytes``
        and resumes it at ``xon_bytes`` (its ingress thresholds), over a link of one-way delay
        ``delay_ns``. Each derived value is overridden by its keyword.

        - ``T_on^max = (XOFF - XON)·8 / (C - r_min) + 2·(delay + pfc_processing)`` (the ON-OFF
          pattern of TCD §3.2.1; this bound of its longest ON period is our choice), ``r_min = r_min_fraction·C``,
          ``pfc_processing`` defaulting to one MTU's serialisation time at C (a pause waits for the
          frame on the wire; our choice).
        - ``K`` (our choice): the one-hop bandwidth-delay product ``C·2·delay`` plus the hysteresis
          band ``XOFF - XON``, at least two MTUs. That is the standing queue a PFC ON-OFF loop can
          leave at a port by itself (what arrives during a pause's round trip plus what the peer
          releases between XON and XOFF); a longer one on a continuously-ON port is congestion.
        - ``W`` = ``T_on^max`` (our choice: the window must be at least T_on^max, and the minimum
          reacts fastest): one trend sample spans a whole ON period.
        - ``min_off_ns`` = one MTU's serialisation time at C (our choice; the class docstring).

        ``xoff_bytes = xon_bytes = None``: the port is never paused (its peer is not lossless);
        then ``T_on^max = 2·delay + pfc_processing`` and ``K`` is the BDP, at least two MTUs,
        and ``derived`` says so. Refuses (:class:`TcdParamError`) an unpaced port (``rate_bps``
        None: a line rate is needed), XON >= XOFF, ``r_min_fraction`` outside (0, 1), a
        negative delay, overrides <= 0, and non-integers (bools included).
        """
        if rate_bps is None:
            raise TcdParamError("rate_bps", "the port is unpaced (no rate): T_on^max needs the link rate C")
        rate = _positive("rate_bps", rate_bps)
        delay = _non_negative("delay_ns", delay_ns)
        mtu_ = _positive("mtu", mtu)
        frac = _fraction("r_min_fraction", r_min_fraction)
        pfc = serialisation_ns(mtu_, rate) if pfc_processing_ns is None else \
            _non_negative("pfc_processing_ns", pfc_processing_ns)
        if (xoff_bytes is None) != (xon_bytes is None):
            missing = "xon_bytes" if xon_bytes is None else "xoff_bytes"
            raise TcdParamError(missing, "give both xoff_bytes and xon_bytes, or neither (a port never paused)")
        inputs: dict[str, Any] = {"rate_bps": rate, "delay_ns": delay, "mtu": mtu_, "r_min_fraction": frac,
                                  "pfc_processing_ns": pfc, "xoff_bytes": xoff_bytes, "xon_bytes": xon_bytes}
        bdp = rate * 2 * delay // (8 * 10**9)
        if xoff_bytes is None:
            t_on, band = 2 * delay + pfc, 0
            how_t = "never paused (no PFC thresholds): 2·delay + one MTU time"
        else:
            xoff = _positive("xoff_bytes", xoff_bytes)
            xon = _non_negative("xon_bytes", xon_bytes)
            if xon >= xoff:
                raise TcdParamError("xon_bytes", f"must be below xoff_bytes ({xon} >= {xoff}): PFC needs a "
                                                 "hysteresis band XOFF - XON > 0")
            band = xoff - xon
            t_on = round(band * 8 * 10**9 / (rate * (1.0 - frac))) + 2 * (delay + pfc)  # (to the ns)
            how_t = "(XOFF-XON)·8/(C-r_min) + 2·(delay+pfc_processing) (our bound)"
        t_on = max(1, t_on)
        k = max(bdp + band, 2 * mtu_)
        derived: dict[str, Any] = {"inputs": inputs, "t_on_max_ns": how_t,
                                   "k_bytes": "max(C·2·delay + (XOFF-XON), 2·MTU) (our choice)",
                                   "window_ns": "T_on^max (our choice)"}
        if t_on_max_ns is not None:
            t_on = _positive("t_on_max_ns", t_on_max_ns)
            derived["t_on_max_ns"] = "given"
        if k_bytes is not None:
            k = _positive("k_bytes", k_bytes)
            derived["k_bytes"] = "given"
        window = t_on
        if window_ns is not None:
            window = _positive("window_ns", window_ns)
            derived["window_ns"] = "given"
        min_off = serialisation_ns(mtu_, rate)
        derived["min_off_ns"] = "one MTU's serialisation time at C (our choice)"
        if min_off_ns is not None:
            min_off = _non_negative("min_off_ns", min_off_ns)
            derived["min_off_ns"] = "given"
        return cls(t_on, k, window, codepoints, initial, min_off, derived)


@dataclass(frozen=True)
class EcnParams:
    """The classic congestion detection TCD is compared with: ECN marked at dequeue.

    - ``threshold``: CE when the class queue after the packet left exceeds ``k_bytes`` (the
      paper's CEE switches, TCD §3.1, with K_max = 200 KB);
    - ``red``: DCQCN-style, CE with a probability rising linearly from 0 at ``kmin_bytes`` to
      ``pmax`` at ``kmax_bytes``, and 1 above ``kmax_bytes``; drawn from ``random.Random(seed)``.
    """

    mode: str = "threshold"
    k_bytes: int = PAPER_ECN_K_BYTES
    kmin_bytes: int = DCQCN_KMIN_BYTES
    kmax_bytes: int = DCQCN_KMAX_BYTES
    pmax: float = DCQCN_PMAX
    seed: int = 1

    def __post_init__(self) -> None:
        if self.mode not in ECN_MODES:
            raise TcdParamError("mode", f"{self.mode!r} is not an ECN mode (one of {', '.join(ECN_MODES)})")
        _non_negative("k_bytes", self.k_bytes)
        _non_negative("kmin_bytes", self.kmin_bytes)
        _positive("kmax_bytes", self.kmax_bytes)
        if self.kmin_bytes >= self.kmax_bytes:
            raise TcdParamError("kmin_bytes", f"must be below kmax_bytes ({self.kmin_bytes} >= {self.kmax_bytes})")
        object.__setattr__(self, "pmax", _fraction("pmax", self.pmax, closed_top=True))
        if not _is_int(self.seed):
            raise TcdParamError("seed", f"must be an integer, got {self.seed!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "k_bytes": self.k_bytes, "kmin_bytes": self.kmin_bytes,
                "kmax_bytes": self.kmax_bytes, "pmax": self.pmax, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EcnParams:
        if not isinstance(data, dict):
            raise TcdParamError("ecn", f"must be a table, got {type(data).__name__}")
        known = {"mode", "k_bytes", "kmin_bytes", "kmax_bytes", "pmax", "seed"}
        for key in data:
            if key not in known:
                raise TcdParamError(key, f"unknown field (known: {', '.join(sorted(known))})")
        return cls(**data)


#: what :func:`marker_options` accepts beside the port's own numbers, and their checks
TCD_OVERRIDES = ("t_on_max_ns", "k_bytes", "window_ns", "r_min_fraction", "pfc_processing_ns", "xoff_bytes",
                 "xon_bytes", "min_off_ns")
ECN_OVERRIDES = ("ecn_mode", "ecn_k_bytes", "ecn_kmin_bytes", "ecn_kmax_bytes", "ecn_pmax", "ecn_seed")
MARKERS = ("tcd", "ecn")


def check_classes(value: Any) -> list[int] | None:
    """A list of distinct traffic classes 0-7 (None: every class)."""
    if value is None:
        return None
    if (not isinstance(value, list | tuple) or not value or len(set(value)) != len(value)
            or any(not _is_int(c) or not 0 <= c <= 7 for c in value)):
        raise TcdParamError("classes", f"must be a non-empty list of distinct classes 0-7, got {value!r}")
    return sorted(value)


def marker_options(marker: str, *, rate_bps: int | None, delay_ns: int, mtu: int = DEFAULT_MTU,
                   classes: Any = None, ce_rule: str | None = None, **overrides: Any) -> dict[str, Any]:
    """The checked, JSON-able settings of a marker (``"tcd"`` or ``"ecn"``) on a port of
    ``rate_bps`` and ``delay_ns``, with the overrides :data:`TCD_OVERRIDES` (``xoff_bytes`` /
    ``xon_bytes``: the thresholds at which the port is paused and resumed, None when it never
    is) and :data:`ECN_OVERRIDES`: ``{"marker", "classes", "ce_rule", "params": TcdParams dict |
    None, "ecn": EcnParams dict | None}``. :class:`TcdParamError` names the override at fault.

    The ECN baseline's threshold defaults to the TCD ``K`` of the same port (our choice: both
    detectors then draw the line at the same queue; the paper's CEE value is 200 KB, TCD §3.1),
    or 200 KB when no K can be derived (an unpaced port). ``ce_rule`` (:data:`CE_RULES`, default
    ``"tcd"``): under ``"ecn"`` a TCD marker marks CE by the ECN settings (``ecn``, always filled
    in then), as the baseline would at this port; an ECN marker ignores it (one file serves both).
    """
    if marker not in MARKERS:
        raise TcdParamError("marker", f"{marker!r} is not a marker (one of {', '.join(MARKERS)})")
    rule = "tcd" if ce_rule is None else ce_rule
    if rule not in CE_RULES:
        raise TcdParamError("ce_rule", f"{rule!r} is not a CE rule (one of {', '.join(CE_RULES)})")
    for key in overrides:
        if key not in TCD_OVERRIDES and key not in ECN_OVERRIDES:
            raise TcdParamError(key, f"unknown setting (known: {', '.join((*TCD_OVERRIDES, *ECN_OVERRIDES))})")
    tcd = {k: v for k, v in overrides.items() if k in TCD_OVERRIDES and v is not None}
    if "r_min_fraction" not in tcd:
        tcd["r_min_fraction"] = DEFAULT_R_MIN_FRACTION
    params: TcdParams | None = None
    if marker == "tcd" or rate_bps is not None:
        tcd.setdefault("xoff_bytes", None)
        tcd.setdefault("xon_bytes", None)
        params = TcdParams.derive(rate_bps=rate_bps, delay_ns=delay_ns, mtu=mtu, **tcd)
    ecn: EcnParams | None = None
    given = {k.removeprefix("ecn_"): v for k, v in overrides.items() if k in ECN_OVERRIDES and v is not None}
    # the ECN settings are checked under marker tcd too but unused there: one file can carry both
    # and a run flips the marker (``netstack tcd run --marker``)
    if marker == "ecn" or given or rule == "ecn":
        given.setdefault("k_bytes", params.k_bytes if params is not None else PAPER_ECN_K_BYTES)
        try:
            ecn = EcnParams(**given)
        except TcdParamError as exc:
            raise TcdParamError(f"ecn_{exc.field}", exc.problem) from None
    return {"marker": marker, "classes": check_classes(classes), "ce_rule": rule,
            "params": None if params is None else params.to_dict(), "ecn": None if ecn is None else ecn.to_dict()}


__all__ = ["CE_RULES", "DCQCN_KMAX_BYTES", "DCQCN_KMIN_BYTES", "DCQCN_PMAX", "DEFAULT_MTU", "DEFAULT_R_MIN_FRACTION",
           "ECN_MODES", "ECN_OVERRIDES", "MARKERS", "PAPER_ECN_K_BYTES", "STATE_NAMES", "TCD_OVERRIDES", "EcnParams",
           "TcdParamError", "TcdParams", "check_classes", "marker_options", "serialisation_ns"]
