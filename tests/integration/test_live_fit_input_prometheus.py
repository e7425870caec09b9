"""On a real Prometheus, the live engine fits on the series `scaler backtest --prometheus-url`
fits on: per-bucket peaks at the model step of the query sampled at the decision step, on the
first (full-window) read and on every incremental update after it. The window is read as a
max_over_time subquery; the raw samples with the peaks taken in-process (`peaks_raw`) give the
same numbers."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from models.base import DAY, Series
from scaler.clock import ManualClock
from scaler.decision import resolution, spec
from scaler.offline import prometheus_history
from scaler.serving.engine import Engine
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings, PrometheusSettings
from scaler.sources import prometheus, prometheus_range
from scaler.sources.prometheus import PrometheusSource
from tests.integration.prometheus_server import BackfilledTrace, PrometheusServer

pytestmark = pytest.mark.prometheus

EVERY, MODEL_STEP = 60.0, 300.0
"""Decision step (the peaks' sampling) and model step, as `scaler serve --step 1m`."""
FINE = 15.0


@pytest.fixture
def source(prometheus_server: PrometheusServer) -> Iterator[PrometheusSource]:
    src = PrometheusSource(prometheus_server.url, timeout=5.0)
    yield src
    src.close()


def live_history(source: PrometheusSource, query: str, first: float, later: float) -> Series:
    """The engine's fit input read at `first` (the whole window) and updated at `later`."""
    target = spec.parse("gpu", "llm", {"query": query, "threshold": "10"})
    settings = EngineSettings(
        step=EVERY, model_step=MODEL_STEP, history=2 * DAY, history_peaks=EVERY, fit_workers=0
    )
    clock = ManualClock(first)
    engine = Engine(
        settings=settings,
        source_for=lambda _spec: source,
        clock=clock,
        telemetry=Telemetry(CollectorRegistry()),
    )
    state = engine.ensure(target)
    state.history = engine.history_reads.updated(source, state, first)
    assert state.history.end == np.floor(first / MODEL_STEP) * MODEL_STEP
    return engine.history_reads.updated(source, state, later)


def backtest_input(server: PrometheusServer, query: str, now: float) -> Series:
    """What `scaler backtest --prometheus-url --query-step 1m --step 5m` fits on."""
    trace = prometheus_history.fetch(
        PrometheusSettings(url=server.url), query=query, since=4 * DAY, step=EVERY, now=now
    )
    return resolution.model_series(trace, MODEL_STEP)


def on_grid(series: Series, like: Series) -> np.ndarray:
    first = round((like.start - series.start) / series.step)
    return series.values[first : first + len(like)]


def midway_between_points(trace: BackfilledTrace) -> str:
    """The trace's selector moved (`offset`) so that its samples sit halfway between two model
    points, whatever minute the fixture's shift put them on: a point then sees its sample in
    Prometheus' 5-minute lookback at most every other step, and the ablation below does not
    depend on where the shift happened to land (samples exactly on the points hide it)."""
    moved = (MODEL_STEP / 2 - trace.shift) % MODEL_STEP
    return f"{trace.selector} offset {round(moved)}s" if moved else trace.selector


def test_the_live_fit_input_is_the_backtests_bucket_peaks_on_a_real_prometheus(
    prometheus_server: PrometheusServer, source: PrometheusSource
) -> None:
    trace = prometheus_server.traces["llm_serving_10min"]
    query = midway_between_points(trace)
    later = np.floor(trace.end / EVERY) * EVERY
    first = later - 6 * 3600.0  # six hours of incremental updates after the first read

    live = live_history(source, query, first, later)

    assert live.end == np.floor(later / MODEL_STEP) * MODEL_STEP
    assert len(live) == round(2 * DAY / MODEL_STEP)
    expected = on_grid(backtest_input(prometheus_server, query, later), live)
    assert np.isfinite(live.values).mean() > 0.9
    np.testing.assert_array_equal(live.values, expected)
    # The peaks are not the value at each point (the ablation): read at each 5-minute point,
    # a 10-minute trace's sample is often out of Prometheus' lookback; the bucket's peak has it.
    points = source.history(
        spec.parse("gpu", "llm", {"query": query, "threshold": "10"}),
        start=live.start,
        end=live.end,
        step=MODEL_STEP,
    )
    seen = np.isfinite(live.values)
    assert (seen & ~(live.values <= points.values)).sum() > 0.25 * len(live)


def test_the_subquery_gives_the_raw_reads_bucket_peaks_in_requests_under_both_limits(
    prometheus_server: PrometheusServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = prometheus_server.traces["llm_serving_10min"]
    target = spec.parse("gpu", "llm", {"query": trace.selector, "threshold": "10"})
    end = np.floor(trace.end / MODEL_STEP) * MODEL_STEP
    window = {"start": end - 2 * DAY + MODEL_STEP, "end": end, "step": MODEL_STEP}
    asked: list[tuple[bool, str]] = []
    sources = [
        prometheus.PrometheusSource(
            prometheus_server.url,
            timeout=5.0,
            on_request=lambda kind, _o, raw=raw: asked.append((raw, kind)),
            peaks_raw=raw,
        )
        for raw in (True, False)
    ]
    try:
        raw, subquery = (s.history(target, **window, resolution=FINE) for s in sources)
        # Each subquery request evaluates at most MAX_SUBQUERY_SAMPLES samples: fewer, more.
        monkeypatch.setattr(prometheus_range, "MAX_SUBQUERY_SAMPLES", 1000)
        small = sources[1].history(target, **window, resolution=FINE)
    finally:
        for s in sources:
            s.close()

    np.testing.assert_array_equal(raw.values, subquery.values)
    np.testing.assert_array_equal(small.values, subquery.values)
    # 11,520 raw points in two days at 15 s: two chunks under Prometheus' 11,000-points limit.
    raw_queries = sum(1 for read_raw, _kind in asked if read_raw)
    assert raw_queries == -(-round(2 * DAY / FINE) // prometheus_range.MAX_POINTS) == 2
    # The subquery: one request of 576 points, then of 1000 // 20 = 50 points each.
    assert len(asked) - raw_queries == 1 + -(-len(subquery) // (1000 // round(MODEL_STEP / FINE)))
