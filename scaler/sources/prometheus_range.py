"""A query's values over a window, from Prometheus' range API: the regular grid of a history
(`Grid`), cut into chunks under Prometheus' 11,000-points-per-series limit (and, for the peaks
subquery, under MAX_SUBQUERY_SAMPLES), each chunk's points laid on the grid (NaN where
Prometheus has no sample; Inf and values past scaler/sources/load_bound.py's bound are
missing), and the bucket peaks of a history at a finer resolution: the `peak_query` subquery
(Prometheus takes the peaks), or the raw samples with the peaks taken here (`bucket_peaks`,
the same numbers).

Must not: decide which of those a history reads (prometheus.PrometheusSource.history does),
or send a request but through prometheus_transport.Transport.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

import numpy as np

from models.base import FloatArray
from scaler.decision.spec import TargetSpec
from scaler.sources import load_bound, prometheus_answers, prometheus_failures
from scaler.sources.prometheus_transport import Client, Transport, ts

logger = logging.getLogger(__name__)

MAX_POINTS = 11_000
"""Points per series Prometheus serves in one range query (it rejects more with HTTP 400)."""
MAX_SUBQUERY_SAMPLES = 10 * MAX_POINTS
"""Most samples at the peaks' resolution one subquery request evaluates (4 weeks at 30 s are
80,640): a finer resolution is asked in more requests, so that none runs into the timeout.
Measured (bench/warm_phases.py, 11.5 days at 30 s, 100 targets): the subquery costs Prometheus
56 ms of CPU and the scaler 11 ms, the same peaks read raw 108 and 88 ms (33,120 points to
encode and decode instead of 3,312)."""


class Grid:
    """`size` points start, start + step, ...; a chunk is the slice [first, first + size)."""

    def __init__(self, start: float, step: float, size: int, first: int = 0) -> None:
        self.start, self.step, self.size, self.first = start, step, size, first

    def time(self, i: int) -> float:
        return self.start + i * self.step

    def chunks(self, max_points: int) -> Iterator[Grid]:
        for first in range(0, self.size, max_points):
            size = min(max_points, self.size - first)
            yield Grid(self.time(first), self.step, size, first)


def read(
    transport: Transport,
    spec: TargetSpec,
    *,
    query: str,
    grid: Grid,
    began: float,
    most: int = MAX_POINTS,
) -> tuple[FloatArray, bool]:
    """`query`'s values on `grid` (NaN where no sample), in chunks of at most `most`
    points, and whether any chunk held a series."""
    values = np.full(grid.size, np.nan)
    found = False
    url = transport.url(spec)
    logger.debug(
        "%s: history of %d points in %d queries",
        spec.label,
        grid.size,
        math.ceil(grid.size / most),
    )
    for chunk in grid.chunks(most):
        call = partial(_query_range, query=query, chunk=chunk)
        result = transport.ask(spec, call, kind="range", began=began)
        with prometheus_failures.expecting(spec, url, prometheus_answers.RANGE_SHAPE):
            series = prometheus_answers.single_series(spec, url, result)
            if series is not None:
                found = True
                _place(values, chunk, series["values"])
    return values, found


def grid_size(start: float, end: float, step: float) -> int:
    if not (math.isfinite(step) and step > 0):
        raise ValueError(f"history step must be a positive number of seconds, got {step}")
    if end < start:
        return 0
    # The epsilon keeps `end` on the grid when float rounding puts it a hair short.
    return math.floor((end - start) / step + 1e-9) + 1


def samples_per_bucket(start: float, step: float, resolution: float | None) -> int | None:
    """How many samples at `resolution` a bucket of `step` holds when the bucket peaks can be
    taken from a plain range query on the same points the subquery samples (a whole number,
    on a grid through `start` aligned, as Prometheus aligns a subquery, to multiples of
    `resolution`); None when the history is the value at each point or takes the subquery."""
    if resolution is None or resolution >= step:
        return None
    _check_resolution(resolution)
    per = round(step / resolution)
    whole = abs(per * resolution - step) < 1e-6
    aligned = abs(start / resolution - round(start / resolution)) < 1e-6
    return per if whole and aligned else None


def bucket_peaks(raw: FloatArray, per: int) -> FloatArray:
    """The highest of each run of `per` samples; NaN only where all of them are NaN."""
    peaks: FloatArray = np.fmax.reduce(raw.reshape(-1, per), axis=1)
    return peaks


def _check_resolution(resolution: float) -> None:
    if not (math.isfinite(resolution) and resolution >= 0.001):
        raise ValueError(f"history resolution must be at least 1 ms, got {resolution}")


def peak_query(query: str, step: float, resolution: float | None) -> str:
    """`query` as a range query at `step` whose value at T is its highest sampled every
    `resolution` in (T - step, T] (a PromQL subquery: the range stops 1 ms short of `step`,
    so the point at T - step, which belongs to the bucket before, is left out whether the
    Prometheus counts a range's left end in or not). `query` as it is when `resolution` is
    None or not finer than `step`."""
    if resolution is None or resolution >= step:
        return query
    _check_resolution(resolution)
    span, every = round(step * 1000) - 1, round(resolution * 1000)
    return f"max_over_time(({query})[{span}ms:{every}ms])"


def _query_range(client: Client, extra: dict[str, str], query: str, chunk: Grid) -> list[Any]:
    # The library rounds start/end to whole seconds; our own params (which take precedence)
    # keep millisecond precision, so the returned points land exactly on our grid.
    params = _range_params(chunk, extra)
    result: list[Any] = client.custom_query_range(
        query, _dt(chunk.start), _dt(chunk.time(chunk.size - 1)), step=params["step"], params=params
    )
    return result


def query_matrix(client: Client, extra: dict[str, str], query: str, chunk: Grid) -> list[Any]:
    """`_query_range`'s request and answer, each series' samples decoded as an array where
    sources/matrix.py can (prometheus_transport.Client.matrix)."""
    return client.matrix(query, _range_params(chunk, extra))


def _range_params(chunk: Grid, extra: dict[str, str]) -> dict[str, str]:
    """A range query's start, end and step for `chunk`, to the millisecond, and `extra`."""
    last = chunk.time(chunk.size - 1)
    return {"start": ts(chunk.start), "end": ts(last), "step": ts(chunk.step), **extra}


def _place(values: FloatArray, chunk: Grid, points: list[Any]) -> None:
    """Write a chunk's `[timestamp, "value"]` points into `values` at their grid index (as
    arrays: a 28-day history is 8,064 points, and a loop over them was most of its read)."""
    if not points:
        return
    stamps = np.fromiter((float(stamp) for stamp, _ in points), np.float64, len(points))
    found = np.array([prometheus_answers.to_float(text) for _, text in points], dtype=np.float64)
    if not np.isfinite(stamps).all():
        raise ValueError("a sample time is not a finite number")
    # as to_float: a Series holds no inf; a value past the load bound is no load either
    found[~np.isfinite(found) | (found > load_bound.MAX_LOAD)] = np.nan
    index = np.rint((stamps - chunk.start) / chunk.step)
    inside = (index >= 0) & (index < chunk.size)
    values[chunk.first + index[inside].astype(np.int64)] = found[inside]


def _dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
