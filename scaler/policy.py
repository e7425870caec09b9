"""The decision: how many replicas to ask for, and why. Pure: no clock, no I/O.

The live engine, the replay backtest, the notebooks and the tests all call `decide`, so what is
measured offline is exactly what runs in the cluster.

    reactive   = ceil(load / threshold)                       what a reactive autoscaler asks now
    predictive = ceil(peak P95 over [now, now + lead + horizon] / threshold)
    prewarm    = min(max(0, predictive - reactive), maxPrewarmReplicas, budget allowance)
    desired    = clamp(reactive + prewarm, minReplicas, maxReplicas)

desired is never below reactive (unless maxReplicas says so): a forecast may add capacity early,
never take away capacity that current load needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class Reason(StrEnum):
    """Why a decision is what it is; exported as a metric label and in the decision log."""

    FORECAST = "forecast"
    """Prewarm from the forecast, within every cap."""
    REACTIVE = "reactive"
    """The forecast needs no more than current load does."""
    BUDGET_CAPPED = "budget_capped"
    """The forecast wanted more prewarm than the budget allows now."""
    PREWARM_CAPPED = "prewarm_capped"
    """The forecast wanted more than maxPrewarmReplicas above reactive."""
    MAX_REPLICAS = "max_replicas"
    """maxReplicas cut the request."""
    MIN_REPLICAS = "min_replicas"
    """minReplicas raised the request."""
    DRIFT_FALLBACK = "drift_fallback"
    """Forecasts have drifted: pure reactive until they earn trust back."""
    NO_MODEL = "no_model"
    """No usable model yet (short history, failed fit): pure reactive."""
    NO_DATA = "no_data"
    """No current load sample: the last request is held (replay; the live server answers
    UNAVAILABLE instead, so that KEDA's own fallback applies)."""


@dataclass(frozen=True)
class Limits:
    """The caps of one target (from its TargetSpec)."""

    threshold: float
    min_replicas: int = 0
    max_replicas: int = 100
    max_prewarm_replicas: int = 10


@dataclass(frozen=True)
class Decision:
    """One step's answer for one target."""

    load: float
    """Current load the reactive floor is computed from."""
    forecast_peak: float
    """Peak of the calibrated forecast over lead time + horizon (NaN without a usable forecast)."""
    reactive: int
    predictive: int
    """Replicas the forecast peak needs (0 without a usable forecast)."""
    prewarm: int
    """Replicas above reactive actually asked for (after every cap)."""
    desired: int
    reason: Reason


def replicas_for(load: float, threshold: float) -> int:
    """ceil(load / threshold), with missing, negative or non-finite load counting as 0."""
    if not math.isfinite(load) or load <= 0:
        return 0
    return math.ceil(load / threshold - 1e-9)


def decide(
    *,
    load: float,
    forecast_peak: float | None,
    limits: Limits,
    allowance: int,
    fallback: Reason | None = None,
) -> Decision:
    """The replicas to ask for now.

    `forecast_peak` is the calibrated forecast's peak over lead time + horizon, or None when there
    is no usable forecast. `allowance` is how many prewarm replicas the budget can pay for this
    step (budget.Ledger.allowance). `fallback` (DRIFT_FALLBACK or NO_MODEL) forces pure reactive.
    """
    reactive = replicas_for(load, limits.threshold)
    usable = fallback is None and forecast_peak is not None and math.isfinite(forecast_peak)
    peak = float(forecast_peak) if usable and forecast_peak is not None else math.nan
    predictive = min(replicas_for(peak, limits.threshold), 1_000_000) if usable else 0
    wanted = max(0, predictive - reactive)
    caps = {
        Reason.PREWARM_CAPPED: max(0, limits.max_prewarm_replicas),
        Reason.BUDGET_CAPPED: max(0, allowance),
    }
    prewarm = min(wanted, *caps.values())
    reason = fallback or (Reason.FORECAST if wanted > 0 else Reason.REACTIVE)
    if prewarm < wanted:
        reason = min(caps, key=lambda r: caps[r])
    desired = reactive + prewarm
    if desired > limits.max_replicas:
        desired, reason = limits.max_replicas, Reason.MAX_REPLICAS
        prewarm = max(0, desired - reactive)
    elif desired < limits.min_replicas:
        desired, reason = limits.min_replicas, Reason.MIN_REPLICAS
    return Decision(
        load=load,
        forecast_peak=peak,
        reactive=reactive,
        predictive=predictive,
        prewarm=prewarm,
        desired=desired,
        reason=reason,
    )
