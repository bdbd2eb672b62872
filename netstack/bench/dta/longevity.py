"""Data longevity of Key-Write (``netstack bench dta --only longevity``): how long a report stays
queryable while newer reports keep overwriting the store ("Direct Telemetry Access", §8.1.3,
Fig. 8: "DTA Key-Write ages out stale data").

The paper's Fig. 8 plots the queryability of INT 5-hop path-tracing reports (5 x 32-bit values,
32-bit checksum, N = 2) for several storage sizes, as the flows age. Its axes, reproduced here:
**queryability** (the fraction of reports a query still answers correctly) against the report's
**age**, counted in reports written after it, one curve per storage size. Age in seconds is that
count over the report rate: the tables give it at :data:`~.params.LONGEVITY_RATE` reports/s, or at
the Key-Write N=2 rate the live part of the same run sustained.

Method, on the real data structure without the network (as Fig. 7): a ``CollectorMemory``
Key-Write store of S slots with the ``KeyWriteLayout`` the translator writes (5 data words,
24-byte slots), K = :data:`~.params.LONGEVITY_AGES` x S distinct keys written once each in
sequence with redundancy N (each copy the very bytes a WRITE would carry), then a sample of the
keys queried back with ``CollectorQuery.keywrite_get`` and grouped by age. The analytic curve is
:func:`netstack.dta.keywrite.survival_probability` (a key survives while one of its N slots has
not been overwritten by the N x age later writes), averaged over the same sampled keys.

Survival depends on age / S only, so the curves for different S coincide once the age is
divided by the slot count: the half-life in reports is proportional to the memory, and the
``age/slots`` column carries the result to any memory size (e.g. the paper's GiB stores).
"""

from __future__ import annotations

import random
from typing import Any

from .params import (
    LONGEVITY_AGES,
    LONGEVITY_BINS,
    LONGEVITY_DATA_WORDS,
    LONGEVITY_REDUNDANCY,
    LONGEVITY_SAMPLE,
    LONGEVITY_SLOTS,
)


def _write_store(slots: int, redundancy: int, keys: list[int]) -> Any:
    """A Key-Write store holding ``keys`` written in order (index i carries data (i, 0, 0, 0, 0))."""
    from ...dta.keywrite import KeyWriteLayout
    from ...dta.memory import CollectorMemory
    from ...dta.query import CollectorQuery

    mem = CollectorMemory("longevity", directory=None, rng=random.Random(0))
    region = mem.add_keywrite(slots, data_words=LONGEVITY_DATA_WORDS, max_redundancy=redundancy)
    layout = KeyWriteLayout.from_dict(region.layout)
    base, write = region.base_va, region.write
    pad = (0,) * (LONGEVITY_DATA_WORDS - 1)
    for i, key in enumerate(keys):
        payload = layout.encode_slot(key, (i, *pad))
        for n in range(redundancy):
            write(base + layout.slot_offset(key, n), payload)  # the WRITE the translator would send
    return CollectorQuery(mem)


def half_life(points: list[tuple[float, float]]) -> float | None:
    """The age at which queryability first falls to 0.5, linearly interpolated between the
    ``(age, queryability)`` points (sorted by age); None if it never does."""
    prev: tuple[float, float] | None = None
    for age, q in points:
        if q <= 0.5:
            if prev is None:
                return age
            a0, q0 = prev
            return a0 + (q0 - 0.5) / (q0 - q) * (age - a0) if q0 != q else age
        prev = (age, q)
    return None


def analytic_half_life(redundancy: int, slots: int) -> float:
    """The age (reports since) at which :func:`survival_probability` is 0.5, by bisection."""
    from ...dta.keywrite import survival_probability

    lo, hi = 0.0, float(64 * slots)
    for _ in range(60):
        mid = (lo + hi) / 2
        if survival_probability(round(redundancy * mid), redundancy, slots) > 0.5:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def measure(slots: int, redundancy: int, ages: float = LONGEVITY_AGES, bins: int = LONGEVITY_BINS,
            sample: int = LONGEVITY_SAMPLE, seed: int = 0) -> dict[str, Any]:
    """One curve: queryability by age for one store size and N (module docstring)."""
    from ...dta.keywrite import survival_probability

    count = max(2, round(ages * slots))
    keys = random.Random(10_000 * redundancy + slots + seed).sample(range(1, 1 << 32), count)
    q = _write_store(slots, redundancy, keys)
    try:
        picked = sorted(random.Random(seed).sample(range(count), min(sample, count)))
        width = ages / bins
        found = [0] * bins
        asked = [0] * bins
        model = [0.0] * bins
        for i in picked:
            age = count - 1 - i  # reports written after key i
            b = min(bins - 1, int(age / slots / width))
            asked[b] += 1
            found[b] += q.keywrite_get(keys[i]) == (i, *(0,) * (LONGEVITY_DATA_WORDS - 1))
            model[b] += survival_probability(redundancy * age, redundancy, slots)
    finally:
        q.close()
    points = [{"age_reports": (b + 0.5) * width * slots, "age_per_slot": (b + 0.5) * width, "queries": asked[b],
               "queryable": found[b] / asked[b], "analytic": model[b] / asked[b]}
              for b in range(bins) if asked[b]]
    return {"slots": slots, "redundancy": redundancy, "slot_bytes": 4 + 4 * LONGEVITY_DATA_WORDS,
            "memory_bytes": slots * (4 + 4 * LONGEVITY_DATA_WORDS), "reports": count, "points": points,
            "half_life_reports": half_life([(p["age_reports"], p["queryable"]) for p in points]),
            # the analytic curve read off at the same bins, so that both are interpolated alike
            "half_life_binned_analytic": half_life([(p["age_reports"], p["analytic"]) for p in points]),
            "half_life_analytic": analytic_half_life(redundancy, slots)}


def longevity(slots: tuple[int, ...] = LONGEVITY_SLOTS, redundancy: tuple[int, ...] = LONGEVITY_REDUNDANCY,
              **kw: Any) -> list[dict[str, Any]]:
    """Fig. 8's curves: every store size at N = 2, and the other N at the middle size."""
    middle = slots[len(slots) // 2]
    cases = [(s, 2) for s in slots] + [(middle, n) for n in redundancy if n != 2]
    return [measure(s, n, **kw) for s, n in cases]
