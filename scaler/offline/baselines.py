"""The yardstick's reference policies of DESIGN.md, as replica requests over a whole trace. Pure.

- reactive: D[t] = ceil((1 + headroom) * L[t-1] / c), held for a scale-down stabilisation window
  as the HPA does (the highest recommendation of the last `stabilisation` seconds);
- oracle: D[t] = max required[t..t+k], perfect foresight of the load and of the cold start.

Every baseline sees the load the way the policy does: D[t] uses L[..t-1] only (the oracle is the
one that may look ahead, on purpose), and a missing L[t-1] holds the previous request, as the HPA
keeps the current scale when its metric is unavailable.
"""

from __future__ import annotations

import math

import numpy as np

from scaler.offline import yardstick
from scaler.offline.yardstick import FloatArray, IntArray

STABILISATION = 300.0
"""Seconds of the HPA's default scale-down stabilisation window (behavior.scaleDown)."""

HEADROOMS: tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(61))
"""Static headrooms of the frontier: 0%, 5%, ... 300%."""


def stabilisation_steps(step: float, window: float = STABILISATION) -> int:
    """Recommendations (one per step) that fall within the window, the current one included."""
    return max(1, math.ceil(window / step - 1e-9))


def reactive(load: FloatArray, *, threshold: float, step: float, headroom: float = 0.0) -> IntArray:
    """The reactive autoscaler with a static headroom (0.2 = 20% more than the load needs)."""
    previous = _held(np.concatenate([[np.nan], load[:-1]]))
    raw = yardstick.required((1.0 + headroom) * previous, threshold)
    return _stabilised(raw, stabilisation_steps(step))


def oracle(load: FloatArray, *, threshold: float, k: int) -> IntArray:
    """max required[t..t+k]: asks at t for what is needed when a replica asked now is ready."""
    need = yardstick.required(load, threshold)
    out = need.copy()
    for lead in range(1, k + 1):
        ahead = np.concatenate([need[lead:], np.zeros(lead, dtype=np.int64)])
        out = np.maximum(out, ahead)
    return out


def _held(values: FloatArray) -> FloatArray:
    """Each missing value replaced by the last one seen before it (NaN before the first)."""
    seen = np.where(np.isfinite(values), np.arange(values.size), -1)
    last = np.maximum.accumulate(seen) if values.size else seen
    out: FloatArray = np.where(last >= 0, values[np.maximum(last, 0)], np.nan)
    return out


def _stabilised(raw: IntArray, w: int) -> IntArray:
    out = raw.copy()
    for lag in range(1, w):
        out = np.maximum(out, np.concatenate([np.zeros(lag, dtype=np.int64), raw[:-lag]]))
    return out
