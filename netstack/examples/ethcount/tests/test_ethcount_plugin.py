"""Where ethcount plugs in, without root: the registry, the topology feature (errors naming the
field), the control plug-in against a real switch behind a stand-in daemon shell, the command line
end to end but for the socket, and the ``ethcount-stream`` scenario in virtual time."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack import protocols
from netstack.cli import main
from netstack.examples.ethcount import control, topology
from netstack.examples.ethcount.command import status_rows
from netstack.examples.ethcount.feature import counters_on
from netstack.examples.ethcount.header import probe_frame
from netstack.io.control import ControlError
from netstack.sim.scenario import RunSpec, ScenarioError, run
from netstack.switch import PortConfig, Switch, SwitchConfig, plugins
from netstack.topo.model import Topology, TopologyError, load_topology

HERE = Path(__file__).resolve().parent.parent
TOPOLOGY = HERE / "ethcount.toml"
H1 = bytes.fromhex("020000000001")
H2 = bytes.fromhex("020000000002")


def test_registered_in_every_place_it_plugs_into() -> None:
    assert "netstack.examples.ethcount.control" in protocols.control_modules()
    assert protocols.features()["ethcount"] == "netstack.examples.ethcount.topology"
    assert "netstack.examples.ethcount.scenarios" in protocols.scenario_modules()
    assert "netstack.examples.ethcount.command" in protocols.commands()
    assert protocols.command_module("netstack.examples.ethcount.command") == "netstack.examples.ethcount.command"
    assert protocols.command_module("tcd") == "netstack.commands.tcd"  # (the others' stay where they were)


# ------------------------------------------------------------------------------ topology feature
def example() -> Topology:
    return load_topology(TOPOLOGY)


def with_table(table: Any, end: str = "b", link: str = "h1-sw1") -> Topology:
    """The example's topology with ``table`` as ``links[link].features.<end>.ethcount``."""
    import tomllib

    from netstack.topo.model import topology_from_dict

    doc = tomllib.loads(TOPOLOGY.read_text())
    for lk in doc["links"]:
        lk.pop("features", None)
        if lk["name"] == link:
            lk["features"] = {end: {"ethcount": table}}
    return topology_from_dict(doc, "t.toml")


def test_the_example_topology_declares_both_ports() -> None:
    assert plugins.port_features(example()) == {
        ("sw1", "p-h1"): {"ethcount": {"ethertype": 0x88B5, "egress": False}},
        ("sw1", "p-h2"): {"ethcount": {"ethertype": 0x88B5, "egress": True}},
    }


@pytest.mark.parametrize(("table", "end", "path", "problem"), [
    ({"ethertype": 0x100}, "b", "links[h1-sw1].features.b.ethcount.ethertype", "not an EtherType"),
    ({"ethertype": "0x88b5"}, "b", "links[h1-sw1].features.b.ethcount.ethertype", "must be an integer"),
    ({"egress": "yes"}, "b", "links[h1-sw1].features.b.ethcount.egress", "true or false"),
    ({"ethertyp": 0x88B5}, "b", "links[h1-sw1].features.b.ethcount.ethertyp", "unknown option"),
    ({}, "a", "links[h1-sw1].features.a.ethcount", "h1 is a host"),
    ("0x88b5", "b", "links[h1-sw1].features.b.ethcount", "must be a table"),
])
def test_a_bad_declaration_names_its_field(table: Any, end: str, path: str, problem: str) -> None:
    with pytest.raises(TopologyError) as exc:
        plugins.port_features(with_table(table, end))
    assert [(p, m) for p, m in exc.value.errors if p == path and problem in m], exc.value.errors


def test_attach_puts_the_declared_counter_on_the_port() -> None:
    sw = Switch(SwitchConfig("sw1", (PortConfig("p-h1"), PortConfig("p-h2")), {}))
    feature = topology.attach(sw, "p-h2", {"ethertype": 0x0806, "egress": True}, 0)
    assert counters_on(sw) == {"p-h2": feature} and feature.egress and feature.counter.ethertype == 0x0806


# ------------------------------------------------------------------------------ control plug-in
class FakeShell:
    """What a switch daemon's ``SwitchShell`` gives the control plug-ins."""

    log = logging.getLogger("test-ethcount")

    def __init__(self, switch: Switch) -> None:
        self.switch = switch
        self.flushes = 0

    def port_of(self, req: dict[str, Any]) -> str:
        name = req.get("port")
        if name not in {p.name for p in self.switch.ports}:
            raise ControlError(f"no port {name!r}")
        return str(name)

    def flush(self) -> None:
        self.flushes += 1


@pytest.fixture
def shell() -> FakeShell:
    return FakeShell(Switch(SwitchConfig("sw1", (PortConfig("p0"), PortConfig("p1")), {H1: "p0", H2: "p1"})))


def test_enable_count_status_disable(shell: FakeShell) -> None:
    h = control.switch_handlers(shell)
    assert set(h) == {"ethcount_enable", "ethcount_disable", "ethcount_status"}
    assert control.switch_status(shell) is None  # off: the daemon's status says nothing of it
    out = h["ethcount_enable"]({"cmd": "ethcount_enable", "port": "p0"})
    assert out["port"] == "p0" and out["ethertype"] == "0x88b5" and out["egress_counted"] is False
    assert shell.flushes == 1
    for seq in range(3):
        shell.switch.receive("p0", probe_frame(H2, H1, seq), seq + 1)
    shell.switch.receive("p0", probe_frame(H2, H1, 9, 0x88B6), 5)
    report = control.switch_status(shell)
    assert report is not None and report["ports"]["p0"]["ingress"]["frames"] == 3
    assert h["ethcount_status"]({"port": "p0"})["ports"]["p0"]["ingress"]["frames"] == 3
    again = h["ethcount_enable"]({"port": "p0", "ethertype": 0x88B6, "egress": True})  # replaces, from zero
    assert again["ingress"]["frames"] == 0 and len(shell.switch.ports[0].features) == 1
    last = h["ethcount_disable"]({"port": "p0"})
    assert last["ethertype"] == "0x88b6" and control.switch_status(shell) is None
    assert h["ethcount_disable"]({"port": "p0"}) == {"port": "p0", "ethertype": None}


def test_the_daemon_refuses_what_it_cannot_do(shell: FakeShell) -> None:
    h = control.switch_handlers(shell)
    with pytest.raises(ControlError, match="not an EtherType"):
        h["ethcount_enable"]({"port": "p0", "ethertype": 5})
    with pytest.raises(ControlError, match="true or false"):
        h["ethcount_enable"]({"port": "p0", "egress": "no"})
    with pytest.raises(ControlError, match="no port"):
        h["ethcount_enable"]({"port": "p9"})
    with pytest.raises(ControlError, match="ethcount_enable first"):
        h["ethcount_status"]({"port": "p1"})


# ------------------------------------------------------------------------------ the command line
@pytest.fixture
def testbed(monkeypatch: pytest.MonkeyPatch, shell: FakeShell) -> list[tuple[str, str, dict[str, Any]]]:
    """A run state with one switch whose control socket is ``shell``'s handlers: the command line
    and the orchestration functions run for real, but for the socket."""
    from netstack import runtime

    state = runtime.RunState("p", topology="ethcount", daemons=[runtime.Daemon("sw1", "switch", 1, "x", "")])
    handlers = control.switch_handlers(shell)
    calls: list[tuple[str, str, dict[str, Any]]] = []

    def fake_control(prefix: str, node: str, cmd: str, **args: Any) -> Any:
        calls.append((node, cmd, args))
        return handlers[cmd]({"cmd": cmd, **args})

    monkeypatch.setattr(runtime, "load_state", lambda prefix: state)
    monkeypatch.setattr(runtime, "control", fake_control)
    return calls


def test_the_command_line_end_to_end_but_for_the_socket(testbed: list[Any], shell: FakeShell,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ethcount", "enable", "sw1", "p0", "--ethertype", "0x0806", "--egress"]) == 0
    assert testbed[-1] == ("sw1", "ethcount_enable", {"port": "p0", "ethertype": 0x0806, "egress": True})
    assert capsys.readouterr().out == "sw1/p0 counts 0x0806 both ways\n"
    shell.switch.receive("p0", probe_frame(H2, H1, 0, 0x0806), 1)
    assert main(["ethcount", "status", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sw1"]["ports"]["p0"]["ingress"]["frames"] == 1
    assert main(["ethcount", "status"]) == 0
    assert "0x0806" in capsys.readouterr().out
    assert main(["ethcount", "disable", "sw1", "p0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ethertype"] == "0x0806"
    assert main(["ethcount", "status"]) == 0
    assert "no port counts anything" in capsys.readouterr().out
    # errors: one line, exit 2 (a NetstackError from the control module, a daemon's refusal)
    assert main(["ethcount", "enable", "h1", "eth0"]) == 2
    assert "not a switch" in capsys.readouterr().err
    assert main(["ethcount", "enable", "sw1", "p9"]) == 2
    assert "no port 'p9'" in capsys.readouterr().err


def test_status_rows_show_errors_and_uncounted_egress() -> None:
    counts = {"ethertype": "0x88b5", "ingress": {"frames": 2, "bytes": 120, "last_ns": 1},
              "egress": {"frames": 0, "bytes": 0, "last_ns": None}, "egress_counted": False}
    assert status_rows({"sw2": {"error": "gone"}, "sw1": {"ports": {"p0": counts}}}) == [
        ["sw1", "p0", "0x88b5", 2, 120, "-", "-"], ["sw2", "-", "error", "gone", "", "", ""]]


# ------------------------------------------------------------------------------ the scenario
def test_the_scenario_counts_exactly_with_its_defaults() -> None:
    res = run(RunSpec("ethcount-stream", topology=str(TOPOLOGY)))["result"]
    assert res["ok"] is True and res["sent"] == {"probes": 334, "other": 666}
    assert res["counted"]["sw1/p-h1"]["ingress"]["frames"] == 334
    assert res["counted"]["sw1/p-h2"]["egress"]["frames"] == 334  # egress = true in the file
    assert res["counted"]["sw1/p-h2"]["ingress"]["frames"] == 0


@settings(max_examples=20)
@given(count=st.integers(1, 300), every=st.integers(1, 7), rate_pps=st.sampled_from([1000.0, 100_000.0, 1e7]))
def test_the_scenario_counts_exactly_whatever_the_mix_and_rate(count: int, every: int, rate_pps: float) -> None:
    """Even offered above the line rate (1e7 frames/s: the NIC queues them), nothing is lost."""
    res = run(RunSpec("ethcount-stream", topology=str(TOPOLOGY),
                      params={"count": count, "every": every, "rate_pps": rate_pps}))["result"]
    probes = -(-count // every)
    assert res["sent"]["probes"] == probes and res["ok"] is True
    assert res["counted"]["sw1/p-h1"]["ingress"]["frames"] == probes


def test_the_scenario_says_where_to_declare_the_counter() -> None:
    with pytest.raises(ScenarioError, match="sw1/p-h1 counts nothing"):
        run(RunSpec("ethcount-stream", topology="default"))
