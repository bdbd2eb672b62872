"""The sans-IO engines one behaviour at a time (LinkGuardian §3-§3.5, Algorithms 1 and 2)."""

from __future__ import annotations

import pytest

from headers.errors import HeaderError
from headers.linkguardian import LGData, LGLeadingAck, LGLossNotification, decode_tag, wrap
from headers.registry import MIN_FRAME
from netstack.engine import Backpressure, Transmit
from netstack.linkguardian import LG_CONTROL_MAC, LGParams, LGReceiver, LGSender
from netstack.linkguardian.receiver import MAX_HOLE_PER_NOTIFICATION
from netstack.switch.config import DEFAULT_OVERHEAD_BYTES

from . import US, data_tag, frame, index_of, stamp_for

P = LGParams(copies=2, ack_no_timeout_ns=10 * US, pause_threshold_bytes=1000, resume_threshold_bytes=400,
             reorder_buffer_limit_bytes=5000)


def lack_of(f: bytes) -> LGLeadingAck:
    tag = decode_tag(f, 14)
    assert isinstance(tag, LGLeadingAck)
    return tag


def notices(r: LGReceiver) -> list[LGLossNotification]:
    assert all(len(f) == MIN_FRAME and f[:6] == LG_CONTROL_MAC for f in r.control_out)
    out = [decode_tag(a.data, 14) for a in r.actions.take(Transmit)]
    assert all(n.next_type == 0 for n in out)
    return out


# ------------------------------------------------------------------------------- sender
def test_stamp_inserts_a_data_tag_and_keeps_the_frame_intact():
    s = LGSender(P)
    for i in range(3):
        f = frame(i)
        tagged = s.stamp(f, 0)
        tag = data_tag(tagged)
        assert (tag.seq_no, tag.era, tag.retx, tag.dummy, tag.blocking) == (i, 0, 0, 0, 1)
        assert tag.next_type == 0x88B5  # the original EtherType, carried like an 802.1Q tag
        assert tagged[12:14] == b"\xab\xcd" and tagged[:12] + tagged[19:] == f[:12] + f[14:]
        assert tagged[:12] + tagged[17:] == f
    assert s.buffered() == [0, 1, 2] and s.c.tx_buffer_bytes == 300 and s.c.protected_frames == 3
    assert data_tag(LGSender(LGParams(mode="nb")).stamp(frame(0))).blocking == 0


@pytest.mark.parametrize(("start", "tags"), [
    (65534, [(65534, 0), (65535, 0), (0, 1), (1, 1)]),
    (131070, [(65534, 1), (65535, 1), (0, 0), (1, 0)]),
])
def test_era_toggles_when_seq_no_wraps(start, tags):
    s = LGSender(P, start=start)
    got = [(t.seq_no, t.era) for t in (data_tag(s.stamp(frame(i))) for i in range(4))]
    assert got == tags


def test_dummies_trail_each_burst_with_the_next_seq_no():
    s = LGSender(P)
    assert s.dummy(0) is None  # nothing sent yet: the dummy queue is empty
    s.stamp(frame(0))
    s.stamp(frame(1))
    dummies = [s.dummy(0) for _ in range(4)]
    assert dummies[3] is None and s.c.dummies_sent == 3
    for d in dummies[:3]:
        tag = data_tag(d)
        assert len(d) == MIN_FRAME and (tag.dummy, tag.seq_no, tag.next_type) == (1, 2, 0)
    s.stamp(frame(2))  # §3.2: every data frame refills the budget
    assert data_tag(s.dummy(0)).seq_no == 3 and s.dummy_budget == 2


def test_leading_ack_frees_copies_up_to_it():
    s = LGSender(P)
    for i in range(10):
        s.stamp(frame(i))
    assert s.on_leading_ack(0, 4) == 5
    assert s.buffered() == [5, 6, 7, 8, 9] and s.c.freed == 5 and s.c.tx_buffer_bytes == 500
    assert s.on_leading_ack(0, 3) == 0 and s.c.stale_lacks == 1  # behind: ignored
    assert s.on_leading_ack(0, 40) == 0 and s.c.stale_lacks == 2  # ahead of anything sent: ignored
    assert s.buffered() == [5, 6, 7, 8, 9]


def test_loss_notification_retransmits_n_copies_and_frees_the_rest():
    s = LGSender(P)
    frames = [frame(i) for i in range(10)]
    for f in frames:
        s.stamp(f)
    retx = s.on_loss_notification(0, 2, 2, 3)  # leading ACK 2, frames 3 and 4 lost
    assert len(retx) == 4  # N = 2 copies each (§3.4)
    tags = [data_tag(r) for r in retx]
    assert [(t.seq_no, t.retx, t.dummy) for t in tags] == [(3, 1, 0), (3, 1, 0), (4, 1, 0), (4, 1, 0)]
    assert retx[0][:12] + retx[0][17:] == frames[3]
    assert s.buffered() == [5, 6, 7, 8, 9] and s.c.retransmissions == 4 and s.c.retx_frames == 2
    assert s.on_loss_notification(0, 2, 1, 3) == [] and s.c.holes_not_buffered == 1  # counted, never raised


def test_loss_notification_across_the_wrap():
    s = LGSender(P, start=65530)
    for i in range(10):  # counters 65530..65539: seq 65530..65535, then 0..3 in era 1
        s.stamp(frame(i))
    retx = s.on_loss_notification(0, 65533, 4, 65534)  # 65534, 65535, 0 (era 1), 1 (era 1)
    assert [(data_tag(r).seq_no, data_tag(r).era) for r in retx[::2]] == [(65534, 0), (65535, 0), (0, 1), (1, 1)]
    assert [index_of(r[:12] + r[17:]) for r in retx[::2]] == [4, 5, 6, 7]
    assert s.buffered() == [65538, 65539]


def test_tx_buffer_limit_evicts_the_oldest_copy():
    s = LGSender(P.with_changes(tx_buffer_limit_bytes=250))
    for i in range(3):
        s.stamp(frame(i))
    assert s.buffered() == [1, 2] and s.c.tx_evictions == 1 and s.c.tx_buffer_max_bytes == 200
    assert s.on_loss_notification(0, 0xFFFF, 1, 0) == [] and s.c.holes_not_buffered == 1


def test_reverse_frames_ack_couriers_notifications_and_piggybacks():
    s = LGSender(P)
    for i in range(6):
        s.stamp(frame(i))
    r = LGReceiver(P)
    r.leading_ack, r.lack_left = 1, 5
    courier = r.courier()
    assert s.receive(courier, 0) == (None, [])
    assert s.buffered() == [2, 3, 4, 5]
    r.leading_ack = 2
    reverse = frame(77)
    fwd, retx = s.receive(r.piggyback(reverse), 0)
    assert fwd == reverse and retx == [] and s.buffered() == [3, 4, 5] and s.c.lacks_piggybacked_rx == 1
    ln = LGLossNotification(leading_ack=2, hole_size=1, first_lost_seq=4).to_bytes()
    fwd, retx = s.receive(b"\x03LG\0\0\0" + bytes(6) + b"\xab\xcd" + ln + bytes(40), 0)
    assert fwd is None and len(retx) == 2 and s.c.loss_notifications_rx == 1
    assert s.receive(reverse, 0) == (reverse, [])  # not LinkGuardian: untouched
    # a data tag of a reverse-direction LinkGuardian is left alone; a LACK below it is consumed
    stacked = reverse[:12] + b"\xab\xcd" + LGData(9, next_type=0xABCD).to_bytes() + \
        LGLeadingAck(3, next_type=0x88B5, piggybacked=1).to_bytes() + reverse[14:]
    fwd, _ = s.receive(stacked, 0)
    assert fwd == reverse[:12] + b"\xab\xcd" + LGData(9, next_type=0x88B5).to_bytes() + reverse[14:]
    assert s.buffered() == [5]
    # both directions protected (§5): a retransmitted reverse frame with an old ACK inside
    # and a fresh one outside loses both
    twice = reverse[:12] + b"\xab\xcd" + LGLeadingAck(4, next_type=0xABCD, piggybacked=1).to_bytes() + \
        LGData(9, next_type=0xABCD, retx=1).to_bytes() + LGLeadingAck(2, next_type=0x88B5, piggybacked=1).to_bytes() + \
        reverse[14:]
    fwd, _ = s.receive(twice, 0)
    assert fwd == reverse[:12] + b"\xab\xcd" + LGData(9, next_type=0x88B5, retx=1).to_bytes() + reverse[14:]
    assert s.buffered() == [5] and s.c.stale_lacks >= 1


@pytest.mark.parametrize("bad", [
    bytes(12) + b"\xab\xcd\x40\x00",             # truncated LACK
    bytes(12) + b"\xab\xcd\x80\x00\x01\x01\x00",  # truncated notification
    bytes(12) + b"\xab\xcd\xc0\x00\x01\x00\x00",  # type 11 never crosses a link
    bytes(12) + b"\xab\xcd\x80\x00\x01\x00\x00\x05\x00\x00" + bytes(40),  # hole_size 0
])
def test_malformed_reverse_tags_raise_header_error(bad):
    with pytest.raises(HeaderError):
        LGSender(P).receive(bad, 0)


def test_flush_drops_everything_and_stops_dummies():
    s = LGSender(P)
    for i in range(4):
        s.stamp(frame(i))
    assert s.flush() == 4
    assert s.buffered() == [] and s.c.tx_buffer_bytes == 0 and s.dummy(0) is None and s.c.flushed == 4
    assert data_tag(s.stamp(frame(4))).seq_no == 4  # the sequence continues


# ----------------------------------------------------------------------------- receiver
def test_in_order_frames_are_delivered_untagged_and_acked_twice():
    r = LGReceiver(P)
    frames = [frame(i) for i in range(3)]
    for i, f in enumerate(frames):
        assert r.receive(stamp_for(i, f), i * US) == [f]
    assert r.leading_ack == 2 and r.lack_left == 2  # §3.1: each new value at least twice
    c1, c2, c3 = r.courier(), r.courier(), r.courier()
    assert c3 is None and len(c1) == MIN_FRAME
    assert lack_of(c1) == LGLeadingAck(2, next_type=0, era=0, piggybacked=0) and c1 == c2
    assert r.c.lacks_explicit == 2 and r.control_out == [] and r.pause_out == []


def test_piggyback_adds_a_lack_tag_carrying_the_frames_ethertype():
    r = LGReceiver(P)
    r.receive(stamp_for(0, frame(0)), 0)
    reverse = frame(9)
    out = r.piggyback(reverse)
    assert lack_of(out) == LGLeadingAck(0, next_type=0x88B5, piggybacked=1)
    assert out[:12] + out[17:] == reverse
    assert r.piggyback(reverse) != reverse and r.piggyback(reverse) == reverse  # two sends, then nothing pending
    assert r.c.lacks_piggybacked == 2 and r.courier() is None


def test_gap_sends_a_loss_notification_and_algorithm_1_reorders():
    r = LGReceiver(P)
    f = [frame(i, 300) for i in range(6)]
    assert r.receive(stamp_for(0, f[0]), 0) == [f[0]]
    assert r.receive(stamp_for(1, f[1]), 1) == [f[1]]
    assert r.receive(stamp_for(3, f[3]), 2) == []  # seq > ack_no: held
    (ln,) = notices(r)
    assert (ln.first_lost_seq, ln.hole_size, ln.leading_ack) == (2, 1, 1)  # leading ACK = in-order point
    assert r.receive(stamp_for(4, f[4]), 3) == [] and r.held() == [3, 4] and r.holes() == [2]
    assert r.leading_ack == 1
    assert r.receive(stamp_for(2, f[2], retx=1), 4) == [f[2], f[3], f[4]]  # hole repaired: drain
    assert r.receive(stamp_for(2, f[2], retx=1), 5) == []  # the second copy: de-duplicated
    assert r.receive(stamp_for(1, f[1]), 6) == []
    assert r.receive(stamp_for(5, f[5]), 7) == [f[5]]
    assert r.c.duplicates == 2 and r.c.holes_filled == 1 and r.held() == [] and r.leading_ack == 5
    assert r.c.reorder_buffer_max_frames == 2 and r.c.reorder_buffer_max_bytes == 600 and r.c.retx_rx == 2


def test_held_frames_cycle_through_the_recirculation_port_until_their_turn():
    """Algorithm 1 line 6 (§3.3, Fig. 6): a held frame is recirculated and checked against
    ack_no at the end of every pass. The repair itself is forwarded straight from the link;
    the frames behind it leave only as their passes end, starting from whatever rotation
    the cycling left the queue in."""
    f = [frame(i, 300) for i in range(5)]
    pass_ns = 1000
    rate = (300 + DEFAULT_OVERHEAD_BYTES) * 8 * 1_000_000_000 // pass_ns
    r = LGReceiver(P.with_changes(recirc_rate_bps=rate))
    for i in (1, 2, 3):  # frame 0 lost: 1, 2, 3 held, all on the port from t = 0
        assert r.receive(stamp_for(i, f[i]), 0) == []
    assert r.recirculating == 3 and r.next_deadline() == 10 * US  # nothing next in line: only ackNoTimeout
    # passes end at 1000 (frame 1 goes round) and 2000 (frame 2 goes round): queue 3, 1, 2
    assert r.receive(stamp_for(0, f[0], retx=1), 2500) == [f[0]]
    assert r.ack_no == 1 and r.c.recirculations == 2 and r.next_deadline() == 3000
    assert r.on_timer(3000) == []  # frame 3's pass: not its turn, round again
    assert r.next_deadline() == 4000 and r.c.reorder_buffer_frames == 3
    assert r.on_timer(4000) == [f[1]]
    assert r.on_timer(6500) == [f[2], f[3]]  # passes ending at 5000 and 6000
    assert r.recirculating == 0 and r.c.reorder_buffer_bytes == 0 and r.next_deadline() is None
    assert r.c.delivered == 4 and r.c.recirculations == 3 and r.leading_ack == 3
    assert r.receive(stamp_for(4, f[4]), 7000) == [f[4]]  # empty port: straight through


def test_recirculating_buffer_skips_whole_turns_while_the_hole_is_open():
    """Passes that only rotate the queue are accounted lazily: a late call after many turns
    ends in the same state as stepping through them."""
    f = [frame(i, 300) for i in range(4)]
    rate = (300 + DEFAULT_OVERHEAD_BYTES) * 8 * 1_000_000
    r = LGReceiver(P.with_changes(recirc_rate_bps=rate, ack_no_timeout_ns=10**9))
    for i in (1, 2, 3):
        r.receive(stamp_for(i, f[i]), 0)
    # 3,001,500 ns: 3,001 passes ended (1,000 whole turns and one more pass): queue 2, 3, 1
    assert r.receive(stamp_for(0, f[0], retx=1), 3_001_500) == [f[0]]
    assert r.c.recirculations == 3001
    assert r.on_timer(3_004_000) == [f[1]]  # 2 and 3 go round first (3,002,000 and 3,003,000)
    assert r.on_timer(3_006_000) == [f[2], f[3]]


def test_recirculation_rate_changed_while_frames_are_held():
    """set_params may change the port's rate at run time: held frames go onto the new port in
    order, or, switched to the instant drain, leave at the next timer."""
    f = [frame(i, 300) for i in range(4)]
    rate = (300 + DEFAULT_OVERHEAD_BYTES) * 8 * 1_000_000
    r = LGReceiver(P)  # instant
    for i in (1, 2):
        r.receive(stamp_for(i, f[i]), 0)
    r.set_params(P.with_changes(recirc_rate_bps=rate))  # now a port; 1, 2 on it in order
    assert r.recirculating == 2
    assert r.receive(stamp_for(0, f[0], retx=1), 500) == [f[0]]
    assert r.next_deadline() == 1000 and r.on_timer(1000) == [f[1]]
    r.set_params(P)  # back to instant while 2 waits on the port
    assert r.recirculating == 0 and r.next_deadline() == 1000
    assert r.on_timer(1000) == [f[2]] and r.next_deadline() is None
    assert r.receive(stamp_for(3, f[3]), 1100) == [f[3]] and r.c.reorder_buffer_frames == 0


@pytest.mark.parametrize("late_event", ["timer", "data"])
def test_a_late_call_applies_ack_no_timeout_at_its_own_time_on_the_port(late_event):
    """ackNoTimeout (§3.5) with frames on the recirculation port: a call that comes late (the
    daemon's timer, or a frame received before the due timer fired) gives the hole up at the
    time it expired, so the frame behind it leaves on the first pass after that, as if the
    timer had been on time."""
    f = [frame(i, 300) for i in range(5)]
    rate = (300 + DEFAULT_OVERHEAD_BYTES) * 8 * 1_000_000  # one pass = 1000 ns
    p = P.with_changes(recirc_rate_bps=rate, ack_no_timeout_ns=10_500)
    on_time = LGReceiver(p)
    late = LGReceiver(p)
    for r in (on_time, late):
        for i in (1, 2, 3):  # frame 0 lost for good
            r.receive(stamp_for(i, f[i]), 0)
    assert on_time.on_timer(10_500) == [] and on_time.c.timeouts == 1
    assert on_time.on_timer(13_000) == [f[1]]  # passes: 1 at 10,000, 2 at 11,000, 3 at 12,000, 1 at 13,000
    if late_event == "timer":
        assert late.on_timer(13_500) == [f[1]]
    else:
        assert late.receive(stamp_for(4, f[4]), 13_500) == [f[1]]  # 4 is held behind 2 and 3
    assert late.c.timeouts == 1 and late.ack_no == 2
    assert on_time.on_timer(15_000) == [f[2], f[3]]
    assert late.on_timer(15_000) == [f[2], f[3]]


def test_dummy_reveals_a_tail_loss_and_is_never_delivered():
    r = LGReceiver(P)
    r.receive(stamp_for(0, frame(0)), 0)
    dummy = LGSender(P, start=2)
    dummy.dummy_budget = 1
    d = dummy.dummy(0)
    assert data_tag(d).seq_no == 2
    assert r.receive(d, US) == [] and r.receive(d, US) == []
    (ln,) = notices(r)
    assert (ln.first_lost_seq, ln.hole_size, ln.leading_ack) == (1, 1, 0)
    assert r.c.dummies_rx == 2 and r.c.holes_detected == 1 and r.c.delivered == 1
    assert r.receive(stamp_for(1, frame(1), retx=1), 2 * US) == [frame(1)] and r.c.timeouts == 0


def test_long_gap_is_reported_in_several_notifications():
    r = LGReceiver(P.with_changes(reorder_buffer_limit_bytes=10**6))
    r.receive(stamp_for(0, frame(0)), 0)
    r.receive(stamp_for(601, frame(601)), 1)
    lns = notices(r)
    assert [(n.first_lost_seq, n.hole_size) for n in lns] == [(1, 255), (256, 255), (511, 90)]
    assert MAX_HOLE_PER_NOTIFICATION == 255 and r.c.max_hole == 600 and r.c.lost_detected == 600


def test_ack_no_timeout_skips_an_unrepaired_hole():
    r = LGReceiver(P)
    f = [frame(i) for i in range(4)]
    r.receive(stamp_for(0, f[0]), 0)
    r.receive(stamp_for(2, f[2]), 5 * US)
    r.receive(stamp_for(3, f[3]), 6 * US)
    assert r.next_deadline() == 15 * US  # detection time + ackNoTimeout (§3.5)
    assert r.on_timer(15 * US - 1) == [] and r.c.timeouts == 0
    assert r.on_timer(15 * US) == [f[2], f[3]] and r.c.timeouts == 1
    assert r.next_deadline() is None and r.ack_no == 4 and r.leading_ack == 3
    assert r.receive(stamp_for(1, f[1], retx=1), 16 * US) == [] and r.c.duplicates == 1  # too late


def test_backpressure_pauses_and_resumes_on_state_changes_only():
    r = LGReceiver(P)  # pause at 1000 B, resume at 400 B
    f = [frame(i, 300) for i in range(8)]
    r.receive(stamp_for(0, f[0]), 0)
    for i in (2, 3, 4):
        r.receive(stamp_for(i, f[i]), i)
    assert r.pause_out == [] and r.c.reorder_buffer_bytes == 900
    r.receive(stamp_for(5, f[5]), 5)
    assert r.pause_out == [True] and r.paused and r.c.pauses_sent == 1  # Algorithm 2: >= pauseThreshold
    r.receive(stamp_for(6, f[6]), 6)
    assert r.pause_out == [True]  # curr_state: no second pause
    assert len(r.receive(stamp_for(1, f[1], retx=1), 7)) == 6
    assert r.pause_out == [True, False] and not r.paused and r.c.resumes_sent == 1


def test_without_backpressure_the_reordering_buffer_overflows():
    r = LGReceiver(P.with_changes(backpressure=False, reorder_buffer_limit_bytes=700))
    f = [frame(i, 300) for i in range(6)]
    r.receive(stamp_for(0, f[0]), 0)
    for i in (2, 3, 4, 5):
        r.receive(stamp_for(i, f[i]), i)
    assert r.held() == [2, 3] and r.c.reorder_drops == 2 and r.pause_out == []  # Fig. 9b
    assert r.receive(stamp_for(1, f[1], retx=1), 9) == [f[1], f[2], f[3]]
    assert r.ack_no == 6 and r.next_deadline() is None  # the dropped 4, 5 are stepped over


def test_nb_mode_delivers_out_of_order_exactly_once():
    p = P.with_changes(mode="nb")
    r = LGReceiver(p)
    f = [frame(i) for i in range(5)]
    assert r.receive(stamp_for(0, f[0], blocking=0), 0) == [f[0]]
    assert r.receive(stamp_for(2, f[2], blocking=0), 1) == [f[2]]  # at once, out of order
    assert r.receive(stamp_for(3, f[3], blocking=0), 2) == [f[3]]
    assert r.leading_ack == 0 and r.holes() == [1] and len(notices(r)) == 1
    assert r.receive(stamp_for(1, f[1], retx=1, blocking=0), 3) == [f[1]]
    assert r.receive(stamp_for(1, f[1], retx=1, blocking=0), 4) == []
    assert r.receive(stamp_for(3, f[3], blocking=0), 5) == []
    assert r.leading_ack == 3 and r.c.duplicates == 2 and r.pause_out == [] and r.c.reorder_buffer_max_bytes == 0
    # an unrepaired hole is forgotten after ackNoTimeout (bounded record, counted)
    r.receive(stamp_for(6, frame(6), blocking=0), 10 * US)
    assert r.holes() == [4, 5] and r.on_timer(20 * US) == [] and r.c.timeouts == 2 and r.leading_ack == 6
    assert r.receive(stamp_for(4, frame(4), retx=1, blocking=0), 21 * US) == []


def test_receiver_follows_the_blocking_bit_of_the_tags():
    r = LGReceiver(P)
    f = [frame(i) for i in range(5)]
    r.receive(stamp_for(0, f[0]), 0)
    r.receive(stamp_for(2, f[2]), 1)
    r.receive(stamp_for(3, f[3]), 2)
    # the sender switched to LinkGuardianNB: held frames are released in order first
    assert r.receive(stamp_for(4, f[4], blocking=0), 3) == [f[2], f[3], f[4]]
    assert r.c.mode_switches == 1 and not r.blocking
    assert r.receive(stamp_for(1, f[1], retx=1), 4) == [f[1]]  # back to blocking: the hole is still awaited
    assert r.c.mode_switches == 2 and r.blocking and r.ack_no == 5


def test_far_jump_resynchronises_instead_of_reporting_a_huge_loss():
    r = LGReceiver(P)
    r.receive(stamp_for(0, frame(0)), 0)
    r.receive(stamp_for(2, frame(2)), 1)
    notices(r)
    out = r.receive(stamp_for(40_000, frame(9)), 2)
    assert out == [frame(2), frame(9)] and r.c.resyncs == 1 and r.holes() == [] and r.control_out == []
    assert r.expected == 40_001 and r.leading_ack == 40_000


def test_a_lost_first_frame_is_a_hole_like_any_other():
    r = LGReceiver(P)  # both ends start at counter 0
    assert r.receive(stamp_for(1, frame(1)), 0) == []
    (ln,) = notices(r)
    assert (ln.first_lost_seq, ln.hole_size) == (0, 1)
    assert r.receive(stamp_for(0, frame(0), retx=1), 1) == [frame(0), frame(1)]


def test_receiver_attached_mid_stream_or_sender_restarted_resynchronises():
    r = LGReceiver(P)
    assert r.receive(stamp_for(100_000, frame(0)), 0) == [frame(0)]  # far ahead: a new stream
    assert r.receive(stamp_for(100_001, frame(1)), 1) == [frame(1)]
    assert r.control_out == [] and r.c.resyncs == 1 and r.c.holes_detected == 0
    assert wrap(r.leading_ack) == wrap(100_001)
    # the sender restarted from 0: far behind and not an awaited hole
    assert r.receive(stamp_for(0, frame(2)), 2) == [frame(2)] and r.c.resyncs == 2
    # after a disable the next tagged frame sets the counters, wherever it is
    r.release_all()
    assert r.receive(stamp_for(7, frame(4)), 4) == [frame(4)] and r.c.resyncs == 2 and r.control_out == []


def test_release_all_hands_over_held_frames_in_order_and_resumes():
    r = LGReceiver(P)
    f = [frame(i, 300) for i in range(8)]
    r.receive(stamp_for(0, f[0]), 0)
    for i in (2, 3, 4, 5, 6):
        r.receive(stamp_for(i, f[i]), i)
    assert r.paused
    r.actions.take(Backpressure)  # (the pause above, taken)
    assert r.release_all() == f[2:7]
    assert r.pause_out == [False] and not r.synced and r.c.released_on_disable == 5 and r.next_deadline() is None


def test_gap_across_the_wrap():
    start = 2 * 65536 - 3  # counters 131069..131074: era 1 -> era 0 at 131072
    r = LGReceiver(P, start=start)
    f = [frame(i) for i in range(6)]
    for i in (0, 1):
        assert r.receive(stamp_for(start + i, f[i]), i) == [f[i]]
    assert r.receive(stamp_for(start + 4, f[4]), 2) == []  # 131071 (era 1) and 131072 (era 0, seq 0) lost
    (ln,) = notices(r)
    assert (ln.first_lost_seq, ln.hole_size, ln.leading_ack, ln.era) == (65535, 2, 65534, 1)
    assert r.receive(stamp_for(start + 3, f[3], retx=1), 3) == []
    assert r.receive(stamp_for(start + 2, f[2], retx=1), 4) == [f[2], f[3], f[4]]
    # and the sender resolves it the same way
    s = LGSender(P, start=start)
    for i in range(6):
        s.stamp(f[i])
    retx = s.on_loss_notification(ln.era, ln.leading_ack, ln.hole_size, ln.first_lost_seq)
    assert [index_of(x[:12] + x[17:]) for x in retx[::2]] == [2, 3]
