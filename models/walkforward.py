"""Walk forward through a series exactly as production would: at each origin, forecast from
what was known up to it, refitting (with calibration) every `refit_every` on the last `window`
of history. No lookahead: the forecast at origin i depends only on values[: i + 1].

`make` is a model factory (an adapter class) or a model name as in the `model` metadata key,
"auto" included, so the backtest can replay exactly what the engine would run.

Shared by the forecast backtest and the policy replay, so both measure the same forecasts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from models import manyorigin, select
from models.base import WEEK, Forecast, Forecaster, ModelError, Series
from models.calibrate import CalibratedModel, fit_calibrated
from models.conformal import Calibration

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Origin:
    """The forecast made after observing values[index] (None while no model could be fitted),
    and, when the walk made it in one pass, the calibrated table in force for it
    (`model.calibration_for` there, which the replay reads at other quantiles)."""

    index: int
    forecast: Forecast | None
    model: CalibratedModel | None
    band: Calibration | None = None


FIRST_PASS = 12
"""Origins of a model's first one-pass batch; each next batch of the same model is twice as
long, so a consumer that stops early (a drift refit) pays for at most twice what it read."""


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
    a consumer that stops early never pays for much past the origins it read).

    Between two refits a model that forecasts many origins at once (models.manyorigin) makes
    them in growing batches, bit for bit the forecasts one origin at a time would make (they are
    what the live engine makes, one per step); any other loops over `forecast`."""
    refit_points = max(1, round(refit_every / series.step))
    keep = max(1, round(window / series.step))
    model: CalibratedModel | None = None
    last_fit = -refit_points
    failed = _Failures()
    i = start
    while i < len(series):
        known = Series(series.start, series.step, series.values[: i + 1])
        if i - last_fit >= refit_points or (model is None and (i - last_fit) * series.step >= 3600):
            history = known.since(known.end - (keep - 1) * series.step)
            fitted = _fit(make, history, steps=steps, quantile=quantile, failed=failed)
            model = fitted or model
            last_fit = i
            if fitted is not None:
                end = min(len(series), i + refit_points) - 1
                i = yield from _batches(
                    fitted, series, first=i, last=end, steps=steps, quantile=quantile
                )
                continue
        forecast = model.forecast(known, steps=steps, quantile=quantile) if model else None
        yield Origin(index=i, forecast=forecast, model=model)
        i += 1


def _batches(
    model: CalibratedModel, series: Series, *, first: int, last: int, steps: int, quantile: float
) -> Generator[Origin, None, int]:
    """The origins from `first` (the model's fit) to `last`, in one-pass batches of growing
    length (each recomputed from the fit, as the pass needs); returns the next origin index to
    walk, `first` when the model cannot forecast in one pass (the caller loops instead)."""
    done, size = first, FIRST_PASS
    while done <= last:
        end = min(last, first + size - 1)
        made = manyorigin.walked(
            model,
            Series(series.start, series.step, series.values[: end + 1]),
            first=first,
            steps=steps,
            quantile=quantile,
        )
        if made is None:
            return done
        for k in range(done - first, end - first + 1):
            yield Origin(index=first + k, forecast=made[k].forecast, model=model, band=made[k].band)
        done, size = end + 1, size * 2
    return done


class _Failures:
    """The walk's failed fits since its last model: the first is logged with its reason, the
    rest (a retry every hour while history is too short: 23 more on a fresh series) are counted
    and summed up in one line when a fit succeeds, so a backtest's log stays readable."""

    def __init__(self) -> None:
        self.count = 0
        self.since = 0.0

    def failed(self, at: float, exc: ModelError) -> None:
        if self.count == 0:
            self.since = at
            logger.info("no model at %s: %s (retried every hour)", _when(at), exc)
        else:
            logger.debug("no model at %s: %s", _when(at), exc)
        self.count += 1

    def fitted(self, at: float) -> None:
        if self.count > 1:
            logger.info(
                "first model at %s, after %d fits that failed from %s",
                _when(at),
                self.count,
                _when(self.since),
            )
        self.count = 0


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fit(
    make: Callable[[], Forecaster] | str,
    history: Series,
    *,
    steps: int,
    quantile: float,
    failed: _Failures,
) -> CalibratedModel | None:
    try:
        if isinstance(make, str):
            fitted = select.fit_kind(make, history, steps=steps, quantile=quantile)
        else:
            fitted = fit_calibrated(make, history, steps=steps, quantile=quantile)
    except ModelError as exc:
        failed.failed(history.end, exc)
        return None
    failed.fitted(history.end)
    return fitted
