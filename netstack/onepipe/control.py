"""1Pipe's control plug-in: what a switch daemon serves, and what orchestration calls.

Daemon side (:func:`switch_handlers`, loaded by every switch daemon through the protocol
registry, ``netstack.protocols``):

- ``onepipe_enable``: ``{"directions": {port: "up" | "down"}, "params": {...}}`` attaches the
  barrier feature to every port of the switch (``OnePipeParams`` fields);
- ``onepipe_disable``: detaches it;
- ``onepipe_status``: the aggregator's and every port's counters (``null`` when off).

Orchestration side: :func:`enable_all` turns 1Pipe on in every switch of a running testbed, with
each port's direction taken from the topology (``netstack.onepipe.topology``; design topic §3 in
docs/papers.md: up and down logical switches make routing a DAG), :func:`disable_all` turns it off, :func:`status_all`
collects every switch's status.
"""

from __future__ import annotations

import time
from typing import Any

from ..errors import ConfigError
from ..io.control import ControlError
from .params import OnePipeParams


class OnePipeControlError(RuntimeError):
    """A 1Pipe operation on the running testbed cannot be done: the message says why."""


# =========================================================================== switch daemon side
def switch_handlers(shell: Any) -> dict[str, Any]:
    """The control commands 1Pipe adds to a switch daemon (``shell``: its ``SwitchShell``)."""
    from . import feature

    def onepipe_enable(req: dict[str, Any]) -> dict[str, Any]:
        directions = req.get("directions")
        if not isinstance(directions, dict) or set(directions) != set(shell.ports):
            raise ControlError(f"directions must give every port of the switch: {sorted(shell.ports)}")
        try:
            params = OnePipeParams(**(req.get("params") or {}))
            feature.enable(shell.switch, directions, params, time.monotonic_ns(), beacon_ip=req.get("beacon_ip"))
        except (ConfigError, ValueError, TypeError) as exc:
            raise ControlError(f"cannot enable 1Pipe: {exc}") from None
        shell.flush()
        shell.log.info("1Pipe enabled (%s)", ", ".join(f"{p}:{d}" for p, d in sorted(directions.items())))
        return {"params": params.to_dict(), "directions": directions}

    def onepipe_disable(req: dict[str, Any]) -> bool:
        was = feature.disable(shell.switch)
        shell.flush()
        shell.log.info("1Pipe disabled" if was else "1Pipe disable: it was not enabled")
        return was

    def onepipe_status(req: dict[str, Any]) -> dict[str, Any] | None:
        return switch_status(shell)

    return {"onepipe_enable": onepipe_enable, "onepipe_disable": onepipe_disable, "onepipe_status": onepipe_status}


def switch_status(shell: Any) -> dict[str, Any] | None:
    """1Pipe's part of the switch daemon's ``status`` (``netstack status``): per-port counters,
    or None while 1Pipe is off in this switch."""
    from . import feature

    return feature.status(shell.switch, time.monotonic_ns())


# =========================================================================== orchestration
def switches_of(state: dict[str, Any]) -> list[str]:
    return [d["node"] for d in state.get("daemons", []) if d.get("kind") == "switch"]


def enable_all(prefix: str, params: OnePipeParams | None = None) -> dict[str, Any]:
    """Turn 1Pipe on in every switch of the run under ``prefix``; ``{switch: its answer}``."""
    from ..runtime import control, load_state, topology_of
    from ..topo.model import TopologyError
    from .topology import beacon_ip, validate

    state = load_state(prefix)
    params = params or OnePipeParams()
    try:
        topology = topology_of(state)
        dirs = validate(topology)  # every port up or down by tier; no route may climb twice
        source = beacon_ip(topology)
    except TopologyError as exc:
        raise OnePipeControlError(f"1Pipe cannot run on topology {state['topology']!r}: {exc}") from None
    if not dirs:
        raise OnePipeControlError(f"the topology under prefix {prefix!r} has no switch")
    return {sw: control(prefix, sw, "onepipe_enable", directions=d, params=params.to_dict(), beacon_ip=source)
            for sw, d in dirs.items()}


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


__all__ = ["OnePipeControlError", "disable_all", "enable_all", "status_all",
           "switch_handlers", "switch_status", "switches_of"]
