"""Would a better short-term level forecast the point a lead time ahead better? On one trace,
the seasonal baseline and Prophet walked forward as the backtest walks (weekly refit on the
last 4 weeks, as bench/level_spikes.py does), the P50 `ahead` steps past each origin graded by
its WAPE (bench/forecast_bound.py's grading: sum |actual - P50| / sum actual over the points
every variant forecasts), with the short-term level read over other windows:
- seasonal: the ratio of sums over a flat window of 15m, 30m, 1h (the hour level, the default
  before the regression below), 2h; or weighted exponentially with a half-life of 15m, 30m, 1h,
  2h; or the one of those a leave-one-cycle-out backtest of the fit's own cycles picks over the
  look-ahead (`choose_window`, here since its removal from models.seasonal after c20d6b8), by
  the P50's absolute error ("mae") or by its in-sample conformal band's pinball ("band"); or the
  median regression of the deviation per step ahead (models/deviation.py), combined with the
  hour's level (today's default) or alone; and, as a bound, the profile times the level of the
  hour centred on the target itself, read from the future (what no window of the past can know);
- Prophet: the residual level's weight chosen by the in-sample one-step error (today's), by the
  in-sample error at the lead time (`models.prophet_level.best_weight(..., ahead=)`), and each
  weight of the grid fixed (the best of which no per-fit rule can beat).
A measurement, not a test. docs/forecasting.md "A level for the lead time".

    .venv/bin/python bench/level_window.py TRACE.csv [TRACE.csv ...] [--lead-time 10m]
        [--no-prophet]
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import level_spikes

from models import prophet_level, seasonal
from models.base import HOUR, FloatArray, Series, prepared
from models.prophet import ProphetModel
from models.seasonal import LEVEL_CLIP, SeasonalBaseline, _level_floor, median_profile
from scaler.decision.spec import duration_arg
from scaler.offline import backtest, replay_summary

FLAT = (900.0, 1800.0, HOUR, 2 * HOUR)
HALF_LIVES = (900.0, 1800.0, HOUR, 2 * HOUR)

LevelWindow = tuple[str, float]
"""How the level reads the recent load: ("flat", seconds), a ratio of sums over the window, or
("ewm", half-life in seconds), a ratio of exponentially weighted sums."""
TODAY: LevelWindow = seasonal.TODAY
"""The window every fit reads: the last hour, flat."""
LEVEL_WINDOWS: tuple[LevelWindow, ...] = (
    ("flat", 900.0),
    ("flat", 1800.0),
    ("flat", HOUR),
    ("flat", 2 * HOUR),
    ("ewm", 900.0),
    ("ewm", 1800.0),
    ("ewm", HOUR),
    ("ewm", 2 * HOUR),
)
"""The level windows `choose_window` chooses from, today's (the last hour, flat) among them."""
LEVEL_LOOKAHEAD = 1500.0
"""How far past the last sample the level window is graded when chosen (the decision's default
look-ahead: a 10-minute lead time plus a 15-minute horizon): each point 1..this ahead, equally."""
LEVEL_CRITERION = "band"
"""How `choose_window` grades a window: "band" (the in-sample conformal band's pinball loss) or
"mae" (the P50's absolute error)."""
BAND_QUANTILE = 0.95
"""The quantile the "band" criterion grades (the decision's default)."""
BAND_FLOOR = 0.1
"""The residual scale's floor as a fraction of the mean load (models.conformal.FLOOR_FRACTION)."""
EWM_TAIL = 0.01
"""An exponential window keeps the points whose weight is above this share of the newest one's."""


def level_weights(window: LevelWindow, step: float) -> FloatArray:
    """The weights of a level window's points at `step`, oldest first, the newest 1: a flat
    window's points all 1 (at least one point); an exponential window's halving every
    half-life, kept while above EWM_TAIL of the newest."""
    kind, seconds = window
    if kind == "flat":
        return np.ones(max(1, round(seconds / step)))
    if kind == "ewm":
        half = max(seconds / step, 1e-9)
        points = max(1, math.floor(half * math.log2(1 / EWM_TAIL)) + 1)
        out: FloatArray = 0.5 ** (np.arange(points - 1, -1, -1, dtype=np.float64) / half)
        return out
    raise ValueError(f"unknown level window {kind!r}; use flat or ewm")


def choose_window(
    tail: FloatArray, step: float, *, aheads: tuple[int, ...], criterion: str | None = None
) -> LevelWindow:
    """The level window (of LEVEL_WINDOWS) whose level, read as `predict` reads it, best
    forecasts each held-out cycle `aheads` steps past the window's newest point with the
    profile of the other cycles (the cycles laid end to end, on the points every candidate can
    forecast with a full window; ties to today's flat hour): on load whose level moves within
    the hour a short window follows it, on noisy load a long one averages the noise, and the
    fit's own cycles say which. Graded by `criterion` (default LEVEL_CRITERION): "mae", the
    P50's absolute error; "band", the pinball loss at BAND_QUANTILE of the P50 plus its relative
    residuals' quantile per step ahead (the conformal band models.calibrate makes, measured in
    sample), which is what `auto` and the decision read. One cycle: today's."""
    cycles, n = tail.shape
    if cycles < 2 or not aheads:
        return TODAY
    weights = {window: level_weights(window, step) for window in LEVEL_WINDOWS}
    longest = max(w.size for w in weights.values())
    x = tail.ravel()
    ok = np.isfinite(x)
    scale = BAND_FLOOR * float(np.nanmean(x)) if ok.any() else 0.0
    pairs: dict[tuple[LevelWindow, int], list[tuple[FloatArray, FloatArray]]] = {}
    for c in range(cycles):
        profile = median_profile(np.delete(tail, c, axis=0), 0)
        if profile is None:
            continue
        expected = np.tile(profile, cycles)
        floor = _level_floor(profile)
        num_x = np.where(ok, x + floor, 0.0)
        den_x = np.where(ok, expected + floor, 0.0)
        for window, w in weights.items():
            num = np.convolve(num_x, w[::-1])[: x.size]
            den = np.convolve(den_x, w[::-1])[: x.size]
            level = np.where(den > 0, np.clip(num / np.maximum(den, 1e-300), *LEVEL_CLIP), 1.0)
            for a in aheads:
                target = c * n + np.arange(n)
                target = target[(target - a >= longest - 1) & ok[target]]
                forecast = expected[target] * level[target - a]
                pairs.setdefault((window, a), []).append((x[target], forecast))
    if not pairs:
        return TODAY
    errors = dict.fromkeys(LEVEL_WINDOWS, 0.0)
    for (window, _), found in pairs.items():
        actual = np.concatenate([y for y, _ in found])
        forecast = np.concatenate([f for _, f in found])
        errors[window] += _loss(actual, forecast, criterion or LEVEL_CRITERION, scale)
    best = min(LEVEL_WINDOWS, key=lambda window: errors[window])
    return TODAY if errors[best] >= errors[TODAY] else best


def _loss(actual: FloatArray, forecast: FloatArray, criterion: str, floor: float) -> float:
    """The sum of a window's losses at one step ahead (`choose_window`)."""
    if actual.size == 0:
        return 0.0
    if criterion == "mae":
        return float(np.abs(actual - forecast).sum())
    if criterion == "band":
        scale = np.maximum(forecast, floor)
        offset = float(np.quantile((actual - forecast) / scale, BAND_QUANTILE))
        diff = actual - (forecast + offset * scale)
        return float(np.maximum(BAND_QUANTILE * diff, (BAND_QUANTILE - 1) * diff).sum())
    raise ValueError(f"unknown level criterion {criterion!r}; use mae or band")


def weighted_levels(
    model: SeasonalBaseline, history: Series, ends: npt.NDArray[np.int64], window: LevelWindow
) -> FloatArray:
    """The level of each origin `history.values[: i + 1]`, i in `ends`, over `window` with
    `model`'s profile: a ratio of weighted sums, missing points skipped (as models.seasonal read
    it before c20d6b8's choice of windows was removed)."""
    weights = level_weights(window, history.step)
    index = ends[:, None] - np.arange(weights.size - 1, -1, -1)[None, :]
    inside = index >= 0
    index = np.maximum(index, 0)
    seen = history.values[index]
    held = inside & np.isfinite(seen)
    w = np.where(held, weights[None, :], 0.0)
    expected = model.expected(history.start + index * history.step)
    floor = _level_floor(model.profile)
    num = ((np.where(held, seen, 0.0) + floor) * w).sum(axis=1)
    den = ((expected + floor) * w).sum(axis=1)
    ratio = num / np.maximum(den, 1e-300)
    out: FloatArray = np.where(held.any(axis=1), np.clip(ratio, *LEVEL_CLIP), 1.0)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--lead-time", type=duration_arg, default=600.0)
    p.add_argument("--no-prophet", action="store_true")
    args = p.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    for path in args.traces:
        series = backtest.load_trace(path, 300.0)
        first = replay_summary.warmup_steps(series, None)
        ahead = math.ceil(args.lead_time / series.step - 1e-9) + 1
        picks: Counter[str] = Counter()
        paths = walk(series, first=first, ahead=ahead, prophet=not args.no_prophet, picks=picks)
        v = series.values
        target = np.arange(first, len(v))
        ok = np.isfinite(v[target]) & np.all([np.isfinite(x[target]) for x in paths.values()], 0)
        actual = v[target][ok]
        print(f"{path.stem}: {ok.sum()} graded points, {ahead} steps past the last observation")
        print(f"  picked per fit: {dict(picks)}")
        for name, forecast in paths.items():
            err = np.abs(forecast[target][ok] - actual)
            print(f"  {name:22s} WAPE {err.sum() / max(actual.sum(), 1e-12):.4f}")


def walk(
    series: Series, *, first: int, ahead: int, prophet: bool, picks: Counter[str]
) -> dict[str, FloatArray]:
    """The P50 `ahead` steps past each origin, per variant, indexed by the target step (walked
    as level_spikes.walk walks)."""

    def each(
        series: Series, history: Series, ends: npt.NDArray[np.int64], ahead: int
    ) -> dict[str, FloatArray]:
        found = seasonal_variants(series, history, ends, ahead, picks)
        if prophet:
            found |= prophet_variants(series, history, ends, ahead, picks)
        return found

    return level_spikes.walk(series, first=first, ahead=ahead, each=each)


def seasonal_variants(
    series: Series,
    history: Series,
    ends: npt.NDArray[np.int64],
    ahead: int,
    picks: Counter[str],
) -> dict[str, FloatArray]:
    step = series.step
    model = HourLevel()
    model.fit(history)
    profile = model.expected(np.asarray(series.start + (ends + ahead) * step, dtype=np.float64))
    found = {"seasonal (1h level)": model.predict_at(series, ends, ahead)[:, -1]}
    for window in FLAT:
        found[f"seasonal flat {window / 60:g}m"] = profile * weighted_levels(
            model, series, ends, ("flat", window)
        )
    for half in HALF_LIVES:
        found[f"seasonal ewm {half / 60:g}m"] = profile * weighted_levels(
            model, series, ends, ("ewm", half)
        )
    # a bound, not a forecast: the level of the hour centred on the target, read from the
    # future (what no level window can know)
    late = (level_weights(TODAY, step).size - 1) // 2
    found["seasonal, future level (centred 1h)"] = profile * weighted_levels(
        model, series, np.minimum(ends + ahead + late, len(series) - 1), TODAY
    )
    tail = cycles_of(model, history)
    aheads = tuple(range(1, max(1, math.ceil(LEVEL_LOOKAHEAD / step - 1e-9)) + 1))
    for criterion in ("mae", "band"):
        chosen = choose_window(tail, step, aheads=aheads, criterion=criterion)
        picks[f"seasonal {criterion} {chosen[0]} {chosen[1] / 60:g}m"] += 1
        found[f"seasonal chosen ({criterion})"] = profile * weighted_levels(
            model, series, ends, chosen
        )
    regressed = SeasonalBaseline()
    regressed.fit(history)
    picks[f"seasonal regression {'fitted' if regressed.regression is not None else 'none'}"] += 1
    found["seasonal level regression"] = regressed.predict_at(series, ends, ahead)[:, -1]
    alone = RegressionAlone.from_dict(regressed.to_dict())
    found["seasonal level regression alone"] = alone.predict_at(series, ends, ahead)[:, -1]
    return found


class RegressionAlone(SeasonalBaseline):
    """The level regression's forecast alone, not combined with the last hour's level: the
    first version measured (`scaler backtest --level-regression-alone` until c21b1a4)."""

    def _combined(self, path: FloatArray, *_: Any) -> FloatArray:
        return path


class HourLevel(SeasonalBaseline):
    """The seasonal baseline as it was before the level regression became the default: the
    last hour's level carried to every step ahead."""

    regress_level = False


def cycles_of(model: SeasonalBaseline, history: Series) -> FloatArray:
    """The last cycles of `history` that `model`'s fit took its profile from, one per row."""
    values, n = prepared(history).values, model.profile.size
    cycles = max(1, min(seasonal.MAX_CYCLES, len(values) // n))
    out: FloatArray = values[-cycles * n :].reshape(cycles, n)
    return out


def prophet_variants(
    series: Series,
    history: Series,
    ends: npt.NDArray[np.int64],
    ahead: int,
    picks: Counter[str],
) -> dict[str, FloatArray]:
    model = ProphetModel()
    model.fit(history)
    found = {"prophet (1-step alpha)": model.predict_at(series, ends, ahead)[:, -1]}
    picks[f"prophet 1-step {model.alpha:g}"] += 1
    ok = np.isfinite(history.values)
    residuals = np.full(len(history), np.nan)
    residuals[ok] = np.log(np.maximum(history.values[ok], 0) + model.offset) - model.curve(
        history.times()[ok]
    )
    lead_alpha = prophet_level.best_weight(residuals, ahead=ahead)
    picks[f"prophet lead {lead_alpha:g}"] += 1
    found["prophet (lead alpha)"] = prophet_with(model, series, ends, ahead, lead_alpha)
    for alpha in prophet_level.WEIGHTS:
        found[f"prophet alpha {alpha:g}"] = prophet_with(model, series, ends, ahead, alpha)
    return found


def prophet_with(
    model: ProphetModel, series: Series, ends: npt.NDArray[np.int64], ahead: int, alpha: float
) -> FloatArray:
    """Prophet's P50 `ahead` steps past each origin with the residual level's weight `alpha`."""
    saved = model.alpha
    model.alpha = alpha
    try:
        out: FloatArray = model.predict_at(series, ends, ahead)[:, -1]
    finally:
        model.alpha = saved
    return out


if __name__ == "__main__":
    main()
