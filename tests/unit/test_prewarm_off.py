"""`prewarmBudget: "0"` (or `maxPrewarmReplicas: "0"`) turns prewarm off: a user's choice, not
a cap reached, so its decisions say `prewarm_off`, never `budget_capped` (which reads as a budget
spent, every step of the day)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from models.base import HOUR, Series
from models.calibrate import CalibratedModel
from scaler.decision import policy, spec
from scaler.decision.policy import Limits, Reason
from scaler.offline.replay_config import ReplayConfig
from scaler.record import explain
from tests.unit.decision_records import decide, target
from tests.unit.test_drift_rebuild import (
    FIT_AT,
    STEP,
    engine_at,
    model_fitted_at_fit_time,
    shifted,
)


def wants_four(limits: Limits, allowance: int, **given: Any) -> policy.Decision:
    """A decision whose forecast wants 4 above reactive: at threshold 20, load 100 needs 5
    replicas, the forecast's 180 needs 9."""
    return policy.decide(
        load=100.0, forecast_peak=180.0, limits=limits, allowance=allowance, **given
    )


def test_a_budget_of_zero_is_prewarm_off_and_a_spent_budget_still_budget_capped() -> None:
    off = wants_four(Limits(threshold=20, no_budget=True), 0)
    spent = wants_four(Limits(threshold=20), 0)
    short = wants_four(Limits(threshold=20), 1)
    assert (off.reason, off.prewarm, off.desired) == (Reason.PREWARM_OFF, 0, 5)
    assert (spent.reason, spent.prewarm) == (Reason.BUDGET_CAPPED, 0)
    assert (short.reason, short.prewarm) == (Reason.BUDGET_CAPPED, 1)


def test_max_prewarm_replicas_of_zero_is_prewarm_off_too() -> None:
    off = wants_four(Limits(threshold=20, max_prewarm_replicas=0), 3)
    assert (off.reason, off.prewarm) == (Reason.PREWARM_OFF, 0)


def test_prewarm_off_leaves_a_forecast_that_needs_nothing_reactive_and_a_fallback_its_own() -> None:
    limits = Limits(threshold=20, no_budget=True)
    calm = policy.decide(load=100.0, forecast_peak=90.0, limits=limits, allowance=0)
    drifted = wants_four(limits, allowance=0, fallback=Reason.DRIFT_FALLBACK, held_load=200.0)
    capped = wants_four(Limits(threshold=20, max_replicas=4, no_budget=True), 0)
    assert calm.reason is Reason.REACTIVE
    assert drifted.reason is Reason.DRIFT_FALLBACK
    assert capped.reason is Reason.MAX_REPLICAS


def test_the_replay_reads_a_budget_of_zero_as_prewarm_off() -> None:
    assert ReplayConfig(threshold=20, budget=0.0).limits().prewarm_off
    assert not ReplayConfig(threshold=20, budget=0.0, budget_share=0.1).limits().prewarm_off
    assert not ReplayConfig(threshold=20, budget=24.0).limits().prewarm_off


def served(prewarm_budget: str, data: Series, model: CalibratedModel) -> list[tuple[Reason, int]]:
    """(reason, prewarm) of each 5-minute step of the engine serving the first 3 hours after
    the fit, for a target with that prewarmBudget."""
    meta = {"query": "load", "threshold": "20", "model": "seasonal"}
    target_spec = spec.parse("gpu", "llm", {**meta, "prewarmBudget": prewarm_budget})
    engine, _, clock = engine_at(FIT_AT, data)
    state = engine.ensure(target_spec)
    state.model = model
    seen = []

    async def serve() -> None:
        for t in np.arange(FIT_AT, FIT_AT + 3 * HOUR + 1, STEP):
            clock.t = float(t)
            engine.ensure(target_spec)  # KEDA asks every step
            await engine.tick(float(t))
            assert state.decision is not None
            seen.append((state.decision.reason, state.decision.prewarm))

    asyncio.run(serve())
    return seen


def test_the_engine_serving_prewarm_budget_zero_never_says_budget_capped() -> None:
    data = shifted(FIT_AT + 3 * HOUR, 3.0)
    model = model_fitted_at_fit_time(data)
    off, paid = served("0", data, model), served("24", data, model)
    bought = {i for i, (_, prewarm) in enumerate(paid) if prewarm > 0}
    turned_off = {i for i, (reason, _) in enumerate(off) if reason is Reason.PREWARM_OFF}
    assert turned_off and turned_off <= bought  # where the forecast wanted prewarm
    assert {reason for reason, _ in off} == {Reason.PREWARM_OFF, Reason.REACTIVE}
    assert {prewarm for _, prewarm in off} == {0}


def test_explain_names_the_key_that_turns_prewarm_off() -> None:
    budget_off, capped_off = (
        decide(target(**meta), at=FIT_AT, reactive=8, prewarm=0, reason=Reason.PREWARM_OFF)
        for meta in ({"prewarmBudget": "0"}, {"maxPrewarmReplicas": "0"})
    )
    assert "turns prewarm off (prewarmBudget 0): reactive only" in explain.why(budget_off)
    assert "(maxPrewarmReplicas 0)" in explain.why(capped_off)
