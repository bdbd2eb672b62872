"""Which run a command means (``netstack --runtime``: a namespace run, or a container deployment
of that prefix) and its state, and what the state tells of a node: how to run a program in it,
where its files are, which topology it was built from."""

from __future__ import annotations

import os
from pathlib import Path

from ..topo import netns
from ..topo.model import Topology, load_topology
from .state import Daemon, RunState, RuntimeErrorNS, StateFormatError, read_state, state_path

#: Which deployments the CLI looks at (``netstack --runtime``): ``netns`` (``netstack up``),
#: ``compose`` (containers: docker-compose or Swarm, docs/containers.md), or ``auto``: a
#: namespace run of that prefix, else a container deployment of it.
RUNTIMES = ("auto", "netns", "compose")
RUNTIME_ENV = "NETSTACK_RUNTIME"


def runtime_mode() -> str:
    mode = os.environ.get(RUNTIME_ENV, "auto") or "auto"
    if mode not in RUNTIMES:
        raise RuntimeErrorNS(f"{RUNTIME_ENV}={mode!r}: use one of {', '.join(RUNTIMES)}")
    return mode


def load_state(prefix: str) -> RunState:
    """The run state of the topology under ``prefix``: the one ``netstack up`` wrote, or the one
    assembled from a container deployment's labels (``netstack.container.discover``)."""
    mode = runtime_mode()
    if mode != "compose":
        try:
            return read_state(state_path(prefix))
        except FileNotFoundError:
            pass
    if mode != "netns":
        from ..container.discover import compose_state

        try:
            found = compose_state(prefix)
        except StateFormatError as exc:  # a node runner of another version
            raise RuntimeErrorNS(f"container deployment {prefix!r}: its nodes' states do not make a run state "
                                 f"of this version ({exc})") from None
        if found is not None:
            return found
    raise RuntimeErrorNS(f"no topology is running under prefix {prefix!r}{running_hint(mode)}")


def running_hint(mode: str) -> str:
    """`` (running: a, b)``, or how to start one: the end of a "no such testbed" message."""
    running = netns.list_running() if mode != "compose" else []
    if mode != "netns":
        from ..container.discover import running_prefixes

        running += [f"{p} (containers)" for p in running_prefixes()]
    return f" (running: {', '.join(running)})" if running else " (nothing is running: 'netstack up')"


def node_exec_argv(state: RunState, node: str, argv: list[str]) -> list[str]:
    """argv that runs ``argv`` (a program of this machine) in ``node``'s network namespace,
    whichever runtime the state is of."""
    try:
        ns = state.namespaces[node]
    except KeyError:
        raise RuntimeErrorNS(f"no node {node!r}; nodes: {', '.join(state.namespaces)}") from None
    return netns.netns_exec_argv(ns, argv)


def host_path(state: RunState, node: str, path: str) -> str:
    """Where a path of ``node``'s file system is seen from this machine (in a container: under
    its ``/proc/<pid>/root``)."""
    root = state.roots.get(node)
    return f"{root}{path}" if root else path


def daemons_of(state: RunState) -> list[Daemon]:
    """``state.daemons`` (the name is older than the record)."""
    return list(state.daemons)


def topology_of(state: RunState) -> Topology:
    """The topology a run was built from: its file, or the shipped topology of that name (the
    file as it reads now: edited since ``up``, it may no longer match what runs)."""
    from ..topo.model import load_topology_spec, shipped_topologies

    if Path(state.source).is_file():
        return load_topology(state.source)
    name = state.topology
    return load_topology_spec(name if name in shipped_topologies() else None)
