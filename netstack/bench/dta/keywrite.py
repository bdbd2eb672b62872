"""The sans-IO part of ``netstack bench dta``: the Key-Write experiments on the real data
structure in memory, no network.

Fig. 7 writes K distinct keys once each, in sequence, with redundancy N into a Key-Write store
of S slots (``CollectorMemory`` + ``KeyWriteLayout``, the layout the translator writes and the
queries read) and queries every key back; Fig. 9 does the same at load factor 1 with N = 2 for
checksum widths 8..32 bits and counts wrong answers for written keys and for keys never written.
"""

from __future__ import annotations

import random
from typing import Any

from .params import (
    FIG7_LOAD_FACTORS,
    FIG7_REDUNDANCY,
    FIG7_SLOTS,
    FIG9_REDUNDANCY,
    FIG9_SLOTS,
    FIG9_WIDTHS,
    PUBLIC_HASH_N,
    SEEDS,
)


def _fill_keywrite(slots: int, redundancy: int, keys: list[int], checksum_bits: int = 32,
                   slot_hash: str = "crc32+mix") -> Any:
    from ...dta.memory import CollectorMemory
    from ...dta.query import CollectorQuery

    mem = CollectorMemory("fig", directory=None, rng=random.Random(0))
    region = mem.add_keywrite(slots, checksum_bits=checksum_bits, max_redundancy=redundancy, slot_hash=slot_hash)
    from ...dta.keywrite import KeyWriteLayout

    layout = KeyWriteLayout.from_dict(region.layout)
    base = region.base_va
    write = region.write
    for i, key in enumerate(keys):
        payload = layout.encode_slot(key, (i,))
        for n in range(redundancy):
            write(base + layout.slot_offset(key, n), payload)  # the WRITE the translator would send
    return CollectorQuery(mem)


def fig7(slots: int = FIG7_SLOTS, load_factors: tuple[float, ...] = FIG7_LOAD_FACTORS,
         redundancies: tuple[int, ...] = FIG7_REDUNDANCY, seeds: int = SEEDS) -> list[dict[str, Any]]:
    """Key-Write query success vs load factor (keys / slots) for each N: measured and analytic;
    plus N = 2 and 4 with the public translator's pure CRC32 slot hash (keywrite.py explains
    why its copies are correlated), to show what the mixed hash buys."""
    from ...dta.keywrite import expected_success

    rows = []
    variants = [(n, "crc32+mix") for n in redundancies] + [(n, "crc32") for n in PUBLIC_HASH_N]
    for n, mode in variants:
        for lf in load_factors:
            k = max(1, round(lf * slots))
            ok = total = 0
            for seed in range(seeds):
                keys = random.Random(1000 * n + seed).sample(range(1, 1 << 32), k)
                q = _fill_keywrite(slots, n, keys, slot_hash=mode)
                ok += sum(q.keywrite_get(key) == (i,) for i, key in enumerate(keys))
                total += k
                q.close()
            rows.append({"redundancy": n, "slot_hash": mode, "load_factor": lf, "keys": k, "slots": slots,
                         "success": ok / total, "expected": expected_success(k, n, slots)})
    return rows


def fig9(slots: int = FIG9_SLOTS, widths: tuple[int, ...] = FIG9_WIDTHS, redundancy: int = FIG9_REDUNDANCY,
         seeds: int = SEEDS) -> list[dict[str, Any]]:
    """Wrong-answer rate vs checksum width at load factor 1 (written keys and never-written keys)."""
    rows = []
    for bits in widths:
        wrong = missing = right = absent_wrong = total = 0
        occupancy = 0.0
        for seed in range(seeds):
            rng = random.Random(77 + seed)
            pool = rng.sample(range(1, 1 << 32), 2 * slots)
            keys, absent = pool[:slots], pool[slots:]
            q = _fill_keywrite(slots, redundancy, keys, bits)
            for i, key in enumerate(keys):
                got = q.keywrite_get(key)
                if got is None:
                    missing += 1
                elif got == (i,):
                    right += 1
                else:
                    wrong += 1
            absent_wrong += sum(q.keywrite_get(key) is not None for key in absent)
            region = q.memory.find("keywrite")
            occupancy += sum(region.read_words(i * 8, 1)[0] != 0 for i in range(slots)) / slots
            total += slots
            q.close()
        occ = occupancy / seeds
        model = 1 - (1 - occ / ((1 << bits) - 1)) ** redundancy
        rows.append({"checksum_bits": bits, "redundancy": redundancy, "load_factor": 1.0, "slots": slots,
                     "queries": total, "right": right / total, "wrong": wrong / total, "missing": missing / total,
                     "absent_wrong": absent_wrong / total, "absent_wrong_model": model, "occupancy": occ})
    return rows
