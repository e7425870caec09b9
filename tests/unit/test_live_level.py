"""The live engine insures the held load at the forecast's band with the replay's rule
(policy.decide's level_load, reason level), paid from the same ledger."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

from models.base import DAY, Series
from scaler.clock import ManualClock
from scaler.decision import budget, policy
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.file import FileSource
from tests.unit.test_live_hold import NOW, SPEC, STEP


def decided(tmp_path: Path, *, ratio: float) -> tuple[TargetState, policy.Decision]:
    """One decision at NOW on a flat 200 (10 replicas), the forecast's peak at 190, with a band
    reaching `ratio` above its median."""
    path = tmp_path / "flat.csv"
    path.write_text("timestamp,value\n2026-01-01 00:00:00,1\n2026-01-01 00:05:00,1\n")
    clock = ManualClock(NOW)
    engine = Engine(
        settings=EngineSettings(step=STEP, model_step=300.0, fit_workers=0),
        source_for=lambda _spec: FileSource(path, clock=clock),
        clock=clock,
        telemetry=Telemetry(CollectorRegistry()),
    )
    state = engine.ensure(SPEC)
    state.history = Series(NOW - STEP * 19, STEP, np.full(20, 200.0))
    state.ledger = budget.Ledger(budget=24.0, window=DAY)
    state.ledger_known = True
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
