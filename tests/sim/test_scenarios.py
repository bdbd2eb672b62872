"""Scenarios, sweeps (processes and Dask) and ``netstack sim``."""

from __future__ import annotations

import json

import pytest

from netstack.cli import main as cli
from netstack.sim.scenario import (
    SCHEMA,
    RunSpec,
    ScenarioError,
    examples,
    get,
    resolve_topology,
    run,
    scenarios,
    time_scale,
)
from netstack.sim.sweep import grid, sweep
from netstack.topo.model import TopologyError

SMALL = {"count": 400, "rate_pps": 5000.0}


def test_every_scenario_declares_its_runtimes_and_parameters():
    reg = scenarios()
    assert {"udp-stream", "forwarding", "lg-stream", "lg-stress", "tcsack-transfer"} <= set(reg)
    for sc in reg.values():
        assert sc.runtimes and sc.description and isinstance(dict(sc.params), dict)
    assert get("lg-stream").runtimes == ("sim", "live")


def test_parameters_are_checked_and_converted():
    sc = get("udp-stream")
    p = sc.check_params({"count": "7", "rate_pps": "2.5e3", "src": "h2"})
    assert p["count"] == 7 and p["rate_pps"] == 2500.0 and p["src"] == "h2" and p["dst"] == "h2"
    for bad, problem in (({"count": "many"}, "not a number"), ({"count": "1.5"}, "whole number"),
                         ({"colour": 1}, "unknown parameter")):
        with pytest.raises(ScenarioError, match=problem):
            sc.check_params(bad)


def test_run_gives_the_common_schema():
    doc = run(RunSpec("udp-stream", "lg-testbed", 3, None, SMALL))
    assert doc["schema"] == SCHEMA and doc["runtime"] == "sim" and doc["seed"] == 3
    assert doc["topology"]["name"] == "lg-testbed" and doc["time_scale"] == 1000.0
    assert doc["params"]["count"] == 400 and doc["result"]["send"]["sent"] == 400
    eng = doc["engine"]
    assert eng["events"] > 0 and eng["frames"] > 0 and eng["events_per_s"] > 0 and eng["virtual_ns"] > 0
    json.dumps(doc)


def test_a_duration_sets_the_stream_length():
    doc = run(RunSpec("udp-stream", None, 1, 100_000_000, {"rate_pps": 1000.0}))
    assert doc["result"]["send"]["sent"] == 100 and doc["duration_ns"] == 100_000_000


@pytest.mark.parametrize("spec,problem", [
    (RunSpec("nope"), "no scenario"),
    (RunSpec("lg-stress", runtime="live"), "runs on sim, not live"),
    (RunSpec("udp-stream", runtime="moon"), "runtime"),
    (RunSpec("udp-stream", duration_ns=0), "duration must be positive"),
    (RunSpec("udp-stream", params={"src": "sw1"}), "is a switch"),
])
def test_bad_runs_are_clear_errors(spec, problem):
    with pytest.raises(ScenarioError, match=problem):
        run(spec)


def test_topologies_by_name_path_and_document():
    assert set(examples()) >= {"default", "lg-testbed", "lg-100g"}
    assert resolve_topology("lg-100g").name == "lg-100g"
    assert resolve_topology(str(examples()["lg-testbed"])).name == "lg-testbed"
    assert resolve_topology(None).name == "linkguardian-testbed"
    with pytest.raises(TopologyError, match="shipped topologies"):
        resolve_topology("no-such-file.toml")
    assert time_scale(resolve_topology("lg-100g")) == 1.0 and time_scale(resolve_topology(None)) == 1000.0


def test_a_sweep_runs_every_point_in_order_in_parallel_processes():
    specs = grid(RunSpec("udp-stream", "lg-testbed", params=SMALL), seeds=[1, 2], points={"size": [100, 300]})
    assert [(s.seed, s.params["size"]) for s in specs] == [(1, 100), (2, 100), (1, 300), (2, 300)]
    seen = []
    par = sweep(specs, workers=2, progress=lambda done, total, r: seen.append((done, total)))
    seq = sweep(specs, workers=1)
    assert [r["params"]["size"] for r in par] == [100, 100, 300, 300] and [r["seed"] for r in par] == [1, 2, 1, 2]
    assert [r["result"] for r in par] == [r["result"] for r in seq]  # processes change nothing
    assert sorted(seen) == [(i, 4) for i in range(1, 5)]


def test_a_failing_run_is_reported_and_the_others_stand():
    out = sweep([RunSpec("udp-stream", params=SMALL), RunSpec("udp-stream", params={"src": "sw1"})], workers=1)
    assert "error" not in out[0] and "is a switch" in out[1]["error"] and out[1]["spec"]["params"] == {"src": "sw1"}


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    distributed = pytest.importorskip("distributed")
    import dask

    # (the scratch space is the test's own, not Dask's shared default in /tmp)
    with dask.config.set({"temporary-directory": str(tmp_path_factory.mktemp("dask"))}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc:
        yield lc.scheduler_address


def test_a_sweep_runs_on_a_dask_cluster(dask_cluster):
    specs = grid(RunSpec("udp-stream", "lg-testbed", params=SMALL), seeds=[1, 2, 3])
    got = sweep(specs, scheduler=dask_cluster)
    assert [r["seed"] for r in got] == [1, 2, 3]
    assert [r["result"] for r in got] == [r["result"] for r in sweep(specs, workers=1)]


def test_a_run_whose_worker_dies_is_an_error_result_and_the_others_stand(tmp_path):
    """Dask gives a run up when the workers running it die (KilledWorker, after
    ``allowed-failures`` deaths; none allowed here): that run is a result with its error, the
    sweep's other runs stand, and nothing is raised at the caller."""
    import os
    import signal
    import threading
    import time

    distributed = pytest.importorskip("distributed")
    import dask

    specs = grid(RunSpec("udp-stream", params={"count": 30000, "rate_pps": 50000.0}), seeds=[1, 2])
    with dask.config.set({"distributed.scheduler.allowed-failures": 0, "temporary-directory": str(tmp_path)}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, \
            distributed.Client(lc) as client:
        pids = sorted(client.run(os.getpid).values())

        def kill_one() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not client.processing().get(
                    next(a for a, p in client.run(os.getpid).items() if p == pids[0]), ()):
                time.sleep(0.05)
            os.kill(pids[0], signal.SIGKILL)  # mid-run: the worker had a task

        killer = threading.Thread(target=kill_one)
        killer.start()
        got = sweep(specs, scheduler=client)
        killer.join()
    errors = [r for r in got if "error" in r]
    assert len(errors) == 1 and "KilledWorker" in errors[0]["error"], [r.get("error") for r in got]
    assert [r["seed"] for r in got] == [1, 2]
    ok = next(r for r in got if "error" not in r)
    assert ok["result"] == sweep([s for s in specs if s.seed == ok["seed"]], workers=1)[0]["result"]


def test_sweep_without_dask_installed_says_how_to_get_it(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_dask(name, *args, **kwargs):
        if name == "distributed":
            raise ImportError("no distributed")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dask)
    with pytest.raises(ScenarioError, match="netstack\\[dask\\]"):
        sweep([RunSpec("udp-stream", params=SMALL)], scheduler="tcp://127.0.0.1:1")


# ------------------------------------------------------------------------------- CLI
def test_cli_lists_scenarios_and_topologies(capsys):
    assert cli(["sim", "--list"]) == 0
    out = capsys.readouterr().out
    assert "lg-stream" in out and "[sim/live]" in out and "lg-testbed" in out


def test_cli_runs_a_sweep_and_writes_one_json_document(tmp_path, capsys):
    rc = cli(["sim", "lg-testbed", "--scenario", "lg-stream", "--param", "count=300", "--param", "size=100,200",
              "--seeds", "1-2", "--workers", "2", "--results-dir", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr()
    doc = json.loads((tmp_path / "sim-lg-stream-latest.json").read_text())
    assert doc["scenario"] == "lg-stream" and doc["runtime"] == "sim" and len(doc["runs"]) == 4
    assert {(r["seed"], r["params"]["size"]) for r in doc["runs"]} == {(1, 100), (2, 100), (1, 200), (2, 200)}
    assert all(r["schema"] == SCHEMA and r["result"]["linkguardian"]["sender"]["enabled"] for r in doc["runs"])
    assert "effective_loss" in out.out and "[4/4]" in out.err  # a table, and progress on stderr


def test_cli_same_seed_same_bytes(tmp_path):
    docs = []
    for d in ("a", "b"):
        assert cli(["sim", "default", "--scenario", "udp-stream", "--param", "count=500", "--seed", "4",
                    "--results-dir", str(tmp_path / d), "--json"]) == 0
        doc = json.loads((tmp_path / d / "sim-udp-stream-latest.json").read_text())
        docs.append([{k: v for k, v in r.items() if k != "engine"} for r in doc["runs"]])
    assert json.dumps(docs[0], sort_keys=True) == json.dumps(docs[1], sort_keys=True)


@pytest.mark.parametrize("argv,problem", [
    (["sim", "default"], "--scenario is required"),
    (["sim", "default", "--scenario", "nope"], "no scenario"),
    (["sim", "nowhere.toml", "--scenario", "udp-stream"], "shipped topologies"),
    (["sim", "default", "--scenario", "udp-stream", "--param", "count"], "KEY=VALUE"),
    (["sim", "default", "--scenario", "udp-stream", "--param", "count=lots"], "not a number"),
    (["sim", "default", "--scenario", "udp-stream", "--seeds", "9-1"], "--seeds"),
    (["sim", "default", "--scenario", "udp-stream", "--seed", "1", "--seeds", "1-2"], "not both"),
    (["sim", "default", "--scenario", "udp-stream", "--duration", "soon"], "--duration"),
    (["sim", "default", "--scenario", "lg-stress", "--runtime", "live"], "runs on sim"),
    (["sim", "default", "--scenario", "udp-stream", "--workers", "0"], "--workers"),
])
def test_cli_bad_arguments_are_clear_errors(argv, problem, capsys, tmp_path):
    assert cli([*argv, "--results-dir", str(tmp_path)]) == 2
    assert problem in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
