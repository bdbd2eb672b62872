"""headers.strategies: valid records and frames decode with the codecs, mutated frames decode
or raise only HeaderError, and the seeded generators are reproducible."""

from __future__ import annotations

import contextlib
import importlib
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headers import auth, dta, inet, linkguardian, onepipe, pfc, roce, tcd, tcsack
from headers import strategies as hs
from headers.errors import HeaderError
from headers.fcs import fcs_ok, strip_fcs
from headers.frame import IcrcCheck, dissect

CODEC_MODULES = ["inet", "linkguardian", "pfc", "dta", "roce", "onepipe", "tcsack", "tcd"]


def _decode(cls: type, raw: bytes) -> object:
    """The record ``raw`` decodes to with the codec's own decoder for ``cls``."""
    if cls in (dta.KeyWrite, dta.Append, dta.KeyIncrement, dta.Postcarder, dta.SketchMerge, tcsack.TcsAck):
        return cls.from_bytes(raw, 0, len(raw))
    if cls is auth.AuthTrailer:
        return auth.decode_trailer(raw)
    return cls.from_bytes(raw)


def _encode(rec: object) -> bytes:
    return rec.encode() if isinstance(rec, auth.AuthTrailer) else rec.to_bytes()


def _normalised(cls: type, rec: object) -> object:
    """What a round trip gives back: the fields the wire does not carry or the decoder ignores."""
    if cls is inet.IPv4:
        return inet.IPv4.from_bytes(rec.to_bytes())  # a checksum of None is computed on encode
    return rec


def test_every_header_of_every_codec_has_a_strategy():
    for name in CODEC_MODULES:
        for cls in importlib.import_module(f"headers.{name}").HEADERS:
            assert cls in hs.RECORD_CLASSES, cls
    assert auth.AuthTrailer in hs.RECORD_CLASSES
    with pytest.raises(ValueError):
        hs.records(int)


@pytest.mark.parametrize("cls", hs.RECORD_CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=150)
@given(data=st.data())
def test_records_round_trip_through_their_codec(cls, data):
    rec = data.draw(hs.records(cls))
    assert isinstance(rec, cls)
    raw = _encode(rec)
    assert _decode(cls, raw) == _normalised(cls, rec)


#: the record dissect() must find in a valid frame of each protocol
EXPECT = {
    "udp": inet.UDP, "pfc": pfc.PFCFrame, "dta": dta.DTABase, "dta-nack": dta.DTANack, "roce": roce.BTH,
    "onepipe": onepipe.OnePipeHeader, "linkguardian": (linkguardian.LGData, linkguardian.LGLeadingAck,
                                                       linkguardian.LGLossNotification),
}


@pytest.mark.parametrize("protocol", [p for p in hs.PROTOCOLS if p != "pause"])
@settings(max_examples=200)
@given(data=st.data())
def test_valid_frames_decode(protocol, data):
    frame = data.draw(hs.frames(protocol))
    records, error = dissect(frame)
    assert error is None, (protocol, frame.hex(), error)
    assert isinstance(records[0], inet.Ethernet)
    if protocol in EXPECT:
        assert any(isinstance(r, EXPECT[protocol]) for r in records), records
    if protocol == "roce":
        assert records[-1] == IcrcCheck(True)
    if protocol == "tcsack":
        tcsack.decode_tcsack(frame, 42, len(frame))
    if protocol == "tcd":
        udp = inet.parse_udp_frame(frame)
        if udp.udp.dport == 40300:
            tcd.TcdData.from_bytes(frame, 42)
        else:
            assert tcd.TcdCnp.from_bytes(frame, 42).flow >= 0


@settings(max_examples=100)
@given(hs.frames("pause"))
def test_pause_frames_are_mac_control(frame):
    assert frame[12:16] == b"\x88\x08\x00\x01" and len(frame) >= 60


def _every_decoder(frame: bytes) -> None:
    """Run every codec's decoder on ``frame`` where its header would sit; only HeaderError may escape."""
    calls = [
        lambda: dissect(frame),
        lambda: inet.parse_udp_frame(frame), lambda: roce.parse_roce_frame(frame), lambda: roce.check_icrc(frame),
        lambda: dta.parse_report_frame(frame), lambda: dta.parse_nack_frame(frame),
        lambda: linkguardian.decode_tag(frame, 14), lambda: pfc.parse_pfc_frame(frame),
        lambda: tcsack.decode_tcsack(frame, 42), lambda: onepipe.decode_packet(frame, 42),
        lambda: tcd.TcdData.from_bytes(frame, 42), lambda: tcd.TcdCnp.from_bytes(frame, 42),
        lambda: auth.decode_trailer(frame), lambda: strip_fcs(frame),
    ]
    for call in calls:
        with contextlib.suppress(HeaderError):
            call()
    _records, error = dissect(frame)
    assert error is None or isinstance(error, HeaderError)


@settings(max_examples=1500)
@given(hs.mutated(hs.frames()))
def test_mutated_frames_decode_or_raise_only_header_error(frame):
    assert isinstance(frame, bytes) and frame
    _every_decoder(frame)


@settings(max_examples=300)
@given(hs.mutated([bytes.fromhex("ffffffffffff020000000001abcd") + linkguardian.LGData(5).to_bytes() + bytes(41)]))
def test_mutated_captured_frames(frame):
    _every_decoder(frame)


@settings(max_examples=500)
@given(hs.fuzz_frames(corpus=[bytes(60)]))
def test_fuzz_mix_stays_within_a_frame(frame):
    assert len(frame) <= 1514
    _every_decoder(frame)


def test_sampled_mutations_of_every_protocol_never_break_a_decoder():
    rng = random.Random(1)
    gen = hs.fuzz_gen(hs.frame_gen())
    for _ in range(5000):
        _every_decoder(gen.sample(rng))


@settings(max_examples=300)
@given(hs.frames(["udp", "dta", "tcsack", "onepipe", "roce"]), st.data())
def test_repair_makes_checksums_right_again(frame, data):
    damaged = bytearray(frame)
    damaged[data.draw(st.integers(14, len(frame) - 1))] ^= 0xFF
    fixed = hs.repair(damaged)
    assert len(fixed) == len(frame)
    try:
        udp = inet.parse_udp_frame(fixed)
    except HeaderError:
        return  # the damage broke a length: nothing to repair
    assert udp.ip.checksum_ok(fixed, 14)
    if udp.udp.dport == 4791:
        assert roce.check_icrc(fixed)
    elif udp.udp.checksum:
        end = udp.payload_offset + udp.payload_length
        assert inet.udp_checksum(fixed[26:30], fixed[30:34], fixed[34:40] + b"\0\0" + fixed[42:end]) == udp.udp.checksum


def test_each_mutation_changes_or_keeps_a_frame_and_never_empties_it():
    base = hs.frame_gen("dta").sample(random.Random(3))
    for name, mutation in hs.MUTATIONS.items():
        for seed in range(200):
            b = bytearray(base)
            mutation(hs.RandomDraw(random.Random(seed)), b, base[::-1])
            assert isinstance(b, bytearray), name
    assert {"bit_flip", "truncate", "extend", "splice", "type_confusion"} <= set(hs.MUTATIONS)


def test_generators_are_reproducible_from_their_seed():
    gen = hs.fuzz_gen(hs.frame_gen(), [bytes(60)])
    a = [gen.sample(random.Random(42)) for _ in range(3)]
    rng1, rng2 = random.Random(42), random.Random(42)
    assert [gen.sample(rng1) for _ in range(500)] == [gen.sample(rng2) for _ in range(500)]
    rng3 = random.Random(43)
    assert [gen.sample(rng3) for _ in range(50)] != [gen.sample(random.Random(42)) for _ in range(50)]
    assert len(a) == 3


def test_endpoints_aim_frames():
    mac, ip = bytes.fromhex("02aabbccddee"), bytes([10, 0, 0, 100])
    ends = hs.Endpoints(dst_macs=[mac], dst_ips=[ip], dports=[4791], stray=0.0)
    rng = random.Random(5)
    for _ in range(200):
        frame = hs.frame_gen("roce", ends).sample(rng)
        assert frame[:6] == mac and frame[30:34] == ip
        assert roce.parse_roce_frame(frame).icrc_ok


def test_with_fcs():
    frame = hs.frame_gen("linkguardian").sample(random.Random(9))
    assert fcs_ok(hs.with_fcs(frame)) and strip_fcs(hs.with_fcs(frame)) == frame
