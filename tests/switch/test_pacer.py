"""Line-rate pacer and propagation delay.

Over a long busy period the bytes released by time t never exceed rate*t plus one frame,
and a backlogged port is work-conserving (released ~= rate*t, within one frame), whatever
the shell's wake-up cadence — the pacer keeps exact fractional time (pacer.py).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.switch import DEFAULT_OVERHEAD_BYTES
from netstack.switch.pacer import Pacer

from . import GBPS, MS, make_switch, traced, udp_frame


def wire_bytes(frame: bytes) -> int:
    return max(len(frame), 60) + DEFAULT_OVERHEAD_BYTES


@settings(max_examples=40)
@given(
    rate=st.sampled_from([10_000_000, 100_000_000, 999_999_937, GBPS, 10 * GBPS]),
    sizes=st.lists(st.integers(42, 1514), min_size=50, max_size=400),
    step=st.integers(1_000, 2 * MS),
)
def test_backlogged_port_releases_rate_times_t_within_one_frame(rate, sizes, step):
    sw = make_switch(2, p1={"rate_bps": rate})
    for size in sizes:
        sw.receive("p0", udp_frame(size=size), 0)  # an instant backlog at t = 0
    total_wire = sum(wire_bytes(udp_frame(size=s)) for s in sizes)
    busy_ns = total_wire * 8 * 10**9 / rate
    max_frame = 1514 + DEFAULT_OVERHEAD_BYTES
    step = max(step, int(busy_ns) // 300)  # keep the number of wake-ups bounded
    released = 0
    t = 0
    while released < total_wire:
        t += step
        out = sw.transmit(t)
        released += sum(wire_bytes(f) for _, f in out)
        ideal = rate * min(t, busy_ns) / 8e9
        assert released <= ideal + max_frame, "faster than line rate"
        if t < busy_ns:
            assert released >= ideal - max_frame, "backlogged port idled"
        assert t < busy_ns + 2 * step + 10**6
    # the last bit leaves exactly when the busy period ends: no drift over the whole burst
    assert sw.ports[1].pacer.busy_until == -(-total_wire * 8 * 10**9 // rate)


def test_exact_frame_boundaries_and_fractional_ns():
    # 84 B of line time at 10 Gb/s is 67.2 ns: rounding each frame would drift
    p = Pacer(10 * GBPS)
    ends = [p.start(p.busy_until, 84) for _ in range(1000)]
    assert ends[0] == 68 and ends[4] == 336 and ends[-1] == 67_200
    assert p.start(100_000, 84) == 100_068  # after idle, a new busy period starts on its own ns


def test_propagation_delay_shifts_releases_exactly():
    def releases(delay):
        sw = make_switch(2, p1={"rate_bps": GBPS, "delay_ns": delay})
        tr = traced(sw)
        for i in range(20):
            sw.receive("p0", udp_frame(size=200 + i), i * 1000)
        sw.transmit(10 * MS)
        return [d.release for d in tr.on("p1")], [d.end for d in tr.on("p1")]

    base, ends = releases(0)
    shifted, ends2 = releases(250_000)
    assert ends == ends2 == base
    assert shifted == [r + 250_000 for r in base]

    sw = make_switch(2, p1={"rate_bps": GBPS, "delay_ns": 250_000})
    sw.receive("p0", udp_frame(size=100), 0)
    line = (100 + DEFAULT_OVERHEAD_BYTES) * 8  # ns at 1 Gb/s
    assert sw.transmit(line + 249_999) == []
    assert sw.next_deadline() == line + 250_000
    assert len(sw.transmit(line + 250_000)) == 1


def test_next_deadline_is_when_frames_are_due():
    """A shell that sleeps until next_deadline() gets every frame on time and never spins."""
    sw = make_switch(3, p1={"rate_bps": GBPS, "delay_ns": 5000}, p2={"rate_bps": 3 * GBPS})
    tr = traced(sw)
    arrivals = [(i * 3000, "p0", udp_frame(src=1, dst=2 + i % 3, size=100 + 10 * i)) for i in range(30)]
    got = []
    t = 0
    wakeups = 0
    while arrivals or sw.next_deadline() is not None:
        nd = sw.next_deadline()
        if arrivals and (nd is None or arrivals[0][0] <= nd):
            t, port, frame = arrivals.pop(0)
            sw.receive(port, frame, t)
            continue
        assert nd >= t
        t = nd
        wakeups += 1
        got += [(t, p, f) for p, f in sw.transmit(t)]
    released = {(d.port, d.frame): d.release for d in tr.departures}
    assert len(got) == len(tr.departures) == 60  # unknown unicast floods to p1 and p2
    for t, port, frame in got:
        assert released[(port, frame)] == t  # released exactly at its time, never late
    assert wakeups <= 2 * len(got)


def test_unpaced_port_releases_immediately_in_order():
    sw = make_switch(2)
    frames = [udp_frame(size=60 + i) for i in range(10)]
    for f in frames:
        sw.receive("p0", f, 5)
    assert [f for _, f in sw.transmit(5)] == frames


def test_rate_change_applies_to_frames_starting_later():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    tr = traced(sw)
    for _ in range(4):
        sw.receive("p0", udp_frame(size=101), 0)  # 125 B of line time = 1000 ns at 1 Gb/s
    sw.set_rate("p1", 2 * GBPS, now_ns=1500)  # frame 1 (1000..2000) keeps its end
    sw.transmit(10_000)
    assert [(d.start, d.end) for d in tr.on("p1")] == [(0, 1000), (1000, 2000), (2000, 2500), (2500, 3000)]


def test_transmit_by_port_equals_transmit_grouped():
    """The shell's grouped form releases exactly what transmit() would, per port, in order."""
    from netstack.switch import Switch
    from netstack.switch.config import PortConfig, SwitchConfig

    def build():
        return Switch(SwitchConfig("s", (PortConfig("a", rate_bps=10_000_000), PortConfig("b", rate_bps=10_000_000),
                                         PortConfig("c", rate_bps=5_000_000))))

    frames = [bytes([0xFF] * 6) + bytes([2, 0, 0, 0, 0, i % 7]) + b"\x08\x00" + bytes(60 + i % 50) for i in range(200)]
    s1, s2 = build(), build()
    for i, f in enumerate(frames):
        s1.receive("abc"[i % 3], f, i * 10_000)
        s2.receive("abc"[i % 3], f, i * 10_000)
    flat = s1.transmit(10**12)
    grouped = dict(s2.transmit_by_port(10**12))
    for port in "abc":
        assert [f for n, f in flat if n == port] == grouped.get(port, [])


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 400 * GBPS), st.integers(0, 10**18), st.integers(0, 5000),
       st.lists(st.integers(0, 9100), min_size=1, max_size=40), st.integers(0, 40), st.integers(0, 10**7),
       st.integers(1, 40))
def test_plan_places_frames_exactly_where_start_would(rate, t0, gap, sizes, overhead, delay, take):
    """``Pacer.plan`` (the fast path's whole-list arithmetic) gives every frame the end time that
    frame-by-frame ``start`` calls give, and ``advance`` leaves the pacer as those calls do."""
    ref, fast = Pacer(rate), Pacer(rate)
    for p in (ref, fast):
        p.start(t0, 100)  # a busy period in progress, with a fractional end
    begin = ref.busy_until + gap  # back to back when gap == 0, a fresh busy period otherwise
    ends = []
    d = begin
    for n in sizes:
        d = ref.start(d, max(n, 60) + overhead)
        ends.append(d)
    assert fast.plan(begin, sizes, overhead, delay) == [e + delay for e in ends]
    k = min(take, len(sizes))
    fast.advance(k, ends[k - 1])
    again = Pacer(rate)
    again.start(t0, 100)
    d = begin
    for n in sizes[:k]:
        d = again.start(d, max(n, 60) + overhead)
    assert (fast.busy_until, fast._x) == (again.busy_until, again._x)
