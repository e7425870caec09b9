"""The band's level power (models.calibrate.level_power) against its ablation (purely relative).

    .venv/bin/python bench/band_ablation.py [--model seasonal] [--days 28] [--kinds noise,...]
        [--traces A.csv,B.csv] [--drift]

Each load is replayed twice with `scaler backtest`'s defaults (threshold p99/20, 10-minute lead
time, 15-minute horizon, the default budget): once with the power measured on each fit's
calibration backtest, once with power 1 (the default). Per load and side it prints the
frontier ratio, under-provisioned steps, GPU-hours x reactive, the P95 coverage of the point
graded a lead time ahead, and that coverage below half and above 1.5x the mean load (night and
peak), with the powers the fits measured. A benchmark, not a test: it never judges.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import synthetic
from policy_ablation import config_for, loads

from models import calibrate
from models.base import Series
from models.walkforward import walk_forward
from scaler.decision import budget, policy, resolution
from scaler.offline import replay


def coverage(series: Series, config: replay.ReplayConfig, model: str) -> tuple[str, str]:
    """(coverage overall / night / peak, powers measured) of the graded point, after warm-up."""
    coarse = resolution.model_series(series, config.model_step)
    points = policy.forecast_points(config.lead_time, config.horizon, coarse.step)
    ahead = int(np.ceil(config.lead_time / coarse.step - 1e-9))  # the point a lead time on
    warm = replay.warmup_steps(coarse)
    hits, levels, powers = [], [], set()
    values = coarse.values
    for origin in walk_forward(model, coarse, start=0, steps=points, quantile=config.quantile):
        t = origin.index + 1 + ahead
        if origin.forecast is None or origin.model is None or t >= values.size or t < warm:
            continue
        if not np.isfinite(values[t]):
            continue
        powers.add(origin.model.calibration.power)
        hits.append(values[t] <= origin.forecast.upper[ahead] + 1e-9)
        levels.append(origin.forecast.p50[ahead])
    hit, level = np.asarray(hits), np.asarray(levels) / max(float(np.mean(levels)), 1e-9)
    night, peak = hit[level < 0.5], hit[level > 1.5]
    cells = [100 * float(h.mean()) if h.size else float("nan") for h in (hit, night, peak)]
    return (
        " / ".join(f"{c:.1f}%" for c in cells),
        ",".join(f"{p:.2f}" for p in sorted(powers)),
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="seasonal")
    p.add_argument("--days", type=int, default=28)
    p.add_argument("--kinds", default=",".join(synthetic.KINDS))
    p.add_argument("--traces", default="", help="comma-separated trace CSV files")
    p.add_argument("--drift", action="store_true", help="replay with drift detection on")
    args = p.parse_args(argv)
    amount, share = budget.parse_budget(budget.DEFAULT_BUDGET)
    print(f"model {args.model}, drift {'on' if args.drift else 'off'}, budget {amount or share}")
    print(
        "| load | band | frontier | under-prov | GPU-h x reactive "
        "| P95 coverage all / night / peak | power |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, series in loads(args):
        config = config_for(series, amount, share, args.drift)
        for measured in (True, False):
            began = time.process_time()
            calibrate.LEVEL_POWER = measured
            m = replay.replay(series, config, make=args.model).summary["policy"]
            cover, powers = coverage(series, config, args.model)
            side = "measured" if measured else "relative"
            print(
                f"| {name} | {side} | {m['frontier_ratio']:.2f} "
                f"| {m['under_provisioned_pct']:.1f}% | {m['gpu_hours_x_reactive']:.2f}x "
                f"| {cover} | {powers} |",
                flush=True,
            )
            print(f"  {name} {side}: {time.process_time() - began:.0f} s CPU", file=sys.stderr)
    calibrate.LEVEL_POWER = False
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
