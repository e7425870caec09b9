"""`scaler backtest`'s command line: its flags, their help and their argparse types; the
command of offline.backtest (forecasts) and offline.replay (decisions).

Parsing only: the flags are checked and turned into configs by scaler.offline.backtest_checks
and run by scaler.offline.backtest_run (`cmd_backtest`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from models import catalog
from models.base import HOUR
from scaler import helptext
from scaler.decision import budget, countries, ranges, spec
from scaler.decision.spec import duration_arg
from scaler.offline import backtest_checks, backtest_run, model_steps, model_switches, replay_config
from scaler.sources import prometheus_flags

QUERY_STEP = ranges.Range(10, HOUR, duration=True)
"""--query-step: the resolution decisions are replayed and scored at."""


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
        "headroom and oracle baselines (frontier ratio). Writes DIR/forecasts.csv (per "
        "scored step: timestamp, actual, forecast_p50 and the calibrated band at --quantile, "
        "forecast_p95 at 0.95), DIR/decisions.csv (per trace step: load, replicas required, "
        "reactive, desired and ready, reason, prewarm charged), DIR/decisions.jsonl (the "
        "decisions as `scaler serve --decision-log` writes them, for `scaler explain "
        "backtest/NAME --log DIR/decisions.jsonl`), DIR/summary.json (the printed figures) "
        "and DIR/backtest.png; docs/forecasting.md, 'What the files hold', has every column.",
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
            backtest_checks.WARMUP,
            "the first fit needs over a day of load and a calibration window after it",
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
        default=replay_config.ReplayConfig.budget_window,
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
        f"money figures, converts nothing (default {replay_config.ReplayConfig.currency}, as the "
        "trigger's; refused without --cost-per-replica-hour, as the trigger's is)",
    )
    policy_flags.add_argument(
        "--min-replicas",
        type=ranges.flag(ranges.count_in(ranges.REPLICAS), "as the trigger's `minReplicas`"),
        default=replay_config.ReplayConfig.min_replicas,
        metavar="N",
        help=f"floor of every decision, as `minReplicas` "
        f"(default {replay_config.ReplayConfig.min_replicas})",
    )
    policy_flags.add_argument(
        "--max-replicas",
        type=ranges.flag(ranges.count_in(ranges.CEILING), "as the trigger's `maxReplicas`"),
        default=replay_config.ReplayConfig.max_replicas,
        metavar="N",
        help=f"ceiling of every decision, as `maxReplicas` "
        f"(default {replay_config.ReplayConfig.max_replicas})",
    )
    policy_flags.add_argument(
        "--max-prewarm-replicas",
        type=ranges.flag(ranges.count_in(ranges.REPLICAS), "as the trigger's `maxPrewarmReplicas`"),
        default=replay_config.ReplayConfig.max_prewarm_replicas,
        metavar="N",
        help=f"replicas above reactive, ever, as `maxPrewarmReplicas` "
        f"(default {replay_config.ReplayConfig.max_prewarm_replicas})",
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
        f"(default: {backtest_run.DEFAULT_OUT.format(name='NAME')} in the current directory, "
        "NAME the trace's file name without .csv/.gz, or "
        f"{backtest_run.PROMETHEUS_NAME} for --prometheus-url)",
    )
    p.set_defaults(func=backtest_run.cmd_backtest)


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
