"""Bring a topology up with its daemons, and down again (``netstack up`` / ``down``).

A running topology is: the namespaces and veths ``netstack.topo.netns.build`` made, one
switch daemon per switch node (``python -m daemons.switch`` inside the node's namespace),
the daemons protocols' node kinds ask for (``netstack.protocols``: ``node_daemon``), and a run
directory holding each daemon's config, control socket, log and pid plus ``state.json`` (the
run state, :class:`RunState`). Everything is keyed by the topology's prefix, so several can run
at once.

A node kind's ``node_daemon(topology, built, node, run_dir, prefix, options)`` returns None
(nothing to run), one argv (one daemon, control socket ``<node>.sock``), or a list of
:class:`DaemonSpec` (daemons to start, each named ``<node>`` or ``<node>-<suffix>``) and
:class:`Daemon` (processes it started itself, e.g. a store those daemons use: recorded, so that
``status`` lists them and ``down`` stops them). ``options`` are ``up``'s: a module takes those
it names in ``NODE_OPTIONS``; an option no node of the topology takes is an error.

The package, by job (each module imports only those before it in this list):

- ``state``: the run state (:class:`RunState` and its parts), its file, the run directory;
- ``lookup``: which run a command means (a namespace run or a container deployment) and its
  state (:func:`load_state`), running a program in a node, the topology a run was built from;
- ``config``: a switch daemon's config (:func:`switch_config`, :func:`port_options`);
- ``daemons``: starting a daemon and waiting until it answers, stopping daemons, stopping and
  restarting one of a running topology (``netstack fault``);
- ``up`` / ``down``: bringing a topology up, all or nothing, and tearing it down;
- ``status``: asking the daemons (:func:`status`, :func:`loop_lags`, :func:`control`);
- ``listing``: stale run states and every testbed of this machine (``netstack ls``).

Every name is imported from here (``netstack.runtime.up``), not from the modules: a test that
replaces one (``monkeypatch.setattr(runtime, "load_state", ...)``) replaces what its callers see.
"""

from __future__ import annotations

from .. import protocols  # (runtime.protocols: the registry the node kinds come from; tests patch its load)
from ..topo import netns  # (runtime.netns: callers ask it which prefixes run)
from .config import EDGE_PFC_WATCHDOG_NS, PORT_OPTIONS, port_options, switch_config
from .daemons import (
    LAUNCH_SUFFIX,
    READY_TIMEOUT_S,
    STOP_TIMEOUT_S,
    DaemonSpec,
    daemon_launch,
    kill_daemon,
    namespace_state,
    restart_daemon,
    restore_protocols,
    stop_groups,
)
from .down import cleanup_protocols, down, down_all
from .listing import missing_namespaces, read_run_state, stale_reason, testbeds
from .lookup import (
    RUNTIME_ENV,
    RUNTIMES,
    daemons_of,
    host_path,
    load_state,
    node_exec_argv,
    running_hint,
    runtime_mode,
    topology_of,
)
from .state import (
    DEFAULT_RUN_ROOT,
    STATE_FILE,
    STATE_FORMAT,
    Daemon,
    RunLink,
    RunPort,
    RunState,
    RuntimeErrorNS,
    StateFormatError,
    read_state,
    run_dir,
    run_root,
    state_path,
    write_state,
)
from .status import control, loop_lags, status
from .up import _node_daemons, check_keys, check_options, node_options, run_state, up

__all__ = [
    "DEFAULT_RUN_ROOT", "EDGE_PFC_WATCHDOG_NS", "LAUNCH_SUFFIX", "PORT_OPTIONS", "READY_TIMEOUT_S", "RUNTIMES",
    "RUNTIME_ENV", "STATE_FILE", "STATE_FORMAT", "STOP_TIMEOUT_S", "Daemon", "DaemonSpec", "RunLink", "RunPort",
    "RunState", "RuntimeErrorNS", "StateFormatError", "_node_daemons", "check_keys", "check_options",
    "cleanup_protocols", "control", "daemon_launch", "daemons_of", "down", "down_all", "host_path", "kill_daemon",
    "load_state", "loop_lags", "missing_namespaces", "namespace_state", "netns", "node_exec_argv", "node_options",
    "port_options", "protocols", "read_run_state", "read_state", "restart_daemon", "restore_protocols", "run_dir",
    "run_root", "run_state", "runtime_mode", "running_hint", "stale_reason", "state_path", "status", "stop_groups",
    "switch_config", "testbeds", "topology_of", "up", "write_state",
]
