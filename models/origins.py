"""Point forecasts at many origins of one series: what a rolling backtest, a re-measured
calibration table and a drift-state replay all ask for, one forecast per model step.

A model that offers `predict_at(history, ends, steps)` (the seasonal baseline: one numpy pass
over all origins) answers at once; any other gets the loop over `predict`, one origin at a time.
Either way row k is exactly `predict` on the prefix ending at origin k, bit for bit: the live
engine forecasts one origin per step with `predict`, and a replica that rebuilds its state with
these rows must reach the same numbers (scaler/serving/driftstate.py).

Pure: numpy and models.base only.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from models.base import FloatArray, Forecaster, Series

IntArray = npt.NDArray[np.int64]


@runtime_checkable
class ManyOrigins(Protocol):
    """A forecaster that forecasts from many origins in one pass."""

    def predict_at(self, history: Series, ends: IntArray, steps: int) -> FloatArray:
        """Row k: `predict(Series(history.start, history.step, history.values[: ends[k] + 1]),
        steps)`, exactly."""
        ...


def predict_at(model: Forecaster, history: Series, ends: IntArray, steps: int) -> FloatArray:
    """The point forecast from each origin `history.values[: i + 1]`, i in `ends`: an
    (origins x steps) array."""
    ends = np.asarray(ends, dtype=np.int64)
    if ends.size == 0:
        return np.zeros((0, steps))
    if isinstance(model, ManyOrigins):
        return model.predict_at(history, ends, steps)
    rows = [
        model.predict(Series(history.start, history.step, history.values[: i + 1]), steps)
        for i in ends.tolist()
    ]
    return np.array(rows).reshape(ends.size, steps)


def rolling(
    model: Forecaster, history: Series, *, first: int, steps: int, stride: int = 1
) -> tuple[FloatArray, FloatArray]:
    """(actual, p50) of the forecasts from every `stride`-th origin index from `first` to the
    last but one (models.conformal.rolling): row k's actuals are the `steps` values after its
    origin, NaN past the series' end."""
    values = history.values
    ends = np.arange(first, len(history) - 1, stride, dtype=np.int64)
    padded = np.concatenate([values, np.full(steps, np.nan)])
    actual = padded[ends[:, None] + 1 + np.arange(steps)[None, :]]
    return actual.reshape(ends.size, steps), predict_at(model, history, ends, steps)
