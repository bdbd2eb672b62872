"""L2 forwarding: learning, flooding, static entries, link-local consumption, classification."""

from __future__ import annotations

from headers.inet import mac_bytes
from headers.registry import BROADCAST_MAC

from . import class_tos, mac, make_switch, raw_frame, udp_frame


def ports_of(out):
    return sorted(port for port, _ in out)


def test_unknown_unicast_floods_then_learning_pins_the_port():
    sw = make_switch(4)
    sw.receive("p0", udp_frame(src=1, dst=2), 0)
    assert ports_of(sw.transmit(1)) == ["p1", "p2", "p3"]  # never back out of p0
    sw.receive("p2", udp_frame(src=2, dst=1), 10)  # 1 was learned on p0
    assert ports_of(sw.transmit(11)) == ["p0"]
    sw.receive("p0", udp_frame(src=1, dst=2), 20)  # now 2 is known on p2
    assert ports_of(sw.transmit(21)) == ["p2"]
    assert sw.switch_counters()["fdb_learned"] == 2


def test_broadcast_and_multicast_flood():
    sw = make_switch(3)
    sw.receive("p1", raw_frame(BROADCAST_MAC, mac(5)), 0)
    sw.receive("p1", raw_frame(mac_bytes("01:00:5e:00:00:fb"), mac(5)), 0)
    assert ports_of(sw.transmit(0)) == ["p0", "p0", "p2", "p2"]


def test_static_entries_win_and_are_not_moved_by_learning():
    sw = make_switch(3, static_fdb={"02:00:00:00:00:07": "p2"})
    sw.receive("p0", udp_frame(src=1, dst=7), 0)
    assert ports_of(sw.transmit(0)) == ["p2"]
    # a frame *from* mac(7) arriving on p1 (spoofed or misplaced) does not move the entry
    sw.receive("p1", udp_frame(src=7, dst=1), 1)
    sw.transmit(1)
    sw.receive("p0", udp_frame(src=1, dst=7), 2)
    assert ports_of(sw.transmit(2)) == ["p2"]
    rows = {r["mac"]: r for r in sw.fdb_entries()}
    assert rows["02:00:00:00:00:07"] == {"mac": "02:00:00:00:00:07", "port": "p2", "static": True}


def test_port_static_macs_and_runtime_change():
    sw = make_switch(3, p1={"static_macs": ("02:00:00:00:00:09",)})
    sw.receive("p0", udp_frame(src=1, dst=9), 0)
    assert ports_of(sw.transmit(0)) == ["p1"]
    sw.update_port("p1", static_macs=())
    sw.update_port("p2", static_macs=("02:00:00:00:00:09",))
    sw.receive("p0", udp_frame(src=1, dst=9), 1)
    assert ports_of(sw.transmit(1)) == ["p2"]


def test_destination_behind_ingress_port_is_filtered():
    sw = make_switch(2)
    sw.receive("p0", udp_frame(src=1, dst=2), 0)
    assert ports_of(sw.transmit(0)) == ["p1"]  # flooded: 2 is unknown
    sw.receive("p0", udp_frame(src=2, dst=1), 1)  # 1 is on p0: filtered; 2 now learned on p0
    sw.receive("p0", udp_frame(src=1, dst=2), 2)  # filtered as well
    assert sw.transmit(2) == []
    assert sw.counters()["p0"]["filtered"] == 2


def test_link_local_group_addresses_are_consumed_not_forwarded():
    sw = make_switch(3)
    for last in range(16):  # 01:80:C2:00:00:00 .. 0F (STP, PAUSE/PFC, LACP, LLDP, ...)
        sw.receive("p0", raw_frame(bytes.fromhex("0180c20000") + bytes([last]), mac(1), 0x88CC), last)
    assert sw.transmit(100) == []
    assert sw.counters()["p0"]["mac_control_rx"] == 16
    sw.receive("p0", raw_frame(bytes.fromhex("0180c2000010"), mac(1)), 200)  # outside the block
    assert len(sw.transmit(200)) == 2


def test_learning_table_is_bounded():
    sw = make_switch(2)
    sw.fdb.max_learned = 3
    for i in range(10):
        sw.receive("p0", udp_frame(src=100 + i, dst=2), i)
    assert sw.switch_counters()["fdb_learned"] == 3
    assert sw.switch_counters()["fdb_full_events"] == 7


def test_classification_precedence_pcp_and_default():
    sw = make_switch(2, p0={"default_class": 2, "class_map": (0, 1, 2, 3, 4, 5, 6, 6)})
    sw.receive("p0", udp_frame(tos=class_tos(5)), 0)
    sw.receive("p0", udp_frame(tos=class_tos(7)), 0)  # precedence 7 mapped to class 6
    sw.receive("p0", raw_frame(mac(2), mac(1), 0x88B5), 0)  # not IP: default class
    vlan = mac(2) + mac(1) + bytes.fromhex("8100") + bytes([3 << 5, 5]) + bytes.fromhex("0800") + bytes(46)
    sw.receive("p0", vlan, 0)  # PCP 3
    sw.transmit(10**6)
    assert sw.counters()["p1"]["tx_frames_class"] == [0, 0, 1, 1, 0, 1, 1, 0]


def test_oversize_frames_are_dropped_and_counted():
    sw = make_switch(2, mtu=1500)
    sw.receive("p0", udp_frame(size=1518), 0)
    sw.receive("p0", udp_frame(size=1519), 0)
    assert len(sw.transmit(0)) == 1
    assert sw.counters()["p1"]["mtu_drops"] == 1


def test_unknown_port_is_counted_not_raised():
    sw = make_switch(2)
    sw.receive("nope", udp_frame(), 0)
    assert sw.switch_counters()["unknown_port"] == 1
