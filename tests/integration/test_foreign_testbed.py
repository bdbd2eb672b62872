"""The tests never touch a testbed they did not make (issue 28).

On a shared machine other users run their own testbeds while the suite runs. Here a small real
testbed under a foreign-looking prefix is brought up by another process with a run directory of
its own, as another user would, and must come through every cleanup path the tests use unchanged:

- test_cleanup.py's tests, each with its fixture's teardown (crash recovery included);
- the integration fixtures' teardown (conftest.running, as the ``testbed`` fixture uses it);
- runtime.down, runtime.cleanup_protocols, netns.teardown, and runtime.down_all /
  netns.teardown_all limited to the test's prefixes, run on a prefix the foreign one starts with
  (the nastiest neighbour: a prefix match without the ``-`` boundary would take it).

Compared before and after: the foreign namespaces, their veths (by ifindex: never recreated),
the nft tables in them and its root-namespace table, the collector's shared-memory region, and its
daemons (the same pids, alive, control sockets answering ``status``). The foreign testbed is
removed at the end whatever happens. Nothing depends on other tests or on the order they run in.
"""

from __future__ import annotations

import inspect
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from netstack import runtime
from netstack.io.control import ControlError, request
from netstack.topo import impair, netns
from netstack.topo.model import load_topology, loads_topology
from netstack.topo.nsenter import iproute
from tests.topologies import H1, SW1, header, link, node

from . import test_cleanup as cleanup_tests  # a module, not its functions: pytest must not collect them twice
from .conftest import requires_root, running

pytestmark = pytest.mark.netns

#: The foreign testbed: a switch daemon and a collector daemon (control sockets, a shared-memory
#: region), an nft impairment (a table inside h1's namespace), two veth pairs.
FOREIGN_TOPOLOGY = header("someone-elses") + H1 + node("c1", "collector", "10.0.0.100/24") + SW1 + (
    link("h1", "sw1", named=True,
         extra='\n[links.impairment]\ncorrupt = 1e-3\ndirection = "a>b"\nbackend = "nft"\n')
    + link("sw1", "c1", named=True))

#: Another process brings it up (its daemons are not this test's children, as another user's).
_FOREIGN_UP = ("import sys; from netstack import runtime; from netstack.topo.model import loads_topology; "
               "runtime.up(loads_topology(sys.argv[2]), sys.argv[1])")


def _foreign_up(prefix: str, run_root: Path) -> None:
    env = {**os.environ, "NETSTACK_RUN_DIR": str(run_root)}
    r = subprocess.run([sys.executable, "-c", _FOREIGN_UP, prefix, FOREIGN_TOPOLOGY], env=env,
                       capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    # the root-namespace table an impairment on a root interface leaves (an unlimited
    # teardown_all removes every netstack_* table there)
    subprocess.run(["nft", "add", "table", "netdev", impair.nft_table_name(prefix)], check=True)


def _foreign_down(prefix: str, run_root: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NETSTACK_RUN_DIR", str(run_root))
        runtime.down(prefix)


def _answers(control: str) -> bool:
    try:
        return isinstance(request(control, "status", timeout=5.0), dict)
    except (OSError, ControlError, ValueError):
        return False


def _links(ns: str) -> list[tuple[str, int]]:
    with iproute(ns) as ipr:
        return sorted((link.get("ifname"), link["index"]) for link in ipr.get_links())


def snapshot(prefix: str, run_root: Path) -> dict[str, Any]:
    """Everything of the testbed under ``prefix`` that a cleanup could take away."""
    state = runtime.read_state(run_root / prefix / "state.json")
    namespaces = sorted(netns.running_namespaces(prefix))
    return {
        "namespaces": namespaces,
        "links": {ns: _links(ns) for ns in namespaces},
        "nft": {ns: impair.list_nft_tables(ns) for ns in namespaces},
        "root_nft": impair.nft_table_name(prefix) in impair.list_nft_tables(None),
        "shm": sorted(p.name for p in Path("/dev/shm").glob(f"netstack-{prefix}-*")),
        "daemons": {d.key: (d.pid, d.alive(), bool(d.control) and _answers(d.control))
                    for d in state.daemons},
    }


def _run_cleanup_tests(tmp_path_factory: pytest.TempPathFactory) -> None:
    """test_cleanup.py's tests as pytest runs them: each in its fixture (which tears down)."""
    tests = {name: f for name, f in vars(cleanup_tests).items() if name.startswith("test_") and callable(f)}
    assert tests, "test_cleanup.py has no tests left to check"
    for name, test in sorted(tests.items()):
        assert list(inspect.signature(test).parameters) == ["prefix"], \
            f"test_cleanup.{name} takes other fixtures: run it here with them"
        with cleanup_tests.scratch_prefix(tmp_path_factory.mktemp("c")) as p:
            test(p)


def _run_fixture_teardown(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The integration fixtures' body (conftest.running): up, then its teardown."""
    fixture = running(load_topology(None), tmp_path_factory, letter="f")
    try:
        state = next(fixture)
        assert netns.running_namespaces(state.prefix)
    finally:
        fixture.close()  # runs its finally: runtime.down(prefix)
    assert netns.running_namespaces(state.prefix) == {}


def _run_direct_cleanups(near: str) -> None:
    """runtime.down, down_all/teardown_all limited to ``near``, netns.teardown and
    cleanup_protocols, each once with something of ``near`` to remove."""
    topology = loads_topology(FOREIGN_TOPOLOGY)
    try:
        state = runtime.up(topology, near)
        assert sorted(runtime.down(near)) == sorted(state.namespaces.values())
        state = runtime.up(topology, near)
        shutil.rmtree(runtime.run_dir(near))  # a crashed run: state lost
        assert sorted(runtime.down_all(prefixes=[near])) == sorted(state.namespaces.values())
        subprocess.run(["nft", "add", "table", "netdev", impair.nft_table_name(near)], check=True)
        assert netns.teardown_all(prefixes=[near]) == []
        assert impair.nft_table_name(near) not in impair.list_nft_tables(None)
        assert netns.teardown_all(prefixes=[]) == []
        assert netns.teardown(near) == []
        runtime.cleanup_protocols(near)
    finally:
        runtime.down(near)  # whatever a failure left of it


@requires_root
def test_cleanup_paths_leave_a_foreign_testbed_intact(tmp_path_factory: pytest.TempPathFactory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # short run roots (mktemp, not tmp_path): a control socket's path must fit AF_UNIX's 108 bytes
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path_factory.mktemp("own")))  # the tests' run root
    foreign = "alice" + secrets.token_hex(3)
    near = foreign[:-1]  # a prefix of the foreign prefix: "alice1234a" next to "alice1234ab"
    foreign_root = tmp_path_factory.mktemp("alice")  # another user's run directories
    try:
        _foreign_up(foreign, foreign_root)
        before = snapshot(foreign, foreign_root)
        assert foreign in netns.list_running()  # an unlimited down --all would take it
        # all there to be taken away: a table in a namespace and in the root one, shared memory,
        # daemons alive and answering
        assert any(before["nft"].values()) and before["root_nft"] and before["shm"], before
        assert before["daemons"] and all(alive and answers for _, alive, answers in before["daemons"].values())
        _run_cleanup_tests(tmp_path_factory)
        assert snapshot(foreign, foreign_root) == before, "test_cleanup.py touched a foreign testbed"
        _run_fixture_teardown(tmp_path_factory)
        assert snapshot(foreign, foreign_root) == before, "the fixtures' teardown touched a foreign testbed"
        _run_direct_cleanups(near)
        assert snapshot(foreign, foreign_root) == before, "a prefix-limited cleanup touched a foreign testbed"
    finally:
        _foreign_down(foreign, foreign_root)
    assert netns.running_namespaces(foreign) == {}
    assert impair.nft_table_name(foreign) not in impair.list_nft_tables(None)


def test_one_string_is_refused_as_the_prefixes() -> None:
    # a str is a collection of one-letter prefixes: "alice" would mean a, l, i, c and e
    with pytest.raises(TypeError):
        runtime.down_all(prefixes="alice")
    with pytest.raises(TypeError):
        netns.teardown_all(prefixes="alice")
