"""The champion/challenger race of `scaler retrain`: a stored model's pinball loss over the
newest calibration window of history, each forecast made only from data before its origin, to
set against the challenger's own out-of-sample loss on the same window (`scores["pinball"]`,
models.calibrate).

Where models are kept (versions, the champion pointer, atomic writes, the last good version
when one is damaged) is scaler/store's job, not this module's.
"""

from __future__ import annotations

import math

import numpy as np

from models.base import Series
from models.calibrate import CalibratedModel
from models.grading import pinball


def backtest_loss(
    model: CalibratedModel, history: Series, *, since: float, steps: int, quantile: float
) -> float:
    """Pinball loss of `model`'s calibrated quantile over rolling origins >= since; NaN when
    the history holds no origin there."""
    first = max(1, math.ceil((since - history.start) / history.step - 1e-9))
    actual, upper = [], []
    for i in range(first, len(history) - 1):
        known = Series(history.start, history.step, history.values[: i + 1])
        forecast = model.forecast(known, steps=steps, quantile=quantile)
        seen = history.values[i + 1 : i + 1 + steps]
        actual.append(seen)
        upper.append(forecast.upper[: seen.size])
    if not actual:
        return math.nan
    return pinball(np.concatenate(actual), np.concatenate(upper), quantile)
