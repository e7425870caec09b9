"""Where a replay is short and where its P95 band misses: `scaler backtest` output, by regime.

    .venv/bin/python bench/band_misses.py OUT/TRACE [OUT/OTHER ...]

From decisions.csv (one row per trace step) the under-provisioned share of scored steps, split by
what the load did over the cold start (growth L[t] / L[t-k-1]) and by its level (L[t] over the
mean scored load); from forecasts.csv (the point graded a lead time ahead, one row per model
step) the share of points above the P95 band, split by the forecast's level and by the trend
known at the origin (the last actual over the one three model steps before it; the graded point
is the one a 10-minute lead time ahead, as bench/figures.py runs); and how many under-provisioned
steps had a band that asked for enough. A band calibrated on average can still miss where it
matters: this says where, and whether it was the band at all. Never judges.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

Mask = npt.NDArray[np.bool_]
GROWTH = ((0.0, 1.0), (1.0, 1.1), (1.1, 1.25), (1.25, 1.5), (1.5, np.inf))
LEVEL = ((0.0, 0.5), (0.5, 1.0), (1.0, 1.5), (1.5, np.inf))


def share(hit: Mask, among: Mask) -> str:
    n = int(among.sum())
    return f"{100 * float(hit[among].mean()):.1f}% of {n}" if n else "-"


def steps(directory: Path) -> list[str]:
    frame = pd.read_csv(directory / "decisions.csv")
    summary = json.loads((directory / "summary.json").read_text())["decisions"]
    k = int(summary["config"]["cold_start_steps"])
    load = frame["load"].to_numpy(dtype=float)
    scored = np.zeros(load.size, dtype=bool)
    scored[int(summary["trace"]["warmup_steps"]) :] = True
    scored &= np.isfinite(load)
    under = scored & (frame["ready"].to_numpy() < frame["required"].to_numpy())
    before = np.full(load.size, np.nan)
    before[k + 1 :] = load[: -(k + 1)]
    growth = load / np.maximum(before, 1e-9)
    level = load / float(np.nanmean(load[scored]))
    lines = [f"under-provisioned: {share(under, scored)} scored steps"]
    for lo, hi in GROWTH:
        cell = share(under, scored & (growth >= lo) & (growth < hi))
        lines.append(f"  growth over the cold start {lo}-{hi}: {cell}")
    for lo, hi in LEVEL:
        lines.append(
            f"  load {lo}-{hi}x its mean: {share(under, scored & (level >= lo) & (level < hi))}"
        )
    return lines


def band(directory: Path) -> list[str]:
    frame = pd.read_csv(directory / "forecasts.csv", parse_dates=["timestamp"]).dropna()
    actual = frame["actual"].to_numpy(dtype=float)
    miss = actual > frame["forecast_p95"].to_numpy(dtype=float) + 1e-9
    p50 = frame["forecast_p50"].to_numpy(dtype=float)
    level = p50 / max(float(p50.mean()), 1e-9)
    # the actuals on a regular grid, to read what was known at each graded point's origin
    step = pd.Timedelta(frame["timestamp"].diff().min())
    grid = pd.Series(actual, index=frame["timestamp"]).reindex(
        pd.date_range(frame["timestamp"].iloc[0], frame["timestamp"].iloc[-1], freq=step)
    )
    ahead = math.ceil(pd.Timedelta("10min") / step) + 1  # the graded point, as the backtest
    at = np.searchsorted(np.asarray(grid.index), np.asarray(frame["timestamp"])) - ahead
    values = grid.to_numpy()

    def known(i: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        out = np.full(i.shape, np.nan)
        out[i >= 0] = values[i[i >= 0]]
        return out

    trend = known(at) / np.maximum(known(at - 3), 1e-9)
    everything = np.ones(miss.size, dtype=bool)
    lines = [f"band misses: {share(miss, everything)} graded points"]
    for lo, hi in LEVEL:
        lines.append(f"  forecast {lo}-{hi}x its mean: {share(miss, (level >= lo) & (level < hi))}")
    for name, m in (
        ("rising", trend > 1.05),
        ("flat", abs(trend - 1) <= 0.05),
        ("falling", trend < 0.95),
    ):
        lines.append(f"  load {name} at the origin: {share(miss, m)}")
    return lines


def enough(directory: Path) -> list[str]:
    """Of the under-provisioned steps that are model-step rows (forecasts.csv's), how many had a
    P95 band, made a lead time earlier, that asked for enough replicas: those the band did not
    lose (the decision did: a budget-lowered quantile, a later decision asking less)."""
    frame = pd.read_csv(directory / "decisions.csv").merge(
        pd.read_csv(directory / "forecasts.csv"), on="timestamp", how="inner"
    )
    summary = json.loads((directory / "summary.json").read_text())["decisions"]
    threshold = float(summary["config"]["threshold"])
    upper = frame["forecast_p95"].to_numpy(dtype=float)
    need = frame["required"].to_numpy()
    under = np.isfinite(upper) & (frame["ready"].to_numpy() < need)
    asked = under & (np.ceil(upper / threshold - 1e-9) >= need)
    lines = [
        f"under-provisioned model steps whose P95 band asked for enough: {share(asked, under)}"
    ]
    budget_share = summary["policy"]["prewarm"].get("budget_share")
    if budget_share:  # a share budget: how much of it the rolling window had spent
        spent = _spent(directory, float(summary["trace"]["step_seconds"]), float(budget_share))
        late = frame[["timestamp"]].merge(spent, on="timestamp", how="left")["spent"].to_numpy()
        lines.append(
            f"  ... with over half the budget spent (quantile sliding): {share(late > 0.5, asked)}"
        )
        graded = np.isfinite(upper)
        lines.append(
            f"  every graded point with over half the budget spent: {share(late > 0.5, graded)}"
        )
    return lines


def _spent(directory: Path, step: float, budget_share: float) -> pd.DataFrame:
    """Share of the rolling day's budget spent at each step, rebuilt from decisions.csv's
    charges and reactive replicas (an approximation of the ledger: no clamp, no hold)."""
    frame = pd.read_csv(directory / "decisions.csv")
    window = max(1, round(86400.0 / step))
    spent = frame["prewarm_replica_hours"].rolling(window, min_periods=1).sum()
    base = (frame["reactive"] * step / 3600.0).rolling(window, min_periods=1).sum()
    frame["spent"] = spent / np.maximum(budget_share * base, 1e-9)
    return frame[["timestamp", "spent"]]


def main(argv: list[str]) -> int:
    for name in argv:
        print(f"{name}:")
        for line in steps(Path(name)) + band(Path(name)) + enough(Path(name)):
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
