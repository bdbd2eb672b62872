"""TCD ternary ECN marking (docs/wire-formats.md, TCD): max-severity rule, codepoints, in-place IPv4
rewrite with RFC 1624."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether

from headers.errors import HeaderError
from headers.inet import IPv4
from headers.layers.tcd import ecn_mark, tcd_mark, tcd_state
from headers.tcd import (
    DEFAULT_CODEPOINTS,
    HEADERS,
    Ecn,
    PortState,
    TcdCodepoints,
    checksum_adjust,
    ecn_mark_ipv4_frame_inplace,
    ecn_mark_tos,
    mark_ipv4_frame_inplace,
    mark_tos,
    state_from_tos,
)

states = st.sampled_from(list(PortState))
all_codepoints = [TcdCodepoints(*p) for p in itertools.permutations((1, 2, 3))]
codepoints_st = st.sampled_from(all_codepoints)
tos_st = st.integers(0, 255)
# explicit MACs: a bare Ether() above IP would make Scapy resolve the destination by ARP
MAC1, MAC2 = "02:00:00:00:00:01", "02:00:00:00:00:02"


def test_the_header_records_are_the_end_hosts_messages():
    # the marks are the IP ECN field (no record); the records are TCD's data packet, CNP and
    # TIMELY's ACK
    assert [cls.__name__ for cls in HEADERS] == ["TcdData", "TcdCnp", "TcdAck"]


def test_default_codepoints_table():
    cp = DEFAULT_CODEPOINTS
    assert (cp.ect, cp.ue, cp.ce) == (0b10, 0b01, 0b11)
    N, U, C = PortState
    expected = {  # (ecn in, state) -> ecn out, the docs/wire-formats.md TCD table
        (0b00, N): 0b00, (0b00, U): 0b00, (0b00, C): 0b00,  # Not-ECT never marked (RFC 3168 §5)
        (0b10, N): 0b10, (0b10, U): 0b01, (0b10, C): 0b11,  # ECT
        (0b01, N): 0b01, (0b01, U): 0b01, (0b01, C): 0b11,  # UE: only CE beats it
        (0b11, N): 0b11, (0b11, U): 0b11, (0b11, C): 0b11,  # CE is never downgraded
    }
    for (ecn, state), out in expected.items():
        for dscp in (0, 0b101110):
            assert mark_tos(dscp << 2 | ecn, state) == dscp << 2 | out, (ecn, state)
    assert state_from_tos(0b10) is N and state_from_tos(0b01) is U and state_from_tos(0b11) is C
    assert state_from_tos(0xB8) is None  # DSCP EF, Not-ECT


def test_codepoints_validation():
    assert len(set(all_codepoints)) == 6
    for bad in [(0, 1, 3), (2, 2, 3), (1, 3, 3), (4, 1, 3), (2, 1, -1)]:
        with pytest.raises(HeaderError):
            TcdCodepoints(*bad)
    with pytest.raises(HeaderError):
        mark_tos(0x02, 3)
    with pytest.raises(HeaderError):
        mark_tos(0x02, -1)
    with pytest.raises(HeaderError):
        mark_tos(256, PortState.CONGESTION)
    with pytest.raises(HeaderError):
        state_from_tos(-1)


@given(codepoints_st, states)
def test_codepoint_state_round_trip(cp, state):
    # the sender's ECT marked by one hop in `state` reads back as that state
    tos = mark_tos(cp.ect, state, cp)
    assert state_from_tos(tos, cp) is state
    assert cp.codepoint(state) == tos
    assert cp.state_of(tos) is state


# --- the max-severity rule over a path (docs/wire-formats.md, TCD) -------------------------


@given(codepoints_st, st.integers(0, 63), st.lists(states, max_size=12))
def test_path_mark_is_max_severity_never_downgraded(cp, dscp, path):
    tos = dscp << 2 | cp.ect
    worst = PortState.NON_CONGESTION
    for state in path:
        before = state_from_tos(tos, cp)
        tos = mark_tos(tos, state, cp)
        after = state_from_tos(tos, cp)
        assert after >= before  # never downgraded
        assert tos >> 2 == dscp  # DSCP untouched
        worst = max(worst, state)
        assert after is worst
    assert state_from_tos(tos, cp) is (max(path) if path else PortState.NON_CONGESTION)


@given(codepoints_st, st.integers(0, 63), st.lists(states, max_size=12))
def test_not_ect_never_marked(cp, dscp, path):
    tos = dscp << 2
    for state in path:
        assert mark_tos(tos, state, cp) == tos
    assert state_from_tos(tos, cp) is None


@given(codepoints_st, tos_st, states, states)
def test_marking_is_idempotent_and_order_free(cp, tos, s1, s2):
    once = mark_tos(tos, s1, cp)
    assert mark_tos(once, s1, cp) == once
    assert mark_tos(mark_tos(tos, s1, cp), s2, cp) == mark_tos(mark_tos(tos, s2, cp), s1, cp)


@given(tos_st)
def test_plain_ecn_baseline(tos):
    out = ecn_mark_tos(tos)
    if tos & 3 == Ecn.NOT_ECT:
        assert out == tos
    else:
        assert out == (tos & 0xFC) | Ecn.CE
    assert ecn_mark_tos(out) == out


# --- in-place rewrite with the RFC 1624 incremental checksum --------------------------------


def _header(tos: int, ident: int) -> bytes:
    return IPv4(bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]), 17, 84, tos, ident, 0x4000, 64).to_bytes()


def test_checksum_adjust_exhaustive_tos():
    # every old/new TOS pair on two headers, one chosen so that its checksum is 0x0000 (the
    # one's-complement sum is 0xFFFF, "-0"): the case RFC 1141's HC + m - m' got wrong and
    # RFC 1624 eqn. 3 gets right. The result must equal a full recomputation every time.
    base = _header(0, 0)
    zero_ident = int.from_bytes(base[10:12], "big")  # adding ~sum to the sum makes it 0xFFFF
    assert int.from_bytes(_header(0, zero_ident)[10:12], "big") == 0
    for ident in (0x1C46, zero_ident):
        full = [int.from_bytes(_header(tos, ident)[10:12], "big") for tos in range(256)]
        for old in range(256):
            for new in range(0, 256, 7):
                assert checksum_adjust(full[old], 0x4500 | old, 0x4500 | new) == full[new]


ip_frames = st.builds(
    lambda tos, ttl, ident, proto, src, dst, opts, payload: Ether(dst=MAC2, src=MAC1) / IP(
        tos=tos, ttl=ttl, id=ident, proto=proto, src=src, dst=dst, options=opts) / payload,
    tos_st, st.integers(0, 255), st.integers(0, 0xFFFF), st.integers(0, 255),
    st.ip_addresses(v=4).map(str), st.ip_addresses(v=4).map(str),
    st.sampled_from([[], b"\x01\x01\x01\x00", b"\x94\x04\x00\x00" * 2]),  # NOPs+EOL, router alert x2
    st.binary(max_size=24),
)


@settings(max_examples=300)
@given(ip_frames, codepoints_st, states)
def test_inplace_equals_scapy_full_recompute(pkt, cp, state):
    raw = bytes(pkt)  # Scapy computes a correct checksum
    buf = bytearray(raw)
    changed = mark_ipv4_frame_inplace(buf, 14, state, cp)
    expect = bytes(tcd_mark(Ether(raw), state, cp))  # changed tos, checksum recomputed from scratch
    assert bytes(buf) == expect
    assert changed == (buf != raw)
    ip = IPv4.from_bytes(buf, 14)
    assert ip.checksum_ok(buf, 14)
    assert state_from_tos(ip.tos, cp) == tcd_state(Ether(expect), cp)


@settings(max_examples=200)
@given(ip_frames)
def test_inplace_plain_ecn_equals_scapy(pkt):
    raw = bytes(pkt)
    buf = bytearray(raw)
    changed = ecn_mark_ipv4_frame_inplace(buf, 14)
    assert bytes(buf) == bytes(ecn_mark(Ether(raw)))
    assert changed == (raw[15] & 3 in (1, 2))


@settings(max_examples=200)
@given(ip_frames, st.lists(states, max_size=6))
def test_inplace_along_a_path(pkt, path):
    pkt[IP].tos = (pkt[IP].tos & 0xFC) | DEFAULT_CODEPOINTS.ect
    buf = bytearray(bytes(pkt))
    for state in path:
        mark_ipv4_frame_inplace(buf, 14, state)
        assert IPv4.from_bytes(buf, 14).checksum_ok(buf, 14)
    assert state_from_tos(buf[15]) is max(path, default=PortState.NON_CONGESTION)


@given(ip_frames, st.integers(1, 0xFFFF), states)
def test_bad_checksum_stays_bad(pkt, error, state):
    # an incremental update carries an existing error through; it never launders corruption
    raw = bytearray(bytes(pkt))
    good = int.from_bytes(raw[24:26], "big")
    bad = (good + error) % 0xFFFF  # a different one's-complement value
    if bad == good or {bad, good} == {0, 0xFFFF}:
        return
    raw[24:26] = bad.to_bytes(2, "big")
    mark_ipv4_frame_inplace(raw, 14, state)
    assert not IPv4.from_bytes(raw, 14).checksum_ok(raw, 14)


def test_inplace_errors_leave_buffer_untouched():
    good = bytearray(bytes(Ether(dst=MAC2, src=MAC1) / IP(tos=2) / UDP()))
    for mutate, problem in [
        (lambda b: b.__setitem__(14, 0x65), "version"),
        (lambda b: b.__setitem__(14, 0x44), "ihl"),
        (lambda b: b.__setitem__(14, 0x4F), "truncated"),  # ihl 15 needs 60 bytes
    ]:
        buf = bytearray(good)
        mutate(buf)
        before = bytes(buf)
        with pytest.raises(HeaderError, match=problem):
            mark_ipv4_frame_inplace(buf, 14, PortState.CONGESTION)
        assert bytes(buf) == before
    with pytest.raises(HeaderError, match="truncated"):
        mark_ipv4_frame_inplace(good[:30], 14, PortState.CONGESTION)
    with pytest.raises(HeaderError):
        mark_ipv4_frame_inplace(good, -1, PortState.CONGESTION)
    assert mark_ipv4_frame_inplace(good, 14, PortState.NON_CONGESTION) is False


@settings(max_examples=2000)
@given(st.binary(max_size=48), st.integers(-2, 50), states)
def test_fuzz_inplace(data, offset, state):
    buf = bytearray(data)
    try:
        changed = mark_ipv4_frame_inplace(buf, offset, state)
    except HeaderError:
        assert buf == data
        return
    # only the TOS byte and the checksum may change
    diff = [i for i in range(len(data)) if buf[i] != data[i]]
    assert set(diff) <= {offset + 1, offset + 10, offset + 11}
    assert changed == bool(diff)


def test_scapy_helpers():
    pkt = Ether(dst=MAC2, src=MAC1) / IP(tos=0xB8 | 0b10) / UDP()
    marked = tcd_mark(pkt, PortState.UNDETERMINED)
    assert pkt[IP].tos == 0xBA and marked[IP].tos == 0xB9  # the original is left alone
    assert tcd_state(marked) is PortState.UNDETERMINED and tcd_state(pkt) is PortState.NON_CONGESTION
    assert tcd_state(ecn_mark(pkt)) is PortState.CONGESTION
    v6 = Ether(dst=MAC2, src=MAC1) / IPv6(tc=0b10) / UDP()
    assert tcd_mark(v6, PortState.CONGESTION)[IPv6].tc == 0b11
    assert tcd_state(v6) is PortState.NON_CONGESTION
    with pytest.raises(HeaderError):
        tcd_mark(Ether(dst=MAC2, src=MAC1) / b"x", PortState.CONGESTION)
