"""Out-of-sample grades of a calibrated quantile over its calibration backtest: pinball loss,
coverage and WAPE for the artefact's `scores`, and per-origin losses (of the path and of its
peak) for model selection. Each half of the origins is graded with the table measured on the
other half (cross-fitted), so no origin grades its own table.

Pure arithmetic on a models.conformal.Backtest: fits nothing, forecasts nothing.
"""

from __future__ import annotations

import numpy as np

from models.base import FloatArray
from models.conformal import Backtest, measured


def pinball(actual: FloatArray, upper: FloatArray, quantile: float) -> float:
    """Mean pinball (quantile) loss of `upper` at `quantile`, over the finite actuals."""
    ok = np.isfinite(actual) & np.isfinite(upper)
    if not ok.any():
        return float("nan")
    return float(pinball_terms(actual[ok] - upper[ok], quantile).mean())


def pinball_terms(diff: FloatArray, quantile: float) -> FloatArray:
    """Pinball loss of each `diff` = actual - forecast at `quantile` (NaN stays NaN)."""
    out: FloatArray = np.maximum(quantile * diff, (quantile - 1) * diff)
    return out


def scores(backtest: Backtest, *, floor: float, quantile: float) -> dict[str, float]:
    """Out-of-sample scores of the calibrated quantile: each half of the origins is scored with
    the table measured on the other half (cross-fitted), so no origin grades its own table.
    `origins` counts the forecasts graded, `observed` those whose next point was observed: at
    one origin a step (models.calibrate), the window's points that have a value, which a
    coverage or a loss from a window that is mostly gaps must be read against."""
    if backtest.origins < 4:
        return {}
    actual, upper = _cross_fitted(backtest, floor=floor, quantile=quantile)
    a, u = actual.ravel(), upper.ravel()
    ok = np.isfinite(a)
    p50, seen = backtest.p50.ravel(), backtest.actual.ravel()
    ok50 = np.isfinite(seen)
    return {
        "pinball": pinball(a, u, quantile),
        "coverage": float((a[ok] <= u[ok] + 1e-9).mean()) if ok.any() else float("nan"),
        "wape": float(
            np.abs(seen[ok50] - p50[ok50]).sum() / max(float(np.abs(seen[ok50]).sum()), 1e-12)
        ),
        "origins": float(backtest.origins),
        "observed": float(np.isfinite(backtest.actual[:, 0]).sum()),
    }


def origin_losses(backtest: Backtest, *, floor: float, quantile: float) -> FloatArray:
    """Cross-fitted pinball loss of each origin's forecast (mean over its steps; NaN when none
    was graded), in origin order: what model selection compares pair by pair."""
    if backtest.origins < 4:
        return np.full(backtest.origins, np.nan)
    actual, upper = _cross_fitted(backtest, floor=floor, quantile=quantile)
    loss = pinball_terms(actual - upper, quantile)
    graded = np.isfinite(loss).sum(axis=1)
    total = np.nansum(loss, axis=1)
    out: FloatArray = np.where(graded > 0, total / np.maximum(graded, 1), np.nan)
    return out


def origin_peak_losses(backtest: Backtest, *, floor: float, quantile: float) -> FloatArray:
    """Cross-fitted pinball loss of each origin's *peak*: the highest actual over its steps
    against the highest calibrated upper over the same steps (NaN when no step was graded), in
    origin order. The decision buys replicas for the peak of the band over the look-ahead
    (scaler.decision.policy), so this is the loss of what it buys: a forecast that follows
    the curve but smooths a short recurring spike away (a nightly job) loses here, however
    well it scores point by point."""
    if backtest.origins < 4:
        return np.full(backtest.origins, np.nan)
    actual, upper = _cross_fitted(backtest, floor=floor, quantile=quantile)
    graded = np.isfinite(actual)
    has = graded.any(axis=1)
    rows = np.flatnonzero(has)
    diff = np.full(backtest.origins, np.nan)
    mask = graded[rows]
    diff[rows] = np.max(np.where(mask, actual[rows], -np.inf), axis=1) - np.max(
        np.where(mask, upper[rows], -np.inf), axis=1
    )
    return pinball_terms(diff, quantile)


def _cross_fitted(
    backtest: Backtest, *, floor: float, quantile: float
) -> tuple[FloatArray, FloatArray]:
    """(actual, calibrated upper) per origin, each half calibrated on the other half."""
    n = backtest.origins
    halves = (slice(0, n // 2), slice(n // 2, n))
    upper = np.empty_like(backtest.p50)
    for fit_on, score_on in (halves, halves[::-1]):
        table = measured(backtest.part(fit_on), floor=floor, samples=n)
        p50 = backtest.p50[score_on]
        offsets = table.offsets(p50.shape[1], quantile)
        upper[score_on] = np.maximum(p50 + offsets * table.scale(p50), np.maximum(p50, 0.0))
    return backtest.actual, upper
