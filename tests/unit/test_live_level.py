"""The live engine insures the held load at the forecast's band with the replay's rule
(policy.decide's level_load, reason level), paid from the same ledger, for a trigger with
`levelInsurance: "true"`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

from models import artefact
from models.base import DAY, Series
from scaler.clock import ManualClock
from scaler.decision import budget, policy, spec
from scaler.serving import forecaststep
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState, forecast_steps
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.file import FileSource
from tests.unit.test_live_hold import NOW, STEP, ready_engine


def decided(tmp_path: Path, *, ratio: float) -> tuple[TargetState, policy.Decision]:
    """One decision at NOW on a flat 200 (10 replicas), the forecast's peak at 190, with a band
    reaching `ratio` above its median."""
    history = Series(NOW - STEP * 19, STEP, np.full(20, 200.0))
    engine, state = ready_engine(tmp_path, history, budget_hours=24.0)
    state.level_ratio = ratio
    engine.booking.decide(state, now=NOW, load=200.0, peak=190.0, fallback=None)
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


MODEL_STEP = 300.0


def forecast_read(tmp_path: Path, meta: dict[str, str]) -> TargetState:
    """The engine's forecast step at NOW for a trigger with `meta`, on a seasonal model of three
    noisy days."""
    rng = np.random.default_rng(7)
    n = 3 * 288
    days = np.sin(np.arange(n) * 2 * np.pi / 288)
    values = 200.0 * (1.5 + days) * rng.lognormal(0.0, 0.2, n)
    history = Series(NOW - MODEL_STEP * (n - 1), MODEL_STEP, values)
    target = spec.parse("gpu", "llm", {"query": "x", "threshold": "20", **meta})
    path = tmp_path / "unused.csv"
    path.write_text("timestamp,value\n2026-01-01 00:00:00,1\n2026-01-01 00:05:00,1\n")
    clock = ManualClock(NOW)
    engine = Engine(
        settings=EngineSettings(step=STEP, model_step=MODEL_STEP, fit_workers=0),
        source_for=lambda _spec: FileSource(path, clock=clock),
        clock=clock,
        telemetry=Telemetry(CollectorRegistry()),
    )
    state = engine.ensure(target)
    state.history = history
    fitted = artefact.fit("seasonal", history, forecast_steps(target, MODEL_STEP))
    state.model = artefact.load(fitted)
    state.ledger = budget.Ledger(budget=24.0, window=DAY)
    state.ledger_known = True
    peak, fallback = forecaststep.forecast_peak(
        state, NOW, model_step=MODEL_STEP, telemetry=engine.telemetry
    )
    assert peak is not None and fallback is None
    return state


def test_the_triggers_level_insurance_key_turns_the_rule_on(tmp_path: Path) -> None:
    """`levelInsurance: "true"` reaches the decision: the band's reach above its median is
    read (above 1 on noisy load); without the key, or with "false", nothing is insured."""
    assert forecast_read(tmp_path, {}).level_ratio == 1.0
    assert forecast_read(tmp_path, {"levelInsurance": "false"}).level_ratio == 1.0
    insured = forecast_read(tmp_path, {"levelInsurance": "TRUE"}).level_ratio
    assert 1.0 < insured <= policy.MAX_LEVEL_RATIO
