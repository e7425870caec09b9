"""Calibrated forecasts at many consecutive origins in one pass: what a drift-state replay
since a model's fit asks for (scaler/serving/driftstate.py), 2,016 origins for a week-old model,
and what a walk forward makes between two refits (models/walkforward.py, `walked`).

`forecasts` returns, origin by origin, exactly the Forecast `CalibratedModel.forecast` makes
from the newest `keep` points known at that origin, and leaves the model's adaptive tracker
(models.adaptive) where those forecasts one at a time would have left it, so the next live
forecast costs one step. Bit for bit, not approximately: the live engine makes the same
forecasts one per step, and a replica that rebuilt its state from these must hold the same
state (DESIGN.md: replicas agree). The pieces:
- the point forecasts of every origin at once (models.origins, the model's `predict_at`);
- the measured table of each day since the fit, one `measured_for` per day (the model's cache);
- the widening, the one sequential part: a loop over scalars, the same arithmetic as
  `adaptive.Tracker` (update, grading), then the bands of every origin as arrays.

None when the shortcut does not hold (a model without `predict_at`, another step, a window
that does not reach back to the tracker's context): the caller loops over `forecast`.

Pure: numpy and models only.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np

from models import adaptive, origins
from models.base import FloatArray, Forecast, Series
from models.calibrate import CONTEXT, RECALIBRATE_EVERY, CalibratedModel
from models.conformal import LEVELS, Calibration

IntArray = origins.IntArray


@dataclass(frozen=True)
class Made:
    """One origin's forecast and the calibrated table in force for it: what
    `model.forecast(recent, ...)` and `model.calibration_for(recent, steps)` return there."""

    forecast: Forecast
    band: Calibration


def forecasts(
    model: CalibratedModel,
    history: Series,
    *,
    first: int,
    steps: int,
    quantile: float,
    keep: int,
) -> list[Forecast] | None:
    """`model.forecast(recent_i, steps=steps, quantile=quantile)` for every origin index i from
    `first` to the end of `history`, recent_i its newest `keep` points up to i; None when the
    shortcut does not apply (see the module docstring). The raw (uncalibrated) bound is drawn
    only for the forecasts a tracker may still hold at the end, as the live engine reads it."""
    made = _made(
        model, history, first=first, steps=steps, quantile=quantile, keep=keep, every_raw=False
    )
    return None if made is None else [m.forecast for m in made]


def walked(
    model: CalibratedModel, history: Series, *, first: int, steps: int, quantile: float
) -> list[Made] | None:
    """What a walk forward (models.walkforward) makes at every origin index from `first` (the
    model's fit) to the end of `history`, each forecast from the whole prefix up to it: the
    forecast with its raw bound, and `model.calibration_for` there (the band the replay reads
    at other quantiles); None when the shortcut does not apply."""
    return _made(
        model,
        history,
        first=first,
        steps=steps,
        quantile=quantile,
        keep=len(history),
        every_raw=True,
    )


def _made(
    model: CalibratedModel,
    history: Series,
    *,
    first: int,
    steps: int,
    quantile: float,
    keep: int,
    every_raw: bool,
) -> list[Made] | None:
    step = history.step
    last = len(history) - 1
    if (
        first > last
        or first < 0
        or step != model.step
        or not isinstance(model.model, origins.ManyOrigins)
        or first != int(np.ceil((model.trained_until - history.start) / step - 1e-9))
    ):
        return None
    context = int(np.ceil((model.trained_until - CONTEXT - history.start) / step - 1e-9))
    oldest = max(0, last - keep + 1)
    if context < oldest and oldest > 0:  # the ACI window would slide with the origin
        return None
    context = max(context, 0)  # a fit less than CONTEXT into the series sees all of it
    ends = np.arange(first, last + 1, dtype=np.int64)
    p50 = origins.predict_at(model.model, history, ends, steps)
    tables = _tables(model, history, ends=ends, steps=steps, keep=keep)
    widen = np.zeros(ends.size)
    if model.aci:
        graded = _tracker_p50(model, history, ends=ends, p50=p50, context=context)
        widen = _widen(model, history, ends=ends, p50=graded, tables=tables, context=context)
    measured = np.empty_like(p50)
    upper = np.empty_like(p50)
    for table, rows in _by_table(tables):
        measured[rows] = _upper(table, p50[rows], np.zeros(rows.size), quantile)
        upper[rows] = _upper(table, p50[rows], widen[rows], quantile)
    pending = max(steps, 1) + 1  # forecasts a tracker may still hold at the end
    raw_from = 0 if every_raw else ends.size - pending
    out = []
    for k, i in enumerate(ends.tolist()):
        raw = model.model.interval(p50[k], quantile) if k >= raw_from else None
        forecast = Forecast(
            origin=history.start + i * step + step,
            step=step,
            p50=p50[k],
            upper=upper[k],
            quantile=quantile,
            raw_upper=raw,
            measured_upper=measured[k],
        )
        band = replace(tables[k], widen=float(widen[k])) if model.aci else tables[k]
        out.append(Made(forecast, band))
    return out


def _tracker_p50(
    model: CalibratedModel, history: Series, *, ends: IntArray, p50: FloatArray, context: int
) -> FloatArray:
    """The point forecasts the adaptive tracker grades: made from the history since `context`
    (CONTEXT before the fit, CalibratedModel.calibration_for), which are `p50` (made from the
    whole prefix) unless the model reads further back than CONTEXT (its `reach`, seconds;
    the seasonal-naive reference's four seasons)."""
    if context <= 0 or float(getattr(model.model, "reach", 0.0)) <= CONTEXT:
        return p50
    step = history.step
    view = Series(history.start + context * step, step, history.values[context:])
    return origins.predict_at(model.model, view, ends - context, p50.shape[1])


def _tables(
    model: CalibratedModel, history: Series, *, ends: IntArray, steps: int, keep: int
) -> list[Calibration]:
    """The measured table of each origin, asked of the model once per day since its fit, in
    day order (its cache keeps the newest, as the live engine leaves it)."""
    step = history.step
    times = history.start + ends * step
    days = np.floor((times - model.trained_until) / RECALIBRATE_EVERY + 1e-9).astype(np.int64)
    out: list[Calibration] = []
    table: Calibration | None = None
    for k, day in enumerate(days.tolist()):
        if k == 0 or day != days[k - 1]:
            i = int(ends[k])
            begin = max(0, i - keep + 1)
            recent = Series(history.start + begin * step, step, history.values[begin : i + 1])
            table = model.measured_for(recent, steps)
        assert table is not None
        out.append(table)
    return out


def _by_table(tables: list[Calibration]) -> list[tuple[Calibration, IntArray]]:
    """Runs of origins sharing one table, with their row indices."""
    runs: list[tuple[Calibration, IntArray]] = []
    start = 0
    for k in range(1, len(tables) + 1):
        if k == len(tables) or tables[k] is not tables[start]:
            runs.append((tables[start], np.arange(start, k, dtype=np.int64)))
            start = k
    return runs


def _upper(table: Calibration, p50: FloatArray, widen: FloatArray, quantile: float) -> FloatArray:
    """`replace(table, widen=w).upper(p50 row, quantile)` for each row and its w, as arrays:
    the same operations in the same order as Calibration.offsets and .upper."""
    steps = p50.shape[1]
    rows = np.minimum(np.arange(steps), table.table.shape[0] - 1)
    column, median = _columns(table, quantile)
    spread = column - median
    offsets = (median[None, :] + spread[None, :] * (1 + widen)[:, None])[:, rows]
    out: FloatArray = np.maximum(p50 + offsets * table.scale(p50), np.maximum(p50, 0.0))
    return out


def _columns(table: Calibration, quantile: float) -> tuple[FloatArray, FloatArray]:
    """The table's column at `quantile` (interpolated between two levels) and its median."""
    q = float(np.clip(quantile, LEVELS[0], LEVELS[-1]))
    j = int(np.clip(np.searchsorted(LEVELS, q), 1, LEVELS.size - 1))
    w = (q - LEVELS[j - 1]) / (LEVELS[j] - LEVELS[j - 1])
    column: FloatArray = table.table[:, j - 1] * (1 - w) + table.table[:, j] * w
    return column, table.table[:, 0]


def _widen(
    model: CalibratedModel,
    history: Series,
    *,
    ends: IntArray,
    p50: FloatArray,
    tables: list[Calibration],
    context: int,
) -> FloatArray:
    """The widening in force at each origin (after grading its own actual), replaying
    adaptive.Tracker.advance over the data from `context` on; leaves the model's tracker as
    the live forecasts one by one would have."""
    steps = p50.shape[1]
    tracker = model.aci_tracker(steps)
    miss_target, rate, top = (
        tracker.miss_target,
        tracker.rate,
        adaptive.ceiling(tracker.miss_target),
    )
    # Each band point is read once, when its actual is graded: drawn then, from arrays made
    # up front (Calibration.offsets and .upper's operations, in their order, on scalars).
    median, spread = np.empty_like(p50), np.empty_like(p50)
    for table, rows in _by_table(tables):
        column, mid = _columns(table, model.quantile)
        index = np.minimum(np.arange(steps), table.table.shape[0] - 1)
        median[rows], spread[rows] = mid[index], (column - mid)[index]
    scales = np.empty_like(p50)
    for table, rows in _by_table(tables):
        scales[rows] = table.scale(p50[rows])
    p_l, m_l, s_l = p50.tolist(), median.tolist(), spread.tolist()
    scale_l, zero_l = scales.tolist(), np.maximum(p50, 0.0).tolist()
    actuals = history.values[ends].tolist()
    factors: list[float] = []
    widen = np.empty(ends.size)
    w = 0.0
    for k, actual in enumerate(actuals):
        if math.isfinite(actual):  # adaptive.Tracker._grade
            misses = hits = 0
            for j in range(max(0, k - steps), k):
                s = k - j - 1  # the band of origin j, k - j steps on
                band = p_l[j][s] + (m_l[j][s] + s_l[j][s] * factors[j]) * scale_l[j][s]
                misses += actual > max(band, zero_l[j][s]) + 1e-9
                hits += 1
            if hits:
                moved = w + rate * (misses / hits - miss_target)
                w = float(min(max(moved, -1.0), top)) if math.isfinite(moved) else w
        widen[k] = w
        factors.append(1 + w)
    _install(
        tracker,
        history,
        ends=ends,
        p50=p50,
        tables=tables,
        widen=widen,
        context=context,
        quantile=model.quantile,
    )
    return widen


def _install(
    tracker: adaptive.Tracker,
    history: Series,
    *,
    ends: IntArray,
    p50: FloatArray,
    tables: list[Calibration],
    widen: FloatArray,
    context: int,
    quantile: float,
) -> None:
    """Leave `tracker` as advancing it origin by origin would have: the data seen, the last
    widening, and the bands not yet fully graded (computed as Calibration.upper computes them)."""
    steps = p50.shape[1]
    last = ends.size - 1
    rows: deque[tuple[int, FloatArray]] = deque()
    for k in range(max(0, last - steps), last + 1):
        table = replace(tables[k], widen=float(widen[k]))
        band = table.upper(p50[k], quantile)
        rows.append((int(ends[k]) - context, band))
    tracker.start = history.start + context * history.step
    tracker.seen = history.values[context : int(ends[last]) + 1]
    tracker.widen = float(widen[last])
    tracker.rows = rows
