"""A per-target gate for the level insurance (policy.level_ratio, reason level), an experiment:
insure the floor's level only while the forecast's median has recently run below the load. Pure:
no clock, no I/O.

The level insurance pays where the model's median lags the level the load is at (a model fitted
on last week's level of a growing service) and costs where the median is right and the budget
binds: its replicas displace forecast prewarm (docs/policy.md "Level insurance"). Whether the
median lags is the data's own statistic: an unbiased median has the load above it on half of the
steps. The gate opens when the share of the recent one-step-ahead forecasts that the load ran
above exceeds one half by more than a one-sided test at GATE_LEVEL allows, with the number of
steps discounted for the indicator's lag-1 autocorrelation (errors stay on one side for hours,
so n autocorrelated steps carry the evidence of n (1 - rho) / (1 + rho) independent ones).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

GATE_Z = 1.6448536269514722
"""The standard normal's 95th percentile: the gate's one-sided test at the 5 % level, the same
level as the P95 band it insures with."""
MIN_STEPS = 12
"""Fewest recorded steps the gate judges (an hour at the 5-minute model step): below that it
stays shut."""
MAX_RHO = 0.99
"""Largest lag-1 autocorrelation the discount uses, so the effective count stays positive."""


def effective_steps(above: Sequence[bool] | np.ndarray) -> float:
    """The indicator's count discounted for its lag-1 autocorrelation (clipped to [0, MAX_RHO]):
    n (1 - rho) / (1 + rho); n itself when either lagged copy is constant (rho undefined)."""
    x = np.asarray(above, dtype=np.float64)
    n = x.size
    if n < 3 or x[:-1].std() == 0 or x[1:].std() == 0:
        return float(n)
    rho = float(np.corrcoef(x[:-1], x[1:])[0, 1])
    rho = min(max(rho, 0.0), MAX_RHO)
    return n * (1 - rho) / (1 + rho)


def median_lags(above: Sequence[bool] | np.ndarray) -> bool:
    """True when the load ran above the forecast's median on significantly more than half of
    the recorded steps (`above`, oldest first): share > 1/2 + GATE_Z / (2 sqrt(n_eff))."""
    x = np.asarray(above, dtype=np.float64)
    if x.size < MIN_STEPS:
        return False
    n_eff = max(effective_steps(x), 1.0)
    return bool(x.mean() > 0.5 + GATE_Z * 0.5 / math.sqrt(n_eff))
