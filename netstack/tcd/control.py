"""TCD's control plug-in: what a switch daemon serves, and what the CLI calls.

Daemon side (:func:`switch_handlers`, loaded by every switch daemon through ``netstack.protocols``):

- ``tcd_enable`` ``{"port", "marker": "tcd" | "ecn", "classes"?, overrides...}`` installs a marker
  on the port's egress. The parameters are derived (``params.TcdParams.derive``) from the port's
  own config: rate, delay, MTU and its XOFF/XON. Those are this port's *ingress* thresholds,
  which equal the peer's (what pauses this port) when PFC is configured symmetrically, which is
  our assumption; a request gives the peer's as ``xoff_bytes`` / ``xon_bytes`` when they differ
  (:func:`enable` looks them up in the topology). Overrides: ``t_on_max_ns``, ``k_bytes``,
  ``window_ns``, ``r_min_fraction``, ``pfc_processing_ns``, ``xoff_bytes``, ``xon_bytes``,
  ``ce_rule`` (``tcd`` | ``ecn``: CE by the ECN settings below, UE at undetermined ports), and for
  the ECN baseline ``ecn_mode``, ``ecn_k_bytes``, ``ecn_kmin_bytes``, ``ecn_kmax_bytes``,
  ``ecn_pmax``, ``ecn_seed``.
- ``tcd_disable`` ``{"port"}`` removes it (answers with its last status).
- ``tcd_status`` ``{"port"?, "timeline"?: bool}``: every marked port's status (and timelines).

:func:`switch_status` is TCD's part of the daemon's ``status`` (``netstack status``): per port the
marker, its state and integer counters, including ``state`` (0 non-congestion, 1 undetermined,
2 congestion: the most severe of its classes) and the time spent in each state (``t_noncon_ms``,
``t_undet_ms``, ``t_cong_ms``, of its busiest class).

Orchestration side (:func:`enable`, :func:`disable`, :func:`status`): the same over the switch
daemons' control sockets of the testbed running under a prefix.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..errors import NetstackError
from ..io.control import ControlError
from .feature import install, remove
from .marker import EcnMarker, TcdMarker, marker_from_options
from .params import ECN_OVERRIDES, TCD_OVERRIDES, TcdParamError, marker_options

if TYPE_CHECKING:
    from ..runtime import RunPort, RunState

#: the daemon's clock (tests replace it)
_clock = time.monotonic_ns
_REQUEST_KEYS = {"cmd", "port", "marker", "classes", "ce_rule", *TCD_OVERRIDES, *ECN_OVERRIDES}


class TcdControlError(NetstackError, RuntimeError):
    """A TCD operation on the running testbed cannot be done: the message says why."""


# =========================================================================== switch daemon side
def markers(switch: Any) -> dict[str, TcdMarker | EcnMarker]:
    """The ports of ``switch`` with a TCD or ECN marker installed -> the marker."""
    return {p.name: p.marker for p in switch.ports if isinstance(p.marker, TcdMarker | EcnMarker)}


def build(switch: Any, port: str, req: dict[str, Any], now_ns: int) -> TcdMarker | EcnMarker:
    """The marker a ``tcd_enable`` request asks for on ``port`` (TcdParamError if it cannot be)."""
    for key in req:
        if key not in _REQUEST_KEYS:
            raise TcdParamError(key, f"unknown field (known: {', '.join(sorted(_REQUEST_KEYS - {'cmd'}))})")
    cfg = switch.config.port(port)
    overrides = {k: req[k] for k in (*TCD_OVERRIDES, *ECN_OVERRIDES) if req.get(k) is not None}
    if cfg.lossless and "xoff_bytes" not in overrides and "xon_bytes" not in overrides:
        overrides.update(xoff_bytes=cfg.xoff_bytes, xon_bytes=cfg.xon_bytes)  # symmetric PFC (module docstring)
    opts = marker_options(req.get("marker") or "tcd", rate_bps=cfg.rate_bps, delay_ns=cfg.delay_ns, mtu=cfg.mtu,
                          classes=req.get("classes"), ce_rule=req.get("ce_rule"), **overrides)
    return marker_from_options(opts, now_ns)


def port_report(marker: TcdMarker | EcnMarker, now_ns: int) -> dict[str, Any]:
    """One port's part of :func:`switch_status`: ``{"marker", "state", "counters": {ints},
    "time_in_state_ns"}``."""
    if isinstance(marker, EcnMarker):
        return {"marker": "ecn", "state": None, "counters": marker.c.to_dict(), "time_in_state_ns": {}}
    counters: dict[str, int] = {}
    for c in marker.c.classes.values():
        for k, v in c.to_dict().items():
            counters[k] = counters.get(k, 0) + v
    dets = marker.detectors
    if not dets:
        return {"marker": "tcd", "state": None, "counters": counters, "time_in_state_ns": {}}
    worst = max(d.state for d in dets.values())
    busiest = max(dets, key=lambda cls: sum(marker.c.classes[cls].to_dict().values()))
    times = dets[busiest].time_in_state(now_ns)
    det_counts = {"state": int(worst), "class": busiest,
                  "t_noncon_ms": times["non_congestion"] // 1_000_000, "t_undet_ms": times["undetermined"] // 1_000_000,
                  "t_cong_ms": times["congestion"] // 1_000_000,
                  "transitions": sum(d.c.transitions for d in dets.values()),
                  "pauses": sum(d.c.pauses for d in dets.values())}
    return {"marker": "tcd", "state": ("non_congestion", "undetermined", "congestion")[worst],
            "counters": {**det_counts, **counters}, "time_in_state_ns": times}


def switch_status(shell: Any) -> dict[str, Any] | None:
    """TCD's part of the switch daemon's ``status``; None while no port has a TCD/ECN marker."""
    found = markers(shell.switch)
    if not found:
        return None
    now = _clock()
    return {"ports": {name: port_report(m, now) for name, m in sorted(found.items())}}


def switch_handlers(shell: Any) -> dict[str, Any]:
    """The control commands TCD adds to a switch daemon (``shell``: its ``SwitchShell``)."""

    def tcd_enable(req: dict[str, Any]) -> dict[str, Any]:
        name = shell.port_of(req)
        try:
            marker = build(shell.switch, name, req, _clock())
        except (TcdParamError, ValueError, TypeError) as exc:
            raise ControlError(f"cannot enable {req.get('marker') or 'tcd'} marking on {name}: {exc}") from None
        install(shell.switch, name, marker)
        shell.flush()
        shell.log.info("%s marking enabled on %s", marker.kind.upper(), name)
        return {"port": name, **marker.status(_clock())}

    def tcd_disable(req: dict[str, Any]) -> dict[str, Any]:
        name = shell.port_of(req)
        marker = remove(shell.switch, name)
        if marker is None:
            return {"port": name, "marker": None}
        shell.flush()
        shell.log.info("%s marking disabled on %s", marker.kind.upper(), name)
        return {"port": name, **marker.status(_clock())}

    def tcd_status(req: dict[str, Any]) -> dict[str, Any]:
        found = markers(shell.switch)
        if req.get("port") is not None:
            name = shell.port_of(req)
            if name not in found:
                raise ControlError(f"no TCD/ECN marker on port {name} (tcd_enable first)")
            found = {name: found[name]}
        now = _clock()
        out: dict[str, Any] = {}
        for name, m in sorted(found.items()):
            st = m.status(now)
            st["summary"] = port_report(m, now)
            if req.get("timeline") and isinstance(m, TcdMarker):
                st["timeline"] = {str(cls): m.timeline(cls) for cls in sorted(m.detectors)}
            out[name] = st
        return {"now_ns": now, "ports": out}

    return {"tcd_enable": tcd_enable, "tcd_disable": tcd_disable, "tcd_status": tcd_status}


# =========================================================================== orchestration
def _switch_nodes(state: RunState) -> list[str]:
    return [d.node for d in state.daemons if d.kind == "switch"]


def _port_entry(state: RunState, node: str, port: str) -> RunPort:
    if node not in _switch_nodes(state):
        raise TcdControlError(f"{node!r} is not a switch of this run (switches: {', '.join(_switch_nodes(state))})")
    for p in state.ports_of(node):
        if p.ifname == port:
            return p
    mine = sorted(p.ifname for p in state.ports_of(node))
    raise TcdControlError(f"{node} has no port {port!r} (ports: {', '.join(mine)})")


def peer_thresholds(state: RunState, node: str, port: str) -> dict[str, Any]:
    """The XOFF/XON that pause ``node``'s ``port`` (the peer's, as the topology feature takes
    them), read from the run's topology; {} when they cannot be known (then the daemon assumes
    symmetric PFC)."""
    from ..runtime import topology_of
    from ..topo.model import TopologyError
    from .topology import pfc_source

    entry = _port_entry(state, node, port)
    try:
        topology = topology_of(state)
        link = topology.link(entry.link)
    except (TopologyError, KeyError, OSError, ValueError):
        return {}
    sides = [s for s, end in (("a", link.a), ("b", link.b)) if end.node == node and end.ifname == port]
    if not sides:
        return {}  # (the file changed since 'netstack up')
    pfc, _ = pfc_source(topology, link, sides[0])
    if pfc["source"] == "none":
        return {}
    return {"xoff_bytes": pfc["xoff_bytes"], "xon_bytes": pfc["xon_bytes"]}


def enable(prefix: str, node: str, port: str, marker: str = "tcd",
           overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Install ``marker`` (``"tcd"`` or ``"ecn"``) on switch ``node``'s ``port``; ``overrides``: the
    ``tcd_enable`` fields. The peer's PFC thresholds come from the topology unless given."""
    from ..runtime import control, load_state

    state = load_state(prefix)
    args = dict(overrides or {})
    if "xoff_bytes" not in args and "xon_bytes" not in args:
        args.update(peer_thresholds(state, node, port))
    else:
        _port_entry(state, node, port)
    answer: dict[str, Any] = control(prefix, node, "tcd_enable", port=port, marker=marker,
                                     **{k: v for k, v in args.items() if v is not None})
    return answer


def disable(prefix: str, node: str, port: str) -> dict[str, Any]:
    """Remove the marker of ``node``'s ``port``; its last status (``marker`` None if there was none)."""
    from ..runtime import control, load_state

    _port_entry(load_state(prefix), node, port)
    answer: dict[str, Any] = control(prefix, node, "tcd_disable", port=port)
    return answer


def status(prefix: str, timeline: bool = False) -> dict[str, Any]:
    """``{switch: its tcd_status, or {"error": why}}`` for every switch daemon of the run."""
    from ..runtime import control, load_state

    out: dict[str, Any] = {}
    for node in _switch_nodes(load_state(prefix)):
        try:
            out[node] = control(prefix, node, "tcd_status", timeline=timeline)
        except (ControlError, OSError) as exc:
            out[node] = {"error": str(exc)}
    return out


__all__ = ["TcdControlError", "build", "disable", "enable", "markers", "peer_thresholds", "port_report", "status",
           "switch_handlers", "switch_status"]
