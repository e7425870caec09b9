"""The seasonal profile that may pool neighbouring phases (models/seasonal.py PooledSeasonal, a
challenger in `auto` behind select.POOLED_CANDIDATE, on by default): width 0 is the per-phase
median bit for bit; the width is what a leave-one-cycle-out backtest of the cycles picks, so noisy
cycles are pooled and a spike that recurs at a fixed phase is not blurred."""

from __future__ import annotations

import numpy as np
import pytest

from models import catalog, seasonal, select
from models.base import DAY, FitError, Series
from models.seasonal import SeasonalBaseline
from tests.unit.challengers import select_with

STEP = 300.0
N = round(DAY / STEP)


def cycles(rng: np.random.Generator, *, count: int, spike: bool = False) -> np.ndarray:
    phase = np.arange(N) / N
    shape = 200 + 150 * np.sin(2 * np.pi * phase)
    out = rng.poisson(np.tile(shape, (count, 1))).astype(np.float64)
    if spike:
        out[:, 100] *= 4  # the same five minutes every day (a nightly job)
    return out


def test_width_zero_is_the_per_phase_median_bit_for_bit() -> None:
    tail = cycles(np.random.default_rng(1), count=4)
    tail[2, 5] = np.nan
    assert np.array_equal(seasonal.pooled_median(tail, 0), np.nanmedian(tail, axis=0))


def test_noisy_cycles_pool_their_neighbours() -> None:
    tail = cycles(np.random.default_rng(2), count=4)
    assert seasonal.pool_width(tail, window=12) > 0


def test_a_spike_at_a_fixed_phase_keeps_its_own_phase() -> None:
    for seed in range(3):
        tail = cycles(np.random.default_rng(seed), count=4, spike=True)
        assert seasonal.pool_width(tail, window=12) == 0


def test_a_sharp_step_survives_pooling_as_a_running_median_keeps_edges() -> None:
    rng = np.random.default_rng(3)
    step = np.where(np.arange(N) % 48 < 24, 100.0, 1000.0)
    tail = np.tile(step, (4, 1)) + rng.normal(0, 1, (4, N))
    for width in seasonal.POOL_WIDTHS:
        assert np.abs(seasonal.pooled_median(tail, width) - step).max() < 5


def test_one_cycle_is_not_pooled() -> None:
    assert seasonal.pool_width(cycles(np.random.default_rng(4), count=1), window=12) == 0


@pytest.mark.parametrize("make", [seasonal.SeasonalBaseline, seasonal.PooledSeasonal])
def test_predict_at_equals_predict_with_the_pooled_profile_too(
    make: type[seasonal.SeasonalBaseline],
) -> None:
    values = cycles(np.random.default_rng(5), count=6).ravel()
    history = Series(0.0, STEP, values)
    model = make()
    model.fit(Series(0.0, STEP, values[: 4 * N]))
    ends = np.arange(4 * N, 6 * N - 1, 37, dtype=np.int64)
    rows = model.predict_at(history, ends, 6)
    for row, i in zip(rows, ends.tolist(), strict=True):
        assert np.array_equal(row, model.predict(Series(0.0, STEP, values[: i + 1]), 6))


def test_the_pooled_profile_is_smoother_than_the_per_phase_one_on_noisy_cycles() -> None:
    values = cycles(np.random.default_rng(6), count=4).ravel()
    plain, pooled = seasonal.SeasonalBaseline(), seasonal.PooledSeasonal()
    plain.fit(Series(0.0, STEP, values))
    pooled.fit(Series(0.0, STEP, values))
    assert np.abs(np.diff(pooled.profile)).mean() < 0.6 * np.abs(np.diff(plain.profile)).mean()


def test_auto_grades_the_pooled_profile_by_default_and_never_as_a_median_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert select.POOLED_CANDIDATE is True
    assert select.challengers() == ("pooled",)
    assert "pooled" not in catalog.CANDIDATES
    history = Series(0.0, STEP, cycles(np.random.default_rng(7), count=16).ravel())
    best, seen = select_with(monkeypatch, history, "POOLED_CANDIDATE")
    assert "pooled" in seen
    assert "pinball.pooled" in best.scores
    if best.kind == "ensemble":
        assert all(m.kind != "pooled" for m in best.model.members)


def test_a_step_longer_than_the_season_is_a_fit_error_naming_the_fix() -> None:
    sparse = Series(start=0.0, step=2 * DAY, values=np.arange(5, dtype=np.float64) + 1.0)
    with pytest.raises(FitError, match="resample the history to the model step"):
        SeasonalBaseline().fit(sparse)  # 10 days: a daily season
