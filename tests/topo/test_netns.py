"""Building and tearing down topologies: pure naming tests, then real namespaces (``netns``)."""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import socket
import subprocess
import time

import pytest

from netstack.topo import impair
from netstack.topo import netns as topo_netns
from netstack.topo.model import default_topology, loads_topology
from netstack.topo.netns import (
    REQUIRED_OFF,
    BuildError,
    build,
    in_netns,
    list_running,
    ns_exec_argv,
    offload_state,
    plan,
    read_marker,
    running_namespaces,
    teardown,
    teardown_all,
)

from . import PAIR

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="namespace tests need root")


def _netns_with(prefix: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(topo_netns.NETNS_DIR) if n.startswith(f"{prefix}-"))
    except FileNotFoundError:
        return []


def _root_links() -> set[str]:
    with topo_netns._ipr(None) as ipr:
        return {ln.get("ifname") for ln in ipr.get_links()}


@pytest.fixture
def prefix():
    """A fresh prefix; whatever the test built under it is torn down even if the test fails."""
    p = "t" + secrets.token_hex(4)
    try:
        yield p
    finally:
        teardown(p)
        leftover = _netns_with(p)
        assert not leftover, f"namespaces left behind: {leftover}"
        assert impair.nft_table_name(p) not in impair.list_nft_tables(None)


# --------------------------------------------------------------------------- pure


def test_plan_names_everything():
    built = plan(default_topology(), "lab")
    assert built.prefix == "lab"
    assert built.namespaces == {n: f"lab-{n}" for n in ("h1", "h2", "c1", "sw1", "sw2")}
    p = built.port("sw1", "sw1-sw2")
    assert (p.netns, p.ifname, p.peer_node, p.peer_netns, p.peer_ifname) == ("lab-sw1", "p-sw2", "sw2", "lab-sw2",
                                                                             "p-sw1")
    assert p.device_mtu == 1564 and p.fcs
    assert built.iface("h1", "h1-sw1") == "eth0"
    assert built.mac("h1", "h1-sw1") == "02:00:0a:00:00:01"
    assert built.port("sw1", "h1-sw1").peer_mac == "02:00:0a:00:00:01"
    assert sorted(p.ifname for p in built.ports_of("sw2")) == ["p-c1", "p-h2", "p-sw1"]
    assert len(built.ports) == 8
    assert plan(default_topology()).prefix == "ns"


def test_plan_rejects_bad_prefix():
    with pytest.raises(ValueError, match="is not a prefix"):
        plan(default_topology(), "bad-prefix")


def test_ns_exec_argv():
    assert ns_exec_argv("ns", "h1", ["ping", "-c1", "10.0.0.2"]) == [
        "ip", "netns", "exec", "ns-h1", "ping", "-c1", "10.0.0.2"]
    assert plan(default_topology(), "x").exec_argv("sw1", ["true"]) == ["ip", "netns", "exec", "x-sw1", "true"]


def test_a_marker_that_could_not_be_looked_at_is_no_verdict(monkeypatch):
    """Without a thread to look into the namespace (a pids limit), read_marker says so: "None"
    would call the namespace not netstack's, and down would skip a testbed of ours."""
    import threading

    from netstack.topo.nsenter import NamespaceThreadError

    def refuse(self):
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(NamespaceThreadError, match="look into namespace 'x-h1'"):
        read_marker("x-h1")


# --------------------------------------------------------------------------- live


@pytest.mark.netns
@needs_root
def test_build_default_topology(prefix):
    topo = default_topology()
    before = _root_links()
    built = build(topo, prefix)

    assert prefix in list_running()
    assert sorted(running_namespaces(prefix)) == sorted(built.namespaces.values())
    for node, ns in built.namespaces.items():
        assert read_marker(ns) == (prefix, node)
    assert _root_links() == before, "nothing may be created in the root namespace"

    for node in topo.nodes:
        ns = built.netns(node.name)
        with topo_netns._ipr(ns) as ipr:
            links = {ln.get("ifname"): ln for ln in ipr.get_links()}
            addrs = [(a.get("IFA_ADDRESS"), a.get("prefixlen"), a["index"]) for a in ipr.get_addr()]
            routes = [(r.get("RTA_DST"), r.get("dst_len"), r.get("RTA_OIF")) for r in ipr.get_routes(table=254)]
        assert set(links) == {"lo"} | {p.ifname for p in built.ports_of(node.name)}
        for port in built.ports_of(node.name):
            ln = links[port.ifname]
            assert ln.get("address") == port.mac
            assert ln.get("mtu") == port.device_mtu
            assert ln.get("state") == "up"
            feats = offload_state(ns, port.ifname)
            for name in REQUIRED_OFF:
                assert feats.get(name) is False, f"{name} still on for {port.ifname} in {ns}"
        with in_netns(ns), open("/proc/sys/net/ipv6/conf/all/disable_ipv6") as f:
            assert f.read().strip() == "1"
        if node.ip is None:
            assert [a for a in addrs if a[0] != "127.0.0.1"] == [], "switch ports carry no address"
        else:
            (port,) = built.ports_of(node.name)
            idx = links[port.ifname]["index"]
            assert (str(node.ip.ip), 24, idx) in addrs
            assert ("10.0.0.0", 24, idx) in routes  # the on-link /24
            assert not [a for a in addrs if ":" in (a[0] or "")], "no IPv6 addresses"

    assert built.impairments == {("sw1", "sw1-sw2"): impair.resolve_backend("auto").value}
    active = impair.active_impairment(prefix, built.netns("sw1"), "p-sw2")
    assert active is not None and active["corrupt"] == pytest.approx(1e-3)
    assert impair.active_impairment(prefix, built.netns("sw2"), "p-sw1") is None

    removed = teardown(prefix)
    assert sorted(removed) == sorted(built.namespaces.values())
    assert _netns_with(prefix) == []
    assert prefix not in list_running()
    assert _root_links() == before
    assert teardown(prefix) == []  # idempotent


@pytest.mark.netns
@needs_root
def test_build_refuses_running_prefix(prefix):
    topo = loads_topology(PAIR)
    build(topo, prefix)
    with pytest.raises(BuildError, match="already runs under prefix"):
        build(topo, prefix)
    assert len(_netns_with(prefix)) == 2  # the first build is untouched


@pytest.mark.netns
@needs_root
def test_foreign_namespace_is_never_touched(prefix):
    from pyroute2 import netns as pr_netns

    foreign = f"{prefix}-a"
    pr_netns.create(foreign)  # same name as ours would be, but no marker
    try:
        with pytest.raises(BuildError, match="not netstack's"):
            build(loads_topology(PAIR), prefix)
        assert read_marker(foreign) is None
        assert teardown(prefix) == []
        assert os.path.exists(os.path.join(topo_netns.NETNS_DIR, foreign))
        assert prefix not in list_running()
    finally:
        pr_netns.remove(foreign)


@pytest.mark.netns
@needs_root
def test_build_is_all_or_nothing(prefix, monkeypatch):
    calls = []
    real = topo_netns.disable_offloads

    def failing(ns, ifname):
        calls.append(ifname)
        if len(calls) == 3:
            raise OSError("injected failure")
        return real(ns, ifname)

    monkeypatch.setattr(topo_netns, "disable_offloads", failing)
    with pytest.raises(BuildError, match=r"disabling offloads.*injected failure.*removed the 5 namespace"):
        build(default_topology(), prefix)
    assert _netns_with(prefix) == []
    assert prefix not in list_running()


@pytest.mark.netns
@needs_root
def test_direct_pair_carries_kernel_udp_and_arp(prefix):
    built = build(loads_topology(PAIR), prefix)
    with in_netns(built.netns("b")):
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.bind(("10.9.0.2", 7000))
    with in_netns(built.netns("a")):
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with rx, tx:
        tx.sendto(b"hello", ("10.9.0.2", 7000))
        ready, _, _ = select.select([rx], [], [], 2.0)
        assert ready, "datagram did not cross the veth pair"
        data, src = rx.recvfrom(100)
        assert data == b"hello" and src[0] == "10.9.0.1"
    with topo_netns._ipr(built.netns("a")) as ipr:
        neigh = {n.get("NDA_DST"): n.get("NDA_LLADDR") for n in ipr.get_neighbours()}
    assert neigh.get("10.9.0.2") == built.mac("b", "a-b"), "ARP resolved to the peer's MAC"


@pytest.mark.netns
@needs_root
def test_teardown_stops_processes_inside(prefix):
    built = build(loads_topology(PAIR), prefix)
    proc = subprocess.Popen(built.exec_argv("a", ["sleep", "30"]))
    try:
        deadline = time.monotonic() + 5
        while proc.pid not in topo_netns._pids_in([built.netns("a")]) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.pid in topo_netns._pids_in([built.netns("a")])
        teardown(prefix)
        assert proc.wait(timeout=5) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.netns
@needs_root
def test_the_markers_read_inside_a_running_event_loop(prefix):
    """pyroute2's synchronous handle cannot run inside a running asyncio loop ("This event loop is
    already running"): read there on the caller's thread, every marker was unreadable and every
    testbed missing from what an asyncio program (the UI server) listed. On a thread of its own,
    the loop is not its thread's."""
    import asyncio

    built = build(loads_topology(PAIR), prefix)

    async def look() -> tuple[object, list[str]]:
        return read_marker(built.netns("a")), list_running()

    owner, running = asyncio.run(look())
    assert owner == (prefix, "a") and prefix in running


#: a process that lists every testbed, over and over (what ``netstack ls``, ``up`` and the
#: "nothing is running" errors do: each reads the marker inside every netstack namespace)
_LISTER = """
import sys, time
from netstack.topo.netns import list_running
end = time.monotonic() + float(sys.argv[1])
rounds = 0
while time.monotonic() < end:
    list_running()
    rounds += 1
print(rounds)
"""


@pytest.mark.netns
@needs_root
def test_a_process_that_lists_the_testbeds_is_not_stopped_by_a_teardown(prefix):
    """Reading another testbed's marker must not make this process one of its residents: a
    teardown stops every process whose /proc/<pid>/ns/net is one of its namespaces, and that is
    the main thread's. Read from the main thread, a lister was inside a testbed's namespace in
    30 % of the samples, and an unrelated CLI (or a test worker beside the live tests, in CI)
    died of the SIGTERM. Read from a thread of its own: never."""
    import sys

    built = build(loads_topology(PAIR), prefix)
    namespaces = sorted(built.namespaces.values())
    lister = subprocess.Popen([sys.executable, "-c", _LISTER, "6"], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # (its imports)
        samples, seen = 0, 0
        end = time.monotonic() + 2.0
        while time.monotonic() < end and lister.poll() is None:
            seen += lister.pid in topo_netns._pids_in(namespaces)
            samples += 1
        assert lister.poll() is None, "the lister ended early"
        assert seen == 0, f"the lister was taken for a resident in {seen} of {samples} samples"
        teardown(prefix)
        out, _ = lister.communicate(timeout=30)
        assert lister.returncode == 0 and int(out) > 0  # it ran on, and ended on its own
    finally:
        if lister.poll() is None:
            lister.kill()
            lister.wait()


@pytest.mark.netns
@needs_root
def test_teardown_all_covers_running_prefixes(prefix):
    # Unlimited, teardown_all would also remove every other user's testbed on this machine: it
    # runs limited to this test's prefix, which it still finds the way the unlimited one does
    # (tests/integration/test_foreign_testbed.py checks that a foreign testbed survives this).
    build(loads_topology(PAIR), prefix)
    subprocess.run(["nft", "add", "table", "netdev", impair.nft_table_name(prefix)], check=True)
    removed = teardown_all(prefixes=[prefix])
    assert sorted(removed) == [f"{prefix}-a", f"{prefix}-b"]
    assert _netns_with(prefix) == []
    assert impair.nft_table_name(prefix) not in impair.list_nft_tables(None)


@pytest.mark.netns
@needs_root
def test_teardown_removes_root_nft_table(prefix):
    subprocess.run(["nft", "add", "table", "netdev", impair.nft_table_name(prefix)], check=True)
    try:
        assert impair.nft_table_name(prefix) in impair.list_nft_tables(None)
        teardown(prefix)
        assert impair.nft_table_name(prefix) not in impair.list_nft_tables(None)
    finally:
        with contextlib.suppress(Exception):
            impair.delete_nft_table(prefix)
