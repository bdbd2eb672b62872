"""The translator's output window (docs/dta.md "Output window"; netstack/dta/translator.py).

At most ``window`` un-acknowledged requests per QP; a report that would exceed it is dropped
before it becomes a request (``window_dropped``); a full window with no ACK progress for
``window_timeout_ns`` goes back to the oldest un-acknowledged PSN, which keeps the collector
in sequence ("Direct Telemetry Access" §5.3 has no requester timer; the RC requester's
transport timer, IBTA vol. 1 ch. 9, is what it follows). Unit tests first, then a stateful
hypothesis test over arbitrary interleavings of reports, deliveries, losses and time.
"""

from __future__ import annotations

import random
from collections import deque

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from headers.roce import parse_roce_frame
from netstack.dta import DTATranslator, Reporter, RoceResponder, TranslatorConfig
from netstack.dta.requester import DEFAULT_WINDOW, DEFAULT_WINDOW_TIMEOUT_NS, PROBE_WINDOW, PSN_MASK
from netstack.io.packet import RING_FRAMES

from . import (
    COLLECTOR_IP,
    COLLECTOR_MAC,
    MS,
    REPORTER_IP,
    REPORTER_MAC,
    TRANSLATOR_IP,
    TRANSLATOR_MAC,
    Rig,
    bind,
    make_memory,
)

TIMEOUT = 5 * MS  # shorter than the default (DEFAULT_WINDOW_TIMEOUT_NS, 50 ms): the tests' own clock


def setup(m) -> None:
    m.add_keywrite(slots=1 << 12, data_words=1, max_redundancy=4)
    m.add_keyincrement(slots=1 << 12)
    m.add_append_list(1, entries=64, batch=4)


def outstanding(tr: DTATranslator, name: str) -> int:
    qp = tr.qps[name]
    return (qp.psn - qp.una) & PSN_MASK


def kw(rig: Rig, i: int, n: int = 4) -> bytes:
    return rig.reporter.key_write(1000 + i, i, redundancy=n)


def test_config_checks_and_defaults():
    info = RoceResponder(make_memory(setup), COLLECTOR_MAC, COLLECTOR_IP).connect_info()
    assert TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP).window == 0  # the engine: off, as before
    # well above the collector's ACK coalescing (16) at 4 requests per report, and inside c1's
    # receive ring (2048 frames, netstack.io.packet.RING_FRAMES) with a margin, also once a
    # time-out has added its probes on top of a window still queued there
    assert DEFAULT_WINDOW > 16 * 4
    assert DEFAULT_WINDOW + max(PROBE_WINDOW, DEFAULT_WINDOW // 8) <= RING_FRAMES * 7 // 8
    cfg = TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP, window=8)
    assert cfg.window_timeout_ns == DEFAULT_WINDOW_TIMEOUT_NS
    for bad in ({"window": -1}, {"window": 1 << 22}, {"window": 8, "window_timeout_ns": 0},
                {"window_timeout_ns": -5}, {"window": True}):
        with pytest.raises(ValueError):
            TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP, **bad)


def test_window_off_is_the_old_behaviour():
    """No window: no AckReq, nothing refused however many requests are in flight."""
    rig = Rig(setup)
    frames = []
    for i in range(100):
        frames += rig.tr.on_report(rig.reporter.frame(kw(rig, i)), 0)
    assert len(frames) == 400 and rig.tr.c.window_dropped == 0
    assert not any(parse_roce_frame(f).bth.ackreq for f in frames)


def test_a_full_window_drops_whole_reports_before_they_become_requests():
    rig = Rig(setup, window=32, window_timeout_ns=TIMEOUT)
    frames = []
    for i in range(20):  # nothing delivered: no ACK comes back
        frames += rig.tr.on_report(rig.reporter.frame(kw(rig, i)), 0)
    c = rig.tr.c
    assert len(frames) == 32 and c.keywrite == 8 and c.window_dropped == 12
    assert outstanding(rig.tr, "keywrite") == 32
    assert c.reports == c.keywrite + c.window_dropped
    # AckReq every window // 8 = 4 requests, and on the ones that nearly fill the window
    acks = [parse_roce_frame(f).bth.ackreq for f in frames]
    assert all(acks[i] for i in range(3, 32, 4)) and all(acks[28:])
    # the collector gets them: its ACKs open the window, and reports flow again
    rig.deliver(frames, 0)
    assert outstanding(rig.tr, "keywrite") == 0 and c.acks > 0
    rig.send(kw(rig, 99), 0)
    assert c.keywrite == 9 and c.window_timeouts == 0 and c.resyncs == 0


def test_append_entries_wait_and_only_the_one_completing_a_batch_can_be_dropped():
    rig = Rig(setup, window=8, window_timeout_ns=TIMEOUT, append_flush_ns=None)
    frames = []
    for i in range(40):
        frames += rig.tr.on_report(rig.reporter.frame(rig.reporter.append(1, i)), 0)
    c = rig.tr.c
    assert len(frames) == 8 and c.append_batches == 8
    assert c.append + c.window_dropped == 40 and c.window_dropped == 40 - 8 * 4 - 3
    assert rig.tr.counters()["lists"]["1"]["buffered"] == 3  # the head never moves past an unwritten batch
    rig.deliver(frames, 0)
    assert rig.tr.append_head(1) == 32


def test_an_idle_flush_waits_for_room_and_next_deadline_points_at_the_time_out():
    rig = Rig(setup, window=8, window_timeout_ns=TIMEOUT, append_flush_ns=MS)
    frames = []
    for i in range(32):
        frames += rig.tr.on_report(rig.reporter.frame(rig.reporter.append(1, i)), 0)
    frames += rig.tr.on_report(rig.reporter.frame(rig.reporter.append(1, 99)), 0)  # 1 entry, idle
    assert len(frames) == 8
    assert rig.tr.on_timer(MS) == []  # flush due, window full: waits
    assert rig.tr.next_deadline() == TIMEOUT
    late = rig.tr.on_timer(TIMEOUT)  # no ACK for 5 ms: the window re-opens and the flush goes out
    assert len(late) == 1 and rig.tr.c.window_timeouts == 1 and rig.tr.c.append_flushes == 1


def test_lost_acks_time_out_without_a_resync():
    """Every response lost: the window fills, stays full until the time-out, then the QP goes
    back to una; the collector sees duplicates, never a PSN gap."""
    rig = Rig(setup, window=16, window_timeout_ns=TIMEOUT, grace_reports=100)
    now = 0
    for i in range(200):
        now += 100_000  # 0.1 ms per report
        for f in rig.tr.on_report(rig.reporter.frame(kw(rig, i, 1)), now):
            rig.nic.receive(f, now)  # executed; the responses are lost
    c = rig.tr.c
    assert c.window_timeouts >= 3 and c.resyncs == 0 and c.grace_dropped == 0
    q = rig.nic.qp("keywrite").c
    assert q.naks_psn == 0 and q.duplicates > 0
    assert outstanding(rig.tr, "keywrite") <= 16
    assert c.reports == c.keywrite + c.window_dropped


def test_a_lost_request_and_its_lost_nak_do_not_stall_the_queue_pair():
    """The case the old code could not leave (docs/dta.md, Limitations): the collector NAKs a
    gap once and then drops everything out of sequence; the NAK is lost. The time-out goes back
    to una, which the collector expects: collection resumes with no reconnection."""
    rig = Rig(setup, window=16, window_timeout_ns=TIMEOUT, grace_reports=100)
    now = 0
    lost = {"request": False, "nak": False}
    executed_before = None
    for i in range(300):
        now += 100_000
        for f in rig.tr.on_report(rig.reporter.frame(kw(rig, i, 1)), now):
            if i == 10 and not lost["request"]:
                lost["request"] = True
                continue
            for r in rig.nic.receive(f, now):
                resp = parse_roce_frame(r)
                if resp.aeth is not None and resp.aeth.syndrome >> 5 == 3 and not lost["nak"]:
                    lost["nak"] = True  # the sequence NAK never arrives
                    executed_before = rig.nic.qp("keywrite").c.writes
                    continue
                rig.tr.on_roce_response(r, now)
    assert lost == {"request": True, "nak": True}
    q = rig.nic.qp("keywrite").c
    assert q.out_of_sequence_dropped > 0 and rig.tr.c.window_timeouts >= 1 and rig.tr.c.resyncs == 0
    assert q.writes > executed_before + 200  # collecting again


def test_a_slow_collector_is_paced_not_overrun():
    """A collector taking one request per 20 us behind a 64-frame buffer, reports every 2 us:
    without a window the buffer overflows (PSN gaps, resyncs, grace drops); with one, nothing
    is lost on the way and no resync happens."""
    def run(window: int) -> tuple[DTATranslator, int]:
        mem = make_memory(setup)
        nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(3))
        tr = DTATranslator(TranslatorConfig(nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP, window=window,
                                            window_timeout_ns=TIMEOUT, grace_reports=50))
        bind(nic, tr)
        rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
        buf: deque[bytes] = deque()
        served_at = 0
        for i in range(20_000):
            now = i * 2_000
            for f in tr.on_report(rep.frame(rep.key_write(i, i, redundancy=4)), now):
                if len(buf) < 64:
                    buf.append(f)
            while buf and served_at + 20_000 <= now:
                served_at += 20_000
                for r in nic.receive(buf.popleft(), now):
                    tr.on_roce_response(r, now)
            served_at = max(served_at, now - 20_000)
        return tr, nic.qp("keywrite").c.writes

    (off, off_writes), (on, on_writes) = run(0), run(48)
    assert off.c.resyncs > 10 and off.c.grace_dropped > 0
    assert on.c.resyncs == 0 and on.c.grace_dropped == 0 and on.c.window_dropped > 0
    # the collector executes one request per 20 us: 2000 in the run; with the window nearly all
    # of them carry a new report (4 WRITEs each), without it the resyncs waste most of them
    assert on_writes >= 1900 and on.c.keywrite * 4 >= 1900
    assert on_writes > 4 * off_writes  # without: the collapse of docs/dta.md (about 10 %)


def test_after_a_time_out_only_the_probe_window_goes_out_until_an_answer():
    rig = Rig(setup, window=64, window_timeout_ns=TIMEOUT, grace_reports=100)
    tr = rig.tr
    held = []
    for i in range(16):  # 64 requests, none delivered: the window is full
        held += tr.on_report(rig.reporter.frame(kw(rig, i)), 0)
    assert outstanding(tr, "keywrite") == 64 and tr.requester.probe_window == 16
    for f in held:
        rig.nic.receive(f, 0)  # the collector has them all; its ACKs are lost
    probes = []
    for i in range(16, 40):
        probes += tr.on_report(rig.reporter.frame(kw(rig, i)), TIMEOUT)
    assert tr.c.window_timeouts == 1 and tr.c.window_rewound == 64 and len(probes) == 16
    assert all(parse_roce_frame(f).bth.ackreq for f in probes)  # each asks for an answer
    rig.deliver(probes, TIMEOUT)  # duplicates for the collector: acknowledged, never executed
    assert rig.nic.qp("keywrite").c.duplicates == 16 and rig.nic.qp("keywrite").c.naks_psn == 0
    qp = tr.qps["keywrite"]
    assert not qp.probing and qp.psn == qp.una  # answered: the whole window again, from una
    for i in range(100, 113):  # 48 more duplicates (what the lost ACKs covered), then in sequence
        rig.deliver(tr.on_report(rig.reporter.frame(kw(rig, i)), TIMEOUT), TIMEOUT)
    c = rig.nic.qp("keywrite").c
    assert c.duplicates == 64 and c.writes == 64 + 4 and c.naks_psn == 0 and tr.c.resyncs == 0


def test_dta_enable_and_the_cli_carry_the_window():
    from netstack.cli import build_parser
    from netstack.dta import control

    from .test_live_units import FakeShell, _info

    h = control.switch_handlers(FakeShell())
    _, _, info = _info()
    out = h["dta_enable"]({"port": "p-c1", "connect_info": info})
    assert out["config"]["window"] == DEFAULT_WINDOW and out["config"]["window_timeout_ns"] == DEFAULT_WINDOW_TIMEOUT_NS
    out = h["dta_enable"]({"port": "p-c1", "connect_info": info, "window": 0, "window_timeout_ms": 7})
    assert out["config"]["window"] == 0 and out["config"]["window_timeout_ns"] == 7_000_000
    a = build_parser().parse_args(["dta", "enable", "--window", "64", "--window-timeout-ms", "2.5"])
    assert (a.window, a.window_timeout_ms) == (64, 2.5)


def test_counters_and_status_keys_only_grow():
    rig = Rig(setup, window=32, window_timeout_ns=TIMEOUT)
    c = rig.tr.counters()
    for k in ("window_dropped", "window_timeouts", "window_rewound", "window_held", "resyncs", "grace_dropped"):
        assert k in c
    assert {"qpn", "psn", "frames", "resyncs", "outstanding", "window_timeouts"} <= set(c["qps"]["keywrite"])


# --------------------------------------------------------------------------- stateful


class WindowMachine(RuleBasedStateMachine):
    """Reports, deliveries (in order, each frame possibly lost), responses (possibly lost) and
    time, interleaved arbitrarily; the collector is the real responder."""

    @initialize(window=st.sampled_from([4, 8, 17, 64]), policy=st.sampled_from(["once", "every"]),
                ack_every=st.sampled_from([0, 1, 3]), grace=st.sampled_from([0, 3]))
    def setup(self, window, policy, ack_every, grace):
        self.window = window
        self.nic = RoceResponder(make_memory(setup), COLLECTOR_MAC, COLLECTOR_IP, nak_policy=policy,
                                 rng=random.Random(7))
        self.tr = DTATranslator(TranslatorConfig(self.nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP,
                                                 window=window, window_timeout_ns=TIMEOUT, ack_every=ack_every,
                                                 grace_reports=grace, append_flush_ns=MS))
        bind(self.nic, self.tr)
        self.rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
        self.now = 0
        self.to_nic: deque[bytes] = deque()
        self.to_tr: deque[bytes] = deque()
        self.i = 0

    def _qp_of(self, kind: str) -> str:
        return {"kw": "keywrite", "ki": "keyincrement", "ap": "append-1"}[kind]

    @rule(kind=st.sampled_from(["kw", "ki", "ap"]), n=st.integers(1, 4))
    def report(self, kind, n):
        self.i += 1
        p = (self.rep.key_write(self.i, self.i, redundancy=n) if kind == "kw" else
             self.rep.key_increment(self.i, 1, redundancy=min(n, 4)) if kind == "ki" else self.rep.append(1, self.i))
        dropped = self.tr.c.window_dropped
        self.to_nic.extend(self.tr.on_report(self.rep.frame(p), self.now))
        if self.tr.c.window_dropped > dropped:  # refused: only while the window is not overdue
            qp = self.tr.qps[self._qp_of(kind)]
            assert self.now - qp.progress_at < TIMEOUT or n > self.tr.requester.probe_window

    @rule(k=st.integers(1, 40), lose=st.integers(0, 100))
    def deliver_requests(self, k, lose):
        for _ in range(min(k, len(self.to_nic))):
            f = self.to_nic.popleft()
            if lose and (lose + len(self.to_nic)) % 7 == 0:
                continue  # lost on the way (or in the collector's socket)
            self.to_tr.extend(self.nic.receive(f, self.now))

    @rule(k=st.integers(1, 40), lose=st.booleans())
    def deliver_responses(self, k, lose):
        for _ in range(min(k, len(self.to_tr))):
            r = self.to_tr.popleft()
            if lose:
                continue
            self.to_nic.extend(self.tr.on_roce_response(r, self.now))

    @rule(dt=st.sampled_from([1_000, 100_000, MS, TIMEOUT, 3 * TIMEOUT]))
    def time_passes(self, dt):
        self.now += dt
        deadline = self.tr.next_deadline()
        if deadline is not None and deadline <= self.now:
            self.to_nic.extend(self.tr.on_timer(self.now))

    @invariant()
    def never_more_than_window_outstanding(self):
        if not hasattr(self, "tr"):
            return
        for name in self.tr.qps:
            assert outstanding(self.tr, name) <= self.window, name

    @invariant()
    def every_report_is_accounted_for(self):
        if not hasattr(self, "tr"):
            return
        c = self.tr.c
        assert c.reports == c.keywrite + c.keyincrement + c.append + c.window_dropped + c.grace_dropped
        assert c.internal_errors == 0 and self.nic.c.internal_errors == 0

    @rule()
    def heal(self):
        """Losses stop: within a bounded number of reports, each delivered with its responses,
        and the time-out between them, the collector executes Key-Writes again."""
        self.to_nic.clear()
        self.to_tr.clear()
        qc = self.nic.qp("keywrite").c
        before = qc.writes
        for _ in range(2 * self.window + 10):
            self.now += TIMEOUT
            self.i += 1
            frames = deque(self.tr.on_report(self.rep.frame(self.rep.key_write(self.i, 1, redundancy=1)), self.now))
            while frames:
                for r in self.nic.receive(frames.popleft(), self.now):
                    frames.extend(self.tr.on_roce_response(r, self.now))
            if qc.writes > before:
                return
        raise AssertionError("the Key-Write QP never came back")


TestWindowMachine = WindowMachine.TestCase
TestWindowMachine.settings = settings(max_examples=60, stateful_step_count=60, deadline=None,
                                      suppress_health_check=[HealthCheck.too_slow])
