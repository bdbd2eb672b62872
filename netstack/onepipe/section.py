"""1Pipe from a topology file: ``[onepipe]`` turns barrier aggregation on in every switch as soon
as ``netstack up`` has started them, and in ``netstack.sim``'s switches alike::

    [onepipe]
    t_beacon = "3ms"        # the beacon interval (default: the paper's 3 us, scaled 1000x)
    timeout_beacons = 10    # an input silent this many intervals leaves the minimum (§6)
    controller = true       # reliable 1Pipe's controller releases failed inputs (design topic §8 step 7)

Every key is optional; an empty ``[onepipe]`` is ``netstack onepipe enable`` with its defaults.
``controller`` defaults to whether the topology has an ``onepipe-controller`` node. 1Pipe runs in
every switch or in none (1Pipe §3: a barrier is the minimum over *all* of a switch's inputs), so
it is a table of the topology, not a feature of a link end. The checks of the topology itself
(:func:`.topology.validate`: every switch has a tier, routing is a DAG, no route climbs twice)
run when the file is checked, so ``netstack up`` refuses such a topology before it builds anything.

In ``netstack.sim`` the switches aggregate barriers with ``controller = false`` whatever the
table says: a virtual-time controller belongs to the reliable scenario (``onepipe --mode
reliable``), which enables 1Pipe itself with its own parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ConfigError
from ..topo.model import Topology, TopologyError, parse_delay
from .params import OnePipeParams

KEYS = ("t_beacon", "timeout_beacons", "controller")


def validate_section(topology: Topology, table: dict[str, Any], path: str) -> dict[str, Any]:
    """``{"t_beacon_ns", "timeout_beacons", "controller"}``, or a TopologyError naming every bad
    field (``onepipe.t_beacon``) and whatever keeps 1Pipe off this topology."""
    from .control import controller_nodes
    from .topology import validate

    errors: list[tuple[str, str]] = []
    if not isinstance(table, dict):
        raise TopologyError([(path, f"must be a table, not {type(table).__name__}")], topology.source)
    errors += [(f"{path}.{k}", f"unknown key (allowed: {', '.join(KEYS)})") for k in table if k not in KEYS]
    d = OnePipeParams()
    t_beacon = d.t_beacon_ns
    if "t_beacon" in table:
        try:
            t_beacon = parse_delay(table["t_beacon"])
        except (TypeError, ValueError) as exc:
            errors.append((f"{path}.t_beacon", str(exc)))
        if t_beacon < 1:
            errors.append((f"{path}.t_beacon", "must be above 0"))
    timeout = table.get("timeout_beacons", d.timeout_beacons)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 2:
        # (§6: an input leaves the minimum after silence of several beacon intervals; one would
        # time out an input whose beacon is merely late)
        errors.append((f"{path}.timeout_beacons", f"must be a whole number of at least 2, got {timeout!r}"))
        timeout = d.timeout_beacons
    controller = table.get("controller", bool(controller_nodes(topology)))
    if not isinstance(controller, bool):
        errors.append((f"{path}.controller", f"must be true or false, got {controller!r}"))
    if not errors:
        try:
            params = OnePipeParams.beaconing(t_beacon, timeout)
        except ConfigError as exc:
            errors.append((path, f"t_beacon {t_beacon} ns with timeout_beacons {timeout}: {exc.problem}"))
    try:
        validate(topology)
    except TopologyError as exc:
        errors += [(f"{path} (the topology)", f"{where}: {problem}" if where else problem)
                   for where, problem in exc.errors]
    if errors:
        raise TopologyError(errors, topology.source)
    return {"t_beacon_ns": params.t_beacon_ns, "timeout_beacons": params.timeout_beacons, "controller": controller}


def params_of(options: dict[str, Any]) -> OnePipeParams:
    return OnePipeParams.beaconing(options["t_beacon_ns"], options["timeout_beacons"])


def on_up(topology: Topology, prefix: str, options: dict[str, Any], say: Callable[[str], Any]) -> str:
    """``netstack onepipe enable`` on the testbed just started (:func:`.control.enable`)."""
    from .control import enable

    done = enable(prefix, params_of(options), options["controller"], topology=topology)
    return (f"1Pipe on in {len(done)} switches (T_beacon {options['t_beacon_ns'] / 1e6:g} ms, "
            f"controller {'on' if options['controller'] else 'off'})")


def sim_attach(network: Any, options: dict[str, Any]) -> None:
    """1Pipe on in every switch of a virtual-time network (module docstring: no controller)."""
    from . import feature
    from .control import peers_of
    from .topology import beacon_ip, validate

    topology = network.topology
    directions = validate(topology)
    peers = peers_of(topology)
    for name, sn in network.switches.items():
        feature.enable(sn.switch, directions[name], params_of(options), network.now, beacon_ip=beacon_ip(topology),
                       domain=topology.prefix, peers=peers.get(name, {}))
        network.service(name)


__all__ = ["KEYS", "on_up", "params_of", "sim_attach", "validate_section"]
