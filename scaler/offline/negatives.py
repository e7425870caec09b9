"""The one rule `scaler backtest` applies to negative values, from a trace file or from
`--prometheus-url`: a load is never negative, so a negative is either float noise, read as 0,
or a real negative, refused by the caller with where it is and the fix.

Noise: |v| <= NOISE x the largest finite |value| of the series. A difference of counters or
rates (`sum(rate(a)) - sum(rate(b))`, what a query for "in flight" or "pending" often is) is
off by the rounding of its operands, a few ulps (2.2e-16 each) of their size:
`-1.1368683772161603e-13` is one ulp of a value near 1000. 1e-9 leaves room for operands four
million times the series' own peak, and reading such a value as 0 moves the load by a
billionth of its scale, below any replica count. A broken subtraction gives negatives of the
load's own order, far above the bound. A series whose largest |value| is itself noise-sized
(all zeros but for noise) has no scale to measure against, so its negatives are refused.

Pure: numpy only, no I/O. Must not: decide the message (traces.py and prometheus_history.py
name a file's line, or a query's time).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from models.base import FloatArray

NOISE = 1e-9
"""Largest negative read as 0, as a share of the series' largest finite |value|."""


def noise_floor(values: FloatArray) -> float:
    """The size under which a negative in `values` is float noise (0 when nothing is finite)."""
    finite = np.abs(values[np.isfinite(values)])
    return NOISE * float(finite.max()) if finite.size else 0.0


def real(values: FloatArray) -> npt.NDArray[np.intp]:
    """Indices of the negatives in `values` that are not float noise (-inf among them)."""
    return np.flatnonzero(values < -noise_floor(values))


def zeroed(values: FloatArray) -> FloatArray:
    """`values` with every negative (and -0.0) read as 0: call once `real(values)` is empty."""
    return np.where(values <= 0, 0.0, values)
