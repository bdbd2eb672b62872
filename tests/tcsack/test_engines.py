"""T/C-SACK and go-back-N engines ("An Updated ACK mechanism based on RDMA", §2), driven by hand
and through the virtual path."""

from __future__ import annotations

import pytest

from headers.errors import HeaderError
from headers.tcsack import TcsAck, TcsAckFlag, TcsData, TcsDataFlag
from netstack.engine import ActionQueue, Transmit
from netstack.tcsack import GbnReceiver, GbnSender, TcsParamError, TcsParams, TcsReceiver, TcsSender
from netstack.tcsack.rangeset import RangeSet

from . import lossy, run

P = TcsParams(rate_bps=10_000_000, t_ns=1_000_000, n=4, payload=100)


def _data(i: int, flags: int = 0, tsval: int = 0, seq: int | None = None) -> bytes:
    return TcsData(0, i if seq is None else seq, tsval, flags).to_bytes() + bytes([i & 0xFF]) * 100


def _acks(r) -> list[TcsAck]:
    return [TcsAck.from_bytes(a.data) for a in r.actions.take(Transmit)]


def test_receiver_acks_every_n_packets_with_sack_blocks():
    r = TcsReceiver(P)
    for i in (0, 1, 3, 5):  # 2 and 4 lost
        r.receive(_data(i, tsval=100 + i), 1_000 * i)
    (ack,) = _acks(r)
    assert ack.flags & TcsAckFlag.TRIGGER_COUNT
    assert ack.cum_ack == 2 and ack.blocks == ((3, 4), (5, 6))
    assert ack.holes() == ((2, 3), (4, 5)) and ack.tsecr == 105 and ack.ack_seq == 0


def test_receiver_acks_t_after_the_first_unacked_packet_and_only_then():
    r = TcsReceiver(P)
    assert r.next_deadline() is None  # nothing arrived: no ACK clock
    r.receive(_data(0), 5_000)
    assert r.next_deadline() == 5_000 + P.t_ns
    r.on_timer(5_000 + P.t_ns - 1)
    assert r.actions.pending(Transmit) == []  # no ACK before T
    r.on_timer(5_000 + P.t_ns)
    (ack,) = _acks(r)
    assert not ack.flags & TcsAckFlag.TRIGGER_COUNT and ack.cum_ack == 1
    assert ack.ack_delay == P.t_ns // 1000  # held T on purpose: the sender subtracts it
    assert r.next_deadline() is None


def test_receiver_delivers_in_order_once_and_reports_fin():
    r = TcsReceiver(P)
    assert r.receive(_data(1), 0) == []
    assert r.receive(_data(2, TcsDataFlag.LAST), 0) == []
    assert r.receive(_data(1), 0) == []  # duplicate while buffered
    out = r.receive(_data(0), 0)
    assert [p[0] for p in out] == [0, 1, 2]
    assert r.receive(_data(0), 0) == []
    assert r.c.duplicates == 2 and r.complete
    r.on_timer(10 * P.t_ns)
    ack = _acks(r)[-1]
    assert ack.flags & TcsAckFlag.FIN_SEEN and ack.cum_ack == 3


def test_receiver_bounds_its_buffer_and_reports_at_most_max_blocks():
    p = P.with_changes(buffer_packets=50, max_blocks=3, n=1000)
    r = TcsReceiver(p)
    for i in range(2, 200, 2):
        r.receive(_data(i), 0)
    assert r.c.buffer_drops == 200 // 2 - 1 - 25 and r.buffered == 25
    r.on_timer(p.t_ns)
    (ack,) = _acks(r)
    assert ack.blocks == ((2, 3), (4, 5), (6, 7))  # the lowest runs


def test_receiver_counts_other_flows_and_rejects_non_data():
    r = TcsReceiver(P)
    assert r.receive(TcsData(7, 0).to_bytes(), 0) == [] and r.c.foreign == 1
    with pytest.raises(HeaderError):
        r.receive(TcsAck(0, 0, 0).to_bytes(), 0)


def test_sender_paces_at_the_preset_rate():
    s = TcsSender(P, bytes(1000))  # 10 packets of 100 B
    slot = P.packet_ns(112)
    assert len(s.poll(0)) == 1
    assert s.next_deadline() == slot
    assert s.poll(slot - 1) == []
    assert len(s.poll(slot)) == 1
    # a late poll sends every slot it owes (the token bucket, tests/tcsack/test_pacer.py)
    assert len(s.poll(6 * slot)) == 5


def test_sender_resends_only_what_a_later_packet_overtook():
    s = TcsSender(P, bytes(1000))
    slot = P.packet_ns(112)
    sent = [TcsData.from_bytes(d) for t in range(6) for d in s.poll(t * slot)]
    assert [d.seq for d in sent] == [0, 1, 2, 3, 4, 5]
    # 1 lost; the ACK echoes packet 3: packet 1 was sent before it -> lost; 4 and 5 are beyond
    # the last block: nothing said
    s.on_ack(TcsAck(0, 0, 1, sent[3].tsval, ((2, 4),)), 6 * slot)
    assert s.c.losses_detected == 1
    d = TcsData.from_bytes(s.poll(7 * slot)[0])
    assert d.seq == 1 and d.flags & TcsDataFlag.RETX
    # an ACK echoing a packet sent before the retransmission does not resend it again
    s.on_ack(TcsAck(0, 1, 1, sent[5].tsval, ((2, 6),)), 7 * slot)
    assert s.c.losses_detected == 1
    # a stale ACK (older ack_seq) is ignored
    s.on_ack(TcsAck(0, 0, 1, sent[5].tsval, ((2, 6),)), 7 * slot)
    assert s.c.stale_acks == 1


def test_sender_probes_with_the_last_packet_after_2t_without_an_ack():
    s = TcsSender(P, bytes(300))
    slot = P.packet_ns(112)
    sent = [TcsData.from_bytes(d) for t in range(3) for d in s.poll(t * slot)]
    # no ACK yet: the first one has a round trip to cross first (SenderBase.FIRST_ACK_WAIT_NS)
    assert s.next_deadline() == 2 * P.t_ns + s.FIRST_ACK_WAIT_NS
    s.on_ack(TcsAck(0, 0, 1, sent[0].tsval), 3 * slot)  # packet 0 arrived; 1 and 2 still on their way
    assert s.next_deadline() == 3 * slot + 2 * P.t_ns
    (d,) = s.poll(3 * slot + 2 * P.t_ns)
    probe = TcsData.from_bytes(d)
    assert probe.seq == 2 and probe.flags & TcsDataFlag.PROBE and probe.flags & TcsDataFlag.LAST
    assert s.c.probes_sent == 1 and s.next_deadline() == 3 * slot + 4 * P.t_ns


def test_sender_rejects_acks_for_what_it_never_sent():
    s = TcsSender(P, bytes(300))
    s.poll(0)
    s.on_ack(TcsAck(0, 0, 3), 10)
    assert s.c.bogus_acks == 1 and s.cum == 0


def test_gbn_receiver_drops_out_of_order_and_naks_once_per_gap():
    r = GbnReceiver(P)
    r.receive(_data(0), 0)
    assert r.receive(_data(2), 0) == [] and r.receive(_data(3), 0) == []
    (nak,) = _acks(r)
    assert nak.flags & TcsAckFlag.NAK and nak.cum_ack == 1 and nak.blocks == ()
    assert r.c.out_of_order_drops == 2 and r.c.naks_sent == 1


def test_gbn_sender_goes_back_on_a_nak_and_on_timeout():
    s = GbnSender(P, bytes(1000))
    slot = P.packet_ns(112)
    for t in range(5):
        s.poll(t * slot)
    s.on_ack(TcsAck(0, 0, 2, flags=TcsAckFlag.NAK), 5 * slot)
    assert [TcsData.from_bytes(d).seq for d in s.poll(5 * slot)] == [2] and s.c.go_backs == 1
    s.poll(6 * slot)
    s.poll(100 * P.t_ns)
    assert s.c.timeouts == 1


def test_params_are_checked():
    with pytest.raises(TcsParamError, match="rate_bps"):
        TcsParams(rate_bps=0)
    with pytest.raises(TcsParamError, match="rto_ns"):
        TcsParams(rto_ns=5)


def test_rangeset_merges_and_drops():
    r = RangeSet()
    assert r.add(5) == 1 and r.add(7) == 1 and r.add(6) == 1
    assert r.runs() == [(5, 8)]
    assert r.add(3, 10) == 4 and r.runs() == [(3, 10)]
    r.add(12, 14)
    r.drop_below(4)
    assert r.runs() == [(4, 10), (12, 14)] and 13 in r and 11 not in r


@pytest.mark.parametrize("kind", ["tcsack", "gbn"])
@pytest.mark.parametrize("loss", [0.0, 0.02])
def test_a_transfer_completes_intact_over_a_lossy_delayed_path(kind, loss):
    p = TcsParams(rate_bps=50_000_000, t_ns=1_000_000, n=8, payload=500)
    data = bytes(range(256)) * 400
    res = run(kind, p, data, fwd=lossy(loss, 5), rev=lossy(loss, 6), delay_ns=500_000)
    assert res["delivered_ok"] and res["receiver_complete"] and res["done_ns"] is not None


def test_tcsack_resends_far_less_than_go_back_n_at_the_same_loss():
    p = TcsParams(rate_bps=50_000_000, t_ns=1_000_000, n=8, payload=500)
    data = bytes(1_000_000)
    t = run("tcsack", p, data, fwd=lossy(0.02, 1), delay_ns=2_000_000)
    g = run("gbn", p, data, fwd=lossy(0.02, 1), delay_ns=2_000_000)
    assert t["delivered_ok"] and g["delivered_ok"]
    # T/C-SACK resends about the lost packets; go-back-N a whole round trip's worth per loss
    assert t["sender"]["retx_sent"] < 2 * t["fwd_lost"] + 5
    assert g["sender"]["retx_sent"] > 5 * t["sender"]["retx_sent"]
    assert t["done_ns"] < g["done_ns"]


# the JSON keys counters() exported before counters became dataclasses: benchmarks and the live
# tool's readers depend on them, in this order
_RECEIVER_KEYS = ["data_rx", "retx_rx", "probes_rx", "delivered", "bytes_delivered", "duplicates", "foreign",
                  "acks_sent", "acks_count_triggered", "acks_time_triggered"]
_SENDER_KEYS = ["sent", "sent_new", "retx_sent", "probes_sent", "bytes_sent", "acks_rx", "stale_acks",
                "bogus_acks", "foreign",
                # issue 33: the pacer's measured lateness and what it gave up, the longest ACK gap
                "pacer_late_max_ns", "pacer_dropped_ns", "ack_gap_max_ns"]
# the failure timer on a loaded host (set_timer_slack) and the pacing the live verdict measures
_TIMER_KEYS = ["timer_slack_ns", "timeout_ns", "paced_ns", "paced_datagrams", "paced_bytes",
               "ack_jitter_ns"]  # issue 33: the probe's allowance for the measured ACK jitter


@pytest.mark.parametrize(("engine", "keys"), [
    (lambda: TcsReceiver(P), [*_RECEIVER_KEYS, "buffered_max", "buffer_drops", "cum", "complete"]),
    (lambda: GbnReceiver(P), [*_RECEIVER_KEYS, "out_of_order_drops", "naks_sent", "cum", "complete"]),
    (lambda: TcsSender(P, bytes(300)), [*_SENDER_KEYS, "losses_detected", "retx_skipped", "packets", "cum_acked",
                                        "done", "rtt_min_us", "srtt_us", *_TIMER_KEYS]),
    (lambda: GbnSender(P, bytes(300)), [*_SENDER_KEYS, "go_backs", "timeouts", "packets", "cum_acked", "done",
                                        "rtt_min_us", "srtt_us", *_TIMER_KEYS]),
])
def test_engines_keep_the_engine_contract_and_their_counter_keys(engine, keys):
    e = engine()
    assert isinstance(e.actions, ActionQueue) and not e.actions
    assert list(e.counters()) == keys
    # the counters are the fields of the engine's dataclass ``c``, and only there
    for k in keys:
        if hasattr(e.c, k):
            assert getattr(e.c, k) == 0 and not hasattr(e, k)
