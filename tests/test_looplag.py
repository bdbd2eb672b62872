"""netstack.looplag: scheduling-delay histograms, their differences and summaries."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given
from hypothesis import strategies as st

from netstack import looplag


def test_a_run_is_the_difference_of_two_snapshots():
    h = looplag.LagHistogram(now_ns=1)
    for lag in (100_000, 400_000, 3_000_000):
        h.record(lag)
    before = h.snapshot()
    for lag in (700_000, 60_000_000):
        h.record(lag)
    d = looplag.diff(h.snapshot(), before)
    assert d["samples"] == 2 and d["sum_ns"] == 60_700_000
    assert d["max_ns"] == 60_000_000  # in the 50-63 ms bucket: capped by the overall maximum
    s = looplag.summary(d)
    assert s["samples"] == 2 and s["p50_ms"] == 0.8 and s["max_ms"] == 60.0  # 0.7 ms: the 0.63-0.8 bucket


def test_a_restarted_process_is_not_subtracted():
    a, b = looplag.LagHistogram(now_ns=1), looplag.LagHistogram(now_ns=2)
    a.record(5_000_000)
    b.record(1_000)
    assert looplag.diff(b.snapshot(), a.snapshot())["samples"] == 1


def test_the_recent_maximum_forgets_old_seconds():
    h = looplag.LagHistogram()
    h.record(80_000_000, now_ns=1_000_000_000)
    h.record(2_000_000, now_ns=9_000_000_000)
    assert h.recent_max_ns(9_500_000_000) == 2_000_000  # the 80 ms stall was 8.5 s ago
    assert h.recent_max_ns(3_000_000_000) == 80_000_000


@given(st.lists(st.integers(-10, 2_000_000_000), min_size=1, max_size=200))
def test_summaries_are_bounded_by_what_was_recorded(lags):
    h = looplag.LagHistogram()
    for lag in lags:
        h.record(lag)
    s = looplag.summary(h.snapshot())
    assert s["samples"] == len(lags) and 0 <= s["p50_ms"] <= s["p99_ms"] <= s["max_ms"]
    assert s["max_ms"] == max(0, max(lags)) / 1e6 and 0 <= s["late_frac"] < 1


def test_the_monitor_samples_a_running_loop():
    h = looplag.LagHistogram()

    async def main():
        task = asyncio.get_running_loop().create_task(looplag.monitor(h, interval_ns=2_000_000))
        await asyncio.sleep(0.05)
        task.cancel()

    asyncio.run(main())
    assert h.samples >= 3


def test_the_thread_sampler_reports_a_summary():
    with looplag.ThreadSampler(interval_ns=2_000_000) as s:
        import time

        time.sleep(0.05)
    assert s.summary()["samples"] >= 3


def test_every_edge_is_an_upper_bound_within_28_percent_and_the_old_edges_remain():
    """The buckets (R10 steps, 0.5 ms to 1 s): a lag is counted in the first bucket whose upper
    edge is at least it, and the edge over-reports it by at most 1.28 x (a limit between two
    edges is judged on the lower one, at most that much stricter)."""
    edges = looplag.EDGES_NS
    assert list(edges) == sorted(set(edges)) and edges[0] == 500_000 and edges[-1] == 1_000_000_000
    assert all(b / a <= 1.28 for a, b in itertools.pairwise(edges))
    assert {500_000, 1_000_000, 2_000_000, 5_000_000, 10_000_000, 20_000_000, 50_000_000, 100_000_000} <= set(edges)
    h = looplag.LagHistogram()
    for lag in (0, 500_000, 500_001, 18_150_000, 2_000_000_000):
        h.record(lag)
    filled = [i for i, c in enumerate(h.counts) if c]
    assert filled == [0, 1, edges.index(20_000_000), len(edges)]
    assert h.counts[0] == 2  # 0 and exactly the first edge


@given(st.integers(0, 2_000_000_000))
def test_a_lags_bucket_is_the_first_edge_at_or_above_it(lag):
    h = looplag.LagHistogram()
    h.record(lag)
    i = h.counts.index(1)
    edges = looplag.EDGES_NS
    assert (i == len(edges) or lag <= edges[i]) and (i == 0 or lag > edges[i - 1])
