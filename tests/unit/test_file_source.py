"""The file source replays a trace on a clock, like live Prometheus data, without lookahead."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from scaler.clock import ManualClock
from scaler.decision import spec as specs
from scaler.errors import BadQuery, NoData
from scaler.offline.backtest import load_trace
from scaler.offline.traces import read_trace
from scaler.sources.file import FileSource, bundled_trace

SPEC = specs.parse("demo", "llm", {"query": "llm_serving_10min", "threshold": "60"})
NOW = 1_800_000_000.0  # a multiple of 600 s


def test_the_replay_starts_after_the_warm_up_and_never_shows_the_future() -> None:
    trace = read_trace(bundled_trace())
    clock = ManualClock(NOW)
    source = FileSource(bundled_trace(), clock=clock)
    history = source.history(SPEC, start=NOW - 7 * 86400, end=NOW + 3600, step=600)
    assert history.end == NOW  # clipped to the clock
    half = len(trace) // 2
    np.testing.assert_array_equal(history.values, trace.values[: half + 1])
    assert source.latest(SPEC, at=NOW).value == trace.values[half]
    clock.advance(600)
    assert source.latest(SPEC, at=clock.now()).value == trace.values[half + 1]


def test_the_replay_loops_over_whole_weeks() -> None:
    trace = read_trace(bundled_trace())
    clock = ManualClock(NOW)
    source = FileSource(bundled_trace(), clock=clock)
    clock.advance(14 * 86400)  # two weeks on: the trace (14 days) has looped once
    assert source.latest(SPEC, at=clock.now()).value == trace.values[len(trace) // 2]


def test_a_folder_source_picks_the_trace_named_by_the_query(
    tmp_path: pytest.TempPathFactory,
) -> None:
    folder = tmp_path
    (folder / "flat.csv").write_text(  # type: ignore[operator]
        "timestamp,value\n" + "".join(f"2024-01-01 00:{m:02d}:00,7\n" for m in range(0, 60, 5))
    )
    source = FileSource(folder, clock=ManualClock(NOW))  # type: ignore[arg-type]
    flat = specs.parse("demo", "flat", {"query": "flat", "threshold": "1"})
    assert source.latest(flat, at=NOW).value == 7
    with pytest.raises(BadQuery, match="flat"):
        source.latest(SPEC, at=NOW)


def test_no_value_within_the_lookback_is_no_data() -> None:
    source = FileSource(bundled_trace(), clock=ManualClock(NOW))
    with pytest.raises(NoData):
        source.latest(SPEC, at=NOW - 30 * 86400)


def test_history_at_the_model_step_holds_the_bucket_peaks_a_backtest_fits_on(
    tmp_path: pytest.TempPathFactory,
) -> None:
    # Two days of 1-minute load that varies within every 5 minutes, so a peak is not a sample.
    rng = np.random.default_rng(7)
    path = tmp_path / "fine.csv"  # type: ignore[operator]
    start = 1_700_000_100.0  # a multiple of 300 s
    rows = [
        f"{pd.Timestamp(start + 60 * i, unit='s'):%Y-%m-%d %H:%M:%S},{v:.0f}\n"
        for i, v in enumerate(rng.integers(10, 1000, 2 * 1440))
    ]
    path.write_text("timestamp,value\n" + "".join(rows))
    source = FileSource(path, clock=ManualClock(NOW))
    fine = specs.parse("demo", "fine", {"query": "x", "threshold": "1"})
    backtest = load_trace(path, 300.0)  # what `scaler backtest` fits on

    live = source.history(fine, start=NOW - 86400 + 300, end=NOW, step=300, resolution=30)
    points = source.history(fine, start=NOW - 86400 + 300, end=NOW, step=300)

    first = round((live.start - source.shift(read_trace(path)) - backtest.start) / 300)
    np.testing.assert_array_equal(live.values, backtest.values[first : first + len(live)])
    assert (points.values < live.values).mean() > 0.5  # without the peaks, a different input
