"""A local etcd cluster for the 1Pipe controller's replicated store.

The 1Pipe controller keeps its state in a replicated key-value store (1Pipe §8, design topic §8
in docs/papers.md): here a cluster of Debian's ``etcd`` (package ``etcd-server``, installed by
``scripts/install.sh``). :func:`start_cluster` runs N members (3 by default, so one may fail) on
127.0.0.1 with free ports and data directories under a directory of the caller's, waits until
every member answers ``/health``, and returns an :class:`EtcdCluster`; :meth:`EtcdCluster.stop`
kills the members and removes their data. A start that fails cleans up the same way.

``netns``: the members run inside that network namespace (``ip netns exec``), on *its*
loopback, which is what a controller daemon inside the same namespace reaches (``netstack up
--store etcd`` runs them in the controller node's namespace). Python 3.11 has no ``os.setns``,
so the health check then runs in a short-lived ``ip netns exec <ns> python`` of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from ..topo.nsenter import netns_exec_argv

INSTALL_HINT = "install it: bash scripts/install.sh"
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 3.0


class EtcdError(RuntimeError):
    """etcd is missing, or a cluster did not start; the message says what and where the logs are."""


def etcd_binary() -> str | None:
    """The etcd server binary, or None when it is not installed."""
    return shutil.which("etcd") or next((p for p in ("/usr/bin/etcd", "/usr/local/bin/etcd") if os.access(p, os.X_OK)),
                                        None)


def etcd_available() -> bool:
    return etcd_binary() is not None


def _free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class EtcdMember:
    name: str
    client_url: str
    peer_url: str
    data_dir: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def healthy(self, timeout_s: float = 1.0) -> bool:
        """Whether it answers ``/health`` from the caller's namespace (``EtcdCluster.netns``: not there)."""
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=timeout_s) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def kill(self) -> None:
        """SIGKILL, as a crash would; the data directory stays (``EtcdCluster.stop`` removes it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=STOP_TIMEOUT_S)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class EtcdCluster:
    root: Path
    members: list[EtcdMember] = field(default_factory=list)
    #: the network namespace the members run in (None: the caller's)
    netns: str | None = None

    @property
    def endpoints(self) -> list[str]:
        """``host:port`` of every member's client URL, in member order."""
        return [m.client_url.removeprefix("http://") for m in self.members]

    @property
    def pids(self) -> list[int]:
        return [m.proc.pid for m in self.members if m.proc is not None]

    def stop(self) -> None:
        """Stop every member and remove the cluster's directory (data and logs)."""
        for m in self.members:
            m.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _argv(binary: str, m: EtcdMember, initial: str, token: str, heartbeat_ms: int, election_ms: int) -> list[str]:
    return [binary, "--name", m.name, "--data-dir", str(m.data_dir),
            "--listen-client-urls", m.client_url, "--advertise-client-urls", m.client_url,
            "--listen-peer-urls", m.peer_url, "--initial-advertise-peer-urls", m.peer_url,
            "--initial-cluster", initial, "--initial-cluster-token", token, "--initial-cluster-state", "new",
            # short raft timers: a lost member is noticed, and a lease can be as short as 1 s, on a
            # loopback cluster where round trips take microseconds
            "--heartbeat-interval", str(heartbeat_ms), "--election-timeout", str(election_ms),
            "--logger", "zap", "--log-outputs", "stderr"]


def _tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


#: what the health check runs inside a namespace: argv[1:] are client URLs; prints the healthy ones
_HEALTH_PROBE = """
import json, sys, urllib.request
up = []
for url in sys.argv[1:]:
    try:
        with urllib.request.urlopen(url + "/health", timeout=1.0) as r:
            if json.loads(r.read()).get("health") == "true":
                up.append(url)
    except Exception:
        pass
print(json.dumps(up))
"""


def _healthy(cluster: EtcdCluster, members: list[EtcdMember]) -> set[str]:
    """The names of ``members`` that answer ``/health`` now (from inside the cluster's namespace)."""
    if cluster.netns is None:
        return {m.name for m in members if m.healthy()}
    argv = netns_exec_argv(cluster.netns, [sys.executable, "-c", _HEALTH_PROBE, *(m.client_url for m in members)])
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5.0, check=False).stdout
        up = set(json.loads(out or "[]"))
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return set()
    return {m.name for m in members if m.client_url in up}


def _wait_healthy(cluster: EtcdCluster, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(cluster.members)
    while pending:
        for m in pending:
            if not m.alive():
                raise EtcdError(f"etcd member {m.name} exited at start; its log {m.log}:\n{_tail(m.log)}")
        up = _healthy(cluster, pending)
        pending = [m for m in pending if m.name not in up]
        if pending and time.monotonic() > deadline:
            raise EtcdError(f"etcd members {[m.name for m in pending]} not healthy after {timeout_s:.0f} s; "
                            f"log of {pending[0].name}:\n{_tail(pending[0].log)}")
        if pending:
            time.sleep(0.1)


def start_cluster(parent: Path, members: int = 3, *, timeout_s: float = START_TIMEOUT_S,
                  heartbeat_ms: int = 50, election_ms: int = 500, netns: str | None = None) -> EtcdCluster:
    """Start an etcd cluster of ``members`` members on 127.0.0.1, data under ``parent``; inside
    network namespace ``netns`` when given (module docstring).

    Returns once every member reports healthy. Raises :class:`EtcdError` (and leaves nothing
    running or on disk) when the binary is missing or a member does not come up.
    """
    binary = etcd_binary()
    if binary is None:
        raise EtcdError(f"etcd is not installed (Debian package etcd-server); {INSTALL_HINT}")
    if members < 1:
        raise EtcdError(f"an etcd cluster needs at least one member, not {members}")
    token = f"netstack-{uuid.uuid4().hex[:12]}"
    cluster = EtcdCluster(root=Path(parent) / f"etcd-{token}", netns=netns)
    # (inside a fresh namespace every port is free; these are as good as any there)
    ports = _free_ports(2 * members)
    for i in range(members):
        name = f"m{i}"
        cluster.members.append(EtcdMember(
            name=name, client_url=f"http://127.0.0.1:{ports[2 * i]}", peer_url=f"http://127.0.0.1:{ports[2 * i + 1]}",
            data_dir=cluster.root / name, log=cluster.root / f"{name}.log"))
    initial = ",".join(f"{m.name}={m.peer_url}" for m in cluster.members)
    try:
        cluster.root.mkdir(parents=True)
        for m in cluster.members:
            with open(m.log, "wb") as log:
                # ip netns exec execs the command: the pid is etcd's own, as without a namespace;
                # its own session: a Ctrl-C at the terminal is the caller's to handle, and stop() ends it
                argv = _argv(binary, m, initial, token, heartbeat_ms, election_ms)
                m.proc = subprocess.Popen(argv if netns is None else netns_exec_argv(netns, argv),
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        _wait_healthy(cluster, timeout_s)
    except BaseException:
        cluster.stop()
        raise
    return cluster
