"""The protocols netstack runs, and where each one plugs in.

The generic layers (the switch daemon, ``netstack.runtime``, the topology loader, the
virtual-time runtime) never name a protocol: they ask this registry. A protocol is a package
under ``netstack/`` (the worked example's is ``netstack/examples/ethcount/``, docs/extending.md)
with the same parts (docs/architecture.md, "Adding a protocol"):

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
- a **section** of a topology file (``sections``: a top-level table ``[<name>]`` -> the module whose
  ``validate_section(topology, table, path)`` checks it into options, whose ``on_up(topology, prefix,
  options, say)`` ``netstack up`` calls once every daemon is ready, and whose ``sim_attach(network,
  options)``, if it has one, ``netstack.sim`` calls once the network is built): for a protocol that
  is on for a whole testbed rather than on a link end (1Pipe in every switch, T/C-SACK's transfer
  parameters);
- **scenarios** for ``netstack sim`` and the benchmarks (``scenarios``: a module with ``SCENARIOS``);
- what it adds to the command line and the checks: its **commands** (modules in
  ``netstack/commands/``, or in its own package, with ``register(subparsers)``), its **benches**
  (``netstack bench NAME``: the module with ``main(args)`` and a one-line description), its **fuzz** targets
  (``netstack fuzz NAME``: what the campaign fuzzes and the invariant it checks; the runner is
  ``netstack.fuzz.run_NAME``) and its **typed** modules (``mypy --strict``, tests/test_typing.py).

The CLI's, ``netstack bench``'s, ``netstack fuzz``'s and the type check's lists are built here:
the generic entries below, and each protocol's where ``"*"`` stands, in registry order (a few
protocol entries are named in the order lists to keep the help texts' order as it was).

Everything here is a module *name*: nothing is imported until it is used, so reading this
registry costs nothing and cannot create an import cycle.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class ProtocolPlugin:
    """Where one protocol plugs in (module names; see the module docstring)."""

    name: str
    #: the paper, by title
    paper: str
    control: str | None = None
    features: Mapping[str, str] = field(default_factory=dict)
    node_kinds: Mapping[str, str] = field(default_factory=dict)
    #: top-level tables of a topology file it owns: ``[name]`` -> the module with ``validate_section``,
    #: ``on_up`` and, optionally, ``sim_attach`` (see the module docstring)
    sections: Mapping[str, str] = field(default_factory=dict)
    scenarios: str | None = None
    #: EtherTypes only switches may originate: a switch's edge ports drop them from hosts
    switch_only_ethertypes: tuple[int, ...] = ()
    #: CLI command modules, in ``netstack --help``'s order: names in ``netstack/commands/``, or a
    #: dotted module name for one kept in the protocol's own package (:func:`command_module`)
    commands: tuple[str, ...] = ()
    #: ``netstack bench`` benchmarks: name -> (module with ``main(args)``, one-line description)
    benches: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: ``netstack fuzz`` targets: name -> what it fuzzes and its invariant (runner: ``netstack.fuzz.run_<name>``)
    fuzz: Mapping[str, str] = field(default_factory=dict)
    #: modules or packages that must pass ``mypy --strict`` (the engines, at least)
    typed: tuple[str, ...] = ()
    #: ``netstack reproduce NAME``: the module whose ``PAPER`` (a ``netstack.reproduce.claims.PaperSpec``)
    #: lists the paper's experiments and turns their results into claims with verdicts
    reproduce: str | None = None
    #: ``netstack ui``: the module whose ``port_views(kind, status, ask)`` turns a daemon's answers into
    #: this protocol's per-port view, and, optionally, ``link_actions`` / ``link_action`` (netstack/ui)
    ui: str | None = None


PROTOCOLS: tuple[ProtocolPlugin, ...] = (
    ProtocolPlugin("linkguardian", "Masking Corruption Packet Losses in Datacenter Networks with Link-local "
                   "Retransmission (LinkGuardian)",
                   control="netstack.linkguardian.control",
                   commands=("lg", "corruptd"),
                   benches={"linkguardian": ("netstack.bench.linkguardian",
                                           "LinkGuardian Figs. 8-10: effective loss/link speed (virtual time + "
                                           "live check), TCP, FCT")},
                   fuzz={"linkguardian": "LinkGuardian on sw1-sw2: frames into sw2's receiver (sent on sw1's p-sw2) "
                                        "and into sw1's sender (sent on sw2's p-sw1), with and without a valid FCS "
                                        "(invariant: the stream h1 -> h2 stays complete and in order while frames "
                                        "the protocol is meant to withstand arrive; then, after forged "
                                        "LinkGuardian and PFC frames with a valid FCS, the receiver's state stayed "
                                        "bounded and a new stream is complete and in order)"},
                   typed=("netstack.linkguardian.sender", "netstack.linkguardian.receiver",
                          "netstack.linkguardian.params", "netstack.linkguardian.corruptd",
                          "netstack.linkguardian.feature", "netstack.linkguardian.control",
                          "netstack.linkguardian.topology"),
                   features={"linkguardian": "netstack.linkguardian.topology"},
                   scenarios="netstack.linkguardian.scenarios",
                   reproduce="netstack.linkguardian.reproduce",
                   ui="netstack.linkguardian.uiview",
                   switch_only_ethertypes=(0xABCD,)),  # its tags (headers.registry EtherType.LINKGUARDIAN)
    ProtocolPlugin("dta", "A Novel Transport Protocol for Network Telemetry Collection (Direct Telemetry Access)",
                   control="netstack.dta.control",
                   commands=("dta",),
                   benches={"dta": ("netstack.bench.dta",
                                  "DTA reports/s ingested end to end vs a naive CPU collector; Fig. 7 and Fig. 9")},
                   fuzz={"dta": "DTA's translator on sw2: reports and anything else from h2 into p-h2, RoCEv2 "
                               "responses and anything else from c1 into p-c1, while h1's genuine Key-Writes flow "
                               "(invariant: afterwards, every genuine Key-Write is executed by the collector and "
                               "reads back its value)"},
                   typed=("netstack.dta.translator", "netstack.dta.requester", "netstack.dta.counters",
                          "netstack.dta.control", "netstack.dta.collector", "netstack.dta.memory",
                          "netstack.dta.keywrite", "netstack.dta.reporter", "netstack.dta.query",
                          "netstack.dta.feature", "netstack.dta.topology", "netstack.dta.layout",
                          "netstack.dta.persist", "netstack.dta.options", "netstack.dta.simhosts",
                          "netstack.dta.scenarios", "netstack.dta.postcard", "netstack.dta.hopreport"),
                   # a translator on the collector's ToR, declared per link end (netstack/dta/topology.py)
                   features={"dta": "netstack.dta.topology"},
                   node_kinds={"collector": "netstack.dta.control"},
                   scenarios="netstack.dta.scenarios",
                   reproduce="netstack.dta.reproduce",
                   ui="netstack.dta.uiview"),
    ProtocolPlugin("onepipe", "1Pipe: Scalable Total Order Communication in Data Center Networks",
                   control="netstack.onepipe.control",
                   commands=("onepipe",),
                   benches={"onepipe": ("netstack.bench.onepipe",
                                      "1Pipe Figs. 8-14 against the authors' data; its testbed; the baselines")},
                   fuzz={"onepipe": "1Pipe on the onepipe topology: beacons, barriers, DATA and anything else from "
                                   "h1 into tor1's p-h1 and from spine1 into tor1's p-spine1 (with and without a "
                                   "valid FCS) while four 1Pipe processes scatter (invariant: netstack onepipe "
                                   "check passes on their delivery logs: total order, FIFO, causality, no "
                                   "duplicates; every message delivered or reported failed; the controller alive)"},
                   typed=("netstack.onepipe.params", "netstack.onepipe.clock", "netstack.onepipe.endpoint",
                          "netstack.onepipe.barrier", "netstack.onepipe.feature", "netstack.onepipe.topology",
                          "netstack.onepipe.control", "netstack.onepipe.check", "netstack.onepipe.api",
                          "netstack.onepipe.store", "netstack.onepipe.etcd", "netstack.onepipe.ctlwire",
                          "netstack.onepipe.reliable", "netstack.onepipe.controller", "netstack.onepipe.ctlnode",
                          "netstack.onepipe.auth", "netstack.onepipe.authbench", "netstack.onepipe.actions",
                          "netstack.onepipe.recovery", "netstack.onepipe.rstate", "netstack.onepipe.section",
                          "netstack.onepipe.baselines", "netstack.onepipe.paperdata", "netstack.onepipe.ctlcore",
                          "netstack.onepipe.kv.wire", "netstack.onepipe.kv.shard", "netstack.onepipe.kv.client",
                          "netstack.onepipe.kv.twopc", "netstack.onepipe.kv.workload", "netstack.onepipe.kv.checker",
                          "netstack.onepipe.kv.simkv", "netstack.onepipe.kv.scenario", "netstack.onepipe.kv.sweep",
                          "daemons.onepipe_controller"),
                   # reliable 1Pipe's controller (design topic §8): its replicas run on this node
                   node_kinds={"onepipe-controller": "netstack.onepipe.ctlnode"},
                   # [onepipe]: 1Pipe on in every switch from netstack up on (netstack/onepipe/section.py)
                   sections={"onepipe": "netstack.onepipe.section"},
                   scenarios="netstack.onepipe.scenarios",
                   reproduce="netstack.onepipe.reproduce",
                   ui="netstack.onepipe.uiview"),
    ProtocolPlugin("tcd", "Congestion Detection in Lossless Networks (TCD)",
                   control="netstack.tcd.control",
                   commands=("tcd",),
                   benches={"tcd": ("netstack.bench.tcd",
                                  "TCD §3.1 marks and port states at 40 Gbit/s (virtual time); FCT slowdown on the "
                                  "tcd-leafspine fabric, DCQCN / TIMELY with and without TCD; --live: §3.1 on the "
                                  "testbed")},
                   fuzz={"tcd": "TCD on tcd-single: TCD data, CNPs, PFC and anything else from r0 into sw3's p-r0, "
                               "whose egress carries TCD's marker, during a DCQCN flow s0 -> r0 (invariant: both "
                               "ends of the flow run to the end; per class, the detector's times in its three "
                               "states add up to the time since it was created, no counter negative, no clock "
                               "regression)"},
                   typed=("netstack.tcd.detector", "netstack.tcd.params", "netstack.tcd.marker", "netstack.tcd.dcqcn",
                          "netstack.tcd.np", "netstack.tcd.pacing", "netstack.tcd.timely", "netstack.tcd.cc",
                          "netstack.tcd.paper", "netstack.tcd.fabric", "netstack.tcd.compare"),
                   features={"tcd": "netstack.tcd.topology"},
                   scenarios="netstack.tcd.scenarios",
                   reproduce="netstack.tcd.reproduce",
                   ui="netstack.tcd.uiview"),
    ProtocolPlugin("tcsack", "An Updated ACK mechanism based on RDMA (T/C-SACK)",
                   control="netstack.tcsack.control",
                   commands=("tcsack",),
                   benches={"tcsack": ("netstack.bench.tcsack",
                                     "T/C-SACK vs go-back-N (RoCE RC) vs kernel TCP CUBIC and BBR: goodput and the "
                                     "achieved wire rate vs the preset under loss, corruption and delay")},
                   fuzz={"tcsack": "T/C-SACK transfers h1 -> h2: data, ACKs and anything else from h1 into sw1's "
                                  "p-h1 toward the receiver and from h2 into sw2's p-h2 toward the sender, "
                                  "spoofing the peers' addresses and ports (invariant: every transfer completes "
                                  "and the receiver's SHA-256 matches the sender's)"},
                   typed=("netstack.tcsack.common", "netstack.tcsack.sender", "netstack.tcsack.receiver",
                          "netstack.tcsack.gbn", "netstack.tcsack.params", "netstack.tcsack.rangeset",
                          "netstack.tcsack.section"),
                   # [tcsack]: the testbed's transfer parameters (netstack/tcsack/section.py)
                   sections={"tcsack": "netstack.tcsack.section"},
                   scenarios="netstack.tcsack.scenarios",
                   reproduce="netstack.tcsack.reproduce"),
    # the worked example (docs/extending.md): everything it has lives in netstack/examples/ethcount/
    ProtocolPlugin("ethcount", "none: a worked example that counts the frames of one EtherType per switch port",
                   control="netstack.examples.ethcount.control",
                   commands=("netstack.examples.ethcount.command",),
                   typed=("netstack.examples.ethcount",),
                   features={"ethcount": "netstack.examples.ethcount.topology"},
                   scenarios="netstack.examples.ethcount.scenarios"),
)

#: scenario modules that belong to no protocol (the simulator's generic traffic, the TCP model)
GENERIC_SCENARIOS = ("netstack.sim.scenarios", "netstack.sim.tcp")

#: where a list below puts every protocol's entries it does not name, in registry order
PROTOCOLS_HERE = "*"
#: the CLI's commands that belong to no protocol, in ``netstack --help``'s order
GENERIC_COMMANDS = ("demo", "testbed", "ls", PROTOCOLS_HERE, "sim", "dask", "bench", "reproduce", "dissect",
                    "compose", "node", "keys", "fault", "fuzz", "capture", "link", "metrics", "wireshark", "doctor",
                    "ui")
#: ``netstack bench``'s benchmarks that belong to no protocol
GENERIC_BENCHES: Mapping[str, tuple[str, str]] = {
    "headers": ("netstack.bench.headers", "encode/decode rate per header: fast codec vs Scapy"),
    "forwarding": ("netstack.bench.forwarding",
                   "frames/s through 1 and 2 userspace switches vs a bare forwarder and the kernel bridge"),
    "sim": ("netstack.bench.sim", "the virtual-time runtime: events/s and cost per frame per scenario vs the bare "
                                  "event loop; LinkGuardian Fig. 8 at the paper's 25/100 Gbit/s"),
    "auth": ("netstack.bench.auth", "authenticated frames: seal/open per frame vs a copy and a fresh CMAC; "
                                    "LinkGuardian's effective link speed with keys off vs on (live)"),
}
#: the order ``netstack bench --help`` lists them in (the order they were added)
BENCH_ORDER = ("headers", "forwarding", "dta", "linkguardian", "tcsack", "onepipe", "sim", "auth", PROTOCOLS_HERE)
#: ``netstack fuzz``'s targets that belong to no protocol
GENERIC_FUZZ: Mapping[str, str] = {
    "switch": "plain forwarding and edge filtering: frames from h1 into sw1's edge port p-h1 (invariant: a "
              "sequenced UDP stream h1 -> h2 through that port arrives complete and in order, and h1 pings h2 "
              "afterwards)",
}
#: the order ``netstack fuzz --help`` lists them in (the order they were implemented)
FUZZ_ORDER = ("switch", "linkguardian", "dta", "onepipe", "tcsack", PROTOCOLS_HERE)
#: typed modules and packages that belong to no protocol (``mypy --strict``, tests/test_typing.py)
GENERIC_TYPED = ("headers", "netstack.io.pfcgate", "netstack.engine", "netstack.protocols", "netstack.ethernet",
                 "netstack.errors", "netstack.auth", "netstack.switch", "netstack.sim.reno", "netstack.sim.loop",
                 "netstack.progress", "netstack.typecheck", "netstack.reproduce", "netstack.lab",
                 "netstack.container.lab")


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


#: the top-level tables of a topology file that belong to no protocol (netstack.topo)
GENERIC_SECTIONS = ("topology", "defaults", "nodes", "links")


def sections() -> dict[str, str]:
    """Top-level topology tables protocols own (``[onepipe]``) -> the module that checks and applies them."""
    out: dict[str, str] = {}
    for p in PROTOCOLS:
        for name, module in p.sections.items():
            if name in out or name in GENERIC_SECTIONS:
                raise RuntimeError(f"topology section [{name}] registered twice ({module})")
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


def _arranged(generic: Mapping[str, T], contributed: Mapping[str, Mapping[str, T]], order: tuple[str, ...],
              what: str) -> dict[str, T]:
    """``generic`` and every protocol's ``contributed`` entries in ``order``: the names it gives where
    they stand, every other entry where :data:`PROTOCOLS_HERE` stands (the protocols' in registry
    order). A name registered twice, or named in ``order`` and registered by nobody, is an error."""
    entries: dict[str, T] = dict(generic)
    for proto, own in contributed.items():
        for name, value in own.items():
            if name in entries:
                raise RuntimeError(f"{what} {name!r} registered twice ({proto})")
            entries[name] = value
    named = [n for n in order if n != PROTOCOLS_HERE]
    if missing := [n for n in named if n not in entries]:
        raise RuntimeError(f"{what} order names {missing}, which nobody registers")
    rest = [n for n in entries if n not in named]
    out: dict[str, T] = {}
    for n in order:
        for m in (rest if n == PROTOCOLS_HERE else [n]):
            out[m] = entries[m]
    return out


def commands() -> tuple[str, ...]:
    """The CLI's command modules by registered name, in ``netstack --help``'s order (the module of
    each: :func:`command_module`)."""
    own = {p.name: dict.fromkeys(p.commands, p.name) for p in PROTOCOLS}
    generic = {c: "" for c in GENERIC_COMMANDS if c != PROTOCOLS_HERE}
    return tuple(_arranged(generic, own, GENERIC_COMMANDS, "command"))


def command_module(name: str) -> str:
    """The module of a command :func:`commands` names: ``netstack/commands/<name>.py``, or ``name``
    itself when it is dotted (a command module in the protocol's own package)."""
    return name if "." in name else f"netstack.commands.{name}"


def benches() -> dict[str, tuple[str, str]]:
    """``netstack bench``'s benchmarks: name -> (module with ``main(args)``, description), in its help's order."""
    return _arranged(GENERIC_BENCHES, {p.name: p.benches for p in PROTOCOLS}, BENCH_ORDER, "benchmark")


#: the order ``netstack reproduce`` takes the papers in (``all``) and lists them in its help
REPRODUCE_ORDER = ("linkguardian", "onepipe", "tcd", "dta", "tcsack")


def reproduce_modules() -> dict[str, str]:
    """``netstack reproduce``'s papers: protocol name -> the module with ``PAPER``, in
    :data:`REPRODUCE_ORDER` (then any other protocol's that has one, in registry order)."""
    have = {p.name: p.reproduce for p in PROTOCOLS if p.reproduce}
    return {n: have[n] for n in (*[n for n in REPRODUCE_ORDER if n in have], *[n for n in have
                                                                            if n not in REPRODUCE_ORDER])}


def fuzz_targets() -> dict[str, str]:
    """``netstack fuzz``'s targets: name -> what it fuzzes and its invariant, in its help's order (the
    runner of target NAME is ``netstack.fuzz.run_NAME``)."""
    return _arranged(GENERIC_FUZZ, {p.name: p.fuzz for p in PROTOCOLS}, FUZZ_ORDER, "fuzz target")


def typed_modules() -> tuple[str, ...]:
    """Every module or package that must pass ``mypy --strict`` (tests/test_typing.py runs it on them)."""
    return GENERIC_TYPED + tuple(m for p in PROTOCOLS for m in p.typed)


__all__ = ["GENERIC_BENCHES", "GENERIC_COMMANDS", "GENERIC_FUZZ", "GENERIC_SCENARIOS", "GENERIC_TYPED", "PROTOCOLS",
           "PROTOCOLS_HERE", "ProtocolPlugin", "benches", "command_module", "commands", "control_modules", "features",
           "fuzz_targets", "load", "node_kinds", "scenario_modules", "sections", "switch_only_ethertypes",
           "typed_modules", "GENERIC_SECTIONS"]
