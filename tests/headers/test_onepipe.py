"""1Pipe header: codec, Scapy layer, packet decode and 48-bit PAWS timestamp arithmetic (§2, §6.1)."""


import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from headers.errors import HeaderError
from headers.inet import build_udp_frame, parse_udp_frame
from headers.layers.onepipe import OnePipe, bind_port
from headers.onepipe import (
    BARRIER_OPCODES,
    HEADERS,
    HOP_BY_HOP_OPCODES,
    NO_PAYLOAD_OPCODES,
    TS_HALF,
    TS_MASK,
    TS_MOD,
    OnePipeFlag,
    OnePipeHeader,
    OnePipeOpcode,
    beacon,
    decode_packet,
    read_barriers,
    ts_add,
    ts_diff,
    ts_from_ns,
    ts_ge,
    ts_gt,
    ts_le,
    ts_lt,
    ts_max,
    ts_min,
    ts_unwrap,
    write_barriers,
    write_be_barrier,
)
from headers.record import field_values, replace
from headers.registry import UdpPort

MAC1, MAC2 = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
IP1, IP2 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])

u48 = st.integers(0, TS_MASK)
u32 = st.integers(0, 0xFFFFFFFF)
opcodes = st.sampled_from(list(OnePipeOpcode))
headers_st = st.builds(OnePipeHeader, msg_ts=u48, be_barrier=u48, commit_barrier=u48, psn=u32, opcode=opcodes,
                       flags=st.integers(0, 255))


def fields(rec):
    return field_values(rec)


def test_headers_tuple():
    assert (OnePipeHeader,) == HEADERS
    assert OnePipeHeader.SIZE == 24


# --- 1. round trip --------------------------------------------------------------------------


@given(headers_st, st.binary(max_size=8))
def test_round_trip(rec, prefix):
    raw = rec.to_bytes()
    assert len(raw) == rec.size() == OnePipeHeader.SIZE
    assert OnePipeHeader.from_bytes(raw) == rec
    buf = bytearray(prefix + b"\xee" * 24 + b"tail")
    assert rec.pack_into(buf, len(prefix)) == 24
    assert bytes(buf[len(prefix):len(prefix) + 24]) == raw
    assert buf.endswith(b"tail")
    assert OnePipeHeader.from_bytes(buf, len(prefix)) == rec
    assert OnePipeHeader.from_bytes(memoryview(bytes(buf)), len(prefix)) == rec


def test_known_bytes():
    rec = OnePipeHeader(0x0102_0304_0506, 0x1112_1314_1516, 0x2122_2324_2526, 0x3132_3334, OnePipeOpcode.PREPARE,
                        OnePipeFlag.EOM)
    assert rec.to_bytes() == bytes.fromhex("010203040506" "111213141516" "212223242526" "31323334" "02" "01")
    assert rec.eom and not rec.is_beacon


def test_opcode_normalised_to_enum():
    rec = OnePipeHeader(1, 1, 0, 0, 5)
    assert rec.opcode is OnePipeOpcode.BEACON and rec.is_beacon
    assert OnePipeHeader.from_bytes(rec.to_bytes()).opcode is OnePipeOpcode.BEACON


def test_opcode_sets():
    assert OnePipeOpcode.PREPARE not in BARRIER_OPCODES  # §7.1: switches don't aggregate prepares
    assert HOP_BY_HOP_OPCODES == NO_PAYLOAD_OPCODES == {OnePipeOpcode.BEACON, OnePipeOpcode.COMMIT}
    assert all(op < 0x10 for op in BARRIER_OPCODES)  # controller traffic is barrier-transparent


# --- 2. codec and Scapy agree ---------------------------------------------------------------


@settings(max_examples=150)
@given(headers_st, st.binary(max_size=32))
def test_scapy_agrees(rec, payload):
    if rec.opcode in NO_PAYLOAD_OPCODES:
        payload = b""
    f = fields(rec)
    assert bytes(OnePipe(**f)) == rec.to_bytes()
    frame = build_udp_frame(MAC1, MAC2, IP1, IP2, 33333, UdpPort.ONEPIPE, rec.to_bytes() + payload)
    pkt = Ether(frame)
    layer = pkt[OnePipe]
    for name, value in f.items():
        assert getattr(layer, name) == value, name
    if payload:
        assert layer[Raw].load == payload
    else:
        assert not layer.payload
    # and the other way: a Scapy-built frame decodes with the fast path
    eth_ip = Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
    built = bytes(eth_ip / UDP() / OnePipe(**f) / payload)
    uf = parse_udp_frame(built)
    assert (uf.udp.sport, uf.udp.dport) == (UdpPort.ONEPIPE, UdpPort.ONEPIPE)
    hdr, body = decode_packet(built, uf.payload_offset, uf.payload_offset + uf.payload_length)
    assert hdr == rec
    assert bytes(body) == payload


def test_scapy_binds_source_port_and_extra_ports():
    rec = OnePipeHeader(5, 5, 3, 9, OnePipeOpcode.ACK)
    # an ACK going back from the receiver's 40100 to a sender on an ephemeral port
    pkt = Ether(build_udp_frame(MAC1, MAC2, IP1, IP2, UdpPort.ONEPIPE, 50000, rec.to_bytes()))
    assert pkt[OnePipe].psn == 9
    other = build_udp_frame(MAC1, MAC2, IP1, IP2, 47998, 47999, rec.to_bytes())
    assert OnePipe not in Ether(other)
    bind_port(47999)
    assert Ether(other)[OnePipe].opcode == OnePipeOpcode.ACK


# --- 3. fuzz --------------------------------------------------------------------------------


@settings(max_examples=2000)
@given(st.binary(max_size=40), st.integers(-2, 42))
def test_fuzz_from_bytes(data, offset):
    try:
        rec = OnePipeHeader.from_bytes(data, offset)
    except HeaderError:
        return
    assert rec.to_bytes() == data[offset:offset + 24]  # every bit is a field: exact re-encode


@settings(max_examples=2000)
@given(st.binary(max_size=48), st.integers(-2, 50), st.one_of(st.none(), st.integers(-2, 50)))
def test_fuzz_decode_packet(data, offset, end):
    try:
        hdr, payload = decode_packet(data, offset, end)
    except HeaderError:
        return
    stop = len(data) if end is None else end
    assert hdr.to_bytes() + bytes(payload) == data[offset:stop]
    if hdr.opcode in NO_PAYLOAD_OPCODES:
        assert not payload


def test_unknown_opcode_rejected():
    raw = bytearray(OnePipeHeader(1, 1, 1, 1, OnePipeOpcode.DATA).to_bytes())
    for bad in (0, 0x09, 0x0F, 0x17, 0xFF):
        raw[22] = bad
        with pytest.raises(HeaderError, match="opcode"):
            OnePipeHeader.from_bytes(raw)


def test_truncated():
    raw = OnePipeHeader(1, 1, 1, 1, OnePipeOpcode.DATA).to_bytes()
    for n in range(24):
        with pytest.raises(HeaderError, match="truncated"):
            OnePipeHeader.from_bytes(raw[:n])
    with pytest.raises(HeaderError):
        OnePipeHeader.from_bytes(raw, -1)
    with pytest.raises(HeaderError):
        decode_packet(raw + b"xx", 0, 23)


def test_beacon_has_no_payload():
    raw = beacon(100, 90).to_bytes()
    hdr, payload = decode_packet(raw)
    assert hdr.is_beacon and hdr.be_barrier == hdr.msg_ts == 100 and hdr.commit_barrier == 90 and not payload
    with pytest.raises(HeaderError, match="BEACON carries 1 payload"):
        decode_packet(raw + b"x")
    # trailing bytes beyond `end` are not the beacon's
    assert decode_packet(raw + b"x", 0, 24)[0] == hdr
    commit = OnePipeHeader(7, 7, 6, 0, OnePipeOpcode.COMMIT).to_bytes()
    with pytest.raises(HeaderError, match="COMMIT"):
        decode_packet(commit + b"\0")


# --- 4. out-of-range fields -----------------------------------------------------------------


@pytest.mark.parametrize("field,value", [
    ("msg_ts", 1 << 48), ("msg_ts", -1), ("be_barrier", 1 << 48), ("commit_barrier", 1 << 48),
    ("psn", 1 << 32), ("psn", -1), ("opcode", 256), ("opcode", 0), ("opcode", 0x20), ("flags", 256),
    ("flags", -1), ("msg_ts", 1.5), ("psn", "1"), ("opcode", None),
])
def test_out_of_range(field, value):
    kw = {"msg_ts": 0, "be_barrier": 0, "commit_barrier": 0, "psn": 0, "opcode": OnePipeOpcode.DATA, "flags": 0}
    kw[field] = value
    with pytest.raises(HeaderError):
        OnePipeHeader(**kw)


# --- 5. in-place barrier rewrite (switch data path, §4) -------------------------------------


@given(headers_st, u48, u48, st.binary(max_size=16))
def test_write_barriers_in_place(rec, be, commit, payload):
    buf = bytearray(b"\xaa" * 3 + rec.to_bytes() + payload)
    write_barriers(buf, 3, be, commit)
    assert read_barriers(buf, 3) == (be, commit)
    new = OnePipeHeader.from_bytes(buf, 3)
    assert new == replace(rec, be_barrier=be, commit_barrier=commit)
    assert buf[:3] == b"\xaa" * 3 and buf[27:] == payload
    write_be_barrier(buf, 3, rec.be_barrier)
    assert OnePipeHeader.from_bytes(buf, 3) == replace(rec, commit_barrier=commit)


def test_write_barriers_rejects_bad_values():
    buf = bytearray(24)
    with pytest.raises(HeaderError):
        write_barriers(buf, 0, 1 << 48, 0)
    with pytest.raises(HeaderError):
        write_be_barrier(buf, 1, 0)  # runs past the buffer
    with pytest.raises(HeaderError):
        read_barriers(buf, 1)


# --- 5. PAWS arithmetic across the 2^48 wrap (§2) -------------------------------------------
# Ground truth: absolute (unwrapped) nanosecond counts, possibly far beyond 2^48; the wire
# carries them mod 2^48 and the helpers must agree with plain integer comparison whenever
# the two values are less than 2^47 apart.

near_wrap = st.one_of(
    st.integers(0, 10 * TS_MOD),
    st.integers(-1000, 1000).map(lambda d: TS_MOD + d),
    st.integers(-1000, 1000).map(lambda d: 5 * TS_MOD + d),
)
delta = st.one_of(st.integers(-(TS_HALF - 1), TS_HALF - 1), st.integers(-1000, 1000),
                  st.sampled_from([TS_HALF - 1, -(TS_HALF - 1), 0, 1, -1]))


@settings(max_examples=500)
@given(near_wrap, delta)
def test_paws_matches_ground_truth(a_abs, d):
    b_abs = a_abs + d
    assume(b_abs >= 0)
    a, b = ts_from_ns(a_abs), ts_from_ns(b_abs)
    assert ts_diff(b, a) == d
    assert ts_diff(a, b) == -d
    assert ts_lt(a, b) == (a_abs < b_abs)
    assert ts_le(a, b) == (a_abs <= b_abs)
    assert ts_gt(a, b) == (a_abs > b_abs)
    assert ts_ge(a, b) == (a_abs >= b_abs)
    assert ts_max(a, b) == ts_from_ns(max(a_abs, b_abs))
    assert ts_min(a, b) == ts_from_ns(min(a_abs, b_abs))
    assert ts_add(a, d) == b
    assert ts_unwrap(b, a_abs) == b_abs
    assert ts_unwrap(a, b_abs) == a_abs


def test_paws_explicit_wrap_cases():
    last = TS_MASK  # 2^48 - 1 ns, the instant before the wrap
    assert ts_lt(last, 0) and ts_lt(last, 5) and not ts_lt(0, last)
    assert ts_diff(0, last) == 1 and ts_diff(3, last) == 4
    assert ts_max(last, 2) == 2 and ts_min(last, 2) == last
    assert ts_le(7, 7) and not ts_lt(7, 7) and ts_diff(7, 7) == 0
    assert ts_add(last, 1) == 0 and ts_add(0, -1) == last
    # a barrier just past the wrap releases a message stamped just before it
    msg_ts, barrier = ts_from_ns(TS_MOD - 10), ts_from_ns(TS_MOD + 10)
    assert ts_lt(msg_ts, barrier) and barrier < msg_ts  # plain int comparison would get it wrong
    assert ts_unwrap(5, 3 * TS_MOD - 2) == 3 * TS_MOD + 5
    # exactly 2^47 apart is ambiguous (RFC 1982); ours reads it as "before" both ways
    assert ts_diff(TS_HALF, 0) == -TS_HALF


@given(st.lists(u48, min_size=1, max_size=20), u48)
def test_paws_max_min_in_a_window(offsets, base):
    # values spread over less than 2^47 around an arbitrary base: ts_max/ts_min fold like max/min
    window = [o % (TS_HALF // 2) for o in offsets]
    vals = [ts_add(base, w) for w in window]
    top = vals[0]
    low = vals[0]
    for v in vals[1:]:
        top = ts_max(top, v)
        low = ts_min(low, v)
    assert top == ts_add(base, max(window)) and low == ts_add(base, min(window))
