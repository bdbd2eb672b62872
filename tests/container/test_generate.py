"""``netstack compose generate`` and the container plan, without docker: the shipped
docker-compose.yml is the generator's output, the files say what docs/containers.md promises
(only NET_ADMIN/NET_RAW, one network per link with room for the tunnel, health checks), and the
YAML writer round-trips through a real YAML parser."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from netstack.cli import main
from netstack.container import yamlout
from netstack.container.compose import ComposeOptions, generate
from netstack.container.plan import VXLAN_OVERHEAD, PlanError, plan_links
from netstack.topo.model import load_topology_spec, loads_topology
from netstack.topo.nsenter import SELF_NETNS_ENV, netns_exec_argv

ROOT = Path(__file__).resolve().parents[2]


def test_shipped_compose_file_is_the_generators_output_for_the_default_topology(capsys):
    assert main(["compose", "generate", "default"]) == 0
    assert capsys.readouterr().out == (ROOT / "docker-compose.yml").read_text(), \
        "regenerate: netstack compose generate default -o docker-compose.yml"


def test_default_compose_file_has_one_service_per_node_and_one_network_per_link():
    topo = load_topology_spec("default")
    doc = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert set(doc["services"]) == {"h1", "h2", "c1", "sw1", "sw2"}
    assert set(doc["networks"]) == {f"link-{link.name}" for link in topo.links}
    for name, svc in doc["services"].items():
        assert svc["command"] == [name]
        assert svc["cap_add"] == ["NET_ADMIN", "NET_RAW"] and "privileged" not in svc
        assert svc["healthcheck"]["test"] == ["CMD", "python3", "-m", "netstack.container.health", name]
        assert svc["labels"] == {"io.netstack.prefix": "ns", "io.netstack.node": name,
                                 "io.netstack.kind": topo.node(name).kind.value}
        assert svc["environment"]["NETSTACK_TOPOLOGY"] == "default"
        assert svc["sysctls"]["net.ipv6.conf.all.disable_ipv6"] == 1
        links = {f"link-{link.name}" for link in topo.links_of(name)}
        assert set(svc["networks"]) == links
        for net, conf in svc["networks"].items():
            assert conf["aliases"] == [f"{name}.{net}"]
        assert "deploy" not in svc  # compose ignores it with a warning: only in stack files
    subnets = [ipaddress.IPv4Network(n["ipam"]["config"][0]["subnet"]) for n in doc["networks"].values()]
    assert len(set(subnets)) == len(subnets)
    for link in topo.links:
        net = doc["networks"][f"link-{link.name}"]
        assert net["driver"] == "bridge" and net["internal"] is True
        assert int(net["driver_opts"]["com.docker.network.driver.mtu"]) == link.device_mtu + VXLAN_OVERHEAD
    assert "volumes" not in doc  # no node kind here needs the others' control sockets


def test_swarm_stack_uses_overlays_dnsrr_and_placement():
    topo = load_topology_spec("default")
    text = generate(topo, "default", None, ComposeOptions(swarm=True, placement={"h1": "rack-a", "sw1": "rack-a"}))
    doc = yaml.safe_load(text)
    assert all(n["driver"] == "overlay" and n["attachable"] for n in doc["networks"].values())
    for link in topo.links:  # the overlay keeps one VXLAN header of what it is given: one more asked
        net = doc["networks"][f"link-{link.name}"]
        assert int(net["driver_opts"]["com.docker.network.driver.mtu"]) == link.device_mtu + 2 * VXLAN_OVERHEAD
    for name, svc in doc["services"].items():
        assert svc["deploy"]["endpoint_mode"] == "dnsrr"  # names resolve to the task, the tunnel's far end
        placed = svc["deploy"].get("placement", {}).get("constraints")
        assert placed == (["node.hostname == rack-a"] if name in ("h1", "sw1") else None)
    assert "docker stack deploy" in text.split("version:")[0]


def test_a_topology_file_is_embedded_and_reads_back_the_same(tmp_path, capsys):
    text = (ROOT / "netstack/topo/default.toml").read_text().replace(
        'name = "linkguardian-testbed"', 'name = "my$lab"  # a $ survives compose interpolation')
    path = tmp_path / "lab.toml"
    path.write_text(text)
    assert main(["compose", "generate", str(path), "--prefix", "lab", "--underlay", "10.77.0.0/24"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    env = doc["services"]["sw1"]["environment"]
    assert "NETSTACK_TOPOLOGY" not in env and env["NETSTACK_PREFIX"] == "lab"
    embedded = env["NETSTACK_TOPOLOGY_TOML"].replace("$$", "$")  # what compose hands the container
    assert loads_topology(embedded) == loads_topology(text)
    assert doc["services"]["sw1"]["labels"]["io.netstack.prefix"] == "lab"
    assert all(ipaddress.IPv4Network(n["ipam"]["config"][0]["subnet"]).subnet_of(ipaddress.IPv4Network("10.77.0.0/24"))
               for n in doc["networks"].values())


def test_a_key_file_becomes_a_secret_and_a_missing_one_is_an_error(tmp_path, capsys):
    from netstack.auth.keys import generate as make_keys

    text = (ROOT / "netstack/topo/default.toml").read_text().replace('prefix = "ns"', 'prefix = "ns"\nkeys = "k"')
    (tmp_path / "lab.toml").write_text(text)
    assert main(["compose", "generate", str(tmp_path / "lab.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    make_keys(tmp_path / "k")
    assert main(["compose", "generate", str(tmp_path / "lab.toml")]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["secrets"] == {"netstack-keys": {"file": str((tmp_path / "k").resolve())}}
    for svc in doc["services"].values():
        assert svc["secrets"] == [{"source": "netstack-keys", "target": "netstack-keys", "mode": 0o400}]
        assert svc["environment"]["NETSTACK_KEYS"] == "/run/secrets/netstack-keys"


def test_the_controllers_signing_pair_is_a_secret_for_the_controller_only(tmp_path, capsys):
    """Issue 34, finding 3: 1Pipe's controller signs with a key no process is given; under compose
    the private key is a secret of the controller's service alone, the public one of every service."""
    from netstack.auth.keys import generate as make_keys

    text = (ROOT / "netstack/topo/examples/onepipe.toml").read_text().replace('prefix = "op"',
                                                                            'prefix = "op"\nkeys = "k"')
    (tmp_path / "lab.toml").write_text(text)
    make_keys(tmp_path / "k")
    assert main(["compose", "generate", str(tmp_path / "lab.toml")]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    k = (tmp_path / "k").resolve()
    assert doc["secrets"] == {"netstack-keys": {"file": str(k)},
                              "netstack-keys.controller": {"file": f"{k}.controller"},
                              "netstack-keys.controller.pub": {"file": f"{k}.controller.pub"}}
    for name, svc in doc["services"].items():
        given = {s["source"] for s in svc["secrets"]}
        assert given == {"netstack-keys", "netstack-keys.controller.pub"} | (
            {"netstack-keys.controller"} if name == "ctl" else set()), name


def test_the_onepipe_topology_shares_the_run_directory():
    doc = yaml.safe_load(generate(load_topology_spec("onepipe"), "onepipe", None, ComposeOptions()))
    assert "netstack-run" in doc["volumes"]
    assert all(svc["volumes"] == ["netstack-run:/run/netstack"] for svc in doc["services"].values())


def test_generate_writes_a_file(tmp_path, capsys):
    out = tmp_path / "c.yml"
    assert main(["compose", "generate", "default", "-o", str(out)]) == 0
    assert out.read_text() == (ROOT / "docker-compose.yml").read_text()
    assert "5 services, 4 networks" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["compose", "generate", "no-such-topology"], "not a shipped topology"),
    (["compose", "generate", "default", "--underlay", "10.0.0.0/8x"], "underlay range"),
    (["compose", "generate", "default", "--underlay", "10.99.0.0/30"], "smaller than one /28"),
    (["compose", "generate", "default", "--underlay", "10.99.0.0/27"], "holds 2 links"),
    (["compose", "generate", "default", "--underlay", "10.0.0.0/16"], "lies in the underlay range"),
    (["compose", "generate", "default", "--place", "h1=a"], "--place needs --swarm"),
    (["compose", "generate", "default", "--swarm", "--place", "h9=a"], "does not have"),
    (["compose", "generate", "default", "--swarm", "--place", "h1"], "NODES=MACHINE"),
    (["compose", "generate", "default", "--swarm", "--place", "h1=a", "--place", "h1=b"], "placed on both"),
    (["compose", "generate", "default", "--prefix", "Bad-Prefix"], "prefix"),
    (["compose", "generate", "default", "-o", "/nonexistent-dir/x.yml"], "cannot write"),
])
def test_bad_input_is_a_clear_error(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_plan_is_deterministic_and_fits_the_tunnel():
    topo = load_topology_spec("tcd-multi")
    plans = plan_links(topo)
    assert plans == plan_links(topo)
    assert len({p.vni for p in plans}) == len(plans) and len({p.subnet for p in plans}) == len(plans)
    for p, link in zip(plans, topo.links, strict=True):
        assert p.underlay_mtu == link.device_mtu + VXLAN_OVERHEAD and len(p.underlay_ifname()) <= 15
    with pytest.raises(PlanError):
        plan_links(topo, "10.199.0.0/29")


def test_netns_exec_argv_names_paths_and_self(monkeypatch):
    monkeypatch.delenv(SELF_NETNS_ENV, raising=False)
    assert netns_exec_argv("ns-h1", ["true"]) == ["ip", "netns", "exec", "ns-h1", "true"]
    assert netns_exec_argv("/proc/42/ns/net", ["true"]) == ["nsenter", "--net=/proc/42/ns/net", "--", "true"]
    monkeypatch.setenv(SELF_NETNS_ENV, "ns-h1")  # inside h1's container: already there
    assert netns_exec_argv("ns-h1", ["true"]) == ["true"]


_KEYS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)
_SCALARS = (st.none() | st.booleans() | st.integers(-10**12, 10**12)
            | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\r\x85\u2028\u2029"),
                      max_size=30))
_DOCS = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
                     max_leaves=20)


@given(st.dictionaries(_KEYS, _DOCS, min_size=1, max_size=5))
def test_yaml_writer_round_trips_through_a_yaml_parser(doc):
    assert yaml.safe_load(yamlout.dump(doc)) == doc
