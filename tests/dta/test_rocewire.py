"""The data path's fast forms (netstack/dta/rocewire.py and the engines' fast paths) are the slow
forms, only faster: the same bytes on the wire, the same verdicts, the same counters, the same
memory, whatever the frames. Each engine is compared with a twin whose fast path is switched off.
And the responder's ACK coalescing (``ack_every``)."""

from __future__ import annotations

import contextlib
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.dta import DTABase, Postcarder, encode_report
from headers.errors import HeaderError
from headers.roce import (
    BTH,
    RETH,
    AethKind,
    AtomicAckETH,
    AtomicETH,
    NakCode,
    Opcode,
    aeth_ack,
    build_roce_frame,
    check_icrc,
    decode_syndrome,
    parse_roce_frame,
    write_icrc,
)
from netstack.dta import DTATranslator, Reporter, RoceResponder, TranslatorConfig
from netstack.dta.rocewire import ACK_TAIL, ATOMIC_ACK_TAIL, ATOMIC_TAIL, WRITE_TAIL, RoceTemplate, icrc_ok

from . import (
    COLLECTOR_IP,
    COLLECTOR_MAC,
    REPORTER_IP,
    REPORTER_MAC,
    TRANSLATOR_IP,
    TRANSLATOR_MAC,
    bind,
    default_setup,
    make_memory,
)


def test_template_frames_are_the_bytes_build_roce_frame_makes():
    t = RoceTemplate(TRANSLATOR_MAC, COLLECTOR_MAC, TRANSLATOR_IP, COLLECTOR_IP, 49152, 0x123456)
    for n in range(0, 11):
        payload = bytes(range(n))
        for psn, ackreq in ((0, 0), (0xFFFFFF, 1), (77, 0)):
            want = build_roce_frame(TRANSLATOR_MAC, COLLECTOR_MAC, TRANSLATOR_IP, COLLECTOR_IP, 49152,
                                    BTH(opcode=Opcode.RDMA_WRITE_ONLY, migreq=1, padcount=-n & 3, dqpn=0x123456,
                                        ackreq=ackreq, psn=psn), [RETH(0x7F0012345678, 0xDEADBEEF, n)], payload)
            word = ackreq << 31 | psn
            assert t.packed(Opcode.RDMA_WRITE_ONLY, WRITE_TAIL.pack(word, 0x7F0012345678, 0xDEADBEEF, n),
                            payload) == want
            assert t.frame(Opcode.RDMA_WRITE_ONLY, word, RETH(0x7F0012345678, 0xDEADBEEF, n).to_bytes(),
                           payload) == want
    want = build_roce_frame(TRANSLATOR_MAC, COLLECTOR_MAC, TRANSLATOR_IP, COLLECTOR_IP, 49152,
                            BTH(opcode=Opcode.FETCH_ADD, migreq=1, dqpn=0x123456, psn=5),
                            [AtomicETH(0x7F0000000008, 7, (1 << 64) - 1, 0)])
    assert t.packed(Opcode.FETCH_ADD, ATOMIC_TAIL.pack(5, 0x7F0000000008, 7, (1 << 64) - 1, 0)) == want
    r = RoceTemplate(COLLECTOR_MAC, TRANSLATOR_MAC, COLLECTOR_IP, TRANSLATOR_IP, 50000, 42)
    ack = aeth_ack(9)
    want = build_roce_frame(COLLECTOR_MAC, TRANSLATOR_MAC, COLLECTOR_IP, TRANSLATOR_IP, 50000,
                            BTH(opcode=Opcode.ACKNOWLEDGE, migreq=1, dqpn=42, psn=3), [ack])
    assert r.packed(Opcode.ACKNOWLEDGE, ACK_TAIL.pack(3, ack.syndrome << 24 | 9)) == want
    want = build_roce_frame(COLLECTOR_MAC, TRANSLATOR_MAC, COLLECTOR_IP, TRANSLATOR_IP, 50000,
                            BTH(opcode=Opcode.ATOMIC_ACKNOWLEDGE, migreq=1, dqpn=42, psn=3), [ack, AtomicAckETH(12)])
    assert r.packed(Opcode.ATOMIC_ACKNOWLEDGE, ATOMIC_ACK_TAIL.pack(3, ack.syndrome << 24 | 9, 12)) == want


@settings(max_examples=300)
@given(st.integers(0, 16), st.lists(st.tuples(st.integers(0, 120), st.integers(0, 255)), max_size=3),
       st.integers(0, 255), st.integers(0, 255))
def test_icrc_ok_agrees_with_check_icrc(n, flips, tos, ttl):
    frame = bytearray(build_roce_frame(TRANSLATOR_MAC, COLLECTOR_MAC, TRANSLATOR_IP, COLLECTOR_IP, 49152,
                                       BTH(opcode=Opcode.RDMA_WRITE_ONLY, migreq=1, padcount=-n & 3, psn=1),
                                       [RETH(8, 1, n)], bytes(n)))
    frame[15], frame[22] = tos, ttl  # variant fields: the ICRC must not see them
    for i, v in flips:
        if i < len(frame):
            frame[i] = v
    try:
        want = check_icrc(frame)
    except HeaderError:
        return
    if frame[14] == 0x45 and int.from_bytes(frame[38:40], "big") + 34 <= len(frame):
        assert icrc_ok(frame, 34 + int.from_bytes(frame[38:40], "big")) == want


# --------------------------------------------------------------------------- twins


def _no_fast(*_args):
    return False


def translator_twins(**config):
    nic = RoceResponder(make_memory(default_setup), COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(4))
    info = nic.connect_info()
    fast = DTATranslator(TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP, **config), now_ns=0)
    slow = DTATranslator(TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP, **config), now_ns=0)
    slow._fast_report = _no_fast
    slow.requester._fast_response = _no_fast
    bind(nic, fast)
    return nic, fast, slow


def mutate(frame: bytes, flips, cut: int | None) -> bytes:
    b = bytearray(frame)
    for i, v in flips:
        if b:
            b[i % len(b)] = v
    return bytes(b[:cut] if cut is not None else b)


def _reports(rep: Reporter, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for _ in range(8):
        k = rng.randrange(6)
        if k == 0:
            out.append(rep.key_write(rng.randrange(1 << 32), rng.randrange(1 << 32), rng.randrange(1, 6)))
        elif k == 1:
            out.append(rep.key_write(rng.randrange(100), (1, 2), 2))  # a store of 1 word: bad_data_size
        elif k == 2:
            out.append(rep.append(rng.choice([1, 1, 9]), rng.randrange(1 << 32)))
        elif k == 3:
            out.append(rep.key_increment(rng.randrange(1 << 32), rng.randrange(1 << 64), rng.randrange(1, 6)))
        elif k == 4:
            out.append(rep.sketch_merge(1, 7, rng.randrange(3), (1, 2, 3)))
        else:  # a Postcarder (this layout has no Postcarding store: no_store)
            out.append(encode_report(DTABase.of(Postcarder(1, 2, 3)), Postcarder(1, 2, 3)))
    return out


flips_strategy = st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 1 << 30), st.lists(st.tuples(st.integers(0, 7), flips_strategy,
                                                   st.one_of(st.none(), st.integers(0, 80))), max_size=12),
       st.booleans(), st.sampled_from([0, 3]))
def test_the_translator_fast_path_changes_nothing(seed, picks, retransmittable, grace):
    """Reports, intact and mangled, through a translator and its twin without the fast path: the
    same RoCEv2 frames, NACKs, counters; then the collector's responses (intact and mangled) too."""
    nic, fast, slow = translator_twins(grace_reports=grace, ack_every=2)
    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP, retransmittable=retransmittable)
    reports = [rep.frame(p) for p in _reports(rep, seed)]
    for t, (i, flips, cut) in enumerate(picks):
        frame = mutate(reports[i], flips, cut) if (flips or cut is not None) else reports[i]
        a, b = fast.on_report(frame, t * 1000), slow.on_report(frame, t * 1000)
        assert a == b
        assert fast.actions.take_all() == slow.actions.take_all()
        for f in a:
            for r in nic.receive(f, t):
                for resp in (r, mutate(r, flips, cut)):
                    assert fast.on_roce_response(resp, t * 1000) == slow.on_roce_response(resp, t * 1000)
    assert fast.counters() == slow.counters()
    assert fast.counters()["internal_errors"] == 0


def responder_twins(ack_every=1):
    def make():
        return RoceResponder(make_memory(default_setup), COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(4),
                             ack_every=ack_every)
    fast, slow = make(), make()
    slow._fast = _no_fast
    tr = DTATranslator(TranslatorConfig(fast.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP, ack_every=3), now_ns=0)
    bind(fast, tr)
    bind(slow, tr)
    return fast, slow, tr


def _state(nic):
    return (nic.counters(), nic.qp_state(), {n: r.read(0, r.size) + bytes(str(r.trailer()), "ascii")
                                              for n, r in nic.memory.regions.items()})


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 1 << 30), st.lists(st.tuples(st.integers(0, 40), flips_strategy,
                                                   st.one_of(st.none(), st.integers(0, 100)), st.booleans()),
                                         max_size=16),
       st.integers(1, 20))
def test_the_responder_fast_path_changes_nothing(seed, picks, batch):
    """The translator's requests, intact, mangled, replayed and out of order, with the ICRC fixed
    up or not, through a responder and its twin without the fast path, in batches: the same
    responses, counters, QP state and memory."""
    fast, slow, tr = responder_twins()
    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    requests = []
    for p in _reports(rep, seed) * 3:
        requests += tr.on_report(rep.frame(p), 0)
    if not requests:
        return
    frames = []
    for i, flips, cut, fix in picks:
        f = bytearray(mutate(requests[i % len(requests)], flips, cut))
        if fix:
            with contextlib.suppress(HeaderError):
                write_icrc(f)
        frames.append(bytes(f))
    frames += requests  # in order at last: mostly executed
    for s in range(0, len(frames), batch):
        chunk = frames[s:s + batch]
        assert fast.receive_batch(chunk, 0) == slow.receive_batch(chunk, 0)
    assert _state(fast) == _state(slow)
    assert fast.counters()["internal_errors"] == 0


def test_acks_are_coalesced_per_ack_every_and_at_the_end_of_a_batch():
    mem = make_memory(lambda m: m.add_append_list(1, entries=64, batch=1))
    nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(1), ack_every=4)
    tr = DTATranslator(TranslatorConfig(nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP, ack_every=1), now_ns=0)
    bind(nic, tr)
    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    frames = [f for i in range(10) for f in tr.on_report(rep.frame(rep.append(1, i)), 0)]
    assert len(frames) == 10  # every one with AckReq
    psns = [parse_roce_frame(f).bth.psn for f in frames]
    raw = nic.receive_batch(frames, 0)
    acks = [parse_roce_frame(r) for r in raw]
    assert [a.bth.psn for a in acks] == [psns[3], psns[7], psns[9]]  # every 4th, then the end of the batch
    assert [a.aeth.msn for a in acks] == [4, 8, 10]
    assert all(decode_syndrome(a.aeth.syndrome)[0] == AethKind.ACK for a in acks)
    for r in raw:
        tr.on_roce_response(r, 0)
    assert tr.counters()["acks"] == 3 and tr.counters()["acks_rejected_window"] == 0
    # one frame per call: one ACK each, as without coalescing
    more = [f for i in range(3) for f in tr.on_report(rep.frame(rep.append(1, i)), 0)]
    assert [len(nic.receive(f, 0)) for f in more] == [1, 1, 1]
    assert nic.qp("append-1").c.acks == 6


def test_an_owed_ack_leaves_before_a_nak_of_its_qp():
    mem = make_memory(lambda m: m.add_append_list(1, entries=64, batch=1))
    nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(1), ack_every=8)
    tr = DTATranslator(TranslatorConfig(nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP, ack_every=1), now_ns=0)
    bind(nic, tr)
    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    frames = [f for i in range(5) for f in tr.on_report(rep.frame(rep.append(1, i)), 0)]
    out = [parse_roce_frame(r) for r in nic.receive_batch(frames[:2] + frames[3:], 0)]  # frame 2 lost
    kinds = [decode_syndrome(r.aeth.syndrome) for r in out]
    assert kinds == [(AethKind.ACK, 0x1F), (AethKind.NAK, NakCode.PSN_SEQUENCE_ERROR)]
    assert out[0].bth.psn == parse_roce_frame(frames[1]).bth.psn and out[1].bth.psn == out[0].bth.psn + 1


def test_ack_every_must_be_positive():
    import pytest

    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="ack_every"):
            RoceResponder(make_memory(default_setup), COLLECTOR_MAC, COLLECTOR_IP, ack_every=bad)


def test_the_fast_paths_take_bytearray_and_memoryview_frames():
    """A shell may hand over a bytearray or a view (a reused buffer): same results as bytes."""
    for kind in (bytes, bytearray, memoryview):
        mem = make_memory(default_setup)
        nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(1))
        tr = DTATranslator(TranslatorConfig(nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP), now_ns=0)
        bind(nic, tr)
        rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
        frames = []
        for p in (rep.key_write(5, 6, 2), rep.key_increment(7, 3, 2), rep.append(1, 9)):
            frames += tr.on_report(kind(rep.frame(p)), 0)
        assert len(frames) == 4 and tr.counters()["internal_errors"] == 0
        responses = nic.receive_batch([kind(f) for f in frames], 0)
        assert len(responses) == 2  # the two Fetch&Adds' ATOMIC ACKNOWLEDGEs
        for r in responses:
            tr.on_roce_response(kind(r), 0)
        c = nic.counters()
        assert c["internal_errors"] == 0 and c["qps"]["keywrite"]["writes"] == 2
        assert tr.counters()["acks"] == 2 and tr.counters()["internal_errors"] == 0
