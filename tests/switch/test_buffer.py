"""Finite shared egress buffer: tail drops are counted per class and the buffer is never exceeded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from . import GBPS, class_tos, make_switch, udp_frame

ops = st.lists(
    st.tuples(st.integers(0, 5_000), st.integers(0, 7), st.integers(42, 1514), st.booleans()),
    min_size=1, max_size=150,
)


@settings(max_examples=100)
@given(ops, st.integers(1, 8000))
def test_buffer_never_exceeded_and_every_frame_accounted(events, capacity):
    sw = make_switch(2, p1={"rate_bps": GBPS // 10, "buffer_bytes": capacity})
    t = 0
    offered = [0] * 8
    delivered = 0
    for gap, cls, size, tick in events:
        t += gap
        sw.receive("p0", udp_frame(size=size, tos=class_tos(cls)), t)
        offered[cls] += 1
        state = sw.counters()["p1"]
        assert state["buffer_used"] <= capacity
        assert state["buffer_used"] == sum(state["queue_bytes"])
        if tick:
            delivered += len(sw.transmit(t))
    state = sw.counters()["p1"]
    assert state["buffer_peak"] <= capacity
    assert state["queue_drops"] == sum(state["queue_drops_class"])
    for cls in range(8):
        # offered = dropped + sent + still queued (+ one possibly on the wire, counted as sent)
        assert offered[cls] == state["queue_drops_class"][cls] + state["tx_frames_class"][cls] + \
            state["queue_frames"][cls]
    delivered += len(sw.transmit(t + 10**9))
    assert delivered == sum(offered) - state["queue_drops"]


def test_tail_drop_keeps_what_fits_and_counts_the_rest():
    sw = make_switch(2, p1={"rate_bps": GBPS, "buffer_bytes": 1000})
    for _ in range(12):
        sw.receive("p0", udp_frame(size=100, tos=class_tos(3)), 0)
    # frame 1 starts at once (leaves the buffer), then 10 x 100 B fit, the 12th is dropped
    state = sw.counters()["p1"]
    assert state["queue_frames"][3] == 10 and state["buffer_used"] == 1000
    assert state["queue_drops"] == 1 and state["queue_drops_class"][3] == 1
    # the buffer is shared: a class-7 frame finds no room either
    sw.receive("p0", udp_frame(size=60, tos=class_tos(7)), 0)
    assert sw.counters()["p1"]["queue_drops_class"][7] == 1
    sw.set_buffer("p1", 500)  # shrinking drops nothing already queued
    assert sw.counters()["p1"]["buffer_used"] == 1000
    sw.clear_counters("p1")
    assert sw.counters()["p1"]["queue_drops"] == 0
    assert len(sw.transmit(10**9)) == 11
