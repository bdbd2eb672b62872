"""The probe's two codecs, as every header of the project is tested (tests/headers/): the fast
codec round-trips, arbitrary bytes make the decoder raise HeaderError and nothing else, and the
fast codec and the Scapy layer agree both ways."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scapy.layers.l2 import Ether
from scapy.packet import Padding, Raw

from headers.errors import HeaderError
from netstack.examples.ethcount.header import DEFAULT_ETHERTYPE, MIN_FRAME, Probe, parse_probe_frame, probe_frame
from netstack.examples.ethcount.layer import EthCountProbe, dissect

H1 = "02:00:00:00:00:01"
H2 = "02:00:00:00:00:02"
SEQS = st.integers(0, 0xFFFF)


def mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", ""))


def test_the_layout() -> None:
    assert Probe(0x0102).to_bytes() == b"\x01\x00\x01\x02"
    frame = probe_frame(mac(H2), mac(H1), 0x0102)
    assert len(frame) == MIN_FRAME and frame[12:18] == b"\x88\xb5\x01\x00\x01\x02" and frame[18:] == bytes(42)
    assert parse_probe_frame(frame) == Probe(0x0102)


@pytest.mark.parametrize(("data", "problem"), [
    (b"\x01\x00\x00", "truncated"),
    (b"\x02\x00\x00\x00", "version 2"),
    (b"\x01\x80\x00\x00", "reserved byte is 0x80"),
])
def test_what_is_not_a_probe_is_refused_saying_why(data: bytes, problem: str) -> None:
    with pytest.raises(HeaderError, match=problem):
        Probe.from_bytes(data)


@pytest.mark.parametrize("seq", [-1, 0x10000, True, "1"])
def test_a_probe_built_by_code_is_checked(seq: object) -> None:
    with pytest.raises(HeaderError):
        Probe(seq)  # type: ignore[arg-type]  # (what a careless caller would pass)


@given(SEQS)
def test_round_trip(seq: int) -> None:
    assert Probe.from_bytes(Probe(seq).to_bytes()) == Probe(seq)


@given(st.binary(max_size=12), st.integers(-2, 14))
def test_arbitrary_bytes_raise_header_error_and_nothing_else(data: bytes, offset: int) -> None:
    try:
        probe = Probe.from_bytes(data, offset)
    except HeaderError:
        return
    # what decodes is exactly what it says, and encodes back to the same bytes
    assert probe.to_bytes() == data[offset:offset + Probe.SIZE]


@given(SEQS)
def test_codec_bytes_read_by_scapy(seq: int) -> None:
    frame = probe_frame(mac(H2), mac(H1), seq)
    pkt = dissect(frame)
    layer = pkt[EthCountProbe]
    assert (layer.version, layer.reserved, layer.seq) == (1, 0, seq)
    assert pkt[Ether].type == DEFAULT_ETHERTYPE and isinstance(layer.payload, Padding)
    assert bytes(pkt) == frame


@given(SEQS)
def test_scapy_bytes_read_by_the_codec(seq: int) -> None:
    built = bytes(Ether(dst=H2, src=H1) / EthCountProbe(seq=seq))  # the layer sets the EtherType
    assert built[12:14] == b"\x88\xb5"
    assert parse_probe_frame(built) == Probe(seq)
    assert probe_frame(mac(H2), mac(H1), seq).startswith(built)  # the codec only pads


def test_dissection_is_not_bound_to_the_ethertype() -> None:
    """Another experiment's 0x88b5 frame stays Raw in Scapy; :func:`dissect` asks for the probe."""
    frame = probe_frame(mac(H2), mac(H1), 5)
    assert Ether(frame).haslayer(Raw) and not Ether(frame).haslayer(EthCountProbe)
    assert dissect(frame, 0x88B6).haslayer(Raw)
    assert dissect(frame)[EthCountProbe].seq == 5
