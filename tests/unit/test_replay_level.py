"""The level insurance in the replay (policy.level_ratio, reason level) against its ablation:
the held load insured at the forecast's own band is paid from the same strict budget, and it
buys the steps where the forecast's median runs below the level the load is at."""

from __future__ import annotations

import numpy as np
import pytest

from models.base import Series
from scaler.offline import replay, replay_config
from tests.unit.switches import hour_level
from tests.unit.test_replay import trace

SHARE = 0.3
GROWTH = 1.0
"""The load grows by this share over the trace (a service gaining users): a model fitted on
last week's level forecasts a median below the level the load has reached since."""


def growing() -> Series:
    series = trace()
    trend = 1.0 + GROWTH * np.arange(len(series)) / len(series)
    return Series(series.start, series.step, series.values * trend)


def run(level_points: int) -> replay.Replay:
    config = replay_config.ReplayConfig(
        threshold=40.0, budget_share=SHARE, level_points=level_points
    )
    return replay.replay(growing(), config)


@pytest.fixture(scope="module")
def both() -> tuple[replay.Replay, replay.Replay]:
    with hour_level():  # the level regression follows the growth, leaving little to insure
        return run(1), run(0)


def short_now(result: replay.Replay) -> int:
    """Scored steps whose own request was below what their load needed."""
    frame = result.decisions
    scored = np.arange(len(frame)) >= result.summary["trace"]["warmup_steps"]
    scored &= np.isfinite(frame["load"].to_numpy())
    return int((scored & (frame["desired"] < frame["required"]).to_numpy()).sum())


def test_the_level_insurance_buys_steps_the_ablation_leaves_short_at_the_step(
    both: tuple[replay.Replay, replay.Replay],
) -> None:
    level, ablation = both
    assert (level.decisions["reason"] == "level").any()
    assert not (ablation.decisions["reason"] == "level").any()
    assert short_now(level) < short_now(ablation)
    ours, theirs = level.summary["policy"], ablation.summary["policy"]
    assert ours["under_provisioned_pct"] < theirs["under_provisioned_pct"]


def test_the_level_insurance_stays_within_the_share_budget(
    both: tuple[replay.Replay, replay.Replay],
) -> None:
    for result in both:
        spend = result.summary["policy"]["prewarm"]
        assert 0 < spend["max_window_share"] <= SHARE + 1e-9
        assert spend["windows_without_reactive"] == 0
