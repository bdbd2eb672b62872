"""The switch-CPU and host-delegate variants of 1Pipe (*1Pipe: Scalable Total Order Communication in
Data Center Networks*, §6.2.2 and §6.2.3; netstack/onepipe/variant.py): the switch forwards data
untouched and keeps its registers ``variant_delay_ns`` away, beacons carry every barrier, hosts
beacon every ``T_beacon`` and take barriers from beacons only.

- the endpoint takes no barrier from a DATA, ACK or NAK (best effort and reliable) and beacons at
  every tick;
- the switch forwards data byte for byte, sets ``R`` only ``delay`` after a beacon came, beacons
  every output every ``T_beacon`` busy or idle, and still times silent inputs out;
- a hypothesis property on in-process switches: whatever the order beacons and data arrive in and
  whatever the delay, every link's barrier never decreases and no data packet reaches a process
  with a timestamp below a barrier it already got (the barrier property, spec §4);
- the ``onepipe`` scenario in virtual time: both variants, best effort and reliable, deliver every
  message in one total order, each below the barrier (best effort) or at or below the commit
  barrier (reliable) its receiver had from beacons, the host variant later than the chip at the
  same load and seed (and the switch CPU later still: its delay is longer), and the chip runs as
  before.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers.onepipe import OnePipeHeader, OnePipeOpcode, beacon, ts_from_ns
from netstack.engine import SendTo
from netstack.errors import ConfigError
from netstack.onepipe import feature as op
from netstack.onepipe import topology as optopo
from netstack.onepipe.actions import Deliver
from netstack.onepipe.endpoint import UPLINK, Endpoint
from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.reliable import ReliableEndpoint
from netstack.onepipe.scenarios import fabric_topology
from netstack.onepipe.simproc import OnePipeProcess
from netstack.onepipe.variant import PAPER_CPU_DELAY_NS, delay_ns
from netstack.sim.scenario import RunSpec, ScenarioError, canonical_json, resolve_topology, run

from .test_feature import BCAST, DATA, PARAMS, TOPO, Net, T, header, host_beacon, ip, mac, op_frame

ACK, NAK, BEACON, COMMIT = OnePipeOpcode.ACK, OnePipeOpcode.NAK, OnePipeOpcode.BEACON, OnePipeOpcode.COMMIT
US = 1_000
EP = OnePipeParams.paper()  # T_beacon 3 us
ME = ("10.0.1.1", 40101)
PEER = ("10.0.2.1", 40101)
TOR = ("10.0.1.254", 40100)
T0 = 1_000_000_000


def _hdr(op: OnePipeOpcode, ts: int, be: int, commit: int = 0, psn: int = 0, flags: int = 0) -> bytes:
    return OnePipeHeader(ts_from_ns(ts), ts_from_ns(be), ts_from_ns(commit) if commit else 0, psn, op,
                         flags).to_bytes()


def _data(ts: int, be: int, payload: bytes = b"m") -> bytes:
    return _hdr(DATA, ts, be, flags=0b101) + payload  # SOM | EOM: a whole message in one packet


# ------------------------------------------------------------------------------ endpoints


def test_a_best_effort_receiver_takes_barriers_from_beacons_only():
    chip = Endpoint(EP, ME, T0)
    host = Endpoint(EP, ME, T0, beacon_barriers=True)
    assert host.beacon_barriers and not chip.beacon_barriers
    now = T0 + 10 * US
    for ep in (chip, host):
        ep.receive(beacon(ts_from_ns(T0), 0).to_bytes(), TOR, now)
        # a DATA whose barrier field its sender filled in: not aggregated by any switch in a variant
        ep.receive(_data(T0 + 1 * US, T0 + 5 * US), PEER, now)
        ep.receive(_hdr(ACK, T0 + 6 * US, T0 + 6 * US, psn=0), PEER, now)
        ep.receive(_hdr(NAK, T0 + 7 * US, T0 + 7 * US, psn=0), PEER, now)
    assert chip.barrier == T0 + 7 * US and [type(a) for a in chip.actions.take_all()].count(Deliver) == 1
    assert host.barrier == T0 and not [a for a in host.actions.take_all() if type(a) is Deliver]
    host.receive(beacon(ts_from_ns(T0 + 2 * US), 0).to_bytes(), TOR, now)  # the ToR's beacon passes it
    assert host.barrier == T0 + 2 * US
    assert [a.ts for a in host.actions.take_all() if type(a) is Deliver] == [T0 + 1 * US]


def test_the_setting_can_be_turned_on_after_construction():
    ep = Endpoint(EP, ME, T0)
    ep.beacon_barriers = True
    ep.receive(beacon(ts_from_ns(T0), 0).to_bytes(), TOR, T0)
    ep.receive(_data(T0 + 1, T0 + 9 * US), PEER, T0 + 10 * US)
    assert ep.barrier == T0
    ep.beacon_barriers = False
    ep.receive(_data(T0 + 2, T0 + 9 * US, b"n"), PEER, T0 + 10 * US)
    assert ep.barrier == T0 + 9 * US


def test_a_reliable_receiver_takes_its_commit_barrier_from_beacons_and_commits_only():
    ep = ReliableEndpoint(EP, ME, T0, controller=("10.0.0.200", 40199))
    ep.beacon_barriers = True  # (as the simulated shell sets it on the engine its subclass makes)
    now = T0 + 10 * US
    ep.receive(_hdr(BEACON, T0, T0, commit=T0 - 1), TOR, now)
    assert (ep.barrier, ep.commit_barrier) == (T0, T0 - 1)
    ep.receive(_hdr(ACK, T0 + 5 * US, T0 + 5 * US, commit=T0 + 4 * US), PEER, now)
    ep.receive(_hdr(NAK, T0 + 5 * US, T0 + 5 * US, commit=T0 + 4 * US), PEER, now)
    assert (ep.barrier, ep.commit_barrier) == (T0, T0 - 1)
    ep.receive(_hdr(COMMIT, 0, 0, commit=T0 + 3 * US), TOR, now)
    assert ep.commit_barrier == T0 + 3 * US


def _beacons(ep: Endpoint) -> int:
    return sum(1 for a in ep.actions.take_all() if type(a) is SendTo and a.dst == UPLINK)


def test_a_process_beacons_at_every_tick_whatever_it_sent():
    """On the chip a packet that took this tick's barrier to the ToR stands in for the beacon; in
    a variant the switch reads no data, so the beacon always goes."""
    t = EP.t_beacon_ns
    ahead = T0 + 100 * US  # a barrier ahead of our clock: the data stamped now advertise it
    counts = {}
    for on in (False, True):
        ep = Endpoint(EP, ME, T0, beacon_barriers=on)
        ep.receive(beacon(ts_from_ns(ahead), 0).to_bytes(), TOR, T0)
        ep.actions.take_all()
        sent = 0
        for k in range(1, 6):
            now = (T0 // t + k) * t - 1
            ep.send([(PEER, b"x")], now)
            ep.on_timer(now + 1)  # the tick
            sent += _beacons(ep)
        counts[on] = sent
    assert counts == {False: 0, True: 5}


# ------------------------------------------------------------------------------ switches


def _variant_net(variant: str = "host", delay: int = T // 4, params: OnePipeParams = PARAMS) -> Net:
    n = Net(enable=False)
    for name, dirs in optopo.all_directions(TOPO).items():
        op.enable(n.sw[name], dirs, params, 0, variant=variant, variant_delay_ns=delay)
    return n


def test_enable_refuses_an_unknown_variant_or_a_negative_delay():
    n = Net(enable=False)
    dirs = optopo.all_directions(TOPO)["tor1"]
    with pytest.raises(ConfigError, match="variant"):
        op.enable(n.sw["tor1"], dirs, PARAMS, 0, variant="asic")
    with pytest.raises(ConfigError, match="variant_delay_ns"):
        op.enable(n.sw["tor1"], dirs, PARAMS, 0, variant="cpu", variant_delay_ns=-1)
    op.enable(n.sw["tor1"], dirs, PARAMS, 0)
    assert "variant" not in op.status(n.sw["tor1"])  # the chip's status as it was


def test_data_crosses_every_switch_untouched():
    n = _variant_net()
    t = 10 * T
    n.send("tor1", "p-h2", host_beacon(2, 40101, t + 3000), t)
    n.run(t + T)
    data = op_frame(1, 3, 40101, 40101, DATA, t + 4000, barrier=t + 4000, payload=b"hello")
    n.send("tor1", "p-h1", data, t + T)
    assert n.take("h3") == [data]  # byte for byte: no barrier written, no checksum moved
    st_ = op.status(n.sw["tor1"])
    assert st_["ports"]["p-h1"]["counters"]["passed"] == 1 and st_["ports"]["p-h1"]["counters"]["stamped"] == 0
    assert st_["variant"]["name"] == "host" and st_["variant"]["data_forwarded"] == 1
    agg = op.aggregator(n.sw["tor1"])
    assert agg is not None and agg.r(op.Proc("p-h1", ip(1), 40101)) is None  # data set no register


def test_a_beacon_sets_its_register_the_delay_after_it_came():
    d = T // 4
    n = _variant_net(delay=d)
    t = 10 * T
    n.send("tor1", "p-h1", host_beacon(1, 40101, t + 100), t)
    agg = op.aggregator(n.sw["tor1"])
    assert agg is not None
    key = op.Proc("p-h1", ip(1), 40101)
    n.run(t + d - 1)
    assert agg.r(key) is None and op.status(n.sw["tor1"])["variant"]["in_flight_in"] == 1
    n.run(t + d)
    assert agg.r(key) == t + 100 and op.status(n.sw["tor1"])["variant"]["beacons_in"] == 1
    assert n.counters("tor1", "p-h1")["beacons_rx"] == 1


def test_every_output_gets_a_beacon_every_interval_busy_or_idle():
    """Prompt beacons off: the periodic thread alone (§6.2.2: "regardless of whether the link is
    idle or busy"); data flows to h2 more often than T_beacon, which on the chip stops them."""
    d = T // 8
    n = _variant_net(delay=d, params=PARAMS.with_(prompt_beacons=False))
    t = 10 * T
    n.send("tor1", "p-h2", host_beacon(2, 40101, t), t)
    for k in range(1, 13):
        now = t + k * T // 2
        n.send("tor1", "p-h1", op_frame(1, 2, 40101, 40101, DATA, now), now)
        n.send("tor1", "p-h2", host_beacon(2, 40101, now), now)
    got = n.take("h2")
    beacons = [header(f).be_barrier for f in got if header(f).opcode is BEACON]
    assert sum(1 for f in got if header(f).opcode is DATA) == 12
    assert len(beacons) >= 4 and beacons == sorted(beacons)
    out = op.status(n.sw["tor1"])["ports"]["p-h2"]["outputs"]["10.0.0.2:40101"]
    assert out["barriers"] == 0 and out["beacons"] >= 4  # no packet carried a barrier: beacons did


def test_beacons_keep_inputs_live_and_silence_times_them_out():
    d = T // 4
    n = _variant_net(delay=d)
    agg = op.aggregator(n.sw["tor1"])
    assert agg is not None
    live, silent = op.Proc("p-h1", ip(1), 40101), op.Proc("p-h2", ip(2), 40101)
    t = 10 * T
    n.send("tor1", "p-h2", host_beacon(2, 40101, t), t)
    for k in range(0, 25):
        now = t + k * T
        n.send("tor1", "p-h1", host_beacon(1, 40101, now), now)
    assert agg.is_live(live) and not agg.is_live(silent)  # 10 T_beacon of silence (and the delay)
    assert op.reports(n.sw["tor1"])[0]["input"] == "10.0.0.2:40101"


def _deliveries_respect_barriers(frames: list[bytes]) -> int:
    """Every DATA a process gets has ``msg_ts`` at or above the last beacon barrier it got
    (the barrier property); the number of DATA frames."""
    last = None
    data = 0
    for f in frames:
        h = header(f)
        if h.opcode is BEACON:
            assert last is None or h.be_barrier >= last, "a barrier went back on the link"
            last = h.be_barrier
        elif h.opcode is DATA:
            data += 1
            assert last is None or h.msg_ts >= last, f"DATA at {h.msg_ts} behind barrier {last}"
    return data


#: a pace: often nothing between two events, often a little, sometimes up to T_beacon / 8
PACE = st.one_of(st.just(0), st.integers(0, 2_000), st.integers(0, T // 8))
#: (time since the last event, process, DATA or BEACON, how far its timestamps move first)
EVENTS = st.lists(st.tuples(PACE, st.sampled_from((1, 2, 3)), st.booleans(), PACE), min_size=1, max_size=60)
PROCS = {1: ("tor1", "p-h1"), 2: ("tor1", "p-h2"), 3: ("tor2", "p-h3")}


@settings(max_examples=100, deadline=None)
@given(events=EVENTS, delay=st.integers(0, T // 2), variant=st.sampled_from(("cpu", "host")),
       prompt=st.booleans())
def test_barriers_never_decrease_and_data_never_falls_behind_one(events, delay, variant, prompt):
    """Beacons and data of three processes in any interleaving, at any pace, with any delay to the
    registers: on every link the barriers a switch sends never decrease, and every DATA reaches
    its process at or above every barrier that process got before it (spec §4, §12 item 1).

    The processes join first, at one timestamp, and each beacons at least every T_beacon (as
    endpoints do), so that no input joins or re-joins below a barrier an output already gave: that
    freeze lets a joining input's data arrive late, by design (netstack/onepipe/barrier.py), and
    is not what this checks. Host clocks are free to lag the true time (``floor`` moves only by
    each event's step), so an overstated barrier would be caught."""
    n = _variant_net(variant, delay, PARAMS.with_(prompt_beacons=prompt))
    t = 10 * T
    floor = {1: t, 2: t, 3: t}
    for p, (sw, port) in PROCS.items():
        n.send(sw, port, host_beacon(p, 40101, t), t)
    _step(n, t, t + 3 * T)  # (every output has given a barrier: ticks at most T + 2 delay apart)
    t += 3 * T
    tick = t
    sent = 0
    for dt, p, is_data, step in events:
        t += dt
        while tick <= t:  # every process's beacon tick
            for q, (sw, port) in PROCS.items():
                n.send(sw, port, host_beacon(q, 40101, floor[q]), tick)
            tick += T
        sw, port = PROCS[p]
        floor[p] += step  # a host's ts never go back, and its beacons promise them
        if is_data:
            dst = 3 if p != 3 else 1 + (step % 2)
            n.send(sw, port, op_frame(p, dst, 40101, 40101, DATA, floor[p]), t)
            sent += 1
        else:
            n.send(sw, port, host_beacon(p, 40101, floor[p]), t)
    _step(n, t, t + 3 * T + 2 * delay)
    got = sum(_deliveries_respect_barriers(n.take(h)) for h in ("h1", "h2", "h3"))
    assert got == sent  # the data plane drops nothing
    for (sw, port), frames in _by_link(n).items():
        barriers = [header(f).be_barrier for f in frames if header(f).opcode is BEACON]
        assert barriers == sorted(barriers), (sw, port)


def _step(n: Net, start: int, stop: int) -> None:
    """Run the switches' timers from ``start`` to ``stop`` in steps of T_beacon / 16 (``Net.run``
    fires what is due once, at the time it is given)."""
    for now in range(start, stop + 1, T // 16):
        n.run(now)


def _by_link(n: Net) -> dict[tuple[str, str], list[bytes]]:
    out: dict[tuple[str, str], list[bytes]] = {}
    for sw, port, f in n.wire:
        out.setdefault((sw, port), []).append(f)
    return out


# ------------------------------------------------------------------------------ the scenario

SMALL = fabric_topology(tors=2, hosts_per_tor=2)


def _run(seed: int = 1, **params) -> dict:
    base = {"procs": 6, "rate": 100_000.0}
    return run(RunSpec("onepipe", SMALL, seed, 60_000, {**base, **params}))


@pytest.mark.parametrize("mode", ["onepipe", "reliable"])
def test_both_variants_deliver_everything_in_one_order_later_than_the_chip(mode: str):
    res = {v: _run(mode=mode, variant=v)["result"] for v in ("chip", "host", "cpu")}
    for v, r in res.items():
        assert r["sent"] > 50 and r["delivered"] == r["sent"], v
        assert r["send_failed"] == r["send_unknown"] == r["late_dropped"] == r["unaccounted"] == 0, v
        assert r["order"] == {"ok": True, "violations": 0, "first": None}, v
    # the same messages, the same paths (give or take the beacons queued beside them): only the
    # barriers come later
    assert res["host"]["unordered_ns"]["mean"] == pytest.approx(res["chip"]["unordered_ns"]["mean"], rel=0.05)
    assert res["host"]["latency_ns"]["mean"] > res["chip"]["latency_ns"]["mean"]
    assert res["cpu"]["latency_ns"]["mean"] > res["host"]["latency_ns"]["mean"]  # 1.25 us a way against 250 ns
    assert "variant" not in res["chip"]
    assert res["host"]["variant"] == {"name": "host", "delay_ns": {"spine1": 250, "tor1": 250, "tor2": 250}}
    assert res["cpu"]["variant"]["delay_ns"]["tor1"] == PAPER_CPU_DELAY_NS
    # the switches forwarded the data untouched, and only beacons took barriers across
    assert res["host"]["switches"]["stamped"] == 0 and res["chip"]["switches"]["stamped"] > 0


@pytest.mark.parametrize("mode", ["onepipe", "reliable"])
def test_every_delivery_is_under_the_barrier_its_beacons_brought(monkeypatch, mode: str):
    """Spec §12 items 3 and 5, in the host variant: best effort delivers only below the barrier
    (and never below one it passed: non-decreasing ts, no late drop), reliable only at or below
    the commit barrier, both only once the receiver's clock has passed the ts."""
    checked = []
    deliver = OnePipeProcess._deliver

    def check(self: OnePipeProcess, act: Deliver) -> None:
        ep = self.ep
        assert ep.beacon_barriers
        if mode == "reliable":
            assert ep.commit_barrier is not None and act.ts <= ep.commit_barrier
        else:
            assert ep.barrier is not None and act.ts < ep.barrier
        assert act.ts < self.clock.now(self.loop.now)
        checked.append(act.ts)
        deliver(self, act)

    monkeypatch.setattr(OnePipeProcess, "_deliver", check)
    res = _run(mode=mode, variant="host")["result"]
    assert len(checked) == res["delivered"] == res["sent"] and res["late_dropped"] == 0 and res["order"]["ok"]


def test_a_longer_delay_costs_latency_and_never_order():
    short, long_ = (_run(variant="host", variant_delay_ns=d)["result"] for d in (100, 3_000))
    assert short["delivered"] == short["sent"] == long_["delivered"] and long_["order"]["ok"]
    assert long_["barrier_wait_ns"]["mean"] > short["barrier_wait_ns"]["mean"] + 3 * 2 * 2_000  # 3 hops
    assert long_["variant"]["delay_ns"]["tor1"] == 3_000


def test_the_chip_variant_named_is_the_run_it_always_was():
    assert canonical_json(_run(variant="chip")) == canonical_json(_run())


def test_bad_variants_are_scenario_errors():
    with pytest.raises(ScenarioError, match="variant"):
        _run(variant="asic")
    with pytest.raises(ScenarioError, match="variant"):
        _run(mode="sequencer", variant="host")
    with pytest.raises(ScenarioError, match="variant_delay_ns"):
        _run(variant="cpu", variant_delay_ns=-5)


def test_default_delays():
    topo = resolve_topology(SMALL)
    assert delay_ns("chip", topo, "tor1") == 0
    assert delay_ns("host", topo, "tor1") == 250  # the host link's 250 ns
    assert delay_ns("host", topo, "spine1", nic_ns=400) == 250 + 400  # a spine: the fabric's host links
    assert delay_ns("cpu", topo, "tor1", scale=1000.0) == 1000 * PAPER_CPU_DELAY_NS
    with pytest.raises(ValueError):
        delay_ns("asic", topo, "tor1")


def test_beacon_frames_toward_processes_are_unicast_and_switches_broadcast():
    """The beacons the representative sends back are the switch's own frames (template and all)."""
    n = _variant_net()
    t = 10 * T
    n.send("tor1", "p-h1", host_beacon(1, 40101, t + 100), t)
    _step(n, t, t + 3 * T)
    f = n.take("h1")[-1]
    assert f[:6] == mac(1) and header(f).opcode is BEACON and header(f).be_barrier == ts_from_ns(t + 100)
    up = [f for sw, p, f in n.wire if (sw, p) == ("tor1", "p-spine1")]
    assert up and all(f[:6] == BCAST for f in up)
