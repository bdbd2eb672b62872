"""Forged and garbage frames against LinkGuardian (docs/security.md#the-switch-and-linkguardian).

A host may send anything; only the two switches of a protected link may speak LinkGuardian on it.
The switches' edge ports drop a host's LinkGuardian frames before any feature sees them; a tag
never hides MAC control; a seq_no far ahead cannot open more holes than the sender could ever
repair. The stateful test puts an attacker on both hosts and garbage on the protected link while a
genuine stream crosses it: nothing is delivered twice or out of order, nothing genuine is lost, and
the engines' memory stays bounded.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headers.errors import HeaderError
from headers.linkguardian import LGData, LGLeadingAck, LGLossNotification, wrap
from headers.pfc import pause_frame
from headers.registry import MIN_FRAME
from netstack.linkguardian import LG_CONTROL_MAC, LGParams, LGReceiver, LGSender

from . import MS, frame, stamp_for
from .fig7 import Fig7

LG = b"\xab\xcd"


def courier(src: bytes, leading_ack: int, era: int = 0) -> bytes:
    """An explicit leading-ACK frame as a receiver switch sends it (LinkGuardian §3.1)."""
    f = LG_CONTROL_MAC + src + LG + LGLeadingAck(leading_ack, 0, era, 0).to_bytes()
    return f + bytes(max(0, MIN_FRAME - len(f)))


def notification(src: bytes, leading_ack: int, hole: int, first: int) -> bytes:
    f = LG_CONTROL_MAC + src + LG + LGLossNotification(leading_ack, hole, first, 0).to_bytes()
    return f + bytes(max(0, MIN_FRAME - len(f)))


def wrapped_pause(dst: bytes, src: bytes) -> bytes:
    """A PFC pause of every class behind a piggybacked leading-ACK tag (the probe's smuggled pause)."""
    pfc = pause_frame(src, list(range(8)))
    return dst + src + LG + LGLeadingAck(1, 0x8808, 0, 1).to_bytes() + pfc[14:]


def far_ahead(dst: bytes, src: bytes, counter: int) -> bytes:
    """A data-tagged frame with a seq_no ``counter`` (the hole bomb's far-ahead tag)."""
    era, seq = wrap(counter)
    inner = dst + src + b"\x88\xb5" + bytes(46)
    return inner[:12] + LG + LGData(seq, 0x88B5, era).to_bytes() + inner[14:]


# ------------------------------------------------------------------------- the edge
def test_a_hosts_forged_linkguardian_frames_are_dropped_at_the_edge_and_counted():
    f = Fig7(corrupt=1e-2, seed=3)
    f.stream(400, 1000)
    h1_mac, h2_mac = f.h1.mac, f.h2.mac
    forged_from_h2 = [courier(h2_mac, 0x7FFF), notification(h2_mac, 0, 255, 1), wrapped_pause(h1_mac, h2_mac)]
    forged_from_h1 = [far_ahead(h2_mac, h1_mac, 16_000), courier(h1_mac, 0x7FFF)]
    for i in range(20):
        at = i * MS // 4
        for fr in forged_from_h2:
            f.net.loop.call_at(at, f.h2.send, fr)
        for fr in forged_from_h1:
            f.net.loop.call_at(at, f.h1.send, fr)
    f.run()
    sw1, sw2 = f.sw1.counters(), f.sw2.counters()
    assert sw2["p-h2"]["edge_drops_switch_only"] == 20 * len(forged_from_h2)
    assert sw1["p-h1"]["edge_drops_switch_only"] == 20 * len(forged_from_h1)
    # the protocol saw only what the two switches said to each other
    s, r = f.sender.engine, f.receiver.engine
    assert s.c.loss_notifications_rx == r.c.loss_notifications_sent and r.c.resyncs == 0
    assert sw1["p-h1"]["pauses_rx"] == 0 and f.h1.rx_unclaimed == 0 and f.leaked == 0
    # and the genuine stream arrived whole, once, in order
    assert f.delivered() == list(range(400))


def test_a_tag_never_hides_mac_control():
    """The sender strips a leading-ACK tag only from in front of a frame it may forward: a PFC
    frame behind one is malformed (before: the tag came off and the pause went out of sw1)."""
    s = LGSender(LGParams())
    with pytest.raises(HeaderError, match="MAC control"):
        s.receive(wrapped_pause(frame(0)[:6], frame(0)[6:12]), 0)


def test_even_past_a_misconfigured_edge_the_switch_forwards_no_unwrapped_pause():
    f = Fig7(corrupt=0.0)
    f.sw2.update_port("p-h2", role="fabric", source_ips=None)  # the edge filter off: the next gates must hold
    f.net.loop.call_at(0, f.h2.send, wrapped_pause(f.h1.mac, f.h2.mac))
    f.run()
    c = f.sw1.counters()
    assert c["p-sw2"]["malformed"] == 1  # the sender refused the tag
    assert c["p-h1"]["tx_frames"] == 0 and f.h1.rx_frames == 0


# ---------------------------------------------------------------------- the hole bomb
def test_a_far_ahead_seq_no_is_a_new_stream_not_sixteen_thousand_holes():
    p = LGParams()
    r = LGReceiver(p)
    r.receive(stamp_for(0, frame(0)), 0)
    r.receive(stamp_for(16_000, frame(1)), 1)  # before: 15,999 holes and 63 notifications
    assert r.c.resyncs == 1 and r.holes() == [] and r.c.loss_notifications_sent == 0
    window = p.tx_buffer_limit_bytes // MIN_FRAME
    assert window < 16_000


def test_repeated_far_ahead_tags_keep_open_holes_within_what_the_sender_could_repair():
    p = LGParams()
    window = p.tx_buffer_limit_bytes // MIN_FRAME
    r = LGReceiver(p)
    c = 0
    for i in range(400):  # the probe's 400 frames: 6.55 M holes before
        c += window - 1
        r.receive(stamp_for(c, frame(i)), i)
    assert len(r.holes()) <= window
    assert r.c.holes_abandoned > 0 and r.c.reorder_buffer_bytes <= p.reorder_buffer_limit_bytes


# --------------------------------------------------------------- attacker + genuine stream
FORGERIES = st.one_of(
    st.binary(min_size=0, max_size=120),  # garbage
    st.builds(lambda a, e: ("courier", a, e), st.integers(0, 0xFFFF), st.integers(0, 1)),
    st.builds(lambda a, h, f: ("notice", a, h, f), st.integers(0, 0xFFFF), st.integers(1, 255),
              st.integers(0, 0xFFFF)),
    st.builds(lambda c: ("ahead", c), st.integers(0, 1 << 17)),
    st.just(("pause",)),
)


def _forge(kind, f: Fig7, src_is_h1: bool) -> bytes:
    src = f.h1.mac if src_is_h1 else f.h2.mac
    dst = f.h2.mac if src_is_h1 else f.h1.mac
    if isinstance(kind, bytes):
        return kind
    if kind[0] == "courier":
        return courier(src, kind[1], kind[2])
    if kind[0] == "notice":
        return notification(src, kind[1], kind[2], kind[3])
    if kind[0] == "ahead":
        return far_ahead(dst, src, kind[1])
    return wrapped_pause(dst, src)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attacks=st.lists(st.tuples(st.integers(0, 4 * MS), st.booleans(), FORGERIES), max_size=40),
       garbage=st.lists(st.tuples(st.integers(0, 4 * MS), st.binary(min_size=14, max_size=200)), max_size=20),
       seed=st.integers(1, 50), mode=st.sampled_from(["blocking", "nb"]))
def test_an_attacker_on_the_hosts_and_garbage_on_the_link_change_nothing(attacks, garbage, seed, mode):
    lg = LGParams(copies=2, mode=mode).scaled(100)
    f = Fig7(corrupt=1e-2, seed=seed, lg=lg)
    n = 300
    f.stream(n, 800, rate_bps=0.5e9)
    for at, from_h1, kind in attacks:
        host = f.h1 if from_h1 else f.h2
        fr = _forge(kind, f, from_h1)
        if len(fr) >= 14:
            f.net.loop.call_at(at, host.send, fr)
    link = f.net.channel("sw1-sw2", "sw1")
    for at, fr in garbage:  # bytes on the protected link itself, without a valid FCS
        f.net.loop.call_at(at, link.put, fr, at)
    f.run()
    got = f.delivered()
    assert len(got) == len(set(got))  # nothing twice
    if mode == "blocking":
        assert got == sorted(got)  # in order
    # nothing genuine lost: N = 2 copies at 1 % corruption (1e-6 per frame), and the attacker
    # changed nothing the repair depends on
    assert sorted(got) == list(range(n))
    s, r = f.sender.engine, f.receiver.engine
    assert s.c.tx_buffer_bytes <= lg.tx_buffer_limit_bytes and r.c.reorder_buffer_bytes <= lg.reorder_buffer_limit_bytes
    assert len(r.holes()) <= lg.tx_buffer_limit_bytes // MIN_FRAME
    assert f.leaked == 0 and f.sw1.counters()["p-h1"]["pauses_rx"] == 0


def test_struct_layout_of_the_forged_frames():
    """(The helpers build what a receiver switch would send: checked once against the codec.)"""
    c = courier(b"\x02" * 6, 5)
    assert c[12:14] == LG and c[14] >> 6 == 1 and struct.unpack_from("!H", c, 15)[0] == 5
