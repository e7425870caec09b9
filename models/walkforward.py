"""Walk forward through a series exactly as production would: at each origin, forecast from
what was known up to it, refitting (with calibration) every `refit_every` on the last `window`
of history. No lookahead: the forecast at origin i depends only on values[: i + 1].

`make` is a model factory (an adapter class) or a model name as in the `model` metadata key,
"auto" included, so the backtest can replay exactly what the engine would run.

Shared by the forecast backtest and the policy replay, so both measure the same forecasts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from models import select
from models.base import WEEK, Forecast, Forecaster, ModelError, Series
from models.calibrate import CalibratedModel, fit_calibrated

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Origin:
    """The forecast made after observing values[index] (None while no model could be fitted)."""

    index: int
    forecast: Forecast | None
    model: CalibratedModel | None


def walk_forward(
    make: Callable[[], Forecaster] | str,
    series: Series,
    *,
    start: int,
    steps: int,
    quantile: float,
    refit_every: float = WEEK,
    window: float = 4 * WEEK,
) -> Iterator[Origin]:
    """Yield the forecast made at every origin index from `start` to the series' end (lazily:
    a consumer that stops early never pays for the origins after it)."""
    refit_points = max(1, round(refit_every / series.step))
    keep = max(1, round(window / series.step))
    model: CalibratedModel | None = None
    last_fit = -refit_points
    for i in range(start, len(series)):
        known = Series(series.start, series.step, series.values[: i + 1])
        if i - last_fit >= refit_points or (model is None and (i - last_fit) * series.step >= 3600):
            history = known.since(known.end - (keep - 1) * series.step)
            model = _fit(make, history, steps=steps, quantile=quantile) or model
            last_fit = i
        forecast = model.forecast(known, steps=steps, quantile=quantile) if model else None
        yield Origin(index=i, forecast=forecast, model=model)


def _fit(
    make: Callable[[], Forecaster] | str, history: Series, *, steps: int, quantile: float
) -> CalibratedModel | None:
    try:
        if isinstance(make, str):
            return select.fit_kind(make, history, steps=steps, quantile=quantile)
        return fit_calibrated(make, history, steps=steps, quantile=quantile)
    except ModelError as exc:
        logger.info("no model at %s: %s", history.end, exc)
        return None
