"""Hypothesis drives the T/C-SACK and go-back-N engines through arbitrary loss, duplication and
reordering on both directions, across the 32-bit wrap, and feeds their decoders arbitrary
bytes."""

from __future__ import annotations

import contextlib
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.errors import HeaderError
from netstack.tcsack import GbnReceiver, GbnSender, TcsParams, TcsReceiver, TcsSender
from netstack.tcsack.rangeset import RangeSet

from . import run

# one datagram's fate: (lost, duplicated, extra delay in units of 100 us)
FATE = st.tuples(st.booleans(), st.booleans(), st.integers(0, 40))
SCHEDULE = st.lists(FATE, max_size=120)
START = st.one_of(st.integers(0, 0xFFFFFFFF), st.integers(0xFFFFFFFF - 60, 0xFFFFFFFF))


def _fate(schedule, fifo: bool):
    """The scheduled fates for the first datagrams, then a clean path (so a transfer must end)."""
    def fate(i: int) -> tuple[bool, bool, int]:
        if i < len(schedule):
            lost, dup, extra = schedule[i]
            return lost, dup, 0 if fifo else extra * 100_000
        return False, False, 0
    return fate


def _run(kind, data, fwd, rev, start, fifo, n, t_us):
    p = TcsParams(rate_bps=20_000_000, t_ns=t_us * 1000, n=n, payload=64)
    return run(kind, p, data, fwd=_fate(fwd, fifo), rev=_fate(rev, fifo), delay_ns=300_000, start_seq=start,
               max_ns=120_000_000_000)


@settings(max_examples=150)
@given(kind=st.sampled_from(["tcsack", "gbn"]), size=st.integers(0, 6000), fwd=SCHEDULE, rev=SCHEDULE,
       start=START, fifo=st.booleans(), n=st.integers(1, 20), t_us=st.integers(100, 3000))
def test_every_transfer_completes_exactly_in_order(kind, size, fwd, rev, start, fifo, n, t_us):
    data = bytes((i * 7 + 3) & 0xFF for i in range(size))
    res = _run(kind, data, fwd, rev, start, fifo, n, t_us)
    # delivered exactly once, in order, and the sender learned it (no deadlock, no stall)
    assert res["delivered_ok"], res
    assert res["receiver_complete"] and res["done_ns"] is not None, res
    assert res["sender"]["bogus_acks"] == 0 and res["sender"]["cum_acked"] == res["sender"]["packets"]


@settings(max_examples=100)
@given(size=st.integers(64, 6000), fwd=SCHEDULE, start=START, n=st.integers(1, 20))
def test_on_a_fifo_path_tcsack_never_resends_a_packet_that_arrived(size, fwd, start, n):
    """The loss rule (sender.py): a packet is resent only if a copy sent after it arrived while
    it did not. On a FIFO path with lossless ACKs that copy was lost, so every retransmission
    is needed: the receiver sees no duplicate beyond the path's own and the 2T probes."""
    fwd = [(lost, False, 0) for lost, _, _ in fwd]  # no duplication on the data path
    res = _run("tcsack", bytes(size), fwd, [], start, True, n, 2000)
    assert res["delivered_ok"]
    assert res["receiver"]["duplicates"] <= res["sender"]["probes_sent"], res
    assert res["sender"]["retx_sent"] <= res["fwd_lost"], res


@given(st.binary(max_size=64))
def test_decoders_raise_only_header_errors(blob):
    p = TcsParams()
    for engine in (TcsReceiver(p), GbnReceiver(p), TcsSender(p, b"x" * 5000), GbnSender(p, b"x" * 5000)):
        if hasattr(engine, "poll"):
            engine.poll(0)
        with contextlib.suppress(HeaderError):
            engine.receive(blob, 1)


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 20)), max_size=40), st.integers(0, 220))
def test_rangeset_matches_a_plain_set(adds, floor):
    r = RangeSet()
    model: set[int] = set()
    for start, length in adds:
        new = set(range(start, start + length)) - model
        assert r.add(start, start + length) == len(new)
        model |= new
    r.drop_below(floor)
    model = {x for x in model if x >= floor}
    runs = r.runs()
    assert all(s < e for s, e in runs) and all(e1 < s2 for (_, e1), (s2, _) in itertools.pairwise(runs))
    assert {x for s, e in runs for x in range(s, e)} == model and r.count() == len(model)
