"""Hypothesis puts an attacker on the path of a T/C-SACK or go-back-N transfer that is itself lossy,
duplicating and reordering (docs/security.md#tc-sack), and interleaves its datagrams anywhere in
the transfer:

- random bytes, to the sender and to the receiver (from the attacker's address, or from the
  sender's when they cannot decode as data);
- blind forged ACKs: every field random (flow id, ``ack_seq``, ``cum_ack``, SACK runs, flags),
  ``tsecr`` a guess that missed the sender's stamps;
- ACKs forged from the newest genuine one (what an attacker that reads the path has): numbered
  far ahead or a little ahead, acknowledging beyond what was sent (``cum_ack``, a SACK run), the
  end without ``FIN_SEEN`` or ``FIN_SEEN`` before the last packet was sent, another flow id,
  and replays of genuine ACKs, new and old;
- forged data and LAST packets from the attacker's address, another flow's packets from the
  sender's, replays of genuine data packets from the sender's, and, once the receiver has taken
  the end of the stream, conflicting LAST packets and packets beyond it from the sender's.

What no check without keys can refuse is left out, and written up as such: an ACK whose every
claim is one the receiver could have made (``cum_ack`` and SACK runs within what was sent, a
copied ``tsecr``), data with the right flow and sequence numbers from the sender's address, and
anything that reaches the receiver before the sender's first packet does (it would bind the
receiver). Receiver-bound attacks wait until the receiver is bound.

Invariants: every byte delivered exactly once and in order; the transfer completes, and the
sender finishes only when the receiver has everything; after every event, the sender believes
nothing the receiver lacks (its cumulative point and SACK state are the receiver's or behind)
and the receiver's end of stream is unset or the real one; the receiver's buffer and the
sender's SACK, send-time and retransmission state stay bounded by the transfer; the engines
raise nothing but ``HeaderError`` (the harness catches only that).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.tcsack import MAX_BLOCKS, SEQ_MASK, TcsAck, TcsAckFlag, TcsData, TcsDataFlag
from netstack.tcsack import ENGINES, TcsParams
from netstack.tcsack.common import unwrap

from .harness import EVIL, SND, T0, Path

FATE = st.tuples(st.booleans(), st.booleans(), st.integers(0, 40))  # lost, duplicated, +100 us units
SCHEDULE = st.lists(FATE, max_size=80)
START = st.one_of(st.integers(0, SEQ_MASK), st.integers(SEQ_MASK - 40, SEQ_MASK))
U32 = st.integers(0, SEQ_MASK)

RUNS = st.lists(st.tuples(st.integers(1, 1 << 20), st.integers(1, 1 << 20)), max_size=4)
BLIND_ACK = st.tuples(st.just("blind"), st.booleans(), st.integers(1, 0xFFFF), U32, U32,
                      st.integers(0, (1 << 31) - 1), RUNS, st.integers(0, 7))
MUTANT = st.tuples(st.just("mutant"), st.sampled_from(["ahead", "near", "cum_beyond", "sack_beyond", "fin", "flow",
                                                       "replay", "replay_old"]),
                   st.integers(0, 1 << 30))
JUNK = st.tuples(st.just("junk"), st.sampled_from(["sender", "evil", "spoofed"]), st.binary(max_size=40))
EVIL_DATA = st.tuples(st.just("evil_data"), st.integers(-3, 80), st.integers(0, 7), st.booleans(),
                      st.binary(max_size=70))
SPOOF = st.tuples(st.just("spoof"), st.sampled_from(["other_flow", "replay", "early_last", "last_conflict",
                                                     "beyond_last"]),
                  st.integers(0, 1 << 20), st.integers(0, 7))
ATTACK = st.one_of(BLIND_ACK, MUTANT, JUNK, EVIL_DATA, SPOOF)
#: (when, in us after the start; every how many us it comes again; how many times; what)
ATTACKS = st.lists(st.tuples(st.integers(0, 4000), st.integers(20, 1000), st.integers(1, 30), ATTACK), max_size=30)


def _fate(schedule):
    def fate(i: int) -> tuple[bool, bool, int]:
        if i < len(schedule):
            lost, dup, extra = schedule[i]
            return lost, dup, extra * 100_000
        return False, False, 0  # then a clean path: the transfer must end
    return fate


def _copy(ack: TcsAck, **changes: Any) -> bytes:
    fields = dict(flow_id=ack.flow_id, ack_seq=ack.ack_seq, cum_ack=ack.cum_ack, tsecr=ack.tsecr, blocks=ack.blocks,
                  flags=ack.flags, ack_delay=ack.ack_delay)
    fields.update(changes)
    return TcsAck(**fields).to_bytes()


def _blind(path: Path, attack: tuple) -> bytes:
    _, same_flow, other, ack_seq, cum_ack, miss, runs, flags = attack
    blocks, prev = [], 0
    for gap, length in runs:  # ascending, non-adjacent, within 2^31 of cum_ack: what the format allows
        start, end = prev + gap, prev + gap + length
        if end >= 1 << 31:
            break
        blocks.append(((cum_ack + start) & SEQ_MASK, (cum_ack + end) & SEQ_MASK))
        prev = end
    tsecr = (path.snd.started_ns // 1000 - 1 - miss) & SEQ_MASK  # before the first stamp: a miss
    flow = path.snd.flow_id if same_flow else path.snd.flow_id ^ other
    return TcsAck(flow, ack_seq, cum_ack, tsecr, tuple(blocks), flags).to_bytes()


def _mutant(path: Path, mode: str, r: int) -> bytes | None:
    """The newest genuine ACK, changed so that it is inconsistent with what was sent (or replayed)."""
    ack = path.latest_ack()
    if ack is None:
        return None
    snd = path.snd
    limit, nxt = snd._sent_limit(), (ack.ack_seq + 1) & SEQ_MASK
    if mode == "ahead":
        return _copy(ack, ack_seq=(ack.ack_seq + (1 << 20) + r) & SEQ_MASK)
    if mode == "near":
        return _copy(ack, ack_seq=(ack.ack_seq + 1 + r % 64) & SEQ_MASK)
    if mode == "cum_beyond":
        return _copy(ack, ack_seq=nxt, cum_ack=(limit + 1 + r % (1 << 20)) & SEQ_MASK, blocks=())
    if mode == "sack_beyond":  # one more run, past what was sent and past the genuine runs
        blocks = ack.blocks[:MAX_BLOCKS - 1]
        cum = unwrap(ack.cum_ack, snd.cum)
        floor = cum + 1 + ((blocks[-1][1] - ack.cum_ack) & SEQ_MASK if blocks else 0)
        start = max(floor, limit) + r % 3
        return _copy(ack, ack_seq=nxt, blocks=(*blocks, (start & SEQ_MASK, (start + 1 + r % 5) & SEQ_MASK)))
    if mode == "fin":
        if limit < snd.end:
            return _copy(ack, ack_seq=nxt, flags=ack.flags | TcsAckFlag.FIN_SEEN)
        return _copy(ack, ack_seq=nxt, cum_ack=snd.end & SEQ_MASK, blocks=(), flags=0)
    if mode == "flow":
        return _copy(ack, flow_id=ack.flow_id ^ (1 + r % 0xFFFE))
    if mode == "replay":
        return path.acks_seen[-1]
    return path.acks_seen[r % len(path.acks_seen)]


def _spoof(path: Path, mode: str, r: int, flags: int) -> tuple[bytes, tuple[str, int]] | None:
    rcv, flow = path.rcv, path.rcv.flow_id
    if mode == "other_flow":
        return TcsData(flow ^ (1 + r % 0xFFFE), r & SEQ_MASK, 0, flags).to_bytes() + b"x" * 64, SND
    if mode == "replay":
        return (path.data_seen[r % len(path.data_seen)], SND) if path.data_seen else None
    last = rcv.last_seq
    if mode == "early_last":  # no LAST yet: one below what the receiver already has
        held = getattr(rcv, "_runs", None)
        top = held.last_end() if held else None
        if last is not None or (top is None and rcv.cum == path.snd.base):
            return None
        seq = (top - 2 - r % 3 if top is not None and r % 2 else rcv.cum - 1 - r % 3)
        if seq < path.snd.base:
            return None
        return TcsData(flow, seq & SEQ_MASK, 0, TcsDataFlag.LAST | flags).to_bytes() + b"w" * 64, SND
    if last is None:
        return None  # before the genuine LAST, a consistent forged one is what no check can refuse
    if mode == "last_conflict":  # below the cumulative point or above the end
        seq = last + 1 + r % 50 if r % 2 else rcv.cum - 1 - r % 50
        return TcsData(flow, seq & SEQ_MASK, 0, TcsDataFlag.LAST | flags).to_bytes() + b"y" * 64, SND
    return TcsData(flow, (last + r % 50) & SEQ_MASK, 0, flags & ~TcsDataFlag.LAST).to_bytes() + b"z" * 64, SND


def _fire(path: Path, every_ns: int, times: int, attack: tuple) -> None:
    if times > 1:
        path.at(path.now + every_ns, _fire, path, every_ns, times - 1, attack)
    tag = attack[0]
    to_receiver: tuple[bytes, tuple[str, int]] | None = None
    if tag == "blind":
        path.to_sender(_blind(path, attack))
    elif tag == "mutant":
        forged = _mutant(path, attack[1], attack[2])
        if forged is not None:
            path.to_sender(forged)
    elif tag == "junk" and attack[1] == "sender":
        path.to_sender(attack[2])
    elif tag == "junk":
        blob = attack[2]
        if attack[1] == "spoofed" and blob[:1] == b"\x01":
            blob = b"\x03" + blob[1:]  # from the sender's address: junk that cannot be its data
        to_receiver = blob, EVIL if attack[1] == "evil" else SND
    elif tag == "evil_data":
        _, off, flags, same_flow, payload = attack
        flow = path.rcv.flow_id if same_flow else path.rcv.flow_id ^ 1
        to_receiver = TcsData(flow, (path.snd.base + off) & SEQ_MASK, 0, flags).to_bytes() + payload, EVIL
    else:
        to_receiver = _spoof(path, attack[1], attack[2], attack[3])
        if to_receiver is None and not path.rcv.complete:  # its moment has not come yet: wait for it
            path.at(path.now + 50_000, _fire, path, every_ns, 1, attack)
            return
    if to_receiver is not None:
        if path.rcv.peer is None:  # not bound yet: the attack waits (a race it could win is left out)
            path.at(path.now + 50_000, _fire, path, every_ns, 1, attack)
            return
        path.to_receiver(*to_receiver)


def _invariants(path: Path) -> None:
    """After every event: the sender believes nothing the receiver does not have, the receiver
    takes no end of the stream but the real one, and the state an attacker could try to grow
    stays within the transfer's own size."""
    snd, rcv = path.snd, path.rcv
    packets = snd.packets
    assert snd.cum <= rcv.cum and rcv.last_seq in (None, snd.end - 1)
    for start, end in getattr(snd, "_sacked", ()):
        assert all(x < rcv.cum or x in rcv._buf for x in range(start, end)), (start, end)
    if hasattr(rcv, "buffered"):  # T/C-SACK: the receive buffer and its runs
        assert rcv.buffered <= min(packets, path.params.buffer_packets) and len(rcv._runs) <= packets
    if hasattr(snd, "_sacked"):  # T/C-SACK: what ACKs said arrived, send times, the resend queue
        assert len(snd._sacked) <= packets and len(snd._sent_us) <= packets and len(snd._retx) <= packets


@settings(max_examples=200)
@given(kind=st.sampled_from(["tcsack", "gbn"]), size=st.integers(0, 3000), start=START, n=st.integers(1, 12),
       t_us=st.integers(100, 2000), fwd=SCHEDULE, rev=SCHEDULE, attacks=ATTACKS)
def test_an_attacker_on_a_lossy_reordering_path_cannot_break_a_transfer(kind, size, start, n, t_us, fwd, rev,
                                                                        attacks):
    data = bytes((i * 7 + 3) & 0xFF for i in range(size))
    p = TcsParams(rate_bps=20_000_000, t_ns=t_us * 1000, n=n, payload=64)
    path = Path(kind, p, data, start_seq=start, fwd=_fate(fwd), rev=_fate(rev))
    for at_us, every_us, times, attack in attacks:
        path.at(T0 + at_us * 1000, _fire, path, every_us * 1000, times, attack)
    path.run(max_ns=5_000_000_000, after=lambda: _invariants(path))
    assert path.delivered_ok, (len(path.delivered), path.snd.packets)
    assert path.snd.done and path.rcv.complete and path.complete_when_done is True
    assert path.rcv.peer == SND and path.rcv.last_seq == path.snd.end - 1


#: a forged packet from the sender's own address, made against the receiver's state when it
#: arrives: flagged LAST below the cumulative point or below data held, LAST at another seq
#: than the taken one, unflagged at or beyond it; (kind, how far, flags)
FORGED = st.tuples(st.sampled_from(["last_below", "last_under_held", "last_other", "beyond"]), st.integers(0, 40),
                   st.integers(0, 7))


def _forged_data(rcv, base: int, kind: str, r: int, flags: int) -> bytes | None:
    last, cum = rcv.last_seq, rcv.cum
    held = getattr(rcv, "_runs", None)
    top = held.last_end() if held else None
    if kind == "last_below" and last is None and cum > base:
        seq, flags = cum - 1 - r % (cum - base), flags | TcsDataFlag.LAST
    elif kind == "last_under_held" and last is None and top is not None and top - 2 >= base:
        seq, flags = top - 2 - r % (top - 1 - base), flags | TcsDataFlag.LAST
    elif kind == "last_other" and last is not None:
        seq, flags = last + 1 + r if r % 2 else max(base, last - 1 - r), flags | TcsDataFlag.LAST
        if seq == last:
            return None
    elif kind == "beyond" and last is not None:
        seq, flags = last + r, flags & ~TcsDataFlag.LAST
    else:
        return None
    return TcsData(rcv.flow_id, seq & SEQ_MASK, 0, flags).to_bytes() + b"!" * 8


@settings(max_examples=300)
@given(kind=st.sampled_from(["tcsack", "gbn"]), packets=st.integers(1, 30), start=START,
       order=st.lists(st.integers(0, 29), max_size=90), forged=st.lists(st.tuples(st.integers(0, 120), FORGED),
                                                                          max_size=30))
def test_the_receiver_takes_the_end_of_the_stream_once_and_only_where_it_can_be(kind, packets, start, order,
                                                                                  forged):
    """The genuine packets arrive in any order, with duplicates (the ``order`` drawn, then all of
    them in order, as retransmissions or a go-back would bring them), from the sender's own
    address; forged packets from that same address, each made against the receiver's state when
    it arrives, are interleaved: none of them is taken, and the end of the stream is the real one."""
    rcv = ENGINES[kind][1](TcsParams(n=4, payload=8), 0, start)
    data = [bytes([i]) * 8 for i in range(packets)]
    genuine = [i % packets for i in order] + list(range(packets))
    at = {}
    for pos, f in forged:
        at.setdefault(pos % (len(genuine) + 1), []).append(f)
    delivered: list[bytes] = []
    for pos, i in enumerate([*genuine, None]):
        for f in at.get(pos, ()):
            d = _forged_data(rcv, start, *f)
            if d is not None:
                assert rcv.receive(d, pos, SND) == []
            assert rcv.last_seq in (None, start + packets - 1)
        if i is not None:
            flags = TcsDataFlag.LAST if i == packets - 1 else 0
            delivered += rcv.receive(TcsData(0, (start + i) & SEQ_MASK, 0, flags).to_bytes() + data[i], pos, SND)
    assert delivered == data and rcv.complete and rcv.last_seq == start + packets - 1
