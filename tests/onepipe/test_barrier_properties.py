"""Property tests of the barrier aggregation (netstack.onepipe.barrier) against a plain model,
under any sequence of barrier updates (backwards ones included), packets, timer calls and inputs
added at run time (1Pipe §4-§6, §12 invariant 1):

- each output's barrier never decreases;
- it never exceeds the minimum over its live inputs that are not joining (an input is joining
  an output while its R is below the barrier that output last carried), and it is that minimum
  whenever no input is joining (so the freeze holds no longer than needed);
- an up output counts down inputs only;
- beacons go exactly to the outputs idle for T_beacon (a process's output only while the
  process is live), never to a busier one;
- inputs time out exactly after the timeout of silence, and ``next_deadline`` never passes an
  event it stands for.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from netstack.onepipe.barrier import DOWN, UP, BarrierAggregator
from netstack.onepipe.params import OnePipeParams

T = 100
# the timer rule alone (prompt beacons, which add beacons when a minimum rises, are unit-tested)
P = OnePipeParams(t_beacon_ns=T, timeout_beacons=3, ack_timeout_ns=100 * T, prompt_beacons=False)
TIMEOUT = 3 * T

dts = st.integers(0, 2 * T)
ops = st.one_of(
    st.tuples(st.just("heard"), st.integers(0, 5), st.integers(0, 2000), dts),
    st.tuples(st.just("stamp"), st.sampled_from(["up", "down", "proc"]), dts),
    st.tuples(st.just("tick"), dts),
    st.tuples(st.just("add"), st.booleans()),
)


class Model:
    """What the aggregator should do, the slow and obvious way."""

    def __init__(self, downs: list[bool]) -> None:
        self.down = list(downs)
        self.r: list[int | None] = [None] * len(downs)
        self.heard_at = [0] * len(downs)
        self.live = [False] * len(downs)
        self.last: dict[str, int | None] = {"up": None, "down": None, "proc": None}
        self.sent = {"up": 0, "down": 0, "proc": 0}

    def eligible(self, out: str) -> list[int]:
        return [i for i, live in enumerate(self.live) if live and (self.down[i] or out != "up")]

    def heard(self, i: int, b: int, now: int) -> None:
        self.heard_at[i] = now
        r = self.r[i]
        if not self.live[i]:
            self.live[i], self.r[i] = True, b
        elif r is not None and b > r:
            self.r[i] = b

    def beaconable(self, out: str) -> bool:
        return out != "proc" or self.live[0]  # the "proc" output leads to input 0


def check_value(m: Model, out: str, value: int | None) -> None:
    last = m.last[out]
    rs = [m.r[i] for i in m.eligible(out)]
    assert all(r is not None for r in rs)
    if not rs:
        assert value is None  # no live input: nothing to vouch for (no stale barrier repeated)
        return
    if last is not None:
        assert value is not None and value >= last  # invariant 1
    non_joining = [r for r in rs if r is not None and (last is None or r >= last)]
    if value is not None and non_joining:
        assert value <= min(non_joining)
    if rs and len(non_joining) == len(rs):  # nobody joining: exactly the minimum
        assert value == min(non_joining)
    m.last[out] = value


@given(st.lists(st.booleans(), min_size=1, max_size=4), st.lists(ops, max_size=80))
def test_the_aggregator_keeps_every_rule(downs, steps):
    a = BarrierAggregator(P)
    m = Model(downs)
    for i, d in enumerate(downs):
        a.add_input(i, down=d)
    a.add_output("up", UP, 0)
    a.add_output("down", DOWN, 0)
    a.add_output("proc", DOWN, 0, peer_input=0)
    now = 0
    for step in steps:
        kind = step[0]
        if kind == "heard":
            _, i, b, dt = step
            now += dt
            if i >= len(m.down):
                continue
            a.heard(i, b, now)
            m.heard(i, b, now)
        elif kind == "stamp":
            _, out, dt = step
            now += dt
            check_value(m, out, a.barrier_for(out, now))
            a.note_sent(out, now)
            m.sent[out] = now
        elif kind == "add":
            a.add_input(len(m.down), down=step[1])
            m.down.append(step[1])
            m.r.append(None)
            m.heard_at.append(0)
            m.live.append(False)
        else:
            now += step[1]
            tick(a, m, now)
        assert [a.is_live(i) for i in range(len(m.down))] == m.live
        assert [a.r(i) for i in range(len(m.down))] == m.r


def tick(a: BarrierAggregator, m: Model, now: int) -> None:
    deadline = a.next_deadline()
    events = [m.heard_at[i] + TIMEOUT for i, live in enumerate(m.live) if live]
    events += [m.sent[o] + T for o in m.sent if m.beaconable(o)]
    if events:
        assert deadline is not None and deadline <= min(events)  # never late for an event
    gone = [i for i, live in enumerate(m.live) if live and now - m.heard_at[i] >= TIMEOUT]
    assert sorted(a.on_timer(now)) == gone
    for i in gone:
        m.live[i] = False
    beacons = dict(a.due_beacons(now))
    due = [o for o in m.sent if m.beaconable(o) and now - m.sent[o] >= T]
    for o in due:
        if o in beacons:
            check_value(m, o, beacons[o])
        else:
            assert not m.eligible(o)  # no live input for it: no beacon
        m.sent[o] = now
    assert set(beacons) <= set(due)  # beacons only on outputs idle for T_beacon
    after = a.next_deadline()
    assert after is None or after > now
