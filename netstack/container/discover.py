"""Find a container deployment of a topology and describe it as ``netstack up``'s run state.

The CLI's commands (status, impair, lg, dta, exec, ...) read a run state: namespaces, ports,
daemons and their control sockets. For a compose or Swarm deployment that state is assembled
here from what runs on *this* machine: the containers labelled ``io.netstack.prefix=<prefix>``
(``docker inspect``) and the ``node-<node>.json`` each node runner wrote in its run
directory. Paths are made usable from the machine through the container's PID:

- a node's network namespace is ``/proc/<pid>/ns/net`` (entered with ``nsenter --net=``, or
  ``setns`` in-process; ``netstack.topo.netns.netns_exec_argv``);
- a daemon's control socket is ``/proc/<pid>/root/run/netstack/<prefix>/<name>.sock``.

Across machines (Swarm), only the containers on this machine are visible: run the CLI on the
machine whose nodes you want to see.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from ..runtime.state import RunState
from .compose import LABEL_NODE, LABEL_PREFIX
from .plan import NODE_STATE, READY

DOCKER_TIMEOUT_S = 15.0


class DiscoveryError(RuntimeError):
    """docker answered with an error while listing a deployment."""


def _docker(*argv: str) -> str:
    try:
        proc = subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=DOCKER_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DiscoveryError(f"docker {argv[0]}: {exc}") from None
    if proc.returncode != 0:
        raise DiscoveryError(f"docker {' '.join(argv[:2])}: {(proc.stderr or proc.stdout).strip()}")
    return proc.stdout


def docker_usable() -> bool:
    return shutil.which("docker") is not None


def containers(prefix: str | None = None) -> list[dict[str, Any]]:
    """``docker inspect`` of the running netstack containers (of one prefix, or all)."""
    if not docker_usable():
        return []
    label = LABEL_PREFIX if prefix is None else f"{LABEL_PREFIX}={prefix}"
    try:
        ids = _docker("ps", "-q", "--no-trunc", "--filter", f"label={label}").split()
    except DiscoveryError:
        return []  # no daemon answering: no deployment to find
    if not ids:
        return []
    try:
        return list(json.loads(_docker("inspect", *ids)))
    except (DiscoveryError, ValueError):
        return []  # a container went away between the two calls


def running_prefixes() -> list[str]:
    return sorted({c.get("Config", {}).get("Labels", {}).get(LABEL_PREFIX, "") for c in containers()} - {""})


def compose_state(prefix: str) -> RunState | None:
    """The run state of the deployment ``prefix`` as seen from this machine, or None if no
    container of it runs here. Nodes still starting (no state file yet) are listed under
    ``starting``. Assembled as JSON, then checked as any run state is
    (``netstack.runtime.StateFormatError`` when a node's piece is not of this version)."""
    found = containers(prefix)
    if not found:
        return None
    state: dict[str, Any] = {
        "prefix": prefix, "runtime": "compose", "topology": "", "source": "", "started": 0.0,
        "namespaces": {}, "containers": {}, "roots": {}, "ports": [], "hosts": {}, "links": {},
        "impairments": {}, "daemons": [], "tunnels": {}, "starting": [],
    }
    for c in sorted(found, key=lambda c: c.get("Config", {}).get("Labels", {}).get(LABEL_NODE, "")):
        node = c.get("Config", {}).get("Labels", {}).get(LABEL_NODE)
        pid = int(c.get("State", {}).get("Pid") or 0)
        name = str(c.get("Name", "")).lstrip("/")
        if not node or pid <= 0:
            continue
        root = f"/proc/{pid}/root"
        netns = f"/proc/{pid}/ns/net"
        try:
            piece = json.loads(Path(f"{root}/run/netstack/{prefix}/{NODE_STATE.format(node=node)}").read_text())
            if piece.get("phase") != READY:
                raise ValueError("still joining")
        except (OSError, ValueError):
            state["starting"].append(node)
            state["namespaces"][node] = netns
            state["containers"][node] = name
            state["roots"][node] = root
            continue
        state["namespaces"][node] = netns
        state["containers"][node] = name
        state["roots"][node] = root
        state["topology"] = state["topology"] or piece.get("topology", "")
        if not state["source"] and piece.get("source"):
            state["source"] = f"{root}{piece['source']}"
        state["started"] = max(state["started"], float(piece.get("started") or 0))
        for p in piece.get("ports", []):
            state["ports"].append({**p, "netns": netns})
        if piece.get("ip"):
            state["hosts"][node] = piece["ip"]
        state["links"].update(piece.get("links", {}))
        for link, backend in (piece.get("impairments") or {}).items():
            state["impairments"][f"{node}/{link}"] = backend
        state["tunnels"][node] = piece.get("tunnels", [])
        for d in piece.get("daemons", []):
            control = d.get("control") or ""
            state["daemons"].append({
                "node": node, "kind": d.get("kind", "?"), "name": d.get("name") or node,
                # the container's main process: it lives exactly as long as the node's daemons
                "pid": pid, "control": f"{root}{control}" if control else "",
                "log": f"docker logs {name}",
            })
    return RunState.from_dict(state)
