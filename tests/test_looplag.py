"""netstack.looplag: scheduling-delay histograms, their differences and summaries."""

from __future__ import annotations

import asyncio

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
    assert d["max_ns"] == 60_000_000  # in the 50-100 ms bucket: capped by the overall maximum
    s = looplag.summary(d)
    assert s["samples"] == 2 and s["p50_ms"] == 1.0 and s["max_ms"] == 60.0


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
