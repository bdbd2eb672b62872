"""DTA reports and NACKs: codec round trips, codec/Scapy agreement, fuzzing, wire details."""

from __future__ import annotations

import contextlib
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from headers import dta
from headers.dta import (
    HEADERS,
    MAX_KEYWRITE_WORDS,
    Append,
    DTABase,
    DTANack,
    KeyIncrement,
    KeyWrite,
    MergeFunction,
    Opcode,
    Postcarder,
    SketchMerge,
)
from headers.errors import HeaderError
from headers.inet import build_udp_frame
from headers.layers import dta as layers
from headers.record import field_values
from headers.registry import UdpPort

SRC_MAC = bytes.fromhex("020000000001")
DST_MAC = bytes.fromhex("020000000002")
SRC_IP = bytes([10, 0, 0, 1])
DST_IP = bytes([10, 0, 0, 2])

u1 = st.integers(0, 1)
u6 = st.integers(0, 63)
u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
u64 = st.integers(0, 2**64 - 1)
redundancy = st.integers(1, 0xFF)
words = st.lists(u32, min_size=1, max_size=16).map(tuple)

bases = st.builds(DTABase, opcode=u8, seqnum=u8, immediate=u1, retransmittable=u1, reserved=u6)
keywrites = st.builds(KeyWrite, redundancy=redundancy, key=u32, data=words)
appends = st.builds(Append, list_id=u32, data=u32)
keyincrements = st.builds(KeyIncrement, redundancy=redundancy, key=u32, counter=u64)
postcarders = st.builds(Postcarder, key=u32, hop=u8, data=u32)
sketchmerges = st.builds(SketchMerge.for_column, reporter_id=u16, sketch_id=u16, column=u32,
                         counters=st.lists(u32, min_size=1, max_size=255).map(tuple),
                         merge=st.sampled_from(list(MergeFunction)))
nacks = st.one_of(
    st.builds(DTANack, seqnum=u8, nack=u1, reserved=u6),
    st.builds(DTANack, seqnum=u8, nack=u1, sketch=st.just(1), reserved=u6, reporter_id=u16, sketch_id=u16,
              expected_column=u32),
)
primitives = st.one_of(keywrites, appends, keyincrements, postcarders, sketchmerges)

STRATEGIES: dict[type, st.SearchStrategy[Any]] = {
    DTABase: bases, KeyWrite: keywrites, Append: appends, KeyIncrement: keyincrements,
    Postcarder: postcarders, SketchMerge: sketchmerges, DTANack: nacks,
}


def fields_of(record: Any) -> dict[str, Any]:
    return field_values(record)


def assert_layer_matches(layer: Any, record: Any) -> None:
    for name, value in fields_of(record).items():
        assert getattr(layer, name) == value, name


@st.composite
def reports(draw: st.DrawFn) -> tuple[DTABase, dta.Primitive]:
    primitive = draw(primitives)
    base = DTABase(primitive.OPCODE, draw(u8), draw(u1), draw(u1), draw(u6))
    return base, primitive


def test_every_record_is_listed() -> None:
    assert set(HEADERS) == set(STRATEGIES)
    assert set(layers.LAYERS) == set(HEADERS)
    assert {cls.OPCODE for cls in dta.PRIMITIVES.values()} == set(Opcode)


# 1. round trips -------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", HEADERS, ids=lambda c: c.__name__)
@given(data=st.data())
def test_round_trip(cls: type, data: st.DataObject) -> None:
    record = data.draw(STRATEGIES[cls])
    raw = record.to_bytes()
    assert record.size() == len(raw)
    assert cls.from_bytes(raw) == record
    # pack_into at an offset inside a larger buffer, decode from there
    pad = data.draw(st.integers(0, 7))
    buf = bytearray(b"\xee" * (pad + len(raw) + 3))
    assert record.pack_into(buf, pad) == len(raw)
    assert bytes(buf[pad:pad + len(raw)]) == raw
    if cls is KeyWrite or cls is SketchMerge:  # variable length: bounded by end
        assert cls.from_bytes(memoryview(buf), pad, pad + len(raw)) == record
    else:
        assert cls.from_bytes(memoryview(buf), pad) == record


@given(report=reports())
def test_report_round_trip(report: tuple[DTABase, dta.Primitive]) -> None:
    base, primitive = report
    payload = dta.encode_report(base, primitive)
    assert len(payload) == 3 + primitive.size()
    assert dta.decode_report(payload) == (base, primitive)
    assert dta.decode_report(b"xx" + payload + b"yy", 2, 2 + len(payload)) == (base, primitive)
    frame = dta.build_report_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, base, primitive)
    udp, base2, primitive2 = dta.parse_report_frame(frame)
    assert (base2, primitive2) == (base, primitive)
    assert udp.udp.sport == UdpPort.DTA_SOURCE and udp.udp.dport == UdpPort.DTA


# 2. codec and Scapy agree ---------------------------------------------------------------------


@pytest.mark.parametrize("cls", HEADERS, ids=lambda c: c.__name__)
@given(data=st.data())
def test_scapy_layer_agrees(cls: type, data: st.DataObject) -> None:
    record = data.draw(STRATEGIES[cls])
    layer_cls = layers.LAYERS[cls]
    raw = record.to_bytes()
    assert bytes(layer_cls(**fields_of(record))) == raw
    dissected = layer_cls(raw)
    assert_layer_matches(dissected, record)
    assert not dissected.payload  # the layer consumed exactly the record's bytes


def scapy_report_frame(base: DTABase, primitive: dta.Primitive, sport: int = UdpPort.DTA_SOURCE) -> Any:
    return (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
            / IP(src="10.0.0.1", dst="10.0.0.2", id=0, flags="DF", ttl=64)
            / UDP(sport=sport, dport=UdpPort.DTA)
            / layers.DTA(**fields_of(base))
            / layers.LAYERS[type(primitive)](**fields_of(primitive)))


@given(report=reports())
def test_whole_report_frame_agrees_with_scapy(report: tuple[DTABase, dta.Primitive]) -> None:
    base, primitive = report
    frame = dta.build_report_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, base, primitive)
    # Scapy builds the identical frame (IP and UDP checksums included) ...
    assert bytes(scapy_report_frame(base, primitive)) == frame
    # ... and dissects ours all the way down to the primitive.
    pkt = Ether(frame)
    assert_layer_matches(pkt[layers.DTA], base)
    assert_layer_matches(pkt[layers.LAYERS[type(primitive)]], primitive)
    assert Raw not in pkt


@given(nack=nacks)
def test_whole_nack_frame_agrees_with_scapy(nack: DTANack) -> None:
    frame = dta.build_nack_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, nack)
    pkt = Ether(frame)
    assert pkt[UDP].dport == UdpPort.DTA_NACK
    assert_layer_matches(pkt[layers.DTANack], nack)
    assert Raw not in pkt
    built = (Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")
             / IP(src="10.0.0.1", dst="10.0.0.2", id=0, flags="DF", ttl=64)
             / UDP(sport=UdpPort.DTA, dport=UdpPort.DTA_NACK) / layers.DTANack(**fields_of(nack)))
    assert bytes(built) == frame
    assert dta.parse_nack_frame(frame)[1] == nack


# 3. fuzzing -----------------------------------------------------------------------------------

FUZZ = settings(max_examples=2000)
small_offsets = st.integers(0, 4) | st.integers(-2, 50)
PRIMITIVE_CLASSES = [KeyWrite, Append, KeyIncrement, Postcarder, SketchMerge]


def random_record(cls: type, rnd: random.Random) -> Any:
    """A valid record drawn with ``rnd`` (cheaper than a Hypothesis strategy per fuzz example)."""
    def bits(n: int) -> int:
        return rnd.getrandbits(n)

    def word_tuple(most: int) -> tuple[int, ...]:
        return tuple(bits(32) for _ in range(rnd.randint(1, most)))

    if cls is DTABase:
        return DTABase(bits(8), bits(8), bits(1), bits(1), bits(6))
    if cls is KeyWrite:
        return KeyWrite(rnd.randint(1, 255), bits(32), word_tuple(8))
    if cls is Append:
        return Append(bits(32), bits(32))
    if cls is KeyIncrement:
        return KeyIncrement(rnd.randint(1, 255), bits(32), bits(64))
    if cls is Postcarder:
        return Postcarder(bits(32), bits(8), bits(32))
    if cls is SketchMerge:
        return SketchMerge.for_column(bits(16), bits(16), bits(32), word_tuple(8), bits(1))
    if rnd.random() < 0.5:
        return DTANack(bits(8), bits(1), 0, bits(6))
    return DTANack(bits(8), bits(1), 1, bits(6), bits(16), bits(16), bits(32))


def near_valid(raw: bytes, rnd: random.Random) -> bytes:
    """``raw`` with up to three bytes overwritten, then maybe cut short or extended."""
    buf = bytearray(raw)
    for _ in range(rnd.choice((0, 0, 1, 2, 3))):
        buf[rnd.randrange(len(buf))] = rnd.getrandbits(8)
    choice = rnd.random()
    if choice < 0.25:
        del buf[len(buf) - rnd.randint(1, 5):]
    elif choice < 0.5:
        buf += rnd.randbytes(rnd.randint(1, 6))
    return bytes(buf)


seeds = st.none() | st.integers(0, 2**32 - 1)


@pytest.mark.parametrize("cls", HEADERS, ids=lambda c: c.__name__)
@FUZZ
@given(blob=st.binary(max_size=48), offset=small_offsets, seed=seeds, end_shift=st.integers(-3, 3) | small_offsets)
def test_fuzz_decoder(cls: type, blob: bytes, offset: int, seed: int | None, end_shift: int) -> None:
    if seed is not None:  # a near-valid encoding placed after the first ``offset`` bytes of blob
        rnd = random.Random(seed)
        blob = blob[:max(offset, 0)] + near_valid(random_record(cls, rnd).to_bytes(), rnd)
    try:
        record = cls.from_bytes(blob, offset)
    except HeaderError:
        pass
    else:
        # Every bit is a field (reserved bits are kept), so the consumed bytes re-encode exactly.
        assert record.to_bytes() == blob[offset:offset + record.size()]
    if cls not in PRIMITIVE_CLASSES:
        return
    end = len(blob) - end_shift
    try:
        record = cls.from_bytes(blob, offset, end)
    except HeaderError:
        return
    # With an explicit end the body fills [offset, end) exactly.
    assert record.to_bytes() == blob[offset:end]


@FUZZ
@given(blob=st.binary(max_size=64), offset=small_offsets, seed=seeds,
       end_shift=st.none() | st.integers(-3, 3) | small_offsets)
def test_fuzz_decode_report(blob: bytes, offset: int, seed: int | None, end_shift: int | None) -> None:
    if seed is not None:  # a near-valid report (any opcode 0..6) after the first ``offset`` bytes
        rnd = random.Random(seed)
        primitive = random_record(rnd.choice(PRIMITIVE_CLASSES), rnd)
        base = DTABase(rnd.choice((primitive.OPCODE, primitive.OPCODE, 0, 6, rnd.randint(1, 5))))
        blob = blob[:max(offset, 0)] + near_valid(base.to_bytes() + primitive.to_bytes(), rnd)
    end = None if end_shift is None else len(blob) - end_shift
    try:
        base, primitive = dta.decode_report(blob, offset, end)
    except HeaderError:
        return
    raw = dta.encode_report(base, primitive)
    assert raw == blob[offset:offset + len(raw)]
    if end is not None:
        assert offset + len(raw) == end


@FUZZ
@given(seed=st.integers(0, 2**32 - 1))
def test_fuzz_report_frames(seed: int) -> None:
    # whole frames (report or NACK) with a few bytes overwritten and/or cut short
    rnd = random.Random(seed)
    if rnd.random() < 0.75:
        primitive = random_record(rnd.choice(PRIMITIVE_CLASSES), rnd)
        frame = dta.build_report_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, DTABase.of(primitive), primitive)
    else:
        frame = dta.build_nack_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, random_record(DTANack, rnd))
    buf = bytearray(frame)
    for _ in range(rnd.randint(0, 3)):
        buf[rnd.randrange(len(buf))] = rnd.getrandbits(8)
    if rnd.random() < 0.3:
        del buf[rnd.randrange(len(buf)):]
    for parse in (dta.parse_report_frame, dta.parse_nack_frame):
        with contextlib.suppress(HeaderError):
            parse(buf)


# 4. out-of-range fields -----------------------------------------------------------------------

BAD: list[tuple[type, dict[str, Any]]] = [
    (DTABase, {"opcode": 256}),
    (DTABase, {"opcode": -1}),
    (DTABase, {"opcode": 1, "seqnum": 256}),
    (DTABase, {"opcode": 1, "immediate": 2}),
    (DTABase, {"opcode": 1, "retransmittable": 2}),
    (DTABase, {"opcode": 1, "reserved": 64}),
    (DTABase, {"opcode": 1.0}),
    (KeyWrite, {"redundancy": 0, "key": 1, "data": (1,)}),
    (KeyWrite, {"redundancy": 256, "key": 1, "data": (1,)}),
    (KeyWrite, {"redundancy": 1, "key": 2**32, "data": (1,)}),
    (KeyWrite, {"redundancy": 1, "key": 1, "data": ()}),
    (KeyWrite, {"redundancy": 1, "key": 1, "data": (2**32,)}),
    (KeyWrite, {"redundancy": 1, "key": 1, "data": (1, -1)}),
    (KeyWrite, {"redundancy": 1, "key": 1, "data": 5}),
    (KeyWrite, {"redundancy": 1, "key": 1, "data": b"\0\0\0\1"}),
    (KeyWrite, {"redundancy": 1, "key": 1, "data": (0,) * (MAX_KEYWRITE_WORDS + 1)}),
    (KeyWrite, {"redundancy": True, "key": 1, "data": (1,)}),
    (Append, {"list_id": 2**32, "data": 0}),
    (Append, {"list_id": 0, "data": -1}),
    (KeyIncrement, {"redundancy": 0, "key": 0, "counter": 0}),
    (KeyIncrement, {"redundancy": 1, "key": 2**32, "counter": 0}),
    (KeyIncrement, {"redundancy": 1, "key": 0, "counter": 2**64}),
    (Postcarder, {"key": 2**32, "hop": 0, "data": 0}),
    (Postcarder, {"key": 0, "hop": 256, "data": 0}),
    (Postcarder, {"key": 0, "hop": 0, "data": 2**32}),
    (SketchMerge, {"reporter_id": 2**16, "sketch_id": 0, "column": 0, "rows": 1, "merge": 0, "counters": (0,)}),
    (SketchMerge, {"reporter_id": 0, "sketch_id": 2**16, "column": 0, "rows": 1, "merge": 0, "counters": (0,)}),
    (SketchMerge, {"reporter_id": 0, "sketch_id": 0, "column": 2**32, "rows": 1, "merge": 0, "counters": (0,)}),
    (SketchMerge, {"reporter_id": 0, "sketch_id": 0, "column": 0, "rows": 0, "merge": 0, "counters": ()}),
    (SketchMerge, {"reporter_id": 0, "sketch_id": 0, "column": 0, "rows": 256, "merge": 0, "counters": (0,) * 256}),
    (SketchMerge, {"reporter_id": 0, "sketch_id": 0, "column": 0, "rows": 2, "merge": 0, "counters": (0,)}),
    (SketchMerge, {"reporter_id": 0, "sketch_id": 0, "column": 0, "rows": 1, "merge": 0, "counters": (0, 0)}),
    (SketchMerge, {"reporter_id": 0, "sketch_id": 0, "column": 0, "rows": 1, "merge": 2, "counters": (0,)}),
    (SketchMerge, {"reporter_id": 0, "sketch_id": 0, "column": 0, "rows": 1, "merge": 0, "counters": (2**32,)}),
    (DTANack, {"seqnum": 256}),
    (DTANack, {"seqnum": 0, "nack": 2}),
    (DTANack, {"seqnum": 0, "sketch": 2}),
    (DTANack, {"seqnum": 0, "reserved": 64}),
    (DTANack, {"seqnum": 0, "sketch": 1}),  # extension missing
    (DTANack, {"seqnum": 0, "sketch": 1, "reporter_id": 1, "sketch_id": 1}),
    (DTANack, {"seqnum": 0, "sketch": 0, "reporter_id": 1}),  # extension without the flag
    (DTANack, {"seqnum": 0, "sketch": 1, "reporter_id": 2**16, "sketch_id": 0, "expected_column": 0}),
    (DTANack, {"seqnum": 0, "sketch": 1, "reporter_id": 0, "sketch_id": 0, "expected_column": 2**32}),
]


@pytest.mark.parametrize(("cls", "kwargs"), BAD, ids=[f"{c.__name__}-{i}" for i, (c, _) in enumerate(BAD)])
def test_out_of_range_fields_raise(cls: type, kwargs: dict[str, Any]) -> None:
    with pytest.raises(HeaderError):
        cls(**kwargs)


def test_largest_keywrite_is_accepted() -> None:
    record = KeyWrite(1, 1, (7,) * MAX_KEYWRITE_WORDS)
    payload = dta.encode_report(DTABase.of(record), record)
    assert 20 + 8 + len(payload) <= 65535 < 20 + 8 + len(payload) + 4  # one more word would not fit
    assert dta.decode_report(payload)[1] == record


# 5. DTA specifics -----------------------------------------------------------------------------

EXAMPLES: list[dta.Primitive] = [
    KeyWrite(4, 1, (1,)),
    KeyWrite(2, 0xDEADBEEF, (1, 2, 3)),
    KeyWrite(3, 7, (1, 2, 3, 4, 5, 6, 7)),
    Append(3, 0xCAFEF00D),
    KeyIncrement(4, 1, 1),
    Postcarder(0x01020304, 5, 0xA0B0C0D0),
    SketchMerge.for_column(12, 3, 6, (10, 20, 30, 40, 50)),
    SketchMerge.for_column(12, 4, 0, (9,), MergeFunction.MAX),
]


@pytest.mark.parametrize("primitive", EXAMPLES, ids=repr)
def test_each_primitive_dissects_from_a_whole_frame(primitive: dta.Primitive) -> None:
    base = DTABase.of(primitive, seqnum=200, retransmittable=1)
    assert base.opcode == primitive.OPCODE
    frame = dta.build_report_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, base, primitive)
    pkt = Ether(frame)
    assert pkt[UDP].sport == 40041 and pkt[UDP].dport == 40040
    assert_layer_matches(pkt[layers.DTA], base)
    assert_layer_matches(pkt[layers.LAYERS[type(primitive)]], primitive)
    # with Ethernet padding (a short frame padded to 60 bytes) the UDP length still bounds the report
    padded = frame + bytes(max(0, 60 - len(frame)) + 4)
    assert dta.parse_report_frame(padded)[1:] == (base, primitive)
    assert_layer_matches(Ether(padded)[layers.LAYERS[type(primitive)]], primitive)


@pytest.mark.parametrize("k", [1, 3, 7])
def test_keywrite_word_counts_round_trip(k: int) -> None:
    record = KeyWrite(2, 0x01020304, tuple(range(0x11111111, 0x11111111 + k)))
    base = DTABase.of(record, seqnum=1)
    payload = dta.encode_report(base, record)
    assert len(payload) == 3 + 5 + 4 * k
    assert payload[:8] == bytes.fromhex("01010002 01020304")
    assert dta.decode_report(payload) == (base, record)
    frame = dta.build_report_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, base, record)
    assert dta.parse_report_frame(frame)[2].data == record.data
    layer = Ether(frame)[layers.DTAKeyWrite]
    assert len(layer.data) == k and layer.data == record.data
    assert bytes(layers.DTAKeyWrite(redundancy=2, key=0x01020304, data=list(record.data))) == record.to_bytes()


def test_scapy_word_lists_are_not_read_as_ranges() -> None:
    # Scapy reads a 2- or 3-tuple field value as a range; the word lists must not.
    assert bytes(layers.DTAKeyWrite(redundancy=1, key=0, data=(5, 9))) == KeyWrite(1, 0, (5, 9)).to_bytes()
    assert bytes(layers.DTASketchMerge(counters=(1, 2, 3))) == SketchMerge.for_column(0, 0, 0, (1, 2, 3)).to_bytes()


def test_golden_bytes_match_the_public_layout() -> None:
    # Key-Write as the public generator sends it (opcode 1, seqnum 0, redundancy 4, key 1, data 1).
    kw = KeyWrite(4, 1, (1,))
    assert dta.encode_report(DTABase(1), kw) == bytes.fromhex("010000" "04" "00000001" "00000001")
    assert dta.encode_report(DTABase(2, 7), Append(3, 9)) == bytes.fromhex("020700" "00000003" "00000009")
    assert dta.encode_report(DTABase(3), KeyIncrement(4, 1, 1)) == bytes.fromhex(
        "030000" "04" "00000001" "0000000000000001")
    assert dta.encode_report(DTABase(4), Postcarder(1, 2, 3)) == bytes.fromhex("040000" "00000001" "02" "00000003")
    assert dta.encode_report(DTABase(5), SketchMerge.for_column(1, 2, 3, (4, 5), MergeFunction.MAX)) == bytes.fromhex(
        "050000" "0001" "0002" "00000003" "02" "01" "00000004" "00000005")


def test_base_flag_bits() -> None:
    assert DTABase(1, 0, immediate=1).to_bytes() == b"\x01\x00\x80"
    assert DTABase(1, 0, retransmittable=1).to_bytes() == b"\x01\x00\x40"
    # reserved bits are carried, not rejected, so the base re-encodes verbatim
    base = DTABase.from_bytes(b"\x01\x05\xff")
    assert (base.immediate, base.retransmittable, base.reserved) == (1, 1, 0x3F)
    assert base.to_bytes() == b"\x01\x05\xff"


def test_nack_without_extension() -> None:
    nack = DTANack(41)
    assert nack.to_bytes() == b"\x29\x80" and nack.size() == 2
    # the public translator's NACK (seqnum:8 nack:1 reserved:7) decodes to the same record,
    # and whatever follows it (the report it was made from, padding) is ignored
    assert DTANack.from_bytes(b"\x29\x80" + bytes(10)) == nack
    pkt = Ether(dta.build_nack_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, nack))[layers.DTANack]
    assert (pkt.seqnum, pkt.nack, pkt.sketch) == (41, 1, 0)
    assert pkt.reporter_id is None and pkt.sketch_id is None and pkt.expected_column is None
    assert bytes(layers.DTANack(seqnum=41)) == b"\x29\x80"


def test_nack_with_sketch_extension() -> None:
    # DTA §6.3: column 7 arrived while the last column processed was 5 -> "start over from column 6"
    nack = DTANack.for_sketch(seqnum=9, reporter_id=12, sketch_id=3, expected_column=6)
    raw = nack.to_bytes()
    assert raw == bytes.fromhex("09c0" "000c" "0003" "00000006") and nack.size() == 10
    assert DTANack.from_bytes(raw) == nack
    frame = dta.build_nack_frame(SRC_MAC, DST_MAC, DST_IP, SRC_IP, nack)
    assert dta.parse_nack_frame(frame + bytes(8))[1] == nack  # Ethernet padding ignored
    pkt = Ether(frame)[layers.DTANack]
    assert (pkt.sketch, pkt.reporter_id, pkt.sketch_id, pkt.expected_column) == (1, 12, 3, 6)
    with pytest.raises(HeaderError, match="truncated"):
        DTANack.from_bytes(raw[:9])


def test_nack_extension_must_fit_in_the_udp_payload() -> None:
    nack = DTANack.for_sketch(1, 2, 3, 4)
    frame = bytearray(dta.build_nack_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, nack))
    # shrink IP and UDP lengths by 8: the extension now lies in Ethernet padding
    frame[16:18] = (int.from_bytes(frame[16:18], "big") - 8).to_bytes(2, "big")
    frame[38:40] = (int.from_bytes(frame[38:40], "big") - 8).to_bytes(2, "big")
    with pytest.raises(HeaderError, match="truncated"):
        dta.parse_nack_frame(bytes(frame))


@pytest.mark.parametrize("extra", [1, 2, 3, 5])
def test_keywrite_length_not_multiple_of_four(extra: int) -> None:
    payload = dta.encode_report(DTABase(1), KeyWrite(1, 1, (1,))) + bytes(extra)
    with pytest.raises(HeaderError, match="whole number of 32-bit words"):
        dta.decode_report(payload)
    with pytest.raises(HeaderError):
        KeyWrite.from_bytes(payload, 3, len(payload))
    # a raw frame whose UDP payload carries the odd length is rejected as well
    frame = build_udp_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, 40041, 40040, payload)
    with pytest.raises(HeaderError):
        dta.parse_report_frame(frame)


def test_keywrite_without_data_words() -> None:
    with pytest.raises(HeaderError, match="truncated"):
        dta.decode_report(bytes.fromhex("010000" "01" "00000001"))


@pytest.mark.parametrize("counters", [3, 4, 6])
def test_sketch_merge_rows_mismatch(counters: int) -> None:
    column = SketchMerge.for_column(1, 2, 3, (7,) * 5)
    payload = bytearray(dta.encode_report(DTABase.of(column), column))
    del payload[3 + 10:]
    payload += bytes(4 * counters)  # rows says 5, the payload carries `counters` words
    with pytest.raises(HeaderError, match="rows=5"):
        dta.decode_report(bytes(payload), 0, len(payload))
    if counters < 5:  # without an end, too few counters are a truncation
        with pytest.raises(HeaderError, match="truncated"):
            SketchMerge.from_bytes(bytes(payload), 3)


def test_sketch_merge_rows_zero_and_unknown_merge() -> None:
    with pytest.raises(HeaderError, match="rows=0"):
        SketchMerge.from_bytes(bytes.fromhex("0001 0002 00000003 00 00"))
    with pytest.raises(HeaderError, match="merge=7"):
        SketchMerge.from_bytes(bytes.fromhex("0001 0002 00000003 01 07 00000000"))


@pytest.mark.parametrize("primitive", [Append(1, 2), KeyIncrement(1, 2, 3), Postcarder(1, 2, 3)], ids=repr)
def test_fixed_primitives_must_fill_the_payload(primitive: dta.Primitive) -> None:
    payload = dta.encode_report(DTABase.of(primitive), primitive)
    with pytest.raises(HeaderError, match="remain before end"):
        dta.decode_report(payload + b"\0", 0, len(payload) + 1)
    with pytest.raises(HeaderError, match="truncated"):
        dta.decode_report(payload[:-1], 0, len(payload) - 1)
    # without an explicit end a fixed-size primitive ignores what follows, like other headers
    assert dta.decode_report(payload + b"\0")[1] == primitive


@pytest.mark.parametrize("opcode", [0x00, 0x06, 0x7F, 0xFF])
def test_unknown_opcode(opcode: int) -> None:
    with pytest.raises(HeaderError, match="unknown opcode"):
        dta.decode_report(bytes([opcode, 0, 0]) + bytes(12))
    # the Scapy base layer leaves an unknown opcode's body as Raw
    assert Raw in layers.DTA(bytes([opcode, 0, 0]) + bytes(12))


def test_encode_report_checks_the_opcode() -> None:
    with pytest.raises(HeaderError, match="does not announce"):
        dta.encode_report(DTABase(Opcode.APPEND), KeyWrite(1, 1, (1,)))
    with pytest.raises(HeaderError):
        dta.encode_report(DTABase(0x09), Append(1, 1))


def test_frame_ports_are_checked() -> None:
    frame = dta.build_nack_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, DTANack(1))
    with pytest.raises(HeaderError, match="40040"):
        dta.parse_report_frame(frame)
    report = dta.build_report_frame(SRC_MAC, DST_MAC, SRC_IP, DST_IP, DTABase(2), Append(1, 1))
    with pytest.raises(HeaderError, match="40044"):
        dta.parse_nack_frame(report)
    # Scapy dispatches on the destination port only: a NACK sent from port 40040 is still a NACK
    pkt = Ether(frame)
    assert pkt[UDP].sport == 40040 and layers.DTANack in pkt and layers.DTA not in pkt


@pytest.mark.parametrize(("bad_end", "bad_offset"), [(100, 0), (-1, 0), (2, 3)])
def test_bad_offsets_and_ends(bad_end: int, bad_offset: int) -> None:
    payload = dta.encode_report(DTABase(1), KeyWrite(1, 1, (1,)))
    with pytest.raises(HeaderError):
        dta.decode_report(payload, bad_offset, bad_end)
    with pytest.raises(HeaderError):
        KeyWrite.from_bytes(payload, 3 + bad_offset, bad_end)


def test_sketch_merge_scapy_fills_rows() -> None:
    layer = layers.DTASketchMerge(reporter_id=1, sketch_id=2, column=3, merge=1, counters=[4, 5])
    assert bytes(layer) == SketchMerge(1, 2, 3, 2, 1, (4, 5)).to_bytes()
    assert layers.DTASketchMerge(bytes(layer)).rows == 2
