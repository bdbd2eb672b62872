"""The translator: frames it emits, round trips of every primitive, NACKs, grace, refusals."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.l2 import Ether

import headers.layers.dta  # noqa: F401  (binds the DTA layers for dissection)
import headers.layers.roce as L
from headers.dta import DTANack, MergeFunction, parse_nack_frame
from headers.inet import build_udp_frame
from headers.roce import (
    BTH,
    AtomicAckETH,
    NakCode,
    Opcode,
    aeth_ack,
    aeth_nak,
    build_roce_frame,
    icrc_of,
    parse_roce_frame,
)
from netstack.dta import DTATranslator, Reporter, SketchReporter, TranslatorConfig

from . import COLLECTOR_IP, COLLECTOR_MAC, MS, REPORTER_IP, REPORTER_MAC, TRANSLATOR_IP, TRANSLATOR_MAC, Rig, bind

U32 = st.integers(0, 0xFFFFFFFF)

report_strategy = st.one_of(
    st.tuples(st.just("kw"), U32, U32, st.integers(1, 6)),
    st.tuples(st.just("ki"), U32, st.integers(0, (1 << 64) - 1), st.integers(1, 6)),
    st.tuples(st.just("ap"), st.sampled_from([1, 1, 1, 2]), U32, st.just(0)),
)


def send_report(rig, r, now=0):
    kind, a, b, n = r
    if kind == "kw":
        return rig.send(rig.reporter.key_write(a, b, n), now)
    if kind == "ki":
        return rig.send(rig.reporter.key_increment(a, b, n), now)
    return rig.send(rig.reporter.append(a, b), now)


def check_frame(f, rig):
    rf = parse_roce_frame(f)
    assert rf.icrc_ok
    assert rf.eth.src == TRANSLATOR_MAC and rf.eth.dst == COLLECTOR_MAC
    assert rf.ip.src == TRANSLATOR_IP and rf.ip.dst == COLLECTOR_IP and rf.udp.dport == 4791
    assert rf.bth.pkey == 0xFFFF and rf.bth.migreq == 1 and rf.bth.ackreq == 0 and rf.bth.padcount == 0
    assert rf.bth.opcode in (Opcode.RDMA_WRITE_ONLY, Opcode.FETCH_ADD)
    return rf


@settings(max_examples=40)
@given(st.lists(report_strategy, min_size=1, max_size=25), st.integers(0, 2))
def test_every_emitted_frame_is_valid_rocev2_and_dissects_in_scapy(reports, flush_ms):
    rig = Rig(append_flush_ns=MS)
    for r in reports:
        send_report(rig, r)
    rig.timer(flush_ms * MS)
    for rid in (1, 2, 3):  # a whole Sketch-Merge epoch: three batched WRITEs in the rotated layout
        sr = SketchReporter(rig.reporter, rid, 7, 3, 10)
        sr.start_epoch([[rid * c for c in range(10)] for _ in range(3)])
        rig.send_all(sr.poll(0))
    psns: dict[int, list[int]] = {}
    for f in rig.emitted:
        rf = check_frame(f, rig)
        psns.setdefault(rf.bth.dqpn, []).append(rf.bth.psn)
        pkt = Ether(f)
        bth = pkt[L.BTH]
        assert bth.opcode == rf.bth.opcode and bth.dqpn == rf.bth.dqpn and bth.psn == rf.bth.psn
        assert bth.icrc == L.icrc_field(icrc_of(f))
        if rf.reth is not None:
            assert pkt[L.RETH].va == rf.reth.va and pkt[L.RETH].rkey == rf.reth.rkey
            assert pkt[L.RETH].dma_len == len(rf.payload)
        else:
            assert pkt[L.AtomicETH].swap_add == rf.atomic_eth.swap_add
    for qp in rig.nic.qps.values():  # per-QP PSNs are consecutive from the collector's initial PSN
        got = psns.get(qp.qpn, [])
        assert got == [(qp.initial_psn + i) & 0xFFFFFF for i in range(len(got))]
    c = rig.nic.counters()
    assert all(q["naks_psn"] == q["naks_access"] == q["naks_invalid"] == 0 for q in c["qps"].values())
    assert rig.tr.c.internal_errors == 0


# ---------------------------------------------------------------------------------- Key-Write
def test_keywrite_round_trip_and_redundancy_cap():
    rig = Rig(max_redundancy=3)
    rig.send(rig.reporter.key_write(0xABCD, 77, 2))
    assert len(rig.emitted) == 2 and rig.q.keywrite_get(0xABCD) == (77,)
    assert rig.q.keywrite_candidates(0xABCD, 4)[:2] == [(77,), (77,)]
    rig.send(rig.reporter.key_write(0xABCD, 78, 9))  # N = 9 capped at 3
    assert len(rig.emitted) == 5 and rig.tr.c.redundancy_capped == 1
    assert rig.q.keywrite_get(0xABCD, consensus=3) == (78,)
    assert rig.q.keywrite_get(0x1234) is None


# ---------------------------------------------------------------------------------- Append
def append_rig(entries=16, batch=4, **kw):
    return Rig(lambda m: m.add_append_list(5, entries=entries, batch=batch), **kw)


def test_append_order_wrap_and_partial_batch_flush():
    rig = append_rig(append_flush_ns=2 * MS)
    for v in range(10):
        rig.send(rig.reporter.append(5, 100 + v), now=v)
    assert rig.q.append_read(5) == list(range(100, 108))  # two full batches
    assert len(rig.emitted) == 2 and rig.tr.next_deadline() == 8 + 2 * MS
    rig.timer(2 * MS)  # not yet: the oldest buffered entry arrived at t=8
    assert len(rig.emitted) == 2
    rig.timer(3 * MS)  # idle partial batch flushed in place
    assert rig.q.append_read(5) == list(range(100, 110)) and rig.tr.next_deadline() is None
    flush = parse_roce_frame(rig.emitted[-1])
    assert flush.reth.dma_len == 8 and rig.tr.append_head(5) == 8  # head moves only with a full batch
    rig.send(rig.reporter.append(5, 110), now=4 * MS)
    rig.send(rig.reporter.append(5, 111), now=4 * MS)  # completes the batch: writes only the 2 new entries
    last = parse_roce_frame(rig.emitted[-1])
    assert last.reth.dma_len == 8 and last.reth.va == rig.mem.region("append-5").base_va + 10 * 4
    assert rig.q.append_read(5) == list(range(100, 112)) and rig.tr.append_head(5) == 12
    for v in range(112, 142):  # wrap the 16-entry ring twice
        rig.send(rig.reporter.append(5, v), now=5 * MS)
    assert rig.q.append_read(5) == list(range(124, 140))  # the ring holds the 16 newest written
    assert rig.q.append_read(5, last=3) == [137, 138, 139]
    rig.timer(10 * MS)
    assert rig.q.append_read(5, last=4) == [138, 139, 140, 141]
    assert rig.tr.c.append_flushes == 2 and rig.q.append_read(5, last=0) == []


def test_append_read_after_a_re_enable_returns_the_newest_entries():
    """Issue 33: a re-enabled translator restarts the head at 0; with fewer than a ring's worth
    written since, the newest entries are the ones below the last WRITE's end, not the old top."""
    rig = append_rig(entries=1024, batch=1, append_flush_ns=None)
    for v in range(800):
        rig.send(rig.reporter.append(5, v))
    info = rig.nic.connect_info()  # `netstack dta enable` again: the daemon's connect_info (current PSNs)
    for entry in info["regions"]:
        entry["initial_psn"] = rig.nic.qp(entry["name"]).epsn
    rig.tr = DTATranslator(TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP, grace_reports=0))
    bind(rig.nic, rig.tr)  # a fresh translator: its heads restart at 0
    for v in range(9000, 9005):
        rig.send(rig.reporter.append(5, v))
    assert rig.tr.append_head(5) == 5
    assert rig.q.append_read(5, last=8) == [797, 798, 799, 9000, 9001, 9002, 9003, 9004]
    assert rig.q.append_read(5) == list(range(5, 800)) + list(range(9000, 9005))  # every entry once, oldest first


@pytest.mark.parametrize("batch", [1, 2, 4, 8, 16])
def test_append_batch_sizes_one_write_per_batch(batch):
    rig = append_rig(entries=64, batch=batch, append_flush_ns=None)
    for v in range(48):
        rig.send(rig.reporter.append(5, v))
    assert len(rig.emitted) == 48 // batch
    assert all(parse_roce_frame(f).reth.dma_len == 4 * batch for f in rig.emitted)
    assert rig.q.append_read(5) == list(range(48))
    assert rig.tr.next_deadline() is None  # flushing disabled, as the public translator


def test_append_unknown_list_is_refused():
    rig = append_rig()
    rig.send(rig.reporter.append(6, 1))
    assert rig.tr.c.unknown_list == 1 and rig.emitted == []


# ---------------------------------------------------------------------------------- Key-Increment
def test_key_increment_is_exact_without_loss():
    rig = Rig(lambda m: m.add_keyincrement(slots=1 << 16, max_redundancy=2))
    rng = random.Random(7)
    keys = rng.sample(range(1 << 32), 60)
    totals = dict.fromkeys(keys, 0)
    for _ in range(600):
        k = rng.choice(keys)
        inc = rng.randrange(1, 1 << 40)
        totals[k] += inc
        rig.send(rig.reporter.key_increment(k, inc, 2))
    assert all(rig.q.counter_get(k) == totals[k] for k in keys)
    assert rig.tr.c.fetch_adds == 1200 and len(rig.responses) == 1200
    origs = [parse_roce_frame(r).atomic_ack_eth.orig_remote_data for r in rig.responses]
    assert origs[0] == 0 and rig.tr.c.acks == 1200


def test_key_increment_count_min_never_underestimates():
    rig = Rig(lambda m: m.add_keyincrement(slots=64, max_redundancy=3))
    rng = random.Random(8)
    totals: dict[int, int] = {}
    for _ in range(400):
        k = rng.randrange(200)
        totals[k] = totals.get(k, 0) + 1
        rig.send(rig.reporter.key_increment(k, 1, 3))
    assert all(rig.q.counter_get(k) >= v for k, v in totals.items())


# ---------------------------------------------------------------------------------- Sketch-Merge
def sketch_rig(merge="sum", reporters=(1, 2, 3), rows=4, columns=10, batch_columns=4, epochs=1, **kw):
    return Rig(lambda m: m.add_sketch(9, rows=rows, columns=columns, merge=merge, reporters=reporters,
                                      batch_columns=batch_columns, epochs=epochs), **kw)


def random_matrix(rng, rows, cols, bits=20):
    return [[rng.getrandbits(bits) for _ in range(cols)] for _ in range(rows)]


@pytest.mark.parametrize("merge", ["sum", "max"])
def test_sketch_merge_with_a_lost_column_and_nack_retransmission(merge):
    rig = sketch_rig(merge)
    rng = random.Random(merge == "max")
    mf = MergeFunction.SUM if merge == "sum" else MergeFunction.MAX
    mats = {rid: random_matrix(rng, 4, 10) for rid in (1, 2, 3)}
    reps = {rid: SketchReporter(Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP), rid, 9, 4, 10, mf)
            for rid in (1, 2, 3)}
    for rid, sr in reps.items():
        sr.start_epoch(mats[rid])
    lost = {"done": False}
    now = 0
    while not all(sr.done for sr in reps.values()) and now < 100 * MS:
        for rid, sr in reps.items():
            for p in sr.poll(now, budget=2):  # interleaved reporters, two columns each per round
                frame = rig.reporter.frame(p)
                if rid == 2 and not lost["done"] and frame_column(p) == 3:
                    lost["done"] = True  # the report is lost on its way to the translator
                    continue
                for nack in rig.deliver(rig.tr.on_report(frame, now), now):
                    sr.on_nack(nack, now)
            for p in sr.on_timer(now):
                for nack in rig.deliver(rig.tr.on_report(rig.reporter.frame(p), now), now):
                    sr.on_nack(nack, now)
        now += MS // 2
    agg = max if merge == "max" else (lambda *v: sum(v))
    expect = [[agg(*(mats[rid][r][c] for rid in (1, 2, 3))) for c in range(10)] for r in range(4)]
    assert rig.q.sketch_matrix(9) == expect
    assert rig.tr.c.sketch_nacks >= 1 and reps[2].c.rewinds >= 1
    nack = parse_nack_frame(rig.nacks[0])[1]
    assert nack.sketch == 1 and nack.reporter_id == 2 and nack.sketch_id == 9 and nack.expected_column == 3
    assert rig.tr.c.sketch_writes == 3 and rig.tr.c.writes == 3  # groups of 4, 4, 2 columns: one WRITE each
    assert rig.tr.c.sketch_columns_completed == 10


def frame_column(payload):
    from headers.dta import decode_report

    return decode_report(payload)[1].column


def test_sketch_rotated_layout_point_query_and_saturation():
    rig = sketch_rig(reporters=(1, 2), rows=3, columns=8, batch_columns=8)
    from netstack.dta import CountMinSketch

    s1, s2 = CountMinSketch(3, 8), CountMinSketch(3, 8)
    for k in range(30):
        s1.add(k, k + 1)
        s2.add(k, 2)
    s2.matrix[0][0] = 0xFFFFFFFF  # saturating sum, not wrap-around
    for rid, s in ((1, s1), (2, s2)):
        sr = SketchReporter(rig.reporter, rid, 9, 3, 8)
        sr.start_epoch(s.matrix)
        rig.send_all(sr.poll(0))
    assert rig.tr.c.writes == 1
    m = rig.q.sketch_matrix(9)
    assert m[0][0] == 0xFFFFFFFF
    raw = rig.mem.region("sketch-9").read(0, 12)  # column 0's three rows are contiguous (Fig. 5d)
    assert raw == b"".join(m[r][0].to_bytes(4, "big") for r in range(3))
    for k in range(30):
        assert rig.q.sketch_point(9, k) >= k + 3  # count-min: never below the true merged count


def test_sketch_epochs_continue_the_column_sequence():
    rig = sketch_rig(reporters=(1, 2), rows=2, columns=4, batch_columns=2, epochs=2)
    rng = random.Random(3)
    srs = {rid: SketchReporter(rig.reporter, rid, 9, 2, 4) for rid in (1, 2)}
    for epoch in range(3):
        mats = {rid: random_matrix(rng, 2, 4) for rid in (1, 2)}
        for rid, sr in srs.items():
            sr.start_epoch(mats[rid])
            rig.send_all(sr.poll(0))
        expect = [[mats[1][r][c] + mats[2][r][c] for c in range(4)] for r in range(2)]
        assert rig.q.sketch_matrix(9, epoch=epoch) == expect
    assert rig.tr.c.sketch_nacks == 0


def test_sketch_tail_loss_is_repaired_by_the_probe():
    rig = sketch_rig(reporters=(1,), rows=2, columns=4, batch_columns=4)
    sr = SketchReporter(rig.reporter, 1, 9, 2, 4, probe_interval_ns=MS, probes=2)
    sr.start_epoch([[1, 2, 3, 4], [5, 6, 7, 8]])
    payloads = sr.poll(0)
    rig.send_all(payloads[:-1])  # the last column is lost
    assert rig.tr.c.writes == 0 and sr.next_deadline() == MS
    assert sr.on_timer(MS // 2) == []
    rig.send_all(sr.on_timer(MS), now=MS)
    assert rig.q.sketch_matrix(9) == [[1, 2, 3, 4], [5, 6, 7, 8]]
    rig.send_all(sr.on_timer(2 * MS), now=2 * MS)  # the second probe is a harmless duplicate
    assert sr.done and rig.tr.c.sketch_duplicates == 1 and rig.tr.c.writes == 1


def test_sketch_refusals_and_first_column_rule():
    rig = sketch_rig(reporters=(1, 2), rows=2, columns=4)
    r = rig.reporter
    rig.send(r.sketch_merge(3, 9, 0, [1, 2]))  # unknown reporter
    rig.send(r.sketch_merge(1, 8, 0, [1, 2]))  # unknown sketch
    rig.send(r.sketch_merge(1, 9, 0, [1, 2, 3]))  # wrong row count
    rig.send(r.sketch_merge(1, 9, 0, [1, 2], MergeFunction.MAX))  # wrong merge function
    (nack,) = rig.send(r.sketch_merge(1, 9, 6, [1, 2]))  # a first column must start an epoch
    assert parse_nack_frame(nack)[1].expected_column == 4
    assert rig.send(r.sketch_merge(1, 9, 7, [1, 2])) == []  # same expected column: held off
    c = rig.tr.c
    assert (c.sketch_unknown_reporter, c.unknown_sketch, c.sketch_bad_shape, c.sketch_nacks, c.sketch_nacks_held) == (
        1, 1, 2, 1, 1)
    assert rig.emitted == []


def test_silent_reporter_columns_are_eventually_abandoned():
    rig = sketch_rig(reporters=(1, 2), rows=1, columns=2, batch_columns=1)
    for col in range(20):
        rig.send(rig.reporter.sketch_merge(1, 9, col, [1]))  # reporter 2 never reports
    assert rig.tr.c.sketch_columns_abandoned == 12 and rig.tr.counters()["sketches"]["9"]["open_columns"] == 8


# ---------------------------------------------------------------------------------- NACK tracking
def test_retransmittable_reports_gap_nack_and_resend():
    reporter = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP, retransmittable=True)
    rig = append_rig(entries=64, batch=1, reporter=reporter)
    payloads = [reporter.append(5, v) for v in range(10)]
    rig.send_all(payloads[:4])
    (nack,) = rig.send(payloads[5])  # report 4 lost
    n = parse_nack_frame(nack)
    assert n[1] == DTANack(3) and n[0].ip.dst == REPORTER_IP and n[0].ip.src == COLLECTOR_IP
    assert n[0].udp.sport == 40041 and n[0].eth.dst == REPORTER_MAC
    resend = reporter.on_nack(nack)
    assert resend == payloads[4:]  # every kept report after the last one accepted in order
    rig.send_all(resend)
    assert rig.q.append_read(5) == list(range(10)) and rig.tr.c.seq_nacks == 1
    assert reporter.on_nack(b"junk") == [] and reporter.on_nack(DTANack.for_sketch(0, 1, 1, 0)) == []


def test_seqnum_wraps_and_untracked_reports_pass():
    reporter = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP, retransmittable=True)
    rig = append_rig(entries=512, batch=1, reporter=reporter)
    rig.send_all(reporter.append(5, v) for v in range(300))
    assert rig.tr.c.seq_nacks == 0 and len(rig.q.append_read(5)) == 300
    plain = Rig(lambda m: m.add_append_list(5, entries=16, batch=1))
    plain.send(plain.reporter.append(5, 1))
    plain.reporter.seqnum = 77  # without the retransmittable bit nothing is tracked
    plain.send(plain.reporter.append(5, 2))
    assert plain.tr.c.seq_nacks == 0 and plain.q.append_read(5) == [1, 2]


# ---------------------------------------------------------------------------------- resync and grace
def collector_nak(rig, qp_name, psn, code=NakCode.PSN_SEQUENCE_ERROR, src_ip=COLLECTOR_IP, dqpn=None):
    qp = rig.nic.qp(qp_name)
    bth = BTH(opcode=Opcode.ACKNOWLEDGE, migreq=1, dqpn=qp.peer_qpn if dqpn is None else dqpn, psn=psn)
    return build_roce_frame(COLLECTOR_MAC, TRANSLATOR_MAC, src_ip, TRANSLATOR_IP, 49152, bth, [aeth_nak(code, 0)])


def test_gap_resync_with_a_count_grace_period():
    rig = append_rig(entries=64, batch=1, grace_reports=5)
    qp = rig.nic.qp("append-5")
    rig.send(rig.reporter.append(5, 0))
    rig.send(rig.reporter.append(5, 1), drop=lambda f: True)  # lost on the wire
    rig.send(rig.reporter.append(5, 2))  # PSN sequence error -> NAK -> the translator rewinds its PSN
    assert rig.tr.in_grace and rig.tr.c.resyncs == 1 and qp.c.naks_psn == 1
    assert rig.tr.qps["append-5"].psn == qp.epsn
    for v in range(3, 8):
        rig.send(rig.reporter.append(5, v))  # the grace period: 5 reports dropped, no RDMA
    assert rig.tr.c.grace_dropped == 5 and not rig.tr.in_grace
    for v in range(8, 12):
        rig.send(rig.reporter.append(5, v))
    # resynchronised. Entries 1 (lost on the wire) and 2 (NAK'd) had already moved the head: their
    # slots stay empty; the reports dropped during the grace period left no hole
    assert rig.q.append_read(5) == [0, 0, 0, 8, 9, 10, 11]
    assert qp.c.naks_psn == 1 and rig.tr.c.grace_periods == 1


def test_time_grace_holds_sketch_writes_and_releases_them():
    rig = Rig(lambda m: (m.add_sketch(9, rows=1, columns=2, reporters=(1,), batch_columns=2),
                         m.add_append_list(5, entries=16, batch=1)), grace_reports=None, grace_ns=2 * MS)
    rig.send(rig.reporter.append(5, 0), drop=lambda f: True)  # lost on the wire
    rig.send(rig.reporter.append(5, 0))  # draws the NAK: resync, grace period until 2 ms
    assert rig.tr.in_grace
    emitted = len(rig.emitted)
    rig.send(rig.reporter.sketch_merge(1, 9, 0, [5]), now=MS)
    rig.send(rig.reporter.sketch_merge(1, 9, 1, [6]), now=MS)  # merged, its WRITE held
    rig.send(rig.reporter.append(5, 1), now=MS)  # dropped
    assert len(rig.emitted) == emitted and rig.tr.next_deadline() == 2 * MS
    rig.timer(2 * MS)
    assert not rig.tr.in_grace and rig.q.sketch_matrix(9) == [[5, 6]] and rig.tr.c.grace_dropped == 1


def test_further_naks_rearm_the_grace_period():
    rig = append_rig(entries=16, batch=1, grace_reports=3)
    rig.send(rig.reporter.append(5, 0), drop=lambda f: True)  # lost on the wire
    rig.send(rig.reporter.append(5, 0))  # draws the NAK: resync, grace period
    (nak,) = rig.responses
    rig.send_all([rig.reporter.append(5, 1), rig.reporter.append(5, 2)])
    rig.tr.on_roce_response(nak, 0)  # the same NAK again, as a NIC that NAKs every stale request sends it
    rig.send_all([rig.reporter.append(5, v) for v in (3, 4, 5)])
    assert rig.tr.in_grace is False and rig.tr.c.grace_dropped == 5 and rig.tr.c.grace_periods == 1
    assert rig.tr.c.resyncs == 2
    rig.send(rig.reporter.append(5, 6))
    assert rig.q.append_read(5) == [0, 0, 6]


def test_forged_or_irrelevant_responses_do_not_move_the_psn():
    rig = append_rig(entries=16, batch=1, grace_reports=3)
    qp_name = "append-5"
    rig.send_all(rig.reporter.append(5, v) for v in range(3))
    tq = rig.tr.qps[qp_name]
    psn0 = tq.psn  # the next PSN; psn0 - 3 .. psn0 - 1 were sent (and executed)
    bad_icrc = bytearray(collector_nak(rig, qp_name, psn0 - 2))
    bad_icrc[-1] ^= 1
    cases = [
        collector_nak(rig, qp_name, (psn0 + 100) & 0xFFFFFF),  # "expects" a PSN we never sent
        collector_nak(rig, qp_name, psn0),  # "expects" the next PSN: nothing is missing
        collector_nak(rig, qp_name, psn0 - 1),  # a NAK for e needs a later request than e
        collector_nak(rig, qp_name, psn0 - 4),  # before the first PSN of the connection
        collector_nak(rig, qp_name, psn0 - 2, dqpn=0x424242),  # not one of our QPs
        collector_nak(rig, qp_name, psn0 - 2, src_ip=bytes([10, 6, 6, 6])),  # not from the collector
        bytes(bad_icrc),
        b"\x00" * 30,
    ]
    for f in cases:
        assert rig.tr.on_roce_response(f, 0) == []
    c = rig.tr.c
    assert tq.psn == psn0 and not rig.tr.in_grace and c.resyncs == 0
    assert (c.naks_rejected_window, c.response_unknown_qp, c.responses_rejected_source, c.response_icrc_errors,
            c.response_malformed) == (4, 1, 1, 1, 1)
    # responses that are not sequence errors are counted inside the window, and advance its start
    rig.tr.on_roce_response(collector_nak(rig, qp_name, psn0 - 3, code=NakCode.INVALID_REQUEST), 0)
    rig.tr.on_roce_response(collector_nak(rig, qp_name, psn0 - 2, code=NakCode.REMOTE_ACCESS_ERROR), 0)
    rig.tr.on_roce_response(collector_nak(rig, qp_name, psn0 - 3, code=NakCode.REMOTE_ACCESS_ERROR), 0)  # stale
    ack = build_roce_frame(COLLECTOR_MAC, TRANSLATOR_MAC, COLLECTOR_IP, TRANSLATOR_IP, 49152,
                           BTH(opcode=Opcode.ATOMIC_ACKNOWLEDGE, dqpn=rig.nic.qp(qp_name).peer_qpn, psn=psn0 - 1),
                           [aeth_ack(0), AtomicAckETH(5)])
    rig.tr.on_roce_response(ack, 0)
    rig.tr.on_roce_response(ack, 0)  # a replay: psn0 - 1 is acknowledged already
    assert (c.naks_invalid, c.naks_access, c.acks, c.naks_rejected_window, c.acks_rejected_window) == (1, 1, 1, 5, 1)
    assert tq.psn == psn0 and tq.una == psn0 and not rig.tr.in_grace and c.resyncs == 0


# ---------------------------------------------------------------------------------- refusals
def test_reports_for_another_destination_or_without_a_store_are_refused():
    rig = Rig()
    other = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, bytes([10, 0, 0, 42]))
    rig.deliver(rig.tr.on_report(other.frame(other.key_write(1, 2)), 0), 0)
    from headers.dta import DTABase, Postcarder, encode_report

    post = encode_report(DTABase.of(Postcarder(1, 2, 3)), Postcarder(1, 2, 3))
    rig.send(post)  # the default Rig has no Postcarding store
    nokw = Rig(lambda m: m.add_append_list(1, entries=16))
    nokw.send(nokw.reporter.key_write(1, 2))
    nokw.send(nokw.reporter.key_increment(1, 2))
    assert rig.tr.c.not_for_collector == 1 and rig.tr.c.no_store == 1 and nokw.tr.c.no_store == 2
    assert rig.emitted == [] and nokw.emitted == []


def zero_memory(rig):
    return all(v == bytes(len(v)) for v in rig.snapshot().values())


def is_report(payload):
    from headers.dta import decode_report
    from headers.errors import HeaderError

    try:
        decode_report(payload)
    except HeaderError:
        return False
    return True


@settings(max_examples=150)
@given(st.binary(max_size=90), st.integers(0, 120), st.integers(0, 3))
def test_malformed_dta_frames_are_counted_and_touch_nothing(junk, pos, which):
    rig = Rig()
    valid = [rig.reporter.key_write(1, 2, 2), rig.reporter.append(1, 3), rig.reporter.key_increment(4, 5),
             rig.reporter.sketch_merge(1, 7, 0, [1, 2, 3])][which]
    frame = rig.reporter.frame(valid)
    forged = [
        junk,
        frame[:pos % len(frame)],  # truncated
        frame[:42] + bytes([0x09]) + frame[43:],  # unknown opcode
        build_udp_frame(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP, 40041, 40040,
                        valid + b"\x00" * (1 + pos % 3)),  # trailing bytes inside the UDP payload
    ]
    if not is_report(junk):
        forged.append(build_udp_frame(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP, 40041, 40040, junk))
    for f in forged:
        assert rig.tr.on_report(f, 0) == []
    assert zero_memory(rig) and rig.emitted == []
    assert rig.tr.c.malformed == len(forged) and rig.tr.c.internal_errors == 0


@settings(max_examples=100)
@given(st.binary(min_size=0, max_size=80))
def test_garbage_responses_never_raise(junk):
    rig = Rig()
    assert rig.tr.on_roce_response(junk, 0) == []
    assert rig.tr.c.internal_errors == 0


def test_config_validation_and_json_connect_info():
    rig = Rig()
    info_json = rig.nic.connect_info_json()
    tr = DTATranslator(TranslatorConfig(info_json, "02:00:00:00:00:01", "10.0.0.1"))
    assert set(tr.qps) == set(rig.tr.qps)
    for bad in ({"grace_reports": 1, "grace_ns": 1}, {"max_redundancy": 0}, {"udp_sport": 70000},
                {"ack_every": -1}, {"append_flush_ns": -5}):
        with pytest.raises(ValueError):
            TranslatorConfig(info_json, TRANSLATOR_MAC, TRANSLATOR_IP, **bad)
    with pytest.raises(ValueError):
        DTATranslator(TranslatorConfig("{nope", TRANSLATOR_MAC, TRANSLATOR_IP))
    with pytest.raises(ValueError):
        DTATranslator(TranslatorConfig({"regions": []}, TRANSLATOR_MAC, TRANSLATOR_IP))


def test_ack_every_requests_coalesced_acks():
    rig = append_rig(entries=64, batch=1, ack_every=4)
    rig.send_all(rig.reporter.append(5, v) for v in range(8))
    assert len(rig.responses) == 2 and rig.tr.c.acks == 2
    acked = [parse_roce_frame(r).bth.psn for r in rig.responses]
    first = rig.nic.qp("append-5").initial_psn
    assert acked == [first + 3, first + 7]


def test_counters_are_json_able():
    import json

    rig = Rig()
    send_report(rig, ("kw", 1, 2, 2))
    json.dumps(rig.tr.counters())
    json.dumps(rig.nic.counters())
