"""What a healthy forecast's errors look like to the drift monitor: band units, the two windows,
the design false-alarm rate and `Null`, the limits a window's mean is tested against. Pure: no
clock, no I/O. Measuring a null on a model's calibration backtest is drift_measure.py's job (the
`null_from`, `miss_limit`, `run_limit` and `routine_gap` named below); testing errors against
it as they arrive is drift.py's (`DriftMonitor.observe`).

Each error is put in *band-sigmas* on a log scale (`band_units`): log(actual / p50) over
log(upper / p50) / 1.645, so a healthy point has a spread of about 1 and load x3 or x0.3 are
errors of the same size. Two windowed means are tested, a short one (SHORT_SPAN: a step change
engages fallback within half an hour) and a long one (LONG_SPAN: a sustained moderate bias), each
against the distribution it has on the model's own out-of-sample errors. Each window's limit is
set so that the chance a healthy window passes it, summed over both windows and both sides, is
ALARMS_PER_WEEK per week of observations (`side_chance`). Without a measured null (no model yet,
too short a backtest) the `conservative` one assumes errors perfectly correlated across the
window: a windowed mean as spread out as a single error, with the Gaussian limit for the design
rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from models.base import HOUR, WEEK, FloatArray

SHORT_SPAN = 0.5 * HOUR
"""Seconds the short window spans: a step change (load x3, x0.3, an outage) must engage fallback
within half an hour, so its evidence is weighed over that long."""
LONG_SPAN = 6 * HOUR
"""Seconds the long window spans: a bias too small to trip the short window but kept up for
hours (a slow drift of the level) shows up here."""
MIN_WINDOW = 2
"""Fewest observations in a window: on a coarse step (30 min) one point alone is never an alarm."""
ALARMS_PER_WEEK = 0.25
"""Design false-alarm rate: the summed chance per week of observations that a healthy forecast's
windowed mean leaves its band, one per four weeks. The goal is at most one per 7 days (one per
14 in the unit test); the factor of 2-4 is margin for error tails heavier than the Gaussian one
the threshold assumes and for a null measured on one week."""
Z_CLIP = 6.0
"""Errors are clipped at this many band-sigmas: one outlier (a launch-day spike, a lost scrape)
moves a window's mean by at most Z_CLIP / window, so it never trips the short window alone,
while a window of sustained misses can still pass the conservative null's threshold (about 4)."""
BAND_FLOOR = 0.01
"""The band is never narrower than 1% above the forecast, so a collapsed band is not a division
by zero."""
Z_P95 = NormalDist().inv_cdf(0.95)
TESTS = 3
"""Tests the design rate is shared by: the short and the long window's means and the long
window's coverage misses, each on two sides."""
SIDES = 2 * TESTS + 1
"""Sides the design rate is shared by: each test's two, and the run test's one (`run_limit`:
consecutive actuals below the band, the only side on which a forecast buys phantom prewarm)."""


@dataclass(frozen=True)
class Null:
    """What the windowed means of band-unit errors look like while the forecast is healthy."""

    windows: tuple[int, int]
    """Observations in the short and the long window."""
    means: tuple[float, float]
    spreads: tuple[float, float]
    """Robust standard deviation of each window's mean (autocorrelation included)."""
    z: float
    """Threshold in spreads (`z_for`)."""
    limits: tuple[float, float]
    """mean - means[i] > limits[i] trips window i (see `null_from`): the upper side."""
    samples: int
    """Backtest errors it was measured on (0: the conservative null)."""
    lower: tuple[float, float] | None = None
    """means[i] - mean > lower[i] trips window i: the lower side (None: the same as `limits`).
    The sides are measured apart: a launch-day spike in the calibration week must not blind the
    monitor to an outage."""
    misses: tuple[int, int] | None = None
    """More actuals than this above the upper band (u > 1.645), or below its mirror image
    (u < -1.645), in the long window trip it (`miss_limit`); None: no miss test (the
    conservative null, or a null stored before the test existed)."""
    run: int | None = None
    """This many consecutive actuals below the band's lower mirror (u < -1.645) trip the run
    test (`run_limit`, on the calibration's errors scaled to the band: `null_from`) at once;
    None: no run test (the conservative null, a stored older null)."""
    routine_gap: float = 0.0
    """Seconds of the longest gap between actuals that the calibration backtest held more than
    once (`routine_gap`): a load that routinely stops (a call centre at night) has gaps that
    long while its forecast is healthy, so only a longer gap restarts trust (`observe`)."""

    def sides(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(upper, lower) limits of each window."""
        return self.limits, self.limits if self.lower is None else self.lower

    @classmethod
    def conservative(cls, step: float) -> Null:
        """No measurement: errors centred, as spread as a calibrated band implies for one point
        (one band-sigma), and perfectly correlated across a window."""
        z = z_for(step)
        return cls(
            windows=windows(step),
            means=(0.0, 0.0),
            spreads=(1.0, 1.0),
            z=z,
            limits=(z, z),
            samples=0,
        )

    def tripped(self, short: float, long: float, misses: tuple[int, int] = (0, 0)) -> bool:
        """A window's mean past its limit, or the long window's (upper, lower) `misses` count
        past the miss test's."""
        upper, lower = self.sides()
        return self.missed(misses) or any(
            math.isfinite(m) and (m - mu > up or mu - m > low)
            for m, mu, up, low in zip((short, long), self.means, upper, lower, strict=True)
        )

    def missed(self, misses: tuple[int, int]) -> bool:
        """More misses above or below the band in the long window than the miss test allows."""
        return self.misses is not None and (
            misses[0] > self.misses[0] or misses[1] > self.misses[1]
        )

    def gross(self, short: float) -> bool:
        """The short window is past its limit and past the conservative null's (a windowed mean
        as spread as one error: a shift no burst of healthy errors reaches at the design rate)."""
        (up, _), (low, _) = self.sides()
        d = short - self.means[0]
        return math.isfinite(short) and (d > max(up, self.z) or -d > max(low, self.z))

    def settled(self, short: float, long: float) -> bool:
        """The short window is back within half its limit and the long one, full again since
        fallback began, within its limit: a forecast earns trust back over hours, not minutes."""
        (up_s, up_l), (low_s, low_l) = self.sides()
        ds, dl = short - self.means[0], long - self.means[1]
        return (
            math.isfinite(short)
            and math.isfinite(long)
            and -low_s / 2 <= ds <= up_s / 2
            and -low_l <= dl <= up_l
        )


def windows(step: float) -> tuple[int, int]:
    """Observations in the short and long window at one observation per `step` seconds."""
    short = max(MIN_WINDOW, math.floor(SHORT_SPAN / step + 1e-9))
    return short, max(short + 1, math.floor(LONG_SPAN / step + 1e-9))


def z_for(step: float) -> float:
    """The threshold (in spreads) whose two-sided, two-window exceedance chance per week of
    observations is ALARMS_PER_WEEK."""
    return NormalDist().inv_cdf(1 - side_chance(step))


def side_chance(step: float) -> float:
    """Chance per observation that one side of one test may pass its limit while healthy:
    ALARMS_PER_WEEK spread over a week of observations and SIDES sides of the tests."""
    return ALARMS_PER_WEEK / (SIDES * max(WEEK / step, 1.0))


def band_units(actual: FloatArray, p50: FloatArray, upper: FloatArray, level: float) -> FloatArray:
    """Errors in band units, on a log scale: log((actual + c) / (p50 + c)) over the same log
    ratio of the calibrated upper band, divided by 1.645 (the P95 of a healthy point is ~1.645
    band-sigmas up), clipped at +-Z_CLIP; a non-finite forecast is a full miss (+Z_CLIP).

    On a log scale load x3 and x0.3 are errors of the same size: a drop to zero on a band as wide
    as the forecast is still far outside it, where a linear ratio could never pass -1. `level`
    (c) is the model's residual floor (a tenth of the mean load), so ratios near zero stay sane.
    """
    c = max(level, 1e-9)
    base = np.maximum(p50, 0.0) + c
    band = np.maximum(np.log((np.maximum(upper, 0.0) + c) / base), math.log1p(BAND_FLOOR))
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.log((np.maximum(actual, 0.0) + c) / base) / (band / Z_P95)
    u = np.where(np.isfinite(p50) & np.isfinite(upper), u, Z_CLIP)
    out: FloatArray = np.clip(u, -Z_CLIP, Z_CLIP)
    return out


def band_unit(actual: float, p50: float, upper: float, level: float) -> float:
    """`band_units` of one point, without numpy's per-call overhead (the monitor's hot path)."""
    if not (math.isfinite(p50) and math.isfinite(upper)):
        return Z_CLIP
    c = max(level, 1e-9)
    base = max(p50, 0.0) + c
    band = max(math.log((max(upper, 0.0) + c) / base), math.log1p(BAND_FLOOR))
    u = math.log((max(actual, 0.0) + c) / base) / (band / Z_P95)
    return min(max(u, -Z_CLIP), Z_CLIP)
