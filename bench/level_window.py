"""Would a better short-term level forecast the point a lead time ahead better? On one trace,
the seasonal baseline and Prophet walked forward as the backtest walks (weekly refit on the
last 4 weeks, as bench/level_spikes.py does), the P50 `ahead` steps past each origin graded by
its WAPE (bench/forecast_bound.py's grading: sum |actual - P50| / sum actual over the points
every variant forecasts), with the short-term level read over other windows:
- seasonal: the ratio of sums over a flat window of 15m, 30m, 1h (the hour level, the default
  before the regression below), 2h; or weighted exponentially with a half-life of 15m, 30m, 1h,
  2h; or the one of those a leave-one-cycle-out backtest of the fit's own cycles picks over the
  look-ahead (`models.seasonal.choose_window`), by the P50's absolute error ("mae") or by its
  in-sample conformal band's pinball ("band"); or the median regression of the deviation per
  step ahead (models/deviation.py), combined with the hour's level (today's default) or alone;
  and, as a bound, the profile times the level of the hour centred on the target itself, read
  from the future (what no window of the past can know);
- Prophet: the residual level's weight chosen by the in-sample one-step error (today's), by the
  in-sample error at the lead time (`models.prophet._residual_weight(..., ahead=)`), and each
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

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import level_spikes

from models import seasonal
from models.base import HOUR, FloatArray, Series
from models.prophet import RESIDUAL_WEIGHTS, ProphetModel, _residual_weight
from models.seasonal import TODAY, LevelWindow, RegressedSeasonal, SeasonalBaseline, level_weights
from scaler.decision.spec import duration_arg
from scaler.offline import backtest, replay

FLAT = (900.0, 1800.0, HOUR, 2 * HOUR)
HALF_LIVES = (900.0, 1800.0, HOUR, 2 * HOUR)


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--lead-time", type=duration_arg, default=600.0)
    p.add_argument("--no-prophet", action="store_true")
    args = p.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    for path in args.traces:
        series = backtest.load_trace(path, 300.0)
        first = replay.warmup_steps(series, None)
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


def windowed_level(
    model: SeasonalBaseline, series: Series, ends: npt.NDArray[np.int64], window: LevelWindow
) -> FloatArray:
    """The level of each origin over `window` (a ratio of weighted sums, missing points
    skipped), as the model reads it when its fit chose that window (`_weighted_levels`)."""
    saved, model.window = model.window, window
    try:
        return model._weighted_levels(series, ends)
    finally:
        model.window = saved


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
        found[f"seasonal flat {window / 60:g}m"] = profile * windowed_level(
            model, series, ends, ("flat", window)
        )
    for half in HALF_LIVES:
        found[f"seasonal ewm {half / 60:g}m"] = profile * windowed_level(
            model, series, ends, ("ewm", half)
        )
    # a bound, not a forecast: the level of the hour centred on the target, read from the
    # future (what no level window can know)
    late = (level_weights(TODAY, step).size - 1) // 2
    found["seasonal, future level (centred 1h)"] = profile * windowed_level(
        model, series, np.minimum(ends + ahead + late, len(series) - 1), TODAY
    )
    for criterion in ("mae", "band"):
        seasonal.LEVEL_CRITERION = criterion
        chosen = Chosen()
        chosen.fit(history)
        picks[f"seasonal {criterion} {chosen.window[0]} {chosen.window[1] / 60:g}m"] += 1
        found[f"seasonal chosen ({criterion})"] = chosen.predict_at(series, ends, ahead)[:, -1]
    seasonal.LEVEL_CRITERION = "band"
    regressed = RegressedSeasonal()
    regressed.fit(history)
    picks[f"seasonal regression {'fitted' if regressed.regression is not None else 'none'}"] += 1
    found["seasonal level regression"] = regressed.predict_at(series, ends, ahead)[:, -1]
    seasonal.COMBINE = False
    found["seasonal level regression alone"] = regressed.predict_at(series, ends, ahead)[:, -1]
    seasonal.COMBINE = True
    return found


class HourLevel(SeasonalBaseline):
    """The seasonal baseline as it was before the level regression became the default: the
    last hour's level carried to every step ahead."""

    regress_level = False


class Chosen(HourLevel):
    """The seasonal baseline whose fit chooses its level window."""

    choose_level = True


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
    lead_alpha = _residual_weight(residuals, ahead=ahead)
    picks[f"prophet lead {lead_alpha:g}"] += 1
    found["prophet (lead alpha)"] = prophet_with(model, series, ends, ahead, lead_alpha)
    for alpha in RESIDUAL_WEIGHTS:
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
