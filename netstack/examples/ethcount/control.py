"""ethcount's control plug-in: what every switch daemon serves for it, and what the CLI calls.

**Daemon side.** Every switch daemon loads each registered control module at start (the registry's
``control=``) and serves the commands its :func:`switch_handlers` returns on the daemon's control
socket, next to its own (``status``, ``set_port``...):

- ``ethcount_enable`` ``{"port", "ethertype"?, "egress"?}`` puts a counter on the port (a fresh one,
  from zero, replacing any it had);
- ``ethcount_disable`` ``{"port"}`` removes it and answers with its last counts;
- ``ethcount_status`` ``{"port"?}``: every counted port's counts.

:func:`switch_status` is ethcount's part of the daemon's own ``status`` (``netstack status`` shows
it under ``protocols.ethcount``); None while no port is counted, so that it then says nothing.

A counter enabled here lives as long as the daemon: one the topology file declares is attached
again when the daemon restarts, one enabled by hand is not.

**Orchestration side.** :func:`enable`, :func:`disable` and :func:`status` do the same on the
testbed running under a prefix, over the daemons' control sockets (``netstack.runtime.control``):
the verbs every protocol's control module has (docs/architecture.md "Errors and control verbs").
"""

from __future__ import annotations

from typing import Any

from netstack.errors import ConfigError, NetstackError
from netstack.io.control import ControlError

from .feature import counters_on, make_feature
from .header import DEFAULT_ETHERTYPE


class EthCountError(NetstackError, RuntimeError):
    """An ethcount operation on the running testbed cannot be done: the message says why (the CLI
    prints it as one line and exits 2, as for every NetstackError)."""


# =========================================================================== switch daemon side
def switch_status(shell: Any) -> dict[str, Any] | None:
    """ethcount's part of the switch daemon's ``status``; None while no port is counted."""
    found = counters_on(shell.switch)
    if not found:
        return None
    return {"ports": {name: f.status() for name, f in sorted(found.items())}}


def switch_handlers(shell: Any) -> dict[str, Any]:
    """The control commands ethcount adds to a switch daemon (``shell``: its ``SwitchShell``, whose
    ``switch``, ``port_of(req)``, ``flush()`` and ``log`` are what a plug-in uses)."""

    def ethcount_enable(req: dict[str, Any]) -> dict[str, Any]:
        name = shell.port_of(req)
        egress = req.get("egress", False)
        if not isinstance(egress, bool):
            raise ControlError(f"egress must be true or false, not {egress!r}")
        try:
            feature = make_feature(req.get("ethertype", DEFAULT_ETHERTYPE), egress)
        except ConfigError as exc:
            raise ControlError(f"cannot count on {name}: {exc}") from None  # the client gets the reason
        old = counters_on(shell.switch).get(name)
        if old is not None:
            shell.switch.detach_feature(name, old)
        shell.switch.attach_feature(name, feature)
        shell.flush()  # the port's hooks changed: let the daemon hand over and re-arm now
        shell.log.info("ethcount on %s: %s", name, feature.status()["ethertype"])
        return {"port": name, **feature.status()}

    def ethcount_disable(req: dict[str, Any]) -> dict[str, Any]:
        name = shell.port_of(req)
        feature = counters_on(shell.switch).get(name)
        if feature is None:
            return {"port": name, "ethertype": None}
        shell.switch.detach_feature(name, feature)
        shell.flush()
        shell.log.info("ethcount off on %s", name)
        return {"port": name, **feature.status()}

    def ethcount_status(req: dict[str, Any]) -> dict[str, Any]:
        found = counters_on(shell.switch)
        if req.get("port") is not None:
            name = shell.port_of(req)
            if name not in found:
                raise ControlError(f"no ethcount counter on port {name} (ethcount_enable first)")
            found = {name: found[name]}
        return {"ports": {name: f.status() for name, f in sorted(found.items())}}

    return {"ethcount_enable": ethcount_enable, "ethcount_disable": ethcount_disable,
            "ethcount_status": ethcount_status}


# =========================================================================== orchestration
# netstack.runtime is imported inside the functions: every switch daemon imports this module for
# its handlers above, and has no use for the runtime (nor its start-up cost)
def _switches(prefix: str) -> list[str]:
    """The switch nodes of the testbed running under ``prefix`` (its run state, a ``RunState``)."""
    from netstack.runtime import load_state

    return [d.node for d in load_state(prefix).daemons if d.kind == "switch"]


def _check_switch(prefix: str, node: str) -> None:
    switches = _switches(prefix)
    if node not in switches:
        raise EthCountError(f"{node!r} is not a switch of the testbed {prefix!r} (switches: {', '.join(switches)})")


def enable(prefix: str, node: str, port: str, ethertype: int = DEFAULT_ETHERTYPE,
           egress: bool = False) -> dict[str, Any]:
    """Count ``ethertype`` on switch ``node``'s ``port`` (from zero); the counter's first status."""
    from netstack.runtime import control

    _check_switch(prefix, node)
    answer: dict[str, Any] = control(prefix, node, "ethcount_enable", port=port, ethertype=ethertype, egress=egress)
    return answer


def disable(prefix: str, node: str, port: str) -> dict[str, Any]:
    """Stop counting on ``node``'s ``port``; the counter's last status (``ethertype`` None if there was none)."""
    from netstack.runtime import control

    _check_switch(prefix, node)
    answer: dict[str, Any] = control(prefix, node, "ethcount_disable", port=port)
    return answer


def status(prefix: str) -> dict[str, Any]:
    """``{switch: its ethcount_status, or {"error": why}}`` for every switch daemon of the testbed."""
    from netstack.runtime import control

    out: dict[str, Any] = {}
    for node in _switches(prefix):
        try:
            out[node] = control(prefix, node, "ethcount_status")
        except (ControlError, OSError) as exc:  # one daemon down must not hide the others' counts
            out[node] = {"error": str(exc)}
    return out


__all__ = ["EthCountError", "disable", "enable", "status", "switch_handlers", "switch_status"]
