"""Pauses too short to matter (issue 34, finding 4; docs/tcd.md "Pauses too short to matter").

A host on a lossless edge port may pause its ToR port (802.1Qbb; PFC is never sealed). With a
1-quantum pause every T_on^max/2 it kept a congested port undetermined: in process, CE marks fell
from 199,500 to 499 and became UE. A pause shorter than one MTU's serialisation time at the port's
rate (``TcdParams.min_off_ns``) holds back at most part of one frame: the switch honours it, the
detector counts it (``short_pauses``) and does not take it for an OFF period. A pause of at least
that long still is one ("Congestion Detection in Lossless Networks" §3.2.1)."""

from __future__ import annotations

from headers.pfc import pause_frame
from headers.tcd import Ecn
from netstack.tcd.feature import install
from netstack.tcd.marker import TcdMarker
from netstack.tcd.params import TcdParams, serialisation_ns
from tests.switch import GBPS, class_tos, mac, make_switch, udp_frame

PEER = mac(0x99)
FRAME = 1000
FRAME_NS = serialisation_ns(FRAME, GBPS)


def congested_run(pause_quanta: int | None, frames: int = 4000) -> TcdMarker:
    """p0 (unpaced) feeds p1 (1 Gbit/s) at twice its rate: p1's queue grows past K, a congestion
    point. Every T_on^max/2 the host behind p1 sends a pause of ``pause_quanta`` (None: none)."""
    sw = make_switch(2, static_fdb={mac(2): "p1"}, p1={"rate_bps": GBPS, "buffer_bytes": 1 << 30})
    params = TcdParams.derive(rate_bps=GBPS, xoff_bytes=40_000, xon_bytes=20_000, delay_ns=1_000)
    m = TcdMarker(params, classes=(0,))
    install(sw, "p1", m)
    frame = udp_frame(size=FRAME, tos=class_tos(0, Ecn.ECT_0))
    t, next_pause = 0, params.t_on_max_ns // 2
    for _ in range(frames):
        t += FRAME_NS // 2
        sw.receive("p0", frame, t)
        if pause_quanta is not None and t >= next_pause:
            sw.receive("p1", pause_frame(PEER, [0], pause_quanta), t)
            next_pause += params.t_on_max_ns // 2
        sw.transmit(t)
    return m


def test_min_off_is_one_mtu_at_line_rate_and_can_be_given():
    p = TcdParams.derive(rate_bps=GBPS, xoff_bytes=40_000, xon_bytes=20_000, delay_ns=1_000)
    assert p.min_off_ns == serialisation_ns(1500, GBPS) == 12_000
    assert TcdParams.from_dict(p.to_dict()) == p
    assert TcdParams.derive(rate_bps=GBPS, xoff_bytes=None, xon_bytes=None, delay_ns=0, min_off_ns=0).min_off_ns == 0
    assert TcdParams(1, 1, 1).min_off_ns == 0  # built by hand: every pause counts, as before


def test_one_quantum_pauses_no_longer_hold_a_congested_port_undetermined():
    calm = congested_run(None).c.classes[0]
    storm = congested_run(1)
    c, det = storm.c.classes[0], storm.detectors[0]
    assert calm.marked_ce > 1000 and calm.marked_ue == 0
    assert det.c.short_pauses > 10 and det.c.pauses == 0  # every pause seen, none an OFF period
    # (each pause still holds the port for 512 ns: a frame or so leaves later, nothing leaves UE)
    assert c.marked_ue == 0 and c.marked_ce >= calm.marked_ce - det.c.short_pauses


def test_a_pause_of_one_mtu_or_more_is_still_an_off_period():
    quanta = -(-12_000 * GBPS // (512 * 10**9))  # one MTU time at 1 Gbit/s, in 512-bit quanta
    m = congested_run(quanta)
    c, det = m.c.classes[0], m.detectors[0]
    assert det.c.short_pauses == 0 and det.c.pauses > 10
    assert c.marked_ue > 0  # TCD §3.2.1: an ON-OFF port is undetermined
