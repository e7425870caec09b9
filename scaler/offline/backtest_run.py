"""`scaler backtest` run: read the history (TRACE.csv or a --prometheus-url query), grade the
forecasts (offline.backtest), replay the decisions (offline.replay), print their tables and
write the files.

The flags arrive parsed (scaler.offline.backtest_cli) and are checked and turned into configs by
scaler.offline.backtest_checks; this module owns the order of the steps and what is printed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from models import fitcache, prophet, select
from models.base import Series
from scaler.decision import budget, spec
from scaler.errors import ConfigError
from scaler.offline import (
    backtest_checks,
    model_switches,
    prometheus_history,
    replay,
    replay_config,
    replay_log,
    replay_summary,
    replay_table,
)
from scaler.offline.backtest import BacktestConfig, factory, graded_ahead, run, write
from scaler.offline.traces import read_trace
from scaler.record import explain_cli
from scaler.settings import PrometheusSettings
from scaler.sources import prometheus_flags

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


def cmd_backtest(args: argparse.Namespace) -> int:
    if args.exact_prophet:
        prophet.exact()
    select.PEAK_GUARD = not args.no_peak_guard
    model_switches.apply(args)
    with fitcache.sharing():  # each compared model is fitted once, not again beside auto
        return _backtest(args)


def _backtest(args: argparse.Namespace) -> int:
    config = backtest_checks.config_from(args)
    amount, share = args.budget
    if hint := budget.share_hint("--budget", amount, share=share, cost=args.cost_per_replica_hour):
        print(f"scaler backtest: warning: {hint}", file=sys.stderr)
    trace, name = _history(args, config)  # decided and scored at its own step
    series = backtest_checks.gradable(trace, name, config)  # forecast and graded at the model step
    if warning := backtest_checks.outlier_warning(trace, name, max_replicas=args.max_replicas):
        print(f"scaler backtest: warning: {warning}", file=sys.stderr)
    try:
        threshold = replay_config.threshold_from(args.threshold, trace)
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    out = args.out if args.out is not None else default_out(args.trace)
    backtest_checks.prepare_out(out)  # before the walk, which takes minutes
    result = run(series, config, trace=name)
    backtest_checks.refuse_nothing_graded(result.summary, trace, name, config)
    print(table(result.summary))
    decisions = explained = None
    if not args.no_decisions:
        # the warm-up of the whole trace, as `run` counts it
        warmup = replay_summary.warmup_steps(trace, config.warmup)
        replayed = _limited(trace, warmup, config.limit)
        settings = backtest_checks.replay_config_from(args, config, threshold)
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
        print(replay_table.table(decisions.summary))
        print(replay_table.legend(decisions.summary))
        explained = _explain_hint(target, out, decisions.summary)
    write(result, out, model=config.model, threshold=threshold, decisions=decisions)
    from scaler.offline import backtest_plot  # matplotlib only when a picture is written

    backtest_plot.plot(result, out / "backtest.png", model=config.model)
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
