"""The shipped multi-switch 1Pipe topology (``netstack up onepipe``), topologies by name, and
per-host clocks in a topology file: pure tests, then one real bring-up (``netns``)."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack import runtime
from netstack.commands import testbed
from netstack.errors import NetstackError
from netstack.onepipe import clock
from netstack.topo import netns as topo_netns
from netstack.topo.model import (
    MAX_CLOCK_DRIFT_PPM,
    MAX_CLOCK_OFFSET_NS,
    TopologyError,
    load_topology_spec,
    loads_topology,
    parse_clock_offset,
    parse_drift_ppm,
    shipped_topologies,
)
from tests.topologies import host_pair

MS = 1_000_000

# --------------------------------------------------------------------------- the shipped topology


def test_onepipe_is_two_tors_under_one_spine_with_four_hosts():
    t = load_topology_spec("onepipe")
    assert (t.name, t.prefix, t.paper_rate_bps) == ("onepipe", "op", 100 * 10**9)
    assert [n.name for n in t.hosts] == ["h1", "h2", "h3", "h4"]
    assert [n.name for n in t.switches] == ["tor1", "tor2", "spine1"]
    tor_of = {h.name: t.links_of(h.name)[0].peer(h.name).node for h in t.hosts}
    assert tor_of == {"h1": "tor1", "h2": "tor1", "h3": "tor2", "h4": "tor2"}
    assert {lk.name for lk in t.links_of("spine1")} == {"tor1-spine1", "tor2-spine1", "ctl-spine1"}
    (ctl,) = [n for n in t.nodes if n.kind.value == "onepipe-controller"]  # reliable 1Pipe's controller
    assert (ctl.name, str(ctl.ip)) == ("ctl", "10.0.0.100/24")
    assert len({h.ip.network for h in t.hosts}) == 1 and str(t.hosts[0].ip.network) == "10.0.0.0/24"
    assert {(lk.rate_bps, lk.delay_ns, lk.mtu, lk.buffer_bytes) for lk in t.links} == {(100_000_000, 10_000, 1500,
                                                                                        200_000)}
    assert all(lk.impairment is None for lk in t.links)


def test_onepipe_forwarding_is_a_tree_so_routing_is_a_dag():
    """The switch graph is a tree (connected, one link fewer than switches), which makes up/down
    routing a DAG (and leaves every port to flood on: no spanning tree to compute)."""
    t = load_topology_spec("onepipe")
    switches = {n.name for n in t.switches}
    fabric = [lk for lk in t.links if lk.a.node in switches and lk.b.node in switches]
    assert len(fabric) == len(switches) - 1
    reach, todo = {"spine1"}, ["spine1"]
    while todo:
        s = todo.pop()
        for lk in t.links_of(s):
            peer = lk.peer(s).node
            if peer in switches and peer not in reach:
                reach.add(peer)
                todo.append(peer)
    assert reach == switches


def test_onepipe_switch_configs_send_remote_hosts_through_the_spine():
    t = load_topology_spec("onepipe")
    built = topo_netns.plan(t, "op")
    mac = {h.name: built.mac(h.name, t.links_of(h.name)[0].name) for h in [*t.hosts, t.node("ctl")]}
    tor1 = runtime.switch_config(t, built, "tor1")["switch"]
    assert {p["name"]: p["role"] for p in tor1["ports"]} == {"p-h1": "edge", "p-h2": "edge", "p-spine1": "fabric"}
    assert tor1["static_fdb"] == {mac["h1"]: "p-h1", mac["h2"]: "p-h2", mac["h3"]: "p-spine1", mac["h4"]: "p-spine1",
                                  mac["ctl"]: "p-spine1"}
    spine = runtime.switch_config(t, built, "spine1")["switch"]
    assert spine["static_fdb"] == {mac["h1"]: "p-tor1", mac["h2"]: "p-tor1", mac["h3"]: "p-tor2",
                                   mac["h4"]: "p-tor2", mac["ctl"]: "p-ctl"}


def test_onepipe_hosts_have_skewed_clocks():
    t = load_topology_spec("onepipe")
    assert {h.name: h.clock_offset_ns for h in t.hosts} == {"h1": 0, "h2": 1 * MS, "h3": -2 * MS, "h4": MS // 2}
    assert {h.clock_drift_ppm for h in t.hosts} == {0.0}
    assert clock.host_clock(t, "h3").now(10 * MS) == 8 * MS
    assert clock.host_clock(t, t.node("h2")) == clock.HostClock(1 * MS, 0.0)


# --------------------------------------------------------------------------- topologies by name


def test_shipped_topologies_by_name():
    names = shipped_topologies()
    assert {"default", "lg-testbed", "lg-100g", "onepipe"} <= set(names)
    assert all(p.is_file() for p in names.values())
    assert load_topology_spec("default") == load_topology_spec(None)
    assert load_topology_spec("lg-testbed").name == "lg-testbed"
    assert load_topology_spec(str(names["onepipe"])).name == "onepipe"  # a file still works


def test_the_simulator_ships_the_same_names():
    from netstack.sim import scenario

    assert set(scenario.examples()) == set(shipped_topologies())


def test_an_unknown_name_lists_the_shipped_ones():
    with pytest.raises(TopologyError, match=r"nope: no such file, and not a shipped topology \(shipped: "
                                            r"default, lg-100g, lg-across, lg-testbed, onepipe"):
        load_topology_spec("nope")
    with pytest.raises(TopologyError, match="no such file"):
        load_topology_spec("missing/dir/lab.toml")


def test_a_file_of_that_name_wins_over_a_shipped_name(tmp_path, monkeypatch):
    (tmp_path / "onepipe").write_text('[topology]\nname = "mine"\n[[nodes]]\nname = "s"\nkind = "switch"\n')
    monkeypatch.chdir(tmp_path)
    assert load_topology_spec("onepipe").name == "mine"
    (tmp_path / "lg-testbed").mkdir()  # a directory is no file: the name still counts
    assert load_topology_spec("lg-testbed").name == "lg-testbed"


def test_up_takes_a_name_and_lists_the_names_in_its_help(capsys):
    parser = argparse.ArgumentParser(prog="netstack")
    testbed.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["up", "onepipe"])
    assert args.topology == "onepipe" and args.func is testbed.cmd_up
    assert parser.parse_args(["up"]).topology is None
    with pytest.raises(SystemExit):
        parser.parse_args(["up", "--help"])
    assert "default, lg-100g, lg-across, lg-testbed, onepipe" in " ".join(capsys.readouterr().out.split())


@pytest.mark.skipif(os.geteuid() != 0, reason="cmd_up checks for root first")
def test_up_refuses_an_unknown_name_before_building_anything():
    with pytest.raises(NetstackError, match="not a shipped topology"):  # (a TopologyError: exit 2)
        testbed.cmd_up(argparse.Namespace(topology="nope", prefix=None, no_impair=False, json=False))


# --------------------------------------------------------------------------- per-host clocks


def _topo(**host_keys) -> str:
    keys = "".join(f"{k} = {json.dumps(v)}\n" for k, v in host_keys.items())
    return host_pair("h1", "h2", net="10.0.0", extra_a=keys, named=False)


@pytest.mark.parametrize("offset, ns", [("2us", 2000), ("-1.5us", -1500), ("+1ms", MS), ("0", 0), (0, 0),
                                        ("-0.5ms", -MS // 2), ("3600s", MAX_CLOCK_OFFSET_NS), ("-3600s", -3600 * 10**9),
                                        ("10 ns", 10), ("2µs", 2000)])
def test_clock_offset_values(offset, ns):
    t = loads_topology(_topo(clock_offset=offset))
    assert t.node("h1").clock_offset_ns == ns and t.node("h2").clock_offset_ns == 0


@pytest.mark.parametrize("drift", [0, 20, -3.5, MAX_CLOCK_DRIFT_PPM, -MAX_CLOCK_DRIFT_PPM])
def test_clock_drift_values(drift):
    t = loads_topology(_topo(clock_drift_ppm=drift))
    assert t.node("h1").clock_drift_ppm == drift
    assert clock.host_clock(t, "h1") == clock.HostClock(0, float(drift))


@pytest.mark.parametrize("keys, problem", [
    ({"clock_offset": "2"}, 'nodes[0].clock_offset: "2" is not a clock offset (use e.g. "2us" or "-1.5us")'),
    ({"clock_offset": 5}, "nodes[0].clock_offset: 5 is not a clock offset"),
    ({"clock_offset": "--1us"}, "nodes[0].clock_offset: \"--1us\" is not a clock offset"),
    ({"clock_offset": "- 1us"}, "is not a clock offset"),
    ({"clock_offset": "3601s"}, 'nodes[0].clock_offset: "3601s" is beyond the maximum clock offset of 1 hour'),
    ({"clock_offset": "-1e400s"}, "is beyond the maximum clock offset"),
    ({"clock_offset": True}, "nodes[0].clock_offset: True is not a clock offset"),
    ({"clock_drift_ppm": 10000.5}, "nodes[0].clock_drift_ppm: 10000.5 is beyond the maximum drift of 10000 ppm"),
    ({"clock_drift_ppm": -20000}, "is beyond the maximum drift"),
    ({"clock_drift_ppm": "20ppm"}, 'nodes[0].clock_drift_ppm: "20ppm" is not a drift in ppm'),
    ({"clock_drift_ppm": False}, "False is not a drift in ppm"),
    ({"clock_skew": "1us"}, "nodes[0].clock_skew: unknown key"),
])
def test_bad_clocks_name_the_field(keys, problem):
    with pytest.raises(TopologyError) as info:
        loads_topology(_topo(**keys))
    assert problem in str(info.value)


def test_nan_and_inf_drifts_are_refused():
    for text in ("nan", "inf", "-inf"):
        with pytest.raises(TopologyError, match=r"nodes\[0\]\.clock_drift_ppm"):
            loads_topology(_topo().replace('ip = "10.0.0.1/24"\n', f'ip = "10.0.0.1/24"\nclock_drift_ppm = {text}\n'))


def test_a_switch_has_no_clock():
    text = _topo() + '\n[[nodes]]\nname = "s"\nkind = "switch"\nclock_offset = "1us"\nclock_drift_ppm = 1\n'
    with pytest.raises(TopologyError) as info:
        loads_topology(text)
    assert "nodes[2].clock_offset: only hosts have a clock" in str(info.value)
    assert "nodes[2].clock_drift_ppm: only hosts have a clock" in str(info.value)


def test_the_drift_bound_is_the_clock_models():
    assert MAX_CLOCK_DRIFT_PPM == clock.MAX_DRIFT_PPM
    clock.HostClock(0, MAX_CLOCK_DRIFT_PPM)  # every drift a topology accepts makes a clock


@given(st.integers(-MAX_CLOCK_OFFSET_NS, MAX_CLOCK_OFFSET_NS))
def test_offsets_in_ns_round_trip(ns):
    assert parse_clock_offset(f"{ns}ns") == ns
    assert parse_clock_offset(f"{'+' if ns >= 0 else ''}{ns}ns") == ns


@given(st.one_of(st.text(max_size=12), st.integers(), st.floats(), st.booleans(), st.none()))
def test_clock_parsers_give_a_bounded_value_or_a_value_error(value):
    for parse, bound in ((parse_clock_offset, MAX_CLOCK_OFFSET_NS), (parse_drift_ppm, MAX_CLOCK_DRIFT_PPM)):
        try:
            v = parse(value)
        except ValueError as exc:
            assert "\n" not in str(exc)
        else:
            assert abs(v) <= bound


# --------------------------------------------------------------------------- live (namespaces)


@pytest.fixture
def onepipe_up(tmp_path, monkeypatch, capsys):
    """``netstack up onepipe`` under a fresh prefix; ``netstack down`` afterwards even if the test fails."""
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path / "run"))
    prefix = "op" + secrets.token_hex(3)
    try:
        assert testbed.cmd_up(argparse.Namespace(topology="onepipe", prefix=prefix, no_impair=False,
                                                 json=True)) == 0
        yield json.loads(capsys.readouterr().out)
    finally:
        testbed.cmd_down(argparse.Namespace(prefix=prefix, all=False))
        assert topo_netns.running_namespaces(prefix) == {}


@pytest.mark.netns
def test_up_onepipe_by_name_pings_across_the_spine(onepipe_up):
    state = onepipe_up
    assert state["topology"] == "onepipe"
    assert sorted(state["namespaces"]) == ["ctl", "h1", "h2", "h3", "h4", "spine1", "tor1", "tor2"]
    assert sorted(d["node"] for d in state["daemons"]) == ["ctl", "spine1", "tor1", "tor2"]
    r = subprocess.run(["ip", "netns", "exec", state["namespaces"]["h1"], "ping", "-c3", "-i0.2", "-W2", "10.0.0.4"],
                       capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout + r.stderr
    ports = runtime.status(state["prefix"])["daemons"]["spine1"]["ports"]
    assert ports["p-tor1"]["rx_frames"] >= 3 and ports["p-tor2"]["tx_frames"] >= 3  # h1 -> h4 went over spine1
