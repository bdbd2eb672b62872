"""``netstack compose lab``: a Docker Swarm of several engines on one host (docs/containers.md
"Two machines on one host").

Each engine is a stand-in machine of a :mod:`netstack.lab` lab (``e1``, ``e2``...): a network
namespace with one address on the lab's LAN, and a UTS namespace with its own hostname, which a
stack file's ``--place`` constraints name. In it run a ``containerd`` and a ``dockerd`` of its
own, each with its own state below the machine's directory:

- ``containerd``: its own root, state, socket and config (``containerd.toml``), so the engine never
  shares the host's containerd (a dockerd finding ``/run/containerd/containerd.sock`` would use
  it); a containerd namespace ``netstack-<prefix>-<engine>`` all the same;
- ``dockerd``: ``--data-root``, ``--exec-root``, ``--pidfile``, its own socket
  (``unix://<dir>/docker.sock``: ``DOCKER_HOST`` for the docker CLI and netstack's) and an empty
  ``--config-file``, so nothing of the host engine's configuration applies. Its bridges and
  iptables rules live in the engine's namespace and never meet the host's.

The first engine initialises a swarm advertised on its LAN address; the others join it as workers:
swarm management (TCP 2377), gossip (7946) and overlay traffic (VXLAN, UDP 4789) cross the LAN as
they cross a network between machines. The image comes from the host's engine (``docker save``,
``docker load``: there is no registry to pull from).

``down`` removes the stacks, leaves the swarm, stops each dockerd (which stops its containers)
and containerd, then the lab itself (:func:`netstack.lab.destroy`: anything still running, the
mounts below the data roots, the namespaces, the directories).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import lab as labs
from ..lab import Lab, LabError

KIND = "docker"
DEFAULT_PREFIX = "lab"
#: how long an engine may take to answer after it starts, and a swarm to see its nodes ready
START_TIMEOUT_S = 60.0


def engine_names(n: int) -> list[str]:
    if not 2 <= n <= 8:
        raise LabError(f"--engines {n}: between 2 and 8")
    return [f"e{i}" for i in range(1, n + 1)]


def socket(lab: Lab, engine: str) -> str:
    return f"unix://{Path(lab.machine(engine).workdir) / 'docker.sock'}"


def docker(lab: Lab | None, engine: str | None, *argv: str, timeout: float = 60,
           stdin: Any = None) -> subprocess.CompletedProcess[str]:
    """The docker CLI against ``engine`` of ``lab``, or with None this machine's own engine (never
    the one a ``DOCKER_HOST`` in the environment names: that may be a lab's engine)."""
    return subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=timeout, check=False,
                          env=_env(lab, engine), stdin=stdin)


def _env(lab: Lab | None, engine: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "DOCKER_CONTEXT")}
    if lab is not None and engine is not None:
        env["DOCKER_HOST"] = socket(lab, engine)
    return env


def _need(binaries: Sequence[str]) -> None:
    missing = [b for b in binaries if shutil.which(b) is None]
    if missing:
        raise LabError(f"{', '.join(missing)} not found: run scripts/docker/ensure-docker.sh (installs docker.io)")


def up(prefix: str = DEFAULT_PREFIX, engines: int = 2, *, image: str = "netstack:latest", subnet: str | None = None,
       mtu: int = 1500, say: Callable[[str], None] = print) -> Lab:
    """Make the lab, start its engines, load ``image`` into each and form the swarm. On failure
    everything made is taken down again and the error says why (with the engine's log)."""
    names = engine_names(engines)
    labs.check_prefix(prefix)
    if os.geteuid() != 0:
        raise LabError("a lab makes namespaces and starts Docker engines: run as root")
    _need(["docker", "dockerd", "containerd", "nsenter"])
    if docker(None, None, "image", "inspect", image, timeout=30).returncode != 0:
        raise LabError(f"image {image} not in this host's Docker engine: build it first "
                       "(scripts/docker/build-image.sh), the lab's engines load it from there")
    with labs.terminate_as_interrupt():
        lab = labs.create(prefix, KIND, names, subnet=subnet, mtu=mtu, say=say)
        try:
            lab.extra["image"] = image
            for name in names:
                _start_engine(lab, name, say)
            for name in names:
                _load_image(lab, name, image, say)
            _form_swarm(lab, say)
            labs.save(lab)
        except BaseException as exc:
            say(f"{'interrupted' if isinstance(exc, KeyboardInterrupt) else 'failed'}: taking the lab down again")
            down(prefix, say=lambda s: None)
            raise
    return lab


def _start_engine(lab: Lab, name: str, say: Callable[[str], None]) -> None:
    d = Path(lab.machine(name).workdir)
    ns = f"netstack-{lab.prefix}-{name}"
    (d / "containerd.toml").write_text(
        "version = 2\n"
        f'root = "{d / "containerd" / "root"}"\n'
        f'state = "{d / "containerd" / "state"}"\n'
        # the CRI plugin is Kubernetes'; Docker does not use it, and it wants CNI files of the host
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{d / "containerd.sock"}"\n'
        f'[ttrpc]\n  address = "{d / "containerd.sock.ttrpc"}"\n'
        '[debug]\n  address = ""\n[metrics]\n  address = ""\n')
    # the engine's identity key in its own directory: dockerd 20.10 otherwise reads (and, where there
    # is none, writes) the machine's /etc/docker/key.json, and every engine of the lab had one ID
    (d / "daemon.json").write_text(json.dumps({"deprecated-key-path": str(d / "key.json")}) + "\n")
    pid = labs.spawn(lab, name, ["containerd", "--config", str(d / "containerd.toml")], log="containerd.log")
    _wait(lambda: (d / "containerd.sock").exists(), f"{name}'s containerd", d / "containerd.log", pid)
    pid = labs.spawn(lab, name, [
        "dockerd", "--host", socket(lab, name), "--data-root", str(d / "data"), "--exec-root", str(d / "exec"),
        "--pidfile", str(d / "docker.pid"), "--config-file", str(d / "daemon.json"),
        "--containerd", str(d / "containerd.sock"), "--containerd-namespace", ns,
        "--containerd-plugins-namespace", f"{ns}-plugins"], log="dockerd.log")
    _wait(lambda: docker(lab, name, "info", "--format", "{{.ID}}", timeout=10).returncode == 0,
          f"{name}'s dockerd", d / "dockerd.log", pid)
    say(f"engine {name}: dockerd up on {lab.machine(name).address} (DOCKER_HOST={socket(lab, name)})")


def _wait(ready: Callable[[], bool], what: str, log: Path, pid: int | None = None,
          timeout: float = START_TIMEOUT_S) -> None:
    """Until ``ready()``; a LabError with the log's tail when the process ``pid`` exits first, or
    after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ready():
                return
        except (OSError, subprocess.TimeoutExpired):
            pass
        if pid is not None and not labs.alive(pid):
            raise LabError(f"{what} exited during start-up; the end of {log}:\n{_tail(log)}")
        time.sleep(0.3)
    raise LabError(f"{what} not ready after {timeout:g} s; the end of {log}:\n{_tail(log)}")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


def _load_image(lab: Lab, name: str, image: str, say: Callable[[str], None]) -> None:
    t0 = time.monotonic()
    save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env(None, None))
    assert save.stdout is not None
    load = subprocess.Popen(["docker", "load", "--quiet"], stdin=save.stdout, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(lab, name))
    save.stdout.close()  # only the loader holds the pipe: if it fails, the saver sees EPIPE and ends
    try:
        _, load_err = load.communicate(timeout=600)
        _, save_err = save.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        load.kill()
        save.kill()
        raise LabError(f"loading {image} into engine {name} took over 10 minutes") from None
    if save.returncode != 0 or load.returncode != 0:
        why = load_err.strip() if load.returncode != 0 else save_err.decode(errors="replace").strip()
        raise LabError(f"loading {image} into engine {name} failed: {why or 'no reason given'}")
    say(f"engine {name}: image {image} loaded ({time.monotonic() - t0:.1f} s)")


def _form_swarm(lab: Lab, say: Callable[[str], None]) -> None:
    first, *others = lab.machines
    r = docker(lab, first.name, "swarm", "init", "--advertise-addr", first.address, "--listen-addr",
               f"{first.address}:2377")
    if r.returncode != 0:
        raise LabError(f"docker swarm init on {first.name}: {r.stderr.strip()}")
    r = docker(lab, first.name, "swarm", "join-token", "-q", "worker")
    token = r.stdout.strip()
    if r.returncode != 0 or not token:
        raise LabError(f"docker swarm join-token on {first.name}: {r.stderr.strip() or 'no token'}")
    for m in others:
        r = docker(lab, m.name, "swarm", "join", "--token", token, "--advertise-addr", m.address,
                   f"{first.address}:2377", timeout=120)
        if r.returncode != 0:
            raise LabError(f"docker swarm join on {m.name}: {r.stderr.strip()}")
    _wait(lambda: len(nodes(lab)) == len(lab.machines) and all(n["ready"] for n in nodes(lab)),
          "the swarm's nodes", Path(first.workdir) / "dockerd.log")
    lab.extra["manager"] = first.name
    say(f"swarm: {first.hostname} (manager) and {', '.join(m.hostname for m in others)} (workers), ready")


def nodes(lab: Lab) -> list[dict[str, Any]]:
    """The swarm's nodes as its manager lists them: hostname, role, ready."""
    r = docker(lab, lab.machines[0].name, "node", "ls", "--format", "{{json .}}", timeout=30)
    out = []
    for line in r.stdout.splitlines():
        with_json = json.loads(line)
        out.append({"hostname": with_json.get("Hostname"), "ready": with_json.get("Status") == "Ready",
                    "manager": bool(with_json.get("ManagerStatus")), "availability": with_json.get("Availability")})
    return out


def status(prefix: str = DEFAULT_PREFIX) -> dict[str, Any]:
    lab = _of_kind(labs.load(prefix))
    engines = []
    for m in lab.machines:
        try:
            r = docker(lab, m.name, "info", "--format", "{{json .}}", timeout=15)
            info = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else {}
        except (subprocess.TimeoutExpired, ValueError):
            info = {}  # hung (a stopped dockerd), or an answer that is not JSON: not answering
        engines.append({"engine": m.name, "hostname": m.hostname, "address": m.address,
                        "docker_host": socket(lab, m.name), "answers": bool(info), "id": info.get("ID"),
                        "containers_running": info.get("ContainersRunning"),
                        "swarm": (info.get("Swarm") or {}).get("LocalNodeState")})
    swarm = _nodes_or_none(lab) if engines and engines[0]["answers"] else []
    ok = all(e["answers"] for e in engines) and len(swarm) == len(engines) and all(n["ready"] for n in swarm)
    return {"prefix": lab.prefix, "kind": lab.kind, "subnet": lab.subnet, "mtu": lab.mtu, "engines": engines,
            "nodes": swarm, "dir": str(lab.dir), "ok": ok}


def _nodes_or_none(lab: Lab) -> list[dict[str, Any]]:
    try:
        return nodes(lab)
    except (subprocess.TimeoutExpired, ValueError):
        return []


def down(prefix: str = DEFAULT_PREFIX, *, say: Callable[[str], None] = print) -> list[str]:
    """Take the lab down (idempotent): stacks, swarm, engines, then :func:`netstack.lab.destroy`."""
    if os.geteuid() != 0:
        raise LabError("taking a lab down removes namespaces: run as root")
    try:
        found: Lab | None = labs.load(prefix)
    except LabError:
        found = None  # none, or an unreadable record: destroy() still removes what carries the marker
    if found is not None:
        _of_kind(found)  # never another kind's lab
    removed = labs.destroy(prefix, before=lambda lab: _stop_engines(lab, say), grace_s=10.0)
    for what in removed:
        say(f"removed {what}")
    return removed


def _of_kind(lab: Lab) -> Lab:
    if lab.kind != KIND:
        raise LabError(f"lab {lab.prefix!r} is a {lab.kind} lab, not a Docker one: use its own command")
    return lab


def _stop_engines(lab: Lab, say: Callable[[str], None]) -> None:
    manager = lab.machines[0].name
    for stack in docker(lab, manager, "stack", "ls", "--format", "{{.Name}}", timeout=30).stdout.split():
        say(f"docker stack rm {stack}")
        docker(lab, manager, "stack", "rm", stack, timeout=60)
    for m in reversed(lab.machines):  # workers first: a manager leaving last takes the swarm with it
        docker(lab, m.name, "swarm", "leave", "--force", timeout=30)
    pid_of = {}
    for m in lab.machines:
        try:
            pid = int((Path(m.workdir) / "docker.pid").read_text().strip())
        except (OSError, ValueError):
            continue
        if labs.in_machine(lab, m.name, pid):  # the pid file's word is not proof: a stale file names another
            pid_of[m.name] = pid
    # dockerd stops its containers on SIGTERM (10 s each at most), then itself; containerd after it
    labs.stop(list(pid_of.values()), grace_s=30.0)


__all__ = ["DEFAULT_PREFIX", "KIND", "docker", "down", "engine_names", "nodes", "socket", "status", "up"]
