"""One poll of a running testbed for ``netstack ui``: what every daemon says, as the page shows it.

Blocking (the control sockets' client, ``netstack.io.control.request``); the server runs it in a
thread, every daemon in a thread of its own, so that one daemon that does not answer (frozen by
``netstack fault kill --signal STOP``, crashed) costs its own node and nothing else: the node is
``unreachable`` and the poll goes on. A testbed whose run state is gone (``netstack down``) gives a
snapshot that says so (``"testbed": "gone"``), never an exception.

The kernel's impairments (netem / nft, ``netstack.topo.impair.active_impairment``) take one
subprocess per port end, so they are read every few seconds only (:func:`kernel_impairments`,
called by the server), while the switches' own impairment model is in every poll's status.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import Any

from .. import runtime
from ..errors import NetstackError
from ..io.control import ControlError, request
from . import views

#: the port counters every switch port shows (docs/testbed.md "The switch"); rates for the first four
PORT_COUNTERS = ("rx_frames", "tx_frames", "rx_bytes", "tx_bytes", "fcs_errors", "queue_drops", "kernel_drops",
                 "carrier_drops", "link_down", "pauses_rx", "pauses_tx", "ecn_marked", "malformed",
                 "buffer_used", "buffer_bytes", "rate_bps")
RATE_COUNTERS = ("rx_frames", "tx_frames", "rx_bytes", "tx_bytes")
#: threads asking daemons at once (a testbed's daemons; more wait their turn)
MAX_THREADS = 16


def gone(prefix: str, why: str) -> dict[str, Any]:
    """The snapshot of a testbed that is not there (any more)."""
    return {"prefix": prefix, "time": time.time(), "testbed": "gone", "message": why, "run_id": None,
            "nodes": {}, "links": {}, "ports": {}}


def ask_daemon(daemon: runtime.Daemon, mods: Mapping[str, ModuleType], timeout: float) -> dict[str, Any]:
    """One daemon: ``{"ok": True, "status", "views"}``, or ``{"ok": False, "error"}`` when it does
    not answer."""
    if not daemon.control:  # a process with no control socket (a link's flapper, an etcd member)
        return {"ok": daemon.alive(), "status": {}, "views": {}, "error": None if daemon.alive() else "not running"}
    try:
        status = request(daemon.control, "status", timeout=timeout)
    except (OSError, ControlError, ValueError) as exc:
        alive = daemon.alive()
        return {"ok": False, "error": f"{'not answering' if alive else 'not running'} ({exc})"}

    def ask(cmd: str, **args: Any) -> Any:
        return request(daemon.control, cmd, timeout=timeout, **args)

    return {"ok": True, "status": status, "views": views.port_views(mods, daemon.kind, status, ask)}


def _switch_ports(node: str, status: Mapping[str, Any], answer: Mapping[str, Any]) -> dict[str, Any]:
    """``{"node/ifname": port}`` of a switch daemon's status: its counters and its views."""
    out = {}
    for name, c in (status.get("ports") or {}).items():
        ifname = c.get("ifname") or name
        out[f"{node}/{ifname}"] = {
            "node": node, "port": ifname, "carrier": c.get("carrier"),
            "counters": {k: c[k] for k in PORT_COUNTERS if isinstance(c.get(k), int | float)},
            "paused": any(c.get("paused") or []), "impairment": c.get("impairment"),
            "views": answer["views"].get(name, []) + (answer["views"].get(ifname, []) if ifname != name else []),
        }
    return out


def _nodes_and_ports(state: runtime.RunState,
                     answers: Mapping[str, dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The snapshot's ``nodes`` (each one's status, daemons and node views) and ``ports``."""
    nodes: dict[str, Any] = {n: {"status": "host", "daemons": {}, "views": []} for n in state.namespaces}
    ports: dict[str, Any] = {}
    for d in state.daemons:
        node = nodes.get(d.node)
        if node is None:  # a daemon of no node: a link's flapper
            continue
        a = answers[d.key]
        node["daemons"][d.key] = {"kind": d.kind, "ok": a["ok"], "error": a.get("error")}
        if not a["ok"]:
            node["status"] = "unreachable"
            continue
        if node["status"] == "host":
            node["status"] = "ok"
        node["views"] += a["views"].get("", [])
        ports.update(_switch_ports(d.node, a["status"], a))
        if "ports" not in a["status"]:  # a node daemon (not a switch): its views by its node's port
            for ifname, vs in a["views"].items():
                if ifname:
                    ports.setdefault(f"{d.node}/{ifname}", {"node": d.node, "port": ifname, "counters": {},
                                                            "views": []})["views"] += vs
    return nodes, ports


def link_states(state: runtime.RunState, ports: Mapping[str, Any],
                impairments: Mapping[str, Any]) -> dict[str, Any]:
    """Every link: ``state`` (down when a switch end has no carrier, up when one has, unknown
    when no switch end answered), its impairments (kernel and switch model) and ``corrupting``
    (one corrupts or drops frames), and the marks its ports' views set (``protected``: by whom)."""
    out: dict[str, Any] = {}
    for name in state.links:
        ends = state.ends_of(name)
        carriers = [ports[k]["carrier"] for k in (f"{p.node}/{p.ifname}" for p in ends)
                    if k in ports and isinstance(ports[k].get("carrier"), bool)]
        imps = []
        for p in ends:
            where = f"{p.node}>{p.peer}"
            model = ports.get(f"{p.node}/{p.ifname}", {}).get("impairment")
            found = impairments.get(where) or ({"backend": "switch", **model} if model else None)
            if found:
                imps.append({"direction": where, **{k: v for k, v in found.items() if k != "link"}})
        marks: dict[str, list[str]] = {}
        for p in ends:
            for v in ports.get(f"{p.node}/{p.ifname}", {}).get("views", []):
                if v.get("link"):
                    marks.setdefault(v["link"], []).append(f"{v['title']} {p.node}/{p.ifname}")
        out[name] = {"state": "down" if False in carriers else "up" if carriers else "unknown",
                     "impairments": imps, "marks": marks,
                     "corrupting": any((i.get("corrupt") or 0) > 0 or (i.get("loss") or 0) > 0 for i in imps)}
    return out


def kernel_impairments(prefix: str) -> dict[str, Any]:
    """``{"node>peer": impairment}`` of the kernel backends (netem, nft) on every port end: what
    ``netstack status`` lists under impairments, without the switches' model."""
    from ..topo.impair import ImpairmentError, active_impairment

    try:
        state = runtime.load_state(prefix)
    except NetstackError:
        return {}
    out = {}
    for p in state.ports:
        try:
            active = active_impairment(prefix, p.netns, p.ifname)
        except (ImpairmentError, OSError, ValueError, subprocess.SubprocessError) as exc:  # (a tool's timeout)
            active = {"error": str(exc)}
        if active:
            out[f"{p.node}>{p.peer}"] = {"link": p.link, **active}
    return out


def collect(prefix: str, mods: Mapping[str, ModuleType], impairments: Mapping[str, Any],
            timeout: float = 1.0) -> dict[str, Any]:
    """One snapshot of the testbed under ``prefix`` (``impairments``: the latest
    :func:`kernel_impairments`)."""
    try:
        state = runtime.load_state(prefix)
    except NetstackError as exc:
        return gone(prefix, str(exc))
    stale = runtime.stale_reason(prefix)  # the state outlived its namespaces (a crash)
    if stale is not None:
        return gone(prefix, stale)
    with ThreadPoolExecutor(max_workers=max(1, min(MAX_THREADS, len(state.daemons)))) as pool:
        futures = {d.key: pool.submit(ask_daemon, d, mods, timeout) for d in state.daemons}
        answers = {key: f.result() for key, f in futures.items()}
    nodes, ports = _nodes_and_ports(state, answers)
    return {"prefix": prefix, "time": time.time(), "testbed": "up", "message": "",
            "run_id": f"{state.topology}@{state.started}", "topology": state.topology,
            "nodes": nodes, "links": link_states(state, ports, impairments), "ports": ports}


__all__ = ["PORT_COUNTERS", "RATE_COUNTERS", "ask_daemon", "collect", "gone", "kernel_impairments", "link_states"]
