"""`scaler backtest --limit`: the policy replay scores the same span the forecasts are graded on
(before, it replayed the whole trace, so a limit neither bounded the figures nor the run time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def write_trace(path: Path, days: int) -> None:
    times = pd.date_range("2024-03-04", periods=days * 288, freq="5min")
    hours = np.arange(times.size) / 12
    rng = np.random.default_rng(3)
    load = 800 + 600 * np.sin(hours * np.pi / 12) + rng.normal(0, 30, times.size)
    pd.DataFrame({"timestamp": times, "value": load.round(1)}).to_csv(path, index=False)


def summary(trace: Path, out: Path, *flags: str) -> dict[str, object]:
    command = [sys.executable, "-m", "scaler", "backtest", str(trace), "--out", str(out)]
    command += ["--model", "seasonal", "--compare", "none", *flags]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    loaded: dict[str, object] = json.loads((out / "summary.json").read_text())
    return loaded


def test_the_decisions_replay_scores_only_the_limit_after_the_whole_traces_warmup(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "load.csv"
    write_trace(trace, days=12)  # warm-up: half the trace, 6 days, with or without a limit
    full = summary(trace, tmp_path / "full")
    limited = summary(trace, tmp_path / "limited", "--limit", "2d")
    steps = {
        name: s["decisions"]["trace"]  # type: ignore[index]
        for name, s in (("full", full), ("limited", limited))
    }
    assert steps["full"]["warmup_steps"] == steps["limited"]["warmup_steps"] == 6 * 288
    assert steps["full"]["scored_steps"] == 6 * 288
    assert steps["limited"]["scored_steps"] == 2 * 288
    assert limited["trace"]["scored_steps"] <= 2 * 288  # type: ignore[index]
