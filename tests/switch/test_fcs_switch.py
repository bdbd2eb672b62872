"""Software FCS on switch-to-switch links: added on egress, checked on ingress, failures counted."""

from __future__ import annotations

from headers.fcs import append_fcs, fcs_ok
from netstack.switch import DEFAULT_OVERHEAD_BYTES, ImpairmentConfig, PortConfig, Switch, SwitchConfig

from . import GBPS, make_switch, traced, udp_frame


def test_fcs_added_on_egress_and_not_counted_twice_in_line_time():
    sw = make_switch(2, p1={"fcs": True, "rate_bps": GBPS})
    tr = traced(sw)
    frame = udp_frame(size=100)
    sw.receive("p0", frame, 0)
    (port, out), = sw.transmit(10**6)
    assert port == "p1" and len(out) == 104 and fcs_ok(out) and out[:-4] == frame
    d = tr.on("p1")[0]
    assert d.end - d.start == (100 + DEFAULT_OVERHEAD_BYTES) * 8  # the trailer *is* the 4 B FCS of the overhead
    assert sw.counters()["p1"]["tx_bytes"] == 104


def test_fcs_checked_and_stripped_on_ingress():
    sw = make_switch(2, p0={"fcs": True})
    good = udp_frame(size=100)
    sw.receive("p0", append_fcs(good), 0)
    bad = bytearray(append_fcs(good))
    bad[50] ^= 0x55
    sw.receive("p0", bytes(bad), 1)
    sw.receive("p0", good, 2)  # no trailer at all: its last 4 bytes are not a CRC
    sw.receive("p0", b"\x01\x02\x03", 3)  # too short for a header + FCS
    out = sw.transmit(10)
    assert [f for _, f in out] == [good]  # forwarded without the trailer to a non-FCS port
    state = sw.counters()["p0"]
    assert state["fcs_errors"] == 2 and state["malformed"] == 1 and state["rx_frames"] == 4


def test_corruption_on_a_link_becomes_counted_fcs_loss_at_the_peer():
    imp = ImpairmentConfig(corrupt=0.2, seed=42)
    s1 = Switch(SwitchConfig("s1", (PortConfig("h"), PortConfig("up", fcs=True, impairment=imp))))
    s2 = Switch(SwitchConfig("s2", (PortConfig("down", fcs=True), PortConfig("h"))))
    n = 2000
    for i in range(n):
        s1.receive("h", udp_frame(src=1, dst=2, size=60 + i % 1400), i)
        for _, frame in s1.transmit(i):
            s2.receive("down", frame, i)
    delivered = len(s2.transmit(n))
    c1, c2 = s1.counters()["up"], s2.counters()["down"]
    assert c1["tx_frames"] == n  # counter B of LinkGuardian Fig. 7 includes what the link then corrupts
    assert c2["fcs_errors"] == c1["impair_corrupted"] > 0  # every corrupted frame is caught
    assert delivered == n - c1["impair_corrupted"]
    assert 0.17 < c1["impair_corrupted"] / n < 0.23
