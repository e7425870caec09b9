"""ETS, Prophet and the seasonal-naive reference forecast from many origins in one pass
(`predict_at`, models/origins.py) with the very numbers `predict` gives at each origin, bit for
bit, gaps included: the rolling backtests of calibration and selection, a replica's drift-state
replay and the backtest's walk forward (models/walkforward.py) take that pass."""

from __future__ import annotations

import numpy as np
import pytest

from models import catalog, origins
from models.base import DAY, Forecaster, Series
from models.reference import SeasonalNaive
from tests.contract import synthetic


def gappy_load(days: float, *, seed: int) -> Series:
    """Daily and weekly load with 2 % of the samples missing and a six-hour outage."""
    base = synthetic.load(days, seed=seed)
    values = base.values.copy()
    values[np.random.default_rng(seed).random(values.size) < 0.02] = np.nan
    values[-400:-328] = np.nan
    return Series(base.start, base.step, values)


@pytest.mark.parametrize("kind", ["ets", "prophet", "naive"])
def test_the_forecast_from_every_origin_at_once_is_predict_at_each_origin(kind: str) -> None:
    data = gappy_load(16, seed=7)
    model: Forecaster = SeasonalNaive() if kind == "naive" else catalog.adapter(kind)()
    model.fit(data.until(data.start + 14 * DAY))
    assert isinstance(model, origins.ManyOrigins)
    ends = np.arange(0, len(data) - 1)  # from the very first point, the outage included

    at_once = origins.predict_at(model, data, ends, 5)

    one_by_one = np.array(
        [model.predict(Series(data.start, data.step, data.values[: i + 1]), 5) for i in ends]
    )
    assert at_once.shape == (ends.size, 5)
    assert np.array_equal(at_once, one_by_one)
    assert np.isfinite(at_once).all()
