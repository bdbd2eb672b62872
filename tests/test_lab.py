"""netstack.lab and netstack compose lab without making anything: names, ranges, the record, the
CLI's usage errors (the live lab: tests/container/test_swarm_live.py and tests/sim)."""

from __future__ import annotations

import ipaddress
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack import lab
from netstack.cli import main
from netstack.container import lab as docker_lab
from netstack.lab import Lab, LabError, Machine
from netstack.procstat import process_start

names = st.from_regex(r"\A[a-z][a-z0-9]{0,11}\Z")


@given(st.lists(names, min_size=1, max_size=6, unique=True).filter(lambda ns: "lan" not in ns),
       st.integers(0, 255), st.booleans(), st.integers(576, 9000))
def test_the_record_round_trips(machines, third, host, mtu):
    net = ipaddress.IPv4Network(f"10.250.{third}.0/24")
    hosts = list(net.hosts())
    made = Lab("p1", "docker", str(net), [Machine(n, f"p1-{n}", str(hosts[i + 1]), f"p1-{n}", f"/x/{n}")
                                          for i, n in enumerate(machines)],
               str(hosts[0]) if host else None, mtu, {machines[0]: [1, 2]}, {"image": "i"})
    assert Lab.from_json(json.loads(json.dumps(made.to_json()))) == made
    assert made.machine(machines[-1]).name == machines[-1]
    with pytest.raises(LabError, match="no machine"):
        made.machine("lan")


@pytest.mark.parametrize("bad", [["E1"], ["1e"], ["lan"], ["a-b"], ["a" * 13], ["e1", "e1"], [""]])
def test_bad_machine_names_are_refused(bad):
    with pytest.raises(LabError):
        lab.check_machine_names(bad)


@pytest.mark.parametrize("n", [0, 1, 9])
def test_engines_between_two_and_eight(n):
    with pytest.raises(LabError, match="between 2 and 8"):
        docker_lab.engine_names(n)
    assert docker_lab.engine_names(3) == ["e1", "e2", "e3"]


@pytest.mark.parametrize("given_subnet,why", [("10.1.2.3/24", "host bits"), ("nonsense", "nonsense"),
                                              ("10.1.2.0/30", "too small")])
def test_a_bad_subnet_is_refused(given_subnet, why):
    with pytest.raises(LabError, match=why.split()[0]):
        lab.pick_subnet(given_subnet, "p")


def test_the_default_subnet_avoids_routes_and_other_labs(monkeypatch, tmp_path):
    monkeypatch.setenv(lab.LAB_ROOT_ENV, str(tmp_path))
    monkeypatch.setattr(lab, "_routes_here", lambda: [ipaddress.IPv4Network("10.250.0.0/23")])
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "lab.json").write_text(json.dumps(Lab("other", "dask", "10.250.2.0/24", []).to_json()))
    assert lab.labs() == ["other"]
    assert str(lab.pick_subnet(None, "mine")) == "10.250.3.0/24"


def test_a_missing_or_broken_record_is_a_lab_error(monkeypatch, tmp_path):
    monkeypatch.setenv(lab.LAB_ROOT_ENV, str(tmp_path))
    with pytest.raises(LabError, match="no lab 'nope'"):
        lab.load("nope")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "lab.json").write_text("{not json")
    with pytest.raises(LabError, match="unreadable"):
        lab.load("bad")


def test_cli_usage_errors_say_why(capsys):
    assert main(["compose", "lab", "up", "--engines", "1"]) == 2
    assert "between 2 and 8" in capsys.readouterr().err
    assert main(["compose", "lab", "up", "--prefix", "Bad-Name"]) == 2
    err = capsys.readouterr().err
    assert "error" in err and "Traceback" not in err
    assert main(["compose", "lab"]) == 2  # no action: the help, and a usage status


def test_compose_lab_never_touches_another_kinds_lab(monkeypatch, tmp_path):
    monkeypatch.setenv(lab.LAB_ROOT_ENV, str(tmp_path))
    monkeypatch.setattr(docker_lab.os, "geteuid", lambda: 0)
    (tmp_path / "dk").mkdir()
    (tmp_path / "dk" / "lab.json").write_text(json.dumps(Lab("dk", "dask", "10.250.9.0/24", []).to_json()))
    for call in (lambda: docker_lab.down("dk", say=lambda s: None), lambda: docker_lab.status("dk")):
        with pytest.raises(LabError, match="a dask lab, not a Docker one"):
            call()
    assert (tmp_path / "dk" / "lab.json").exists()


@pytest.mark.parametrize("prefix", ["..", "", ".", "a/b", "../x", "A"])
def test_down_never_leaves_the_lab_root(monkeypatch, tmp_path, prefix):
    root = tmp_path / "root"
    (root / "other").mkdir(parents=True)
    (root / "other" / "lab.json").write_text("{}")
    monkeypatch.setenv(lab.LAB_ROOT_ENV, str(root))
    with pytest.raises(LabError, match="not a lab's name"):
        lab.destroy(prefix)
    assert (root / "other" / "lab.json").exists() and tmp_path.exists()


def test_a_recorded_pid_that_is_another_process_now_is_left_alone(monkeypatch, tmp_path):
    """After a reboot (or once it exited) a recorded pid names another process: only the same
    process, by its start time, is the lab's to stop."""
    import subprocess

    monkeypatch.setenv(lab.LAB_ROOT_ENV, str(tmp_path))
    other = subprocess.Popen(["sleep", "30"])
    try:
        (tmp_path / "old").mkdir()
        stale = Lab("old", "dask", "10.250.7.0/24", [], pids={"w1": [other.pid]},
                    started={str(other.pid): process_start(other.pid) + 12345})
        (tmp_path / "old" / "lab.json").write_text(json.dumps(stale.to_json()))
        assert not lab.is_ours(stale, other.pid)
        assert other.pid not in lab.processes(stale)
        lab.destroy("old")
        assert other.poll() is None  # still running
        assert not (tmp_path / "old").exists()
    finally:
        other.kill()
        other.wait()


def test_a_record_naming_another_lab_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(lab.LAB_ROOT_ENV, str(tmp_path))
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "lab.json").write_text(json.dumps(Lab("two", "dask", "10.250.8.0/24", []).to_json()))
    with pytest.raises(LabError, match="names another lab"):
        lab.load("one")


def test_a_given_subnet_that_overlaps_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(lab.LAB_ROOT_ENV, str(tmp_path))
    monkeypatch.setattr(lab, "_routes_here", lambda: [ipaddress.IPv4Network("192.168.1.0/24")])
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "lab.json").write_text(json.dumps(Lab("other", "dask", "10.250.2.0/24", []).to_json()))
    for clash in ("10.250.2.0/25", "192.168.0.0/16"):
        with pytest.raises(LabError, match="overlaps"):
            lab.pick_subnet(clash, "mine")
    assert str(lab.pick_subnet("10.251.0.0/29", "mine")) == "10.251.0.0/29"
