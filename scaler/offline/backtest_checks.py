"""`scaler backtest`'s flags -> its configs (BacktestConfig for the forecasts, ReplayConfig for
the decisions), and every refusal made before the walk, which takes minutes: flags that cannot
run together, an --out that cannot be written, a trace too short or too coarse to grade, a
warm-up or --limit that leaves nothing to score; and, after the walk, a trace whose forecasts
all fell past its end.

Each refusal is a ConfigError naming the flag or trace and the fix; a trace read as given
but with values that would swamp every figure gets a warning (outlier_warning). It does not
parse the command line (scaler.offline.backtest_cli) nor run anything
(scaler.offline.backtest_run).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from models import catalog
from models.base import DAY, HOUR, Series, observed_span
from scaler.decision import policy, ranges, resolution
from scaler.decision.spec import format_duration
from scaler.errors import ConfigError
from scaler.offline import graded_window, model_steps, replay_config, replay_summary
from scaler.offline.backtest import OUTPUTS, BacktestConfig

WARMUP = ranges.Range(2 * DAY, 3650 * DAY, duration=True)
"""--warmup: with less, the first days have no model (models.base.season_for) and the grades
compare a handful of late forecasts with the reference's many."""


def config_from(args: argparse.Namespace) -> BacktestConfig:
    """The forecasts' config from the flags, refusing those that cannot run together."""
    if args.currency is not None and args.cost_per_replica_hour is None:
        raise ConfigError(
            f"--currency {args.currency} without --cost-per-replica-hour prices nothing; give "
            "--cost-per-replica-hour PRICE, or drop --currency (as a trigger's currency needs "
            "costPerReplicaHour)"
        )
    if args.max_replicas < args.min_replicas:
        raise ConfigError(
            f"--max-replicas {args.max_replicas} is below --min-replicas {args.min_replicas}; "
            "raise --max-replicas or lower --min-replicas"
        )
    compare = () if args.compare == "none" else tuple(filter(None, args.compare.split(",")))
    unknown = [m for m in compare if m not in catalog.CANDIDATES]
    if unknown:
        raise ConfigError(
            f"--compare {','.join(unknown)}: not a model; use {','.join(catalog.CANDIDATES)}"
        )
    if args.holidays and "prophet" not in (args.model, *compare):
        raise ConfigError(
            f"--holidays {args.holidays}: holidays are Prophet's, and neither --model "
            f"({args.model}) nor --compare has prophet; add --model prophet or --compare prophet"
        )
    return BacktestConfig(
        lead_time=args.lead_time,
        horizon=args.horizon,
        quantile=args.quantile,
        model=args.model,
        step=args.step,
        warmup=args.warmup,
        limit=args.limit,
        holidays=args.holidays,
        compare=compare,
    )


def replay_config_from(
    args: argparse.Namespace, config: BacktestConfig, threshold: float
) -> replay_config.ReplayConfig:
    """The decisions' config from the flags: the forecasts' lead time, quantile and refit
    schedule (`config`), the trace's `threshold`, and the trigger's limits and budget."""
    amount, share = args.budget
    return replay_config.ReplayConfig(
        threshold=threshold,
        lead_time=config.lead_time,
        horizon=config.horizon,
        quantile=config.quantile,
        min_replicas=args.min_replicas,
        max_replicas=args.max_replicas,
        max_prewarm_replicas=args.max_prewarm_replicas,
        budget=amount,
        budget_share=share,
        budget_window=args.budget_window,
        cost_per_replica_hour=args.cost_per_replica_hour,
        currency=args.currency or replay_config.ReplayConfig.currency,
        refit_every=config.refit_every,
        history_window=config.window,
        model_step=config.step,
        drift=not args.no_drift,
        drift_margin=not args.no_drift_margin,
        drift_run_test=not args.no_run_test,
        drop_margin=args.drop_margin,
        charge_hold=not args.free_hold,
        level_points=policy.LEVEL_POINTS if args.level else 0,
    )


def prepare_out(out: Path) -> None:
    """--out DIR, created now and written to once: a file in its place, a path that cannot be
    created, a folder this user cannot write or an output name taken by a folder fails the run
    before the walk, not after it."""
    fix = f"give a directory to write {', '.join(OUTPUTS)} into"
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        why = "a file is in the way" if isinstance(e, FileExistsError) else e.strerror
        raise ConfigError(f"--out {out}: cannot write the output folder ({why}); {fix}") from None
    for name in OUTPUTS:
        if (out / name).is_dir():
            raise ConfigError(f"--out {out}: {name} there is a directory; move it, or {fix}")


def gradable(trace: Series, name: str, config: BacktestConfig) -> Series:
    """`trace` at the model step (resolution.model_series) once none of the refusals made
    before the walk applies: what `scaler backtest` grades, and notebooks/backtest.ipynb on a
    file of the user's (which, calling run directly, drew a table of nan for a trace the
    command refuses with its fix)."""
    refuse_unusable(trace, name, config.step)
    series = resolution.model_series(trace, config.step)
    refuse_nothing_scored(trace, series, name, config)
    return series


def refuse_unusable(trace: Series, name: str, model_step: float) -> None:
    """No model fits on less than a day of load (models.base.season_for), so such a trace would
    grade nothing: refused with the fix rather than a table of nan; so is a trace too coarse
    (refuse_coarse), and one whose every value is 0, which has nothing to grade either."""
    refuse_coarse(trace, name, model_step=model_step)
    observed = trace.values[~np.isnan(trace.values)]
    if observed.size and not observed.any():
        raise ConfigError(
            f"{name}: every value is 0, so there is no load to forecast or scale, and every "
            "figure would be 0 or undefined (before, a frontier of 0.00 that read as a win "
            "over headroom); export the series of the load itself, one that is not 0"
        )
    span = observed_span(trace)
    if span <= DAY:
        held = f"{span / 60:.0f} min" if span < HOUR else f"{span / HOUR:.1f} h"
        raise ConfigError(
            f"{name}: holds {held} of observed load; a model needs a day of "
            "history before its first forecast, so there is nothing to grade: export more "
            "than a day (two weeks or more to learn a weekly cycle)"
        )


def refuse_coarse(trace: Series, name: str, *, model_step: float) -> None:
    """A trace coarser than the model step is modelled at its own step
    (resolution.model_series), so its step must be one --step could be: at most an hour
    (ranges.MODEL_STEP: a coarser step has under 24 points a day and swallows the 10-30 minutes
    ahead the scaler forecasts, so the figures would grade a daily mean against a cold start of
    minutes), and a whole fraction of a day. `scaler demo` replays no other trace either."""
    own = format_duration(trace.step)
    fix = f"export a step of {format_duration(ranges.MODEL_STEP.high)} or finer"
    if trace.step > ranges.MODEL_STEP.high:
        raise ConfigError(
            f"{name}: its rows are {own} apart; the scaler forecasts minutes ahead at a model "
            f"step of at most {format_duration(ranges.MODEL_STEP.high)}, and a coarser trace "
            f"would be modelled at its own step, one value per {own}: {fix} (the live engine "
            "models 5m)"
        )
    if trace.step > model_step + 1e-9 and not model_steps.divides_day(trace.step):
        others = " or ".join(
            f"--step {format_duration(s)}"
            for s in model_steps.nearby(trace.step, ranges.MODEL_STEP)
            if s > trace.step
        )
        raise ConfigError(
            f"{name}: its rows are {own} apart, coarser than --step "
            f"{format_duration(model_step)}, so the models would run at {own}: "
            f"{model_steps.slips(trace.step)}; {fix} that divides a day, or give "
            f"{others or 'a --step that divides a day'}"
        )


OUTLIER = 1000.0
"""A value this many times the trace's 99th percentile is named before the walk. The shared
traces' largest is 1.5-21 times theirs (twitter_aapl's news bursts the 21)."""


def outlier_warning(trace: Series, name: str, *, max_replicas: int) -> str | None:
    """A warning naming the values above OUTLIER times the trace's 99th percentile: one bad
    sample (a counter reset, a scrape glitch; a 1e9 in nasa's 5 days) sizes the baselines'
    replicas, which no --max-replicas caps, so the frontier flatters the policy (0.22 for
    0.48 without it) and the models' figures turn to noise. Read as given; None without."""
    values = trace.values[np.isfinite(trace.values)]
    if values.size == 0 or (typical := float(np.percentile(values, 99))) <= 0:
        return None
    above = np.flatnonzero(trace.values > OUTLIER * typical)
    if above.size == 0:
        return None
    worst = int(above[np.argmax(trace.values[above])])
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(trace.start + worst * trace.step))
    return (
        f"{name}: {above.size} value(s) over {OUTLIER:g} times its 99th percentile "
        f"({typical:g}), the largest {trace.values[worst]:g} at {when}; if that is a bad "
        "sample (a counter reset, a scrape glitch), leave it empty in the trace: the "
        "baselines' replicas are sized for it while the policy's stop at --max-replicas "
        f"{max_replicas}, so the frontier and GPU-hours hang on it"
    )


def refuse_nothing_scored(trace: Series, series: Series, name: str, config: BacktestConfig) -> None:
    """A warm-up as long as the trace, a --limit under one model step, or a graded window
    inside a gap of the trace leaves nothing to grade: refused with the fix before the walk,
    rather than a table of nan or a refusal after it that blames the export."""
    if config.warmup is not None and replay_summary.warmup_steps(trace, config.warmup) >= len(
        trace
    ):
        raise ConfigError(
            f"--warmup {format_duration(config.warmup)}: {name} covers "
            f"{format_duration(trace.span)}, so nothing is left to score; use a shorter warm-up "
            "(the default is 14d, or half a shorter trace)"
        )
    if config.limit is not None and config.limit < series.step:
        raise ConfigError(
            f"--limit {format_duration(config.limit)}: shorter than one model step "
            f"({format_duration(series.step)}), so nothing is scored; grade at least one step"
        )
    graded_window.refuse_empty(
        series, name, warmup=config.warmup, limit=config.limit, min_warmup=WARMUP.low
    )


def refuse_nothing_graded(
    summary: dict[str, Any], trace: Series, name: str, config: BacktestConfig
) -> None:
    """A trace just over a day passes refuse_unusable, but the first forecast (made once a day
    of load is known) can be for a step after its end: every forecast graded would be missing
    and the decisions pure reactive. Refused rather than a table of nan and a frontier that
    graded no forecast."""
    if summary["trace"]["scored_steps"] == 0:
        raise ConfigError(
            f"{name}: no {config.model} forecast could be graded: the first is made once a day "
            "of load is known, for a step after the trace ends "
            f"({_observed(trace)}, the warm-up not scored); "
            "export at least 3 days (two weeks or more to learn a weekly cycle)"
        )


def _observed(trace: Series) -> str:
    """`14d observed`, and the span when a gap makes it longer: a gap is not observed load."""
    observed, span = graded_window.observed_seconds(trace), observed_span(trace)
    within = f" within {format_duration(span)}" if observed < span - 1e-9 else ""
    return f"{format_duration(observed)} observed{within}"
