"""The replay's scoring: which steps are scored (the warm-up), and the summary of how the policy's
decisions, and the baselines' (reactive, static headrooms, oracle), fared on the yardstick, with
the prewarm each spent against the budget.

Pure: a decisions frame and its per-step flags in, a summary dict out. It does not decide
(scaler.offline.replay does) nor print (scaler.offline.replay_table).
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np
import pandas as pd

from models.base import DAY, Series
from scaler.offline import baselines, yardstick
from scaler.offline.replay_config import ReplayConfig, wake_hours

WARMUP = 14 * DAY
"""Unscored history at the start of a trace (DESIGN.md): 14 days, or half a shorter trace."""
REPORTED_HEADROOMS = (0.1, 0.2, 0.5)
"""Static headrooms reported next to the policy (and drawn in the frontier notebook)."""
FALLBACK_AT = "fallback_at"
"""simulate's extra: which steps were decided in drift fallback (summarise counts, not stores)."""
FLOOR_AT = "floor_at"
"""extra's per-step flags of the policy's prewarm bought from the share budget's wake-up floor."""


def warmup_steps(series: Series, warmup: float | None = None) -> int:
    """Steps not scored at the start: 14 days, or the first half of a shorter trace."""
    seconds = min(WARMUP, series.span / 2) if warmup is None else warmup
    return min(len(series), math.ceil(seconds / series.step - 1e-9))


def explained_steps(load: Any, warmup: int) -> tuple[int, int]:
    """The steps [first, stop) over which `scaler explain` totals what the yardstick scores
    from step `warmup` on (summary.json `explain_steps`). Explain bills the steps decided from
    load (step t is decided from load[t - 1]), the yardstick scores those with load (load[t]),
    so of a gap explain bills the step before its first missing value and the yardstick the step
    after its last, both holding one request (replay_log.py). A scored span that begins inside a
    gap begins, for explain, at the step before that gap's first missing value; one that ends in
    a gap ends at its first missing value."""
    known = np.isfinite(np.asarray(load, dtype=np.float64))
    first, stop = min(warmup, known.size - 1), known.size
    if 0 < first < known.size and not known[first - 1]:
        first -= 1
        while first > 0 and not known[first - 1]:
            first -= 1
    while stop > first + 1 and not known[stop - 1]:
        stop -= 1
    return first, stop


def summarise(
    series: Series,
    frame: pd.DataFrame,
    extra: dict[str, Any],
    config: ReplayConfig,
    warmup: float | None = None,
) -> dict[str, Any]:
    """Yardstick figures for the policy and the baselines, over the scored steps."""
    step, load, c = series.step, series.values, config.threshold
    k = yardstick.cold_start_steps(config.lead_time, step)
    scored = np.zeros(len(series), dtype=bool)
    scored[warmup_steps(series, warmup) :] = True

    def score(desired: Any) -> yardstick.Outcome:
        requests = np.asarray(desired, dtype=np.int64)
        return yardstick.outcome(
            load=load, desired=requests, threshold=c, k=k, step=step, scored=scored
        )

    headroom = {
        h: baselines.reactive(load, threshold=c, step=step, headroom=h)
        for h in sorted({*baselines.HEADROOMS, *REPORTED_HEADROOMS})
    }
    front = yardstick.frontier({h: score(d) for h, d in headroom.items()})
    reactive_d = headroom[0.0]
    base = score(reactive_d)
    runs = {
        "policy": frame["desired"].to_numpy(),
        "reactive": reactive_d,
        **{f"reactive_{round(h * 100)}": headroom[h] for h in REPORTED_HEADROOMS},
        "oracle": baselines.oracle(load, threshold=c, k=k),
    }
    results: dict[str, Any] = {}
    for name, desired in runs.items():
        result = score(desired)
        policy_run = name == "policy"
        extra_hours = (
            frame["prewarm_replica_hours"].to_numpy()
            if policy_run
            else np.maximum(np.asarray(desired) - reactive_d, 0) * step / 3600.0
        )
        # What a share budget is a share of: the policy's own reactive floor within its limits,
        # as its ledger records it; for a baseline, plain reactive.
        reactive_steps = frame["reactive"].to_numpy() if policy_run else reactive_d
        reactive_hours = (
            np.clip(reactive_steps, config.min_replicas, config.max_replicas) * step / 3600.0
        )
        results[name] = {
            **result.as_dict(),
            "cost": _priced(result.gpu_hours, config),
            "gpu_hours_x_reactive": result.gpu_hours / max(base.gpu_hours, 1e-12),
            "frontier_ratio": front.ratio(result),
            "prewarm": _spend(
                series,
                extra_hours,
                reactive_hours,
                config,
                scored & np.isfinite(load),
                floor_at=extra.get(FLOOR_AT) if policy_run else None,
            ),
        }
    reasons = frame["reason"][scored].value_counts().sort_index()
    drift_counts = {k: v for k, v in extra.items() if k not in (FALLBACK_AT, FLOOR_AT)}
    if FALLBACK_AT in extra:
        # Episodes and fallback steps in the scored span alone, as the yardstick scores steps:
        # an alarm in the warm-up (a model fitted on its first days) is not one of the
        # scored weeks'. Fallback steps are those with load, as `scored_steps` counts them: a
        # fallback that spans a gap (a call centre's weekend) decided nothing in it, and
        # counting the gap's steps put 695 no-data steps into bank_calls' 978.
        fell_back = np.asarray(extra[FALLBACK_AT], dtype=bool)
        begun = fell_back & ~np.concatenate([[False], fell_back[:-1]])
        drift_counts["scored_episodes"] = int((begun & scored).sum())
        drift_counts["scored_fallback_steps"] = int((fell_back & scored & np.isfinite(load)).sum())
    return {
        "trace": {
            "start": frame["timestamp"].iloc[0],
            "end": frame["timestamp"].iloc[-1],
            "step_seconds": step,
            "steps": len(series),
            "scored_steps": int((scored & np.isfinite(load)).sum()),
            "warmup_steps": int((~scored).sum()),
            "explain_steps": list(explained_steps(load, int((~scored).sum()))),
        },
        "config": {**asdict(config), "cold_start_steps": k},
        # The unit of every money figure (`cost`, the budget's), as the decision log names it.
        "budget_unit": config.currency if config.cost_per_replica_hour else "replica-hours",
        **results,
        "drift": {**drift_counts, "reasons": {str(r): int(n) for r, n in reasons.items()}},
        "frontier": {
            "headrooms": list(front.headrooms),
            "gpu_hours": list(front.gpu_hours),
            "under_provisioned_pct": list(front.under_provisioned_pct),
        },
    }


def _spend(
    series: Series,
    hours: Any,
    reactive_hours: Any,
    config: ReplayConfig,
    scored: Any,
    *,
    floor_at: Any = None,
) -> dict[str, float | None]:
    """Prewarm replica-hours (and money) and the reactive replica-hours over the scored steps
    with load, as every other figure of the summary is (`gpu_hours_x_reactive` among them), and
    the prewarm as a share of them. A step without load holds the decision before it, charged
    (replay.py), and is not scored: of a gap, the step after it holds what the step before its
    first missing value decided, so the scored totals read it once, as `gpu_hours` does. The
    budget's figures cover every step, the warm-up's and a gap's too, because the budget is
    strict everywhere: the costliest rolling window's spend, the largest share of any
    window that ends at a step with prewarm (the windows a share budget bounds, see budget.py),
    and how many such windows had no reactive hours at all (never for the policy under a share
    budget). A charge the ledger made from the wake-up floor (`floor_at`: its window held no
    reactive hours, budget.wake_floor) answers to the floor, not to a share, so its window is
    reported apart (`floor_windows`, `max_floor_window_spend`)."""
    per_step = np.asarray(hours, dtype=np.float64)
    width = max(1, math.ceil(config.budget_window / series.step - 1e-9))
    window = _trailing(per_step, width)
    reactive = np.asarray(reactive_hours, dtype=np.float64)
    charged, used = per_step > 0, _trailing(reactive, width)
    wake = wake_hours(config) if floor_at is not None and config.budget_share else None
    at_floor = charged & np.asarray(floor_at, dtype=bool) if wake else np.zeros_like(charged)
    by_share = charged & (used > 0) & ~at_floor
    shares = window[by_share] / used[by_share]
    price = config.cost_per_replica_hour or 1.0
    spent, paid = float(per_step[scored].sum()), float(reactive[scored].sum())
    return {
        "replica_hours": spent,
        "cost": _priced(spent, config),
        # rounded: a cumulative-sum difference carries ~1e-12 of float noise, not spend
        "max_window_spend": round(float(window.max(initial=0.0)) * price, 9),
        "reactive_replica_hours": paid,
        "share_of_reactive": spent / max(paid, 1e-12),
        "max_window_share": round(float(shares.max(initial=0.0)), 9),
        "windows_without_reactive": int((charged & (used <= 0) & ~at_floor).sum()),
        "wake_hours": wake,
        "floor_windows": int(at_floor.sum()),
        "max_floor_window_spend": (
            round(float(window[at_floor].max()), 9) if at_floor.any() else None
        ),
        "budget": config.budget,
        "budget_share": config.budget_share,
        "window_seconds": config.budget_window,
    }


def _priced(replica_hours: float, config: ReplayConfig) -> float | None:
    """`replica_hours` in money, in `config.currency`; None when no price is set."""
    price = config.cost_per_replica_hour
    return None if price is None else replica_hours * price


def _trailing(per_step: Any, width: int) -> Any:
    """Sum over the `width` steps ending at each step."""
    cum = np.concatenate([[0.0], np.cumsum(per_step)])
    idx = np.arange(per_step.size)
    return cum[idx + 1] - cum[np.maximum(idx + 1 - width, 0)]
