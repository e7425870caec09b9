"""Forecast drift: is the forecast made lead-time ago still worth acting on? Pure: no clock, no I/O.

`DriftMonitor` is fed (time, actual, forecast_p50, forecast_upper) for forecasts made lead time
earlier and keeps three views of their error:
- coverage: share of the recent actuals at or under the calibrated upper quantile (~95% when the
  forecast is healthy);
- WAPE: sum |actual - p50| / sum actual over the same recent points;
- a two-sided CUSUM on standardised residuals z = (actual - p50) / sigma, sigma read off the
  calibrated band (upper - p50 is z_q sigmas), so it needs no per-trace scale.

State machine: OK -> FALLBACK when the error *stays* past a threshold (the CUSUM trips, or the
recent coverage collapses); FALLBACK -> OK only after RELEASE_AFTER consecutive healthy points,
each within Z_HEALTHY sigmas of the forecast (hysteresis: entering needs sustained error,
leaving needs sustained accuracy). While in fallback another refit is requested every
RETRAIN_AGAIN observations. Entering fallback raises `retrain_requested`; the owner clears it
with `take_retrain()` when it has scheduled the refit.

`DriftTracker` keeps the forecasts made at each origin until their actuals arrive, and feeds the
monitor the one made lead time before each actual: the live engine and the replay both use it.

Windows are counted in observations (one per model step: 5 min in the engine), not in seconds.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum
from statistics import NormalDist

import numpy as np

from models.base import Forecast, Series

WINDOW = 12
"""Observations in the rolling coverage/WAPE window: an hour at the engine's 5-minute model step,
long enough that one or two misses (5% of points miss by design) cannot look like collapse."""
COVERAGE_ENTER = 0.5
"""Enter fallback when fewer than half of the last WINDOW actuals were covered by the P95 band.
With a calibrated band misses are ~5%: six misses in twelve is a broken forecast, not bad luck
(binomial probability ~1e-5 even before allowing for correlated errors)."""
Z_CLIP = 4.0
"""Standardised residuals are clipped here: a single outlier (a launch-day spike, a lost scrape)
adds at most Z_CLIP - CUSUM_K to the CUSUM and so can never trip it alone."""
CUSUM_K = 0.5
"""CUSUM allowance in sigmas: the textbook choice to detect a sustained shift of about 1 sigma."""
CUSUM_H = 8.0
"""CUSUM decision threshold in sigmas: three consecutive points far outside the band (3 x 3.5)
trip it, as do ~16 points with a 1-sigma bias; a healthy forecast practically never does."""
RELEASE_AFTER = 6
"""Consecutive healthy observations needed to leave fallback: half an hour at the engine's
5-minute step. Healthy: the CUSUM, restarted when fallback began, stays under half its threshold
and the point is not a clipped outlier. A forecast still off pushes the CUSUM past that within
a few points, so it keeps failing the run; a recovered one passes it in about RELEASE_AFTER."""
RETRAIN_AGAIN = 288
"""Observations in fallback (a day at a 5-minute step) after which another refit is requested:
a refit right after a regime change sees little of the new regime, the next one sees more."""
SCALE_FLOOR = 0.01
"""Sigma is never below 1% of the forecast (or actual) level, so a collapsed band is not a
division by zero."""


class DriftState(StrEnum):
    OK = "ok"
    FALLBACK = "fallback"


@dataclass(frozen=True)
class Accuracy:
    """What the monitor exports as metrics."""

    state: DriftState
    coverage: float
    """Share of the last WINDOW actuals at or under the upper forecast (NaN before any)."""
    wape: float
    """Weighted absolute percentage error of the p50 over the last WINDOW actuals (NaN before)."""
    cusum_high: float
    """Evidence (in sigmas) that actuals run above the forecast."""
    cusum_low: float
    """Evidence (in sigmas) that actuals run below the forecast."""
    observations: int
    """Actuals scored so far."""


@dataclass
class DriftMonitor:
    """Accuracy of the forecasts made lead time earlier, and the fallback state they imply."""

    quantile: float = 0.95
    state: DriftState = DriftState.OK
    retrain_requested: bool = False
    observations: int = 0
    cusum_high: float = 0.0
    cusum_low: float = 0.0
    healthy_run: int = 0
    unhealthy_for: int = 0
    """Observations since fallback was entered."""
    recent: deque[tuple[bool, float, float]] = field(default_factory=lambda: deque(maxlen=WINDOW))
    """(covered, |actual - p50|, actual) of the last WINDOW observations."""

    @property
    def in_fallback(self) -> bool:
        return self.state is DriftState.FALLBACK

    def observe(self, at: float, actual: float, p50: float, upper: float) -> None:
        """Score one actual against the forecast made for it; a missing actual is not scored,
        a non-finite forecast counts as a full miss."""
        del at  # kept in the signature so callers pass pairs in time order, and for logs
        if not math.isfinite(actual):
            return
        z, covered = self._standardised(actual, p50, upper)
        self.observations += 1
        self.recent.append((covered, abs(actual - p50) if math.isfinite(p50) else actual, actual))
        self.cusum_high = max(0.0, self.cusum_high + z - CUSUM_K)
        self.cusum_low = max(0.0, self.cusum_low - z - CUSUM_K)
        if self.state is DriftState.OK:
            if self._tripped():
                self.state = DriftState.FALLBACK
                self.retrain_requested = True
                self.healthy_run = self.unhealthy_for = 0
                self.cusum_high = self.cusum_low = 0.0  # restart: evidence after the alarm
            return
        if max(self.cusum_high, self.cusum_low) >= CUSUM_H:
            self.cusum_high = self.cusum_low = 0.0  # still drifting: weigh fresh evidence only
        healthy = max(self.cusum_high, self.cusum_low) < CUSUM_H / 2 and abs(z) < Z_CLIP
        self.healthy_run = self.healthy_run + 1 if healthy else 0
        self.unhealthy_for += 1
        if self.unhealthy_for % RETRAIN_AGAIN == 0:
            self.retrain_requested = True
        if self.healthy_run >= RELEASE_AFTER:
            self.state = DriftState.OK
            self.healthy_run = 0

    def take_retrain(self) -> bool:
        """True when a refit is due (on entering fallback, then every RETRAIN_AGAIN points in
        it); clears the request, so the owner refits once per request."""
        wanted, self.retrain_requested = self.retrain_requested, False
        return wanted

    def coverage(self) -> float:
        if not self.recent:
            return math.nan
        return sum(1 for covered, _, _ in self.recent if covered) / len(self.recent)

    def wape(self) -> float:
        total = sum(actual for _, _, actual in self.recent)
        if not self.recent or total <= 0:
            return math.nan
        return sum(err for _, err, _ in self.recent) / total

    def accuracy(self) -> Accuracy:
        return Accuracy(
            state=self.state,
            coverage=self.coverage(),
            wape=self.wape(),
            cusum_high=self.cusum_high,
            cusum_low=self.cusum_low,
            observations=self.observations,
        )

    def _tripped(self) -> bool:
        collapsed = len(self.recent) == WINDOW and self.coverage() < COVERAGE_ENTER
        return collapsed or max(self.cusum_high, self.cusum_low) >= CUSUM_H

    def _standardised(self, actual: float, p50: float, upper: float) -> tuple[float, bool]:
        if not (math.isfinite(p50) and math.isfinite(upper)):
            return Z_CLIP, False
        z_q = NormalDist().inv_cdf(min(max(self.quantile, 0.51), 0.999))
        floor = SCALE_FLOOR * max(abs(p50), abs(actual), 1e-9)
        sigma = max((upper - p50) / z_q, floor)
        z = (actual - p50) / sigma
        return float(np.clip(z, -Z_CLIP, Z_CLIP)), actual <= upper + 1e-9


@dataclass
class DriftTracker:
    """Forecasts awaiting their actuals; scores each actual against the forecast made
    `lead_time` before it (at least one step ahead)."""

    lead_time: float
    monitor: DriftMonitor = field(default_factory=DriftMonitor)
    pending: dict[float, Forecast] = field(default_factory=dict)
    """Forecasts by origin (the time of their first point)."""
    scored_until: float = -math.inf
    """Time of the newest actual already scored."""

    def record(self, forecast: Forecast) -> None:
        """Keep a forecast (the first one made for an origin wins: it is the one made earliest)."""
        if math.isfinite(forecast.origin):
            self.pending.setdefault(_key(forecast.origin), forecast)

    def score(self, series: Series) -> int:
        """Feed the monitor every actual of `series` newer than the last one scored; returns
        how many were scored. Forecasts too old to be needed again are dropped."""
        if not self.pending:  # nothing to score against: skip, not walk, the history
            self.scored_until = max(self.scored_until, series.end)
            return 0
        new = series.since(max(series.start, self.scored_until + series.step))
        scored = 0
        for at, actual in zip(new.times(), new.values, strict=True):
            match = self._forecast_for(float(at), series.step)
            if match is not None and math.isfinite(actual):
                p50, upper = match
                self.monitor.observe(float(at), float(actual), p50, upper)
                scored += 1
            self.scored_until = float(at)
        self._forget(series.step)
        return scored

    def ahead(self, step: float) -> int:
        """Steps ahead of its origin's last observation the scored forecast point is."""
        return max(1, round(self.lead_time / step))

    def _forecast_for(self, at: float, step: float) -> tuple[float, float] | None:
        index = self.ahead(step) - 1
        forecast = self.pending.get(_key(at - index * step))
        if forecast is None or forecast.step != step or index >= forecast.p50.size:
            return None
        upper = forecast.upper if forecast.measured_upper is None else forecast.measured_upper
        return float(forecast.p50[index]), float(upper[index])

    def _forget(self, step: float) -> None:
        oldest = self.scored_until - self.ahead(step) * step
        for origin in [o for o in self.pending if o <= oldest]:
            del self.pending[origin]


def _key(t: float) -> float:
    """Times as dictionary keys, immune to float noise below a millisecond."""
    return round(t, 3)
