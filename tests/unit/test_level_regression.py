"""How the deviation from the seasonal profile carries ahead (models/deviation.py, behind
SeasonalBaseline.regress_level, on by default): the trailing features read a prefix alike, the
regression recovers a known persistence, predict_at equals predict, one cycle keeps the hour's
level, and artefacts keep the coefficients (old ones load unchanged, malformed ones are
refused)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from models import deviation, seasonal
from models.base import DAY, ArtefactError, Series
from models.seasonal import SeasonalBaseline

STEP = 300.0
N = round(DAY / STEP)


def shape() -> np.ndarray:
    return 200 + 150 * np.sin(2 * np.pi * np.arange(N) / N)


def ar1(phi: float, size: int, sd: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.zeros(size)
    for i in range(1, size):
        out[i] = phi * out[i - 1] + rng.normal(0, sd)
    return out


def test_the_windows_are_distinct_points_at_any_step() -> None:
    assert deviation.widths(STEP) == (1, 3, 6, 12, 24, 48)
    assert deviation.widths(1800.0) == (1, 2, 4, 8)
    assert deviation.rows(STEP) == 12
    assert deviation.rows(60.0) == deviation.MAX_ROWS
    assert deviation.rows(2 * DAY) == 1


def test_features_are_the_log_level_of_each_window_missing_points_skipped() -> None:
    load = np.full(60, 2.0)
    load[-2] = 6.0
    load[-3] = np.nan
    expected = np.full(60, 2.0)
    x = deviation.features(load, expected, np.array([59, 0], dtype=np.int64), STEP)
    assert x[0, 0] == 1.0  # the intercept
    assert x[0, 1] == 0.0  # the newest point is as expected
    assert x[0, 2] == pytest.approx(np.log(8.0 / 4.0))  # the window of 3: one point missing
    assert x[0, 4] == pytest.approx(np.log((2.0 * 10 + 6.0) / (2.0 * 11)))
    assert x[1, 1:].tolist() == [0.0] * 6  # before the start: only point 0, as expected
    every = deviation.features(load, expected, np.arange(60, dtype=np.int64), STEP)
    for i in (5, 30, 58):
        prefix = deviation.features(load[: i + 1], expected[: i + 1], np.array([i]), STEP)
        assert np.array_equal(every[i], prefix[0])
    empty = deviation.features(np.full(10, np.nan), np.ones(10), np.array([9]), STEP)
    assert empty[0, 1:].tolist() == [0.0] * 6  # no point in any window: the profile itself
    idle = deviation.features(np.full(60, 1e-9), np.ones(60), np.array([59]), STEP)
    assert idle[0, 1:].tolist() == [deviation.CLIP[0]] * 6  # a window's level is clipped


def test_the_regression_recovers_a_known_persistence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deviation, "UNIT_SUM", False)  # free weights: the decay to 0 is learnt
    d = ar1(0.9, 8 * N, 0.05, seed=1)  # 8 days of a deviation that decays 10 % per step
    expected = np.full(d.size, 10.0)
    coef = deviation.fit(expected * np.exp(d), expected, STEP)
    rows = deviation.rows(STEP)
    assert coef is not None and coef.shape == (rows, 7)
    fresh = ar1(0.9, 2 * N, 0.05, seed=2)  # the same process, not fitted on
    origins = np.arange(60, fresh.size, dtype=np.int64)
    x = deviation.features(10.0 * np.exp(fresh), expected[: fresh.size], origins, STEP)
    got = deviation.predict(coef, x, rows)
    best = fresh[origins, None] * 0.9 ** np.arange(1, rows + 1)[None, :]  # the true expectation
    spread = float(fresh.std())
    assert np.abs(got - best).mean(axis=0).max() < 0.15 * spread
    assert np.abs(got[:, 0] - best[:, 0]).mean() < 0.05 * spread


def test_a_level_every_window_shares_is_carried_in_full_and_a_burst_is_not() -> None:
    d = ar1(0.9, 8 * N, 0.05, seed=1)  # deviations that revert: free weights would shrink
    expected = np.full(d.size, 10.0)
    coef = deviation.fit(expected * np.exp(d), expected, STEP)
    assert coef is not None
    assert np.allclose(coef[:, 1:].sum(axis=1), 1.0)
    held = np.full(60, 3.0)  # x3 for the last 5 hours: a step change, not noise
    x = deviation.features(held, np.ones(60), np.array([59]), STEP)
    assert np.allclose(deviation.predict(coef, x, 12), math.log(3.0), atol=0.01)  # intercept
    burst = np.ones(60)
    burst[-1] = 3.0  # one 5-minute burst
    x = deviation.features(burst, np.ones(60), np.array([59]), STEP)
    assert (deviation.predict(coef, x, 12)[0] < 0.95 * math.log(3.0)).all()
    assert deviation.predict(coef, x, 12)[0, -1] < 0.5 * math.log(3.0)  # an hour on: mostly gone


def test_too_few_points_fit_nothing() -> None:
    assert deviation.fit(np.ones(100), np.ones(100), STEP) is None
    assert deviation.fit(np.full(8 * N, np.nan), np.ones(8 * N), STEP) is None


def test_the_prediction_is_clipped_to_the_levels_bounds() -> None:
    coef = np.zeros((2, 7))
    coef[:, 1] = 100.0
    x = deviation.features(np.full(60, 2.0), np.ones(60), np.array([59]), STEP)
    assert deviation.predict(coef, x, 3)[0].tolist() == [deviation.CLIP[1]] * 3


def test_switched_off_or_one_cycle_keeps_the_hours_level(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SeasonalBaseline, "regress_level", False)  # --no-level-regression
    values = np.tile(shape(), 4) * np.exp(ar1(0.95, 4 * N, 0.03, seed=2))
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, values))
    assert model.regression is None and "regression" not in model.to_dict()  # as before
    monkeypatch.undo()
    one = SeasonalBaseline()
    one.fit(Series(0.0, STEP, values[:N]))
    assert one.regression is None
    data = one.to_dict()
    assert data["regression"] is None  # written: fitted with the regression, on one cycle
    assert SeasonalBaseline.from_dict(data).regression is None
    del data["regression"]  # a seasonal artefact from before the regression: the hour's level
    assert SeasonalBaseline.from_dict(data).regression is None


def test_every_seasonal_fit_regresses_by_default_and_old_artefacts_keep_the_hours_level() -> None:
    assert SeasonalBaseline.regress_level
    values = np.tile(shape(), 4) * np.exp(ar1(0.95, 4 * N, 0.03, seed=2))
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, values))
    assert model.regression is not None
    old = {k: v for k, v in model.to_dict().items() if k != "regression"}  # written before it
    back = SeasonalBaseline.from_dict(old)
    assert back.regression is None
    recent = Series(0.0, STEP, values)
    times = recent.end + STEP * np.arange(1, 4, dtype=np.float64)
    assert np.array_equal(back.predict(recent, 3), back.expected(times) * back.level(recent))


def test_predict_at_equals_predict() -> None:
    rng = np.random.default_rng(4)
    values = rng.poisson(np.tile(shape(), 6) * np.exp(ar1(0.95, 6 * N, 0.03, seed=3)))
    values = values.astype(np.float64)
    values[4 * N + 50 : 4 * N + 55] = np.nan  # a gap inside some origins' windows
    history = Series(0.0, STEP, values)
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, values[: 4 * N]))
    assert model.regression is not None
    ends = np.concatenate([np.arange(3, 40, 7), np.arange(4 * N, 6 * N - 1, 37)])
    rows = model.predict_at(history, ends.astype(np.int64), 20)  # past the fitted rows too
    for row, i in zip(rows, ends.tolist(), strict=True):
        assert np.array_equal(row, model.predict(Series(0.0, STEP, values[: i + 1]), 20))
    assert (rows >= 0).all()


def test_a_lasting_rise_is_carried_ahead() -> None:
    values = np.tile(shape(), 4) * np.exp(ar1(0.98, 4 * N, 0.02, seed=5))
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, values))
    after = np.tile(shape(), 5)
    after[-48:] *= 1.5  # four hours 50 % above the profile
    forecast = model.predict(Series(0.0, STEP, after), 3)
    profile = model.expected(STEP * np.arange(5 * N, 5 * N + 3, dtype=np.float64))
    assert (forecast > 1.3 * profile).all()


def test_the_coefficients_survive_the_artefact_and_malformed_ones_are_refused() -> None:
    values = np.tile(shape(), 4) * np.exp(ar1(0.95, 4 * N, 0.03, seed=2))
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, values))
    data = model.to_dict()
    back = SeasonalBaseline.from_dict(data)
    assert back.regression is not None and model.regression is not None
    assert np.array_equal(back.regression, model.regression)
    recent = Series(0.0, STEP, values)
    assert np.array_equal(back.predict(recent, 6), model.predict(recent, 6))
    for bad in ([[1.0, 2.0]], [], [[float("nan")] * 7], "x"):
        data["regression"] = bad
        with pytest.raises(ArtefactError, match=r"refit|malformed"):
            SeasonalBaseline.from_dict(data)


def test_an_artefact_that_chose_another_level_window_is_refused_naming_the_fix() -> None:
    values = np.tile(shape(), 2) * np.exp(ar1(0.95, 2 * N, 0.03, seed=2))
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, values))
    data = model.to_dict()
    assert "window" not in data
    data["window"] = ["flat", 3600.0]  # the hour, as written explicitly: read as before
    recent = Series(0.0, STEP, values)
    assert np.array_equal(
        SeasonalBaseline.from_dict(data).predict(recent, 3), model.predict(recent, 3)
    )
    for other in (["ewm", 900.0], ["flat", 900.0], ["flat", -1.0]):
        data["window"] = other
        with pytest.raises(ArtefactError, match="refit the model"):
            SeasonalBaseline.from_dict(data)


def test_held_out_expected_is_the_profile_of_the_other_cycles() -> None:
    tail = np.tile(shape(), (3, 1))
    tail[1] *= 2.0  # one busy day: twice the other two
    load, expected = (a.reshape(3, N) for a in seasonal.held_out_expected(tail))
    floor = seasonal._level_floor(shape())
    assert np.allclose(load[1], 2 * shape() + floor)
    assert np.allclose(expected[1], shape() + floor)
    busy = 1.5 * shape()  # the median of a quiet and a busy day
    floor = seasonal._level_floor(busy)
    for quiet in (0, 2):
        assert np.allclose(load[quiet], shape() + floor)
        assert np.allclose(expected[quiet], busy + floor)
    missing = tail.copy()
    missing[2, :10] = np.nan
    assert np.isnan(seasonal.held_out_expected(missing)[0].reshape(3, N)[2, :10]).all()


class RegressionAlone(SeasonalBaseline):
    """The regression's forecast alone, not combined with the level window's (the first version
    measured: docs/forecasting.md)."""

    def _combined(self, path: Any, *_: Any) -> Any:
        return path


def test_the_forecast_combines_the_regression_with_the_levels_on_the_log_scale() -> None:
    values = np.tile(shape(), 4) * np.exp(ar1(0.9, 4 * N, 0.05, seed=6))
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, values))
    plain = SeasonalBaseline.from_dict(
        {k: v for k, v in model.to_dict().items() if k != "regression"}
    )
    dip = values.copy()
    dip[-1] = 0.0  # one lost scrape read as 0
    recent = Series(0.0, STEP, dip)
    combined = model.predict(recent, 6)
    alone = RegressionAlone.from_dict(model.to_dict()).predict(recent, 6)
    levelled = plain.predict(recent, 6)
    floor = seasonal._level_floor(model.profile)
    assert np.allclose(combined + floor, np.sqrt((alone + floor) * (levelled + floor)))
    assert (alone < combined).all() and (combined < levelled).all()  # the fall is halved
