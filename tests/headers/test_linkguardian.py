"""LinkGuardian tags: codec, Scapy layers, decode_tag dispatch and era/seq_no arithmetic (§3.5)."""


import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import ARP, Dot1Q, Ether
from scapy.packet import Padding, Raw

from headers.errors import HeaderError
from headers.fcs import append_fcs, fcs_ok, strip_fcs
from headers.layers import linkguardian as lgl
from headers.layers.pfc import layer_to_record
from headers.linkguardian import (
    HEADERS,
    SEQ_SPACE,
    LGData,
    LGLeadingAck,
    LGLossNotification,
    LGType,
    decode_tag,
    next_seq,
    peek_type,
    seq_compare,
    seq_distance,
    seq_lt,
    unwrap,
    unwrap_seq,
    wrap,
)
from headers.pfc import PFCFrame
from headers.record import field_values
from headers.registry import EtherType

N = SEQ_SPACE
HALF = N // 2
DST, SRC = "02:00:00:00:00:02", "02:00:00:00:00:01"

bit = st.integers(0, 1)
u16 = st.integers(0, 0xFFFF)
data_tags = st.builds(LGData, seq_no=u16, next_type=u16, era=bit, retx=bit, dummy=bit, blocking=bit,
                      rx_buffered=bit)
ack_tags = st.builds(LGLeadingAck, leading_ack=u16, next_type=u16, era=bit, piggybacked=bit)
loss_tags = st.builds(LGLossNotification, leading_ack=u16, hole_size=st.integers(1, 255), first_lost_seq=u16,
                      next_type=u16, era=bit, piggybacked=bit)
any_tag = st.one_of(data_tags, ack_tags, loss_tags)

LAYER_OF = {LGData: lgl.LGData, LGLeadingAck: lgl.LGLeadingAck, LGLossNotification: lgl.LGLossNotification}
# pad bits are ignored on decode: compare re-encodings with these bits of byte 0 cleared
PAD_MASK = {LGData: 0x20, LGLeadingAck: 0x0F, LGLossNotification: 0x0F}


def fields(rec):
    return field_values(rec)


# --- 1. round trip ------------------------------------------------------------------------


@given(any_tag, st.binary(max_size=8))
def test_round_trip(rec, prefix):
    raw = rec.to_bytes()
    assert len(raw) == rec.size() == type(rec).SIZE
    assert type(rec).from_bytes(raw) == rec
    buf = bytearray(prefix + b"\xee" * rec.size() + b"tail")
    assert rec.pack_into(buf, len(prefix)) == rec.size()
    assert bytes(buf[len(prefix):len(prefix) + rec.size()]) == raw
    assert type(rec).from_bytes(buf, len(prefix)) == rec
    assert type(rec).from_bytes(memoryview(bytes(buf)), len(prefix)) == rec
    assert decode_tag(buf, len(prefix)) == rec
    assert peek_type(raw) is type(rec).TYPE


def test_known_bytes():
    # bit order as in the public P4 header: type:2 first, MSB first
    assert LGData(0x1234, 0x0800, era=1, retx=1, dummy=0, blocking=1, rx_buffered=1).to_bytes() == \
        bytes([0b00011011, 0x12, 0x34, 0x08, 0x00])
    assert LGLeadingAck(0xBEEF, 0, era=1, piggybacked=1).to_bytes() == bytes([0b01110000, 0xBE, 0xEF, 0, 0])
    assert LGLossNotification(7, 2, 5, 0xABCD, era=0, piggybacked=1).to_bytes() == \
        bytes([0b10100000, 0, 7, 2, 0, 5, 0xAB, 0xCD])


def test_pad_bits_ignored_on_decode():
    assert LGData.from_bytes(bytes([0x20, 0, 1, 0, 0])) == LGData(1, 0, blocking=0)
    assert LGLeadingAck.from_bytes(bytes([0x4F, 0, 1, 0, 0])) == LGLeadingAck(1)
    assert LGLossNotification.from_bytes(bytes([0x8F, 0, 1, 1, 0, 0, 0, 0])) == LGLossNotification(1, 1, 0)


# --- 2. codec == Scapy layer, both ways -------------------------------------------------


@given(any_tag)
def test_codec_matches_scapy_layer(rec):
    layer_cls = LAYER_OF[type(rec)]
    raw = rec.to_bytes()
    assert bytes(layer_cls(**fields(rec))) == raw
    frame = bytes.fromhex("020000000002020000000001abcd") + raw
    pkt = Ether(frame)
    assert pkt.type == EtherType.LINKGUARDIAN
    layer = pkt[layer_cls]
    assert type(layer) is layer_cls
    for name, value in fields(rec).items():
        assert getattr(layer, name) == value, name
    assert layer.type == type(rec).TYPE and layer.pad == 0
    # and building the whole frame in Scapy gives the same bytes
    assert bytes(Ether(dst=DST, src=SRC) / layer_cls(**fields(rec))) == frame


@given(any_tag)
def test_base_layer_dispatches(rec):
    assert type(lgl.LinkGuardian(rec.to_bytes())) is LAYER_OF[type(rec)]


# --- 3. fuzz ------------------------------------------------------------------------------

DECODERS = [LGData.from_bytes, LGLeadingAck.from_bytes, LGLossNotification.from_bytes, decode_tag]


@pytest.mark.parametrize("decoder", DECODERS, ids=lambda d: getattr(d, "__qualname__", str(d)))
@settings(max_examples=2000)
@given(data=st.binary(max_size=20), offset=st.integers(-3, 24))
def test_fuzz_decoders(decoder, data, offset):
    try:
        rec = decoder(data, offset)
    except HeaderError:
        return
    consumed = bytearray(data[offset:offset + rec.size()])
    assert offset >= 0 and len(consumed) == rec.size()
    consumed[0] &= ~PAD_MASK[type(rec)] & 0xFF
    assert rec.to_bytes() == bytes(consumed)


@settings(max_examples=2000)
@given(data=st.binary(max_size=20), offset=st.integers(-3, 24))
def test_fuzz_scapy_matches_codec(data, offset):
    # whatever the codec accepts, Scapy dissects to the same field values
    try:
        rec = decode_tag(data, offset)
    except HeaderError:
        return
    layer = lgl.LinkGuardian(bytes(data[offset:]))
    assert type(layer) is LAYER_OF[type(rec)]
    for name, value in fields(rec).items():
        assert getattr(layer, name) == value


# --- 4. out-of-range fields ---------------------------------------------------------------


@pytest.mark.parametrize(("cls", "kwargs"), [
    (LGData, {"seq_no": 0x10000}), (LGData, {"seq_no": -1}), (LGData, {"next_type": 0x10000}),
    (LGData, {"era": 2}), (LGData, {"retx": 2}), (LGData, {"dummy": -1}), (LGData, {"blocking": 3}),
    (LGData, {"rx_buffered": 2}), (LGData, {"seq_no": 1.0}), (LGData, {"seq_no": "1"}),
    (LGLeadingAck, {"leading_ack": 0x10000}), (LGLeadingAck, {"era": 2}), (LGLeadingAck, {"piggybacked": 2}),
    (LGLeadingAck, {"next_type": -1}),
    (LGLossNotification, {"hole_size": 0}), (LGLossNotification, {"hole_size": 256}),
    (LGLossNotification, {"first_lost_seq": 0x10000}), (LGLossNotification, {"leading_ack": -1}),
    (LGLossNotification, {"era": 2}), (LGLossNotification, {"piggybacked": 2}),
    (LGLossNotification, {"next_type": 0x10000}),
])
def test_out_of_range_fields_raise(cls, kwargs):
    base = {LGData: {"seq_no": 0}, LGLeadingAck: {"leading_ack": 0},
            LGLossNotification: {"leading_ack": 0, "hole_size": 1, "first_lost_seq": 0}}[cls]
    with pytest.raises(HeaderError):
        cls(**{**base, **kwargs})


def test_zero_hole_size_rejected_on_decode():
    with pytest.raises(HeaderError, match="hole_size"):
        LGLossNotification.from_bytes(bytes([0x80, 0, 1, 0, 0, 5, 0, 0]))


def test_pack_into_short_buffer_raises_header_error():
    with pytest.raises(HeaderError):
        LGLossNotification(1, 1, 1).pack_into(bytearray(7))
    with pytest.raises(HeaderError):
        LGData(1).pack_into(bytearray(8), 4)


# --- 5. protocol specific -----------------------------------------------------------------


@pytest.mark.parametrize(("first", "cls"), [(0x00, LGData), (0x3F, LGData), (0x40, LGLeadingAck),
                                            (0x7F, LGLeadingAck), (0x80, LGLossNotification),
                                            (0xBF, LGLossNotification)])
def test_decode_tag_dispatch(first, cls):
    raw = bytes([first, 0, 9, 1, 0, 9, 0, 0])
    rec = decode_tag(raw)
    assert type(rec) is cls
    assert peek_type(raw) is cls.TYPE
    # the other decoders refuse a tag of the wrong type
    for other in HEADERS:
        if other is not cls:
            with pytest.raises(HeaderError, match="type bits"):
                other.from_bytes(raw)


def test_buffered_copy_type_is_not_on_the_wire():
    with pytest.raises(HeaderError, match="buffered"):
        decode_tag(bytes([0xC0, 0, 0, 0, 0, 0, 0, 0]))
    assert peek_type(b"\xc5") is LGType.BUFFERED
    # Scapy shows such a frame as Raw rather than failing
    assert type(Ether(bytes(Ether(dst=DST, src=SRC, type=0xABCD)) + b"\xc0\0\0\0\0")[1]) is Raw


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x01\x08", b"\x80\x00\x01\x01\x00\x00\x08"])
def test_decode_tag_truncated(data):
    with pytest.raises(HeaderError, match="truncated"):
        decode_tag(data)


def test_scapy_dissects_data_ip_udp_payload():
    frame = bytes(Ether(dst=DST, src=SRC) / lgl.LGData(seq_no=65535, era=1)
                  / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1234, dport=5678) / b"payload")
    assert frame[12:14] == b"\xab\xcd"
    rec = decode_tag(frame, 14)
    assert rec == LGData(65535, EtherType.IPV4, era=1)
    pkt = Ether(frame)
    assert pkt.layers() == [Ether, lgl.LGData, IP, UDP, Raw]
    assert pkt[UDP].dport == 5678 and pkt[Raw].load == b"payload"
    # the bytes after the tag are exactly the original IP datagram
    assert frame[14 + rec.size():] == bytes(IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1234, dport=5678)
                                            / b"payload")


def test_scapy_dissects_stacked_tags():
    # a leading ACK piggybacked on a reverse frame that is itself protected data
    frame = bytes(Ether(dst=DST, src=SRC) / lgl.LGLeadingAck(leading_ack=41, piggybacked=1)
                  / lgl.LGData(seq_no=9) / IP(src="10.0.0.1", dst="10.0.0.2"))
    ack = decode_tag(frame, 14)
    assert ack == LGLeadingAck(41, EtherType.LINKGUARDIAN, piggybacked=1)
    assert decode_tag(frame, 14 + ack.size()) == LGData(9, EtherType.IPV4)
    pkt = Ether(frame)
    assert pkt.layers() == [Ether, lgl.LGLeadingAck, lgl.LGData, IP]


def test_scapy_dissects_other_payloads():
    base = Ether(dst=DST, src=SRC)
    arp = Ether(bytes(base / lgl.LGData(seq_no=1) / ARP(psrc="10.0.0.1", pdst="10.0.0.2")))
    assert arp[lgl.LGData].next_type == EtherType.ARP and arp.haslayer(ARP)
    v6 = Ether(bytes(base / lgl.LGData(seq_no=1) / IPv6(src="::1", dst="::2")))
    assert v6[lgl.LGData].next_type == EtherType.IPV6 and v6.haslayer(IPv6)
    pfc = PFCFrame(0b10, (0, 0xFFFF, 0, 0, 0, 0, 0, 0))
    carried = Ether(bytes(base / lgl.LGData(seq_no=1, next_type=EtherType.MAC_CONTROL)) + pfc.to_bytes())
    assert layer_to_record(carried) == pfc
    tagged = Ether(bytes(base / Dot1Q(vlan=5) / lgl.LGLossNotification(leading_ack=3, hole_size=2)))
    assert tagged[lgl.LGLossNotification].hole_size == 2


def test_dummy_and_courier_carry_nothing():
    # §3.2 dummy: data tag with dummy=1 and next_type 0; §3.1 courier: leading ACK, next_type 0;
    # both padded to the 60-byte minimum frame, the padding is not a payload
    for tag in (LGData(100, 0, dummy=1), LGLeadingAck(99)):
        frame = bytes.fromhex("020000000002020000000001abcd") + tag.to_bytes()
        frame += bytes(60 - len(frame))
        assert decode_tag(frame, 14) == tag
        pkt = Ether(frame)
        assert type(pkt[2]) is Padding
        assert bytes(pkt) == frame
    assert lgl.LGData(dummy=1).next_type is None and bytes(lgl.LGData(dummy=1))[3:] == b"\0\0"


@given(st.sampled_from([0, 13, 14, 33, 60]), st.data())
def test_single_bit_flip_fails_software_fcs(extra, data):
    frame = bytes(Ether(dst=DST, src=SRC) / lgl.LGData(seq_no=12345)
                  / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1, dport=2) / bytes(extra))
    framed = bytearray(append_fcs(frame))
    assert fcs_ok(framed) and strip_fcs(framed) == frame
    flip = data.draw(st.integers(0, len(framed) * 8 - 1))
    framed[flip // 8] ^= 1 << (flip % 8)
    assert not fcs_ok(framed)


# era / seq_no arithmetic against absolute counters ------------------------------------

# absolute counters spread over many eras, and clustered at the 16-bit and 17-bit wraps
counters = st.one_of(
    st.integers(0, 2**40),
    st.builds(lambda k, off: max(0, k * N + off), st.integers(0, 64), st.integers(-HALF - 2, HALF + 2)),
)


def sign(x):
    return (x > 0) - (x < 0)


@settings(max_examples=500)
@given(counters, st.integers(-HALF, HALF))
def test_seq_compare_matches_absolute_counters(a, d):
    b = max(0, a + d)
    ae, aseq = wrap(a)
    be, bseq = wrap(b)
    assert seq_compare(ae, aseq, be, bseq) == sign(a - b)
    assert seq_compare(be, bseq, ae, aseq) == sign(b - a)
    assert seq_lt(ae, aseq, be, bseq) == (a < b)
    assert seq_lt(be, bseq, ae, aseq) == (b < a)
    if -HALF <= b - a < HALF:
        assert unwrap_seq(bseq, a) == b


@settings(max_examples=500)
@given(counters, st.integers(-(N - 1), N - 1))
def test_seq_distance_and_unwrap_match_absolute_counters(a, d):
    b = max(0, a + d)
    assert seq_distance(*wrap(a), *wrap(b)) == b - a
    assert unwrap(*wrap(b), a) == b
    assert next_seq(*wrap(a)) == wrap(a + 1)


def test_era_wraps():
    assert wrap(N - 1) == (0, N - 1)
    assert wrap(N) == (1, 0)
    assert wrap(2 * N) == (0, 0)  # the era is one bit: it toggles back
    assert next_seq(0, N - 1) == (1, 0)
    assert next_seq(1, N - 1) == (0, 0)
    assert next_seq(1, 5) == (1, 6)
    # the paper's example case: the last seq of era 0 is before the first of era 1
    assert seq_compare(0, N - 1, 1, 0) == -1 and seq_lt(0, N - 1, 1, 0)
    assert seq_compare(1, N - 1, 0, 0) == -1  # and across the era (17-bit) wrap
    assert seq_distance(1, N - 1, 0, 2) == 3  # a hole of 3 across the 17-bit wrap
    assert unwrap(1, N - 1, 2 * N + 1) == 2 * N - 1
    assert unwrap(1, N - 1, 0) == -1  # nearest value lies before counter 0
    assert unwrap_seq(N - 3, 2 * N + 5) == 2 * N - 3  # a first_lost_seq just before the wrap
    assert unwrap_seq(4, 2 * N - 3) == 2 * N + 4


def test_era_correction_limit_is_half_the_space():
    # exactly N/2 apart across an era boundary is still right; the paper promises no more
    assert seq_compare(*wrap(N - 1), *wrap(N - 1 + HALF)) == -1
    assert seq_compare(*wrap(N - 1), *wrap(N + HALF)) == 1  # N/2 + 1 apart: wrong, by design
