"""Phantom prewarm after an injected drop: how much prewarm the policy buys for load that is no
longer there, with drift fallback and with `--no-drift`.

The trace is scaled to `factor` (default 30%) from `day` on, so the forecast, fitted on the old
level, keeps predicting load that has gone. Phantom prewarm is the prewarm no load needed: the
replicas a decision asked for above both its reactive floor and what the load actually required
over the next cold start (the oracle's request), counted in the day after the drop's first hour.
Issue 7's goal: at most a quarter of what `--no-drift` buys, or 2 replica-hours. With drift on
it also prints when fallback began and the phantom split by each step's drift state and reason
(before the alarm the forecast buys it, in fallback the margin or the paid hold).

    .venv/bin/python bench/drift_drop.py ../shared/traces/nasa_http_5min.csv --day 17 \
        [--budget 30%] [--budget-window 7d]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from models.base import DAY, HOUR, Forecaster, Series
from models.seasonal import SeasonalBaseline
from scaler.decision import drift_measure
from scaler.decision.budget import DEFAULT_BUDGET, parse_budget
from scaler.decision.spec import duration_arg
from scaler.offline import baselines, replay, replay_config, replay_summary, yardstick
from scaler.offline.traces import read_trace

GRACE = HOUR
"""The drop's first hour: the time the monitor is allowed to notice it."""
SPAN = DAY
"""How long after the grace hour phantom prewarm is counted."""


def dropped(series: Series, *, at: float, factor: float) -> Series:
    """`series` with every value from time `at` on multiplied by `factor`."""
    values = series.values.copy()
    values[series.times() >= at] *= factor
    return Series(series.start, series.step, values)


def phantom(
    series: Series,
    config: replay_config.ReplayConfig,
    *,
    at: float,
    make: Callable[[], Forecaster] | str,
) -> tuple[float, float]:
    """(phantom, all) prewarm replica-hours bought in [at + GRACE, at + GRACE + SPAN)."""
    found, spent, _, _ = phantom_split(series, config, at=at, make=make)
    return sum(found.values()), spent


def phantom_split(
    series: Series,
    config: replay_config.ReplayConfig,
    *,
    at: float,
    make: Callable[[], Forecaster] | str,
) -> tuple[dict[tuple[str, str], float], float, float, int]:
    """Phantom prewarm replica-hours in [at + GRACE, at + GRACE + SPAN) by (drift state,
    decision reason): "ok" steps bought it from the forecast (before the alarm), "fallback"
    steps from the margin or the paid hold; with all prewarm bought there, the time of the
    first step at or after `at` decided in fallback (NaN: none), and the steps there with fewer
    replicas ready than the load required (the cost of buying less)."""
    frame, extra = replay.simulate(series, config, make=make)
    k = yardstick.cold_start_steps(config.lead_time, series.step)
    need = baselines.oracle(series.values, threshold=config.threshold, k=k)
    desired, reactive = np.asarray(frame["desired"]), np.asarray(frame["reactive"])
    spent = np.asarray(frame["prewarm_replica_hours"])
    prewarm = spent * HOUR / series.step  # replicas above reactive at each step
    unneeded = np.clip(desired - np.maximum(reactive, need), 0, prewarm)
    times = series.times()
    window = (times >= at + GRACE) & (times < at + GRACE + SPAN)
    hours = series.step / HOUR
    fell = np.asarray(extra[replay_summary.FALLBACK_AT], dtype=bool)
    reasons = frame["reason"].to_numpy()
    found: dict[tuple[str, str], float] = {}
    for i in np.flatnonzero(window & (unneeded > 0)):
        key = ("fallback" if fell[i] else "ok", str(reasons[i]))
        found[key] = found.get(key, 0.0) + float(unneeded[i]) * hours
    after = np.flatnonzero(fell & (times >= at))
    alarm = float(times[after[0]]) if after.size else math.nan
    ready = yardstick.ready(desired, k)
    short = int(np.sum(window & (ready < np.asarray(frame["required"]))))
    return found, float(spent[window].sum()), alarm, short


def measure(
    series: Series,
    config: replay_config.ReplayConfig,
    *,
    day: float,
    factor: float = 0.3,
    make: Callable[[], Forecaster] | str = SeasonalBaseline,
) -> dict[str, float]:
    """Phantom prewarm with drift on and off, on `series` dropped to `factor` from `day` on;
    the series is cut right after the counted day (nothing later can change it)."""
    at = series.start + day * DAY
    cut = dropped(series, at=at, factor=factor).until(at + GRACE + SPAN)
    split, on_all, alarm, under = phantom_split(cut, config, at=at, make=make)
    off_split, off_all, _, off_under = phantom_split(
        cut, dataclasses.replace(config, drift=False), at=at, make=make
    )
    off = sum(off_split.values())
    on = sum(split.values())
    return {
        "drift": on,
        "no_drift": off,
        "share": on / off if off > 0 else math.nan,
        "drift_all_prewarm": on_all,
        "no_drift_all_prewarm": off_all,
        "alarm_hours": (alarm - at) / HOUR,
        "drift_under_steps": float(under),
        "no_drift_under_steps": float(off_under),
        **{f"drift_{state}_{reason}": v for (state, reason), v in sorted(split.items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--day", type=float, default=17.0, help="days from the start (default 17)")
    parser.add_argument("--factor", type=float, default=0.3)
    parser.add_argument("--threshold", default="p99/20")
    parser.add_argument("--model", default="seasonal", help="a catalog model or auto")
    parser.add_argument(
        "--no-drift-margin", action="store_true", help="plain reactive fallback (the ablation)"
    )
    parser.add_argument(
        "--no-run-test", action="store_true", help="no run test on misses below (the ablation)"
    )
    parser.add_argument(
        "--raw-runs",
        action="store_true",
        help="the run test's limit from the calibration's raw runs, not scaled to the band "
        "(the ablation)",
    )
    parser.add_argument(
        "--drop-margin",
        action="store_true",
        help="keep the margin in a fallback entered on a drop (the ablation of the direction rule)",
    )
    parser.add_argument(
        "--budget",
        default=DEFAULT_BUDGET,
        # argparse %-formats help: the default's '%' (30%) must be doubled
        help=f"prewarmBudget as scaler backtest reads it (default "
        f"{DEFAULT_BUDGET.replace('%', '%%')}, the product's)",
    )
    parser.add_argument(
        "--budget-window", type=duration_arg, default=replay_config.ReplayConfig.budget_window
    )
    args = parser.parse_args()
    series = read_trace(args.trace)
    amount, share = parse_budget(args.budget)
    config = replay_config.ReplayConfig(
        threshold=replay_config.threshold_from(args.threshold, series),
        budget=amount,
        budget_share=share,
        budget_window=args.budget_window,
        drift_margin=not args.no_drift_margin,
        drift_run_test=not args.no_run_test,
        drop_margin=args.drop_margin,
    )
    make: Callable[[], Forecaster] | str = (
        SeasonalBaseline if args.model == "seasonal" else args.model
    )
    if args.raw_runs:
        drift_measure.null_from = functools.partial(drift_measure.null_from, scaled_runs=False)
    result = measure(series, config, day=args.day, factor=args.factor, make=make)
    print(
        f"phantom prewarm in the day after the drop's first hour: drift {result['drift']:.2f} "
        f"replica-h, --no-drift {result['no_drift']:.2f} replica-h (share {result['share']:.2f}; "
        "goal <= 0.25 or <= 2 replica-h); all prewarm in that day: drift "
        f"{result['drift_all_prewarm']:.2f}, --no-drift {result['no_drift_all_prewarm']:.2f}"
    )
    print(
        f"under-provisioned steps in that day: drift {result['drift_under_steps']:.0f}, "
        f"--no-drift {result['no_drift_under_steps']:.0f}"
    )
    print(f"drift on: fallback from {result['alarm_hours']:.2f} h after the drop; phantom by")
    for key, value in result.items():
        if key.startswith(("drift_ok_", "drift_fallback_")):
            state, reason = key.removeprefix("drift_").split("_", 1)
            print(f"  {state:8} {reason:16} {value:6.2f} replica-h")


if __name__ == "__main__":
    main()
