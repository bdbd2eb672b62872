"""Forged ACKs and stray datagrams (docs/security.md#tc-sack): one regression test per finding of
the probe, each of which failed before the fix, and the checks behind them one by one.

1. a forged ``ack_seq`` far ahead made every genuine ACK after it look stale (the transfer stalled);
2. a forged ``cum_ack`` ended the sender early;
3. any packet flagged LAST set the receiver's end of stream;
4. the receivers sent their ACKs to the source of the last datagram, even another flow's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import threading
import time

import pytest

from headers.tcsack import SEQ_MASK, TcsAck, TcsAckFlag, TcsData, TcsDataFlag
from netstack.sim.network import Network
from netstack.sim.transport import EngineSender
from netstack.tcsack import ENGINES, TcsParams, TcsReceiver, TcsSender
from netstack.tcsack import live as tcs_live
from netstack.tcsack.common import us32
from netstack.tcsack.simhosts import PORT, EngineReceiver
from netstack.topo.model import topology_from_dict

from .harness import EVIL, SND, T0, Path

P = TcsParams(rate_bps=10_000_000, t_ns=1_000_000, n=4, payload=100)
SLOT = P.packet_ns(112)


def _sent(s, count: int) -> list[TcsData]:
    """Poll ``s`` slot by slot until it has sent ``count`` packets; their headers."""
    out: list[TcsData] = []
    t = T0
    while len(out) < count:
        out += [TcsData.from_bytes(d) for d in s.poll(t)]
        t += SLOT
    return out


def _state(s) -> tuple:
    """Everything an ACK may change in a sender (``checks``, the drop counters, aside)."""
    sacked = s._sacked.runs() if hasattr(s, "_sacked") else None
    return (s.cum, s._newest_ack, s._ack_clock if hasattr(s, "_ack_clock") else s._progress_ns,
            s.rtt_latest_us, s.srtt_us, sacked, s.done_ns, s.c.acks_rx, s.next_deadline(),
            getattr(s, "_next", None), list(getattr(s, "_retx", ())))


def _lossy(seed: int, loss: float):
    import random

    rnd = random.Random(seed).random
    return lambda i: (rnd() < loss, False, 0)


# ------------------------------------------------------------------------------------------------
# finding 1: ack_seq far ahead
@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding1_an_ack_seq_far_ahead_is_dropped_and_genuine_acks_still_count(kind):
    s = ENGINES[kind][0](P, bytes(1000), now_ns=T0)
    sent = _sent(s, 6)
    s.on_ack(TcsAck(0, 0, 2, sent[1].tsval), T0 + 6 * SLOT)
    before = _state(s)
    forged = TcsAck(0, (0 + (1 << 31) - 1) & SEQ_MASK, 2, sent[1].tsval)
    s.on_ack(forged, T0 + 6 * SLOT)
    assert _state(s) == before and s.checks.ack_seq_ahead == 1
    s.on_ack(TcsAck(0, 1, 4, sent[3].tsval), T0 + 7 * SLOT)  # the receiver's next ACK
    assert s.cum == s.base + 4 and s.c.stale_acks == 0


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding1_a_transfer_does_not_stall_after_forged_acks_far_ahead(kind):
    p = TcsParams(rate_bps=20_000_000, t_ns=500_000, n=4, payload=200)
    path = Path(kind, p, bytes(range(256)) * 40, fwd=_lossy(1, 0.05), rev=_lossy(2, 0.05))

    def forge() -> None:
        ack = path.latest_ack()
        if ack is not None:  # a copy of the newest genuine ACK, numbered 2^31 - 1 ahead
            path.to_sender(TcsAck(ack.flow_id, (ack.ack_seq + (1 << 31) - 1) & SEQ_MASK, ack.cum_ack, ack.tsecr,
                                  ack.blocks, ack.flags, ack.ack_delay).to_bytes())

    for k in range(1, 40):
        path.at(T0 + k * 250_000, forge)
    path.run(max_ns=2_000_000_000)
    assert path.delivered_ok and path.snd.done and path.complete_when_done
    assert path.snd.checks.ack_seq_ahead > 0


def test_finding1_a_small_forged_leap_heals_at_the_next_genuine_ack():
    """A forged ACK numbered within the window (a copy of a genuine one, so it passes every
    check) must not make the genuine ACKs after it look stale: the next one that reports more
    than the newest accepted ACK cannot be older than it, so the sender follows it again."""
    s = TcsSender(P, bytes(1000), now_ns=T0)
    sent = _sent(s, 8)
    s.on_ack(TcsAck(0, 0, 2, sent[1].tsval), T0 + 8 * SLOT)
    s.on_ack(TcsAck(0, 5, 2, sent[1].tsval), T0 + 8 * SLOT)  # forged: genuine content, number + 5
    s.on_ack(TcsAck(0, 1, 3, sent[2].tsval, ((4, 6),)), T0 + 9 * SLOT)  # genuine: more arrived
    assert s.cum == 3 and s.checks.resyncs == 1 and s.c.stale_acks == 0
    s.on_ack(TcsAck(0, 2, 6, sent[5].tsval), T0 + 10 * SLOT)  # and the one after it
    assert s.cum == 6 and s.c.stale_acks == 0


# ------------------------------------------------------------------------------------------------
# finding 2: a forged cum_ack
@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding2_a_blind_forged_cum_ack_does_not_end_the_sender(kind):
    """Everything sent, nothing acknowledged: an ACK for it all whose tsecr is no stamp the
    sender used (a blind forger's guess: 0) is refused."""
    s = ENGINES[kind][0](P, bytes(1000), now_ns=T0)
    _sent(s, 10)
    before = _state(s)
    s.on_ack(TcsAck(0, 0, s.end & SEQ_MASK, 0, (), TcsAckFlag.FIN_SEEN), T0 + 10 * SLOT)
    assert not s.done and _state(s) == before
    assert s.checks.tsecr_unsent == 1 and s.c.bogus_acks == 1


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding2_an_ack_for_everything_without_fin_seen_is_refused(kind):
    """A receiver that has everything has seen the packet flagged LAST: it says FIN_SEEN."""
    s = ENGINES[kind][0](P, bytes(1000), now_ns=T0)
    sent = _sent(s, 10)
    s.on_ack(TcsAck(0, 0, s.end & SEQ_MASK, sent[9].tsval), T0 + 10 * SLOT)
    assert not s.done and s.checks.fin_mismatch == 1


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding2_fin_seen_before_the_last_packet_was_sent_is_refused(kind):
    s = ENGINES[kind][0](P, bytes(1000), now_ns=T0)
    sent = _sent(s, 4)
    before = _state(s)
    s.on_ack(TcsAck(0, 0, 2, sent[1].tsval, (), TcsAckFlag.FIN_SEEN), T0 + 4 * SLOT)
    assert _state(s) == before and s.checks.fin_mismatch == 1


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding2_a_sack_run_beyond_what_was_sent_drops_the_whole_ack(kind):
    s = ENGINES[kind][0](P, bytes(1000), now_ns=T0)
    sent = _sent(s, 4)
    before = _state(s)
    s.on_ack(TcsAck(0, 0, 2, sent[1].tsval, ((3, 4), (6, 8))), T0 + 4 * SLOT)
    assert _state(s) == before and s.checks.sack_unsent == 1 and s.c.bogus_acks == 1


def test_finding2_a_cum_ack_beyond_what_was_sent_changes_nothing():
    s = TcsSender(P, bytes(1000), now_ns=T0)
    sent = _sent(s, 4)
    before = _state(s)
    s.on_ack(TcsAck(0, 0, 5, sent[1].tsval), T0 + 4 * SLOT)
    assert _state(s) == before and s.checks.cum_unsent == 1 and s.c.bogus_acks == 1


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding2_the_sender_finishes_only_when_the_receiver_has_everything(kind):
    """Over a lossy path, an attacker who knows the flow and its sequence numbers (not the
    timestamps) keeps sending "everything arrived" ACKs: the sender ends only when it is true."""
    p = TcsParams(rate_bps=20_000_000, t_ns=500_000, n=4, payload=200)
    path = Path(kind, p, bytes(range(256)) * 40, fwd=_lossy(3, 0.1), rev=_lossy(4, 0.05))
    seqs = iter(range(1 << 20))

    def forge() -> None:
        path.to_sender(TcsAck(0, next(seqs), path.snd.end & SEQ_MASK, 12345, (), TcsAckFlag.FIN_SEEN).to_bytes())

    for k in range(1, 400):  # every 100 us, until well after everything was sent once (5.8 ms)
        path.at(T0 + k * 100_000, forge)
    path.run(max_ns=2_000_000_000)
    assert path.complete_when_done is True and path.delivered_ok
    assert path.snd.checks.tsecr_unsent > 0


# ------------------------------------------------------------------------------------------------
# finding 3: LAST
def _data(i: int, flags: int = 0, flow: int = 0) -> bytes:
    return TcsData(flow, i, 0, flags).to_bytes() + bytes([i & 0xFF]) * 100


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding3_a_second_last_at_another_seq_is_ignored(kind):
    r = ENGINES[kind][1](P)
    for i in range(3):
        r.receive(_data(i), 0)
    r.receive(_data(9, TcsDataFlag.LAST), 0)  # the genuine end of the stream
    r.receive(_data(5, TcsDataFlag.LAST), 0)  # forged
    assert r.last_seq == 9 and r.checks.last_conflict == 1
    for i in range(3, 7):
        r.receive(_data(i), 0)
    assert not r.complete


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding3_a_last_below_the_cumulative_point_is_ignored(kind):
    r = ENGINES[kind][1](P)
    for i in range(6):
        r.receive(_data(i), 0)
    assert r.receive(_data(2, TcsDataFlag.LAST), 0) == []
    assert r.last_seq is None and not r.complete and r.checks.last_conflict == 1


def test_finding3_a_last_below_buffered_data_is_ignored():
    r = TcsReceiver(P)
    r.receive(_data(7), 0)
    r.receive(_data(4, TcsDataFlag.LAST), 0)
    assert r.last_seq is None and r.checks.last_conflict == 1 and r.buffered == 1


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding3_nothing_is_taken_beyond_the_last_packet(kind):
    r = ENGINES[kind][1](P)
    r.receive(_data(3, TcsDataFlag.LAST), 0)
    r.receive(_data(5), 0)
    r.receive(_data(3), 0)  # not flagged LAST: no copy of the last packet is
    assert r.checks.beyond_last == 2 and r.c.data_rx == 1
    out = [p for i in range(4) for p in r.receive(_data(i, TcsDataFlag.LAST if i == 3 else 0), 0)]
    assert len(out) == 4 and r.complete


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding3_last_from_another_source_is_ignored(kind):
    r = ENGINES[kind][1](P)
    r.receive(_data(0), 0, SND)
    assert r.receive(_data(1, TcsDataFlag.LAST), 0, EVIL) == []
    assert r.last_seq is None and r.checks.not_peer == 1 and r.cum == 1


# ------------------------------------------------------------------------------------------------
# finding 4: where ACKs go (and the binding in the engine)
def test_the_first_valid_datagram_binds_the_peer_and_others_never_change_anything():
    r = TcsReceiver(P, flow_id=7)
    assert r.receive(_data(0, flow=8), 0, EVIL) == [] and r.peer is None  # another flow: no binding
    r.receive(_data(1, flow=7), 0, SND)  # the first datagram of the flow: binds
    assert r.peer == SND
    before = (r.cum, r.buffered, r.c.data_rx, r.next_deadline())
    for d in (_data(0, flow=7), _data(2, TcsDataFlag.LAST, flow=7), b"\x00garbage", TcsAck(7, 0, 0).to_bytes()):
        assert r.receive(d, 5, EVIL) == []  # never decoded, never an error: counted
    assert (r.cum, r.buffered, r.c.data_rx, r.next_deadline()) == before and r.checks.not_peer == 4
    assert [p[0] for p in r.receive(_data(0, flow=7), 6, SND)] == [0, 1] and r.peer == SND


def test_a_first_datagram_far_outside_the_receive_window_does_not_bind():
    r = TcsReceiver(P)
    assert r.receive(_data((P.buffer_packets + 10) & SEQ_MASK), 0, EVIL) == []
    assert r.peer is None and r.checks.not_peer == 1
    r.receive(_data(0), 0, SND)
    assert r.peer == SND and r.cum == 1


def _two_hosts() -> Network:
    return Network(topology_from_dict({
        "topology": {"name": "tcsack-attack"},
        "defaults": {"rate": 100_000_000, "delay": "200us"},
        "nodes": [{"name": "h1", "kind": "host", "ip": "10.0.0.1/24"},
                  {"name": "h2", "kind": "host", "ip": "10.0.0.2/24"}],
        "links": [{"name": "h1-h2", "a": "h1", "b": "h2"}],
    }))


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
def test_finding4_the_simulated_receiver_acks_only_its_peer(kind):
    """Another port on the sender's host sends another flow's packet, a replay and a forged
    LAST while the transfer runs: the receiver's ACKs keep going to the genuine sender."""
    net = _two_hosts()
    h1, h2 = net.host("h1"), net.host("h2")
    s_cls, r_cls = ENGINES[kind]
    data = bytes(range(256)) * 20
    snd, rcv = s_cls(P, data, now_ns=net.now), r_cls(P)
    receiver = EngineReceiver(h2, rcv)
    sender = EngineSender(h1, "h2", snd, PORT)
    evil_port, evil_rx = 45_000, []
    h1.bind_udp(evil_port, evil_rx.append)
    flow = h1.flow("h2")
    for k, d in enumerate([_data(0, flow=9), _data(1), _data(3, TcsDataFlag.LAST), b"junk"]):
        net.loop.call_at(net.now + 1_000_000 + k * 500_000, lambda d=d: h1.send(flow.udp(evil_port, PORT, d)))
    net.loop.run(net.now + 5_000_000_000)
    assert snd.done and rcv.complete and b"".join(receiver.delivered) == data
    assert evil_rx == [] and rcv.checks.not_peer == 4 and rcv.last_seq == snd.end - 1
    assert sender.foreign_src == 0


def test_the_simulated_sender_takes_acks_only_from_the_receiver():
    """The live sender's socket is connected (the kernel drops other sources); the simulated
    one checks the source itself: a forged "all done" ACK from another port changes nothing."""
    net = _two_hosts()
    h1, h2 = net.host("h1"), net.host("h2")
    data = bytes(2000)
    snd, rcv = TcsSender(P, data, now_ns=net.now), TcsReceiver(P)
    EngineReceiver(h2, rcv)
    sender = EngineSender(h1, "h2", snd, PORT)
    # numbered ahead of the genuine ACKs, echoing the first stamp, sent once everything was sent
    # and arriving (200 us later) before the receiver's ACK for the last packet (an RTT later)
    forged = TcsAck(0, 10, snd.end, us32(net.now), (), TcsAckFlag.FIN_SEEN).to_bytes()
    h2.bind_udp(PORT + 1, lambda _f: None)
    while snd.c.sent < 20:
        net.loop.run(net.now + 20_000)
    h2.send(h2.flow("h1").udp(PORT + 1, sender.sport, forged))
    net.loop.run(net.now + 300_000)
    assert not snd.done and sender.foreign_src == 1
    net.loop.run(net.now + 5_000_000_000)
    assert snd.done and rcv.complete


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_finding4_the_live_receiver_acks_only_its_peer():
    """``python -m netstack.tcsack recv`` on a loopback socket: the genuine sender's first
    packet binds it; another socket's datagrams (another flow, a replay of a genuine packet, a
    forged LAST, junk) are counted and dropped, and no ACK ever goes to it."""
    port = _free_udp_port()
    args = argparse.Namespace(proto="tcsack", port=port, wait=5.0, linger=0.3, flow=7, start_seq=0,
                              rate=P.rate_bps, t_ms=1.0, n=4, payload=100, rto_ms=0.0)
    result: dict = {}
    th = threading.Thread(target=lambda: result.update(tcs_live.recv_datagrams(args)), daemon=True)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as good, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as evil:
        th.start()
        time.sleep(0.2)  # the receiver binds its socket
        dst = ("127.0.0.1", port)
        packets = [_data(i, TcsDataFlag.LAST if i == 7 else 0, flow=7) for i in range(8)]
        good.sendto(packets[0], dst)
        time.sleep(0.1)
        for d in (_data(0, flow=8), packets[1], _data(3, TcsDataFlag.LAST, flow=7), b"junk"):
            evil.sendto(d, dst)
        time.sleep(0.1)
        for d in packets[1:]:
            good.sendto(d, dst)
        th.join(10)
        evil.settimeout(0.2)
        with pytest.raises(TimeoutError):
            evil.recvfrom(2048)
        good.settimeout(0.2)
        acks = []
        with contextlib.suppress(TimeoutError):
            while True:
                acks.append(TcsAck.from_bytes(good.recvfrom(2048)[0]))
    assert result["complete"] and result["bytes"] == 800 and acks and acks[-1].cum_ack == 8
    assert result["checks"]["not_peer"] == 4
    json.dumps(result)
