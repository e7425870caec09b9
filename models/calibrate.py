"""Conformal calibration: turn any point forecaster into a calibrated quantile forecaster.

The upper quantile is not assumed from a model's own interval: it is the empirical quantile of
the forecaster's relative residuals, per horizon step, measured on a rolling backtest over a
recent window the model was not fitted on (split conformal). So the realised coverage follows the
nominal quantile whatever model is underneath.

Residuals are relative to the point forecast (floored at a fraction of the mean load), because
load noise grows with load: absolute residuals would make the band too wide at night and too
narrow at the peak, exactly where prewarming matters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from models.base import (
    HOUR,
    WEEK,
    ArtefactError,
    FitError,
    FloatArray,
    Forecast,
    Forecaster,
    Series,
)

LEVELS: FloatArray = np.round(np.arange(0.50, 0.995, 0.01), 2)
"""Quantile levels kept in the calibration table (0.50 .. 0.99)."""
FLOOR_FRACTION = 0.1
"""Residual scale floor, as a fraction of the mean load: keeps near-zero forecasts sane."""
ARTEFACT_FORMAT = 1


@dataclass(frozen=True)
class Calibration:
    """Relative residual quantiles: `table[i, j]` is the LEVELS[j] quantile at step i + 1."""

    table: FloatArray = field(repr=False)
    floor: float
    samples: int
    """How many backtest origins the table was measured on."""

    def scale(self, p50: FloatArray) -> FloatArray:
        return np.maximum(p50, self.floor)

    def offsets(self, steps: int, quantile: float) -> FloatArray:
        """Relative offset at `quantile` for steps 1..steps (last row repeats past the table)."""
        rows = np.minimum(np.arange(steps), self.table.shape[0] - 1)
        column = np.array(
            [np.interp(quantile, LEVELS, self.table[r]) for r in range(self.table.shape[0])]
        )
        out: FloatArray = column[rows]
        return out

    def upper(self, p50: FloatArray, quantile: float) -> FloatArray:
        return np.maximum(p50 + self.offsets(p50.size, quantile) * self.scale(p50), 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "levels": [float(v) for v in LEVELS],
            "table": [[float(v) for v in row] for row in self.table],
            "floor": self.floor,
            "samples": self.samples,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        try:
            table = np.asarray(data["table"], dtype=np.float64)
            levels = np.asarray(data["levels"], dtype=np.float64)
            floor = float(data["floor"])
            samples = int(data["samples"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtefactError(f"calibration table is malformed: {exc!r}") from exc
        if table.ndim != 2 or table.shape[1] != LEVELS.size or not np.allclose(levels, LEVELS):
            raise ArtefactError("calibration table has other quantile levels than this version")
        return cls(table=table, floor=floor, samples=samples)


def residuals(
    model: Forecaster, history: Series, *, since: float, steps: int, stride: int = 1
) -> FloatArray:
    """Relative residuals (actual - p50) / scale of forecasts made at origins >= since.

    Row k holds the errors of the forecast made at the k-th origin, steps 1..steps; NaN where the
    actual is missing. Each origin only sees history up to itself.
    """
    floor = _floor(history)
    first = max(1, int(np.ceil((since - history.start) / history.step)))
    rows = []
    for i in range(first, len(history) - 1, stride):
        past = Series(history.start, history.step, history.values[: i + 1])
        actual = history.values[i + 1 : i + 1 + steps]
        pred = model.predict(past, steps)[: actual.size]
        row = np.full(steps, np.nan)
        row[: actual.size] = (actual - pred) / np.maximum(pred, floor)
        rows.append(row)
    return np.array(rows).reshape(len(rows), steps)


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


@dataclass
class CalibratedModel:
    """A fitted point forecaster plus its calibration table: the unit the engine keeps."""

    model: Forecaster
    calibration: Calibration
    trained_from: float
    trained_until: float
    step: float
    fingerprint: str
    scores: dict[str, float] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.model.kind

    def forecast(self, recent: Series, *, steps: int, quantile: float) -> Forecast:
        p50 = self.model.predict(recent, steps)
        return Forecast(
            origin=recent.end + recent.step,
            step=recent.step,
            p50=p50,
            upper=self.calibration.upper(p50, quantile),
            quantile=quantile,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": ARTEFACT_FORMAT,
            "kind": self.kind,
            "trained_from": self.trained_from,
            "trained_until": self.trained_until,
            "step": self.step,
            "fingerprint": self.fingerprint,
            "params": self.model.to_dict(),
            "calibration": self.calibration.to_dict(),
            "scores": self.scores,
        }


def fit_calibrated(
    make: Callable[[], Forecaster], history: Series, *, steps: int
) -> CalibratedModel:
    """Fit on all but the calibration window, measure residuals on it, then refit on everything."""
    if history.observed < 2:
        raise FitError("history has fewer than two observed values")
    hold_out = calibration_window(history.span)
    split = history.end - hold_out
    early = history.until(split)
    probe = make()
    try:
        probe.fit(early)
        since = split
    except FitError:
        probe.fit(history)  # too short to hold out: calibrate in-sample, and say so in samples
        since = history.end - hold_out
    errors = residuals(probe, history, since=since, steps=steps)
    final = make()
    final.fit(history)
    return CalibratedModel(
        model=final,
        calibration=Calibration(
            table=table_from(errors), floor=_floor(history), samples=errors.shape[0]
        ),
        trained_from=history.start,
        trained_until=history.end,
        step=history.step,
        fingerprint=data_fingerprint(history),
    )


def data_fingerprint(history: Series) -> str:
    """16 hex digits identifying the exact training data (start, step and values)."""
    digest = hashlib.sha256()
    digest.update(np.array([history.start, history.step]).tobytes())
    digest.update(np.nan_to_num(history.values, nan=-1.0).tobytes())
    return digest.hexdigest()[:16]


def _floor(history: Series) -> float:
    observed = history.values[~np.isnan(history.values)]
    mean = float(np.abs(observed).mean()) if observed.size else 0.0
    return max(mean * FLOOR_FRACTION, 1e-6)
