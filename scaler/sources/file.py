"""Replay CSV traces (any export offline/traces.py reads) as if they were live Prometheus data.

The trace is shifted so that `warmup` of it lies in the past when the source is created, then
plays forward on the injected clock (looping over whole weeks, so a server left running keeps
its daily and weekly shape). Values are sampled like a Prometheus range query: the value at a
grid time is the trace's value of the step that contains it. Nothing after the clock's now is
ever returned, so a replay cannot look ahead.

`PATH` is a CSV file (every target replays it) or a folder of them (a target's `query` names
the file, without `.csv`), so one server can replay many different targets.
"""

from __future__ import annotations

import math
import warnings
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from models.base import DAY, WEEK, Series
from scaler.clock import Clock
from scaler.decision.spec import TargetSpec
from scaler.errors import BadQuery, ConfigError, NoData
from scaler.offline.traces import read_trace
from scaler.sources.base import Sample

LOOKBACK = 300.0
"""Like Prometheus: a value older than this is not "latest"."""


def _is_file(path: Path) -> bool:
    """Path.is_file, but False for a name the OS refuses (a 4 KB query is too long a file name)."""
    try:
        return path.is_file()
    except OSError:
        return False


def bundled_trace() -> Path:
    """The trace shipped in the package (see scaler/data/PROVENANCE.md)."""
    return Path(str(resources.files("scaler") / "data" / "llm_serving_10min.csv"))


def default_warmup(trace: Series) -> float:
    """History already in the past at start: 14 days, or half of a shorter trace."""
    return min(14 * DAY, trace.span / 2)


class FileSource:
    """Replays one CSV, or a folder of CSVs chosen by each target's query."""

    def __init__(self, path: Path, *, clock: Clock, warmup: float | None = None) -> None:
        self.path = path
        self.clock = clock
        if not path.exists():
            raise ConfigError(f"--source file:{path}: no such file or folder")
        self._start_wall = clock.now()
        self._warmup = warmup

    def trace_for(self, spec: TargetSpec) -> Series:
        if self.path.is_dir():
            candidate = self.path / f"{spec.query}.csv"
            if candidate.parent != self.path or not _is_file(candidate):
                names = ", ".join(sorted(p.stem for p in self.path.glob("*.csv")))
                raise BadQuery(
                    spec.query, f"no trace of that name in {self.path}; set it to one of: {names}"
                )
            return _load(candidate)
        return _load(self.path)

    def shift(self, trace: Series) -> float:
        """Wall time minus trace time."""
        warmup = default_warmup(trace) if self._warmup is None else self._warmup
        start = np.floor(self._start_wall / trace.step) * trace.step  # keep the trace's grid
        return float(start - (trace.start + warmup))

    def history(
        self,
        spec: TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        trace = self.trace_for(spec)
        end = min(end, self.clock.now())
        count = max(0, int(np.floor((end - start) / step + 1e-9)) + 1)
        times = start + step * np.arange(count, dtype=np.float64)
        if resolution is None or resolution >= step or trace.step >= step:
            return Series(start, step, self._values_at(trace, times))
        # The bucket's peak, sampled at the finer of the two steps (a sample of the trace
        # covers its own step, so sampling it more finely would reach into the bucket before).
        every = max(resolution, trace.step)
        back = every * np.arange(max(1, math.ceil(step / every - 1e-9)), dtype=np.float64)
        fine = self._values_at(trace, times[:, None] - back[None, :])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a bucket with no sample is NaN
            return Series(start, step, np.nanmax(fine, axis=1))

    def latest(self, spec: TargetSpec, *, at: float) -> Sample:
        trace = self.trace_for(spec)
        at = min(at, self.clock.now())
        times = at - trace.step * np.arange(int(LOOKBACK // trace.step) + 1)
        values = self._values_at(trace, times)
        found = np.flatnonzero(~np.isnan(values))
        if found.size == 0:
            raise NoData(f"{spec.label}: the trace has no value in the {LOOKBACK:.0f}s before now")
        return Sample(at=float(times[found[0]]), value=float(values[found[0]]))

    def _values_at(self, trace: Series, wall_times: np.ndarray) -> np.ndarray:
        offset = wall_times - self.shift(trace) - trace.start
        period = loop_length(trace)
        offset = np.where(offset >= 0, np.mod(offset, period), offset)
        index = np.floor(offset / trace.step + 1e-9).astype(np.int64)
        inside = (index >= 0) & (index < len(trace))
        out = np.full(wall_times.shape, np.nan)
        out[inside] = trace.values[index[inside]]
        return out


def loop_length(trace: Series) -> float:
    """Loop over whole weeks (whole days for a trace shorter than a week)."""
    unit = WEEK if trace.span >= WEEK else DAY
    return max(unit, np.floor(trace.span / unit) * unit) if trace.span >= DAY else trace.span


@cache
def _load(path: Path) -> Series:
    return read_trace(path)
