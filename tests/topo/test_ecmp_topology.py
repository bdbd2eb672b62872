"""ECMP and the flood tree as a topology file declares them (docs/topology.md "ECMP";
netstack/topo/routes.py, netstack.runtime.switch_config): the keys and their errors, every
equal-cost next hop in a stable order, the switches' seeds, and a spanning tree to flood on
wherever the switches form a cycle, with nothing changed where they do not."""

from __future__ import annotations

from collections import deque

import pytest

from netstack.runtime import switch_config
from netstack.switch import SwitchConfig
from netstack.topo import netns, routes
from netstack.topo.model import NodeKind, Topology, TopologyError, load_topology_spec, loads_topology
from tests.topologies import LINE_LINKS, LINE_NODES, header, leaf_spine, link


def configs(topology: Topology) -> dict[str, dict]:
    built = netns.plan(topology, "x")
    return {s.name: switch_config(topology, built, s.name)["switch"] for s in topology.switches}


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(TopologyError) as info:
        loads_topology(text)
    return info.value.errors


# ------------------------------------------------------------------------------ the keys
def test_the_keys_in_topology_and_on_a_switch():
    t = loads_topology(leaf_spine(top="ecmp = true\necmp_seed = 42\n",
                                  switch_extra={"leaf1": "ecmp_seed = 7\n", "leaf2": "ecmp = false\n"}))
    assert t.ecmp is True and t.ecmp_seed == 42
    assert (t.node("leaf1").ecmp, t.node("leaf1").ecmp_seed) == (None, 7)
    assert routes.ecmp_on(t, "leaf1") and not routes.ecmp_on(t, "leaf2")
    assert routes.ecmp_seed(t, "leaf1") == 7
    plain = loads_topology(header("plain") + LINE_NODES + LINE_LINKS)
    assert plain.ecmp is False and plain.ecmp_seed is None and not routes.ecmp_on(plain, "sw1")
    one = loads_topology(leaf_spine(top="", switch_extra={"leaf2": "ecmp = true\n"}))
    assert [s.name for s in one.switches if routes.ecmp_on(one, s.name)] == ["leaf2"]


@pytest.mark.parametrize(("text", "expected"), [
    (leaf_spine(top='ecmp = "yes"\n'), [("topology.ecmp", '"yes" is not true or false')]),
    (leaf_spine(top="ecmp = 1\n"), [("topology.ecmp", "1 is not true or false")]),
    (leaf_spine(top="ecmp_seed = -1\n"), [("topology.ecmp_seed", "-1 is out of range [0, 9223372036854775807]")]),
    (leaf_spine(top="ecmp_seed = 9223372036854775808\n"),
     [("topology.ecmp_seed", "9223372036854775808 is out of range [0, 9223372036854775807]")]),
    (leaf_spine(top='ecmp_seed = "7"\n'), [("topology.ecmp_seed", '"7" is not an integer')]),
    (leaf_spine(top="ecmp_seed = true\n"), [("topology.ecmp_seed", "True is not an integer")]),
    (leaf_spine(switch_extra={"spine1": "ecmp = 0\n"}), [("nodes[6].ecmp", "0 is not true or false")]),
    (leaf_spine(switch_extra={"leaf2": "ecmp_seed = 1.5\n"}), [("nodes[5].ecmp_seed", "1.5 is not an integer")]),
])
def test_a_bad_value_is_a_topology_error_naming_its_field(text, expected):
    assert problems(text) == expected


def test_ecmp_on_a_host_is_refused():
    text = leaf_spine().replace('ip = "10.0.0.1/24"\n', 'ip = "10.0.0.1/24"\necmp = true\necmp_seed = 3\n')
    assert [p for p, _ in problems(text)] == ["nodes[0].ecmp", "nodes[0].ecmp_seed"]
    assert "only switches forward" in problems(text)[0][1]


# ----------------------------------------------------------------------- next hops
def test_a_leaf_reaches_the_other_leafs_hosts_over_both_spines_in_link_order():
    t = loads_topology(leaf_spine())
    hops = routes.equal_cost_hops(t, "leaf1")
    assert hops == {"h1": ("p-h1",), "h2": ("p-h2",), "h3": ("p-spine1", "p-spine2"), "h4": ("p-spine1", "p-spine2")}
    assert routes.equal_cost_hops(t, "spine2") == {"h1": ("p-leaf1",), "h2": ("p-leaf1",), "h3": ("p-leaf2",),
                                                   "h4": ("p-leaf2",)}
    for sw in t.switches:  # the first of every group is the first hop of before
        first = t.first_hops(sw.name)
        assert {h: hs[0] for h, hs in routes.equal_cost_hops(t, sw.name).items()} == \
            {h: first[h] for h in first if t.node(h).kind is not NodeKind.SWITCH}


def test_parallel_links_and_unequal_paths():
    """Two links between sw1 and sw2 are two next hops; a longer way round (sw1-sw3-sw2) is none."""
    text = (header("par") + LINE_NODES + '[[nodes]]\nname = "sw3"\nkind = "switch"\n\n'
            + link("h1", "sw1") + link("sw2", "h2")
            + link("sw1", "sw2", extra='name = "one"\na_ifname = "up1"\nb_ifname = "dn1"\n')
            + link("sw1", "sw2", extra='name = "two"\na_ifname = "up2"\nb_ifname = "dn2"\n')
            + link("sw1", "sw3") + link("sw3", "sw2"))
    t = loads_topology(text.replace('[topology]\n', '[topology]\necmp = true\n'))
    assert routes.equal_cost_hops(t, "sw1")["h2"] == ("up1", "up2")
    assert routes.equal_cost_hops(t, "sw3")["h2"] == ("p-sw2",)
    cfg = configs(t)["sw1"]
    assert cfg["ecmp_groups"] == {"02:00:0a:00:00:02": ["up1", "up2"]} and cfg["ecmp_names"] == {
        "02:00:0a:00:00:02": "h2"}


def test_the_switch_configs_carry_the_groups_their_seeds_and_the_tree():
    t = loads_topology(leaf_spine())
    cfgs = configs(t)
    leaf1 = cfgs["leaf1"]
    assert leaf1["static_fdb"] == {"02:00:0a:00:00:01": "p-h1", "02:00:0a:00:00:02": "p-h2"}
    assert leaf1["ecmp_groups"] == {"02:00:0a:00:00:03": ["p-spine1", "p-spine2"],
                                    "02:00:0a:00:00:04": ["p-spine1", "p-spine2"]}
    assert leaf1["ecmp_names"] == {"02:00:0a:00:00:03": "h3", "02:00:0a:00:00:04": "h4"}
    assert "ecmp_groups" not in cfgs["spine1"]  # one path to every host: plain static entries
    for cfg in cfgs.values():
        SwitchConfig.from_json({**cfg, "ports": [{"name": p["name"]} for p in cfg["ports"]]})  # the engine takes it
    seeds = {s: routes.ecmp_seed(t, s) for s in ("leaf1", "leaf2", "spine1", "spine2")}
    assert len(set(seeds.values())) == 4 and all(0 <= v < 2**63 for v in seeds.values())
    assert leaf1["ecmp_seed"] == seeds["leaf1"] and cfgs["leaf2"]["ecmp_seed"] == seeds["leaf2"]
    assert seeds == {s: routes.ecmp_seed(loads_topology(leaf_spine()), s) for s in seeds}  # the same every time
    reseeded = loads_topology(leaf_spine(top="ecmp = true\necmp_seed = 1\n"))
    assert all(routes.ecmp_seed(reseeded, s) != seeds[s] for s in seeds)


def test_ecmp_off_keeps_the_first_hops_of_before():
    t = loads_topology(leaf_spine(top=""))
    built = netns.plan(t, "x")
    for sw in t.switches:
        cfg = switch_config(t, built, sw.name)["switch"]
        first = t.first_hops(sw.name)
        assert "ecmp_groups" not in cfg
        assert cfg["static_fdb"] == {built.mac(h, t.links_of(h)[0].name): via for h, via in first.items()
                                     if t.node(h).kind is not NodeKind.SWITCH}


@pytest.mark.parametrize("name", [None, "onepipe", "lg-testbed"])
def test_a_topology_without_a_switch_loop_gets_the_config_of_before(name):
    """No cycle, no tree: every port floods; ECMP on a tree finds a single path everywhere."""
    t = load_topology_spec(name)
    for cfg in configs(t).values():
        assert set(cfg) == {"name", "ports", "static_fdb", "switch_only_ethertypes"}
    import dataclasses

    for cfg in configs(dataclasses.replace(t, ecmp=True)).values():
        assert "ecmp_groups" not in cfg and "flood_ports" not in cfg


# ------------------------------------------------------------------------- the tree
def _flood(t: Topology, cfgs: dict[str, dict], start: str) -> list[str]:
    """Every node a broadcast from host ``start`` reaches, each copy once (a loop would repeat)."""
    ends = {(link.name, end.node): (link, end) for link in t.links for end in link.ends}
    port_link = {(end.node, end.ifname): link.name for (_, _), (link, end) in ends.items()}
    reached = [start]
    queue = deque([(t.links_of(start)[0].peer(start).node, t.links_of(start)[0].name)])
    while queue:
        node, via = queue.popleft()
        reached.append(node)
        if t.node(node).kind is not NodeKind.SWITCH:
            continue
        cfg = cfgs[node]
        for port in cfg.get("flood_ports") or [p["name"] for p in cfg["ports"]]:
            link_name = port_link[(node, port)]
            if link_name != via:
                queue.append((t.link(link_name).peer(node).node, link_name))
        assert len(reached) < 100, "a broadcast circles"
    return reached


@pytest.mark.parametrize(("leaves", "spines"), [(2, 2), (3, 2), (4, 3)])
def test_every_switchs_flood_ports_form_one_spanning_tree_and_every_host_hears_a_broadcast_once(leaves, spines):
    t = loads_topology(leaf_spine(leaves=leaves, spines=spines))
    cfgs = configs(t)
    switches = {s.name for s in t.switches}
    tree = set()
    for sw, cfg in cfgs.items():
        for port in cfg["flood_ports"]:
            link = next(link for link, end in t.ends_of(sw) if end.ifname == port)
            if link.peer(sw).node in switches:
                tree.add(link.name)
            else:
                assert t.node(link.peer(sw).node).kind is NodeKind.HOST  # every edge port floods
        assert {p["name"] for p in cfg["ports"] if p["role"] == "edge"} <= set(cfg["flood_ports"])
    assert tree == routes.flood_tree(t) and len(tree) == len(switches) - 1
    for name in tree:  # both ends flood on a tree link
        lk = t.link(name)
        assert all(lk.end(n).ifname in cfgs[n]["flood_ports"] for n in (lk.a.node, lk.b.node))
    hosts = sorted(h.name for h in t.hosts)
    for h in hosts:
        reached = _flood(t, cfgs, h)
        assert sorted(n for n in reached if n in hosts) == hosts  # each once: the list has no repeats
        assert sorted(n for n in reached if n in switches) == sorted(switches)


def test_the_tree_is_rooted_at_the_best_connected_switch():
    t = loads_topology(leaf_spine(leaves=3, spines=2))  # spines see 3 leaves, leaves 2 spines
    assert routes.flood_tree(t) == {"leaf1-spine1", "leaf2-spine1", "leaf3-spine1", "leaf1-spine2"}
    assert routes.has_switch_cycle(t) and not routes.has_switch_cycle(load_topology_spec("onepipe"))
