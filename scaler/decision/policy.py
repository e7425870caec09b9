"""The decision: how many replicas to ask for, and why. Pure: no clock, no I/O.

The live engine, the replay backtest, the notebooks and the tests all call `decide`, so what is
measured offline is exactly what runs in the cluster.

    reactive   = ceil(floor load / threshold)      floor load: max sample of the HPA's 5 minutes
    held       = ceil(held load / threshold)       held load: max sample of the last lead time
    predictive = ceil(peak of the forecast at the affordable quantile
                      over [now, now + lead + horizon] / threshold)
    level      = ceil(floor load x level_ratio / threshold)  the band's reach above its median
    prewarm    = min(max(0, max(predictive, held, level) - reactive), maxPrewarmReplicas,
                     allowance)
    desired    = clamp(reactive + prewarm, minReplicas, maxReplicas)

Holding a replica past the HPA's scale-down stabilisation, for the rest of a cold start, is
capacity above what a reactive autoscaler runs, so it is paid from the budget like any prewarm
(reason `hold`): measured before, the free lead-time hold was 0.15x of reactive GPU-hours on
nasa_http and 0.30x on twitter_aapl, outside a "strict" 10 % budget (docs/budget.md).

The level insurance (reason `level`) buys the floor load times how far the calibrated band reaches
above its own median at the step being decided: when the forecast's median runs below the level
the load is at (a model fitted on last week's level of a growing service), its peak would buy
nothing the next step's noise needs. It reads the band at the affordable quantile, so it fades
to nothing as the budget runs out. The floor (the HPA window's highest sample) is the statistic the
model forecasts at its step (on a finer trace, each bucket's highest sample); the lead time's
hold, a max over more samples, already carries the noise's upper tail and insuring it again
over-bought on mongodb_rps_1min. Off by default; a trigger turns it on with `levelInsurance:
"true"` (`scaler backtest --level` measures it on a trace first): a trade, not a win, measured in
docs/policy.md.

desired is never below reactive (unless maxReplicas says so): a forecast may add capacity early,
never take away capacity that current load needs. The affordable quantile is the calibrated one
(P95) while the budget is comfortable, sliding to the median as the window's budget runs out.
Other ways to spend the budget (insuring the lead time only, cost-ordered insurance, marginal
allocation, insuring expected rises only, keeping what the last cold start bought) were measured
against this rule and refuted; docs/policy.md keeps their figures and the commit to rerun them at.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np
import numpy.typing as npt


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
    PREWARM_OFF = "prewarm_off"
    """The trigger turned prewarm off (`prewarmBudget: "0"` or `maxPrewarmReplicas: "0"`): the
    forecast (or the hold) wanted replicas above reactive, and by the user's choice, not a cap
    reached, none are bought."""
    MAX_REPLICAS = "max_replicas"
    """maxReplicas cut the request."""
    MIN_REPLICAS = "min_replicas"
    """minReplicas raised the request."""
    DRIFT_FALLBACK = "drift_fallback"
    """Forecasts have drifted: no forecast until they earn trust back, so reactive plus only the
    lead time's hold (HOLD's replicas, paid from the budget)."""
    DRIFT_MARGIN = "drift_margin"
    """Forecasts have drifted: reactive plus a margin learned from how load recently grew over
    one cold start (scaler.decision.margin), within every cap, until they earn trust back."""
    HOLD = "hold"
    """Replicas the load of the last lead time needed, held past the HPA's scale-down
    stabilisation (a replica released now takes a cold start to come back), paid from the
    budget like any prewarm; the forecast needs no more."""
    LEVEL = "level"
    """The load's own level (the reactive floor's load) insured at the forecast's calibrated
    band: the forecast's median runs below the level the load is at, so its peak would buy
    nothing the next step's noise needs (level_load); paid from the budget like any prewarm."""
    NO_MODEL = "no_model"
    """No usable model yet (short history, failed fit): no forecast, so reactive plus only the
    lead time's hold (HOLD's replicas, paid from the budget)."""
    BUDGET_UNKNOWN = "budget_unknown"
    """What the window has already spent could not be read back (the ledger's Prometheus did not
    answer since this scaler started): no allowance, so pure reactive (not even the hold), and a
    restart never spends a budget twice."""
    SPEND_UNRECORDED = "spend_unrecorded"
    """The ledger's Prometheus does not hold this scaler's own prewarm spend of the target
    (scaler_spend_record_missing): a restart would read nothing spent and start a fresh
    budget, so no allowance (pure reactive, as BUDGET_UNKNOWN) until it does."""
    NO_DATA = "no_data"
    """No current load sample (a backtest's decisions.csv): the last decision is held, its
    prewarm cut to what the budget allows now and charged (`held`), as the live engine holds
    one while its source fails; past `--staleness` the live server answers UNAVAILABLE instead,
    so that KEDA's own fallback applies."""


@dataclass(frozen=True)
class Limits:
    """The caps of one target (from its TargetSpec)."""

    threshold: float
    min_replicas: int = 0
    max_replicas: int = 100
    max_prewarm_replicas: int = 10
    no_budget: bool = False
    """The budget is an amount of 0 (`prewarmBudget: "0"`): prewarm is off, not spent."""

    @property
    def prewarm_off(self) -> bool:
        """No prewarm ever, by the trigger's choice: a budget of 0 or maxPrewarmReplicas 0."""
        return self.no_budget or self.max_prewarm_replicas <= 0

    def clamp(self, replicas: int) -> int:
        """`replicas` within [min_replicas, max_replicas]: what a reactive autoscaler with these
        limits runs (and what a share budget is a share of, see budget.py)."""
        return max(self.min_replicas, min(replicas, self.max_replicas))


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


MEDIAN = 0.5
FULL_INSURANCE_LEFT = 0.5
"""Share of the window's budget that must be unspent for prewarm at the full calibrated quantile.
Below it the quantile slides linearly to the median, so a tight budget is spent on the rises the
forecast expects rather than on insurance against noise, and is not exhausted hours before the
next ramp (a rolling window that runs dry at 9:00 refills only at 9:00 the next day)."""
REPLICA_CAP = 1_000_000
"""More replicas than any cluster has: the ceiling of a count computed from an absurd load or
forecast (e.g. 1e308 / 0.001), so it stays an integer before maxReplicas clamps it."""


def forecast_points(lead_time: float, horizon: float, step: float) -> int:
    """Forecast points the decision reads, the first being the step it decides for: up to
    lead time + horizon, rounded up to the step, so a replica asked for now is covered on
    the step it becomes ready even when the step is longer than the lead time."""
    return max(1, math.ceil((lead_time + horizon) / step - 1e-9)) + 1


def affordable_quantile(quantile: float, *, remaining: float, budget: float) -> float:
    """The forecast quantile the budget affords: the calibrated `quantile` while at least
    FULL_INSURANCE_LEFT of the window's budget is unspent (`remaining` of `budget`), sliding
    linearly to the median as it runs out. Prewarm for the rise the forecast expects (the
    median) is bought to the last replica-hour; insurance against noise above it only while the
    budget is comfortable. The median when nothing is left, or when the budget left is not
    finite."""
    budget_left = remaining / budget if budget > 0 else 0.0
    if not (math.isfinite(budget_left) and math.isfinite(quantile)):
        return MEDIAN
    share = min(max(budget_left / FULL_INSURANCE_LEFT, 0.0), 1.0)
    return MEDIAN + (min(max(quantile, MEDIAN), 1.0) - MEDIAN) * share


def finite_peak(values: Sequence[float] | npt.NDArray[np.float64]) -> float | None:
    """The largest finite value, or None when there is none (no usable forecast)."""
    finite = np.asarray(values, dtype=np.float64)
    finite = finite[np.isfinite(finite)]
    return float(finite.max()) if finite.size else None


STABILISATION = 300.0
"""Seconds of the HPA's default scale-down stabilisation window (behavior.scaleDown): the hold
a reactive autoscaler has for free, as the yardstick's reactive baseline does."""


def stabilisation_samples(step: float) -> int:
    """Samples of a `step`-spaced series within the HPA's stabilisation window (the newest one
    included), as the yardstick's reactive baseline counts them: the free reactive floor is the
    max over them."""
    if not (math.isfinite(step) and step > 0):
        return 1
    return max(1, math.ceil(STABILISATION / step - 1e-9))


def floor_samples(lead_time: float, step: float) -> int:
    """Samples of a `step`-spaced series observed within the last lead time (the newest one
    included): the reactive floor is the max over them."""
    return max(1, math.floor(lead_time / step + 1e-9) + 1)


def free_samples(lead_time: float, step: float) -> int:
    """Samples the free reactive floor is the max over: the HPA's stabilisation window, never
    longer than the lead time's floor_samples (the hold past it is paid, see decide)."""
    return min(stabilisation_samples(step), floor_samples(lead_time, step))


def floor_load(recent: Sequence[float]) -> float:
    """The load the reactive floor is computed from: the highest finite sample observed within
    the last lead time (NaN when none is). A replica released now would take a cold start to
    come back, so a dip shorter than that (a lost scrape, a one-step lull, a sample read as 0
    during a brief outage) never hands back capacity the next samples need: the HPA's
    scale-down stabilisation, sized to the cold start instead of a fixed 5 minutes."""
    finite = [v for v in recent if math.isfinite(v)]
    return max(finite) if finite else math.nan


def replicas_for(load: float, threshold: float) -> int:
    """ceil(load / threshold), with missing, negative or non-finite load counting as 0."""
    if not math.isfinite(load) or load <= 0:
        return 0
    ratio = load / threshold
    if not math.isfinite(ratio) or ratio > REPLICA_CAP:  # an absurd reading: maxReplicas decides
        return REPLICA_CAP
    return math.ceil(ratio - 1e-9)


LEVEL_POINTS = 1
"""Forecast points whose calibrated band insures the load's level (level_ratio): the first,
the step being decided. The band of one step ahead is the noise a replica asked for now must
already absorb; the farther points' width is the forecast's business (its own peak)."""
MAX_LEVEL_RATIO = 4.0
"""Largest band ratio the level insurance applies (300 %, the frontier's widest headroom)."""


def level_ratio(
    upper: Sequence[float] | npt.NDArray[np.float64],
    median: Sequence[float] | npt.NDArray[np.float64],
    *,
    points: int = LEVEL_POINTS,
) -> float:
    """How far above its own median the calibrated forecast reaches at the quantile read, as a
    ratio (upper / median, the largest over the first `points`), in [1, MAX_LEVEL_RATIO]; 1
    (no insurance) when no point has a finite positive median.

    The band is the model's out-of-sample error at that quantile, measured by its calibration
    and widened by adaptive conformal inference, so the ratio is the data's own statistic; as
    the budget runs out the quantile read slides to the median and the ratio to 1."""
    up = np.asarray(upper, dtype=np.float64)[: max(points, 0)]
    mid = np.asarray(median, dtype=np.float64)[: up.size]
    up = up[: mid.size]
    ok = np.isfinite(up) & np.isfinite(mid) & (mid > 0)
    if not ok.any():
        return 1.0
    return float(min(max(float((up[ok] / mid[ok]).max()), 1.0), MAX_LEVEL_RATIO))


def decide(
    *,
    load: float,
    forecast_peak: float | None,
    limits: Limits,
    allowance: int,
    fallback: Reason | None = None,
    held_load: float | None = None,
    level_load: float | None = None,
) -> Decision:
    """The replicas to ask for now.

    `load` is what the reactive floor serves (floor_load over stabilisation_samples).
    `forecast_peak` is the calibrated forecast's peak over lead time + horizon (at
    affordable_quantile), or None when there is no usable forecast. `allowance` is how many
    prewarm replicas the budget can pay for this step (budget.Ledger.allowance). `fallback`
    (DRIFT_FALLBACK, NO_MODEL, BUDGET_UNKNOWN, SPEND_UNRECORDED) forces no forecast and stays
    the reason when a cap cuts the hold (only maxReplicas and minReplicas replace it).
    `held_load` is the highest load of the last lead time (floor_load over floor_samples): its
    replicas above reactive are held as paid prewarm (reason HOLD, or the fallback's), within
    the same caps; None (or a held load no higher than `load`) holds nothing. `level_load` is
    the floor's load insured at the forecast's band (`load` x level_ratio): its replicas above
    both the forecast's and the hold's are bought as prewarm too (reason LEVEL), within the
    same caps; it is ignored in a fallback (no forecast, no band) and when None.
    """
    reactive = replicas_for(load, limits.threshold)
    usable = fallback is None and forecast_peak is not None and math.isfinite(forecast_peak)
    peak = float(forecast_peak) if usable and forecast_peak is not None else math.nan
    predictive = replicas_for(peak, limits.threshold) if usable else 0
    held = replicas_for(held_load, limits.threshold) if held_load is not None else 0
    level = replicas_for(level_load, limits.threshold) if usable and level_load is not None else 0
    wanted = max(0, max(predictive, held, level) - reactive)
    caps = {
        Reason.PREWARM_CAPPED: max(0, limits.max_prewarm_replicas),
        Reason.BUDGET_CAPPED: max(0, allowance),
    }
    prewarm = min(wanted, *caps.values())
    reason = fallback or (
        Reason.REACTIVE
        if wanted == 0
        else Reason.FORECAST
        if predictive > held and predictive >= level
        else Reason.LEVEL
        if level > held
        else Reason.HOLD
    )
    if prewarm < wanted and fallback is None:  # a fallback's reason says more than its cap
        reason = Reason.PREWARM_OFF if limits.prewarm_off else min(caps, key=lambda r: caps[r])
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


def held(decision: Decision, *, limits: Limits, allowance: int) -> Decision:
    """`decision` answered again for a step with no fresh data (the engine holds the last good
    decision until it is `staleness` old): the same replicas, but its prewarm cut to what the
    budget allows now (reason BUDGET_CAPPED), so an outage of the source cannot overrun a strict
    budget by answering prewarm it no longer pays for."""
    prewarm = max(0, allowance)
    if decision.prewarm <= prewarm:
        return decision
    desired = limits.clamp(decision.reactive + prewarm)
    return replace(
        decision,
        prewarm=min(prewarm, max(0, desired - decision.reactive)),
        desired=desired,
        reason=Reason.BUDGET_CAPPED,
    )
