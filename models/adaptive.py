"""Adaptive conformal inference (Gibbs & Candes 2021): keep a calibrated band honest online.

A split-conformal table is measured once on a window before the fit; when the load turns burstier
after it, the band misses more often than it says until the table is re-measured. ACI closes the
loop step by step: every graded forecast that missed widens the band, every one that held
narrows it, by a learning rate chosen so that the long-run miss rate is the target one whatever
the load does (the guarantee needs no exchangeability, only bounded widening).

Here the widening is a factor on the table's spread above the median (`Calibration.widen`):
upper = median offset + (quantile offset - median offset) x (1 + widen), per horizon step. A factor
is unitless, holds for every horizon step and every quantile at once, and `widen = -1` is the
median itself, the natural floor.

Pure: `update` is a function of the widening and the misses just graded; `Tracker` replays it
along a series, with no clock and no I/O.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from models.base import FloatArray, Series

MAX_WIDEN_SPREADS = 1.0
"""Ceiling of the widening, in units of 1 / miss target: the band may grow to 1 / alpha times its
calibrated spread (20x at P95). Past that the misses are an outage, not noise, and drift
detection, not the band, must answer; the ceiling bounds how long recovery takes."""


def learning_rate(*, miss_target: float, window: int) -> float:
    """Step size of the widening per graded step.

    Chosen so that a sustained miss rate of twice the target (the band is clearly too narrow)
    widens the band by one calibrated spread within `window` graded steps: the drift per step is
    rate x (2 alpha - alpha), so rate = 1 / (alpha x window). With the window one recalibration
    period (a day), ACI reacts at least as fast as re-measuring the table, and by Gibbs & Candes'
    bound the miss rate over T steps is within (1 + rate x (1 + ceiling)) / (rate x T) of alpha.
    """
    if not (0 < miss_target < 1) or window < 1:
        raise ValueError(f"miss target {miss_target} must be in (0, 1) and window {window} >= 1")
    return 1.0 / (miss_target * window)


def ceiling(miss_target: float) -> float:
    """The largest widening (see MAX_WIDEN_SPREADS)."""
    return MAX_WIDEN_SPREADS / miss_target


def update(widen: float, misses: FloatArray, *, miss_target: float, rate: float) -> float:
    """The widening after grading `misses` (1 = the actual was above the band, 0 = under it;
    NaN = not graded): widen + rate x (miss rate - target), bounded to [-1, ceiling]."""
    graded = misses[np.isfinite(misses)]
    if graded.size == 0:
        return widen
    moved = widen + rate * (float(graded.mean()) - miss_target)
    return float(min(max(moved, -1.0), ceiling(miss_target))) if math.isfinite(moved) else widen


Band = Callable[[Series, float], FloatArray]
"""The calibrated upper path from origin `past.end` at a given widening."""


@dataclass
class Tracker:
    """The widening along a series, graded origin by origin, kept so that the next step costs
    one forecast rather than a replay since the fit.

    `advance` is a pure function of the series it is given (and the band function): when the
    series is not a continuation of the one seen before (another start, a rewritten past, a
    shorter history), the state is rebuilt from scratch, so every replica that sees the same
    data computes the same widening whatever it computed before.
    """

    miss_target: float
    rate: float
    steps: int
    start: float = math.nan
    seen: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    widen: float = 0.0
    rows: deque[tuple[int, FloatArray]] = field(default_factory=deque, repr=False)
    """(origin index, calibrated upper path) of the forecasts not yet fully graded."""

    def advance(self, data: Series, *, first: int, band: Band) -> float:
        """The widening in force for a forecast from `data.end`: misses graded on every actual
        from origin `first` (the first forecast after the fit) to `data.end`. `band(past, widen)`
        is the calibrated upper path from origin `past.end` at that widening."""
        values = data.values
        if not self._continues(data):
            self.start, self.seen, self.widen, self.rows = data.start, values[:0], 0.0, deque()
        for t in range(max(first, self.seen.size), values.size):
            self._grade(t, float(values[t]))
            past = Series(data.start, data.step, values[: t + 1])
            self.rows.append((t, band(past, self.widen)))
        self.seen = values
        return self.widen

    def _continues(self, data: Series) -> bool:
        n = self.seen.size
        return (
            data.start == self.start
            and n <= data.values.size
            and np.array_equal(data.values[:n], self.seen, equal_nan=True)
        )

    def _grade(self, t: int, actual: float) -> None:
        while self.rows and self.rows[0][0] < t - self.steps:
            self.rows.popleft()  # every point of that forecast has been graded
        if not math.isfinite(actual):
            return
        misses = [
            float(actual > row[t - j - 1] + 1e-9) for j, row in self.rows if t - j <= len(row)
        ]
        self.widen = update(
            self.widen, np.asarray(misses), miss_target=self.miss_target, rate=self.rate
        )
