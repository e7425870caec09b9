"""The sliding insured peak (policy.insures_horizon, ReplayConfig.insure_horizon_while_comfortable)
against its two ablations: the default (the affordable quantile over the whole look-ahead) and
the insured peak (only the lead time at it, always). The horizon is insured while the budget
affords the full quantile, and only then."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from scaler.decision import policy
from scaler.offline import replay
from tests.contract import synthetic


def test_the_horizon_is_insured_while_the_budget_affords_the_full_quantile_and_not_after() -> None:
    for left in np.linspace(0.0, 1.0, 21):
        insures = policy.insures_horizon(remaining=left * 10, budget=10.0)
        read = policy.affordable_quantile(0.95, remaining=left * 10, budget=10.0)
        assert insures == (left >= policy.FULL_INSURANCE_LEFT)
        assert insures == (read == pytest.approx(0.95))


def test_each_insurance_rule_insures_the_horizon_while_it_reads_the_full_quantile() -> None:
    assert policy.insures_horizon(remaining=10.0, budget=10.0, insurance=policy.LINEAR)
    assert not policy.insures_horizon(remaining=9.9, budget=10.0, insurance=policy.LINEAR)
    assert policy.insures_horizon(remaining=0.1, budget=10.0, insurance=policy.FULL)
    assert not policy.insures_horizon(remaining=0.0, budget=10.0, insurance=policy.FULL)


def test_no_budget_or_an_unreadable_one_insures_no_horizon() -> None:
    for remaining, budget in ((5.0, 0.0), (math.nan, 10.0), (math.inf, math.inf)):
        assert not policy.insures_horizon(remaining=remaining, budget=budget)
    with pytest.raises(ValueError, match="slide, full, linear"):
        policy.insures_horizon(remaining=1.0, budget=2.0, insurance="always")


def runs(config: replay.ReplayConfig) -> dict[str, replay.Replay]:
    series = synthetic.ramps()
    return {
        "default": replay.replay(series, config),
        "insured": replay.replay(series, replace(config, insure_lead_time_only=True)),
        "sliding": replay.replay(series, replace(config, insure_horizon_while_comfortable=True)),
    }


def test_a_budget_that_never_slides_decides_as_the_default() -> None:
    ran = runs(replay.ReplayConfig(threshold=60.0, budget=1e9, drift=False))
    assert ran["sliding"].decisions.equals(ran["default"].decisions)


def test_a_budget_that_slides_at_times_insures_the_horizon_only_part_of_the_time() -> None:
    share = 1.0
    ran = runs(replay.ReplayConfig(threshold=60.0, budget=0.0, budget_share=share, drift=False))
    desired = {name: r.decisions["desired"].to_numpy() for name, r in ran.items()}
    assert (desired["sliding"] != desired["default"]).any()
    assert (desired["sliding"] != desired["insured"]).any()
    hours = {name: r.summary["policy"]["prewarm"]["replica_hours"] for name, r in ran.items()}
    assert hours["insured"] <= hours["sliding"] <= hours["default"]
    for result in ran.values():
        assert result.summary["policy"]["prewarm"]["max_window_share"] <= share + 1e-9
