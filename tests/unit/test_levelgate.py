"""The level insurance's gate (decision.levelgate): it opens when the load has run above the
forecast's median on significantly more than half of the recent steps, at its stated one-sided
5 % level even when the indicator stays on one side for hours."""

from __future__ import annotations

import numpy as np

from scaler.decision import levelgate

DAY_STEPS = 288
"""A day of 5-minute model steps: the window the replay judges over."""


def sticky(p: float, stay: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """An indicator that is True with probability p in the long run, lag-1 autocorrelation
    `stay`: each step keeps the last value with probability `stay`, else draws afresh."""
    x = np.empty(n, dtype=bool)
    x[0] = rng.random() < p
    keep = rng.random(n) < stay
    fresh = rng.random(n) < p
    for i in range(1, n):
        x[i] = x[i - 1] if keep[i] else fresh[i]
    return x


def open_rate(p: float, stay: float, windows: int = 400, seed: int = 3) -> float:
    rng = np.random.default_rng(seed)
    return float(
        np.mean([levelgate.median_lags(sticky(p, stay, DAY_STEPS, rng)) for _ in range(windows)])
    )


def test_an_unbiased_median_opens_the_gate_at_about_its_stated_rate_even_when_autocorrelated() -> (
    None
):
    for stay in (0.0, 0.5, 0.9):
        assert open_rate(0.5, stay) <= 2 * (1 - 0.95)


def test_without_the_autocorrelation_discount_the_gate_would_open_far_more_often() -> None:
    rng = np.random.default_rng(4)
    naive = 0.5 + levelgate.GATE_Z * 0.5 / np.sqrt(DAY_STEPS)
    shares = [sticky(0.5, 0.9, DAY_STEPS, rng).mean() for _ in range(400)]
    assert np.mean(np.asarray(shares) > naive) > 4 * open_rate(0.5, 0.9)


def test_a_median_below_the_load_opens_the_gate_on_most_days() -> None:
    assert open_rate(0.8, 0.5) > 0.9
    assert open_rate(0.8, 0.9) > 0.6


def test_too_few_steps_keep_the_gate_shut_and_a_load_always_above_opens_it() -> None:
    assert not levelgate.median_lags([True] * (levelgate.MIN_STEPS - 1))
    assert levelgate.median_lags([True] * levelgate.MIN_STEPS)
    assert not levelgate.median_lags([False] * DAY_STEPS)
    assert levelgate.effective_steps([True, False] * 50) == 100
