"""The run state: what ``netstack up`` built and started, as one typed record (:class:`RunState`),
and its file ``<run dir>/state.json``, written by :func:`write_state` and read by :func:`read_state`
(nothing else opens it, but for :func:`daemons_in_file` and :func:`raw_state`, which read what they can
of a file that is not a run state of this version: ``down`` must still stop its daemons, ``ls`` still
list it).

A container deployment's state is the same record, assembled from docker
(``netstack.container.discover``), with the container parts filled in (``runtime == "compose"``).

``RunState.to_dict()`` is the JSON shape, the same as when the state was a plain dict (``netstack up
--json`` prints it); the record itself is no mapping: code reads its attributes. The file holds that
dict and ``"format"``: :data:`STATE_FORMAT`. Files without the key were written before it existed
(format 1, the same shape): they are read as they are, their daemons given the fields added since
(``name``: the node's; ``metrics``: none; ``start_ticks``: 0, not recorded). A file that misses a
part (the first versions wrote no ``links``), names another format, or is not a run state at all
is refused with a :class:`RuntimeErrorNS` that names the file and says to run ``netstack down``.
``"sections"`` (the protocols' tables of the topology file as checked, ``[onepipe]``...) is there
only when the topology has one: a file without it has none.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .. import procstat
from ..errors import NetstackError
from ..procstat import process_start

DEFAULT_RUN_ROOT = "/run/netstack"
STATE_FILE = "state.json"
#: the file's format: 2 since the key exists; a file without it is format 1 (module docstring)
STATE_FORMAT = 2


class RuntimeErrorNS(NetstackError, RuntimeError):
    """netstack up/down failed; the message says what and where the logs are."""


def run_root() -> Path:
    return Path(os.environ.get("NETSTACK_RUN_DIR", DEFAULT_RUN_ROOT))


def run_dir(prefix: str) -> Path:
    return run_root() / prefix


def state_path(prefix: str) -> Path:
    return run_dir(prefix) / STATE_FILE


@dataclass
class Daemon:
    node: str
    kind: str
    pid: int
    control: str  #: its control socket; "" for a process that has none (it is only started and stopped)
    log: str
    #: unique in the run: the node's name, or ``<node>-<suffix>`` for another daemon on that node
    #: (state files written before there could be several have none: the node's name)
    name: str = ""
    #: where it serves Prometheus metrics (``127.0.0.1:PORT`` on this machine); "" when it does not
    metrics: str = ""
    #: when its process started, in clock ticks since boot (netstack.procstat.process_start),
    #: recorded by ``up`` and a restart as soon as the process exists: with the pid it names one
    #: process, where a pid alone is reused once its process is gone (soon where pid_max is small:
    #: 32768 on the machine we measure on). 0: not recorded (files written before it was; a
    #: container's daemons, whose pids are their namespace's), and the pid is taken at its word.
    start_ticks: int = 0

    @property
    def key(self) -> str:
        return self.name or self.node

    def _reused(self, fields: list[str] | None) -> bool:
        """Whether process ``pid`` (its /proc stat ``fields``) is another process than ours."""
        return bool(self.start_ticks and fields is not None and procstat.start_of(fields) != self.start_ticks)

    def ours(self) -> bool:
        """No other process has its pid: this daemon's process runs, is a zombie not reaped yet,
        or is gone. (Gone, a process group that still bears its pid can only be its own: Linux
        gives no new process a pid that a process group still uses.) ``down`` signals a daemon's
        process group, where a child of it may live on, only when this holds."""
        return not self._reused(procstat.stat_fields(self.pid))

    def alive(self) -> bool:
        """Its process runs: not gone, not a zombie (a zombie child of ours counts as dead), and
        not another process that got the pid since (``fault`` signals a daemon only when it is
        alive)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # (someone else's process now, or ours unreadable: as before, alive)
        fields = procstat.stat_fields(self.pid)
        if fields is None:
            return True  # exists (kill said so), its stat unreadable here: the pid at its word
        return fields[0] != "Z" and not self._reused(fields)


def stamped(daemon: Daemon) -> Daemon:
    """``daemon`` with its process's start recorded (:attr:`Daemon.start_ticks`), for a daemon
    this netstack has just started (before anything could reap it, so the pid is still its own);
    as it is when it has one already."""
    if daemon.start_ticks:
        return daemon
    return replace(daemon, start_ticks=process_start(daemon.pid))


@dataclass(frozen=True)
class RunPort:
    """One veth end of the run: node ``node``'s interface ``ifname`` (in namespace ``netns``) on
    ``link``, whose other end is on node ``peer``."""

    node: str
    link: str
    netns: str
    ifname: str
    mac: str
    peer: str
    fcs: bool


@dataclass(frozen=True)
class RunLink:
    """A link as built: its ends' nodes and what it was given."""

    a: str
    b: str
    rate_bps: int
    delay_ns: int
    mtu: int
    fcs: bool


class StateFormatError(ValueError):
    """A dict that is not a run state: the message names the part (``daemons[1].pid: ...``)."""


#: the parts of every run state, in to_dict()'s (and the file's) order
_NETNS_KEYS = ("prefix", "topology", "source", "started", "namespaces", "ports", "hosts", "links",
               "impairments", "daemons")
#: a container deployment's order (netstack.container.discover's, unchanged)
_COMPOSE_KEYS = ("prefix", "runtime", "topology", "source", "started", "namespaces", "containers", "roots",
                 "ports", "hosts", "links", "impairments", "daemons", "tunnels", "starting")


@dataclass(frozen=True)
class RunState:
    """A running topology. Everything but ``prefix`` has a default, so that a test can make one of
    the parts it needs; a file must have every part (:meth:`from_dict`)."""

    prefix: str
    topology: str = ""  #: the topology's name
    source: str = ""  #: the topology file it was built from ("" for a shipped one given by name)
    started: float = 0.0  #: time.time() when up returned
    namespaces: dict[str, str] = field(default_factory=dict)  #: node -> network namespace
    ports: list[RunPort] = field(default_factory=list)
    hosts: dict[str, str] = field(default_factory=dict)  #: node -> its address with prefix length (10.0.0.1/24)
    links: dict[str, RunLink] = field(default_factory=dict)
    impairments: dict[str, str] = field(default_factory=dict)  #: "node/link" -> the backend that applies it
    daemons: list[Daemon] = field(default_factory=list)
    #: "netns" (``netstack up``) or "compose" (a container deployment, whose parts follow)
    runtime: str = "netns"
    containers: dict[str, str] = field(default_factory=dict)  #: node -> container name
    roots: dict[str, str] = field(default_factory=dict)  #: node -> its file system as seen from here
    tunnels: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  #: node -> its VXLAN tunnels
    starting: list[str] = field(default_factory=list)  #: nodes whose runner is not ready yet
    #: the protocols' tables of the topology file (``[onepipe]``...), as their modules checked them
    #: (netstack.topo.sections); files written before it existed have none
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    # ------------------------------------------------------------------ what the call sites ask
    def host_ip(self, node: str) -> str:
        """``node``'s address without the prefix length; KeyError if it has none."""
        return self.hosts[node].split("/")[0]

    def ports_of(self, node: str) -> list[RunPort]:
        return [p for p in self.ports if p.node == node]

    def ends_of(self, link: str) -> list[RunPort]:
        """The ports of ``link`` (two, or none for a link the run does not have)."""
        return [p for p in self.ports if p.link == link]

    def nodes_running(self, kind: str) -> set[str]:
        """The nodes with a daemon of ``kind``."""
        return {d.node for d in self.daemons if d.kind == kind}

    # ------------------------------------------------------------------ the JSON shape
    def _keys(self) -> tuple[str, ...]:
        keys = _COMPOSE_KEYS if self.runtime == "compose" else _NETNS_KEYS
        # (only a topology with protocol tables has the part: every other state keeps its old shape)
        return (*keys, "sections") if self.sections else keys

    def _part(self, key: str) -> Any:
        value = getattr(self, key)
        if key == "ports":
            return [asdict(p) for p in value]
        if key == "links":
            return {name: asdict(link) for name, link in value.items()}
        if key == "daemons":
            return [asdict(d) for d in value]
        if isinstance(value, dict | list):
            return json.loads(json.dumps(value))  # a copy: the record is not changed through it
        return value

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape (module docstring): what ``up --json`` prints."""
        return {key: self._part(key) for key in self._keys()}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RunState:
        """The record of a dict of the JSON shape, every part checked; StateFormatError names the
        first part that is missing or of the wrong type."""
        if not isinstance(raw, Mapping):
            raise StateFormatError(f"not an object but {type(raw).__name__}")
        compose = raw.get("runtime", "netns") == "compose"
        return cls(
            prefix=_get(raw, "prefix", str), topology=_get(raw, "topology", str), source=_get(raw, "source", str),
            started=float(_get(raw, "started", float)), namespaces=_str_map(raw, "namespaces"),
            ports=[RunPort(**_record(p, f"ports[{i}]", RunPort)) for i, p in enumerate(_get(raw, "ports", list))],
            hosts=_str_map(raw, "hosts"),
            links={name: RunLink(**_record(link, f"links.{name}", RunLink))
                   for name, link in _get(raw, "links", dict).items()},
            impairments=_str_map(raw, "impairments"),
            daemons=[Daemon(**_record(d, f"daemons[{i}]", Daemon)) for i, d in enumerate(_get(raw, "daemons", list))],
            runtime="compose" if compose else _get(raw, "runtime", str, "netns"),
            containers=_str_map(raw, "containers", compose), roots=_str_map(raw, "roots", compose),
            tunnels=dict(_get(raw, "tunnels", dict, {})), starting=list(_get(raw, "starting", list, [])),
            sections={str(k): dict(_check(v, dict, f"sections.{k}"))
                      for k, v in _get(raw, "sections", dict, {}).items()},
        )


_MISSING: Any = object()
_TYPE_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list",
               dict: "an object"}


def _check(value: Any, kind: type, where: str) -> Any:
    # (a bool is an int to isinstance, and a number may be written without a fraction)
    ok = isinstance(value, int | float if kind is float else kind)
    if not ok or (isinstance(value, bool) and kind is not bool):
        raise StateFormatError(f"{where}: {json.dumps(value)[:40]} is not {_TYPE_WORDS[kind]}")
    return value


def _get(raw: Mapping[str, Any], key: str, kind: type, default: Any = _MISSING, where: str = "") -> Any:
    if key not in raw:
        if default is _MISSING:
            raise StateFormatError(f"no {where}{key!r}")
        return default
    return _check(raw[key], kind, f"{where}{key}")


def _str_map(raw: Mapping[str, Any], key: str, required: bool = True) -> dict[str, str]:
    value = _get(raw, key, dict, _MISSING if required else {})
    return {str(k): _check(v, str, f"{key}.{k}") for k, v in value.items()}


def _record(raw: Any, where: str, cls: type) -> dict[str, Any]:
    """The fields of ``cls`` (a dataclass of str/int/bool fields) in ``raw``, each checked; those with
    a default may be missing (a format-1 daemon's ``name`` and ``metrics``)."""
    _check(raw, dict, where)
    out: dict[str, Any] = {}
    for f in fields(cls):
        kind = {"str": str, "int": int, "bool": bool}[str(f.type)]  # (the annotation, a string here)
        value = _get(raw, f.name, kind, _MISSING if f.default is MISSING else None, where=f"{where}.")
        if value is not None:
            out[f.name] = value
    return out


# --------------------------------------------------------------------------- the file
def write_state(path: Path, state: RunState) -> None:
    """Write ``state`` to ``path`` whole (a reader sees the old file or the new one, never half)."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"format": STATE_FORMAT, **state.to_dict()}, indent=2))
    os.replace(tmp, path)


def read_state(path: Path) -> RunState:
    """The run state in ``path`` (format 1 or 2, module docstring). FileNotFoundError when there is
    none; RuntimeErrorNS naming the file, what is wrong and ``netstack down`` when it is not a
    state this version reads."""
    prefix = path.parent.name
    try:
        raw = json.loads(path.read_text())
    except ValueError as exc:
        raise _unreadable(path, prefix, f"not JSON ({exc})") from None
    if isinstance(raw, dict):
        version = raw.pop("format", 1)
        if type(version) is not int or version not in (1, STATE_FORMAT):
            raise _unreadable(path, prefix, f"format {json.dumps(version)}, written by another netstack version "
                                            f"(this one reads 1 and {STATE_FORMAT})")
    try:
        return RunState.from_dict(raw)
    except StateFormatError as exc:
        raise _unreadable(path, prefix, f"{exc}: not a run state of this version (an older netstack's?)") from None


def _unreadable(path: Path, prefix: str, why: str) -> RuntimeErrorNS:
    return RuntimeErrorNS(f"run state {path}: {why}; run 'netstack down --prefix {prefix}' "
                          f"(it stops what the file names) and 'netstack up' again")


def raw_state(path: Path) -> dict[str, Any] | None:
    """The file as JSON, whatever wrote it, or None (none, or not a JSON object): for ``ls``, which
    lists a testbed it cannot otherwise read."""
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def daemons_in_file(path: Path) -> list[Daemon]:
    """The daemons a state file names, as far as they can be read, whichever version wrote it:
    ``down`` stops them even when the rest of the file is not a state of this version."""
    raw = raw_state(path)
    entries = raw.get("daemons") if raw is not None else None
    out = []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        with contextlib.suppress(StateFormatError, TypeError):
            out.append(Daemon(**_record(entry, f"daemons[{i}]", Daemon)))
    return out
