"""Stand-in machines on one host: try what spans machines before you have two.

A Docker Swarm across engines (``netstack compose lab``) and a Dask cluster whose workers share
neither a file system path nor a process with the scheduler (``netstack dask``) need several
machines. A *lab* makes them on one host, the standard way to test multi-machine software
without a second machine (docs/containers.md "Two machines on one host"):

- a **machine** is a network namespace ``<prefix>-<machine>`` with one interface, ``eth0``, an
  address on the lab's LAN, a working directory of its own
  (``/var/lib/netstack-lab/<prefix>/<machine>``), and a hostname of its own: its processes run in
  a UTS namespace of their own too (a swarm places tasks by hostname);
- the **LAN** is a bridge in a namespace of its own, ``<prefix>-lan``, which every machine's
  ``eth0`` is joined to by a veth pair. It is not in the host's namespace on purpose: a bridge
  there would pass the host firewall's FORWARD chain (br_netfilter), which Docker sets to DROP;
- with ``host=True`` the host itself is on the LAN too, through a veth ``nl<prefix>`` with the
  LAN's first address: programs on the host (a Dask client) reach the machines. That end is an
  endpoint, not a bridge port, so the host's FORWARD chain still never sees the LAN's frames.

Ownership: every namespace of a lab carries ``netstack-lab prefix=<prefix> machine=<machine>`` as
``lo``'s alias, and :func:`destroy` touches nothing without it. The topology tools (``netstack
down``, their tests' clean-up) look for another marker and leave labs alone; a lab's own
``down`` stops its processes the way they need (dockerd stops its containers first).

The lab's record is ``/var/lib/netstack-lab/<prefix>/lab.json`` (:class:`Lab`). Root only.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import procstat
from .errors import NetstackError
from .procstat import process_start
from .topo.nsenter import NETNS_DIR, NamespaceThreadError, iproute, loopback_links

#: where labs keep their records and the machines' directories (not /run: a Docker engine's
#: data root holds images of hundreds of MB, which a tmpfs would keep in memory)
LAB_ROOT_ENV = "NETSTACK_LAB_ROOT"
DEFAULT_LAB_ROOT = "/var/lib/netstack-lab"
#: the range a lab's LAN takes a /24 of, unless given one
DEFAULT_RANGE = "10.250.0.0/16"
MARKER = "netstack-lab"
_MARKER_RE = re.compile(r"^netstack-lab prefix=(\S+) machine=(\S+)$")
_MACHINE_RE = re.compile(r"\A[a-z][a-z0-9]{0,11}\Z")
LAN = "lan"
_CLONE_NEWUTS = 0x04000000


class LabError(NetstackError, RuntimeError):
    """A lab could not be made, found or taken down; the message says why."""


@dataclass
class Machine:
    name: str
    netns: str
    address: str  # on the LAN, without the prefix length
    hostname: str
    workdir: str


@dataclass
class Lab:
    prefix: str
    kind: str  # what made it: "docker" (netstack compose lab), "dask" (netstack dask)
    subnet: str
    machines: list[Machine]
    host_address: str | None = None  # the host's own address on the LAN (host=True)
    mtu: int = 1500
    pids: dict[str, list[int]] = field(default_factory=dict)  # machine -> processes started there
    #: pid -> its start time (/proc/PID/stat, clock ticks after boot): a recorded pid is the lab's
    #: only while it is the same process (after a reboot, or once it exited, the number is another's)
    started: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # the kind's own facts (sockets, ports...)

    def machine(self, name: str) -> Machine:
        for m in self.machines:
            if m.name == name:
                return m
        raise LabError(f"lab {self.prefix} has no machine {name!r} (it has {', '.join(m.name for m in self.machines)})")

    @property
    def dir(self) -> Path:
        return lab_dir(self.prefix)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Lab:
        return cls(**{**d, "machines": [Machine(**m) for m in d["machines"]]})


def lab_root() -> Path:
    return Path(os.environ.get(LAB_ROOT_ENV, DEFAULT_LAB_ROOT))


def lab_dir(prefix: str) -> Path:
    """The lab's directory; only for a valid prefix (which cannot climb out of the root)."""
    check_prefix(prefix)
    return lab_root() / prefix


def _record(prefix: str) -> Path:
    return lab_dir(prefix) / "lab.json"


def save(lab: Lab) -> None:
    path = _record(lab.prefix)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(lab.to_json(), indent=2) + "\n")
    tmp.replace(path)


def load(prefix: str) -> Lab:
    try:
        lab = Lab.from_json(json.loads(_record(prefix).read_text()))
    except FileNotFoundError:
        raise LabError(f"no lab {prefix!r} on this machine (none at {lab_dir(prefix)})") from None
    except PermissionError:
        raise LabError(f"lab {prefix!r}: {lab_dir(prefix)} is root's: run as root") from None
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise LabError(f"lab {prefix!r}: unreadable record {_record(prefix)}: {exc}") from None
    if lab.prefix != prefix:
        raise LabError(f"lab {prefix!r}: its record {_record(prefix)} names another lab, {lab.prefix!r}")
    return lab


def labs() -> list[str]:
    """Prefixes of the labs recorded on this machine."""
    root = lab_root()
    try:
        return sorted(p.name for p in root.iterdir() if (p / "lab.json").exists())
    except OSError:  # no root yet, or not ours to read
        return []


# --------------------------------------------------------------------------- making one


def check_prefix(prefix: str) -> None:
    """A lab's prefix follows the testbeds' rule (it names namespaces ``<prefix>-<machine>`` and the
    directory ``<root>/<prefix>``: never ``..``, a path or empty)."""
    from .topo.classes import PREFIX_MAX
    from .topo.validate.fields import PREFIX_RE

    if not isinstance(prefix, str) or not PREFIX_RE.fullmatch(prefix) or len(prefix) > PREFIX_MAX:
        raise LabError(f"--prefix {prefix!r}: not a lab's name (a lower-case letter, then letters/digits, "
                       f"at most {PREFIX_MAX})")


def check_machine_names(names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        raise LabError(f"machine names repeat: {', '.join(names)}")
    for name in names:
        if name == LAN or not _MACHINE_RE.match(name):
            raise LabError(f"{name!r} is not a machine name (lower-case letter, then letters/digits, "
                           f"at most 12, not {LAN!r})")


def pick_subnet(given: str | None, prefix: str) -> ipaddress.IPv4Network:
    """The LAN: ``given``, or the first /24 of :data:`DEFAULT_RANGE` that no route of this host
    and no other lab uses."""
    used = _routes_here()
    for other in labs():
        if other != prefix:
            with contextlib.suppress(LabError, ValueError):
                used.append(ipaddress.IPv4Network(load(other).subnet))
    if given is not None:
        try:
            net = ipaddress.IPv4Network(given, strict=True)
        except ValueError as exc:
            raise LabError(f"--subnet {given}: {exc}") from None
        if net.num_addresses < 8:
            raise LabError(f"--subnet {given}: too small (at least a /29)")
        clash = next((u for u in used if net.overlaps(u) and u.prefixlen > 0), None)
        if clash is not None:
            raise LabError(f"--subnet {given} overlaps {clash}, which a route of this host or another lab "
                           "uses: pick another range")
        return net
    for net in ipaddress.IPv4Network(DEFAULT_RANGE).subnets(new_prefix=24):
        if not any(net.overlaps(u) for u in used):
            return net
    raise LabError(f"no free /24 in {DEFAULT_RANGE}: give one with --subnet")


def _routes_here() -> list[ipaddress.IPv4Network]:
    out = []
    with iproute(None) as ipr:
        for r in ipr.get_routes(family=2):
            dst, plen = r.get_attr("RTA_DST"), r.get("dst_len", 0)
            if dst and plen:
                with contextlib.suppress(ValueError):
                    out.append(ipaddress.IPv4Network(f"{dst}/{plen}", strict=False))
    return out


def host_ifname(prefix: str) -> str:
    return f"nl{prefix}"[:15]


def create(prefix: str, kind: str, names: Sequence[str], *, subnet: str | None = None,
           host: bool = False, mtu: int = 1500, say: Callable[[str], None] = lambda s: None) -> Lab:
    """Make the lab's namespaces, LAN and directories (no process yet); on any failure, undo it.

    The lab's directory is made first and exclusively: of two ``up`` at once under one prefix, one
    gets it and the other is refused before it made (or could undo) anything."""
    check_prefix(prefix)
    check_machine_names(names)
    if not 576 <= mtu <= 9000:
        raise LabError(f"--mtu {mtu}: between 576 and 9000")
    net = pick_subnet(subnet, prefix)
    if net.num_addresses - 2 < len(names) + 1:
        raise LabError(f"--subnet {net}: too small for {len(names)} machines and this host")
    taken = [n for n in [f"{prefix}-{LAN}", *(f"{prefix}-{m}" for m in names)] if os.path.exists(f"{NETNS_DIR}/{n}")]
    if taken:
        owner = _owner(taken[0])
        raise LabError(f"namespace {taken[0]} exists already ({'lab ' + repr(owner[0]) if owner else 'not a lab'}'s):"
                       f" {'take it down first' if owner else 'pick another --prefix'}")
    if host and _link_exists(host_ifname(prefix)):
        raise LabError(f"this host has an interface {host_ifname(prefix)} already: pick another --prefix")
    lab_root().mkdir(parents=True, exist_ok=True)
    try:
        lab_dir(prefix).mkdir(mode=0o700)
    except FileExistsError:
        raise LabError(f"lab {prefix!r} exists already ({lab_dir(prefix)}): 'down' it first, or pick another "
                       "--prefix") from None
    first = int(net.network_address)
    machines = [Machine(n, f"{prefix}-{n}", str(ipaddress.IPv4Address(first + i + 2)), f"{prefix}-{n}",
                        str(lab_dir(prefix) / n)) for i, n in enumerate(names)]
    lab = Lab(prefix, kind, str(net), machines, str(ipaddress.IPv4Address(first + 1)) if host else None, mtu)
    try:
        save(lab)
        _build(lab, say)
    except BaseException as exc:
        destroy(prefix)
        if isinstance(exc, Exception) and not isinstance(exc, LabError):
            raise LabError(f"making lab {prefix!r} failed, and what it had made is gone again: "
                           f"{type(exc).__name__}: {exc}") from exc
        raise
    return lab


def _link_exists(ifname: str) -> bool:
    with iproute(None) as ipr:
        return bool(ipr.link_lookup(ifname=ifname))


def _build(lab: Lab, say: Callable[[str], None]) -> None:
    from pyroute2 import netns as pr_netns

    plen = ipaddress.IPv4Network(lab.subnet).prefixlen
    hub = f"{lab.prefix}-{LAN}"
    pr_netns.create(hub)
    _mark(hub, lab.prefix, LAN)
    with iproute(hub) as ipr:
        ipr.link("add", ifname="br0", kind="bridge")
        br = ipr.link_lookup(ifname="br0")[0]
        ipr.link("set", index=br, mtu=lab.mtu, state="up")
    for i, m in enumerate(lab.machines):
        Path(m.workdir).mkdir(parents=True, exist_ok=True)
        pr_netns.create(m.netns)
        _mark(m.netns, lab.prefix, m.name)
        with iproute(hub) as ipr:
            # both ends made here, one moved: the names never touch the host's namespace
            ipr.link("add", ifname=f"m{i}", kind="veth", peer={"ifname": "eth0", "net_ns_fd": m.netns})
            idx = ipr.link_lookup(ifname=f"m{i}")[0]
            ipr.link("set", index=idx, master=ipr.link_lookup(ifname="br0")[0], mtu=lab.mtu, state="up")
        with iproute(m.netns) as ipr:
            idx = ipr.link_lookup(ifname="eth0")[0]
            ipr.link("set", index=idx, mtu=lab.mtu, state="up")
            ipr.addr("add", index=idx, address=m.address, prefixlen=plen)
            ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")
        say(f"machine {m.name}: namespace {m.netns}, {m.address}/{plen}, hostname {m.hostname}")
    if lab.host_address:
        name = host_ifname(lab.prefix)
        # the caller's own namespace, opened before the hub's socket exists: /proc/1's may be
        # another one (a sandbox, a container) or unreadable (EACCES when PID 1 is not ours)
        here = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            with iproute(hub) as ipr:
                ipr.link("add", ifname="host", kind="veth", peer={"ifname": name, "net_ns_fd": here})
        finally:
            os.close(here)
        with iproute(hub) as ipr:
            idx = ipr.link_lookup(ifname="host")[0]
            ipr.link("set", index=idx, master=ipr.link_lookup(ifname="br0")[0], mtu=lab.mtu, state="up")
        with iproute(None) as ipr:
            idx = ipr.link_lookup(ifname=name)[0]
            ipr.link("set", index=idx, mtu=lab.mtu, state="up", ifalias=_alias(lab.prefix, "host"))
            ipr.addr("add", index=idx, address=lab.host_address, prefixlen=plen)
        say(f"this host: {name}, {lab.host_address}/{plen}")


def _alias(prefix: str, machine: str) -> str:
    return f"{MARKER} prefix={prefix} machine={machine}"


def _mark(ns: str, prefix: str, machine: str) -> None:
    with iproute(ns) as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], ifalias=_alias(prefix, machine))


def _owner(ns: str) -> tuple[str, str] | None:
    """The lab marker on ``ns``'s loopback, read on a thread of its own (a namespace's teardown
    must not take this process for one living there: netstack.topo.nsenter.call_in_netns)."""
    try:
        links = loopback_links(ns)
    except NamespaceThreadError:
        raise  # (not a look at the namespace: no verdict on it)
    except Exception:  # gone, or not a namespace we can read: not ours
        return None
    for link in links:
        m = _MARKER_RE.match(link.get_attr("IFLA_IFALIAS") or "")
        if m:
            return m.group(1), m.group(2)
    return None


def _lab_namespaces(prefix: str) -> list[str]:
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(f"{prefix}-") and (_owner(n) or ("", ""))[0] == prefix)


# --------------------------------------------------------------------------- processes


def spawn(lab: Lab, machine: str, argv: Sequence[str], *, log: str, env: dict[str, str] | None = None) -> int:
    """Start ``argv`` on ``machine``, detached (its own session; it outlives this process): in the
    machine's network namespace and a UTS namespace with the machine's hostname, in the machine's
    directory, output to ``<workdir>/<log>``. Records and returns its pid.

    ``nsenter --net``, not ``ip netns exec``: the latter gives the process a mount namespace with
    a fresh /sys, which hides the host's cgroup mounts below /sys/fs/cgroup from a Docker engine."""
    m = lab.machine(machine)
    hostname = m.hostname.encode()

    def enter() -> None:  # in the child, before exec: a UTS namespace of its own, then the name
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        if libc.unshare(_CLONE_NEWUTS) != 0 or libc.sethostname(hostname, len(hostname)) != 0:
            raise OSError(ctypes.get_errno(), "unshare/sethostname")

    out = open(Path(m.workdir) / log, "ab")  # noqa: SIM115 - handed to the child, closed below
    try:
        proc = subprocess.Popen(["nsenter", f"--net={NETNS_DIR}/{m.netns}", "--", *argv], cwd=m.workdir,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=enter, env={**os.environ, **(env or {})})
    finally:
        out.close()
    lab.pids.setdefault(machine, []).append(proc.pid)
    start = process_start(proc.pid)
    if start:
        lab.started[str(proc.pid)] = start
    save(lab)
    return proc.pid


def alive(pid: int) -> bool:
    from .topo.netns import _alive

    return _alive(pid)


def is_ours(lab: Lab, pid: int) -> bool:
    """``pid`` is a process the lab started and still the same one (its recorded start time)."""
    start = lab.started.get(str(pid))
    return start is not None and alive(pid) and process_start(pid) == start


def in_machine(lab: Lab, machine: str, pid: int) -> bool:
    """``pid`` runs in ``machine``'s network namespace (a pid file's word is not proof)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat(f"{NETNS_DIR}/{lab.machine(machine).netns}").st_ino
    except OSError:
        return False


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        fields = procstat.stat_fields(int(entry)) if entry.isdigit() else None
        if fields is not None and len(fields) > 1 and fields[1].isdigit():
            kids.setdefault(int(fields[1]), []).append(int(entry))  # (field 4: the parent)
    return kids


def processes(lab: Lab) -> list[int]:
    """Every live process of the lab: those in its namespaces, those it started, and their
    descendants (a container's processes live in namespaces of their own, below its shim)."""
    from .topo.netns import _pids_in

    roots = set(_pids_in(_lab_namespaces(lab.prefix)))
    roots |= {p for pids in lab.pids.values() for p in pids if is_ours(lab, p)}
    kids = _children()
    out, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in out and pid != os.getpid():
            out.add(pid)
            todo.extend(kids.get(pid, []))
    return sorted(p for p in out if alive(p))


def stop(pids: Sequence[int], grace_s: float) -> None:
    """SIGTERM, then SIGKILL whatever still runs after ``grace_s`` (the topology runtime's own)."""
    from .topo.netns import _stop_processes

    _stop_processes(list(pids), grace_s)


# --------------------------------------------------------------------------- taking it down


def destroy(prefix: str, *, before: Callable[[Lab], None] | None = None, grace_s: float = 5.0) -> list[str]:
    """Take lab ``prefix`` down: ``before(lab)`` (the kind's own orderly stop), then every process
    of it (SIGTERM, SIGKILL after ``grace_s``), its mounts, namespaces, host veth and directory.
    Idempotent, and safe on a half-made lab. Returns what it removed, for the user."""
    check_prefix(prefix)  # before anything: a prefix is a directory name below the root, never a path
    removed: list[str] = []
    try:
        lab: Lab | None = load(prefix)
    except LabError:
        lab = None
    if lab is not None and before is not None:
        with contextlib.suppress(Exception):  # an orderly stop is best effort: the rest is forced
            before(lab)
    pids = processes(lab) if lab is not None else []
    if lab is None:
        from .topo.netns import _pids_in

        pids = _pids_in(_lab_namespaces(prefix))
    if pids:
        stop(pids, grace_s)
        removed.append(f"{len(pids)} process(es)")
    removed += _unmount_under(lab_dir(prefix))
    from pyroute2 import netns as pr_netns

    for ns in _lab_namespaces(prefix):
        with contextlib.suppress(OSError):
            pr_netns.remove(ns)
            removed.append(f"namespace {ns}")
    with contextlib.suppress(Exception), iproute(None) as ipr:  # gone with its peer, normally
        for link in ipr.get_links(ifname=host_ifname(prefix)):
            if link.get_attr("IFLA_IFALIAS") == _alias(prefix, "host"):  # ours only, never a namesake
                ipr.link("del", index=link["index"])
                removed.append(f"interface {host_ifname(prefix)}")
    if lab_dir(prefix).exists():
        shutil.rmtree(lab_dir(prefix), ignore_errors=True)
        removed.append(f"directory {lab_dir(prefix)}")
    return removed


def _unmount_under(path: Path) -> list[str]:
    """Unmount whatever is mounted below ``path`` in this mount namespace, deepest first."""
    base = str(path.resolve()) + "/"
    points = []
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(base):
                points.append(point)
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    return [f"{len(points)} mount(s)"] if points else []


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (``timeout``, a CI runner, ``kill``) interrupts as Ctrl-C does, so that a command
    making a lab takes it down again instead of leaving it half made."""
    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@contextlib.contextmanager
def entered(lab: Lab, machine: str) -> Iterator[None]:
    """This thread in ``machine``'s network namespace (sockets opened inside stay there)."""
    from .topo.nsenter import in_netns

    with in_netns(lab.machine(machine).netns):
        yield


__all__ = ["DEFAULT_RANGE", "Lab", "LabError", "Machine", "create", "destroy", "labs", "load", "pick_subnet",
           "processes", "save", "spawn", "stop"]
