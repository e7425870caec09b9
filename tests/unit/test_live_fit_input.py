"""With `history_peaks` the live engine fits on the series `scaler backtest` fits on: per-bucket
peaks at the model step of the load sampled at the decision step, on first fetch and on every
update after it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from prometheus_client import CollectorRegistry

from models.base import Series
from scaler.clock import ManualClock
from scaler.decision import spec
from scaler.offline.backtest import load_trace
from scaler.offline.traces import read_trace
from scaler.serving.engine import Engine
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.file import FileSource

NOW = 1_800_000_000.0  # a multiple of 300 s
SPEC = spec.parse("gpu", "llm", {"query": "x", "threshold": "20"})


def minute_trace(path: Path) -> Path:
    """Two days of 1-minute load that varies within every 5 minutes (a peak is not a sample)."""
    rng = np.random.default_rng(11)
    start = 1_700_000_100.0  # a multiple of 300 s
    rows = [
        f"{pd.Timestamp(start + 60 * i, unit='s'):%Y-%m-%d %H:%M:%S},{v:.0f}\n"
        for i, v in enumerate(rng.integers(10, 1000, 2 * 1440))
    ]
    path.write_text("timestamp,value\n" + "".join(rows))
    return path


def backtest_view(path: Path, source: FileSource, live: Series) -> np.ndarray:
    """What the backtest fits on over the live series' grid (trace time = wall - shift)."""
    fitted = load_trace(path, 300.0)
    first = round((live.start - source.shift(read_trace(path)) - fitted.start) / 300.0)
    return fitted.values[first : first + len(live)]


def test_the_engines_history_is_the_backtests_bucket_peaks_first_and_after_updates(
    tmp_path: Path,
) -> None:
    path = minute_trace(tmp_path / "fine.csv")
    clock = ManualClock(NOW)
    source = FileSource(path, clock=clock)
    engine = Engine(
        settings=EngineSettings(
            step=30.0, model_step=300.0, history=43_200.0, history_peaks=30.0, fit_workers=0
        ),
        source_for=lambda _spec: source,
        clock=clock,
        telemetry=Telemetry(CollectorRegistry()),
    )
    state = engine.ensure(SPEC)

    state.history = engine.history_reads.updated(source, state, NOW)
    np.testing.assert_array_equal(state.history.values, backtest_view(path, source, state.history))

    clock.advance(3_600.0)
    state.history = engine.history_reads.updated(source, state, clock.now())
    assert state.history.end == NOW + 3_600.0
    np.testing.assert_array_equal(state.history.values, backtest_view(path, source, state.history))
