"""Fig. 11's measurement (netstack/bench/onepipe/reorder.py): the engine holds what the delay
makes it hold, and the rows say so; no timing is asserted."""

from __future__ import annotations

from netstack.bench.onepipe import reorder


def test_the_engine_holds_rate_times_delay_and_delivers_the_rest():
    rows = reorder.measure(delays_us=(0, 25), messages=4_000, repeats=1)
    assert [r["delay_us"] for r in rows] == [0, 25]
    no_delay, delayed = rows
    # about rate x delay: 6.1 M msg/s x 25 µs = 152 messages (sampled every 64 arrivals)
    assert no_delay["held"] < 3 and 130 < delayed["held"] < 175
    assert delayed["buffer_mb"] > 0 and no_delay["buffer_mb"] == 0
    assert no_delay["vs_no_delay"] == 1.0 and all(r["cpu_ns"] > 0 and r["throughput"] > 0 for r in rows)
    assert "buffer MB" in reorder.table(rows)


def test_every_message_is_delivered_in_timestamp_order():
    from netstack.onepipe.actions import Deliver

    frames = reorder._datagrams(5_000, 2_000)
    ep = reorder._engine(frames[0][2])
    got = []
    for data, src, now in frames:
        ep.receive(data, src, now)
        got += [a.ts for a in ep.actions if isinstance(a, Deliver)]
        ep.actions.clear()
    assert got == sorted(got) and len(got) > 2_000 - 5_000 * reorder.PAPER_RATE / 1e9 - 2


def test_the_paper_comparison_puts_ours_beside_fig_11():
    from netstack.bench.onepipe import paper

    rows = reorder.measure(delays_us=reorder.DELAYS_US, messages=1_500, repeats=1)
    section = paper.compare({"fig11": {"rows": rows}})
    fig11 = [r for r in section["rows"] if r["figure"] == "11"]
    assert len(fig11) == 10 and all(r["ours"] is not None for r in fig11), fig11
    tput = {r["x"]: r for r in fig11 if r["series"] == "Throughput"}
    assert "compare the shape" in tput["125"]["note"] and tput["0"]["paper"] == 6.1
    absent = [r for r in paper.compare({})["rows"] if r["figure"] == "11"]
    assert all(r["ours"] is None and "fig11 not selected" in r["note"] for r in absent)
