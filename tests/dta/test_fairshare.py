"""Each reporter's fair share of the output window (issue 34, finding 5; netstack/dta/fairshare.py).

One reporter sending as fast as it can kept the shared window full, and the other reporters'
reports met no room: 69 of 200 genuine reports kept under one flooding reporter. Now each active
reporter may hold ``window // active`` requests of a QP in flight; a report over its share is
dropped and counted per reporter (``share_dropped``, ``fair_share`` in the status)."""

from __future__ import annotations

from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.inet import ip_bytes
from netstack.dta import Reporter
from netstack.dta.fairshare import FairShare
from netstack.dta.requester import PSN_MASK, TxQp

from . import COLLECTOR_IP, MS, TRANSLATOR_MAC, Rig
from .test_window import TIMEOUT, kw, setup

FLOODER_IP = "10.0.1.66"


def flood_run(fair: bool, genuine: int = 200, every: int = 20) -> tuple[int, Rig]:
    """A flooding reporter and a genuine one (one report in ``every``) into a window of 64; the
    collector executes 16 requests every 10 reports, less than offered. Returns how many of the
    genuine reports became requests."""
    rig = Rig(setup, window=64, window_timeout_ns=TIMEOUT)
    if not fair:
        rig.tr._fair = None  # first come, first served: the behaviour before the fix
    flooder = Reporter(bytes.fromhex("020000000166"), TRANSLATOR_MAC, ip_bytes(FLOODER_IP), COLLECTOR_IP)
    wire: deque[bytes] = deque()
    kept, now = 0, 0
    for i in range(genuine * every):
        now += 1_000
        if i % every == 0:
            out = rig.tr.on_report(rig.reporter.frame(kw(rig, i)), now)
            kept += bool(out)
        else:
            out = rig.tr.on_report(flooder.frame(flooder.key_write(5000 + i, i, redundancy=4)), now)
        wire += out
        if i % 10 == 0:
            rig.deliver([wire.popleft() for _ in range(min(16, len(wire)))], now)
    return kept, rig


def test_one_flooding_reporter_no_longer_starves_another():
    before, _ = flood_run(fair=False)
    after, rig = flood_run(fair=True)
    assert before < 100  # the finding: most genuine reports dropped for want of room
    assert after == 200
    c = rig.tr.c
    status = rig.tr.counters()["fair_share"]
    assert c.share_dropped > 0 and status["share_dropped_by_reporter"] == {FLOODER_IP: c.share_dropped}
    assert c.window_timeouts == 0 and c.resyncs == 0


def test_a_lone_reporter_keeps_the_whole_window():
    rig = Rig(setup, window=32, window_timeout_ns=TIMEOUT)
    frames = []
    for i in range(20):  # nothing delivered: no ACK comes back
        frames += rig.tr.on_report(rig.reporter.frame(kw(rig, i)), 0)
    assert len(frames) == 32 and rig.tr.c.share_dropped == 0 and rig.tr.c.window_dropped == 12


def test_a_reporter_quiet_for_the_horizon_is_no_longer_counted():
    fs = FairShare(window=64, horizon_ns=5 * MS)
    fs.saw(b"a", 0)
    fs.saw(b"b", 1 * MS)
    assert fs.active(2 * MS) == 2 and fs.active(5 * MS + 1) == 1 and fs.active(7 * MS) == 0


def test_the_horizon_follows_the_switchs_scheduling_slack():
    """A switch scheduled late reads a reporter's reports late: with the bare time-out as its
    horizon, a genuine reporter seemed quiet and lost its share to a flooder (netstack fuzz dta
    --attack flood, live). The horizon is the window time-out as it stands, slack included."""
    rig = Rig(setup, window=64, window_timeout_ns=TIMEOUT)
    fair = rig.tr._fair
    assert fair is not None and fair.horizon_ns == TIMEOUT
    rig.tr.set_timer_slack(150 * MS)
    assert fair.horizon_ns == rig.tr.window_timeout_ns() == TIMEOUT + 150 * MS
    fair.saw(b"genuine", 0)
    assert fair.active(TIMEOUT + 100 * MS) == 1  # still counted though quiet past the bare time-out
    rig.tr.set_timer_slack(0)
    assert fair.horizon_ns == TIMEOUT


def _qp() -> TxQp:
    return TxQp("kw", 1, 2, 100, 0, 0, 1 << 20, {}, una=100)


@settings(max_examples=100)
@given(st.lists(st.tuples(st.sampled_from(["send", "ack", "timeout"]), st.sampled_from([b"a", b"b", b"c"]),
                          st.integers(1, 8)), max_size=80))
def test_the_ledger_frees_exactly_what_is_acknowledged_or_abandoned(ops):
    """Whatever the order of sends, ACKs and time-outs (a time-out takes ``psn`` back to ``una``),
    each reporter's count in flight equals its requests between ``una`` and ``psn`` (ACKs here end
    on a report's last request); a report taken beyond its reporter's guarantee leaves every other
    active reporter room up to its own; nothing is left once all is acknowledged."""
    window = 16
    fs, qp = FairShare(window=window, horizon_ns=10**12), _qp()
    sent: list[tuple[int, bytes, int]] = []  # (PSN after the report's requests, reporter, requests)
    for op, rep, n in ops:
        if op == "send":
            fs.saw(rep, 0)
            total = sum(m for _, _, m in sent)
            if total + n <= window and fs.admit(qp, rep, n, 0):  # (the caller checks the room)
                qp.psn = (qp.psn + n) & PSN_MASK
                fs.charge(qp, rep, n)
                sent.append((qp.psn, rep, n))
                g = window // (4 * fs.active(0))
                if fs.in_flight(qp, rep) > g and total + n > window // 2:
                    others = {b"a", b"b", b"c"} & set(fs._seen) - {rep}
                    owed = sum(max(0, g - fs.in_flight(qp, o)) for o in others)
                    assert window - (total + n) >= owed
        elif op == "ack" and sent:
            k = min(n, len(sent))
            qp.una = sent[k - 1][0]
            sent = sent[k:]
        elif op == "timeout":
            qp.psn = qp.una
            sent = []
        fs._release(qp)
        for r in (b"a", b"b", b"c"):
            assert fs.in_flight(qp, r) == sum(m for _, s, m in sent if s == r)
    qp.una = qp.psn
    fs._release(qp)
    assert not any(fs._used.values()) and not fs._ledger.get(qp.name) and not any(fs._total.values())


def test_two_busy_reporters_share_the_window_first_come_beyond_their_guarantee():
    """The live Key-Increment test's case: two reporters, each with more than half the window in
    flight at times while the window is not full; nothing is dropped (hard shares of window/2 each
    dropped 36 of 1,150 increments live)."""
    fs, qp = FairShare(window=1536, horizon_ns=10**12), _qp()
    for rep in (b"h1", b"h2"):
        fs.saw(rep, 0)
    for _ in range(200):  # h1: 800 in flight
        assert fs.admit(qp, b"h1", 4, 0)
        qp.psn += 4
        fs.charge(qp, b"h1", 4)
    for _ in range(150):  # h2: 600 more, 1400 in all
        assert fs.admit(qp, b"h2", 4, 0)
        qp.psn += 4
        fs.charge(qp, b"h2", 4)
    assert fs.in_flight(qp, b"h1") == 800 and fs.in_flight(qp, b"h2") == 600 and not fs.drops
