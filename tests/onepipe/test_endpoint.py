"""The 1Pipe endpoint, rule by rule (netstack/onepipe/endpoint.py; design topics §1, §2, §5, §6,
§9 in docs/papers.md). Packets are built by hand and fed to one endpoint, or carried between
two endpoints by a tiny perfect ToR (:class:`Pair`)."""

from __future__ import annotations

import struct

import pytest

from headers.onepipe import OnePipeFlag, OnePipeHeader, OnePipeOpcode, beacon, decode_packet, ts_from_ns, ts_unwrap
from netstack.engine import Engine, SendTo
from netstack.onepipe.actions import Deliver, SendFail
from netstack.onepipe.endpoint import ACK_REPEATS, SOM, UPLINK, Endpoint, EndpointCounters, psn_unwrap, sender_key
from netstack.onepipe.params import OnePipeParams

T = 1000
P = OnePipeParams(t_beacon_ns=T, ack_timeout_ns=20 * T, mtu_payload=10, rwnd_packets=8, init_cwnd=4, min_cwnd=1,
                  send_buffer=4)
EOM = int(OnePipeFlag.EOM)
ECE = int(OnePipeFlag.ECE)
DATA, ACK, NAK, BEACON = OnePipeOpcode.DATA, OnePipeOpcode.ACK, OnePipeOpcode.NAK, OnePipeOpcode.BEACON
T0 = 1_000_000  # host time at the start of every test


def ident(a: object) -> int:
    if not isinstance(a, int):
        raise TypeError(f"not an address here: {a!r}")
    return a


#: the ToR's address in these tests (its beacons)
TOR = 999


def ep(me: int = 1, params: OnePipeParams = P, now: int = T0, *, joined: bool = True) -> Endpoint:
    """An endpoint; ``joined``: it has had its first barrier (a beacon from the ToR, at ``now``
    minus 1 ms), so it may send (nothing leaves before that)."""
    e = Endpoint(params, me, now, key=ident)
    if joined:
        e.receive(bcn(now - 1_000_000), TOR, now)
        e.c.beacons_received = e.c.barrier_updates = 0
        e.actions.take_all()
    return e


def data(ts: int, psn: int, payload: bytes = b"m", flags: int = SOM | EOM, barrier: int | None = None) -> bytes:
    b = ts if barrier is None else barrier
    return OnePipeHeader(ts_from_ns(ts), ts_from_ns(b), 0, psn & 0xFFFFFFFF, DATA, flags).to_bytes() + payload


def bcn(barrier: int) -> bytes:
    return beacon(ts_from_ns(barrier), 0).to_bytes()


def ack(psn: int, bitmap: bytes = b"", flags: int = 0, barrier: int = T0) -> bytes:
    return OnePipeHeader(ts_from_ns(barrier), ts_from_ns(barrier), 0, psn & 0xFFFFFFFF, ACK, flags).to_bytes() + bitmap


def nak(psn: int, count: int = 1, barrier: int = T0) -> bytes:
    body = struct.pack("!I", count) if count > 1 else b""
    return OnePipeHeader(ts_from_ns(barrier), ts_from_ns(barrier), 0, psn, NAK, 0).to_bytes() + body


def sent(e: Endpoint, kind: OnePipeOpcode | None = None) -> list[tuple[object, OnePipeHeader, bytes]]:
    """The datagrams ``e`` sends (of one opcode: the others stay queued), decoded, taken:
    (dst, header, payload)."""
    out, keep = [], []
    for a in e.actions.take_all():
        if isinstance(a, SendTo):
            hdr, payload = decode_packet(a.data)
            if kind is None or hdr.opcode is kind:
                out.append((a.dst, hdr, bytes(payload)))
                continue
        keep.append(a)
    e.actions.extend(keep)
    return out


def delivered(e: Endpoint) -> list[tuple[int, object, bytes]]:
    return [(a.ts, a.src, a.msg) for a in e.actions.take(Deliver)]


def failed(e: Endpoint) -> list[tuple[int, object, bytes]]:
    return [(a.ts, a.dst, a.msg) for a in e.actions.take(SendFail)]


class Pair:
    """Endpoints behind a perfect ToR: every packet arrives at once, with be_barrier = the min
    of the endpoints' latest advertised barriers; beacons are consumed."""

    def __init__(self, n: int = 2, params: OnePipeParams = P, now: int = T0) -> None:
        self.eps = {i: ep(i, params, now) for i in range(1, n + 1)}
        self.adv = dict.fromkeys(self.eps, now - 10**6)
        self.now = now
        self.log: dict[int, list[tuple[int, object, bytes]]] = {i: [] for i in self.eps}
        self.fails: dict[int, list[tuple[int, object, bytes]]] = {i: [] for i in self.eps}
        self.drop: set[OnePipeOpcode] = set()

    def pump(self) -> None:
        moved = True
        while moved:
            moved = False
            for i, e in self.eps.items():
                for a in e.actions.take_all():
                    moved = True
                    if isinstance(a, Deliver):
                        self.log[i].append((a.ts, a.src, a.msg))
                    elif isinstance(a, SendFail):
                        self.fails[i].append((a.ts, a.dst, a.msg))
                    elif isinstance(a, SendTo):
                        self._carry(i, a.dst, a.data)

    def _carry(self, i: int, dst: object, datagram: bytes) -> None:
        hdr, _ = decode_packet(datagram)
        self.adv[i] = max(self.adv[i], ts_unwrap(hdr.be_barrier, self.now))
        if dst == UPLINK or hdr.opcode in self.drop:
            return
        buf = bytearray(datagram)
        buf[6:12] = ts_from_ns(min(self.adv.values())).to_bytes(6, "big")
        assert isinstance(dst, int)
        self.eps[dst].receive(bytes(buf), i, self.now)

    def advance(self, to: int) -> None:
        """Run every endpoint's timers, and the ToR's beacons (every T, half-way between the
        endpoints' ticks), up to host time ``to`` (all clocks equal)."""
        while True:
            tor = (self.now + T // 2) // T * T + T // 2
            tor = tor if tor > self.now else tor + T
            due = min((e.next_deadline() or to + 1, i) for i, e in self.eps.items())
            if min(due[0], tor) > to:
                break
            if tor < due[0]:
                self.now = tor
                for e in self.eps.values():
                    e.receive(bcn(min(self.adv.values())), "tor", self.now)
            else:
                self.now = max(self.now, due[0])
                self.eps[due[1]].on_timer(self.now)
            self.pump()
        self.now = to


# ---------------------------------------------------------------------------- API and helpers


def test_sender_key_orders_by_ip_then_port_and_ints_are_their_own_key():
    assert sender_key(("10.0.0.1", 5)) == (0x0A000001 << 16) | 5
    assert sender_key(("10.0.0.1", 5)) < sender_key(("10.0.0.1", 6)) < sender_key(("10.0.0.2", 0))
    assert sender_key(42) == 42
    for bad in (("10.0.0.1", 70000), ("nope", 1), "uplink", (1, 2, 3)):
        with pytest.raises(ValueError):
            sender_key(bad)


def test_psn_unwrap_is_nearest_to_the_reference():
    assert psn_unwrap(5, 10) == 5
    assert psn_unwrap(3, (1 << 32) - 2) == (1 << 32) + 3
    assert psn_unwrap((1 << 32) - 1, (1 << 32) + 4) == (1 << 32) - 1


def test_endpoint_keeps_the_engine_contract_and_exports_its_counters():
    e: Engine = ep()
    c = e.counters()
    names = {f for f in EndpointCounters.__dataclass_fields__}
    assert names <= set(c) and {"barrier", "delivered_barrier", "queued", "inflight_packets",
                                "buffered_packets"} <= set(c)
    for required in ("scatterings_sent", "messages_sent", "packets_sent", "bytes_sent", "beacons_sent", "acks_sent",
                     "naks_sent", "send_buffer_full", "messages_delivered", "packets_received", "late_dropped",
                     "messages_lost", "send_failed", "acks_received", "naks_received", "malformed", "foreign",
                     "barrier_backwards", "window_waits"):
        assert required in names
    assert e.next_deadline() == T0 + T  # the first beacon tick


# ---------------------------------------------------------------------------- sender


def test_nothing_leaves_before_the_first_barrier():
    """Design topic §4: a process joins by its beacons; until the ToR answers with a barrier it
    does not know where the order stands, so its scatterings wait (and are stamped after)."""
    e = ep(joined=False)
    assert e.send([(2, b"x")], T0 + 5) == 0
    assert sent(e) == [] and e.c.join_waits == 1 and e.queued == 1
    e.receive(bcn(T0 + 50), TOR, T0 + 60)
    (d, h, p), = sent(e)
    assert d == 2 and p == b"x" and h.msg_ts == T0 + 60  # its own clock, above the barrier


def test_a_scattering_is_fragmented_per_destination_and_every_packet_carries_one_ts():
    e = ep()
    seq = e.send([(2, b"a" * 25), (3, b"b"), (2, b"")], T0 + 7)
    assert seq == 0
    pkts = sent(e)
    assert [(d, h.psn, h.flags, p) for d, h, p in pkts] == [
        (2, 0, SOM, b"a" * 10), (2, 1, 0, b"a" * 10), (2, 2, EOM, b"a" * 5),
        (3, 0, SOM | EOM, b"b"),
        (2, 3, SOM | EOM, b""),
    ]
    assert {h.msg_ts for _, h, _ in pkts} == {ts_from_ns(T0 + 7)}
    assert all(h.be_barrier == h.msg_ts and h.opcode is DATA and h.commit_barrier == 0 for _, h, _ in pkts)
    assert (e.c.scatterings_sent, e.c.messages_sent, e.c.packets_sent) == (1, 3, 5)
    assert e.advertised_barrier == T0 + 7
    assert e.send([(3, b"c")], T0 + 9) == 1


def test_ts_never_goes_below_a_ts_stamped_or_a_barrier_advertised():
    e = ep()
    e.send([(2, b"x")], T0 + 500)
    e.send([(2, b"y")], T0 + 100)  # a shell whose clock went back: ignored
    e.on_timer(T0 + T)  # the data carried T0 + 500: the tick's value still goes up
    (_, b1, _), = sent(e, BEACON)
    assert b1.be_barrier == T0 + T
    e.on_timer(T0 + 2 * T)
    (_, b, _), = sent(e, BEACON)
    e.send([(2, b"z")], T0 + 2 * T)
    ts = [h.msg_ts for _, h, _ in sent(e, DATA)]
    assert ts == [T0 + 500, T0 + 500, T0 + 2 * T] and b.be_barrier == T0 + 2 * T


def test_bad_scatterings_are_programmer_errors():
    e = ep()
    with pytest.raises(ValueError):
        e.send([], T0)
    with pytest.raises(ValueError):
        e.send([(UPLINK, b"x")], T0)
    with pytest.raises(ValueError):
        e.send([(2, b"x" * (P.mtu_payload * P.rwnd_packets + 1))], T0)  # never fits a receive buffer
    assert e.c.scatterings_sent == 0 and e.queued == 0


def test_a_full_send_buffer_fails_the_send_at_once():
    e = ep(params=P.with_(init_cwnd=1))
    results = [e.send([(2, b"x")], T0) for _ in range(P.send_buffer + 3)]
    assert results[:P.send_buffer + 1] == list(range(P.send_buffer + 1))  # one left, 4 wait
    assert results[P.send_buffer + 1:] == [None, None]
    assert e.c.send_buffer_full == 2 and e.queued == P.send_buffer


def test_the_window_holds_a_scattering_until_an_ack_frees_credit():
    e = ep(params=P.with_(init_cwnd=3))
    e.send([(2, b"x" * 20)], T0)  # 2 packets
    e.send([(2, b"y" * 20)], T0)  # 2 more: only 1 credit left, it waits and keeps it
    assert len(sent(e, DATA)) == 2 and e.queued == 1 and e.c.window_waits == 1
    e.receive(ack(1), 2, T0 + 10)  # one packet settled: now it fits
    assert [h.psn for _, h, _ in sent(e, DATA)] == [2, 3]
    assert e.queued == 0 and e.counters()["inflight_packets"] == 3


def test_a_waiting_scattering_keeps_its_credits_and_the_ones_behind_it_wait():
    """Design topic §9: no live-lock. The head holds its credit for 3 while 2 is congested,
    and a later scattering to 3 alone does not overtake it (per-sender FIFO)."""
    e = ep(params=P.with_(init_cwnd=1))
    e.send([(2, b"a")], T0)
    e.send([(2, b"b"), (3, b"c")], T0)  # 2 is full: waits, holding 3's credit
    e.send([(3, b"d")], T0)  # would fit 3's window alone, but must wait behind
    assert [(d, p) for d, _, p in sent(e, DATA)] == [(2, b"a")]
    assert e.queued == 2
    e.receive(ack(1), 2, T0 + 5)
    out = [(d, p) for d, _, p in sent(e, DATA)]
    assert out == [(2, b"b"), (3, b"c")]  # 3 now has 1 in flight: d waits for it
    e.receive(ack(1), 3, T0 + 6)
    assert [(d, p) for d, _, p in sent(e, DATA)] == [(3, b"d")]


def test_a_message_larger_than_cwnd_goes_alone_on_an_idle_connection():
    e = ep(params=P.with_(init_cwnd=1))
    e.send([(2, b"z" * 30)], T0)  # 3 packets > cwnd 1, <= rwnd
    assert len(sent(e, DATA)) == 3
    e.send([(2, b"q" * 30)], T0)
    assert not sent(e, DATA)
    e.receive(ack(3), 2, T0 + 1)
    assert len(sent(e, DATA)) == 3


def test_an_ack_settles_below_its_point_and_a_nak_fails_the_message_once():
    e = ep()
    e.send([(2, b"a")], T0)
    e.send([(2, b"b" * 15)], T0 + 1)  # psn 1, 2
    sent(e)
    e.receive(nak(2), 2, T0 + 10)
    assert failed(e) == [(T0 + 1, 2, b"b" * 15)]
    e.receive(nak(1), 2, T0 + 11)  # the same message again: once only
    e.receive(ack(3, bytes([0b011])), 2, T0 + 12)  # psn 1 and 2 given up, 0 delivered
    assert failed(e) == [] and e.c.send_failed == 1 and e.c.messages_acked == 1
    assert e.counters()["inflight_packets"] == 0
    assert not sent(e, DATA)  # best effort never retransmits


def test_the_ack_bitmap_fails_a_message_whose_nak_was_lost():
    e = ep()
    e.send([(2, b"a")], T0)
    e.send([(2, b"b")], T0)
    e.send([(2, b"c")], T0)
    e.receive(ack(3, bytes([0b010])), 2, T0 + 10)  # bit 1 = psn 3-1-1 = 1
    assert failed(e) == [(T0, 2, b"b")] and e.c.messages_acked == 2


def test_an_unacked_packet_fails_its_message_after_ack_timeout():
    e = ep()
    e.send([(2, b"a")], T0)
    e.send([(3, b"b")], T0 + 5 * T)
    sent(e)
    assert e.next_deadline() == T0 + T
    e.receive(ack(1), 3, T0 + 6 * T)  # 3 answered; 2 never does
    while (due := e.next_deadline()) is not None and due <= T0 + P.ack_timeout_ns:
        e.on_timer(due)
    assert failed(e) == [(T0, 2, b"a")]
    assert e.c.send_timeouts == 1 and e.counters()["inflight_packets"] == 0


def test_dctcp_cuts_once_per_window_on_ece_and_grows_one_packet_per_clean_window():
    e = ep(params=P.with_(init_cwnd=4, dctcp_g=0.5))
    tx = e._tx_conn(2)
    for _ in range(4):
        e.send([(2, b"x")], T0)
    e.receive(ack(1, flags=ECE), 2, T0 + 1)  # alpha starts at 1: halve
    assert tx.cwnd == 2 and e.c.cwnd_cuts == 1
    e.receive(ack(2, flags=ECE), 2, T0 + 2)  # same window: no second cut
    assert tx.cwnd == 2
    e.receive(ack(4), 2, T0 + 3)
    e.send([(2, b"y")], T0 + 3)
    e.receive(ack(5), 2, T0 + 4)  # a clean window ends: +1
    assert tx.cwnd == 3
    assert 0 < tx.alpha < 1
    for _ in range(50):  # marks on every packet: cwnd floors at min_cwnd
        e.send([(2, b"z")], T0 + 5)
        e.receive(ack(tx.next_psn, flags=ECE), 2, T0 + 5)
    assert tx.cwnd >= P.min_cwnd and tx.cwnd < 1.5


# ---------------------------------------------------------------------------- beacons


def test_beacons_go_at_multiples_of_t_beacon_unless_a_packet_took_the_ticks_value_up():
    e = ep(now=T0 + 300)
    assert e.next_deadline() == T0 + T
    e.on_timer(T0 + T)
    (dst, b, payload), = sent(e)
    assert dst == UPLINK and b.opcode is BEACON and b.be_barrier == T0 + T and payload == b""
    e.send([(2, b"x")], T0 + T + 10)
    e.on_timer(T0 + 2 * T)  # data left in this interval, but with an older barrier: a beacon
    (_, b, _), = sent(e, BEACON)
    assert b.be_barrier == T0 + 2 * T
    e.send([(2, b"y")], T0 + 3 * T)  # data at the tick itself carries the tick's value: no beacon
    e.on_timer(T0 + 3 * T)
    assert not sent(e, BEACON)
    e.on_timer(T0 + 4 * T + 200)  # a late timer: one beacon, next tick on the grid
    (_, b, _), = sent(e, BEACON)
    assert b.be_barrier == T0 + 4 * T + 200 and e.next_deadline() == T0 + 5 * T
    assert e.c.beacons_sent == 3


def test_packets_to_ourselves_do_not_stand_in_for_a_beacon():
    """The shell may loop them back inside the host: the ToR never sees their barrier."""
    e = ep()
    e.send([(1, b"self")], T0 + 10)
    e.on_timer(T0 + T)
    assert [d for d, _, _ in sent(e)] == [1, UPLINK]


# ---------------------------------------------------------------------------- receiver


def test_messages_below_the_barrier_are_delivered_in_ts_sender_order():
    r = ep(1)
    r.receive(data(T0 + 50, 0, b"late-ts", barrier=0), 3, T0 + 100)
    r.receive(data(T0 + 20, 0, b"early", barrier=0), 4, T0 + 100)
    r.receive(data(T0 + 20, 0, b"tie", barrier=0), 2, T0 + 100)  # same ts: lower key first
    assert delivered(r) == []
    r.receive(bcn(T0 + 50), "tor", T0 + 200)  # ts 50 is *at* the barrier: not yet
    assert delivered(r) == [(T0 + 20, 2, b"tie"), (T0 + 20, 4, b"early")]
    assert r.delivered_barrier == T0 + 50
    r.receive(bcn(T0 + 51), "tor", T0 + 200)
    assert delivered(r) == [(T0 + 50, 3, b"late-ts")]
    acks = sent(r, ACK)
    assert sorted((d, h.psn) for d, h, _ in acks) == [(2, 1), (3, 1), (4, 1)]


def test_the_barrier_comes_from_data_acks_naks_and_beacons_and_never_goes_back():
    r = ep(1)
    r.receive(data(T0 + 10, 0, barrier=T0 + 5), 2, T0 + 100)
    assert r.barrier == T0 + 5
    r.receive(ack(0, barrier=T0 + 8), 3, T0 + 100)
    assert r.barrier == T0 + 8 and r.c.foreign == 1  # an ACK for nothing we sent
    r.receive(bcn(T0 + 7), "tor", T0 + 100)
    assert r.barrier == T0 + 8 and r.c.barrier_backwards == 1
    r.receive(bcn(T0 + 11), "tor", T0 + 100)
    assert delivered(r) == [(T0 + 10, 2, b"m")]


def test_a_packet_from_ourselves_does_not_move_the_barrier():
    r = ep(1)
    r.receive(bcn(T0 + 5), "tor", T0 + 100)
    r.receive(data(T0 + 50, 0), 1, T0 + 100)  # our own message, looped back with our barrier
    assert r.barrier == T0 + 5 and delivered(r) == []
    r.receive(bcn(T0 + 60), "tor", T0 + 100)
    assert delivered(r) == [(T0 + 50, 1, b"m")]


def test_delivery_waits_for_the_receivers_clock_to_pass_ts():
    """Causality (design topic §1): a sender whose clock runs ahead is delivered only once ours
    has passed its ts."""
    r = ep(1)
    r.receive(data(T0 + 500, 0, barrier=0), 2, T0 + 100)
    r.receive(bcn(T0 + 900), "tor", T0 + 100)
    assert delivered(r) == [] and r.next_deadline() == T0 + 501 and r.c.clock_waits == 1
    r.on_timer(T0 + 500)
    assert delivered(r) == []
    r.on_timer(T0 + 501)
    assert delivered(r) == [(T0 + 500, 2, b"m")]
    assert r.delivered_barrier == T0 + 501


def test_fragments_are_reassembled_whatever_their_arrival_order():
    r = ep(1)
    r.receive(data(T0 + 1, 2, b"c", EOM, barrier=0), 2, T0 + 100)
    r.receive(data(T0 + 1, 0, b"a", SOM, barrier=0), 2, T0 + 100)
    r.receive(bcn(T0 + 2), "tor", T0 + 100)
    assert delivered(r) == []  # psn 1 missing: wait? no, ts < barrier: it can no longer come
    assert r.c.messages_lost == 1 and [(h.psn, p) for _, h, p in sent(r, NAK)] == [(0, struct.pack("!I", 3))]
    r2 = ep(1)
    for psn, frag, fl in ((2, b"c", EOM), (0, b"a", SOM), (1, b"b", 0)):
        r2.receive(data(T0 + 1, psn, frag, fl, barrier=0), 2, T0 + 100)
    r2.receive(bcn(T0 + 2), "tor", T0 + 100)
    assert delivered(r2) == [(T0 + 1, 2, b"abc")]


def test_a_missing_psn_below_a_delivered_message_is_naked_and_acked_as_given_up():
    r = ep(1)
    r.receive(data(T0 + 1, 0, b"a", barrier=0), 2, T0 + 100)
    r.receive(data(T0 + 3, 2, b"c", barrier=0), 2, T0 + 100)  # psn 1 lost on the way
    r.receive(bcn(T0 + 10), "tor", T0 + 100)
    assert delivered(r) == [(T0 + 1, 2, b"a"), (T0 + 3, 2, b"c")]
    naks = sent(r)
    assert [(h.opcode, h.psn, p) for _, h, p in naks] == [(NAK, 1, b""), (ACK, 3, bytes([0b010]))]
    assert r.c.messages_lost == 1 and r.c.psns_given_up == 1


def test_a_message_whose_first_fragment_was_lost_is_dropped_and_the_next_one_delivered():
    r = ep(1)
    r.receive(data(T0 + 1, 1, b"b", EOM, barrier=0), 2, T0 + 100)  # psn 0 (SOM) lost
    r.receive(data(T0 + 1, 2, b"n", SOM | EOM, barrier=0), 2, T0 + 100)  # same ts, next message
    r.receive(bcn(T0 + 2), "tor", T0 + 100)
    assert delivered(r) == [(T0 + 1, 2, b"n")]
    assert [(h.psn, p) for _, h, p in sent(r, NAK)] == [(0, struct.pack("!I", 2))]  # one run, one NAK
    assert r.c.psns_given_up == 2 and r.c.messages_lost == 1


def test_data_below_the_delivered_barrier_is_dropped_and_naked():
    r = ep(1)
    r.receive(bcn(T0 + 50), "tor", T0 + 100)
    r.receive(data(T0 + 40, 3, b"late", barrier=0), 2, T0 + 100)  # psn 0-2 never came either
    assert delivered(r) == [] and r.c.late_dropped == 1
    pkts = sent(r)
    assert [(h.opcode, h.psn, p) for _, h, p in pkts] == [(NAK, 0, struct.pack("!I", 4)), (ACK, 4, b"\x0f")]
    r.receive(data(T0 + 40, 3, b"late", barrier=0), 2, T0 + 100)  # its duplicate: settled already
    assert r.c.duplicates == 1 and not sent(r, NAK)


def test_duplicates_are_delivered_once():
    r = ep(1)
    for _ in range(3):
        r.receive(data(T0 + 1, 0, b"x", barrier=0), 2, T0 + 100)
    r.receive(bcn(T0 + 5), "tor", T0 + 100)
    r.receive(data(T0 + 1, 0, b"x", barrier=0), 2, T0 + 100)
    assert delivered(r) == [(T0 + 1, 2, b"x")] and r.c.duplicates == 3


def test_acks_are_cumulative_coalesced_repeated_and_echo_ce():
    r = ep(1)
    r.receive(data(T0 + 1, 0, barrier=0), 2, T0 + 100, ce=True)
    r.receive(data(T0 + 2, 1, barrier=0), 2, T0 + 100)
    r.receive(data(T0 + 3, 2, barrier=0), 2, T0 + 100)
    assert not sent(r, ACK)  # nothing settled yet
    r.receive(bcn(T0 + 10), "tor", T0 + 150)
    (dst, h, payload), = sent(r, ACK)  # one ACK for three messages
    assert dst == 2 and h.psn == 3 and h.flags == ECE and payload == b""
    assert h.be_barrier == h.msg_ts == T0 + 150  # our own barrier: our clock
    for k in range(ACK_REPEATS + 2):
        r.on_timer(T0 + (k + 1) * T)
    repeats = sent(r, ACK)
    assert [(x.psn, x.flags) for _, x, _ in repeats] == [(3, ECE)] * ACK_REPEATS
    r.receive(data(T0 + 11, 3, barrier=T0 + 12), 2, T0 + 5 * T)
    (_, h, _), = sent(r, ACK)
    assert h.psn == 4 and h.flags == 0


@pytest.mark.parametrize("repeats", [0, 1, 2, 3])
def test_ack_repeats_sends_exactly_that_many_repeats_and_zero_none(monkeypatch: pytest.MonkeyPatch, repeats: int):
    # ACK_REPEATS = 0 used to send one repeat: the entry was stored and sent before being counted down
    monkeypatch.setattr("netstack.onepipe.endpoint.ACK_REPEATS", repeats)
    r = ep(1)
    r.receive(data(T0 + 1, 0, barrier=0), 2, T0 + 100)
    r.receive(bcn(T0 + 10), "tor", T0 + 150)
    assert [h.psn for _, h, _ in sent(r, ACK)] == [1]  # the ACK itself
    for k in range(repeats + 3):
        r.on_timer(T0 + (k + 1) * T)
    assert [h.psn for _, h, _ in sent(r, ACK)] == [1] * repeats
    assert (r.c.acks_sent, r.c.ack_repeats) == (1 + repeats, repeats)


def test_the_receive_buffer_is_bounded_by_rwnd_and_a_refused_packet_is_never_delivered():
    r = ep(1)
    for psn in range(1, P.rwnd_packets + 3):  # psn 0 missing: nothing can be delivered yet
        r.receive(data(T0 + 5, psn, barrier=0), 2, T0 + 100)
    assert r.c.rx_buffer_full == 2 and r._rx[2].npkts == P.rwnd_packets
    refused = [h.psn for _, h, _ in sent(r, NAK)]
    assert refused == [P.rwnd_packets + 1, P.rwnd_packets + 2]
    r.receive(data(T0 + 5, P.rwnd_packets + 1, barrier=0), 2, T0 + 100)  # a copy of a refused one
    assert r.c.duplicates == 1
    r.receive(bcn(T0 + 6), "tor", T0 + 100)
    got = delivered(r)
    assert len(got) == P.rwnd_packets and r._rx[2].npkts == 0 and r._rx[2].nrefused == 0
    (_, a, bitmap), = sent(r, ACK)
    assert a.psn == P.rwnd_packets + 3 and bitmap == bytes([0b011])  # the two refused; psn 0 fell out


def test_a_far_future_packet_that_keeps_being_overtaken_does_not_grow_the_heap():
    r = ep(1)
    r.receive(data(T0 + 10**12, 1000, barrier=0), 2, T0)  # parked until the barrier reaches it
    for psn in range(500):
        r.receive(data(T0 + psn, psn, barrier=T0 + psn), 2, T0 + psn + 1)
    assert len(delivered(r)) == 499 and len(r._heap) <= 2 * len(r._rx) + 64


def test_garbage_is_counted_and_never_raises():
    r = ep(1)
    r.send([(2, b"x")], T0)
    r.receive(b"", 2, T0)
    r.receive(b"\x00" * 23, 2, T0)
    r.receive(b"\x00" * 22 + b"\xee\x00", 2, T0)  # unknown opcode
    r.receive(beacon(0, 0).to_bytes() + b"x", "tor", T0)  # a beacon with a payload
    assert r.c.malformed == 4
    r.receive(OnePipeHeader(0, 0, 0, 0, OnePipeOpcode.PREPARE).to_bytes(), 2, T0)
    r.receive(ack(0), 9, T0)  # nothing sent to 9
    assert r.c.foreign == 2
    r.receive(ack(5), 2, T0)  # beyond what was sent
    r.receive(nak(7), 2, T0)
    r.receive(nak(0) + b"xy", 2, T0)
    assert r.c.bogus_acks == 2 and r.c.malformed == 5
    r.receive(data(T0, 0), ("not", "an", "address"), T0)  # the key function refuses it
    assert r.c.foreign == 3


# ---------------------------------------------------------------------------- end to end


def test_two_endpoints_deliver_a_scattering_in_one_order_and_learn_every_fate():
    net = Pair(3)
    net.eps[1].send([(2, b"one" * 5), (3, b"uno"), (1, b"self")], T0 + 10)
    net.eps[2].send([(3, b"two"), (1, b"dos")], T0 + 10)
    net.pump()
    net.advance(T0 + 3 * T)
    assert [m for _, _, m in net.log[3]] == [b"uno", b"two"]  # equal ts: key 1 before key 2
    assert [m for _, _, m in net.log[1]] == [b"self", b"dos"]
    assert net.log[2] == [(T0 + 10, 1, b"one" * 5)]
    assert all(e.c.messages_acked == e.c.messages_sent for e in net.eps.values())
    assert all(e.counters()["inflight_packets"] == 0 for e in net.eps.values())


def test_a_lost_naks_message_still_fails_through_the_ack_bitmap_end_to_end():
    net = Pair(2)
    net.drop = {NAK}
    e1, e2 = net.eps[1], net.eps[2]
    e1.send([(2, b"a")], T0 + 10)
    net.eps[1].actions.take_all()  # psn 0 lost in the network
    e1.send([(2, b"b")], T0 + 20)
    net.pump()
    net.advance(T0 + 3 * T)
    assert net.log[2] == [(T0 + 20, 1, b"b")]
    assert net.fails[1] == [(T0 + 10, 2, b"a")] and e1.c.send_timeouts == 0
    assert e2.c.naks_sent == 1 and e1.c.naks_received == 0


def test_psns_wrap_around_2_to_the_32():
    net = Pair(2)
    start = (1 << 32) - 2
    net.eps[1]._tx_conn(2).una = start
    rx = net.eps[2]._rx_conn(1)
    assert rx is not None
    rx.cum = start
    net.eps[1].send([(2, b"w" * 45)], T0 + 10)  # 5 fragments: psn 2^32-2 .. 2^32+2
    psns = [OnePipeHeader.from_bytes(a.data).psn for a in net.eps[1].actions.pending(SendTo)]
    assert psns == [(1 << 32) - 2, (1 << 32) - 1, 0, 1, 2]
    net.eps[1].send([(2, b"v" * 45)], T0 + 20)
    net.pump()
    net.advance(T0 + 5 * T)
    assert [(src, m) for _, src, m in net.log[2]] == [(1, b"w" * 45), (1, b"v" * 45)]
    assert net.log[2][0][0] == T0 + 10 and net.log[2][1][0] > T0 + T  # stamped after its wait for credit
    assert net.eps[1]._tx[2].una == (1 << 32) + 8 and not net.fails[1]


def test_timestamps_wrap_around_2_to_the_48():
    now = (1 << 48) - 2 * T
    net = Pair(2, now=now)
    net.eps[1].send([(2, b"before")], now + 10)
    net.pump()
    net.advance(now + 3 * T)
    net.eps[1].send([(2, b"after")], now + 3 * T)
    net.pump()
    net.advance(now + 6 * T)
    assert net.log[2] == [(now + 10, 1, b"before"), (now + 3 * T, 1, b"after")]
    assert net.eps[2].barrier is not None and net.eps[2].barrier > 1 << 48


def test_a_barrier_far_ahead_of_our_clock_is_ignored_and_counted():
    e = ep()
    e.receive(bcn(T0 + 10), TOR, T0 + 20)
    e.receive(bcn(T0 + 20 + P.max_ahead_ns + 1), TOR, T0 + 20)
    assert e.barrier == T0 + 10 and e.c.barrier_ahead == 1
