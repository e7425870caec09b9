"""The policy replay: run the live decision over a load trace and score it with the yardstick.

The same pieces as the live engine, step by step: walk-forward forecasts (models.walkforward:
weekly refit, calibrated, no lookahead), the drift tracker (an early refit on drift), the prewarm
ledger and `policy.decide`. Step t of the trace is the load served during [T, T + step); the
decision for it is made at T from L[..t-1] only, with the forecast made after observing L[t-1]
(whose first point is step t). Missing load is missing data: the last request is held
(`no_data`) and the step is not scored.

Nothing here reads the future: the rows up to any step are the same whether the trace ends there
or goes on. Scoring (warm-up, baselines, frontier) happens afterwards, on the whole frame.

`scaler backtest TRACE --threshold p99/20 --budget 24 --out DIR` runs it (scaler.offline.backtest).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.base import DAY, WEEK, Forecaster, Series
from models.calibrate import CalibratedModel
from models.conformal import Calibration
from models.seasonal import SeasonalBaseline
from models.walkforward import Origin, walk_forward
from scaler.decision import budget, drift, drift_tracker, margin, policy, resolution
from scaler.decision.spec import format_duration
from scaler.errors import ConfigError
from scaler.offline import baselines, yardstick

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
WARMUP = 14 * DAY
"""Unscored history at the start of a trace (DESIGN.md): 14 days, or half a shorter trace."""
REPORTED_HEADROOMS = (0.1, 0.2, 0.5)
"""Static headrooms reported next to the policy (and drawn in the frontier notebook)."""
FALLBACK_AT = "fallback_at"
FLOOR_AT = "floor_at"
"""extra's per-step flags of the policy's prewarm bought from the share budget's wake-up floor."""
"""simulate's extra: which steps were decided in drift fallback (summarise counts, not stores)."""


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
    return Replay(decisions=frame, summary=summarise(series, frame, extra, config, warmup))


def drift_refit_kind(
    make: Callable[[], Forecaster] | str, champion: CalibratedModel | None
) -> Callable[[], Forecaster] | str:
    """What a drift refit fits: the champion's kind on fresh data when `auto` chose it (the
    selection, a backtest of every candidate over two windows, stays with the weekly fits, as
    in the live engine: scaler/serving/fitting.py); `make` itself otherwise."""
    if make == "auto" and champion is not None:
        return champion.kind
    return make


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
    k = yardstick.cold_start_steps(config.lead_time, step)
    ledger = budget.Ledger(
        budget=config.budget,
        window=config.budget_window,
        cost_per_replica_hour=config.cost_per_replica_hour,
        share=config.budget_share,
        wake_hours=wake_hours(config),
    )
    tracker = drift_tracker.DriftTracker(
        lead_time=config.lead_time,
        monitor=drift.DriftMonitor(
            quantile=config.quantile,
            step=coarse.step,
            run_test=config.drift_run_test,
            drop_margin=config.drop_margin,
        ),
    )

    def forecasts(start: int, kind: Callable[[], Forecaster] | str = make) -> Iterator[Origin]:
        return walk_forward(
            kind,
            coarse,
            start=start,
            steps=points,
            quantile=config.quantile,
            refit_every=config.refit_every,
            window=config.history_window,
        )

    origins = forecasts(0)
    origin = Origin(index=-1, forecast=None, model=None)
    # An early refit on drift comes on top of the weekly ones, not instead: they keep the
    # schedule of the first fit (`anchor`), as the weekly retrain CronJob does. Restarting the
    # week at every drift refit left mongodb_rps' scored week on a model fitted on 4 days.
    weekly = max(1, round(config.refit_every / coarse.step))
    anchor: int | None = None
    off_schedule = False
    band: Calibration | None = None
    desired = np.zeros(len(series), dtype=np.int64)
    reactive = np.zeros(len(series), dtype=np.int64)
    reasons: list[str] = []
    spent = np.zeros(len(series))
    fell_back = np.zeros(len(series), dtype=bool)
    floor_at = np.zeros(len(series), dtype=bool)
    fallback_steps = episodes = retrains = 0
    starts: list[int] = []
    held = config.min_replicas

    def accuracy() -> drift.Accuracy | None:
        return tracker.monitor.accuracy() if config.drift else None

    def no_data(at: float) -> None:
        """A step with no load sample: the last request held, not charged, not scored."""
        reasons.append(policy.Reason.NO_DATA.value)
        if on_step is not None:
            nothing = policy.Decision(
                load=math.nan,
                forecast_peak=math.nan,
                reactive=0,
                predictive=0,
                prewarm=0,
                desired=held,
                reason=policy.Reason.NO_DATA,
            )
            on_step(
                Step(
                    at=at,
                    load=math.nan,
                    decision=nothing,
                    quantile=None,
                    model=origin.model,
                    accuracy=accuracy(),
                    ledger=ledger,
                    cost=0.0,
                    active=False,
                )
            )

    for t in range(len(series)):
        now = series.start + t * step
        if t == 0:
            desired[t], reactive[t] = held, 0
            no_data(now)
            continue
        # A model-step bucket completed: score it, then forecast from it (the model step's
        # refresh; between two refreshes every decision reads the same forecast).
        while origin.index < resolution.newest_complete(coarse, now):
            i = origin.index + 1
            was_ok = not tracker.monitor.in_fallback
            if config.drift:
                tracker.score(
                    Series(coarse.start + i * coarse.step, coarse.step, coarse.values[i : i + 1])
                )
                if tracker.monitor.take_retrain():
                    origins, retrains = (
                        forecasts(i, drift_refit_kind(make, origin.model)),
                        retrains + 1,
                    )
                    off_schedule = True
                elif off_schedule and anchor is not None and (i - anchor) % weekly == 0:
                    origins = forecasts(i)  # the weekly refit, on its own schedule
            if was_ok and tracker.monitor.in_fallback:
                episodes += 1
                starts.append(t)
            origin = next(origins)
            if anchor is None and origin.model is not None:
                anchor = round((origin.model.trained_until - coarse.start) / coarse.step)
            band = None
            if origin.forecast is not None and config.drift:
                tracker.record(origin.forecast)
            if origin.forecast is not None and origin.model is not None:
                known = Series(coarse.start, coarse.step, coarse.values[: i + 1])
                band = (
                    origin.band
                    if origin.band is not None
                    else origin.model.calibration_for(known, points)
                )
                if config.drift:  # the null of each new model, measured once
                    tracker.adopt(origin.model, known)
        fell_back[t] = config.drift and tracker.monitor.in_fallback
        if not math.isfinite(load[t - 1]):
            desired[t], reactive[t] = held, 0
            no_data(now)
            continue
        fallback = None
        if origin.forecast is None:
            fallback = policy.Reason.NO_MODEL
        elif tracker.monitor.in_fallback:
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
                after_drop=tracker.monitor.no_margin,
            )
        floor_at[t] = decision.prewarm > 0 and ledger.at_floor(now)
        spent[t] = ledger.charge(now, decision.prewarm, step)
        ledger.record_reactive(now, limits.clamp(decision.reactive), step)
        desired[t], reactive[t], held = decision.desired, decision.reactive, decision.desired
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
    frame = pd.DataFrame(
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
    extra = {
        "fallback_steps": fallback_steps,
        "episodes": episodes,
        "retrains": retrains,
        "episode_starts": [str(frame["timestamp"].iloc[t]) for t in starts],
        FALLBACK_AT: fell_back,
        FLOOR_AT: floor_at,
    }
    return frame, extra


def warmup_steps(series: Series, warmup: float | None = None) -> int:
    """Steps not scored at the start: 14 days, or the first half of a shorter trace."""
    seconds = min(WARMUP, series.span / 2) if warmup is None else warmup
    return min(len(series), math.ceil(seconds / series.step - 1e-9))


def summarise(
    series: Series,
    frame: pd.DataFrame,
    extra: dict[str, Any],
    config: ReplayConfig,
    warmup: float | None = None,
) -> dict[str, Any]:
    """Yardstick figures for the policy and the baselines, over the scored steps."""
    step, load, c = series.step, series.values, config.threshold
    k = yardstick.cold_start_steps(config.lead_time, step)
    scored = np.zeros(len(series), dtype=bool)
    scored[warmup_steps(series, warmup) :] = True

    def score(desired: Any) -> yardstick.Outcome:
        requests = np.asarray(desired, dtype=np.int64)
        return yardstick.outcome(
            load=load, desired=requests, threshold=c, k=k, step=step, scored=scored
        )

    headroom = {
        h: baselines.reactive(load, threshold=c, step=step, headroom=h)
        for h in sorted({*baselines.HEADROOMS, *REPORTED_HEADROOMS})
    }
    front = yardstick.frontier({h: score(d) for h, d in headroom.items()})
    reactive_d = headroom[0.0]
    base = score(reactive_d)
    runs = {
        "policy": frame["desired"].to_numpy(),
        "reactive": reactive_d,
        **{f"reactive_{round(h * 100)}": headroom[h] for h in REPORTED_HEADROOMS},
        "oracle": baselines.oracle(load, threshold=c, k=k),
    }
    results: dict[str, Any] = {}
    for name, desired in runs.items():
        result = score(desired)
        policy_run = name == "policy"
        extra_hours = (
            frame["prewarm_replica_hours"].to_numpy()
            if policy_run
            else np.maximum(np.asarray(desired) - reactive_d, 0) * step / 3600.0
        )
        # What a share budget is a share of: the policy's own reactive floor within its limits,
        # as its ledger records it; for a baseline, plain reactive.
        reactive_steps = frame["reactive"].to_numpy() if policy_run else reactive_d
        reactive_hours = (
            np.clip(reactive_steps, config.min_replicas, config.max_replicas) * step / 3600.0
        )
        results[name] = {
            **result.as_dict(),
            "cost": _priced(result.gpu_hours, config),
            "gpu_hours_x_reactive": result.gpu_hours / max(base.gpu_hours, 1e-12),
            "frontier_ratio": front.ratio(result),
            "prewarm": _spend(
                series,
                extra_hours,
                reactive_hours,
                config,
                scored,
                floor_at=extra.get(FLOOR_AT) if policy_run else None,
            ),
        }
    reasons = frame["reason"][scored].value_counts().sort_index()
    drift_counts = {k: v for k, v in extra.items() if k not in (FALLBACK_AT, FLOOR_AT)}
    if FALLBACK_AT in extra:
        # Episodes and fallback steps in the scored span alone, as the yardstick scores steps:
        # an alarm in the warm-up (a model fitted on its first days) is not one of the
        # scored weeks'. Fallback steps are those with load, as `scored_steps` counts them: a
        # fallback that spans a gap (a call centre's weekend) decided nothing in it, and
        # counting the gap's steps put 695 no-data steps into bank_calls' 978.
        fell_back = np.asarray(extra[FALLBACK_AT], dtype=bool)
        begun = fell_back & ~np.concatenate([[False], fell_back[:-1]])
        drift_counts["scored_episodes"] = int((begun & scored).sum())
        drift_counts["scored_fallback_steps"] = int((fell_back & scored & np.isfinite(load)).sum())
    return {
        "trace": {
            "start": frame["timestamp"].iloc[0],
            "end": frame["timestamp"].iloc[-1],
            "step_seconds": step,
            "steps": len(series),
            "scored_steps": int((scored & np.isfinite(load)).sum()),
            "warmup_steps": int((~scored).sum()),
        },
        "config": {**asdict(config), "cold_start_steps": k},
        # The unit of every money figure (`cost`, the budget's), as the decision log names it.
        "budget_unit": config.currency if config.cost_per_replica_hour else "replica-hours",
        **results,
        "drift": {**drift_counts, "reasons": {str(r): int(n) for r, n in reasons.items()}},
        "frontier": {
            "headrooms": list(front.headrooms),
            "gpu_hours": list(front.gpu_hours),
            "under_provisioned_pct": list(front.under_provisioned_pct),
        },
    }


def _spend(
    series: Series,
    hours: Any,
    reactive_hours: Any,
    config: ReplayConfig,
    scored: Any,
    *,
    floor_at: Any = None,
) -> dict[str, float | None]:
    """Prewarm replica-hours (and money) and the reactive replica-hours over the scored steps,
    as every other figure of the summary is (`gpu_hours_x_reactive` among them), and the prewarm
    as a share of them. The budget's figures cover every step, the warm-up's too, because the
    budget is strict everywhere: the costliest rolling window's spend, the largest share of any
    window that ends at a step with prewarm (the windows a share budget bounds, see budget.py),
    and how many such windows had no reactive hours at all (never for the policy under a share
    budget). A charge the ledger made from the wake-up floor (`floor_at`: its window held no
    reactive hours, budget.wake_floor) answers to the floor, not to a share, so its window is
    reported apart (`floor_windows`, `max_floor_window_spend`)."""
    per_step = np.asarray(hours, dtype=np.float64)
    width = max(1, math.ceil(config.budget_window / series.step - 1e-9))
    window = _trailing(per_step, width)
    reactive = np.asarray(reactive_hours, dtype=np.float64)
    charged, used = per_step > 0, _trailing(reactive, width)
    wake = wake_hours(config) if floor_at is not None and config.budget_share else None
    at_floor = charged & np.asarray(floor_at, dtype=bool) if wake else np.zeros_like(charged)
    by_share = charged & (used > 0) & ~at_floor
    shares = window[by_share] / used[by_share]
    price = config.cost_per_replica_hour or 1.0
    spent, paid = float(per_step[scored].sum()), float(reactive[scored].sum())
    return {
        "replica_hours": spent,
        "cost": _priced(spent, config),
        # rounded: a cumulative-sum difference carries ~1e-12 of float noise, not spend
        "max_window_spend": round(float(window.max(initial=0.0)) * price, 9),
        "reactive_replica_hours": paid,
        "share_of_reactive": spent / max(paid, 1e-12),
        "max_window_share": round(float(shares.max(initial=0.0)), 9),
        "windows_without_reactive": int((charged & (used <= 0) & ~at_floor).sum()),
        "wake_hours": wake,
        "floor_windows": int(at_floor.sum()),
        "max_floor_window_spend": (
            round(float(window[at_floor].max()), 9) if at_floor.any() else None
        ),
        "budget": config.budget,
        "budget_share": config.budget_share,
        "window_seconds": config.budget_window,
    }


def wake_hours(config: ReplayConfig) -> float:
    """The replay's wake-up floor of a share budget, in replica-hours (budget.wake_floor)."""
    return budget.wake_floor(
        config.limits().max_prewarm_replicas, config.lead_time + config.horizon
    )


def _priced(replica_hours: float, config: ReplayConfig) -> float | None:
    """`replica_hours` in money, in `config.currency`; None when no price is set."""
    price = config.cost_per_replica_hour
    return None if price is None else replica_hours * price


def _trailing(per_step: Any, width: int) -> Any:
    """Sum over the `width` steps ending at each step."""
    cum = np.concatenate([[0.0], np.cumsum(per_step)])
    idx = np.arange(per_step.size)
    return cum[idx + 1] - cum[np.maximum(idx + 1 - width, 0)]


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


def write_decisions(result: Replay, directory: Path) -> None:
    """DIR/decisions.csv, byte for byte the same for the same inputs."""
    directory.mkdir(parents=True, exist_ok=True)
    result.decisions.to_csv(directory / "decisions.csv", index=False, lineterminator="\n")


def table(summary: dict[str, Any]) -> str:
    """The yardstick figures as the fixed-width table `scaler backtest` prints."""
    share = summary["config"]["budget_share"]
    limit = budget.describe(summary["config"]["budget"], share)
    priced = summary["config"]["cost_per_replica_hour"] is not None
    unit = summary["config"]["currency"] if priced else ""
    lines = [
        f"{'decisions':14} {'frontier':>8} {'under-prov':>10} {'shortfall':>9} "
        f"{'GPU-h':>9} {'x reactive':>10}"
        + (f" {'cost ' + unit:>12}" if priced else "")
        + f" {'max prewarm/window':>18}"
        + (f" {unit}" if priced and share is None else "")
    ]
    for name in ("policy", "reactive", "reactive_20", "oracle"):
        m = summary[name]
        ratio = m["frontier_ratio"]
        spend = (
            f"{m['prewarm']['max_window_spend']:10.2f}"
            if share is None
            else f"{m['prewarm']['max_window_share']:10.1%}"
        )
        bound = f" / {limit}" if name == "policy" else ""  # the baselines answer to no budget
        cost = f" {m['cost']:12.2f}" if priced else ""
        lines.append(
            f"{name:14} {ratio:8.2f} {m['under_provisioned_pct']:9.1f}% "
            f"{m['shortfall_replica_steps']:9.0f} {m['gpu_hours']:9.1f} "
            f"{m['gpu_hours_x_reactive']:9.2f}x{cost} {spend}{bound}"
        )
    floor = summary["policy"]["prewarm"]
    if floor.get("floor_windows"):
        lines.append(
            f"policy prewarm in {floor['floor_windows']} windows without reactive hours, from "
            f"the wake-up floor ({floor['wake_hours']:.2f} replica-hours: maxPrewarmReplicas for "
            f"lead time + horizon): at most {floor['max_floor_window_spend']:.2f} replica-hours"
        )
    return "\n".join(lines)


def legend(summary: dict[str, Any]) -> str:
    """What each column and row of `table` means, with its unit, a line each (under 100
    characters): printed under it, as `scaler demo` prints its columns and reasons."""
    config, trace = summary["config"], summary["trace"]
    step, window = format_duration(trace["step_seconds"]), format_duration(config["budget_window"])
    share, price = config["budget_share"], config["cost_per_replica_hour"]
    limit = budget.describe(config["budget"], share)
    money = config["currency"] if price is not None else "replica-hours"
    spend = (
        f"most prewarm in a rolling {window} / its reactive replica-hours (budget {limit})"
        if share is not None
        else f"most prewarm in a rolling {window}, in {money} (budget {limit})"
    )
    rows = [
        ("frontier", "under-prov / static headroom's at equal GPU-h: below 1 beats headroom"),
        ("under-prov", f"% of the {trace['scored_steps']} scored steps with fewer replicas ready "
         "than needed"),
        ("shortfall", f"replicas short, summed over those steps (replica-steps of {step})"),
        ("GPU-h", "replica-hours asked for over the scored steps (GPU-hours at 1 GPU each)"),
        ("x reactive", "GPU-h / reactive's GPU-h"),
        *([(f"cost {money}", f"GPU-h x {price:g} {money} a replica-hour")] if price else []),
        ("max prewarm/window", spend),
        ("rows", "reactive: an HPA; reactive_20: with 20% headroom; oracle: perfect foresight"),
    ]  # fmt: skip
    return "\n".join(f"  {name:19} {meaning}" for name, meaning in rows)
