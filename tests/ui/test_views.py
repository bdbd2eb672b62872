"""``netstack ui``'s pure parts: each protocol's view of its daemon's answers, the checks every view
passes, the history (rates, timelines) and the layout of the graph."""

from __future__ import annotations

import math

from netstack import protocols
from netstack.dta import uiview as dta
from netstack.linkguardian import uiview as lg
from netstack.onepipe import uiview as onepipe
from netstack.runtime import Daemon, RunLink, RunPort, RunState
from netstack.tcd import uiview as tcd
from netstack.ui import layout, views
from netstack.ui.history import History


def test_every_view_module_of_the_registry_has_port_views():
    mods = views.modules()
    assert set(mods) == {p.name for p in protocols.PROTOCOLS if p.ui} >= {"linkguardian", "tcd", "onepipe", "dta"}
    assert all(callable(m.port_views) for m in mods.values())


def test_tcds_state_is_coloured_by_severity_and_an_ecn_port_has_none():
    def state(report):
        return tcd.port_view(report).get("state")

    assert state({"marker": "tcd", "state": "congestion", "counters": {}})["tone"] == "bad"
    assert state({"marker": "tcd", "state": "undetermined", "counters": {}})["tone"] == "warn"
    assert state({"marker": "tcd", "state": "non_congestion", "counters": {}})["tone"] == "ok"
    assert state({"marker": "tcd", "state": None, "counters": {}}) == {"value": "idle", "label": "no traffic yet",
                                                                       "tone": "off"}
    assert state({"marker": "ecn", "state": None, "counters": {"marked_ce": 3}}) is None
    status = {"protocols": {"tcd": {"ports": {"p1": {"marker": "tcd", "state": "congestion", "counters": {}}}}}}
    assert list(tcd.port_views("switch", status, None)) == ["p1"]
    assert tcd.port_views("switch", {"protocols": {}}, None) == {}


def test_onepipes_port_is_as_bad_as_its_worst_input_and_shows_barrier_progress():
    port = {"direction": "down", "role": "edge", "outputs": {"o": {"frozen": False}},
            "inputs": {"10.0.0.1:5000": {"live": True, "held": False, "r": 7_000_000_000, "silent_ns": 1_000_000},
                       "10.0.0.2:5000": {"live": False, "held": False, "r": None, "silent_ns": None}}}
    view = onepipe.port_view(port)
    assert view["state"]["value"] == "silent" and view["state"]["tone"] == "warn"
    assert view["rates"] == {"barrier of 10.0.0.1:5000 (ms)": 7000}
    port["inputs"]["10.0.0.2:5000"]["held"] = True
    assert onepipe.port_view(port)["state"]["tone"] == "bad"
    assert "state" not in onepipe.port_view({"inputs": {}, "outputs": {}})


def test_linkguardians_ends_mark_the_link_and_only_switch_links_offer_actions():
    sender = {"enabled": True, "params": {"tx_buffer_limit_bytes": 1000, "mode": "nb"},
              "counters": {"tx_buffer_bytes": 250, "tx_buffer_frames": 2, "retransmissions": 9}}
    view = lg.sender_view(sender)
    assert view["link"] == "protected" and view["title"] == "LinkGuardianNB sender"
    assert view["gauge"]["value"] == 250 and view["gauge"]["max"] == 1000
    assert view["rates"]["repairs (retransmitted copies)"] == 9
    answers = {"p-sw2": {"sender": sender, "receiver": {"enabled": False}}}
    got = lg.port_views("switch", {}, lambda cmd, **a: answers if cmd == "lg_status" else None)
    assert [v["title"] for v in got["p-sw2"]] == ["LinkGuardianNB sender"]
    assert lg.port_views("collector", {}, None) == {}
    state = _state()
    assert set(lg.link_actions(state, "l1-s1")) == {"enable", "enable-nb", "disable"}
    assert lg.link_actions(state, "h1-l1") == {}


def test_dtas_translator_shows_ingest_and_its_window_and_the_collector_its_writes():
    st = {"enabled": True, "port": "p-c1", "collector": "c1", "config": {"window": 1536},
          "counters": {"reports": 40, "roce_frames": 80, "qps": {"a": {"outstanding": 3}, "b": {"outstanding": 12}}}}
    got = dta.port_views("switch", {}, lambda cmd, **a: st)
    (view,) = got["p-c1"]
    assert view["gauge"] == {"label": "output window, busiest QP", "value": 12, "max": 1536, "unit": "requests"}
    assert view["rates"]["ingest (reports)"] == 40
    assert dta.port_views("switch", {}, lambda cmd, **a: {"enabled": False}) == {}
    node = dta.port_views("collector", {"regions": {"k": {"writes": 4, "atomics": 2}, "a": {"writes": 1}}}, None)
    assert node[""][0]["rates"] == {"RDMA writes": 5, "atomics": 2}


def test_a_view_is_checked_before_it_reaches_a_page():
    clean = views.clean({"title": "x" * 500, "rows": [["a", math.nan], ["b", object()], "junk", ["c", 1, 2]],
                         "rates": {"ok": 3, "bad": "3", "nan": math.inf}, "state": {"value": "v", "tone": "purple"},
                         "gauge": {"label": "g", "value": "full"}, "link": "sideways", "extra": 1})
    assert len(clean["title"]) == views.MAX_TEXT
    assert clean["rows"][0] == ["a", "nan"] and clean["rows"][1][0] == "b" and len(clean["rows"]) == 2
    assert clean["rates"] == {"ok": 3}
    assert clean["state"] == {"value": "v", "label": "v", "tone": "off"}
    assert "gauge" not in clean and "link" not in clean and "extra" not in clean


def test_a_failing_view_module_costs_its_own_view_only():
    class Broken:
        @staticmethod
        def port_views(kind, status, ask):
            raise KeyError("ports")

    class Fine:
        @staticmethod
        def port_views(kind, status, ask):
            return {"p1": [{"title": "fine"}]}

    got = views.port_views({"broken": Broken, "fine": Fine}, "switch", {}, None)
    assert got["p1"][0]["title"] == "fine" and got["p1"][0]["protocol"] == "fine"
    assert got[""][0]["protocol"] == "broken" and "KeyError" in got[""][0]["error"]


def test_the_history_gives_rates_and_a_minute_of_states():
    h = History(window_s=60)
    assert h.rate(("k",), 100, now=10.0) is None  # first sight
    assert h.rate(("k",), 150, now=10.5) == 100.0
    assert h.rate(("k",), 20, now=11.0) is None  # reset: no negative rate
    assert h.rate(("k",), 20, now=11.0) is None  # no time passed
    ok = {"value": "ok", "tone": "ok", "label": "ok"}
    bad = {"value": "bad", "tone": "bad", "label": "bad"}
    assert h.timeline(("t",), ok, now=0.0) == [[0.0, "ok", "ok", "ok"]]
    assert h.timeline(("t",), ok, now=30.0) == [[0.0, "ok", "ok", "ok"]]  # unchanged: one entry
    h.timeline(("t",), bad, now=40.0)
    h.timeline(("t",), ok, now=50.0)
    # at 105 the first entry ended (40) before the window (45): gone; the one from 40 still shows
    assert [e[1] for e in h.timeline(("t",), ok, now=105.0)] == ["bad", "ok"]
    snap = {"time": 200.0, "ports": {}, "nodes": {}}
    h.update(snap)
    assert h.states == {} and h.last == {}  # nothing seen for longer than the window


def _state() -> RunState:
    """A leaf-spine: two spines, two leaves, three hosts, a collector on a leaf and a link's flapper."""
    links = {"l1-s1": ("l1", "s1"), "l1-s2": ("l1", "s2"), "l2-s1": ("l2", "s1"), "l2-s2": ("l2", "s2"),
             "h1-l1": ("h1", "l1"), "h2-l2": ("h2", "l2"), "h10-l2": ("h10", "l2"), "c1-l1": ("c1", "l1")}
    ports = [RunPort(n, name, n, f"p-{other}", "", other, False)
             for name, (a, b) in links.items() for n, other in ((a, b), (b, a))]
    nodes = ("s1", "s2", "l1", "l2", "h1", "h2", "h10", "c1")
    daemons = [Daemon(n, "switch", 1, f"/x/{n}.sock", "") for n in ("s1", "s2", "l1", "l2")]
    daemons += [Daemon("c1", "collector", 1, "/x/c1.sock", ""), Daemon("l1-s1", "linkflap", 1, "", "")]
    return RunState(prefix="p", namespaces={n: f"p-{n}" for n in nodes}, ports=ports, daemons=daemons,
                    links={k: RunLink(a, b, 1, 1, 1500, False) for k, (a, b) in links.items()},
                    hosts={"h1": "10.0.0.1/24", "h2": "10.0.0.2/24", "h10": "10.0.0.10/24", "c1": "10.0.0.9/24"})


def test_the_layout_puts_spines_above_leaves_above_hosts_in_natural_order():
    state = _state()
    assert layout.node_kinds(state)["c1"] == "collector" and "l1-s1" not in layout.node_kinds(state)
    assert layout.rows(state) == [["c1"], ["s1", "s2"], ["l1", "l2"], ["h1", "h2", "h10"]]
    doc = layout.graph(state)
    y = {n["name"]: n["y"] for n in doc["nodes"]}
    assert y["c1"] < y["s1"] == y["s2"] < y["l1"] < y["h1"] == y["h10"]
    assert doc["width"] >= layout.MIN_WIDTH and {x["name"] for x in doc["links"]} == set(state.links)
