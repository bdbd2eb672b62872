"""The testbed in containers with docker-compose (docs/containers.md): the default topology's
compose file comes up healthy, h1 pings h2 through sw1 and sw2, LinkGuardian masks 1 %
corruption on sw1-sw2 for a sequenced stream, the CLI reads and drives the containers, and
``docker-compose down`` leaves nothing behind; the image build is cached."""

from __future__ import annotations

import shutil
import subprocess
import warnings

import pytest

from netstack.cli import main
from netstack.container.compose import ComposeOptions, generate
from netstack.runtime import run_dir
from netstack.topo.model import load_topology_spec

from .conftest import (
    check_lg_masks_corruption,
    cli,
    image_id,
    in_container,
    leftovers,
    run,
    unique_prefix,
    wait_healthy,
    wait_ready,
)


@pytest.fixture(scope="module")
def compose(image, tmp_path_factory):
    """The default topology under docker-compose, with a prefix and underlay of its own."""
    prefix, underlay = unique_prefix("dc")
    path = tmp_path_factory.mktemp("compose") / "docker-compose.yml"
    path.write_text(generate(load_topology_spec("default"), "default", None,
                             ComposeOptions(prefix=prefix, underlay=underlay)))
    argv = ["docker-compose", "-p", f"netstack-test-{prefix}", "-f", str(path)]
    r = run([*argv, "up", "-d"], timeout=180)
    try:
        assert r.returncode == 0, r.stderr
        yield {"prefix": prefix, "compose": argv}
    finally:
        run([*argv, "down", "--remove-orphans", "--timeout", "5"], timeout=120)


def test_every_node_comes_up_healthy(compose):
    wait_healthy(compose["prefix"])
    state = wait_ready(compose["prefix"])
    assert state.runtime == "compose"
    assert {p.ifname for p in state.ports if p.node == "sw2"} == {"p-sw1", "p-h2", "p-c1"}
    assert {d.name for d in state.daemons} == {"sw1", "sw2", "c1"}  # switches and the DTA collector
    # each port is a VXLAN tunnel with the topology's MAC and MTU, offloads off
    out = in_container(state, "sw1", "ip", "-d", "link", "show", "p-sw2").stdout
    assert "vxlan id" in out and "mtu 1564" in out


def test_h1_pings_h2_through_both_switches(compose):
    state = wait_ready(compose["prefix"])
    r = cli("exec", "--prefix", compose["prefix"], "h1", "--", "ping", "-c3", "-i0.2", "-W2", "10.0.0.2")
    assert r.returncode == 0 and "3 received" in r.stdout, r.stdout + r.stderr
    st = cli("status", "--prefix", compose["prefix"])
    assert st.returncode == 0 and "p-sw2" in st.stdout and "p-sw1" in st.stdout
    # the same ping, run by hand in the container
    assert in_container(state, "h2", "ping", "-c1", "-W2", "10.0.0.1").returncode == 0


def test_linkguardian_masks_one_percent_corruption(compose):
    check_lg_masks_corruption(compose["prefix"])


def test_dta_reports_land_in_the_collectors_memory(compose):
    """netstack dta against containers: the translator in sw2's container, a report from h1 (the
    machine's reporter tool in h1's namespace), the value read from c1's shared memory."""
    prefix = compose["prefix"]
    wait_ready(prefix)
    r = cli("dta", "enable", "--prefix", prefix)
    assert r.returncode == 0, r.stderr
    r = cli("dta", "report", "keywrite", "4242", "31337", "--prefix", prefix)
    # 3: the report went out but the run is invalid (a process was scheduled late: containers
    # share this machine's cores); what this test needs is the value in c1's memory
    assert r.returncode == 0 or (r.returncode == 3 and "INVALID RUN" in r.stderr), r.stderr
    if r.returncode == 3:
        warnings.warn(f"DTA in containers ran starved: {r.stderr.strip().splitlines()[-1][:300]}", stacklevel=1)
    r = cli("dta", "query", "keywrite", "4242", "--prefix", prefix)
    assert r.returncode == 0 and "key 4242: 31337" in r.stdout, r.stdout + r.stderr


def test_the_cli_refuses_what_it_cannot_do_to_containers(compose, capsys):
    prefix = compose["prefix"]
    assert main(["--runtime", "compose", "down", "--prefix", prefix]) == 2
    assert "runs in containers" in capsys.readouterr().err
    assert main(["--runtime", "netns", "status", "--prefix", prefix]) == 2  # not a namespace run
    assert "no topology is running" in capsys.readouterr().err
    r = cli("exec", "--prefix", prefix, "h9", "--", "true")
    assert r.returncode == 2 and "no node 'h9'" in r.stderr


def test_building_the_image_again_reuses_the_cache(image):
    r = run(["bash", "scripts/docker/build-image.sh"], timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert image_id() == image
    assert "Running in" not in r.stderr  # no step ran: every one came from the cache


def test_onepipe_and_its_controller_run_in_containers(image, tmp_path):
    """The 1Pipe topology (its controller drives the switches through their control sockets:
    the containers share the run directory): processes on the four hosts scatter in one total
    order, and ``down -v`` also takes the shared volume."""
    prefix, underlay = unique_prefix("dp")
    path = tmp_path / "onepipe.yml"
    path.write_text(generate(load_topology_spec("onepipe"), "onepipe", None,
                             ComposeOptions(prefix=prefix, underlay=underlay)))
    argv = ["docker-compose", "-p", f"netstack-test-{prefix}", "-f", str(path)]
    try:
        r = run([*argv, "up", "-d"], timeout=180)
        assert r.returncode == 0, r.stderr
        state = wait_ready(prefix, nodes={"h1", "h2", "h3", "h4", "tor1", "tor2", "spine1", "ctl"})
        assert any(d.kind == "onepipe-controller" for d in state.daemons)
        assert len(leftovers(prefix)["volumes"]) == 1  # the shared run directory, labelled
        out = tmp_path / "run"
        r = cli("onepipe", "run", "--prefix", prefix, "--procs", "4", "--seconds", "1", "--out", str(out),
                timeout=180)
        # 3: the run happened but the machine starved it (netstack.validity: containers and VXLAN cost
        # more than namespaces). Its timing numbers are no result, but total order is a safety
        # property that must hold whatever the timing: the check below judges it either way.
        assert r.returncode in (0, 3), r.stderr[-2000:]
        if r.returncode == 3:
            warnings.warn(f"1Pipe in containers ran starved: {r.stderr.strip().splitlines()[-1][:300]}", stacklevel=1)
        r = cli("onepipe", "check", str(out))
        assert r.returncode == 0 and r.stdout.startswith("ok:"), r.stdout + r.stderr
        # the run's file on this machine (onepipe-procs.json, for `onepipe kill` while it runs): the
        # one thing of ours outside the containers, which docker-compose down does not know of, so
        # the run removes it, and the directory it made, when it ends
        assert not run_dir(prefix).exists(), sorted(p.name for p in run_dir(prefix).iterdir())
    finally:
        run([*argv, "down", "-v", "--timeout", "5"], timeout=120)
        shutil.rmtree(run_dir(prefix), ignore_errors=True)  # (only if the assertion above failed)
    assert leftovers(prefix) == {"containers": [], "networks": [], "volumes": []}


def test_down_removes_every_container_network_and_rule(compose):
    prefix = compose["prefix"]
    state = wait_ready(prefix)
    present = leftovers(prefix)
    assert len(present["containers"]) == 5 and len(present["networks"]) == 4
    pids = [int(ns.split("/")[2]) for ns in state.namespaces.values()]
    r = run([*compose["compose"], "down", "--timeout", "5"], timeout=120)
    assert r.returncode == 0, r.stderr
    assert leftovers(prefix) == {"containers": [], "networks": [], "volumes": []}
    for pid in pids:  # the containers' processes, and so their namespaces and nft rules, are gone
        assert subprocess.run(["kill", "-0", str(pid)], capture_output=True, check=False).returncode != 0
    assert f"netstack_{prefix}" not in run(["nft", "list", "tables"], timeout=30).stdout
