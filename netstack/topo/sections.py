"""The protocols' own top-level tables of a topology file (``[onepipe]``, ``[tcsack]``), checked
and applied for both runtimes.

The loader (:mod:`netstack.topo.validate`) only accepts the tables a protocol registered
(``netstack.protocols`` ``sections``) and copies them into :attr:`Topology.sections`; what is in
one is for its protocol's module to check (``validate_section(topology, table, path) ->
options``, a TopologyError naming the field otherwise), as the link-end features are
(:mod:`netstack.switch.plugins`). ``netstack up`` checks every section before it builds anything,
records the checked options in the run state (``RunState.sections``) and calls each module's
``on_up(topology, prefix, options, say)`` once every daemon is ready; the virtual-time network calls its
``sim_attach(network, options)``, where the module has one, once it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import protocols
from .classes import Topology, TopologyError


def checked(topology: Topology) -> dict[str, dict[str, Any]]:
    """``{section: its checked options}`` for every protocol table of ``topology``; one
    TopologyError with every problem of every table."""
    owned = protocols.sections()
    out: dict[str, dict[str, Any]] = {}
    errors: list[tuple[str, str]] = []
    for name, table in sorted(topology.sections.items()):
        try:
            out[name] = protocols.load(owned[name]).validate_section(topology, table, name)
        except TopologyError as exc:
            errors.extend(exc.errors)
    if errors:
        raise TopologyError(errors, topology.source)
    return out


def apply_up(topology: Topology, prefix: str, options: dict[str, dict[str, Any]],
             say: Callable[[str], Any]) -> dict[str, Any]:
    """Each section's ``on_up`` on ``topology`` running under ``prefix``: ``{section: what it returned}``."""
    owned = protocols.sections()
    return {name: protocols.load(owned[name]).on_up(topology, prefix, opts, say)
            for name, opts in sorted(options.items())}


def attach_sim(network: Any, options: dict[str, dict[str, Any]]) -> list[str]:
    """Each section's ``sim_attach`` on a virtual-time network, for those that have one; their names."""
    owned = protocols.sections()
    done = []
    for name, opts in sorted(options.items()):
        hook = getattr(protocols.load(owned[name]), "sim_attach", None)
        if hook is not None:
            hook(network, opts)
            done.append(name)
    return done


__all__ = ["apply_up", "attach_sim", "checked"]
