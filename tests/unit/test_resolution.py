"""Deciding at the trace's own step (one minute) with forecasts refreshed at the model step (five
minutes), on a trace whose five-minute mean hides the minute a replica must serve."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.base import DAY, Series
from models.resample import regrid
from scaler.decision import resolution
from scaler.offline import backtest, replay, replay_config

MINUTE = 60.0
MODEL_STEP = 300.0
CONFIG = replay_config.ReplayConfig(
    threshold=25.0, budget_share=0.3, model_step=MODEL_STEP
)  # the default


def bursty(days: float = 6, seed: int = 3) -> Series:
    """A daily cycle per minute, where one random minute of every five carries 2.5x the load:
    the five-minute mean is 1.3x the base, the minute that must be served 2.5x."""
    rng = np.random.default_rng(seed)
    n = int(days * DAY / MINUTE)
    t = np.arange(n) * MINUTE
    base = 200 + 150 * np.sin(2 * np.pi * (t / DAY - 0.3))
    burst = np.zeros(n)
    burst[np.arange(0, n, 5) + rng.integers(0, 5, size=math.ceil(n / 5))[: len(range(0, n, 5))]] = 1
    values = rng.poisson(base * (1 + 1.5 * burst)).astype(float)
    values[3000:3004] = np.nan  # a few lost samples
    return Series(1_700_006_400.0, MINUTE, values)


@pytest.fixture(scope="module")
def result() -> replay.Replay:
    return replay.replay(bursty(), CONFIG)


def test_a_one_minute_trace_gets_one_decision_per_minute_scored_per_minute(
    result: replay.Replay,
) -> None:
    trace = bursty()
    frame = result.decisions
    assert len(frame) == len(trace)
    stamps = np.asarray(
        (np.array(frame["timestamp"], dtype="datetime64[s]") - np.datetime64(0, "s")).astype(float)
    )
    np.testing.assert_array_equal(np.diff(stamps), MINUTE)
    summary = result.summary["trace"]
    assert summary["step_seconds"] == MINUTE
    scored = np.isfinite(trace.values[summary["warmup_steps"] :]).sum()
    assert summary["scored_steps"] == scored
    np.testing.assert_array_equal(frame["required"], np.ceil(np.nan_to_num(trace.values) / 25.0))


def test_decisions_change_between_forecast_refreshes_as_the_newest_minute_arrives(
    result: replay.Replay,
) -> None:
    frame = result.decisions.iloc[result.summary["trace"]["warmup_steps"] :]
    within = frame["reactive"].diff().ne(0) & (np.arange(len(frame)) % 5 != 0)
    assert within.mean() > 0.05  # the reactive floor follows each minute, not each 5 minutes
    assert set(frame["reason"]) >= {"forecast", "reactive"}


def test_rows_up_to_any_minute_do_not_depend_on_what_comes_after(result: replay.Replay) -> None:
    full = bursty()
    for cut in (4 * 1440 + 7, 4 * 1440 + 10):  # inside a model-step bucket and at its edge
        short = replay.replay(Series(full.start, full.step, full.values[:cut]), CONFIG)
        assert short.decisions.equals(result.decisions.iloc[:cut].reset_index(drop=True))


def per_minute_coverage(trace: Series, model: Series) -> float:
    """Share of scored minutes at or under the P95 forecast for their bucket (made lead time
    before the bucket), the band the policy reads."""
    config = backtest.BacktestConfig(model="seasonal", compare=(), warmup=3 * DAY)
    frame = backtest.forecast_frame(model, config, "seasonal")
    bucket = np.ceil((trace.times() - model.start) / model.step - 1e-9).astype(int)
    upper = dict(zip(np.round(frame["timestamp"]), frame["forecast_p95"], strict=True))
    bands = np.array([upper.get(model.start + b * model.step, np.nan) for b in bucket])
    ok = np.isfinite(bands) & np.isfinite(trace.values)
    return float((trace.values[ok] <= bands[ok] + 1e-9).mean())


def test_the_band_covers_the_minute_load_that_a_five_minute_mean_hides() -> None:
    trace = bursty()
    on_peaks = per_minute_coverage(trace, resolution.model_series(trace, MODEL_STEP))
    on_means = per_minute_coverage(trace, regrid(trace, MODEL_STEP))
    assert on_peaks >= 0.95
    assert on_means < 0.85  # the ablation: a band fitted on means misses the bursts


def test_the_policy_serves_more_minutes_than_reactive_for_the_same_trace(
    result: replay.Replay,
) -> None:
    policy, reactive = result.summary["policy"], result.summary["reactive"]
    assert policy["under_provisioned_pct"] < reactive["under_provisioned_pct"] / 2
    assert policy["frontier_ratio"] < 1


def test_a_bucket_is_used_once_every_sample_in_it_is_known() -> None:
    model = Series(600.0, MODEL_STEP, np.zeros(4))  # buckets (300,600], (600,900], ...
    assert resolution.newest_complete(model, 600.0) == -1  # the sample at 600 is not yet seen
    assert resolution.newest_complete(model, 660.0) == 0
    assert resolution.newest_complete(model, 900.0) == 0
    assert resolution.newest_complete(model, 960.0) == 1
    assert resolution.newest_complete(model, 1e9) == 3
    # bucket (900,1200] after origin 900 starts before 660 + 1500 = 2160, as do four more
    assert resolution.lookahead_points(600.0, MODEL_STEP, now=660.0, lookahead=1500.0) == 6
    assert resolution.lookahead_points(600.0, MODEL_STEP, now=900.0, lookahead=1500.0) == 6
    assert resolution.lookahead_points(600.0, MODEL_STEP, now=960.0, lookahead=1500.0) == 7
