"""`scaler backtest TRACE.csv`: walk forward through a trace exactly as production would and grade
the forecasts the policy would have acted on.

Pipeline: load trace -> forecasts (this module) -> decisions (scaler.offline.replay) -> files.
- load: `read_trace` (line-numbered TraceError on anything unreadable), then per-bucket peaks at
  the model step (a 1-minute trace is fitted at 5 minutes on the highest minute of each 5, the
  load a replica must serve; a 30-minute one stays at 30 minutes). Decisions are made and
  scored at the trace's own step (scaler.offline.replay);
- forecasts: `models.walkforward` (fit on what was known, weekly refit on the last 4 weeks, no
  lookahead) with the model asked for, each candidate model, and the seasonal-naive reference;
  `forecast_frame` returns, per step, the forecast made lead-time earlier for it, which is the one
  a replica ordered then would be ready for (the replay's convention: the forecast made after
  observing step s - k - 1, at its point k, k = ceil(lead time / step));
- files: DIR/forecasts.csv (`timestamp,actual,forecast_p50,forecast_p95`, one row per scored
  step; the last column is named after --quantile: `forecast_p90` at 0.9), DIR/summary.json
  (coverage, pinball, WAPE, MASE, per model and for the reference, raw model intervals next
  to calibrated ones, fit and predict times; under `decisions`, the
  yardstick figures of the policy and its baselines), DIR/decisions.csv (one row per step:
  `timestamp,load,required,reactive,desired,ready,reason,prewarm_replica_hours`) and
  DIR/backtest.png.

Scoring: the first 14 days (the first half of a shorter trace) are warm-up and not scored; nor
are steps whose value is missing, or steps before any model could be fitted.
"""

from __future__ import annotations

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

from models import catalog
from models.base import DAY, WEEK, Forecaster, Series
from models.grading import pinball
from models.walkforward import walk_forward
from scaler.decision import policy, resolution
from scaler.decision.spec import format_duration
from scaler.offline import graded_window, replay, replay_summary, yardstick
from scaler.offline.traces import read_trace

WARMUP = 14 * DAY
"""Unscored history at the start of a trace (DESIGN.md): 14 days, or half of a shorter trace."""
REFERENCE = "naive"
"""The seasonal-naive reference every model is reported against."""
COLUMNS = ("timestamp", "actual", "forecast_p50", "forecast_p95")
"""Columns of forecasts.csv at the default quantile (upper_column names the last one)."""


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
    """The trace at `path` on the model step: what is forecast and graded (per-bucket peaks,
    scaler.decision.resolution; a trace at the model step or coarser as it is, never upsampled)."""
    return resolution.model_series(read_trace(path), step)


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
    the refit made at that origin, else 0) and predict_seconds, for the timing figures. The
    walk makes the origins between two refits in batches (models.walkforward), so an origin's
    predict_seconds is 0 or a batch's time: only their mean, the walk's cost per origin, means
    something; one live forecast's time is `python -m models.bench`'s.
    """
    k = yardstick.cold_start_steps(config.lead_time, series.step)
    points = max(policy.forecast_points(config.lead_time, config.horizon, series.step), k + 1)
    first, last = graded_window.bounds(series, warmup=config.warmup, limit=config.limit)
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
        "predict_ms_mean": float(frame["predict_seconds"].mean() * 1e3),
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
    first = replay_summary.warmup_steps(series, config.warmup)
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
        # A load the reference forecasts exactly (constant, or one day repeated) has no ratio.
        figures["pinball_vs_reference"] = (
            1 - figures["pinball"] / reference if reference > 0 else math.nan
        )
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


OUTPUTS = ("forecasts.csv", "decisions.csv", "decisions.jsonl", "summary.json", "backtest.png")
"""What `write` puts in its folder."""


def graded_ahead(summary: dict[str, Any]) -> str:
    """How far ahead of the last observation it saw the graded forecast was: the cold start
    rounded up to whole steps, plus the step being graded (15m for a 10m cold start at 5m, 1h
    at 30m)."""
    ahead = summary["config"]["graded_step_ahead"] * summary["trace"]["step_seconds"]
    return format_duration(ahead)


def write(
    result: Result, out: Path, *, model: str, threshold: float, decisions: replay.Replay | None
) -> None:
    """DIR/forecasts.csv (the model asked for), DIR/decisions.csv (when the policy was replayed;
    otherwise an earlier run's is removed, and its decisions.jsonl, so the folder never pairs
    this run's summary with another run's decisions) and DIR/summary.json; backtest_plot draws
    DIR/backtest.png."""
    out.mkdir(parents=True, exist_ok=True)
    frame = result.frames[model]
    rows = frame[frame["actual"].notna()]
    upper = upper_column(float(result.summary["config"]["quantile"]))
    csv = pd.DataFrame(
        {
            "timestamp": _iso_series(rows["timestamp"]),
            "actual": rows["actual"],
            "forecast_p50": rows["forecast_p50"],
            upper: rows["forecast_p95"],  # the band at --quantile, not always P95
        },
        columns=[*COLUMNS[:-1], upper],
    )
    csv.to_csv(out / "forecasts.csv", index=False, float_format="%.6g")
    summary = {**result.summary, "threshold": threshold}
    if decisions is not None:
        replay.write_decisions(decisions, out)
        summary["decisions"] = decisions.summary
    else:
        (out / "decisions.csv").unlink(missing_ok=True)
        (out / "decisions.jsonl").unlink(missing_ok=True)  # written by the replay when it runs
    text = json.dumps(_finite(summary), indent=2, sort_keys=True, default=str)
    (out / "summary.json").write_text(text + "\n")


def upper_column(quantile: float) -> str:
    """forecasts.csv's name of the calibrated band's column: `forecast_p95` at 0.95,
    `forecast_p97.5` at 0.975 (the frames call it forecast_p95 whatever the quantile)."""
    return f"forecast_p{quantile * 100:g}"


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
