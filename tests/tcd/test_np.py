"""TCD's receiver and DCQCN's notification point (netstack.tcd.np.TcdReceiver): at most one CNP per
flow per interval (the first mark at once), CE beats UE, a plain NP knows CE only, the flow
report (FCT, duplicates, reordering) and arbitrary datagrams."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headers.errors import HeaderError
from headers.tcd import CnpKind, TcdCnp, TcdCodepoints, TcdData
from netstack.engine import SendTo
from netstack.tcd.dcqcn import DcqcnParamError, DcqcnParams
from netstack.tcd.np import TcdReceiver, show_src

N = 50_000  # the NP interval
SRC = (bytes([10, 0, 0, 1]), 40001)
NOT_ECT, UE, ECT, CE = 0b00, 0b01, 0b10, 0b11


def pkt(seq: int, flow: int = 1, ts: int = 0, fin: bool = False, size: int = 100) -> bytes:
    return TcdData(flow, seq, ts, 1 if fin else 0).to_bytes(size)


def cnps(r: TcdReceiver) -> list[tuple[object, TcdCnp]]:
    out = []
    for a in r.actions.take_all():
        assert isinstance(a, SendTo)
        out.append((a.dst, TcdCnp.from_bytes(a.data)))
    return out


def test_interval_from_params_or_ns():
    assert TcdReceiver(DcqcnParams()).cnp_interval_ns == 50_000
    assert TcdReceiver(7).cnp_interval_ns == 7
    with pytest.raises(DcqcnParamError):
        TcdReceiver(0)


def test_no_marks_no_cnp():
    r = TcdReceiver(N)
    for i in range(100):
        r.receive(pkt(i), i * 1000, SRC, ECT)
        r.receive(pkt(1000 + i), i * 1000, SRC, NOT_ECT)
    r.on_timer(10**9)
    assert not r.actions and r.next_deadline() is None and r.counters()["cnps_sent"] == 0
    f = r.flows()[1]
    assert (f["ect"], f["not_ect"], f["ce"], f["ue"]) == (100, 100, 0, 0)


def test_first_mark_at_once_then_at_most_one_cnp_per_interval():
    r = TcdReceiver(N)
    r.receive(pkt(0), 1000, SRC, CE)
    assert cnps(r) == [(SRC, TcdCnp(1, CnpKind.CE, 1))]  # the first mark: a CNP at once
    for i in range(1, 10):  # marks within the interval: held back
        r.receive(pkt(i), 1000 + i * 1000, SRC, CE)
    assert not r.actions and r.next_deadline() == 1000 + N
    r.on_timer(1000 + N - 1)
    assert not r.actions
    r.on_timer(1000 + N)
    assert cnps(r) == [(SRC, TcdCnp(1, CnpKind.CE, 9))]  # one CNP for the interval, counting its marks
    r.on_timer(10**9)
    assert not r.actions  # nothing marked since
    r.receive(pkt(10), 10**9, SRC, CE)  # a quiet interval passed: at once again
    assert len(cnps(r)) == 1 and r.counters()["cnps_sent"] == 3


def test_a_due_cnp_goes_out_before_the_next_packet_is_taken():
    r = TcdReceiver(N)
    r.receive(pkt(0), 0, SRC, CE)
    r.receive(pkt(1), 10, SRC, UE)
    cnps(r)
    r.receive(pkt(2), N + 5, SRC, CE)  # the shell missed the deadline: the UE-CNP first, then a new interval
    got = cnps(r)
    assert [c.kind for _, c in got] == [CnpKind.UE] and r.next_deadline() == N + 5 + N


def test_ce_beats_ue_in_an_interval():
    r = TcdReceiver(N)
    r.receive(pkt(0), 0, SRC, UE)
    assert cnps(r)[0][1].kind == CnpKind.UE
    r.receive(pkt(1), 10, SRC, UE)
    r.receive(pkt(2), 20, SRC, CE)
    r.receive(pkt(3), 30, SRC, UE)
    r.on_timer(N)
    assert cnps(r) == [(SRC, TcdCnp(1, CnpKind.CE, 3))]
    c = r.counters()
    assert (c["cnps_ce"], c["cnps_ue"]) == (1, 1) and (r.flows()[1]["cnps_ce"], r.flows()[1]["cnps_ue"]) == (1, 1)


def test_a_plain_dcqcn_np_knows_ce_only():
    r = TcdReceiver(N, tcd=False)
    for i in range(20):
        r.receive(pkt(i), i * N, SRC, UE)
    r.on_timer(10**9)
    assert not r.actions and r.flows()[1]["ue"] == 20  # counted, never a CNP-UE
    r.receive(pkt(20), 10**9, SRC, CE)
    assert cnps(r) == [(SRC, TcdCnp(1, CnpKind.CE, 1))]


def test_codepoints_are_configurable():
    cp = TcdCodepoints(ect=0b01, ue=0b10, ce=0b11)
    r = TcdReceiver(N, codepoints=cp)
    r.receive(pkt(0), 0, SRC, 0b10)
    assert cnps(r)[0][1].kind == CnpKind.UE
    r.receive(pkt(1), 10, SRC, 0b01)  # ECT under these codepoints
    assert r.flows()[1]["ect"] == 1


def test_flows_are_separate_and_cnps_go_to_each_source():
    r = TcdReceiver(N)
    other = (bytes([10, 0, 0, 2]), 40002)
    r.receive(pkt(0, flow=1), 0, SRC, CE)
    r.receive(pkt(0, flow=2), 0, other, CE)
    assert sorted(cnps(r)) == sorted([(SRC, TcdCnp(1, CnpKind.CE, 1)), (other, TcdCnp(2, CnpKind.CE, 1))])
    r.receive(pkt(1, flow=1), 10, other, CE)  # flow 1 is bound to SRC: ignored
    assert r.counters()["foreign_src"] == 1 and r.flows()[1]["packets"] == 1 and not r.actions


def test_marked_count_saturates():
    r = TcdReceiver(N)
    r.receive(pkt(0), 0, SRC, CE)
    cnps(r)
    for i in range(1, 70_001):
        r.receive(pkt(i), 1, SRC, CE)
    r.on_timer(N)
    assert cnps(r)[0][1].marked == 0xFFFF


def test_fct_when_fin_and_everything_before_it_arrived():
    r = TcdReceiver(N)
    r.receive(pkt(0, ts=1_000), 5_000, SRC, ECT)
    r.receive(pkt(2, ts=3_000, fin=True), 7_000, SRC, ECT)
    f = r.flows()[1]
    assert f["fin_seen"] and not f["complete"] and f["fct_ns"] is None and f["missing"] == 1
    r.receive(pkt(1, ts=2_000), 9_000, SRC, ECT)  # the late packet completes the flow
    f = r.flows()[1]
    assert f["complete"] and f["fct_ns"] == 9_000 - 1_000 and f["missing"] == 0 and f["out_of_order"] == 1
    r.receive(pkt(1, ts=2_000), 20_000, SRC, ECT)  # a duplicate later changes nothing
    f = r.flows()[1]
    assert f["fct_ns"] == 8_000 and f["duplicates"] == 1 and f["unique"] == 3 and f["packets"] == 4
    assert f["bytes"] == 400 and f["first_send_ts_ns"] == 1_000 and f["src"] == "10.0.0.1:40001"
    assert r.counters()["complete_flows"] == 1
    json.dumps(r.flows())


def test_duplicates_and_reordering_counted():
    r = TcdReceiver(N)
    order = [0, 1, 3, 2, 2, 5, 4, 0, 6]
    for t, s in enumerate(order):
        r.receive(pkt(s, fin=s == 6), t, SRC, ECT)
    f = r.flows()[1]
    assert (f["unique"], f["duplicates"], f["out_of_order"], f["complete"]) == (7, 2, 2, True)


def test_a_conflicting_fin_is_ignored():
    r = TcdReceiver(N)
    r.receive(pkt(5), 0, SRC, ECT)
    r.receive(pkt(3, fin=True), 1, SRC, ECT)  # FIN below what already arrived
    assert r.flows()[1]["fin_conflicts"] == 1 and not r.flows()[1]["fin_seen"]


def test_show_src():
    assert show_src(SRC) == "10.0.0.1:40001" and show_src(("10.0.0.9", 5)) == "10.0.0.9:5" and show_src(3) == "3"


@given(data=st.binary(max_size=40), ecn=st.integers(0, 255))
def test_arbitrary_datagrams_raise_only_header_error(data, ecn):
    r = TcdReceiver(N)
    try:
        r.receive(data, 0, SRC, ecn)
    except HeaderError:
        assert r.counters()["datagrams"] == 0
        return
    assert r.counters()["datagrams"] == 1


@given(events=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 7), st.integers(0, 30_000),
                                 st.integers(0, 3)), max_size=80), tcd=st.booleans())
def test_never_more_than_one_cnp_per_interval_per_flow(events, tcd):
    r = TcdReceiver(N, tcd=tcd)
    t = 0
    sent: dict[int, list[int]] = {}
    for flow, seq, dt, ecn in events:
        t += dt
        r.on_timer(t)
        r.receive(pkt(seq, flow=flow), t, (b"\x0a\x00\x00\x01", 40000 + flow), ecn)
        for a in r.actions.take_all():
            cnp = TcdCnp.from_bytes(a.data)
            assert a.dst == (b"\x0a\x00\x00\x01", 40000 + cnp.flow)
            assert tcd or cnp.kind == CnpKind.CE
            sent.setdefault(cnp.flow, []).append(t)
        d = r.next_deadline()
        assert d is None or d > t
    for times in sent.values():
        assert all(b - a >= N for a, b in itertools.pairwise(times))
