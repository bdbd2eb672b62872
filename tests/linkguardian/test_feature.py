"""LinkGuardian on two real software switches back to back, in virtual time (LinkGuardian Fig. 7).

h1 - sw1 [p-h1, p-sw2] <== software-FCS link, corruption on sw1 -> sw2 ==> sw2 [p-sw1, p-h2] - h2
on netstack.sim (tests/linkguardian/fig7.py), with the sender feature on sw1/p-sw2 and the
receiver feature on sw2/p-sw1. Streams are UDP with a sequence number; h2 counts them.
"""

from __future__ import annotations

import json
import math
from itertools import pairwise

import pytest

from headers.errors import HeaderError
from headers.fcs import append_fcs, fcs_ok
from headers.linkguardian import DATA_DUMMY as DUMMY_BIT
from headers.linkguardian import DATA_RETX as RETX_BIT
from headers.linkguardian import LGData, LGLeadingAck, LGLossNotification, decode_tag
from headers.pfc import MAX_QUANTA, parse_pfc_frame
from netstack.linkguardian import (
    LGParams,
    LGReceiverFeature,
    LGSenderFeature,
    detach,
    disable,
    enable_receiver,
    enable_sender,
    features,
    status,
)
from netstack.sim.packets import UDP_HEADERS
from netstack.switch import CONTROL_CLASS, IDLE_CLASS, ConfigError, PortConfig, Switch, SwitchConfig

from . import GBPS, MS, US
from .fig7 import Fig7

LG = b"\xab\xcd"


def in_order(seq):
    return all(a < b for a, b in pairwise(seq))


def drop_first_transmission(predicate, copies_too=False):
    """A forward filter dropping data frames whose seq_no satisfies ``predicate``: first
    transmissions only, or every copy with ``copies_too``."""
    dropped = []
    skip = DUMMY_BIT if copies_too else RETX_BIT | DUMMY_BIT

    def f(frame, t):
        if frame[12:14] == LG and not frame[14] & skip and frame[14] >> 6 == 0:
            seq = frame[15] << 8 | frame[16]
            if predicate(seq):
                dropped.append(seq)
                return False
        return True

    f.dropped = dropped
    return f


def seq_of(frame):
    """The stream's sequence number in an (untagged) UDP frame of the streams here."""
    return int.from_bytes(frame[UDP_HEADERS:UDP_HEADERS + 4], "big")


def test_sequenced_stream_arrives_in_order_with_loss_far_below_the_links():
    params = LGParams(copies=2, ack_no_timeout_ns=300 * US)
    b = Fig7(rate_bps=GBPS, delay_ns=2 * US, corrupt=0.05, seed=11, lg=params)
    b.backlog(4000, size=800)
    b.run()
    rep = b.report()
    got = b.delivered()
    assert in_order(got) and rep["duplicates"] == 0 and rep["leaked_lg_frames"] == 0
    assert 0.03 < rep["actual_loss"] < 0.07  # the link corrupts ~5 % of everything it carries
    assert rep["effective_loss"] <= rep["actual_loss"] / 50  # expected ~ 0.05^3 = 1.25e-4
    assert rep["offered_A"] - rep["delivered_D"] == rep["timeouts"]  # every missing frame is counted
    assert rep["fcs_errors"] > 100 and rep["retransmissions"] == 2 * rep["retx_frames"]
    assert rep["holes_not_buffered"] == 0 and rep["egress_queue_drops"] == 0
    assert 0.85 < rep["effective_link_speed"] <= 1.0
    assert b.sender.engine.c.tx_buffer_frames == 0 and b.receiver.engine.c.reorder_buffer_frames == 0


def test_unprotected_baseline_loses_what_the_link_loses():
    b = Fig7(rate_bps=GBPS, delay_ns=2 * US, corrupt=0.05, seed=11, unprotected=True)
    b.backlog(4000, size=800)
    b.run()
    rep = b.report()
    assert rep["protected"] is False and "retransmissions" not in rep
    assert rep["effective_loss"] == pytest.approx(rep["actual_loss"], abs=1e-9)
    assert rep["effective_loss"] > 0.03


@pytest.mark.parametrize("mode", ["blocking", "nb"])
def test_tail_loss_of_a_single_frame_flow_is_recovered_by_dummies_without_timeout(mode):
    timeout = 1 * MS
    lose = drop_first_transmission(lambda seq: True)
    b = Fig7(rate_bps=GBPS, delay_ns=5 * US, lg=LGParams(mode=mode, copies=1, ack_no_timeout_ns=timeout),
             forward_filter=lose)
    b.send(143, 0)  # §4.3: a 143-byte single-packet flow
    b.run()
    st = b.sink
    assert lose.dropped == [0] and st.unique == 1 and st.duplicates == 0
    s, r = b.sender.engine, b.receiver.engine
    # §3.2: the dummy behind the frame exposed the hole; no timer was involved
    assert s.c.dummies_sent == 3 and r.c.dummies_rx >= 1 and r.c.loss_notifications_sent == 1
    assert s.c.retransmissions == 1 and r.c.timeouts == 0
    assert st.last_ns < 5 * 5 * US < timeout  # about three one-way delays, not a timeout
    # the unprotected link just loses it
    base = Fig7(rate_bps=GBPS, delay_ns=5 * US, unprotected=True, forward_filter=lambda f, t: False)
    base.send(143, 0)
    base.run()
    assert base.sink.unique == 0


def test_backpressure_emits_real_pfc_frames_that_sw1_honours():
    size, delay, pause = 1000, 20 * US, 3000
    params = LGParams(copies=1, ack_no_timeout_ns=5 * MS, pause_threshold_bytes=pause, resume_threshold_bytes=1000)
    lose = drop_first_transmission(lambda seq: seq % 40 == 10)
    b = Fig7(rate_bps=GBPS, delay_ns=delay, lg=params, forward_filter=lose)
    pfc = []
    b.sw2.departure_hook = lambda port, cls, f, start, end, rel: pfc.append((start, f)) if cls == CONTROL_CLASS \
        else None
    b.backlog(400, size=size, depth=6)
    b.run()
    rep = b.report()
    assert in_order(b.delivered()) and rep["delivered_D"] == 400 and rep["timeouts"] == 0
    r = b.receiver.engine
    assert len(lose.dropped) == 10 and r.c.pauses_sent >= 5 and r.c.resumes_sent == r.c.pauses_sent
    # real 802.1Qbb frames left sw2 on the link, for every protected class ...
    frames = [parse_pfc_frame(f[:-4]) for _, f in pfc]
    assert all(fcs_ok(f) for _, f in pfc)
    classes = params.data_classes
    pauses = [p for p in frames if p.quanta[p.classes[0]] == MAX_QUANTA]
    resumes = [p for p in frames if p.quanta[p.classes[0]] == 0]
    assert {p.classes[0] for p in pauses} == set(classes) and len(pauses) == len(classes) * r.c.pauses_sent
    assert len(resumes) == len(classes) * r.c.resumes_sent
    assert b.sw2.counters()["p-sw1"]["pauses_tx"] == len(pauses)
    # ... and sw1 honoured them on its protected egress: the normal queue stood still
    c1 = b.sw1.counters()["p-sw2"]
    assert c1["pauses_rx_class"][0] == r.c.pauses_sent and c1["paused_ns"][0] > 0
    assert b.sender.counters()["pauses_rx"] == len(pauses)
    # Algorithm 2 keeps the buffer at pauseThreshold plus what is in flight when the pause
    # lands: a one-way delay of frames each way, the frame on the wire at sw1, and the
    # courier ahead of the pause on sw2's egress
    frame_ns = (size + 5 + 24) * 8
    in_flight = math.ceil((2 * delay + frame_ns + 84 * 8) / frame_ns) + 1
    assert r.c.reorder_buffer_max_bytes <= pause + in_flight * size


def test_without_backpressure_the_reordering_buffer_overflows():
    params = LGParams(copies=1, ack_no_timeout_ns=2 * MS, backpressure=False, reorder_buffer_limit_bytes=6000)
    lose = drop_first_transmission(lambda seq: seq % 40 == 10, copies_too=True)  # only ackNoTimeout helps
    b = Fig7(rate_bps=GBPS, delay_ns=20 * US, lg=params, forward_filter=lose)
    b.backlog(200, size=1000, depth=6)
    b.run()
    rep = b.report()
    assert rep["reorder_drops"] > 0 and rep["pauses_sent"] == 0 and b.sw2.counters()["p-sw1"]["pauses_tx"] == 0
    assert in_order(b.delivered())
    assert rep["offered_A"] - rep["delivered_D"] == rep["reorder_drops"] + rep["timeouts"]


def test_nb_mode_delivers_each_frame_once_without_buffer_or_pauses():
    b = Fig7(rate_bps=GBPS, delay_ns=2 * US, corrupt=0.05, seed=5,
             lg=LGParams(mode="nb", copies=2, ack_no_timeout_ns=300 * US))
    b.backlog(3000, size=800)
    b.run()
    rep = b.report()
    got = b.delivered()
    assert len(got) == len(set(got)) and rep["duplicates"] == 0
    assert rep["out_of_order"] > 0  # retransmissions overtake nothing: they arrive after their successors
    assert rep["reorder_buffer_max_bytes"] == 0 and rep["pauses_sent"] == 0
    assert rep["effective_loss"] <= rep["actual_loss"] / 50
    assert rep["offered_A"] - rep["delivered_D"] == rep["timeouts"]


def test_reverse_traffic_carries_the_leading_ack_and_reaches_h1_untagged():
    b = Fig7(rate_bps=GBPS, delay_ns=2 * US, corrupt=0.02, seed=3, lg=LGParams(copies=2, ack_no_timeout_ns=300 * US))
    b.backlog(1500, size=600, depth=6)
    b.stream(1500, size=300, rate_bps=GBPS // 2, host="h2")
    b.run()
    r, s = b.receiver.engine, b.sender.engine
    assert r.c.lacks_piggybacked > 100 and s.c.lacks_piggybacked_rx == r.c.lacks_piggybacked
    back = b.back
    assert back.unique == 1500 and back.duplicates == 0 and back.reordered == 0
    assert b.leaked == 0 and b.h1.rx_unclaimed == 0 and b.h2.rx_unclaimed == 0
    assert in_order(b.delivered()) and b.report()["effective_loss"] < 0.002
    assert s.c.tx_buffer_frames == 0


def test_frames_on_the_protected_link():
    lose = drop_first_transmission(lambda seq: seq == 3)
    b = Fig7(rate_bps=GBPS, delay_ns=2 * US, lg=LGParams(copies=2, ack_no_timeout_ns=MS), forward_filter=lose)
    wire1, wire2 = [], []
    b.sw1.departure_hook = lambda port, cls, f, s, e, r: wire1.append((port, cls, f)) if port == "p-sw2" else None
    b.sw2.departure_hook = lambda port, cls, f, s, e, r: wire2.append((port, cls, f)) if port == "p-sw1" else None
    for _ in range(6):
        b.send(200, 0)
    b.run()
    assert b.delivered() == list(range(6))
    assert all(fcs_ok(f) for _, _, f in wire1 + wire2)  # software FCS on the protected link
    tags = [(cls, decode_tag(f[:-4], 14), f[:-4]) for _, cls, f in wire1]
    assert all(isinstance(t, LGData) for _, t, _ in tags)
    data = [(t.seq_no, t.retx) for cls, t, _ in tags if cls == 0]
    retx = [(t.seq_no, t.retx) for cls, t, _ in tags if cls == 7]
    dummies = [(t, f) for cls, t, f in tags if cls == IDLE_CLASS]
    assert data == [(i, 0) for i in range(6)]
    assert retx == [(3, 1), (3, 1)]  # N copies on the highest class (§3.4)
    assert len(dummies) == 3 and all(t.dummy and t.seq_no == 6 and t.next_type == 0 and len(f) == 60
                                     for t, f in dummies)
    assert all(t.next_type == 0x0800 for cls, t, _ in tags if cls >= 0)
    back = [(cls, decode_tag(f[:-4], 14)) for _, cls, f in wire2]
    lns = [t for cls, t in back if cls == 7]
    acks = [t for cls, t in back if cls == IDLE_CLASS]
    assert [(n.first_lost_seq, n.hole_size) for n in lns] == [(3, 1)] and isinstance(lns[0], LGLossNotification)
    assert acks and all(isinstance(a, LGLeadingAck) and not a.piggybacked for a in acks)
    assert acks[-1].leading_ack == 5


#: A recirculation port four times as fast as the link (the paper's 25G links with 100G
#: recirculation, §4): at 3 % corruption and 80-100 % load the reordering buffer then drains
#: between losses. At the link's own rate it would not (every loss adds its hole's worth
#: while the port only keeps up with arrivals: tests/linkguardian/test_properties.py), and
#: these tests are about enabling, disabling and stacking, not about that saturation.
FAST_RECIRC = 4 * GBPS


def test_enable_and_disable_on_running_switches():
    link_loss = 0.03
    params = LGParams(copies=2, ack_no_timeout_ns=200 * US, recirc_rate_bps=FAST_RECIRC)
    b = Fig7(rate_bps=GBPS, delay_ns=2 * US, corrupt=link_loss, seed=21, lg=params, protect=False)
    size = 500
    gap = (size + 24) * 8 * 10 // 8  # 80 % of line rate
    count = 6000
    b.stream(count, size, rate_bps=0.8 * GBPS)
    t1, t2, t3 = 5 * MS, 15 * MS, 25 * MS
    b.run(until_ns=t1)
    b.enable(t1)
    b.run(until_ns=t2)
    b.sender.disable(t2)  # sender first ...
    b.run(until_ns=t2 + MS)
    b.receiver.disable(t2 + MS)  # ... then the receiver, once retransmissions are over
    b.run(until_ns=t3)
    b.enable(t3)  # again: the receiver resynchronises on the first tagged frame
    b.run()
    got = set(b.delivered())
    assert b.leaked == 0 and b.sink.duplicates == 0
    window = [i for i in range(count) if t1 + 200 * US < i * gap < t2 - 200 * US]
    final = [i for i in range(count) if i * gap > t3 + 200 * US]
    before = [i for i in range(count) if i * gap < t1 - 200 * US]
    r = b.receiver.engine
    assert sum(i not in got for i in window) <= r.c.timeouts <= 2
    assert sum(i not in got for i in final) <= r.c.timeouts <= 2
    assert sum(i not in got for i in before) > 0.01 * len(before)  # unprotected: the link's loss
    order = b.delivered()
    in_window = set(window)
    assert in_order([i for i in order if i in in_window])
    assert b.sender.engine.c.tx_buffer_frames == 0 and r.c.resyncs == 0 and r.synced


def test_topology_settings_follow_time_and_scale():
    """A topology file's LinkGuardian gets the paper's 100G settings scaled to the link's rate, as
    'netstack lg enable' does (docs/architecture.md "Time and scale")."""
    from netstack.linkguardian.scenarios import stress_topology
    from netstack.sim.network import Network
    from netstack.topo.model import topology_from_dict

    net = Network(topology_from_dict(stress_topology(rate_bps=GBPS, delay_ns=0, mode="blocking")))
    p = features(net.switch("sw1"))[0].params  # the paper's 100G settings, 100x slower
    assert p.ack_no_timeout_ns == 700 * US and p.pause_threshold_bytes == 40_000 and p.time_scale == 100.0
    assert features(net.switch("sw2"))[0].params == p
    assert features(Network(topology_from_dict(stress_topology(rate_bps=GBPS, delay_ns=0, mode=None)))
                    .switch("sw1")) == []


def test_status_api_for_the_daemon():
    sw = Switch(SwitchConfig("s", (PortConfig("a"), PortConfig("b", fcs=True))))
    snd = enable_sender(sw, "b", {"copies": 3, "mode": "nb"}, now_ns=0)
    rcv = enable_receiver(sw, "b", None, now_ns=0)  # both roles on one port (bidirectional, §5)
    assert isinstance(snd, LGSenderFeature) and isinstance(rcv, LGReceiverFeature)
    assert enable_sender(sw, "b") is snd and snd.params.n_copies == 3
    st = status(sw)
    json.dumps(st)
    assert set(st["b"]) == {"sender", "receiver"}
    s = st["b"]["sender"]
    assert s["enabled"] and s["params"]["mode"] == "nb" and s["params"]["n_copies"] == 3
    for key in ("protected_frames", "retransmissions", "loss_notifications_rx", "dummies_sent",
                "tx_buffer_frames", "tx_buffer_max_bytes", "freed", "holes_not_buffered", "pauses_rx"):
        assert key in s["counters"]
    for key in ("delivered", "duplicates", "holes_detected", "loss_notifications_sent", "timeouts",
                "reorder_buffer_bytes", "reorder_buffer_max_bytes", "pauses_sent", "resumes_sent",
                "lacks_explicit", "lacks_piggybacked"):
        assert key in st["b"]["receiver"]["counters"]
    assert disable(sw, "b") == ["sender", "receiver"] and disable(sw, "b") == []
    assert not snd.enabled and snd.attached and len(features(sw, "b")) == 2
    assert detach(sw, "b", "sender") == ["sender"] and not snd.attached and features(sw) == [rcv]
    with pytest.raises(ConfigError):
        enable_sender(sw, "nope")
    with pytest.raises(ConfigError):
        enable_sender(sw, "a", {"copies": 0})
    with pytest.raises(ConfigError):
        disable(sw, "b", role="middle")


def test_frames_released_later_pass_the_features_attached_after_the_receiver():
    class Tap:
        def __init__(self):
            self.seen = []

        def on_ingress(self, frame, now_ns):
            if frame[12:14] == b"\x08\x00":
                self.seen.append(seq_of(frame))
            return frame

    lose = drop_first_transmission(lambda seq: seq % 10 == 3)
    b = Fig7(rate_bps=GBPS, delay_ns=5 * US, lg=LGParams(copies=1, ack_no_timeout_ns=MS), forward_filter=lose)
    tap = Tap()
    b.sw2.attach_feature("p-sw1", tap)  # after the receiver feature
    b.backlog(60, size=300, depth=4)
    b.run()
    assert b.delivered() == list(range(60)) and tap.seen == list(range(60))
    assert b.receiver.c.released_later > 0


def test_malformed_tags_are_counted_drops():
    b = Fig7(rate_bps=GBPS, lg=LGParams())
    b.sw2.receive("p-sw1", append_fcs(bytes(12) + LG + b"\xc0\x00\x01\x08\x00" + bytes(50)), 0)
    b.sw2.receive("p-sw1", append_fcs(bytes(12) + LG + b"\x00\x00"), 0)
    b.sw1.receive("p-sw2", append_fcs(bytes(12) + LG + b"\x80\x00\x01\x00\x00\x00\x00\x00" + bytes(40)), 0)
    assert b.sw2.counters()["p-sw1"]["malformed"] == 2 and b.sw1.counters()["p-sw2"]["malformed"] == 1
    with pytest.raises(HeaderError):
        b.receiver.on_ingress(bytes(12) + LG + b"\x00", 0)


def test_both_directions_protected_with_both_roles_on_each_port():
    # §5: corruption both ways needs a sender and a receiver on each end of the link; tags
    # stack (an ACK piggybacked on protected reverse data, retransmitted with it)
    # Drained at once: at 3 % corruption both ways (pause frames and notifications corrupted
    # too) a recirculating reordering buffer saturates and overflows here, as at the link's
    # own rate in test_properties; this test is about the two roles' stacked tags.
    params = LGParams(copies=2, ack_no_timeout_ns=300 * US, recirc_rate_bps=0)
    b = Fig7(rate_bps=GBPS, delay_ns=2 * US, corrupt=0.03, seed=4, lg=params, reverse_corrupt=True)
    back_receiver = enable_receiver(b.sw1, "p-sw2", params, 0)
    back_sender = enable_sender(b.sw2, "p-sw1", params, 0)
    b.net.service("sw1")
    b.net.service("sw2")
    b.backlog(2000, size=700, depth=6)
    back = b.stream(2000, size=500, rate_bps=GBPS // 2, host="h2")
    b.run()
    fwd, rev = b.sink, b.back
    assert b.leaked == 0 and b.h1.rx_unclaimed == 0 and b.h2.rx_unclaimed == 0
    assert fwd.duplicates == rev.duplicates == 0 and fwd.reordered == rev.reordered == 0
    assert back_sender.engine.c.retransmissions > 0 and b.sender.engine.c.retransmissions > 0
    # a loss notification can now be corrupted too: the hole then times out, and is counted
    assert 2000 - fwd.unique == b.receiver.engine.c.timeouts < 20
    assert back.sent - rev.unique == back_receiver.engine.c.timeouts < 20
    assert b.sw1.counters()["p-sw2"]["malformed"] == b.sw2.counters()["p-sw1"]["malformed"] == 0
