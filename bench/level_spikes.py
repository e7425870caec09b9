"""Does the forecast's short-term level chase one-sample spikes? On one trace, the seasonal
baseline and Prophet walked forward as the backtest does (weekly refit on the last 4 weeks, the
point a lead time ahead), then:
- the share of the P50's absolute error at origins whose last hour held a one-sample spike (its
  highest sample above the hour's median by more than 3.5 robust standard deviations, 1.4826 x
  the MAD of that hour), against their share of origins;
- how much of the P50's step-to-step change is the seasonal profile's and how much its level's;
- the P50's mean absolute error with spike-robust levels instead: the seasonal level as a ratio
  of medians or a sum winsorised at the hour's median +- 3 MADs (log ratios), Prophet's residual
  level smoothed on innovations clipped at c x the robust spread of its in-sample innovations
  (Huber's psi; Gelper, Fried & Croux 2010), c = 2 and 3.
A measurement, not a test. docs/forecasting.md "Does the level chase spikes?".

    .venv/bin/python bench/level_spikes.py TRACE.csv [--lead-time 10m]
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models import prophet_level
from models.base import DAY, WEEK, FloatArray, Series
from models.prophet import ProphetModel
from models.seasonal import LEVEL_CLIP, LEVEL_WINDOW, SeasonalBaseline
from scaler.decision.spec import duration_arg
from scaler.offline import backtest, replay_summary

SPIKE_Z = 3.5
"""Robust z of the hour's highest sample over its median that counts as a spike."""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace", type=Path)
    p.add_argument("--lead-time", type=duration_arg, default=600.0)
    args = p.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    series = backtest.load_trace(args.trace, 300.0)
    v, step = series.values, series.step
    first = replay_summary.warmup_steps(series, None)
    ahead = math.ceil(args.lead_time / step - 1e-9) + 1
    paths = walk(series, first=first, ahead=ahead)
    window = max(1, round(LEVEL_WINDOW / step))
    target = np.arange(first, len(v))
    hour = np.stack([v[target - ahead - j] for j in range(window)], axis=1)
    ok = np.isfinite(v[target]) & np.all([np.isfinite(x[target]) for x in paths.values()], 0)
    ok &= np.isfinite(hour).sum(axis=1) >= max(1, window // 2)
    print(f"{args.trace.stem}: {ok.sum()} graded points, {ahead} steps past the last observation")
    spike = spikes(hour[ok]) if window >= 3 else np.zeros(ok.sum(), dtype=bool)
    actual = v[target][ok]
    for name, path in paths.items():
        err = np.abs(path[target][ok] - actual)
        share = err[spike].sum() / err.sum()
        jitter = np.abs(np.diff(path[target][ok])).mean()
        print(
            f"  {name:18s} MAE {err.mean():9.3f}  jitter {jitter:8.3f}"
            f"  spike origins {spike.mean():5.1%} of origins, {share:5.1%} of |error|"
        )


def spikes(hour: FloatArray) -> FloatArray:
    """Origins whose hour's highest sample is a robust outlier above the hour's median."""
    med = np.nanmedian(hour, axis=1)
    mad = np.nanmedian(np.abs(hour - med[:, None]), axis=1) * 1.4826
    out: FloatArray = (np.nanmax(hour, axis=1) - med) / np.maximum(mad, 1e-9) > SPIKE_Z
    return out


Variants = Callable[[Series, Series, npt.NDArray[np.int64], int], dict[str, FloatArray]]
"""(series, history, ends, ahead) -> the P50 `ahead` steps past each origin in `ends`, per name."""


def walk(
    series: Series, *, first: int, ahead: int, each: Variants | None = None
) -> dict[str, FloatArray]:
    """The P50 `ahead` steps past each origin, per variant (`each`, default `variants`),
    indexed by the target step; refit weekly on the last four weeks, as the backtest walks."""
    each = each or variants
    v, step, n = series.values, series.step, len(series)
    refit, keep = round(WEEK / step), 4 * round(WEEK / step)
    out: dict[str, FloatArray] = {}
    for i0 in range(first - ahead, n - ahead, refit):
        known = Series(series.start, step, v[: i0 + 1])
        history = known.since(known.end - (keep - 1) * step)
        ends = np.arange(i0, min(n - ahead, i0 + refit))
        for name, p50 in each(series, history, ends, ahead).items():
            out.setdefault(name, np.full(n, np.nan))[ends + ahead] = p50
    return out


def variants(
    series: Series, history: Series, ends: np.ndarray, ahead: int
) -> dict[str, FloatArray]:
    v, step = series.values, series.step
    seasonal = SeasonalBaseline()
    seasonal.fit(history)
    found = {"seasonal": seasonal.predict_at(series, ends, ahead)[:, -1]}
    window = max(1, round(LEVEL_WINDOW / step))
    floor = max(float(np.abs(seasonal.profile).mean()) * 0.05, 1e-9)
    times = series.start + np.stack([ends - j for j in range(window)], 1) * step
    seen = np.stack([v[ends - j] for j in range(window)], 1)
    expected = seasonal.expected(times.ravel()).reshape(times.shape) + floor
    ratio = np.where(np.isfinite(seen), (np.nan_to_num(seen) + floor) / expected, np.nan)
    profile = seasonal.expected(series.start + (ends + ahead) * step)
    median = np.clip(np.nan_to_num(np.nanmedian(ratio, 1), nan=1.0), *LEVEL_CLIP)
    found["seasonal_medratio"] = profile * median
    log = np.log(ratio)
    mid = np.nanmedian(log, 1, keepdims=True)
    mad = np.nanmedian(np.abs(log - mid), 1, keepdims=True) * 1.4826
    clipped = np.clip(ratio, np.exp(mid - 3 * mad), np.exp(mid + 3 * mad)) * expected
    held = np.isfinite(seen)
    winsor = np.nansum(clipped, 1) / np.maximum(np.where(held, expected, 0).sum(1), 1e-12)
    found["seasonal_winsor"] = profile * np.clip(np.nan_to_num(winsor, nan=1.0), *LEVEL_CLIP)
    prophet = ProphetModel()
    prophet.fit(history)
    found["prophet"] = prophet.predict_at(series, ends, ahead)[:, -1]
    for c in (2.0, 3.0):
        found[f"prophet_huber{c:g}"] = huber_prophet(prophet, series, history, ends, ahead, c)
    return found


def huber_prophet(
    model: ProphetModel, series: Series, history: Series, ends: np.ndarray, ahead: int, c: float
) -> FloatArray:
    """Prophet's P50 with its residual level smoothed on innovations clipped at c robust sds."""
    alpha, step = model.alpha, series.step
    ok = np.isfinite(history.values)
    fitted = np.log(np.maximum(history.values[ok], 0) + model.offset)
    fitted -= model.curve(history.times()[ok])
    level, innovations = 0.0, []
    for e in fitted:
        innovations.append(e - level)
        level += alpha * (e - level)
    inn = np.array(innovations)
    scale = c * 1.4826 * float(np.median(np.abs(inn - np.median(inn))))
    v = series.values
    residual = np.full(v.size, np.nan)
    seen = np.isfinite(v)
    residual[seen] = np.log(np.maximum(v[seen], 0) + model.offset) - model.curve(
        series.times()[seen]
    )
    keep = prophet_level.memory(alpha, round(DAY / step)) if alpha > 0 else 1
    levels = np.zeros(ends.size)
    for row, i in enumerate(ends.tolist()):
        recent = residual[max(0, i + 1 - keep) : i + 1]
        level = 0.0
        for e in recent[np.isfinite(recent)]:
            level += alpha * float(np.clip(e - level, -scale, scale))
        levels[row] = level
    future = model.curve(series.start + (ends + ahead) * step)
    out: FloatArray = np.maximum(np.exp(future + levels) - model.offset, 0.0)
    return out


if __name__ == "__main__":
    main()
