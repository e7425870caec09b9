"""The seasonal-naive reference: the load at the same time one season earlier (a week, or a day
for a history shorter than two weeks), scaled by how the last hour compares with the same hour
one season earlier.

It is the yardstick the backtest reports every model against (DESIGN.md "same time one week
earlier, level-corrected"), not a candidate for `model: auto`. Its P95 goes through the same
conformal calibration as every model, so the comparison is between calibrated quantiles, not
between a model and a strawman without an interval. Its band, like every model's, is purely
relative to its forecast, as when issue 7's goal (at most 0.85x its pinball loss) was set
(docs/forecasting.md "The band's level power": calibrated at a measured power, an experiment
removed after c21b1a4, it was a better forecaster than that goal was set against).
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
from models.origins import IntArray

LEVEL_WINDOW = HOUR
LEVEL_CLIP = (0.25, 4.0)
"""Bounds of the level factor: one odd hour must not blow the reference up (or down)."""
LOOKBACK_CYCLES = 4
"""A value missing one season back is taken from up to this many seasons back."""


class SeasonalNaive:
    """y(t + h) = y(t + h - season) x level, level = last hour / same hour a season earlier."""

    kind: ClassVar[str] = "naive"
    cost: ClassVar[int] = 0

    def __init__(self) -> None:
        self.period = 0.0
        self.step = 0.0
        self.offset = 1.0
        self.sigma = 0.0

    @property
    def reach(self) -> float:
        """Seconds of history before an origin that `predict` may read (a value missing one
        season back is taken from up to LOOKBACK_CYCLES seasons back): more than the adaptive
        tracker's CONTEXT once the season is a week, so models.manyorigin grades the tracker's
        forecasts on the history it sees, not the whole prefix."""
        return LOOKBACK_CYCLES * self.period

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

    def predict_at(self, history: Series, ends: IntArray, steps: int) -> FloatArray:
        """`predict` from every origin `history.values[: i + 1]`, i in `ends`, in one numpy
        pass: row k equals `predict(history.until(origin k), steps)` bit for bit
        (models.origins; the backtest grades this reference at every origin). An origin whose
        level window has a gap takes `level` on its prefix."""
        ends = np.asarray(ends, dtype=np.int64)
        n = round(self.period / self.step)
        v = history.values
        known = ~np.isnan(v)
        # the newest observed value up to each origin: what `predict` falls back on
        newest = np.maximum.accumulate(np.where(known, np.arange(v.size), -1))[ends]
        out = np.where(newest >= 0, v[np.maximum(newest, 0)], 0.0)[:, None].repeat(steps, axis=1)
        target = ends[:, None] + np.arange(1, steps + 1)[None, :]
        found = np.zeros(target.shape, dtype=bool)
        for cycle in range(1, LOOKBACK_CYCLES + 1):  # as _past, one season back at a time
            j = target - cycle * n
            seen = (j >= 0) & (j <= ends[:, None])
            index = np.clip(j, 0, v.size - 1)
            take = ~found & seen & known[index]
            out[take] = v[index[take]]
            found |= take
        return np.maximum(out * self._levels(history, ends, n)[:, None], 0.0)

    def _levels(self, history: Series, ends: IntArray, n: int) -> FloatArray:
        """`level` on each origin's prefix: the whole windows as row sums (the same sums
        `level` takes), a window with a gap by `level` itself."""
        w = max(1, round(LEVEL_WINDOW / self.step))
        v = history.values
        out = np.ones(ends.size)
        rows = np.flatnonzero(ends + 1 >= n + w)
        if rows.size == 0:
            return out
        span = ends[rows, None] + 1 - w + np.arange(w)[None, :]
        now, then = v[span], v[span - n]
        whole = ~(np.isnan(now) | np.isnan(then)).any(axis=1)
        full = rows[whole]
        floor = self.offset * w
        ratio = (now[whole].sum(axis=1) + floor) / (then[whole].sum(axis=1) + floor)
        out[full] = np.clip(ratio, *LEVEL_CLIP)
        for k in rows[~whole].tolist():
            prefix = Series(history.start, history.step, v[: ends[k] + 1])
            out[k] = self.level(prefix, n)
        return out

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
