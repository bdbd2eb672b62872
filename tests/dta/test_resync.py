"""Queue-pair resynchronisation ("Direct Telemetry Access", §5.3, §8.5, Fig. 11) in a
discrete-event model.

The paper's experiment: a Key-Write stream keeps the translator busy while an Append stream
writes incrementing values into one list; gaps in the list show desynchronisation. Here:

    reports --> translator --(link, delay D)--> NIC buffer --> responder
                    ^                                              |
                    +---------------(link, delay D)---- ACK/NAK ---+

One Append WRITE is lost on the wire. Every Append WRITE the translator emitted before the
NAK reached it is still in flight (on the link or in the NIC buffer) with a now-stale PSN;
the NIC (``nak_policy="every"``) NAKs each of them. If the translator's grace period ends
while those stale NAKs are still coming, each one rewinds the freshly resumed PSN again, and
values sent *after* the resynchronisation are lost (duplicates at the NIC). A grace period
that outlasts the stale frames resynchronises once and for all.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from headers.roce import parse_roce_frame
from netstack.dta import (
    BufferedResponder,
    CollectorQuery,
    DTATranslator,
    Reporter,
    RoceResponder,
    TranslatorConfig,
)

from . import (
    COLLECTOR_IP,
    COLLECTOR_MAC,
    MS,
    REPORTER_IP,
    REPORTER_MAC,
    TRANSLATOR_IP,
    TRANSLATOR_MAC,
    make_memory,
)

US = 1000
TICK = 10 * US  # one report every 10 us; every 10th is an Append (value = its index)
LINK_DELAY = MS  # each way: about 20 Append WRITEs are in flight when the loss is noticed
LOST_VALUE = 20


@dataclass
class Run:
    listed: list[int]
    emitted: list[tuple[int, int]]  # (time, value) of every Append WRITE the translator sent
    grace_ends: list[int]
    translator: DTATranslator
    nic: RoceResponder
    keywrite_ok: int
    keys: list[int] = field(default_factory=list)


def simulate(grace_reports: int, duration: int = 40 * MS, nak_policy: str = "every") -> Run:
    mem = make_memory(lambda m: (m.add_keywrite(slots=1 << 18, max_redundancy=1),
                                 m.add_append_list(9, entries=1 << 12, batch=1)))
    nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, nak_policy=nak_policy, rng=random.Random(1))
    buf = BufferedResponder(nic, capacity=1 << 16, service_ns=5 * US)
    tr = DTATranslator(TranslatorConfig(nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP,
                                        grace_reports=grace_reports, append_flush_ns=None))
    nic.bind(TRANSLATOR_MAC, TRANSLATOR_IP)  # the QPs' peer (enable_translator's bind step)
    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    append_qpn = nic.qp("append-9").qpn
    events: list[tuple[int, int, str, object]] = []
    seq = 0

    def push(t, kind, data=None):
        nonlocal seq
        seq += 1
        heapq.heappush(events, (t, seq, kind, data))

    for i in range(duration // TICK):
        push(i * TICK, "tick", i)
    emitted: list[tuple[int, int]] = []
    grace_ends: list[int] = []
    keys: list[int] = []
    dropped = False
    was_in_grace = False
    rng = random.Random(2)
    while events:
        t, _, kind, data = heapq.heappop(events)
        if kind == "tick":
            i = data
            if i % 10 == 0:
                payload = rep.append(9, i // 10)
            else:
                key = rng.getrandbits(32)
                keys.append(key)
                payload = rep.key_write(key, key ^ 0xFFFF, 1)
            for f in tr.on_report(rep.frame(payload), t):
                rf = parse_roce_frame(f)
                if rf.bth.dqpn == append_qpn:
                    value = int.from_bytes(rf.payload, "big")
                    emitted.append((t, value))
                    if value == LOST_VALUE and not dropped:
                        dropped = True  # the induced gap: lost on the wire
                        continue
                push(t + LINK_DELAY, "nic", f)
        elif kind == "nic":
            buf.offer(data, t)
            push(buf.next_deadline(), "poll")
        elif kind == "poll":
            for served_at, resp in buf.poll(t):
                push(served_at + LINK_DELAY, "resp", resp)
            if buf.next_deadline() is not None:
                push(buf.next_deadline(), "poll")
        else:
            tr.on_roce_response(data, t)
        if was_in_grace and not tr.in_grace:
            grace_ends.append(t)
        was_in_grace = tr.in_grace
    q = CollectorQuery(mem)
    ok = sum(q.keywrite_get(k, redundancy=1) == (k ^ 0xFFFF,) for k in keys[-200:])
    return Run(q.append_read(9), emitted, grace_ends, tr, nic, ok, keys)


def lost_after(run: Run, t0: int) -> list[int]:
    """Values the translator sent after ``t0`` that never made it into the list."""
    listed = set(run.listed)
    return [v for t, v in run.emitted if t > t0 and v not in listed]


def test_induced_gap_is_resynchronised_after_an_adequate_grace_period():
    run = simulate(grace_reports=40)
    tr, nic = run.translator, run.nic
    stale = nic.qp("append-9").c.naks_psn
    assert stale >= 15  # every in-flight Append WRITE behind the lost one was NAK'd
    assert tr.c.resyncs == stale and tr.c.grace_periods == 1  # each NAK re-armed the one grace period
    assert len(run.grace_ends) == 1
    assert lost_after(run, run.grace_ends[0]) == []  # from the resync on, nothing is lost
    assert run.listed[-1] == max(v for _, v in run.emitted)  # the list is live again to the end
    assert run.keywrite_ok == 200  # and so is Key-Write
    # the loss is confined to the values in flight around the gap, plus those the grace dropped
    missing = sorted(set(range(max(run.listed) + 1)) - set(run.listed))
    assert missing[0] == LOST_VALUE and max(missing) < LOST_VALUE + 60


def test_too_short_a_grace_period_fails_to_resynchronise_cleanly():
    run = simulate(grace_reports=3)
    tr = run.translator
    # the grace period ends between stale NAKs: each late NAK rewinds a PSN that was already good
    assert tr.c.grace_periods > 3 and len(run.grace_ends) > 3
    lost = lost_after(run, run.grace_ends[0])
    assert len(lost) >= 3  # values sent after the "resynchronisation" vanished as duplicates
    assert run.nic.qp("append-9").c.duplicates >= 3


def test_no_grace_at_all_also_loses_data_after_the_first_nak():
    run = simulate(grace_reports=0)
    assert run.translator.c.grace_periods == 0 and run.translator.c.resyncs >= 15
    resumed = [v for t, v in run.emitted if v > LOST_VALUE + 25]
    assert set(resumed) - set(run.listed)  # some post-resync values are lost


def test_a_nak_once_nic_makes_stale_frames_harmless():
    """With an IBTA responder that NAKs once per sequence error, the stale frames are dropped
    silently and even a short grace period resynchronises cleanly: the failure mode above needs
    a NIC that keeps NAKing (documented in netstack.dta.collector)."""
    run = simulate(grace_reports=3, nak_policy="once")
    assert run.translator.c.resyncs == 1 and len(run.grace_ends) == 1
    assert lost_after(run, run.grace_ends[0]) == []
