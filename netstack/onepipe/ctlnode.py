"""The ``onepipe-controller`` node kind: what ``netstack up`` runs on it, and the config it writes.

Reliable 1Pipe's controller (design topic §8 in docs/papers.md; docs/onepipe-reliable.md
"Running the controller") runs as ``python -m daemons.onepipe_controller`` on a node of this
kind. :func:`node_daemon` (``netstack.runtime``'s node-daemon contract) writes the daemons'
config JSON into the run directory and returns one :class:`~netstack.runtime.DaemonSpec` per
replica: replica 1's control socket is ``<node>.sock``, replica *i*'s ``<node>-r<i>.sock``.

``netstack up`` options (``NODE_OPTIONS``):

- ``store``: ``sqlite`` (the default: one file in the run directory, no server) or ``etcd``: a
  3-member etcd cluster is started here, inside the node's namespace (its loopback is what the
  replicas reach), and recorded as daemons of kind ``etcd`` so that ``netstack status`` lists them
  and ``netstack down`` stops them; its data lives in the run directory.
- ``controller_replicas``: how many replicas (default 1 with sqlite, 2 with etcd). Every replica
  campaigns for the lead (``ELECTION``); the leader serves, the others wait (design topic §8: a
  highly available controller).

:func:`parse_config` reads the config back for the daemon and refuses a bad one with a one-line
:class:`~netstack.errors.ConfigError`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from ipaddress import IPv4Address
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headers.onepipe import PORT_BASE

from ..errors import ConfigError
from .controller import ControllerParams
from .params import OnePipeParams
from .store import STORE_FILE

if TYPE_CHECKING:
    from ..runtime import Daemon, DaemonSpec

#: the ``netstack up`` options this node kind takes (``netstack.runtime.check_options``)
NODE_OPTIONS = ("store", "controller_replicas")
#: the controller drives every switch through its control socket (controller_config): in
#: containers the nodes share one run directory (netstack.container.compose.shares_run_dir)
SHARES_RUN_DIR = True
STORES = ("sqlite", "etcd")
#: the election every replica campaigns in, and its lease: a crashed leader's successor takes
#: over within about this long (ours; etcd rounds a lease up to whole seconds)
ELECTION = "controller"
LEASE_TTL_S = 2.0
ETCD_MEMBERS = 3  # so that one may fail
MAX_REPLICAS = 9
DAEMON = "daemons.onepipe_controller"


@dataclass(frozen=True)
class StoreConfig:
    backend: str  #: one of STORES
    path: str = ""  #: sqlite: the file
    endpoints: tuple[str, ...] = ()  #: etcd: ``host:port`` client URLs, reachable from the node
    run: str = "default"  #: etcd: the key prefix's run name (the run's prefix)


@dataclass(frozen=True)
class ControllerConfig:
    """What a controller daemon needs (the ``controller`` object of its config JSON)."""

    name: str  #: the node
    ip: str  #: the node's address: the UDP socket binds ``ip:port``
    port: int
    params: OnePipeParams  #: the switches' parameters (T_beacon: how often their reports are polled)
    controller: ControllerParams
    store: StoreConfig
    switches: dict[str, str]  #: switch -> its daemon's control socket
    prefix: str
    hosts: dict[str, str] = field(default_factory=dict)  #: ip -> node: the store's "host" of a process
    election: str = ELECTION
    lease_ttl_s: float = LEASE_TTL_S
    #: the topology's key file ("": none): the daemon reads it and seals and opens every message with
    #: the controller key (docs/onepipe-reliable.md "Authenticated controller messages")
    keys: str = ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["params"] = self.params.to_dict()
        out["store"]["endpoints"] = list(self.store.endpoints)
        return {"controller": out}


def replicas(options: Mapping[str, Any]) -> tuple[str, int]:
    """``(store, replica count)`` from ``up``'s options, defaults filled in. ConfigError when bad."""
    store = options.get("store") or "sqlite"
    if store not in STORES:
        raise ConfigError("onepipe-controller", f"store must be one of {', '.join(STORES)}, not {store!r}")
    count = options.get("controller_replicas")
    if count is None:
        count = 2 if store == "etcd" else 1
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_REPLICAS:
        raise ConfigError("onepipe-controller", f"controller replicas must be an integer 1-{MAX_REPLICAS}, "
                                                f"not {count!r}")
    return store, count


#: live, an unanswered probe waits this many answer timeouts (100 T_beacon each: 1.5 s at the live
#: scale, about three times the longest stall of 32 reliable processes on 2 cores, 561 ms)
LIVE_PROBE_TIMEOUT_FACTOR = 5


def live_timers(params: OnePipeParams) -> ControllerParams:
    """The controller's timers scaled to T_beacon, with a process's answer awaited as long as the
    switches wait before they report a live process failed (``runner.LIVE_FAILURE_BEACONS``):
    live Python processes stall for tens of ms, and a missed answer is a failure."""
    from dataclasses import replace

    from .runner import LIVE_FAILURE_BEACONS

    t = params.t_beacon_ns
    base = ControllerParams.for_beacon(t)
    answer = max(base.answer_timeout_ns, LIVE_FAILURE_BEACONS * t)
    # a killed process is declared as soon as its closed port answers the probe (the daemon's
    # ICMP port unreachable, Controller.unreachable), so the probe itself may wait long: a live
    # process stalled by a starved host answers when it runs (docs/onepipe-reliable.md "Failure
    # detection")
    return replace(base, answer_timeout_ns=answer, probe_timeout_ns=LIVE_PROBE_TIMEOUT_FACTOR * answer)


def controller_config(topology: Any, node: Any, rdir: Path, prefix: str, store: StoreConfig,
                      params: OnePipeParams | None = None) -> ControllerConfig:
    """The config of the controller on ``node``: every switch's socket (``<rdir>/<switch>.sock``,
    as ``netstack up`` names them), the controller timers scaled to T_beacon."""
    params = params or OnePipeParams()
    if node.ip is None:
        raise ConfigError("onepipe-controller", f"node {node.name} has no address")
    return ControllerConfig(
        name=node.name, ip=str(node.ip.ip), port=PORT_BASE, params=params,
        controller=live_timers(params), store=store,
        switches={sw.name: str(rdir / f"{sw.name}.sock") for sw in topology.switches}, prefix=prefix,
        hosts={str(n.ip.ip): n.name for n in topology.nodes if n.ip is not None},
        keys=str(topology.keys_path() or ""))  # the path: never key material in a config file


def node_daemon(topology: Any, built: Any, node: Any, rdir: Path, prefix: str,
                options: Mapping[str, Any] | None = None) -> list[DaemonSpec | Daemon]:
    """The controller replicas of ``node`` (and the etcd members they use, already started)."""
    from ..runtime import DaemonSpec, RuntimeErrorNS

    try:
        store_name, count = replicas(options or {})
    except ConfigError as exc:
        raise RuntimeErrorNS(str(exc)) from None
    started: list[Daemon] = []
    if store_name == "etcd":
        started, store = start_etcd(rdir, prefix, node.name)
    else:
        store = StoreConfig("sqlite", path=str(rdir / STORE_FILE))
    keys = topology.keys_path()
    if keys is not None:
        from ..auth.keys import KeyFileError
        from ..auth.sign import ensure_signing_key

        try:  # the controller signs what it sends with a key no process is given (netstack/auth/sign.py)
            ensure_signing_key(keys)
        except KeyFileError as exc:
            raise RuntimeErrorNS(str(exc)) from None
    cfg_path = rdir / f"{node.name}.json"
    cfg_path.write_text(json.dumps(controller_config(topology, node, rdir, prefix, store).to_json(), indent=2))
    specs: list[DaemonSpec | Daemon] = [
        DaemonSpec([sys.executable, "-m", DAEMON, "--config", str(cfg_path), "--replica", replica_id(node.name, i)],
                   suffix="" if i == 1 else f"r{i}")
        for i in range(1, count + 1)]
    return [*started, *specs]


def replica_id(node: str, i: int) -> str:
    """Replica ``i``'s id in the election and the store (``ctl-r1``)."""
    return f"{node}-r{i}"


def start_etcd(rdir: Path, prefix: str, node: str) -> tuple[list[Daemon], StoreConfig]:
    """A 3-member etcd cluster inside ``node``'s namespace, data under ``rdir``; its members as
    run-state daemons (kind ``etcd``, no control socket)."""
    from ..runtime import Daemon, RuntimeErrorNS
    from ..topo.model import netns_name
    from .etcd import EtcdError, etcd_available, start_cluster

    if not etcd_available():
        raise RuntimeErrorNS("--store etcd: etcd is not installed (Debian package etcd-server); "
                             "install it: bash scripts/install.sh")
    try:
        cluster = start_cluster(rdir, ETCD_MEMBERS, netns=netns_name(prefix, node))
    except EtcdError as exc:
        raise RuntimeErrorNS(f"--store etcd: {exc}") from None
    members = [Daemon(node, "etcd", m.proc.pid, "", str(m.log), f"{node}-etcd-{m.name}")
               for m in cluster.members if m.proc is not None]
    return members, StoreConfig("etcd", endpoints=tuple(cluster.endpoints), run=prefix)


# ------------------------------------------------------------------ the daemon's side

def _need(cfg: Mapping[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = cfg.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError("onepipe-controller", f"{key} is missing or not a {getattr(kind, '__name__', kind)}: "
                                                f"{value!r}")
    return value


def _parse_store(raw: Any) -> StoreConfig:
    if not isinstance(raw, dict):
        raise ConfigError("onepipe-controller", f"store must be an object, not {raw!r}")
    backend = raw.get("backend")
    if backend == "sqlite":
        return StoreConfig("sqlite", path=_need(raw, "path", str))
    if backend == "etcd":
        endpoints = raw.get("endpoints")
        if not isinstance(endpoints, list) or not endpoints or not all(isinstance(e, str) for e in endpoints):
            raise ConfigError("onepipe-controller", f"store.endpoints must be a list of host:port, not {endpoints!r}")
        return StoreConfig("etcd", endpoints=tuple(endpoints), run=_need(raw, "run", str))
    raise ConfigError("onepipe-controller", f"store.backend must be one of {', '.join(STORES)}, not {backend!r}")


def parse_config(data: Any) -> ControllerConfig:
    """The ``controller`` object of a config JSON (:meth:`ControllerConfig.to_json`). ConfigError
    with what is wrong."""
    cfg = data.get("controller") if isinstance(data, dict) else None
    if not isinstance(cfg, dict):
        raise ConfigError("onepipe-controller", "the config has no 'controller' object")
    ip = _need(cfg, "ip", str)
    try:
        IPv4Address(ip)
        params = OnePipeParams(**_need(cfg, "params", dict))
        timers = ControllerParams(**_need(cfg, "controller", dict))
    except (ValueError, TypeError) as exc:
        raise ConfigError("onepipe-controller", str(exc)) from None
    port = _need(cfg, "port", int)
    if not 0 < port < 65536:
        raise ConfigError("onepipe-controller", f"port {port} is not a UDP port")
    switches = _need(cfg, "switches", dict)
    hosts = cfg.get("hosts") or {}
    if not all(isinstance(v, str) for v in [*switches.values(), *hosts.values()]):
        raise ConfigError("onepipe-controller", "switches and hosts must map names to strings")
    keys = cfg.get("keys") or ""
    if not isinstance(keys, str):
        raise ConfigError("onepipe-controller", f"keys must be the path of a key file, not {keys!r}")
    ttl = cfg.get("lease_ttl_s", LEASE_TTL_S)
    if isinstance(ttl, bool) or not isinstance(ttl, int | float) or not 0 < ttl <= 60:
        raise ConfigError("onepipe-controller", f"lease_ttl_s must be a number of seconds in (0, 60], not {ttl!r}")
    return ControllerConfig(name=_need(cfg, "name", str), ip=ip, port=port, params=params, controller=timers,
                            store=_parse_store(cfg.get("store")), switches=dict(switches),
                            prefix=_need(cfg, "prefix", str), hosts=dict(hosts),
                            election=cfg.get("election") or ELECTION, lease_ttl_s=float(ttl), keys=keys)


def load_config(path: Path) -> ControllerConfig:
    """:func:`parse_config` of the file at ``path``; ConfigError when unreadable too."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError("onepipe-controller", f"cannot read config {path}: {exc}") from None
    return parse_config(data)


__all__ = ["DAEMON", "ELECTION", "LEASE_TTL_S", "NODE_OPTIONS", "STORES", "ControllerConfig", "StoreConfig",
           "controller_config", "load_config", "node_daemon", "parse_config", "replica_id", "replicas",
           "start_etcd"]
