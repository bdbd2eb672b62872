"""Sealing and opening: the MAC, tampering, truncation, replays, reordering, eras, key rotation,
and an attacker on the link (hypothesis stateful)."""

import os
import random
from dataclasses import asdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from headers.auth import AUTH_INPUT, TRAILER_LEN, decode_trailer
from netstack.auth.frame import (
    FORGED,
    MAX_WINDOW,
    REASONS,
    REPLAYED,
    STALE_ERA,
    TRUNCATED,
    U32,
    UNKNOWN_KEY,
    AuthFailure,
    Opener,
    Sealer,
    era_now,
    mac,
)
from netstack.auth.keys import PURPOSE_LG_LINK, DerivedKeys, generate, load, rotate

K1, K2, K3 = (bytes([n]) * 16 for n in (0xA1, 0xB2, 0xC3))
ONE = DerivedKeys({1: K1}, 1)


def refused(opener, frame):
    with pytest.raises(AuthFailure) as exc:
        opener.open(frame)
    assert exc.value.reason in REASONS
    return exc.value.reason


def test_counters_start_at_zero_for_every_reason():
    o = Opener(ONE)
    assert asdict(o.c) == {"ok": 0, "truncated": 0, "unknown_key": 0, "forged": 0, "replayed": 0, "stale_era": 0}
    assert o.refused == 0 and o.highest is None


def test_round_trip():
    s, o = Sealer(ONE, era=7), Opener(ONE)
    for n, payload in enumerate([b"", b"x", os.urandom(1500), bytes(64)], 1):
        frame = s.seal(payload)
        assert len(frame) == len(payload) + TRAILER_LEN and frame.startswith(payload)
        t = decode_trailer(frame)
        assert (t.key_id, t.era, t.seq) == (1, 7, n) and s.next_seq == n + 1
        assert o.open(frame) == payload
    assert s.c.sealed == 4 and o.c.ok == 4 and o.refused == 0 and o.highest == (7, 4)
    # any buffer type in, bytes out
    assert o.open(memoryview(s.seal(b"mv"))) == b"mv"
    assert o.open(bytearray(s.seal(b"ba"))) == b"ba"
    assert type(o.open(memoryview(s.seal(b"t")))) is bytes
    assert o.open(s.seal(bytearray(b"in"))) == b"in"


def test_mac_is_aes_cmac_over_data_and_the_trailer_fields():
    # RFC 4493 example 4 (40-byte message): the last 9 bytes play key_id, era and seq
    key = bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c")
    msg = bytes.fromhex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e5130c81c46a35ce411")
    key_id, era, seq = AUTH_INPUT.unpack(msg[31:])
    assert mac(key, msg[:31], key_id, era, seq) == bytes.fromhex("dfa66747de9ae630")
    assert mac(key, memoryview(msg)[:31], key_id, era, seq) == bytes.fromhex("dfa66747de9ae630")
    # and the sealer's trailer carries exactly that MAC
    frame = Sealer(DerivedKeys({9: key}, 9), era=era).seal(b"payload")
    t = decode_trailer(frame)
    assert t.mac == mac(key, b"payload", 9, era, 1)


def test_era_now():
    assert era_now(1_700_000_000.9) == 1_700_000_000
    assert era_now(float(1 << 32) + 5.5) == 5
    assert era_now(0.0) == 0


@pytest.mark.parametrize("era", [-1, 1 << 32, 1.0, True])
def test_sealer_refuses_a_bad_era(era):
    with pytest.raises(ValueError):
        Sealer(ONE, era)


@pytest.mark.parametrize("window", [0, MAX_WINDOW + 1, 1.5, True])
def test_opener_refuses_a_bad_window(window):
    with pytest.raises(ValueError):
        Opener(ONE, window)


# --- tampering and truncation ----------------------------------------------------------------


def test_every_single_bit_flip_is_refused_and_moves_nothing():
    keys = DerivedKeys({1: K1, 3: K3}, 1)
    s, o = Sealer(keys, era=5), Opener(keys)
    o.open(s.seal(b"first"))
    frame = s.seal(b"0123456789abcdef")
    key_byte = len(frame) - TRAILER_LEN
    reasons = set()
    for bit in range(len(frame) * 8):
        bad = bytearray(frame)
        bad[bit // 8] ^= 1 << (bit % 8)
        reason = refused(o, bytes(bad))
        # a flip in key_id names a key we lack (UNKNOWN_KEY) or another key we have (FORGED)
        expected = {FORGED, UNKNOWN_KEY} if bit // 8 == key_byte else {FORGED}
        assert reason in expected, (bit, reason)
        reasons.add(reason)
    assert reasons == {FORGED, UNKNOWN_KEY}
    assert o.refused == len(frame) * 8 and o.highest == (5, 1)
    assert o.open(frame) == b"0123456789abcdef"  # the genuine frame is still accepted


def test_truncation_at_every_length_is_refused():
    keys = DerivedKeys({1: K1, 2: K2}, 1)
    s, o = Sealer(keys, era=1), Opener(keys)
    frame = s.seal(os.urandom(40))
    for cut in range(len(frame)):
        reason = refused(o, frame[:cut])
        assert reason in ({TRUNCATED} if cut < TRAILER_LEN else {FORGED, UNKNOWN_KEY}), (cut, reason)
        if cut:  # and from the front: the trailer is intact but the data it covers is not
            assert refused(o, frame[cut:]) in {FORGED, TRUNCATED}
    assert o.c.ok == 0 and o.highest is None
    assert o.open(frame)


def test_a_frame_under_another_key_or_id_is_refused():
    s = Sealer(DerivedKeys({1: K2}, 1), era=1)  # right id, wrong key
    o = Opener(ONE)
    assert refused(o, s.seal(b"x")) == FORGED
    assert refused(o, Sealer(DerivedKeys({2: K1}, 2), era=1).seal(b"x")) == UNKNOWN_KEY
    assert asdict(o.c) == {"ok": 0, "truncated": 0, "unknown_key": 1, "forged": 1, "replayed": 0, "stale_era": 0}


# --- replay window -----------------------------------------------------------------------------


def test_replay_of_any_earlier_frame_is_refused():
    s, o = Sealer(ONE, era=3), Opener(ONE)
    frames = [s.seal(f"m{n}".encode()) for n in range(200)]
    for f in frames:
        o.open(f)
    for f in frames:
        assert refused(o, f) == REPLAYED
    assert o.c.ok == 200 and getattr(o.c, REPLAYED) == 200


@pytest.mark.parametrize("window", [1, 7, 64, 200])
def test_reordering_within_the_window_is_accepted_exactly_once(window):
    s, o = Sealer(ONE, era=1), Opener(ONE, window=window)
    frames = [s.seal(n.to_bytes(2, "big")) for n in range(window)]
    order = list(range(window))
    random.Random(window).shuffle(order)
    got = [o.open(frames[i]) for i in order]
    assert sorted(got) == sorted(f[:2] for f in frames)
    for i in order:
        assert refused(o, frames[i]) == REPLAYED


def test_beyond_the_window_is_refused():
    s, o = Sealer(ONE, era=1), Opener(ONE, window=64)
    frames = [s.seal(n.to_bytes(2, "big")) for n in range(200)]  # frames[i] has seq i + 1
    o.open(frames[99])  # seq 100 first: the window covers seq 37..100
    assert refused(o, frames[35]) == REPLAYED  # seq 36
    assert o.open(frames[36]) == (36).to_bytes(2, "big")  # seq 37, the oldest still in the window
    assert o.open(frames[150]) == (150).to_bytes(2, "big")  # a jump far ahead
    assert refused(o, frames[99]) == REPLAYED and refused(o, frames[50]) == REPLAYED
    assert o.open(frames[149]) == (149).to_bytes(2, "big")


def test_a_restarted_sender_starts_a_new_era_and_old_frames_become_stale():
    o = Opener(ONE)
    old = Sealer(ONE, era=era_now(1000.0))
    early = [old.seal(b"old%d" % n) for n in range(10)]
    for f in early[:5]:
        o.open(f)
    new = Sealer(ONE, era=era_now(1060.0))  # the restarted sender: seq restarts at 1
    assert o.open(new.seal(b"new1")) == b"new1"
    for f in early:  # delivered or not, the previous run's frames are refused
        assert refused(o, f) == STALE_ERA
    assert o.open(new.seal(b"new2")) == b"new2" and o.highest == (1060, 2)


def test_seq_exhaustion_moves_to_the_next_era():
    s, o = Sealer(ONE, era=10), Opener(ONE)
    s._next_seq = U32  # (the sender would need 2^32 - 2 frames to get here)
    last = s.seal(b"last")
    first = s.seal(b"first")
    assert (decode_trailer(last).era, decode_trailer(last).seq) == (10, U32)
    assert (decode_trailer(first).era, decode_trailer(first).seq) == (11, 1) and s.era == 11
    assert o.open(last) == b"last" and o.open(first) == b"first"
    assert refused(o, last) == STALE_ERA


def test_forged_frames_with_a_huge_seq_or_era_do_not_move_the_window():
    s, o = Sealer(ONE, era=100), Opener(ONE)
    o.open(s.seal(b"a"))
    for era, seq in [(100, U32), (U32, 1), (100, 2), (101, 1)]:
        forged = b"evil" + AUTH_INPUT.pack(1, era, seq) + os.urandom(8)
        assert refused(o, forged) == FORGED
        # signed with a key the opener does not have
        assert refused(o, Sealer(DerivedKeys({1: K2}, 1), era=era).seal(b"evil")) == FORGED
    assert o.highest == (100, 1)
    assert o.open(s.seal(b"b")) == b"b" and o.open(s.seal(b"c")) == b"c"


def test_memory_is_bounded_by_the_window():
    s, o = Sealer(ONE, era=1), Opener(ONE, window=64)
    for jump in (1, 63, 64, 65, 1 << 20, (1 << 31)):
        s._next_seq += jump
        o.open(s.seal(b"x"))
        assert o._replay._seen.bit_length() <= 64
    assert o.highest[1] == s.next_seq - 1


# --- key rotation ------------------------------------------------------------------------------


def test_rotation_old_key_accepted_while_valid_then_unknown(tmp_path):
    path = tmp_path / "keys.json"
    generate(path, now=1000.0)
    ring = load(path)
    sender = Sealer(ring.derive(PURPOSE_LG_LINK, "sw1-sw2", 1000.0), era=1000)
    receiver = Opener(ring.derive(PURPOSE_LG_LINK, "sw1-sw2", 1000.0))
    in_flight = [sender.seal(b"k1-%d" % n) for n in range(3)]
    assert receiver.open(in_flight[0]) == b"k1-0"

    rotate(path, overlap_s=60, now=2000.0)
    ring = load(path)
    during = ring.derive(PURPOSE_LG_LINK, "sw1-sw2", 2000.0)
    assert sorted(during.keys) == [1, 2] and during.current == 2
    receiver.update_keys(during)
    assert receiver.open(in_flight[1]) == b"k1-1"  # sealed under key 1, still valid
    sender.update_keys(during)
    assert sender.key_id == 2
    new = sender.seal(b"k2")
    assert decode_trailer(new).key_id == 2 and decode_trailer(new).seq == 4  # the sequence continues
    assert receiver.open(new) == b"k2"

    after = ring.derive(PURPOSE_LG_LINK, "sw1-sw2", 2061.0)
    assert sorted(after.keys) == [2]
    receiver.update_keys(after)
    assert refused(receiver, in_flight[2]) == UNKNOWN_KEY
    assert receiver.open(sender.seal(b"k2 again")) == b"k2 again"
    # another link's keys open nothing of this one
    other = Opener(ring.derive(PURPOSE_LG_LINK, "sw2-sw3", 2061.0))
    assert refused(other, sender.seal(b"x")) == FORGED


# --- an attacker on the link -----------------------------------------------------------------


class AttackerOnTheLink(RuleBasedStateMachine):
    """A sender, a receiver and an attacker between them who drops, delays (reorders), replays,
    truncates, flips bits, forges trailers and injects random bytes; the sender may restart (a new
    era) or rotate keys. The receiver returns each genuine payload at most once, never anything the
    sender did not seal, accepts every genuine frame that is new to it, and counts every frame."""

    @initialize(window=st.sampled_from([1, 4, 64]), era=st.integers(0, U32 - 2))
    def setup(self, window, era):
        self.keys = DerivedKeys({1: K1, 2: K2}, 1)
        self.sealer = Sealer(self.keys, era)
        self.opener = Opener(self.keys, window)
        self.window = window
        self.in_flight: list[bytes] = []
        self.history: list[bytes] = []
        self.sealed: set[bytes] = set()
        self.delivered: set[bytes] = set()
        self.accepted: set[tuple[int, int]] = set()
        self.offered = 0
        self.n = 0

    def offer(self, frame) -> None:
        self.offered += 1
        t = decode_trailer(frame) if len(frame) >= TRAILER_LEN else None
        genuine = frame in self.history
        must_accept = False
        if genuine and (t.era, t.seq) not in self.accepted:
            top = self.opener.highest
            must_accept = top is None or t.era > top[0] or (t.era == top[0] and t.seq + self.window > top[1])
        try:
            out = self.opener.open(frame)
        except AuthFailure as exc:
            assert exc.reason in REASONS
            assert not must_accept, f"a new genuine frame was refused: {exc.reason}"
            return
        assert genuine, "accepted a frame the sender never sealed"
        assert out in self.sealed and out not in self.delivered
        self.delivered.add(out)
        self.accepted.add((t.era, t.seq))

    @rule(body=st.binary(max_size=40))
    def send(self, body):
        self.n += 1
        frame = self.sealer.seal(self.n.to_bytes(4, "big") + body)  # unique payloads
        self.sealed.add(frame[:-TRAILER_LEN])
        self.in_flight.append(frame)
        self.history.append(frame)

    @precondition(lambda self: self.in_flight)
    @rule(pick=st.integers(0, 1 << 16))
    def deliver(self, pick):  # any frame in flight, so in any order
        self.offer(self.in_flight.pop(pick % len(self.in_flight)))

    @precondition(lambda self: self.in_flight)
    @rule(pick=st.integers(0, 1 << 16))
    def drop(self, pick):
        self.in_flight.pop(pick % len(self.in_flight))

    @precondition(lambda self: self.history)
    @rule(pick=st.integers(0, 1 << 16))
    def replay(self, pick):
        self.offer(self.history[pick % len(self.history)])

    @precondition(lambda self: self.history)
    @rule(pick=st.integers(0, 1 << 16), cut=st.integers(0, 80), front=st.booleans())
    def truncate(self, pick, cut, front):
        frame = self.history[pick % len(self.history)]
        cut %= len(frame)
        self.offer(frame[cut:] if front and cut else frame[:cut])

    @precondition(lambda self: self.history)
    @rule(pick=st.integers(0, 1 << 16), bit=st.integers(0, 1 << 16))
    def flip(self, pick, bit):
        bad = bytearray(self.history[pick % len(self.history)])
        bad[bit // 8 % len(bad)] ^= 1 << (bit % 8)
        self.offer(bytes(bad))

    @rule(body=st.binary(max_size=30), key_id=st.sampled_from([1, 2, 3]), era=st.integers(0, U32),
          seq=st.integers(0, U32), tag=st.binary(min_size=8, max_size=8))
    def forge(self, body, key_id, era, seq, tag):
        self.offer(body + AUTH_INPUT.pack(key_id, era, seq) + tag)

    @rule(junk=st.binary(max_size=80))
    def inject(self, junk):
        self.offer(junk)

    @precondition(lambda self: self.sealer.era < U32)
    @rule()
    def sender_restarts(self):
        self.sealer = Sealer(self.keys, self.sealer.era + 1)

    @rule(current=st.sampled_from([1, 2]))
    def sender_rotates(self, current):
        self.sealer.update_keys(DerivedKeys(self.keys.keys, current))

    @invariant()
    def every_frame_is_counted(self):
        if not hasattr(self, "opener"):
            return
        assert self.opener.c.ok + self.opener.refused == self.offered
        assert sum(asdict(self.opener.c).values()) == self.offered
        assert self.opener.c.ok == len(self.delivered)
        assert self.delivered <= self.sealed
        assert self.opener._replay._seen.bit_length() <= self.window


TestAttackerOnTheLink = AttackerOnTheLink.TestCase
TestAttackerOnTheLink.settings = settings(max_examples=150, stateful_step_count=60)


@settings(max_examples=300)
@given(st.lists(st.binary(max_size=100), max_size=20))
def test_random_bytes_never_open(junk):
    o = Opener(DerivedKeys({1: K1, 2: K2}, 1))
    for j in junk:
        assert refused(o, j) in {TRUNCATED, UNKNOWN_KEY, FORGED}
    assert o.refused == len(junk) and o.highest is None
