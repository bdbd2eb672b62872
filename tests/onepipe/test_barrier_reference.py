"""The barrier aggregator's prompt beacons against the plain rule it replaced (issue 31).

The plain rule: whenever an input that held a minimum rises, every idle output of that minimum
gets a prompt beacon filed, and the beacon is dropped when it comes up with nothing new (the
minimum did not move: another input held it at the same ``R``). With many processes on one
clock such ties are the rule, and filing a beacon for every output per tie made the work per
packet grow with the number of processes. :class:`~netstack.onepipe.barrier.BarrierAggregator`
files prompt beacons only for a minimum that rose, or for an output below it (never given a
barrier, or left behind while the minimum could rise unannounced).

Property: under any sequence of updates (ties and backwards ones included), packets, timer calls,
inputs and outputs added, and holds, both give the same barriers to the same packets,
the same beacons with the same barriers at the same times (only the order of the beacons due at
one instant may differ), the same timeouts and the same counters (but when a freeze episode is
noticed, :data:`NOTICED`). Not inputs removed (``remove_input``, the feature forgetting a
process): a minimum that rises then is announced by the plain rule only if a dropped beacon
happened to be pending, by ours at the next tie or the ``T_beacon`` timer.
"""

from __future__ import annotations

import random
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from netstack.onepipe.barrier import DOWN, UP, BarrierAggregator
from netstack.onepipe.params import OnePipeParams

T = 100
P = OnePipeParams(t_beacon_ns=T, timeout_beacons=3, ack_timeout_ns=100 * T, prompt_beacons=True)


class PlainAggregator(BarrierAggregator):
    """The plain rule: a prompt beacon filed for every output of a minimum its holder left."""

    def _rose(self, held_all: bool, held_down: bool, r: int, now_ns: int) -> None:
        self._prompt(held_all, held_down, now_ns)


dts = st.sampled_from([0, 0, 0, 1, 7, 20, 45, 110])
heard = st.tuples(st.just("heard"), st.integers(0, 3) | st.integers(4, 7), st.integers(0, 3), dts)
ops = st.one_of(
    heard, heard, heard, heard,
    st.tuples(st.just("stamp"), st.integers(0, 4), dts),
    st.tuples(st.just("tick"), dts),
    st.tuples(st.just("add_input"), st.integers(0, 7)),
    st.tuples(st.just("add_output"), st.integers(0, 4)),
    st.tuples(st.just("hold"), st.sampled_from(["fence", "release", "admit"]), st.integers(0, 7)),
)
OUTPUTS = [("up", UP, None), ("down", DOWN, None), ("p0", DOWN, 0), ("p1", DOWN, 1), ("p2", DOWN, 2)]


def _build(cls: type[BarrierAggregator], hold: bool) -> BarrierAggregator:
    a = cls(P, hold=hold)
    for i in range(6):
        a.add_input(i, down=i != 5)  # input 5 comes from above
    for oid, direction, peer in OUTPUTS[:3]:
        a.add_output(oid, direction, 0, peer_input=peer)
    return a


def _step(a: BarrierAggregator, op: tuple[Any, ...], now: int) -> Any:
    kind = op[0]
    if kind == "heard":
        return a.heard(op[1], now // 40 * 40 + op[2] * 10, now)  # coarse: many inputs tie at one R
    if kind == "stamp":
        oid = OUTPUTS[op[1]][0]
        if not a.has_output(oid):
            return None
        b = a.barrier_for(oid, now)
        a.note_sent(oid, now)
        return b
    if kind == "tick":
        return a.on_timer(now), sorted(a.due_beacons(now), key=repr)
    if kind == "add_input":
        return a.add_input(op[1], down=op[1] != 5)
    if kind == "remove_input":
        return a.remove_input(op[1])
    if kind == "add_output":
        oid, direction, peer = OUTPUTS[op[1]]
        return a.add_output(oid, direction, now, peer_input=peer)
    what, i = op[1], op[2]
    return a.fence(i) if what == "fence" else a.release(i, now) if what == "release" else a.admit(i, now)


#: when a freeze episode is *noticed*: at the next barrier taken for the output, which the plain
#: rule's dropped beacons take sooner (the counters say "seen between the calls that noticed")
NOTICED = ("frozen", "freezes", "frozen_ns")


def _state(a: BarrierAggregator, now: int) -> dict[str, Any]:
    outputs = {o: {k: v for k, v in a.output_state(o, now).items() if k not in NOTICED} for o in a.output_ids()}
    return {"agg": a.counters(), "next": a.next_deadline(), "outputs": outputs,
            "inputs": {i: a.input_state(i, now) for i in a.input_ids()}}


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=120), st.booleans())
# a tie before the outputs' first beacon: they have no barrier yet, a prompt beacon gives them one
@example([("heard", 0, 0, 0), ("heard", 1, 0, 0), ("heard", 0, 1, 1), ("tick", 7)], False)
def test_prompt_beacons_are_those_of_the_plain_rule(seq, hold):
    _compare(seq, hold)


def _random_op(rng: random.Random) -> tuple[Any, ...]:
    kind = rng.choice(["heard"] * 4 + ["stamp", "tick", "add_input", "add_output", "hold"])
    dt = rng.choice([0, 0, 0, 1, 7, 20, 45, 110])
    if kind == "heard":
        return kind, rng.randint(0, 7), rng.randint(0, 3), dt
    if kind == "stamp":
        return kind, rng.randint(0, 4), dt
    if kind == "tick":
        return kind, dt
    if kind == "hold":
        return kind, rng.choice(["fence", "release", "admit"]), rng.randint(0, 7)
    return kind, rng.randint(0, 7) if kind == "add_input" else rng.randint(0, 4)


def test_prompt_beacons_are_those_of_the_plain_rule_on_long_random_runs():
    """Seeded, long sequences: the cases hypothesis reaches rarely (a tie among many inputs while
    an output still has no barrier, or after an input re-joined an empty minimum)."""
    rng = random.Random(31)
    for _ in range(400):
        _compare([_random_op(rng) for _ in range(rng.randint(0, 120))], rng.random() < 0.5)


def _compare(seq: list[tuple[Any, ...]], hold: bool) -> None:
    fast, plain = _build(BarrierAggregator, hold), _build(PlainAggregator, hold)
    now = 0
    for op in seq:
        before = now
        now += op[-1] if op[0] in ("heard", "stamp", "tick") else 0
        # as a shell would: both are asked at every deadline either has (the plain rule has more)
        # that falls before the next operation (a deadline already passed: at once)
        while True:
            due = [d for d in (fast.next_deadline(), plain.next_deadline()) if d is not None and d <= now]
            if not due:
                break
            before = max(before, min(due))
            assert _step(fast, ("tick", 0), before) == _step(plain, ("tick", 0), before)
            if min(due) < before:
                break  # both asked once at the time reached: what is still due comes with the operation
        assert _step(fast, op, now) == _step(plain, op, now), op
    s_fast, s_plain = _state(fast, now), _state(plain, now)
    s_fast.pop("next"), s_plain.pop("next")  # the plain rule's dropped beacons leave earlier deadlines
    assert s_fast == s_plain
