"""statsmodels: STL decomposition + exponential smoothing (ETS(A,N,N)) on the seasonally adjusted
log load, the "STL + ETS" forecaster of Hyndman & Athanasopoulos (stlf).

Why this and not Holt-Winters or UnobservedComponents with harmonics, at this scale (a week of
5-minute data is a season of 2,016 points): seasonal Holt-Winters must estimate 2,016 initial
states, and an UnobservedComponents model with daily and weekly harmonics runs a Kalman filter
with ~25 states per likelihood evaluation, tens of seconds per fit. STL with loess "jumps" (the
speed-up of Cleveland et al. 1990, R's default) decomposes 8,064 points in well under a second,
and ETS on the adjusted series is a one-parameter fit. Working on log(load + offset) makes the
seasonality multiplicative (a quiet Sunday is a scaled-down Monday) and keeps forecasts >= 0.

The artefact keeps only the last seasonal cycle (the profile), the smoothing weight, the final
level and the residual scale; `predict` rebuilds the level from `recent` with the smoothing
recursion in closed form (a dot product), so it is exact after a JSON round trip and cheap.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from models.base import (
    ArtefactError,
    FitError,
    FloatArray,
    Series,
    finite_or,
    lognormal_upper,
    observed_span,
    prepared,
    season_for,
)

OFFSET_FRACTION = 0.05
"""log(load + offset), offset = this fraction of the mean load: zeros stay finite, and noise at
near-zero load does not dominate the log scale."""
STL_SEASONAL = 7
"""STL seasonal smoother span, in cycles (statsmodels' default)."""
STL_ROBUST_PASSES = 3
"""Robustness passes (statsmodels runs 15): most of the down-weighting of a launch-day spike or
an outage happens in the first ones, and each costs as much as a whole non-robust fit."""
MEMORY = 0.01
"""predict replays the smoothing recursion over the points whose weight exceeds this share."""


class ETSModel:
    """STL seasonal profile + simple exponential smoothing of the adjusted level (log scale)."""

    kind: ClassVar[str] = "ets"
    cost: ClassVar[int] = 2

    def __init__(self) -> None:
        self.step = 0.0
        self.anchor = 0.0
        self.profile: FloatArray = np.zeros(0)
        self.offset = 1.0
        self.alpha = 0.5
        self.level = 0.0
        self.sigma = 0.0

    def fit(self, history: Series) -> None:
        history = prepared(history)
        n = round(season_for(observed_span(history)) / history.step)
        self.step = history.step
        self.anchor = history.end - (n - 1) * history.step
        observed = history.values[~np.isnan(history.values)]
        self.offset = max(float(observed.mean()) * OFFSET_FRACTION, 1e-6)
        z = np.log(history.values + self.offset)
        filled = _fill(z, n)
        self.profile = _seasonal_profile(filled, n)
        adjusted = z - self._season(history.times())
        self.alpha = _smoothing_weight(_fill(adjusted, n))
        self.level, self.sigma = _final_level(adjusted, self.alpha)

    def _season(self, times: FloatArray) -> FloatArray:
        phase = np.rint((times - self.anchor) / self.step).astype(np.int64) % self.profile.size
        return self.profile[phase]

    def predict(self, recent: Series, steps: int) -> FloatArray:
        if self.profile.size == 0:
            raise FitError("ets model used before fit")
        keep = _memory(self.alpha, self.profile.size)
        window = recent.values[-keep:]
        times = recent.times()[-keep:] if window.size else np.zeros(0)
        x = np.log(np.maximum(window, 0.0) + self.offset) - self._season(times)
        x = x[np.isfinite(x)]
        weights = self.alpha * (1 - self.alpha) ** np.arange(x.size - 1, -1, -1, dtype=np.float64)
        level = float((1 - self.alpha) ** x.size * self.level + weights @ x)
        future = recent.end + self.step * np.arange(1, steps + 1, dtype=np.float64)
        out: FloatArray = np.maximum(np.exp(level + self._season(future)) - self.offset, 0.0)
        return out

    def predict_at(self, history: Series, ends: npt.NDArray[np.int64], steps: int) -> FloatArray:
        """`predict` from every origin `history.values[: i + 1]`, i in `ends`: row k equals
        `predict(history.until(origin k), steps)` bit for bit (models.origins relies on it).
        The log-scale adjusted values are computed once for the whole history (elementwise,
        the same numbers); each origin's level is still its own dot product."""
        if self.profile.size == 0:
            raise FitError("ets model used before fit")
        ends = np.asarray(ends, dtype=np.int64)
        keep = _memory(self.alpha, self.profile.size)
        adjusted = np.log(np.maximum(history.values, 0.0) + self.offset)
        adjusted = adjusted - self._season(history.times())
        weights = self.alpha * (1 - self.alpha) ** np.arange(keep - 1, -1, -1, dtype=np.float64)
        level = np.empty(ends.size)
        for row, i in enumerate(ends.tolist()):
            x = adjusted[max(0, i + 1 - keep) : i + 1]
            x = x[np.isfinite(x)]
            level[row] = (1 - self.alpha) ** x.size * self.level + weights[keep - x.size :] @ x
        end_times = history.start + ends * history.step
        future = end_times[:, None] + self.step * np.arange(1, steps + 1, dtype=np.float64)
        out: FloatArray = np.maximum(
            np.exp(level[:, None] + self._season(future)) - self.offset, 0.0
        )
        return out

    def interval(self, p50: FloatArray, quantile: float) -> FloatArray:
        """ETS(A,N,N) prediction interval on the log scale: sigma * sqrt(1 + (h - 1) alpha^2)."""
        h = np.arange(1, p50.size + 1, dtype=np.float64)
        sigma = self.sigma * np.sqrt(1 + (h - 1) * self.alpha**2)
        return lognormal_upper(p50, offset=self.offset, sigma=sigma, quantile=quantile)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "anchor": self.anchor,
            "profile": [float(v) for v in self.profile],
            "offset": self.offset,
            "alpha": self.alpha,
            "level": self.level,
            "sigma": self.sigma,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        model = cls()
        try:
            model.step = float(data["step"])
            model.anchor = float(data["anchor"])
            model.profile = np.asarray(data["profile"], dtype=np.float64)
            model.offset = float(data["offset"])
            model.alpha = float(data["alpha"])
            model.level = float(data["level"])
            model.sigma = float(data["sigma"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtefactError(f"ets artefact is malformed: {exc!r}") from exc
        if model.profile.ndim != 1 or model.profile.size == 0 or model.step <= 0:
            raise ArtefactError("ets artefact: empty profile or non-positive step")
        if not (0 < model.alpha <= 1) or not np.isfinite(model.profile).all():
            raise ArtefactError("ets artefact: alpha outside (0, 1] or a non-finite profile")
        return model


def _fill(z: FloatArray, n: int) -> FloatArray:
    """Missing points -> the median of the same phase in other cycles, else interpolation."""
    missing = np.isnan(z)
    if not missing.any():
        return z
    pad = (-z.size) % n
    cycles = np.concatenate([np.full(pad, np.nan), z]).reshape(-1, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN phases: interpolated below
        by_phase = np.nanmedian(cycles, axis=0)
    out = np.where(missing, np.tile(by_phase, cycles.shape[0])[pad:], z)
    still = np.isnan(out)
    if still.all():
        raise FitError("history has no observed values")
    if still.any():
        idx = np.arange(out.size)
        out[still] = np.interp(idx[still], idx[~still], out[~still])
    return out


def _seasonal_profile(z: FloatArray, n: int) -> FloatArray:
    """The last cycle of STL's seasonal component (one de-meaned cycle when fewer than two, or
    when a cycle is a single point: a step as long as the season, which STL cannot split)."""
    if n < 2 or z.size < 2 * n or np.ptp(z) < 1e-12:
        last = z[-n:]
        last = np.concatenate([np.full(n - last.size, last.mean()), last])
        flat: FloatArray = last - last.mean()
        return flat
    from statsmodels.tsa.seasonal import STL

    trend = _odd(1.5 * n / (1 - 1.5 / STL_SEASONAL))
    low_pass = _odd(n + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # statsmodels' numerical chatter is not ours to raise
        result = STL(
            z,
            period=n,
            seasonal=STL_SEASONAL,
            trend=trend,
            low_pass=low_pass,
            robust=True,
            seasonal_jump=math.ceil(STL_SEASONAL / 10),
            trend_jump=math.ceil(trend / 10),
            low_pass_jump=math.ceil(low_pass / 10),
        ).fit(outer_iter=STL_ROBUST_PASSES)
    seasonal: FloatArray = np.asarray(result.seasonal, dtype=np.float64)[-n:]
    return seasonal - float(seasonal.mean())


def _odd(x: float) -> int:
    k = math.ceil(x)
    return k if k % 2 else k + 1


def _smoothing_weight(adjusted: FloatArray) -> float:
    """alpha of ETS(A,N,N) by maximum likelihood (statsmodels); 0.5 on a flat series."""
    if np.ptp(adjusted) < 1e-12:
        return 0.5
    from statsmodels.tsa.holtwinters import ExponentialSmoothing

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = ExponentialSmoothing(
                adjusted, trend=None, seasonal=None, initialization_method="estimated"
            ).fit()
        alpha = float(fitted.params["smoothing_level"])
    except (ValueError, np.linalg.LinAlgError) as exc:
        raise FitError(f"ets: exponential smoothing did not fit: {exc}") from exc
    return float(np.clip(finite_or(alpha, 0.5), 1e-4, 1.0))


def _final_level(adjusted: FloatArray, alpha: float) -> tuple[float, float]:
    """Level after the smoothing recursion over observed points, and its one-step error std."""
    x = adjusted[np.isfinite(adjusted)]
    level = float(x[: min(x.size, 12)].mean())
    errors = np.empty(x.size)
    for i, value in enumerate(x):
        errors[i] = value - level
        level += alpha * errors[i]
    sigma = float(errors[1:].std()) if x.size > 2 else 0.0
    return level, sigma


def _memory(alpha: float, season: int) -> int:
    if alpha >= 1:
        return 1
    n = math.log(MEMORY) / math.log(1 - alpha)
    return int(min(max(math.ceil(n), 12), max(season, 12)))
