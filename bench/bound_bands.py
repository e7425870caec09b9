"""Forecast bands that read the future: what a better forecaster could at best hand the policy.

Pure functions (numpy only, no I/O) that bench/forecast_bound.py feeds to the replay in place of
a model's forecast band. Every band is a models.conformal.Calibration, the very object the replay
reads (`band.upper(p50, quantile)`, the quantile sliding from the P95 to the median as the budget
empties), so the bounds go through the same interpolation and flooring as a model's band:
- `future`: P50 = P95 = the actual load over the look-ahead (a table of zeros: every quantile is
  the P50). No forecaster can do better; near the yardstick's oracle, less what the policy and
  the budget leave out.
- `smooth`: P50 = a centred rolling mean of the actual load (`centred_mean`), the band above it
  the empirical quantiles of the relative residuals actual vs that mean over the trailing week
  (`causal_offsets`, as the models' calibration measures them: relative to max(p50, floor)). It
  knows the shape of the future but not its noise: the best a forecaster blind to the noise
  could do.
- `hourly`: the same P50, the band the residual quantiles of the whole trace per hour of day
  (`hourly_offsets`): noise whose size is known in advance, hour by hour.
- `classical`: P50 = the whole trace's classical decomposition (`classical`: a centred mean over
  one period plus the mean profile around it), the band as `smooth`'s: what a seasonal model
  that knew each day's level could do.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from models.base import DAY, HOUR, FloatArray
from models.conformal import LEVELS, Calibration, scale_of


def future_path(values: FloatArray, index: int, points: int) -> FloatArray:
    """values[index + 1 .. index + points], the path a forecast made after observing
    values[index] covers; NaN past the end (the policy reads only finite points)."""
    out = np.full(points, np.nan)
    part = values[index + 1 : index + 1 + points]
    out[: part.size] = part
    return out


def smooth_points(window: float, step: float) -> int:
    """Points of a centred window spanning about `window` seconds: odd, at least 3 (a centred
    mean of one point would be the load itself)."""
    n = max(3, math.ceil(window / step - 1e-9))
    return n if n % 2 else n + 1


def centred_mean(values: FloatArray, points: int) -> FloatArray:
    """The mean of the finite values within points // 2 either side of each point (NaN where
    there is none): the smooth future a forecaster could at best know."""
    return centred_average(values, np.ones(points))


def centred_average(values: FloatArray, weights: FloatArray) -> FloatArray:
    """The weighted mean of the finite values under `weights` (odd length), centred on each
    point; the weights of missing values drop out. NaN where no weighted value is finite."""
    half = weights.size // 2
    finite = np.isfinite(values)
    padded = np.concatenate([np.zeros(half), np.where(finite, values, 0.0), np.zeros(half)])
    counts = np.concatenate([np.zeros(half), finite.astype(np.float64), np.zeros(half)])
    sums = np.convolve(padded, weights[::-1], mode="valid")
    n = np.convolve(counts, weights[::-1], mode="valid")
    out: FloatArray = np.full(values.size, np.nan)
    np.divide(sums, n, out=out, where=n > 0)
    return out


def period_weights(period: int) -> FloatArray:
    """The centred moving average over one period: `period` equal weights when it is odd, the
    2 x period average (half weights at both ends, period + 1 points) when it is even."""
    if period % 2:
        return np.ones(period)
    weights = np.ones(period + 1)
    weights[[0, -1]] = 0.5
    return weights


def classical(values: FloatArray, period: int) -> FloatArray:
    """The classical additive decomposition's fit, level + season: the centred moving average
    over one period (period_weights) plus the mean, per phase of the period, of the values
    around it (de-meaned) where the average had a whole period; NaN where the level has no
    value."""
    weights = period_weights(period)
    level = centred_average(values, weights)
    detrended = values - level
    half = weights.size // 2
    detrended[:half] = detrended[detrended.size - half :] = np.nan  # partial windows: no season
    phases = np.arange(values.size) % period
    season = np.zeros(period)
    for phase in range(period):
        at = detrended[phases == phase]
        at = at[np.isfinite(at)]
        season[phase] = float(at.mean()) if at.size else 0.0
    season -= season.mean()
    out: FloatArray = level + season[phases]
    return out


def relative_residuals(actual: FloatArray, p50: FloatArray, *, floor: float) -> FloatArray:
    """(actual - p50) / max(p50, floor): the unit of a calibration table (power 1)."""
    out: FloatArray = (actual - p50) / scale_of(p50, floor=floor, power=1.0)
    return out


def offsets_row(residuals: FloatArray) -> FloatArray:
    """The LEVELS quantiles of the finite residuals (zeros when there is none)."""
    finite = residuals[np.isfinite(residuals)]
    if not finite.size:
        return np.zeros(LEVELS.size)
    out: FloatArray = np.quantile(finite, LEVELS)
    return out


def causal_offsets(residuals: FloatArray, *, window: int, every: int) -> FloatArray:
    """Row i: the LEVELS quantiles of the residuals up to and including i, over the last
    `window` of them, re-measured every `every` points (rows between repeat the last
    measure; a row before the first measure has none and is zeros)."""
    out = np.zeros((residuals.size, LEVELS.size))
    for i in range(0, residuals.size, every):
        out[i : i + every] = offsets_row(residuals[max(0, i + 1 - window) : i + 1])
    return out


def hourly_offsets(residuals: FloatArray, times: FloatArray) -> FloatArray:
    """(24, LEVELS): the LEVELS quantiles of the whole trace's residuals per hour of the day
    (of the timestamps as the trace gives them)."""
    hours = hour_of_day(times)
    return np.stack([offsets_row(residuals[hours == h]) for h in range(24)])


def hour_of_day(times: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """The hour of the day, 0-23, of epoch seconds."""
    out: npt.NDArray[np.int64] = np.floor(np.mod(times, DAY) / HOUR).astype(np.int64)
    return out


def band(table: FloatArray, *, floor: float) -> Calibration:
    """A calibration whose row j is the offsets of the forecast's point j (power 1: relative
    to max(p50, floor)); one row serves every point (the table's last row repeats)."""
    rows = np.atleast_2d(np.asarray(table, dtype=np.float64))
    return Calibration(table=rows, floor=floor, samples=int(rows.shape[0]), power=1.0)


def exact_band(points: int) -> Calibration:
    """Every quantile is the P50 itself: the band of a forecaster that knows the load."""
    return band(np.zeros((points, LEVELS.size)), floor=0.0)


def grade(
    actual: npt.ArrayLike, p95_at: npt.ArrayLike, p50_at: npt.ArrayLike, *, k: int, first: int
) -> tuple[float, float]:
    """P95 coverage and the P50's WAPE over the steps from `first` on, each step s against the
    forecast made for it a lead time earlier: after step s - k - 1, its point k (`p95_at` and
    `p50_at` are indexed by the origin); only where the load and the forecast are known."""
    values = np.asarray(actual, dtype=np.float64)
    s = np.arange(max(first, k + 1), values.size)
    p95 = np.asarray(p95_at, dtype=np.float64)[s - k - 1]
    p50 = np.asarray(p50_at, dtype=np.float64)[s - k - 1]
    load = values[s]
    known = np.isfinite(load) & np.isfinite(p95) & np.isfinite(p50)
    if not known.any():
        return math.nan, math.nan
    covered = float(np.mean(load[known] <= p95[known]))
    wape = float(np.abs(load[known] - p50[known]).sum() / max(load[known].sum(), 1e-12))
    return covered, wape
