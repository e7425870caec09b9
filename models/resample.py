"""Raw samples -> a regular Series at the model step. The one place that handles irregular
scrape times, counter resets, NaN and gaps, so that no model has to.

Conventions (those of a Prometheus range query over `rate(...[step])`):
- the grid is aligned to multiples of `step` since the epoch, so every scaler replica and every
  refit sees the same grid;
- the value at grid time T summarises the samples in (T - step, T]: their mean for a gauge, the
  per-second increase for a counter (a drop is a counter reset: the increase is the new value);
- a bucket without samples is a gap: gaps up to `max_gap` are interpolated linearly, longer ones
  stay NaN (missing; models skip them, the backtest does not score them).

Input that cannot be a load is refused with SeriesError naming the sample and the fix: times that
are not finite, go backwards or repeat, values that are infinite, and negative gauge values.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from models.base import MINUTE, FloatArray, Series, SeriesError

MAX_GAP = 15 * MINUTE
"""Longest gap (seconds) bridged by interpolation: a few lost scrapes, not an outage."""


def resample(
    times: npt.ArrayLike,
    values: npt.ArrayLike,
    *,
    step: float = 5 * MINUTE,
    counter: bool = False,
    max_gap: float = MAX_GAP,
) -> Series:
    """Samples (epoch seconds, value) -> a regular Series at `step` (see the module docstring)."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    _check(t, v, counter=counter, step=step)
    first = np.ceil(t[0] / step) * step
    bucket = np.ceil((t - first) / step - 1e-9).astype(np.int64)  # (T - step, T] -> T
    size = int(bucket[-1]) + 1
    out = _counter_rates(t, v, bucket, size) if counter else _means(v, bucket, size)
    return Series(float(first), step, _bridge(out, max(0, int(max_gap // step))))


def regrid(series: Series, step: float) -> Series:
    """A regular series at a coarser `step` (bucket means; NaN where a bucket has no value).

    A series already at `step` or coarser is returned unchanged: upsampling would invent data.
    Gaps are not bridged, so a backtest never scores interpolated actuals.
    """
    if series.step >= step - 1e-9 or len(series) == 0:
        return series
    t = series.times()
    first = np.ceil(t[0] / step) * step
    bucket = np.ceil((t - first) / step - 1e-9).astype(np.int64)
    return Series(float(first), step, _means(series.values, bucket, int(bucket[-1]) + 1))


def peaks(series: Series, step: float) -> Series:
    """A regular series at a coarser `step` holding each bucket's highest value (NaN where a
    bucket has no value): the load a replica must serve at the series' own resolution, which a
    bucket mean would hide. Same grid and buckets as `regrid`; a series already at `step` or
    coarser is returned unchanged."""
    if series.step >= step - 1e-9 or len(series) == 0:
        return series
    t = series.times()
    first = np.ceil(t[0] / step) * step
    bucket = np.ceil((t - first) / step - 1e-9).astype(np.int64)
    return Series(float(first), step, _maxes(series.values, bucket, int(bucket[-1]) + 1))


def _check(t: FloatArray, v: FloatArray, *, counter: bool, step: float) -> None:
    if not np.isfinite(step) or step <= 0:
        raise SeriesError(f"resample step must be a positive number of seconds, got {step}")
    if t.ndim != 1 or t.shape != v.shape:
        raise SeriesError(f"times {t.shape} and values {v.shape} must be 1-D and equally long")
    if t.size == 0:
        raise SeriesError("no samples to resample; check the query returns data")
    bad = np.flatnonzero(~np.isfinite(t))
    if bad.size:
        raise SeriesError(f"sample {bad[0]} has time {t[bad[0]]}; times must be finite")
    steps = np.diff(t)
    bad = np.flatnonzero(steps <= 0)
    if bad.size:
        i = int(bad[0]) + 1
        what = "repeats" if steps[bad[0]] == 0 else "goes back from"
        raise SeriesError(
            f"sample {i} at t={t[i]:.0f} {what} the one before it; "
            "sort samples by time and keep one per timestamp"
        )
    bad = np.flatnonzero(np.isinf(v))
    if bad.size:
        raise SeriesError(
            f"sample {bad[0]} at t={t[bad[0]]:.0f} is {v[bad[0]]}; drop infinite samples "
            "(NaN marks a missing one)"
        )
    if not counter:
        bad = np.flatnonzero(v < 0)
        if bad.size:
            raise SeriesError(
                f"sample {bad[0]} at t={t[bad[0]]:.0f} is {v[bad[0]]}; a load is >= 0 "
                "(for a raw counter pass counter=True so drops are read as resets)"
            )


def _means(v: FloatArray, bucket: npt.NDArray[np.int64], size: int) -> FloatArray:
    ok = ~np.isnan(v)
    sums = np.bincount(bucket[ok], weights=v[ok], minlength=size)
    counts = np.bincount(bucket[ok], minlength=size)
    out = np.full(size, np.nan)
    has = counts > 0
    out[has] = sums[has] / counts[has]
    return out


def _maxes(v: FloatArray, bucket: npt.NDArray[np.int64], size: int) -> FloatArray:
    ok = ~np.isnan(v)
    out = np.full(size, -np.inf)
    np.maximum.at(out, bucket[ok], v[ok])
    out[np.isneginf(out)] = np.nan
    return out


def _counter_rates(
    t: FloatArray, v: FloatArray, bucket: npt.NDArray[np.int64], size: int
) -> FloatArray:
    ok = np.flatnonzero(~np.isnan(v))
    out = np.full(size, np.nan)
    if ok.size < 2:
        return out
    tv, vv, bv = t[ok], v[ok], bucket[ok]
    delta = np.diff(vv)
    increase = np.where(delta < 0, vv[1:], delta)  # a drop is a reset: counting restarted at 0
    increase = np.maximum(increase, 0.0)  # a reset to a negative value is not a load either
    elapsed = np.diff(tv)
    where = bv[1:]  # an interval belongs to the bucket of its later sample
    inc = np.bincount(where, weights=increase, minlength=size)
    dur = np.bincount(where, weights=elapsed, minlength=size)
    has = dur > 0
    out[has] = inc[has] / dur[has]
    return out


def _bridge(values: FloatArray, max_points: int) -> FloatArray:
    """Interpolate runs of at most `max_points` NaN between two observed values."""
    missing = np.isnan(values)
    if not missing.any() or max_points <= 0 or missing.all():
        return values
    idx = np.arange(values.size)
    filled = np.interp(idx, idx[~missing], values[~missing])
    out = values.copy()
    # length of the NaN run each missing point belongs to; edges (no value on one side) stay NaN
    edges = np.flatnonzero(np.diff(np.concatenate([[0], missing.astype(np.int8), [0]])))
    for start, stop in zip(edges[::2], edges[1::2], strict=True):
        if stop - start <= max_points and start > 0 and stop < values.size:
            out[start:stop] = filled[start:stop]
    return out
