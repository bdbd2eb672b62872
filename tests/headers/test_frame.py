"""Whole frames: the fast dissector, every decoder under one roof, Scapy's view of the same bytes."""

import importlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import headers.layers
from headers import dta, linkguardian, onepipe, pfc, roce, tcsack
from headers.errors import HeaderError
from headers.fcs import append_fcs, fcs_ok
from headers.frame import IcrcCheck, Payload, dissect
from headers.inet import UDP, Ethernet, IPv4, build_udp_frame

SRC, DST = b"\x02\0\0\0\0\x01", b"\x02\0\0\0\0\x02"
IP1, IP2 = b"\x0a\0\0\x01", b"\x0a\0\0\x02"
MODULES = ["inet", "linkguardian", "pfc", "dta", "roce", "onepipe", "tcsack", "tcd"]


def _lg_wrap(frame: bytes, seq: int) -> bytes:
    """Insert a LinkGuardian data tag between the Ethernet header and the IPv4 packet."""
    tag = linkguardian.LGData(seq_no=seq, next_type=0x0800).to_bytes()
    return frame[:12] + (0xABCD).to_bytes(2, "big") + tag + frame[14:]


def _sample_frames() -> dict[str, bytes]:
    kw = dta.build_report_frame(SRC, DST, IP1, IP2, dta.DTABase(1, 7), dta.KeyWrite(2, 0xDEADBEEF, (1, 2, 3)))
    write = roce.build_roce_frame(SRC, DST, IP1, IP2, 49152, roce.BTH(opcode=roce.Opcode.RDMA_WRITE_ONLY, dqpn=17,
                                  psn=5), [roce.RETH(va=0x1000, rkey=0x42, dma_len=8)], b"\x11" * 8)
    op = onepipe.OnePipeHeader(msg_ts=10, be_barrier=9, commit_barrier=8, psn=1, opcode=onepipe.OnePipeOpcode.DATA)
    tcs = tcsack.TcsAck(flow_id=1, ack_seq=2, cum_ack=100, blocks=((105, 110),))
    return {
        "dta": kw,
        "lg+dta": _lg_wrap(kw, 65535),
        "roce": write,
        "pfc": pfc.pause_frame(SRC, [1]),
        "onepipe": build_udp_frame(SRC, DST, IP1, IP2, 40100, 40100, op.to_bytes() + b"msg"),
        "tcsack": build_udp_frame(SRC, DST, IP1, IP2, 40200, 40200, tcs.to_bytes()),
        "dummy": Ethernet(DST, SRC, 0xABCD).to_bytes()
        + linkguardian.LGData(seq_no=3, next_type=0, dummy=1).to_bytes(),
    }


def test_every_module_lists_its_headers():
    for name in MODULES:
        module = importlib.import_module(f"headers.{name}")
        for cls in module.HEADERS:
            assert hasattr(cls, "from_bytes") and hasattr(cls, "to_bytes") and hasattr(cls, "SIZE"), cls


def test_dissect_known_frames():
    frames = _sample_frames()
    types = {name: [type(r) for r in dissect(f)[0]] for name, f in frames.items()}
    assert types["dta"] == [Ethernet, IPv4, UDP, dta.DTABase, dta.KeyWrite]
    assert types["lg+dta"] == [Ethernet, linkguardian.LGData, IPv4, UDP, dta.DTABase, dta.KeyWrite]
    assert types["roce"] == [Ethernet, IPv4, UDP, roce.BTH, roce.RETH, Payload, IcrcCheck]
    assert types["pfc"] == [Ethernet, pfc.PFCFrame]
    assert types["onepipe"] == [Ethernet, IPv4, UDP, onepipe.OnePipeHeader, Payload]
    assert types["tcsack"] == [Ethernet, IPv4, UDP, tcsack.TcsAck]
    assert types["dummy"] == [Ethernet, linkguardian.LGData]
    records, error = dissect(frames["roce"])
    assert error is None and records[-1] == IcrcCheck(True)
    assert dissect(frames["lg+dta"])[0][1].seq_no == 65535


def test_scapy_sees_the_same_frames():
    from scapy.layers.l2 import Ether

    frames = _sample_frames()
    assert Ether(frames["lg+dta"]).getlayer(headers.layers.dta.DTAKeyWrite).key == 0xDEADBEEF
    assert Ether(frames["roce"]).getlayer(headers.layers.roce.RETH).rkey == 0x42
    assert Ether(frames["tcsack"]).getlayer(headers.layers.tcsack.TcsAck).cum_ack == 100
    assert Ether(frames["onepipe"]).getlayer(headers.layers.onepipe.OnePipe).msg_ts == 10


@pytest.mark.parametrize("name", sorted(_sample_frames()))
def test_flipped_bit_fails_fcs(name):
    framed = bytearray(append_fcs(_sample_frames()[name]))
    assert fcs_ok(framed)
    framed[len(framed) // 2] ^= 0x10
    assert not fcs_ok(framed)


def test_flipped_bit_fails_icrc():
    frame = bytearray(_sample_frames()["roce"])
    frame[-6] ^= 1  # inside the payload
    assert dissect(frame)[0][-1] == IcrcCheck(False)


@settings(max_examples=3000)
@given(st.binary(max_size=200))
def test_dissect_never_raises_on_garbage(data):
    records, error = dissect(data)
    assert error is None or isinstance(error, HeaderError)
    assert isinstance(records, list)


@settings(max_examples=3000)
@given(st.sampled_from(sorted(_sample_frames())), st.data())
def test_dissect_never_raises_on_damaged_frames(name, data):
    frame = bytearray(_sample_frames()[name])
    cut = data.draw(st.integers(0, len(frame)))
    for _ in range(data.draw(st.integers(0, 4))):
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    _records, error = dissect(bytes(frame[:cut]))
    assert error is None or isinstance(error, HeaderError)
