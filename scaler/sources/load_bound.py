"""The largest value read as a load: by `scaler backtest`, from a trace file or from
`--prometheus-url`, and by `scaler serve` from Prometheus (scaler/sources/prometheus.py). A
bigger one is a broken export or query (a counter read as a rate, bytes summed over years, a
placeholder such as 1e308), refused by the caller with where it is; serve reads one in a
history as missing, and a newest one as no data (UNAVAILABLE: KEDA's fallback, never a
decision made from it).

MAX_LOAD is 1e15: no load a replica count follows comes near it (a fleet's tokens per second
are about 1e7, its bytes per second about 1e12), and the figures built on loads stay finite
far past it: a square is 1e30, a sum of squares over the 20 M steps a trace may hold is 2e37,
against float64's 1.8e308. 1e308 overflowed: numpy overflow warnings, a pinball loss of
5.8e303 and a 300-digit percentage against the reference.

Pure: numpy only, no I/O. Must not: decide the message (traces.py names a file's line,
prometheus_history.py a query's time, prometheus_answers.py the query and its URL).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from models.base import FloatArray

MAX_LOAD = 1e15
"""Largest value read as a load; above it, refused (see the module docstring)."""


def too_large(values: FloatArray) -> npt.NDArray[np.intp]:
    """Indices of the values in `values` above MAX_LOAD (+inf among them; NaN never)."""
    return np.flatnonzero(values > MAX_LOAD)
