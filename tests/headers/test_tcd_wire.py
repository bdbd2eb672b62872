"""TCD's end-host messages (headers.tcd: TcdData, TcdCnp): codec, known bytes, Scapy layers and
dispatch on UDP 40300, and decoders that raise only HeaderError."""

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
from headers.tcd import HEADERS, TCD_VERSION, CnpKind, TcdCnp, TcdData, TcdDataFlag

MAC1, MAC2 = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
IP1, IP2 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
u16 = st.integers(0, 0xFFFF)
datas = st.builds(TcdData, flow=u16, seq=st.integers(0, 0xFFFFFFFF), send_ts_ns=st.integers(0, (1 << 64) - 1),
                  flags=st.sampled_from([0, int(TcdDataFlag.FIN)]))
cnps = st.builds(TcdCnp, flow=u16, kind=st.sampled_from(list(CnpKind)), marked=u16)


def fields(rec):
    return {f.name: getattr(rec, f.name) for f in dataclasses.fields(rec)}


def test_records_and_sizes():
    assert (TcdData, TcdCnp) == HEADERS
    assert TcdData.SIZE == 16 and TcdCnp.SIZE == 32 and int(UdpPort.TCD) == 40300 and int(Opcode.CNP) == 0x81


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


@given(data=st.binary(max_size=64), offset=st.integers(-2, 66))
def test_decoders_raise_only_header_error(data, offset):
    for cls in HEADERS:
        try:
            rec = cls.from_bytes(data, offset)
        except HeaderError:
            continue
        assert isinstance(rec, cls)


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
        TcdData.from_bytes(good[:1] + b"\x02" + good[2:])
    with pytest.raises(HeaderError, match="truncated"):
        TcdData.from_bytes(good[:15])
    cnp = TcdCnp(1).to_bytes()
    for bad, what in ((cnp[:31], "truncated"), (cnp + b"\0", "32 bytes"), (b"\x11" + cnp[1:], "opcode"),
                      (cnp[:5] + b"\x01" + cnp[6:], "DestQP"), (cnp[:12] + b"\x02" + cnp[13:], "kind")):
        with pytest.raises(HeaderError, match=what):
            TcdCnp.from_bytes(bad)


@pytest.mark.parametrize(("make", "what"), [
    (lambda: TcdData(1 << 16, 0, 0), "flow"), (lambda: TcdData(0, 1 << 32, 0), "seq"),
    (lambda: TcdData(0, 0, -1), "send_ts_ns"), (lambda: TcdData(0, 0, 0, 2), "reserved"),
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


def test_scapy_binding_and_dispatch():
    built = bytes(Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02") / IP(src="10.0.0.1", dst="10.0.0.2")
                  / UDP(sport=40001) / L.TcdData(flow=3, seq=4, flags="FIN"))
    uf = parse_udp_frame(built)
    assert uf.udp.dport == UdpPort.TCD and TcdData.from_bytes(built, uf.payload_offset) == TcdData(3, 4, 0, 1)
    cnp = UDP(dport=40001) / L.TcdCnp(flow=9)
    assert cnp.sport == UdpPort.TCD and TcdCnp.from_bytes(bytes(cnp)[8:]) == TcdCnp(9)
    other = Ether(build_udp_frame(MAC1, MAC2, IP1, IP2, 40001, UdpPort.TCD, b"\x07junk"))
    assert other.haslayer(Raw) and not other.haslayer(L.TcdData) and not other.haslayer(L.TcdCnp)
