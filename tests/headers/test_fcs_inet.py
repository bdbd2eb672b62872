"""Software FCS and the Ethernet/IPv4/UDP codecs."""

import contextlib
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP
from scapy.layers.inet import UDP as ScapyUDP
from scapy.layers.l2 import Ether

from headers.errors import HeaderError
from headers.fcs import FCS_RESIDUE, append_fcs, fcs, fcs_ok, strip_fcs
from headers.inet import (
    UDP,
    Ethernet,
    IPv4,
    build_udp_frame,
    internet_checksum,
    ip_bytes,
    mac_bytes,
    parse_udp_frame,
)

frames = st.binary(min_size=14, max_size=1600)
macs = st.binary(min_size=6, max_size=6)
ips = st.binary(min_size=4, max_size=4)


@given(frames)
def test_fcs_round_trip_and_residue(frame):
    framed = append_fcs(frame)
    assert len(framed) == len(frame) + 4
    assert struct.unpack("<I", framed[-4:])[0] == fcs(frame) == zlib.crc32(frame)
    assert zlib.crc32(framed) == FCS_RESIDUE
    assert fcs_ok(framed)
    assert strip_fcs(framed) == frame


@given(frames, st.data())
def test_any_single_bit_flip_fails_fcs(frame, data):
    framed = bytearray(append_fcs(frame))
    bit = data.draw(st.integers(0, len(framed) * 8 - 1))
    framed[bit // 8] ^= 1 << (bit % 8)
    assert not fcs_ok(framed)
    with pytest.raises(HeaderError, match="FCS"):
        strip_fcs(framed)


@given(st.binary(max_size=4))
def test_fcs_too_short(frame):
    assert not fcs_ok(frame)
    with pytest.raises(HeaderError):
        strip_fcs(frame)


@given(macs, macs, ips, ips, st.integers(0, 65535), st.integers(0, 65535), st.binary(max_size=1400),
       st.integers(0, 255), st.integers(1, 255))
def test_udp_frame_matches_scapy(src_mac, dst_mac, src_ip, dst_ip, sport, dport, payload, tos, ttl):
    ours = build_udp_frame(src_mac, dst_mac, src_ip, dst_ip, sport, dport, payload, tos=tos, ttl=ttl)
    theirs = bytes(
        Ether(src=src_mac, dst=dst_mac)
        / IP(src=".".join(map(str, src_ip)), dst=".".join(map(str, dst_ip)), tos=tos, ttl=ttl, id=0, flags="DF")
        / ScapyUDP(sport=sport, dport=dport) / payload
    )
    assert ours == theirs
    parsed = parse_udp_frame(ours)
    assert parsed.ip.checksum_ok(ours, 14)
    assert (parsed.udp.sport, parsed.udp.dport) == (sport, dport)
    assert ours[parsed.payload_offset:parsed.payload_offset + parsed.payload_length] == payload


@given(macs, macs, st.integers(0, 0xFFFF))
def test_ethernet_round_trip(dst, src, etype):
    rec = Ethernet(dst, src, etype)
    assert Ethernet.from_bytes(rec.to_bytes()) == rec
    assert bytes(Ether(dst=dst, src=src, type=etype))[:14] == rec.to_bytes()


@given(ips, ips, st.integers(0, 255), st.integers(20, 65535), st.integers(0, 255), st.integers(0, 0xFFFF))
def test_ipv4_round_trip_and_checksum(src, dst, proto, total, tos, ident):
    rec = IPv4(src, dst, proto, total, tos, ident)
    raw = rec.to_bytes()
    assert internet_checksum(raw) == 0
    back = IPv4.from_bytes(raw)
    fields = (back.src, back.dst, back.proto, back.total_length, back.tos, back.ident)
    assert fields == (src, dst, proto, total, tos, ident)
    assert back.to_bytes() == raw


@given(st.integers(0, 65535), st.integers(0, 65535), st.integers(8, 65535), st.integers(0, 65535))
def test_udp_round_trip(sport, dport, length, csum):
    rec = UDP(sport, dport, length, csum)
    assert UDP.from_bytes(rec.to_bytes()) == rec


@settings(max_examples=2000)
@given(st.binary(max_size=120), st.integers(0, 130))
def test_decoders_raise_only_header_error(data, offset):
    for decoder in (Ethernet.from_bytes, IPv4.from_bytes, UDP.from_bytes, parse_udp_frame):
        with contextlib.suppress(HeaderError):
            decoder(data, offset)


@pytest.mark.parametrize("bad", ["10.0.0", "10.0.0.256", "a.b.c.d", ""])
def test_bad_ip_text(bad):
    with pytest.raises(HeaderError):
        ip_bytes(bad)


@pytest.mark.parametrize("bad", ["02:00:00:00:00", "zz:00:00:00:00:00", "0200.0000.0000"])
def test_bad_mac_text(bad):
    with pytest.raises(HeaderError):
        mac_bytes(bad)


def test_out_of_range_fields():
    with pytest.raises(HeaderError):
        UDP(70000, 1)
    with pytest.raises(HeaderError):
        Ethernet(b"\0" * 6, b"\0" * 5, 0x800)
    with pytest.raises(HeaderError):
        IPv4(b"\0" * 4, b"\0" * 4, 17, ttl=256)
