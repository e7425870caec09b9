"""Split-conformal tables: the empirical quantiles of a forecaster's relative residuals, per
horizon step, measured on a rolling-origin backtest over a window the model was not fitted on.
So the realised coverage follows the nominal quantile whatever model is underneath.

Residuals are scaled by the point forecast (floored at a fraction of the mean load), because
load noise grows with load: absolute residuals would make the band too wide at night and too
narrow at the peak, exactly where prewarming matters. The scale is max(p50, floor) ** power x
mean ** (1 - power) with `power` 1 for every fit: purely relative. Measuring the power on the
calibration backtest (normalized conformal: counting noise grows as the square root of the
level) was an experiment, off by default, removed after c21b1a4 (docs/forecasting.md "The
band's level power" keeps its figures); an artefact's `power` is still read as written.

Owns the table (`Calibration`, its JSON form inside a model's artefact), the backtest it is
measured on, and the residual scale. Fitting, re-measuring after the fit and the artefact's
envelope are models.calibrate's; grading a table out of sample is models.grading's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models import origins
from models.base import HOUR, WEEK, ArtefactError, FloatArray, Forecaster, Series

LEVELS: FloatArray = np.round(np.arange(0.50, 0.995, 0.01), 2)
"""Quantile levels kept in the calibration table (0.50 .. 0.99)."""
FLOOR_FRACTION = 0.1
"""Residual scale floor, as a fraction of the mean load: keeps near-zero forecasts sane."""


@dataclass(frozen=True)
class Calibration:
    """Relative residual quantiles: `table[i, j]` is the LEVELS[j] quantile at step i + 1."""

    table: FloatArray = field(repr=False)
    floor: float
    samples: int
    """How many backtest origins the table was measured on."""
    widen: float = 0.0
    """Adaptive widening of the spread above the median (models.adaptive); 0 = as measured.
    Not in the artefact: it is recomputed from the load seen since the fit."""
    power: float = 1.0
    """How the residual scale grows with the forecast; 1 = purely relative, what every fit
    measures since the level power's experiment was removed (an artefact's is read as written)."""

    def scale(self, p50: FloatArray) -> FloatArray:
        return scale_of(p50, floor=self.floor, power=self.power)

    def offsets(self, steps: int, quantile: float) -> FloatArray:
        """Relative offset at `quantile` for steps 1..steps (last row repeats past the table)."""
        rows = np.minimum(np.arange(steps), self.table.shape[0] - 1)
        q = float(np.clip(quantile, LEVELS[0], LEVELS[-1]))
        j = int(np.clip(np.searchsorted(LEVELS, q), 1, LEVELS.size - 1))
        w = (q - LEVELS[j - 1]) / (LEVELS[j] - LEVELS[j - 1])  # linear between two levels
        column = self.table[:, j - 1] * (1 - w) + self.table[:, j] * w
        median = self.table[:, 0]
        out: FloatArray = (median + (column - median) * (1 + self.widen))[rows]
        return out

    def upper(self, p50: FloatArray, quantile: float) -> FloatArray:
        """p50 + the residual quantile, never below p50 (nor 0): a model that ran high on the
        calibration window keeps its median as the bound rather than promise less."""
        out: FloatArray = np.maximum(
            p50 + self.offsets(p50.size, quantile) * self.scale(p50), np.maximum(p50, 0.0)
        )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "levels": [float(v) for v in LEVELS],
            "table": [[float(v) for v in row] for row in self.table],
            "floor": self.floor,
            "samples": self.samples,
            "power": self.power,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        try:
            table = np.asarray(data["table"], dtype=np.float64)
            levels = np.asarray(data["levels"], dtype=np.float64)
            floor = float(data["floor"])
            samples = int(data["samples"])
            power = float(data.get("power", 1.0))  # artefacts before it: purely relative
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtefactError(f"calibration table is malformed: {exc!r}") from exc
        if table.ndim != 2 or table.shape[1] != LEVELS.size or not np.allclose(levels, LEVELS):
            raise ArtefactError("calibration table has other quantile levels than this version")
        if not 0.0 <= power <= 1.0:
            raise ArtefactError(f"calibration power {power} is outside [0, 1]; refit the model")
        return cls(table=table, floor=floor, samples=samples, power=power)


@dataclass(frozen=True)
class Backtest:
    """Rolling-origin forecasts: row k is the forecast made at the k-th origin, steps 1..steps
    (each origin sees history up to itself only); NaN where the actual is missing."""

    actual: FloatArray = field(repr=False)
    p50: FloatArray = field(repr=False)

    @property
    def origins(self) -> int:
        return int(self.actual.shape[0])

    def relative(self, floor: float, power: float = 1.0) -> FloatArray:
        """Residuals (actual - p50) / scale_of(p50): the unit the calibration table is in."""
        out: FloatArray = (self.actual - self.p50) / scale_of(self.p50, floor=floor, power=power)
        return out

    def part(self, rows: slice) -> Backtest:
        return Backtest(actual=self.actual[rows], p50=self.p50[rows])


def rolling(
    model: Forecaster, history: Series, *, since: float, steps: int, stride: int = 1
) -> Backtest:
    """Forecast from every origin at or after `since` (every `stride`-th) to the series' end."""
    first = max(1, int(np.ceil((since - history.start) / history.step - 1e-9)))
    actual, p50 = origins.rolling(model, history, first=first, steps=steps, stride=stride)
    return Backtest(actual=actual, p50=p50)


def residuals(
    model: Forecaster, history: Series, *, since: float, steps: int, stride: int = 1
) -> FloatArray:
    """Relative residuals (actual - p50) / scale of forecasts made at origins >= since.

    Row k holds the errors of the forecast made at the k-th origin, steps 1..steps; NaN where the
    actual is missing. Each origin only sees history up to itself.
    """
    backtest = rolling(model, history, since=since, steps=steps, stride=stride)
    return backtest.relative(floor_of(history))


def scale_of(p50: FloatArray, *, floor: float, power: float) -> FloatArray:
    """The residual scale of a forecast: max(p50, floor) ** power x mean ** (1 - power), the mean
    load being floor / FLOOR_FRACTION; power 1 is max(p50, floor) itself, exactly."""
    scale: FloatArray = np.maximum(p50, floor)
    if power == 1.0:
        return scale
    mean = floor / FLOOR_FRACTION
    out: FloatArray = mean * (scale / mean) ** power
    return out


def measured(backtest: Backtest, *, floor: float, samples: int) -> Calibration:
    """The table of a calibration backtest: its residuals relative to the forecast."""
    return Calibration(table=table_from(backtest.relative(floor)), floor=floor, samples=samples)


def table_from(errors: FloatArray) -> FloatArray:
    """Per-step quantiles of residuals at LEVELS (conformal, finite-sample corrected)."""
    steps = errors.shape[1]
    table = np.zeros((steps, LEVELS.size))
    for i in range(steps):
        col = errors[:, i]
        col = col[np.isfinite(col)]
        if col.size == 0:
            continue
        n = col.size
        levels = np.minimum(np.ceil((n + 1) * LEVELS) / n, 1.0)
        table[i] = np.quantile(col, levels, method="higher")
    return np.maximum.accumulate(table, axis=1)


def calibration_window(span: float) -> float:
    """Seconds of the newest history held out for calibration."""
    if span >= 3 * WEEK:
        return WEEK
    return max(span / 4, min(6 * HOUR, span / 2))


def floor_of(history: Series) -> float:
    """The residual scale's floor: FLOOR_FRACTION of the mean absolute load (1e-6 at least)."""
    observed = history.values[~np.isnan(history.values)]
    mean = float(np.abs(observed).mean()) if observed.size else 0.0
    return max(mean * FLOOR_FRACTION, 1e-6)
