"""The RoCEv2 RC responder (the collector NIC): execution, ACK/NAK, PSN rules, refusals, fuzzing."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers.inet import mac_str
from headers.roce import (
    BTH,
    RETH,
    AethKind,
    AtomicETH,
    NakCode,
    Opcode,
    build_roce_frame,
    decode_syndrome,
    parse_roce_frame,
)
from netstack.dta import BufferedResponder, RoceResponder

from . import COLLECTOR_IP, COLLECTOR_MAC, TRANSLATOR_IP, TRANSLATOR_MAC, make_memory


def setup(mem):
    mem.add_region("w", 256, ("write",))
    mem.add_region("a", 256, ("atomic",))
    mem.add_region("wa", 64, ("write", "atomic"))


class Nic:
    def __init__(self, nak_policy="once", seed=0):
        self.mem = make_memory(setup, seed)
        self.nic = RoceResponder(self.mem, COLLECTOR_MAC, COLLECTOR_IP, nak_policy=nak_policy,
                                 rng=random.Random(seed))
        self.nic.bind(TRANSLATOR_MAC, TRANSLATOR_IP)
        self.psn = {name: qp.epsn for name, qp in ((q.name, q) for q in self.nic.qps.values())}

    def qp(self, name):
        return self.nic.qp(name)

    def frame(self, qp_name="w", opcode=Opcode.RDMA_WRITE_ONLY, ext=None, payload=b"", psn=None, ackreq=0,
              dqpn=None, dst_ip=COLLECTOR_IP, advance=True, **bth):
        qp = self.qp(qp_name)
        if psn is None:
            psn = self.psn[qp_name]
            if advance:
                self.psn[qp_name] = (psn + 1) & 0xFFFFFF
        b = BTH(opcode=opcode, migreq=1, dqpn=qp.qpn if dqpn is None else dqpn, psn=psn, ackreq=ackreq,
                padcount=-len(payload) & 3, **bth)
        return build_roce_frame(TRANSLATOR_MAC, COLLECTOR_MAC, TRANSLATOR_IP, dst_ip, 50000, b, ext or [], payload)

    def write(self, offset, data, qp_name="w", region=None, rkey=None, dma_len=None, **kw):
        r = self.mem.region(region or qp_name)
        reth = RETH(r.base_va + offset, r.rkey if rkey is None else rkey, len(data) if dma_len is None else dma_len)
        return self.frame(qp_name, Opcode.RDMA_WRITE_ONLY, [reth], data, **kw)

    def atomic(self, offset, add, qp_name="a", region=None, opcode=Opcode.FETCH_ADD, compare=0, rkey=None, **kw):
        r = self.mem.region(region or qp_name)
        ae = AtomicETH(r.base_va + offset, r.rkey if rkey is None else rkey, add, compare)
        return self.frame(qp_name, opcode, [ae], **kw)

    def rx(self, frame):
        return [parse_roce_frame(f) for f in self.nic.receive(frame, 0)]

    def snapshot(self):
        return {n: r.read(0, r.size) for n, r in self.mem.regions.items()}


def nak_code(resp):
    kind, code = decode_syndrome(resp.aeth.syndrome)
    assert kind == AethKind.NAK
    return code


def test_write_executes_and_acks_only_on_ackreq():
    n = Nic()
    assert n.rx(n.write(8, b"abcdefgh")) == []
    assert n.mem.region("w").read(8, 8) == b"abcdefgh"
    (ack,) = n.rx(n.write(0, b"1234", ackreq=1))
    qp = n.qp("w")
    assert ack.icrc_ok and ack.bth.opcode == Opcode.ACKNOWLEDGE and ack.bth.dqpn == qp.peer_qpn
    assert ack.bth.psn == (qp.initial_psn + 1) & 0xFFFFFF
    assert decode_syndrome(ack.aeth.syndrome)[0] == AethKind.ACK and ack.aeth.msn == 2
    assert ack.eth.dst == TRANSLATOR_MAC and ack.ip.dst == TRANSLATOR_IP and ack.ip.src == COLLECTOR_IP
    assert qp.c.writes == 2 and qp.c.write_bytes == 12


def test_fetch_add_and_cmp_swap_answer_with_the_original_value():
    n = Nic()
    (r1,) = n.rx(n.atomic(16, 5))
    (r2,) = n.rx(n.atomic(16, 7))
    assert r1.bth.opcode == r2.bth.opcode == Opcode.ATOMIC_ACKNOWLEDGE
    assert (r1.atomic_ack_eth.orig_remote_data, r2.atomic_ack_eth.orig_remote_data) == (0, 5)
    assert n.mem.region("a").read_u64(16) == 12 and r2.aeth.msn == 2
    (r3,) = n.rx(n.atomic(16, 100, opcode=Opcode.COMPARE_SWAP, compare=12))
    assert r3.atomic_ack_eth.orig_remote_data == 12 and n.mem.region("a").read_u64(16) == 100
    (r4,) = n.rx(n.atomic(16, 1, opcode=Opcode.COMPARE_SWAP, compare=12))
    assert r4.atomic_ack_eth.orig_remote_data == 100 and n.mem.region("a").read_u64(16) == 100


def test_a_qp_reaches_every_region_of_the_protection_domain_by_rkey():
    n = Nic()
    n.rx(n.write(0, b"wxyz", qp_name="w", region="wa"))
    assert n.mem.region("wa").read(0, 4) == b"wxyz"


def test_psn_sequence_error_nak_once_then_silence_until_the_expected_psn():
    n = Nic()
    qp = n.qp("w")
    e = qp.epsn
    before = n.snapshot()
    (nak,) = n.rx(n.write(0, b"aaaa", psn=(e + 3) & 0xFFFFFF))
    assert nak_code(nak) == NakCode.PSN_SEQUENCE_ERROR and nak.bth.psn == e and nak.aeth.msn == 0
    assert n.rx(n.write(0, b"bbbb", psn=(e + 4) & 0xFFFFFF)) == []  # IBTA: one NAK per sequence error
    assert n.snapshot() == before and qp.c.out_of_sequence_dropped == 1
    assert n.rx(n.write(0, b"cccc", psn=e)) == [] and n.mem.region("w").read(0, 4) == b"cccc"
    (nak2,) = n.rx(n.write(0, b"dddd", psn=(e + 5) & 0xFFFFFF))  # a new gap: NAK re-armed
    assert nak2.bth.psn == (e + 1) & 0xFFFFFF and qp.c.naks_psn == 2


def test_nak_every_policy_naks_each_out_of_sequence_request():
    n = Nic("every")
    e = n.qp("w").epsn
    naks = [n.rx(n.write(0, b"zzzz", psn=(e + k) & 0xFFFFFF))[0] for k in (1, 2, 3)]
    assert all(nak_code(x) == NakCode.PSN_SEQUENCE_ERROR and x.bth.psn == e for x in naks)


def test_duplicates_are_never_reexecuted():
    n = Nic()
    e = n.qp("w").epsn
    n.rx(n.write(0, b"new!", psn=e))
    assert n.rx(n.write(0, b"old!", psn=e)) == []  # duplicate without AckReq: silent
    (ack,) = n.rx(n.write(0, b"old!", psn=e, ackreq=1))  # with AckReq: ACK, still not written
    assert decode_syndrome(ack.aeth.syndrome)[0] == AethKind.ACK and ack.bth.psn == e
    assert n.mem.region("w").read(0, 4) == b"new!"
    ea = n.qp("a").epsn
    (first,) = n.rx(n.atomic(0, 10, psn=ea))
    (again,) = n.rx(n.atomic(0, 10, psn=ea))  # replayed from the saved result, not added twice
    assert again.atomic_ack_eth.orig_remote_data == first.atomic_ack_eth.orig_remote_data == 0
    assert n.mem.region("a").read_u64(0) == 10
    assert n.rx(n.atomic(8, 1, psn=(ea - 50) & 0xFFFFFF)) == []  # too old to be remembered: dropped
    assert n.qp("w").c.duplicates == 2 and n.qp("a").c.duplicates == 2


@pytest.mark.parametrize("case", ["bad_rkey", "oob", "straddle", "no_write_right", "no_atomic_right",
                                  "misaligned", "dma_len", "oob_atomic", "read", "send"])
def test_refused_requests_get_the_proper_nak_and_touch_nothing(case):
    n = Nic()
    before = n.snapshot()
    code = NakCode.REMOTE_ACCESS_ERROR
    if case == "bad_rkey":
        f = n.write(0, b"abcd", rkey=0xDEAD)
    elif case == "oob":
        f = n.write(256, b"abcd")
    elif case == "straddle":
        f = n.write(254, b"abcd")
    elif case == "no_write_right":
        f = n.write(0, b"abcd", qp_name="a")
    elif case == "no_atomic_right":
        f = n.atomic(0, 1, qp_name="w")
    elif case == "misaligned":
        f, code = n.atomic(4, 1), NakCode.INVALID_REQUEST
    elif case == "dma_len":
        f, code = n.write(0, b"abcd", dma_len=8), NakCode.INVALID_REQUEST
    elif case == "oob_atomic":
        f = n.atomic(256, 1)
    elif case == "read":
        w = n.mem.region("w")
        f, code = n.frame("w", Opcode.RDMA_READ_REQUEST, [RETH(w.base_va, w.rkey, 4)]), NakCode.INVALID_REQUEST
    else:
        f, code = n.frame("w", Opcode.SEND_ONLY, [], b"hello!!!"), NakCode.INVALID_REQUEST
    qp_name = "a" if case in ("no_write_right", "misaligned", "oob_atomic") else "w"
    psn = parse_roce_frame(f).bth.psn
    (nak,) = n.rx(f)
    assert nak.icrc_ok and nak_code(nak) == code and nak.bth.psn == psn
    assert n.snapshot() == before
    assert n.mem.region(qp_name).trailer()["writes"] == 0
    # the QP stays usable (documented deviation from IBTA's Error state): the next PSN executes
    n.rx(n.write(0, b"next", qp_name=qp_name, region="wa"))
    assert n.mem.region("wa").read(0, 4) == b"next"


def test_zero_length_write_is_not_checked():
    n = Nic()
    assert n.rx(n.write(10_000, b"", rkey=0xBAD, ackreq=1))[0].bth.opcode == Opcode.ACKNOWLEDGE


def test_silent_drops_are_counted():
    n = Nic()
    before = n.snapshot()
    good = bytearray(n.write(0, b"abcd", advance=False))
    good[-1] ^= 1  # ICRC
    assert n.rx(bytes(good)) == []
    assert n.rx(n.write(0, b"abcd", advance=False, dst_ip=bytes([10, 9, 9, 9]))) == []
    assert n.rx(n.write(0, b"abcd", advance=False, dqpn=0xABCDE)) == []
    assert n.rx(n.write(0, b"abcd", advance=False, pkey=0x1234)) == []
    assert n.rx(b"\x00" * 10) == []
    c = n.nic.counters()
    assert c["icrc_errors"] == 1 and c["not_for_us"] == 1 and c["unknown_qp"] == 1 and c["bad_header"] == 1
    assert c["not_roce"] == 1 and n.snapshot() == before
    truncated = n.write(0, b"abcd", advance=False)[:50]
    assert n.rx(truncated) == [] and n.nic.counters()["malformed"] == 1


def test_response_opcodes_sent_to_the_responder_are_not_requests():
    from headers.roce import aeth_ack

    n = Nic()
    f = n.frame("w", Opcode.ACKNOWLEDGE, [aeth_ack(0)], advance=False)
    assert n.rx(f) == [] and n.nic.counters()["not_request"] == 1


def test_connect_info_is_json_and_complete():
    n = Nic()
    info = json.loads(n.nic.connect_info_json())
    assert info["mac"] == mac_str(COLLECTOR_MAC) and info["udp_port"] == 4791
    names = [r["name"] for r in info["regions"]]
    assert names == ["w", "a", "wa"]
    qpns = [r["qpn"] for r in info["regions"]] + [r["peer_qpn"] for r in info["regions"]]
    assert len(set(qpns)) == 6 and all(2 <= q < 1 << 24 for q in qpns)
    for r in info["regions"]:
        assert {"rkey", "base_va", "size", "access", "initial_psn", "layout"} <= r.keys()


def test_buffered_responder_overflows_and_serves_in_order():
    n = Nic()
    buf = BufferedResponder(n.nic, capacity=2, service_ns=100)
    frames = [n.write(4 * i, bytes([i]) * 4, ackreq=1) for i in range(3)]
    assert buf.offer(frames[0], 0) and buf.offer(frames[1], 0) and not buf.offer(frames[2], 0)
    assert buf.c.overflow_drops == 1 and buf.next_deadline() == 100
    out = buf.poll(150)
    assert [t for t, _ in out] == [100] and buf.next_deadline() == 200
    assert [t for t, _ in buf.poll(1000)] == [200] and buf.next_deadline() is None


# ---------------------------------------------------------------------------------- fuzzing
req_strategy = st.fixed_dictionaries({
    "qp": st.sampled_from(["w", "a", "wa"]),
    "op": st.sampled_from([Opcode.RDMA_WRITE_ONLY, Opcode.FETCH_ADD, Opcode.COMPARE_SWAP, Opcode.SEND_ONLY]),
    "region": st.sampled_from(["w", "a", "wa", None]),  # None: a random rkey
    "off": st.one_of(st.integers(-16, 300), st.integers(0, 1 << 40)),
    "data": st.binary(max_size=24),
    "dpsn": st.sampled_from([0, 0, 0, 1, 5, -1, -3]),
    "dqpn": st.booleans(),
    "icrc": st.booleans(),
    "ackreq": st.integers(0, 1),
    "add": st.integers(0, (1 << 64) - 1),
})


@settings(max_examples=150)
@given(st.lists(req_strategy, min_size=1, max_size=12))
def test_forged_requests_only_change_memory_when_fully_valid(reqs):
    """Model-based: a request changes memory iff ICRC, QP, PSN, rkey, bounds, alignment and rights
    are all right; nothing else touches a byte, nothing raises, every refusal is counted."""
    n = Nic()
    model = n.snapshot()
    for r in reqs:
        qp = n.qp(r["qp"])
        psn = (qp.epsn + r["dpsn"]) & 0xFFFFFF
        region = n.mem.region(r["region"]) if r["region"] else None
        rkey = region.rkey if region else 0x7777
        base = region.base_va if region else 0x1000
        va = max(0, base + r["off"])
        op = r["op"]
        if op == Opcode.RDMA_WRITE_ONLY:
            ext, payload = [RETH(va, rkey, len(r["data"]))], r["data"]
        elif op == Opcode.SEND_ONLY:
            ext, payload = [], r["data"]
        else:
            ext, payload = [AtomicETH(va & (1 << 64) - 1, rkey, r["add"], 0)], b""
        f = bytearray(n.frame(r["qp"], op, ext, payload, psn=psn, ackreq=r["ackreq"],
                              dqpn=None if r["dqpn"] else 0x999999))
        if not r["icrc"]:
            f[-2] ^= 0x40
        valid = (r["icrc"] and r["dqpn"] and r["dpsn"] == 0 and region is not None and op != Opcode.SEND_ONLY)
        name = r["region"]
        if valid and op == Opcode.RDMA_WRITE_ONLY:
            valid = "write" in region.access and r["off"] >= 0 and r["off"] + len(payload) <= region.size
            if valid and payload:
                model[name] = model[name][:r["off"]] + payload + model[name][r["off"] + len(payload):]
        elif valid:
            valid = "atomic" in region.access and 0 <= r["off"] <= region.size - 8 and r["off"] % 8 == 0
            if valid:
                old = int.from_bytes(model[name][r["off"]:r["off"] + 8], "little")
                new = (old + r["add"]) & (1 << 64) - 1 if op == Opcode.FETCH_ADD else (
                    r["add"] if old == 0 else old)
                model[name] = model[name][:r["off"]] + new.to_bytes(8, "little") + model[name][r["off"] + 8:]
        responses = n.nic.receive(bytes(f), 0)
        for resp in responses:
            assert parse_roce_frame(resp).icrc_ok
        assert n.snapshot() == model
    assert n.nic.counters()["internal_errors"] == 0


@settings(max_examples=200)
@given(st.binary(max_size=120), st.integers(0, 200), st.integers(0, 255))
def test_garbage_and_bit_flips_never_raise(junk, pos, flip):
    n = Nic()
    before = n.snapshot()
    assert n.nic.receive(junk, 0) == []
    good = bytearray(n.write(0, b"abcdefgh", advance=False))
    good[pos % len(good)] ^= flip or 1
    for cut in (len(good), pos % len(good)):
        n.nic.receive(bytes(good[:cut]), 0)
    c = n.nic.counters()
    assert c["internal_errors"] == 0
    if n.snapshot() != before:
        # only a flip in a field the ICRC masks (TTL, TOS, IP/UDP checksum, FECN/BECN) keeps it valid
        assert c["qps"]["w"]["writes"] == 1
