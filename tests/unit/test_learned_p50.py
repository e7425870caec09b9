"""bench/learned_p50.py: the learned P50's features at an origin read only what that origin has
observed, so the experiment's frontier is a causal forecaster's, not a bound's."""

from __future__ import annotations

import numpy as np
import pytest

from bench import learned_p50
from models.base import DAY, Series


def test_shifting_moves_values_later_or_earlier_and_fills_with_nan() -> None:
    values = np.arange(5, dtype=np.float64)
    later = learned_p50.shifted(values, 2)
    assert np.isnan(later[:2]).all() and later[2:].tolist() == [0.0, 1.0, 2.0]
    earlier = learned_p50.shifted(values, -2)
    assert earlier[:3].tolist() == [2.0, 3.0, 4.0] and np.isnan(earlier[3:]).all()
    assert np.isnan(learned_p50.shifted(values, 9)).all()


def test_the_trailing_mean_skips_missing_values_and_looks_back_only() -> None:
    values = np.array([2.0, np.nan, 4.0, 6.0])
    assert learned_p50.trailing_mean(values, 2).tolist() == [2.0, 2.0, 4.0, 5.0]


@pytest.mark.parametrize("ahead", [1, 3, 6])
def test_an_origins_features_do_not_change_when_the_load_after_it_does(ahead: int) -> None:
    step = 300.0
    rng = np.random.default_rng(7)
    values = rng.poisson(100, size=round(9 * DAY / step)).astype(np.float64)
    origin = values.size - 50
    changed = values.copy()
    changed[origin + 1 :] *= 3.0
    before = learned_p50.features(Series(0.0, step, values), ahead)
    after = learned_p50.features(Series(0.0, step, changed), ahead)
    np.testing.assert_array_equal(before[: origin + 1], after[: origin + 1])
    assert not np.array_equal(before[origin + 1 :], after[origin + 1 :], equal_nan=True)
