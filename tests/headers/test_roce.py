"""RoCEv2 headers: codec round trips, codec <-> Scapy agreement, ICRC against scapy.contrib.roce,
bit-flip detection and masking, and fuzzing of every decoder (only HeaderError may escape)."""

from __future__ import annotations

import contextlib
import ipaddress
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP
from scapy.layers.inet import UDP as ScapyUDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Padding, Raw

import headers.layers.roce as L
from headers.errors import HeaderError
from headers.inet import ip_str, mac_str
from headers.onepipe import PORTS as ONEPIPE_PORTS
from headers.record import field_values, replace
from headers.roce import (
    AETH,
    BTH,
    CREDITS_INVALID,
    EXT_HEADERS,
    HEADERS,
    ICRC_LEN,
    RETH,
    AethKind,
    AtomicAckETH,
    AtomicETH,
    NakCode,
    Opcode,
    aeth_ack,
    aeth_nak,
    aeth_rnr_nak,
    append_icrc,
    build_roce_frame,
    check_icrc,
    decode_syndrome,
    ext_headers_for,
    icrc_of,
    pad_count,
    parse_roce_frame,
    write_icrc,
)

FIELD_BITS: dict[type, dict[str, int]] = {
    BTH: {"opcode": 8, "solicited": 1, "migreq": 1, "padcount": 2, "version": 4, "pkey": 16, "fecn": 1,
          "becn": 1, "resv6": 6, "dqpn": 24, "ackreq": 1, "resv7": 7, "psn": 24},
    RETH: {"va": 64, "rkey": 32, "dma_len": 32},
    AtomicETH: {"va": 64, "rkey": 32, "swap_add": 64, "compare": 64},
    AETH: {"syndrome": 8, "msn": 24},
    AtomicAckETH: {"orig_remote_data": 64},
}
LAYER = {BTH: L.BTH, RETH: L.RETH, AtomicETH: L.AtomicETH, AETH: L.AETH, AtomicAckETH: L.AtomicAckETH}

# Byte offsets (in an untagged Ethernet/IPv4/UDP/BTH frame) that the ICRC masks to ones.
TOS, TTL, IP_CSUM, UDP_CSUM, RESV8A = 15, 22, (24, 25), (40, 41), 46
MASKED = {TOS, TTL, *IP_CSUM, *UDP_CSUM, RESV8A}


def records(cls: type) -> st.SearchStrategy:
    return st.builds(cls, **{f: st.integers(0, (1 << b) - 1) for f, b in FIELD_BITS[cls].items()})


def fields(record: object) -> dict[str, int]:
    return field_values(record)


def test_field_table_matches_records() -> None:
    assert set(FIELD_BITS) == set(HEADERS)
    for cls in HEADERS:
        assert list(cls.FIELDS) == list(FIELD_BITS[cls])
        assert sum(FIELD_BITS[cls].values()) == cls.SIZE * 8


# --- 1. round trips ---------------------------------------------------------------------------

@pytest.mark.parametrize("cls", HEADERS, ids=lambda c: c.__name__)
@given(data=st.data(), pad=st.integers(0, 7))
def test_round_trip(cls: type, data: st.DataObject, pad: int) -> None:
    rec = data.draw(records(cls))
    raw = rec.to_bytes()
    assert len(raw) == rec.size() == cls.SIZE
    assert cls.from_bytes(raw) == rec
    buf = bytearray(pad + cls.SIZE + 3)
    assert rec.pack_into(buf, pad) == cls.SIZE
    assert bytes(buf[pad:pad + cls.SIZE]) == raw
    assert cls.from_bytes(memoryview(buf), pad) == rec
    assert cls.from_bytes(bytes(buf), pad) == rec


def test_known_bth_layout() -> None:
    bth = BTH(opcode=0x0A, solicited=1, migreq=1, padcount=2, version=3, pkey=0x1234, fecn=1, becn=0,
              resv6=0x15, dqpn=0xABCDEF, ackreq=1, resv7=0x05, psn=0x123456)
    assert bth.to_bytes() == bytes.fromhex("0a e3 1234 95 abcdef 85 123456")
    assert RETH(0x0102030405060708, 0x0A0B0C0D, 64).to_bytes() == bytes.fromhex("0102030405060708 0a0b0c0d 00000040")
    assert AETH(0x60, 0x000102).to_bytes() == bytes.fromhex("60000102")
    assert len(AtomicETH().to_bytes()) == 28 and len(AtomicAckETH().to_bytes()) == 8


# --- 2. codec <-> Scapy layer -----------------------------------------------------------------

@pytest.mark.parametrize("cls", HEADERS, ids=lambda c: c.__name__)
@given(data=st.data())
def test_layer_agrees_standalone(cls: type, data: st.DataObject) -> None:
    rec = data.draw(records(cls))
    raw = rec.to_bytes()
    if cls is BTH:
        # contrib's BTH carries the ICRC as a trailer: icrc=0 builds 12 bytes + 4 zero bytes
        assert bytes(L.BTH(**fields(rec), icrc=0)) == raw + bytes(4)
        layer = L.BTH(raw + b"\x01\x02\x03\x04")
        assert layer.icrc == 0x01020304
    else:
        assert bytes(LAYER[cls](**fields(rec))) == raw
        layer = LAYER[cls](raw)
    assert {f: getattr(layer, f) for f in FIELD_BITS[cls]} == fields(rec)


MAC1, MAC2 = bytes.fromhex("02000000aa01"), bytes.fromhex("02000000bb02")
macs = st.binary(min_size=6, max_size=6)
ipv4s = st.binary(min_size=4, max_size=4)
u16 = st.integers(0, 0xFFFF)
u8 = st.integers(0, 0xFF)


@st.composite
def bths(draw: st.DrawFn, opcode: int) -> BTH:
    rec = draw(records(BTH))
    return replace(rec, opcode=opcode)


@st.composite
def roce_packets(draw: st.DrawFn, opcodes: tuple[int, ...] | None = None, max_payload: int = 96) -> dict:
    """Field values of one RoCEv2 packet: everything build_roce_frame takes."""
    opcode = draw(st.sampled_from(opcodes or (*EXT_HEADERS, Opcode.SEND_ONLY, Opcode.RDMA_WRITE_MIDDLE)))
    bth = draw(bths(opcode))
    ext = [draw(records(cls)) for cls in ext_headers_for(opcode)]
    return {
        "src_mac": draw(macs), "dst_mac": draw(macs), "src_ip": draw(ipv4s), "dst_ip": draw(ipv4s),
        # any source port but 1Pipe's: Scapy dissects a datagram from one of those as 1Pipe
        # (headers/layers/onepipe.py binds both ports, so that ACKs to a process dissect too)
        "sport": draw(u16.filter(lambda port: port not in ONEPIPE_PORTS)), "bth": bth, "ext_headers": ext,
        "payload": draw(st.binary(max_size=max_payload)),
        "tos": draw(u8), "ttl": draw(u8), "ident": draw(u16),
    }


def scapy_packet(p: dict) -> Ether:
    """The same packet as build_roce_frame(**p), built by Scapy (contrib computes the ICRC)."""
    pkt = (Ether(src=mac_str(p["src_mac"]), dst=mac_str(p["dst_mac"]))
           / IP(src=ip_str(p["src_ip"]), dst=ip_str(p["dst_ip"]), tos=p["tos"], ttl=p["ttl"], id=p["ident"],
                flags="DF")
           / ScapyUDP(sport=p["sport"], dport=4791, chksum=0)
           / L.BTH(**fields(p["bth"])))
    for h in p["ext_headers"]:
        pkt = pkt / LAYER[type(h)](**fields(h))
    body = p["payload"] + bytes(p["bth"].padcount)
    return pkt / Raw(body) if body else pkt


@settings(max_examples=300)
@given(p=roce_packets(opcodes=(Opcode.RDMA_WRITE_ONLY, Opcode.FETCH_ADD, Opcode.ACKNOWLEDGE,
                               Opcode.ATOMIC_ACKNOWLEDGE), max_payload=300))
def test_icrc_matches_scapy_contrib(p: dict) -> None:
    if p["bth"].opcode != Opcode.RDMA_WRITE_ONLY:
        p["payload"] = b""
    theirs = bytes(scapy_packet(p))
    # contrib's ICRC, read independently of our builder
    assert icrc_of(theirs) == struct.unpack("<I", theirs[-4:])[0]
    assert check_icrc(theirs)
    assert icrc_of(theirs[14:], l3_offset=0) == icrc_of(theirs)
    # and our whole frame is byte-identical (IP checksum, lengths, ICRC)
    assert build_roce_frame(**p) == theirs


@settings(max_examples=200)
@given(p=roce_packets())
def test_frame_dissects_in_scapy(p: dict) -> None:
    frame = build_roce_frame(**p)
    padded = frame + bytes(max(0, 60 - len(frame)))  # what a MAC would add to a short frame
    pkt = Ether(padded)
    assert pkt[ScapyUDP].dport == 4791
    bth = pkt[L.BTH]
    assert {f: getattr(bth, f) for f in FIELD_BITS[BTH]} == fields(p["bth"])
    assert bth.icrc == L.icrc_field(icrc_of(frame)) == int.from_bytes(frame[-4:], "big")
    layer = bth.payload
    for h in p["ext_headers"]:
        assert isinstance(layer, LAYER[type(h)])
        assert {f: getattr(layer, f) for f in FIELD_BITS[type(h)]} == fields(h)
        layer = layer.payload
    body = p["payload"] + bytes(p["bth"].padcount)
    if body:
        assert isinstance(layer, Raw) and layer.load == body
        layer = layer.payload
    if len(padded) > len(frame):
        assert isinstance(layer, Padding) and layer.load == bytes(60 - len(frame))
    else:
        assert not layer
    assert bytes(pkt) == padded  # a dissected frame rebuilds to the same bytes


@settings(max_examples=100)
@given(p=roce_packets(opcodes=(Opcode.RDMA_WRITE_ONLY,)), src=st.binary(min_size=16, max_size=16),
       dst=st.binary(min_size=16, max_size=16), tc=u8, fl=st.integers(0, 0xFFFFF), hlim=u8)
def test_icrc_ipv6_matches_scapy_contrib(p: dict, src: bytes, dst: bytes, tc: int, fl: int, hlim: int) -> None:
    v6 = IPv6(src=str(ipaddress.IPv6Address(src)), dst=str(ipaddress.IPv6Address(dst)), tc=tc, fl=fl, hlim=hlim)
    pkt = (Ether(src=mac_str(MAC1), dst=mac_str(MAC2)) / v6  # explicit MACs: no neighbour lookup
           / ScapyUDP(sport=p["sport"], dport=4791, chksum=0) / L.BTH(**fields(p["bth"]))
           / L.RETH(**fields(p["ext_headers"][0])) / Raw(p["payload"] + b"\0"))
    raw = bytes(pkt)
    assert icrc_of(raw) == struct.unpack("<I", raw[-4:])[0]
    assert check_icrc(raw[14:], l3_offset=0)


def test_atomic_ack_dissection_needs_the_opcode() -> None:
    """AtomicAckETH follows AETH only under ATOMIC_ACKNOWLEDGE; under a READ response the
    bytes after AETH are data."""
    ack = build_roce_frame(MAC1, MAC2, b"\x0a\0\0\1", b"\x0a\0\0\2", 1, BTH(opcode=Opcode.ATOMIC_ACKNOWLEDGE),
                           [aeth_ack(1), AtomicAckETH(2**63 + 5)])
    assert Ether(ack)[L.AtomicAckETH].orig_remote_data == 2**63 + 5
    read = build_roce_frame(MAC1, MAC2, b"\x0a\0\0\1", b"\x0a\0\0\2", 1,
                            BTH(opcode=Opcode.RDMA_READ_RESPONSE_ONLY), [aeth_ack(1)], bytes(8))
    pkt = Ether(read)
    assert L.AtomicAckETH not in pkt and pkt[Raw].load == bytes(8)
    assert (L.BTH() / L.AETH()).opcode == Opcode.ACKNOWLEDGE
    assert (L.BTH() / L.RETH()).opcode == Opcode.RDMA_WRITE_ONLY
    assert (L.BTH() / L.AtomicETH()).opcode == Opcode.FETCH_ADD


# --- 3. fuzzing -------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", HEADERS, ids=lambda c: c.__name__)
@settings(max_examples=2000)
@given(data=st.binary(max_size=40), offset=st.integers(-3, 44))
def test_fuzz_record_decoders(cls: type, data: bytes, offset: int) -> None:
    try:
        rec = cls.from_bytes(data, offset)
    except HeaderError:
        assert offset < 0 or len(data) - offset < cls.SIZE
        return
    # every bit is a field (reserved bits included), so decoding is exact
    assert rec.to_bytes() == data[offset:offset + cls.SIZE]


def _seed_frames() -> list[bytes]:
    """One valid frame per opcode with extended headers, plus SEND Only with and without pad."""
    ext = {RETH: RETH(0x1000, 7, 8), AtomicETH: AtomicETH(0x2000, 7, 1, 0), AETH: aeth_ack(5),
           AtomicAckETH: AtomicAckETH(9)}
    frames = [build_roce_frame(MAC1, MAC2, b"\x0a\0\0\1", b"\x0a\0\0\2", 7, BTH(opcode=op, psn=op),
                               [ext[c] for c in classes], b"12345678"[:op % 9])
              for op, classes in EXT_HEADERS.items()]
    frames.append(build_roce_frame(MAC1, MAC2, b"\x0a\0\0\1", b"\x0a\0\0\2", 7,
                                   BTH(opcode=Opcode.SEND_ONLY, padcount=3), [], b"x"))
    frames.append(build_roce_frame(MAC1, MAC2, b"\x0a\0\0\1", b"\x0a\0\0\2", 7, BTH(opcode=Opcode.SEND_ONLY), []))
    return frames


_SEED_FRAMES = _seed_frames()


@st.composite
def mangled_frames(draw: st.DrawFn) -> bytes:
    """A valid frame with some bytes overwritten and a random cut, or plain random bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=128))
    frame = bytearray(draw(st.sampled_from(_SEED_FRAMES)))
    for _ in range(draw(st.integers(0, 4))):
        frame[draw(st.integers(0, len(frame) - 1))] = draw(u8)
    cut = draw(st.one_of(st.just(len(frame)), st.integers(0, len(frame) + 8)))
    return bytes(frame[:cut]) + bytes(max(0, cut - len(frame)))


@settings(max_examples=2000)
@given(frame=mangled_frames(), offset=st.integers(-2, 20))
def test_fuzz_frame_decoders(frame: bytes, offset: int) -> None:
    try:
        rf = parse_roce_frame(frame)
    except HeaderError:
        pass
    else:
        assert rf.bth == BTH.from_bytes(frame, 42 + (rf.ip.ihl - 5) * 4)
        assert rf.icrc_ok == check_icrc(frame)
        assert tuple(type(h) for h in rf.ext) == ext_headers_for(rf.bth.opcode)
        ext_start = rf.payload_offset - sum(h.size() for h in rf.ext)
        assert b"".join(h.to_bytes() for h in rf.ext) == frame[ext_start:rf.payload_offset]
        assert bytes(rf.payload) == frame[rf.payload_offset:rf.payload_offset + len(rf.payload)]
    for fn in (parse_roce_frame, icrc_of, check_icrc):
        with contextlib.suppress(HeaderError):
            fn(frame, offset)
    with contextlib.suppress(HeaderError):
        write_icrc(bytearray(frame), offset)
    with contextlib.suppress(HeaderError):
        append_icrc(frame, offset)


# --- 4. out-of-range fields -------------------------------------------------------------------

@pytest.mark.parametrize("cls", HEADERS, ids=lambda c: c.__name__)
def test_out_of_range_fields_raise(cls: type) -> None:
    for name, bits in FIELD_BITS[cls].items():
        for bad in (1 << bits, -1, "1", 1.0, None):
            with pytest.raises(HeaderError):
                cls(**{name: bad})
        cls(**{name: (1 << bits) - 1})  # the largest value fits


# --- 5. ICRC: bit flips and masked fields ------------------------------------------------------

def _icrc_verdict(frame: bytes) -> bool:
    """check_icrc, counting "cannot even find the ICRC" as a failed check."""
    try:
        return check_icrc(frame)
    except HeaderError:
        return False


@settings(max_examples=500)
@given(p=roce_packets(max_payload=64), data=st.data())
def test_flipped_bit_fails_icrc(p: dict, data: st.DataObject) -> None:
    frame = build_roce_frame(**p)
    assert check_icrc(frame)
    covered = [i for i in range(14, len(frame)) if i not in MASKED]  # ICRC bytes themselves included
    byte = data.draw(st.sampled_from(covered))
    bad = bytearray(frame)
    bad[byte] ^= 1 << data.draw(st.integers(0, 7))
    assert not _icrc_verdict(bytes(bad))
    with contextlib.suppress(HeaderError):
        assert not parse_roce_frame(bytes(bad)).icrc_ok


@settings(max_examples=300)
@given(p=roce_packets(max_payload=64), data=st.data())
def test_masked_fields_do_not_change_icrc(p: dict, data: st.DataObject) -> None:
    frame = build_roce_frame(**p)
    want = icrc_of(frame)
    bad = bytearray(frame)
    for i in data.draw(st.lists(st.sampled_from(sorted(MASKED | set(range(14)))), min_size=1, max_size=6)):
        bad[i] = data.draw(u8)
    assert icrc_of(bad) == want and check_icrc(bad)
    rf = parse_roce_frame(bytes(bad)) if bad[12:14] == b"\x08\x00" else None
    assert rf is None or rf.icrc_ok


def test_ecn_marking_and_fecn_keep_icrc() -> None:
    """Why the masks exist: a switch marks ECN (TCD), decrements TTL, rewrites the IP
    checksum, sets FECN/BECN; none of that may break the end-to-end ICRC."""
    frame = bytearray(build_roce_frame(MAC1, MAC2, b"\x0a\0\0\1", b"\x0a\0\0\2", 49152,
                                       BTH(opcode=Opcode.RDMA_WRITE_ONLY, dqpn=0x11, psn=5), [RETH(0x1000, 7, 8)],
                                       b"12345678", tos=0x02))
    frame[TOS] |= 3  # CE
    frame[TTL] -= 1
    frame[RESV8A] |= 0xC0  # FECN, BECN
    frame[24:26] = b"\0\0"
    rf = parse_roce_frame(frame)
    assert rf.icrc_ok and rf.ip.ecn == 3 and rf.bth.fecn == rf.bth.becn == 1


# --- frames: build / parse ------------------------------------------------------------------

@settings(max_examples=300)
@given(p=roce_packets(), extra=st.binary(max_size=6))
def test_build_parse_round_trip(p: dict, extra: bytes) -> None:
    frame = build_roce_frame(**p)
    n = len(p["payload"]) + p["bth"].padcount
    assert len(frame) == 14 + 20 + 8 + 12 + sum(h.size() for h in p["ext_headers"]) + n + ICRC_LEN
    rf = parse_roce_frame(frame + extra)  # trailing Ethernet padding is ignored
    assert rf.icrc_ok and rf.icrc == icrc_of(frame)
    assert rf.bth == p["bth"] and list(rf.ext) == p["ext_headers"]
    assert bytes(rf.payload) == p["payload"]
    assert bytes(frame[rf.payload_offset:rf.payload_offset + len(rf.payload)]) == p["payload"]
    assert rf.udp.dport == 4791 and rf.udp.checksum == 0 and rf.udp.length == len(frame) - 34
    assert rf.ip.total_length == len(frame) - 14 and rf.ip.checksum_ok(frame, 14)
    assert (rf.ip.src, rf.ip.dst, rf.ip.tos, rf.ip.ttl, rf.ip.ident) == (
        p["src_ip"], p["dst_ip"], p["tos"], p["ttl"], p["ident"])
    assert (rf.eth.src, rf.eth.dst, rf.udp.sport) == (p["src_mac"], p["dst_mac"], p["sport"])
    # the ICRC helpers agree with the builder
    assert append_icrc(frame[:-4]) == frame
    buf = bytearray(frame)
    buf[-4:] = bytes(4)
    assert write_icrc(buf) == rf.icrc and bytes(buf) == frame
    # parsing at an offset (e.g. behind a capture header)
    assert parse_roce_frame(b"\xee" * 3 + frame, 3).bth == p["bth"]


def _frame(opcode: int, ext: list, payload: bytes = b"", **kw: int) -> bytes:
    return build_roce_frame(MAC1, MAC2, b"\x0a\0\0\1", b"\x0a\0\0\2", 7, BTH(opcode=opcode, **kw), ext, payload)


def _set_lengths(frame: bytes, udp_len: int, icrc: bool = True) -> bytes:
    """Re-stamp IP total length and UDP length, cutting the frame to match (ICRC recomputed)."""
    buf = bytearray(frame[:34 + udp_len])
    struct.pack_into("!H", buf, 16, 20 + udp_len)
    struct.pack_into("!H", buf, 38, udp_len)
    if icrc:
        write_icrc(buf)
    return bytes(buf)


def test_parse_rejects_malformed() -> None:
    ack = _frame(Opcode.ACKNOWLEDGE, [aeth_ack(3)])
    with pytest.raises(HeaderError, match="needs a AETH"):
        parse_roce_frame(_set_lengths(ack, 8 + 12 + 4))  # BTH + ICRC, no room for the AETH
    write = _frame(Opcode.RDMA_WRITE_ONLY, [RETH(0, 1, 4)], b"abcd")
    with pytest.raises(HeaderError, match="needs a RETH"):
        parse_roce_frame(_set_lengths(write, 8 + 12 + 15 + 4))
    no_icrc = _set_lengths(_frame(Opcode.SEND_ONLY, []), 8 + 12, icrc=False)
    for fn in (parse_roce_frame, check_icrc, icrc_of):
        with pytest.raises(HeaderError, match="cannot hold a BTH and an ICRC"):
            fn(no_icrc)
    with pytest.raises(HeaderError, match="runs past"):
        parse_roce_frame(write[:-1])
    with pytest.raises(HeaderError, match="padcount"):
        parse_roce_frame(_set_padcount(_frame(Opcode.SEND_ONLY, [], b"a"), 2))
    not_roce = bytearray(write)
    struct.pack_into("!H", not_roce, 36, 4792)
    with pytest.raises(HeaderError, match="not 4791"):
        parse_roce_frame(not_roce)
    arp = bytearray(write)
    arp[12:14] = b"\x08\x06"
    with pytest.raises(HeaderError, match="not IPv4"):
        parse_roce_frame(arp)
    for cut in range(len(write)):
        with pytest.raises(HeaderError):
            parse_roce_frame(write[:cut])
        with pytest.raises(HeaderError):
            check_icrc(write[:cut])
    with pytest.raises(HeaderError):
        icrc_of(write, l3_offset=13)
    with pytest.raises(HeaderError, match="frame ends"):
        append_icrc(write)  # already has its ICRC: lengths do not leave room for another


def _set_padcount(frame: bytes, padcount: int) -> bytes:
    buf = bytearray(frame)
    buf[43] = buf[43] & 0xCF | padcount << 4
    write_icrc(buf)
    return bytes(buf)


def test_padcount_is_stripped() -> None:
    rf = parse_roce_frame(_set_padcount(_frame(Opcode.SEND_ONLY, [], b"abcd"), 3))
    assert bytes(rf.payload) == b"a" and rf.icrc_ok
    assert [pad_count(n) for n in range(6)] == [0, 3, 2, 1, 0, 3]


def test_short_frame_with_ethernet_padding() -> None:
    frame = _frame(Opcode.SEND_ONLY, [])
    assert len(frame) == 58
    padded = frame + b"\xa5\xa5"  # padding bytes are not covered by the ICRC
    rf = parse_roce_frame(padded)
    assert rf.icrc_ok and bytes(rf.payload) == b""
    assert check_icrc(padded) and icrc_of(padded) == icrc_of(frame)


def test_build_checks_ext_headers_and_fields() -> None:
    with pytest.raises(HeaderError, match="takes"):
        _frame(Opcode.RDMA_WRITE_ONLY, [])
    with pytest.raises(HeaderError, match="takes"):
        _frame(Opcode.ATOMIC_ACKNOWLEDGE, [AtomicAckETH(1), aeth_ack(0)])
    # strict=False lets a test craft what a broken peer might send
    odd = build_roce_frame(MAC1, MAC2, b"\x0a\0\0\1", b"\x0a\0\0\2", 7, BTH(opcode=Opcode.SEND_ONLY),
                           [RETH(1, 2, 3)], strict=False)
    assert bytes(parse_roce_frame(odd).payload) == RETH(1, 2, 3).to_bytes()
    for bad in ({"sport": 1 << 16}, {"tos": 256}, {"src_ip": b"\0" * 5}, {"src_mac": b"\0"}):
        args = {"src_mac": MAC1, "dst_mac": MAC2, "src_ip": b"\0" * 4, "dst_ip": b"\0" * 4, "sport": 1,
                "bth": BTH(opcode=Opcode.SEND_ONLY), "ext_headers": []} | bad
        with pytest.raises(HeaderError):
            build_roce_frame(**args)
    with pytest.raises(HeaderError, match="total_length"):
        _frame(Opcode.SEND_ONLY, [], bytes(65535))


# --- AETH syndromes -------------------------------------------------------------------------

def test_aeth_helpers() -> None:
    assert aeth_ack(5) == AETH(0x1F, 5) and CREDITS_INVALID == 0x1F
    assert aeth_ack(5, credits=0).syndrome == 0x00
    assert aeth_nak(NakCode.PSN_SEQUENCE_ERROR, 9) == AETH(0x60, 9)
    assert aeth_nak(NakCode.INVALID_REQUEST, 0).syndrome == 0x61
    assert aeth_nak(NakCode.REMOTE_ACCESS_ERROR, 0).syndrome == 0x62
    assert aeth_nak(NakCode.REMOTE_OPERATIONAL_ERROR, 0).syndrome == 0x63
    assert aeth_nak(NakCode.INVALID_RD_REQUEST, 0).syndrome == 0x64
    assert aeth_rnr_nak(0x0E, 1).syndrome == 0x2E
    assert aeth_nak(NakCode.REMOTE_ACCESS_ERROR, 4).decode() == (AethKind.NAK, NakCode.REMOTE_ACCESS_ERROR)
    assert decode_syndrome(0x1F) == (AethKind.ACK, 31)
    assert decode_syndrome(0x65) == (AethKind.NAK, 5)  # reserved NAK code: the raw value
    for make in (lambda: aeth_ack(1, credits=32), lambda: aeth_ack(1 << 24), lambda: aeth_nak(32, 1),
                 lambda: aeth_nak(NakCode.INVALID_REQUEST, -1), lambda: aeth_rnr_nak(-1, 1)):
        with pytest.raises(HeaderError):
            make()
    with pytest.raises(HeaderError):
        decode_syndrome(256)


def test_decode_syndrome_exhaustive() -> None:
    helpers = {AethKind.ACK: lambda v: aeth_ack(0, v), AethKind.RNR_NAK: lambda v: aeth_rnr_nak(v, 0),
               AethKind.NAK: lambda v: aeth_nak(v, 0)}
    for syndrome in range(256):
        if syndrome & 0x80 or syndrome >> 5 == AethKind.RESERVED:
            with pytest.raises(HeaderError, match="reserved"):
                decode_syndrome(syndrome)
            continue
        kind, value = decode_syndrome(syndrome)
        assert helpers[kind](value).syndrome == syndrome


def test_opcode_table() -> None:
    assert (Opcode.SEND_ONLY, Opcode.RDMA_WRITE_ONLY, Opcode.RDMA_READ_REQUEST, Opcode.ACKNOWLEDGE,
            Opcode.ATOMIC_ACKNOWLEDGE, Opcode.COMPARE_SWAP, Opcode.FETCH_ADD) == (
        0x04, 0x0A, 0x0C, 0x11, 0x12, 0x13, 0x14)
    assert (Opcode.RDMA_WRITE_FIRST, Opcode.RDMA_WRITE_MIDDLE, Opcode.RDMA_WRITE_LAST) == (6, 7, 8)
    # our names are contrib's without the transport prefix
    from scapy.contrib.roce import _bth_opcodes

    for op in Opcode:
        assert _bth_opcodes[op] == (f"RC_{op.name}" if op is not Opcode.CNP else "CNP")
    assert ext_headers_for(Opcode.SEND_ONLY) == () and ext_headers_for(0x2A) == ()


def test_icrc_covers_ip_options_like_scapy() -> None:
    from scapy.layers.inet import IPOption_Router_Alert

    pkt = (Ether(src=mac_str(MAC1), dst=mac_str(MAC2))
           / IP(src="10.0.0.1", dst="10.0.0.2", options=[IPOption_Router_Alert()])
           / ScapyUDP(sport=5, dport=4791, chksum=0) / L.BTH(opcode=Opcode.RDMA_WRITE_ONLY)
           / L.RETH(va=0x40, rkey=3, dma_len=4) / Raw(b"abcd"))
    raw = bytes(pkt)
    assert icrc_of(raw) == struct.unpack("<I", raw[-4:])[0]
    rf = parse_roce_frame(raw)
    assert rf.ip.ihl == 6 and rf.icrc_ok and bytes(rf.payload) == b"abcd" and rf.reth == RETH(0x40, 3, 4)
