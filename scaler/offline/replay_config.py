"""The options of one policy replay (ReplayConfig, a target's TargetSpec plus the replay's own),
what they derive (the share budget's wake-up floor), and `--threshold`'s text -> a load.

Values only: no loop, no scoring, no files (scaler.offline.replay runs the replay,
scaler.offline.replay_summary scores it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from models.base import DAY, WEEK, Series
from scaler.decision import budget, policy
from scaler.errors import ConfigError


@dataclass(frozen=True)
class ReplayConfig:
    """One target's options, as in its TargetSpec, plus the replay's own."""

    threshold: float
    """Load one replica serves within its SLO (c)."""
    lead_time: float = 600.0
    """Seconds a new replica needs to become ready (the cold start)."""
    horizon: float = 900.0
    """Seconds past the lead time the forecast peak looks."""
    quantile: float = 0.95
    min_replicas: int = 0
    max_replicas: int = 100
    max_prewarm_replicas: int = 10
    budget: float = 24.0
    """Prewarm allowed per window: replica-hours, or money with cost_per_replica_hour. Used
    when `budget_share` is None, so `budget=6` alone means 6; `scaler backtest`, like
    scalerMetadata, defaults to budget.DEFAULT_BUDGET instead."""
    budget_share: float | None = None
    """When set, the budget is this share of the window's reactive replica-hours instead."""
    budget_window: float = DAY
    cost_per_replica_hour: float | None = None
    """Price of one replica-hour: the budget, and the summary's `cost` figures, are then money."""
    currency: str = "USD"
    """What that money is, as the trigger's `currency` (the default is the trigger's too);
    labels the money figures, converts nothing."""
    refit_every: float = WEEK
    history_window: float = 4 * WEEK
    """History a fit sees, as the engine's `history` setting."""
    model_step: float = 300.0
    """Step the models are fitted and forecast at (the engine's `model_step`); decisions are
    made at the trace's own step, and a trace this coarse or coarser is modelled as it is."""
    drift: bool = True
    """Track forecast drift (fallback and early refit); False replays the forecast blindly."""
    drift_margin: bool = True
    """In drift fallback, add the recent-growth margin (decision.margin); False: plain reactive."""
    drift_run_test: bool = True
    """Engage fallback on a run of actuals below the band (drift_null.Null.run, its limit read off
    the calibration's runs scaled to the band); False is the ablation (docs/policy.md
    "Drift")."""
    drop_margin: bool = False
    """Keep the margin in a fallback entered on a drop (load below the forecast, the relearn
    hold) too: the ablation (it insures holidays' rebounds: without it vic_electricity loses
    0.04 and nyc_taxi 0.03); False (the default): plain reactive plus the paid hold there, the
    margin only after a rise or a gap (the direction rule, drift.DriftMonitor.drop_margin;
    with the run test it meets the injected-drop goal, docs/policy.md "Drift")."""
    charge_hold: bool = True
    """Free reactive floor over the HPA's 5-minute stabilisation, and the hold past it for the
    rest of the lead time paid from the budget (policy.decide's `held_load`, reason hold);
    False: the whole lead-time hold is free, as before (the ablation, docs/budget.md)."""
    level_points: int = 0
    """Forecast points whose calibrated band insures the load's level, the reactive floor
    (policy.level_ratio, reason level); 0, the default, insures nothing. The trigger's
    `levelInsurance: "true"` is 1 (policy.LEVEL_POINTS; `scaler backtest --level`): it helps
    load whose median lags its level (llm_serving 0.97 -> 0.85) and costs 0.01-0.03 where the
    budget binds (docs/policy.md "Level insurance")."""

    def limits(self) -> policy.Limits:
        return policy.Limits(
            threshold=self.threshold,
            min_replicas=self.min_replicas,
            max_replicas=self.max_replicas,
            max_prewarm_replicas=self.max_prewarm_replicas,
            no_budget=self.budget <= 0 and self.budget_share is None,
        )


def wake_hours(config: ReplayConfig) -> float:
    """The replay's wake-up floor of a share budget, in replica-hours (budget.wake_floor)."""
    return budget.wake_floor(
        config.limits().max_prewarm_replicas, config.lead_time + config.horizon
    )


def threshold_from(text: str, series: Series) -> float:
    """A threshold given as a number, or as `pNN/D` (the trace's NN-th percentile over D, e.g.
    `p99/20`: the peak needs about 20 replicas). ConfigError names the forms accepted."""
    text = text.strip()
    try:
        if text.startswith("p") and "/" in text:
            pct, over = text[1:].split("/", 1)
            percentile = float(np.nanpercentile(series.values, float(pct)))
            value = percentile / float(over)
            if value <= 0 and math.isfinite(value):
                raise ConfigError(
                    f"--threshold {text!r}: the trace's {pct}th percentile is {percentile:g} "
                    "(its load is mostly 0), so it gives no load per replica; give the load one "
                    "replica serves as a number, e.g. --threshold 40"
                )
        else:
            value = float(text)
    except (ValueError, ZeroDivisionError):
        raise ConfigError(
            f"--threshold {text!r} is not a number nor pNN/D (a percentile over a divisor > 0); "
            "give a load > 0 or e.g. p99/20"
        ) from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"--threshold {text!r} gives {value}; it must be a load > 0")
    return value
