"""The steps a backtest grades (after the warm-up, up to --limit), and the refusal of a window
that holds no load: a trace with a gap where the window falls would walk for minutes and then
blame the export. Pure: a Series in, a ConfigError out."""

from __future__ import annotations

import math

import numpy as np

from models.base import Series
from scaler.decision.spec import format_duration
from scaler.errors import ConfigError
from scaler.offline import replay_summary


def bounds(series: Series, *, warmup: float | None, limit: float | None) -> tuple[int, int]:
    """[first, last) steps of `series` graded: after the warm-up, `limit` long when given."""
    first = replay_summary.warmup_steps(series, warmup)
    if limit is None:
        return first, len(series)
    return first, min(len(series), first + math.ceil(limit / series.step - 1e-9))


def observed_seconds(series: Series) -> float:
    """Time the trace holds a value for: its steps with one, a gap not counted."""
    return float(np.count_nonzero(~np.isnan(series.values))) * series.step


def refuse_empty(
    series: Series, name: str, *, warmup: float | None, limit: float | None, min_warmup: float
) -> None:
    """ConfigError naming the window, the stretch without load around it and a --warmup or
    --limit that grades load, when no step of the graded window holds a value."""
    first, last = bounds(series, warmup=warmup, limit=limit)
    observed = np.flatnonzero(~np.isnan(series.values))
    if first >= last or np.any((observed >= first) & (observed < last)):
        return
    before, after = observed[observed < first], observed[observed >= last]
    empty_from = series.start + (int(before[-1]) + 1 if before.size else 0) * series.step
    empty_to = series.start + (int(after[0]) if after.size else len(series)) * series.step
    graded = f"--limit {format_duration(limit)}" if limit is not None else "the backtest"
    if warmup is not None:
        delay = f"the --warmup {format_duration(warmup)}"
    else:
        delay = (
            f"the warm-up of {format_duration(first * series.step)} (14d, or half a trace "
            f"shorter than 28d: this one spans {format_duration(series.span)}, gaps included)"
        )
    if after.size:
        resume = max(float(after[0]) * series.step, min_warmup)
        reach = format_duration((int(after[0]) - first) * series.step)
        fix = (
            f"give --warmup {format_duration(resume)} to grade from where the load resumes, "
            f"or a --limit over {reach}"
        )
    else:
        fix = f"give a --warmup shorter than {format_duration(empty_from - series.start)}"
    raise ConfigError(
        f"{name}: {graded} grades {_iso(series, first)} to {_iso(series, last)}, after "
        f"{delay}, and the trace holds no load there (no value from {_when(empty_from)} to "
        f"{_when(empty_to)}); {fix}"
    )


def _iso(series: Series, step: int) -> str:
    return _when(series.start + step * series.step)


def _when(t: float) -> str:
    return str(np.datetime64(round(t), "s")).replace("T", " ")
