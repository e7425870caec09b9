"""Marginal-value allocation of the prewarm budget, an experiment: buy the replicas that cover
the most steps per replica. Pure: no clock, no I/O.

The yardstick counts a step as under-provisioned when *any* replica it needs is missing, so
what a prewarm buys is the probability that a step is covered. With F_j the forecast CDF of the
load at point j, asking for m replicas instead of the reactive r covers, on average over the
points the decision's replicas serve, coverage(m) = mean_j F_j(m c) of them, for m - r replicas
this step. With a price lambda per replica (the Lagrangian multiplier of the budget), the best
m maximises

    coverage(m) - lambda * (m - r)        over r <= m <= the calibrated quantile's replicas,

so prewarm goes where reactive is about to fail (coverage(r) low: a rise past the floor) and
where a few replicas cover most of the uncertainty (a narrow band), and less to a wide band's
tail where each replica adds little coverage. The affordable quantile (policy.py) buys the same
level whatever it costs in replicas and whatever the floor already covers.

F_j comes from the calibrated quantiles per horizon step (models.calibrate: levels 0.50-0.99;
levels below the median mirror those above it, the table has no lower ones). The price is a
function of the ledger alone (the share of the window's budget left), so every scaler replica,
and a restarted one, reads the same price from the same shared ledger. Measured against the
affordable quantile in docs/policy.md ("Marginal allocation"): it is not the default.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from scaler.decision.policy import FULL_INSURANCE_LEFT

FloatArray = npt.NDArray[np.float64]

Upper = Callable[[float], npt.NDArray[np.float64]]
"""The forecast path at a quantile level (at or above the median): calibration.upper(p50, q)."""

LADDER_STEP = 0.025
"""Spacing of the quantile levels F is read at: 37 levels from 0.05 to 0.95 for a P95. Coarser
than the calibration table (0.01), which a replica's worth of coverage rarely resolves."""
PRICE_FLOOR = 0.01
"""The price with the whole window's budget unspent: a replica must raise the probability that
the step is covered by at least 1 % (the calibration table's own resolution). The price rises
geometrically with the share spent, to 1 (nothing can be worth it) when the budget is gone."""


def levels(quantile: float) -> list[float]:
    """The levels F is read at, the calibrated `quantile` the top one (>= 0.5)."""
    top = min(max(quantile, 0.5), 0.99) if math.isfinite(quantile) else 0.5
    count = math.floor((top - 0.5) / LADDER_STEP + 1e-9)
    upper = [0.5 + i * LADDER_STEP for i in range(count + 1)]
    if upper[-1] < top - 1e-9:
        upper.append(top)
    return sorted({round(1 - q, 6) for q in upper[1:]} | {round(q, 6) for q in upper})


def quantile_paths(upper: Upper, quantile: float) -> tuple[FloatArray, FloatArray]:
    """(levels, paths): paths[i, j] is the forecast at point j at levels[i], non-decreasing in
    i; levels below the median mirror those above it about the median."""
    median = np.asarray(upper(0.5), dtype=np.float64)
    rows = []
    read = levels(quantile)
    for level in read:
        if level >= 0.5:
            rows.append(np.asarray(upper(level), dtype=np.float64))
        else:  # as far below the median as 1 - level is above it
            rows.append(np.maximum(2 * median - np.asarray(upper(1 - level), dtype=np.float64), 0))
    paths = np.maximum.accumulate(np.vstack(rows), axis=0)
    return np.asarray(read, dtype=np.float64), paths


def coverage(
    levels_: FloatArray, paths: FloatArray, capacity: float, *, every: bool = False
) -> float:
    """The mean over the points of F_j(capacity): the share of the decision's steps `capacity`
    load covers, in expectation (per point, the highest level whose load fits; 0 below all);
    with `every`, the smallest F_j instead: the probability that it covers every point (the
    errors of neighbouring points moving together)."""
    fits = paths <= capacity + 1e-9  # [level, point], True up to some level per point
    per_point = np.where(fits, levels_[:, None], 0.0).max(axis=0)
    if not per_point.size:
        return 0.0
    return float(per_point.min() if every else per_point.mean())


def price(*, remaining: float, budget: float) -> float:
    """The price per replica of one step's coverage: PRICE_FLOOR while at least
    FULL_INSURANCE_LEFT of the window's `budget` is unspent (as the affordable quantile, see
    policy.py), rising geometrically to 1 (nothing is worth it) as `remaining` runs out; 1 when
    unknown."""
    left = remaining / budget if budget > 0 else 0.0
    if not math.isfinite(left):
        return 1.0
    share = min(max(left / FULL_INSURANCE_LEFT, 0.0), 1.0)
    return float(PRICE_FLOOR**share)


MAX_STEPS = 1000
"""Most replica counts above reactive that are weighed (more than any prewarm cap)."""


def allocated_peak(
    upper: Upper,
    *,
    quantile: float,
    floor_load: float,
    threshold: float,
    price: float,
    every: bool = False,
) -> float | None:
    """The load to buy for (what `policy.decide` takes as `forecast_peak`): m replicas' worth
    (m * threshold) for the m >= reactive that maximises coverage(m) - price * (m - reactive),
    at most the calibrated quantile's peak; None when the forecast has no finite point."""
    levels_, paths = quantile_paths(upper, quantile)
    finite = np.isfinite(paths).all(axis=0)
    if not finite.any() or not (math.isfinite(threshold) and threshold > 0):
        return None
    paths = paths[:, finite]
    top = float(paths[-1].max())
    reactive = math.ceil(floor_load / threshold - 1e-9) if floor_load > 0 else 0
    most = min(math.ceil(top / threshold - 1e-9), reactive + MAX_STEPS)
    chosen = reactive
    value = coverage(levels_, paths, reactive * threshold, every=every)
    for m in range(reactive + 1, most + 1):
        gain = coverage(levels_, paths, m * threshold, every=every) - price * (m - reactive)
        if gain > value + 1e-12:
            chosen, value = m, gain
    if chosen <= reactive:
        return min(top, floor_load) if math.isfinite(floor_load) else 0.0
    return min(top, chosen * threshold)
