"""The picture of a backtest: forecast vs actual, coverage over time, raw vs calibrated models.

Drawing only; `offline.backtest` computes everything it shows. The notebooks call the `draw_*`
functions on their own axes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models.base import DAY
from scaler.decision.spec import format_duration
from scaler.offline.backtest import REFERENCE, Result, graded_ahead


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
    ahead = graded_ahead(result.summary)
    ax.plot(t, tail["actual"], color="black", lw=0.8, label="actual")
    ax.plot(t, tail["forecast_p50"], color="tab:blue", lw=0.8, label=f"P50 made {ahead} earlier")
    q = result.summary["config"]["quantile"]
    ax.plot(t, tail["forecast_p95"], color="tab:orange", lw=0.8, label=f"calibrated P{q * 100:g}")
    ax.plot(t, tail["raw_p95"], color="tab:red", lw=0.6, ls=":", label="model's own interval")
    shown = format_duration(len(tail) * step)  # a backtest that graded less shows it all
    span = f"all {shown} graded" if len(tail) == len(frame) else f"the last {shown} graded"
    ax.set_title(f"{model}: forecast vs actual ({span})")
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
    shown = [100 * models[n][k] for n in names for k in ("raw_coverage", "coverage")]
    lowest = np.nanmin(shown) if np.isfinite(shown).any() else 100.0
    ax_cov.set_ylim(min(50.0, 10.0 * np.floor(lowest / 10.0)), 100)  # a 34 % bar must show
    ax_cov.set_title("coverage: raw vs calibrated (%)")
    ax_cov.legend(loc="lower right", fontsize=8)
