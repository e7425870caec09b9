"""How far a better forecast could take the default policy: the replay fed bands that read the
future, beside the model's own, on the very same walk.

    .venv/bin/python bench/forecast_bound.py TRACE.csv [TRACE.csv ...] [--model auto]
        [--bounds model,future,smooth,hourly,smooth@1h,learned] [--budgets 30%] [--smooth 15m]
        [--residual-window 7d] [--horizon 15m] [--limit 56d] [--drift] [--json PATH]
        [--no-level-regression] [... the model switches of scaler backtest]

Each trace is replayed as `scaler backtest TRACE --threshold p99/20 --lead-time 10m --horizon
15m --no-drift` replays it (the same ReplayConfig; threshold and warm-up of the whole trace, as
the backtest takes them with `--limit`), once per bound and budget, inside one fit cache with the
model's walk recorded (bench/policy_ablation.recorded_forecasts), so every row reads the same
origins and only the band differs. Where the model has a forecast, a bound replaces its P50 and
its calibration (bench/bound_bands.py says how each is made):
- `model`: the model's own band (the reference: `scaler backtest --no-drift`'s figures);
- `future`: P50 = P95 = the actual load over the look-ahead (at the model step: per-bucket
  peaks on a finer trace, the load the replay's forecasts stand for);
- `smooth`: P50 = the centred rolling mean over `--smooth` (default 15m: 3 points at a 5-minute
  step, about one lead time; at least 3 points), the band its relative residual quantiles over
  the trailing week, re-measured hourly from residuals whose window is fully observed;
- `hourly`: the same P50, the band the whole trace's residual quantiles per hour of day;
- `classical`: P50 = the whole trace's classical decomposition, a centred one-day mean (the
  level) plus the mean daily profile around it (bound_bands.classical), the band as `smooth`'s:
  a seasonal model that knew each day's level and the trace's daily shape in advance;
- `learned`: not a bound but a causal forecaster, bench/learned_p50.py's gradient-boosted P50
  (needs `.venv/bin/pip install lightgbm`, not a dependency) with its own causal band.
`smooth@1h` and `hourly@1h` name their own window. The centred mean holds the point itself
(1/3 of it in a 3-point window): the narrower the window, the more of the noise it knows.
`--horizon` changes the policy's look-ahead for every row (a policy diagnostic, not a bound).
Prints one Markdown row per trace, bound and budget: frontier ratio / under-provisioned steps /
GPU-hours x reactive / P95 coverage and the P50's WAPE at the point a lead time ahead (the
forecast the replay read, over the scored model steps) / prewarm replica-hours as a share of
reactive's / the costliest window's share. A benchmark, not a test: it never judges.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bound_bands
import learned_p50
from policy_ablation import config_for as ablation_config
from policy_ablation import limited, recorded_forecasts

from models import fitcache
from models.base import DAY, WEEK, Forecast, Series
from models.conformal import FLOOR_FRACTION, Calibration
from models.walkforward import Origin
from scaler.decision import budget, resolution
from scaler.decision.spec import duration_arg
from scaler.offline import (
    model_switches,
    replay,
    replay_config,
    replay_summary,
    replay_walk,
    traces,
    yardstick,
)

BOUNDS = ("model", "future", "smooth", "hourly", "classical", "learned")
RESIDUAL_WINDOW = WEEK
"""Trailing residuals the `smooth` band is measured on (the models' recalibration window)."""
REMEASURE = 3600.0
"""How often the `smooth` band is re-measured."""


@dataclass(frozen=True)
class BoundModel:
    """What the replay asks of an origin's model, answered with a bound's band."""

    calibration: Calibration
    trained_until: float
    kind: str

    def calibration_for(self, recent: Series, steps: int) -> Calibration:
        return self.calibration


class Bands:
    """The bounds of one trace at the model step: per origin, a P50 path and its band."""

    def __init__(
        self, coarse: Series, *, smooth: Any, lag: int, residual_window: float = RESIDUAL_WINDOW
    ) -> None:
        """`smooth`: the P50 of the smooth bounds, per bucket; `lag`: buckets after one before
        its residual is known (half the centred window it was made with)."""
        self.coarse = coarse
        values = np.asarray(coarse.values, dtype=np.float64)
        self.values = values
        self.half = lag
        self.smooth = np.asarray(smooth, dtype=np.float64)
        self.floor = FLOOR_FRACTION * float(np.nanmean(values))
        residuals = bound_bands.relative_residuals(values, self.smooth, floor=self.floor)
        self.causal = bound_bands.causal_offsets(
            residuals,
            window=max(1, round(residual_window / coarse.step)),
            every=max(1, round(REMEASURE / coarse.step)),
        )
        self.times = coarse.start + coarse.step * np.arange(len(coarse), dtype=np.float64)
        self.hourly = bound_bands.hourly_offsets(residuals, self.times)

    def at(self, kind: str, index: int, points: int) -> tuple[Any, Calibration]:
        """The P50 path of the forecast made after observing bucket `index`, and its band."""
        if kind == "future":
            return bound_bands.future_path(self.values, index, points), bound_bands.exact_band(
                points
            )
        p50 = bound_bands.future_path(self.smooth, index, points)
        if kind in ("smooth", "classical"):
            # the residual at s is known once the window centred on it is observed
            row = self.causal[max(0, index - self.half)]
            return p50, bound_bands.band(row, floor=self.floor)
        if kind == "hourly":
            when = self.coarse.start + self.coarse.step * (index + 1 + np.arange(points))
            table = self.hourly[bound_bands.hour_of_day(when)]
            return p50, bound_bands.band(table, floor=self.floor)
        raise ValueError(f"unknown bound {kind!r}; use one of {', '.join(BOUNDS)}")


class LearnedBands:
    """The `learned` bound: bench/learned_p50.py's causal P50 paths, with their own causal
    conformal band (per point ahead, the relative residual quantiles over the trailing window
    of the forecasts whose load the origin has observed, re-measured hourly). Fitted at the
    first origin asked, for as many points as it asks."""

    def __init__(self, coarse: Series, *, first: int, residual_window: float) -> None:
        self.coarse, self.first, self.residual_window = coarse, first, residual_window
        self.values = np.asarray(coarse.values, dtype=np.float64)
        self.floor = FLOOR_FRACTION * float(np.nanmean(self.values))
        self.paths: Any = None
        self.causal: list[Any] = []

    def fit(self, points: int) -> None:
        self.paths = learned_p50.learned_paths(self.coarse, points, first=self.first)
        for j in range(points):
            # the forecast for bucket s, made j + 1 buckets before it: known once s is observed
            made = learned_p50.shifted(self.paths[:, j], j + 1)
            residuals = bound_bands.relative_residuals(self.values, made, floor=self.floor)
            self.causal.append(
                bound_bands.causal_offsets(
                    residuals,
                    window=max(1, round(self.residual_window / self.coarse.step)),
                    every=max(1, round(REMEASURE / self.coarse.step)),
                )
            )

    def at(self, kind: str, index: int, points: int) -> tuple[Any, Calibration]:
        if self.paths is None or self.paths.shape[1] < points:
            self.fit(points)
        table = np.stack([self.causal[j][index] for j in range(points)])
        return self.paths[index, :points], bound_bands.band(table, floor=self.floor)


@contextlib.contextmanager
def bounded(kind: str, bands: Any, *, quantile: float, k: int, record: Any) -> Iterator[None]:
    """Within the block, the replay's walk yields `kind`'s bands where the model has a forecast
    (the model's own for `model`), and records each origin's P95 and P50 at the point a lead
    time ahead into `record[0]` and `record[1]` (indexed by the origin)."""
    inner: Any = replay_walk.walk_forward  # type: ignore[attr-defined]

    def walk(make: Any, series: Series, *, start: int, steps: int, **options: Any) -> Any:
        for origin in inner(make, series, start=start, steps=steps, **options):
            if origin.forecast is None or origin.model is None or kind == "model":
                if origin.forecast is not None and origin.forecast.upper.size > k:
                    record[:, origin.index] = origin.forecast.upper[k], origin.forecast.p50[k]
                yield origin
                continue
            p50, calibration = bands.at(kind, origin.index, steps)
            upper = calibration.upper(p50, quantile)
            if upper.size > k:
                record[:, origin.index] = upper[k], p50[k]
            model = BoundModel(calibration, origin.model.trained_until, kind)
            yield Origin(
                index=origin.index,
                forecast=Forecast(
                    origin=origin.forecast.origin,
                    step=origin.forecast.step,
                    p50=p50,
                    upper=upper,
                    quantile=quantile,
                ),
                model=cast(Any, model),
            )

    with mock.patch.object(replay_walk, "walk_forward", walk):
        yield


def config_for(
    trace: Series, text: str, *, drift: bool, horizon: float
) -> replay_config.ReplayConfig:
    """`scaler backtest`'s replay defaults with budget `text` (policy_ablation.config_for: the
    threshold p99/20 of the trace) and the look-ahead `horizon`."""
    return replace(ablation_config(trace, *budget.parse_budget(text), drift), horizon=horizon)


def run_trace(path: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    trace = traces.read_trace(path)
    warmup = replay_summary.warmup_steps(trace)
    series = limited(trace, args.limit)
    base = config_for(trace, budget.DEFAULT_BUDGET, drift=args.drift, horizon=args.horizon)
    coarse = resolution.model_series(series, base.model_step)
    bands: dict[tuple[bool, float], Bands] = {}
    learned: dict[str, LearnedBands] = {}
    k = yardstick.cold_start_steps(base.lead_time, coarse.step)
    first = math.ceil(warmup * trace.step / coarse.step - 1e-9)
    rows = []
    with fitcache.sharing(), recorded_forecasts():
        for text in args.budgets.split(","):
            config = config_for(trace, text, drift=args.drift, horizon=args.horizon)
            for name in args.bounds.split(","):
                kind, window = bound_of(name, args.smooth)
                source = (kind == "classical", window)
                if kind == "learned" and kind not in learned:
                    learned[kind] = LearnedBands(
                        coarse, first=first, residual_window=args.residual_window
                    )
                if kind != "learned" and source not in bands:
                    bands[source] = bands_for(
                        coarse, kind, window=window, residual_window=args.residual_window
                    )
                began = time.process_time()
                record = np.full((2, len(coarse)), np.nan)
                chosen = learned[kind] if kind == "learned" else bands[source]
                with bounded(kind, chosen, quantile=config.quantile, k=k, record=record):
                    result = replay.replay(
                        series, config, make=args.model, warmup=warmup * trace.step
                    )
                graded = bound_bands.grade(coarse.values, record[0], record[1], k=k, first=first)
                rows.append(row(path.stem, name, text, result, graded))
                print(
                    f"  {path.stem} {name} {text}: {time.process_time() - began:.0f} s CPU",
                    file=sys.stderr,
                )
                print(markdown_row(rows[-1]), flush=True)
    return rows


def bands_for(coarse: Series, kind: str, *, window: float, residual_window: float) -> Bands:
    """The bands of `kind`: the classical decomposition's P50, or the centred mean's."""
    values = np.asarray(coarse.values, dtype=np.float64)
    if kind == "classical":
        period = max(2, round(DAY / coarse.step))
        smooth = bound_bands.classical(values, period)
        return Bands(coarse, smooth=smooth, lag=period // 2 + 1, residual_window=residual_window)
    points = bound_bands.smooth_points(window, coarse.step)
    smooth = bound_bands.centred_mean(values, points)
    return Bands(coarse, smooth=smooth, lag=points // 2, residual_window=residual_window)


def bound_of(name: str, smooth: float) -> tuple[str, float]:
    """A bound's kind and smoothing window: `smooth@1h` names its own, else `smooth`."""
    kind, _, window = name.partition("@")
    if kind not in BOUNDS:
        raise ValueError(f"unknown bound {kind!r}; use one of {', '.join(BOUNDS)}")
    return kind, duration_arg(window) if window else smooth


def row(
    trace: str, kind: str, text: str, result: replay.Replay, graded: tuple[float, float]
) -> dict[str, Any]:
    m = result.summary["policy"]
    return {
        "trace": trace,
        "bound": kind,
        "budget": text,
        "frontier_ratio": m["frontier_ratio"],
        "under_provisioned_pct": m["under_provisioned_pct"],
        "gpu_hours_x_reactive": m["gpu_hours_x_reactive"],
        "coverage": graded[0],
        "p50_wape": graded[1],
        "prewarm_share": m["prewarm"]["share_of_reactive"],
        "max_window_share": m["prewarm"]["max_window_share"],
        "reactive_under_pct": result.summary["reactive"]["under_provisioned_pct"],
        "oracle_gpu_hours_x_reactive": result.summary["oracle"]["gpu_hours_x_reactive"],
    }


def markdown_row(r: dict[str, Any]) -> str:
    return (
        f"| {r['trace']} | {r['bound']} | {r['budget']} | {r['frontier_ratio']:.2f} "
        f"| {r['under_provisioned_pct']:.1f}% | {r['gpu_hours_x_reactive']:.2f}x "
        f"| {r['coverage']:.1%} | {r['p50_wape']:.3f} "
        f"| {r['prewarm_share']:.1%} / {r['max_window_share']:.1%} "
        f"| {r['oracle_gpu_hours_x_reactive']:.2f}x |"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("traces", nargs="+", type=Path)
    p.add_argument("--model", default="auto")
    p.add_argument("--bounds", default=",".join(BOUNDS))
    p.add_argument(
        "--budgets", default=budget.DEFAULT_BUDGET, help="comma-separated, e.g. 20%%,30%%"
    )
    p.add_argument("--smooth", type=duration_arg, default=900.0, help="centred window (15m)")
    p.add_argument(
        "--residual-window",
        type=duration_arg,
        default=RESIDUAL_WINDOW,
        help="trailing residuals the smooth band is measured on (default 7d)",
    )
    p.add_argument(
        "--horizon",
        type=duration_arg,
        default=replay_config.ReplayConfig.horizon,
        help="look-ahead past the lead time (default 15m; a policy diagnostic)",
    )
    p.add_argument("--limit", type=duration_arg, default=None, help="e.g. 56d after the warm-up")
    p.add_argument("--drift", action="store_true", help="replay with drift on (default: off)")
    p.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    model_switches.add_arguments(p)
    args = p.parse_args(argv)
    model_switches.apply(args)
    unknown = [b for b in args.bounds.split(",") if b.partition("@")[0] not in BOUNDS]
    if unknown:
        p.error(f"--bounds {','.join(unknown)}: use {','.join(BOUNDS)}")
    print(
        f"model {args.model}, drift {'on' if args.drift else 'off'}, smooth {args.smooth:g} s, "
        f"horizon {args.horizon:g} s"
    )
    print(
        "| trace | band | budget | frontier | under-prov. | GPU-h x reactive | P95 coverage "
        "| P50 WAPE | prewarm / reactive h (max window) | oracle GPU-h x |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = [r for path in args.traces for r in run_trace(path, args)]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
