"""Split-conformal calibration: the calibrated bound covers about as often as it says, whatever
the model underneath, and keeps doing so when the load gets noisier after a fit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from models import catalog
from models.base import DAY, Series
from models.calibrate import CalibratedModel, fit_calibrated
from models.conformal import LEVELS, Backtest, Calibration, table_from
from models.grading import scores
from tests.contract.synthetic import load

STEPS = 4
K = 2  # graded 3 steps ahead, as a 10-minute lead time on a 5-minute step


def realised_coverage(model: CalibratedModel, series: Series, *, since: float) -> float:
    first = int((since - series.start) / series.step)
    hits = []
    for i in range(first, len(series) - STEPS - 1):
        known = Series(series.start, series.step, series.values[: i + 1])
        forecast = model.forecast(known, steps=STEPS, quantile=0.95)
        hits.append(series.values[i + 1 + K] <= forecast.upper[K])
    return float(np.mean(hits))


@pytest.mark.parametrize("kind", ["seasonal", "ets", "naive"])
def test_realised_coverage_is_near_nominal_on_poisson_noise_around_a_daily_cycle(
    kind: str,
) -> None:
    series = load(28, seed=3, scale=60.0)
    train = series.until(series.start + 21 * DAY - 1)
    model = fit_calibrated(catalog.adapter(kind), train, steps=STEPS)
    coverage = realised_coverage(model, series, since=train.end)
    assert 0.92 <= coverage <= 0.98


def test_the_band_widens_within_days_when_the_load_gets_noisier_after_the_fit() -> None:
    series = load(26, seed=4)
    rng = np.random.default_rng(5)
    values = series.values.copy()
    fit_end = round(21 * DAY / series.step)
    values[fit_end:] *= rng.uniform(0.4, 1.6, values.size - fit_end)  # much noisier
    noisy = Series(series.start, series.step, values)
    model = fit_calibrated(
        catalog.adapter("seasonal"), noisy.until(noisy.start + 21 * DAY - 1), steps=STEPS
    )
    at_fit = model.calibration.offsets(STEPS, 0.95)
    later = model.calibration_for(noisy, STEPS).offsets(STEPS, 0.95)
    assert (later > 2 * at_fit).all()
    assert realised_coverage(model, noisy, since=noisy.end - DAY) > 0.9


def test_the_models_own_interval_is_reported_next_to_the_calibrated_one() -> None:
    series = load(15, seed=6)
    model = fit_calibrated(catalog.adapter("ets"), series, steps=STEPS)
    forecast = model.forecast(series, steps=STEPS, quantile=0.95)
    assert forecast.raw_upper is not None
    assert (forecast.raw_upper >= forecast.p50).all()
    assert not np.array_equal(forecast.raw_upper, forecast.upper)


def test_scores_grade_each_half_of_the_origins_with_the_table_of_the_other() -> None:
    p50 = np.full((200, 1), 100.0)
    actual = p50.copy()
    actual[100:] += 50.0  # the second half runs far above anything the first half saw
    graded = scores(Backtest(actual=actual, p50=p50), floor=1.0, quantile=0.95)
    assert graded["coverage"] == pytest.approx(0.5)  # honest: in-sample it would be ~95%


@settings(max_examples=50, deadline=None)
@given(
    errors=hnp.arrays(np.float64, (30, 3), elements=st.floats(-1, 5)),
    p50=hnp.arrays(np.float64, 3, elements=st.floats(0, 1e6)),
    quantile=st.floats(0.5, 0.99),
)
def test_the_calibrated_bound_is_never_below_the_median_nor_negative(
    errors: np.ndarray, p50: np.ndarray, quantile: float
) -> None:
    table = table_from(errors)
    assert (np.diff(table, axis=1) >= 0).all()  # quantiles grow with the level
    upper = Calibration(table=table, floor=1.0, samples=30).upper(p50, quantile)
    assert (upper >= p50).all() and (upper >= 0).all()
    assert table.shape == (3, LEVELS.size)


def test_scores_say_how_many_points_of_the_window_were_observed() -> None:
    """A coverage of 0.39 over "2016 origins" read as a week's grade, though all but a dozen
    points of that week were gaps."""
    p50 = np.full((200, 3), 100.0)
    actual = np.full((200, 3), np.nan)
    actual[:12] = 90.0
    graded = scores(Backtest(actual=actual, p50=p50), floor=1.0, quantile=0.95)
    assert graded["origins"] == 200 and graded["observed"] == 12
