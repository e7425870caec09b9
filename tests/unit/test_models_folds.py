"""`model: auto` pools its paired test over the calibration window and the one before it."""

from __future__ import annotations

import numpy as np
import pytest

from models import ensemble, folds, select
from models.base import DAY, Series, observed_span
from models.conformal import calibration_window
from models.ets import ETSModel
from models.seasonal import SeasonalBaseline
from tests.contract.synthetic import load
from tests.unit.test_models_select import with_losses


@pytest.mark.parametrize("days", [7, 28])
def test_the_earlier_window_ends_where_the_calibration_window_starts(days: int) -> None:
    history = load(days, seed=3)
    window = folds.earlier_window(history)
    assert window is not None
    start, end = window
    length = calibration_window(observed_span(history))
    assert end == pytest.approx(history.end - length)
    assert end - start == pytest.approx(length)
    assert start - history.start >= folds.MIN_FIT_SHARE * observed_span(history) - history.step


def test_a_history_too_short_for_an_earlier_fit_has_no_earlier_backtest() -> None:
    short = load(1.5, seed=3)  # the fit before the earlier window would see 18 hours
    assert folds.earlier_backtest(SeasonalBaseline, short, steps=4) is None


def test_the_earlier_backtest_forecasts_only_from_what_was_known() -> None:
    history = load(7, seed=4)
    start, end = folds.earlier_window(history) or (0.0, 0.0)
    backtest = folds.earlier_backtest(SeasonalBaseline, history, steps=4)
    assert backtest is not None
    assert backtest.origins == round((end - start) / history.step)
    # Load after the window (the calibration window's) changes no forecast in it.
    values = history.values.copy()
    values[history.times() >= end] *= 10.0
    again = folds.earlier_backtest(
        SeasonalBaseline, Series(history.start, history.step, values), steps=4
    )
    assert again is not None
    np.testing.assert_array_equal(again.p50, backtest.p50)


def test_a_model_lucky_on_the_calibration_window_alone_is_not_chosen_when_pooled() -> None:
    rng = np.random.default_rng(2)
    week = 2016
    cheap_earlier, cheap_latest = rng.gamma(1.0, 10.0, week), rng.gamma(1.0, 10.0, week)
    costly_earlier, costly_latest = cheap_earlier * 1.6, cheap_latest * 0.8
    cheap = with_losses(SeasonalBaseline(), cheap_latest)
    costly = with_losses(ETSModel(), costly_latest)
    pooled = {
        "seasonal": np.concatenate([cheap_earlier, cheap_latest]),
        "ets": np.concatenate([costly_earlier, costly_latest]),
    }
    assert select.choose([cheap, costly]).kind == "ets"  # the ablation: one window
    assert select.choose([cheap, costly], pooled).kind == "seasonal"


def test_a_model_better_on_both_windows_is_chosen_when_pooled() -> None:
    rng = np.random.default_rng(3)
    earlier, latest = rng.gamma(1.0, 10.0, 2016), rng.gamma(1.0, 10.0, 2016)
    cheap, costly = with_losses(SeasonalBaseline(), latest), with_losses(ETSModel(), latest * 0.8)
    pooled = {
        "seasonal": np.concatenate([earlier, latest]),
        "ets": np.concatenate([earlier * 0.8, latest * 0.8]),
    }
    assert select.choose([cheap, costly], pooled).kind == "ets"


def test_auto_pools_every_candidate_and_the_median_over_both_windows() -> None:
    history = load(10, seed=5)
    fitted = [select.fit_kind(k, history, steps=4) for k in ("seasonal", "ets")]
    combined = ensemble.combine(fitted, history)
    assert combined is not None
    models = [*fitted, combined]
    pooled = select.pooled_losses(models, history, steps=4)
    assert pooled is not None and set(pooled) == {"seasonal", "ets", "ensemble"}
    earlier = folds.earlier_backtest(SeasonalBaseline, history, steps=4)
    assert earlier is not None
    for model in models:
        assert model.losses is not None
        assert pooled[model.kind].shape == (earlier.origins + model.losses.size,)
        np.testing.assert_array_equal(pooled[model.kind][earlier.origins :], model.losses)
    assert np.isfinite(pooled["ensemble"][: earlier.origins]).mean() > 0.9


def test_without_an_earlier_window_auto_compares_on_the_calibration_window_alone() -> None:
    short = load(1.5, seed=6)
    fitted = [select.fit_kind(k, short, steps=4) for k in ("seasonal", "ets")]
    assert select.pooled_losses(fitted, short, steps=4) is None
    assert observed_span(short) > DAY
