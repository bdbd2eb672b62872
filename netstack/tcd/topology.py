"""TCD from a topology file: ``[links.features.<end>] tcd = {...}`` puts a marker on that end's
switch port (its egress), for the live daemons and ``netstack.sim`` alike::

    [links.features.a]
    switch = { lossless = true, xoff = "320KB", xon = "300KB" }
    tcd = { marker = "tcd", classes = [0] }          # or marker = "ecn": the classic baseline

Options, all optional: ``marker`` (``"tcd"`` default | ``"ecn"``), ``t_on_max`` (``"50ms"`` or ns),
``k`` (``"40KB"`` or bytes), ``window`` (delay), ``r_min`` (fraction of the rate, 0.9),
``classes`` (the lossless classes to detect on; default every class), ``ce_rule`` (``"tcd"``
default: CE in TCD's congestion state | ``"ecn"``: CE by the ECN baseline's rule below, so that a
TCD marker differs from the baseline only at undetermined ports), and for the ECN baseline
``ecn_mode`` (``"threshold"`` | ``"red"``), ``ecn_k``, ``ecn_kmin``, ``ecn_kmax`` (sizes),
``ecn_pmax``, ``ecn_seed``.

What is not given is derived (:meth:`.params.TcdParams.derive`) from the link's rate, one-way
delay and MTU, and from the thresholds at which this port gets paused: those are the *peer*
end's ingress XOFF/XON (``[links.features.<other end>] switch = { lossless = true, xoff, xon }``),
since the peer's ingress accounting is what sends this port its PAUSEs. A peer without PFC
thresholds (a host, a lossy port) makes us fall back to this end's own thresholds (the usual
symmetric configuration; our choice); with neither the port is never paused, and the checked
options say so (``pfc.source = "none"``).
"""

from __future__ import annotations

from typing import Any

from ..topo.model import Link, LinkEnd, NodeKind, Topology, TopologyError, parse_delay, parse_size
from ..topo.validate.features import each_end
from .feature import install
from .marker import EcnMarker, TcdMarker, marker_from_options
from .params import TcdParamError, marker_options

#: option in the file -> (keyword of marker_options, how to read it)
OPTIONS: dict[str, tuple[str, str]] = {
    "t_on_max": ("t_on_max_ns", "delay"), "k": ("k_bytes", "size"), "window": ("window_ns", "delay"),
    "min_off": ("min_off_ns", "delay"),
    "r_min": ("r_min_fraction", "number"), "classes": ("classes", "raw"), "ecn_mode": ("ecn_mode", "raw"),
    "ecn_k": ("ecn_k_bytes", "size"), "ecn_kmin": ("ecn_kmin_bytes", "size"), "ecn_kmax": ("ecn_kmax_bytes", "size"),
    "ecn_pmax": ("ecn_pmax", "number"), "ecn_seed": ("ecn_seed", "raw"), "ce_rule": ("ce_rule", "raw"),
}
KEYS = ("marker", *OPTIONS)
_KEY_OF = {kw: key for key, (kw, _) in OPTIONS.items()}


def _read(kind: str, value: Any) -> Any:
    if kind in ("delay", "size") and isinstance(value, int) and not isinstance(value, bool):
        return value  # plain ns / bytes (a 0 or a negative is refused by the parameter checks)
    if kind == "delay":
        return parse_delay(value)
    if kind == "size":
        return parse_size(value)
    return value


def _pfc_thresholds(topology: Topology, end: LinkEnd) -> tuple[int, int] | None:
    """(XOFF, XON) of a switch end that is lossless; None otherwise. (Malformed values are the
    switch settings' own errors, reported where the port is built.)"""
    if topology.node(end.node).kind is not NodeKind.SWITCH:
        return None
    sw = end.features.get("switch")
    if not isinstance(sw, dict) or sw.get("lossless") is not True:
        return None
    try:
        return parse_size(sw.get("xoff")), parse_size(sw.get("xon"))
    except (TypeError, ValueError):
        return None


def pfc_source(topology: Topology, link: Link, side: str) -> tuple[dict[str, Any], str | None]:
    """Who pauses this end: ``({"source", "xoff_bytes", "xon_bytes"}, the side whose switch table
    gave them)``."""
    own, peer = (link.a, link.b) if side == "a" else (link.b, link.a)
    other = "b" if side == "a" else "a"
    for source, end, from_side in (("peer", peer, other), ("own", own, side)):
        th = _pfc_thresholds(topology, end)
        if th is not None:
            return {"source": source, "xoff_bytes": th[0], "xon_bytes": th[1]}, from_side
    return {"source": "none", "xoff_bytes": None, "xon_bytes": None}, None


def _end(topology: Topology, link: Link, side: str, table: Any, path: str) -> dict[str, Any]:
    end = link.a if side == "a" else link.b
    where = f"{path}.{side}.tcd"
    kind = topology.node(end.node).kind
    if kind is not NodeKind.SWITCH:
        raise TopologyError([(where, f"{end.node} is a {kind.value}: TCD marks at a switch's egress port "
                                     "(TCD §3.2)")], topology.source)
    if not isinstance(table, dict):
        raise TopologyError([(where, f"must be a table, not {type(table).__name__}")], topology.source)
    errors = [(f"{where}.{key}", f"unknown option (known: {', '.join(KEYS)})") for key in table if key not in KEYS]
    overrides: dict[str, Any] = {}
    for key, (kw, kind_) in OPTIONS.items():
        if key in table:
            try:
                overrides[kw] = _read(kind_, table[key])
            except (TypeError, ValueError) as exc:
                errors.append((f"{where}.{key}", str(exc)))
    if errors:
        raise TopologyError(errors, topology.source)
    pfc, from_side = pfc_source(topology, link, side)
    try:
        opts = marker_options(table.get("marker", "tcd"), rate_bps=link.rate_bps, delay_ns=link.delay_ns,
                              mtu=link.mtu, xoff_bytes=pfc["xoff_bytes"], xon_bytes=pfc["xon_bytes"], **overrides)
    except TcdParamError as exc:
        if exc.field in ("xoff_bytes", "xon_bytes"):
            at = f"{path}.{from_side}.switch.{exc.field.removesuffix('_bytes')}"
        elif exc.field in ("rate_bps", "delay_ns", "mtu"):
            at = f"{path.removesuffix('.features')}.{exc.field.partition('_')[0]}"
        else:
            at = f"{where}.{_KEY_OF.get(exc.field, exc.field)}"
        raise TopologyError([(at, exc.problem)], topology.source) from None
    opts["pfc"] = pfc
    return opts


def validate_link(topology: Topology, link: Link, tables: dict[str, Any], path: str) -> dict[str, Any]:
    """Check each end's ``tcd`` table; ``{"a": options | None, "b": options | None}`` with every
    derived number filled in (JSON-able: they go into the switch daemon's config)."""
    return each_end(topology, tables, lambda side, table: _end(topology, link, side, table, path))


def attach(switch: Any, port: str, options: dict[str, Any], now_ns: int | None = None) -> TcdMarker | EcnMarker:
    """Install the marker ``options`` describe (checked by :func:`validate_link`) on ``port``."""
    marker = marker_from_options(options, switch.now if now_ns is None else now_ns)
    install(switch, port, marker)  # (the TCD marker's idle timer too: feature.py)
    return marker


__all__ = ["KEYS", "OPTIONS", "attach", "pfc_source", "validate_link"]
