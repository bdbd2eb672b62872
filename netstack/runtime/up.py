"""``netstack up``: a topology's namespaces and veths, its switch daemons and the daemons its
protocols' node kinds ask for, started all or nothing, and the run state written."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .. import protocols
from ..topo import netns
from ..topo.model import Topology, load_topology
from ..topo.sections import apply_up as apply_sections
from ..topo.sections import checked as checked_sections
from .config import switch_config
from .daemons import DaemonSpec, _metrics_address, _popen_daemon, _spawn, _stop, _wait_ready
from .state import Daemon, RunLink, RunPort, RunState, RuntimeErrorNS, run_dir, stamped, state_path, write_state


def up(topology: Topology | None = None, prefix: str | None = None, *, apply_impairments: bool = True,
       progress: Any = None, options: Mapping[str, Any] | None = None) -> RunState:
    """Build ``topology`` (default: the shipped default topology) and start its daemons. All or
    nothing: on failure everything is removed again and :class:`RuntimeErrorNS` is raised.
    ``options`` go to the node kinds' ``node_daemon`` (``netstack.runtime``'s docstring)."""
    topology = topology or load_topology(None)
    prefix = prefix or topology.prefix
    options = dict(options or {})
    say = progress or (lambda msg: None)
    check_options(topology, options)
    check_keys(topology)
    sections = checked_sections(topology)  # (a TopologyError before anything is built)
    if prefix in netns.list_running():
        raise RuntimeErrorNS(f"a topology is already running under prefix {prefix!r}: "
                             f"'netstack down --prefix {prefix}' first, or choose another --prefix")
    rdir = run_dir(prefix)
    if rdir.exists():
        shutil.rmtree(rdir)  # leftovers of a crashed run whose namespaces are gone
    rdir.mkdir(parents=True)
    say(f"building {len(topology.nodes)} namespaces and {len(topology.links)} veth pairs (prefix {prefix})")
    try:
        built = netns.build(topology, prefix, apply_impairments=apply_impairments)
    except Exception:
        shutil.rmtree(rdir, ignore_errors=True)
        raise
    daemons: list[Daemon] = []
    try:
        for node in topology.switches:
            cfg_path = rdir / f"{node.name}.json"
            cfg_path.write_text(json.dumps(switch_config(topology, built, node.name), indent=2))
            sock = rdir / f"{node.name}.sock"
            log_path = rdir / f"{node.name}.log"
            argv = [sys.executable, "-m", "daemons.switch", "--config", str(cfg_path), "--control", str(sock)]
            metrics = _metrics_address(topology, daemons)
            pid = _spawn(prefix, node.name, argv, log_path, metrics)
            # (recorded at once: until the next spawn, nothing can have reaped it and freed its pid)
            daemons.append(stamped(Daemon(node.name, "switch", pid, str(sock), str(log_path), node.name, metrics)))
            say(f"started switch daemon {node.name} (pid {pid})")
        _start_node_daemons(topology, built, rdir, prefix, options, say, daemons)
        for d in daemons:
            _wait_ready(d)
    except BaseException:
        _stop(daemons)
        netns.teardown(prefix)
        shutil.rmtree(rdir, ignore_errors=True)
        raise
    state = dataclasses.replace(run_state(topology, built, prefix, daemons), sections=sections)
    write_state(state_path(prefix), state)
    _apply_sections(topology, prefix, sections, say)
    flappers = _start_flappers(topology, prefix, rdir, say)  # (they read the state)
    if flappers:
        state = dataclasses.replace(state, daemons=[*daemons, *flappers])
        write_state(state_path(prefix), state)
    return state


def _apply_sections(topology: Topology, prefix: str, sections: dict[str, dict[str, Any]], say: Any) -> None:
    """The protocols' ``[section]`` tables on the running testbed (1Pipe turned on in every
    switch...). All or nothing, as the rest of ``up``: if one fails, the testbed is taken down."""
    if not sections:
        return
    try:
        for name, done in apply_sections(topology, prefix, sections, say).items():
            say(f"[{name}]: {done}" if isinstance(done, str) else f"[{name}] applied")
    except BaseException as exc:
        from .down import down

        down(prefix)
        if isinstance(exc, Exception) and not isinstance(exc, RuntimeErrorNS):
            raise RuntimeErrorNS(f"the topology's [{', '.join(sorted(sections))}] could not be applied, so the "
                                 f"testbed was taken down again: {exc}") from exc
        raise


def run_state(topology: Topology, built: netns.BuiltTopology, prefix: str, daemons: list[Daemon]) -> RunState:
    """The state of ``topology`` built as ``built`` with ``daemons`` running, as of now."""
    return RunState(
        prefix=prefix, topology=topology.name, source=topology.source, started=time.time(),
        namespaces=dict(built.namespaces),
        ports=[RunPort(p.node, p.link, p.netns, p.ifname, p.mac, p.peer_node, p.fcs) for p in built.ports.values()],
        hosts={n.name: str(n.ip) for n in topology.nodes if n.ip is not None},
        links={link.name: RunLink(link.a.node, link.b.node, link.rate_bps, link.delay_ns, link.mtu, link.fcs)
               for link in topology.links},
        impairments={f"{n}/{link}": b for (n, link), b in built.impairments.items()},
        daemons=list(daemons),
    )


def _start_flappers(topology: Topology, prefix: str, rdir: Path, say: Any) -> list[Daemon]:
    """A ``netstack link LINK flap`` process per link the topology flaps (``[links.flap]``),
    started once the run state exists (it reads it); recorded as daemons of kind ``linkflap``
    (named ``flap-LINK``) so that ``netstack down`` stops them. Each leaves its link up."""
    out = []
    for link in topology.links:
        if link.flap is None:
            continue
        argv = [sys.executable, "-m", "netstack.cli", "link", link.name, "flap", *link.flap.argv(),
                "--prefix", prefix]
        log_path = rdir / f"flap-{link.name}.log"
        pid = _popen_daemon(argv, log_path, None).pid
        out.append(stamped(Daemon(link.name, "linkflap", pid, "", str(log_path), f"flap-{link.name}")))
        say(f"flapping link {link.name} ({' '.join(link.flap.argv())}; pid {pid})")
    return out


def check_keys(topology: Topology) -> None:
    """RuntimeErrorNS before anything is built if the topology's key file cannot be used."""
    path = topology.keys_path()
    if path is None:
        return
    from ..auth.keys import KeyFileError, load

    try:
        load(path)
    except KeyFileError as exc:
        raise RuntimeErrorNS(f"topology {topology.name!r}: {exc} ('netstack keys generate {path}' makes one)") from None


def node_options() -> dict[str, list[str]]:
    """``{option: [node kinds whose node_daemon takes it]}`` (their modules' ``NODE_OPTIONS``)."""
    out: dict[str, list[str]] = {}
    for kind, module in protocols.node_kinds().items():
        for name in getattr(protocols.load(module), "NODE_OPTIONS", ()):
            out.setdefault(name, []).append(kind)
    return out


def check_options(topology: Topology, options: Mapping[str, Any]) -> None:
    """RuntimeErrorNS for an option no node of ``topology`` takes (before anything is built)."""
    takes = node_options()
    present = {n.kind.value for n in topology.nodes}
    for name in options:
        kinds = takes.get(name)
        if kinds is None:
            raise RuntimeErrorNS(f"unknown option {name!r}; node kinds take: {', '.join(sorted(takes)) or 'none'}")
        if not present & set(kinds):
            raise RuntimeErrorNS(f"option --{name.replace('_', '-')} needs a node of kind {' or '.join(kinds)}; "
                                 f"topology {topology.name!r} has none")


def _node_daemons(module: str, topology: Topology, built: netns.BuiltTopology, node: Any, rdir: Path,
                  prefix: str, options: Mapping[str, Any]) -> list[DaemonSpec | Daemon]:
    """What ``node_daemon`` returns, as a list (``netstack.runtime``'s docstring: the contract)."""
    got = protocols.load(module).node_daemon(topology, built, node, rdir, prefix, options)
    if got is None:
        return []  # a protocol daemon that is not installed
    if all(isinstance(a, str) for a in got):
        return [DaemonSpec(list(got))]
    for item in got:
        if not isinstance(item, DaemonSpec | Daemon):
            raise RuntimeErrorNS(f"{module}.node_daemon returned {item!r}: not an argv, DaemonSpec or Daemon")
    return list(got)


def _start_node_daemons(topology: Topology, built: netns.BuiltTopology, rdir: Path, prefix: str,
                        options: Mapping[str, Any], say: Any, daemons: list[Daemon]) -> None:
    """Start (or record) the daemons of every node whose kind a protocol registered, appending
    to ``daemons`` as they start, so that a failure half-way stops those already running."""
    kinds = protocols.node_kinds()
    for node in topology.nodes:
        module = kinds.get(node.kind.value)
        if module is None:
            continue  # a plain host
        for item in _node_daemons(module, topology, built, node, rdir, prefix, options):
            if isinstance(item, Daemon):
                daemons.append(stamped(item))
                say(f"started {item.kind} {item.key} (pid {item.pid})")
                continue
            name = f"{node.name}-{item.suffix}" if item.suffix else node.name
            sock, log_path = rdir / f"{name}.sock", rdir / f"{name}.log"
            metrics = _metrics_address(topology, daemons)
            pid = _spawn(prefix, node.name, [*item.argv, "--control", str(sock)], log_path, metrics)
            kind = item.kind or node.kind.value
            daemons.append(stamped(Daemon(node.name, kind, pid, str(sock), str(log_path), name, metrics)))
            say(f"started {kind} daemon {name} (pid {pid})")
