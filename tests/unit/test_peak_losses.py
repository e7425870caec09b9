"""origin_peak_losses: the pinball loss of the peak a decision buys, per origin."""

from __future__ import annotations

import numpy as np

from models.conformal import Backtest
from models.grading import origin_losses, origin_peak_losses


def spiky_backtests() -> tuple[Backtest, Backtest]:
    """Two weeks of 5-minute origins on a curve with a one-step spike once a day (a nightly
    job): one forecast repeats the spike but is noisy everywhere else (a seasonal baseline),
    the other follows the curve closely and smooths the spike away."""
    rng = np.random.default_rng(3)
    origins, steps, day = 4032, 6, 288
    base = 100.0 + 10.0 * np.sin(np.arange(origins + steps) / 40.0)
    actual_line = base + rng.normal(0.0, 2.0, base.size)
    actual_line[np.arange(14, base.size, day)] += 150.0  # the nightly job
    index = np.arange(origins)[:, None] + np.arange(1, steps + 1)[None, :]
    actual = actual_line[index % actual_line.size]
    repeats = base.copy()
    repeats[np.arange(14, base.size, day)] += 150.0
    noisy = repeats[index % repeats.size] + rng.normal(0.0, 7.0, index.shape)
    smooth = base[index % base.size] + rng.normal(0.0, 0.5, index.shape)
    return Backtest(actual=actual, p50=noisy), Backtest(actual=actual, p50=smooth)


def test_a_forecast_that_smooths_a_recurring_spike_away_loses_on_the_peak_not_on_the_path() -> None:
    repeats, smooth = spiky_backtests()
    kw = {"floor": 1.0, "quantile": 0.95}
    assert np.nanmean(origin_losses(smooth, **kw)) < np.nanmean(origin_losses(repeats, **kw))
    assert np.nanmean(origin_peak_losses(smooth, **kw)) > np.nanmean(
        origin_peak_losses(repeats, **kw)
    )


def test_an_origin_with_no_graded_step_has_no_peak_loss() -> None:
    repeats, _ = spiky_backtests()
    actual = repeats.actual.copy()
    actual[5, :] = np.nan
    losses = origin_peak_losses(Backtest(actual=actual, p50=repeats.p50), floor=1.0, quantile=0.95)
    assert np.isnan(losses[5]) and np.isfinite(np.delete(losses, 5)).all()
