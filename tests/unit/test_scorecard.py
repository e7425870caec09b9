"""scaler.serving.scorecard: each actual meets the forecast made each horizon before it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.base import Forecast, Series
from scaler.decision import drift, drift_tracker
from scaler.serving.scorecard import Score, Scorecard, horizons

STEP = 300.0


def forecast(origin: float, points: int, level: float) -> Forecast:
    """A flat forecast whose median is `level` plus the point index (so the point is known)."""
    p50 = level + np.arange(points, dtype=np.float64)
    return Forecast(origin=origin, step=STEP, p50=p50, upper=p50 + 5.0, quantile=0.9)


def test_each_actual_is_scored_once_per_horizon_against_the_forecast_made_that_far_ahead() -> None:
    card = Scorecard(lead_time=600.0, quantile=0.9)
    for k in range(12):  # a forecast after each observation k * STEP, first point one step later
        card.record(forecast((k + 1) * STEP, points=12, level=100.0 * k))
    actuals = Series(0.0, STEP, np.full(13, 50.0))
    scores = card.score(actuals)
    at_lead = [s for s in scores if s.horizon == 600.0]
    # The actual at t = 12 * STEP met the forecast made at origin 11 * STEP (index 1, k = 10).
    assert at_lead[-1] == Score(600.0, 50.0, 1000.0 + 1, 1000.0 + 6)
    assert {s.horizon for s in scores} <= set(horizons(600.0, STEP, 12).values())
    assert card.score(actuals) == []  # nothing new: nothing scored twice


def test_the_lead_time_score_pairs_like_the_drift_tracker() -> None:
    card = Scorecard(lead_time=900.0, quantile=0.9)
    tracker = drift_tracker.DriftTracker(lead_time=900.0, monitor=drift.DriftMonitor(step=STEP))
    rng = np.random.default_rng(7)
    for k in range(20):
        f = forecast((k + 1) * STEP, points=8, level=float(rng.uniform(10, 90)))
        card.record(f)
        tracker.record(f)
    series = Series(0.0, STEP, rng.uniform(10, 90, size=21))
    ours = {s.actual: (s.p50, s.upper) for s in card.score(series) if s.horizon == 900.0}
    for at, actual in zip(series.times(), series.values, strict=True):
        theirs = tracker._forecast_for(float(at), STEP)
        if theirs is not None:
            assert ours[float(actual)] == pytest.approx(theirs)


def test_pinball_loss_weighs_a_miss_above_by_the_quantile_and_below_by_its_complement() -> None:
    assert Score(600.0, actual=110.0, p50=90.0, upper=100.0).pinball(0.9) == pytest.approx(9.0)
    assert Score(600.0, actual=90.0, p50=80.0, upper=100.0).pinball(0.9) == pytest.approx(1.0)
    assert math.isnan(Scorecard(lead_time=600.0, quantile=0.9).pinball())


def test_forecasts_are_dropped_once_every_point_has_met_its_actual() -> None:
    card = Scorecard(lead_time=600.0, quantile=0.9)
    card.record(forecast(STEP, points=3, level=1.0))
    card.score(Series(0.0, STEP, np.ones(3)))
    assert card.pending
    card.score(Series(0.0, STEP, np.ones(4)))
    assert not card.pending
