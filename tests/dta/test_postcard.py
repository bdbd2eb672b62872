"""Postcarding (issue 33): the slot (codec, Scapy, layout), the translator's per-flow cache (a whole
path in one WRITE, the flush, stragglers, evictions, the window), the query, and properties."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.layers.l2 import Ether

import headers.layers.roce as L
from headers.dta import DTABase, Postcarder, PostcardSlot, encode_report
from headers.errors import HeaderError
from headers.layers.dta import DTAPostcarder, DTAPostcardSlot
from headers.roce import parse_roce_frame
from netstack.dta import CollectorMemory, DTATranslator, TranslatorConfig
from netstack.dta.keywrite import key_checksum, slot_index
from netstack.dta.postcard import PostcardLayout, slot_bytes_for
from netstack.dta.reporter import postcard_payload

from . import MS, TRANSLATOR_IP, TRANSLATOR_MAC, Rig

U32 = st.integers(0, 0xFFFFFFFF)


def pc_rig(hops=5, slots=256, **kw):
    return Rig(lambda m: m.add_postcard(slots=slots, hops=hops), **kw)


def post(rig, key, hop, data, now=0):
    return rig.send(rig.reporter.postcard(key, hop, data), now)


# ---------------------------------------------------------------------------------- the slot
def test_slot_sizes_follow_the_public_32_byte_slot():
    assert slot_bytes_for(5) == 32 and slot_bytes_for(6) == 32 and slot_bytes_for(7) == 64 and slot_bytes_for(1) == 16
    lay = PostcardLayout(1024)
    assert lay.hops == 5 and lay.slot_bytes == 32 and lay.write_bytes == 28 and lay.size == 32 * 1024
    assert PostcardLayout.from_dict(lay.to_dict()) == lay
    for bad in ({"slots": 1000}, {"slots": 8, "hops": 0}, {"slots": 8, "hops": 33}, {"slots": 8, "slot_bytes": 16},
                {"hops": 5}, {"slots": 8, "slot_hash": "md5"}):
        with pytest.raises(ValueError):
            PostcardLayout.from_dict(bad)


def test_slot_encodes_checksum_present_mask_and_hops():
    lay = PostcardLayout(64)
    raw = lay.encode(42, {1: 7, 3: 9})
    slot = PostcardSlot.from_bytes(raw)
    assert slot.checksum == key_checksum(42) and slot.present == 0b101 and slot.hops == (7, 0, 9, 0, 0)
    assert lay.decode(42, raw) == {1: 7, 3: 9}
    assert lay.decode(43, raw) is None  # another flow's slot
    assert lay.decode(42, bytes(28)) is None  # never written
    scapy = DTAPostcardSlot(raw)
    assert (scapy.checksum, scapy.present, scapy.hops) == (slot.checksum, slot.present, slot.hops)
    assert bytes(DTAPostcardSlot(checksum=slot.checksum, present=0b101, hops=[7, 0, 9, 0, 0])) == raw


@settings(max_examples=200)
@given(st.binary(max_size=80), st.one_of(st.none(), st.integers(-2, 40)), st.integers(0, 8))
def test_the_slot_decoder_raises_only_header_errors(data, hops, offset):
    try:
        slot = PostcardSlot.from_bytes(data, offset, None, hops)
    except HeaderError:
        return
    assert slot.to_bytes() == data[offset:offset + slot.size()]
    assert DTAPostcardSlot(slot.to_bytes()).hops == slot.hops  # codec and Scapy agree
    assert set(slot.reported()) <= set(range(1, len(slot.hops) + 1))
    lay = PostcardLayout(8, len(slot.hops))
    got = lay.decode(1, slot.to_bytes())  # a query over arbitrary memory: a dict or None, never an error
    assert got is None or got == slot.reported()


@given(U32, st.integers(0, 0xFF), U32)
def test_postcard_reports_dissect_in_scapy(key, hop, data):
    prim = Postcarder(key, hop, data)
    payload = postcard_payload(key, hop, data)
    assert payload == encode_report(DTABase.of(prim), prim)
    rig = pc_rig()
    layer = Ether(rig.reporter.frame(payload))[DTAPostcarder]
    assert (layer.key, layer.hop, layer.data) == (key, hop, data)


# ---------------------------------------------------------------------------------- the translator
def test_a_whole_path_goes_out_in_one_write_at_the_flows_slot():
    rig = pc_rig()
    for hop in range(1, 6):
        post(rig, 0xBEEF, hop, 100 + hop)
    assert len(rig.emitted) == 1 and rig.tr.c.postcard_complete == 1 and rig.tr.next_deadline() is None
    rf = parse_roce_frame(rig.emitted[0])
    region = rig.mem.region("postcard")
    assert rf.reth.va == region.base_va + slot_index(0xBEEF, 0, 256) * 32 and rf.reth.dma_len == 28
    pkt = Ether(rig.emitted[0])  # the WRITE's payload dissects as the slot
    slot = DTAPostcardSlot(bytes(pkt[L.RETH].payload)[:28])
    assert slot.hops == [101, 102, 103, 104, 105] and slot.present == 0b11111
    assert rig.q.postcard_get(0xBEEF) == {h: 100 + h for h in range(1, 6)}
    assert rig.q.postcard_get(0xBEF0) is None


def test_a_short_path_is_flushed_after_the_timeout_and_a_straggler_rewrites_the_whole_slot():
    rig = pc_rig(postcard_flush_ns=5 * MS)
    post(rig, 7, 1, 11, now=0)
    post(rig, 7, 2, 22, now=MS)
    assert rig.emitted == [] and rig.tr.next_deadline() == 5 * MS  # from the oldest unwritten postcard
    rig.timer(5 * MS - 1)
    assert rig.emitted == []
    rig.timer(5 * MS)
    assert rig.q.postcard_get(7) == {1: 11, 2: 22} and rig.tr.c.postcard_flushes == 1
    post(rig, 7, 4, 44, now=6 * MS)  # late: the line kept the flow, the next WRITE has every hop
    rig.timer(11 * MS)
    assert rig.q.postcard_get(7) == {1: 11, 2: 22, 4: 44} and len(rig.emitted) == 2
    post(rig, 7, 2, 23, now=12 * MS)
    post(rig, 7, 2, 24, now=12 * MS)  # the same hop twice before a WRITE: the newest wins
    rig.timer(17 * MS)
    assert rig.q.postcard_get(7) == {1: 11, 2: 24, 4: 44} and rig.tr.c.postcard_replaced == 1


def test_bad_hops_no_store_and_the_grace_period_refuse_postcards():
    rig = pc_rig(hops=2)
    post(rig, 1, 0, 5)
    post(rig, 1, 3, 5)
    assert rig.tr.c.postcard_bad_hop == 2 and rig.tr.c.postcards == 0 and rig.tr.next_deadline() is None
    post(rig, 1, 1, 5)
    post(rig, 1, 2, 6)  # hops = 2: this path is whole
    assert rig.q.postcard_get(1) == {1: 5, 2: 6}
    none = Rig(lambda m: m.add_append_list(1, entries=16))
    post(none, 1, 1, 5)
    assert none.tr.c.no_store == 1 and none.emitted == []
    grace = pc_rig(grace_reports=3)
    grace.tr._start_grace()  # as after a PSN-sequence NAK (§5.3)
    post(grace, 9, 1, 1)
    assert grace.tr.c.grace_dropped == 1 and grace.tr.c.postcards == 0


def test_an_evicted_flow_is_written_to_its_own_slot_first():
    rig = pc_rig(postcard_cache=1)  # one cache line: every other flow evicts
    post(rig, 100, 1, 1)
    post(rig, 200, 1, 2)
    post(rig, 200, 2, 3)
    assert rig.tr.c.postcard_evictions == 1 and rig.q.postcard_get(100) == {1: 1}
    rig.timer(10 * MS)
    assert rig.q.postcard_get(200) == {1: 2, 2: 3}
    post(rig, 100, 2, 4)  # evicts 200, whose postcards were all written: nothing to write
    assert len(rig.emitted) == 2 and rig.tr.c.postcard_evictions == 2


def test_a_full_window_holds_the_write_until_the_window_opens():
    rig = pc_rig(window=1, window_timeout_ns=50 * MS, postcard_flush_ns=MS)
    lost: list[bytes] = []
    for hop in range(1, 6):  # the WRITE goes out; its ACK (AckReq: the window fills) is lost
        post(rig, 5, hop, hop) if hop < 5 else lost.extend(rig.tr.on_report(
            rig.reporter.frame(rig.reporter.postcard(5, hop, hop)), 0))
    assert len(lost) == 1 and rig.tr.requester.window_full(rig.tr.qps["postcard"])
    for hop in range(1, 6):
        post(rig, 6, hop, 10 * hop)  # complete, but no room: it waits for the window
    assert rig.tr.c.postcard_complete == 1 and rig.tr.next_deadline() == 50 * MS  # flow 5's only
    rig.deliver(lost, 0)  # the first WRITE reaches the collector late; its ACK opens the window
    rig.timer(MS)
    assert rig.q.postcard_get(5) == {h: h for h in range(1, 6)}
    assert rig.q.postcard_get(6) == {h: 10 * h for h in range(1, 6)} and rig.tr.c.postcard_flushes == 1


postcards = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 6), U32, st.integers(0, 3 * MS)), max_size=40)


@settings(max_examples=60, deadline=None)
@given(postcards, st.sampled_from([1, 4, 4096]), st.sampled_from([None, 0, 2 * MS]))
def test_every_flow_reads_back_its_latest_value_of_every_hop(cards, cache, flush_ns):
    """Postcards of 8 flows in any order and timing, with a tiny cache or a large one: once the
    flushes are due, each flow's slot holds the latest value of every hop that reported, unless
    another flow of the run shares its slot. With a tiny cache a flow that comes back after an
    eviction starts a new line, whose WRITE holds only the hops it had since (each its latest
    value); without a flush a flow still cached may not be written yet."""
    keys = [0x1000 + 7919 * k for k in range(8)]
    rig = pc_rig(hops=5, slots=64, postcard_cache=cache, postcard_flush_ns=flush_ns)
    latest: dict[int, dict[int, int]] = {}
    now = 0
    for k, hop, data, dt in cards:
        now += dt
        post(rig, keys[k], hop, data, now)
        if 1 <= hop <= 5:
            latest.setdefault(keys[k], {})[hop] = data
    rig.timer(now + 10 * MS)
    c = rig.tr.c
    assert c.internal_errors == 0 and c.postcards + c.postcard_bad_hop == c.reports == len(cards)
    assert c.postcard_writes == len(rig.emitted) <= c.postcards
    assert all(parse_roce_frame(f).reth.dma_len == 28 for f in rig.emitted)
    slots = [slot_index(k, 0, 64) for k in latest]
    lines = [slot_index(k, 1, cache) for k in latest]
    for key, hops in latest.items():
        if slots.count(slot_index(key, 0, 64)) > 1:
            continue  # a slot collision: the newer WRITE owns the slot (§6.1's trade-off, as Key-Write)
        got = rig.q.postcard_get(key)
        if flush_ns is None:
            assert got is None or set(got.items()) <= set(hops.items())
        elif lines.count(slot_index(key, 1, cache)) == 1:  # never evicted: every hop
            assert got == hops
        else:
            assert got is not None and set(got.items()) <= set(hops.items())


def test_the_translator_refuses_a_second_store_and_a_bad_cache_size():
    mem = CollectorMemory("t", directory=None)
    mem.add_postcard(slots=16)
    mem.add_postcard(slots=16, name="postcard-2")
    from netstack.dta import RoceResponder

    from . import COLLECTOR_IP, COLLECTOR_MAC
    info = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP).connect_info()
    with pytest.raises(ValueError, match="second Postcarding"):
        DTATranslator(TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP))
    with pytest.raises(ValueError, match="postcard_cache"):
        TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP, postcard_cache=1000)


# ---------------------------------------------------------------------------------- CLI and tool
def test_cli_and_tool_take_postcards():
    from netstack.commands import dta as cmd
    from netstack.dta import control, live

    parser = argparse.ArgumentParser()
    cmd.register(parser.add_subparsers())
    a = parser.parse_args(["dta", "query", "postcard", "77", "--json"])
    assert a.what == "postcard" and a.flow == 77 and a.json
    a = parser.parse_args(["dta", "report", "postcard", "77", "2", "9", "--from", "h2", "--count", "3"])
    assert (a.kind, a.flow, a.hop, a.value, a.src, a.count) == ("postcard", 77, 2, 9, "h2", 3)
    info = {"regions": [{"name": "postcard", "layout": PostcardLayout(16).to_dict()}]}
    assert control.report_argv("postcard", vars(a), info, {}, "c1") == ["--key", "77", "--hop", "2", "--value", "9",
                                                                         "--count", "3"]
    with pytest.raises(control.DTAError, match=r"hops 1\.\.5"):
        control.report_argv("postcard", {**vars(a), "hop": 6}, info, {}, "c1")
    with pytest.raises(control.DTAError, match="no Postcarding store"):
        control.report_argv("postcard", vars(a), {"regions": []}, {}, "c1")
    t = live.report_parser().parse_args(["postcard", "--dst", "10.0.0.100", "--key", "77", "--hop", "2",
                                         "--value", "9", "--count", "2"])
    assert live.check_report_args(t) is None
    from netstack.dta import Reporter

    assert live._payloads(t, Reporter()) == [postcard_payload(77, 2, 9), postcard_payload(78, 2, 10, seqnum=1)]


# ---------------------------------------------------------------------------------- the switches' postcards
H1, H2 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
H1_MAC, H2_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")


def udp_frame(sport=6666, dport=7777, src=H1, dst=H2):
    from headers.inet import build_udp_frame

    return build_udp_frame(H1_MAC, H2_MAC, src, dst, sport, dport, b"x" * 32)


def hop_reporter(hop=1, interval_ns=10 * MS):
    from netstack.dta.hopreport import HopReporter, HopReporterConfig

    from . import COLLECTOR_IP, COLLECTOR_MAC
    return HopReporter(HopReporterConfig(hop, 0x5701 + hop, COLLECTOR_IP, COLLECTOR_MAC, bytes.fromhex("02000000ff01"),
                                         TRANSLATOR_IP, interval_ns))


def test_a_switch_postcards_each_flow_once_per_interval_and_never_dta_traffic():
    from headers.dta import parse_report_frame
    from netstack.dta.hopreport import flow_key, flow_key_of

    rep = hop_reporter(hop=2)
    frame = udp_frame()
    card = rep.on_frame(frame, 0)
    udp, base, prim = parse_report_frame(card)
    assert prim == Postcarder(flow_key_of(H1, H2, 17, 6666, 7777), 2, 0x5703) == Postcarder(flow_key(frame), 2, 0x5703)
    assert udp.udp.dport == 40040 and udp.ip.dst == bytes([10, 0, 9, 1]) and not base.retransmittable
    assert rep.on_frame(frame, 10 * MS - 1) is None and rep.on_frame(frame, 10 * MS) is not None
    assert rep.on_frame(udp_frame(sport=6667), 1) is not None  # another flow
    assert rep.on_frame(card, 1) is None  # a postcard (or any report) is no flow
    assert rep.on_frame(udp_frame(dport=4791), 1) is None and rep.on_frame(udp_frame(sport=4791), 1) is None
    assert rep.on_frame(udp_frame(dport=40044), 1) is None and rep.on_frame(b"\x00" * 60, 1) is None
    c = rep.counters()
    assert (c["postcards"], c["suppressed"], c["not_flows"], c["hop"]) == (3, 1, 5, 2)


@settings(max_examples=300)
@given(st.binary(max_size=80), st.integers(0, 1 << 40))
def test_the_switch_side_parser_takes_any_bytes(data, now):
    from netstack.dta.hopreport import flow_key

    rep = hop_reporter()
    key = flow_key(data)
    card = rep.on_frame(data, now)
    assert (card is None) == (key is None) and (key is None or 0 <= key <= 0xFFFFFFFF)


def test_flows_are_named_by_key_or_5_tuple():
    from netstack.dta.hopreport import flow_key_of, parse_flow

    assert parse_flow("0x5eed") == 0x5EED and parse_flow("12") == 12
    assert parse_flow("10.0.0.1:6666>10.0.0.2:7777/udp") == flow_key_of(H1, H2, 17, 6666, 7777)
    assert parse_flow("10.0.0.1>10.0.0.2/icmp") == parse_flow("10.0.0.1:0>10.0.0.2:0/1") == flow_key_of(H1, H2, 1)
    for bad in ("0x1ffffffff", "10.0.0.1>10.0.0.2/quic", "10.0.0.1:70000>10.0.0.2/udp", "a>b/udp", "x"):
        with pytest.raises(ValueError):
            parse_flow(bad)


def test_two_switches_postcard_a_flow_that_crosses_them_into_one_slot():
    """h1 - sw1 - tor(translator) - collector: the flow h1 -> h2 crosses sw1 (hop 1) and the ToR
    (hop 2); each postcards it, the ToR's translator gathers both into the flow's slot."""
    import random

    from netstack.dta import CollectorQuery, HopReporterFeature, RoceResponder, TranslatorFeature
    from netstack.dta.hopreport import flow_key_of
    from netstack.switch import PortConfig, Switch, SwitchConfig

    from . import COLLECTOR_IP, COLLECTOR_MAC, make_memory
    mem = make_memory(lambda m: m.add_postcard(slots=256))
    nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(3))
    sw1 = Switch(SwitchConfig("sw1", (PortConfig("p-h1"), PortConfig("p-up")), {}))
    tor = Switch(SwitchConfig("tor", (PortConfig("to-collector"), PortConfig("p-sw1"), PortConfig("p-h2")), {}))
    tr = DTATranslator(TranslatorConfig(nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP, postcard_flush_ns=2 * MS))
    TranslatorFeature(tor, "to-collector", tr)
    nic.bind(TRANSLATOR_MAC, TRANSLATOR_IP)
    HopReporterFeature(tor, hop_reporter(hop=2))  # enabled after the translator: order does not matter
    feature = HopReporterFeature(sw1, hop_reporter(hop=1), uplink="p-up")
    for i in range(3):
        sw1.receive("p-h1", udp_frame(), i * MS)
    to_h2 = []
    for now in (MS, 2 * MS, 3 * MS, 4 * MS, 5 * MS):
        for _, f in sw1.transmit(now):
            tor.receive("p-sw1", f, now)
        for port, f in tor.transmit(now):
            if port == "to-collector" and is_roce(f):
                for resp in nic.receive(f, now):
                    tor.receive("to-collector", resp, now)
            elif port == "p-h2":
                to_h2.append(f)
    key = flow_key_of(H1, H2, 17, 6666, 7777)
    assert CollectorQuery(mem).postcard_get(key) == {1: 0x5702, 2: 0x5703}
    assert len(to_h2) == 3 and all(f[:6] == H2_MAC for f in to_h2)  # the flow itself went on (flooded)
    c = feature.counters()  # three frames of the flow, one postcard (queued on the uplink)
    assert (c["frames"], c["postcards"], c["suppressed"]) == (3, 1, 2) and tr.c.postcards == 2
    assert tr.c.postcard_writes == 1  # after the 2 ms flush: the path is 2 of 5 hops long
    # the other direction: a frame from the uplink's side still postcards out of the uplink (a
    # switched postcard would have been dropped, going back out of the port it came in on)
    sw1.receive("p-up", udp_frame(src=H2, dst=H1), 6 * MS)
    out = sw1.transmit(7 * MS)
    assert [p for p, f in out if f[12:14] == b"\x08\x00" and f[36:38] == b"\x9c\x68"] == ["p-up"]  # UDP 40040
    feature.detach()
    sw1.receive("p-h1", udp_frame(sport=1), 10 * MS)
    assert feature.counters()["frames"] == 4


def is_roce(frame):
    from netstack.dta import is_roce_frame

    return is_roce_frame(frame)
