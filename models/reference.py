"""The seasonal-naive reference: the load at the same time one season earlier (a week, or a day
for a history shorter than two weeks), scaled by how the last hour compares with the same hour
one season earlier.

It is the yardstick the backtest reports every model against (DESIGN.md "same time one week
earlier, level-corrected"), not a candidate for `model: auto`. Its P95 goes through the same
conformal calibration as every model, so the comparison is between calibrated quantiles, not
between a model and a strawman without an interval; but a yardstick must not move when the
method it grades does, so its band stays purely relative to its forecast (power 1,
`band_power`), as when issue 7's goal (at most 0.85x its pinball loss) was set. Calibrated at a
measured power like the models, it would be a better forecaster than that goal was set
against: docs/forecasting.md reports both.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np

from models.base import (
    HOUR,
    ArtefactError,
    FloatArray,
    Series,
    lognormal_upper,
    observed_span,
    prepared,
    season_for,
)

LEVEL_WINDOW = HOUR
LEVEL_CLIP = (0.25, 4.0)
"""Bounds of the level factor: one odd hour must not blow the reference up (or down)."""
LOOKBACK_CYCLES = 4
"""A value missing one season back is taken from up to this many seasons back."""


class SeasonalNaive:
    """y(t + h) = y(t + h - season) x level, level = last hour / same hour a season earlier."""

    kind: ClassVar[str] = "naive"
    cost: ClassVar[int] = 0
    band_power: ClassVar[bool] = False
    """The yardstick's band stays purely relative (models.calibrate.level_power)."""

    def __init__(self) -> None:
        self.period = 0.0
        self.step = 0.0
        self.offset = 1.0
        self.sigma = 0.0

    def fit(self, history: Series) -> None:
        history = prepared(history)
        self.period = season_for(observed_span(history))
        self.step = history.step
        n = round(self.period / self.step)
        v = history.values
        observed = v[~np.isnan(v)]
        self.offset = max(float(observed.mean()) * 0.05, 1e-6)
        errors: FloatArray = np.zeros(0)
        if v.size > n:
            errors = np.log(v[n:] + self.offset) - np.log(v[:-n] + self.offset)
            errors = errors[np.isfinite(errors)]
        self.sigma = float(errors.std()) if errors.size > 1 else 0.0

    def predict(self, recent: Series, steps: int) -> FloatArray:
        n = round(self.period / self.step)
        v = recent.values
        last = recent.last_valid()
        fallback = last[1] if last is not None else 0.0
        out = np.empty(steps)
        for h in range(1, steps + 1):
            out[h - 1] = self._past(v, len(v) - 1 + h, n, fallback)
        return np.maximum(out * self.level(recent, n), 0.0)

    def _past(self, v: FloatArray, i: int, n: int, fallback: float) -> float:
        for cycle in range(1, LOOKBACK_CYCLES + 1):
            j = i - cycle * n
            if 0 <= j < v.size and not np.isnan(v[j]):
                return float(v[j])
        return fallback

    def level(self, recent: Series, n: int) -> float:
        w = max(1, round(LEVEL_WINDOW / self.step))
        v = recent.values
        if v.size < n + w:
            return 1.0
        now, then = v[-w:], v[-w - n : v.size - n]
        both = ~np.isnan(now) & ~np.isnan(then)
        if not both.any():
            return 1.0
        floor = self.offset * int(both.sum())
        ratio = (float(now[both].sum()) + floor) / (float(then[both].sum()) + floor)
        return float(np.clip(ratio, *LEVEL_CLIP))

    def interval(self, p50: FloatArray, quantile: float) -> FloatArray:
        """In-sample spread of season-over-season log changes, read as log-normal."""
        return lognormal_upper(
            p50, offset=self.offset, sigma=np.full(p50.size, self.sigma), quantile=quantile
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "step": self.step,
            "offset": self.offset,
            "sigma": self.sigma,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        model = cls()
        try:
            model.period = float(data["period"])
            model.step = float(data["step"])
            model.offset = float(data["offset"])
            model.sigma = float(data["sigma"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ArtefactError(f"naive artefact is malformed: {exc!r}") from exc
        if not (model.step > 0 and model.period >= model.step):
            raise ArtefactError("naive artefact: period and step must be positive")
        return model
