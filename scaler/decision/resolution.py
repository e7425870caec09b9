"""Deciding at the load's own step with forecasts made at the model step. Pure.

The live engine decides every `--step` (30 s) from the newest sample, with a model fitted and
forecasting at the model step (5 min). The replay does the same on a trace finer than the model
step: it decides at every step of the trace and refreshes its forecast each time a model-step
bucket is complete.

A model-step bucket at grid time T holds the trace's samples in (T - M, T] (models.resample), and
its value is their highest: the load a replica must serve at the trace's own resolution, which
a bucket mean would hide. So the forecast, its calibrated band and the drift monitor all speak of
the per-bucket peak, and a band that covers a bucket covers every sample in it.
"""

from __future__ import annotations

import math

from models import resample
from models.base import Series


def model_series(series: Series, model_step: float) -> Series:
    """What the models are fitted on and forecast: per-bucket peaks at `model_step` (a trace at
    that step or coarser is modelled as it is)."""
    return resample.peaks(series, model_step)


def newest_complete(model: Series, now: float) -> int:
    """Index of the newest bucket of `model` whose samples were all observed before `now`
    (-1 when none is): the bucket at T is complete once the sample at T is known, i.e. T < now.
    """
    count = math.ceil((now - model.start) / model.step - 1e-9)
    return min(count, len(model)) - 1


def lookahead_points(origin: float, step: float, *, now: float, lookahead: float) -> int:
    """Forecast points (the first being the bucket after the one at `origin`) that overlap
    [now, now + lookahead): each starts before the look-ahead ends."""
    return max(1, math.ceil((now + lookahead - origin) / step - 1e-9))
