"""Synthetic load for model tests: a daily and weekly cycle with Poisson noise, like request
counts (noise grows with load), on a 5-minute grid starting on a Monday 00:00 UTC."""

from __future__ import annotations

import numpy as np

from models.base import DAY, Series

START = 1_700_438_400.0
"""Monday 2023-11-20 00:00 UTC."""
STEP = 300.0


def load(days: float, *, seed: int = 0, scale: float = 200.0, start: float = START) -> Series:
    n = round(days * DAY / STEP)
    t = start + STEP * np.arange(n)
    hour = (t % DAY) / 3600
    weekday = ((t - START) // DAY) % 7
    daily = 0.25 + np.exp(-((hour - 14) ** 2) / 18)  # trough at night, peak mid-afternoon
    weekly = np.where(weekday >= 5, 0.5, 1.0)
    rate = scale * daily * weekly
    values = np.random.default_rng(seed).poisson(rate).astype(np.float64)
    return Series(start, STEP, values)


def ramps(days: int = 8, seed: int = 3) -> Series:
    """A daily morning ramp with Poisson noise, 5-minute steps: rises the forecast sees coming."""
    step = 300.0
    rng = np.random.default_rng(seed)
    t = np.arange(int(days * DAY / step)) * step
    hour = (t % DAY) / 3600.0
    mean = 100 + 900 / (1 + np.exp(-(hour - 8.0) * 3)) - 900 / (1 + np.exp(-(hour - 20.0) * 3))
    return Series(1_700_006_400.0, step, rng.poisson(mean).astype(float))
