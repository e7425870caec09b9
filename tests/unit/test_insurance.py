"""Cost-ordered insurance (policy.affordable_quantile's `insurance="full"`) against its ablation,
the slide: the full band is read whatever the budget left, so the first replicas above the
floor are bought at the P95 and the allowance alone stops them; the budget stays as strict."""

from __future__ import annotations

import math

import numpy as np
import pytest

from models.base import DAY
from scaler.decision import policy
from scaler.offline import replay
from tests.unit.test_replay import STEP, trace

SHARE = 0.05
"""A budget tight enough that the slide reads below the P95 on most steps."""


def test_the_slide_reads_the_median_as_the_budget_runs_out_and_full_reads_the_band() -> None:
    for left in np.linspace(0.1, 1.0, 10):
        slide = policy.affordable_quantile(0.95, remaining=left * 10, budget=10.0)
        full = policy.affordable_quantile(
            0.95, remaining=left * 10, budget=10.0, insurance=policy.FULL
        )
        linear = policy.affordable_quantile(
            0.95, remaining=left * 10, budget=10.0, insurance=policy.LINEAR
        )
        assert full == pytest.approx(0.95)
        assert linear == pytest.approx(policy.MEDIAN + 0.45 * left)
        assert linear <= slide + 1e-12
        assert policy.MEDIAN <= slide <= 0.95
        if left < policy.FULL_INSURANCE_LEFT:
            assert slide < 0.95
    for insurance in policy.INSURANCE:
        spent = policy.affordable_quantile(0.95, remaining=0.0, budget=10.0, insurance=insurance)
        assert spent == policy.MEDIAN


def test_full_insurance_without_a_known_budget_or_with_none_reads_the_median() -> None:
    for remaining, budget in ((math.nan, 10.0), (1.0, 0.0), (math.inf, math.inf)):
        read = policy.affordable_quantile(
            0.95, remaining=remaining, budget=budget, insurance=policy.FULL
        )
        assert read == policy.MEDIAN


def test_an_unknown_insurance_rule_is_refused_naming_the_rules() -> None:
    with pytest.raises(ValueError, match="slide, full, linear"):
        policy.affordable_quantile(0.95, remaining=1.0, budget=2.0, insurance="always")


@pytest.fixture(scope="module")
def both() -> tuple[replay.Replay, replay.Replay]:
    def run(insurance: str) -> replay.Replay:
        config = replay.ReplayConfig(threshold=40.0, budget_share=SHARE, insurance=insurance)
        return replay.replay(trace(), config)

    return run(policy.FULL), run(policy.SLIDE)


def test_full_insurance_spends_at_most_its_share_of_each_windows_reactive_hours(
    both: tuple[replay.Replay, replay.Replay],
) -> None:
    for result in both:
        frame = result.decisions
        assert 0 < result.summary["policy"]["prewarm"]["max_window_share"] <= SHARE + 1e-9
        hours = frame["prewarm_replica_hours"].to_numpy()
        used = frame["reactive"].to_numpy() * STEP / 3600.0
        day = int(DAY / STEP)
        for i in np.flatnonzero(hours > 0):
            window = slice(max(0, i - day + 1), i + 1)
            assert hours[window].sum() <= SHARE * used[window].sum() + 1e-9


def test_full_insurance_is_stopped_by_the_budget_where_the_slide_reads_a_lower_quantile(
    both: tuple[replay.Replay, replay.Replay],
) -> None:
    full, slide = (r.decisions for r in both)
    capped = "budget_capped"
    assert (full["reason"] == capped).sum() > (slide["reason"] == capped).sum()
    assert full["prewarm_replica_hours"].sum() >= slide["prewarm_replica_hours"].sum() - 1e-9
    for frame in (full, slide):
        assert frame["reason"].notna().all() and (frame["reason"] != "").all()
