"""The file source replays a trace on a clock, like live Prometheus data, without lookahead."""

from __future__ import annotations

import numpy as np
import pytest

from scaler.clock import ManualClock
from scaler.decision import spec as specs
from scaler.errors import BadQuery, NoData
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
