"""Conformal calibration: turn any point forecaster into a calibrated quantile forecaster.

The upper quantile is not assumed from a model's own interval: it is the empirical quantile of
the forecaster's relative residuals, per horizon step, measured on a rolling backtest over a
recent window the model was not fitted on (split conformal; the table, its backtest and the
residual scale are models.conformal's). So the realised coverage follows the nominal quantile
whatever model is underneath.

Owns the unit the engine keeps (`CalibratedModel`: a fitted forecaster, its table, its
artefact's envelope), fitting one (`fit_calibrated`), and the tables it uses after the fit: one
re-measured each day on its own out-of-sample forecasts, widened or narrowed by adaptive conformal
inference (models.adaptive). Grading (models.grading) and fingerprints (models.fingerprint) are
their own modules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from models import adaptive
from models.base import (
    DAY,
    WEEK,
    FitError,
    FloatArray,
    Forecast,
    Forecaster,
    Series,
    observed_span,
    prepared,
    season_for,
)
from models.conformal import (
    Backtest,
    Calibration,
    calibration_window,
    floor_of,
    measured,
    rolling,
    table_from,
)
from models.fingerprint import model_fingerprint
from models.grading import origin_losses, scores

RECALIBRATE_EVERY = DAY
"""How often a model's table is re-measured on its own forecasts since its fit."""
RECALIBRATION_WINDOW = WEEK
"""The newest out-of-sample forecasts a re-measured table is made of."""
MIN_ORIGINS = 20
"""Fewest graded forecasts a re-measured table needs (a 95% quantile needs 19)."""
ARTEFACT_FORMAT = 3
"""Bumped whenever an artefact of the previous format would predict differently when loaded."""
CONTEXT = WEEK + DAY
"""History before the fit that the adaptive tracker's forecasts see (a weekly season and the
level window of every model): anchored to the fit, so it does not move with the newest sample."""


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
    floor = floor_of(history)
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
