"""1Pipe's control plug-in: what a switch daemon serves, and what orchestration calls.

Daemon side (:func:`switch_handlers`, loaded by every switch daemon through the protocol
registry, ``netstack.protocols``):

- ``onepipe_enable``: ``{"directions": {port: "up" | "down"}, "params": {...}, "controller": bool,
  "domain": prefix, "peers": {fabric port: "switch:port"}}`` attaches the barrier feature to every
  port of the switch (``OnePipeParams`` fields); ``controller``: reliable 1Pipe's controller will
  release failed inputs (design topic §8 step 7); ``domain`` and ``peers``: what a switch with keys
  authenticates its beacons and barriers with (docs/onepipe.md "Authenticated beacons and
  barriers"; ignored without keys);
- ``onepipe_disable``: detaches it;
- ``onepipe_status``: the aggregators' and every port's counters (``null`` when off);
- ``onepipe_reports``: ``{"since": seq}`` -> ``{"reports": [...], "next": seq, "dropped": n}``, the
  failure reports (input timeouts with the last commit heard, §8 step 1) with ``seq >= since``;
  ask again with ``since`` = ``next``. ``next`` below your ``since``: 1Pipe was enabled afresh;
- ``onepipe_fence``: ``{"input": "ip:port" | fabric port}`` holds that input's commit barrier
  (``{"input", "known", "last_commit"}``);
- ``onepipe_release``: ``{"input": ..., "ban": bool}`` lets commit barriers pass it (RESUME, §8
  step 7); with ``ban`` it stays out of the commit minimum until ``onepipe_admit``;
- ``onepipe_admit``: ``{"input": ...}`` lets a banned input re-join (it registered again).

Orchestration side: :func:`enable_all` turns 1Pipe on in every switch of a running testbed, with
each port's direction taken from the topology (``netstack.onepipe.topology``; design topic §3 in
docs/papers.md: up and down logical switches make routing a DAG), :func:`disable_all` turns it off, :func:`status_all`
collects every switch's status.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, NetstackError
from ..io.control import ControlError
from .params import OnePipeParams
from .topology import CONTROLLER_KIND

if TYPE_CHECKING:
    from ..runtime import RunState


class OnePipeControlError(NetstackError, RuntimeError):
    """A 1Pipe operation on the running testbed cannot be done: the message says why."""


# =========================================================================== switch daemon side
def switch_handlers(shell: Any) -> dict[str, Any]:
    """The control commands 1Pipe adds to a switch daemon (``shell``: its ``SwitchShell``)."""
    from . import feature

    def onepipe_enable(req: dict[str, Any]) -> dict[str, Any]:
        directions = req.get("directions")
        if not isinstance(directions, dict) or set(directions) != set(shell.ports):
            raise ControlError(f"directions must give every port of the switch: {sorted(shell.ports)}")
        controller = req.get("controller", False)
        if not isinstance(controller, bool):
            raise ControlError(f"controller must be true or false, got {controller!r}")
        try:
            params = OnePipeParams(**(req.get("params") or {}))
            feature.enable(shell.switch, directions, params, time.monotonic_ns(), beacon_ip=req.get("beacon_ip"),
                           controller=controller, domain=req.get("domain"), peers=req.get("peers"))
        except (ConfigError, ValueError, TypeError) as exc:
            raise ControlError(f"cannot enable 1Pipe: {exc}") from None
        shell.flush()
        authed = feature.authenticated(shell.switch)
        shell.log.info("1Pipe enabled (%s)%s%s", ", ".join(f"{p}:{d}" for p, d in sorted(directions.items())),
                       " under a controller" if controller else "", ", frames authenticated" if authed else "")
        return {"params": params.to_dict(), "directions": directions, "controller": controller,
                "authenticated": authed}

    def onepipe_disable(req: dict[str, Any]) -> bool:
        was = feature.disable(shell.switch)
        shell.flush()
        shell.log.info("1Pipe disabled" if was else "1Pipe disable: it was not enabled")
        return was

    def onepipe_status(req: dict[str, Any]) -> dict[str, Any] | None:
        return switch_status(shell)

    return {"onepipe_enable": onepipe_enable, "onepipe_disable": onepipe_disable, "onepipe_status": onepipe_status,
            **_controller_handlers(shell)}


def _controller_handlers(shell: Any) -> dict[str, Any]:
    """What the 1Pipe controller asks of a switch (design topic §8): reports, fence, release, admit."""
    from . import feature

    def onepipe_reports(req: dict[str, Any]) -> dict[str, Any]:
        since = req.get("since", 0)
        if isinstance(since, bool) or not isinstance(since, int) or since < 0:
            raise ControlError(f"since must be a non-negative integer, got {since!r}")
        try:
            return feature.reports_page(shell.switch, since)
        except ConfigError as exc:
            raise ControlError(f"cannot list reports: {exc}") from None

    def _input(req: dict[str, Any]) -> str:
        name = req.get("input")
        if not isinstance(name, str) or not name:
            raise ControlError(f"input must be a process as ip:port or a fabric port name, got {name!r}")
        return name

    def onepipe_fence(req: dict[str, Any]) -> dict[str, Any]:
        name = _input(req)
        try:
            out = feature.fence(shell.switch, name)
        except ConfigError as exc:
            raise ControlError(f"cannot fence: {exc}") from None
        shell.flush()  # (nothing to send, but keep the daemon's timer in step with the feature's)
        shell.log.info("1Pipe: fenced %s (known: %s, last commit %s)", name, out["known"], out["last_commit"])
        return out

    def onepipe_release(req: dict[str, Any]) -> bool:
        name = _input(req)
        ban = req.get("ban", False)
        if not isinstance(ban, bool):
            raise ControlError(f"ban must be true or false, got {ban!r}")
        try:
            was = feature.release(shell.switch, name, time.monotonic_ns(), ban=ban)
        except ConfigError as exc:
            raise ControlError(f"cannot release: {exc}") from None
        shell.flush()  # the commit minimum may rise: prompt beacons are due now
        shell.log.info("1Pipe: released %s%s%s", name, " (banned)" if ban else "", "" if was else " (not known here)")
        return was

    def onepipe_admit(req: dict[str, Any]) -> bool:
        name = _input(req)
        try:
            was = feature.admit(shell.switch, name, time.monotonic_ns())
        except ConfigError as exc:
            raise ControlError(f"cannot admit: {exc}") from None
        shell.log.info("1Pipe: admitted %s%s", name, "" if was else " (not known here)")
        return was

    return {"onepipe_reports": onepipe_reports, "onepipe_fence": onepipe_fence, "onepipe_release": onepipe_release,
            "onepipe_admit": onepipe_admit}


def switch_status(shell: Any) -> dict[str, Any] | None:
    """1Pipe's part of the switch daemon's ``status`` (``netstack status``): per-port counters,
    or None while 1Pipe is off in this switch."""
    from . import feature

    return feature.status(shell.switch, time.monotonic_ns())


# =========================================================================== orchestration
def switches_of(state: RunState) -> list[str]:
    return [d.node for d in state.daemons if d.kind == "switch"]


def controller_nodes(topology: Any) -> list[str]:
    """The topology's ``onepipe-controller`` nodes."""
    return [n.name for n in topology.nodes if n.kind.value == CONTROLLER_KIND]


def directions(topology: Any) -> dict[str, dict[str, str]]:
    """Every switch port's direction (``topology.validate``: a controller node gives no switch a
    tier, and the port to it is an edge port, down)."""
    from .topology import validate

    return validate(topology)


def peers_of(topology: Any) -> dict[str, dict[str, str]]:
    """``{switch: {fabric port: "peer switch:its port"}}``: the other end of every switch-to-switch
    link, which names the direction of the link in authenticated frames (:func:`.auth.fabric_hop`)."""
    from ..topo.model import NodeKind

    out: dict[str, dict[str, str]] = {}
    for sw in topology.switches:
        mine = out.setdefault(sw.name, {})
        for link, end in topology.ends_of(sw.name):
            other = link.peer(sw.name)
            if topology.node(other.node).kind is NodeKind.SWITCH:
                mine[end.ifname] = f"{other.node}:{other.ifname}"
    return out


def enable_all(prefix: str, params: OnePipeParams | None = None, controller: bool | None = None, *,
               topology: Any = None) -> dict[str, Any]:
    """Turn 1Pipe on in every switch of the run under ``prefix``; ``{switch: its answer}``.
    ``topology``: the one it runs (default: read again from the run's file, ``runtime.topology_of``).
    ``controller``: whether reliable 1Pipe's controller releases timed-out inputs (design topic §8
    step 7); None: when the topology has an ``onepipe-controller`` node. The domain is ``prefix``
    (a switch with keys authenticates with ``onepipe-domain/<prefix>``)."""
    from ..runtime import control, load_state, topology_of
    from ..topo.model import TopologyError
    from .topology import beacon_ip

    state = load_state(prefix)
    params = params or OnePipeParams()
    try:
        topology = topology or topology_of(state)
        dirs = directions(topology)  # every port up or down by tier; no route may climb twice
        source = beacon_ip(topology)
    except TopologyError as exc:
        raise OnePipeControlError(f"1Pipe cannot run on topology {state.topology!r}: {exc}") from None
    if not dirs:
        raise OnePipeControlError(f"the topology under prefix {prefix!r} has no switch")
    if controller is None:
        controller = bool(controller_nodes(topology))
    peers = peers_of(topology)
    out = {sw: control(prefix, sw, "onepipe_enable", directions=d, params=params.to_dict(), beacon_ip=source,
                       controller=controller, domain=prefix, peers=peers.get(sw, {}))
           for sw, d in dirs.items()}
    tell_controllers(prefix, state, params)
    return out


def tell_controllers(prefix: str, state: RunState, params: OnePipeParams) -> list[str]:
    """Give every replica of the topology's 1Pipe controller the switches' parameters, so that it
    polls and times at their T_beacon (the daemon's ``onepipe_params``); the replicas told. One
    that does not answer (stopped by ``netstack fault kill``) keeps what it had: it is skipped."""
    from ..runtime import control

    told = []
    for d in state.daemons:
        if d.kind == CONTROLLER_KIND and d.control:
            with contextlib.suppress(ControlError, OSError):
                control(prefix, d.key, "onepipe_params", params=params.to_dict())
                told.append(d.key)
    return told


def disable_all(prefix: str) -> dict[str, bool]:
    """Turn 1Pipe off in every switch; ``{switch: whether it was on}``."""
    from ..runtime import control, load_state

    state = load_state(prefix)
    return {sw: control(prefix, sw, "onepipe_disable") for sw in switches_of(state)}


def status_all(prefix: str) -> dict[str, Any]:
    """``{switch: onepipe_status}`` (None where 1Pipe is off)."""
    from ..runtime import control, load_state

    state = load_state(prefix)
    return {sw: control(prefix, sw, "onepipe_status") for sw in switches_of(state)}


# ----------------------------------------------------------------- the common control verbs
# (docs/architecture.md "Errors and control verbs": every protocol's enable, disable, status;
# 1Pipe's run and kill are netstack.onepipe.runner's)


def enable(prefix: str, params: OnePipeParams | None = None, controller: bool | None = None, *,
           topology: Any = None) -> dict[str, Any]:
    """1Pipe on in every switch: :func:`enable_all`, under the verb every protocol's control module has."""
    return enable_all(prefix, params, controller, topology=topology)


def disable(prefix: str) -> dict[str, bool]:
    """1Pipe off in every switch: :func:`disable_all`."""
    return disable_all(prefix)


def status(prefix: str) -> dict[str, Any]:
    """Every switch's 1Pipe state: :func:`status_all`."""
    return status_all(prefix)


__all__ = ["CONTROLLER_KIND", "OnePipeControlError", "controller_nodes", "directions", "disable", "disable_all",
           "enable", "enable_all", "peers_of", "status", "status_all", "switch_handlers", "switch_status",
           "switches_of"]
