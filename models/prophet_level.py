"""The residual level of models.prophet's hybrid: Prophet's curve ignores what happened in the
last minutes, so its log-scale residuals are smoothed exponentially and the current level is
added to the curve. This module picks the smoothing weight on the in-sample errors and says how
many of the newest residuals the level needs.

Pure: numpy and the standard library; knows nothing of Prophet itself.
"""

from __future__ import annotations

import math

import numpy as np

from models.base import FloatArray

WEIGHTS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
"""Candidate smoothing weights of the residual level (a grid: one parameter, no optimiser)."""


def best_weight(residuals: FloatArray, *, ahead: int = 1) -> float:
    """The smoothing weight with the least in-sample squared error `ahead` steps past the level
    (1: one step, today's rule; missing skipped)."""
    e = residuals[np.isfinite(residuals)]
    if e.size < 3 or np.ptp(e) < 1e-12:
        return 0.0
    if ahead <= 1:
        best, best_error = 0.0, float((e * e).mean())  # 0: no correction
        for alpha in WEIGHTS:
            level, total = 0.0, 0.0
            for value in e:
                total += (value - level) ** 2
                level += alpha * (value - level)
            if total / e.size < best_error:
                best, best_error = alpha, total / e.size
        return best
    best, best_error = 0.0, float((e * e).mean())
    for alpha in WEIGHTS:
        levels = np.zeros(e.size)  # levels[t]: the level after e[t], the forecast of e[t + ahead]
        level = 0.0
        for t, value in enumerate(e.tolist()):
            level += alpha * (value - level)
            levels[t] = level
        miss = e[ahead:] - levels[: e.size - ahead]
        error = float((miss * miss).sum() + (e[:ahead] * e[:ahead]).sum()) / e.size
        if error < best_error:
            best, best_error = alpha, error
    return best


def memory(alpha: float, cap: int) -> int:
    """Points whose weight is above 1% of the newest one's, at most `cap`."""
    if alpha >= 1:
        return 1
    return int(min(max(math.ceil(math.log(0.01) / math.log(1 - alpha)), 1), max(cap, 1)))
