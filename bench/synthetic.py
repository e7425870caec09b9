"""Synthetic load for policy ablations: kinds of load no shared trace was tuned on.

Every kind is a daily cycle (quieter weekends) with Poisson noise at a 5-minute step, plus one
feature: a growth trend, holidays (a weekday as quiet as a Sunday), short spikes (x2-x4 for
5-20 minutes, a few a day at random times), or an outage (six hours at zero, then a rebound).
Seeded, so a table made from them can be rerun.
"""

from __future__ import annotations

import numpy as np

from models.base import DAY, Series

STEP = 300.0
START = 1_700_006_400.0  # a Wednesday, 00:00 UTC
KINDS = ("noise", "trend", "holidays", "spikes", "outage")


def load(kind: str, *, days: int = 28, base: float = 400.0, seed: int = 0) -> Series:
    """One synthetic trace of `kind` (one of KINDS)."""
    if kind not in KINDS:
        raise ValueError(f"unknown synthetic kind {kind!r}; pick one of {', '.join(KINDS)}")
    rng = np.random.default_rng(seed)
    t = np.arange(int(days * DAY / STEP)) * STEP
    day = np.floor((t + START) / DAY)
    weekday = (day + 3) % 7  # 0 = Monday
    hour = ((t + START) % DAY) / 3600.0
    cycle = 0.55 - 0.45 * np.cos(2 * np.pi * (hour - 5.0) / 24.0)  # trough at 05:00
    quiet = weekday >= 5
    if kind == "holidays":
        quiet |= np.isin(day - day[0], rng.choice(np.arange(14, days), size=3, replace=False))
    mean = base * cycle * np.where(quiet, 0.6, 1.0)
    if kind == "trend":
        mean *= 1.0 + 1.5 * t / t[-1]  # +150 % over the trace
    if kind == "spikes":
        for start in rng.choice(t.size - 4, size=3 * days, replace=False):
            mean[start : start + rng.integers(1, 5)] *= rng.uniform(2.0, 4.0)
    values = rng.poisson(mean).astype(float)
    if kind == "outage":
        cut = int((days - 6) * DAY / STEP) + int(10 * 3600 / STEP)
        values[cut : cut + int(6 * 3600 / STEP)] = 0.0
        rebound = slice(cut + int(6 * 3600 / STEP), cut + int(7 * 3600 / STEP))
        values[rebound] = rng.poisson(mean[rebound] * 1.8)
    return Series(START, STEP, values)
