"""The testbed as a Docker Swarm stack on a single-node swarm (docs/containers.md "Across
machines"): overlay networks, dnsrr endpoints; the same checks as under compose, and
``docker stack rm`` leaves nothing behind."""

from __future__ import annotations

import time

import pytest

from netstack.container.compose import ComposeOptions, generate
from netstack.topo.model import load_topology_spec

from .conftest import check_lg_masks_corruption, cli, leftovers, run, unique_prefix, wait_healthy, wait_ready


@pytest.fixture(scope="module")
def swarm(image):
    """A single-node swarm: this machine's own, or one made here (and left again at the end)."""
    state = run(["docker", "info", "--format", "{{.Swarm.LocalNodeState}}"], timeout=30).stdout.strip()
    made = state == "inactive"
    # swarm init makes docker_gwbridge; a swarm made here takes it away again
    had_gwbridge = run(["docker", "network", "inspect", "docker_gwbridge"], timeout=30).returncode == 0
    if made:
        r = run(["docker", "swarm", "init", "--advertise-addr", "127.0.0.1"], timeout=60)
        assert r.returncode == 0, r.stderr
    try:
        yield
    finally:
        if made:
            run(["docker", "swarm", "leave", "--force"], timeout=60)
            if not had_gwbridge:
                run(["docker", "network", "rm", "docker_gwbridge"], timeout=60)


@pytest.fixture(scope="module")
def stack(swarm, tmp_path_factory):
    prefix, underlay = unique_prefix("ds")
    hostname = run(["docker", "info", "--format", "{{.Name}}"], timeout=30).stdout.strip()
    path = tmp_path_factory.mktemp("swarm") / "stack.yml"
    # placement as a multi-machine stack has it, all on this machine's swarm node
    path.write_text(generate(load_topology_spec("default"), "default", None,
                             ComposeOptions(prefix=prefix, underlay=underlay, swarm=True,
                                            placement={n: hostname for n in ("h1", "sw1", "sw2", "h2", "c1")})))
    name = f"nst{prefix}"
    r = run(["docker", "stack", "deploy", "-c", str(path), name], timeout=120)
    try:
        assert r.returncode == 0, r.stderr
        yield {"prefix": prefix, "stack": name}
    finally:
        run(["docker", "stack", "rm", name], timeout=120)
        _wait_gone(prefix)


def _wait_gone(prefix: str, timeout: float = 90.0) -> dict[str, list[str]]:
    deadline = time.monotonic() + timeout
    left = leftovers(prefix)
    while any(left.values()) and time.monotonic() < deadline:
        time.sleep(1)
        left = leftovers(prefix)
    return left


def test_stack_comes_up_on_overlays(stack):
    wait_healthy(stack["prefix"], timeout=120)
    state = wait_ready(stack["prefix"])
    nets = run(["docker", "network", "ls", "--filter", f"label=io.netstack.prefix={stack['prefix']}",
                "--format", "{{.Driver}} {{.Scope}}"], timeout=30).stdout.split("\n")
    assert {n for n in nets if n} == {"overlay swarm"}
    assert len(state.tunnels["sw2"]) == 3


def test_h1_pings_h2(stack):
    wait_ready(stack["prefix"])
    r = cli("exec", "--prefix", stack["prefix"], "h1", "--", "ping", "-c3", "-i0.2", "-W2", "10.0.0.2")
    assert r.returncode == 0 and "3 received" in r.stdout, r.stdout + r.stderr


def test_linkguardian_masks_one_percent_corruption(stack):
    check_lg_masks_corruption(stack["prefix"])


def test_stack_rm_leaves_nothing(stack):
    wait_ready(stack["prefix"])
    r = run(["docker", "stack", "rm", stack["stack"]], timeout=120)
    assert r.returncode == 0, r.stderr
    assert _wait_gone(stack["prefix"]) == {"containers": [], "networks": [], "volumes": []}
