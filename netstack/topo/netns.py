"""Build a topology as Linux network namespaces joined by veth pairs, and tear it down.

One namespace per node, named ``<prefix>-<node>``; one veth pair per link, created directly
inside the two namespaces (never in the root namespace, so its names cannot clash with the
machine's own interfaces). Everything goes through pyroute2 netlink and ioctls in-process:
no ``ip``/``ethtool``/``sysctl`` binaries. The only binaries used are ``nft`` and ``tc`` for
impairments (``netstack.topo.impair``) and ``ip netns exec`` in :func:`ns_exec_argv`.

Ownership marker: every namespace netstack creates carries the interface alias
``netstack prefix=<prefix> node=<node>`` on its ``lo``. :func:`teardown`,
:func:`teardown_all` and :func:`list_running` only ever touch namespaces that carry it, so a
user's own ``ns-h1`` (or anything else in /run/netns) is never deleted, whatever its name.

Must run before any uvloop policy is installed (docs/architecture.md "The live runtime":
uvloop breaks pyroute2), as root.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from .. import procstat
from ..errors import NetstackError
from . import impair
from .model import Backend, Link, NodeKind, Topology, netns_name, validate_prefix

# NETNS_DIR and in_netns are part of this module's API (re-exported: callers import them from
# here); _ipr is this module's own short name for iproute, used throughout it and by its tests.
from .nsenter import NETNS_DIR, NamespaceThreadError, in_netns, loopback_links, netns_exec_argv
from .nsenter import iproute as _ipr

MARKER = "netstack"
_MARKER_RE = re.compile(r"^netstack prefix=([a-z][a-z0-9]*) node=(\S+)$")
_CANDIDATE_RE = re.compile(r"^[a-z][a-z0-9]*-[A-Za-z][A-Za-z0-9_]*$")

#: Offloads turned off on every veth end (docs/architecture.md "The live runtime"): with TX checksum offload a
#: frame reaches AF_PACKET with a partial checksum; with TSO/GSO/GRO a "frame" can be a 64 KB
#: super-packet no send() on the next veth accepts; with RX checksum on, veth marks frames
#: "checksum verified" and the kernel would accept a corrupted payload. VLAN TX insertion is
#: off so that a tag stays in the frame bytes a userspace switch reads.
OFFLOAD_PATTERN = re.compile(r"(checksum|segmentation|gso|gro|large-receive|vlan-hw-insert|vlan-stag-hw-insert)")
#: Read back after disabling: the build fails if any of these is still on.
REQUIRED_OFF = (
    "tx-checksum-ip-generic",
    "rx-checksum",
    "tx-tcp-segmentation",
    "tx-tcp6-segmentation",
    "tx-generic-segmentation",
    "tx-udp-segmentation",
    "rx-gro",
)


class BuildError(NetstackError, RuntimeError):
    """Building a topology failed; everything it had created has been removed again."""


# --------------------------------------------------------------------------- namespaces
# (entering one: netstack.topo.nsenter)


def _list_netns() -> list[str]:
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def _marker(prefix: str, node: str) -> str:
    return f"{MARKER} prefix={prefix} node={node}"


def read_marker(ns: str) -> tuple[str, str] | None:
    """``(prefix, node)`` if namespace ``ns`` is one netstack created, else None. Read on a
    thread of its own (:func:`~netstack.topo.nsenter.call_in_netns`): the namespace may be
    another user's testbed, which that user's ``netstack down`` must not take this process for
    one of its daemons."""
    try:
        links = loopback_links(ns)
    except NamespaceThreadError:
        raise  # (not a look at the namespace: no verdict on it)
    except OSError:
        return None
    except Exception:  # a netlink error: not readable, so not ours
        return None
    for link in links:
        m = _MARKER_RE.match(link.get("ifalias") or "")
        if m and netns_name(m.group(1), m.group(2)) == ns:
            return m.group(1), m.group(2)
    return None


def running_namespaces(prefix: str | None = None) -> dict[str, tuple[str, str]]:
    """netstack's namespaces now present: ``{netns: (prefix, node)}``, optionally for one prefix."""
    found = {}
    for ns in _list_netns():
        if not _CANDIDATE_RE.match(ns):
            continue
        if prefix is not None and not ns.startswith(f"{prefix}-"):
            continue
        owner = read_marker(ns)
        if owner is not None and (prefix is None or owner[0] == prefix):
            found[ns] = owner
    return found


def list_running() -> list[str]:
    """Prefixes of the netstack topologies currently built on this machine."""
    return sorted({owner[0] for owner in running_namespaces().values()})


def ns_exec_argv(prefix: str, node: str, argv: list[str]) -> list[str]:
    """argv that runs ``argv`` inside ``node`` of the topology running under ``prefix``."""
    return netns_exec_argv(netns_name(prefix, node), argv)




# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class Port:
    """One veth end as built: where it lives and what is on the other side."""

    node: str
    link: str
    netns: str
    ifname: str
    mac: str
    peer_node: str
    peer_netns: str
    peer_ifname: str
    peer_mac: str
    device_mtu: int
    fcs: bool


@dataclass(frozen=True)
class BuiltTopology:
    """Names of everything a built topology consists of (pure data; see :func:`plan`)."""

    topology: Topology
    prefix: str
    namespaces: dict[str, str]  # node -> netns
    ports: dict[tuple[str, str], Port]  # (node, link) -> port
    impairments: dict[tuple[str, str], str] = field(default_factory=dict)  # (node, link) -> backend

    def netns(self, node: str) -> str:
        return self.namespaces[node]

    def port(self, node: str, link: str) -> Port:
        return self.ports[(node, link)]

    def iface(self, node: str, link: str) -> str:
        return self.ports[(node, link)].ifname

    def mac(self, node: str, link: str) -> str:
        return self.ports[(node, link)].mac

    def ports_of(self, node: str) -> list[Port]:
        return [p for (n, _), p in self.ports.items() if n == node]

    def exec_argv(self, node: str, argv: list[str]) -> list[str]:
        return ns_exec_argv(self.prefix, node, argv)


def plan(topology: Topology, prefix: str | None = None) -> BuiltTopology:
    """What :func:`build` will create for ``topology`` under ``prefix``, without creating anything."""
    prefix = validate_prefix(topology.prefix if prefix is None else prefix)
    namespaces = {n.name: netns_name(prefix, n.name) for n in topology.nodes}
    ports: dict[tuple[str, str], Port] = {}
    for link in topology.links:
        for end, peer in ((link.a, link.b), (link.b, link.a)):
            ports[(end.node, link.name)] = Port(
                node=end.node, link=link.name, netns=namespaces[end.node], ifname=end.ifname, mac=end.mac,
                peer_node=peer.node, peer_netns=namespaces[peer.node], peer_ifname=peer.ifname, peer_mac=peer.mac,
                device_mtu=link.device_mtu, fcs=link.fcs,
            )
    return BuiltTopology(topology, prefix, namespaces, ports)


# --------------------------------------------------------------------------- offloads and sysctls


def _write_sysctl(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _disable_ipv6() -> None:
    # Current thread is inside the namespace; /proc/sys/net follows the thread's netns.
    # "default" is inherited by veths created afterwards, so they never start DAD/RS/MLD.
    base = "/proc/sys/net/ipv6/conf"
    if not os.path.isdir(base):
        return  # kernel without IPv6: nothing to silence
    for conf in ("default", "all"):
        _write_sysctl(f"{base}/{conf}/disable_ipv6", "1")


def _no_forwarding() -> None:
    # A host is not a router. A new namespace can inherit ip_forward = 1 (it does on this VM), and
    # a host would then send a frame addressed to its MAC but not its IP back out of its link,
    # with its original source: garbage reflected into the fabric, and refused by the edge's
    # BCP 38 check as the host's own forgery (netstack/switch/sourceguard.py).
    _write_sysctl("/proc/sys/net/ipv4/ip_forward", "0")


def _ethtool(ns: str | None) -> Any:
    """A pyroute2 ``Ethtool`` in namespace ``ns`` (None: the caller's own)."""
    from pyroute2.ethtool import Ethtool

    if ns is None:
        return Ethtool()
    with in_netns(ns):
        return Ethtool()


def offload_state(ns: str | None, ifname: str) -> dict[str, bool]:
    """The offload features of an interface: ``{feature name: enabled}`` (changeable ones only)."""
    et = _ethtool(ns)
    try:
        feats = et.get_features(ifname).features
        return {name: bool(f.enable) for name, f in feats.items() if f.available}
    finally:
        et.close()


def disable_offloads(ns: str | None, ifname: str) -> dict[str, bool]:
    """Turn checksum offload, TSO, GSO, GRO (and VLAN TX insertion) off; verify by reading back.
    ``ns`` None: the caller's own namespace (a container's node runner)."""
    et = _ethtool(ns)
    try:
        feats = et.get_features(ifname)
        changed = False
        for name, feat in feats.features.items():
            if feat.available and feat.enable and OFFLOAD_PATTERN.search(name):
                feat.enable = False
                changed = True
        if changed:
            et.set_features(ifname, feats)
        after = {name: bool(f.enable) for name, f in et.get_features(ifname).features.items() if f.available}
    finally:
        et.close()
    still_on = sorted(n for n in after if after[n] and (n in REQUIRED_OFF or OFFLOAD_PATTERN.search(n)))
    if still_on:
        raise BuildError(f"offloads still on for {ifname} in {ns or 'this namespace'} after disabling them: "
                         f"{', '.join(still_on)}")
    return after


# --------------------------------------------------------------------------- build / teardown


def build(topology: Topology, prefix: str | None = None, *, apply_impairments: bool = True) -> BuiltTopology:
    """Create the namespaces, veths, addresses and impairments of ``topology``. All or nothing.

    On any failure, every namespace (and so every veth and nft table) created so far is
    removed and :class:`BuildError` is raised with the step that failed.
    """
    built = plan(topology, prefix)
    prefix = built.prefix
    _preflight(built, apply_impairments)
    created: list[str] = []
    step = "start"
    try:
        for node in topology.nodes:
            ns = built.namespaces[node.name]
            step = f"creating namespace {ns}"
            _create_netns(ns)
            created.append(ns)
            step = f"marking and configuring namespace {ns}"
            with _ipr(ns) as ipr:
                lo = ipr.link_lookup(ifname="lo")[0]
                ipr.link("set", index=lo, ifalias=_marker(prefix, node.name), state="up")
            with in_netns(ns):
                _disable_ipv6()
                if node.kind is not NodeKind.SWITCH:
                    _no_forwarding()

        with _ipr(None) as root:
            for link in topology.links:
                step = f"creating the veth pair of link {link.name}"
                a, b = built.port(link.a.node, link.name), built.port(link.b.node, link.name)
                root.link(
                    "add", kind="veth", ifname=a.ifname, net_ns_fd=a.netns, address=a.mac, mtu=a.device_mtu,
                    peer={"ifname": b.ifname, "net_ns_fd": b.netns, "address": b.mac, "mtu": b.device_mtu},
                )

        for port in built.ports.values():
            step = f"disabling offloads on {port.ifname} in {port.netns}"
            disable_offloads(port.netns, port.ifname)

        for node in topology.nodes:
            ns = built.namespaces[node.name]
            step = f"addressing and bringing up the interfaces of {node.name}"
            with _ipr(ns) as ipr:
                for port in built.ports_of(node.name):
                    idx = ipr.link_lookup(ifname=port.ifname)[0]
                    if node.kind is not NodeKind.SWITCH and node.ip is not None:
                        # The kernel adds the on-link route of the prefix with the address.
                        ipr.addr("add", index=idx, address=str(node.ip.ip), prefixlen=node.ip.network.prefixlen,
                                 broadcast=str(node.ip.network.broadcast_address))
                    if topology.link(port.link).state != "down":  # (declared down: left down, no carrier)
                        ipr.link("set", index=idx, state="up")

        if apply_impairments:
            step = "impairing the links"
            _apply_impairments(built)

        step = "checking the result"
        _verify(built)
    except BaseException as exc:
        # Deleting the namespaces takes their veths and nft tables with them; build never
        # creates anything in the root namespace.
        _remove_netns(created)
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        raise BuildError(
            f"building topology {topology.name!r} under prefix {prefix!r} failed while {step}: {exc}; "
            f"removed the {len(created)} namespace(s) created so far"
        ) from exc
    return built


def _apply_impairments(built: BuiltTopology) -> None:
    """Each link's ``[links.impairment]`` on the egress of its sending end(s), with the backend
    :func:`end_backend` picks; ``built.impairments`` records which (a switch's own model is set
    by its daemon's config, runtime.switch_config)."""
    for link in built.topology.links:
        imp = link.impairment
        for end in link.impaired_ends():
            assert imp is not None
            backend = end_backend(built.topology, link, end.node)
            if backend is not Backend.SWITCH:
                port = built.port(end.node, link.name)
                shaping = impair.Shaping(imp.delay_ns, imp.jitter_ns, imp.duplicate, imp.reorder)
                try:
                    used = impair.apply_impairment(built.prefix, port.netns, port.ifname, corrupt=imp.corrupt,
                                                   loss=imp.loss, backend=backend, shaping=shaping)
                except impair.ImpairmentError as exc:
                    raise BuildError(f"impairing {end.ifname} of {end.node} on link {link.name}: {exc}") from None
                if used is None:
                    continue
                backend = used
            built.impairments[(end.node, link.name)] = backend.value


def end_backend(topology: Topology, link: Link, node: str) -> Backend:
    """The backend that impairs ``node``'s egress on ``link`` (``impair.choose_backend``): the
    link's own, or for ``auto`` netem where the kernel has it, else the switch's model when the
    link is shaped and ``node`` is a switch, else nft."""
    imp = link.impairment
    if imp is None:
        raise impair.ImpairmentError(f"link {link.name} has no impairment")
    sender_is_switch = topology.node(node).kind is NodeKind.SWITCH
    return impair.choose_backend(imp.backend, shapes=imp.shapes, sender_is_switch=sender_is_switch)


def _preflight(built: BuiltTopology, apply_impairments: bool) -> None:
    if os.geteuid() != 0:
        raise BuildError("building a topology needs root (network namespaces, veths, nftables)")
    mine = running_namespaces(built.prefix)
    if mine:
        raise BuildError(
            f"a topology already runs under prefix {built.prefix!r} ({', '.join(sorted(mine))}); "
            f"tear it down first (netstack.topo.netns.teardown({built.prefix!r})) or choose another prefix"
        )
    existing = set(_list_netns())
    clash = sorted(ns for ns in built.namespaces.values() if ns in existing)
    if clash:
        raise BuildError(
            f"namespace(s) {', '.join(clash)} exist and are not netstack's; choose another prefix"
        )
    if apply_impairments:
        for link in built.topology.links:
            imp = link.impairment
            if imp is None or not imp.active:
                continue
            for end in link.impaired_ends():
                try:
                    backend = end_backend(built.topology, link, end.node)
                    if backend is Backend.NETEM and not impair.netem_available():
                        raise impair.ImpairmentError("backend 'netem' requested but this kernel has no netem")
                    if backend is Backend.NFT:
                        impair.need_program("nft", "nftables")
                        impair.nft_threshold(imp.corrupt, "corrupt")
                        impair.nft_threshold(imp.loss, "loss")
                except impair.ImpairmentError as exc:
                    raise BuildError(f"link {link.name} ({end.node}'s egress): {exc}") from None


def _create_netns(ns: str) -> None:
    from pyroute2 import netns as pr_netns

    if os.path.exists(os.path.join(NETNS_DIR, ns)):
        raise BuildError(f"namespace {ns} already exists")
    pr_netns.create(ns)


def _verify(built: BuiltTopology, up_timeout_s: float = 3.0) -> None:
    """Every port exists with its MAC and MTU, and is operationally up.

    A veth's carrier is on as soon as both ends are up, but the kernel publishes the
    operational state through linkwatch, which batches events (up to 1 s late); waiting for
    it here means a daemon started right after :func:`build` sees its ports UP.
    """
    deadline = time.monotonic() + up_timeout_s
    for node, ns in built.namespaces.items():
        while True:
            with _ipr(ns) as ipr:
                links = {ln.get("ifname"): ln for ln in ipr.get_links()}
            not_up = []
            for port in built.ports_of(node):
                ln = links.get(port.ifname)
                if ln is None:
                    raise BuildError(f"{port.ifname} missing in {ns}")
                if ln.get("address") != port.mac or ln.get("mtu") != port.device_mtu:
                    raise BuildError(
                        f"{port.ifname} in {ns} has MAC {ln.get('address')} MTU {ln.get('mtu')}, "
                        f"expected {port.mac} MTU {port.device_mtu}"
                    )
                if ln.get("state") != "up" and built.topology.link(port.link).state != "down":
                    not_up.append(port.ifname)
            if not not_up:
                break
            if time.monotonic() > deadline:
                raise BuildError(f"{', '.join(not_up)} in {ns} not operationally up after {up_timeout_s:g} s")
            time.sleep(0.01)


def _pids_in(namespaces: list[str]) -> list[int]:
    """Processes (other than this one) whose network namespace is one of ``namespaces``."""
    ids = set()
    for ns in namespaces:
        with contextlib.suppress(OSError):
            st = os.stat(os.path.join(NETNS_DIR, ns))
            ids.add((st.st_dev, st.st_ino))
    if not ids:
        return []
    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            st = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in ids:
            pids.append(int(entry))
    return pids


def _stop_processes(pids: list[int], grace_s: float = 2.0) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if _alive(p)]
    for pid in alive:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    return procstat.state(pid) not in ("", "Z")


def _remove_netns(namespaces: list[str]) -> list[str]:
    from pyroute2 import netns as pr_netns

    removed = []
    for ns in namespaces:
        try:
            pr_netns.remove(ns)
            removed.append(ns)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
    return removed


def teardown(prefix: str, *, kill_processes: bool = True) -> list[str]:
    """Remove the topology running under ``prefix``: its namespaces (and with them their veths
    and nft tables) and a ``netstack_<prefix>`` nft table in the root namespace, if any.

    With ``kill_processes`` (default), processes still living in those namespaces -- daemons
    started with ``ip netns exec`` -- get SIGTERM, then SIGKILL after 2 s: a process keeps its
    namespace and veths alive after the name is gone. Returns the namespaces removed.
    Idempotent; never touches a namespace without netstack's marker.
    """
    validate_prefix(prefix)
    namespaces = sorted(running_namespaces(prefix))
    if kill_processes:
        pids = _pids_in(namespaces)
        if pids:
            _stop_processes(pids)
    removed = _remove_netns(namespaces)
    with contextlib.suppress(impair.ImpairmentError):
        impair.delete_nft_table(prefix)
    return removed


def teardown_all(*, kill_processes: bool = True, prefixes: Collection[str] | None = None) -> list[str]:
    """Tear down every netstack topology on this machine (namespaces carrying the marker and
    root-namespace ``netstack_*`` nft tables), or, with ``prefixes``, only those prefixes'
    topologies and tables: the tests recover their own crashed runs so, never touching another
    user's testbed on a shared machine. Returns the namespaces removed."""
    if isinstance(prefixes, str):  # a str is a Collection of one-letter prefixes: never meant
        raise TypeError("prefixes: a collection of prefixes, not one string")
    removed: list[str] = []
    for prefix in list_running():
        if prefixes is None or prefix in prefixes:
            removed += teardown(prefix, kill_processes=kill_processes)
    for table in impair.list_nft_tables(None):
        owner = table[len(impair.NFT_TABLE_PREFIX):]
        if prefixes is None or owner in prefixes:
            with contextlib.suppress(impair.ImpairmentError):
                impair.delete_nft_table(owner)
    return removed
