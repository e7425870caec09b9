"""The seasonal baseline's level window chosen per fit (models/seasonal.py choose_window, behind
SeasonalBaseline.choose_level, off by default): the weights of each window, the choice a
leave-one-cycle-out backtest of the cycles makes (a level that moves within the hour wants a
short window, a steady level under noise a long one), predict_at equal to predict with any
window, and artefacts that keep the window (and load old ones as today's flat hour)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from models import seasonal
from models.base import DAY, HOUR, ArtefactError, Series
from models.seasonal import TODAY, SeasonalBaseline

STEP = 300.0
N = round(DAY / STEP)


class Chosen(SeasonalBaseline):
    choose_level = True


@pytest.fixture
def choosing() -> Iterator[None]:
    SeasonalBaseline.choose_level = True
    try:
        yield
    finally:
        SeasonalBaseline.choose_level = False


def shape() -> np.ndarray:
    return 200 + 150 * np.sin(2 * np.pi * np.arange(N) / N)


def test_a_flat_window_weighs_its_points_alike() -> None:
    assert np.array_equal(seasonal.level_weights(("flat", HOUR), STEP), np.ones(12))
    assert np.array_equal(seasonal.level_weights(("flat", 900.0), 1800.0), np.ones(1))


def test_an_exponential_window_halves_every_half_life_down_to_its_tail() -> None:
    w = seasonal.level_weights(("ewm", 1800.0), STEP)
    assert w[-1] == 1.0
    assert w[-7] == pytest.approx(0.5)
    assert w[0] >= seasonal.EWM_TAIL > w[0] * 0.5 ** (1 / 6)
    with pytest.raises(ValueError, match="unknown level window"):
        seasonal.level_weights(("median", HOUR), STEP)


def test_a_level_that_moves_within_the_hour_chooses_a_short_window() -> None:
    rng = np.random.default_rng(1)
    level = np.exp(np.cumsum(rng.normal(0, 0.05, 4 * N)))  # a random walk, little noise
    tail = (np.tile(shape(), 4) * level * rng.lognormal(0, 0.01, 4 * N)).reshape(4, N)
    window = seasonal.choose_window(tail, STEP, aheads=(3,))
    assert window in (("flat", 900.0), ("ewm", 900.0))


def test_a_steady_level_under_noise_chooses_a_long_window() -> None:
    rng = np.random.default_rng(2)
    tail = rng.poisson(np.tile(shape() / 10, (4, 1))).astype(np.float64)
    window = seasonal.choose_window(tail, STEP, aheads=(3,))
    assert seasonal.level_weights(window, STEP).sum() > 12  # more weight than today's hour


def test_one_cycle_keeps_todays_hour() -> None:
    tail = np.tile(shape(), (1, 1))
    assert seasonal.choose_window(tail, STEP, aheads=(3,)) == TODAY


def test_off_by_default_the_fit_keeps_todays_hour() -> None:
    rng = np.random.default_rng(3)
    level = np.exp(np.cumsum(rng.normal(0, 0.05, 4 * N)))
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, np.tile(shape(), 4) * level))
    assert model.window == TODAY
    assert Chosen().choose_level and not SeasonalBaseline.choose_level


def test_the_switch_reaches_every_seasonal_fit(choosing: None) -> None:
    rng = np.random.default_rng(3)
    level = np.exp(np.cumsum(rng.normal(0, 0.05, 4 * N)))
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, np.tile(shape(), 4) * level))
    assert model.window != TODAY


@pytest.mark.parametrize(
    "window", [("flat", 900.0), ("flat", 2 * HOUR), ("ewm", 1800.0), ("ewm", 2 * HOUR)]
)
def test_predict_at_equals_predict_with_any_window(window: tuple[str, float]) -> None:
    rng = np.random.default_rng(4)
    values = rng.poisson(np.tile(shape(), 6)).astype(np.float64)
    values[4 * N + 50 : 4 * N + 55] = np.nan  # a gap inside some origins' windows
    history = Series(0.0, STEP, values)
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, values[: 4 * N]))
    model.window = window
    ends = np.concatenate([np.arange(3, 40, 7), np.arange(4 * N, 6 * N - 1, 37)])
    rows = model.predict_at(history, ends.astype(np.int64), 6)
    for row, i in zip(rows, ends.tolist(), strict=True):
        assert np.array_equal(row, model.predict(Series(0.0, STEP, values[: i + 1]), 6))


def test_a_short_window_follows_a_jump_sooner() -> None:
    values = np.tile(shape(), 4)
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, values))
    after = values.copy()
    after[-3:] *= 2  # the last 15 minutes doubled
    recent = Series(0.0, STEP, after)
    hour = model.level(recent)
    model.window = ("flat", 900.0)
    assert model.level(recent) > hour > 1.0


def test_the_window_survives_the_artefact_and_todays_artefacts_are_unchanged() -> None:
    model = SeasonalBaseline()
    model.fit(Series(0.0, STEP, np.tile(shape(), 2)))
    assert "window" not in model.to_dict()  # the last hour: the artefact as before the switch
    model.window = ("ewm", 1800.0)
    data = model.to_dict()
    assert SeasonalBaseline.from_dict(data).window == ("ewm", 1800.0)
    del data["window"]
    assert SeasonalBaseline.from_dict(data).window == TODAY
    data["window"] = ["median", 3600.0]
    with pytest.raises(ArtefactError, match="level window"):
        SeasonalBaseline.from_dict(data)


def test_the_band_criterion_grades_the_in_sample_conformal_band() -> None:
    actual = np.array([10.0, 12.0, 8.0, 30.0])
    forecast = np.full(4, 10.0)
    scale = np.maximum(forecast, 1.0)
    offset = np.quantile((actual - forecast) / scale, seasonal.BAND_QUANTILE)
    diff = actual - (forecast + offset * scale)
    q = seasonal.BAND_QUANTILE
    expected = np.maximum(q * diff, (q - 1) * diff).sum()
    assert seasonal._loss(actual, forecast, "band", 1.0) == pytest.approx(expected)
    assert seasonal._loss(actual, forecast, "mae", 1.0) == pytest.approx(24.0)
    with pytest.raises(ValueError, match="unknown level criterion"):
        seasonal._loss(actual, forecast, "rmse", 1.0)


def test_prophets_weight_at_one_step_is_todays_rule_and_further_ahead_brute_forced() -> None:
    from models import prophet

    rng = np.random.default_rng(7)
    e = np.cumsum(rng.normal(0, 0.1, 300)) * 0.3 + rng.normal(0, 0.2, 300)
    assert prophet._residual_weight(e) == prophet._residual_weight(e, ahead=1)

    def brute(alpha: float, ahead: int) -> float:
        levels, level = [], 0.0
        for value in e:
            level += alpha * (value - level)
            levels.append(level)
        forecasts = [0.0] * ahead + levels[: e.size - ahead]
        return float(np.mean((e - np.array(forecasts)) ** 2))

    for ahead in (2, 3):
        errors = {a: brute(a, ahead) for a in prophet.RESIDUAL_WEIGHTS}
        best = min(errors, key=lambda a: errors[a])
        chosen = prophet._residual_weight(e, ahead=ahead)
        assert chosen == (best if errors[best] < float(np.mean(e * e)) else 0.0)
