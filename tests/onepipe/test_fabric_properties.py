"""1Pipe end to end in memory: N endpoints under 1-3 ToRs (and a spine), the real engines, any
interleaving of sends, beacons, loss, duplication and per-link delay (FIFO per link), clock
offsets and drift. Design topic §12 (docs/papers.md) items 1-5 must hold:

1. per link the barrier never decreases (``Fabric.link`` asserts it on every switch link, and
   counts data below a barrier the link already carried: none once every process has joined);
2. any two receivers deliver their common scatterings in the same order, each receiver in
   non-decreasing (ts, sender);
3. a process delivers ts T only when its own clock is past T;
4. every message of a scattering carries one ts;
5. nothing is delivered at or above the barrier the receiver holds.

And best effort's bargain: nothing is delivered twice, and once the run quiesces every message
was delivered or its sender was told it failed (1Pipe §3: loss is reported, never repaired).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.onepipe.clock import HostClock
from netstack.onepipe.params import OnePipeParams

from .fabric import Fabric, assert_total_order

T_BEACON = 3_000
PARAMS = OnePipeParams(t_beacon_ns=T_BEACON, ack_timeout_ns=200 * T_BEACON, mtu_payload=64, rwnd_packets=64,
                       init_cwnd=8)

SENDS = st.lists(st.tuples(st.integers(0, 400_000), st.integers(1, 8), st.lists(st.integers(1, 8), min_size=1,
                                                                                  max_size=4, unique=True)),
                 min_size=1, max_size=60)
CLOCKS = st.lists(st.tuples(st.integers(-5_000, 5_000), st.floats(-50, 50)), min_size=8, max_size=8)


def _order_ok(fab: Fabric) -> None:
    per: dict[int, list] = {}
    for d in fab.deliveries:
        per.setdefault(d.receiver, []).append(d)
        assert d.barrier is not None and d.ts < d.barrier, "delivered at or above the barrier"
        assert d.ts < d.host_now, "delivered before the receiver's clock passed it"
    assert_total_order(per)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 8), tors=st.integers(1, 3), sends=SENDS, clocks=CLOCKS,
       loss=st.sampled_from([0.0, 0.0, 0.02, 0.1]), dup=st.sampled_from([0.0, 0.05]), jitter=st.integers(0, 8_000),
       seed=st.integers(0, 2**32))
def test_every_receiver_delivers_one_total_order(n, tors, sends, clocks, loss, dup, jitter, seed):
    rng = random.Random(seed)

    def fate() -> tuple[bool, bool, int]:
        return rng.random() < loss, rng.random() < dup, rng.randrange(jitter + 1)

    fab = Fabric(PARAMS, n, tors=min(tors, n), fate=fate,
                 clocks={a: HostClock(o, d, Fabric.now) for a, (o, d) in enumerate(clocks, start=1) if a <= n})
    t0 = fab.now
    for at, a, dsts in sends:
        if a <= n:
            fab.at(t0 + at, fab.send, a, [d for d in dsts if d <= n] or [a % n + 1])
    fab.run(t0 + 400_000)
    # quiesce: no new sends, a clean network (``fate`` reads these), long enough for the ACK timeout
    loss, dup, jitter = 0.0, 0.0, 0
    fab.run(fab.now + PARAMS.ack_timeout_ns * 3)
    _order_ok(fab)
    delivered = {(d.src, d.seq, d.receiver) for d in fab.deliveries}
    failed = {(s, seq, dst) for s, _, dst, seq in fab.failures}
    for (a, seq), (_, dsts) in fab.sent.items():
        for d in dsts:
            assert (a, seq, d) in delivered or (a, seq, d) in failed, f"message {a}.{seq}->{d} vanished"
    for ep in fab.eps.values():
        c = ep.counters()
        assert c["queued"] == 0 and c["inflight_packets"] == 0 and c["buffered_packets"] == 0, c


def test_a_clean_fabric_delivers_everything_and_fails_nothing():
    """Once every process has joined (its beacons are in every switch's min), a fabric that loses
    nothing loses no message, even with clocks 7 us apart and drifting (more than two beacon
    intervals): a process that lags holds the barrier back, it does not arrive late."""
    fab = Fabric(PARAMS, 6, tors=2, clocks={2: HostClock(3_000, 20.0, Fabric.now),
                                            5: HostClock(-4_000, -10.0, Fabric.now)})
    t0 = fab.now + 30 * T_BEACON  # joined
    rng = random.Random(7)
    for i in range(300):
        a = rng.randrange(1, 7)
        fab.at(t0 + i * 1_000, fab.send, a, rng.sample([d for d in range(1, 7) if d != a], 3))
    fab.run(t0 + 300_000 + PARAMS.ack_timeout_ns * 2)
    _order_ok(fab)
    assert len(fab.deliveries) == 900 and fab.failures == []
    assert fab.late_on_link == 0 and all(ep.c.late_dropped == 0 for ep in fab.eps.values())


def test_a_whole_rack_going_silent_stalls_the_others_only_until_it_times_out():
    """Every process under one ToR dies: that ToR times them out and stops beaconing the spine
    (it has nothing left to vouch for), so the spine times the rack out too and the other racks
    deliver again (design topic §6). Repeating the rack's last barrier would stall them for ever."""
    fab = Fabric(PARAMS, 6, tors=3)  # tor0: 3, 6; tor1: 1, 4; tor2: 2, 5
    t0 = fab.now + 30 * T_BEACON
    kill_at = t0 + 50_000
    rng = random.Random(3)
    alive = [1, 2, 4, 5]
    for i in range(400):
        a = rng.choice(alive)
        fab.at(t0 + i * 500, fab.send, a, rng.sample([d for d in alive if d != a], 2))
    fab.at(kill_at, fab.kill, 3)
    fab.at(kill_at, fab.kill, 6)
    fab.run(t0 + 200_000 + PARAMS.ack_timeout_ns * 2)
    _order_ok(fab)
    after = kill_at + 2 * PARAMS.input_timeout_ns  # the ToR's timeout, then the spine's
    late = [d for d in fab.deliveries if fab.sent[(d.src, d.seq)][0] > after]
    sent_late = sum(len(dsts) for (at, dsts) in fab.sent.values() if at > after)
    assert sent_late > 200 and len(late) == sent_late and not fab.failures, (len(late), sent_late)
