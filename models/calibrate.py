"""Conformal calibration: turn any point forecaster into a calibrated quantile forecaster.

The upper quantile is not assumed from a model's own interval: it is the empirical quantile of
the forecaster's relative residuals, per horizon step, measured on a rolling backtest over a
recent window the model was not fitted on (split conformal). So the realised coverage follows the
nominal quantile whatever model is underneath.

Residuals are scaled by the point forecast (floored at a fraction of the mean load), because
load noise grows with load: absolute residuals would make the band too wide at night and too
narrow at the peak, exactly where prewarming matters. The scale is max(p50, floor) ** power x
mean ** (1 - power) with `power` 1 for every fit: purely relative. Measuring the power on the
calibration backtest (normalized conformal: counting noise grows as the square root of the
level) was an experiment, off by default, removed after c21b1a4 (docs/forecasting.md "The
band's level power" keeps its figures); an artefact's `power` is still read as written.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from models import adaptive, origins
from models.base import (
    DAY,
    HOUR,
    WEEK,
    ArtefactError,
    FitError,
    FloatArray,
    Forecast,
    Forecaster,
    Series,
    observed_span,
    prepared,
    season_for,
)

RECALIBRATE_EVERY = DAY
"""How often a model's table is re-measured on its own forecasts since its fit."""
RECALIBRATION_WINDOW = WEEK
"""The newest out-of-sample forecasts a re-measured table is made of."""
MIN_ORIGINS = 20
"""Fewest graded forecasts a re-measured table needs (a 95% quantile needs 19)."""
LEVELS: FloatArray = np.round(np.arange(0.50, 0.995, 0.01), 2)
"""Quantile levels kept in the calibration table (0.50 .. 0.99)."""
FLOOR_FRACTION = 0.1
"""Residual scale floor, as a fraction of the mean load: keeps near-zero forecasts sane."""
ARTEFACT_FORMAT = 3
"""Bumped whenever an artefact of the previous format would predict differently when loaded."""
CONTEXT = WEEK + DAY
"""History before the fit that the adaptive tracker's forecasts see (a weekly season and the
level window of every model): anchored to the fit, so it does not move with the newest sample."""


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
    return backtest.relative(_floor(history))


def pinball(actual: FloatArray, upper: FloatArray, quantile: float) -> float:
    """Mean pinball (quantile) loss of `upper` at `quantile`, over the finite actuals."""
    ok = np.isfinite(actual) & np.isfinite(upper)
    if not ok.any():
        return float("nan")
    return float(pinball_terms(actual[ok] - upper[ok], quantile).mean())


def pinball_terms(diff: FloatArray, quantile: float) -> FloatArray:
    """Pinball loss of each `diff` = actual - forecast at `quantile` (NaN stays NaN)."""
    out: FloatArray = np.maximum(quantile * diff, (quantile - 1) * diff)
    return out


def scores(backtest: Backtest, *, floor: float, quantile: float) -> dict[str, float]:
    """Out-of-sample scores of the calibrated quantile: each half of the origins is scored with
    the table measured on the other half (cross-fitted), so no origin grades its own table."""
    if backtest.origins < 4:
        return {}
    actual, upper = _cross_fitted(backtest, floor=floor, quantile=quantile)
    a, u = actual.ravel(), upper.ravel()
    ok = np.isfinite(a)
    p50, seen = backtest.p50.ravel(), backtest.actual.ravel()
    ok50 = np.isfinite(seen)
    return {
        "pinball": pinball(a, u, quantile),
        "coverage": float((a[ok] <= u[ok] + 1e-9).mean()) if ok.any() else float("nan"),
        "wape": float(
            np.abs(seen[ok50] - p50[ok50]).sum() / max(float(np.abs(seen[ok50]).sum()), 1e-12)
        ),
        "origins": float(backtest.origins),
    }


def origin_losses(backtest: Backtest, *, floor: float, quantile: float) -> FloatArray:
    """Cross-fitted pinball loss of each origin's forecast (mean over its steps; NaN when none
    was graded), in origin order: what model selection compares pair by pair."""
    if backtest.origins < 4:
        return np.full(backtest.origins, np.nan)
    actual, upper = _cross_fitted(backtest, floor=floor, quantile=quantile)
    loss = pinball_terms(actual - upper, quantile)
    graded = np.isfinite(loss).sum(axis=1)
    total = np.nansum(loss, axis=1)
    out: FloatArray = np.where(graded > 0, total / np.maximum(graded, 1), np.nan)
    return out


def origin_peak_losses(backtest: Backtest, *, floor: float, quantile: float) -> FloatArray:
    """Cross-fitted pinball loss of each origin's *peak*: the highest actual over its steps
    against the highest calibrated upper over the same steps (NaN when no step was graded), in
    origin order. The decision buys replicas for the peak of the band over the look-ahead
    (scaler.decision.policy), so this is the loss of what it buys: a forecast that follows
    the curve but smooths a short recurring spike away (a nightly job) loses here, however
    well it scores point by point."""
    if backtest.origins < 4:
        return np.full(backtest.origins, np.nan)
    actual, upper = _cross_fitted(backtest, floor=floor, quantile=quantile)
    graded = np.isfinite(actual)
    has = graded.any(axis=1)
    rows = np.flatnonzero(has)
    diff = np.full(backtest.origins, np.nan)
    mask = graded[rows]
    diff[rows] = np.max(np.where(mask, actual[rows], -np.inf), axis=1) - np.max(
        np.where(mask, upper[rows], -np.inf), axis=1
    )
    return pinball_terms(diff, quantile)


def _cross_fitted(
    backtest: Backtest, *, floor: float, quantile: float
) -> tuple[FloatArray, FloatArray]:
    """(actual, calibrated upper) per origin, each half calibrated on the other half."""
    n = backtest.origins
    halves = (slice(0, n // 2), slice(n // 2, n))
    upper = np.empty_like(backtest.p50)
    for fit_on, score_on in (halves, halves[::-1]):
        table = measured(backtest.part(fit_on), floor=floor, samples=n)
        p50 = backtest.p50[score_on]
        offsets = table.offsets(p50.shape[1], quantile)
        upper[score_on] = np.maximum(p50 + offsets * table.scale(p50), np.maximum(p50, 0.0))
    return backtest.actual, upper


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
    quantile: float = 0.95
    """The quantile the adaptive widening tracks (the target's, at fit time)."""
    aci: bool = field(default=True, compare=False)
    """Track misses since the fit and widen or narrow the band (models.adaptive); False keeps
    the measured tables as they are (the ablation)."""
    losses: FloatArray | None = field(default=None, repr=False, compare=False)
    """Per-origin cross-fitted pinball losses on the calibration window (not in the artefact:
    only model selection, right after fitting, compares them)."""
    backtest: Backtest | None = field(default=None, repr=False, compare=False)
    """The calibration backtest itself (not in the artefact: model selection combines the
    candidates' backtests into the ensemble's, right after fitting)."""
    _recalibrated: dict[tuple[float, int], Calibration] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _trackers: dict[int, adaptive.Tracker] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def kind(self) -> str:
        return self.model.kind

    def forecast(self, recent: Series, *, steps: int, quantile: float) -> Forecast:
        p50 = self.model.predict(recent, steps)
        return Forecast(
            origin=recent.end + recent.step,
            step=recent.step,
            p50=p50,
            upper=self.calibration_for(recent, steps).upper(p50, quantile),
            quantile=quantile,
            raw_upper=self.model.interval(p50, quantile),
            measured_upper=self.measured_for(recent, steps).upper(p50, quantile),
        )

    def calibration_for(self, recent: Series, steps: int) -> Calibration:
        """The table a forecast from `recent` uses (`measured_for`), widened or narrowed by
        adaptive conformal inference on every forecast graded since the fit (models.adaptive):
        within hours of the load turning burstier, not at the next day's re-measure.

        A pure function of the artefact and `recent` from CONTEXT before the fit on: every
        replica computes the same widening; the tracker only saves the work."""
        table = self.measured_for(recent, steps)
        if not self.aci or recent.step != self.step or recent.end < self.trained_until:
            return table
        data = recent.since(self.trained_until - CONTEXT)
        first = int(np.ceil((self.trained_until - data.start) / data.step - 1e-9))
        widen = self.aci_tracker(steps).advance(data, first=first, band=self._band(steps))
        return replace(table, widen=widen)

    def aci_tracker(self, steps: int) -> adaptive.Tracker:
        """The adaptive tracker of forecasts `steps` long (one path length per target is ever
        asked for); models.manyorigin advances it many origins at once."""
        if steps not in self._trackers:
            self._trackers.clear()
            self._trackers[steps] = adaptive.Tracker(
                miss_target=1 - self.quantile,
                rate=adaptive.learning_rate(
                    miss_target=1 - self.quantile, window=round(RECALIBRATE_EVERY / self.step)
                ),
                steps=steps,
            )
        return self._trackers[steps]

    def _band(self, steps: int) -> adaptive.Band:
        def band(past: Series, widen: float) -> FloatArray:
            table = replace(self.measured_for(past, steps), widen=widen)
            return table.upper(self.model.predict(past, steps), self.quantile)

        return band

    def measured_for(self, recent: Series, steps: int) -> Calibration:
        """The measured table a forecast from `recent` uses: the fit-time table for the first
        day, then one re-measured each RECALIBRATE_EVERY on this model's own out-of-sample forecasts
        since its fit (the last RECALIBRATION_WINDOW of them), so a change in how noisy the
        load is shows up in the band within a day, not at the next weekly refit.

        A pure function of the artefact and `recent` up to the last whole day since the fit:
        every scaler replica computes the same table; the cache only saves the work.
        """
        days = math.floor((recent.end - self.trained_until) / RECALIBRATE_EVERY + 1e-9)
        if days < 1 or recent.step != self.step:
            return self.calibration
        boundary = self.trained_until + days * RECALIBRATE_EVERY
        key = (boundary, steps)
        if key not in self._recalibrated:
            self._recalibrated.clear()  # only the current day's table is ever asked for again
            self._recalibrated[key] = self._remeasured(recent.until(boundary), steps)
        return self._recalibrated[key]

    def _remeasured(self, known: Series, steps: int) -> Calibration:
        since = max(self.trained_until, known.end - RECALIBRATION_WINDOW)
        window = known.since(since - RECALIBRATION_WINDOW / 2)  # level/state context
        backtest = rolling(self.model, window, since=since, steps=steps)
        floor, power = self.calibration.floor, self.calibration.power
        errors = backtest.relative(floor, power)
        if np.isfinite(errors[:, -1:]).sum() < MIN_ORIGINS:
            return self.calibration
        table = table_from(errors)
        return Calibration(table=table, floor=floor, samples=backtest.origins, power=power)

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
            "quantile": self.quantile,
            "scores": {k: v for k, v in self.scores.items() if np.isfinite(v)},
        }


def fit_calibrated(
    make: Callable[[], Forecaster], history: Series, *, steps: int, quantile: float = 0.95
) -> CalibratedModel:
    """Fit on all but the calibration window, backtest on it (rolling origin), then refit on
    everything. The table comes from that backtest; `scores` grade it out of sample."""
    history = prepared(history)
    season_for(observed_span(history))  # under a day: FitError saying the scaler stays reactive
    hold_out = calibration_window(observed_span(history))
    split = history.end - hold_out
    probe = make()
    try:
        probe.fit(history.until(split))
    except FitError:
        probe.fit(history)  # too short to hold out: calibrate in-sample (scores say "insample")
        in_sample = True
    else:
        in_sample = False
    backtest = rolling(probe, history, since=split, steps=steps)
    final = make()
    warm_from = getattr(final, "warm_from", None)  # models.prophet: start from the probe's fit
    if warm_from is not None:
        warm_from(probe)
    final.fit(history)
    return calibrated(final, history, backtest, quantile=quantile, in_sample=in_sample)


def calibrated(
    final: Forecaster, history: Series, backtest: Backtest, *, quantile: float, in_sample: bool
) -> CalibratedModel:
    """`final` (fitted on `history`) with the table and scores of its calibration `backtest`:
    the last half of fit_calibrated, also what combines fitted models without refitting them."""
    history = prepared(history)
    floor = _floor(history)
    graded = scores(backtest, floor=floor, quantile=quantile)
    if graded:
        graded["in_sample"] = float(in_sample)
    calibration = measured(backtest, floor=floor, samples=backtest.origins)
    return CalibratedModel(
        model=final,
        calibration=calibration,
        trained_from=history.start,
        trained_until=history.end,
        step=history.step,
        fingerprint=model_fingerprint(final, calibration, history=history, quantile=quantile),
        scores=graded,
        quantile=quantile,
        losses=origin_losses(backtest, floor=floor, quantile=quantile),
        backtest=backtest,
    )


def model_fingerprint(
    model: Forecaster, calibration: Calibration, *, history: Series, quantile: float
) -> str:
    """16 hex digits identifying a fitted model (its artefact's `fingerprint`, the decision
    log's `model_version`): its kind, its fitted parameters and calibration table (so the
    forecast steps and settings such as Prophet's holidays they came from), the quantile it
    tracks, and the exact training data. Two kinds fitted on the same data differ (the quick
    seasonal fit and the `auto` pick that replaces it used to share one version, the data's),
    and so does one kind refitted on other data or settings; replicas fitting the same kind
    on the same data agree. Artefacts stored before keep the version they were stored with."""
    digest = hashlib.sha256()
    digest.update(data_fingerprint(history).encode())
    fitted = {
        "kind": model.kind,
        "params": model.to_dict(),
        "calibration": calibration.to_dict(),
        "quantile": quantile,
    }
    # repr: a value json cannot write (a numpy integer) is still hashed, never refused here.
    digest.update(json.dumps(fitted, sort_keys=True, default=repr).encode())
    return digest.hexdigest()[:16]


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
