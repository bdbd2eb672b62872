"""A LinkGuardian end that restarts (its switch daemon killed and started again): the peer
resynchronises without delivering a duplicate (docs/faults.md "A switch daemon killed and
restarted"). Engine level, in virtual time; the live fault is tests/integration/test_faults_live.py."""

from __future__ import annotations

from netstack.engine import Transmit
from netstack.linkguardian import LGParams
from netstack.linkguardian.receiver import FRESH_SLACK, RESTART_BEHIND, LGReceiver
from netstack.linkguardian.sender import LGSender

from . import H1_MAC, H2_MAC, US, frame, index_of

PARAMS = LGParams(copies=1, ack_no_timeout_ns=300 * US)


def send(sender: LGSender, receiver: LGReceiver, items: range, t: int) -> list[int]:
    """Each index through a fresh stamp of ``sender`` into ``receiver``: what it delivers."""
    out = []
    for i in items:
        for inner in receiver.receive(sender.stamp(frame(i), t), t):
            out.append(index_of(inner))
        t += 1_000
    return out


def test_a_restarted_sender_is_followed_at_once_and_nothing_is_dropped_or_duplicated():
    rx = LGReceiver(PARAMS)
    old = LGSender(PARAMS, src_mac=H1_MAC, dst_mac=H2_MAC)
    assert send(old, rx, range(1000), 0) == list(range(1000))
    new = LGSender(PARAMS, src_mac=H1_MAC, dst_mac=H2_MAC)  # counter 0 again, its buffer empty
    got = send(new, rx, range(1000, 1300), 2_000_000)
    assert got == list(range(1000, 1300))  # every frame after the restart, once, in order
    assert rx.c.resyncs == 1 and rx.c.duplicates == 0
    assert not [a for a in rx.actions.take(Transmit)]  # no loss reported for the old counters


def test_a_sender_that_restarts_early_is_followed_too():
    rx = LGReceiver(PARAMS)
    old = LGSender(PARAMS, src_mac=H1_MAC, dst_mac=H2_MAC)
    send(old, rx, range(RESTART_BEHIND + 5), 0)
    new = LGSender(PARAMS, src_mac=H1_MAC, dst_mac=H2_MAC)
    assert send(new, rx, range(100, 200), 1_000_000) == list(range(100, 200))


def test_a_restarted_receiver_starts_from_the_senders_current_frame_without_holes():
    tx = LGSender(PARAMS, src_mac=H1_MAC, dst_mac=H2_MAC)
    first = LGReceiver(PARAMS)
    send(tx, first, range(5000), 0)  # the sender is well under way
    rx = LGReceiver(PARAMS)  # the receiver's switch restarted
    got = send(tx, rx, range(5000, 5100), 10_000_000)
    assert got == list(range(5000, 5100))
    assert rx.c.resyncs == 1 and rx.c.lost_detected == 0
    assert not list(rx.actions.take(Transmit))  # no notification: nothing before is asked again


def test_a_fresh_link_still_repairs_the_loss_of_its_very_first_frames():
    tx = LGSender(PARAMS, src_mac=H1_MAC, dst_mac=H2_MAC)
    rx = LGReceiver(PARAMS)
    frames = [tx.stamp(frame(i), i * 1_000) for i in range(10)]
    got = []
    for f in frames[3:]:  # the first three lost
        got += [index_of(x) for x in rx.receive(f, 20_000)]
    assert rx.c.resyncs == 0 and rx.c.lost_detected == 3 < FRESH_SLACK
    notes = list(rx.actions.take(Transmit))
    assert notes  # the hole 0..2 is reported, as on any link
    assert got == []  # blocking: held until the hole is repaired


def test_a_duplicated_original_is_not_taken_for_a_restart():
    tx = LGSender(PARAMS, src_mac=H1_MAC, dst_mac=H2_MAC)
    rx = LGReceiver(PARAMS)
    frames = [tx.stamp(frame(i), i * 1_000) for i in range(200)]
    got = []
    for i, f in enumerate(frames):
        got += [index_of(x) for x in rx.receive(f, i * 1_000)]
        if i % 50 == 49:  # the wire duplicates a frame now and then (netem duplicate)
            got += [index_of(x) for x in rx.receive(frames[i - 3], i * 1_000)]
    assert got == list(range(200)) and rx.c.resyncs == 0 and rx.c.duplicates == 4
