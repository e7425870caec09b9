"""The replay yardstick, its baselines and the frontier ratio."""

from __future__ import annotations

import numpy as np

from scaler.offline import baselines, yardstick

STEP = 300.0


def after_warmup(n: int = 2000, k: int = 2) -> np.ndarray:
    """Steps scored: all but the first k, before which nothing asked for can be ready."""
    return np.arange(n) >= k


def ramp_with_noise(n: int = 2000, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return rng.poisson(200 + 150 * np.sin(2 * np.pi * t / 288)).astype(float)


def test_a_replica_is_ready_k_steps_after_it_is_asked_for_and_leaves_at_once() -> None:
    desired = np.array([0, 3, 3, 3, 1, 4], dtype=np.int64)
    assert yardstick.ready(desired, 2).tolist() == [0, 0, 0, 3, 1, 1]


def test_a_cold_start_longer_than_the_run_leaves_nothing_ready() -> None:
    assert yardstick.ready(np.array([3], dtype=np.int64), 2).tolist() == [0]
    assert yardstick.ready(np.array([3, 4, 5], dtype=np.int64), 5).tolist() == [0, 0, 0]


def test_the_reactive_baseline_asks_for_the_previous_load_and_holds_through_missing_data() -> None:
    load = np.array([10.0, 25.0, np.nan, 5.0, 12.0])
    got = baselines.reactive(load, threshold=10.0, step=STEP)
    assert got.tolist() == [0, 1, 3, 3, 1]


def test_the_stabilisation_window_keeps_the_highest_recent_recommendation() -> None:
    load = np.array([50.0, 10.0, 10.0, 10.0])
    got = baselines.reactive(load, threshold=10.0, step=60.0)  # 5 recommendations in 5 minutes
    assert got.tolist() == [0, 5, 5, 5]


def test_the_oracle_is_never_under_provisioned() -> None:
    load = ramp_with_noise()
    desired = baselines.oracle(load, threshold=20.0, k=2)
    result = yardstick.outcome(
        load=load, desired=desired, threshold=20.0, k=2, step=STEP, scored=after_warmup()
    )
    assert result.under_provisioned_pct == 0 and result.shortfall_replica_steps == 0


def test_the_frontier_ratio_is_one_on_the_frontier_and_zero_for_the_oracle() -> None:
    load = ramp_with_noise()
    outcomes = {
        h: yardstick.outcome(
            load=load,
            desired=baselines.reactive(load, threshold=20.0, step=STEP, headroom=h),
            threshold=20.0,
            k=2,
            step=STEP,
            scored=after_warmup(),
        )
        for h in baselines.HEADROOMS
    }
    front = yardstick.frontier(outcomes)
    assert abs(front.ratio(outcomes[0.2]) - 1.0) < 1e-9
    oracle = yardstick.outcome(
        load=load,
        desired=baselines.oracle(load, threshold=20.0, k=2),
        threshold=20.0,
        k=2,
        step=STEP,
        scored=after_warmup(),
    )
    assert front.ratio(oracle) == 0.0


def test_the_frontier_denominator_is_floored_at_half_a_percent_of_steps() -> None:
    front = yardstick.Frontier(
        headrooms=(0.0, 1.0), gpu_hours=(10.0, 20.0), under_provisioned_pct=(10.0, 0.0)
    )
    result = yardstick.Outcome(
        under_provisioned_pct=1.0, shortfall_replica_steps=1, unserved_load_pct=0.1, gpu_hours=30.0
    )
    assert front.ratio(result) == 1.0 / yardstick.FRONTIER_FLOOR_PCT
