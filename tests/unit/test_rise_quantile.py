"""Insuring expected rises only (policy.rise_quantile, ReplayConfig.insure_rises_only) against
its ablation, insurance at the affordable quantile everywhere: above the median the budget is
spent only where the median forecast needs a replica above the reactive floor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.base import DAY
from scaler.decision import policy
from scaler.offline import replay
from tests.unit.test_replay import STEP, trace

SHARE = 0.3


def test_the_quantile_is_kept_only_where_the_median_needs_a_replica_above_the_floor() -> None:
    def read(peak: float | None, floor: float) -> float:
        return policy.rise_quantile(0.9, expected_peak=peak, floor_load=floor, threshold=10.0)

    assert read(31.0, 29.0) == 0.9  # 4 replicas against 3
    assert read(30.0, 21.0) == policy.MEDIAN  # 3 against 3: no rise in replicas
    assert read(20.0, 29.0) == policy.MEDIAN  # falling
    assert read(None, 29.0) == policy.MEDIAN
    assert read(math.nan, 29.0) == policy.MEDIAN
    below = policy.rise_quantile(0.3, expected_peak=50.0, floor_load=0.0, threshold=10.0)
    assert below == 0.3  # never raised above what the budget afforded


@pytest.fixture(scope="module")
def both() -> tuple[replay.Replay, replay.Replay]:
    def run(rises_only: bool) -> replay.Replay:
        config = replay.ReplayConfig(
            threshold=40.0, budget_share=SHARE, insure_rises_only=rises_only
        )
        return replay.replay(trace(), config)

    return run(True), run(False)


def test_insuring_rises_only_buys_less_on_the_falling_half_of_the_cycle(
    both: tuple[replay.Replay, replay.Replay],
) -> None:
    rises, everywhere = (r.decisions for r in both)
    t = np.arange(len(rises)) * STEP
    falling = np.cos(2 * np.pi * (t / DAY - 0.3)) < 0  # the trace's mean is on its way down
    bought = {
        name: float(frame["prewarm_replica_hours"].to_numpy()[falling].sum())
        for name, frame in (("rises", rises), ("everywhere", everywhere))
    }
    assert bought["everywhere"] > 0
    assert bought["rises"] < 0.9 * bought["everywhere"]  # 0.76x when written


def test_insuring_rises_only_keeps_the_share_strict(
    both: tuple[replay.Replay, replay.Replay],
) -> None:
    for result in both:
        assert 0 < result.summary["policy"]["prewarm"]["max_window_share"] <= SHARE + 1e-9
