"""The live engine decides with the replay's rule: the reactive floor is the HPA's 5 minutes of
load, and the rest of the lead time's highest load is held as prewarm paid from the ledger."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry

from models.base import DAY, Series
from scaler.clock import ManualClock
from scaler.decision import budget, policy, spec
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.file import FileSource

NOW = 1_800_000_000.0
STEP = 30.0
SPEC = spec.parse("gpu", "llm", {"query": "x", "threshold": "20", "leadTime": "10m"})


def ready_engine(
    tmp_path: Path, history: Series, *, budget_hours: float
) -> tuple[Engine, TargetState]:
    """An engine (file source, clock at NOW) whose SPEC target has `history` up to NOW and a
    known ledger of `budget_hours` a day: ready to decide."""
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
    state.history = history
    state.ledger = budget.Ledger(budget=budget_hours, window=DAY)
    state.ledger_known = True
    return engine, state


def decided(tmp_path: Path, *, budget_hours: float) -> tuple[TargetState, policy.Decision]:
    """One decision at NOW after 240 (12 replicas) until 5.5 minutes ago, then 100 (5 replicas)."""
    values = np.r_[np.full(9, 240.0), np.full(11, 100.0)]  # 30 s samples up to NOW
    history = Series(NOW - STEP * (values.size - 1), STEP, values)
    engine, state = ready_engine(tmp_path, history, budget_hours=budget_hours)
    engine.booking.decide(state, now=NOW, load=100.0, peak=None, fallback=None)
    assert state.predictive is not None
    return state, state.predictive


def test_the_lead_times_peak_is_held_past_the_hpa_window_and_charged(tmp_path: Path) -> None:
    state, decision = decided(tmp_path, budget_hours=24.0)
    assert (decision.reactive, decision.prewarm, decision.desired) == (5, 7, 12)
    assert decision.reason is policy.Reason.HOLD
    assert abs(state.ledger.spent(NOW) - 7 * STEP / 3600) < 1e-9


def test_without_budget_the_live_hold_is_not_kept(tmp_path: Path) -> None:
    state, decision = decided(tmp_path, budget_hours=0.0)
    assert (decision.reactive, decision.prewarm, decision.desired) == (5, 0, 5)
    assert state.ledger.spent(NOW) == 0.0
