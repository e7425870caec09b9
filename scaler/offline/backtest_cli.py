"""`scaler backtest`: the command line of offline.backtest (forecasts) and offline.replay
(decisions). Parses flags into their configs, runs both, prints the tables, writes the files."""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TypeVar

from models import catalog, fitcache, prophet, select
from models.base import DAY, HOUR, Series, observed_span
from scaler import helptext
from scaler.decision import budget, countries, policy, ranges, resolution, spec
from scaler.decision.spec import duration_arg, format_duration
from scaler.errors import ConfigError
from scaler.offline import (
    graded_window,
    model_steps,
    model_switches,
    prometheus_history,
    replay,
    replay_log,
)
from scaler.offline.backtest import (
    OUTPUTS,
    BacktestConfig,
    factory,
    graded_ahead,
    run,
    write,
)
from scaler.offline.traces import read_trace
from scaler.record import explain_cli
from scaler.settings import PrometheusSettings
from scaler.sources import prometheus_flags

T = TypeVar("T")


def add_parser(sub: Any, env: prometheus_flags.Env = lambda _name: None) -> None:
    p = sub.add_parser(
        "backtest",
        help="walk forward through a trace as production would and grade the forecasts",
        description="Walk forward through a timestamp,value CSV exactly as production would "
        "(fit on what was known, refit weekly on the last 4 weeks, no lookahead), and grade "
        "the forecast made LEAD-TIME before each step: coverage of the calibrated quantile, "
        "pinball loss, WAPE and MASE, per model and for the seasonal-naive reference (same "
        "time one week earlier, level-corrected; one day earlier when the warm-up is under "
        "two weeks). Then replays the policy over the trace with those forecasts, the budget "
        "and drift fallback, and scores it with the replay yardstick against reactive, static "
        "headroom and oracle baselines (frontier ratio). Writes DIR/forecasts.csv, "
        "DIR/decisions.csv, DIR/decisions.jsonl (the decisions as `scaler serve "
        "--decision-log` writes them, for `scaler explain backtest/NAME --log "
        "DIR/decisions.jsonl`), DIR/summary.json and DIR/backtest.png.",
        epilog="examples:\n"
        "  scaler backtest ../shared/traces/nasa_http_5min.csv --threshold p99/20 "
        "--lead-time 10m --horizon 15m --out /tmp/bt-nasa\n"
        "  scaler backtest grafana-export.csv --threshold 50 --budget 10% --limit 7d "
        "--out /tmp/bt-export\n"
        "  scaler backtest --prometheus-url http://prometheus:9090 "
        "--query 'sum(rate(requests_total[2m]))' --since 28d --threshold 50 --out /tmp/bt-mine",
        formatter_class=helptext.Paragraphs,
    )
    p.add_argument(
        "trace",
        type=Path,
        nargs="?",
        metavar="TRACE.csv",
        help="time,value CSV: timestamp,value, a Grafana or Prometheus export, epoch s/ms or "
        "ISO 8601 times, gzipped or not (docs/traces.md); empty values are missing data; more "
        "than a day of load (a model needs a day before its first forecast), two weeks for a "
        "weekly cycle",
    )
    p.add_argument(
        "--threshold",
        default="p99/20",
        metavar="C",
        help="load one replica serves, or pNN/D: the NNth percentile of the trace "
        "divided by D (default p99/20: the peak needs about 20 replicas)",
    )
    p.add_argument(
        "--lead-time",
        type=ranges.duration_flag(ranges.LEAD_TIME, "as the trigger's `leadTime`"),
        default=600.0,
        metavar="DURATION",
        help="replica cold start: forecasts are graded this long before the step, 1s-2h as "
        "the trigger's leadTime (default 10m)",
    )
    p.add_argument(
        "--horizon",
        type=ranges.duration_flag(ranges.HORIZON, "as the trigger's `horizon`"),
        default=900.0,
        metavar="DURATION",
        help="look-ahead past the lead time each forecast covers, 0s-4h as the trigger's "
        "horizon (default 15m)",
    )
    p.add_argument(
        "--quantile",
        type=ranges.flag(ranges.parse_quantile, "as the trigger's `quantile`"),
        default=0.95,
        help="forecast quantile the decisions insure, strictly between 0.5 and 1, as the "
        "trigger's `quantile` (default 0.95)",
    )
    p.add_argument(
        "--model",
        default="auto",
        choices=("auto", *catalog.CANDIDATES),
        help="model production would run; auto = select at every refit (default)",
    )
    p.add_argument(
        "--compare",
        default=",".join(catalog.CANDIDATES),
        metavar="M1,M2",
        help="models graded alongside (default: every candidate; 'none' for none); "
        "the seasonal-naive reference is always graded",
    )
    p.add_argument(
        "--step",
        type=model_steps.step_flag(ranges.MODEL_STEP, "the live engine's is 5m"),
        default=300.0,
        metavar="DURATION",
        help="model step, 1m-1h and a whole fraction of a day (the seasonal profiles repeat "
        "daily): forecasts are made at it, on the peak of each step of a finer trace; decisions "
        "are made and scored at the trace's own step (default 5m, the live engine's)",
    )
    p.add_argument(
        "--warmup",
        type=ranges.duration_flag(
            WARMUP, "the first fit needs over a day of load and a calibration window after it"
        ),
        default=None,
        metavar="DURATION",
        help="unscored history at the start (default 14d, or half a trace shorter than 28d, "
        "from its first row to its last, gaps included)",
    )
    p.add_argument(
        "--limit",
        type=duration_arg,
        default=None,
        metavar="DURATION",
        help="grade only this long after the warm-up (default: to the end)",
    )
    p.add_argument(
        "--holidays",
        type=_country,
        default=None,
        metavar="CC",
        help="country code for Prophet's holidays, e.g. US (prophet only)",
    )
    policy_flags = p.add_argument_group(
        "decisions (the policy replay: DIR/decisions.csv and summary.json's `decisions`)"
    )
    policy_flags.add_argument(
        "--budget",
        type=_budget,
        default=budget.DEFAULT_BUDGET,
        metavar="B",
        help="prewarm allowed per window: replica-hours (money with --cost-per-replica-hour), "
        "or a share of the window's reactive replica-hours such as 10%% (default %(default)s)",
    )
    policy_flags.add_argument(
        "--budget-window",
        type=ranges.duration_flag(ranges.BUDGET_WINDOW, "as the trigger's `prewarmBudgetWindow`"),
        default=replay.ReplayConfig.budget_window,
        metavar="DURATION",
        help="rolling window of the budget (default 24h)",
    )
    policy_flags.add_argument(
        "--cost-per-replica-hour",
        type=ranges.flag(ranges.number_in(ranges.COST), "as the trigger's `costPerReplicaHour`"),
        default=None,
        metavar="PRICE",
        help="price of one replica-hour, as the trigger's `costPerReplicaHour`: --budget and "
        "the prewarm spent per window are then money, and every run's GPU-hours are priced too "
        "(a `cost` column, summary.json's `cost`); default: unset, replica-hours alone",
    )
    policy_flags.add_argument(
        "--currency",
        type=ranges.flag(spec.currency_code, "as the trigger's `currency`"),
        default=None,
        metavar="CODE",
        help="what --cost-per-replica-hour's money is, as the trigger's `currency`: labels the "
        f"money figures, converts nothing (default {replay.ReplayConfig.currency}, as the "
        "trigger's; refused without --cost-per-replica-hour, as the trigger's is)",
    )
    policy_flags.add_argument(
        "--min-replicas",
        type=ranges.flag(ranges.count_in(ranges.REPLICAS), "as the trigger's `minReplicas`"),
        default=replay.ReplayConfig.min_replicas,
        metavar="N",
        help=f"floor of every decision, as `minReplicas` "
        f"(default {replay.ReplayConfig.min_replicas})",
    )
    policy_flags.add_argument(
        "--max-replicas",
        type=ranges.flag(ranges.count_in(ranges.CEILING), "as the trigger's `maxReplicas`"),
        default=replay.ReplayConfig.max_replicas,
        metavar="N",
        help=f"ceiling of every decision, as `maxReplicas` "
        f"(default {replay.ReplayConfig.max_replicas})",
    )
    policy_flags.add_argument(
        "--max-prewarm-replicas",
        type=ranges.flag(ranges.count_in(ranges.REPLICAS), "as the trigger's `maxPrewarmReplicas`"),
        default=replay.ReplayConfig.max_prewarm_replicas,
        metavar="N",
        help=f"replicas above reactive, ever, as `maxPrewarmReplicas` "
        f"(default {replay.ReplayConfig.max_prewarm_replicas})",
    )
    policy_flags.add_argument(
        "--no-drift", action="store_true", help="replay the forecast even when it has drifted"
    )
    policy_flags.add_argument(
        "--no-drift-margin",
        action="store_true",
        help="in drift fallback, scale plain reactive (no recent-growth margin)",
    )
    policy_flags.add_argument(
        "--no-run-test",
        action="store_true",
        help="ablation: no drift alarm on a run of actuals below the band (by default a run "
        "longer than the calibration's own runs, scaled to the band, engages fallback)",
    )
    policy_flags.add_argument(
        "--drop-margin",
        action="store_true",
        help="ablation: keep the growth margin in a fallback entered on a drop (by default it "
        "is plain reactive plus the paid hold there: the injected-drop goal; the margin insures "
        "holidays' rebounds, vic_electricity 0.04, nyc_taxi 0.03)",
    )
    policy_flags.add_argument(
        "--free-hold",
        action="store_true",
        help="ablation: hold the lead time's highest load for free instead of paying the hold "
        "past the HPA's 5-minute stabilisation from the budget (docs/budget.md)",
    )
    policy_flags.add_argument(
        "--level",
        action="store_true",
        help="as the trigger's `levelInsurance: \"true\"`: also insure the reactive floor's "
        "load at the forecast's band (reason level); off by default, it helps load whose median "
        "lags its level and costs where the budget binds (docs/policy.md)",
    )
    policy_flags.add_argument(
        "--no-decisions", action="store_true", help="grade the forecasts only (faster)"
    )
    p.add_argument(
        "--exact-prophet",
        action="store_true",
        help="ablation: fit Prophet from its default start to CmdStan's default tolerance, as "
        "before the quick fit (models/prophet.py TOL_REL_GRAD; docs/benchmark.md Retrain)",
    )
    model_switches.add_arguments(p)
    p.add_argument(
        "--no-peak-guard",
        action="store_true",
        help="ablation: model auto picks by the forecast path's pinball loss alone, even a "
        "costlier model that loses on the peak the decision buys (models/select.py PEAK_GUARD)",
    )
    live = p.add_argument_group(
        "history from Prometheus instead of TRACE.csv (the Prometheus connection flags below apply)"
    )
    live.add_argument(
        "--prometheus-url",
        default=None,
        metavar="URL",
        help="read the history of --query from this Prometheus",
    )
    live.add_argument("--query", default=None, metavar="PROMQL", help="returns one series")
    live.add_argument(
        "--since",
        type=duration_arg,
        default=None,
        metavar="DURATION",
        help="history read, ending now (default 28d; 2d-400d)",
    )
    live.add_argument(
        "--query-step",
        type=model_steps.step_flag(
            QUERY_STEP, "a step finer than 10s replays millions of decisions"
        ),
        default=None,
        metavar="DURATION",
        help="resolution of the range queries, the step decisions are scored at (10s-1h, a "
        "whole fraction of a day; default --step; a finer one, e.g. 1m, scores per minute and "
        "forecasts per-step peaks)",
    )
    prometheus_flags.add_flags(p, env)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="output folder, created if missing; files of an earlier run there are replaced "
        f"(default: {DEFAULT_OUT.format(name='NAME')} in the current directory, NAME the "
        f"trace's file name without .csv/.gz, or {PROMETHEUS_NAME} for --prometheus-url)",
    )
    p.set_defaults(func=cmd_backtest)


DEFAULT_OUT = "backtest-{name}"
"""--out when none is given, in the current directory."""
PROMETHEUS_NAME = "prometheus"
"""The NAME of DEFAULT_OUT for a --prometheus-url history."""


def default_out(trace: Path | None) -> Path:
    """Where a backtest writes without --out: backtest-NAME in the current directory (so a run
    of another trace does not replace this one's files)."""
    return Path(DEFAULT_OUT.format(name=trace_name(trace)))


def trace_name(trace: Path | None) -> str:
    """NAME of a backtest (its default --out, its decision log's target): the trace's file
    name without its .csv/.gz suffixes, or PROMETHEUS_NAME for a --prometheus-url history."""
    if trace is None:
        return PROMETHEUS_NAME
    name = trace.name
    for suffix in (".gz", ".csv", ".tsv", ".txt", ".json"):
        name = name.removesuffix(suffix)
    return name or "trace"


QUERY_STEP = ranges.Range(10, HOUR, duration=True)
"""--query-step: the resolution decisions are replayed and scored at."""


WARMUP = ranges.Range(2 * DAY, 3650 * DAY, duration=True)
"""--warmup: with less, the first days have no model (models.base.season_for) and the grades
compare a handful of late forecasts with the reference's many."""


def _prepare_out(out: Path) -> None:
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


def cmd_backtest(args: argparse.Namespace) -> int:
    if args.exact_prophet:
        prophet.exact()
    select.PEAK_GUARD = not args.no_peak_guard
    model_switches.apply(args)
    with fitcache.sharing():  # each compared model is fitted once, not again beside auto
        return _backtest(args)


def _backtest(args: argparse.Namespace) -> int:
    if args.currency is not None and args.cost_per_replica_hour is None:
        raise ConfigError(
            f"--currency {args.currency} without --cost-per-replica-hour prices nothing; give "
            "--cost-per-replica-hour PRICE, or drop --currency (as a trigger's currency needs "
            "costPerReplicaHour)"
        )
    config = config_from(args)
    amount, share = args.budget
    if hint := budget.share_hint("--budget", amount, share=share, cost=args.cost_per_replica_hour):
        print(f"scaler backtest: warning: {hint}", file=sys.stderr)
    trace, name = _history(args, config)  # decided and scored at its own step
    _refuse_unusable(trace, name, config.step)
    series = resolution.model_series(trace, config.step)  # forecast and graded at the model step
    _refuse_nothing_scored(trace, series, name, config)
    try:
        threshold = replay.threshold_from(args.threshold, trace)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    out = args.out if args.out is not None else default_out(args.trace)
    _prepare_out(out)  # before the walk, which takes minutes
    result = run(series, config, trace=name)
    _refuse_nothing_graded(result.summary, trace, name, config)
    print(table(result.summary))
    decisions = explained = None
    if not args.no_decisions:
        warmup = replay.warmup_steps(trace, config.warmup)  # of the whole trace, as `run` counts
        replayed = _limited(trace, warmup, config.limit)
        settings = replay_config(args, config, threshold)
        target = replay_log.target_spec(
            name=replay_log.target_name(trace_name(args.trace)),
            query=name,
            config=settings,
            model=config.model,
        )
        with replay_log.ReplayLog(out / replay_log.FILE, target=target, step=trace.step) as log:
            decisions = replay.replay(
                replayed,
                settings,
                make=factory(config.model, config),
                warmup=warmup * trace.step,
                on_step=log.step,
            )
        print(replay.table(decisions.summary))
        print(replay.legend(decisions.summary))
        explained = _explain_hint(target, out, decisions.summary)
    write(result, out, model=config.model, threshold=threshold, decisions=decisions)
    written = "forecasts.csv" + (", decisions.csv, decisions.jsonl" if explained else "")
    where = "" if args.out is not None else " (no --out given: the default, backtest-NAME here)"
    print(f"wrote {written}, summary.json and backtest.png to {out}{where}")
    if explained:
        print(explained)
    return 0


def _explain_hint(target: spec.TargetSpec, out: Path, summary: dict[str, Any]) -> str:
    """The command that explains the replay's decisions over the scored span, in words: the
    one `scaler explain` suggests given DIR/decisions.csv, read from the same summary."""
    since, until = explain_cli.scored_span(summary["trace"])
    hint = explain_cli.command(target.label, out / replay_log.FILE, since=since, until=until)
    return f"explain its decisions: {hint}"


def _refuse_unusable(trace: Series, name: str, model_step: float) -> None:
    """No model fits on less than a day of load (models.base.season_for), so such a trace would
    grade nothing: refused with the fix rather than a table of nan. A trace coarser than the
    model step is modelled at its own step (resolution.model_series), so its step must be one
    --step could be: at most an hour (ranges.MODEL_STEP: a coarser step has under 24 points a day
    and swallows the 10-30 minutes ahead the scaler forecasts, so the figures would grade a
    daily mean against a cold start of minutes), and a whole fraction of a day."""
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
    span = observed_span(trace)
    if span <= DAY:
        held = f"{span / 60:.0f} min" if span < HOUR else f"{span / HOUR:.1f} h"
        raise ConfigError(
            f"{name}: holds {held} of observed load; a model needs a day of "
            "history before its first forecast, so there is nothing to grade: export more "
            "than a day (two weeks or more to learn a weekly cycle)"
        )


def _refuse_nothing_scored(
    trace: Series, series: Series, name: str, config: BacktestConfig
) -> None:
    """A warm-up as long as the trace, a --limit under one model step, or a graded window
    inside a gap of the trace leaves nothing to grade: refused with the fix before the walk,
    rather than a table of nan or a refusal after it that blames the export."""
    if config.warmup is not None and replay.warmup_steps(trace, config.warmup) >= len(trace):
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


def _refuse_nothing_graded(
    summary: dict[str, Any], trace: Series, name: str, config: BacktestConfig
) -> None:
    """A trace just over a day passes _refuse_unusable, but the first forecast (made once a day
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


SINCE = 28 * 86400.0
"""History a --prometheus-url backtest reads by default."""
_QUERY_FLAGS = {"--query": "query", "--since": "since", "--query-step": "query_step"}
"""Flags of a --prometheus-url read, and their argparse names."""


def _history(args: argparse.Namespace, config: BacktestConfig) -> tuple[Series, str]:
    """The trace a backtest walks through, and its name: TRACE.csv, or --query's history."""
    if (args.trace is None) == (args.prometheus_url is None):
        raise ConfigError("give TRACE.csv or --prometheus-url URL --query PROMQL (one of them)")
    if args.trace is not None:
        given = [flag for flag, value in _QUERY_FLAGS.items() if getattr(args, value) is not None]
        if given:
            raise ConfigError(
                f"{', '.join(given)} with TRACE.csv: they shape a --prometheus-url read, and "
                f"{args.trace} is read as it is (decided and scored at its own step; --step sets "
                "the model's); drop them, or read the query with --prometheus-url instead"
            )
        return read_trace(args.trace), str(args.trace)
    if not (args.query or "").strip():
        raise ConfigError("--prometheus-url needs --query PROMQL, returning one series")
    settings = PrometheusSettings(
        url=args.prometheus_url,
        timeout=args.prometheus_timeout,
        retries=args.prometheus_retries,
        auth=prometheus_flags.auth_from(args),
    )
    trace = prometheus_history.fetch(
        settings,
        query=args.query.strip(),
        since=SINCE if args.since is None else args.since,
        step=args.query_step or config.step,
        now=time.time(),
    )
    return trace, prometheus_history.label(settings, args.query.strip())


def _limited(trace: Series, warmup: int, limit: float | None) -> Series:
    """The warm-up and `limit` after it: the span `--limit` grades, replayed and scored too."""
    if limit is None:
        return trace
    steps = warmup + math.ceil(limit / trace.step - 1e-9)
    return Series(trace.start, trace.step, trace.values[:steps])


def replay_config(
    args: argparse.Namespace, config: BacktestConfig, threshold: float
) -> replay.ReplayConfig:
    amount, share = args.budget
    return replay.ReplayConfig(
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
        currency=args.currency or replay.ReplayConfig.currency,
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


def config_from(args: argparse.Namespace) -> BacktestConfig:
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


def table(summary: dict[str, Any]) -> str:
    """The figures as a fixed-width table (what the command prints)."""
    q = summary["config"]["quantile"]
    head = (
        f"{'model':10} {'coverage':>9} {'raw cov':>8} {'pinball':>10} {'vs ref':>7} "
        f"{'WAPE':>6} {'MASE':>6} {'fit s':>6} {'pred ms':>7}"
    )
    lead, ahead = summary["config"]["lead_time"], graded_ahead(summary)
    title = f"backtest at quantile {q:g}, graded {ahead} after the last load seen"
    title += f" ({lead} cold start)"
    lines = [title, head]
    for name, m in summary["models"].items():
        lines.append(
            f"{name:10} {m['coverage'] * 100:8.1f}% {m['raw_coverage'] * 100:7.1f}% "
            f"{m['pinball']:10.4g} {m['pinball_vs_reference'] * 100:6.1f}% "
            f"{m['wape'] * 100:5.1f}% {m['mase']:6.3f} {m['fit_seconds_mean']:6.2f} "
            f"{m['predict_ms_mean']:7.2f}"
        )
    return "\n".join(lines)


def _country(text: str) -> str:
    """A country code Prophet has holidays for (the trigger key `holidays` takes the same)."""
    if text not in countries.CODES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a country Prophet has holidays for; use an ISO 3166 code in "
            f"capitals such as US or DE"
        )
    return text


def _budget(text: str) -> tuple[float, float | None]:
    """budget.parse_budget for argparse `type=` (checked before the slow walk forward)."""
    try:
        return budget.parse_budget(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r}: {exc}; e.g. '10%' of the reactive replica-hours, '24' replica-hours, "
            "'0' for purely reactive"
        ) from None
