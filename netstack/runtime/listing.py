"""Run states that outlived their namespaces (a command refuses them before it starts), and every
testbed of this machine (``netstack ls``). Only reads: nothing of another user's testbed is
changed or waited on."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..topo import netns
from .lookup import RUNTIME_ENV, runtime_mode
from .state import (
    STATE_FILE,
    Daemon,
    RunState,
    RuntimeErrorNS,
    StateFormatError,
    daemons_in_file,
    raw_state,
    read_state,
    run_root,
    state_path,
)


def read_run_state(prefix: str) -> RunState | None:
    """The namespace run's state under ``prefix``, or None (none, unreadable, or not a state of
    this version: :func:`stale_reason` says which)."""
    try:
        return read_state(state_path(prefix))
    except (OSError, RuntimeErrorNS):
        return None


def missing_namespaces(state: RunState) -> list[str]:
    """The namespaces a namespace run's state names that no longer exist: the state outlived them
    (a crash, a reboot, an ``ip netns del``). A container deployment's state names none."""
    return [] if state.runtime == "compose" else _gone(state.namespaces.values())


def _gone(namespaces: Iterable[str]) -> list[str]:
    return sorted(ns for ns in namespaces if not os.path.exists(os.path.join(netns.NETNS_DIR, ns)))


def stale_reason(prefix: str) -> str | None:
    """One line saying why ``prefix``'s run state cannot be used (its namespaces are gone, or it is
    not a state this version reads), or None: no namespace state of that prefix, or all of it is
    there."""
    if os.environ.get(RUNTIME_ENV) == "compose":  # the command will not look at namespace runs
        return None
    try:
        state = read_state(state_path(prefix))
    except RuntimeErrorNS as exc:  # (it names the file and says to run 'netstack down')
        return str(exc)
    except OSError:
        return None
    gone = missing_namespaces(state)
    if not gone:
        return None
    what = ("its namespaces are gone" if len(gone) == len(state.namespaces)
            else f"namespace(s) {', '.join(gone)} of it are gone")
    return f"testbed {prefix}: {what} (stale state from a crash?); run 'netstack down --prefix {prefix}'"


def testbeds() -> list[dict[str, Any]]:
    """Every testbed of this machine, for ``netstack ls`` (``--runtime`` picks which kinds): the
    namespace runs under :func:`run_root`, netstack namespaces whose run state is not there
    (another ``NETSTACK_RUN_DIR``, or lost: state ``orphan``) and container deployments. Only
    reads: nothing of another user's testbed is changed or waited on."""
    mode = runtime_mode()
    out = _namespace_testbeds() if mode != "compose" else []
    if mode != "netns":
        out += _container_testbeds()
    return sorted(out, key=lambda t: (t["prefix"], t["runtime"]))


def _namespace_testbeds() -> list[dict[str, Any]]:
    root = run_root()
    try:
        dirs = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    except OSError:
        dirs = []
    found = {d.name: _run_entry(d) for d in dirs}
    orphans: dict[str, int] = {}
    for prefix, _node in netns.running_namespaces().values():  # (needs root to read the markers)
        if prefix not in found:
            orphans[prefix] = orphans.get(prefix, 0) + 1
    for prefix, n in orphans.items():
        found[prefix] = {"prefix": prefix, "runtime": "netns", "state": "orphan", "topology": None, "started": None,
                         "age_s": None, "owner": None, "daemons": None, "namespaces": {"present": n, "total": None},
                         "run_dir": None}
    return list(found.values())


def _run_entry(rdir: Path) -> dict[str, Any]:
    """One run directory as ``netstack ls`` lists it. States: ``running``; ``degraded`` (a daemon
    is not alive); ``broken`` (some namespaces gone); ``stale`` (all gone); ``no-state`` (no
    state.json: ``up`` is building it, or a crash left the directory). The file is read as JSON,
    not as a RunState: a testbed an older netstack started is listed all the same."""
    raw = raw_state(rdir / STATE_FILE)
    try:
        mtime = rdir.stat().st_mtime
    except OSError:
        mtime = time.time()
    daemons = daemons_in_file(rdir / STATE_FILE)
    namespaces = (raw or {}).get("namespaces")
    names = [str(ns) for ns in namespaces.values()] if isinstance(namespaces, dict) else []
    gone = _gone(names)
    alive = sum(d.alive() for d in daemons)
    if raw is None:
        word = "no-state"
    elif names and len(gone) == len(names):
        word = "stale"
    else:
        word = "broken" if gone else "degraded" if alive < len(daemons) else "running"
    written = (raw or {}).get("started")
    started = float(written) if isinstance(written, int | float) and written else mtime
    return {"prefix": rdir.name, "runtime": "netns", "state": word, "topology": (raw or {}).get("topology"),
            "started": started, "age_s": round(max(0.0, time.time() - started), 1), "owner": _owner(rdir, daemons),
            "daemons": {"alive": alive, "total": len(daemons)},
            "namespaces": {"present": len(names) - len(gone), "total": len(names)}, "run_dir": str(rdir)}


def _owner(rdir: Path, daemons: list[Daemon]) -> dict[str, Any] | None:
    """Who ran ``netstack up``: the run directory's owner, and the ``SUDO_USER`` its daemons
    inherited when it ran under sudo (readable by root only; everyone is root on a shared box)."""
    import pwd

    try:
        uid = rdir.stat().st_uid
    except OSError:
        return None
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    out: dict[str, Any] = {"uid": uid, "user": user}
    for d in daemons:
        with contextlib.suppress(OSError):
            env = Path(f"/proc/{d.pid}/environ").read_bytes().split(b"\0")
            sudo = next((e[len(b"SUDO_USER="):].decode(errors="replace") for e in env if e.startswith(b"SUDO_USER=")),
                        None)
            if sudo:
                out["sudo_user"] = sudo
            break
    return out


def _container_testbeds() -> list[dict[str, Any]]:
    from ..container.discover import compose_state, running_prefixes

    out = []
    for prefix in running_prefixes():
        try:
            state = compose_state(prefix)
        except StateFormatError:  # nodes of another version: listed, though not described
            state = RunState(prefix, runtime="compose")
        if state is None:
            continue  # gone since it was listed
        nodes = len(state.containers)
        out.append({"prefix": prefix, "runtime": "compose", "state": "starting" if state.starting else "running",
                    "topology": state.topology or None, "started": None, "age_s": None, "owner": None,
                    "daemons": {"alive": None, "total": len(state.daemons)},
                    "namespaces": {"present": nodes, "total": nodes + len(state.starting)},
                    "run_dir": None})
    return out
