"""The seeded impairment model: converges to its configured rates and is reproducible."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest

from netstack.switch import Impairment, ImpairmentConfig, Verdict

from . import make_switch, traced, udp_frame

N = 100_000


def run(cfg: ImpairmentConfig, n: int = N, stream: str = "s/p") -> list[Verdict]:
    imp = Impairment(cfg, stream)
    return [imp.decide() for _ in range(n)]


@pytest.mark.parametrize(("loss", "corrupt"), [(0.01, 0.0), (0.0, 0.05), (0.02, 0.03), (0.001, 0.001)])
def test_bernoulli_rates_converge(loss, corrupt):
    verdicts = run(ImpairmentConfig(loss=loss, corrupt=corrupt, seed=1))
    for rate, verdict in ((loss, Verdict.LOSE), (corrupt, Verdict.CORRUPT)):
        got = verdicts.count(verdict)
        sigma = math.sqrt(N * rate * (1 - rate))
        assert abs(got - N * rate) <= 5 * sigma + 1, (verdict, got, N * rate)


def test_gilbert_elliott_rates_and_burstiness():
    cfg = ImpairmentConfig(loss=0.001, p_good_to_bad=0.01, p_bad_to_good=0.2, loss_bad=0.5, corrupt_bad=0.1, seed=3)
    imp = Impairment(cfg, "s/p")
    verdicts = [imp.decide() for _ in range(N)]
    exp_loss, exp_corrupt = imp.expected_rates()
    pi_bad = 0.01 / 0.21
    assert exp_loss == pytest.approx((1 - pi_bad) * 0.001 + pi_bad * 0.5)
    # bursts make samples correlated: allow 15 % (mean bad sojourn is 5 frames)
    assert verdicts.count(Verdict.LOSE) / N == pytest.approx(exp_loss, rel=0.15)
    assert verdicts.count(Verdict.CORRUPT) / N == pytest.approx(exp_corrupt, rel=0.15)
    assert imp.bad_frames / N == pytest.approx(pi_bad, rel=0.15)
    # losses cluster: P(loss | previous loss) far above the mean
    pairs = sum(1 for a, b in pairwise(verdicts) if a == b == Verdict.LOSE)
    assert pairs / verdicts.count(Verdict.LOSE) > 4 * exp_loss


def test_reproducible_from_the_seed_and_distinct_per_port():
    cfg = ImpairmentConfig(loss=0.1, corrupt=0.1, seed=7)
    assert run(cfg, 5000) == run(cfg, 5000)
    assert run(cfg, 5000) != run(ImpairmentConfig(loss=0.1, corrupt=0.1, seed=8), 5000)
    assert run(cfg, 5000, "s/p1") != run(cfg, 5000, "s/p2")


def test_corruption_changes_exactly_one_byte():
    imp = Impairment(ImpairmentConfig(corrupt=1.0, seed=0))
    frame = bytes(range(200))
    for _ in range(500):
        bad = imp.corrupt(frame)
        assert len(bad) == len(frame) and sum(a != b for a, b in zip(bad, frame, strict=True)) == 1


def test_switch_runs_are_reproducible_and_counted():
    def once():
        sw = make_switch(2, p1={"impairment": ImpairmentConfig(loss=0.1, corrupt=0.1, seed=11)})
        tr = traced(sw)
        for i in range(3000):
            sw.receive("p0", udp_frame(size=100 + i % 50), i)
        out = sw.transmit(10**6)
        return out, [d.release for d in tr.on("p1")], sw.counters()["p1"]

    out1, rel1, c1 = once()
    out2, rel2, c2 = once()
    assert c1 == c2
    assert out1 == out2 and rel1 == rel2
    assert c1["impair_lost"] + len(out1) == c1["tx_frames"] == 3000
    assert rel1.count(None) == c1["impair_lost"] > 0 and c1["impair_corrupted"] > 0


def test_set_impairment_at_run_time_restarts_from_the_seed():
    sw = make_switch(2)
    cfg = {"loss": 0.5, "seed": 5}
    sw.set_impairment("p1", cfg)
    for i in range(100):
        sw.receive("p0", udp_frame(), i)
    first = [f for _, f in sw.transmit(100)]
    sw.set_impairment("p1", cfg)  # same model again: a fresh generator from the seed
    for i in range(100):
        sw.receive("p0", udp_frame(), 200 + i)
    second = [f for _, f in sw.transmit(300)]
    assert len(first) == len(second) < 100
    sw.set_impairment("p1", None)
    for i in range(100):
        sw.receive("p0", udp_frame(), 400 + i)
    assert len(sw.transmit(500)) == 100
