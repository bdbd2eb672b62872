"""Issue 31: best effort's accounting, driven through the real endpoint engines in virtual time.

Endpoints behind a min-barrier relay (test_endpoint_properties.Run) with loss (ACKs and NAKs
too), duplicates, delay beyond the ACK timeout (late ACKs), timer slack, processes killed at any
moment (a killed receiver may lose its last logged deliveries, as a killed live process loses at
most 0.1 s of its log) and the run stopped at any moment, messages still in flight. Each message
is then put in one class by :func:`netstack.onepipe.accounting.classify`, the function ``netstack
onepipe run``, ``check`` and ``status`` count with, from what a run's logs would hold:

- ``sent = delivered + send_failed + send_unknown + in_flight_at_end`` exactly, each >= 0;
- ``unaccounted >= 0``, and 0 unless a sender was killed or a receiver lost log lines;
- a message its sender knows failed (``SendFail.known``: a NAK, the ACK bitmap) was never
  delivered: only the ACK timeout reports a delivered message, and it reports it as unknown.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.engine import SendTo
from netstack.onepipe.accounting import COUNTERS, classify
from netstack.onepipe.actions import Deliver, SendFail
from netstack.onepipe.clock import HostClock

from .test_endpoint_properties import ID, OPS, PARAMS, SLACKS, Run, T, schedule


class KillRun(Run):
    """Run, where a killed endpoint stops: no timer, no datagram reaches it, it sends nothing."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.killed: set[int] = set()
        self.unknown_ids: set[tuple[int, int, int]] = set()
        self.known_ids: set[tuple[int, int, int]] = set()
        self.logged: dict[int, list[tuple[int, int, int]]] = {}
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def step(self) -> None:
        t, _, kind, args = self.events[0]
        if kind == "kill":
            import heapq

            heapq.heappop(self.events)
            self.t = t
            i, forget = args
            assert isinstance(i, int) and isinstance(forget, int)
            self.killed.add(i)
            del self.logged.setdefault(i, [])[max(0, len(self.logged[i]) - forget):]  # its unwritten lines
            return
        if (kind in ("timer", "rx", "send", "slack") and args[0] in self.killed):
            import heapq

            heapq.heappop(self.events)
            self.t = t
            return
        super().step()

    def _call(self, i: int, fn: object) -> None:
        ep = self.eps[i]
        now = self.host(i)
        fn(ep, now)  # type: ignore[operator]
        for a in ep.actions.take_all():
            if isinstance(a, SendTo):
                self._out(i, a.dst, a.data, now)
            elif isinstance(a, Deliver):
                mid = ID.unpack_from(a.msg)
                assert mid not in self.delivered_ids, "delivered twice"
                self.delivered_ids.add(mid)
                self.logged.setdefault(i, []).append(mid)
            elif isinstance(a, SendFail):
                mid = ID.unpack_from(a.msg)
                assert mid not in self.known_ids | self.unknown_ids, "SendFail twice"
                (self.known_ids if a.known else self.unknown_ids).add(mid)
        self._arm(i)


def _id(mid: tuple[int, int, int], dsts: dict[tuple[int, int, int], int]) -> str:
    sender, seq, k = mid
    return f"{sender}.{seq}.{k}.{dsts[mid]}"


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(2, 4), ops=OPS, seed=st.integers(0, 2**32),
    loss=st.sampled_from([0.0, 0.05, 0.2]), dup=st.sampled_from([0.0, 0.1]), ctl_loss=st.booleans(),
    delay_max=st.sampled_from([0, 3 * T, 2 * PARAMS.ack_timeout_ns, 3 * PARAMS.ack_timeout_ns]), slacks=SLACKS,
    kills=st.lists(st.tuples(st.integers(0, 60 * T), st.integers(0, 3), st.integers(0, 3)), max_size=2),
    stop=st.one_of(st.none(), st.integers(0, 80 * T)),
)
def test_every_message_has_exactly_one_fate_and_known_failures_were_never_delivered(
        n, ops, seed, loss, dup, ctl_loss, delay_max, slacks, kills, stop):
    start = 10**7
    run = KillRun(n, [HostClock()] * n, random.Random(seed), loss, dup, ctl_loss, 0.0, delay_max, 0.0, start)
    for at, who, forget in kills:
        run._push(start + at, "kill", (who % n, forget))
    t = schedule(run, n, start, ops, slacks)
    run.run_until(start + stop if stop is not None else t + 4 * PARAMS.ack_timeout_ns + 4 * delay_max)

    dsts = {mid: dst for mid, (dst, _m) in run.sent.items()}
    logged = {mid for ids in run.logged.values() for mid in ids}
    in_flight = {ID.unpack_from(m) for i, ep in enumerate(run.eps) if i not in run.killed
                 for _dst, m in ep.outstanding()}
    # what a live receiver holds, ACKed, for the barrier: netstack.onepipe.live lists it as its sender cannot
    held = {ID.unpack_from(m) for i, ep in enumerate(run.eps) if i not in run.killed for _src, m in ep.held()}
    assert not (held & run.delivered_ids), "a message delivered and still held"
    # the engine's own view: every message sent by a live sender has at most one fate or is in flight
    for i, ep in enumerate(run.eps):
        if i not in run.killed:
            mine = {mid for mid in run.sent if mid[0] == i}
            fated = {mid for mid in (run.known_ids | run.unknown_ids) if mid[0] == i}
            assert not (fated & in_flight), "a message with a fate still listed in flight"
            assert ep.c.send_failed + ep.send_unknown == len(fated)
            assert mine <= run.delivered_ids | fated | in_flight | held, \
                "a live sender's message with no fate, not in flight, not held by its receiver"
    assert not (run.known_ids & run.delivered_ids), "a message known failed was delivered"

    def ids(s: set[tuple[int, int, int]]) -> set[str]:
        return {_id(m, dsts) for m in s}

    tally = classify(((str(m[0]), _id(m, dsts)) for m in run.sent), ids(logged), ids(run.known_ids),
                     ids(run.unknown_ids), ids(in_flight | held))
    c = tally.totals
    assert c["messages_sent"] == len(run.sent)
    assert c["messages_sent"] == c["delivered"] + c["send_failed"] + c["send_unknown"] + c["in_flight_at_end"]
    assert all(v >= 0 for v in c.values()) and 0 <= c["unaccounted"] <= c["in_flight_at_end"]
    assert tally.failed_and_delivered == 0
    lost_lines = any(len(run.logged.get(i, [])) < sum(1 for m in run.delivered_ids if dsts[m] == i)
                     for i in run.killed)
    if not (run.killed and (lost_lines or any(m[0] in run.killed for m in run.sent))):
        assert c["unaccounted"] == 0, tally.examples
    for per in tally.per_sender.values():  # the identity holds per process too
        assert per["messages_sent"] == sum(per[k] for k in COUNTERS[1:5])
    assert sum(p["messages_sent"] for p in tally.per_sender.values()) == c["messages_sent"]


def test_a_late_ack_makes_a_delivered_message_unknown_never_failed():
    """The run of issue 31 in miniature: every ACK late (delay beyond the ACK timeout), no loss:
    every message is delivered; the senders report them unknown, none failed; the count puts them
    all in delivered."""
    start = 10**7
    run = KillRun(2, [HostClock()] * 2, random.Random(1), 0.0, 0.0, False, 0.0, 0, 0.0, start)
    slow = PARAMS.ack_timeout_ns * 2
    orig = run._link

    def late_acks(link, kind, args, control):
        if kind == "tor_in" and isinstance(args[2], bytes):
            from headers.onepipe import OnePipeHeader, OnePipeOpcode

            if OnePipeHeader.from_bytes(args[2]).opcode is OnePipeOpcode.ACK:
                run._push(run.t + slow, kind, args)
                return
        orig(link, kind, args, control)

    run._link = late_acks  # type: ignore[method-assign]
    for k in range(5):
        run._push(start + k * T, "send", (0, [(1, 12)]))
    run.run_until(start + 10 * slow)
    assert len(run.delivered_ids) == 5 and not run.known_ids and run.unknown_ids == run.delivered_ids
    dsts = {mid: dst for mid, (dst, _m) in run.sent.items()}
    tally = classify(((str(m[0]), _id(m, dsts)) for m in run.sent), {_id(m, dsts) for m in run.delivered_ids},
                     set(), {_id(m, dsts) for m in run.unknown_ids}, set())
    assert (tally.totals["delivered"], tally.totals["send_unknown"], tally.unknown_delivered) == (5, 0, 5)
    assert run.eps[0].c.send_failed == 0 and run.eps[0].send_unknown == 5
