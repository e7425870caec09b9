"""`scaler backtest TRACE.csv`: walk forward through a trace exactly as production would and grade
the forecasts the policy would have acted on.

Pipeline: load trace -> forecasts (this module) -> [decisions: the policy replay, later] -> files.
- load: `read_trace` (line-numbered TraceError on anything unreadable), then bucket means at the
  model step (a 1-minute trace is fitted at 5 minutes; a 30-minute one stays at 30 minutes);
- forecasts: `models.walkforward` (fit on what was known, weekly refit on the last 4 weeks, no
  lookahead) with the model asked for, each candidate model, and the seasonal-naive reference;
  `forecast_frame` returns, per step, the forecast made lead-time earlier for it, which is the one
  a replica ordered then would be ready for (the replay's convention: the forecast made after
  observing step s - k - 1, at its point k, k = ceil(lead time / step));
- files: DIR/forecasts.csv (`timestamp,actual,forecast_p50,forecast_p95`, one row per scored
  step), DIR/summary.json (coverage, pinball, WAPE, MASE, per model and for the reference, raw
  model intervals next to calibrated ones, fit and predict times) and DIR/backtest.png.

Scoring: the first 14 days (the first half of a shorter trace) are warm-up and not scored; nor
are steps whose value is missing, or steps before any model could be fitted.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models import catalog, resample
from models.base import DAY, WEEK, Forecaster, Series
from models.calibrate import pinball
from models.walkforward import walk_forward
from scaler import policy, yardstick
from scaler.errors import ConfigError
from scaler.spec import format_duration, parse_duration
from scaler.traces import read_trace

WARMUP = 14 * DAY
"""Unscored history at the start of a trace (DESIGN.md): 14 days, or half of a shorter trace."""
REFERENCE = "naive"
"""The seasonal-naive reference every model is reported against."""
COLUMNS = ("timestamp", "actual", "forecast_p50", "forecast_p95")
"""Columns of forecasts.csv."""


@dataclass(frozen=True)
class BacktestConfig:
    """What to forecast and how production would have refitted."""

    lead_time: float = 600.0
    """Seconds between a forecast and the step it is graded on (replica cold start)."""
    horizon: float = 900.0
    """Seconds past the lead time each forecast path covers (what the policy reads)."""
    quantile: float = 0.95
    model: str = "auto"
    """A catalog model or "auto" (production's selection at every refit)."""
    step: float = 300.0
    """Model step in seconds; a coarser trace keeps its own step."""
    warmup: float | None = None
    """Unscored seconds at the start; None = 14 days or half of a shorter trace."""
    limit: float | None = None
    """Score only this many seconds after the warm-up (None = to the end)."""
    refit_every: float = WEEK
    window: float = 4 * WEEK
    """History each fit sees (the engine's `history`)."""
    holidays: str | None = None
    """Country code for Prophet's holidays (with model prophet)."""
    compare: tuple[str, ...] = field(default_factory=lambda: catalog.CANDIDATES)
    """Models graded next to `model` (the reference is always graded)."""


@dataclass(frozen=True)
class Result:
    """Per-step forecast frames by model name (`model` first), and the summary."""

    frames: dict[str, pd.DataFrame]
    summary: dict[str, Any]


def load_trace(path: Path, step: float) -> Series:
    """The trace at `path` on the model step (bucket means; never upsampled)."""
    return resample.regrid(read_trace(path), step)


def warmup_steps(series: Series, warmup: float | None) -> int:
    seconds = min(WARMUP, series.span / 2) if warmup is None else warmup
    return min(len(series), math.ceil(seconds / series.step - 1e-9))


def factory(name: str, config: BacktestConfig) -> Callable[[], Forecaster] | str:
    """What walk_forward fits for `name`: the model name, or Prophet with holidays."""
    if name == "prophet" and config.holidays:
        cls: Any = catalog.adapter("prophet")
        made: Callable[[], Forecaster] = functools.partial(cls, holidays=config.holidays)
        return made
    return name


def forecast_frame(series: Series, config: BacktestConfig, name: str) -> pd.DataFrame:
    """One row per step after the warm-up (up to `limit`): the actual and the forecast made
    lead-time earlier for it by model `name`; NaN forecasts while no model could be fitted.

    Columns: timestamp (epoch seconds), actual, forecast_p50, forecast_p95, raw_p95 (the
    model's own interval), model (the kind in use: what "auto" chose), and fit_seconds (time of
    the refit made at that origin, else 0) and predict_seconds, for the timing figures.
    """
    k = yardstick.cold_start_steps(config.lead_time, series.step)
    points = max(policy.forecast_points(config.lead_time, config.horizon, series.step), k + 1)
    first = warmup_steps(series, config.warmup)
    last = len(series)
    if config.limit is not None:
        last = min(last, first + math.ceil(config.limit / series.step - 1e-9))
    rows = max(0, last - first)
    out = {c: np.full(rows, np.nan) for c in ("forecast_p50", "forecast_p95", "raw_p95")}
    fit_s, predict_s = np.zeros(rows), np.full(rows, np.nan)
    kinds = np.full(rows, "", dtype=object)
    origins = walk_forward(
        factory(name, config),
        series,
        start=max(0, first - k - 1),
        steps=points,
        quantile=config.quantile,
        refit_every=config.refit_every,
        window=config.window,
    )
    model = None
    tick = time.perf_counter()
    for origin in origins:
        elapsed, tick = time.perf_counter() - tick, time.perf_counter()
        row = origin.index + 1 + k - first
        if row >= rows:
            break
        refit = origin.model is not model
        model = origin.model
        if row < 0 or origin.forecast is None:
            continue
        f = origin.forecast
        out["forecast_p50"][row], out["forecast_p95"][row] = f.p50[k], f.upper[k]
        out["raw_p95"][row] = f.raw_upper[k] if f.raw_upper is not None else np.nan
        kinds[row] = origin.model.kind if origin.model else ""
        fit_s[row] = elapsed if refit else 0.0
        predict_s[row] = np.nan if refit else elapsed
    times = series.start + series.step * np.arange(first, first + rows, dtype=np.float64)
    return pd.DataFrame(
        {
            "timestamp": times,
            "actual": series.values[first : first + rows],
            **out,
            "model": kinds,
            "fit_seconds": fit_s,
            "predict_seconds": predict_s,
        }
    )


def grade(frame: pd.DataFrame, *, quantile: float, mase_scale: float) -> dict[str, Any]:
    """Coverage, pinball loss, WAPE and MASE over the steps with an actual and a forecast."""
    ok = frame["actual"].notna() & frame["forecast_p50"].notna()
    a = frame["actual"][ok].to_numpy(dtype=np.float64)
    p50 = frame["forecast_p50"][ok].to_numpy(dtype=np.float64)
    upper = frame["forecast_p95"][ok].to_numpy(dtype=np.float64)
    raw = frame["raw_p95"][ok].to_numpy(dtype=np.float64)
    fits = frame["fit_seconds"][frame["fit_seconds"] > 0]
    n = int(ok.sum())
    nan = float("nan")
    return {
        "scored_steps": n,
        "coverage": float((a <= upper + 1e-9).mean()) if n else nan,
        "raw_coverage": float((a <= raw + 1e-9).mean()) if n else nan,
        "pinball": pinball(a, upper, quantile),
        "raw_pinball": pinball(a, raw, quantile),
        "wape": float(np.abs(a - p50).sum() / max(float(a.sum()), 1e-12)) if n else nan,
        "mase": float(np.abs(a - p50).mean() / mase_scale) if n and mase_scale > 0 else nan,
        "refits": len(fits),
        "fit_seconds_mean": float(fits.mean()) if len(fits) else nan,
        "predict_ms_median": float(frame["predict_seconds"].median() * 1e3),
        "models_used": {str(k): int(v) for k, v in frame["model"][ok].value_counts().items()},
    }


def naive_scale(series: Series, warmup: int) -> float:
    """MASE denominator: mean |y_t - y_{t-m}| over the warm-up, m = the reference's season."""
    season = WEEK if warmup * series.step >= 2 * WEEK else DAY
    m = round(season / series.step)
    v = series.values[:warmup]
    if v.size <= m:
        return float("nan")
    diff = np.abs(v[m:] - v[:-m])
    diff = diff[np.isfinite(diff)]
    return float(diff.mean()) if diff.size else float("nan")


def run(series: Series, config: BacktestConfig, *, trace: str = "") -> Result:
    """Forecast frames for `config.model`, the compared models and the reference; the summary."""
    names = list(dict.fromkeys([config.model, *config.compare, REFERENCE]))
    first = warmup_steps(series, config.warmup)
    scale = naive_scale(series, first)
    frames: dict[str, pd.DataFrame] = {}
    graded: dict[str, dict[str, Any]] = {}
    for name in names:
        tick = time.perf_counter()
        frames[name] = forecast_frame(series, config, name)
        graded[name] = grade(frames[name], quantile=config.quantile, mase_scale=scale)
        graded[name]["seconds"] = time.perf_counter() - tick
    reference = graded[REFERENCE]["pinball"]
    for figures in graded.values():
        figures["pinball_vs_reference"] = 1 - figures["pinball"] / reference
    main = frames[config.model]
    summary = {
        "trace": {
            "path": trace,
            "step_seconds": series.step,
            "steps": len(series),
            "warmup_steps": first,
            "scored_from": _iso(series.start + first * series.step),
            "scored_steps": int((main["actual"].notna() & main["forecast_p50"].notna()).sum()),
        },
        "config": {
            **asdict(config),
            "compare": list(config.compare),
            "lead_time": format_duration(config.lead_time),
            "horizon": format_duration(config.horizon),
            "step": format_duration(series.step),
            "graded_step_ahead": yardstick.cold_start_steps(config.lead_time, series.step) + 1,
        },
        "reference": REFERENCE,
        "models": graded,
    }
    return Result(frames=frames, summary=summary)


def write(result: Result, out: Path, *, model: str, threshold: float) -> None:
    """DIR/forecasts.csv (the model asked for), DIR/summary.json and DIR/backtest.png."""
    out.mkdir(parents=True, exist_ok=True)
    frame = result.frames[model]
    rows = frame[frame["actual"].notna()]
    csv = pd.DataFrame(
        {
            "timestamp": _iso_series(rows["timestamp"]),
            "actual": rows["actual"],
            "forecast_p50": rows["forecast_p50"],
            "forecast_p95": rows["forecast_p95"],
        },
        columns=list(COLUMNS),
    )
    csv.to_csv(out / "forecasts.csv", index=False, float_format="%.6g")
    summary = {**result.summary, "threshold": threshold}
    (out / "summary.json").write_text(json.dumps(_finite(summary), indent=2) + "\n")
    plot(result, out / "backtest.png", model=model)


def plot(result: Result, path: Path, *, model: str, days: float = 7.0) -> None:
    """Forecast vs actual (the last `days`), coverage over time, and the model comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(12, 10))
    grid = fig.add_gridspec(3, 2, height_ratios=(1.2, 1, 1))
    draw_forecast(fig.add_subplot(grid[0, :]), result, model=model, days=days)
    draw_coverage(fig.add_subplot(grid[1, :]), result, model=model)
    draw_comparison(fig.add_subplot(grid[2, 0]), fig.add_subplot(grid[2, 1]), result)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def draw_forecast(ax: Any, result: Result, *, model: str, days: float) -> None:
    frame = result.frames[model]
    step = float(result.summary["trace"]["step_seconds"])
    tail = frame.tail(max(1, round(days * DAY / step)))
    t = pd.to_datetime(tail["timestamp"], unit="s")
    lead = result.summary["config"]["lead_time"]
    ax.plot(t, tail["actual"], color="black", lw=0.8, label="actual")
    ax.plot(t, tail["forecast_p50"], color="tab:blue", lw=0.8, label=f"P50 made {lead} earlier")
    q = result.summary["config"]["quantile"]
    ax.plot(t, tail["forecast_p95"], color="tab:orange", lw=0.8, label=f"calibrated P{q * 100:g}")
    ax.plot(t, tail["raw_p95"], color="tab:red", lw=0.6, ls=":", label="model's own interval")
    ax.set_title(f"{model}: forecast vs actual (last {days:g} days of the backtest)")
    ax.set_ylabel("load")
    ax.legend(loc="upper left", fontsize=8, ncol=4)


def draw_coverage(ax: Any, result: Result, *, model: str, days: float = 3.0) -> None:
    """Rolling coverage of the calibrated quantile: the model asked for and the reference."""
    q = float(result.summary["config"]["quantile"])
    step = float(result.summary["trace"]["step_seconds"])
    window = max(1, round(days * DAY / step))
    for name in dict.fromkeys([model, REFERENCE]):
        frame = result.frames[name]
        covered = (frame["actual"] <= frame["forecast_p95"] + 1e-9).astype(float)
        covered[frame["actual"].isna() | frame["forecast_p95"].isna()] = np.nan
        rolling = covered.rolling(window, min_periods=window // 2).mean()
        t = pd.to_datetime(frame["timestamp"], unit="s")
        ax.plot(t, rolling * 100, lw=1.2, label=f"{name} (calibrated)")
    ax.axhline(q * 100, color="grey", ls="--", lw=1, label=f"nominal {q * 100:g}%")
    ax.set_ylabel(f"coverage, rolling {days:g} days (%)")
    ax.set_ylim(max(0, q * 100 - 25), 100.5)
    ax.set_title("realised coverage of the calibrated quantile over time")
    ax.legend(loc="lower left", fontsize=8, ncol=3)


def draw_comparison(ax_loss: Any, ax_cov: Any, result: Result) -> None:
    models = result.summary["models"]
    names = list(models)
    x = np.arange(len(names))
    ax_loss.bar(x, [models[n]["pinball"] for n in names], color="tab:blue")
    ax_loss.set_xticks(x, names)
    q = float(result.summary["config"]["quantile"])
    ax_loss.set_title(f"pinball loss at {q:g} (lower is better)")
    width = 0.4
    ax_cov.bar(
        x - width / 2,
        [models[n]["raw_coverage"] * 100 for n in names],
        width,
        label="model's own interval",
        color="tab:red",
    )
    ax_cov.bar(
        x + width / 2,
        [models[n]["coverage"] * 100 for n in names],
        width,
        label="calibrated",
        color="tab:orange",
    )
    ax_cov.axhline(q * 100, color="grey", ls="--", lw=1)
    ax_cov.set_xticks(x, names)
    ax_cov.set_ylim(50, 100)
    ax_cov.set_title("coverage: raw vs calibrated (%)")
    ax_cov.legend(loc="lower right", fontsize=8)


# ---- command line ------------------------------------------------------------------------------
def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "backtest",
        help="walk forward through a trace as production would and grade the forecasts",
        description="Walk forward through a timestamp,value CSV exactly as production would "
        "(fit on what was known, refit weekly on the last 4 weeks, no lookahead), and grade "
        "the forecast made LEAD-TIME before each step: coverage of the calibrated quantile, "
        "pinball loss, WAPE and MASE, per model and for the seasonal-naive reference (same "
        "time one week earlier, level-corrected; one day earlier when the warm-up is under "
        "two weeks). Writes DIR/forecasts.csv, DIR/summary.json and DIR/backtest.png.",
        epilog="example: scaler backtest ../shared/traces/nasa_http_5min.csv --threshold p99/20 "
        "--lead-time 10m --horizon 15m --out /tmp/bt-nasa",
    )
    p.add_argument(
        "trace",
        type=Path,
        metavar="TRACE.csv",
        help="timestamp,value CSV (empty values are missing data)",
    )
    p.add_argument(
        "--threshold",
        default="p99/20",
        metavar="C",
        help="load one replica serves, or pNN/D: the NNth percentile of the trace "
        "divided by D (default p99/20); recorded for the decisions part",
    )
    p.add_argument(
        "--lead-time",
        type=_duration,
        default=600.0,
        metavar="DURATION",
        help="replica cold start: forecasts are graded this long before the step (default 10m)",
    )
    p.add_argument(
        "--horizon",
        type=_duration,
        default=900.0,
        metavar="DURATION",
        help="look-ahead past the lead time each forecast covers (default 15m)",
    )
    p.add_argument("--quantile", type=_quantile, default=0.95, help="default 0.95")
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
        type=_duration,
        default=300.0,
        metavar="DURATION",
        help="model step; a finer trace is averaged to it (default 5m)",
    )
    p.add_argument(
        "--warmup",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="unscored history at the start (default 14d, or half a shorter trace)",
    )
    p.add_argument(
        "--limit",
        type=_duration,
        default=None,
        metavar="DURATION",
        help="grade only this long after the warm-up (default: to the end)",
    )
    p.add_argument(
        "--holidays",
        default=None,
        metavar="CC",
        help="country code for Prophet's holidays, e.g. US (prophet only)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output folder")
    p.set_defaults(func=cmd_backtest)


def cmd_backtest(args: argparse.Namespace) -> int:
    config = config_from(args)
    series = load_trace(args.trace, config.step)
    threshold = parse_threshold(args.threshold, series)
    result = run(series, config, trace=str(args.trace))
    write(result, args.out, model=config.model, threshold=threshold)
    print(table(result.summary))
    print(f"wrote {args.out / 'forecasts.csv'}, summary.json and backtest.png")
    return 0


def config_from(args: argparse.Namespace) -> BacktestConfig:
    compare = () if args.compare == "none" else tuple(filter(None, args.compare.split(",")))
    unknown = [m for m in compare if m not in catalog.CANDIDATES]
    if unknown:
        raise ConfigError(
            f"--compare {','.join(unknown)}: not a model; use {','.join(catalog.CANDIDATES)}"
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


def parse_threshold(text: str, series: Series) -> float:
    """A load per replica, or `pNN/D` read off the trace; ConfigError naming the fix."""
    try:
        if text.startswith("p"):
            pct, _, divisor = text[1:].partition("/")
            observed = series.values[~np.isnan(series.values)]
            value = float(np.percentile(observed, float(pct))) / float(divisor or 1)
        else:
            value = float(text)
    except (ValueError, IndexError, ZeroDivisionError):
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(f"--threshold {text!r}: give a load > 0, or pNN/D such as p99/20")
    return value


def table(summary: dict[str, Any]) -> str:
    """The figures as a fixed-width table (what the command prints)."""
    q = summary["config"]["quantile"]
    head = (
        f"{'model':10} {'coverage':>9} {'raw cov':>8} {'pinball':>10} {'vs ref':>7} "
        f"{'WAPE':>6} {'MASE':>6} {'fit s':>6} {'pred ms':>7}"
    )
    lines = [f"backtest at quantile {q:g}, graded {summary['config']['lead_time']} ahead", head]
    for name, m in summary["models"].items():
        lines.append(
            f"{name:10} {m['coverage'] * 100:8.1f}% {m['raw_coverage'] * 100:7.1f}% "
            f"{m['pinball']:10.4g} {m['pinball_vs_reference'] * 100:6.1f}% "
            f"{m['wape'] * 100:5.1f}% {m['mase']:6.3f} {m['fit_seconds_mean']:6.2f} "
            f"{m['predict_ms_median']:7.2f}"
        )
    return "\n".join(lines)


def _duration(text: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; use a duration such as 10m or 14d") from None


def _quantile(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.5 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a quantile between 0.5 and 1, e.g. 0.95")
    return value


def _iso(t: float) -> str:
    return str(pd.Timestamp(t, unit="s").strftime("%Y-%m-%d %H:%M:%S"))


def _iso_series(times: pd.Series) -> pd.Series:
    return pd.to_datetime(times, unit="s").dt.strftime("%Y-%m-%d %H:%M:%S")


def _finite(value: Any) -> Any:
    """JSON has no NaN: non-finite floats become null."""
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
