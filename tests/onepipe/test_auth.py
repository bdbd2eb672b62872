"""Authenticated 1Pipe frames (netstack/onepipe/auth.py; docs/onepipe.md "Authenticated beacons and
barriers"): beacons, barrier-carrying frames and PREPAREs sealed by whoever sends them on a hop and
opened by the next, the switches re-sealing what they stamp; controller messages sealed with the
controller key both ways. Genuine frames pass; forged, replayed, truncated, unsealed and wrongly
keyed ones are refused and counted per reason; an attacker on a host's link and on a fabric link
(hypothesis, stateful) never moves a barrier. Also the clock-jump hook's pieces (docs/onepipe.md
"Clock jumps")."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from daemons import onepipe_controller as daemon
from headers.auth import TRAILER_LEN, decode_trailer
from headers.errors import HeaderError
from headers.inet import build_udp_frame, ip_str, parse_udp_frame
from headers.onepipe import (
    BARRIER_OPCODES,
    OnePipeFlag,
    OnePipeHeader,
    OnePipeOpcode,
    decode_packet,
    ts_from_ns,
    ts_unwrap,
)
from netstack.auth.context import AuthContext
from netstack.auth.frame import REASONS, Sealer
from netstack.auth.keys import KeyRing, generate, load
from netstack.auth.sign import ensure_signing_key, load_verify_key
from netstack.errors import ConfigError
from netstack.onepipe import auth as opauth
from netstack.onepipe import ctlnode
from netstack.onepipe import feature as op
from netstack.onepipe import topology as optopo
from netstack.onepipe.api import OnePipeEndpoint
from netstack.onepipe.auth import ControllerAuth, HostAuth, controller_keys
from netstack.onepipe.clock import HostClock
from netstack.onepipe.control import peers_of
from netstack.onepipe.controller import ControllerParams
from netstack.onepipe.ctlwire import Notice, failure_notice, parse_register_reply, register_reply, register_request
from netstack.onepipe.endpoint import Endpoint
from netstack.onepipe.live import read_clock_step
from netstack.onepipe.params import OnePipeParams
from netstack.onepipe.store import SqliteStore

from .test_controller_daemon import FakeSwitch, _udp_port, _until
from .test_feature import BCAST, DATA, MS, PARAMS, PREPARE, TOPO, Net, T, header, host_beacon, ip, mac, udp_checksum_ok

BEACON, COMMIT = OnePipeOpcode.BEACON, OnePipeOpcode.COMMIT
WALL = 1_700_000_000.0
DOMAIN = "t"
CTL = ("10.0.0.100", 40100)


def ring(kid: int = 1, secret: bytes | None = None) -> KeyRing:
    return KeyRing({kid: secret or os.urandom(32)}, {kid: None}, kid, "test")


RING = ring()
#: the controller's signing pair (netstack/auth/sign.py): processes get only the public key
SIGNING = Ed25519PrivateKey.generate()


class AuthNet(Net):
    """test_feature's tor1 - spine1 - tor2 with keys in every switch and 1Pipe's domain ``t``."""

    def __init__(self, keys: KeyRing = RING, controller: bool = False) -> None:
        super().__init__(enable=False)
        peers = peers_of(TOPO)
        self.ctx: dict[str, AuthContext] = {}
        for name, sw in self.sw.items():
            sw.auth = self.ctx[name] = AuthContext.start(keys, WALL)
        for name, dirs in optopo.all_directions(TOPO).items():
            op.enable(self.sw[name], dirs, PARAMS, 0, controller=controller, domain=DOMAIN, peers=peers[name])

    def auth(self, switch: str, port: str) -> dict[str, int]:
        st_ = op.status(self.sw[switch])
        assert st_ is not None
        return st_["ports"][port]["auth"]


class Proc:
    """A 1Pipe process's sealing and opening (HostAuth) on host ``i``, port ``port``."""

    def __init__(self, i: int, port: int = 40101, keys: KeyRing = RING, controller: tuple[str, int] | None = None,
                 era: int = 7) -> None:
        self.i = i
        self.addr = (f"10.0.0.{i}", port)
        self.auth = HostAuth.from_ring(keys, DOMAIN, self.addr, era, WALL, controller,
                                       SIGNING.public_key() if controller is not None else None)

    def frame(self, dst: int, opcode: int, ts: int, barrier: int | None = None, commit: int = 0, psn: int = 0,
              payload: bytes = b"", dport: int = 40101, dst_ip: str | None = None,
              dst_mac: bytes | None = None) -> bytes:
        hdr = OnePipeHeader(ts_from_ns(ts), ts_from_ns(ts if barrier is None else barrier), ts_from_ns(commit), psn,
                            opcode, OnePipeFlag.EOM if opcode in (DATA, PREPARE) else 0).to_bytes()
        to = (dst_ip or f"10.0.0.{dst}", dport)
        return build_udp_frame(mac(self.i), mac(dst) if dst_mac is None else dst_mac, ip(self.i),
                               bytes(int(x) for x in to[0].split(".")), self.addr[1], dport,
                               self.auth.seal(to, hdr + payload))

    def beacon(self, barrier: int, commit: int = 0) -> bytes:
        return self.frame(0, BEACON, barrier, commit=commit, dport=40100, dst_ip="10.0.0.255", dst_mac=BCAST)

    def open(self, frame: bytes) -> bytes | None:
        u = parse_udp_frame(frame)
        body = frame[u.payload_offset:u.payload_offset + u.payload_length]
        return self.auth.open((ip_str(u.ip.src), u.udp.sport), body)


def udp_payload(frame: bytes) -> bytes:
    u = parse_udp_frame(frame)
    return frame[u.payload_offset:u.payload_offset + u.payload_length]


def rebuilt(frame: bytes, payload: bytes) -> bytes:
    """``frame`` with another UDP payload (lengths and checksum made right): what a device on the
    link can send."""
    u = parse_udp_frame(frame)
    return build_udp_frame(frame[6:12], frame[:6], u.ip.src, u.ip.dst, u.udp.sport, u.udp.dport, payload,
                           ttl=u.ip.ttl)


def accounted(c: dict[str, int], a: dict[str, int]) -> bool:
    """Every 1Pipe frame a port received is counted once: malformed, passed, opened or refused."""
    return c["rx"] == c["malformed"] + c["passed"] + a["ok"] + sum(a[r] for r in REASONS)


# --------------------------------------------------------------------------- the switch


def test_a_sealed_beacon_sets_its_process_register_and_the_rest_are_refused_per_reason() -> None:
    n = AuthNet()
    p1 = Proc(1)
    t = 10 * MS
    iid = ("p-h1", ip(1), 40101)
    good = p1.beacon(t + 5000, commit=t + 4000)
    n.send("tor1", "p-h1", good, t)
    agg, cagg = op.aggregator(n.sw["tor1"]), op.commit_aggregator(n.sw["tor1"])
    assert agg is not None and cagg is not None
    assert agg.r(iid) == t + 5000 and cagg.r(iid) == t + 4000
    late = p1.beacon(t + 6000)  # sealed, kept by the attacker, sent after a newer one: still genuine and new
    attacks = {
        "truncated": [host_beacon(1, 40101, t + 9 * MS),  # unsealed: no room for a trailer
                      rebuilt(good, udp_payload(good)[:-1])],
        "forged": [rebuilt(good, udp_payload(good)[:8] + b"\x7f" + udp_payload(good)[9:]),  # a higher barrier
                   Proc(1, keys=ring()).beacon(t + 9 * MS),  # another deployment's key, same id
                   good[:26] + ip(2) + good[30:]],  # h2's address on h1's frame: another identity, refused
        "unknown_key": [Proc(1, keys=ring(kid=9)).beacon(t + 9 * MS),
                        # cut short: the "trailer" read from the end begins in the payload ("c")
                        rebuilt(good, udp_payload(p1.frame(3, DATA, t + 7000, payload=b"abcdef"))[:-3])],
        "replayed": [good],
    }
    for frames in attacks.values():
        for f in frames:
            n.send("tor1", "p-h1", f, t + 1)
    n.send("tor1", "p-h1", p1.beacon(t + 8000), t + 2)
    n.send("tor1", "p-h1", late, t + 3)  # reordered: taken (its barrier is lower: ignored, counted)
    n.send("tor1", "p-h1", late, t + 4)  # ... once
    assert agg.r(iid) == t + 8000 and cagg.r(iid) == t + 4000
    a, c = n.auth("tor1", "p-h1"), n.counters("tor1", "p-h1")
    assert {r: a[r] for r in REASONS} == {"truncated": 2, "forged": 3, "unknown_key": 2, "replayed": 2, "stale_era": 0}
    assert a["ok"] == 3 and c["barrier_backwards"] == 1 and accounted(c, a)
    # a forged source made no process entry: only h1's process is known at tor1
    st_ = op.status(n.sw["tor1"])
    assert st_ is not None and list(st_["ports"]["p-h1"]["inputs"]) == ["10.0.0.1:40101"]


def test_a_sealed_frame_replayed_on_another_edge_port_is_refused_as_replayed() -> None:
    """Issue 34, finding 2: a process's replay window is its own (its IP and UDP port), whichever
    edge port its frames come in on: a sealed beacon of h1's process replayed on h2's port makes no
    second process entry with a fresh window and moves no barrier there."""
    n = AuthNet()
    p1 = Proc(1)
    t = 10 * MS
    good = p1.beacon(t + 5000, commit=t + 4000)
    n.send("tor1", "p-h1", good, t)
    n.send("tor1", "p-h2", good, t + 1)  # the replay, on the other edge port
    a = n.auth("tor1", "p-h2")
    assert a["replayed"] == 1 and a["ok"] == 0
    st_ = op.status(n.sw["tor1"])
    assert st_ is not None and list(st_["ports"]["p-h2"]["inputs"]) == []
    # the process itself may move ports: its next frame is new, and taken there
    n.send("tor1", "p-h2", p1.beacon(t + 6000), t + 2)
    assert n.auth("tor1", "p-h2")["ok"] == 1


def test_data_is_opened_and_sealed_anew_at_every_hop_and_opens_at_its_receiver() -> None:
    n = AuthNet()
    p1, p2, p3 = Proc(1), Proc(2), Proc(3)
    t = 10 * MS
    n.send("tor2", "p-h3", p3.beacon(t + 5000), t)
    n.send("tor1", "p-h2", p2.beacon(t + 3000), t)
    data = p1.frame(3, DATA, t + 4000, payload=b"hello")
    n.send("tor1", "p-h1", data, t)
    (got,) = n.take("h3")
    h = header(got)
    assert h.be_barrier == ts_from_ns(t + 3000) and h.msg_ts == ts_from_ns(t + 4000) and udp_checksum_ok(got)
    opened = p3.open(got)
    assert opened is not None and opened[24:] == b"hello" and decode_packet(opened)[0] == h
    assert decode_trailer(got).era == n.ctx["tor2"].era  # sealed by tor2, not by h1
    # every hop: one trailer per hop, a checksum a kernel takes, and the next hop's opener took it
    fabric = [f for sw, port, f in n.wire if (sw, port) in (("tor1", "p-spine1"), ("spine1", "p-tor2"))]
    assert len(fabric) == 2 and all(udp_checksum_ok(f) and len(f) == len(data) for f in fabric)
    assert len({f[-TRAILER_LEN:] for f in [data, *fabric, got]}) == 4
    assert n.auth("spine1", "p-tor1")["ok"] == 1 and n.auth("tor2", "p-spine1")["ok"] == 1
    assert n.auth("tor1", "p-spine1")["sealed"] == 1 and n.auth("tor2", "p-h3")["sealed"] == 1
    assert p3.auth.counters()["tor"]["ok"] == 1 and p3.auth.counters()["refused"] == 0


def test_switch_beacons_are_sealed_for_each_process_and_each_neighbour() -> None:
    n = AuthNet()
    procs = {i: Proc(i) for i in (1, 2, 3)}
    t = 10 * MS
    for i, sw in ((1, "tor1"), (2, "tor1"), (3, "tor2")):
        n.send(sw, f"p-h{i}", procs[i].beacon(t + 100 * i, commit=t), t)
    n.run(t + 2 * T)
    for i, p in procs.items():
        beacons = n.take(f"h{i}")
        assert beacons and all(udp_checksum_ok(f) for f in beacons)
        assert all(p.open(f) is not None for f in beacons), i
        assert all(header(f).opcode in (BEACON, COMMIT) for f in beacons)
        # another process cannot take them: they are sealed for this one's address
        assert Proc(i, port=40102).open(beacons[-1]) is None
    spine = n.auth("spine1", "p-tor1")
    assert spine["ok"] >= 1 and spine["sealed"] >= 1 and sum(spine[r] for r in REASONS) == 0
    agg = op.aggregator(n.sw["spine1"])
    assert agg is not None and agg.r("p-tor1") == t + 100 and agg.r("p-tor2") == t + 300


def test_a_fabric_frame_reflected_or_moved_to_another_link_is_forged_there() -> None:
    n = AuthNet()
    p1, p3 = Proc(1), Proc(3)
    t = 10 * MS
    n.send("tor1", "p-h1", p1.beacon(t), t)
    n.send("tor2", "p-h3", p3.beacon(t), t)
    n.run(t + 2 * T)
    up = [f for sw, port, f in n.wire if (sw, port) == ("tor1", "p-spine1")]
    down = [f for sw, port, f in n.wire if (sw, port) == ("spine1", "p-tor1")]
    assert up and down
    before = {k: dict(n.auth(*k)) for k in (("tor1", "p-spine1"), ("tor2", "p-spine1"), ("spine1", "p-tor2"))}
    n.send("tor1", "p-spine1", up[-1], t + 2 * T)  # reflected back to its sender
    n.send("tor2", "p-spine1", down[-1], t + 2 * T)  # spine1's frame for tor1, onto tor2's link
    n.send("spine1", "p-tor2", up[-1], t + 2 * T)  # tor1's frame for spine1, on the other link
    for k, old in before.items():
        assert n.auth(*k)["forged"] == old["forged"] + 1, k
    n.send("spine1", "p-tor1", up[-1], t + 2 * T)  # where it belongs, a second time
    assert n.auth("spine1", "p-tor1")["replayed"] == 1


def test_a_process_cannot_pass_for_its_tor_and_end_to_end_frames_open_at_their_receiver() -> None:
    n = AuthNet()
    p1, p3 = Proc(1), Proc(3)
    t = 10 * MS
    n.send("tor2", "p-h3", p3.beacon(t), t)
    # h1 sends a barrier frame straight to h3's link (no ToR): it is h1's seal, not tor2's
    direct = p1.frame(3, DATA, t, barrier=t + 60 * MS)
    assert p3.open(direct) is None and p3.auth.counters()["tor"]["forged"] == 1
    # a PREPARE goes through untouched, trailer and all, and opens at its receiver only
    prep = p1.frame(3, PREPARE, t, payload=b"x")
    n.send("tor1", "p-h1", prep, t)
    (got,) = n.take("h3")
    assert got == prep and n.counters("tor1", "p-h1")["passed"] == 1
    assert p3.open(got) is not None and p3.open(got) is None
    assert p3.auth.counters()["peer"] == {"sealed": 0, "ok": 1, "truncated": 0, "unknown_key": 0, "forged": 0,
                                          "stale_era": 0, "replayed": 1}
    # two processes of one host talk through the kernel (no ToR): the sender's seal, opened as a peer's
    a, b = Proc(1, 40101), Proc(1, 40102)
    loop = a.frame(1, DATA, t, dport=40102)
    assert b.open(loop) is not None and b.open(loop) is None
    assert b.auth.counters()["peer"]["ok"] == 1 and b.auth.counters()["peer"]["replayed"] == 1


def test_without_keys_nothing_changes_on_the_wire() -> None:
    """A switch without keys ignores the domain: frames come out as they do without one."""
    runs = []
    for domain in (None, DOMAIN):
        n = Net(enable=False)
        for name, dirs in optopo.all_directions(TOPO).items():
            op.enable(n.sw[name], dirs, PARAMS, 0, domain=domain, peers=peers_of(TOPO)[name])
        t = 10 * MS
        n.send("tor1", "p-h1", host_beacon(1, 40101, t), t)
        n.send("tor2", "p-h3", host_beacon(3, 40101, t + 100), t)
        n.send("tor1", "p-h1", host_beacon(1, 40101, t + 200), t + 1)
        n.run(t + 3 * T)
        runs.append(n.wire)
        st_ = op.status(n.sw["tor1"])
        assert st_ is not None and st_["auth"] is None and "auth" not in st_["ports"]["p-h1"]
        assert not op.authenticated(n.sw["tor1"])
    assert runs[0] == runs[1] and runs[0]


def test_keys_without_a_domain_or_a_fabric_peer_are_refused() -> None:
    n = Net(enable=False)
    n.sw["tor1"].auth = AuthContext.start(RING, WALL)
    dirs = optopo.all_directions(TOPO)["tor1"]
    with pytest.raises(ConfigError, match="domain"):
        op.enable(n.sw["tor1"], dirs, PARAMS, 0)
    with pytest.raises(ConfigError, match="p-spine1"):
        op.enable(n.sw["tor1"], dirs, PARAMS, 0, domain=DOMAIN, peers={})
    op.enable(n.sw["tor1"], dirs, PARAMS, 0, domain=DOMAIN, peers={"p-spine1": "spine1:p-tor1"})
    assert op.authenticated(n.sw["tor1"])
    assert peers_of(TOPO)["spine1"] == {"p-tor1": "tor1:p-spine1", "p-tor2": "tor2:p-spine1"}


def test_re_enabling_continues_each_ports_sequence_and_a_rotation_reaches_every_seal() -> None:
    n = AuthNet()
    p1 = Proc(1)
    t = 10 * MS
    n.send("tor1", "p-h1", p1.frame(3, DATA, t), t)
    seq = decode_trailer(n.wire[0][2]).seq
    op.enable(n.sw["tor1"], optopo.all_directions(TOPO)["tor1"], PARAMS, t, domain=DOMAIN,
              peers=peers_of(TOPO)["tor1"])
    n.send("tor1", "p-h1", p1.frame(3, DATA, t + 1), t + 1)
    again = [f for sw, port, f in n.wire if (sw, port) == ("tor1", "p-spine1")][-1]
    assert decode_trailer(again).seq == seq + 1  # spine1 takes it: not a replay of the first
    assert n.auth("spine1", "p-tor1")["ok"] == 2
    # rotation: key 2 is current, key 1 valid 10 s more; a switch seals with 2 after its next tick
    old = RING.keys[1]
    rotated = KeyRing({1: old, 2: os.urandom(32)}, {1: WALL + 10, 2: None}, 2, "test")
    for ctx in n.ctx.values():
        ctx.reload(rotated, WALL + 1)
    n.run(t + 3 * T)
    assert decode_trailer(n.wire[-1][2]).key_id == 2
    n.send("tor1", "p-h1", p1.frame(3, DATA, t + 3 * T), t + 3 * T)  # still key 1: in its overlap
    assert n.auth("tor1", "p-h1")["ok"] == 2  # (its counters started again at the re-enable)
    for ctx in n.ctx.values():
        ctx.refresh(WALL + 11)  # key 1 expired
    n.run(t + 4 * T)
    n.send("tor1", "p-h1", p1.frame(3, DATA, t + 4 * T), t + 4 * T)
    assert n.auth("tor1", "p-h1")["unknown_key"] == 1
    p1.auth.refresh(rotated, DOMAIN, WALL + 11)
    n.send("tor1", "p-h1", p1.frame(3, DATA, t + 4 * T + 1), t + 4 * T + 1)
    assert n.auth("tor1", "p-h1")["ok"] == 3


def test_sealed_datagrams_decode_with_the_codec_and_dissect_in_scapy() -> None:
    from scapy.layers.l2 import Ether

    from headers.layers.auth import NetstackAuth
    from headers.layers.onepipe import OnePipe, split_sealed
    from headers.onepipe import SEALED_MIN, decode_sealed

    n = AuthNet()
    p1, p3 = Proc(1), Proc(3)
    t = 10 * MS
    n.send("tor2", "p-h3", p3.beacon(t), t)
    n.send("tor1", "p-h1", p1.frame(3, DATA, t, payload=b"hello"), t)
    n.run(t + 2 * T)
    frames = n.take("h3")
    data = next(f for f in frames if header(f).opcode is DATA)
    bcn = next(f for f in frames if header(f).opcode is BEACON)
    hdr, payload, trailer = decode_sealed(udp_payload(data))
    assert hdr.opcode is DATA and bytes(payload) == b"hello" and trailer == decode_trailer(data)
    hdr, payload, trailer = decode_sealed(udp_payload(bcn))
    assert hdr.opcode is BEACON and bytes(payload) == b"" and len(udp_payload(bcn)) == SEALED_MIN
    with pytest.raises(HeaderError):
        decode_sealed(udp_payload(bcn)[:-1])  # an unsealed beacon, or a cut one
    with pytest.raises(HeaderError):
        decode_sealed(udp_payload(data)[:24] + b"x" + udp_payload(bcn)[-TRAILER_LEN:], 0, 24)
    for f, body in ((data, b"hello"), (bcn, b"")):
        pkt = Ether(f)
        frag, auth = split_sealed(pkt)
        t_ = decode_trailer(f)
        assert frag == body and (auth.key_id, auth.era, auth.seq, auth.mac) == (t_.key_id, t_.era, t_.seq, t_.mac)
        assert pkt[OnePipe].opcode == header(f).opcode
    built = bytes(OnePipe(opcode=int(BEACON)) / NetstackAuth(key_id=1, era=2, seq=3, mac=b"m" * 8))
    assert decode_sealed(built)[2] == decode_trailer(built)
    with pytest.raises(ValueError):
        split_sealed(Ether(host_beacon(1, 40101, t)))


# --------------------------------------------------------------------------- the controller key


def test_controller_messages_are_sealed_both_ways_and_refused_when_not_genuine() -> None:
    ctl = ControllerAuth(CTL, controller_keys(RING, DOMAIN, WALL), 9, SIGNING, DOMAIN)
    p1, p2 = Proc(1, controller=CTL), Proc(2, controller=CTL)
    req = register_request(7, 0)
    sealed = p1.auth.seal(CTL, req)
    assert len(sealed) == len(req) + TRAILER_LEN and ctl.open(p1.addr, sealed) == req
    other = Proc(1, keys=ring(), controller=CTL).auth.seal(CTL, req)
    refused = {
        "replayed": [sealed],
        "forged": [sealed[:5] + b"\x01" + sealed[6:], other,
                   p2.auth.seal(CTL, req),  # p2's message passed off as p1's
                   p1.auth.seal(("10.0.0.3", 40101), req)],  # sealed with the domain key, for someone else
        "unknown_key": [req + bytes(TRAILER_LEN)],
        "truncated": [sealed[:10], req],
    }
    for frames in refused.values():
        for f in frames:
            assert ctl.open(p1.addr, f) is None
    c = ctl.counters()
    assert {k: c[k] for k in ("ok", *REASONS)} == {"ok": 1, "replayed": 1, "forged": 4, "unknown_key": 1,
                                                   "truncated": 2, "stale_era": 0}
    reply = register_reply(p1.addr, 1, 0, 7)
    back = ctl.seal(p1.addr, reply)
    assert p1.auth.open(CTL, back) == reply
    assert parse_register_reply(*decode_packet(reply)).incarnation == 1
    assert p1.auth.open(CTL, back) is None  # replayed
    assert p1.auth.open(CTL, p1.auth.seal(CTL, reply)) is None  # its own message reflected: forged
    assert p2.auth.open(CTL, back) is None  # sealed for p1
    assert p1.auth.open(CTL, reply) is None  # unsealed
    cc = p1.auth.counters()["controller"]
    # the reflected and the unsealed one are shorter than a header and a signed trailer
    assert (cc["ok"], cc["replayed"], cc["truncated"], cc["sealed"]) == (1, 1, 2, 2)
    assert p2.auth.counters()["controller"]["forged"] == 1


def test_a_member_cannot_act_as_the_controller() -> None:
    """Issue 34, finding 3: a member holds the key file (the domain and controller keys, and the
    controller's public key), not the controller's signing key. A FAILURE_NOTICE it makes naming
    another process is refused, however it seals it: with the controller key as a MAC (what every
    process could do before the fix), with era 2^32 - 2 (which then locked the victim out of every
    genuine controller message as stale_era), or signed with a key of its own. The controller's
    next genuine message is taken."""
    victim = Proc(2, controller=CTL)
    notice = failure_notice(Notice(("10.0.0.3", 40101), 1, 5, 77, False))
    mac_key = controller_keys(RING, DOMAIN, WALL)  # every member can derive it
    forged = [
        opauth.seal(Sealer(mac_key, 0xFFFFFFFE), opauth.context(opauth.K_FROM_CTL, CTL, victim.addr), notice),
        opauth.seal(Sealer(mac_key, 9), opauth.context(opauth.K_FROM_CTL, CTL, victim.addr), notice),
        ControllerAuth(CTL, mac_key, 0xFFFFFFFE, Ed25519PrivateKey.generate(), DOMAIN).seal(victim.addr, notice),
    ]
    for f in forged:
        assert victim.auth.open(CTL, f) is None
    genuine = ControllerAuth(CTL, mac_key, 9, SIGNING, DOMAIN)
    assert victim.auth.open(CTL, genuine.seal(victim.addr, notice)) == notice
    cc = victim.auth.counters()["controller"]
    assert cc["ok"] == 1 and cc["stale_era"] == 0 and cc["forged"] + cc["truncated"] == len(forged)
    # the genuine controller's message for another deployment (same addresses, same signing pair)
    other = ControllerAuth(CTL, mac_key, 10, SIGNING, DOMAIN + "x").seal(victim.addr, notice)
    assert victim.auth.open(CTL, other) is None


def _keyfile(tmp_path: Path) -> Path:
    path = tmp_path / "lab.keys"
    generate(path, now=WALL)
    ensure_signing_key(path)
    return path


@pytest.mark.asyncio
async def test_the_controller_daemon_opens_and_seals_with_the_controller_key(tmp_path: Path) -> None:
    """The daemon with the topology's key file: a sealed REGISTER is answered, sealed; an unsealed
    one and a replay are refused (the engine never sees them) and counted in its status."""
    keys = _keyfile(tmp_path)
    sw = FakeSwitch(tmp_path / "tor1.sock", None)
    await sw.server.start()
    cfg = ctlnode.ControllerConfig(
        name="ctl", ip="127.0.0.1", port=_udp_port(), params=OnePipeParams(),
        controller=ControllerParams.for_beacon(3_000_000),
        store=ctlnode.StoreConfig("sqlite", path=str(tmp_path / "store.sqlite3")),
        switches={"tor1": str(tmp_path / "tor1.sock")}, prefix=DOMAIN, keys=str(keys))
    assert ctlnode.parse_config(json.loads(json.dumps(cfg.to_json()))).keys == str(keys)
    store = SqliteStore(cfg.store.path, replica="ctl-r1")
    shell = daemon.ControllerShell(cfg, store, "ctl-r1")
    lead = asyncio.create_task(shell.lead())
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    me = ("127.0.0.1", sock.getsockname()[1])
    ctl_addr = (cfg.ip, cfg.port)
    auth = HostAuth(me, opauth.domain_keys(load(keys), DOMAIN, WALL), 5, controller=ctl_addr,
                    controller_keys=controller_keys(load(keys), DOMAIN, WALL),
                    controller_verify=load_verify_key(keys), deployment=DOMAIN)
    loop = asyncio.get_running_loop()
    try:
        await _until(lambda: shell.role == "leader")
        st_ = shell.ctl_status({})
        assert st_["auth"]["era"] >= int(WALL) and st_["auth"]["ok"] == 0
        await loop.sock_sendto(sock, register_request(1, 0), ctl_addr)  # unsealed
        sealed = auth.seal(ctl_addr, register_request(2, 0))
        await loop.sock_sendto(sock, sealed, ctl_addr)
        data = await asyncio.wait_for(loop.sock_recv(sock, 2048), 2.0)
        opened = auth.open(ctl_addr, data)
        assert opened is not None and decode_packet(opened)[0].psn == 2  # the answer to the sealed one
        await loop.sock_sendto(sock, sealed, ctl_addr)  # a replay
        await _until(lambda: shell.ctl_status({})["shell"]["datagrams_refused"] == 2)
        st_ = shell.ctl_status({})
        assert st_["auth"]["ok"] == 1 and st_["auth"]["replayed"] == 1 and st_["auth"]["refused"] == 2
        assert st_["auth"]["sealed"] >= 1 and len(st_["view"]["processes"]) == 1
    finally:
        lead.cancel()
        await asyncio.gather(lead, return_exceptions=True)
        await shell.close()
        await store.close()
        await sw.server.close()
        sock.close()


# --------------------------------------------------------------------------- an attacker on the links


class AttackerOnTheLinks(RuleBasedStateMachine):
    """h1's process beacons and sends DATA to h3's through tor1, spine1, tor2; the switches beacon
    each other. An attacker on h1's link and on the tor1-spine1 link replays, forges, truncates,
    reflects, delays, spoofs and seals with the wrong keys. Whatever it does: no crash; no register
    above what its genuine sender sent; every genuine frame taken once; every frame a port got
    counted once; h3 takes exactly the DATA h1 sent."""

    @initialize()
    def setup(self) -> None:
        self.n = AuthNet()
        self.p1, self.p3 = Proc(1), Proc(3)
        self.t = 10 * MS
        self.barrier = self.t
        self.sent: list[bytes] = []  # genuine frames of p1's, delivered or held
        self.delivered: set[bytes] = set()
        self.held: list[bytes] = []
        self.data = 0  # DATA p1 sent genuinely (delivered)
        self.opened_at_h3 = 0
        self.to_h3: list[bytes] = []  # barrier frames that reached h3 (the attacker's pool there)
        self.ep3 = Endpoint(PARAMS, self.p3.addr, self.t)  # h3's engine behind its opener
        self.n.send("tor2", "p-h3", self.p3.beacon(self.t), self.t)
        self._deliver(self._seal_beacon())

    # ------------------------------------------------------------------ genuine traffic
    def _seal_beacon(self) -> bytes:
        f = self.p1.beacon(self.barrier, commit=self.barrier - 1)
        self.sent.append(f)
        return f

    def _deliver(self, f: bytes) -> None:
        self.n.send("tor1", "p-h1", f, self.t)
        self.delivered.add(f)
        self._drain()

    def _drain(self) -> None:
        for f in self.n.take("h3"):
            try:
                u = parse_udp_frame(f)
            except HeaderError:
                continue  # a forged frame the switches took for something else and forwarded: no socket gets it
            if u.udp.dport != 40101:
                continue
            if header(f).opcode in BARRIER_OPCODES:
                self.to_h3.append(f)
            self._h3_receives(f)

    def _h3_receives(self, f: bytes) -> None:
        opened = self.p3.open(f)
        if opened is not None:
            u = parse_udp_frame(f)
            self.ep3.receive(opened, (ip_str(u.ip.src), u.udp.sport), self.t)
            self.opened_at_h3 += header(f).opcode is DATA

    @rule(dt=st.integers(0, 2 * MS), ahead=st.integers(0, 3 * MS))
    def beacon(self, dt: int, ahead: int) -> None:
        self.t += dt
        self.barrier = max(self.barrier, self.t + ahead)
        self._deliver(self._seal_beacon())

    @rule()
    def data_to_h3(self) -> None:
        f = self.p1.frame(3, DATA, self.barrier, psn=self.data, payload=b"m")
        self.sent.append(f)
        self.data += 1
        self._deliver(f)

    @rule(steps=st.integers(1, 3))
    def time_passes(self, steps: int) -> None:
        self.t += steps * T // 2
        self.n.send("tor2", "p-h3", self.p3.beacon(self.t), self.t)
        self.n.run(self.t)
        self._drain()

    @rule()
    def hold_one(self) -> None:
        """The attacker delays a genuine beacon (sent later: out of order, but genuine and new)."""
        self.held.append(self._seal_beacon())

    @rule(data=st.data())
    def release_one(self, data: st.DataObject) -> None:
        if self.held:
            self._deliver(self.held.pop(data.draw(st.integers(0, len(self.held) - 1))))

    # ------------------------------------------------------------------ attacks on h1's link
    # (on frames already delivered: a held one changed only where no MAC covers it, its Ethernet
    # addresses, is still that genuine frame, taken once; docs/onepipe.md says what is covered)
    def _attack(self, f: bytes, switch: str = "tor1", port: str = "p-h1") -> None:
        self.n.send(switch, port, f, self.t)
        self._drain()

    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        done = sorted(self.delivered)
        if done:
            self._attack(data.draw(st.sampled_from(done)))

    @rule(data=st.data(), at=st.integers(14, 200), value=st.integers(0, 255))
    def forge(self, data: st.DataObject, at: int, value: int) -> None:
        f = bytearray(data.draw(st.sampled_from(sorted(self.delivered))))
        at %= len(f)
        if f[at] != value:
            f[at] = value
            self._attack(bytes(f))

    @rule(data=st.data(), raise_by=st.integers(1, 10 * MS))
    def higher_barrier(self, data: st.DataObject, raise_by: int) -> None:
        """A genuine frame with its barriers raised, lengths and checksum made right."""
        f = data.draw(st.sampled_from(sorted(self.delivered)))
        body = bytearray(udp_payload(f))
        b = ts_from_ns(self.barrier + raise_by)
        body[6:12] = b.to_bytes(6, "big")
        body[12:18] = b.to_bytes(6, "big")
        self._attack(rebuilt(f, bytes(body)))

    @rule(data=st.data(), cut=st.integers(1, 40))
    def truncate(self, data: st.DataObject, cut: int) -> None:
        f = data.draw(st.sampled_from(sorted(self.delivered)))
        self._attack(rebuilt(f, udp_payload(f)[:-cut]))

    @rule(ahead=st.integers(1, 10 * MS), kid=st.sampled_from([1, 2]))
    def wrong_key_or_unsealed(self, ahead: int, kid: int) -> None:
        self._attack(Proc(1, keys=ring(kid)).beacon(self.barrier + ahead))
        self._attack(host_beacon(1, 40101, self.barrier + ahead, commit=self.barrier + ahead))

    @rule(data=st.data(), other=st.sampled_from([2, 3, 7]))
    def spoof(self, data: st.DataObject, other: int) -> None:
        f = data.draw(st.sampled_from(sorted(self.delivered)))
        self._attack(f[:26] + ip(other) + f[30:])

    @rule(junk=st.binary(min_size=0, max_size=80))
    def garbage_in_a_1pipe_datagram(self, junk: bytes) -> None:
        self._attack(build_udp_frame(mac(1), BCAST, ip(1), ip(255), 40101, 40100, junk))

    # ------------------------------------------------------------------ attacks on h3's link
    @rule(data=st.data(), at=st.integers(0, 120), value=st.integers(0, 255), raise_by=st.integers(1, 10 * MS))
    def at_h3(self, data: st.DataObject, at: int, value: int, raise_by: int) -> None:
        """Replays of what tor2 sent h3, those frames changed, and h1's own seal sent straight to h3."""
        if self.to_h3:
            f = data.draw(st.sampled_from(self.to_h3))
            self._h3_receives(f)
            g = bytearray(f)
            at = 42 + at % (len(g) - 42)  # (the UDP payload: what h3's socket hands over)
            if g[at] != value:
                g[at] = value
                self._h3_receives(bytes(g))
        self._h3_receives(self.p1.frame(3, BEACON, self.barrier + raise_by))

    # ------------------------------------------------------------------ attacks on tor1 - spine1
    @rule(data=st.data(), where=st.sampled_from([("tor1", "p-spine1"), ("spine1", "p-tor1"), ("spine1", "p-tor2"),
                                                 ("tor2", "p-spine1")]))
    def fabric_replay_or_reflect(self, data: st.DataObject, where: tuple[str, str]) -> None:
        seen = [f for sw, port, f in self.n.wire if (sw, port) in (("tor1", "p-spine1"), ("spine1", "p-tor1"))]
        if seen:
            self._attack(data.draw(st.sampled_from(seen)), *where)

    @rule(data=st.data(), at=st.integers(42, 120), value=st.integers(0, 255))
    def fabric_forge(self, data: st.DataObject, at: int, value: int) -> None:
        seen = [f for sw, port, f in self.n.wire if (sw, port) == ("spine1", "p-tor1")]
        if seen:
            f = bytearray(data.draw(st.sampled_from(seen)))
            at %= len(f)
            if f[at] != value:
                f[at] = value
                self._attack(bytes(f), "tor1", "p-spine1")

    # ------------------------------------------------------------------ what holds
    def _max_sent(self, switch: str, port: str) -> int | None:
        """The highest BE barrier ``switch`` sealed for ``port`` (what it forwarded unopened, a
        PREPARE or a forged frame it took for no 1Pipe frame, carries no barrier of its)."""
        bs = []
        for sw, p, f in self.n.wire:
            if (sw, p) != (switch, port):
                continue
            try:
                h = header(f)
            except HeaderError:
                continue
            if h.opcode in (BEACON, DATA):
                bs.append(ts_unwrap(h.be_barrier, self.t))
        return max(bs, default=None)

    @invariant()
    def no_register_above_what_its_sender_sent(self) -> None:
        agg, cagg = op.aggregator(self.n.sw["tor1"]), op.commit_aggregator(self.n.sw["tor1"])
        assert agg is not None and cagg is not None
        iid = ("p-h1", ip(1), 40101)
        r, cr = agg.r(iid), cagg.r(iid)
        assert r is not None and r <= self.barrier and (cr is None or cr <= self.barrier - 1)

    @invariant()
    def fabric_registers_hold(self) -> None:
        for (sw, port), (sender, sport) in ((("spine1", "p-tor1"), ("tor1", "p-spine1")),
                                            (("tor1", "p-spine1"), ("spine1", "p-tor1"))):
            agg = op.aggregator(self.n.sw[sw])
            assert agg is not None
            r, top = agg.r(port), self._max_sent(sender, sport)
            assert r is None or (top is not None and r <= top), (sw, port, r, top)

    @invariant()
    def h3s_barrier_is_one_tor2_sent(self) -> None:
        top = self._max_sent("tor2", "p-h3")
        b = self.ep3.barrier
        assert b is None or (top is not None and b <= top), (b, top)
        # every frame tor2 sealed for h3 opened once there, and nothing else as the ToR's
        assert self.p3.auth.counters()["tor"]["ok"] == self.n.auth("tor2", "p-h3")["sealed"]

    @invariant()
    def every_frame_counted_and_every_genuine_one_taken_once(self) -> None:
        a = self.n.auth("tor1", "p-h1")
        assert a["ok"] == len(self.delivered)
        for sw, port in (("tor1", "p-h1"), ("tor1", "p-spine1"), ("spine1", "p-tor1"), ("spine1", "p-tor2"),
                         ("tor2", "p-spine1")):
            assert accounted(self.n.counters(sw, port), self.n.auth(sw, port)), (sw, port)
        assert self.opened_at_h3 == self.data
        assert self.p3.auth.counters()["tor"]["stale_era"] == 0


TestAttackerOnTheLinks = AttackerOnTheLinks.TestCase
TestAttackerOnTheLinks.settings = settings(max_examples=60, stateful_step_count=30, deadline=None,
                                           suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- the clock-jump hook


def test_the_clock_file_gives_a_step_and_keeps_the_last_one_when_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "onepipe-clock-h1.json"
    assert read_clock_step(path, 5) == 0  # no file: no step
    path.write_text(json.dumps({"offset_ns": -20_000_000}))
    assert read_clock_step(path, 0) == -20_000_000
    for bad in ("{", "[1]", '{"offset_ns": 1.5}', '{"offset_ns": true}'):
        path.write_text(bad)
        assert read_clock_step(path, 7) == 7


def test_a_stepped_clock_jumps_ahead_at_once_and_stands_still_when_stepped_back() -> None:
    ep = OnePipeEndpoint(("127.0.0.1", 40101), clock=HostClock(0))
    t0 = ep.now()
    ep.set_clock(HostClock(50 * MS))
    ahead = ep.now()
    assert ahead >= t0 + 50 * MS
    ep.set_clock(HostClock(-50 * MS))
    assert ep.now() == ahead  # held: it never goes back (design topic §1)
    ep.close()

