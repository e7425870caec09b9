"""The steps the seasonal models run at, offline: a whole fraction of a day, or their daily and
weekly profiles slip against the clock. Owns the check of every flag whose value becomes a model
step (`scaler backtest --step` and `--query-step`, `scaler retrain --model-step`) and of a trace
coarser than the model step (modelled at its own step); reads no files and no environment."""

from __future__ import annotations

import math
from collections.abc import Callable

from models.base import DAY
from scaler.decision import ranges
from scaler.decision.spec import duration_arg, format_duration


def divides_day(step: float) -> bool:
    """A day is a whole number of `step`s: the profile of a day (and of a week) is whole steps
    long, so each step falls at the same time of day every day."""
    count = DAY / step
    return math.isclose(count, round(count), rel_tol=0.0, abs_tol=1e-6)


def nearby(step: float, bounds: ranges.Range) -> list[float]:
    """The steps within `bounds` closest to `step` below and above it that divide a day, on the
    grid of whole minutes when `step` is one (6m and 8m for 7m), else of whole seconds."""
    unit = 60.0 if step >= 60 and step % 60 == 0 else 1.0
    grid = [
        n * unit
        for n in range(math.ceil(bounds.low / unit), math.floor(bounds.high / unit) + 1)
        if n > 0 and divides_day(n * unit)
    ]
    below = [s for s in grid if s < step]
    above = [s for s in grid if s > step]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def slips(step: float) -> str:
    """Why `step`, which does not divide a day, cannot be a model step."""
    return (
        f"a day is not a whole number of {format_duration(step)} steps ({DAY / step:.1f}), so "
        "the daily and weekly seasonal profiles would slip against the clock every day"
    )


def step_flag(bounds: ranges.Range, why: str) -> Callable[[str], float]:
    """argparse `type=` for a step that becomes a model step: a duration within `bounds` that
    divides a day (ranges.flag's message: the value, the reason and `why`)."""

    def parse(text: str) -> float:
        step = bounds.check(duration_arg(text))
        if not divides_day(step):
            others = " or ".join(format_duration(s) for s in nearby(step, bounds))
            raise ValueError(f"{slips(step)}; use a step that divides a day, such as {others}")
        return step

    return ranges.flag(parse, why)
