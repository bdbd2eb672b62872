"""receive() never raises, whatever the bytes (a daemon never dies on a packet: docs/architecture.md
"Engines are sans-IO")."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.fcs import append_fcs
from headers.registry import PFC_DST_MAC
from netstack.switch import ImpairmentConfig

from . import GBPS, make_switch

# frames biased towards the interesting prefixes: MAC control, link-local, IPv4, VLAN, tiny
prefixes = st.sampled_from([
    b"", PFC_DST_MAC, PFC_DST_MAC + bytes(6) + b"\x88\x08\x01\x01", bytes(12) + b"\x88\x08\x00\x01",
    b"\x02" + bytes(11) + b"\x08\x00\x45", b"\x02" + bytes(11) + b"\x08\x00", b"\x02" + bytes(11) + b"\x81\x00",
    b"\xff" * 12, b"\x01\x80\xc2\x00\x00\x0e",
])
frames = st.builds(lambda p, tail: (p + tail), prefixes, st.binary(max_size=200))


def build():
    sw = make_switch(
        3,
        p0={"fcs": True, "lossless": True, "xoff_bytes": 500, "xon_bytes": 100},
        p1={"rate_bps": GBPS // 10, "ecn_threshold_bytes": 0, "buffer_bytes": 3000, "mtu": 100},
        p2={"impairment": ImpairmentConfig(loss=0.2, corrupt=0.2, seed=1)},
    )
    return sw


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["p0", "p1", "p2", "bogus"]), frames, st.booleans(),
                          st.integers(0, 50_000)), max_size=40))
def test_receive_never_raises_and_counts_every_frame(ops):
    sw = build()
    t = 0
    sent = {"p0": 0, "p1": 0, "p2": 0}
    for port, frame, with_fcs, gap in ops:
        t += gap
        sw.receive(port, append_fcs(frame) if with_fcs else frame, t)
        if port in sent:
            sent[port] += 1
        if gap % 3 == 0:
            sw.transmit(t)
    sw.transmit(t + 10**9)
    counters = sw.counters()
    for port, n in sent.items():
        assert counters[port]["rx_frames"] == n
    assert sw.switch_counters()["unknown_port"] == sum(1 for p, *_ in ops if p == "bogus")
    assert all(c["buffer_used"] == 0 for c in counters.values())
    json.dumps(counters)  # the control socket sends these as JSON lines
    json.dumps(sw.switch_counters())


def test_non_bytes_buffers_are_accepted():
    sw = make_switch(2)
    frame = b"\xff" * 6 + b"\x02" + bytes(5) + b"\x08\x06" + bytes(28)
    sw.receive("p0", bytearray(frame), 0)
    sw.receive("p0", memoryview(frame), 0)
    assert [f for _, f in sw.transmit(0)] == [frame, frame]


def test_non_monotonic_time_is_clamped():
    sw = make_switch(2, p1={"rate_bps": GBPS})
    frame = b"\xff" * 6 + b"\x02" + bytes(5) + b"\x08\x06" + bytes(100)
    sw.receive("p0", frame, 1_000_000)
    sw.receive("p0", frame, 5)  # a stale timestamp is treated as "now"
    assert len(sw.transmit(999_999)) == 0
    assert len(sw.transmit(2_000_000)) == 2
