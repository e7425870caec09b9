"""The live engine insures the held load at the forecast's band with the replay's rule
(policy.decide's level_load, reason level), paid from the same ledger."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from models.base import Series
from scaler.decision import policy
from scaler.serving.state import TargetState
from tests.unit.test_live_hold import NOW, STEP, ready_engine


def decided(tmp_path: Path, *, ratio: float) -> tuple[TargetState, policy.Decision]:
    """One decision at NOW on a flat 200 (10 replicas), the forecast's peak at 190, with a band
    reaching `ratio` above its median."""
    history = Series(NOW - STEP * 19, STEP, np.full(20, 200.0))
    engine, state = ready_engine(tmp_path, history, budget_hours=24.0)
    state.level_ratio = ratio
    engine._decide(state, now=NOW, load=200.0, peak=190.0, fallback=None)
    assert state.predictive is not None
    return state, state.predictive


def test_the_held_load_is_insured_at_the_band_and_charged(tmp_path: Path) -> None:
    state, decision = decided(tmp_path, ratio=1.3)
    assert (decision.reactive, decision.prewarm, decision.desired) == (10, 3, 13)
    assert decision.reason is policy.Reason.LEVEL
    assert abs(state.ledger.spent(NOW) - 3 * STEP / 3600) < 1e-9


def test_a_band_that_reaches_nothing_above_its_median_insures_nothing(tmp_path: Path) -> None:
    state, decision = decided(tmp_path, ratio=1.0)
    assert (decision.prewarm, decision.reason) == (0, policy.Reason.REACTIVE)
    assert state.ledger.spent(NOW) == 0.0
