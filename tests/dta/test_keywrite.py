"""Key-Write math and the exact experiments on the real data structure ("Direct Telemetry
Access", Fig. 7, Fig. 9)."""

from __future__ import annotations

import random
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headers.dta import KeyWrite
from netstack.dta import CollectorQuery
from netstack.dta.keywrite import (
    KeyWriteLayout,
    consensus_value,
    expected_success,
    key_checksum,
    mix32,
    sketch_index,
    slot_hash,
    slot_index,
    survival_probability,
)

from . import Rig, make_memory

U32 = st.integers(0, 0xFFFFFFFF)


def test_slot_hash_is_crc32_of_key_then_n_finished_with_the_mixer():
    # CRC32 over key (4 bytes, network order) || n (1 byte), as the public translator; then mix32
    crc = zlib.crc32(b"\x01\x02\x03\x04\x02")
    assert slot_hash(0x01020304, 2, "crc32") == crc
    assert slot_hash(0x01020304, 2) == mix32(crc)
    assert slot_index(0x01020304, 2, 1024) == mix32(crc) & 1023
    assert slot_index(0x01020304, 2, 1024, "crc32") == crc & 1023
    with pytest.raises(ValueError):
        KeyWriteLayout(8, slot_hash="md5")


def test_pure_crc_copies_sit_at_one_xor_offset_and_mixing_breaks_it():
    """Why we finish the CRC: CRC32 is affine, so slot(key, 1) = slot(key, 0) ^ constant for all keys."""
    keys = random.Random(4).sample(range(1 << 32), 5000)
    offsets = {slot_index(k, 0, 2048, "crc32") ^ slot_index(k, 1, 2048, "crc32") for k in keys}
    assert len(offsets) == 1
    mixed = {slot_index(k, 0, 2048) ^ slot_index(k, 1, 2048) for k in keys}
    assert len(mixed) > 1500


@given(U32, st.integers(8, 32))
def test_checksum_fits_its_width_and_is_never_zero(key, bits):
    c = key_checksum(key, bits)
    assert 0 < c < 1 << bits


def test_checksum_is_not_the_slot_crc():
    # the public code's CRC32(key) checksum determines every slot CRC32(key || n); ours must not
    keys = random.Random(1).sample(range(1 << 32), 2000)
    assert sum(key_checksum(k) == zlib.crc32(struct.pack("!I", k)) for k in keys) == 0
    # truncated to 8 bits, keys sharing a checksum are spread over slots like any other keys
    by_sum: dict[int, set[int]] = {}
    for k in range(20000):
        by_sum.setdefault(key_checksum(k, 8), set()).add(slot_index(k, 0, 16))
    assert min(len(s) for s in by_sum.values()) >= 12


def test_mix32_is_a_bijection_on_a_sample():
    sample = random.Random(2).sample(range(1 << 32), 50000) + list(range(1000))
    assert len({mix32(x) for x in sample}) == len(set(sample))


@given(U32, st.integers(0, 255), st.sampled_from([1, 7, 100, 1 << 10]))
def test_sketch_index_in_range(key, row, cols):
    assert 0 <= sketch_index(key, row, cols) < cols


def test_layout_validation():
    for bad in ({"slots": 1000}, {"slots": 0}, {"slots": 8, "data_words": 0}, {"slots": 8, "checksum_bits": 7},
                {"slots": 8, "checksum_bits": 33}, {"slots": 8, "max_redundancy": 0}):
        with pytest.raises(ValueError):
            KeyWriteLayout(**bad)
    lay = KeyWriteLayout(8, data_words=3)
    assert lay.slot_bytes == 16 and lay.size == 128
    with pytest.raises(ValueError):
        lay.encode_slot(1, (1, 2))


@given(U32, st.lists(U32, min_size=1, max_size=7), st.integers(8, 32))
def test_slot_encoding_round_trip(key, data, bits):
    lay = KeyWriteLayout(16, data_words=len(data), checksum_bits=bits)
    raw = lay.encode_slot(key, data)
    assert len(raw) == lay.slot_bytes
    assert lay.decode_slot(key, raw) == tuple(data)
    assert lay.decode_slot(key, bytes(len(raw))) is None  # empty memory is never a match


def test_consensus_vote():
    a, b = (1,), (2,)
    assert consensus_value([None, a, b, b]) == b  # plurality
    assert consensus_value([a, b]) == a  # tie: the lowest n, as the public collector
    assert consensus_value([a, None, a], consensus=2) == a
    assert consensus_value([a, b, None], consensus=2) is None
    assert consensus_value([None, None]) is None
    with pytest.raises(ValueError):
        consensus_value([a], consensus=0)


def test_survival_formula_edges():
    assert survival_probability(0, 3, 64) == pytest.approx(1.0)
    assert survival_probability(10**6, 2, 64) == pytest.approx(0.0, abs=1e-12)
    assert survival_probability(64, 1, 64) == pytest.approx((1 - 1 / 64) ** 64)
    assert expected_success(1, 4, 16) == pytest.approx(1.0)


def _fill(lay: KeyWriteLayout, region, keys, values, redundancy):
    """Write keys in sequence exactly as the translator's WRITEs would (same bytes, same slots)."""
    for key, value in zip(keys, values, strict=True):
        payload = lay.encode_slot(key, (value,))
        for n in range(redundancy):
            region.write(region.base_va + lay.slot_offset(key, n), payload)


@pytest.mark.parametrize("redundancy", [1, 2, 3, 4])
def test_fig7_query_success_matches_the_analytic_expectation(redundancy):
    """Fig. 7: success vs load factor for N = 1..4; a key is found iff at least one of its N slots
    was not overwritten by a later key (keywrite.expected_success)."""
    slots = 2048
    rng = random.Random(redundancy)
    for load in (0.25, 0.5, 1.0, 2.0):
        mem = make_memory(lambda m: m.add_keywrite(slots=slots, max_redundancy=4))
        region = mem.region("keywrite")
        lay = KeyWriteLayout(slots, max_redundancy=4)
        n_keys = int(load * slots)
        keys = rng.sample(range(1 << 32), n_keys)
        values = [rng.getrandbits(32) for _ in keys]
        _fill(lay, region, keys, values, redundancy)
        q = CollectorQuery(mem)
        answers = [q.keywrite_get(k) for k in keys]  # the reader does not know N: tries n = 0..3
        found = sum(a is not None for a in answers)
        assert all(a is None or a == (v,) for a, v in zip(answers, values, strict=True))  # never wrong
        expected = expected_success(n_keys, redundancy, slots)
        assert found / n_keys == pytest.approx(expected, abs=0.03), (load, redundancy)


def test_fig7_n2_beats_n1_at_moderate_load():
    # §8.1.2: "N = 2 appears to be a generally good compromise" — the formula agrees at low/moderate load
    for keys in (512, 1024):
        assert expected_success(keys, 2, 2048) > expected_success(keys, 1, 2048) + 0.04
    # and at very high load more copies only evict more: N = 1 wins
    assert expected_success(8192, 1, 2048) > expected_success(8192, 4, 2048)


def test_fig7_is_not_reachable_with_the_public_pure_crc_slots():
    """With the public CRC32(key || n) slots, N = 2 copies collide together: success at load 0.25
    falls far below the independent-copy expectation (and barely above N = 1)."""
    slots, n_keys = 2048, 512
    rng = random.Random(11)
    success = {}
    for mode in ("crc32", "crc32+mix"):
        mem = make_memory(lambda m, mode=mode: m.add_keywrite(slots=slots, slot_hash=mode))
        lay = KeyWriteLayout(slots, slot_hash=mode)
        keys = rng.sample(range(1 << 32), n_keys)
        _fill(lay, mem.region("keywrite"), keys, [1] * n_keys, 2)
        q = CollectorQuery(mem)
        success[mode] = sum(q.keywrite_get(k) is not None for k in keys) / n_keys
    assert success["crc32+mix"] == pytest.approx(expected_success(n_keys, 2, slots), abs=0.03)
    assert success["crc32"] < success["crc32+mix"] - 0.1
    assert success["crc32"] < expected_success(n_keys, 1, slots) + 0.05


def _wrong_answers(bits: int, seed: int) -> tuple[int, int, int]:
    slots, n_keys, absent = 1 << 12, 1 << 16, 1 << 15
    mem = make_memory(lambda m: m.add_keywrite(slots=slots, checksum_bits=bits, max_redundancy=4))
    lay = KeyWriteLayout(slots, checksum_bits=bits, max_redundancy=4)
    rng = random.Random(seed)
    universe = rng.sample(range(1 << 32), n_keys + absent)
    keys, others = universe[:n_keys], universe[n_keys:]
    values = {k: rng.getrandbits(32) for k in keys}
    _fill(lay, mem.region("keywrite"), keys, [values[k] for k in keys], 2)
    q = CollectorQuery(mem)
    wrong_present = sum(1 for k in keys if (a := q.keywrite_get(k)) is not None and a != (values[k],))
    wrong_absent = sum(1 for k in others if q.keywrite_get(k) is not None)
    return wrong_present, wrong_absent, absent


def test_fig9_no_wrong_answers_with_32_bit_checksums():
    """Fig. 9: 65,536 keys into 4,096 slots (load 16, N = 2), every key queried with N_max = 4, plus
    32,768 keys never written: with 32-bit checksums not one wrong answer."""
    wrong_present, wrong_absent, _ = _wrong_answers(32, seed=9)
    assert wrong_present == 0 and wrong_absent == 0


def test_fig9_short_checksums_give_wrong_answers_at_the_predicted_rate():
    # an absent key's 4 slots each hold some other key's checksum (the store is full): a wrong
    # answer needs one of them to equal ours, probability 1 - (1 - 1/(2^8 - 1))^4 with an
    # independent checksum
    _, wrong_absent, absent = _wrong_answers(8, seed=8)
    p = 1 - (1 - 1 / 255) ** 4
    assert wrong_absent == pytest.approx(p * absent, rel=0.2)


def test_consensus_removes_wrong_answers_at_a_success_cost():
    slots = 1 << 10
    mem = make_memory(lambda m: m.add_keywrite(slots=slots, checksum_bits=8, max_redundancy=4))
    lay = KeyWriteLayout(slots, checksum_bits=8, max_redundancy=4)
    rng = random.Random(3)
    keys = rng.sample(range(1 << 32), 4 * slots)
    vals = [rng.getrandbits(32) for _ in keys]
    _fill(lay, mem.region("keywrite"), keys, vals, 4)
    q = CollectorQuery(mem)
    absent = rng.sample(range(1 << 32), 5000)
    wrong1 = sum(q.keywrite_get(k) is not None for k in absent)
    wrong2 = sum(q.keywrite_get(k, consensus=2) is not None for k in absent)
    ok1 = sum(q.keywrite_get(k) == (v,) for k, v in zip(keys, vals, strict=True))
    ok2 = sum(q.keywrite_get(k, consensus=2) == (v,) for k, v in zip(keys, vals, strict=True))
    assert wrong1 > 20 and wrong2 < wrong1 / 10
    assert ok2 < ok1


def test_translator_builds_exactly_the_simulated_structure():
    """The fast simulation above writes what the translator writes: same slots, same bytes."""
    slots = 256

    def setup(m):
        m.add_keywrite(slots=slots, max_redundancy=4)

    rig = Rig(setup)
    sim = make_memory(setup)
    lay = KeyWriteLayout(slots, max_redundancy=4)
    rng = random.Random(5)
    for _ in range(600):
        key, val, n = rng.getrandbits(32), rng.getrandbits(32), rng.randint(1, 4)
        rig.send(rig.reporter.key_write(key, val, n))
        _fill(lay, sim.region("keywrite"), [key], [val], n)
    assert rig.mem.region("keywrite").read(0, lay.size) == sim.region("keywrite").read(0, lay.size)


def test_multi_word_keywrite_round_trip():
    rig = Rig(lambda m: m.add_keywrite(slots=64, data_words=3))
    rig.send(rig.reporter.key_write(99, (1, 2, 3), 2))
    assert rig.q.keywrite_get(99) == (1, 2, 3)
    # a report whose data size differs from the store's is refused, memory untouched
    before = rig.snapshot()
    rig.send(rig.reporter.key_write(100, (1, 2), 2))
    assert rig.tr.c.bad_data_size == 1 and rig.snapshot() == before
    assert KeyWrite(2, 100, (1, 2)).size() == 13
