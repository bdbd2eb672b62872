"""The protocols' own tables of a topology file (netstack/topo/sections.py): ``[onepipe]`` and
``[tcsack]`` are loaded, checked by their protocols (a TopologyError naming the field, never
anything else, whatever the table holds), applied to the virtual-time network as ``netstack up``
applies them live (tests/integration/test_sections_live.py), and a transfer takes its settings
from the flag, else the table, else the default."""

from __future__ import annotations

import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack import protocols
from netstack.commands.tcsack import transfer_params
from netstack.errors import CommandError
from netstack.onepipe import control as onepipe_control
from netstack.onepipe import feature
from netstack.sim.network import Network
from netstack.tcsack.params import TcsParams
from netstack.topo import sections
from netstack.topo.model import TopologyError, loads_topology, shipped_topologies
from netstack.topo.validate import topology_from_dict
from tests.topologies import H1, H2, LINE_LINKS, SW1, SW2, header, host, link, switch

ONEPIPE = Path(shipped_topologies()["onepipe"]).read_text()
LINE = header("line") + H1 + H2 + SW1 + SW2 + LINE_LINKS


def with_tables(text: str, tables: str) -> tuple:
    topology = loads_topology(text + "\n" + tables)
    return topology, sections.checked(topology)


def problems(text: str, tables: str) -> list[tuple[str, str]]:
    with pytest.raises(TopologyError) as info:
        with_tables(text, tables)
    return info.value.errors


def test_every_section_is_a_protocols_and_none_is_a_generic_table():
    assert set(protocols.sections()) == {"onepipe", "tcsack"}
    assert not set(protocols.sections()) & set(protocols.GENERIC_SECTIONS)


@pytest.mark.parametrize("name", sorted(shipped_topologies()))
def test_the_shipped_topologies_declare_no_section(name):
    topology = loads_topology(Path(shipped_topologies()[name]).read_text())
    assert topology.sections == {} and sections.checked(topology) == {}


def test_an_empty_onepipe_table_is_onepipe_enable_with_its_defaults():
    topology, checked = with_tables(ONEPIPE, "[onepipe]\n")
    assert topology.sections == {"onepipe": {}}
    # the shipped onepipe topology has a controller node: reliable 1Pipe's controller is on
    assert checked == {"onepipe": {"t_beacon_ns": 3_000_000, "timeout_beacons": 10, "controller": True}}
    _, checked = with_tables(LINE, "[onepipe]\nt_beacon = \"1ms\"\ntimeout_beacons = 4\n")
    assert checked == {"onepipe": {"t_beacon_ns": 1_000_000, "timeout_beacons": 4, "controller": False}}


def test_onepipe_names_every_bad_field():
    assert problems(LINE, '[onepipe]\nt_beacon = "soon"\ntimeout_beacons = 1\ncontroller = 3\nbeacon = 1\n') == [
        ("onepipe.beacon", "unknown key (allowed: t_beacon, timeout_beacons, controller)"),
        ("onepipe.t_beacon", '"soon" is not a delay (use e.g. "10us" or "1ms")'),
        ("onepipe.timeout_beacons", "must be a whole number of at least 2, got 1"),
        ("onepipe.controller", "must be true or false, got 3"),
    ]
    assert problems(LINE, "[onepipe]\nt_beacon = 0\n") == [("onepipe.t_beacon", "must be above 0")]


def test_onepipe_refuses_a_topology_it_cannot_run_on_before_anything_is_built():
    """A chain of three ToRs: the middle one passes traffic between its peers up and up again
    (netstack/onepipe/topology.py), so no barrier it writes would hold."""
    chain = (header("chain") + H1 + H2 + host("h3", "10.0.0.3/24") + switch("t1") + switch("t2") + switch("t3")
             + link("h1", "t1") + link("h2", "t2") + link("h3", "t3") + link("t1", "t2") + link("t2", "t3"))
    found = problems(chain, "[onepipe]\n")
    assert found and all(path == "onepipe (the topology)" for path, _ in found)


def test_tcsack_keeps_only_what_the_table_gives():
    _, checked = with_tables(LINE, '[tcsack]\nrate = "60Mbit"\nt = "1ms"\nn = 8\npayload = 1000\n')
    assert checked == {"tcsack": {"rate_bps": 60_000_000, "t_ns": 1_000_000, "n": 8, "payload": 1000}}
    assert with_tables(LINE, "[tcsack]\n")[1] == {"tcsack": {}}


def test_tcsack_names_every_bad_field():
    assert problems(LINE, '[tcsack]\nrate = "fast"\nwindow = 4\n') == [
        ("tcsack.window", "unknown key (allowed: rate, t, n, payload)"),
        ("tcsack.rate", '"fast" is not a rate (use e.g. "100Mbit")'),
    ]
    assert problems(LINE, "[tcsack]\nn = 0\n") == [("tcsack.n", "n must be an integer in [1, 1048576], got 0")]
    assert problems(LINE, "[tcsack]\npayload = true\n")[0][0] == "tcsack.payload"


def test_a_section_that_is_not_a_table_is_the_loaders_error():
    data = tomllib.loads(LINE)
    with pytest.raises(TopologyError) as info:
        topology_from_dict({**data, "onepipe": 3, "tcsack": [1]})
    assert info.value.errors == [("onepipe", "must be a table, not int"), ("tcsack", "must be a table, not list")]
    with pytest.raises(TopologyError) as info:
        topology_from_dict({**data, "ethernet": {}})
    assert info.value.errors[0][0] == "ethernet" and "onepipe" in info.value.errors[0][1]


# anything TOML can hold, under the keys the tables know and a few they do not
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=True)
                      | st.text(max_size=12) | st.sampled_from(["3ms", "0", "60Mbit", "1KB", "-1ms", "1e99us"]),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                  max_size=3), max_leaves=6)
KEYS = st.sampled_from(["t_beacon", "timeout_beacons", "controller", "rate", "t", "n", "payload", "x"])


@given(st.sampled_from(["onepipe", "tcsack"]), st.dictionaries(KEYS, VALUES, max_size=5))
def test_any_table_is_checked_or_refused_with_a_topology_error(name, table):
    topology = topology_from_dict({**tomllib.loads(LINE), name: table})
    try:
        checked = sections.checked(topology)
    except TopologyError as exc:
        assert exc.errors and all(path.startswith(name) for path, _ in exc.errors)
        return
    assert set(checked) == {name}
    if name == "tcsack":
        TcsParams(**checked[name])  # what was accepted is a valid setting


def test_the_simulator_turns_1pipe_on_in_every_switch_as_up_does():
    topology, _ = with_tables(ONEPIPE, '[onepipe]\nt_beacon = "1ms"\n')
    net = Network(topology, seed=1)
    assert net.sections == ["onepipe"]
    # every port up or down by its tier, as `netstack onepipe enable` sets them live
    directions = onepipe_control.directions(topology)
    for name, sn in net.switches.items():
        status = feature.status(sn.switch)
        assert {port: s["direction"] for port, s in status["ports"].items()} == directions[name]
    assert feature.aggregator(net.switches["tor1"].switch).timeout_ns == 10 * 1_000_000
    plain = Network(loads_topology(ONEPIPE), seed=1)
    assert plain.sections == [] and not any(feature.enabled(sn.switch) for sn in plain.switches.values())
    # [tcsack] has nothing to attach: T/C-SACK runs in the simulator's hosts, per scenario
    assert Network(with_tables(LINE, "[tcsack]\nn = 4\n")[0], seed=1).sections == []


def _state(**declared):
    return SimpleNamespace(sections={"tcsack": declared} if declared else {})


def test_a_transfer_takes_each_setting_from_its_flag_else_the_table_else_the_default():
    none = {"rate_bps": None, "t_ns": None, "n": None, "payload": None}
    params, source = transfer_params(_state(), none)
    assert params == TcsParams() and set(source.values()) == {"default"}
    params, source = transfer_params(_state(rate_bps=60_000_000, n=8), {**none, "n": 4})
    assert (params.rate_bps, params.n, params.t_ns) == (60_000_000, 4, TcsParams.t_ns)
    assert source == {"rate_bps": "topology", "t_ns": "default", "n": "flag", "payload": "default"}
    with pytest.raises(CommandError, match="payload must be"):
        transfer_params(_state(), {**none, "payload": 0})
