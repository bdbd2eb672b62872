"""The translator inside the software switch (TranslatorFeature): the collector's ToR."""

from __future__ import annotations

import random

from headers.dta import parse_nack_frame
from headers.inet import build_udp_frame
from netstack.dta import DTATranslator, Reporter, RoceResponder, TranslatorConfig, TranslatorFeature
from netstack.switch import PortConfig, Switch, SwitchConfig

from . import COLLECTOR_IP, COLLECTOR_MAC, MS, REPORTER_IP, REPORTER_MAC, TRANSLATOR_IP, make_memory

SWITCH_MAC = bytes.fromhex("02000000aa01")
OTHER_MAC = bytes.fromhex("020000000202")


class Tor:
    """A ToR switch with the translator feature, and the collector NIC behind its collector port."""

    def __init__(self, mem, nic, sw, tr, feature):
        self.mem, self.nic, self.sw, self.tr, self.feature = mem, nic, sw, tr, feature


def build(grace_reports=0, fcs=False) -> Tor:
    mem = make_memory(lambda m: (m.add_keywrite(slots=1 << 10), m.add_append_list(1, entries=64, batch=4)))
    nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(3))
    sw = Switch(SwitchConfig("tor", (PortConfig("to-collector", fcs=fcs), PortConfig("p1", fcs=fcs),
                                     PortConfig("p2", fcs=fcs)), {}))
    tr = DTATranslator(TranslatorConfig(nic.connect_info(), SWITCH_MAC, TRANSLATOR_IP, grace_reports=grace_reports,
                                        append_flush_ns=2 * MS))
    feature = TranslatorFeature(sw, "to-collector", tr, cls=3)
    nic.bind(SWITCH_MAC, TRANSLATOR_IP)
    return Tor(mem, nic, sw, tr, feature)


def pump(sw, nic, now):
    """Run the switch to ``now``: collector-bound frames go through the NIC, whose responses come
    back in on the collector port. Returns the frames that left on the other ports."""
    others = []
    for _ in range(10):
        out = sw.transmit(now)
        if not out:
            break
        for port, frame in out:
            if port == "to-collector":
                for resp in nic.receive(frame, now):
                    sw.receive("to-collector", resp, now)
            else:
                others.append((port, frame))
    return others


def test_reports_become_rdma_on_the_collector_port_and_responses_are_consumed():
    t = build()
    mem, nic, sw, tr = t.mem, t.nic, t.sw, t.tr
    rep = Reporter(REPORTER_MAC, SWITCH_MAC, REPORTER_IP, COLLECTOR_IP)
    from netstack.dta import CollectorQuery

    sw.receive("p1", rep.frame(rep.key_write(5, 55, 2)), 0)
    for v in range(4):
        sw.receive("p2", rep.frame(rep.append(1, v)), 0)
    assert pump(sw, nic, 10) == []  # nothing leaked to the reporter ports
    q = CollectorQuery(mem)
    assert q.keywrite_get(5) == (55,) and q.append_read(1) == [0, 1, 2, 3]
    c = sw.counters()
    assert c["p1"]["feature_consumed"] == 1 and c["p2"]["feature_consumed"] == 4
    assert tr.c.writes == 3 and nic.counters()["qps"]["keywrite"]["writes"] == 2
    assert tr.c.responses == 0  # AckReq is never set (ack_every=0): the collector stays silent


def test_collector_responses_are_consumed_on_the_collector_port():
    t = build(grace_reports=2)
    nic, sw, tr = t.nic, t.sw, t.tr
    rep = Reporter(REPORTER_MAC, SWITCH_MAC, REPORTER_IP, COLLECTOR_IP)
    sw.receive("p1", rep.frame(rep.key_write(1, 1, 1)), 0)
    out = sw.transmit(0)
    assert [p for p, _ in out] == ["to-collector"]
    # lose that WRITE; the next one draws a PSN-sequence NAK, which must not be forwarded
    sw.receive("p1", rep.frame(rep.key_write(2, 2, 1)), 1)
    ((_, frame),) = sw.transmit(1)
    (nak,) = nic.receive(frame, 1)
    sw.receive("to-collector", nak, 2)
    assert pump(sw, nic, 3) == [] and tr.c.resyncs == 1 and tr.in_grace
    assert sw.counters()["to-collector"]["feature_consumed"] == 1


def test_nacks_go_back_out_of_the_reporter_port():
    t = build()
    mem, nic, sw, tr = t.mem, t.nic, t.sw, t.tr
    rep = Reporter(REPORTER_MAC, SWITCH_MAC, REPORTER_IP, COLLECTOR_IP, retransmittable=True)
    a, b, c = rep.append(1, 1), rep.append(1, 2), rep.append(1, 3)
    sw.receive("p2", rep.frame(a), 0)
    sw.receive("p2", rep.frame(c), 0)  # b lost
    others = pump(sw, nic, 1)
    assert [p for p, _ in others] == ["p2"]
    udp, nack = parse_nack_frame(others[0][1])
    assert nack.seqnum == 0 and udp.ip.dst == REPORTER_IP and udp.eth.dst == REPORTER_MAC
    for p in rep.on_nack(others[0][1]):
        sw.receive("p2", rep.frame(p), 2)
    pump(sw, nic, 3)
    from netstack.dta import CollectorQuery

    assert rep.on_nack(others[0][1]) == [b, c]
    sw.receive("p2", rep.frame(rep.append(1, 4)), 4)
    pump(sw, nic, 5)
    assert CollectorQuery(mem).append_read(1) == [1, 2, 3, 4] and tr.c.seq_nacks == 1


def test_idle_append_batches_are_flushed_by_the_switch_timer():
    t = build()
    mem, nic, sw = t.mem, t.nic, t.sw
    rep = Reporter(REPORTER_MAC, SWITCH_MAC, REPORTER_IP, COLLECTOR_IP)
    sw.receive("p1", rep.frame(rep.append(1, 42)), 0)
    pump(sw, nic, 1)
    assert sw.next_deadline() == 2 * MS
    pump(sw, nic, 2 * MS)
    from netstack.dta import CollectorQuery

    assert CollectorQuery(mem).append_read(1) == [42]


def test_other_traffic_is_forwarded_untouched():
    t = build(fcs=True)
    sw, tr = t.sw, t.tr
    from headers.fcs import append_fcs

    plain = build_udp_frame(REPORTER_MAC, OTHER_MAC, REPORTER_IP, bytes([10, 0, 2, 2]), 1000, 40040, b"x" * 20)
    rocelike = build_udp_frame(COLLECTOR_MAC, OTHER_MAC, COLLECTOR_IP, bytes([10, 0, 2, 2]), 1000, 4791, b"y" * 20)
    sw.receive("p1", append_fcs(plain), 0)  # port 40040 but not to the collector: a normal frame
    sw.receive("to-collector", append_fcs(rocelike), 0)  # RoCE-looking, but not for the translator
    out = sw.transmit(0)
    assert sorted(p for p, _ in out) == ["p1", "p2", "p2", "to-collector"]  # flooded (unknown unicast)
    assert tr.c.reports == 0 and tr.c.responses == 0


def test_detach_removes_every_hook():
    t = build()
    sw, tr = t.sw, t.tr
    t.feature.detach()
    rep = Reporter(REPORTER_MAC, SWITCH_MAC, REPORTER_IP, COLLECTOR_IP)
    sw.receive("p1", rep.frame(rep.key_write(5, 55, 2)), 0)
    out = sw.transmit(0)
    assert tr.c.reports == 0 and sorted(p for p, _ in out) == ["p2", "to-collector"]  # flooded as usual
