"""Reliable 1Pipe's recall and controller payloads (netstack/onepipe/ctlwire.py): every encoder
round-trips, every decoder takes arbitrary bytes and raises only HeaderError; and the reliable
endpoint takes any datagram from anyone without raising (bad input is counted)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers.errors import HeaderError
from headers.onepipe import OnePipeHeader, OnePipeOpcode, decode_packet
from netstack.errors import ConfigError
from netstack.onepipe import ctlwire as w
from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.reliable import ReliableEndpoint

ADDRS = st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 0xFFFF))
U32 = st.integers(0, 2**32 - 1)
U48 = st.integers(0, 2**48 - 1)


def _split(data: bytes):
    return decode_packet(data)


@given(r=st.builds(w.Recall, U48, U32, st.integers(1, 2**32 - 1), st.integers(0, 2**64 - 1)),
       op=st.sampled_from([OnePipeOpcode.RECALL, OnePipeOpcode.RECALL_ACK]))
def test_recall_round_trips(r, op):
    hdr, body = _split(w.recall(op, r, 5, 6))
    assert hdr.opcode is op and (hdr.be_barrier, hdr.commit_barrier) == (5, 6)
    assert w.parse_recall(hdr, body) == r


@given(addr=ADDRS, inc=U32, rev=st.integers(0, 2**64 - 1), nonce=U32, n=U32, m=U32)
def test_register_round_trips(addr, inc, rev, nonce, n, m):
    hdr, body = _split(w.register_reply(addr, inc, rev, nonce, n, m))
    assert w.parse_register_reply(hdr, body) == w.RegisterReply(addr, inc, rev, nonce, n, m)
    hdr, body = _split(w.register_request(nonce, rev, recover=True))
    assert w.parse_register_request(hdr, body) == (nonce, rev, True)


@given(n=st.builds(w.Notice, ADDRS, U32, U48, U32, st.booleans()))
def test_notice_round_trips(n):
    hdr, body = _split(w.failure_notice(n))
    assert w.parse_failure_notice(hdr, body) == n


@given(addr=ADDRS, commit=U48, dst=ADDRS)
def test_report_and_relay_round_trip(addr, commit, dst):
    hdr, body = _split(w.failure_report(addr, commit))
    assert w.parse_failure_report(hdr, body) == (addr, commit)
    inner = w.recall(OnePipeOpcode.RECALL, w.Recall(1, 2, 3, 4))
    hdr, body = _split(w.relay(dst, inner))
    got, ihdr, ibody = w.parse_relay(body)
    assert got == dst and ihdr.to_bytes() + bytes(ibody) == inner


def test_a_relay_carries_only_what_may_be_relayed():
    for op in (OnePipeOpcode.RELAY, OnePipeOpcode.BEACON, OnePipeOpcode.REGISTER, OnePipeOpcode.DATA):
        inner = OnePipeHeader(0, 0, 0, 0, op).to_bytes()
        _hdr, body = _split(w.relay(("10.0.0.1", 1), inner))
        with pytest.raises(HeaderError):
            w.parse_relay(body)


def test_addresses_are_checked():
    for bad in (("10.0.0.1",), ("nope", 1), ("10.0.0.1", 70000), 5, "10.0.0.1:1"):
        with pytest.raises(ValueError):
            w.pack_addr(bad)
    assert w.parse_proc("10.0.0.2:40101") == ("10.0.0.2", 40101)
    for bad in ("10.0.0.2", "x:1", "10.0.0.2:http", ":1"):
        with pytest.raises(ConfigError):
            w.parse_proc(bad)
    assert w.proc_id(("10.0.0.1", 40101), 3) == "10.0.0.1-40101-3"


@settings(max_examples=300)
@given(data=st.binary(max_size=80))
def test_decoders_raise_only_header_error(data):
    try:
        hdr, body = decode_packet(data)
    except HeaderError:
        return
    for parse in (lambda: w.parse_recall(hdr, body), lambda: w.parse_register_reply(hdr, body),
                  lambda: w.parse_register_request(hdr, body), lambda: w.parse_failure_notice(hdr, body),
                  lambda: w.parse_failure_report(hdr, body), lambda: w.parse_relay(body)):
        with contextlib.suppress(HeaderError):
            parse()


OPS = st.sampled_from(list(OnePipeOpcode))


@st.composite
def datagrams(draw):
    """Mostly well-formed headers with arbitrary fields and payloads, some raw garbage."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=64))
    hdr = OnePipeHeader(draw(U48), draw(U48), draw(U48), draw(U32), draw(OPS), draw(st.integers(0, 255)))
    return hdr.to_bytes() + draw(st.binary(max_size=40))


CTL = ("10.0.9.9", 40100)


@settings(max_examples=200, deadline=None)
@given(packets=st.lists(st.tuples(datagrams(), st.sampled_from([CTL, ("10.0.0.2", 40100), ("10.0.0.3", 40101),
                                                                  "junk", 7])), max_size=30),
       step=st.integers(0, 50_000))
def test_the_reliable_endpoint_never_raises_on_input(packets, step):
    now = 10**12
    ep = ReliableEndpoint(OnePipeParams.paper(), ("10.0.0.1", 40100), now, controller=CTL, nonce=1)
    for data, src in packets:
        now += step
        ep.receive(data, src, now)
        ep.on_timer(now)
        ep.actions.take_all()
    assert isinstance(ep.counters(), dict)
