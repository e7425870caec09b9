"""The drift fallback's margin: a headroom learned from recent growth over one cold start,
within every cap, and what it buys against plain reactive fallback (the ablation)."""

from __future__ import annotations

import numpy as np

from models.base import DAY, Series
from models.seasonal import SeasonalBaseline
from scaler.decision import margin, policy
from scaler.offline import replay, replay_config, yardstick

STEP = 300.0
LIMITS = policy.Limits(threshold=10.0, max_prewarm_replicas=10)


def test_the_margin_is_the_growth_a_steady_ramp_shows_over_one_cold_start() -> None:
    growth = 1.02  # per step
    load = 100.0 * growth ** np.arange(300)
    f, k = 3, 2
    ratio = margin.growth_ratio(load, floor_samples=f, ahead=k, quantile=0.95)
    assert abs(ratio - growth**k) < 1e-9  # the floor is the newest sample of a rising series


def test_flat_load_gets_no_margin_and_the_plain_fallback_reason() -> None:
    load = np.full(300, 55.0)
    decision = margin.decide(
        load=55.0,
        recent=load,
        step=STEP,
        lead_time=600.0,
        quantile=0.95,
        limits=LIMITS,
        allowance=10,
    )
    assert decision.prewarm == 0
    assert decision.reason is policy.Reason.DRIFT_FALLBACK
    assert decision.desired == policy.replicas_for(55.0, LIMITS.threshold)


def test_a_rising_load_gets_a_margin_paid_within_the_allowance_and_says_so() -> None:
    rng = np.random.default_rng(0)
    load = 100 * (1 + 0.5 * np.sin(np.arange(288) * 2 * np.pi / 288)) + rng.normal(0, 5, 288)
    common = {"load": 100.0, "recent": load, "step": STEP, "lead_time": 600.0, "quantile": 0.95}
    wide = margin.decide(**common, limits=LIMITS, allowance=10)  # type: ignore[arg-type]
    assert wide.reason is policy.Reason.DRIFT_MARGIN and wide.prewarm > 0
    capped = margin.decide(**common, limits=LIMITS, allowance=wide.prewarm - 1)  # type: ignore[arg-type]
    assert capped.prewarm == wide.prewarm - 1
    none = margin.decide(**common, limits=LIMITS, allowance=0)  # type: ignore[arg-type]
    assert none.prewarm == 0 and none.reason is policy.Reason.DRIFT_FALLBACK


def test_a_fallback_entered_on_a_drop_adds_no_growth_margin_only_the_paid_hold() -> None:
    rng = np.random.default_rng(0)
    load = 100 * (1 + 0.5 * np.sin(np.arange(288) * 2 * np.pi / 288)) + rng.normal(0, 5, 288)
    common = {"load": 100.0, "recent": load, "step": STEP, "lead_time": 600.0, "quantile": 0.95}
    rise = margin.decide(**common, limits=LIMITS, allowance=10)  # type: ignore[arg-type]
    drop = margin.decide(**common, limits=LIMITS, allowance=10, after_drop=True)  # type: ignore[arg-type]
    assert rise.prewarm > 0 and drop.prewarm == 0
    assert drop.reason is policy.Reason.DRIFT_FALLBACK
    held = margin.decide(**common, limits=LIMITS, allowance=10, held_load=150.0, after_drop=True)  # type: ignore[arg-type]
    assert held.desired == policy.replicas_for(150.0, LIMITS.threshold) > drop.desired
    assert held.prewarm > 0 and held.reason is policy.Reason.DRIFT_FALLBACK  # the paid hold


def test_the_margin_is_bounded_whatever_the_spikes_and_needs_data() -> None:
    load = np.tile([100.0, 100.0, 100.0, 1000.0], 100)
    assert margin.growth_ratio(load, floor_samples=1, ahead=1, quantile=0.99) == margin.MAX_GROWTH
    assert margin.growth_ratio(load[:5], floor_samples=1, ahead=1, quantile=0.95) == 1.0
    assert margin.growth_ratio(np.full(100, np.nan), floor_samples=1, ahead=1, quantile=0.95) == 1.0
    assert margin.growth_ratio(np.zeros(100), floor_samples=1, ahead=1, quantile=0.95) == 1.0


def regime_change(days: float = 12, seed: int = 0) -> Series:
    """A daily cycle whose level triples on day 10: the forecast is untrusted for a while."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(days * DAY / STEP)) * STEP
    mean = 200 + 150 * np.sin(2 * np.pi * (t / DAY - 0.3))
    mean = np.where(t >= 10 * DAY, 3 * mean, mean)
    return Series(1_700_006_400.0, STEP, rng.poisson(mean).astype(float))


def test_the_margin_serves_fallback_steps_better_than_plain_reactive_within_the_budget() -> None:
    series = regime_change()
    config = replay_config.ReplayConfig(threshold=40.0)
    runs = {
        name: replay.simulate(
            series,
            replay_config.ReplayConfig(threshold=40.0, drift_margin=on),
            make=SeasonalBaseline,
        )[0]
        for name, on in (("margin", True), ("plain", False))
    }
    reasons = np.asarray(runs["margin"]["reason"])
    in_fallback = np.isin(reasons, ("drift_fallback", "drift_margin"))
    assert (reasons == "drift_margin").any()
    assert not (np.asarray(runs["plain"]["reason"]) == "drift_margin").any()
    required = yardstick.required(series.values, config.threshold)
    short = {
        name: int(((np.asarray(frame["ready"]) < required) & in_fallback).sum())
        for name, frame in runs.items()
    }
    assert short["margin"] < short["plain"], short
    spent = np.asarray(runs["margin"]["prewarm_replica_hours"])
    per_day = np.convolve(spent, np.ones(int(DAY / STEP)))[: spent.size]
    assert per_day.max() <= config.budget + 1e-9
