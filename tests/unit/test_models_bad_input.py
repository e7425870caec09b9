"""The bad-input table: each input gives a clear error or a documented behaviour, and only
ModelError ever leaves `artefact.fit` (the engine catches it and stays reactive; nothing else
may reach the server or the backtest).

| input                          | behaviour                                                  |
|--------------------------------|------------------------------------------------------------|
| empty series                   | FitError "no observed values"                              |
| one point                      | FitError "needs at least one day ... stays reactive"       |
| all values missing             | FitError "no observed values"                              |
| constant series                | a model; P50 = P95 = the constant                          |
| negative values                | read as 0 by every model (a load cannot be negative)       |
| timestamps out of order        | SeriesError from resample, TraceError file:line from a CSV |
| duplicated timestamps          | SeriesError from resample, TraceError file:line from a CSV |
| inf                            | SeriesError (Series and resample refuse it)                |
| a step as long as the season   | a model (ets: no seasonal profile, as for under two cycles)|
"""

from __future__ import annotations

import numpy as np
import pytest

from models import artefact, catalog
from models.base import FitError, ModelError, Series, SeriesError
from models.resample import resample
from tests.contract.synthetic import load

STEPS = 4


@pytest.mark.parametrize(
    ("name", "series", "message"),
    [
        ("empty", Series(0.0, 300.0, np.zeros(0)), "no observed values"),
        ("one point", Series(0.0, 300.0, np.array([5.0])), "stays reactive"),
        ("all missing", Series(0.0, 300.0, np.full(600, np.nan)), "no observed values"),
    ],
)
@pytest.mark.parametrize("kind", ["auto", *catalog.names()])
def test_unusable_histories_are_a_fit_error_that_says_why(
    kind: str, name: str, series: Series, message: str
) -> None:
    with pytest.raises(FitError, match=message):
        artefact.fit(kind, series, STEPS)


@pytest.mark.parametrize("kind", ["seasonal", "ets", "naive"])
def test_negative_values_are_read_as_zero(kind: str) -> None:
    series = load(3, seed=2)
    values = series.values.copy()
    values[-30:] = -values[-30:]  # e.g. a difference of two counters gone wrong
    negative = Series(series.start, series.step, values)
    clipped = Series(series.start, series.step, np.maximum(values, 0.0))
    a = artefact.load(artefact.fit(kind, negative, STEPS)).forecast(
        negative, steps=4, quantile=0.95
    )
    b = artefact.load(artefact.fit(kind, clipped, STEPS)).forecast(clipped, steps=4, quantile=0.95)
    np.testing.assert_allclose(a.p50, b.p50)
    assert (a.p50 >= 0).all()


@pytest.mark.parametrize("kind", ["auto", *catalog.names()])
def test_a_daily_step_history_fits_or_says_why(kind: str) -> None:
    """A day per point over 10 days: the daily season is one point long, which STL cannot split
    (ets raised statsmodels' ValueError, out of `scaler backtest` as a traceback)."""
    days = np.arange(10.0)
    series = Series(1_700_006_400.0, 86_400.0, 100 + 10 * (days % 7) + days)
    try:
        forecast = artefact.load(artefact.fit(kind, series, STEPS)).forecast(
            series, steps=STEPS, quantile=0.95
        )
    except ModelError:
        assert kind not in ("ets", "seasonal", "auto")  # these three must fit
        return
    assert np.isfinite(forecast.p50).all() and (forecast.upper >= forecast.p50).all()


def test_inf_cannot_enter_a_series() -> None:
    with pytest.raises(SeriesError, match="inf"):
        Series(0.0, 300.0, np.array([1.0, np.inf]))
    with pytest.raises(SeriesError, match="infinite"):
        resample([0.0, 300.0], [1.0, -np.inf])


@pytest.mark.parametrize(
    ("times", "message"), [([0.0, 600.0, 300.0], "goes back"), ([0.0, 300.0, 300.0], "repeats")]
)
def test_unordered_or_duplicated_timestamps_are_refused_with_the_fix(
    times: list[float], message: str
) -> None:
    with pytest.raises(SeriesError, match=f"{message}.*sort samples by time"):
        resample(times, [1.0, 2.0, 3.0])


def test_every_error_from_fitting_is_a_model_error() -> None:
    assert issubclass(FitError, ModelError) and issubclass(SeriesError, ModelError)
