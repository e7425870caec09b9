"""The drift state is rebuilt from the model and the series: an engine that has served since the
fit and one started now hold the same tracker and decide alike (scaler/serving/driftstate.py)."""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass

import numpy as np
from prometheus_client import CollectorRegistry

from models import artefact
from models.base import DAY, HOUR, Series
from scaler.clock import ManualClock
from scaler.decision import drift, drift_measure, drift_tracker, spec
from scaler.record.decisionlog import DecisionLog
from scaler.serving import driftstate
from scaler.serving.engine import Engine
from scaler.serving.state import TargetState, forecast_steps
from scaler.serving.telemetry import Telemetry
from scaler.settings import EngineSettings
from scaler.sources.base import Sample
from tests.contract import synthetic

STEP = 300.0
WINDOW = 14 * DAY
SPEC = spec.parse("gpu", "llm", {"query": "load", "threshold": "20", "model": "seasonal"})
FIT_AT = synthetic.START + 15 * DAY
JUMP_AT = FIT_AT + 2 * HOUR
END = FIT_AT + 6 * HOUR
"""Four hours into the new regime: in fallback until a long window (6 h) of it is settled."""


def series() -> Series:
    """Sixteen days of daily load; from JUMP_AT on, three times as much (a regime change)."""
    return shifted(JUMP_AT, 3.0)


def shifted(at: float, factor: float) -> Series:
    """Sixteen days of daily load, times `factor` from `at` on."""
    base = synthetic.load(16, seed=3)
    values = base.values.copy()
    values[base.times() >= at] *= factor
    return Series(base.start, base.step, values)


@dataclass
class SeriesSource:
    """The Source seam over one Series, showing nothing after the clock's now."""

    data: Series
    clock: ManualClock

    def history(
        self,
        spec: spec.TargetSpec,
        *,
        start: float,
        end: float,
        step: float,
        resolution: float | None = None,
    ) -> Series:
        known = self.data.until(min(end, self.clock.now()))
        return known.since(start)

    def latest(self, spec: spec.TargetSpec, *, at: float) -> Sample:
        known = self.data.until(min(at, self.clock.now()))
        return Sample(at=known.end, value=float(known.values[-1]))


def engine_with(
    source: object,
    clock: ManualClock,
    settings: EngineSettings,
    *,
    decision_log: DecisionLog | None = None,
) -> Engine:
    """An engine in this process over one Source (our seam), fitting nothing itself."""
    engine = Engine(
        settings=settings,
        source_for=lambda _spec: source,  # type: ignore[arg-type,return-value]
        clock=clock,
        telemetry=Telemetry(CollectorRegistry()),
        decision_log=decision_log,
    )
    engine.fitter.maybe_fit = lambda *_: None  # type: ignore[method-assign]  # models are set
    return engine


def engine_at(now: float, data: Series) -> tuple[Engine, TargetState, ManualClock]:
    clock = ManualClock(now)
    settings = EngineSettings(step=STEP, model_step=STEP, history=WINDOW, fit_workers=0)
    engine = engine_with(SeriesSource(data, clock), clock, settings)
    state = engine.ensure(SPEC)
    return engine, state, clock


def model_fitted_at_fit_time(data: Series) -> artefact.CalibratedModel:  # type: ignore[name-defined]
    known = data.until(FIT_AT).since(FIT_AT - WINDOW + STEP)
    return artefact.load(artefact.fit("seasonal", known, forecast_steps(SPEC, STEP)))


def test_an_engine_started_in_a_new_regime_decides_as_the_one_serving_since_the_fit() -> None:
    data = series()
    model = model_fitted_at_fit_time(data)
    live, live_state, clock = engine_at(FIT_AT, data)
    live_state.model = model
    fresh, fresh_state, _ = engine_at(END, data)
    fresh_state.model = model

    async def serve_since_the_fit() -> None:
        t = FIT_AT
        while t <= END:
            clock.t = t
            if t == END:  # the ledger a restart rebuilds from the spend record
                fresh_state.ledger = copy.deepcopy(live_state.ledger)
            live.ensure(SPEC)  # KEDA asks every step
            await live.tick(t)
            t += STEP

    asyncio.run(serve_since_the_fit())
    asyncio.run(fresh.tick(END))
    assert live_state.drift is not None and fresh_state.drift is not None
    a, b = live_state.drift.monitor, fresh_state.drift.monitor
    assert a.in_fallback
    assert (b.state, b.observations, list(b.short), list(b.long)) == (
        a.state,
        a.observations,
        list(a.short),
        list(a.long),
    )
    assert fresh_state.decision is not None
    assert fresh_state.decision == live_state.decision
    assert fresh_state.decision.reason.value in ("drift_fallback", "drift_margin")


def test_without_the_replay_a_restarted_tracker_would_trust_the_drifted_forecast() -> None:
    data = series()
    model = model_fitted_at_fit_time(data)
    known = data.until(END)
    rebuilt = driftstate.rebuild(SPEC, model, known, window=WINDOW)
    ablation = drift_tracker.DriftTracker(
        lead_time=SPEC.lead_time, monitor=drift.DriftMonitor(quantile=SPEC.quantile, step=STEP)
    )
    ablation.adopt(model, known)
    ablation.score(known)
    assert rebuilt.monitor.in_fallback
    assert not ablation.monitor.in_fallback


def test_a_model_fitted_in_fallback_starts_in_fallback_on_every_replica() -> None:
    data = series()
    model = model_fitted_at_fit_time(data)
    known = data.until(FIT_AT + HOUR)  # an hour of healthy forecasts since the fit
    carried = driftstate.rebuild(SPEC, model, known, window=WINDOW, carried_fallback=True)
    plain = driftstate.rebuild(SPEC, model, known, window=WINDOW)
    assert carried.monitor.in_fallback and not plain.monitor.in_fallback


def test_a_stored_null_is_used_only_for_the_lead_time_quantile_and_step_it_was_measured_for() -> (
    None
):
    data = series()
    model = model_fitted_at_fit_time(data)
    null = drift_measure.null_for(
        model, data.until(FIT_AT), lead_time=SPEC.lead_time, quantile=0.95
    )
    stored = driftstate.null_to_json(null, SPEC, STEP)
    assert driftstate.null_from_json(stored, SPEC, STEP) == null
    other = spec.parse("gpu", "llm", {"query": "load", "threshold": "20", "leadTime": "20m"})
    assert driftstate.null_from_json(stored, other, STEP) is None
    assert driftstate.null_from_json({**stored, "z": "nan"}, SPEC, STEP) is None
    assert driftstate.null_from_json({"means": [0]}, SPEC, STEP) is None
    assert np.isfinite(null.limits).all()
