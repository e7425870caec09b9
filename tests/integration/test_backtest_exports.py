"""`scaler backtest` as a user runs it on the exports people have: a real process, real files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd


def backtest(trace: Path, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaler", "backtest", str(trace), "--out", str(out), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def local_grafana_export(path: Path) -> np.ndarray:
    """Five days of 1-minute load over New York's November clock change, as Grafana writes it
    with Formatted data and Download for Excel in a `;` locale; returns the repeated lines."""
    rows = int(pd.Timedelta("5D") / pd.Timedelta("1min"))
    utc = pd.date_range("2017-11-02", periods=rows, freq="1min", tz="UTC")
    hours = np.arange(rows) / 60
    load = 1500 + 1200 * np.sin(hours * np.pi / 12) + np.random.default_rng(1).normal(0, 40, rows)
    local = utc.tz_convert("America/New_York").tz_localize(None)
    body = "".join(f"{t:%Y-%m-%d %H:%M:%S};{v:.1f}\r\n" for t, v in zip(local, load, strict=True))
    path.write_text('sep=;\r\n"Time";"orders"\r\n' + body)
    seen = local.to_series().cummax().shift(1).to_numpy()
    return np.flatnonzero(local <= seen) + 3  # after the sep= and header lines


def test_backtest_runs_end_to_end_on_a_one_minute_local_time_grafana_export(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "shop.csv"
    repeated = local_grafana_export(trace)
    out = tmp_path / "out"
    done = backtest(
        trace, out, "--step", "5m", "--model", "seasonal", "--compare", "none", "--limit", "1d"
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 1, done.stderr
    assert f"lines {repeated[0]}-{repeated[-1]} repeat wall-clock times" in warnings[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trace"]["scored_steps"] > 0
    decisions = pd.read_csv(out / "decisions.csv")
    assert len(decisions) >= summary["trace"]["scored_steps"]


def test_backtest_refuses_an_export_of_two_series_naming_the_line(tmp_path: Path) -> None:
    trace = tmp_path / "two.csv"
    trace.write_text(
        '"Series";"Time";"Value"\n'
        '"api";"2024-03-01T10:00:00+01:00";12\n'
        '"web";"2024-03-01T10:00:00+01:00";7\n'
    )
    done = backtest(trace, tmp_path / "out")
    assert done.returncode == 2
    assert f"scaler: error: {trace}:3: column series names a second series 'web'" in done.stderr
    assert "export one series" in done.stderr
    assert not (tmp_path / "out").exists()
