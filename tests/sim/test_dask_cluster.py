"""A Dask cluster across stand-in machines (issue 36): ``netstack dask up``, a scheduler and two
workers each in a network namespace and working directory of its own, runs ``netstack sim
--scheduler`` with results byte-identical to ``--workers 2``, survives a worker killed mid-sweep
(every run once, the same results), and ``netstack dask down`` leaves nothing. These are the steps
of docs/sim.md "Two machines on one host", run through the CLI as a user runs them."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netstack import lab as labmod
from netstack.sim.scenario import canonical_json

ROOT = Path(__file__).resolve().parents[2]
#: six runs of ~1.5 s each on this 2-core machine: long enough for a kill to land between two
#: progress lines, short enough for the whole test to stay under a minute
SWEEP = ["sim", "lg-testbed", "--scenario", "lg-stream", "--param", "count=15000", "--seeds", "1-6", "--json"]
SEEDS = [1, 2, 3, 4, 5, 6]
PROGRESS = re.compile(r"\[(\d+)/(\d+)\] seed ")


def netstack(*argv: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "netstack.cli", *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def prefix(tmp_path: Path) -> Iterator[str]:
    """A fresh lab prefix; whatever happens, its lab is taken down (a half-made one too)."""
    if os.geteuid() != 0:
        pytest.skip("a Dask lab makes network namespaces: root only")
    p = "dk" + uuid.uuid4().hex[:6]
    try:
        yield p
    finally:
        if netstack("dask", "down", "--prefix", p, cwd=tmp_path, timeout=60).returncode != 0:
            labmod.destroy(p)  # the CLI could not: the library's own teardown, which cannot refuse


def _tree(pid: int) -> list[int]:
    import psutil

    try:
        proc = psutil.Process(pid)
        return [pid, *(c.pid for c in proc.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def _ns(pid: int, kind: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{kind}")


def _runs(doc: dict[str, Any]) -> list[str]:
    assert [r["seed"] for r in doc["runs"]] == SEEDS  # every spec once, in spec order
    assert not [r["error"] for r in doc["runs"] if "error" in r]
    return [canonical_json(r) for r in doc["runs"]]


def _sweep_killing(tmp_path: Path, scheduler: str, victim: int) -> tuple[dict[str, Any], str]:
    """The sweep on ``scheduler``; when its progress says at least one run ended and not all,
    SIGKILL ``victim`` (a worker's ``dask worker`` process) and its children."""
    out, err = tmp_path / "killed.json", tmp_path / "killed.err"
    with out.open("w") as fo, err.open("w") as fe:
        proc = subprocess.Popen([sys.executable, "-m", "netstack.cli", *SWEEP, "--scheduler", scheduler,
                                 "--results-dir", str(tmp_path / "r")], cwd=tmp_path, stdout=fo, stderr=fe)
    try:
        deadline, killed = time.monotonic() + 90, None
        while killed is None and time.monotonic() < deadline and proc.poll() is None:
            done = [(int(a), int(b)) for a, b in PROGRESS.findall(err.read_text())]
            if done and done[-1][0] < done[-1][1]:
                killed = _tree(victim)
                for pid in killed:
                    os.kill(pid, signal.SIGKILL)
                at = done[-1]
            time.sleep(0.05)
        assert killed, f"no progress line came in time, or the sweep ended first:\n{err.read_text()}"
        assert proc.poll() is None, "the sweep ended before the kill took effect"
        assert not any(labmod.alive(p) for p in killed)
        assert proc.wait(timeout=90) == 0, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return json.loads(out.read_text()), f"killed at {at[0]}/{at[1]}"


@pytest.mark.netns
def test_a_sweep_across_two_worker_machines(prefix, tmp_path):
    up = netstack("dask", "up", "--prefix", prefix, "--json", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    doc = json.loads(up.stdout)
    scheduler = doc["scheduler"]
    machines = {m["name"]: m for m in doc["machines"]}
    assert set(machines) == {"sched", "w1", "w2"} and all(m["alive"] for m in machines.values())

    # each worker (its nanny, and the worker process under it) on a machine of its own: network
    # and UTS namespace, working directory; none in the host's, none in the repository
    for kind in ("net", "uts"):
        spaces = {name: {_ns(p, kind) for p in _tree(m["pid"])} for name, m in machines.items()}
        assert all(len(s) == 1 for s in spaces.values()), spaces
        assert len({next(iter(s)) for s in spaces.values()} | {_ns(os.getpid(), kind)}) == 4, spaces
    for name in ("w1", "w2"):
        assert len(_tree(machines[name]["pid"])) >= 2  # the nanny and its worker
        for pid in _tree(machines[name]["pid"]):
            cwd = os.readlink(f"/proc/{pid}/cwd")
            assert cwd == machines[name]["workdir"] and not cwd.startswith(str(ROOT)), (name, cwd)
    assert machines["w1"]["workdir"] != machines["w2"]["workdir"]

    # the same sweep on local processes and on the cluster: byte-identical, run by run
    local = netstack(*SWEEP, "--workers", "2", "--results-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    baseline = _runs(json.loads(local.stdout))
    remote = netstack(*SWEEP, "--scheduler", scheduler, "--results-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert remote.returncode == 0, remote.stderr
    remote_doc = json.loads(remote.stdout)
    assert remote_doc["scheduler"] == scheduler
    assert _runs(remote_doc) == baseline

    # w1 killed mid-sweep: the scheduler gives its runs to w2; every run once, the same results
    killed_doc, when = _sweep_killing(tmp_path, scheduler, machines["w1"]["pid"])
    assert _runs(killed_doc) == baseline, when
    log = Path(machines["sched"]["log"]).read_text()
    assert re.search(r"Remove worker .* name: w1\b", log), log[-2000:]  # the scheduler saw it go
    st = netstack("dask", "status", "--prefix", prefix, "--json", cwd=tmp_path, timeout=60)
    assert st.returncode == 1  # one worker of two: a failed check
    status = json.loads(st.stdout)
    assert status["answering"] and [w["name"] for w in status["workers"]] == ["w2"]

    # down leaves no namespace, process, directory or host interface; a second down is a no-op
    pids = [p for m in machines.values() for p in _tree(m["pid"])]
    down = netstack("dask", "down", "--prefix", prefix, "--json", cwd=tmp_path, timeout=60)
    assert down.returncode == 0, down.stderr
    assert json.loads(down.stdout)["removed"]
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert [n for n in namespaces if n.startswith(f"{prefix}-")] == []
    assert [p for p in pids if labmod.alive(p)] == []
    assert not labmod.lab_dir(prefix).exists()
    assert subprocess.run(["ip", "link", "show", labmod.host_ifname(prefix)], capture_output=True).returncode != 0
    again = netstack("dask", "down", "--prefix", prefix, cwd=tmp_path, timeout=60)
    assert again.returncode == 0 and "nothing to take down" in again.stdout


def test_a_sweep_carries_a_topology_file_to_its_workers(tmp_path, monkeypatch):
    """A worker on another machine has no copy of the user's file: each run carries the file's
    text (and its path, which the run reports as its source), a shipped topology its name (found
    in the worker's own netstack). A run whose file is gone reads the same as one of the file."""
    from dataclasses import replace

    from netstack import cli
    from netstack.commands import sim
    from netstack.sim.scenario import RunSpec, TopologyFile, get, run
    from netstack.sim.sweep import _spec_dict

    text = (ROOT / "netstack/topo/examples/lg-testbed.toml").read_text()
    path = tmp_path / "lab.toml"
    path.write_text(text)
    monkeypatch.chdir(tmp_path)
    for topology, expected in (("lab.toml", TopologyFile(str(path), text)), ("lg-testbed", "lg-testbed")):
        args = cli.build_parser().parse_args(["sim", topology, "--scenario", "lg-stream", "--seeds", "1-2",
                                              "--scheduler", "tcp://10.0.0.5:8786"])
        specs, _ = sim._specs(args, get("lg-stream"))
        assert [s.topology for s in specs] == [expected, expected]
    # a flow-size CDF file goes by its absolute path (a worker's working directory is another)
    (tmp_path / "my.cdf").write_text("100 0\n1000 1\n")
    args = cli.build_parser().parse_args(["sim", "lab.toml", "--scenario", "tcd-fct", "--param",
                                          "workload=my.cdf,websearch,143"])
    specs, _ = sim._specs(args, get("tcd-fct"))
    cdf = str(tmp_path / "my.cdf")
    assert [s.params["workload"] for s in specs] == [cdf, "websearch", "143"]
    assert all(s.files == {cdf: "100 0\n1000 1\n"} for s in specs)
    carried = RunSpec("lg-stream", TopologyFile(str(path), text), 1, params={"count": 300})
    assert _spec_dict(carried)["topology"] == str(path)  # a failed run's spec names the file, not all of it
    from_file = canonical_json(run(replace(carried, topology=str(path))))
    path.unlink()
    monkeypatch.chdir("/")
    doc = run(carried)
    assert doc["topology"] == {"name": "lg-testbed", "source": str(path)}
    assert canonical_json(doc) == from_file


def test_a_run_carries_the_cdf_file_its_parameters_name(tmp_path, monkeypatch):
    """``--param workload=my.cdf``: the sweep's runs carry the file's text (RunSpec.files), so a
    worker without the file (deleted here, another working directory) runs the same flows."""
    from dataclasses import replace

    from netstack import cli
    from netstack.commands import sim
    from netstack.sim.scenario import get, run
    from netstack.sim.workload import WorkloadError, flow_sizes

    cdf = tmp_path / "my.cdf"
    cdf.write_text("# size cumulative\n200 0\n3000 0.5\n9000 1\n")
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser().parse_args(["sim", "lg-testbed", "--scenario", "tcp-flows", "--param",
                                          "workload=my.cdf", "--param", "flows=20"])
    (spec,), _ = sim._specs(args, get("tcp-flows"))
    assert spec.params["workload"] == str(cdf) and spec.files == {str(cdf): cdf.read_text()}
    from_file = canonical_json(run(replace(spec, files={})))
    cdf.unlink()
    monkeypatch.chdir("/")
    with pytest.raises(WorkloadError):  # nothing on this machine any more
        flow_sizes(str(cdf))
    doc = run(spec)
    assert doc["result"]["workload"] == "my" and canonical_json(doc) == from_file


def test_dask_commands_need_root_and_a_lab(tmp_path, monkeypatch, capsys):
    from netstack import cli

    monkeypatch.setenv(labmod.LAB_ROOT_ENV, str(tmp_path))
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert cli.main(["dask", "up", "--prefix", "dkx"]) == 2
    assert "run as root" in capsys.readouterr().err
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert cli.main(["dask", "status", "--prefix", "dkx"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("netstack dask: error: no lab 'dkx'") and err.count("\n") == 1
    assert cli.main(["dask", "up", "--workers", "0", "--prefix", "dkx"]) == 2
    assert cli.main(["dask"]) == 2
