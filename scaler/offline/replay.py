"""The policy replay: run the live decision over a load trace, step by step, and score it with
the yardstick.

The same pieces as the live engine, step by step: walk-forward forecasts and the drift tracker
(scaler.offline.replay_walk: weekly refit, calibrated, no lookahead, an early refit on drift),
the prewarm ledger and `policy.decide`. Step t of the trace is the load served during
[T, T + step); the decision for it is made at T from L[..t-1] only, with the forecast made after
observing L[t-1] (whose first point is step t). Missing load is missing data: the step is not
scored, and it is booked as the live engine books a step whose refresh failed (booking.py
`hold`): the last decision held (`no_data`), its prewarm cut to what the budget allows now
(policy.held) and charged, its reactive replicas recorded, so a gap cannot run prewarm past a
strict budget unbilled.

Nothing here reads the future: the rows up to any step are the same whether the trace ends there
or goes on. Scoring (warm-up, baselines, frontier) happens afterwards, on the whole frame
(scaler.offline.replay_summary); the options are scaler.offline.replay_config's.

`scaler backtest TRACE --threshold p99/20 --budget 24 --out DIR` runs it (scaler.offline.backtest).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.base import Forecaster, Series
from models.calibrate import CalibratedModel
from models.seasonal import SeasonalBaseline
from scaler.decision import budget, drift, margin, policy, resolution
from scaler.offline import replay_summary, yardstick
from scaler.offline.replay_config import ReplayConfig, wake_hours
from scaler.offline.replay_walk import OriginWalk

COLUMNS = (
    "timestamp",
    "load",
    "required",
    "reactive",
    "desired",
    "ready",
    "reason",
    "prewarm_replica_hours",
)
"""Columns of decisions.csv, one row per step of the trace."""


@dataclass(frozen=True)
class Step:
    """One decision of the replay with what it was made from, as the live engine's decision
    log records it (scaler/offline/replay_log.py builds the record): `simulate`'s `on_step`."""

    at: float
    """The step's start (epoch seconds): when the decision was made."""
    load: float
    """The newest load sample the decision saw (NaN when the trace has none: reason no_data)."""
    decision: policy.Decision
    quantile: float | None
    """The quantile the forecast was read at (the budget's affordable one); None without one."""
    model: CalibratedModel | None
    accuracy: drift.Accuracy | None
    """The drift tracker's state after scoring (None with drift tracking off)."""
    ledger: budget.Ledger
    """The budget, after this step's charge."""
    cost: float
    """This step's prewarm charge, in replica-hours (money with a price)."""
    active: bool
    """What IsActive would answer: load, or a trusted forecast, above 0."""


@dataclass(frozen=True)
class Replay:
    """The decisions frame (COLUMNS) and the summary of how they, and the baselines, fared."""

    decisions: pd.DataFrame
    summary: dict[str, Any]


def replay(
    series: Series,
    config: ReplayConfig,
    *,
    make: Callable[[], Forecaster] | str = SeasonalBaseline,
    warmup: float | None = None,
    on_step: Callable[[Step], None] | None = None,
) -> Replay:
    """Replay the policy over `series` and score it (warm-up: DESIGN.md's unless given);
    `on_step` sees every decision (`simulate`)."""
    frame, extra = simulate(series, config, make=make, on_step=on_step)
    return Replay(
        decisions=frame, summary=replay_summary.summarise(series, frame, extra, config, warmup)
    )


def simulate(
    series: Series,
    config: ReplayConfig,
    *,
    make: Callable[[], Forecaster] | str = SeasonalBaseline,
    on_step: Callable[[Step], None] | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The decisions frame, one row per step of `series` (its own resolution), and counts the
    summary reports (drift episodes...). Forecasts, their calibration and drift tracking run at
    the model step (decision.resolution), refreshed each time a model-step bucket is complete.
    `on_step`, when given, sees each step's decision and what it was made from (a Step)."""
    step, load = series.step, series.values
    coarse = resolution.model_series(series, config.model_step)
    points = policy.forecast_points(config.lead_time, config.horizon, coarse.step)
    floor = policy.floor_samples(config.lead_time, step)
    free = policy.free_samples(config.lead_time, step) if config.charge_hold else floor
    limits = config.limits()
    ledger = budget.Ledger(
        budget=config.budget,
        window=config.budget_window,
        cost_per_replica_hour=config.cost_per_replica_hour,
        share=config.budget_share,
        wake_hours=wake_hours(config),
    )
    walk = OriginWalk(coarse, config, make=make, points=points)
    monitor = walk.tracker.monitor
    desired = np.zeros(len(series), dtype=np.int64)
    reactive = np.zeros(len(series), dtype=np.int64)
    reasons: list[str] = []
    spent = np.zeros(len(series))
    fell_back = np.zeros(len(series), dtype=bool)
    floor_at = np.zeros(len(series), dtype=bool)
    fallback_steps = 0
    starts: list[int] = []
    last: policy.Decision | None = None
    """The decision in force: what a step without load holds."""

    def accuracy() -> drift.Accuracy | None:
        return monitor.accuracy() if config.drift else None

    def book(t: int, at: float, decision: policy.Decision) -> None:
        """Charge step `t`'s prewarm (at `at`) and record its reactive replicas, as decided."""
        floor_at[t] = decision.prewarm > 0 and ledger.at_floor(at)
        spent[t] = ledger.charge(at, decision.prewarm, step)
        ledger.record_reactive(at, limits.clamp(decision.reactive), step)

    def no_data(t: int, at: float) -> None:
        """A step with no load sample, not scored: before any decision, minReplicas; after,
        the last decision held as the engine holds one (booking.py `hold`): its prewarm cut
        to what the budget allows now, charged, and its reactive hours recorded."""
        nonlocal last
        held = policy.Decision(
            load=math.nan,
            forecast_peak=math.nan,
            reactive=0,
            predictive=0,
            prewarm=0,
            desired=config.min_replicas,
            reason=policy.Reason.NO_DATA,
        )
        if last is not None:
            last = policy.held(last, limits=limits, allowance=ledger.allowance(at, step))
            book(t, at, last)
            held = replace(last, reason=policy.Reason.NO_DATA)
        desired[t], reactive[t] = held.desired, held.reactive
        reasons.append(held.reason.value)
        if on_step is not None:
            on_step(
                Step(
                    at=at,
                    load=math.nan,
                    decision=held,
                    quantile=None,
                    model=walk.origin.model,
                    accuracy=accuracy(),
                    ledger=ledger,
                    cost=float(spent[t]),
                    active=False,
                )
            )

    for t in range(len(series)):
        now = series.start + t * step
        if t == 0:
            no_data(t, now)
            continue
        # A model-step bucket completed: score it, then forecast from it (the model step's
        # refresh; between two refreshes every decision reads the same forecast).
        starts += [t] * walk.advance(now)
        origin, band = walk.origin, walk.band
        fell_back[t] = config.drift and monitor.in_fallback
        if not math.isfinite(load[t - 1]):
            no_data(t, now)
            continue
        fallback = None
        if origin.forecast is None:
            fallback = policy.Reason.NO_MODEL
        elif monitor.in_fallback:
            fallback = policy.Reason.DRIFT_FALLBACK
            fallback_steps += 1
        base = policy.floor_load(load[max(0, t - free) : t].tolist())
        hold_load = policy.floor_load(load[max(0, t - floor) : t].tolist())
        peak = level = quantile = None
        if origin.forecast is not None and band is not None:
            quantile = policy.affordable_quantile(
                config.quantile, remaining=ledger.remaining(now), budget=ledger.limit(now)
            )
            made_at = coarse.start + origin.index * coarse.step
            ahead = resolution.lookahead_points(
                made_at, coarse.step, now=now, lookahead=config.lead_time + config.horizon
            )
            p50 = origin.forecast.p50[:ahead]
            upper = band.upper(p50, quantile)
            if config.level_points > 0:
                level = base * policy.level_ratio(upper, p50, points=config.level_points)
            peak = policy.finite_peak(upper)
        decision = policy.decide(
            load=base,
            forecast_peak=peak,
            limits=limits,
            allowance=ledger.allowance(now, step),
            fallback=fallback,
            held_load=hold_load if config.charge_hold else None,
            level_load=level,
        )
        if fallback is policy.Reason.DRIFT_FALLBACK and config.drift_margin:
            decision = margin.decide(
                load=decision.load,
                recent=load[max(0, t - math.ceil(margin.LOOKBACK / step)) : t],
                step=step,
                lead_time=config.lead_time,
                quantile=policy.affordable_quantile(
                    config.quantile, remaining=ledger.remaining(now), budget=ledger.limit(now)
                ),
                limits=limits,
                allowance=ledger.allowance(now, step),
                held_load=hold_load if config.charge_hold else None,
                after_drop=monitor.no_margin,
            )
        book(t, now, decision)
        desired[t], reactive[t], last = decision.desired, decision.reactive, decision
        reasons.append(decision.reason.value)
        if on_step is not None:
            # IsActive as the engine answers it: load now, or a forecast trusted and used.
            wanted = peak is not None and fallback is None and peak > 0
            on_step(
                Step(
                    at=now,
                    load=float(load[t - 1]),
                    decision=decision,
                    quantile=quantile,
                    model=origin.model,
                    accuracy=accuracy(),
                    ledger=ledger,
                    cost=float(spent[t]),
                    active=bool(load[t - 1] > 0 or wanted),
                )
            )
    frame = _frame(series, config, reactive=reactive, desired=desired, reasons=reasons, spent=spent)
    extra = {
        "fallback_steps": fallback_steps,
        "episodes": walk.episodes,
        "retrains": walk.retrains,
        "episode_starts": [str(frame["timestamp"].iloc[t]) for t in starts],
        replay_summary.FALLBACK_AT: fell_back,
        replay_summary.FLOOR_AT: floor_at,
    }
    return frame, extra


def _frame(
    series: Series,
    config: ReplayConfig,
    *,
    reactive: Any,
    desired: Any,
    reasons: list[str],
    spent: Any,
) -> pd.DataFrame:
    """The decisions frame (COLUMNS) of the replay's per-step arrays."""
    load = series.values
    k = yardstick.cold_start_steps(config.lead_time, series.step)
    return pd.DataFrame(
        {
            "timestamp": pd.to_datetime(series.times().tolist(), unit="s").strftime(
                "%Y-%m-%d %H:%M:%S"
            ),
            "load": load,
            "required": yardstick.required(load, config.threshold),
            "reactive": reactive,
            "desired": desired,
            "ready": yardstick.ready(desired, k),
            "reason": reasons,
            "prewarm_replica_hours": spent,
        },
        columns=list(COLUMNS),
    )


def write_decisions(result: Replay, directory: Path) -> None:
    """DIR/decisions.csv, byte for byte the same for the same inputs."""
    directory.mkdir(parents=True, exist_ok=True)
    result.decisions.to_csv(directory / "decisions.csv", index=False, lineterminator="\n")
