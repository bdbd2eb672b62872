"""``netstack node run NODE``: what each container of a compose/Swarm deployment runs.

Inside the container of one topology node (docs/containers.md):

1. find the container's interface on each of the node's links by its underlay subnet
   (``netstack.container.plan``), rename it ``ul<i>`` and turn its offloads off;
2. resolve the peer's address on that network through docker's DNS (``<peer>.<network>``)
   and create the link's port as a point-to-point **VXLAN tunnel** to it, with the name, MAC
   and MTU the namespace runtime gives the veth end; offloads off, as on a veth; a host or
   collector gets its address on it;
3. load the link's nft impairment if this end sends it;
4. start the node's daemons exactly as ``netstack up`` does (the switch daemon with the
   config ``netstack.runtime.switch_config`` writes, the protocol node kinds' daemons), their
   output on the container's stdout, control sockets under /run/netstack/<prefix>/;
5. write ``node-<NODE>.json`` there (what the CLI on the machine reads to find ports and
   daemons) and supervise: a daemon that exits ends the container with its status; a peer
   whose address changes (a rescheduled Swarm task) gets the tunnel re-pointed; SIGTERM stops
   the daemons. This process is PID 1: it also reaps orphans.

``netstack node health`` is the container's health check: every daemon answers ``ping`` on
its control socket and every port is up.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import procstat
from ..topo.model import NodeKind, Topology, netns_name
from .plan import JOINING, NODE_STATE, READY, VXLAN_OVERHEAD, VXLAN_PORT, LinkPlan, plan_links

#: how long to wait for docker to attach every network, and for a peer's name to resolve
ATTACH_TIMEOUT_S = 30.0
RESOLVE_TIMEOUT_S = 120.0
#: how often the supervisor re-resolves the peers (a Swarm task rescheduled elsewhere)
RERESOLVE_EVERY_S = 2.0
#: where a topology handed over as text is written (so that it can be read back, by path)
TOPOLOGY_FILE = "topology.toml"


class NodeError(RuntimeError):
    """The node could not be set up; the message says which step and why."""


@dataclass
class Tunnel:
    plan: LinkPlan
    ifname: str
    underlay: str
    local: str
    peer: str
    remote: str


def say(node: str, msg: str) -> None:
    print(f"[node {node}] {msg}", flush=True)


# --------------------------------------------------------------------------- configuration


def topology_from_env(rdir: Path) -> Topology:
    """The topology the compose file names: NETSTACK_TOPOLOGY (a shipped name or a path) or
    NETSTACK_TOPOLOGY_TOML (the file's text, written to ``rdir`` so that it has a path)."""
    from ..topo.model import load_topology, load_topology_spec

    text = os.environ.get("NETSTACK_TOPOLOGY_TOML")
    if text:
        rdir.mkdir(parents=True, exist_ok=True)
        path = rdir / TOPOLOGY_FILE
        # atomically: under a shared run directory (SHARES_RUN_DIR) every container writes it
        tmp = rdir / f".{TOPOLOGY_FILE}.{os.getpid()}.{socket.gethostname()}"
        tmp.write_text(text)
        tmp.replace(path)
        return load_topology(path)
    return load_topology_spec(os.environ.get("NETSTACK_TOPOLOGY") or None)


def _addresses(ipr: Any) -> dict[str, tuple[int, str, str]]:
    """``{address: (ifindex, ifname, address)}`` of every IPv4 address in this namespace."""
    names = {ln["index"]: ln.get_attr("IFLA_IFNAME") for ln in ipr.get_links()}
    out = {}
    for a in ipr.get_addr(family=socket.AF_INET):
        addr = a.get_attr("IFA_ADDRESS")
        out[addr] = (a["index"], names.get(a["index"], "?"), addr)
    return out


def find_underlays(node: str, links: list[LinkPlan], timeout: float = ATTACH_TIMEOUT_S) -> dict[int, tuple[int, str]]:
    """``{link index: (ifindex, own address)}``: the interface docker attached on each link's
    network, found by subnet (docker's own names, eth0..., follow an order of its own)."""
    from ..topo.nsenter import iproute

    deadline = time.monotonic() + timeout
    while True:
        with iproute(None) as ipr:
            addrs = _addresses(ipr)
        found: dict[int, tuple[int, str]] = {}
        for lp in links:
            for addr, (idx, _name, _a) in addrs.items():
                if ipaddress.IPv4Address(addr) in lp.subnet:
                    found[lp.index] = (idx, addr)
        missing = [lp for lp in links if lp.index not in found]
        if not missing:
            return found
        if time.monotonic() > deadline:
            have = ", ".join(f"{name}={a}" for a, (_, name, _) in sorted(addrs.items())) or "none"
            raise NodeError(f"no interface on the network of link(s) {', '.join(lp.link for lp in missing)} "
                            f"(subnets {', '.join(str(lp.subnet) for lp in missing)}) after {timeout:g} s; "
                            f"addresses here: {have}. Is NETSTACK_UNDERLAY the range the compose file was "
                            "generated with?")
        time.sleep(0.2)


def resolve(name: str) -> str | None:
    try:
        infos = socket.getaddrinfo(name, None, socket.AF_INET, socket.SOCK_DGRAM)
    except (socket.gaierror, UnicodeError):
        return None
    return str(infos[0][4][0]) if infos else None


def resolve_peer(node: str, lp: LinkPlan, peer: str, timeout: float = RESOLVE_TIMEOUT_S) -> str:
    name = lp.alias(peer)
    deadline = time.monotonic() + timeout
    next_note = time.monotonic() + 5
    while True:
        addr = resolve(name)
        if addr is not None:
            return addr
        if time.monotonic() > deadline:
            raise NodeError(f"link {lp.link}: the peer {peer} ({name}) did not appear on network {lp.network} "
                            f"within {timeout:g} s")
        if time.monotonic() > next_note:
            say(node, f"link {lp.link}: waiting for {peer} ({name}) to start")
            next_note = time.monotonic() + 10
        time.sleep(0.25)


def build_tunnels(topology: Topology, node: str, links: list[LinkPlan]) -> list[Tunnel]:
    """Steps 1-2 of the module docstring; returns the tunnels made."""
    from ..topo.netns import disable_offloads
    from ..topo.nsenter import iproute

    under = find_underlays(node, links)
    tunnels = []
    me = topology.node(node)
    with iproute(None) as ipr:
        for lp in links:
            link = topology.link(lp.link)
            end, peer = link.end(node), link.peer(node)
            idx, local = under[lp.index]
            ul = lp.underlay_ifname()
            ipr.link("set", index=idx, state="down")
            ipr.link("set", index=idx, ifname=ul)
            ipr.link("set", index=idx, state="up")
            disable_offloads(None, ul)
            remote = resolve_peer(node, lp, peer.node)
            ipr.link("add", ifname=end.ifname, kind="vxlan", vxlan_id=lp.vni, vxlan_link=idx,
                     vxlan_local=local, vxlan_group=remote, vxlan_port=VXLAN_PORT, vxlan_learning=0,
                     address=end.mac, mtu=lp.device_mtu)
            disable_offloads(None, end.ifname)
            port = ipr.link_lookup(ifname=end.ifname)[0]
            _check_mtu(ipr, port, lp, ul)
            if me.kind is not NodeKind.SWITCH and me.ip is not None:
                ipr.addr("add", index=port, address=str(me.ip.ip), prefixlen=me.ip.network.prefixlen,
                         broadcast=str(me.ip.network.broadcast_address))
            ipr.link("set", index=port, state="up")
            tunnels.append(Tunnel(lp, end.ifname, ul, local, peer.node, remote))
            say(node, f"link {lp.link}: {end.ifname} ({end.mac}, mtu {lp.device_mtu}) = vxlan {lp.vni} "
                      f"{local} -> {peer.node} {remote} over {ul}")
    return tunnels


def _check_mtu(ipr: Any, port: int, lp: LinkPlan, ul: str) -> None:
    """The tunnel has the topology's MTU, or the node fails with the reason: the kernel clamps a
    VXLAN device's MTU to its underlay's less the header, silently, and a link that drops every
    full-size frame would pass a ping (found under Swarm, whose overlay keeps 50 bytes of the MTU
    the network is given: docs/containers.md "MTU")."""
    got = ipr.get_links(port)[0].get_attr("IFLA_MTU")
    if got != lp.device_mtu:
        under = ipr.get_links(ipr.link_lookup(ifname=ul)[0])[0].get_attr("IFLA_MTU")
        raise NodeError(f"link {lp.link}: the tunnel got MTU {got}, not the topology's {lp.device_mtu}: the "
                        f"underlay {ul} has MTU {under}, and a tunnel needs {VXLAN_OVERHEAD} bytes of it "
                        f"({lp.underlay_mtu} in all). Regenerate the compose file with this netstack version")


def repoint(node: str, tunnels: list[Tunnel]) -> None:
    """Re-resolve each peer; re-point a tunnel whose peer moved (its default FDB entry)."""
    from ..topo.nsenter import iproute

    for t in tunnels:
        addr = resolve(t.plan.alias(t.peer))
        if addr is None or addr == t.remote:
            continue
        with iproute(None) as ipr:
            idx = ipr.link_lookup(ifname=t.ifname)[0]
            ipr.fdb("replace", ifindex=idx, lladdr="00:00:00:00:00:00", dst=addr)
        say(node, f"link {t.plan.link}: peer {t.peer} moved {t.remote} -> {addr}; tunnel re-pointed")
        t.remote = addr


# --------------------------------------------------------------------------- daemons


@dataclass
class Child:
    name: str
    kind: str
    control: str
    proc: subprocess.Popen[bytes] | None  #: None: started by a node kind itself (pid only)
    pid: int


def start_daemons(topology: Topology, node: str, prefix: str, rdir: Path) -> list[Child]:
    """Step 4: the daemons ``netstack up`` would start in this node's namespace."""
    from .. import protocols, runtime
    from ..topo.netns import plan

    built = plan(topology, prefix)
    me = topology.node(node)
    specs: list[tuple[str, str, list[str]]] = []  # (name, kind, argv without --control)
    children: list[Child] = []
    if me.kind is NodeKind.SWITCH:
        cfg = rdir / f"{node}.json"
        cfg.write_text(json.dumps(runtime.switch_config(topology, built, node), indent=2))
        specs.append((node, "switch", [sys.executable, "-m", "daemons.switch", "--config", str(cfg)]))
    module = protocols.node_kinds().get(me.kind.value)
    if module is not None:
        for item in runtime._node_daemons(module, topology, built, me, rdir, prefix, {}):
            if isinstance(item, runtime.Daemon):
                children.append(Child(item.key, item.kind, item.control, None, item.pid))
                continue
            name = f"{node}-{item.suffix}" if item.suffix else node
            specs.append((name, item.kind or me.kind.value, list(item.argv)))
    for name, kind, argv in specs:
        sock = rdir / f"{name}.sock"
        # stdout/stderr inherited: the daemons' logs are the container's (docker logs)
        proc = subprocess.Popen([*argv, "--control", str(sock)], stdin=subprocess.DEVNULL, start_new_session=True)
        children.append(Child(name, kind, str(sock), proc, proc.pid))
        say(node, f"started {kind} daemon {name} (pid {proc.pid})")
    for child in children:
        _wait_ready(node, child)
    return children


def _wait_ready(node: str, child: Child, timeout: float = 15.0) -> None:
    from ..io.control import ControlError, request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.proc is not None and child.proc.poll() is not None:
            raise NodeError(f"{child.kind} daemon {child.name} exited during start-up (status "
                            f"{child.proc.returncode}); its output is above")
        if not child.control:
            return
        with contextlib.suppress(OSError, ControlError, ValueError):
            request(child.control, "ping", timeout=1.0)
            return
        time.sleep(0.05)
    raise NodeError(f"{child.kind} daemon {child.name} did not answer on {child.control} within {timeout:g} s")


def stop_children(children: list[Child]) -> None:
    from ..runtime import stop_groups

    by_pid = {c.pid: c for c in children}
    # every group, as before stop_groups asked whether a pid is still ours: these are the runner's
    # own children, in a container where nothing else starts processes, and a child that has
    # exited (and was reaped by poll) may have left children of its own in its group
    stop_groups(list(by_pid), lambda pid: _alive(by_pid[pid]), ours=lambda _pid: True)
    for c in children:
        if c.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.proc.wait(timeout=1.0)


def _alive(c: Child) -> bool:
    if c.proc is not None:
        return c.proc.poll() is None
    try:
        os.kill(c.pid, 0)
    except ProcessLookupError:
        return False
    return True


def reap_orphans(children: list[Child]) -> None:
    """As PID 1, collect exited processes that are not our own children's (those are waited
    for through their Popen objects, which must see their own status)."""
    mine = {c.pid for c in children if c.proc is not None}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in mine:
            continue
        stat = procstat.stat_fields(int(entry))
        if stat is not None and stat[0] == "Z" and len(stat) > 1 and stat[1] == str(me):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(entry), os.WNOHANG)


# --------------------------------------------------------------------------- state


def node_state(topology: Topology, node: str, prefix: str, tunnels: list[Tunnel], children: list[Child],
               impairments: dict[str, str], source: str) -> dict[str, Any]:
    """The piece of the run state this container contributes (``netstack.container.discover``
    merges the pieces into the shape ``netstack up`` writes)."""
    me = topology.node(node)
    ports = []
    for link, end in topology.ends_of(node):
        peer = link.peer(node)
        ports.append({"node": node, "link": link.name, "ifname": end.ifname, "mac": end.mac, "peer": peer.node,
                      "fcs": link.fcs})
    return {
        "phase": READY, "prefix": prefix, "node": node, "kind": me.kind.value, "topology": topology.name,
        "source": source,
        "ip": str(me.ip) if me.ip is not None else None,
        "ports": ports,
        "links": {link.name: {"a": link.a.node, "b": link.b.node, "rate_bps": link.rate_bps,
                               "delay_ns": link.delay_ns, "mtu": link.mtu, "fcs": link.fcs}
                  for link, _ in topology.ends_of(node)},
        "tunnels": [{"link": t.plan.link, "ifname": t.ifname, "underlay": t.underlay, "vni": t.plan.vni,
                     "local": t.local, "peer": t.peer, "remote": t.remote} for t in tunnels],
        "impairments": impairments,
        "daemons": [{"node": node, "kind": c.kind, "name": c.name, "control": c.control, "pid": c.pid}
                    for c in children],
        "started": time.time(),
    }


def write_state(rdir: Path, node: str, state: dict[str, Any]) -> None:
    path = rdir / NODE_STATE.format(node=node)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)


# --------------------------------------------------------------------------- run / health


def run(node: str) -> int:
    """The container's main process (module docstring)."""
    from ..runtime import run_dir
    from ..topo.model import TopologyError

    prefix_env = os.environ.get("NETSTACK_PREFIX")
    underlay = os.environ.get("NETSTACK_UNDERLAY")
    stop = {"signal": 0}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    children: list[Child] = []
    try:
        rdir = run_dir(prefix_env or "ns")
        topology = topology_from_env(rdir)
        if os.environ.get("NETSTACK_KEYS"):  # the key file as the compose file hands it over (a secret)
            topology = dataclasses.replace(topology, keys=os.environ["NETSTACK_KEYS"])
        prefix = prefix_env or topology.prefix
        rdir = run_dir(prefix)
        rdir.mkdir(parents=True, exist_ok=True)
        if node not in {n.name for n in topology.nodes}:
            raise NodeError(f"topology {topology.name!r} has no node {node!r} "
                            f"(nodes: {', '.join(n.name for n in topology.nodes)})")
        # the node's own namespace is this container's: what would run "ip netns exec <it>"
        # runs here directly (netstack.topo.netns.netns_exec_argv)
        os.environ["NETSTACK_SELF_NETNS"] = netns_name(prefix, node)
        links = [lp for lp in (plan_links(topology, underlay) if underlay else plan_links(topology))
                 if node in (lp.a, lp.b)]
        say(node, f"topology {topology.name!r}, prefix {prefix}, {len(links)} link(s)")
        write_state(rdir, node, {"phase": JOINING, "node": node, "prefix": prefix, "started": time.time()})
        tunnels = build_tunnels(topology, node, links)
        impairments = apply_impairments(topology, node, prefix)
        children = start_daemons(topology, node, prefix, rdir)
        source = str(rdir / TOPOLOGY_FILE) if os.environ.get("NETSTACK_TOPOLOGY_TOML") else topology.source
        write_state(rdir, node, node_state(topology, node, prefix, tunnels, children, impairments, source))
        say(node, "ready")
        return supervise(node, tunnels, children, stop)
    except (NodeError, TopologyError, OSError, ValueError) as exc:
        say(node, f"error: {exc}")
        stop_children(children)
        return 1
    except Exception as exc:  # pyroute2's NetlinkError and friends: say what failed
        say(node, f"error: {type(exc).__name__}: {exc}")
        stop_children(children)
        return 1


def apply_impairments(topology: Topology, node: str, prefix: str) -> dict[str, str]:
    """Step 3: the nft/netem impairments this end of its links sends (the switch backend's
    model travels in the switch config instead, as in ``netstack up``)."""
    from ..topo import impair
    from ..topo.model import Backend

    out = {}
    for link, _end in topology.ends_of(node):
        imp = link.impairment
        for end in link.impaired_ends():
            if end.node != node or imp is None:
                continue
            if imp.backend is Backend.SWITCH:
                out[link.name] = Backend.SWITCH.value
                continue
            used = impair.apply_impairment(prefix, None, end.ifname, corrupt=imp.corrupt, loss=imp.loss,
                                           backend=imp.backend)
            if used is not None:
                out[link.name] = used.value
                say(node, f"link {link.name}: {end.ifname} impaired (corrupt {imp.corrupt:g}, loss {imp.loss:g}) "
                          f"[{used.value}]")
    return out


def supervise(node: str, tunnels: list[Tunnel], children: list[Child], stop: dict[str, int]) -> int:
    next_resolve = time.monotonic() + RERESOLVE_EVERY_S
    while not stop["signal"]:
        for c in children:
            if not _alive(c):
                code = c.proc.returncode if c.proc is not None else None
                say(node, f"{c.kind} daemon {c.name} exited (status {code}); stopping the node")
                stop_children(children)
                return code if isinstance(code, int) and code > 0 else 1
        reap_orphans(children)
        if time.monotonic() >= next_resolve:
            with contextlib.suppress(Exception):  # a resolver hiccup must not end the node
                repoint(node, tunnels)
            next_resolve = time.monotonic() + RERESOLVE_EVERY_S
        time.sleep(0.2)
    say(node, f"signal {stop['signal']}: stopping")
    stop_children(children)
    return 0


def _link_flags(ifname: str) -> int | None:
    """``ifname``'s interface flags in this network namespace (SIOCGIFFLAGS), or None: no such
    interface. An ioctl, not netlink: the health check runs every few seconds in every container,
    and importing pyroute2 alone cost it 0.14 s of CPU (netstack/container/health.py)."""
    import fcntl
    import struct

    siocgifflags = 0x8913  # linux/sockios.h
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            req = fcntl.ioctl(s.fileno(), siocgifflags, struct.pack("16sh", ifname.encode()[:15], 0))
        except OSError:
            return None
    return int(struct.unpack("16sh", req[:18])[1]) & 0xFFFF


def health(node: str | None = None, *, joining_ok: bool = False) -> tuple[bool, str]:
    """``(healthy, why)``: the node's state file exists, every port is up, every daemon answers.

    ``joining_ok``: a node still waiting for its peers counts as healthy. Swarm publishes a
    task's DNS name only once its health check has passed, and each node waits for its peers'
    names before it can make its tunnels: a strict check would leave every node waiting for the
    others. (Compose publishes names at once; its files keep the strict check.)"""
    from ..io.control import ControlError, request
    from ..runtime import run_dir

    prefix = os.environ.get("NETSTACK_PREFIX") or "ns"
    rdir = run_dir(prefix)
    files = [rdir / NODE_STATE.format(node=node)] if node else sorted(rdir.glob(NODE_STATE.format(node="*")))
    mine = [f for f in files if f.is_file()]
    if node is None:
        host = socket.gethostname()
        mine = [f for f in mine if f.name == NODE_STATE.format(node=host)] or mine[:1]
    if not mine:
        return False, f"no node state in {rdir} yet (starting)"
    st = json.loads(mine[0].read_text())
    if st.get("phase") == JOINING:
        return joining_ok, f"node {st.get('node')}: waiting for its peers to appear"
    for p in st["ports"]:
        flags = _link_flags(p["ifname"])
        if flags is None:
            return False, f"port {p['ifname']} is missing"
        if not flags & 1:  # IFF_UP
            return False, f"port {p['ifname']} is down"
    for d in st["daemons"]:
        if not d.get("control"):
            continue
        try:
            request(d["control"], "ping", timeout=2.0)
        except (OSError, ControlError, ValueError) as exc:
            return False, f"daemon {d['name']} does not answer: {exc}"
    return True, f"node {st['node']}: {len(st['ports'])} port(s) up, {len(st['daemons'])} daemon(s) answering"
