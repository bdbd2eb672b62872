"""Reliable 1Pipe in the switch: the commit barrier ``R_commit`` aggregated exactly as ``R_be``
(the paper, *1Pipe: Scalable Total Order Communication in Data Center Networks*, §5.1; our
design topic §7.2 in docs/papers.md), and the controller's hooks (topic §8 step 7: a commit
barrier never passes a failed input until the controller releases it). docs/onepipe-reliable.md
"Switch" is the design tested here.

First the aggregator alone (``hold``, ``fence``, ``release``), rule by rule and as properties;
then real frames through software switches, as tests/onepipe/test_feature.py does; then the
switch daemon's control handlers.
"""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headers.inet import parse_udp_frame
from headers.onepipe import OnePipeHeader, OnePipeOpcode, commit, ts_from_ns
from netstack.errors import ConfigError
from netstack.io.control import ControlError
from netstack.onepipe import control as opcontrol
from netstack.onepipe import feature as op
from netstack.onepipe.barrier import DOWN, UP, BarrierAggregator
from netstack.onepipe.params import OnePipeParams
from netstack.switch import PortConfig, Switch, SwitchConfig

from .test_feature import BCAST, DATA, PARAMS, PREPARE, Net, header, host_beacon, ip, mac, op_frame, udp_checksum_ok
from .test_feature import T as FT

COMMIT, BEACON = OnePipeOpcode.COMMIT, OnePipeOpcode.BEACON

# ------------------------------------------------------------------------------ the aggregator

T = 1_000  # T_beacon
P = OnePipeParams(t_beacon_ns=T, timeout_beacons=10, ack_timeout_ns=100 * T, prompt_beacons=False)
PP = P.with_(prompt_beacons=True)
TIMEOUT = 10 * T


def agg(hold: bool = True, params: OnePipeParams = P, **inputs: bool) -> BarrierAggregator:
    a = BarrierAggregator(params, hold=hold)
    for name, down in inputs.items():
        a.add_input(name, down=down)
    a.add_output("up", UP, 0)
    a.add_output("down", DOWN, 0)
    return a


def test_hold_is_off_by_default():
    a = BarrierAggregator(P)
    assert not a.hold and a.counters()["hold"] is False and a.counters()["inputs_held"] == 0


def test_in_min_counts_live_and_held_inputs():
    a = agg(h1=True, h2=True)
    assert a.in_min == 0
    a.heard("h1", 100, 0)
    a.heard("h2", 100, 0)
    a.fence("h1")
    assert a.in_min == 2
    a.release("h1")
    assert a.in_min == 1


def test_with_hold_a_timed_out_input_stays_in_the_minimum_frozen():
    a = agg(h1=True, h2=True)
    a.heard("h1", 100, 0)
    a.heard("h2", 500, 0)
    assert a.barrier_for("down", 1) == 100
    a.heard("h2", 600, 5 * T)
    assert a.on_timer(TIMEOUT) == ["h1"]  # reported to the caller, as a timeout is
    assert a.held("h1") and not a.is_live("h1")
    assert a.barrier_for("down", TIMEOUT) == 100  # still the minimum: pinned (§8 step 7)
    assert not a.heard("h1", 900, TIMEOUT + 1)  # updates ignored while held
    assert a.r("h1") == 100 and a.barrier_for("down", TIMEOUT + 2) == 100
    st_ = a.input_state("h1", TIMEOUT + 2)
    assert st_["held"] and not st_["live"] and st_["in_min"]
    assert (st_["timeouts"], st_["holds"], st_["held_updates"], st_["heard"]) == (1, 1, 1, 2)
    assert a.counters()["inputs_held"] == 1 and a.counters()["inputs_live"] == 1  # h2
    assert a.on_timer(5 * T + TIMEOUT) == ["h2"]  # h2 is held in turn; h1 is not timed out twice
    assert a.counters()["inputs_held"] == 2


def test_without_hold_a_timed_out_input_leaves_the_minimum():
    a = agg(hold=False, h1=True, h2=True)
    a.heard("h1", 100, 0)
    a.heard("h2", 600, 5 * T)
    assert a.on_timer(TIMEOUT) == ["h1"]
    assert not a.held("h1") and a.barrier_for("down", TIMEOUT) == 600


def test_release_lets_the_minimum_rise_and_a_heard_input_rejoins_under_the_freeze():
    a = agg(h1=True, h2=True)
    a.heard("h1", 100, 0)
    a.heard("h2", 500, 0)
    a.heard("h2", 5000, 9 * T)
    a.on_timer(TIMEOUT)
    assert a.barrier_for("down", TIMEOUT) == 100
    assert a.release("h1", TIMEOUT + 1)
    assert not a.held("h1") and not a.is_live("h1") and a.has_input("h1")  # still declared
    assert a.barrier_for("down", TIMEOUT + 2) == 5000
    assert a.heard("h1", 4000, TIMEOUT + 3)  # back below the barrier given out: a new input (§8)
    assert a.joining("down") == ["h1"] and a.barrier_for("down", TIMEOUT + 4) == 5000  # frozen
    st_ = a.input_state("h1", TIMEOUT + 4)
    assert (st_["joins"], st_["rejoins"], st_["releases"]) == (2, 1, 1) and st_["live"]
    a.heard("h1", 6000, TIMEOUT + 5)
    a.heard("h2", 7000, TIMEOUT + 5)
    assert a.barrier_for("down", TIMEOUT + 6) == 6000


def test_fence_holds_a_live_input_at_once_and_is_idempotent():
    a = agg(h1=True, h2=True)
    a.heard("h1", 100, 0)
    a.heard("h2", 500, 0)
    assert a.fence("h1") == 100 and a.fence("h1") == 100
    assert a.input_state("h1", 1)["holds"] == 1
    a.heard("h1", 1000, 1)
    a.heard("h2", 1000, 1)
    assert a.barrier_for("down", 2) == 100
    for k in range(1, 30):  # h2 keeps talking; h1 held, never timed out again
        a.heard("h2", 1000 + k, k * T)
        assert a.on_timer(k * T) == []
    assert a.held("h1") and a.input_state("h1", 30 * T)["timeouts"] == 0
    assert a.release("h1") and a.barrier_for("down", 30 * T) == 1029


def test_fence_of_an_input_out_of_the_minimum_keeps_it_out_until_released():
    a = agg(h1=True, h2=True, quiet=True)
    assert a.fence("nobody") is None and not a.held("nobody")  # undeclared: nothing
    assert a.fence("quiet") is None and a.held("quiet")  # declared, never heard
    a.heard("h1", 100, 0)
    assert not a.heard("quiet", 5, 1)  # may not join while held
    assert a.barrier_for("down", 2) == 100
    assert a.release("quiet") and a.heard("quiet", 150, 3)
    st_ = a.input_state("quiet", 3)
    assert (st_["joins"], st_["rejoins"], st_["held_updates"]) == (1, 0, 1)
    assert not a.release("nobody")


def test_fence_and_release_work_without_hold_too():
    a = agg(hold=False, h1=True, h2=True)
    a.heard("h1", 100, 0)
    a.heard("h2", 200, 5 * T)
    assert a.fence("h1") == 100
    assert a.on_timer(TIMEOUT) == []  # held: no longer times out
    assert a.barrier_for("down", TIMEOUT) == 100
    assert a.release("h1") and a.barrier_for("down", TIMEOUT) == 200


def test_an_up_input_released_raises_only_the_down_outputs():
    a = agg(params=PP, h1=True, spine=False)
    a.heard("h1", 500, 10)
    a.heard("spine", 100, 10)
    assert sorted(a.due_beacons(T)) == [("down", 100), ("up", 500)]
    a.fence("spine")
    assert a.release("spine", T + 10)
    assert a.next_deadline() == T + 10  # a prompt beacon at once (the minimum may have risen)
    assert a.due_beacons(T + 10) == [("down", 500)]  # "up" never counted the spine


def test_a_held_input_gets_no_beacons():
    a = BarrierAggregator(P, hold=True)
    a.add_input("p", down=True)
    a.add_output("p", DOWN, 0, peer_input="p")
    a.heard("p", 100, 0)
    assert a.due_beacons(T) == [("p", 100)]
    a.fence("p")
    assert a.due_beacons(5 * T) == []
    a.release("p")
    a.heard("p", 200, 6 * T)
    assert a.due_beacons(6 * T) == [("p", 200)]


def test_removing_a_held_input():
    a = agg(h1=True, h2=True)
    a.heard("h1", 100, 0)
    a.heard("h2", 200, 0)
    a.fence("h1")
    assert a.remove_input("h1") and a.barrier_for("down", 1) == 200 and a.counters()["inputs_held"] == 0


# ------------------------------------------------------------------------------ properties

PT = 100
PARAMS_P = OnePipeParams(t_beacon_ns=PT, timeout_beacons=3, ack_timeout_ns=100 * PT, prompt_beacons=False)
PTIMEOUT = 3 * PT

dts = st.integers(0, 2 * PT)
steps = st.one_of(
    st.tuples(st.just("heard"), st.integers(0, 4), st.integers(0, 2000), dts),
    st.tuples(st.just("stamp"), st.sampled_from(["up", "down"]), dts),
    st.tuples(st.just("tick"), dts),
    st.tuples(st.just("fence"), st.integers(0, 4)),
    st.tuples(st.just("release"), st.integers(0, 4), dts),
)


class HoldModel:
    """The aggregator with holds, the slow and obvious way: ``inmin`` (counted in the minima),
    ``held`` (frozen, updates ignored), ``r``; an output's barrier is ``max(last, min R)`` over the
    inputs in its minimum (the freeze, §4), None while that set is empty."""

    def __init__(self, downs: list[bool], hold: bool) -> None:
        self.hold = hold
        self.down = downs
        n = len(downs)
        self.r: list[int | None] = [None] * n
        self.heard_at = [0] * n
        self.inmin = [False] * n
        self.held = [False] * n
        self.last: dict[str, int | None] = {"up": None, "down": None}
        #: per held input in the minima: the barrier each output had when it was held
        self.pins: dict[int, dict[str, int | None]] = {}

    def counts(self, i: int, out: str) -> bool:
        return self.down[i] or out != "up"

    def heard(self, i: int, b: int, now: int) -> None:
        if self.held[i]:
            return
        self.heard_at[i] = now
        r = self.r[i]
        if not self.inmin[i]:
            self.inmin[i], self.r[i] = True, b
        elif r is not None and b > r:
            self.r[i] = b

    def make_held(self, i: int) -> None:
        if not self.held[i]:
            self.held[i] = True
            if self.inmin[i]:
                self.pins[i] = dict(self.last)

    def check(self, out: str, value: int | None) -> None:
        rs = [r for i, r in enumerate(self.r) if self.inmin[i] and self.counts(i, out) and r is not None]
        last = self.last[out]
        if not rs:
            assert value is None
            return
        m = min(rs)
        assert value == (m if last is None else max(last, m))  # the freeze formula, exactly
        assert last is None or value >= last  # no output barrier ever decreases (§12 invariant 1)
        for i, pinned in self.pins.items():  # a held input pins the minimum until released
            r = self.r[i]
            if self.counts(i, out) and r is not None:
                before = pinned[out]
                assert value <= (r if before is None else max(before, r))
        self.last[out] = value


@given(st.lists(st.booleans(), min_size=1, max_size=5), st.booleans(), st.lists(steps, max_size=80))
def test_holds_never_lower_a_barrier_and_a_held_input_pins_the_minimum(downs, hold, program):
    a = BarrierAggregator(PARAMS_P, hold=hold)
    m = HoldModel(list(downs), hold)
    for i, d in enumerate(downs):
        a.add_input(i, down=d)
    a.add_output("up", UP, 0)
    a.add_output("down", DOWN, 0)
    n = len(downs)
    now = 0
    for step in program:
        kind = step[0]
        if kind == "heard":
            _, i, b, dt = step
            now += dt
            if i < n:
                assert a.heard(i, b, now) == (not m.held[i] and (not m.inmin[i] or b >= (m.r[i] or 0)))
                m.heard(i, b, now)
        elif kind == "stamp":
            _, out, dt = step
            now += dt
            m.check(out, a.barrier_for(out, now))
            a.note_sent(out, now)
        elif kind == "fence":
            i = step[1]
            if i < n:
                assert a.fence(i) == m.r[i]
                m.make_held(i)
        elif kind == "release":
            _, i, dt = step
            now += dt
            if i < n:
                assert a.release(i, now)
                m.held[i] = m.inmin[i] = False
                m.pins.pop(i, None)
        else:
            now += step[1]
            gone = [i for i in range(n) if m.inmin[i] and not m.held[i] and now - m.heard_at[i] >= PTIMEOUT]
            assert sorted(a.on_timer(now)) == gone
            for i in gone:
                if hold:
                    m.make_held(i)
                else:
                    m.inmin[i] = False
            for out, value in a.due_beacons(now):
                m.check(out, value)
        assert [a.held(i) for i in range(n)] == m.held
        assert [a.is_live(i) for i in range(n)] == [m.inmin[i] and not m.held[i] for i in range(n)]
        assert [a.r(i) for i in range(n)] == m.r
        assert a.counters()["inputs_held"] == sum(m.held)


# ------------------------------------------------------------------------------ frames through switches

COMMIT_AT = 54  # the commit field in a frame with a 20-byte IP header (1Pipe header at 42, offset 12)


def commit_frame(src: int, sport: int, value: int) -> bytes:
    """What a reliable process sends its ToR when its commit rises (docs/onepipe-reliable.md "Wire")."""
    return op_frame(src, 0, sport, 40100, COMMIT, 0, barrier=0, commit=value, dst_mac=BCAST, dst_ip=ip(255))


def one_tor(controller: bool = False, reports: list | None = None, **kw) -> Switch:
    ports = tuple(PortConfig(f"p-h{i}", role="edge") for i in (1, 2, 3))
    sw = Switch(SwitchConfig("tor", ports, {mac(i): f"p-h{i}" for i in (1, 2, 3)}))
    op.enable(sw, {f"p-h{i}": "down" for i in (1, 2, 3)}, PARAMS, 0, controller=controller,
              on_report=None if reports is None else reports.append, **kw)
    return sw


def to(sw: Switch, port: str, now: int) -> list[bytes]:
    return [f for p, f in sw.transmit(now) if p == port]


H1, H2, H3 = "10.0.0.1:40101", "10.0.0.2:40101", "10.0.0.3:40101"


def test_every_input_and_output_is_declared_in_both_aggregators():
    n = Net()
    sw = n.sw["tor1"]
    n.send("tor1", "p-h1", host_beacon(1, 40101, 20 * FT), 10 * FT)
    be, cm = op.aggregator(sw), op.commit_aggregator(sw)
    assert be is not None and cm is not None and cm is not be and cm.hold is False
    assert be.input_ids() == cm.input_ids() and be.output_ids() == cm.output_ids()
    assert "p-spine1" in cm.input_ids() and op.Proc("p-h1", ip(1), 40101) in cm.output_ids()


def test_the_commit_field_is_the_min_over_inputs_and_both_fields_are_rewritten():
    sw = one_tor()
    t = 10 * FT
    sw.receive("p-h1", host_beacon(1, 40101, t + 100, commit=t + 50), t)
    sw.receive("p-h2", host_beacon(2, 40101, t + 200, commit=t + 30), t)
    sw.receive("p-h3", host_beacon(3, 40101, t + 300), t)  # best effort: commit 0, not in the commit minimum
    data = op_frame(1, 3, 40101, 40101, DATA, t + 400, barrier=t + 100, commit=t + 60, payload=b"hello")
    sw.receive("p-h1", data, t)
    (got,) = to(sw, "p-h3", t)
    h = header(got)
    assert (h.msg_ts, h.be_barrier, h.commit_barrier) == (ts_from_ns(t + 400), ts_from_ns(t + 100), ts_from_ns(t + 30))
    assert udp_checksum_ok(got)  # recomputed from scratch
    assert got[:40] == data[:40] and got[42:48] == data[42:48] and got[60:] == data[60:]  # nothing else moved
    cm = op.commit_aggregator(sw)
    assert cm.r(op.Proc("p-h1", ip(1), 40101)) == t + 60 and cm.r(op.Proc("p-h3", ip(3), 40101)) is None
    st_ = op.status(sw)
    assert st_["ports"]["p-h3"]["outputs"][H3]["commit_barrier"] == t + 30
    assert st_["ports"]["p-h1"]["inputs"][H1]["commit_r"] == t + 60


def test_an_output_with_no_commit_minimum_writes_0():
    sw = one_tor()
    t = 10 * FT
    f = op_frame(1, 3, 40101, 40101, DATA, t, commit=t - 5)  # a wrong commit from nobody the switch trusts...
    sw.receive("p-h2", host_beacon(2, 40101, t), t)
    sw.receive("p-h3", host_beacon(3, 40101, t), t)
    sw.receive("p-h1", op_frame(1, 3, 40101, 40101, DATA, t), t)  # best effort everywhere
    (got,) = to(sw, "p-h3", t)
    assert header(got).commit_barrier == 0 and udp_checksum_ok(got)
    sw.receive("p-h1", f, t)  # ... is h1's own now: the minimum
    (got,) = to(sw, "p-h3", t)
    assert header(got).commit_barrier == ts_from_ns(t - 5) and udp_checksum_ok(got)


def test_a_commit_sets_r_commit_only_and_is_consumed():
    sw = one_tor()
    t = 10 * FT
    sw.receive("p-h1", host_beacon(1, 40101, t + 100, commit=t + 10), t)
    sw.receive("p-h1", commit_frame(1, 40101, t + 90), t + 1)
    # hop by hop: never forwarded (§5); h1's commit held the minimum, which rose: a prompt beacon
    # (the switch's own, from port 40100) tells h1 at once
    (b,) = [f for p, f in sw.transmit(t + 1) if p == "p-h1"]
    assert parse_udp_frame(b).udp.sport == 40100 and header(b).opcode is BEACON
    assert header(b).commit_barrier == ts_from_ns(t + 90) and header(b).be_barrier == ts_from_ns(t + 100)
    key = op.Proc("p-h1", ip(1), 40101)
    assert op.aggregator(sw).r(key) == t + 100 and op.commit_aggregator(sw).r(key) == t + 90
    c = op.status(sw)["ports"]["p-h1"]["counters"]
    assert c["beacons_rx"] == 2 and c["barrier_backwards"] == 0 and c["commit_backwards"] == 0
    sw.receive("p-h1", commit_frame(1, 40101, t + 20), t + 2)  # backwards: refused, counted
    assert op.commit_aggregator(sw).r(key) == t + 90
    assert op.status(sw)["ports"]["p-h1"]["counters"]["commit_backwards"] == 1


def test_prepare_with_a_commit_barrier_passes_untouched_and_sets_nothing():
    sw = one_tor()
    f = op_frame(1, 3, 40101, 40101, PREPARE, 7 * FT, commit=6 * FT, payload=b"p")
    sw.receive("p-h1", f, 7 * FT)
    assert to(sw, "p-h3", 7 * FT) == [f]
    assert op.commit_aggregator(sw).r(op.Proc("p-h1", ip(1), 40101)) is None


def test_the_commit_barrier_is_aggregated_hop_by_hop():
    n = Net()
    t = 10 * FT
    # (received before any switch runs its timer: a beacon first would freeze tor1's output
    # to the spine at h1's value, §4)
    n.sw["tor1"].receive("p-h1", host_beacon(1, 40101, t + 100, commit=t + 70), t)
    n.sw["tor1"].receive("p-h2", host_beacon(2, 40101, t + 200, commit=t + 40), t)
    n.sw["tor2"].receive("p-h3", host_beacon(3, 40101, t + 300, commit=t + 20), t)
    n.send("tor1", "p-h1", op_frame(1, 3, 40101, 40101, DATA, t + 400, barrier=t + 100, commit=t + 80), t)
    (got,) = n.take("h3")
    h = header(got)
    # tor1 up: min(h1 80, h2 40) = 40; spine down: 40; tor2 to h3: min(spine 40, h3 20) = 20
    assert h.be_barrier == ts_from_ns(t + 100) and h.commit_barrier == ts_from_ns(t + 20) and udp_checksum_ok(got)
    assert op.commit_aggregator(n.sw["spine1"]).r("p-tor1") == t + 40
    assert op.commit_aggregator(n.sw["tor2"]).r("p-spine1") == t + 40


def test_idle_outputs_get_beacons_with_both_barriers_and_commits_where_only_a_commit_barrier_is():
    """h1 is a reliable process that, for the test, sends COMMITs only (no BE barrier); h3 is a
    best-effort one. tor1 has a commit barrier and no BE barrier for the spine: COMMITs go up; the
    spine's beacons down to tor2 carry both (its BE barrier is tor2's own, §4: a down output takes
    every input), and tor2's beacons to h3 carry h3's BE barrier and h1's commit."""
    n = Net()
    t = 10 * FT
    for k in range(4):
        now = t + k * FT // 2
        n.send("tor1", "p-h1", commit_frame(1, 40101, now + 50), now)
        n.send("tor2", "p-h3", host_beacon(3, 40101, now + 300), now)
    n.wire.clear()
    now = t + 2 * FT
    n.send("tor1", "p-h1", commit_frame(1, 40101, now + 50), now)
    n.send("tor2", "p-h3", host_beacon(3, 40101, now + 300), now)
    n.run(now + 2 * FT)
    up = [f for sw, p, f in n.wire if (sw, p) == ("tor1", "p-spine1")]
    assert up and all(header(f).opcode is COMMIT for f in up)
    f = up[-1]
    h = header(f)
    assert (h.msg_ts, h.be_barrier, h.commit_barrier) == (0, 0, ts_from_ns(now + 50)) and udp_checksum_ok(f)
    assert parse_udp_frame(f).ip.ttl == 1 and len(f) == parse_udp_frame(f).payload_offset + 24
    down = [f for sw, p, f in n.wire if (sw, p) == ("spine1", "p-tor2")]
    assert down and {header(f).opcode for f in down} == {BEACON}
    assert header(down[-1]).commit_barrier == ts_from_ns(now + 50) and udp_checksum_ok(down[-1])
    beacons = [header(f) for f in n.take("h3")]
    assert beacons and all(h.opcode is BEACON for h in beacons)
    assert beacons[-1].be_barrier == ts_from_ns(now + 300) and beacons[-1].commit_barrier == ts_from_ns(now + 50)
    assert n.take("h1") == []  # h1 is not live on the BE side: no beacons for it
    assert n.counters("tor1", "p-spine1")["commits_tx"] >= 1 and n.counters("tor1", "p-spine1")["beacons_tx"] == 0
    assert n.counters("spine1", "p-tor1")["beacons_rx"] >= 1
    assert op.aggregator(n.sw["spine1"]).r("p-tor1") is None  # the COMMITs set no BE barrier


def test_a_timeout_is_reported_with_the_last_commit():
    got: list[dict] = []
    sw = one_tor(reports=got)
    t = 10 * FT
    sw.receive("p-h1", host_beacon(1, 40101, t + 100, commit=t + 50), t)
    sw.receive("p-h2", host_beacon(2, 40101, t + 200), t)  # best effort: no commit
    sw.transmit(t + 10 * FT)
    want = [{"seq": 0, "input": H1, "port": "p-h1", "last_commit": t + 50, "at_ns": t + 10 * FT, "cause": "timeout"},
            {"seq": 1, "input": H2, "port": "p-h2", "last_commit": None, "at_ns": t + 10 * FT, "cause": "timeout"}]
    assert got == want and op.reports(sw) == want and op.reports(sw, since=1) == want[1:]
    assert op.reports_page(sw, 2) == {"reports": [], "next": 2, "dropped": 0}
    st_ = op.status(sw)
    assert st_["reports"] == 2 and st_["controller"] is False


def test_a_fabric_link_is_reported_by_its_port_name():
    n = Net(controller=True)
    t = 10 * FT
    n.send("spine1", "p-tor1", op_frame(9, 0, 40100, 40100, BEACON, t, commit=t - 7, dst_mac=BCAST,
                                         dst_ip=b"\xff" * 4), t)
    n.sw["spine1"].transmit(t + 10 * FT)
    (rep,) = [r for r in op.reports(n.sw["spine1"]) if r["input"] == "p-tor1"]
    assert rep["port"] == "p-tor1" and rep["last_commit"] == t - 7
    assert op.commit_aggregator(n.sw["spine1"]).held("p-tor1")
    assert op.release(n.sw["spine1"], "p-tor1") and not op.commit_aggregator(n.sw["spine1"]).held("p-tor1")


def reliable_run(controller: bool) -> tuple[Switch, int]:
    """h1 and h2 reliable, h3 best effort; h1 falls silent at t, the others go on (one ToR)."""
    sw = one_tor(controller=controller)
    t = 10 * FT
    sw.receive("p-h1", host_beacon(1, 40101, t + 100, commit=t + 50), t)
    for k in range(16):
        now = t + k * FT
        sw.receive("p-h2", host_beacon(2, 40101, now + 200, commit=now + 80), now)
        sw.receive("p-h3", host_beacon(3, 40101, now + 300), now)
        sw.transmit(now)
    return sw, t + 15 * FT


def data_to_h3(sw: Switch, now: int) -> OnePipeHeader:
    sw.receive("p-h2", op_frame(2, 3, 40101, 40101, DATA, now + 500, barrier=now + 200, commit=now + 80), now)
    (got,) = to(sw, "p-h3", now)
    assert udp_checksum_ok(got)
    return header(got)


def test_under_a_controller_a_silent_process_pins_the_commit_barrier_until_released():
    sw, now = reliable_run(controller=True)
    t = 10 * FT
    h = data_to_h3(sw, now)
    assert h.be_barrier == ts_from_ns(now + 200)  # the BE barrier moved on without h1 (§6)
    assert h.commit_barrier == ts_from_ns(t + 50)  # the commit barrier did not (§8 step 7)
    (rep,) = op.reports(sw)
    assert rep["input"] == H1 and rep["last_commit"] == t + 50 and rep["at_ns"] == t + 10 * FT
    ins = op.status(sw)["ports"]["p-h1"]["inputs"][H1]
    assert ins["held"] and not ins["live"] and ins["commit_r"] == t + 50
    # h1 comes back before the controller is done: its BE barrier re-joins, its commit is ignored
    sw.receive("p-h1", host_beacon(1, 40101, now + 1000, commit=now + 900), now)
    assert data_to_h3(sw, now).commit_barrier == ts_from_ns(t + 50)
    c = op.status(sw)["ports"]["p-h1"]["counters"]
    assert c["commit_held"] == 1 and c["commit_backwards"] == 0
    assert op.commit_aggregator(sw).input_state(op.Proc("p-h1", ip(1), 40101), now)["held_updates"] == 1
    # the controller releases it: the commit barrier moves to the others' minimum
    assert op.release(sw, H1, now)
    assert data_to_h3(sw, now).commit_barrier == ts_from_ns(now + 80)
    # heard again, it re-joins as a new input (§8 recovery), above the barrier: no freeze
    sw.receive("p-h1", host_beacon(1, 40101, now + 1000, commit=now + 90), now + 1)
    assert data_to_h3(sw, now + 1).commit_barrier == ts_from_ns(now + 81)
    st_ = op.commit_aggregator(sw).input_state(op.Proc("p-h1", ip(1), 40101), now + 1)
    assert (st_["joins"], st_["rejoins"], st_["releases"], st_["live"]) == (2, 1, 1, True)


def test_a_release_sends_the_risen_commit_barrier_at_once():
    sw, now = reliable_run(controller=True)
    to(sw, "p-h2", now + FT)
    assert op.release(sw, H1, now + FT)
    assert sw.next_deadline() <= now + FT  # a prompt beacon, not the next T_beacon tick
    (b,) = to(sw, "p-h2", now + FT)
    assert header(b).opcode is BEACON and header(b).commit_barrier == ts_from_ns(now + 80)


def test_without_a_controller_a_silent_process_leaves_the_commit_minimum_on_timeout():
    sw, now = reliable_run(controller=False)
    h = data_to_h3(sw, now)
    assert h.be_barrier == ts_from_ns(now + 200) and h.commit_barrier == ts_from_ns(now + 80)
    assert [r["input"] for r in op.reports(sw)] == [H1]  # reported all the same
    assert not op.commit_aggregator(sw).held(op.Proc("p-h1", ip(1), 40101))


def test_a_commit_that_goes_silent_alone_is_reported_under_a_controller():
    """A process whose packets stop carrying a commit (0) while its BE barrier goes on: held
    (its commit pins the minimum), so the controller must hear of it, or nothing would release it."""
    for controller in (True, False):
        sw = one_tor(controller=controller)
        t = 10 * FT
        sw.receive("p-h1", host_beacon(1, 40101, t, commit=t - 5), t)
        for k in range(1, 12):
            sw.receive("p-h1", host_beacon(1, 40101, t + k * FT), t + k * FT)  # commit 0: none
            sw.transmit(t + k * FT)
        key = op.Proc("p-h1", ip(1), 40101)
        assert op.aggregator(sw).is_live(key)
        if controller:
            (rep,) = op.reports(sw)
            assert rep["cause"] == "commit_timeout" and rep["last_commit"] == t - 5 and rep["at_ns"] == t + 10 * FT
            assert op.commit_aggregator(sw).held(key)
        else:
            assert op.reports(sw) == [] and not op.commit_aggregator(sw).held(key)
            assert op.commit_aggregator(sw).input_state(key, t + 11 * FT)["timeouts"] == 1


def test_fence_holds_a_live_process_and_release_lets_it_go():
    sw, now = reliable_run(controller=True)
    assert op.release(sw, H1, now)
    before = data_to_h3(sw, now).commit_barrier
    out = op.fence(sw, H2)
    assert out == {"input": H2, "known": True, "last_commit": now + 80}
    assert op.fence(sw, H2) == out  # idempotent
    for k in range(1, 4):  # h2 goes on talking: its commit is frozen all the same
        sw.receive("p-h2", host_beacon(2, 40101, now + k * FT + 200, commit=now + k * FT + 80), now + k * FT)
    later = now + 3 * FT
    sw.receive("p-h3", host_beacon(3, 40101, later + 300), later)
    h = data_to_h3(sw, later)  # (this data's commit is h2's too, and ignored)
    assert h.commit_barrier == before == ts_from_ns(now + 80) and h.be_barrier == ts_from_ns(later + 200)
    assert op.release(sw, H2, later)
    sw.receive("p-h2", host_beacon(2, 40101, later + 200, commit=later + 80), later)
    assert data_to_h3(sw, later).commit_barrier == ts_from_ns(later + 80)


def test_fence_and_release_name_inputs_as_the_reports_do():
    n = Net(controller=True)
    sw = n.sw["tor1"]
    assert op.fence(sw, "10.0.0.9:40101") == {"input": "10.0.0.9:40101", "known": False, "last_commit": None}
    assert not op.release(sw, "10.0.0.9:40101")
    assert op.fence(sw, "p-spine1") == {"input": "p-spine1", "known": True, "last_commit": None}
    for bad in ("p-h1", "nonsense", "10.0.0.1", "10.0.0.1:0", "10.0.0.1:70000", "300.0.0.1:40101", ":40101", "",
                "10.0.0.1:+5"):
        with pytest.raises(ConfigError, match=r"onepipe\.input"):
            op.fence(sw, bad)
        with pytest.raises(ConfigError, match=r"onepipe\.input"):
            op.release(sw, bad)
    with pytest.raises(ConfigError, match=r"onepipe\.input"):
        op.fence(sw, 5)  # type: ignore[arg-type]
    op.disable(sw)
    with pytest.raises(ConfigError, match="not enabled"):
        op.fence(sw, "p-spine1")
    with pytest.raises(ConfigError, match="not enabled"):
        op.release(sw, "p-spine1")
    assert op.reports(sw) == [] and op.commit_aggregator(sw) is None


def test_a_held_process_is_never_evicted_from_a_full_table():
    sw = one_tor(controller=True, max_processes=1)
    sw.receive("p-h1", host_beacon(1, 40101, FT, commit=FT - 1), 0)
    sw.transmit(10 * FT)  # times out: held (its commit pins the minimum)
    sw.receive("p-h2", host_beacon(2, 40101, 11 * FT), 10 * FT)
    st_ = op.status(sw)
    assert st_["ports"]["p-h2"]["counters"]["table_full"] == 1 and set(st_["ports"]["p-h1"]["inputs"]) == {H1}
    op.release(sw, H1)
    sw.receive("p-h2", host_beacon(2, 40101, 11 * FT), 10 * FT)  # now it may go
    st_ = op.status(sw)
    assert set(st_["ports"]["p-h2"]["inputs"]) == {H2} and st_["ports"]["p-h1"]["inputs"] == {}
    assert op.commit_aggregator(sw).input_ids() == op.aggregator(sw).input_ids()  # forgotten in both


def test_reports_are_bounded_and_overflows_counted(monkeypatch):
    monkeypatch.setattr(op, "MAX_REPORTS", 3)
    sw = one_tor()
    for k in range(5):
        sw.receive("p-h1", host_beacon(1, 40101 + k, FT), 0)
    sw.transmit(10 * FT)
    page = op.reports_page(sw)
    assert [r["seq"] for r in page["reports"]] == [2, 3, 4] and page["next"] == 5 and page["dropped"] == 2
    assert [r["seq"] for r in op.reports(sw, since=3)] == [3, 4] and op.reports(sw, since=9) == []


def test_enable_checks_controller_and_on_report():
    sw = Switch(SwitchConfig("tor", (PortConfig("p-h1", role="edge"),), {}))
    with pytest.raises(ConfigError, match="controller"):
        op.enable(sw, {"p-h1": "down"}, controller="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="on_report"):
        op.enable(sw, {"p-h1": "down"}, on_report=5)  # type: ignore[arg-type]
    assert not op.enabled(sw)


def test_status_shows_both_barriers_and_is_plain_data():
    sw, now = reliable_run(controller=True)
    data_to_h3(sw, now)
    st_ = op.status(sw, now)
    assert json.loads(json.dumps(st_)) == st_
    assert st_["controller"] is True and st_["reports"] == 1 and st_["commit_aggregator"]["inputs_held"] == 1
    assert st_["commit_aggregator"]["hold"] is True and st_["aggregator"]["hold"] is False
    out = st_["ports"]["p-h3"]["outputs"][H3]
    assert out["commit_barrier"] == 10 * FT + 50 and out["barrier"] == now + 200
    h2 = st_["ports"]["p-h2"]["inputs"][H2]
    assert h2["commit_r"] == now + 80 and not h2["held"] and h2["commit_live"]


# ------------------------------------------------------------------------------ checksums, any value


@given(st.integers(0, (1 << 48) - 1), st.integers(0, (1 << 48) - 1), st.integers(0, (1 << 48) - 1),
       st.integers(0, (1 << 48) - 1), st.binary(max_size=40))
def test_both_rewritten_fields_keep_a_valid_udp_checksum(be, cm, old_be, old_cm, payload):
    """The switch's incremental update (RFC 1624) for both fields, checked by recomputing it."""
    from headers.inet import build_udp_frame

    hdr = OnePipeHeader(old_be, old_be, old_cm, 7, DATA).to_bytes()
    frame = build_udp_frame(mac(1), mac(3), ip(1), ip(3), 40101, 40101, hdr + payload)
    csum = frame[40] << 8 | frame[41]
    new = op._moved_checksum(csum, old_be + old_cm, be + cm)
    out = b"".join((frame[:40], new.to_bytes(2, "big"), frame[42:48], be.to_bytes(6, "big"), cm.to_bytes(6, "big"),
                    frame[60:]))
    assert udp_checksum_ok(out)
    tpl = op._BeaconTemplate(mac(9), mac(3), ip(9), ip(3), 40101)
    b = tpl.make(be, cm)
    assert udp_checksum_ok(b) and (header(b).be_barrier, header(b).commit_barrier, header(b).msg_ts) == (be, cm, be)
    c = tpl.make_commit(cm or 1)
    assert udp_checksum_ok(c) and header(c) == commit(cm or 1)


@given(st.integers(1 << 22, 1 << 46), st.integers(0, 1 << 20), st.integers(0, 1 << 20), st.binary(max_size=64))
def test_a_frame_through_the_switch_carries_both_minima_with_a_valid_checksum(ts, lag, clag, payload):
    sw = one_tor()
    now = ts
    sw.receive("p-h2", host_beacon(2, 40101, ts - lag, commit=ts - lag - clag), now)
    sw.receive("p-h1", op_frame(1, 3, 40101, 40101, DATA, ts, commit=ts, payload=payload), now)
    (got,) = to(sw, "p-h3", now)
    h = header(got)
    assert udp_checksum_ok(got) and got.endswith(payload)
    assert h.be_barrier == ts_from_ns(ts - lag) and h.commit_barrier == ts_from_ns(ts - lag - clag)


# ------------------------------------------------------------------------------ control handlers


class FakeShell:
    def __init__(self) -> None:
        self.switch = Switch(SwitchConfig("tor", (PortConfig("p-h1", role="edge"), PortConfig("p-up")),
                                          {mac(1): "p-h1"}))
        self.ports = {"p-h1": None, "p-up": None}
        self.log = logging.getLogger("test.onepipe")
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1


def test_the_switch_daemon_serves_reports_fence_and_release():
    shell = FakeShell()
    h = opcontrol.switch_handlers(shell)
    assert {"onepipe_reports", "onepipe_fence", "onepipe_release"} <= set(h)
    with pytest.raises(ControlError, match="not enabled"):
        h["onepipe_reports"]({})
    out = h["onepipe_enable"]({"directions": {"p-h1": "down", "p-up": "up"}, "controller": True,
                               "params": {"t_beacon_ns": FT, "ack_timeout_ns": 100 * FT}})
    assert out["controller"] is True and op.commit_aggregator(shell.switch).hold
    assert op.status(shell.switch)["controller"] is True
    sw = shell.switch
    t = sw.now + 10 * FT
    sw.receive("p-h1", host_beacon(1, 40101, t, commit=t - 3), t)
    sw.transmit(t + 10 * FT)
    page = h["onepipe_reports"]({})
    assert page["next"] == 1 and page["dropped"] == 0
    (rep,) = page["reports"]
    assert rep["input"] == H1 and rep["last_commit"] == t - 3
    assert h["onepipe_reports"]({"since": page["next"]})["reports"] == []
    assert h["onepipe_fence"]({"input": H1}) == {"input": H1, "known": True, "last_commit": t - 3}
    assert h["onepipe_release"]({"input": H1}) is True
    assert h["onepipe_release"]({"input": "10.0.0.7:40101"}) is False
    assert not op.commit_aggregator(sw).held(op.Proc("p-h1", ip(1), 40101))
    assert json.loads(json.dumps(page)) == page


@pytest.mark.parametrize("cmd, req, words", [
    ("onepipe_reports", {"since": -1}, "since"),
    ("onepipe_reports", {"since": "3"}, "since"),
    ("onepipe_reports", {"since": True}, "since"),
    ("onepipe_fence", {}, "input"),
    ("onepipe_fence", {"input": 5}, "input"),
    ("onepipe_fence", {"input": "garbage"}, "cannot fence"),
    ("onepipe_fence", {"input": "p-h1"}, "edge port"),
    ("onepipe_release", {"input": ""}, "input"),
    ("onepipe_release", {"input": "1.2.3.4:99999"}, "cannot release"),
    ("onepipe_enable", {"directions": {"p-h1": "down", "p-up": "up"}, "controller": "yes"}, "controller"),
])
def test_bad_requests_get_a_clear_error(cmd, req, words):
    shell = FakeShell()
    h = opcontrol.switch_handlers(shell)
    h["onepipe_enable"]({"directions": {"p-h1": "down", "p-up": "up"}})
    with pytest.raises(ControlError, match=words):
        h[cmd](req)


def test_the_commit_header_helper():
    hdr = commit(12345)
    assert (hdr.msg_ts, hdr.be_barrier, hdr.commit_barrier, hdr.opcode) == (0, 0, 12345, COMMIT)
    assert OnePipeHeader.from_bytes(hdr.to_bytes()) == hdr


def test_the_barrier_to_a_held_process_stays_where_it_was_until_it_is_admitted():
    """Fail-stop (the paper's §5; docs/onepipe-reliable.md "Switch"): a process held (timed out
    under a controller, or fenced) may be alive, declared failed falsely (a stall). Its senders
    recall what it did not ACK only after the hold, and such a message stops holding back their
    commit once recalled: the barrier it gets must not rise from the hold on, in beacons or in the
    packets forwarded to it, until its new incarnation is admitted."""
    a = BarrierAggregator(P, hold=True)
    for i in ("h1", "p"):
        a.add_input(i, down=True)
    a.add_output("p", DOWN, 0, peer_input="p")
    a.add_output("down", DOWN, 0)
    a.heard("h1", 300, 0)
    a.heard("p", 100, 0)
    assert a.barrier_for("p", 1) == 100
    a.heard("h1", 400, TIMEOUT)
    a.on_timer(TIMEOUT + 1)  # p fell silent: held at 100
    assert a.held("p") and a.barrier_for("p", TIMEOUT + 1) == 100
    assert a.release("p", TIMEOUT + 2, ban=True)
    assert a.barrier_for("down", TIMEOUT + 2) == 400  # everyone else moves on ...
    assert a.barrier_for("p", TIMEOUT + 2) == 100 and a.peek("p") == 100  # ... not the failed process
    assert not a.heard("p", 500, TIMEOUT + 3) and a.barrier_for("p", TIMEOUT + 3) == 100
    assert a.admit("p") and a.heard("p", 500, TIMEOUT + 4)  # its new incarnation registered
    assert a.barrier_for("p", TIMEOUT + 4) == 400


def test_a_process_admitted_with_a_time_is_back_in_the_minimum_at_once():
    """``admit(now_ns)`` (the controller registered the process again): it re-joins the minimum at
    once, at the highest barrier given out, so nothing passes that until its commit is heard; heard
    never, it times out and is held there (its new incarnation's T_f)."""
    a = BarrierAggregator(P, hold=True)
    for i in ("h1", "p"):
        a.add_input(i, down=True)
    a.add_output("down", DOWN, 0)
    a.heard("h1", 300, 0)
    a.heard("p", 100, 0)
    a.fence("p")
    assert a.release("p", 1, ban=True) and a.barrier_for("down", 1) == 300
    a.heard("h1", 900, 2)
    assert a.admit("p", 2) and a.is_live("p") and a.r("p") == 300
    assert a.barrier_for("down", 3) == 300  # held at what it had given until p is heard
    assert a.heard("p", 1000, 4) and a.barrier_for("down", 4) == 900
    a.heard("h1", 2000, TIMEOUT + 3)
    assert a.on_timer(TIMEOUT + 5) == ["p"] and a.held("p") and a.r("p") == 1000


def test_a_ban_keeps_a_released_input_out_until_it_is_admitted():
    """The controller releases a failed process with a ban (docs/onepipe-reliable.md "Switch"):
    still alive and never told, its stuck commit must not come back into the minimum; its
    registration admits it again."""
    a = BarrierAggregator(P, hold=True)
    a.add_input("h1", down=True)
    a.add_input("h2", down=True)
    a.add_output("down", DOWN, 0)
    a.heard("h1", 100, 0)
    a.heard("h2", 200, 0)
    assert a.fence("h1") == 100 and a.barrier_for("down", 1) == 100
    assert a.release("h1", 2, ban=True) and a.barrier_for("down", 2) == 200
    assert not a.heard("h1", 150, 3) and a.held("h1")  # the zombie's commit stays out
    assert a.barrier_for("down", 3) == 200
    assert a.admit("h1") and not a.held("h1")
    assert a.heard("h1", 300, 4) and a.barrier_for("down", 4) == 200  # back, under the freeze
    assert not a.admit("nobody")
