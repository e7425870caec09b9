"""Forecast accuracy by horizon, for metrics only: every forecast is kept until its points have
met their actuals, and each actual is scored against the forecasts made 1, 2, ... steps before
it at a fixed set of horizons (`HORIZONS`, plus the target's lead time).

Pure: no clock, no I/O. It never feeds a decision (scaler.decision.drift does that); it answers
"how good is the forecast 30 minutes out?" on the dashboard. A score is (actual, median,
upper at the target's quantile), from which the telemetry counts coverage, absolute error and
pinball loss, so Prometheus can take any window's ratio with increase().
"""

from __future__ import annotations

import functools
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from models.base import Forecast, Series

HORIZONS = (300.0, 600.0, 900.0, 1800.0, 3600.0, 7200.0, 10800.0, 21600.0)
"""Seconds ahead scored (each rounded to a whole number of model steps): a fixed set, so the
`horizon` label has at most len(HORIZONS) + 1 values per target."""
WINDOW = 12
"""Scores at the lead time in the rolling pinball-loss gauge (drift.WINDOW for coverage/WAPE)."""


@dataclass(frozen=True)
class Score:
    horizon: float
    """Seconds between the forecast's last observation and the point scored."""
    actual: float
    p50: float
    upper: float

    def covered(self) -> bool:
        return self.actual <= self.upper + 1e-9

    def pinball(self, quantile: float) -> float:
        """Pinball (quantile) loss of the upper forecast at `quantile`, in load units."""
        miss = self.actual - self.upper
        return quantile * miss if miss >= 0 else (quantile - 1.0) * miss


@functools.lru_cache(maxsize=256)
def horizons(lead_time: float, step: float, points: int) -> Mapping[int, float]:
    """Forecast point index -> horizon in seconds, for the fixed horizons and `lead_time` that
    a forecast of `points` points at `step` seconds reaches (cached: it is asked per actual and
    pending forecast, with the same few arguments)."""
    found: dict[int, float] = {}
    for seconds in (*HORIZONS, lead_time):
        index = max(1, round(seconds / step)) - 1
        if index < points:
            found[index] = (index + 1) * step
    return MappingProxyType(found)


@dataclass
class Scorecard:
    """Forecasts of one target awaiting their actuals, and the recent scores at the lead time."""

    lead_time: float
    quantile: float
    pending: dict[float, Forecast] = field(default_factory=dict)
    scored_until: float = -math.inf
    recent: deque[Score] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def record(self, forecast: Forecast) -> None:
        """Keep a forecast; the first one made for an origin wins."""
        if math.isfinite(forecast.origin):
            self.pending.setdefault(round(forecast.origin, 3), forecast)

    def score(self, series: Series) -> list[Score]:
        """Scores of every actual of `series` newer than the last one scored, at each horizon
        a pending forecast covers; forecasts whose every point is past are dropped."""
        if not self.pending:
            self.scored_until = max(self.scored_until, series.end)
            return []
        new = series.since(max(series.start, self.scored_until + series.step))
        scores: list[Score] = []
        for at, actual in zip(new.times(), new.values, strict=True):
            self.scored_until = float(at)
            if math.isfinite(actual):
                scores += self._scores_at(float(at), float(actual), series.step)
        lead = self.lead_horizon(series.step)
        self.recent.extend(s for s in scores if s.horizon == lead)
        self._forget()
        return scores

    def lead_horizon(self, step: float) -> float:
        return max(1, round(self.lead_time / step)) * step

    def pinball(self) -> float:
        """Mean pinball loss of the recent scores at the lead time (NaN before any)."""
        if not self.recent:
            return math.nan
        return sum(s.pinball(self.quantile) for s in self.recent) / len(self.recent)

    def _scores_at(self, at: float, actual: float, step: float) -> list[Score]:
        scores = []
        for forecast in self.pending.values():
            if forecast.step != step:
                continue
            index = round((at - forecast.origin) / step)
            ahead = horizons(self.lead_time, step, forecast.p50.size).get(index)
            if ahead is None or abs(forecast.origin + index * step - at) > 1e-3:
                continue
            upper = forecast.upper if forecast.measured_upper is None else forecast.measured_upper
            p50, top = float(forecast.p50[index]), float(upper[index])
            if math.isfinite(p50) and math.isfinite(top):
                scores.append(Score(ahead, actual, p50, top))
        return scores

    def _forget(self) -> None:
        for origin, forecast in list(self.pending.items()):
            if origin + (forecast.p50.size - 1) * forecast.step <= self.scored_until:
                del self.pending[origin]
