"""T/C-SACK data and ACK headers: codec, Scapy layers, dispatch, SACK block rules and 32-bit serial arithmetic."""


import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from headers.errors import HeaderError
from headers.inet import build_udp_frame, parse_udp_frame
from headers.layers import tcsack as L
from headers.record import field_values
from headers.registry import UdpPort
from headers.tcsack import (
    HEADERS,
    MAX_BLOCKS,
    SEQ_HALF,
    SEQ_MASK,
    SEQ_MOD,
    TcsAck,
    TcsAckFlag,
    TcsData,
    TcsDataFlag,
    decode_tcsack,
    max_blocks,
    seq_add,
    seq_diff,
    seq_ge,
    seq_gt,
    seq_le,
    seq_lt,
    seq_max,
    seq_min,
)

MAC1, MAC2 = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
IP1, IP2 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])

u8 = st.integers(0, 255)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, SEQ_MASK)


@st.composite
def valid_blocks(draw, cum_ack):
    """Ascending, non-empty, non-adjacent runs above cum_ack, built as gaps and lengths (wraps freely)."""
    n = draw(st.integers(0, 12))
    pos = 0  # offset from cum_ack of the last end so far
    out = []
    for _ in range(n):
        gap = draw(st.integers(1, 1 << 24))
        length = draw(st.integers(1, 1 << 24))
        if pos + gap + length >= SEQ_HALF:
            break
        start = pos + gap
        pos = start + length
        out.append(((cum_ack + start) & SEQ_MASK, (cum_ack + pos) & SEQ_MASK))
    return tuple(out)


@st.composite
def acks(draw):
    cum = draw(st.one_of(u32, st.integers(SEQ_MOD - 64, SEQ_MASK)))  # often right below the wrap
    return TcsAck(flow_id=draw(u16), ack_seq=draw(u32), cum_ack=cum, tsecr=draw(u32), blocks=draw(valid_blocks(cum)),
                  flags=draw(u8), ack_delay=draw(u16))


datas = st.builds(TcsData, flow_id=u16, seq=u32, tsval=u32, flags=u8)
LAYER_OF = {TcsData: L.TcsData, TcsAck: L.TcsAck}


def fields(rec):
    return field_values(rec)


def test_headers_tuple_and_sizes():
    assert (TcsData, TcsAck) == HEADERS
    assert TcsData.SIZE == 12 and TcsAck.SIZE == 20


# --- 1. round trip --------------------------------------------------------------------------


@given(st.one_of(datas, acks()), st.binary(max_size=8))
def test_round_trip(rec, prefix):
    raw = rec.to_bytes()
    assert len(raw) == rec.size()
    cls = type(rec)
    assert cls.from_bytes(raw) == rec
    assert decode_tcsack(raw) == rec
    buf = bytearray(prefix + b"\xee" * rec.size() + b"tail")
    assert rec.pack_into(buf, len(prefix)) == rec.size()
    assert bytes(buf[len(prefix):len(prefix) + rec.size()]) == raw
    assert buf.endswith(b"tail")
    assert cls.from_bytes(buf, len(prefix)) == rec
    assert decode_tcsack(memoryview(bytes(buf)), len(prefix), len(prefix) + rec.size()) == rec


def test_known_bytes():
    d = TcsData(flow_id=0x0102, seq=0x03040506, tsval=0x0708090A, flags=TcsDataFlag.RETX | TcsDataFlag.LAST)
    assert d.to_bytes() == bytes.fromhex("01030102030405060708090a")
    a = TcsAck(flow_id=7, ack_seq=1, cum_ack=100, tsecr=0xAABBCCDD, blocks=((102, 105), (200, 201)),
               flags=TcsAckFlag.FIN_SEEN, ack_delay=0x1234)
    assert a.to_bytes() == bytes.fromhex("02020007" "00000001" "00000064" "aabbccdd" "02001234"
                                         "00000066" "00000069" "000000c8" "000000c9")
    assert a.n_blocks == 2 and a.size() == 36


def test_blocks_normalised_from_lists():
    a = TcsAck(1, 2, 10, blocks=[[12, 14], (20, 21)])
    assert a.blocks == ((12, 14), (20, 21))
    assert hash(a) == hash(TcsAck(1, 2, 10, blocks=((12, 14), (20, 21))))


# --- 2. codec and Scapy agree ---------------------------------------------------------------


@settings(max_examples=150)
@given(st.one_of(datas, acks()), st.binary(max_size=16), st.booleans())
def test_scapy_agrees(rec, payload, to_receiver):
    if isinstance(rec, TcsAck):
        payload = b""
    f = fields(rec)
    layer_cls = LAYER_OF[type(rec)]
    assert bytes(layer_cls(**f)) == rec.to_bytes()
    # data to the receiver's port; ACKs from it back to the sender's ephemeral port
    sport, dport = (40001, UdpPort.TCSACK) if to_receiver else (UdpPort.TCSACK, 40001)
    pkt = Ether(build_udp_frame(MAC1, MAC2, IP1, IP2, sport, dport, rec.to_bytes() + payload))
    layer = pkt[layer_cls]
    for name, value in f.items():
        assert getattr(layer, name) == value, name
    if isinstance(rec, TcsAck):
        assert layer.n_blocks == rec.n_blocks and layer.reserved == 0
    if payload:
        assert layer[Raw].load == payload
    eth_ip = Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(src="10.0.0.1", dst="10.0.0.2")
    built = bytes(eth_ip / UDP() / layer_cls(**f) / payload)
    uf = parse_udp_frame(built)
    assert (uf.udp.sport, uf.udp.dport) == (UdpPort.TCSACK, UdpPort.TCSACK)
    assert decode_tcsack(built, uf.payload_offset, uf.payload_offset + uf.payload_length) == rec


def test_scapy_unknown_kind_is_raw():
    pkt = Ether(build_udp_frame(MAC1, MAC2, IP1, IP2, 40001, UdpPort.TCSACK, b"\x09" + bytes(19)))
    assert L.TcsData not in pkt and L.TcsAck not in pkt and pkt[Raw].load[0] == 9


def test_scapy_fills_n_blocks():
    layer = L.TcsAck(cum_ack=5, blocks=[(7, 8), (10, 12), (20, 30)])
    assert bytes(layer)[16] == 3
    assert TcsAck.from_bytes(bytes(layer)).blocks == ((7, 8), (10, 12), (20, 30))


# --- 3. fuzz --------------------------------------------------------------------------------


def _clear_reserved(raw: bytes) -> bytes:
    # ACK byte 17 is reserved: ignored on decode, sent as zero, so compare modulo it
    return raw[:17] + b"\0" + raw[18:] if len(raw) > 17 else raw


def _mutate(raw: bytes, pos: int, xor: int, cut: int) -> bytes:
    buf = bytearray(raw)
    if buf:
        buf[pos % len(buf)] ^= xor
    return bytes(buf[:len(buf) - cut])


# random bytes rarely make a valid ACK: also fuzz valid messages with one byte flipped and
# the tail cut, so the block rules and the length checks see near misses
_SEEDS = [TcsData(3, 4, 5, 1).to_bytes(), TcsAck(1, 2, 3).to_bytes()] + [
    TcsAck(9, k, cum, k, tuple((seq_add(cum, 3 * i + 1), seq_add(cum, 3 * i + 2 + k % 2)) for i in range(k)),
           k, k).to_bytes()
    for k in range(1, 7) for cum in (0, 1000, SEQ_MASK - 4, SEQ_HALF - 3)
]
mutated = st.builds(_mutate, st.sampled_from(_SEEDS), st.integers(0, 80), u8, st.integers(0, 10))
fuzz_bytes = st.one_of(st.binary(max_size=64), mutated, mutated, mutated.map(lambda b: b"\x55\x66" + b))
# offsets and ends biased towards the places a message starts and stops
offsets = st.one_of(st.sampled_from([0, 2]), st.sampled_from([0, 2]), st.integers(-2, 70))
ends = st.one_of(st.none(), st.none(), st.integers(-2, 120))


@settings(max_examples=2000)
@given(fuzz_bytes, offsets)
def test_fuzz_data(data, offset):
    try:
        rec = TcsData.from_bytes(data, offset)
    except HeaderError:
        return
    assert rec.to_bytes() == data[offset:offset + 12]


@settings(max_examples=2000)
@given(fuzz_bytes, offsets, ends)
def test_fuzz_ack(data, offset, end):
    try:
        rec = TcsAck.from_bytes(data, offset, end)
    except HeaderError:
        return
    assert offset + rec.size() <= (len(data) if end is None else end)
    assert rec.to_bytes() == _clear_reserved(data[offset:offset + rec.size()])


@settings(max_examples=2000)
@given(fuzz_bytes, offsets, ends)
def test_fuzz_decode(data, offset, end):
    try:
        rec = decode_tcsack(data, offset, end)
    except HeaderError:
        return
    assert offset + rec.size() <= (len(data) if end is None else end)
    assert rec.to_bytes() == _clear_reserved(data[offset:offset + rec.size()]) if isinstance(rec, TcsAck) else \
        rec.to_bytes() == data[offset:offset + 12]


def test_decode_errors():
    d = TcsData(1, 2).to_bytes()
    a = TcsAck(1, 2, 3, blocks=((5, 6),)).to_bytes()
    with pytest.raises(HeaderError, match="kind"):
        TcsData.from_bytes(a)
    with pytest.raises(HeaderError, match="kind"):
        TcsAck.from_bytes(d + bytes(8))
    with pytest.raises(HeaderError, match="unknown kind"):
        decode_tcsack(b"\x03" + d[1:])
    with pytest.raises(HeaderError):
        decode_tcsack(b"")
    with pytest.raises(HeaderError, match="truncated"):
        decode_tcsack(d, 0, 11)  # `end` cuts the data header
    with pytest.raises(HeaderError, match="truncated"):
        decode_tcsack(a, 0, len(a) - 1)  # `end` cuts the last block
    with pytest.raises(HeaderError, match="end="):
        decode_tcsack(a, 0, len(a) + 1)
    assert decode_tcsack(a + b"junk") == TcsAck.from_bytes(a)  # self-delimiting
    too_many = bytearray(a)
    too_many[16] = MAX_BLOCKS + 1
    with pytest.raises(HeaderError, match="n_blocks"):
        TcsAck.from_bytes(bytes(too_many) + bytes(8 * (MAX_BLOCKS + 1)))


def test_reserved_ignored_on_decode():
    raw = bytearray(TcsAck(1, 2, 3).to_bytes())
    raw[17] = 0xFF
    assert TcsAck.from_bytes(raw) == TcsAck(1, 2, 3)


# --- 4. out-of-range fields -----------------------------------------------------------------


@pytest.mark.parametrize("field,value", [
    ("flow_id", 1 << 16), ("flow_id", -1), ("seq", 1 << 32), ("tsval", 1 << 32), ("flags", 256), ("seq", 2.0),
])
def test_data_out_of_range(field, value):
    kw = {"flow_id": 0, "seq": 0, "tsval": 0, "flags": 0, field: value}
    with pytest.raises(HeaderError):
        TcsData(**kw)


@pytest.mark.parametrize("field,value", [
    ("flow_id", 1 << 16), ("ack_seq", 1 << 32), ("cum_ack", -1), ("tsecr", 1 << 32), ("flags", 256),
    ("ack_delay", 1 << 16), ("blocks", 5), ("blocks", ((1, 2, 3),)), ("blocks", (7,)), ("blocks", ((11, 1 << 32),)),
])
def test_ack_out_of_range(field, value):
    kw = {"flow_id": 0, "ack_seq": 0, "cum_ack": 10, "tsecr": 0, "flags": 0, "ack_delay": 0, field: value}
    with pytest.raises(HeaderError):
        TcsAck(**kw)


# --- 5. SACK block validation, including across the 2^32 wrap -------------------------------


@pytest.mark.parametrize("cum,blocks,problem", [
    (10, ((10, 12),), "at or below cum_ack"),  # a block at cum_ack: cum_ack would have advanced
    (10, ((5, 8),), "at or below cum_ack"),  # below cum_ack
    (10, ((12, 12),), "empty"),
    (10, ((14, 12),), "empty or inverted"),
    (10, ((12, 15), (15, 18)), "touches"),  # adjacent: should have been one block
    (10, ((12, 15), (14, 18)), "overlaps"),
    (10, ((20, 25), (12, 15)), "overlaps"),  # descending
    (10, ((12, 10 + SEQ_HALF),), r"2\^31"),  # the span must stay comparable
    (SEQ_MASK - 1, ((SEQ_MASK - 1, 3),), "at or below"),  # wrap: starts at cum_ack
    (SEQ_MASK - 1, ((2, 5), (SEQ_MASK, 1)), "overlaps"),  # wrap: descending across zero
    (SEQ_MASK - 1, ((2, 5), (SEQ_MASK - 3, 1)), "below cum_ack"),  # wrap: a later block below cum_ack
    (SEQ_MASK - 1, ((SEQ_MASK, 1), (1, 4)), "touches"),  # wrap: adjacent right after zero
])
def test_invalid_blocks(cum, blocks, problem):
    with pytest.raises(HeaderError, match=problem):
        TcsAck(1, 1, cum, blocks=blocks)
    # the decoder applies the same rules to bytes on the wire
    raw = bytearray(TcsAck(1, 1, cum).to_bytes())
    raw[16] = len(blocks)
    raw += b"".join(s.to_bytes(4, "big") + e.to_bytes(4, "big") for s, e in blocks)
    with pytest.raises(HeaderError, match=problem):
        TcsAck.from_bytes(raw)


def test_valid_blocks_across_wrap():
    cum = SEQ_MASK - 5  # 2^32 - 6
    a = TcsAck(1, 1, cum, blocks=((SEQ_MASK - 3, SEQ_MASK), (0, 2), (4, 9)))
    assert TcsAck.from_bytes(a.to_bytes()) == a
    assert a.holes() == ((SEQ_MASK - 5, SEQ_MASK - 3), (SEQ_MASK, 0), (2, 4))
    assert a.acked(SEQ_MASK - 6) and not a.acked(cum) and a.acked(SEQ_MASK - 2) and not a.acked(SEQ_MASK)
    assert a.acked(0) and a.acked(1) and not a.acked(2) and a.acked(8) and not a.acked(9)
    # a block ending exactly at the wrap point: end == 0 means "up to 2^32 - 1"
    b = TcsAck(1, 1, cum, blocks=((SEQ_MASK - 2, 0),))
    assert b.acked(SEQ_MASK) and not b.acked(0)


def test_max_blocks_fit_mtu():
    assert MAX_BLOCKS == max_blocks(1500) == 181
    full = TcsAck(1, 1, 0, blocks=tuple((2 * i + 1, 2 * i + 2) for i in range(MAX_BLOCKS)))
    assert 20 + 8 + full.size() <= 1500 < 20 + 8 + full.size() + 8
    assert max_blocks(9000) == 255  # n_blocks is 8 bits
    assert max_blocks(1500, overhead=48) == 179  # IPv6 + UDP
    assert max_blocks(48) == 0
    with pytest.raises(HeaderError):
        max_blocks(47)
    with pytest.raises(HeaderError, match="exceed"):
        TcsAck(1, 1, 0, blocks=tuple((2 * i + 1, 2 * i + 2) for i in range(MAX_BLOCKS + 1)))


@settings(max_examples=300)
@given(u32, st.sets(st.integers(0, 300), max_size=120))
def test_holes_and_acked_match_ground_truth(cum, received_rel):
    # the receiver's view: cum_ack plus every received offset above it, turned into blocks
    received_rel = {r for r in received_rel if r > 0}
    runs = []
    for r in sorted(received_rel):
        if runs and runs[-1][1] == r:
            runs[-1][1] = r + 1
        else:
            runs.append([r, r + 1])
    assume(len(runs) <= MAX_BLOCKS)
    a = TcsAck(1, 1, cum, blocks=tuple((seq_add(cum, s), seq_add(cum, e)) for s, e in runs))
    top = runs[-1][1] if runs else 0
    for rel in range(-3, top + 3):
        seq = seq_add(cum, rel)
        assert a.acked(seq) == (rel < 0 or rel in received_rel), rel
    missing = [rel for rel in range(0, top) if rel not in received_rel]
    from_holes = [seq_diff(seq_add(s, i), cum) for s, e in a.holes() for i in range(seq_diff(e, s))]
    assert from_holes == missing


# --- 5. serial-number arithmetic across the 2^32 wrap ---------------------------------------


@settings(max_examples=400)
@given(st.one_of(st.integers(0, 8 * SEQ_MOD), st.integers(-500, 500).map(lambda d: 3 * SEQ_MOD + d)),
       st.one_of(st.integers(-(SEQ_HALF - 1), SEQ_HALF - 1), st.integers(-500, 500)))
def test_seq_matches_ground_truth(a_abs, d):
    b_abs = a_abs + d
    assume(b_abs >= 0)
    a, b = a_abs & SEQ_MASK, b_abs & SEQ_MASK
    assert seq_diff(b, a) == d
    assert seq_lt(a, b) == (a_abs < b_abs) and seq_le(a, b) == (a_abs <= b_abs)
    assert seq_gt(a, b) == (a_abs > b_abs) and seq_ge(a, b) == (a_abs >= b_abs)
    assert seq_max(a, b) == max(a_abs, b_abs) & SEQ_MASK and seq_min(a, b) == min(a_abs, b_abs) & SEQ_MASK
    assert seq_add(a, d) == b
