"""A causal P50 learned by gradient boosting: how far a strong, honest learner moves the frontier.

An experiment for bench/forecast_bound.py's `learned` bound (issue 7, session 31). Every model
in models/ is a seasonal profile plus a level, with a linear regression of the deviation; the
bound says the missing skill is the P50 of the next 10-25 minutes. This is the strongest causal
learner of that P50 a few lines can build: one LightGBM model per point ahead (direct
forecasting), fitted with the median (L1) loss on log1p-load changes from the origin, refitted
weekly on everything whose target was observed by then (expanding window, as retraining does),
from 24 features of what the origin has seen:
- the level (log1p of the newest bucket) and the 12 newest buckets relative to it;
- the trailing means over 3, 6, 12, 24 and 48 buckets relative to it;
- the time of day (sine, cosine) and day of week of the origin;
- yesterday's and last week's load at the target's time of day relative to the level, and their
  change from the origin's time of day to the target's (what the season did then).

LightGBM is not a dependency of the product: `.venv/bin/pip install lightgbm` before running
`bench/forecast_bound.py --bounds model,learned`. Its band is the learned P50's own causal
conformal band (per point ahead, the trailing week's relative residual quantiles that are
known at the origin, re-measured hourly), as `smooth`'s is.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from models.base import DAY, WEEK, FloatArray, Series

PARAMS = {
    "objective": "l1",
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 40,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "feature_fraction": 0.8,
    "verbose": -1,
    "num_threads": 1,
}
ROUNDS = 300
LAGS = 12
MEANS = (3, 6, 12, 24, 48)


def shifted(values: FloatArray, by: int) -> FloatArray:
    """values moved `by` places later (NaN where there is nothing to move in); `by` < 0 earlier."""
    out = np.full(values.size, np.nan)
    if 0 <= by < values.size:
        out[by:] = values[: values.size - by]
    elif -values.size < by < 0:
        out[:by] = values[-by:]
    return out


def trailing_mean(values: FloatArray, points: int) -> FloatArray:
    """The mean of the finite values among the `points` newest up to each one (NaN if none)."""
    finite = np.isfinite(values)
    sums = np.convolve(np.where(finite, values, 0.0), np.ones(points))[: values.size]
    counts = np.convolve(finite.astype(np.float64), np.ones(points))[: values.size]
    out: FloatArray = np.full(values.size, np.nan)
    np.divide(sums, counts, out=out, where=counts > 0)
    return out


def features(series: Series, ahead: int) -> FloatArray:
    """Row o: what an origin that has seen bucket o knows, for the target `ahead` buckets on."""
    level = np.log1p(np.asarray(series.values, dtype=np.float64))
    day, week = round(DAY / series.step), round(WEEK / series.step)
    times = series.start + series.step * np.arange(level.size)
    phase = 2 * np.pi * np.mod(times, DAY) / DAY
    columns = [level]
    columns += [shifted(level, lag) - level for lag in range(1, LAGS + 1)]
    columns += [trailing_mean(level, points) - level for points in MEANS]
    columns += [np.sin(phase), np.cos(phase), np.floor(times / DAY) % 7]
    for period in (day, week):
        then_target, then_origin = shifted(level, period - ahead), shifted(level, period)
        columns += [then_target - level, then_target - then_origin]
    return np.column_stack(columns)


def learned_paths(series: Series, points: int, *, first: int) -> FloatArray:
    """(len(series), points): the P50 path of the forecast made after observing each bucket
    from `first - points` on (NaN before), point j the bucket j + 1 ahead; refitted weekly on
    every earlier origin whose target that bucket had observed."""
    lgb: Any = importlib.import_module("lightgbm")
    values = np.asarray(series.values, dtype=np.float64)
    level = np.log1p(values)
    n, week = values.size, round(WEEK / series.step)
    paths = np.full((n, points), np.nan)
    for j in range(points):
        ahead = j + 1
        table = features(series, ahead)
        target = shifted(level, -ahead) - level
        origin = max(0, first - points)
        while origin < n:
            end = min(origin + week, n)
            seen = np.arange(max(0, origin - ahead))
            usable = seen[np.isfinite(target[seen]) & np.isfinite(level[seen])]
            data = lgb.Dataset(table[usable], target[usable])
            booster = lgb.train(PARAMS, data, num_boost_round=ROUNDS)
            at = np.arange(origin, end)
            paths[at, j] = np.expm1(level[at] + booster.predict(table[at]))
            origin = end
    out: FloatArray = np.maximum(paths, 0.0)
    return out
