"""The barrier aggregation of one switch (netstack.onepipe.barrier), rule by rule (1Pipe §3-§6)."""

from __future__ import annotations

import pytest

from netstack.errors import ConfigError
from netstack.onepipe.barrier import DOWN, UP, BarrierAggregator
from netstack.onepipe.params import OnePipeParams

T = 1_000  # T_beacon
P = OnePipeParams(t_beacon_ns=T, timeout_beacons=10, ack_timeout_ns=100 * T, prompt_beacons=False)
#: with prompt beacons (the default)
PP = OnePipeParams(t_beacon_ns=T, timeout_beacons=10, ack_timeout_ns=100 * T)
TIMEOUT = 10 * T


def agg(**inputs: bool) -> BarrierAggregator:
    """An aggregator with the given inputs (name -> down) and outputs "up" and "down"."""
    a = BarrierAggregator(P)
    for name, down in inputs.items():
        a.add_input(name, down=down)
    a.add_output("up", UP, 0)
    a.add_output("down", DOWN, 0)
    return a


def test_no_barrier_before_any_input_is_heard():
    a = agg(h1=True)
    assert a.barrier_for("down", 0) is None and a.barrier_for("up", 0) is None
    assert a.counters()["inputs_live"] == 0


def test_the_barrier_is_the_min_over_live_inputs():
    a = agg(h1=True, h2=True, s=False)
    a.heard("h1", 500, 1)
    a.heard("h2", 300, 1)
    a.heard("s", 400, 1)
    assert a.barrier_for("down", 2) == 300
    a.heard("h2", 700, 3)
    assert a.barrier_for("down", 4) == 400  # now the spine's input is the lowest
    a.heard("s", 900, 5)
    assert a.barrier_for("down", 6) == 500


def test_an_up_output_takes_down_inputs_only_a_down_output_every_input():
    a = agg(h1=True, spine=False)
    a.heard("h1", 500, 1)
    a.heard("spine", 100, 1)
    assert a.barrier_for("up", 2) == 500  # what came from above never goes up again (§3)
    assert a.barrier_for("down", 2) == 100


def test_an_up_output_has_no_barrier_with_only_up_inputs_live():
    a = agg(spine=False)
    a.heard("spine", 100, 1)
    assert a.barrier_for("up", 2) is None
    assert a.barrier_for("down", 2) == 100


def test_a_backwards_barrier_is_counted_and_ignored_but_keeps_the_input_live():
    a = agg(h1=True)
    assert a.heard("h1", 500, 0)
    assert not a.heard("h1", 400, TIMEOUT - 1)
    assert a.r("h1") == 500 and a.input_state("h1", TIMEOUT)["backwards"] == 1
    a.on_timer(TIMEOUT)
    assert a.is_live("h1")  # it was heard at TIMEOUT - 1
    assert a.barrier_for("down", TIMEOUT) == 500


def test_a_silent_input_times_out_and_leaves_the_min():
    a = agg(h1=True, h2=True)
    a.heard("h1", 100, 0)
    a.heard("h2", 500, 0)
    assert a.barrier_for("down", 1) == 100
    a.heard("h2", 600, 5 * T)
    assert a.on_timer(TIMEOUT - 1) == []
    assert a.on_timer(TIMEOUT) == ["h1"]
    assert not a.is_live("h1") and a.input_state("h1", TIMEOUT)["timeouts"] == 1
    assert a.barrier_for("down", TIMEOUT) == 600
    assert a.on_timer(5 * T + TIMEOUT) == ["h2"]
    assert a.barrier_for("down", 5 * T + TIMEOUT) is None  # nothing live: nothing to vouch for
    assert a.output_state("down", 5 * T + TIMEOUT)["barrier"] == 600  # (what it carried is kept)


def test_next_deadline_covers_timeouts_and_beacons():
    a = BarrierAggregator(P)
    assert a.next_deadline() is None
    a.add_input("h1", down=True)
    a.heard("h1", 100, 50)
    assert a.next_deadline() == 50 + TIMEOUT
    a.add_output("o", DOWN, 70)
    assert a.next_deadline() == 70 + T
    a.note_sent("o", 500)
    assert a.next_deadline() == 70 + T  # a lower bound: re-filed when it comes up
    assert a.due_beacons(70 + T) == []
    assert a.next_deadline() == 500 + T


def test_a_returning_input_rejoins_under_the_freeze():
    a = agg(h1=True, h2=True)
    a.heard("h1", 100, 0)
    a.heard("h2", 1000, 0)
    a.heard("h2", 5000, 9 * T)
    a.on_timer(TIMEOUT)  # h1 times out
    assert a.barrier_for("down", TIMEOUT) == 5000
    a.heard("h1", 4000, TIMEOUT + 1)  # back, with R below the barrier already given out
    st = a.input_state("h1", TIMEOUT + 1)
    assert st["joins"] == 2 and st["rejoins"] == 1 and st["live"]
    assert a.joining("down") == ["h1"]
    assert a.barrier_for("down", TIMEOUT + 2) == 5000  # frozen, never lower (invariant 1)
    a.heard("h2", 9000, TIMEOUT + 3)
    assert a.barrier_for("down", TIMEOUT + 4) == 5000  # still frozen: h1 has not caught up
    a.heard("h1", 6000, TIMEOUT + 5)
    assert a.joining("down") == []
    assert a.barrier_for("down", TIMEOUT + 10) == 6000  # joined: the min again
    out = a.output_state("down", TIMEOUT + 10)
    assert out["freezes"] == 1 and out["frozen_ns"] == 8 and not out["frozen"]


def test_a_new_input_freezes_the_outputs_that_already_carried_a_higher_barrier():
    a = agg(h1=True, h2=True)
    a.add_input("late", down=True)
    a.heard("h1", 1000, 0)
    a.heard("h2", 2000, 0)
    assert a.barrier_for("down", 1) == 1000
    assert a.barrier_for("up", 1) == 1000
    a.heard("late", 500, 2)  # a link added at run time (§4)
    assert a.barrier_for("down", 3) == 1000
    assert a.output_state("down", 3)["frozen"]
    a.heard("late", 1500, 4)
    a.heard("h1", 3000, 4)
    assert a.barrier_for("down", 5) == 1500


def test_a_new_input_above_the_barrier_joins_at_once():
    a = agg(h1=True, h2=True)
    a.heard("h1", 1000, 0)
    assert a.barrier_for("down", 1) == 1000
    a.heard("h2", 1200, 2)
    assert a.joining("down") == []
    a.heard("h1", 5000, 3)
    assert a.barrier_for("down", 4) == 1200
    assert a.output_state("down", 4)["freezes"] == 0


def test_an_output_that_never_carried_a_barrier_does_not_freeze():
    a = agg(h1=True, h2=True)
    a.heard("h1", 1000, 0)
    assert a.barrier_for("down", 1) == 1000
    a.heard("h2", 10, 2)
    assert a.barrier_for("up", 3) == 10  # "up" never carried anything: it starts at the min
    assert a.barrier_for("down", 3) == 1000


def test_an_up_output_is_not_frozen_by_a_joining_up_input():
    a = agg(h1=True, spine=False)
    a.heard("h1", 1000, 0)
    assert a.barrier_for("up", 1) == 1000
    a.heard("spine", 5, 2)
    a.heard("h1", 2000, 2)
    assert a.barrier_for("up", 3) == 2000  # the spine does not count for up outputs


def test_output_barriers_never_decrease():
    a = agg(h1=True, h2=True)
    seen = []
    for t, (name, r) in enumerate([("h1", 10), ("h2", 50), ("h1", 60), ("h2", 55), ("h1", 80), ("h2", 90)]):
        a.heard(name, r, t)
        seen.append(a.barrier_for("down", t))
    assert seen == sorted(seen) and seen[-1] == 80


def test_peek_does_not_remember():
    a = agg(h1=True, h2=True)
    a.heard("h1", 1000, 0)
    assert a.peek("down") == 1000
    a.heard("h2", 10, 1)
    assert a.peek("down") == 10  # nothing was carried: no freeze yet
    assert a.barrier_for("down", 2) == 10


def test_beacons_only_on_outputs_idle_for_t_beacon():
    a = agg(h1=True)
    a.heard("h1", 100, 0)
    assert a.due_beacons(T - 1) == []
    assert sorted(a.due_beacons(T)) == [("down", 100), ("up", 100)]
    a.heard("h1", 200, T + 10)
    a.note_sent("down", T + 500)  # "down" carried a packet; "up" stayed idle
    assert a.due_beacons(2 * T) == [("up", 200)]
    assert a.due_beacons(2 * T + 499) == []
    assert a.due_beacons(2 * T + 500) == [("down", 200)]
    assert a.output_state("up", 2 * T)["beacons"] == 2


def test_a_beacon_is_a_barrier_the_output_carried():
    a = agg(h1=True, h2=True)
    a.heard("h1", 1000, 0)
    a.heard("h2", 2000, 0)
    assert dict(a.due_beacons(T))["down"] == 1000
    assert not a.heard("late", 5, T)  # undeclared: refused
    assert a.c.unknown_inputs == 1
    a.add_input("late", down=True)
    a.heard("late", 5, T + 1)
    a.heard("h1", 3000, T + 1)
    assert dict(a.due_beacons(2 * T))["down"] == 1000  # frozen at what the last beacon carried


def test_an_output_without_a_barrier_skips_its_beacon_and_tries_again_later():
    a = agg(h1=True)
    assert a.due_beacons(T) == []
    assert a.output_state("down", T)["beacons_without_barrier"] == 1
    assert a.next_deadline() == 2 * T
    a.heard("h1", 7, T + 1)
    assert sorted(a.due_beacons(2 * T)) == [("down", 7), ("up", 7)]


def test_an_output_to_a_process_is_beaconed_only_while_the_process_is_live():
    a = BarrierAggregator(P)
    a.add_input("h1", down=True)
    a.add_input("p", down=True)
    a.add_output("p", DOWN, 0, peer_input="p")
    a.heard("h1", 100, 0)
    assert a.due_beacons(5 * T) == []  # never heard from p
    a.heard("p", 100, 5 * T)
    assert a.due_beacons(5 * T) == [("p", 100)]  # idle since it was declared
    a.heard("h1", 200, 14 * T)
    a.on_timer(15 * T)  # p times out
    beacons = a.due_beacons(15 * T)
    assert beacons == [] and not a.is_live("p")
    a.heard("p", 300, 30 * T)
    assert a.due_beacons(30 * T) == [("p", 200)]


def test_no_beacons_when_disabled_for_an_output():
    a = BarrierAggregator(P)
    a.add_input("h1", down=True)
    a.add_output("o", DOWN, 0, beacons=False)
    a.heard("h1", 5, 0)
    assert a.due_beacons(100 * T) == []


def test_removing_inputs_and_outputs():
    a = agg(h1=True, h2=True)
    a.heard("h1", 100, 0)
    a.heard("h2", 200, 0)
    assert a.remove_input("h1") and not a.remove_input("h1")
    assert a.barrier_for("down", 1) == 200
    assert a.remove_output("down") and not a.has_output("down")
    assert a.due_beacons(10 * T) == [("up", 200)]


def test_declarations_are_checked():
    a = BarrierAggregator(P)
    a.add_input("i", down=True)
    a.add_input("i", down=True)  # again, the same: fine
    with pytest.raises(ConfigError):
        a.add_input("i", down=False)
    with pytest.raises(ConfigError):
        a.add_output("o", "sideways", 0)
    a.add_output("o", UP, 0)
    with pytest.raises(ConfigError):
        a.add_output("o", DOWN, 0)
    with pytest.raises(ConfigError):
        BarrierAggregator("params")  # type: ignore[arg-type]


def test_many_updates_keep_the_heaps_small():
    a = agg(low=True, busy=True)
    a.heard("low", 0, 0)
    for k in range(1, 5000):
        a.heard("busy", k, k)
    assert a.barrier_for("down", 5000) == 0
    assert len(a._all) <= 4 * 2 + 64  # stale entries under the minimum were dropped


def test_set_params_moves_deadlines():
    a = agg(h1=True)
    a.heard("h1", 1, 0)
    a.set_params(P.with_(t_beacon_ns=100, ack_timeout_ns=100_000))
    assert a.next_deadline() == 100
    assert sorted(a.due_beacons(100)) == [("down", 1), ("up", 1)]
    assert a.on_timer(1000) == ["h1"]


def test_counters_and_state_are_plain_data():
    import json

    a = agg(h1=True, s=False)
    a.heard("h1", 10, 0)
    a.barrier_for("down", 1)
    json.dumps(a.counters())
    json.dumps(a.input_state("h1", 5))
    json.dumps(a.output_state("down", 5))
    assert a.input_state("s", 5)["silent_ns"] is None
    assert a.actions == [] and a.input_ids() == ["h1", "s"] and a.output_ids() == ["up", "down"]


# ---------------------------------------------------------------------------- prompt beacons


def prompt_agg() -> BarrierAggregator:
    a = BarrierAggregator(PP)
    for name, down in (("h1", True), ("h2", True), ("spine", False)):
        a.add_input(name, down=down)
    a.add_output("up", UP, 0)
    a.add_output("down", DOWN, 0)
    return a


def test_a_rising_minimum_reaches_idle_outputs_at_once_not_at_their_timer():
    """PROMPT_DIVISOR: without it every switch hop would add up to T_beacon to the barrier."""
    a = prompt_agg()
    for i, r in (("h1", 100), ("h2", 150), ("spine", 120)):
        a.heard(i, r, 10)
    assert sorted(a.due_beacons(T)) == [("down", 100), ("up", 100)]  # the first, on the timer
    a.heard("h2", 500, T + 10)  # h1 still holds both minima: nothing rose
    assert a.next_deadline() == 2 * T
    a.heard("h1", 400, T + 20)  # h1 held the minima: down inputs' rises to 400, all inputs' to 120
    assert a.next_deadline() == T + 20  # at once, not at the outputs' timers
    assert sorted(a.due_beacons(T + 20)) == [("down", 120), ("up", 400)]
    a.heard("spine", 450, T + 100)  # the spine held the minimum of all: "down" rises again...
    assert a.due_beacons(T + 100) == []  # ... but at most one prompt beacon per T / 4
    assert a.due_beacons(T + 20 + T // 4) == [("down", 400)]
    c = a.output_state("down", T + T // 2)
    assert c["prompt_beacons"] == 2 and c["beacons"] == 3


def test_a_packet_that_carried_the_barrier_cancels_the_prompt_beacon():
    a = prompt_agg()
    for i in ("h1", "h2", "spine"):
        a.heard(i, 100, 10)
    a.due_beacons(T)
    a.heard("h1", 400, T + 20)
    a.barrier_for("up", T + 30)
    a.note_sent("up", T + 30)
    a.barrier_for("down", T + 30)
    a.note_sent("down", T + 30)
    assert a.due_beacons(T + T // 2) == []  # both carried a packet: next beacon a T_beacon later
    assert a.output_state("up", T + T // 2)["prompt_beacons"] == 0


def test_prompt_beacons_off_leaves_the_timer_alone():
    a = agg(h1=True, h2=True)
    a.heard("h1", 100, 10)
    a.heard("h2", 200, 10)
    a.due_beacons(T)
    a.heard("h1", 300, T + 20)
    assert a.due_beacons(T + T // 2) == [] and a.next_deadline() == 2 * T


def test_an_input_timing_out_raises_the_minimum_promptly():
    a = prompt_agg()
    for i in ("h1", "h2", "spine"):
        a.heard(i, 100, 10)
    a.due_beacons(T)
    for t in range(T, TIMEOUT + 1, T):  # h1 falls silent, h2 and the spine go on
        a.heard("h2", 100 + t, t)
        a.heard("spine", 100 + t, t)
    gone = a.on_timer(TIMEOUT + 10)
    assert gone == ["h1"]
    assert dict(a.due_beacons(TIMEOUT + 10)) == {"up": 100 + TIMEOUT, "down": 100 + TIMEOUT}


def test_a_barrier_far_ahead_of_the_clock_is_refused_not_pinned():
    """A corrupted or buggy neighbour's barrier hours ahead would pin its input (R never goes
    down) and make the rest of the fabric wait behind or drop its traffic: refused, counted."""
    a = agg(h1=True, h2=True)
    a.heard("h1", 100, 10)
    a.heard("h2", 200, 10)
    assert not a.heard("h1", 20 + P.max_ahead_ns + 1, 20)
    assert a.r("h1") == 100 and a.input_state("h1", 20)["ahead"] == 1
    assert a.heard("h1", 20 + P.max_ahead_ns, 20)  # within the bound: an ordinary update
