"""The senders' failure timer on a loaded host: T/C-SACK's 2T probe (draft §2) and go-back-N's rto
wait the scheduling slack the live shell passes (``SenderBase.set_timer_slack``), and the live
shell passes twice the recent largest scheduling delay (``netstack.tcsack.live.SlackFeed``)."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from headers.tcsack import TcsAck, TcsData, TcsDataFlag
from netstack.looplag import LagHistogram
from netstack.tcsack import GbnSender, TcsParams, TcsSender
from netstack.tcsack.live import SLACK_FACTOR, SlackFeed

MS = 1_000_000


def _sent(kind: type, t_ns: int) -> tuple[object, list[TcsData]]:
    """A sender of 3 packets that has sent all three (at their slots from 0)."""
    p = TcsParams(rate_bps=10_000_000, t_ns=t_ns, n=4, payload=100, rto_ns=4 * t_ns)
    s = kind(p, bytes(300))
    slot = p.packet_ns(TcsData.SIZE + 100)
    sent = [TcsData.from_bytes(d) for t in range(3) for d in s.poll(t * slot)]
    assert len(sent) == 3
    return s, sent


def _probes(datagrams: list[bytes]) -> int:
    return sum(1 for d in datagrams if TcsData.from_bytes(d).flags & TcsDataFlag.PROBE)


@given(t_ms=st.integers(1, 50), slack_ms=st.integers(0, 300), ack_ms=st.integers(1, 20),
       frac=st.floats(0.0, 0.999))
def test_tcsack_no_probe_before_2t_plus_slack_after_the_last_ack(t_ms, slack_ms, ack_ms, frac):
    """A gap since the last ACK shorter than 2T + slack never probes; at 2T + slack the sender
    probes with its last packet, as §2 says it does after 2T."""
    s, sent = _sent(TcsSender, t_ms * MS)
    s.set_timer_slack(slack_ms * MS)
    ack_at = ack_ms * MS
    s.on_ack(TcsAck(0, 0, 1, sent[0].tsval), ack_at)  # the first packet arrived; the ACK restarts the clock
    assert s.c.acks_rx == 1
    timeout = 2 * t_ms * MS + slack_ms * MS
    assert s.next_deadline() == ack_at + timeout
    gap = int(frac * timeout)
    assert _probes(s.poll(ack_at + gap)) == 0 and s.c.probes_sent == 0
    (probe,) = s.poll(ack_at + timeout)
    assert TcsData.from_bytes(probe).seq == 2 and s.c.probes_sent == 1
    c = s.counters()
    assert c["timer_slack_ns"] == slack_ms * MS and c["timeout_ns"] == timeout


@given(t_ms=st.integers(1, 50), slack_ms=st.integers(0, 300), frac=st.floats(0.0, 0.999))
def test_gbn_no_timeout_before_rto_plus_slack(t_ms, slack_ms, frac):
    s, sent = _sent(GbnSender, t_ms * MS)
    s.set_timer_slack(slack_ms * MS)
    s.on_ack(TcsAck(0, 0, 1, sent[0].tsval), MS)  # progress: the rto clock restarts
    timeout = 4 * t_ms * MS + slack_ms * MS
    s.poll(MS + int(frac * timeout))
    assert s.c.timeouts == 0
    s.poll(MS + timeout)
    assert s.c.timeouts == 1 and s.counters()["timeout_ns"] == timeout


def test_slack_back_to_zero_is_the_papers_2t():
    s, sent = _sent(TcsSender, 2 * MS)
    s.set_timer_slack(50 * MS)
    s.set_timer_slack(0)
    # before the first ACK the timer also waits for the path's round trip (SenderBase.FIRST_ACK_WAIT_NS)
    assert s.timeout_ns() == 4 * MS + s.FIRST_ACK_WAIT_NS and s.next_deadline() == 4 * MS + s.FIRST_ACK_WAIT_NS
    s.on_ack(TcsAck(0, 0, 0, sent[0].tsval), MS)
    assert s.timeout_ns() == 4 * MS and s.next_deadline() == 5 * MS  # the clock restarted at the ACK
    s.set_timer_slack(-5)  # never below the configured timer
    assert s.timer_slack_ns == 0


def test_the_live_shell_passes_twice_the_recent_largest_delay():
    s, _ = _sent(TcsSender, 2 * MS)
    hist = LagHistogram(time.monotonic_ns())
    feed = SlackFeed(s, lambda: hist)
    feed()
    assert s.timer_slack_ns == 0  # an idle machine: the paper's 2T
    hist.record(30 * MS, time.monotonic_ns())
    feed()
    assert s.timer_slack_ns == SLACK_FACTOR * 30 * MS
    assert s.counters()["timeout_ns"] == 4 * MS + 60 * MS + s.FIRST_ACK_WAIT_NS  # (no ACK yet)


def test_the_feed_calls_progress_about_once_a_second():
    s, _ = _sent(TcsSender, 2 * MS)
    hist = LagHistogram(0)
    calls: list[int] = []
    feed = SlackFeed(s, lambda: hist, lambda: calls.append(1))
    for _ in range(25):  # 2.5 s of 100 ms calls
        feed()
    assert len(calls) == 2
