"""The drift fallback's margin: reactive plus a headroom learned from how load recently grew
over one cold start. Pure: no clock, no I/O.

While the forecast is untrusted the scaler is reactive, but a plain reactive request is the worst
point of the frontier (every rise is served short-handed for a cold start). A replica asked for
now is ready one cold start (k steps) later and must then serve L[t + k]; the reactive floor is
the max of the last lead time's samples. So the headroom that would have covered a past step is
the growth ratio L[t + k] / floor(t), and the margin asks for floor x its upper `quantile` over
the last LOOKBACK of load, the same insurance level the forecast buys. It is prewarm like any
other: within maxPrewarmReplicas and paid from the budget (the ledger's allowance caps it).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from models.base import DAY, FloatArray
from scaler.decision import policy

LOOKBACK = DAY
"""Seconds of recent load the growth ratios are measured on: a full daily cycle, so the margin
knows the morning ramp whatever the hour, and recent enough to follow a regime change."""
MAX_GROWTH = 4.0
"""Largest ratio the margin ever applies (300% headroom, the frontier's widest)."""
MIN_RATIOS = 12
"""Fewest measured ratios a margin needs; with fewer the fallback is plain reactive."""
LEVEL_FLOOR = 0.01
"""Floors below this share of the window's mean load are not ratio denominators (a ratio over a
near-zero lull says nothing about headroom)."""


def growth_ratio(recent: FloatArray, *, floor_samples: int, ahead: int, quantile: float) -> float:
    """Upper `quantile` of L[t + ahead] / max(L[t - floor_samples + 1 .. t]) over `recent` (one
    sample per step, oldest first), in [1, MAX_GROWTH]; 1 (no margin) without enough data."""
    load = np.asarray(recent, dtype=np.float64)
    f, k = max(1, floor_samples), max(1, ahead)
    if load.size < f + k + MIN_RATIOS or not 0 < quantile < 1:
        return 1.0
    floors = np.nanmax(sliding_window_view(np.nan_to_num(load, nan=-np.inf), f), axis=1)
    later = load[f - 1 + k :]
    floors = floors[: later.size]
    mean = float(np.nanmean(load)) if np.isfinite(load).any() else math.nan
    ok = np.isfinite(later) & np.isfinite(floors) & (floors > LEVEL_FLOOR * max(mean, 0.0))
    if ok.sum() < MIN_RATIOS or not math.isfinite(mean) or mean <= 0:
        return 1.0
    ratio = float(np.quantile(later[ok] / floors[ok], quantile))
    return min(max(ratio, 1.0), MAX_GROWTH)


def decide(
    *,
    load: float,
    recent: FloatArray,
    step: float,
    lead_time: float,
    quantile: float,
    limits: policy.Limits,
    allowance: int,
    held_load: float | None = None,
    after_drop: bool = False,
) -> policy.Decision:
    """The fallback decision: reactive on `load` (the reactive floor) plus the growth margin
    measured on `recent` (the last LOOKBACK or more of load at `step`). Reason DRIFT_MARGIN when
    the margin adds replicas, DRIFT_FALLBACK when it adds none (plain reactive); maxReplicas and
    minReplicas keep their own reasons. `held_load` (policy.decide) is the lead time's highest
    load, held as paid prewarm: the margin applies to it, the floor its ratios were measured
    on. `after_drop`: the fallback was entered on a drop (load below the forecast), where it
    adds no growth margin (plain reactive plus the paid hold): the ratios are scale-free, so
    a day of them measured at the old level insure the new one as if nothing had happened, and
    on NASA's injected drop that margin was 4.3 of the fallback's 7.0 phantom replica-hours."""
    keep = max(1, math.ceil(LOOKBACK / step - 1e-9))
    ratio = (
        1.0
        if after_drop
        else growth_ratio(
            np.asarray(recent, dtype=np.float64)[-keep:],
            floor_samples=policy.floor_samples(lead_time, step),
            ahead=max(1, math.ceil(lead_time / step - 1e-9)),
            quantile=quantile,
        )
    )
    level = load if held_load is None or not math.isfinite(held_load) else max(load, held_load)
    peak = level * ratio if math.isfinite(level) and level > 0 else None
    decision = policy.decide(
        load=load, forecast_peak=peak, limits=limits, allowance=allowance, held_load=held_load
    )
    if decision.reason in (policy.Reason.MAX_REPLICAS, policy.Reason.MIN_REPLICAS):
        return decision
    margined = decision.prewarm > 0 and not after_drop  # after a drop the prewarm is the hold
    reason = policy.Reason.DRIFT_MARGIN if margined else policy.Reason.DRIFT_FALLBACK
    return dataclasses.replace(decision, reason=reason)
