"""Keeping the replicas a decision bought for the steps of its cold start. Pure.

The yardstick serves step u with min(D[u-k..u]) (k = the cold start in steps; scale-down is
immediate): replicas for u must be asked for at u-k and kept by every decision up to u. A
decision only reads its own forecast, though, so when a fresher forecast's band sits lower for
u (a refresh at the model step, a narrower band at a shorter horizon) the decision releases
replicas that an earlier one asked for u and that cannot come back in time: the step is covered
only where every forecast of the last cold start covered it, below the band's own level. On
mongodb_rps_1min, 7 of the 29 minutes short by one replica were released this way at a refresh,
and 235 of its 277 scale-downs fall on the refresh's minute (docs/policy.md "Keeping what was
bought for the cold start").

`Promises` remembers, for each step within the cold start of some decision, the highest
forecast load a decision bought for it; the decision at s then buys at least what was promised
for s..s+k. What a decision promises is its forecast's band at the quantile it read (the
budget's slide included) for each step of its own cold start, capped at the capacity it was
granted (desired x threshold), so nothing the budget refused is carried forward. A replica is
kept at most a cold start past the decision that bought it, and only while a step it was bought
for is still ahead. An experiment, off by default (`scaler backtest --keep-promises`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


def step_path(
    upper: Sequence[float] | npt.NDArray[np.float64],
    *,
    made_at: float,
    model_step: float,
    now: float,
    step: float,
    steps: int,
) -> npt.NDArray[np.float64]:
    """The forecast band per trace step, for the `steps` steps from the one at `now`: the
    forecast's point j (the first being the bucket after the one at `made_at`) covers the
    samples in (made_at + j M, made_at + (j+1) M], M = `model_step`. Steps past the last
    point read the last point; NaN when there is no point."""
    band = np.asarray(upper, dtype=np.float64)
    if band.size == 0:
        return np.full(max(steps, 0), math.nan)
    times = now + step * np.arange(max(steps, 0))
    index = np.ceil((times - made_at) / model_step - 1e-9).astype(np.int64) - 1
    path: npt.NDArray[np.float64] = band[np.clip(index, 0, band.size - 1)]
    return path


class Promises:
    """Per trace step, the highest load a decision within its cold start bought for it."""

    def __init__(self, cold_start_steps: int) -> None:
        self.k = max(0, cold_start_steps)
        self._load: dict[int, float] = {}

    def owed(self, t: int) -> float | None:
        """The highest load promised for steps t..t+k by decisions before t (None: nothing),
        forgetting the steps before t."""
        for u in [u for u in self._load if u < t]:
            del self._load[u]
        due = [v for u, v in self._load.items() if u <= t + self.k]
        return max(due) if due else None

    def promise(
        self, t: int, path: Sequence[float] | npt.NDArray[np.float64], *, granted: float
    ) -> None:
        """Record what the decision at t bought for steps t..t+k: `path` (the band per step,
        from t) capped at the `granted` capacity; non-finite values promise nothing."""
        for i, value in enumerate(np.asarray(path, dtype=np.float64)[: self.k + 1]):
            bought = min(float(value), granted)
            if math.isfinite(bought) and bought > self._load.get(t + i, -math.inf):
                self._load[t + i] = bought
