"""The champion's score in the weekly race: its pinball loss over the latest week, the number
`models.challenge.backtest_loss` computes forecasting origin by origin (2,016 origins a week at
5 minutes), here in one pass where the model allows, bit for bit the same number.

Each origin's forecast is `CalibratedModel.forecast` on the history up to it:
- before the champion's fit ended, the fit-time table (no widening: calibration_for);
- from its fit on, models.manyorigin's pass (the measured table of each day, the adaptive
  widening), which gives exactly the forecasts one at a time.
A model without `predict_at`, or a window the one-pass shortcut does not cover, is scored by
backtest_loss itself.

Must not: change the score (the promotion compares it), only how fast it is reached.
"""

from __future__ import annotations

import math

import numpy as np

from models import challenge, manyorigin, origins
from models.base import FloatArray, Series
from models.calibrate import CalibratedModel
from models.conformal import Calibration
from models.grading import pinball


def champion_loss(
    model: CalibratedModel, history: Series, *, since: float, steps: int, quantile: float
) -> float:
    """`challenge.backtest_loss(model, history, since=, steps=, quantile=)`, faster."""
    uppers = _uppers(model, history, since=since, steps=steps, quantile=quantile)
    if uppers is None:
        return challenge.backtest_loss(model, history, since=since, steps=steps, quantile=quantile)
    first, rows = uppers
    if not rows:
        return math.nan
    values = history.values
    actual, upper = [], []
    for k, row in enumerate(rows):
        i = first + k
        seen = values[i + 1 : i + 1 + steps]
        actual.append(seen)
        upper.append(row[: seen.size])
    return pinball(np.concatenate(actual), np.concatenate(upper), quantile)


def _uppers(
    model: CalibratedModel, history: Series, *, since: float, steps: int, quantile: float
) -> tuple[int, list[FloatArray]] | None:
    """(first origin index, the calibrated upper band of each origin from it to the last but
    one), as backtest_loss forecasts them; None when the one-pass shortcut does not apply."""
    step = history.step
    if model.step != step or not isinstance(model.model, origins.ManyOrigins):
        return None
    first = max(1, math.ceil((since - history.start) / step - 1e-9))
    last = len(history) - 2  # the newest origin with an actual after it
    if first > last:
        return first, []
    fit = math.ceil((model.trained_until - history.start) / step - 1e-9)
    rows: list[FloatArray] = []
    before = np.arange(first, min(fit, last + 1), dtype=np.int64)
    if before.size:
        p50 = origins.predict_at(model.model, history, before, steps)
        rows += list(_upper(model.calibration, p50, quantile))
    if fit <= last:
        known = Series(history.start, step, history.values[: last + 1])
        since_fit = manyorigin.forecasts(
            model, known, first=max(fit, 0), steps=steps, quantile=quantile, keep=len(known)
        )
        if since_fit is None:
            return None
        rows += [f.upper for f in since_fit[max(first - fit, 0) :]]
    return first, rows


def _upper(table: Calibration, p50: FloatArray, quantile: float) -> FloatArray:
    """`table.upper(row, quantile)` of every row of `p50` at once (elementwise: the same
    numbers), the offsets looked up once instead of once per origin."""
    offsets = table.offsets(p50.shape[1], quantile)
    out: FloatArray = np.maximum(p50 + offsets * table.scale(p50), np.maximum(p50, 0.0))
    return out
