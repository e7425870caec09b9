"""Forecast drift: the monitor's state machine, the tracker's alignment, and fallback on a
regime change in a replay."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from models.base import DAY, Forecast, Series
from scaler import drift, replay
from scaler.traces import read_trace

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
STEP = 300.0
START = 1_700_006_400.0  # a midnight UTC


def daily_cycle(days: float, *, change: tuple[float, float] | None = None, seed: int = 0) -> Series:
    """Poisson load around a daily sine (50..350 per step), x3 between change[0] and change[1]
    (in days from the start)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(days * DAY / STEP)) * STEP
    mean = 200 + 150 * np.sin(2 * np.pi * (t / DAY - 0.3))
    if change is not None:
        mean = np.where((t >= change[0] * DAY) & (t < change[1] * DAY), 3 * mean, mean)
    return Series(START, STEP, rng.poisson(mean).astype(float))


def fallback_spans(frame: object, origin: int) -> list[tuple[float, float]]:
    """(start, end) in hours from step `origin` of each run of drift_fallback decisions."""
    reasons = np.asarray(getattr(frame, "reason")) == "drift_fallback"  # noqa: B009
    edges = np.diff(np.concatenate([[0], reasons.astype(int), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    hours = STEP / 3600
    return [((a - origin) * hours, (b - origin) * hours) for a, b in zip(starts, ends, strict=True)]


def feed(monitor: drift.DriftMonitor, actuals: list[float], p50: float = 100.0) -> None:
    for i, actual in enumerate(actuals):
        monitor.observe(i * STEP, actual, p50, p50 * 1.2)


def test_an_accurate_forecast_practically_never_falls_back() -> None:
    rng = np.random.default_rng(1)
    monitor = drift.DriftMonitor()
    sigma = 20 / 1.645  # the band p50 * 1.2 is the P95
    in_fallback = 0
    for actual in rng.normal(100, sigma, 5000):
        monitor.observe(0.0, float(actual), 100.0, 120.0)
        in_fallback += monitor.in_fallback
    assert in_fallback / 5000 < 0.01


def test_load_three_times_the_forecast_trips_fallback_within_three_points_and_asks_a_refit() -> (
    None
):
    monitor = drift.DriftMonitor()
    feed(monitor, [100.0] * 20 + [300.0] * 3)
    assert monitor.in_fallback
    assert monitor.take_retrain() is True
    assert monitor.take_retrain() is False


def test_one_outlier_alone_never_trips_fallback() -> None:
    monitor = drift.DriftMonitor()
    feed(monitor, [100.0] * 20 + [10_000.0] + [100.0] * 20 + [0.0] + [100.0] * 20)
    assert not monitor.in_fallback


def test_fallback_is_left_only_after_a_run_of_healthy_points() -> None:
    monitor = drift.DriftMonitor()
    feed(monitor, [300.0] * 5)
    assert monitor.in_fallback
    feed(monitor, [100.0] * (drift.RELEASE_AFTER - 1) + [300.0] + [100.0] * 3)
    assert monitor.in_fallback  # the miss restarted the run
    feed(monitor, [100.0] * drift.RELEASE_AFTER)
    assert not monitor.in_fallback


def test_missing_actuals_are_not_scored_and_a_nan_forecast_is_a_miss() -> None:
    monitor = drift.DriftMonitor()
    monitor.observe(0.0, math.nan, 100.0, 120.0)
    assert monitor.observations == 0
    for _ in range(3):
        monitor.observe(0.0, 100.0, math.nan, math.nan)
    assert monitor.in_fallback


def test_the_tracker_scores_each_actual_against_the_forecast_made_lead_time_before() -> None:
    tracker = drift.DriftTracker(lead_time=600.0)
    for origin in (1000.0, 1300.0, 1600.0):  # forecasts after observing origin - STEP
        path = np.array([origin, origin + 1, origin + 2])  # p50 = the origin, to identify it
        tracker.record(Forecast(origin, STEP, path, path + 1e9, 0.95))
    seen: list[tuple[float, float]] = []
    tracker.monitor.observe = lambda at, actual, p50, upper: seen.append((at, p50))  # type: ignore[method-assign]
    tracker.score(Series(1000.0, STEP, np.array([5.0, 5.0, 5.0, 5.0])))
    # 600 s ahead is 2 steps: the actual at 1300 was forecast by the origin 1000 (its point 1).
    assert seen == [(1300.0, 1001.0), (1600.0, 1301.0), (1900.0, 1601.0)]


def test_fallback_engages_within_an_hour_of_load_tripling_and_releases_after() -> None:
    series = daily_cycle(14, change=(10, 99))
    frame, extra = replay.simulate(series, replay.ReplayConfig(threshold=40.0))
    change = int(10 * DAY / STEP)
    after = [(a, b) for a, b in fallback_spans(frame, change) if a >= 0]
    assert after and after[0][0] <= 1.0, after
    assert after[0][1] <= 8.0, f"fallback did not release within 8 h of the change: {after}"
    assert extra["retrains"] >= 1
    before = [(a, b) for a, b in fallback_spans(frame, change) if -48 <= a < 0]
    assert sum(b - a for a, b in before) <= 1.0, f"false alarms before the change: {before}"


def test_fallback_releases_after_the_load_returns_to_normal() -> None:
    series = daily_cycle(14, change=(10, 11))
    frame, _ = replay.simulate(series, replay.ReplayConfig(threshold=40.0))
    back = int(11 * DAY / STEP)
    spans = fallback_spans(frame, back)
    assert any(a <= 1.0 and b >= 0 for a, b in spans if a > -24), spans  # engaged on the change
    late = [(a, b) for a, b in spans if b > 8.0]
    assert sum(b - max(a, 8.0) for a, b in late) <= 2.0, f"still falling back: {late}"


@pytest.mark.skipif(not (TRACES / "nasa_http_5min.csv").exists(), reason="needs ../shared")
def test_fallback_engages_after_the_nasa_outage_and_releases_within_half_a_day() -> None:
    trace = read_trace(TRACES / "nasa_http_5min.csv")
    series = trace.since(trace.start + 20 * DAY).until(trace.start + 36 * DAY)
    frame, _ = replay.simulate(series, replay.ReplayConfig(threshold=10.0))
    back = int(np.flatnonzero(frame["timestamp"] == "1995-08-03 04:40:00")[0])  # server is up
    spans = [(a, b) for a, b in fallback_spans(frame, back) if -1 <= a <= 24]
    assert spans and spans[0][0] <= 1.0, spans
    assert spans[0][1] <= 12.0, spans
