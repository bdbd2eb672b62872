"""Link shaping (netem's delay, jitter, reorder, duplicate) and carrier loss in the switch engine."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from netstack.errors import ConfigError
from netstack.switch import ImpairmentConfig

from . import GBPS, MS, make_switch, udp_frame

US = 1_000


def seq_frame(i: int, size: int = 100) -> bytes:
    """A UDP frame whose last 4 bytes carry ``i`` (to see order, duplicates and loss)."""
    return udp_frame(size=size)[:-4] + struct.pack("!I", i)


def seq_of(frame: bytes) -> int:
    return int(struct.unpack("!I", frame[-4:])[0])


def learned(**kw) -> object:
    """Two ports; station 2 learnt behind p1, so frames from p0 go out of p1 only."""
    sw = make_switch(2, **{"rate_bps": GBPS, **kw})
    sw.receive("p1", udp_frame(src=2, dst=1), 0)
    sw.transmit(0)
    sw.transmit(10 * MS)
    return sw


def send(sw, n: int, t0: int = 10 * MS, gap: int = 10 * US) -> list[int]:
    for i in range(n):
        sw.receive("p0", seq_frame(i), t0 + i * gap)
    return [seq_of(f) for port, f in sw.transmit(t0 + 10**10) if port == "p1"]


def test_config_checks_shaping_fields():
    with pytest.raises(ConfigError, match="reorder"):
        ImpairmentConfig(reorder=0.1)  # nothing to reorder against without a delay
    with pytest.raises(ConfigError, match="delay_ns"):
        ImpairmentConfig(delay_ns=-1)
    with pytest.raises(ConfigError, match="duplicate"):
        ImpairmentConfig(duplicate=1.5)
    assert ImpairmentConfig(delay_ns=1).active and ImpairmentConfig(duplicate=0.1).shapes
    assert not ImpairmentConfig(loss=0.1).shapes


def test_a_constant_delay_holds_every_frame_and_keeps_the_order():
    sw = learned(p1={"impairment": ImpairmentConfig(delay_ns=5 * MS, seed=1)})
    t0 = 20 * MS
    sw.receive("p0", seq_frame(0), t0)
    assert sw.transmit(t0 + 4 * MS) == []  # still held
    out = sw.transmit(t0 + 6 * MS)
    assert [seq_of(f) for _, f in out] == [0]
    assert send(sw, 200, t0=30 * MS) == list(range(200))
    assert sw.counters()["p1"]["impair_reordered"] == 0


def test_jitter_reorders_and_every_frame_arrives_once():
    sw = learned(p1={"impairment": ImpairmentConfig(delay_ns=2 * MS, jitter_ns=1 * MS, seed=3)})
    got = send(sw, 500)
    assert sorted(got) == list(range(500))
    assert got != list(range(500))
    c = sw.counters()["p1"]
    assert c["impair_reordered"] > 0 and c["impair_duplicated"] == 0


def test_reorder_sends_a_share_at_once_past_the_held_ones():
    sw = learned(p1={"impairment": ImpairmentConfig(delay_ns=5 * MS, reorder=0.25, seed=5)})
    got = send(sw, 2000)
    assert sorted(got) == list(range(2000))
    overtakes = sw.counters()["p1"]["impair_reordered"]
    # about a quarter go at once, and with 5 ms of delay against 10 us gaps each one overtakes
    assert 0.18 * 2000 < overtakes < 0.32 * 2000


def test_duplicate_sends_copies_right_after_the_original():
    sw = learned(p1={"impairment": ImpairmentConfig(duplicate=0.1, seed=9)})
    got = send(sw, 2000)
    dups = sw.counters()["p1"]["impair_duplicated"]
    assert 0.07 * 2000 < dups < 0.13 * 2000
    assert len(got) == 2000 + dups and sorted(set(got)) == list(range(2000))
    assert got == sorted(got)  # a copy leaves right after its original


def test_shaping_draws_nothing_it_does_not_use_so_a_seed_keeps_its_losses():
    # a constant delay draws no random number: the same frames are lost as on the unshaped link
    shaped = learned(p1={"impairment": ImpairmentConfig(loss=0.2, delay_ns=1 * MS, seed=4)})
    lossy = learned(p1={"impairment": ImpairmentConfig(loss=0.2, seed=4)})
    a, b = send(shaped, 300), send(lossy, 300)
    assert 200 < len(b) < 280 and a == b


@settings(max_examples=60, deadline=None)
@given(delay=st.integers(0, 3 * MS), jitter=st.integers(0, 3 * MS), dup=st.floats(0, 0.5),
       reorder=st.floats(0, 0.5), seed=st.integers(0, 2**32), n=st.integers(1, 80))
def test_shaping_never_loses_or_invents_frames(delay, jitter, dup, reorder, seed, n):
    cfg = ImpairmentConfig(delay_ns=delay, jitter_ns=jitter, duplicate=dup, reorder=reorder if delay else 0.0,
                           seed=seed)
    sw = learned(p1={"impairment": cfg})
    got = send(sw, n)
    c = sw.counters()["p1"]
    assert sorted(set(got)) == list(range(n))
    assert len(got) == n + c["impair_duplicated"]


# ---------------------------------------------------------------------------- carrier


def test_carrier_loss_drops_and_counts_queued_and_arriving_frames_then_recovers():
    sw = learned(rate_bps=10_000_000)  # 10 Mbit/s: frames queue up behind the first
    t0 = 20 * MS
    for i in range(50):
        sw.receive("p0", seq_frame(i, size=1000), t0)
    first = sw.transmit(t0 + 1 * MS)
    assert sw.set_carrier("p1", False, t0 + 1 * MS)
    assert not sw.set_carrier("p1", False, t0 + 1 * MS)  # no change, nothing counted twice
    c = sw.counters()["p1"]
    assert c["carrier"] is False and c["link_down"] == 1
    assert c["queue_frames"] == [0] * 8 and c["buffer_used"] == 0
    lost_in_flush = c["carrier_drops"]
    assert lost_in_flush + len(first) + len(sw.transmit(t0 + 2 * MS)) == 50
    for i in range(10):
        sw.receive("p0", seq_frame(100 + i), t0 + 2 * MS)
    assert sw.transmit(t0 + 100 * MS) == []
    assert sw.counters()["p1"]["carrier_drops"] == lost_in_flush + 10
    assert sw.next_deadline() is None
    assert sw.set_carrier("p1", True, t0 + 100 * MS)
    sw.receive("p0", seq_frame(200), t0 + 101 * MS)
    assert [seq_of(f) for _, f in sw.transmit(t0 + 200 * MS)] == [200]
    c = sw.counters()["p1"]
    assert c["carrier"] is True and c["link_down"] == 1


def test_carrier_loss_releases_pfc_ingress_accounting():
    # p0 lossless: frames queued for p1 hold p0's ingress bytes above XOFF; the flush must
    # release them, or p0 would keep its peer paused for ever
    sw = learned(rate_bps=10_000_000, lossless=True, xoff_bytes=5000, xon_bytes=2000)
    for i in range(20):
        sw.receive("p0", seq_frame(i, size=1000), 20 * MS)
    sw.transmit(20 * MS)
    assert sw.counters()["p0"]["pfc_asserted"][0]
    sw.set_carrier("p1", False, 20 * MS)
    sw.transmit(21 * MS)
    c = sw.counters()["p0"]
    assert c["ingress_bytes"][0] == 0 and not c["pfc_asserted"][0] and c["resumes_tx"] == 1


def test_unknown_port_is_a_config_error():
    sw = make_switch(2)
    with pytest.raises(ConfigError, match="no port"):
        sw.set_carrier("p9", False, 0)


@settings(max_examples=80, deadline=None)
@given(events=st.lists(st.one_of(st.tuples(st.just("frame"), st.integers(60, 1500)),
                                 st.tuples(st.just("carrier"), st.booleans()),
                                 st.tuples(st.just("tick"), st.integers(1, 2 * MS))), max_size=120))
def test_carrier_changes_lose_no_frame_uncounted_and_never_reorder(events):
    sw = learned(rate_bps=100_000_000, buffer_bytes=20_000)
    t = 20 * MS
    sent = 0
    got: list[int] = []
    for kind, value in events:
        t += 10 * US
        if kind == "frame":
            sw.receive("p0", seq_frame(sent, size=value), t)
            sent += 1
        elif kind == "carrier":
            sw.set_carrier("p1", value, t)
        else:
            t += value
        got += [seq_of(f) for port, f in sw.transmit(t) if port == "p1"]
    sw.set_carrier("p1", True, t)
    got += [seq_of(f) for port, f in sw.transmit(t + 10**10) if port == "p1"]
    c = sw.counters()["p1"]
    assert got == sorted(got) and len(set(got)) == len(got)
    assert len(got) + c["carrier_drops"] + c["queue_drops"] == sent
    assert c["buffer_used"] == 0 and c["carrier"] is True
