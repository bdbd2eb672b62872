"""Strict-priority egress, decided as if the pacer ran continuously (1 ms timers: docs/architecture.md
"The live runtime").

The property tests drive one paced egress port with random arrivals of random classes,
random PFC pause/resume frames from its peer and a random ``transmit`` cadence, record
every departure through ``departure_hook`` and check, against an independent model:

- at every departure, no frame of a higher class had arrived, was still waiting and was
  not paused (strict priority);
- frames of one class leave in arrival order;
- the link is never idle while an eligible frame waits (work conservation);
- the schedule does not depend on when the shell happens to call ``transmit``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.pfc import build_pfc_frame
from netstack.switch.pfc import pause_ns

from . import GBPS, class_tos, make_switch, traced, udp_frame

RATE = GBPS

arrival = st.tuples(st.just("a"), st.integers(1, 20_000), st.integers(0, 7), st.integers(60, 1514))
pfc = st.tuples(st.just("p"), st.integers(1, 20_000), st.integers(0, 7), st.sampled_from([0, 0, 1, 20, 100, 400]))
tick = st.tuples(st.just("t"), st.integers(1, 20_000), st.just(0), st.just(0))
scenarios = st.lists(st.one_of(arrival, arrival, arrival, pfc, tick), min_size=1, max_size=60)


def tagged(fid: int, cls: int, size: int) -> bytes:
    frame = bytearray(udp_frame(src=1, dst=2, size=size, tos=class_tos(cls)))
    frame[42:46] = fid.to_bytes(4, "big")
    return bytes(frame)


def run(events, with_ticks: bool):
    sw = make_switch(2, p1={"rate_bps": RATE}, static_fdb={"02:00:00:00:00:02": "p1"})
    tr = traced(sw)
    t = 0
    arrivals = {}  # fid -> (time, cls)
    pauses = []  # (time, cls, duration)
    for fid, (kind, gap, cls, x) in enumerate(events):
        t += gap
        if kind == "a":
            sw.receive("p0", tagged(fid, cls, x), t)
            arrivals[fid] = (t, cls)
        elif kind == "p":
            quanta = [0] * 8
            quanta[cls] = x
            sw.receive("p1", build_pfc_frame(bytes(6), 1 << cls, quanta), t)
            pauses.append((t, cls, pause_ns(x, RATE)))
        elif with_ticks:
            sw.transmit(t)
    sw.transmit(t + 10**9)
    deps = [(d.start, d.end, int.from_bytes(d.frame[42:46], "big"), d.cls) for d in tr.on("p1")]
    return deps, arrivals, pauses, sw


def paused_at(pauses, cls: int, x: int) -> bool:
    """Class state at x as the switch sees it when deciding at x (events at x apply after)."""
    state = False
    for t, c, dur in pauses:
        if c == cls and t < x:
            state = x < t + dur
    return state


@settings(max_examples=150)
@given(scenarios)
def test_strict_priority_fifo_and_work_conservation(events):
    deps, arrivals, pauses, sw = run(events, with_ticks=True)
    assert sorted(fid for _, _, fid, _ in deps) == sorted(arrivals)  # everything left, once
    start_of = {fid: s for s, _, fid, _ in deps}
    for s, _, fid, cls in deps:
        a_t, a_cls = arrivals[fid]
        assert cls == a_cls and s >= a_t
        for g, (g_t, g_cls) in arrivals.items():
            if g_cls > cls and g_t < s < start_of[g]:
                assert paused_at(pauses, g_cls, s), f"class {g_cls} waited unpaused while class {cls} left at {s}"
            if g_cls == cls and g_t < a_t:
                assert start_of[g] < s, "FIFO within a class"
    # work conservation: in every idle gap of the link nothing eligible was waiting
    prev_end = 0
    change_points = sorted({t for t, _ in arrivals.values()} | {t for t, _, _ in pauses}
                           | {t + d for t, _, d in pauses})
    for s, end, _, _ in deps:
        if s > prev_end:
            for x in [prev_end, *[p for p in change_points if prev_end < p < s]]:
                for g, (g_t, g_cls) in arrivals.items():
                    assert not (g_t <= x < start_of[g] and not paused_at(pauses, g_cls, x)
                                and not any(t == x and c == g_cls for t, c, _ in pauses)), (
                        f"link idle at {x} while frame {g} (class {g_cls}) was eligible")
        prev_end = max(prev_end, end)
    assert sw.counters()["p1"]["buffer_used"] == 0


@settings(max_examples=100)
@given(scenarios)
def test_schedule_does_not_depend_on_transmit_cadence(events):
    with_ticks, _, _, _ = run(events, with_ticks=True)
    without, _, _, _ = run(events, with_ticks=False)
    assert with_ticks == without


def test_class7_arriving_mid_burst_overtakes_waiting_lower_classes_only():
    sw = make_switch(2, p1={"rate_bps": RATE})
    tr = traced(sw)
    for i in range(5):
        sw.receive("p0", tagged(i, 1, 1000), 0)
    # 1024 B of line time = 8192 ns per frame at 1 Gb/s; frame 0 starts at 0, frame 1 at 8192
    sw.receive("p0", tagged(99, 7, 1000), 10_000)  # while frame 1 is on the wire
    sw.transmit(10**9)  # one late call: the decisions are still made at each boundary's time
    order = [int.from_bytes(d.frame[42:46], "big") for d in tr.on("p1")]
    assert order == [0, 1, 99, 2, 3, 4]
    starts = [d.start for d in tr.on("p1")]
    assert starts == [0, 8192, 16384, 24576, 32768, 40960]
