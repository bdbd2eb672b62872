"""The protocols netstack runs, and where each one plugs in.

The generic layers (the switch daemon, ``netstack.runtime``, the topology loader, the
virtual-time runtime) never name a protocol: they ask this registry. A protocol is a package
under ``netstack/`` with the same parts (docs/architecture.md, "Adding a protocol"):

- sans-IO engines;
- a switch **feature** a topology file can put on a link end (``features``: the key in
  ``[links.features.<end>]`` -> the module with ``validate_link`` and ``attach``);
- a **control** plug-in (``control``: the module with the orchestration functions the CLI,
  the demo and the benchmarks call and, if the protocol runs in switches, ``switch_handlers(shell)``:
  the control commands every switch daemon serves for it);
- **node kinds** of its own (``node_kinds``: a topology node kind -> the module whose
  ``node_daemon(topology, built, node, run_dir, prefix, options)`` says which daemons such a node
  runs, and whose ``NODE_OPTIONS`` names the ``netstack up`` options it takes; the contract is
  ``netstack.runtime``'s docstring; ``SHARES_RUN_DIR = True`` when its daemons use other nodes'
  control sockets, so that containers of one deployment share their run directory,
  ``netstack.container.compose``);
- **scenarios** for ``netstack sim`` and the benchmarks (``scenarios``: a module with ``SCENARIOS``).

Everything here is a module *name*: nothing is imported until it is used, so reading this
registry costs nothing and cannot create an import cycle.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType


@dataclass(frozen=True)
class ProtocolPlugin:
    """Where one protocol plugs in (module names; see the module docstring)."""

    name: str
    #: the paper, by title
    paper: str
    control: str | None = None
    features: Mapping[str, str] = field(default_factory=dict)
    node_kinds: Mapping[str, str] = field(default_factory=dict)
    scenarios: str | None = None
    #: EtherTypes only switches may originate: a switch's edge ports drop them from hosts
    switch_only_ethertypes: tuple[int, ...] = ()


PROTOCOLS: tuple[ProtocolPlugin, ...] = (
    ProtocolPlugin("linkguardian", "Masking Corruption Packet Losses in Datacenter Networks with Link-local "
                   "Retransmission (LinkGuardian)",
                   control="netstack.linkguardian.control",
                   features={"linkguardian": "netstack.linkguardian.topology"},
                   scenarios="netstack.linkguardian.scenarios",
                   switch_only_ethertypes=(0xABCD,)),  # its tags (headers.registry EtherType.LINKGUARDIAN)
    ProtocolPlugin("dta", "A Novel Transport Protocol for Network Telemetry Collection (Direct Telemetry Access)",
                   control="netstack.dta.control",
                   node_kinds={"collector": "netstack.dta.control"}),
    ProtocolPlugin("onepipe", "1Pipe: Scalable Total Order Communication in Data Center Networks",
                   control="netstack.onepipe.control",
                   # reliable 1Pipe's controller (design topic §8): its replicas run on this node
                   node_kinds={"onepipe-controller": "netstack.onepipe.ctlnode"},
                   scenarios="netstack.onepipe.scenarios"),
    ProtocolPlugin("tcd", "Congestion Detection in Lossless Networks (TCD)",
                   control="netstack.tcd.control",
                   features={"tcd": "netstack.tcd.topology"},
                   scenarios="netstack.tcd.scenarios"),
    ProtocolPlugin("tcsack", "An Updated ACK mechanism based on RDMA (T/C-SACK)",
                   control="netstack.tcsack.control",
                   scenarios="netstack.tcsack.scenarios"),
)

#: scenario modules that belong to no protocol (the simulator's generic traffic, the TCP model)
GENERIC_SCENARIOS = ("netstack.sim.scenarios", "netstack.sim.tcp")


def load(module: str) -> ModuleType:
    return importlib.import_module(module)


def control_modules() -> list[str]:
    """Every protocol's control module; those with ``switch_handlers(shell)`` extend every switch
    daemon's control socket."""
    return [p.control for p in PROTOCOLS if p.control]


def features() -> dict[str, str]:
    """Topology feature name -> its module (``validate_link``, ``attach``)."""
    out: dict[str, str] = {}
    for p in PROTOCOLS:
        for name, module in p.features.items():
            if name in out:
                raise RuntimeError(f"feature {name!r} registered twice ({out[name]}, {module})")
            out[name] = module
    return out


def node_kinds() -> dict[str, str]:
    """Node kinds protocols add to a topology (beyond switch and host) -> the module that
    says which daemons they run (``node_daemon``)."""
    out: dict[str, str] = {}
    for p in PROTOCOLS:
        for kind, module in p.node_kinds.items():
            if kind in out or kind in ("switch", "host"):
                raise RuntimeError(f"node kind {kind!r} registered twice ({module})")
            out[kind] = module
    return out


def switch_only_ethertypes() -> tuple[int, ...]:
    """Every EtherType some protocol reserves to switches (edge ports drop them from hosts)."""
    return tuple(sorted({e for p in PROTOCOLS for e in p.switch_only_ethertypes}))


def scenario_modules() -> tuple[str, ...]:
    """Every module whose ``SCENARIOS`` ``netstack sim`` registers."""
    return GENERIC_SCENARIOS + tuple(p.scenarios for p in PROTOCOLS if p.scenarios)


__all__ = ["GENERIC_SCENARIOS", "PROTOCOLS", "ProtocolPlugin", "control_modules", "features", "load", "node_kinds",
           "scenario_modules", "switch_only_ethertypes"]
