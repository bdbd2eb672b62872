"""The testbed as a Docker Swarm stack across two Docker engines on this one machine
(docs/containers.md "Two machines on one host", the steps "Across machines" gives for real ones):

- ``netstack compose lab up --engines 2`` makes two engines, each in network and UTS namespaces of
  its own, and a swarm of them (e1 the manager, e2 a worker);
- the shipped ``lg-across`` (the default topology, with 1 % corruption on sw1 -> sw2 and
  LinkGuardian declared on that link) is deployed with ``--place h1,sw1=<e1> --place
  sw2,h2,c1=<e2>``: the protected link crosses the engines, over an overlay between them;
- h1 pings h2 (full-size frames too), a sequenced stream arrives complete and in order, each
  engine's ``netstack status`` shows its own switches, ``docker stack rm`` leaves nothing on either
  engine, and ``netstack compose lab down`` leaves no engine, namespace, process or file.

Nothing here touches this machine's own engine but to read the image from it: its swarm state
stays as it was."""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from netstack import runtime

from .conftest import (
    assert_masked,
    cli,
    in_container,
    leftovers,
    logs,
    run,
    sequenced_stream,
    wait_healthy,
    wait_ready,
)

ON_E1, ON_E2 = {"h1", "sw1"}, {"sw2", "h2", "c1"}


@contextlib.contextmanager
def engine(docker_host: str) -> Iterator[None]:
    """The docker CLI (and netstack's, in and out of this process) talking to one engine."""
    before = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = docker_host
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = before


def _host_key() -> bytes | None:
    try:
        return Path("/etc/docker/key.json").read_bytes()
    except FileNotFoundError:
        return None


@pytest.fixture(scope="module")
def lab(image):
    prefix = "lb" + uuid.uuid4().hex[:6]
    host_key = _host_key()
    swarm_here = run(["docker", "info", "--format", "{{.Swarm.LocalNodeState}}"], timeout=30).stdout.strip()
    r = cli("compose", "lab", "up", "--engines", "2", "--prefix", prefix, "--json", timeout=300)
    try:
        assert r.returncode == 0, r.stderr[-3000:]
        st = json.loads(r.stdout)
        yield {"prefix": prefix, "e1": st["engines"][0], "e2": st["engines"][1], "status": st,
               "swarm_here": swarm_here, "host_key": host_key}
    finally:
        cli("compose", "lab", "down", "--prefix", prefix, timeout=300)


@pytest.fixture(scope="module")
def stack(lab, tmp_path_factory):
    prefix = "x" + uuid.uuid4().hex[:5]
    e1, e2 = lab["e1"], lab["e2"]
    path = tmp_path_factory.mktemp("swarm") / "stack.yml"
    name = f"nst{prefix}"
    with engine(e1["docker_host"]):  # the steps of docs/containers.md "Two machines on one host"
        r = cli("compose", "generate", "lg-across", "--swarm", "--prefix", prefix,
                "--place", f"{','.join(sorted(ON_E1))}={e1['hostname']}",
                "--place", f"{','.join(sorted(ON_E2))}={e2['hostname']}", "-o", str(path))
        assert r.returncode == 0, r.stderr
        r = run(["docker", "stack", "deploy", "-c", str(path), name], timeout=120)
    try:
        assert r.returncode == 0, r.stderr
        with engine(e1["docker_host"]):
            wait_healthy(prefix, timeout=150, nodes=ON_E1)
        with engine(e2["docker_host"]):
            wait_healthy(prefix, timeout=60, nodes=ON_E2)
        yield {"prefix": prefix, "stack": name, "e1": e1["docker_host"], "e2": e2["docker_host"]}
    finally:
        with engine(e1["docker_host"]):
            run(["docker", "stack", "rm", name], timeout=120)


def test_the_lab_is_two_engines_in_one_swarm(lab):
    e1, e2 = lab["e1"], lab["e2"]
    assert e1["answers"] and e2["answers"] and e1["swarm"] == e2["swarm"] == "active"
    assert e1["hostname"] != e2["hostname"]
    assert {(n["hostname"], n["manager"], n["ready"]) for n in lab["status"]["nodes"]} == {
        (e1["hostname"], True, True), (e2["hostname"], False, True)}
    # two engines for real: each in a network namespace of its own, neither this machine's
    pids = [int(Path(f"/var/lib/netstack-lab/{lab['prefix']}/{e}/docker.pid").read_text()) for e in ("e1", "e2")]
    nets = {os.stat(f"/proc/{p}/ns/net").st_ino for p in pids}
    assert len(nets) == 2 and os.stat("/proc/self/ns/net").st_ino not in nets
    # each with an identity of its own, kept in its own directory, not in the machine's /etc/docker
    assert e1["id"] and e2["id"] and e1["id"] != e2["id"]
    assert all(Path(f"/var/lib/netstack-lab/{lab['prefix']}/{e}/key.json").is_file() for e in ("e1", "e2"))
    assert lab["host_key"] == _host_key()


def test_placement_splits_the_nodes_between_the_engines(stack, lab):
    with engine(stack["e1"]):
        tasks = run(["docker", "stack", "ps", stack["stack"], "--filter", "desired-state=running",
                     "--format", "{{.Name}} {{.Node}}"], timeout=30).stdout.split("\n")
    where = {line.split()[0].split("_", 1)[1].split(".")[0]: line.split()[1] for line in tasks if line.strip()}
    assert where == {**{n: lab["e1"]["hostname"] for n in ON_E1}, **{n: lab["e2"]["hostname"] for n in ON_E2}}
    with engine(stack["e2"]):
        nets = run(["docker", "network", "ls", "--filter", f"label=io.netstack.prefix={stack['prefix']}",
                    "--format", "{{.Driver}} {{.Scope}}"], timeout=30).stdout.split("\n")
    assert {n for n in nets if n} == {"overlay swarm"}


def test_h1_pings_h2_across_the_engines(stack):
    with engine(stack["e1"]):
        wait_ready(stack["prefix"], nodes=ON_E1)
        r = cli("exec", "--prefix", stack["prefix"], "h1", "--", "ping", "-c3", "-i0.2", "-W2", "10.0.0.2")
        assert r.returncode == 0 and "3 received" in r.stdout, r.stdout + r.stderr
        # a full-size frame, not fragmented on the way: the tunnels have the topology's MTU (1500)
        # over an overlay that keeps 50 bytes of what it is given (docs/containers.md "MTU")
        r = cli("exec", "--prefix", stack["prefix"], "h1", "--", "ping", "-c3", "-i0.2", "-W2", "-s", "1472",
                "-M", "do", "10.0.0.2")
        assert r.returncode == 0 and "3 received" in r.stdout, r.stdout + r.stderr


def test_status_on_each_engine_shows_its_own_switches(stack):
    for host, mine, theirs in ((stack["e1"], "sw1", "sw2"), (stack["e2"], "sw2", "sw1")):
        with engine(host):
            r = cli("status", "--prefix", stack["prefix"], "--json")
        assert r.returncode == 0, r.stderr
        daemons = json.loads(r.stdout)["daemons"]
        assert mine in daemons and theirs not in daemons, sorted(daemons)
        assert daemons[mine]["ports"], daemons[mine]


def test_linkguardian_masks_one_percent_corruption_across_the_engines(stack):
    prefix = stack["prefix"]
    with engine(stack["e1"]):
        sender = wait_ready(prefix, nodes=ON_E1)
        # the topology's impairment, applied by sw1's runner in its container
        assert "netstack" in in_container(sender, "sw1", "nft", "list", "tables").stdout
        # LinkGuardian on before the stream, on both engines: declared in the topology, not enabled
        assert runtime.control(prefix, "sw1", "lg_status")["p-sw2"]["sender"]["enabled"] is True
    with engine(stack["e2"]):
        receiver = wait_ready(prefix, nodes=ON_E2)
        assert runtime.control(prefix, "sw2", "lg_status")["p-sw1"]["receiver"]["enabled"] is True
        before = runtime.status(prefix)["daemons"]["sw2"]["ports"]["p-sw1"]["fcs_errors"]
    res = sequenced_stream(sender, 3000, 1500, sink_state=receiver, engines=(stack["e1"], stack["e2"]))
    with engine(stack["e2"]):
        st = runtime.status(prefix)
        lg = runtime.control(prefix, "sw2", "lg_status")["p-sw1"]["receiver"]["counters"]
    drops = st["daemons"]["sw2"]["ports"]["p-sw1"]["fcs_errors"] - before
    assert_masked(res, drops, lg)


def test_stack_rm_leaves_nothing_on_either_engine(stack):
    with engine(stack["e1"]):
        r = run(["docker", "stack", "rm", stack["stack"]], timeout=120)
    assert r.returncode == 0, r.stderr
    for host in (stack["e1"], stack["e2"]):
        with engine(host):
            deadline = time.monotonic() + 90
            left = leftovers(stack["prefix"])
            while any(left.values()) and time.monotonic() < deadline:
                time.sleep(1)
                left = leftovers(stack["prefix"])
            assert left == {"containers": [], "networks": [], "volumes": []}, (host, left, logs(stack["prefix"]))


def test_lab_down_leaves_nothing(lab):
    prefix = lab["prefix"]
    pids = [int(Path(f"/var/lib/netstack-lab/{prefix}/{e}/docker.pid").read_text()) for e in ("e1", "e2")]
    r = cli("compose", "lab", "down", "--prefix", prefix, timeout=300)
    assert r.returncode == 0, r.stderr
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"{prefix}-")]
    assert not Path(f"/var/lib/netstack-lab/{prefix}").exists()
    assert not [p for p in pids if Path(f"/proc/{p}").exists()]
    assert run(["ip", "link", "show", f"nl{prefix}"], timeout=10).returncode != 0
    assert f"/var/lib/netstack-lab/{prefix}/" not in Path("/proc/self/mountinfo").read_text()
    again = cli("compose", "lab", "down", "--prefix", prefix)  # idempotent
    assert again.returncode == 0, again.stderr
    # and this machine's own engine neither joined nor left a swarm
    assert run(["docker", "info", "--format", "{{.Swarm.LocalNodeState}}"], timeout=30).stdout.strip() \
        == lab["swarm_here"]
