"""Exact binomial statistics for loss rates: intervals and tests used by benchmarks and scenarios.

An effective loss of 1e-4 measured over 1e6 frames is ~100 events: normal approximations are
poor at such counts, so every rate netstack reports carries an exact (Clopper-Pearson) 95 %
interval, and "agrees with theory" is an exact two-sided binomial test.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

CONFIDENCE = 0.95


def _log_pmf(i: int, n: int, p: float) -> float:
    return math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed from the side where the terms fall off."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 0.0
    if k <= n * p:
        # at or below the mean the terms shrink as i decreases: sum i = k, k-1, ...
        term = math.exp(_log_pmf(k, n, p))
        total = term
        odds = (1.0 - p) / p
        i = k
        while i > 0 and term > total * 1e-17:
            term *= i / (n - i + 1) * odds
            total += term
            i -= 1
        return min(1.0, total)
    # above the mean: 1 - P(X >= k + 1), whose terms shrink as i increases
    i = k + 1
    term = math.exp(_log_pmf(i, n, p))
    total = term
    odds = p / (1.0 - p)
    while i < n and term > total * 1e-17:
        term *= (n - i) / (i + 1) * odds
        total += term
        i += 1
    return max(0.0, 1.0 - total)


def _solve_decreasing(f: Callable[[float], float], target: float) -> float:
    """p in [0, 1] with f(p) = target, for f decreasing in p (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if f(mid) > target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return (lo + hi) / 2


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact two-sided binomial confidence interval for ``k`` events in ``n`` trials."""
    if n <= 0:
        return 0.0, 1.0
    a = (1.0 - confidence) / 2
    lower = 0.0 if k <= 0 else _solve_decreasing(lambda p: binom_cdf(k - 1, n, p), 1.0 - a)
    upper = 1.0 if k >= n else _solve_decreasing(lambda p: binom_cdf(k, n, p), a)
    return lower, upper


def two_sided_p(k: int, n: int, p0: float) -> float:
    """Exact two-sided binomial test of "the rate is p0" for ``k`` events in ``n`` trials
    (twice the smaller tail, at most 1)."""
    if n <= 0:
        return 1.0
    low = binom_cdf(k, n, p0)
    high = 1.0 - binom_cdf(k - 1, n, p0)
    return min(1.0, 2.0 * min(low, high))


def loss_estimate(lost: int, frames: int) -> dict[str, Any]:
    lo, hi = clopper_pearson(lost, frames)
    return {"lost": lost, "frames": frames, "rate": lost / frames if frames else 0.0, "ci95": [lo, hi]}


def intervals_overlap(a: tuple[float, float] | list[float], b: tuple[float, float] | list[float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


__all__ = ["CONFIDENCE", "binom_cdf", "clopper_pearson", "intervals_overlap", "loss_estimate", "two_sided_p"]
