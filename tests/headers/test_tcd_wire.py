"""TCD's end-host messages (headers.tcd: TcdData, TcdCnp, TcdAck): codec, known bytes, Scapy layers
and dispatch on UDP 40300, and decoders that raise only HeaderError."""

import contextlib
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.contrib.roce import BTH as ContribBTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from headers.errors import HeaderError
from headers.inet import build_udp_frame, parse_udp_frame
from headers.layers import tcd as L
from headers.registry import UdpPort
from headers.roce import BTH, Opcode
from headers.tcd import HEADERS, TCD_VERSION, CnpKind, TcdAck, TcdCnp, TcdData, TcdDataFlag, decode_feedback

MAC1, MAC2 = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
IP1, IP2 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
u16 = st.integers(0, 0xFFFF)
datas = st.builds(TcdData, flow=u16, seq=st.integers(0, 0xFFFFFFFF), send_ts_ns=st.integers(0, (1 << 64) - 1),
                  flags=st.integers(0, int(TcdDataFlag.FIN | TcdDataFlag.ACK)))
cnps = st.builds(TcdCnp, flow=u16, kind=st.sampled_from(list(CnpKind)), marked=u16)
acks = st.builds(TcdAck, flow=u16, seq=st.integers(0, 0xFFFFFFFF), echo_ts_ns=st.integers(0, (1 << 64) - 1),
                 ce=u16, ue=u16)


def fields(rec):
    return {f.name: getattr(rec, f.name) for f in dataclasses.fields(rec)}


def test_records_and_sizes():
    assert (TcdData, TcdCnp, TcdAck) == HEADERS
    assert TcdData.SIZE == 16 and TcdCnp.SIZE == 32 and int(UdpPort.TCD) == 40300 and int(Opcode.CNP) == 0x81
    assert TcdAck.SIZE == 20 and TcdAck.TYPE == 0xAC


def test_known_bytes():
    d = TcdData(flow=0x0102, seq=0x03040506, send_ts_ns=0x0708090A0B0C0D0E, flags=TcdDataFlag.FIN)
    assert d.to_bytes() == bytes.fromhex("01 01 0102 03040506 0708090a0b0c0d0e")
    assert d.to_bytes(20) == d.to_bytes() + bytes(4) and d.fin
    c = TcdCnp(flow=0x1234, kind=CnpKind.UE, marked=300)
    raw = c.to_bytes()
    # BTH: CNP, P_Key 0xFFFF, BECN, DestQP = flow, PSN 0; then kind, marked, 13 zeros; ICRC 0
    assert raw == bytes.fromhex("81 00 ffff 40 001234 00000000") + bytes([1, 1, 44]) + bytes(13) + bytes(4)
    bth = BTH.from_bytes(raw)
    assert (bth.opcode, bth.becn, bth.dqpn, bth.pkey, bth.psn) == (0x81, 1, 0x1234, 0xFFFF, 0)
    ack = TcdAck(flow=0x0102, seq=0x03040506, echo_ts_ns=0x0708090A0B0C0D0E, ce=0x0F10, ue=0x1112)
    assert ack.to_bytes() == bytes.fromhex("ac 00 0102 03040506 0708090a0b0c0d0e 0f10 1112")
    ackreq = TcdData(flow=1, seq=2, send_ts_ns=3, flags=TcdDataFlag.ACK | TcdDataFlag.FIN)
    assert ackreq.to_bytes()[1] == 0x03 and ackreq.ack and ackreq.fin and not TcdData(1, 2, 3).ack


@given(rec=datas, pad=st.integers(0, 1500), prefix=st.binary(max_size=4))
def test_data_round_trip(rec, pad, prefix):
    raw = rec.to_bytes(16 + pad)
    assert len(raw) == 16 + pad and TcdData.from_bytes(raw) == rec
    assert TcdData.from_bytes(prefix + raw, len(prefix)) == rec
    buf = bytearray(16)
    assert rec.pack_into(buf) == 16 and bytes(buf) == raw[:16]


@given(rec=cnps, prefix=st.binary(max_size=4))
def test_cnp_round_trip(rec, prefix):
    raw = rec.to_bytes()
    assert TcdCnp.from_bytes(raw) == rec and TcdCnp.from_bytes(prefix + raw, len(prefix)) == rec
    assert isinstance(TcdCnp.from_bytes(raw).kind, CnpKind)


@given(rec=acks, prefix=st.binary(max_size=4))
def test_ack_round_trip(rec, prefix):
    raw = rec.to_bytes()
    assert len(raw) == 20 and TcdAck.from_bytes(raw) == rec and TcdAck.from_bytes(prefix + raw, len(prefix)) == rec
    buf = bytearray(20)
    assert rec.pack_into(buf) == 20 and bytes(buf) == raw
    assert decode_feedback(raw) == rec


@given(rec=cnps)
def test_feedback_is_a_cnp_or_an_ack_by_its_first_byte(rec):
    assert decode_feedback(rec.to_bytes()) == rec
    with pytest.raises(HeaderError, match="neither"):
        decode_feedback(TcdData(1, 2, 3).to_bytes())
    with pytest.raises(HeaderError, match="truncated"):
        decode_feedback(b"")


@given(data=st.binary(max_size=64), offset=st.integers(-2, 66))
def test_decoders_raise_only_header_error(data, offset):
    for cls in HEADERS:
        try:
            rec = cls.from_bytes(data, offset)
        except HeaderError:
            continue
        assert isinstance(rec, cls)
    with contextlib.suppress(HeaderError):
        assert isinstance(decode_feedback(data), TcdCnp | TcdAck)


@given(data=st.binary(min_size=20, max_size=20))
def test_any_twenty_bytes_behind_the_ack_type_decode_or_fail_cleanly(data):
    raw = b"\xac" + data[1:]
    try:
        got = TcdAck.from_bytes(raw)
    except HeaderError:
        assert raw[1] != 0  # only the reserved flags can be wrong
        return
    assert got.to_bytes() == raw


@given(rec=cnps, i=st.integers(0, 31), bit=st.integers(0, 7))
def test_a_flipped_cnp_bit_decodes_or_fails_cleanly(rec, i, bit):
    raw = bytearray(rec.to_bytes())
    raw[i] ^= 1 << bit
    try:
        got = TcdCnp.from_bytes(bytes(raw))
    except HeaderError:
        assert i in (0, 5, 12)  # opcode, DestQP beyond 16 bits, kind
        return
    if i in (6, 7, 12, 13, 14):
        assert got != rec  # flow, kind or marked changed
    else:
        assert got == rec  # the other BTH fields, reserved bytes and ICRC are not checked


def test_decode_errors():
    good = TcdData(1, 2, 3).to_bytes()
    with pytest.raises(HeaderError, match="version"):
        TcdData.from_bytes(b"\x02" + good[1:])
    with pytest.raises(HeaderError, match="reserved"):
        TcdData.from_bytes(good[:1] + b"\x04" + good[2:])
    with pytest.raises(HeaderError, match="truncated"):
        TcdData.from_bytes(good[:15])
    cnp = TcdCnp(1).to_bytes()
    for bad, what in ((cnp[:31], "truncated"), (cnp + b"\0", "32 bytes"), (b"\x11" + cnp[1:], "opcode"),
                      (cnp[:5] + b"\x01" + cnp[6:], "DestQP"), (cnp[:12] + b"\x02" + cnp[13:], "kind")):
        with pytest.raises(HeaderError, match=what):
            TcdCnp.from_bytes(bad)
    ack = TcdAck(1, 2, 3).to_bytes()
    for bad, what in ((ack[:19], "truncated"), (ack + b"\0", "20 bytes"), (b"\x81" + ack[1:], "type"),
                      (ack[:1] + b"\x01" + ack[2:], "reserved")):
        with pytest.raises(HeaderError, match=what):
            TcdAck.from_bytes(bad)


@pytest.mark.parametrize(("make", "what"), [
    (lambda: TcdData(1 << 16, 0, 0), "flow"), (lambda: TcdData(0, 1 << 32, 0), "seq"),
    (lambda: TcdData(0, 0, -1), "send_ts_ns"), (lambda: TcdData(0, 0, 0, 4), "reserved"),
    (lambda: TcdAck(1 << 16, 0, 0), "flow"), (lambda: TcdAck(0, 1 << 32, 0), "seq"),
    (lambda: TcdAck(0, 0, 1 << 64), "echo_ts_ns"), (lambda: TcdAck(0, 0, 0, -1), "ce"),
    (lambda: TcdAck(0, 0, 0, 0, 1 << 16), "ue"),
    (lambda: TcdData(0, 0, 0).to_bytes(15), "16-byte"), (lambda: TcdCnp(1 << 16), "flow"),
    (lambda: TcdCnp(0, 2), "kind"), (lambda: TcdCnp(0, True), "kind"), (lambda: TcdCnp(0, 0, 1 << 16), "marked"),
])
def test_out_of_range(make, what):
    with pytest.raises(HeaderError, match=what):
        make()


# ---------------------------------------------------------------------------------- Scapy
@given(rec=datas, pad=st.integers(0, 64))
def test_scapy_decodes_data_built_by_the_codec(rec, pad):
    frame = build_udp_frame(MAC1, MAC2, IP1, IP2, 40001, UdpPort.TCD, rec.to_bytes(16 + pad))
    layer = Ether(frame)[L.TcdData]
    assert {k: int(getattr(layer, k)) for k in fields(rec)} == fields(rec) and layer.version == TCD_VERSION
    assert bytes(layer.payload) == bytes(pad)
    assert TcdData.from_bytes(bytes(L.TcdData(**fields(rec)))) == rec  # and the other way


@given(rec=cnps)
def test_scapy_decodes_cnps_built_by_the_codec(rec):
    frame = build_udp_frame(MAC1, MAC2, IP2, IP1, UdpPort.TCD, 40001, rec.to_bytes())
    layer = Ether(frame)[L.TcdCnp]
    assert (layer.flow, layer.kind, layer.marked, layer.opcode, layer.becn) == (rec.flow, rec.kind, rec.marked,
                                                                                 0x81, 1)
    assert bytes(L.TcdCnp(flow=rec.flow, kind=int(rec.kind), marked=rec.marked)) == rec.to_bytes()
    assert L.TcdCnp(rec.to_bytes()).flow == rec.flow  # applied by hand to a bare CNP
    # contrib's RoCE layers read the same BTH
    assert ContribBTH(rec.to_bytes()).dqpn == rec.flow


@given(rec=acks)
def test_scapy_decodes_acks_built_by_the_codec(rec):
    frame = build_udp_frame(MAC1, MAC2, IP2, IP1, UdpPort.TCD, 40001, rec.to_bytes())
    layer = Ether(frame)[L.TcdAck]
    assert {k: int(getattr(layer, k)) for k in fields(rec)} == fields(rec) and layer.type == 0xAC
    assert bytes(L.TcdAck(**fields(rec))) == rec.to_bytes()  # and the other way
    assert L.TcdAck(rec.to_bytes()).seq == rec.seq  # applied by hand to a bare ACK


def test_scapy_binding_and_dispatch():
    built = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2")
                  / UDP(sport=40001) / L.TcdData(flow=3, seq=4, flags="FIN"))
    uf = parse_udp_frame(built)
    assert uf.udp.dport == UdpPort.TCD and TcdData.from_bytes(built, uf.payload_offset) == TcdData(3, 4, 0, 1)
    cnp = UDP(dport=40001) / L.TcdCnp(flow=9)
    assert cnp.sport == UdpPort.TCD and TcdCnp.from_bytes(bytes(cnp)[8:]) == TcdCnp(9)
    ack = UDP(dport=40001) / L.TcdAck(flow=9, seq=1, echo_ts_ns=5, ue=2)
    assert ack.sport == UdpPort.TCD and TcdAck.from_bytes(bytes(ack)[8:]) == TcdAck(9, 1, 5, 0, 2)
    flagged = L.TcdData(flow=1, flags="FIN+ACK")
    assert TcdData.from_bytes(bytes(flagged)).flags == TcdDataFlag.FIN | TcdDataFlag.ACK
    other = Ether(build_udp_frame(MAC1, MAC2, IP1, IP2, 40001, UdpPort.TCD, b"\x07junk"))
    assert other.haslayer(Raw) and not other.haslayer(L.TcdData) and not other.haslayer(L.TcdCnp)
