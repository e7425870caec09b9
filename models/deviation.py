"""How the load's deviation from its seasonal profile carries over the next hour, learned per
step ahead from the fit's own cycles (on by default; `scaler backtest --no-level-regression`
is the ablation).

The seasonal baseline's level is one ratio over the last hour, applied to every step ahead
alike. Here the log deviation `log((load + f) / (profile + f))` a given number of steps ahead
is regressed on the level over several trailing windows, 5 minutes to 4 hours. Each is the
log of the ratio of sums the baseline's level reads, so one sample of 0 is a sixth of an
hour's level, not a log of 0. One median (least absolute deviation) regression per step ahead:
the data say how much of a 5-minute burst, of the last hour's level and of the afternoon's is
still there 10-25 minutes later. The deviations it learns from are out of sample (each cycle
against the profile of the other cycles), as a live forecast's are. The forecast is a median,
as the calibration and the drift monitor assume; models.seasonal combines it with the hour's
level (`SeasonalBaseline._combined`: their geometric mean). docs/forecasting.md "A model of the
within-hour dynamics" measures it alone, combined, and a version that only ever raised the
level's forecast (dropped: not a median).

Pure: numpy, and statsmodels' QuantReg (imported when a fit asks for it).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import numpy.typing as npt

from models.base import HOUR, FloatArray

WINDOWS = (300.0, 900.0, 1800.0, HOUR, 2 * HOUR, 4 * HOUR)
"""The trailing windows whose log level (a ratio of sums) the regression reads (at least one
point each)."""
AHEAD = HOUR
"""How far ahead a coefficient row is fitted per step; further steps reuse the last row. The
decision reads lead time + horizon rounded up to the step, plus one step
(scaler.decision.policy.forecast_points): 30 minutes at a 5-minute step with the defaults, 40
at 10 minutes, an hour at 30 minutes."""
MAX_ROWS = 60
"""At most this many steps ahead get their own row (a 1-minute model step: the first hour)."""
P_TOL = 1e-4
"""QuantReg's convergence tolerance on the coefficients' change between iterations. statsmodels'
default, 1e-6, takes about 3x the iterations for changes in the third decimal of a coefficient
(nasa's log forecast moves by at most 0.005)."""
UNIT_SUM = True
"""Whether the levels' weights sum to 1, so a deviation every window shares (a level that has
held for the last 4 hours) is carried ahead in full, as the hour's level carries it. Free
weights learn the fit's cycles, where deviations mostly revert, and then carry a step change
(a launch, a lost region's traffic moving here: x3 from one step on) at a fraction of its size
until the next refit; the weights still choose how much of a 5-minute burst and of the
afternoon's level is still there (docs/forecasting.md "A model of the within-hour dynamics")."""
MIN_SAMPLES_PER_COEF = 20
"""Fewer training rows than this per coefficient: no regression (the level stays the hour's)."""
CLIP = (math.log(0.25), math.log(4.0))
"""Bounds of the predicted log deviation: models.seasonal.LEVEL_CLIP's, as a log."""


def widths(step: float) -> tuple[int, ...]:
    """The windows' widths in points at `step`, distinct, shortest first."""
    return tuple(sorted({max(1, round(w / step)) for w in WINDOWS}))


def rows(step: float) -> int:
    """Coefficient rows fitted at `step`: one per step ahead up to AHEAD, at most MAX_ROWS."""
    return min(MAX_ROWS, max(1, math.ceil(AHEAD / step - 1e-9)))


def features(
    load: FloatArray, expected: FloatArray, ends: npt.NDArray[np.int64], step: float
) -> FloatArray:
    """The log level over each window up to each origin in `ends` (the ratio of the sums of
    `load` and `expected`, both with the floor added, over the points where `load` is not NaN;
    clipped to CLIP), one row per origin, a 1 first (the intercept); a window with no point
    reads 0 (the profile). Each row reads only the points up to its origin, one by one, so a
    prefix gives the same row bit for bit."""
    ws = widths(step)
    index = ends[:, None] - np.arange(ws[-1])[None, :]  # newest first
    inside = index >= 0
    index = np.maximum(index, 0)
    held = inside & np.isfinite(load[index])
    num = np.where(held, load[index], 0.0)
    den = np.where(held, expected[index], 0.0)
    out = np.ones((ends.size, len(ws) + 1))
    for j, w in enumerate(ws):
        top, bottom = num[:, :w].sum(axis=1), den[:, :w].sum(axis=1)
        ratio = np.log(np.maximum(top, 1e-300) / np.maximum(bottom, 1e-300))
        out[:, j + 1] = np.where(held[:, :w].any(axis=1), np.clip(ratio, *CLIP), 0.0)
    return out


def fit(load: FloatArray, expected: FloatArray, step: float) -> FloatArray | None:
    """Coefficients (one row per step ahead, `rows(step)` of them) of the median regression of
    the log deviation `log(load / expected)` (both with the floor added) that many steps ahead
    on `features`, over every origin with a full longest window and an observed target; None
    when there are too few of them."""
    from statsmodels.regression.quantile_regression import QuantReg  # imported on first fit

    longest = widths(step)[-1]
    count = rows(step)
    origins = np.arange(longest - 1, load.size - 1, dtype=np.int64)
    x = features(load, expected, origins, step)
    with np.errstate(invalid="ignore", divide="ignore"):
        d = np.log(load / expected)
    # With UNIT_SUM, the levels' weights w sum to 1: regressed as target - x_longest on
    # (1, x_j - x_longest) for the shorter windows j, the longest's weight is 1 - their sum.
    design = np.column_stack([x[:, :1], x[:, 1:-1] - x[:, -1:]]) if UNIT_SUM else x
    base = x[:, -1] if UNIT_SUM else np.zeros(origins.size)
    coef = np.zeros((count, x.shape[1]))
    for k in range(1, count + 1):
        usable = origins + k < d.size
        target = np.full(origins.size, np.nan)
        target[usable] = d[origins[usable] + k] - base[usable]
        ok = np.isfinite(target)
        if ok.sum() < MIN_SAMPLES_PER_COEF * x.shape[1]:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # IterationLimitWarning: the last iterate is kept
            try:
                found = (
                    QuantReg(target[ok], design[ok]).fit(q=0.5, max_iter=1000, p_tol=P_TOL).params
                )
            except (ValueError, np.linalg.LinAlgError):
                found = np.linalg.lstsq(design[ok], target[ok], rcond=None)[0]
        if UNIT_SUM:
            found = np.append(found, 1.0 - found[1:].sum())
        coef[k - 1] = found
    if not np.isfinite(coef).all():
        return None
    return coef


def predict(coef: FloatArray, x: FloatArray, steps: int) -> FloatArray:
    """The log deviation 1..`steps` ahead of each row of `x` (`features`), clipped to CLIP;
    steps past the last row of `coef` use it. Summed row by row, not by a matrix product, so a
    row's value does not depend on how many others are asked with it."""
    row = np.minimum(np.arange(steps), coef.shape[0] - 1)
    out: FloatArray = np.clip((x[:, None, :] * coef[row][None, :, :]).sum(axis=2), *CLIP)
    return out
