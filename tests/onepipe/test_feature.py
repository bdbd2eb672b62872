"""1Pipe's barrier aggregation inside real software switches (netstack.onepipe.feature), and the
topology rules it runs on (netstack.onepipe.topology): 1Pipe §3-§6.

    h1 (2 processes) --+
                       tor1 --- spine1 --- tor2 --- h3
    h2 ----------------+

Three in-process :class:`netstack.switch.Switch` objects wired by :class:`Net`, directions from
the topology, frames built byte for byte as hosts send them.
"""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headers.inet import build_udp_frame, internet_checksum, parse_udp_frame
from headers.onepipe import OnePipeFlag, OnePipeHeader, OnePipeOpcode, ts_from_ns
from headers.pfc import build_pfc_frame
from netstack.errors import ConfigError
from netstack.onepipe import feature as op
from netstack.onepipe import topology as optopo
from netstack.onepipe.params import OnePipeParams
from netstack.switch import PortConfig, Switch, SwitchConfig
from netstack.topo.model import TopologyError, topology_from_dict

MS = 1_000_000
T = MS  # T_beacon
PARAMS = OnePipeParams(t_beacon_ns=T, timeout_beacons=10, ack_timeout_ns=100 * T)
DATA, ACK, BEACON, PREPARE = OnePipeOpcode.DATA, OnePipeOpcode.ACK, OnePipeOpcode.BEACON, OnePipeOpcode.PREPARE
BCAST = b"\xff" * 6


def mac(i: int) -> bytes:
    return bytes([2, 0, 10, 0, 0, i])


def ip(i: int) -> bytes:
    return bytes([10, 0, 0, i])


def topo_dict(extra_links=(), extra_nodes=()):
    nodes = [{"name": f"h{i}", "kind": "host", "ip": f"10.0.0.{i}/24"} for i in (1, 2, 3)]
    nodes += [{"name": n, "kind": "switch"} for n in ("tor1", "tor2", "spine1")]
    links = [{"name": "h1-tor1", "a": "h1", "b": "tor1"}, {"name": "h2-tor1", "a": "h2", "b": "tor1"},
             {"name": "h3-tor2", "a": "h3", "b": "tor2"}, {"name": "tor1-spine1", "a": "tor1", "b": "spine1"},
             {"name": "tor2-spine1", "a": "tor2", "b": "spine1"}]
    return {"topology": {"name": "t", "prefix": "t"}, "nodes": nodes + list(extra_nodes),
            "links": links + list(extra_links)}


TOPO = topology_from_dict(topo_dict())


def op_frame(src: int, dst: int, sport: int, dport: int, opcode: int, ts: int, barrier: int | None = None,
             psn: int = 0, payload: bytes = b"", tos: int = 0, dst_mac: bytes | None = None,
             dst_ip: bytes | None = None, commit: int = 0) -> bytes:
    """``commit``: the commit barrier (absolute ns; 0: none, as a best-effort process sends)."""
    hdr = OnePipeHeader(ts_from_ns(ts), ts_from_ns(ts if barrier is None else barrier), ts_from_ns(commit), psn,
                        opcode, OnePipeFlag.EOM if opcode == DATA else 0).to_bytes()
    return build_udp_frame(mac(src), mac(dst) if dst_mac is None else dst_mac, ip(src),
                           ip(dst) if dst_ip is None else dst_ip, sport, dport, hdr + payload, tos=tos)


def host_beacon(src: int, sport: int, barrier: int, commit: int = 0) -> bytes:
    return op_frame(src, 0, sport, 40100, BEACON, barrier, dst_mac=BCAST, dst_ip=ip(255), commit=commit)


def header(frame: bytes) -> OnePipeHeader:
    return OnePipeHeader.from_bytes(frame, parse_udp_frame(frame).payload_offset)


def udp_checksum_ok(frame: bytes) -> bool:
    u = parse_udp_frame(frame)
    seg = frame[34:34 + u.udp.length]
    if u.udp.checksum == 0:
        return True
    return internet_checksum(frame[26:34] + struct.pack("!BBH", 0, 17, len(seg)) + seg) == 0


class Net:
    """tor1, spine1, tor2 wired together; what reaches the hosts lands in ``inbox[host]``."""

    LINKS = {("tor1", "p-spine1"): ("spine1", "p-tor1"), ("spine1", "p-tor1"): ("tor1", "p-spine1"),
             ("tor2", "p-spine1"): ("spine1", "p-tor2"), ("spine1", "p-tor2"): ("tor2", "p-spine1")}
    HOSTS = {("tor1", "p-h1"): "h1", ("tor1", "p-h2"): "h2", ("tor2", "p-h3"): "h3"}

    def __init__(self, enable: bool = True, rate: dict | None = None, controller: bool = False) -> None:
        rate = rate or {}
        fdb = {"tor1": {mac(1): "p-h1", mac(2): "p-h2", mac(3): "p-spine1"},
               "spine1": {mac(1): "p-tor1", mac(2): "p-tor1", mac(3): "p-tor2"},
               "tor2": {mac(3): "p-h3", mac(1): "p-spine1", mac(2): "p-spine1"}}
        self.sw: dict[str, Switch] = {}
        for name in ("tor1", "spine1", "tor2"):
            ports = [PortConfig(e.ifname, role="fabric" if TOPO.node(lk.peer(name).node).kind == "switch" else "edge",
                                rate_bps=rate.get((name, e.ifname)))
                     for lk, e in TOPO.ends_of(name)]
            self.sw[name] = Switch(SwitchConfig(name, tuple(ports), fdb[name]))
        self.inbox: dict[str, list[bytes]] = {"h1": [], "h2": [], "h3": []}
        #: every frame put on a link or to a host: (switch, port, frame)
        self.wire: list[tuple[str, str, bytes]] = []
        if enable:
            for name, dirs in optopo.all_directions(TOPO).items():
                op.enable(self.sw[name], dirs, PARAMS, 0, controller=controller)

    def send(self, switch: str, port: str, frame: bytes, now: int) -> None:
        self.sw[switch].receive(port, frame, now)
        self.run(now)

    def run(self, now: int) -> None:
        for _ in range(20):
            moved = False
            for name, sw in self.sw.items():
                for port, frame in sw.transmit(now):
                    moved = True
                    self.wire.append((name, port, frame))
                    peer = self.LINKS.get((name, port))
                    if peer is not None:
                        self.sw[peer[0]].receive(peer[1], frame, now)
                    else:
                        self.inbox[self.HOSTS[(name, port)]].append(frame)
            if not moved:
                return

    def take(self, host: str) -> list[bytes]:
        out, self.inbox[host] = self.inbox[host], []
        return out

    def counters(self, switch: str, port: str) -> dict:
        st_ = op.status(self.sw[switch])
        assert st_ is not None
        return st_["ports"][port]["counters"]


# ------------------------------------------------------------------------------ forwarding


def test_frames_that_are_not_1pipe_pass_untouched():
    n = Net()
    others = [build_udp_frame(mac(1), mac(3), ip(1), ip(3), 5000, 40200, b"x" * 40),  # T/C-SACK's port
              build_udp_frame(mac(1), mac(3), ip(1), ip(3), 5000, 53, b"y" * 40),
              mac(3) + mac(1) + b"\x08\x06" + bytes(28),  # ARP-ish
              mac(3) + mac(1) + b"\x08\x00" + bytes([0x45]) + bytes(40)]  # IPv4, not UDP
    for f in others:
        n.send("tor1", "p-h1", f, MS)
    assert n.take("h3") == others
    assert n.counters("tor1", "p-h1")["rx"] == 0


def test_data_leaves_every_hop_with_that_hops_barrier():
    n = Net()
    t = 10 * MS
    n.send("tor2", "p-h3", host_beacon(3, 40101, t + 5000), t)  # h3's process: R = t+5000 at tor2
    n.send("tor1", "p-h2", host_beacon(2, 40101, t + 3000), t)  # h2's: R = t+3000 at tor1
    data = op_frame(1, 3, 40101, 40101, DATA, t + 4000, payload=b"hello")
    n.send("tor1", "p-h1", data, t)
    (got,) = n.take("h3")
    h = header(got)
    # tor1 -> spine (up): min over h1, h2 = t+3000; spine -> tor2 (down): tor1's 3000;
    # tor2 -> h3 (down): min(spine 3000, h3 5000)
    assert h.be_barrier == ts_from_ns(t + 3000) and h.msg_ts == ts_from_ns(t + 4000)
    assert got[-5:] == b"hello" and udp_checksum_ok(got)
    assert got[:42] == data[:40] + got[40:42]  # only the barrier and the UDP checksum changed
    assert n.counters("tor1", "p-h1")["stamped"] == 1 and n.counters("tor1", "p-spine1")["tx_stamped"] == 1
    assert n.counters("tor2", "p-h3")["beacons_rx"] == 1 and n.take("h1") == n.take("h2") == []


def test_udp_checksum_zero_stays_zero():
    n = Net()
    f = bytearray(op_frame(1, 2, 40101, 40101, DATA, 5 * MS))
    f[40:42] = b"\0\0"
    n.send("tor1", "p-h1", bytes(f), MS)
    (got,) = n.take("h2")
    assert got[40:42] == b"\0\0" and header(got).be_barrier == ts_from_ns(5 * MS)


def test_beacons_are_consumed_and_never_forwarded():
    n = Net()
    now = T // 2  # before any switch's first beacon
    n.send("tor1", "p-h1", host_beacon(1, 40101, 3 * MS), now)
    n.send("tor1", "p-spine1", op_frame(9, 0, 40100, 40100, BEACON, 3 * MS, dst_mac=BCAST,
                                         dst_ip=b"\xff" * 4), now)
    assert all(n.take(h) == [] for h in ("h1", "h2", "h3"))
    assert n.counters("tor1", "p-h1")["beacons_rx"] == 1 and n.counters("tor1", "p-spine1")["beacons_rx"] == 1
    agg = op.aggregator(n.sw["tor1"])
    assert agg is not None and agg.r("p-spine1") == 3 * MS and agg.r(op.Proc("p-h1", ip(1), 40101)) == 3 * MS


def test_each_process_is_its_own_input_at_the_tor():
    n = Net()
    t = 10 * MS
    n.send("tor1", "p-h1", host_beacon(1, 40101, t + 100), t)
    n.send("tor1", "p-h1", host_beacon(1, 40102, t + 50), t)  # a second process on h1
    n.send("tor1", "p-h1", op_frame(1, 2, 40101, 40101, DATA, t + 200), t)
    (got,) = n.take("h2")
    assert header(got).be_barrier == ts_from_ns(t + 50)
    ins = op.status(n.sw["tor1"])["ports"]["p-h1"]["inputs"]
    assert set(ins) == {"10.0.0.1:40101", "10.0.0.1:40102"}


def test_prepare_and_controller_traffic_pass_untouched():
    n = Net()
    f = op_frame(1, 3, 40101, 40101, PREPARE, 7 * MS, barrier=1, payload=b"p")
    n.send("tor1", "p-h1", f, MS)
    assert n.take("h3") == [f] and n.counters("tor1", "p-h1")["passed"] == 1


def test_a_backwards_barrier_is_counted_and_the_packet_still_forwarded_with_the_switch_barrier():
    n = Net()
    t = 10 * MS
    n.send("tor1", "p-h1", op_frame(1, 2, 40101, 40101, DATA, t + 900), t)
    n.send("tor1", "p-h1", op_frame(1, 2, 40101, 40101, ACK, t + 100), t)
    got = n.take("h2")
    assert [header(f).be_barrier for f in got] == [ts_from_ns(t + 900)] * 2
    assert n.counters("tor1", "p-h1")["barrier_backwards"] == 1


# ------------------------------------------------------------------------------ drops


def test_malformed_1pipe_frames_are_counted_drops():
    n = Net()
    good = op_frame(1, 2, 40101, 40101, DATA, 5 * MS, payload=b"abc")
    bad = [
        build_udp_frame(mac(1), mac(2), ip(1), ip(2), 40101, 40101, b"short"),  # truncated header
        good[:-10],  # lengths run past the frame
        good[:42 + 22] + b"\x7f" + good[42 + 23:],  # unknown opcode
        op_frame(1, 2, 40101, 40101, BEACON, 5 * MS, payload=b"x"),  # a beacon with a payload
        good[:20] + b"\x20" + good[21:],  # an IP fragment (MF)
    ]
    for f in bad:
        n.send("tor1", "p-h1", f, MS)
    assert n.take("h2") == [] and n.counters("tor1", "p-h1")["malformed"] == len(bad)
    later_fragment = good[:20] + b"\x00\x10" + good[22:]  # offset 16: no UDP header here
    n.send("tor1", "p-h1", later_fragment, MS)
    assert n.take("h2") == [later_fragment]


def test_1pipe_frames_without_a_single_known_egress_are_dropped():
    n = Net()
    n.send("tor1", "p-h1", op_frame(1, 9, 40101, 40101, DATA, 5 * MS), MS)  # unknown MAC
    n.send("tor1", "p-h1", op_frame(1, 2, 40101, 40101, ACK, 5 * MS, dst_mac=BCAST), MS)
    assert all(n.take(h) == [] for h in ("h1", "h2", "h3"))
    assert n.counters("tor1", "p-h1")["unroutable"] == 2


def test_a_frame_going_up_after_coming_from_above_is_dropped():
    ports = (PortConfig("p-h1", role="edge"), PortConfig("p-s1"), PortConfig("p-s2"))
    sw = Switch(SwitchConfig("tor", ports, {mac(1): "p-h1", mac(9): "p-s2"}))
    op.enable(sw, {"p-h1": "down", "p-s1": "up", "p-s2": "up"}, PARAMS, 0)
    sw.receive("p-s1", op_frame(5, 9, 40101, 40101, DATA, 5 * MS), MS)
    assert sw.transmit(MS) == []
    assert op.status(sw)["ports"]["p-s1"]["counters"]["valley"] == 1
    sw.receive("p-s1", op_frame(5, 1, 40101, 40101, DATA, 5 * MS), MS)
    assert [p for p, _ in sw.transmit(MS)] == ["p-h1"]


def test_a_full_process_table_drops_new_processes_and_evicts_silent_ones():
    sw = Switch(SwitchConfig("tor", (PortConfig("p-h1", role="edge"), PortConfig("p-h2", role="edge")),
                             {mac(1): "p-h1", mac(2): "p-h2"}))
    op.enable(sw, {"p-h1": "down", "p-h2": "down"}, PARAMS, 0, max_processes=2)
    sw.receive("p-h1", host_beacon(1, 40101, MS), 0)
    sw.receive("p-h1", host_beacon(1, 40102, MS), 0)
    sw.receive("p-h2", op_frame(2, 1, 40101, 40101, DATA, MS), 0)  # a third process: no room
    assert sw.transmit(0) == []
    st_ = op.status(sw)
    assert st_["ports"]["p-h2"]["counters"]["table_full"] == 1 and st_["processes"] == 2
    sw.receive("p-h1", host_beacon(1, 40102, 2 * MS), 5 * T)
    sw.transmit(11 * T)  # 1:40101 times out; 1:40102 spoke at 5 T and is still live
    sw.receive("p-h2", op_frame(2, 1, 40101, 40102, DATA, 12 * T), 11 * T)  # evicts the silent one
    assert [p for p, _ in sw.transmit(11 * T)] == ["p-h1"]
    assert set(op.status(sw)["ports"]["p-h1"]["inputs"]) == {"10.0.0.1:40102"}


# ------------------------------------------------------------------------------ beacons


def test_idle_outputs_get_beacons_processes_by_unicast_switches_by_broadcast():
    n = Net()
    t = 10 * MS
    n.send("tor1", "p-h1", host_beacon(1, 40101, t + 100), t)
    n.send("tor1", "p-h2", host_beacon(2, 40101, t + 200), t)
    n.send("tor2", "p-h3", host_beacon(3, 40101, t + 300), t)
    n.run(t + T - 1)
    assert n.take("h1") == []
    n.run(t + 2 * T)  # every output idle since t: one beacon each, hop by hop
    for host, i in (("h1", 1), ("h2", 2), ("h3", 3)):
        beacons = n.take(host)
        assert beacons, host
        f = beacons[-1]
        u = parse_udp_frame(f)
        assert (f[:6], f[6:12], u.ip.dst, u.udp.sport, u.udp.dport) == (mac(i), f[6:12], ip(i), 40100, 40101)
        assert u.ip.src == ip(254) and u.ip.ttl == 1 and udp_checksum_ok(f)
        assert header(f).opcode is BEACON and header(f).msg_ts == header(f).be_barrier
    spine = op.status(n.sw["spine1"])["ports"]
    assert spine["p-tor1"]["counters"]["beacons_rx"] >= 1 and spine["p-tor1"]["counters"]["beacons_tx"] >= 1
    agg = op.aggregator(n.sw["spine1"])
    assert agg is not None and agg.r("p-tor1") == t + 100 and agg.r("p-tor2") == t + 300
    # the last beacon h1 got carries min over everything the tor heard from both sides
    n.run(t + 4 * T)
    assert header(n.take("h1")[-1]).be_barrier == ts_from_ns(t + 100)


def test_busy_outputs_get_no_timer_beacons():
    """The T_beacon timer only (prompt beacons off: the spine's beacons coming back down would
    raise tor1's barrier after each data packet, and rightly bring a prompt beacon)."""
    n = Net(enable=False)
    for name, dirs in optopo.all_directions(TOPO).items():
        op.enable(n.sw[name], dirs, PARAMS.with_(prompt_beacons=False), 0)
    t = 10 * MS
    n.send("tor1", "p-h2", host_beacon(2, 40101, t), t)
    for k in range(1, 8):  # h1's process keeps data flowing to h2 more often than T_beacon
        now = t + k * T // 2
        n.send("tor1", "p-h1", op_frame(1, 2, 40101, 40101, DATA, now), now)
        n.send("tor1", "p-h2", host_beacon(2, 40101, now), now)
    got = n.take("h2")
    assert got and all(header(f).opcode is DATA for f in got)
    st_ = op.status(n.sw["tor1"])["ports"]["p-h2"]["outputs"]["10.0.0.2:40101"]
    assert st_["beacons"] == 0 and st_["barriers"] == 7


def test_a_beacon_waits_behind_1pipe_data_in_a_paused_class():
    """The beacon goes into the class the data took: it never overtakes it, paused or not."""
    n = Net()
    t = 10 * MS
    spine = n.sw["spine1"]
    n.send("tor2", "p-h3", host_beacon(3, 40101, t), t)
    n.run(t + 2 * T)
    # tor2 pauses class 2 on the spine's port toward it
    spine.receive("p-tor2", build_pfc_frame(mac(99), 1 << 2, [0, 0, 0xFFFF, 0, 0, 0, 0, 0]), t + 2 * T)
    n.wire.clear()
    n.send("tor1", "p-h1", op_frame(1, 3, 40101, 40101, DATA, t + 2 * T, tos=2 << 5), t + 2 * T)
    n.run(t + 4 * T)  # the spine's output toward tor2 has been idle for T_beacon: a beacon is due
    assert [f for sw, p, f in n.wire if (sw, p) == ("spine1", "p-tor2")] == []  # both wait
    st_ = op.status(spine)["ports"]["p-tor2"]
    assert st_["counters"]["beacons_tx"] >= 1 and st_["outputs"]["p-tor2"]["class"] == 2
    spine.receive("p-tor2", build_pfc_frame(mac(99), 1 << 2, [0] * 8), t + 4 * T)  # resume
    n.run(t + 4 * T)
    out = [header(f).opcode for sw, p, f in n.wire if (sw, p) == ("spine1", "p-tor2")]
    assert out[0] is DATA and set(out[1:]) == {BEACON}


def test_beacons_stop_for_a_process_that_went_silent():
    n = Net()
    t = 10 * MS
    n.send("tor1", "p-h1", host_beacon(1, 40101, t), t)
    n.run(t + 12 * T)
    n.take("h1")
    n.run(t + 30 * T)
    assert n.take("h1") == []  # timed out after 10 T_beacon: no more beacons for it
    st_ = op.status(n.sw["tor1"])["ports"]["p-h1"]["inputs"]["10.0.0.1:40101"]
    assert st_["timeouts"] == 1 and not st_["live"]


# ------------------------------------------------------------------------------ timeouts and the freeze


def one_tor() -> Switch:
    ports = tuple(PortConfig(f"p-h{i}", role="edge") for i in (1, 2, 3))
    sw = Switch(SwitchConfig("tor", ports, {mac(i): f"p-h{i}" for i in (1, 2, 3)}))
    op.enable(sw, {f"p-h{i}": "down" for i in (1, 2, 3)}, PARAMS, 0)
    return sw


def test_a_silent_process_stops_holding_the_barrier_and_rejoins_under_the_freeze():
    sw = one_tor()
    t = 10 * MS
    sw.receive("p-h1", host_beacon(1, 40101, t), t)  # h1 then falls silent
    for k in range(15):  # h2 keeps talking
        sw.receive("p-h2", host_beacon(2, 40101, t + k * T), t + k * T)
        sw.transmit(t + k * T)
    now = t + 15 * T
    sw.receive("p-h2", op_frame(2, 3, 40101, 40101, DATA, now), now)
    sw.receive("p-h1", op_frame(1, 3, 40101, 40101, DATA, t + 7 * T), now)  # h1 is back, behind
    a, b = [f for p, f in sw.transmit(now) if p == "p-h3"]
    assert header(a).be_barrier == ts_from_ns(now)  # h1 timed out: it holds nothing back
    assert header(b).be_barrier == ts_from_ns(now)  # h1 re-joins below it: frozen, never lower
    st_ = op.status(sw)["ports"]
    assert st_["p-h1"]["counters"]["late_forwarded"] == 1  # its receiver will drop and NAK it (§6)
    ins = st_["p-h1"]["inputs"]["10.0.0.1:40101"]
    assert ins["rejoins"] == 1 and ins["timeouts"] == 1
    out = st_["p-h3"]["outputs"]["10.0.0.3:40101"]
    assert out["frozen"] and out["joining"] == ["10.0.0.1:40101"] and out["freezes"] == 1
    sw.receive("p-h1", op_frame(1, 3, 40101, 40101, DATA, now + 10), now + 20)  # caught up
    (c,) = [f for p, f in sw.transmit(now + 20) if p == "p-h3"]
    assert header(c).be_barrier == ts_from_ns(now)  # the min again: h2's R, h1 is above it
    out = op.status(sw)["ports"]["p-h3"]["outputs"]["10.0.0.3:40101"]
    assert not out["frozen"] and out["frozen_ns"] == 20


def test_a_1pipe_frame_to_a_process_behind_its_own_port_is_left_to_the_switch():
    sw = one_tor()
    sw.receive("p-h1", op_frame(1, 1, 40101, 40102, DATA, MS), MS)
    assert sw.transmit(MS) == [] and sw.counters()["p-h1"]["filtered"] == 1


# ------------------------------------------------------------------------------ enable / disable / status


def test_enable_checks_its_settings():
    sw = Net(enable=False).sw["tor1"]
    dirs = optopo.port_directions(TOPO, "tor1")
    with pytest.raises(ConfigError):
        op.enable(sw, {**dirs, "p-h1": "up"})  # an edge port faces hosts
    with pytest.raises(ConfigError):
        op.enable(sw, {k: v for k, v in dirs.items() if k != "p-h2"})
    with pytest.raises(ConfigError):
        op.enable(sw, {**dirs, "p-x": "down"})
    with pytest.raises(ConfigError):
        op.enable(sw, {**dirs, "p-spine1": "sideways"})
    with pytest.raises(ConfigError):
        op.enable(sw, dirs, beacon_ip="10.0.0")
    with pytest.raises(ConfigError):
        op.enable(sw, dirs, max_processes=0)
    with pytest.raises(ConfigError):
        op.enable(sw, dirs, {"t_beacon_ns": 0})
    assert not op.enabled(sw) and op.status(sw) is None


def test_enable_disable_and_status():
    n = Net(enable=False)
    sw = n.sw["tor1"]
    dirs = optopo.port_directions(TOPO, "tor1")
    assert dirs == {"p-h1": "down", "p-h2": "down", "p-spine1": "up"}
    f = op.enable(sw, dirs, {"t_beacon_ns": T, "ack_timeout_ns": 100 * T}, 0, beacon_ip="10.0.0.200")
    assert isinstance(f, op.OnePipeFeature) and op.enabled(sw) and set(op.features(sw)) == set(dirs)
    sw.receive("p-h1", host_beacon(1, 40101, 3 * MS), MS)
    st_ = op.status(sw, 2 * MS)
    assert st_ is not None and json.loads(json.dumps(st_)) == st_
    assert st_["beacon_ip"] == "10.0.0.200" and st_["ports"]["p-spine1"]["direction"] == "up"
    assert st_["ports"]["p-h1"]["inputs"]["10.0.0.1:40101"]["r"] == 3 * MS
    op.enable(sw, dirs, PARAMS)  # again: afresh
    assert op.status(sw)["ports"]["p-h1"]["inputs"] == {}
    assert op.disable(sw) and not op.disable(sw)
    assert op.status(sw) is None and op.aggregator(sw) is None and op.features(sw) == {}
    beacon = host_beacon(1, 40101, 3 * MS)
    sw.receive("p-h1", beacon, 3 * MS)  # off: forwarded (flooded) like any frame
    assert ("p-h2", beacon) in sw.transmit(3 * MS)
    assert sw.next_deadline() is None


def test_the_default_beacon_source_is_a_unicast_address_in_the_process_subnet():
    assert op.default_beacon_ip(ip(7)) == ip(254)
    assert op.default_beacon_ip(ip(254)) == ip(253)


def test_egress_index_reads_the_forwarding_table():
    sw = Net(enable=False).sw["tor1"]
    assert op.egress_index(sw, mac(3) + bytes(20)) == 2
    assert op.egress_index(sw, BCAST + bytes(20)) is None
    assert op.egress_index(sw, mac(77) + bytes(20)) is None


# ------------------------------------------------------------------------------ any bytes


onepipe_like = st.builds(
    lambda head, dport, tail, cut: (build_udp_frame(mac(1), mac(2), ip(1), ip(2), 40101, dport, head + tail))[:cut],
    st.binary(min_size=0, max_size=30), st.sampled_from([40100, 40101, 41000, 40200]),
    st.binary(max_size=20), st.integers(0, 200))


@given(st.one_of(st.binary(max_size=200), onepipe_like), st.sampled_from(["p-h1", "p-spine1"]))
def test_any_bytes_into_on_ingress_never_raise(frame, port):
    n = NET_FOR_FUZZ
    f = op.features(n.sw["tor1"])[port]
    out = f.on_ingress(frame, 5 * MS)
    assert out is None or isinstance(out, bytes)
    n.sw["tor1"].receive(port, frame, 5 * MS)
    n.sw["tor1"].transmit(5 * MS)


NET_FOR_FUZZ = Net()


@given(st.integers(1 << 20, 1 << 46), st.integers(0, 1 << 20), st.binary(max_size=64), st.integers(0, 7))
def test_a_rewritten_frame_keeps_a_valid_udp_checksum_and_its_class(ts, lag, payload, prec):
    sw = one_tor()
    now = ts  # the switch's clock where the hosts' are (a barrier far ahead of it is refused)
    sw.receive("p-h2", host_beacon(2, 40101, ts - lag), now)  # the barrier: lag below ts
    sw.receive("p-h1", op_frame(1, 3, 40101, 40101, DATA, ts, payload=payload, tos=prec << 5), now)
    (got,) = [f for p, f in sw.transmit(now) if p == "p-h3"]
    assert udp_checksum_ok(got) and got.endswith(payload)
    assert header(got).be_barrier == ts_from_ns(ts - lag) and header(got).msg_ts == ts_from_ns(ts)
    assert op.status(sw)["ports"]["p-h3"]["outputs"]["10.0.0.3:40101"]["class"] == prec
    beacon_frame = op._BeaconTemplate(mac(9), mac(3), ip(9), ip(3), 40101).make(ts_from_ns(ts))
    assert udp_checksum_ok(beacon_frame) and header(beacon_frame).be_barrier == ts_from_ns(ts)


# ------------------------------------------------------------------------------ topology


def test_tiers_and_directions_from_the_topology():
    assert optopo.switch_tiers(TOPO) == {"tor1": 1, "tor2": 1, "spine1": 2}
    assert optopo.all_directions(TOPO) == {"tor1": {"p-h1": "down", "p-h2": "down", "p-spine1": "up"},
                                           "tor2": {"p-h3": "down", "p-spine1": "up"},
                                           "spine1": {"p-tor1": "down", "p-tor2": "down"}}
    assert optopo.validate(TOPO) == optopo.all_directions(TOPO)
    assert optopo.beacon_ip(TOPO) == "10.0.0.254"


def test_the_shipped_topologies_are_fine_for_1pipe():
    from netstack.topo.model import default_topology, load_topology_spec

    optopo.validate(default_topology())  # sw1 = sw2 are peers of one tier: both ends up
    shipped = load_topology_spec("onepipe")
    assert optopo.validate(shipped)["spine1"] == {"p-tor1": "down", "p-tor2": "down", "p-ctl": "down"}


def test_a_switch_that_reaches_no_host_is_refused():
    t = topology_from_dict(topo_dict(extra_nodes=[{"name": "lost", "kind": "switch"}],
                                     extra_links=[]))
    with pytest.raises(TopologyError, match="lost reaches no host"):
        optopo.validate(t)


def test_directions_that_make_a_cycle_are_refused():
    dirs = optopo.all_directions(TOPO)
    dirs["spine1"]["p-tor1"] = "down"
    dirs["tor1"]["p-spine1"] = "down"  # both ends down: tor1.down -> spine1.up -> spine1.down -> tor1.up...
    with pytest.raises(TopologyError, match="cycle"):
        optopo.check_dag(TOPO, dirs)


def test_a_chain_of_three_tors_is_refused_the_middle_one_is_a_valley():
    nodes = [{"name": f"h{i}", "kind": "host", "ip": f"10.0.0.{i}/24"} for i in (1, 2, 3)]
    nodes += [{"name": f"s{i}", "kind": "switch"} for i in (1, 2, 3)]
    links = [{"name": f"h{i}-s{i}", "a": f"h{i}", "b": f"s{i}"} for i in (1, 2, 3)]
    links += [{"name": "s1-s2", "a": "s1", "b": "s2"}, {"name": "s2-s3", "a": "s2", "b": "s3"}]
    t = topology_from_dict({"topology": {"name": "chain", "prefix": "c"}, "nodes": nodes, "links": links})
    with pytest.raises(TopologyError, match="enters s2 from above"):
        optopo.validate(t)


def test_first_hops_follow_the_runtime_static_forwarding():
    from netstack import runtime
    from netstack.topo import netns

    built = netns.plan(TOPO)
    for sw in ("tor1", "tor2", "spine1"):
        static = runtime.switch_config(TOPO, built, sw)["switch"]["static_fdb"]
        hops = optopo.first_hops(TOPO, sw)
        for h in ("h1", "h2", "h3"):
            assert static[built.mac(h, TOPO.links_of(h)[0].name)] == hops[h]
