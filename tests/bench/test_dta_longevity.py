"""``netstack bench dta``'s data longevity (Fig. 8) and its tables: queryability falls with the
report's age as the analytic survival model says, the half-life scales with the store, and the
tables label measured beside analytic. Small stores only (sans-IO, well under a second)."""

from __future__ import annotations

from netstack.bench.dta.longevity import analytic_half_life, half_life, longevity, measure
from netstack.bench.dta.tables import longevity_lines
from netstack.dta.keywrite import survival_probability


def test_queryability_falls_with_age_and_follows_the_analytic_curve() -> None:
    c = measure(1 << 10, 2, ages=2.0, bins=4, sample=2000)
    qs = [p["queryable"] for p in c["points"]]
    assert len(qs) == 4 and qs == sorted(qs, reverse=True) and qs[0] > 0.6 and qs[-1] < 0.2
    for p in c["points"]:  # 500 queries a bin: within a few standard errors of the model
        assert abs(p["queryable"] - p["analytic"]) < 0.08
    assert c["memory_bytes"] == (1 << 10) * 24 and c["reports"] == 2 << 10


def test_half_life_scales_with_the_store_and_falls_with_redundancy_at_high_age() -> None:
    small, large = analytic_half_life(2, 1 << 10), analytic_half_life(2, 1 << 14)
    assert abs(large / small - 16) < 0.05
    assert abs(survival_probability(round(2 * small), 2, 1 << 10) - 0.5) < 0.01
    # N = 4 spreads each report over more slots: it dies younger in the median than N = 1
    assert analytic_half_life(4, 1 << 12) < analytic_half_life(2, 1 << 12) < analytic_half_life(1, 1 << 12)


def test_half_life_interpolates_and_says_never() -> None:
    assert half_life([(0.0, 1.0), (10.0, 0.0)]) == 5.0
    assert half_life([(0.0, 0.9), (1.0, 0.6)]) is None
    assert half_life([(3.0, 0.4)]) == 3.0


def test_longevity_tables_label_measured_analytic_and_seconds() -> None:
    curves = longevity(slots=(1 << 8, 1 << 9), redundancy=(1, 2), ages=2.0, bins=4, sample=400)
    assert [(c["slots"], c["redundancy"]) for c in curves] == [(256, 2), (512, 2), (512, 1)]
    text = "\n".join(longevity_lines(curves, {"per_s": 1000.0, "source": "nominal"}))
    assert "Data longevity (Fig. 8)" in text and "analytic in parentheses" in text
    assert "seconds at 1.0 k reports/s (nominal)" in text and "512 slots, N = 1" in text
