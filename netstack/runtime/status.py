"""Asking a running topology's daemons: every daemon's counters and the impairments in force
(``netstack status``), their scheduling delays, and one command to one daemon."""

from __future__ import annotations

from typing import Any

from ..io.control import ControlError, request
from .lookup import load_state
from .state import RuntimeErrorNS


def status(prefix: str) -> dict[str, Any]:
    """Every daemon's counters (a daemon that does not answer is reported, not fatal)."""
    state = load_state(prefix)
    out: dict[str, Any] = {"prefix": prefix, "topology": state.topology, "daemons": {}, "impairments": {}}
    from ..topo.impair import ImpairmentError, active_impairment

    for p in state.ports:
        try:
            active = active_impairment(prefix, p.netns, p.ifname)
        except (ImpairmentError, OSError, ValueError) as exc:
            active = {"error": str(exc)}
        if active:
            out["impairments"][f"{p.node}>{p.peer}"] = {"link": p.link, **active}
    peers = {(p.node, p.ifname): p for p in state.ports}
    for d in state.daemons:
        if not d.control:  # nothing to ask: whether it runs
            out["daemons"][d.key] = {"kind": d.kind, "node": d.node, "pid": d.pid, "alive": d.alive()}
            continue
        try:
            out["daemons"][d.key] = st = request(d.control, "status", timeout=2.0)
        except (OSError, ControlError, ValueError) as exc:
            out["daemons"][d.key] = {"error": f"not answering ({exc}); log {d.log}", "alive": d.alive()}
            continue
        for ifname, counters in st.get("ports", {}).items():
            imp = counters.get("impairment")
            end = peers.get((d.node, ifname))
            if imp and end:
                out["impairments"][f"{end.node}>{end.peer}"] = {
                    "link": end.link, "backend": "switch", **imp,
                    "dropped": counters.get("impair_lost"), "corrupted": counters.get("impair_corrupted"),
                    "reordered": counters.get("impair_reordered"), "duplicated": counters.get("impair_duplicated"),
                }
    return out


def loop_lags(prefix: str) -> dict[str, dict[str, Any] | None]:
    """Every daemon's scheduling-delay histogram (:mod:`netstack.looplag`; None: no answer)."""
    out: dict[str, dict[str, Any] | None] = {}
    for d in load_state(prefix).daemons:
        if not d.control:
            continue
        try:
            out[d.key] = request(d.control, "loop_lag", timeout=2.0)
        except (OSError, ControlError, ValueError):
            out[d.key] = None
    return out


def control(prefix: str, node: str, cmd: str, **args: Any) -> Any:
    """Ask daemon ``node`` (its name: ``ctl-r2``; or a node's name: its first daemon with a
    control socket) ``cmd``."""
    served = [d for d in load_state(prefix).daemons if d.control]
    match = next((d for d in served if d.key == node), None) or next((d for d in served if d.node == node), None)
    if match is not None:
        return request(match.control, cmd, **args)
    raise RuntimeErrorNS(f"no daemon runs on node {node!r} (daemons: {[d.key for d in served]})")
