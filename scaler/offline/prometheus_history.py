"""`scaler backtest --prometheus-url URL --query PROMQL --since 28d`: a workload's own history,
read straight from its Prometheus, as the trace a backtest walks through.

Owns: the window (the last `since`, ending at the last whole `step`), its bounds, and the label
a summary names the history by. The range queries themselves (chunks under Prometheus'
11,000-points limit, credentials, retries) are sources/prometheus.py's and its siblings'.
Must not: make up values: a step with no sample stays NaN, as a CSV's empty cell does; a
negative is float noise read as 0 or refused, and a value above load_bound.MAX_LOAD refused, as
in a trace file (scaler/offline/negatives.py, scaler/sources/load_bound.py).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np
import numpy.typing as npt

from models.base import Series
from scaler.decision.spec import TargetSpec, format_duration
from scaler.errors import ConfigError, NoData
from scaler.offline import negatives
from scaler.settings import PrometheusSettings
from scaler.sources import load_bound, prometheus_flags

MIN_SINCE = 2 * 86400.0
"""A backtest needs at least a day of warm-up and a day to grade."""
MAX_SINCE = 400 * 86400.0
MAX_POINTS = 2_000_000
"""A year at 15 s; about 200 range queries."""


def fetch(
    settings: PrometheusSettings,
    *,
    query: str,
    since: float,
    step: float,
    now: float,
) -> Series:
    """The values of `query` at `step` over the last `since` before `now`, from its first
    sample on; ConfigError naming the flag for a window out of bounds or the time of a real
    negative, NoData (from the source) when Prometheus holds no series for it."""
    if not MIN_SINCE <= since <= MAX_SINCE:
        raise ConfigError(
            f"--since {format_duration(since)} must be from {format_duration(MIN_SINCE)} to "
            f"{format_duration(MAX_SINCE)}"
        )
    points = since / step
    if points > MAX_POINTS:
        raise ConfigError(
            f"--since {format_duration(since)} at --query-step {format_duration(step)} is "
            f"{points:.0f} points, more than {MAX_POINTS}; use a coarser --query-step"
        )
    end = math.floor(now / step) * step
    target = TargetSpec(namespace="backtest", name="prometheus", query=query, threshold=1.0)
    source = prometheus_flags.source(settings, settings.url)
    try:
        series = source.history(target, start=end - since + step, end=end, step=step)
    except NoData as exc:
        raise NoData(
            f"--query {query!r} matched no series at {settings.url} in the last "
            f"{format_duration(since)}; check the metric and label names in it, and --since"
        ) from exc
    finally:
        source.close()
    present = np.flatnonzero(~np.isnan(series.values))
    if present.size == 0:
        raise NoData(f"query {query!r} has no values in the last {format_duration(since)}")
    _refuse_sparse(present, step, query)
    return _loads(series.since(series.start + int(present[0]) * step), query)


def _refuse_sparse(present: npt.NDArray[np.intp], step: float, query: str) -> None:
    """A series recorded every 10m read at a 5m --query-step has a value at every other step:
    half the decisions would be `no_data` and the figures a replay of gaps (a frontier of 1.41
    where the same load at its own step scores 0.97). Refused when the usual spacing of its
    values (the median, so an outage does not count) is two steps or more."""
    if present.size < 3:
        return
    spacing = float(np.median(np.diff(present)))
    if spacing >= 2:
        every = format_duration(spacing * step)
        raise ConfigError(
            f"--query {query!r} has a value every {every}, not every --query-step "
            f"{format_duration(step)}: half the steps or more would be missing; read it over "
            f"its interval, e.g. last_over_time(metric[{every}]), or give --query-step {every}"
        )


def _loads(series: Series, query: str) -> Series:
    """`series` with float-noise negatives read as 0 (the rules a trace file follows:
    scaler/offline/negatives.py, scaler/sources/load_bound.py); ConfigError naming the time of
    the first real negative or of a value above load_bound.MAX_LOAD."""
    huge = load_bound.too_large(series.values)
    if huge.size:
        row = int(huge[0])
        raise ConfigError(
            f"--query {query!r} returned {series.values[row]:g} at {_when(series, row)}, "
            f"above {load_bound.MAX_LOAD:g}, more than any fleet serves: not a load; query "
            "the load itself (a rate, not a counter's total)"
        )
    bad = negatives.real(series.values)
    if bad.size:
        row = int(bad[0])
        raise ConfigError(
            f"--query {query!r} returned {series.values[row]:g} at {_when(series, row)}, "
            f"and a load is never negative (a negative under {negatives.NOISE:g} of the "
            "series' largest value is float noise, read as 0); wrap the query in "
            "clamp_min(..., 0) or fix the subtraction in it"
        )
    return Series(series.start, series.step, negatives.zeroed(series.values))


def _when(series: Series, row: int) -> str:
    return f"{datetime.fromtimestamp(series.start + row * series.step, UTC):%Y-%m-%dT%H:%M:%SZ}"


def label(settings: PrometheusSettings, query: str) -> str:
    """How a summary names the history: the URL and the query."""
    return f"{settings.url} {query}"
