"""The authentication trailer: codec round trip, fuzzing (only HeaderError), and the Scapy layer."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from headers.auth import AUTH_INPUT_LEN, MAC_LEN, TRAILER_LEN, AuthTrailer, decode_trailer
from headers.errors import HeaderError
from headers.layers.auth import NetstackAuth

u8 = st.integers(0, 0xFF)
u32 = st.integers(0, 0xFFFFFFFF)
trailers = st.builds(AuthTrailer, key_id=u8, era=u32, seq=u32, mac=st.binary(min_size=MAC_LEN, max_size=MAC_LEN))


def fields(t):
    return {"key_id": t.key_id, "era": t.era, "seq": t.seq, "mac": t.mac}


def test_sizes_and_known_bytes():
    assert (TRAILER_LEN, MAC_LEN, AUTH_INPUT_LEN) == (17, 8, 9)
    t = AuthTrailer(0x07, 0x01020304, 0xA0B0C0D0, bytes(range(8)))
    raw = bytes([0x07, 1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0, *range(8)])
    assert t.encode() == raw and t.auth_input() == raw[:AUTH_INPUT_LEN]
    assert decode_trailer(raw) == t


@given(trailers, st.binary(max_size=40), st.binary(max_size=8))
def test_round_trip_from_the_end(t, before, after):
    raw = t.encode()
    assert len(raw) == TRAILER_LEN and raw[-MAC_LEN:] == t.mac
    buf = before + raw + after
    end = len(before) + TRAILER_LEN
    assert decode_trailer(before + raw) == t
    assert decode_trailer(buf, end) == t
    assert decode_trailer(bytearray(buf), end) == t
    assert decode_trailer(memoryview(buf), end) == t


@pytest.mark.parametrize("kwargs", [
    dict(key_id=256), dict(key_id=-1), dict(era=1 << 32), dict(seq=-1), dict(seq=True),
    dict(mac=b"short"), dict(mac=b"x" * 9), dict(mac="12345678"), dict(mac=bytearray(8)),
])
def test_bad_fields_raise_header_error(kwargs):
    base = dict(key_id=1, era=2, seq=3, mac=b"\0" * 8) | kwargs
    with pytest.raises(HeaderError):
        AuthTrailer(**base)


@pytest.mark.parametrize("end", [-1, 18, 1.5, "3", True])
def test_bad_end_raises_header_error(end):
    with pytest.raises(HeaderError):
        decode_trailer(b"\0" * 17, end)


@settings(max_examples=2000)
@given(data=st.binary(max_size=40), end=st.one_of(st.none(), st.integers(-5, 45)))
def test_fuzz_only_header_error(data, end):
    try:
        t = decode_trailer(data, end)
    except HeaderError as exc:
        stop = len(data) if end is None else end
        assert stop < TRAILER_LEN or stop > len(data), exc
        return
    stop = len(data) if end is None else end
    assert t.encode() == data[stop - TRAILER_LEN:stop]


@given(trailers)
def test_scapy_layer_builds_the_codec_bytes(t):
    raw = t.encode()
    assert bytes(NetstackAuth(**fields(t))) == raw
    layer = NetstackAuth(raw)
    assert {k: getattr(layer, k) for k in fields(t)} == fields(t)


@given(trailers, st.binary(max_size=30))
def test_scapy_trailer_appended_to_a_frame(t, payload):
    pkt = Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01") / IP(dst="10.0.0.2", src="10.0.0.1") / \
        UDP(sport=1, dport=2) / Raw(payload) / NetstackAuth(**fields(t))
    raw = bytes(pkt)
    assert raw.endswith(t.encode())
    assert decode_trailer(raw) == t
    # dissected on its own from the last 17 bytes; anything after it would be padding, not payload
    layer = NetstackAuth(raw[-TRAILER_LEN:] + b"pad")
    assert layer.mac == t.mac and bytes(layer.payload) == b"pad" and layer.payload.name == "Padding"
